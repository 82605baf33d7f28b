//! No code: this crate's dependencies carry the union of the features the workspace's
//! builds enable in the crates they share, so each of those is compiled once for all of
//! them (its Cargo.toml says why, ARCHITECTURE.md what it saved).

#![forbid(unsafe_code)]
