//! The HTTP/1.1 client for model servers at plain `http://` addresses (a local
//! llama.cpp, vLLM or Ollama, and the thousands of calls a `parallel for` keeps in
//! flight), on hyper's low-level connection API (`hyper::client::conn::http1`).
//!
//! Over HTTP/1.1 every call in flight holds a connection of its own, so what a
//! connection costs while it waits is what a fan-out costs. reqwest's pool cannot size
//! hyper's buffers; here each connection is made with hyper's own builder, its read
//! buffer adaptive from 8 KB up to the largest head we accept. Measured side by side
//! with the client we wrote before (docs/PERFORMANCE.md, "HTTP/1.1: our client or
//! hyper's"): the same times, and less than 64 KB per call in flight, so the parser of
//! untrusted bytes is hyper's, not ours.
//!
//! HTTPS, and every address while a proxy is set in the environment, stay with reqwest
//! (rustls, HTTP/2 by ALPN, the proxy rules): see [`super::HttpTransport`].
//!
//! What this adds to hyper: the pool (idle connections per host, most recently used
//! first, checked before reuse, at most `max_idle`, dropped after 90 s), one deadline for
//! connecting, sending and reading the whole body, headers with a line break refused
//! without echoing their value, and a request on a reused connection that the server had
//! closed (nothing of an answer came) sent once more on a new connection, as browsers do.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{Builder, SendRequest};
use hyper_util::rt::TokioIo;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use tokio::net::TcpStream;

use super::{HttpError, HttpErrorKind};

/// The most an answer's status line and headers may take.
const MAX_HEAD: usize = 64 * 1024;
/// The most headers an answer may have.
const MAX_HEADERS: usize = 128;
/// How long an idle connection is kept (reqwest's default).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a connection whose answer has been read may take to be ready for the next
/// request before it is dropped instead.
const READY_WITHIN: Duration = Duration::from_secs(1);

type Sender = SendRequest<Full<Bytes>>;

/// Where a request goes, from a plain `http://` URL.
pub struct Target {
    /// The URL, for messages.
    url: String,
    /// The host to connect to (an IPv6 address without its brackets).
    host: String,
    port: u16,
    /// The `host` header, and the pool's key.
    authority: String,
    /// The path and query of the request line.
    path: String,
}

impl Target {
    /// `None` unless `url` is a plain `http://` URL without credentials (reqwest sends
    /// those as basic authentication).
    pub fn parse(url: &str) -> Option<Target> {
        let parsed = reqwest::Url::parse(url).ok()?;
        if parsed.scheme() != "http" || !parsed.username().is_empty() || parsed.password().is_some()
        {
            return None;
        }
        let host_str = parsed.host_str()?;
        let port = parsed.port_or_known_default()?;
        let authority = match parsed.port() {
            Some(port) => format!("{host_str}:{port}"),
            None => host_str.to_owned(),
        };
        let mut path = parsed.path().to_owned();
        if let Some(query) = parsed.query() {
            path.push('?');
            path.push_str(query);
        }
        Some(Target {
            url: url.to_owned(),
            host: host_str
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port,
            authority,
            path,
        })
    }
}

/// Idle connections, by host, oldest at the front: the most recently used go out first,
/// the oldest are dropped first.
pub struct Pool {
    idle: Mutex<HashMap<String, VecDeque<Idle>>>,
    /// The most idle connections kept per host.
    max_idle: usize,
}

struct Idle {
    sender: Sender,
    since: Instant,
}

impl Pool {
    pub fn new(max_idle: usize) -> Arc<Pool> {
        Arc::new(Pool {
            idle: Mutex::new(HashMap::new()),
            max_idle,
        })
    }

    /// An idle connection to `authority` that the server has not closed.
    fn checkout(&self, authority: &str) -> Option<Sender> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let kept = idle.get_mut(authority)?;
        while let Some(connection) = kept.pop_back() {
            if connection.since.elapsed() < IDLE_TIMEOUT && !connection.sender.is_closed() {
                return Some(connection.sender);
            }
        }
        None
    }

    fn checkin(&self, authority: &str, sender: Sender) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let kept = match idle.get_mut(authority) {
            Some(kept) => kept,
            None => idle.entry(authority.to_owned()).or_default(),
        };
        // The oldest go first: expired ones, then one to make room. (Checked in in
        // time order, so the front is always the oldest: this is O(1) per call.)
        while kept
            .front()
            .is_some_and(|c| c.since.elapsed() >= IDLE_TIMEOUT)
        {
            kept.pop_front();
        }
        if kept.len() >= self.max_idle {
            kept.pop_front();
        }
        if self.max_idle > 0 {
            kept.push_back(Idle {
                sender,
                since: Instant::now(),
            });
        }
    }

    /// How many connections are idle.
    #[cfg(test)]
    fn idle(&self) -> usize {
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(VecDeque::len)
            .sum()
    }

    /// Sends a POST of the JSON `body` to `target` and reads the answer's head; the body
    /// is read from the [`Response`]. Everything, connecting and the body included, ends
    /// within `timeout`.
    pub async fn post_json(
        self: &Arc<Self>,
        target: &Target,
        headers: &[(&str, String)],
        body: &Bytes,
        connect_timeout: Duration,
        timeout: Duration,
    ) -> Result<Response, HttpError> {
        // A value with a line break would end the head early (an API key read with its
        // newline): refused, as reqwest refuses it, and without the value, a secret.
        let unsafe_byte = |text: &str| text.bytes().any(|b| b.is_ascii_control() && b != b'\t');
        if let Some((name, _)) = headers
            .iter()
            .find(|(n, v)| unsafe_byte(n) || unsafe_byte(v))
        {
            return Err(HttpError {
                kind: HttpErrorKind::Invalid,
                message: format!(
                    "{}: the `{}` header has a line break or another control character in it",
                    target.url,
                    name.escape_debug()
                ),
            });
        }
        let deadline = Instant::now() + timeout;
        let exchange = async {
            let mut reused = self.checkout(&target.authority);
            loop {
                let was_reused = reused.is_some();
                let mut sender = match reused.take() {
                    Some(sender) => sender,
                    None => handshake(target, connect_timeout, deadline).await?,
                };
                let request = request(target, headers, body)?;
                let sent = match sender.ready().await {
                    Ok(()) => sender.send_request(request).await,
                    Err(e) => Err(e),
                };
                match sent {
                    Ok(answer) => return Ok((sender, answer)),
                    // The server closed the connection before it answered: on a reused
                    // connection, before it saw the request, so it is sent again.
                    Err(e) if e.is_closed() || e.is_incomplete_message() => {
                        if was_reused {
                            continue;
                        }
                        return Err(HttpError {
                            kind: HttpErrorKind::Other,
                            message: format!(
                                "{}: the connection closed before an answer came: {e}",
                                target.url
                            ),
                        });
                    }
                    Err(e) => return Err(failed(&target.url, &e)),
                }
            }
        };
        let (sender, answer) = tokio::time::timeout_at(deadline.into(), exchange)
            .await
            .map_err(|_| HttpError {
                kind: HttpErrorKind::Timeout,
                message: format!(
                    "{}: no answer within {} s (the request timed out)",
                    target.url,
                    timeout.as_secs_f64()
                ),
            })??;
        let (head, incoming) = answer.into_parts();
        // An answer framed both by length and as chunks may be a smuggling attempt
        // (RFC 9112, 6.3): read as chunks, as hyper does, and its connection not kept.
        let ambiguous = head.headers.contains_key("transfer-encoding")
            && head.headers.contains_key("content-length");
        Ok(Response {
            status: head.status,
            headers: head.headers,
            body: Body {
                incoming,
                sender: (!ambiguous).then_some(sender),
                pool: self.clone(),
                authority: target.authority.clone(),
                url: target.url.clone(),
                deadline,
                timeout,
            },
        })
    }
}

/// The request: a POST of JSON, with `host`, `accept` and the caller's headers.
fn request(
    target: &Target,
    headers: &[(&str, String)],
    body: &Bytes,
) -> Result<hyper::Request<Full<Bytes>>, HttpError> {
    let mut request = hyper::Request::post(target.path.as_str())
        .header("host", target.authority.as_str())
        .header("accept", "*/*")
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, value.as_str());
    }
    request
        .body(Full::new(body.clone()))
        .map_err(|e| HttpError {
            kind: HttpErrorKind::Invalid,
            message: format!("{}: {e}", target.url),
        })
}

/// A new connection, its hyper connection task started.
async fn handshake(
    target: &Target,
    connect_timeout: Duration,
    deadline: Instant,
) -> Result<Sender, HttpError> {
    let stream = connect(target, connect_timeout, deadline).await?;
    let (sender, connection) = Builder::new()
        .max_buf_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| failed(&target.url, &e))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// hyper's error, with what caused it.
fn failed(url: &str, e: &hyper::Error) -> HttpError {
    let mut message = if e.is_parse() && e.to_string().contains("too large") {
        format!(
            "{url}: the answer's head is over {} KB or has more than {MAX_HEADERS} headers: {e}",
            MAX_HEAD / 1024
        )
    } else {
        format!("{url}: {e}")
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    let kind = if e.is_timeout() {
        HttpErrorKind::Timeout
    } else {
        HttpErrorKind::Other
    };
    HttpError { kind, message }
}

/// Connects to the first of the host's addresses that answers.
async fn connect(
    target: &Target,
    connect_timeout: Duration,
    deadline: Instant,
) -> Result<TcpStream, HttpError> {
    let by = deadline.min(Instant::now() + connect_timeout);
    let attempt = async {
        let mut last = None;
        let addresses: Vec<_> = tokio::net::lookup_host((target.host.as_str(), target.port))
            .await?
            .collect();
        // Each address gets its share of the time (at least 250 ms), so one that never
        // answers (an IPv6 route to nowhere) does not leave the others none.
        let share =
            (connect_timeout / addresses.len().max(1) as u32).max(Duration::from_millis(250));
        for address in addresses {
            match tokio::time::timeout(share, TcpStream::connect(address)).await {
                Ok(Ok(stream)) => {
                    stream.set_nodelay(true)?;
                    return Ok(stream);
                }
                Ok(Err(e)) => last = Some(e),
                Err(_) => {
                    last = Some(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("{address} did not answer"),
                    ));
                }
            }
        }
        Err(last
            .unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the host has no address")))
    };
    match tokio::time::timeout_at(by.into(), attempt).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(HttpError {
            kind: HttpErrorKind::Connect,
            message: format!("connecting to {}: {e}", target.authority),
        }),
        // The request's own time-out came first.
        Err(_) if by == deadline => Err(HttpError {
            kind: HttpErrorKind::Timeout,
            message: format!("{}: the request timed out while connecting", target.url),
        }),
        Err(_) => Err(HttpError {
            kind: HttpErrorKind::Connect,
            message: format!(
                "connecting to {}: no connection within {} s",
                target.authority,
                connect_timeout.as_secs_f64()
            ),
        }),
    }
}

/// An answer whose head has come; its body is read with [`Body::chunk`].
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Body,
}

/// An answer's body, read from its connection, which goes back to the pool when the
/// body has been read to its end (and is closed if the body is dropped before).
pub struct Body {
    incoming: Incoming,
    /// The connection, until the body's end gives it back to the pool.
    sender: Option<Sender>,
    pool: Arc<Pool>,
    authority: String,
    url: String,
    deadline: Instant,
    timeout: Duration,
}

impl Body {
    /// Whether the connection can carry another request once the body is read.
    pub fn reusable(&self) -> bool {
        self.sender.is_some()
    }

    /// The next piece of the body; `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        loop {
            let frame = tokio::time::timeout_at(self.deadline.into(), self.incoming.frame())
                .await
                .map_err(|_| HttpError {
                    kind: HttpErrorKind::Timeout,
                    message: format!(
                        "{}: the answer did not end within {} s (the request timed out)",
                        self.url,
                        self.timeout.as_secs_f64()
                    ),
                })?;
            match frame {
                None => {
                    if let Some(mut sender) = self.sender.take() {
                        // hyper readies a connection for the next request only when the
                        // exchange allows it (the answer keeps it alive, the request went
                        // whole); otherwise it closes it, and `ready` says so.
                        let by = self.deadline.min(Instant::now() + READY_WITHIN);
                        if let Ok(Ok(())) = tokio::time::timeout_at(by.into(), sender.ready()).await
                        {
                            self.pool.checkin(&self.authority, sender);
                        }
                    }
                    return Ok(None);
                }
                Some(Ok(frame)) => {
                    // Trailers carry nothing the caller reads.
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        return Ok(Some(data));
                    }
                }
                Some(Err(e)) => {
                    self.sender = None;
                    return Err(failed(&self.url, &e));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
