//! The sap runtime: what compiled programs call at run time.
//!
//! - [`value`] and [`types`]: values of every sap type, and descriptions of the types;
//! - [`context`]: the context as a stack of shared frames, and its byte-stable rendering;
//! - [`schema`]: JSON Schemas in a profile every provider accepts;
//! - [`call`]: the four kinds of LLM call, with repairs, validation, re-asks, budgets
//!   and tracing;
//! - [`provider`]: OpenAI-compatible Chat Completions, Anthropic Messages, record and
//!   replay transcripts, and a person at the terminal.
//!
//! Nothing here reads configuration files or the command line: `sapc` builds a
//! [`Runtime`] from flags, environment and `sap.toml`, and hands it to the program.

#![deny(unsafe_code)]

pub mod atom_plan;
pub mod budget;
pub mod call;
pub mod context;
pub mod error;
pub mod http;
pub mod lenient;
pub mod limit;
pub mod llm;
pub mod order;
pub mod provider;
pub mod repair;
pub mod runaway;
pub mod schema;
pub mod tasks;
pub mod telemetry;
pub mod tools;
pub mod trace;
pub mod types;
pub mod value;

pub use budget::{Budgets, RunStats};
pub use call::{Runtime, RuntimeConfig};
pub use context::Context;
pub use error::{CallSite, ErrorKind, RuntimeError};
pub use types::TypeDesc;
pub use value::Value;
