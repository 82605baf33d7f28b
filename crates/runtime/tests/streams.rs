//! Streamed answers the server cuts short — an early `[DONE]`, a connection closed in
//! the middle of the body, a server that serves one request at a time — against
//! in-process servers.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use llm::types::TypeDesc;
use providers::openai::OpenAiProvider;
use runtime::{Context, Value};
use serde_json::json;
use test_support::http::{MockServer, Reply};

/// A stream that ends with `[DONE]` before any finish reason: cut short.
fn cut_stream() -> Reply {
    Reply::Events {
        events: vec![
            json!({ "choices": [{ "index": 0, "delta": { "role": "assistant" } }] }).to_string(),
            "[DONE]".to_owned(),
        ],
        delay: Duration::ZERO,
    }
}

/// A stream cut before the answer finished (no finish reason, though `[DONE]` may follow,
/// as llama-cpp-python's server does when another request arrives) is asked again
/// unstreamed, and the run stops streaming to that server.
#[tokio::test]
async fn a_cut_stream_is_asked_again_unstreamed() {
    let server = MockServer::start(|request, _| {
        if request.json()["stream"] == true {
            return cut_stream();
        }
        Reply::json(completion(r#"{"value": "whole"}"#))
    })
    .await;
    let rt = runtime(Arc::new(
        OpenAiProvider::new(openai_config(&server, true)).unwrap(),
    ));
    for _ in 0..2 {
        let value = rt
            .produce(&site("f"), &Context::new(), "f", &TypeDesc::String)
            .await
            .unwrap();
        assert_eq!(value, Value::str("whole"));
    }
    let streamed: Vec<bool> = server
        .requests()
        .iter()
        .map(|r| r.json()["stream"] == true)
        .collect();
    assert_eq!(streamed, vec![true, false, false]);
}

/// A stream whose connection closes in the middle of its chunked body (a server that
/// drops the answer it was writing) was cut, like one ended early by `[DONE]`: with
/// nothing else in flight it is asked again unstreamed, and answered.
#[tokio::test]
async fn a_connection_closed_mid_stream_is_a_cut() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let streamed = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = streamed.clone();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let seen = seen.clone();
            tokio::spawn(async move {
                // The whole request: its head, then as many body bytes as it says.
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = socket.read(&mut buf).await.unwrap();
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length: usize = text[..end]
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse().ok())?
                            })
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let text = String::from_utf8_lossy(&request).to_string();
                let stream = text.contains("\"stream\":true");
                seen.lock().unwrap().push(stream);
                if stream {
                    let event = format!(
                        "data: {}\n\n",
                        json!({ "choices": [{ "index": 0, "delta": { "content": "{\"val" } }] })
                    );
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                    let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                    let _ = socket.write_all(format!("{head}{chunk}").as_bytes()).await;
                    // Closed with the body unfinished: no last chunk.
                    return;
                }
                let body = completion(r#"{"value": "whole"}"#).to_string();
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
            });
        }
    });
    let config = providers::openai::OpenAiConfig {
        api_key: Some(API_KEY.to_owned()),
        stream: true,
        http: http_config(),
        ..providers::openai::OpenAiConfig::new(format!("http://{addr}/v1"), "test-model")
    };
    let rt = runtime(Arc::new(OpenAiProvider::new(config).unwrap()));
    let value = rt
        .produce(&site("f"), &Context::new(), "f", &TypeDesc::String)
        .await
        .unwrap();
    assert_eq!(value, Value::str("whole"));
    assert_eq!(*streamed.lock().unwrap(), vec![true, false]);
}

/// A server that serves one request at a time and cuts the stream of a request that
/// comes while it is busy (as llama-cpp-python's does to the answer it was writing):
/// the client sends one request at a time from then on, still streamed (so the runaway
/// stop keeps working), and every call is answered.
#[tokio::test]
async fn a_server_that_cuts_streams_under_concurrency_gets_one_request_at_a_time() {
    let busy_until = Arc::new(std::sync::Mutex::new(Instant::now()));
    let server = MockServer::start(move |request, _| {
        assert_eq!(request.json()["stream"], true, "asked unstreamed");
        let now = Instant::now();
        let mut busy = busy_until.lock().unwrap();
        if now < *busy {
            return cut_stream();
        }
        *busy = now + Duration::from_millis(150);
        Reply::Events {
            events: vec![
                json!({ "choices": [{ "index": 0, "delta": { "content": "{\"value\": \"whole\"}" } }] })
                    .to_string(),
                json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "stop" }] })
                    .to_string(),
                "[DONE]".to_owned(),
            ],
            delay: Duration::from_millis(150),
        }
    })
    .await;
    let rt = runtime(Arc::new(
        OpenAiProvider::new(openai_config(&server, true)).unwrap(),
    ));
    let (site, context) = (site("f"), Context::new());
    let ask = || rt.produce(&site, &context, "f", &TypeDesc::String);
    let (a, b, c) = tokio::join!(ask(), ask(), ask());
    for answer in [a, b, c] {
        assert_eq!(answer.unwrap(), Value::str("whole"));
    }
    // Three answered, and the two cut sent again: no request more, none unstreamed.
    assert_eq!(server.requests().len(), 5);
    let later = ask().await.unwrap();
    assert_eq!(later, Value::str("whole"));
}
