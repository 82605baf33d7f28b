//! What sap asks a language model and what it answers, independent of any provider:
//!
//! - [`types`]: descriptions of sap's types, as the runtime and the providers see them;
//! - [`schema`]: those types as JSON Schemas in a profile every provider accepts, with
//!   each provider's dialect ([`schema::target`]) and llama.cpp grammars
//!   ([`schema::gbnf`]);
//! - [`LlmRequest`], [`LlmResponse`] and the [`Provider`] trait every provider implements;
//! - [`limit`]: the adaptive concurrency limit of one endpoint;
//! - [`runaway`]: how a text that runs on is recognized and stopped.
//!
//! Nothing here knows a program's context or values: the runtime turns those into
//! requests, and the providers turn requests into wire calls.

#![forbid(unsafe_code)]

pub mod limit;
pub mod runaway;
pub mod schema;
pub mod types;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Value as JsonValue, json};

/// Where a model call stands in the program's own order (the runtime's `order` module
/// numbers them): compare lexicographically.
pub type Position = Vec<u32>;

/// How the runtime ends a Boolean condition's instruction; a provider that decodes under
/// a grammar may recognize the question by it.
pub const DECIDE_ASK: &str = ": true or false? Give one short sentence of reason, then the answer.";

/// One request: the fixed system preamble, the rendered context (the stable prefix a
/// provider can cache), the call-site instruction, and the schema of the answer.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmRequest {
    pub system: Arc<str>,
    pub context: String,
    pub instruction: String,
    pub schema_name: String,
    pub schema: Arc<JsonValue>,
    /// Earlier answers that did not validate, each with the correction sent back.
    pub corrections: Vec<Correction>,
    /// The output budget derived from the schema ([`crate::schema::output_budget`]),
    /// which providers send as `max_tokens` where a runaway answer is likely (local
    /// servers). Not part of the request's identity in transcripts.
    pub max_tokens: u32,
    /// The most one text of the answer may take ([`crate::schema::text_budget`]): a
    /// provider that reads the answer as it streams stops a text that runs on past it
    /// (see `runaway::Texts`), as it stops a repeating answer. Not part of the request's
    /// identity in transcripts.
    pub max_text_tokens: u32,
    /// Where the call stands in the program's order (see `order`): not sent to the
    /// model; transcripts are written in this order.
    pub order: crate::Position,
    /// The untrusted source the context holds data from, for the trace (known when
    /// tracing): not sent, not part of the request's identity.
    pub untrusted: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Correction {
    pub answer: String,
    pub message: String,
}

impl LlmRequest {
    /// The user turn: context, then instruction.
    pub fn user_text(&self) -> String {
        self.user_turn(&self.instruction)
    }

    /// The user turn with another wording of the call-site instruction.
    pub fn user_turn(&self, instruction: &str) -> String {
        if self.context.is_empty() {
            instruction.to_owned()
        } else {
            format!("{}\n{instruction}", self.context)
        }
    }

    /// The sampling seed of this request under `base`: derived from the call's place in
    /// the program's order and the number of corrections so far, so each call samples
    /// the same way in every run while two calls with the same prompt at different
    /// places (a loop the model decides, a re-ask) are still sampled apart. Within 31
    /// bits, which every server takes.
    pub fn seed(&self, base: u64) -> u64 {
        const PRIME: u64 = 0x0100_0000_01b3;
        let mut h = 0xcbf2_9ce4_8422_2325 ^ base;
        let words = self
            .order
            .iter()
            .copied()
            .chain([u32::MAX, self.corrections.len() as u32]);
        for word in words {
            for byte in word.to_le_bytes() {
                h = (h ^ u64::from(byte)).wrapping_mul(PRIME);
            }
        }
        (h ^ (h >> 31)) & 0x7fff_ffff
    }

    /// The request as data, for transcripts and traces. Equal requests have equal JSON.
    pub fn to_json(&self) -> JsonValue {
        let corrections: Vec<JsonValue> = self
            .corrections
            .iter()
            .map(|c| json!({ "answer": c.answer, "message": c.message }))
            .collect();
        json!({
            "system": &*self.system,
            "context": self.context,
            "instruction": self.instruction,
            "schema_name": self.schema_name,
            "schema": &*self.schema,
            "corrections": corrections,
        })
    }
}

/// The sampling a request asked for, as traced (`temperature 0, seed 1234`): `None` when
/// it asked for the server's defaults.
pub fn sampling_note(
    temperature: Option<f64>,
    seed_base: Option<u64>,
    request: &LlmRequest,
) -> Option<String> {
    let parts: Vec<String> = [
        temperature.map(|t| format!("temperature {t}")),
        seed_base.map(|base| format!("seed {}", request.seed(base))),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Finish {
    /// The model finished its answer.
    Stop,
    /// The answer was cut off at the token limit.
    Length,
    /// The model refused, with its explanation.
    Refusal(String),
    Other(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct LlmResponse {
    /// The answer as text (for tool-use providers, the tool input as JSON text).
    pub text: String,
    pub finish: Finish,
    pub usage: Usage,
    /// How many times the transport retried before this answer.
    pub retries: u32,
    /// How the provider asked for the answer's shape (`json_schema`, `json_object`,
    /// `tools`, `prompt`), when it has a choice.
    pub structured: Option<&'static str>,
    /// The sampling the request asked for (`temperature 0, seed 1`), or `None` when
    /// the server's defaults were used.
    pub sampling: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ProviderError {
    /// The server answered with an error status (after retries, for retryable ones).
    Http {
        status: u16,
        message: String,
        /// The request field the error names (OpenAI's `error.param`), if any.
        param: Option<String>,
        retries: u32,
    },
    /// No answer: connection refused or reset, after retries.
    Transport { message: String, retries: u32 },
    /// No answer in time.
    Timeout { message: String, retries: u32 },
    /// An answer that does not follow the protocol.
    Protocol(String),
    /// The replay transcript has no answer for this request.
    NotRecorded(String),
    /// The person answering could not be asked (no terminal, end of input).
    Interactive(String),
    /// The model in this process could not answer: the prompt does not fit its context,
    /// or its thread or a llama.cpp call failed (`--provider local`).
    Model(String),
}

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let retried = |n: &u32| {
            if *n > 0 {
                format!(" (after {n} retries)")
            } else {
                String::new()
            }
        };
        match self {
            ProviderError::Http {
                status,
                message,
                retries,
                ..
            } => {
                write!(
                    f,
                    "the provider answered HTTP {status}{}: {message}",
                    retried(retries)
                )
            }
            ProviderError::Transport { message, retries } => {
                write!(
                    f,
                    "could not reach the provider{}: {message}",
                    retried(retries)
                )
            }
            ProviderError::Timeout { message, retries } => {
                write!(
                    f,
                    "the provider did not answer in time{}: {message}",
                    retried(retries)
                )
            }
            ProviderError::Protocol(m) => {
                write!(f, "the provider's answer does not follow its protocol: {m}")
            }
            ProviderError::NotRecorded(m) => write!(f, "{m}"),
            ProviderError::Interactive(m) => write!(f, "{m}"),
            ProviderError::Model(m) => write!(f, "the local model: {m}"),
        }
    }
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A model behind some protocol.
pub trait Provider: Send + Sync {
    /// For traces and errors: `openai`, `anthropic`, `replay`, ….
    fn name(&self) -> &str;

    /// The model asked, for spans (`gen_ai.request.model`); empty when not known.
    fn model(&self) -> &str {
        ""
    }

    /// The adaptive concurrency limit of an HTTP provider (`--stats`, the trace).
    fn concurrency(&self) -> Option<crate::limit::LimitStats> {
        None
    }

    /// Whether calls are best made one at a time in the program's order: a provider
    /// that answers one call at a time anyway, and whose answers depend on the calls
    /// before it (the in-process model) or who should be asked in a sensible order (a
    /// person). A `parallel for`'s iterations then run one after another unless a
    /// concurrency is set.
    fn in_order(&self) -> bool {
        false
    }

    /// How long the provider took to become ready in this process (the in-process
    /// model's loading, `--stats`); `None` for one that only connects.
    fn load_time(&self) -> Option<std::time::Duration> {
        None
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(order: Vec<u32>, corrections: usize) -> LlmRequest {
        LlmRequest {
            system: "s".into(),
            context: String::new(),
            instruction: "i".into(),
            schema_name: "x".into(),
            schema: Arc::new(json!({})),
            corrections: vec![
                Correction {
                    answer: String::new(),
                    message: String::new(),
                };
                corrections
            ],
            max_tokens: 256,
            max_text_tokens: 256,
            order,
            untrusted: None,
        }
    }

    #[test]
    fn seeds_follow_the_place_in_the_program_and_the_base() {
        let a = at(vec![3], 0).seed(0);
        assert_eq!(a, at(vec![3], 0).seed(0), "the same call, the same seed");
        assert_ne!(a, at(vec![4], 0).seed(0), "the next call");
        assert_ne!(a, at(vec![3], 1).seed(0), "a re-ask");
        assert_ne!(a, at(vec![3, 0], 0).seed(0), "inside a fan-out");
        assert_ne!(a, at(vec![3], 0).seed(1), "another base");
        assert!(a < 1 << 31);
    }
}
