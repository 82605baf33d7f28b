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

pub use convert::{Encoding, Text};
pub use server::{capabilities, run};

/// Serves over standard input and output until the client says `exit`.
pub fn run_stdio() -> Result<(), String> {
    let (connection, io_threads) = lsp_server::Connection::stdio();
    run(connection)?;
    io_threads.join().map_err(|e| e.to_string())
}
