//! The providers: each a client of one real wire protocol.

pub mod anthropic;
pub mod gemini;
pub mod interactive;
#[cfg(feature = "local")]
pub mod local;
pub mod openai;
pub mod replay;
