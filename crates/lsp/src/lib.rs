//! The sap language server: diagnostics as you type, hover with types and docs, go to
//! definition, completion, document symbols and signature help, over the same salsa
//! database as `sapc check`.
//!
//! Built on `lsp-server` (the crate rust-analyzer uses): a synchronous loop over a
//! channel of messages fits salsa's one-writer model — the loop thread owns the database
//! and writes to it, and workers read from clones that salsa cancels when the loop writes.

#![forbid(unsafe_code)]

mod convert;
pub mod ide;
mod server;
mod transport;

pub use convert::{Encoding, Text};
pub use server::{capabilities, run};

/// Serves over standard input and output until the client says `exit` or its input
/// ends; whether it asked for `shutdown` first.
pub fn run_stdio() -> Result<bool, String> {
    let (connection, threads) = transport::stdio();
    let shut_down = run(connection)?;
    threads.join()?;
    Ok(shut_down)
}
