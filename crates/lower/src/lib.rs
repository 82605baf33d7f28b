//! HIR → IR (the `ir` crate): a control-flow graph of typed instructions per function,
//! in which deterministic operations and LLM call sites are distinct instructions, each
//! with the source span of what can fail.

#![forbid(unsafe_code)]

mod cleanup;
mod lower;

pub use lower::{lower_tests, lower_workspace, lower_workspace_ignoring};
