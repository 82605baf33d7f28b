//! The providers: each a client of one real wire protocol, behind [`llm::Provider`].
//! They see requests and answers only, never a program's context or values; the
//! in-process model is its own crate, `provider-local`.

#![forbid(unsafe_code)]

pub mod anthropic;
pub mod gemini;
pub mod interactive;
pub mod openai;
pub mod replay;
