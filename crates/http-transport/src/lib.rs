//! HTTP transport shared by the providers: warm connection pools, an adaptive
//! concurrency limit ([`llm::limit`]), connect and request timeouts, and retries with
//! exponential backoff and full jitter on 408, 409, 429, 5xx and connection errors,
//! honouring `retry-after-ms` and `retry-after`. Other 4xx answers are the caller's
//! mistake and are not retried.
//!
//! Plain `http://` servers are spoken to by sap's own HTTP/1.1 client ([`h1`]), which
//! holds a socket and nothing else while a call waits; HTTPS, and every address while a
//! proxy is set in the environment, by `reqwest` (rustls, HTTP/2 by ALPN, proxies).

#![forbid(unsafe_code)]

mod h1;
mod h1_hyper;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value as JsonValue;

use llm::ProviderError;
use llm::limit::{Limiter, Outcome, Permit};

#[derive(Clone, Debug)]
pub struct HttpConfig {
    pub connect_timeout: Duration,
    /// For the whole request, body included.
    pub request_timeout: Duration,
    pub max_retries: u32,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// The most requests in flight at once, per provider (`--concurrency`); `None`:
    /// adaptive from [`llm::limit::DEFAULT_START`] up to
    /// [`llm::limit::DEFAULT_CAP`].
    pub concurrency: Option<usize>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(300),
            max_retries: 4,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            concurrency: None,
        }
    }
}

pub struct HttpTransport {
    client: reqwest::Client,
    /// Idle connections to plain `http://` servers; `None` while a proxy is set.
    plain: Option<Plain>,
    pub config: HttpConfig,
    pub limiter: Limiter,
    jitter_state: AtomicU64,
}

/// A successful answer, body not yet read, and how many retries it took. It holds its
/// place under the concurrency limit until it is dropped, after its body is read.
pub struct Answer<'a> {
    pub response: Response,
    pub retries: u32,
    _place: Permit<'a>,
}

impl Answer<'_> {
    /// Reads the body as one JSON document: a body that cannot be read is a transport
    /// error (or a time-out), one that is not JSON breaks the protocol.
    pub async fn json(self) -> Result<serde_json::Value, ProviderError> {
        let retries = self.retries;
        let text = self
            .response
            .text()
            .await
            .map_err(|e| body_error(e, retries))?;
        serde_json::from_str(&text).map_err(|e| {
            ProviderError::Protocol(format!(
                "the body is not JSON ({e}): {}",
                text.chars().take(300).collect::<String>()
            ))
        })
    }
}

/// How long the rest of a released answer is waited for.
const RELEASE_WITHIN: Duration = Duration::from_secs(5);

/// The client for plain `http://` servers: ours, or (for measuring against it, with
/// `SAP_HTTP1_CLIENT=hyper`) hyper's.
#[derive(Clone)]
enum Plain {
    Ours(Arc<h1::Pool>),
    Hyper(Arc<h1_hyper::Pool>),
}

/// An answer from any client.
pub enum Response {
    Reqwest(reqwest::Response),
    Plain(h1::Response),
    Hyper(h1_hyper::Response),
}

impl Response {
    pub fn status(&self) -> StatusCode {
        match self {
            Response::Reqwest(r) => r.status(),
            Response::Plain(r) => r.status,
            Response::Hyper(r) => r.status,
        }
    }

    pub fn headers(&self) -> &HeaderMap {
        match self {
            Response::Reqwest(r) => r.headers(),
            Response::Plain(r) => &r.headers,
            Response::Hyper(r) => &r.headers,
        }
    }

    /// The next piece of the body; `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        match self {
            Response::Reqwest(r) => r.chunk().await.map_err(HttpError::from),
            Response::Plain(r) => r.body.chunk().await,
            Response::Hyper(r) => r.body.chunk().await,
        }
    }

    /// Lets go of an answer whose reader has what it needs before the body's end (a
    /// stream's `[DONE]`): the rest is read in the background, for at most
    /// [`RELEASE_WITHIN`], so that its connection can carry another request. Dropping
    /// the answer instead closes the connection, which stops the server's work on it.
    pub fn release(mut self) {
        let keepable = match &self {
            Response::Plain(r) => r.body.reusable(),
            Response::Hyper(r) => r.body.reusable(),
            Response::Reqwest(_) => true,
        };
        if !keepable || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        tokio::spawn(async move {
            let rest = async { while let Ok(Some(_)) = self.chunk().await {} };
            let _ = tokio::time::timeout(RELEASE_WITHIN, rest).await;
        });
    }

    /// The whole body as text (invalid UTF-8 replaced).
    pub async fn text(mut self) -> Result<String, HttpError> {
        if let Response::Reqwest(r) = self {
            return r.text().await.map_err(HttpError::from);
        }
        let mut bytes = Vec::new();
        while let Some(piece) = self.chunk().await? {
            bytes.extend_from_slice(&piece);
        }
        Ok(match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }
}

/// A request that got no answer, or whose answer could not be read.
#[derive(Debug)]
pub struct HttpError {
    pub kind: HttpErrorKind,
    pub message: String,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum HttpErrorKind {
    /// Nothing answered at the address.
    Connect,
    /// The request cannot be sent as it is: trying again would not help.
    Invalid,
    Timeout,
    Other,
}

impl From<reqwest::Error> for HttpError {
    fn from(e: reqwest::Error) -> HttpError {
        let kind = if e.is_timeout() {
            HttpErrorKind::Timeout
        } else if e.is_builder() {
            HttpErrorKind::Invalid
        } else if e.is_connect() {
            HttpErrorKind::Connect
        } else {
            HttpErrorKind::Other
        };
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        HttpError { kind, message }
    }
}

/// An error while reading a body whose status line already came.
pub fn body_error(e: HttpError, retries: u32) -> ProviderError {
    if e.kind == HttpErrorKind::Timeout {
        ProviderError::Timeout {
            message: e.message,
            retries,
        }
    } else {
        ProviderError::Transport {
            message: e.message,
            retries,
        }
    }
}

/// rustls needs a process-wide crypto provider; a second install is a no-op.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl HttpTransport {
    pub fn new(config: HttpConfig) -> Result<HttpTransport, ProviderError> {
        install_crypto();
        // A connection kept for every request the limit lets out at once.
        let max_idle = config.concurrency.unwrap_or(llm::limit::DEFAULT_CAP).max(1);
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .pool_max_idle_per_host(max_idle)
            .build()
            .map_err(|e| ProviderError::Transport {
                message: format!("cannot build the HTTP client: {e}"),
                retries: 0,
            })?;
        // With a proxy set, reqwest's proxy rules decide where a plain request goes.
        let proxied = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
            .iter()
            .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
        let plain = (!proxied).then(|| {
            if std::env::var_os("SAP_HTTP1_CLIENT").is_some_and(|v| v == "hyper") {
                Plain::Hyper(h1_hyper::Pool::new(max_idle))
            } else {
                Plain::Ours(h1::Pool::new(max_idle))
            }
        });
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9e37_79b9, |d| d.as_nanos() as u64)
            | 1;
        Ok(HttpTransport {
            client,
            plain,
            limiter: Limiter::new(config.concurrency),
            config,
            jitter_state: AtomicU64::new(seed),
        })
    }

    /// POSTs `body` as JSON, retrying what can be retried. The body is serialized once
    /// and the tree dropped: while the request is in flight only its bytes are held,
    /// shared by every attempt.
    pub async fn post_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: JsonValue,
    ) -> Result<Answer<'_>, ProviderError> {
        // A streamed answer's headers come when it starts: their time is the server's
        // queue, which the limit watches.
        let streamed = body.get("stream").and_then(JsonValue::as_bool) == Some(true);
        let body = Bytes::from(body.to_string());
        let plain = self
            .plain
            .clone()
            .and_then(|pool| Some((pool, h1::Target::parse(url)?)));
        let mut retries = 0;
        loop {
            // A place under the limit for each attempt; none is held while backing off.
            let mut permit = self.limiter.acquire().await;
            let sent = Instant::now();
            let wait = match self.send(plain.as_ref(), url, headers, &body).await {
                Ok(response) if response.status().is_success() => {
                    permit.record(Outcome::Answered {
                        latency: sent.elapsed(),
                        first_byte: streamed,
                    });
                    return Ok(Answer {
                        response,
                        retries,
                        _place: permit,
                    });
                }
                Ok(response) => {
                    let status = response.status().as_u16();
                    permit.finish(if matches!(status, 429 | 503) {
                        Outcome::Overloaded
                    } else {
                        Outcome::Other
                    });
                    let hint = retry_after(response.headers());
                    let (message, param) = error_message(response).await;
                    // A server error that names the shape of the request (its
                    // `response_format`, schema, tools, grammar) will come again for the
                    // same request: it is not retried, so the caller can change it.
                    // 501 (not implemented) and 505 will not change on a second try.
                    let retryable = matches!(status, 408 | 409 | 429)
                        || (status >= 500
                            && !matches!(status, 501 | 505)
                            && !names_request_shape(&message, param.as_deref()));
                    if !retryable || retries >= self.config.max_retries {
                        return Err(ProviderError::Http {
                            status,
                            message,
                            param,
                            retries,
                        });
                    }
                    // `retry-after: 0` says nothing: a burst of refused requests all
                    // retrying at once would be refused again, so it backs off.
                    hint.filter(|d| !d.is_zero())
                        .unwrap_or_else(|| self.backoff(retries))
                }
                Err(e) => {
                    let timed_out = e.kind == HttpErrorKind::Timeout;
                    permit.finish(if timed_out {
                        Outcome::Overloaded
                    } else {
                        Outcome::Other
                    });
                    let message = if e.kind == HttpErrorKind::Connect {
                        format!(
                            "nothing answered at {url} (is the server running, and is the base URL right? `--base-url` or the provider's `*_BASE_URL` sets it): {}",
                            e.message
                        )
                    } else {
                        e.message
                    };
                    // A request that timed out is tried once more, not `max_retries`
                    // times: a server that never answers must not hold the run for
                    // five time-outs.
                    if retries >= self.config.max_retries
                        || (timed_out && retries >= 1)
                        || e.kind == HttpErrorKind::Invalid
                    {
                        return Err(if timed_out {
                            ProviderError::Timeout { message, retries }
                        } else {
                            ProviderError::Transport { message, retries }
                        });
                    }
                    self.backoff(retries)
                }
            };
            tokio::time::sleep(wait.min(self.config.backoff_max)).await;
            retries += 1;
        }
    }

    /// One attempt: the request's head and body sent, the answer's head read.
    async fn send(
        &self,
        plain: Option<&(Plain, h1::Target)>,
        url: &str,
        headers: &[(&str, String)],
        body: &Bytes,
    ) -> Result<Response, HttpError> {
        let (connect, request) = (self.config.connect_timeout, self.config.request_timeout);
        match plain {
            Some((Plain::Ours(pool), target)) => {
                return pool
                    .post_json(target, headers, body, connect, request)
                    .await
                    .map(Response::Plain);
            }
            Some((Plain::Hyper(pool), target)) => {
                return pool
                    .post_json(target, headers, body, connect, request)
                    .await
                    .map(Response::Hyper);
            }
            None => {}
        }
        let mut request = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .body(body.clone());
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        Ok(Response::Reqwest(request.send().await?))
    }

    /// Exponential backoff with full jitter: uniform in `[0, min(max, base · 2^n)]`.
    fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self
            .config
            .backoff_base
            .saturating_mul(1 << attempt.min(16))
            .min(self.config.backoff_max);
        // xorshift64: jitter needs no cryptographic randomness.
        let mut x = self.jitter_state.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.jitter_state.store(x, Ordering::Relaxed);
        let fraction = (x >> 11) as f64 / (1u64 << 53) as f64;
        ceiling.mul_f64(fraction)
    }
}

/// `retry-after-ms` (milliseconds, OpenAI) or `retry-after` (seconds).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let read = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    if let Some(ms) = read("retry-after-ms").filter(|ms| ms.is_finite() && *ms >= 0.0) {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    read("retry-after")
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// The error message of a provider's error body: `{"error": {"message": …}}` in both
/// OpenAI's and Anthropic's protocols, else the text; and the request field the error
/// names (OpenAI's `{"error": {"param": "response_format"}}`), if any.
async fn error_message(response: Response) -> (String, Option<String>) {
    let text = response.text().await.unwrap_or_default();
    error_body(text)
}

fn error_body(text: String) -> (String, Option<String>) {
    match serde_json::from_str::<JsonValue>(&text) {
        Ok(json) => {
            let param = json
                .pointer("/error/param")
                .and_then(JsonValue::as_str)
                .filter(|p| !p.is_empty())
                .map(str::to_owned);
            let message = json
                .pointer("/error/message")
                .or_else(|| json.get("error"))
                .or_else(|| json.get("message"))
                .and_then(|m| {
                    m.as_str()
                        .map(str::to_owned)
                        .or_else(|| Some(m.to_string()))
                })
                .unwrap_or(text);
            (message, param)
        }
        Err(_) if looks_like_html(&text) => {
            let title = text
                .find("<title>")
                .and_then(|at| {
                    let rest = &text[at + 7..];
                    rest.find("</title>")
                        .map(|end| rest[..end].trim().to_owned())
                })
                .filter(|t| !t.is_empty());
            let message = format!(
                "an HTML page{} instead of an API answer: is the base URL the API's address (usually ending in `/v1`)?",
                title.map_or(String::new(), |t| format!(" (\"{t}\")"))
            );
            (message, None)
        }
        Err(_) => (text.chars().take(500).collect(), None),
    }
}

fn looks_like_html(text: &str) -> bool {
    let start = text.trim_start().to_ascii_lowercase();
    start.starts_with("<!doctype html") || start.starts_with("<html")
}

/// Whether an error is about how the request asked for the answer's shape: a server
/// that cannot do `response_format`, a schema, tools or a grammar says so in its
/// message, or names the field in the error's `param`, or names the form itself
/// (`json_object is not supported`).
pub fn names_request_shape(message: &str, param: Option<&str>) -> bool {
    const SHAPE_WORDS: [&str; 8] = [
        "response_format",
        "json_schema",
        "json_object",
        "schema",
        "grammar",
        "tool_choice",
        "tools",
        "functions",
    ];
    let m = message.to_ascii_lowercase();
    let p = param.unwrap_or_default().to_ascii_lowercase();
    SHAPE_WORDS
        .iter()
        .any(|w| m.contains(w) || p.split(['.', '[']).next() == Some(*w))
}
