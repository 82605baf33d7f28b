//! Shared helpers for the runtime's protocol tests.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_transport::HttpConfig;
use llm::Provider;
use llm::types::{EnumDesc, FieldDesc, StructDesc, TypeDesc, VariantDesc};
use providers::openai::{OpenAiConfig, OpenAiProvider};
use runtime::{CallSite, Runtime, RuntimeConfig};
use serde_json::{Value as JsonValue, json};
use test_support::http::MockServer;

pub const API_KEY: &str = "sk-test-0123456789abcdef";

pub fn snapshots() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots")
}

/// Fast retries so fault tests take milliseconds.
pub fn http_config() -> HttpConfig {
    HttpConfig {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        max_retries: 3,
        backoff_base: Duration::from_millis(5),
        backoff_max: Duration::from_millis(50),
        concurrency: Some(8),
    }
}

pub fn openai_config(server: &MockServer, stream: bool) -> OpenAiConfig {
    OpenAiConfig {
        api_key: Some(API_KEY.to_owned()),
        stream,
        http: http_config(),
        ..OpenAiConfig::new(format!("{}/v1", server.url()), "test-model")
    }
}

pub fn openai(server: &MockServer) -> Arc<dyn Provider> {
    Arc::new(OpenAiProvider::new(openai_config(server, false)).unwrap())
}

pub fn runtime(provider: Arc<dyn Provider>) -> Runtime {
    Runtime::new(provider, RuntimeConfig::default())
}

pub fn site(function: &str) -> CallSite {
    CallSite {
        function: function.to_owned(),
        file: "agent.sap".to_owned(),
        line: 12,
        column: 5,
        span: (200, 230),
        path: vec![function.to_owned()],
    }
}

/// A `chat.completion` answering `content`.
pub fn completion(content: &str) -> JsonValue {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": content }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 120, "completion_tokens": 15, "prompt_tokens_details": { "cached_tokens": 64 } },
    })
}

pub fn severity() -> TypeDesc {
    TypeDesc::Enum(Arc::new(EnumDesc {
        name: "Severity".to_owned(),
        doc: Some("How bad the worst bug is.".to_owned()),
        variants: ["Low", "Medium", "High"]
            .iter()
            .map(|v| VariantDesc {
                name: (*v).to_owned(),
                doc: None,
            })
            .collect(),
    }))
}

/// The seed's `struct Analysis { bugs: List<String>, severity: Severity }`.
pub fn analysis() -> TypeDesc {
    TypeDesc::Struct(Arc::new(StructDesc {
        name: "Analysis".to_owned(),
        doc: Some("What the model found in the code.".to_owned()),
        fields: vec![
            FieldDesc {
                name: "bugs".to_owned(),
                doc: Some("One sentence per bug found.".to_owned()),
                ty: TypeDesc::List(Box::new(TypeDesc::String)),
            },
            FieldDesc {
                name: "severity".to_owned(),
                doc: None,
                ty: severity(),
            },
        ],
    }))
}

/// A `Write` whose bytes a test can read afterwards.
#[derive(Clone, Default)]
pub struct SharedBuffer(pub Arc<Mutex<Vec<u8>>>);

impl std::io::Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedBuffer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
