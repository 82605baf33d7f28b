//! HIR → IR: a control-flow graph of typed instructions per function, in which
//! deterministic operations and LLM call sites are distinct instructions, each with the
//! source span of what can fail. The IR is serializable (`sapc build` caches it) and has
//! a readable printed form ([`print::module`]).

#![forbid(unsafe_code)]

mod cleanup;
pub mod ir;
mod lower;
pub mod print;

pub use lower::lower_workspace;
