//! The providers: each a client of one real wire protocol.

pub mod anthropic;
pub mod gemini;
pub mod interactive;
pub mod openai;
pub mod replay;
