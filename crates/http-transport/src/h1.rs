//! sap's own HTTP/1.1 client, for model servers at plain `http://` addresses: a local
//! llama.cpp, vLLM or Ollama, and the thousands of calls a `parallel for` keeps in flight.
//!
//! Over HTTP/1.1 every call in flight holds a connection of its own, so what a
//! connection costs while it waits is what a fan-out costs. This client holds the socket
//! and nothing else while it waits: the request's head is written and dropped, its body
//! is the caller's shared bytes, and the read buffer is allocated when the answer's first
//! bytes are there to read. hyper keeps an 8 KB read buffer reserved while the answer is
//! awaited, an 8 KB write buffer and a task with a channel per connection, even on its
//! low-level connection API (`h1_hyper.rs`, the same path on hyper, kept to measure
//! against): 100,000 calls at `--concurrency 10000` take 70 KB each and 11% longer
//! there, against 42 KB here (docs/PERFORMANCE.md, "HTTP/1.1: our client or hyper's"). That is why a parser
//! of untrusted bytes is ours; it is tested over arbitrary bytes cut anywhere and on the
//! framings a request-smuggling review tries (`h1/tests.rs`).
//!
//! HTTPS, and every address while a proxy is set in the environment, stay with reqwest
//! (rustls, HTTP/2 by ALPN, the proxy rules): see [`super::HttpTransport`].
//!
//! What it speaks (RFC 9112): a request with a `content-length` body; an answer framed by
//! `content-length`, `transfer-encoding: chunked` or the end of the connection, interim
//! 1xx answers skipped; keep-alive, with a pool of idle connections per host that are
//! checked before reuse. A request on a reused connection that the server had closed
//! (nothing of an answer came) is sent once more on a new connection, as browsers do.

use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use reqwest::StatusCode;
use reqwest::header::{
    CONNECTION, CONTENT_LENGTH, HeaderMap, HeaderName, HeaderValue, TRANSFER_ENCODING,
};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::{HttpError, HttpErrorKind};

/// The most an answer's status line and headers may take.
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// The most headers an answer may have.
pub(crate) const MAX_HEADERS: usize = 128;
/// The longest a chunk-size line may be (its extensions included).
const MAX_CHUNK_LINE: usize = 4096;
/// How long an idle connection is kept (reqwest's default).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How much is read at once.
const READ_SIZE: usize = 4096;

/// Where a request goes, from a plain `http://` URL.
pub struct Target {
    /// The URL, for messages.
    pub(crate) url: String,
    /// The host to connect to (an IPv6 address without its brackets).
    host: String,
    port: u16,
    /// The `host` header, and the pool's key.
    pub(crate) authority: String,
    /// The path and query of the request line.
    pub(crate) path: String,
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

    /// The request's head: its line and headers, for a JSON body of `length` bytes.
    fn head(&self, headers: &[(&str, String)], length: usize) -> Vec<u8> {
        let mut head = Vec::with_capacity(
            128 + self.path.len()
                + headers
                    .iter()
                    .map(|(n, v)| n.len() + v.len() + 4)
                    .sum::<usize>(),
        );
        let mut line = |parts: &[&[u8]]| {
            for part in parts {
                head.extend_from_slice(part);
            }
            head.extend_from_slice(b"\r\n");
        };
        line(&[b"POST ", self.path.as_bytes(), b" HTTP/1.1"]);
        line(&[b"host: ", self.authority.as_bytes()]);
        line(&[b"accept: */*"]);
        line(&[b"content-type: application/json"]);
        for (name, value) in headers {
            line(&[name.as_bytes(), b": ", value.as_bytes()]);
        }
        line(&[b"content-length: ", length.to_string().as_bytes()]);
        line(&[]);
        head
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
    stream: TcpStream,
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
    fn checkout(&self, authority: &str) -> Option<TcpStream> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let kept = idle.get_mut(authority)?;
        while let Some(connection) = kept.pop_back() {
            if connection.since.elapsed() < IDLE_TIMEOUT && open(&connection.stream) {
                return Some(connection.stream);
            }
        }
        None
    }

    fn checkin(&self, authority: &str, stream: TcpStream) {
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
                stream,
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

    /// Sends a POST of the JSON `body` to `target` and reads the answer's head; the body is read
    /// from the [`Response`]. Everything, connecting and the body included, ends within
    /// `timeout`.
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
        let mut reused = self.checkout(&target.authority);
        loop {
            let was_reused = reused.is_some();
            let mut stream = match reused.take() {
                Some(stream) => stream,
                None => connect(target, connect_timeout, deadline).await?,
            };
            match exchange(&mut stream, target, headers, body, deadline).await {
                Ok(Exchanged { head, buf, sent }) => {
                    let framing = framing(&head).map_err(|m| protocol(target, m))?;
                    let reusable = sent
                        && framing != Framing::Close
                        && keeps_alive(&head)
                        && !framed_ambiguously(&head);
                    return Ok(Response {
                        status: head.status,
                        headers: head.headers,
                        body: Body {
                            stream: Some(stream),
                            buf,
                            framing,
                            reusable,
                            pool: self.clone(),
                            authority: target.authority.clone(),
                            url: target.url.clone(),
                            deadline,
                            timeout,
                        },
                    });
                }
                // The server closed the idle connection before it saw the request.
                Err(Failure::Closed(_)) if was_reused => continue,
                Err(failure) => return Err(failure.into_error(target, timeout)),
            }
        }
    }
}

/// Whether an idle connection is still open: nothing to read, and not at its end.
fn open(stream: &TcpStream) -> bool {
    matches!(stream.try_read(&mut [0u8; 1]), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

/// Connects to the first of the host's addresses that answers.
pub(crate) async fn connect(
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

/// An answer's status line and headers.
struct Head {
    status: StatusCode,
    /// The `1` of `HTTP/1.1`.
    minor: u8,
    headers: HeaderMap,
}

/// What went wrong in an exchange.
enum Failure {
    /// The connection ended (or was reset) before any byte of an answer.
    Closed(io::Error),
    TimedOut,
    Io(io::Error),
    Protocol(String),
}

impl Failure {
    fn into_error(self, target: &Target, timeout: Duration) -> HttpError {
        match self {
            Failure::Closed(e) => HttpError {
                kind: HttpErrorKind::Other,
                message: format!(
                    "{}: the connection closed before an answer came: {e}",
                    target.url
                ),
            },
            Failure::TimedOut => HttpError {
                kind: HttpErrorKind::Timeout,
                message: format!(
                    "{}: no answer within {} s (`timeout_seconds`)",
                    target.url,
                    timeout.as_secs_f64()
                ),
            },
            Failure::Io(e) => HttpError {
                kind: HttpErrorKind::Other,
                message: format!("{}: {e}", target.url),
            },
            Failure::Protocol(m) => protocol(target, m),
        }
    }
}

fn protocol(target: &Target, message: String) -> HttpError {
    HttpError {
        kind: HttpErrorKind::Other,
        message: format!("{}: {message}", target.url),
    }
}

/// Writes the request and reads the answer's head, skipping interim answers.
async fn exchange(
    stream: &mut TcpStream,
    target: &Target,
    headers: &[(&str, String)],
    body: &Bytes,
    deadline: Instant,
) -> Result<Exchanged, Failure> {
    let written = {
        let head = target.head(headers, body.len());
        tokio::time::timeout_at(deadline.into(), write_all(stream, &head, body)).await
    };
    // A server may answer before it has read the whole request (a 413) and close its
    // side: its answer is read all the same, and the connection is not kept.
    let unsent = match written {
        Err(_) => return Err(Failure::TimedOut),
        Ok(Err(e)) if disconnected(&e) => Some(e),
        Ok(Err(e)) => return Err(Failure::Io(e)),
        Ok(Ok(())) => None,
    };
    let mut buf = BytesMut::new();
    let mut answered = false;
    loop {
        if let Some(head) = parse_head(&mut buf).map_err(Failure::Protocol)? {
            // 101 switches protocols, which a POST here never asks for: it is an answer.
            if head.status.is_informational() && head.status != StatusCode::SWITCHING_PROTOCOLS {
                answered = true;
                continue;
            }
            return Ok(Exchanged {
                head,
                buf,
                sent: unsent.is_none(),
            });
        }
        if buf.len() > MAX_HEAD {
            return Err(Failure::Protocol(format!(
                "the answer's headers are over {} KB",
                MAX_HEAD / 1024
            )));
        }
        let nothing_yet = buf.is_empty() && !answered;
        match read_some(stream, &mut buf, deadline).await {
            Ok(0) | Err(ReadError::Io(_)) if nothing_yet && unsent.is_some() => {
                return Err(Failure::Closed(unsent.expect("a failed write")));
            }
            Ok(0) if nothing_yet => {
                return Err(Failure::Closed(io::ErrorKind::UnexpectedEof.into()));
            }
            Ok(0) => {
                return Err(Failure::Protocol(
                    "the connection closed in the middle of the answer's headers".to_owned(),
                ));
            }
            Ok(_) => {}
            Err(ReadError::TimedOut) => return Err(Failure::TimedOut),
            Err(ReadError::Io(e)) if disconnected(&e) && nothing_yet => {
                return Err(Failure::Closed(e));
            }
            Err(ReadError::Io(e)) => return Err(Failure::Io(e)),
        }
    }
}

/// An answer's head, what was read past it, and whether the whole request went out.
struct Exchanged {
    head: Head,
    buf: BytesMut,
    sent: bool,
}

fn disconnected(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof
    )
}

/// Writes the head and the body, in as few writes as the socket takes.
async fn write_all(stream: &mut TcpStream, mut head: &[u8], mut body: &[u8]) -> io::Result<()> {
    while !head.is_empty() || !body.is_empty() {
        let n = stream
            .write_vectored(&[IoSlice::new(head), IoSlice::new(body)])
            .await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        if n < head.len() {
            head = &head[n..];
        } else {
            body = &body[n - head.len()..];
            head = &[];
        }
    }
    Ok(())
}

enum ReadError {
    TimedOut,
    Io(io::Error),
}

/// Reads what has come into `buf` (0 at the connection's end), by `deadline`. The
/// buffer grows only once there is something to read, so a connection waiting for its
/// answer holds none.
async fn read_some(
    stream: &TcpStream,
    buf: &mut BytesMut,
    deadline: Instant,
) -> Result<usize, ReadError> {
    loop {
        match tokio::time::timeout_at(deadline.into(), stream.readable()).await {
            Err(_) => return Err(ReadError::TimedOut),
            Ok(Err(e)) => return Err(ReadError::Io(e)),
            Ok(Ok(())) => {}
        }
        if buf.capacity() - buf.len() < READ_SIZE / 4 {
            buf.reserve(READ_SIZE);
        }
        match stream.try_read_buf(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
}

/// Parses a complete head off the front of `buf`; `None` while it is incomplete.
fn parse_head(buf: &mut BytesMut) -> Result<Option<Head>, String> {
    if buf.is_empty() {
        return Ok(None);
    }
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut slots);
    let length = match response.parse(buf) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(format!("the answer has more than {MAX_HEADERS} headers"));
        }
        Err(e) => {
            let start = String::from_utf8_lossy(&buf[..buf.len().min(80)]).into_owned();
            return Err(format!("the answer is not HTTP/1.1 ({e}): {start:?}"));
        }
    };
    let code = response.code.unwrap_or(0);
    let status = StatusCode::from_u16(code)
        .map_err(|_| format!("the answer's status {code} is not a status"))?;
    let mut headers = HeaderMap::with_capacity(response.headers.len());
    for header in response.headers.iter() {
        // A header that is not valid HTTP is not one the answer's reader looks at.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(header.name.as_bytes()),
            HeaderValue::from_bytes(header.value),
        ) {
            headers.append(name, value);
        }
    }
    let minor = response.version.unwrap_or(1);
    buf.advance(length);
    Ok(Some(Head {
        status,
        minor,
        headers,
    }))
}

/// How an answer's body ends (RFC 9112 §6.3).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Framing {
    /// This many bytes are left.
    Length(u64),
    Chunked(Chunk),
    /// The body ends with the connection.
    Close,
    Done,
}

/// Where a chunked body's reader is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Chunk {
    /// At a chunk-size line.
    Size,
    /// In a chunk's data, with this many bytes left.
    Data(u64),
    /// At the line break after a chunk's data.
    DataEnd,
    /// In the trailer section, after the last chunk.
    Trailers,
}

fn framing(head: &Head) -> Result<Framing, String> {
    let code = head.status.as_u16();
    if head.status.is_informational() || code == 204 || code == 304 {
        return Ok(Framing::Length(0));
    }
    if let Some(codings) = head.headers.get_all(TRANSFER_ENCODING).iter().next_back() {
        let chunked = codings
            .to_str()
            .ok()
            .and_then(|c| c.rsplit(',').next())
            .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        return Ok(if chunked {
            Framing::Chunked(Chunk::Size)
        } else {
            Framing::Close
        });
    }
    let mut length = None;
    for value in head.headers.get_all(CONTENT_LENGTH) {
        for part in value.to_str().unwrap_or("?").split(',') {
            // 1*DIGIT (RFC 9110, 8.6): `parse` alone would take a `+` sign.
            let part = part.trim();
            let n: u64 = Some(part)
                .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("the answer's content-length {value:?} is not a length"))?;
            if length.is_some_and(|l| l != n) {
                return Err("the answer has two different content-lengths".to_owned());
            }
            length = Some(n);
        }
    }
    Ok(length.map_or(Framing::Close, Framing::Length))
}

/// An answer after which RFC 9112 has the connection closed: one that switched
/// protocols (§9.6), one with both `transfer-encoding` and `content-length`, or with
/// `transfer-encoding` in HTTP/1.0 (§6.1: the framing cannot be trusted).
fn framed_ambiguously(head: &Head) -> bool {
    let coded = head.headers.contains_key(TRANSFER_ENCODING);
    head.status == StatusCode::SWITCHING_PROTOCOLS
        || (coded && head.headers.contains_key(CONTENT_LENGTH))
        || (coded && head.minor == 0)
}

/// Whether the connection may carry another request after this answer.
fn keeps_alive(head: &Head) -> bool {
    let says = |token: &str| {
        head.headers.get_all(CONNECTION).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    if head.minor >= 1 {
        !says("close")
    } else {
        says("keep-alive")
    }
}

/// An answer whose head has come; its body is read with [`Response::chunk`].
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Body,
}

/// An answer's body, read from its connection, which goes back to the pool when the
/// body has been read to its end (and is closed if the body is dropped before).
pub struct Body {
    stream: Option<TcpStream>,
    buf: BytesMut,
    framing: Framing,
    reusable: bool,
    pool: Arc<Pool>,
    authority: String,
    url: String,
    deadline: Instant,
    timeout: Duration,
}

impl Body {
    /// Whether the connection can carry another request once the body is read.
    pub fn reusable(&self) -> bool {
        self.reusable && self.stream.is_some()
    }

    /// The next piece of the body; `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        loop {
            match self.framing {
                Framing::Done => return Ok(None),
                Framing::Length(0) => {
                    self.finish();
                    return Ok(None);
                }
                Framing::Length(left) => {
                    if self.buf.is_empty() && self.fill().await? == 0 {
                        return Err(
                            self.error("the connection closed before the end of the answer's body")
                        );
                    }
                    let n = (self.buf.len() as u64).min(left) as usize;
                    self.framing = Framing::Length(left - n as u64);
                    return Ok(Some(self.buf.split_to(n).freeze()));
                }
                Framing::Close => {
                    if self.buf.is_empty() && self.fill().await? == 0 {
                        self.framing = Framing::Done;
                        self.stream = None;
                        return Ok(None);
                    }
                    return Ok(Some(self.buf.split().freeze()));
                }
                Framing::Chunked(Chunk::Data(left)) => {
                    if self.buf.is_empty() && self.fill().await? == 0 {
                        return Err(self.error("the connection closed in the middle of a chunk"));
                    }
                    let n = (self.buf.len() as u64).min(left) as usize;
                    let left = left - n as u64;
                    self.framing = Framing::Chunked(if left == 0 {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left)
                    });
                    return Ok(Some(self.buf.split_to(n).freeze()));
                }
                Framing::Chunked(state) => {
                    let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") else {
                        if self.buf.len() > MAX_CHUNK_LINE {
                            return Err(self.error("a chunk's size line is too long"));
                        }
                        if self.fill().await? == 0 {
                            return Err(
                                self.error("the connection closed in the middle of a chunked body")
                            );
                        }
                        continue;
                    };
                    let line = self.buf.split_to(end + 2);
                    let line = &line[..end];
                    self.framing = match state {
                        Chunk::Size => {
                            let size = std::str::from_utf8(line)
                                .ok()
                                .and_then(|l| l.split(';').next())
                                .map(str::trim)
                                // 1*HEXDIG: no sign, no `0x` (`from_str_radix` takes `+`).
                                .filter(|s| {
                                    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
                                })
                                .and_then(|s| u64::from_str_radix(s, 16).ok())
                                .ok_or_else(|| {
                                    self.error(&format!(
                                        "a chunk's size {:?} is not hexadecimal",
                                        String::from_utf8_lossy(&line[..line.len().min(40)])
                                    ))
                                })?;
                            Framing::Chunked(if size == 0 {
                                Chunk::Trailers
                            } else {
                                Chunk::Data(size)
                            })
                        }
                        Chunk::DataEnd if line.is_empty() => Framing::Chunked(Chunk::Size),
                        Chunk::DataEnd => return Err(self.error("a chunk is longer than its size")),
                        Chunk::Trailers if line.is_empty() => {
                            self.finish();
                            return Ok(None);
                        }
                        Chunk::Trailers => Framing::Chunked(Chunk::Trailers),
                        Chunk::Data(_) => unreachable!("data is read above"),
                    };
                }
            }
        }
    }

    /// Reads more into the buffer; 0 at the connection's end.
    async fn fill(&mut self) -> Result<usize, HttpError> {
        let Some(stream) = &self.stream else {
            return Ok(0);
        };
        match read_some(stream, &mut self.buf, self.deadline).await {
            Ok(n) => Ok(n),
            Err(ReadError::TimedOut) => {
                self.stream = None;
                Err(HttpError {
                    kind: HttpErrorKind::Timeout,
                    message: format!(
                        "{}: the answer's body did not end within {} s (`timeout_seconds`)",
                        self.url,
                        self.timeout.as_secs_f64()
                    ),
                })
            }
            Err(ReadError::Io(e)) => {
                self.stream = None;
                Err(self.error(&e.to_string()))
            }
        }
    }

    /// The body has been read: the connection goes back to the pool if it can carry
    /// another request and nothing came past the body's end.
    fn finish(&mut self) {
        self.framing = Framing::Done;
        if let Some(stream) = self.stream.take()
            && self.reusable
            && self.buf.is_empty()
        {
            self.pool.checkin(&self.authority, stream);
        }
    }

    fn error(&mut self, message: &str) -> HttpError {
        self.stream = None;
        self.framing = Framing::Done;
        HttpError {
            kind: HttpErrorKind::Other,
            message: format!("{}: {message}", self.url),
        }
    }
}

#[cfg(test)]
mod tests;
