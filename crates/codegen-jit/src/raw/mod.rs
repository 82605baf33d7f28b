//! Everything in the crate that Rust cannot check — the one module where `unsafe` is
//! allowed (the crate root denies it everywhere else):
//!
//! - `heap`: heap objects, native lists and the words compiled code passes, with the
//!   crate's safety contract (layout, ownership, who frees, what compiled code may
//!   assume) at its top;
//! - `code`: calling a compiled function through its trampoline;
//! - `image`: compiled code in executable memory, copied or mapped from a cache file;
//! - `alloc`: the allocator of processes that run programs (mimalloc for small blocks,
//!   the system's for large ones, which it grows without copying).

pub mod alloc;
pub mod code;
pub mod heap;
pub mod image;
