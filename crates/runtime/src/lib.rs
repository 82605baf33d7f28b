//! The sap runtime: what compiled programs call at run time.
//!
//! - [`value`]: values of every sap type (their types are described in `llm::types`);
//! - [`context`]: the context as a stack of shared frames, and its byte-stable rendering;
//! - [`call`]: the four kinds of LLM call, with repairs, validation, re-asks, budgets
//!   and tracing;
//! - [`observe`]: what a front end is told while a run goes on (tool and model calls,
//!   plans), and how it cancels one;
//!
//! Nothing here reads configuration files or the command line: `sapc` builds a
//! [`Runtime`] from flags, environment and `sap.toml`, and hands it to the program.

#![deny(unsafe_code)]

pub mod atom_plan;
pub mod budget;
pub mod call;
pub mod context;
pub mod durable;
pub mod error;
pub mod lenient;
pub mod observe;
pub mod order;
pub mod repair;
pub mod tasks;
pub mod telemetry;
pub mod trace;
pub mod value;

pub use budget::{Budgets, RunStats};
pub use call::{Runtime, RuntimeConfig};
pub use context::Context;
pub use error::{CallSite, ErrorKind, RuntimeError};
pub use llm::types::TypeDesc;
pub use value::Value;
