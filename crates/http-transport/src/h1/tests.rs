//! The HTTP/1.1 client against a scripted server speaking raw bytes: every framing, the
//! pool's reuse and its limits, and each way an answer can go wrong.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// What the server does with one request.
enum Step {
    /// Writes these pieces, pausing between them, and keeps the connection.
    Answer(Vec<&'static [u8]>),
    /// Writes these pieces and closes the connection.
    AnswerAndClose(Vec<&'static [u8]>),
    /// Closes the connection without answering.
    Close,
    /// Never answers.
    Hang,
    /// Answers after the request's head, without reading its body, and closes.
    AnswerEarly(&'static [u8]),
}

#[derive(Default)]
struct Log {
    connections: usize,
    /// Every request's bytes, head and body.
    requests: Vec<String>,
    /// Connections the client closed.
    closed_by_client: usize,
}

/// A server answering the n-th request it reads, on any connection, by `steps[n]`.
async fn serve(steps: Vec<Step>) -> (Target, Arc<Mutex<Log>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = Arc::new(Mutex::new(Log::default()));
    let steps = Arc::new(steps);
    let next = Arc::new(AtomicUsize::new(0));
    let server_log = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            server_log.lock().unwrap().connections += 1;
            let (log, steps, next) = (server_log.clone(), steps.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let Some(head) = read_head(&mut socket).await else {
                        log.lock().unwrap().closed_by_client += 1;
                        return;
                    };
                    let step = steps.get(next.fetch_add(1, Ordering::SeqCst));
                    if let Some(Step::AnswerEarly(answer)) = step {
                        log.lock().unwrap().requests.push(head);
                        socket.write_all(answer).await.unwrap();
                        socket.shutdown().await.unwrap();
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        return;
                    }
                    let Some(request) = read_body(&mut socket, head).await else {
                        return;
                    };
                    log.lock().unwrap().requests.push(request);
                    let pieces = match step {
                        Some(Step::Answer(pieces)) => pieces,
                        Some(Step::AnswerAndClose(pieces)) => {
                            write(&mut socket, pieces).await;
                            return;
                        }
                        Some(Step::Hang) => {
                            tokio::time::sleep(Duration::from_secs(60)).await;
                            return;
                        }
                        Some(Step::Close | Step::AnswerEarly(_)) | None => return,
                    };
                    write(&mut socket, pieces).await;
                }
            });
        }
    });
    let target = Target::parse(&format!("http://127.0.0.1:{port}/v1/chat?x=1")).unwrap();
    (target, log)
}

async fn write(socket: &mut tokio::net::TcpStream, pieces: &[&[u8]]) {
    for piece in pieces {
        if socket.write_all(piece).await.is_err() {
            return;
        }
        socket.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Reads a request's head.
async fn read_head(socket: &mut tokio::net::TcpStream) -> Option<String> {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") {
        if socket.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        bytes.push(byte[0]);
    }
    Some(String::from_utf8(bytes).unwrap())
}

/// Reads the `content-length` bytes of a request's body after its head.
async fn read_body(socket: &mut tokio::net::TcpStream, head: String) -> Option<String> {
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .map_or(0, |l| l.trim().parse().unwrap());
    let mut body = vec![0u8; length];
    socket.read_exact(&mut body).await.ok()?;
    Some(head + std::str::from_utf8(&body).unwrap())
}

async fn post(pool: &Arc<Pool>, target: &Target) -> Result<Response, HttpError> {
    post_within(pool, target, Duration::from_secs(5)).await
}

async fn post_within(
    pool: &Arc<Pool>,
    target: &Target,
    timeout: Duration,
) -> Result<Response, HttpError> {
    let headers = [("authorization", "Bearer k".to_owned())];
    pool.post_json(
        target,
        &headers,
        &Bytes::from_static(b"{\"a\":1}"),
        Duration::from_secs(2),
        timeout,
    )
    .await
}

async fn body(response: &mut Response) -> Result<String, HttpError> {
    let mut text = Vec::new();
    while let Some(piece) = response.body.chunk().await? {
        text.extend_from_slice(&piece);
    }
    Ok(String::from_utf8(text).unwrap())
}

#[tokio::test]
async fn a_sized_answer_is_read_and_its_connection_carries_the_next_request() {
    let answer: &[u8] =
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-type: application/json\r\n\r\nhello";
    let (target, log) = serve(vec![Step::Answer(vec![answer]), Step::Answer(vec![answer])]).await;
    let pool = Pool::new(4);
    for _ in 0..2 {
        let mut response = post(&pool, &target).await.unwrap();
        assert_eq!(response.status, StatusCode::OK);
        assert_eq!(response.headers["content-type"], "application/json");
        assert_eq!(body(&mut response).await.unwrap(), "hello");
        assert_eq!(pool.idle(), 1);
    }
    let log = log.lock().unwrap();
    assert_eq!(
        log.connections, 1,
        "the second request reuses the connection"
    );
    assert_eq!(
        log.requests[0],
        "POST /v1/chat?x=1 HTTP/1.1\r\nhost: 127.0.0.1:".to_owned()
            + &target.port.to_string()
            + "\r\naccept: */*\r\ncontent-type: application/json\r\nauthorization: Bearer k\r\ncontent-length: 7\r\n\r\n{\"a\":1}"
    );
}

#[tokio::test]
async fn a_chunked_answer_cut_anywhere_is_read_whole() {
    let (target, log) = serve(vec![
        Step::Answer(vec![
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n",
            b"\r\n5;ext=1\r",
            b"\nhel",
            b"lo\r\n",
            b"A\r\n, chunked!\r\n0\r\n",
            b"x-trailer: 1\r\n\r\n",
        ]),
        Step::Answer(vec![b"HTTP/1.1 204 No Content\r\n\r\n"]),
    ])
    .await;
    let pool = Pool::new(4);
    let mut response = post(&pool, &target).await.unwrap();
    assert_eq!(body(&mut response).await.unwrap(), "hello, chunked!");
    let mut response = post(&pool, &target).await.unwrap();
    assert_eq!(response.status, StatusCode::NO_CONTENT);
    assert_eq!(body(&mut response).await.unwrap(), "");
    assert_eq!(log.lock().unwrap().connections, 1);
    assert_eq!(pool.idle(), 1);
}

#[tokio::test]
async fn an_answer_without_a_length_ends_with_its_connection_which_is_not_kept() {
    let (target, _) = serve(vec![Step::AnswerAndClose(vec![
        b"HTTP/1.1 200 OK\r\n\r\npart one, ",
        b"part two",
    ])])
    .await;
    let pool = Pool::new(4);
    let mut response = post(&pool, &target).await.unwrap();
    assert_eq!(body(&mut response).await.unwrap(), "part one, part two");
    assert_eq!(pool.idle(), 0);
}

#[tokio::test]
async fn connection_close_and_http_1_0_are_not_kept() {
    let (target, log) = serve(vec![
        Step::Answer(vec![
            b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok",
        ]),
        Step::Answer(vec![b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok"]),
        Step::Answer(vec![
            b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nok",
        ]),
    ])
    .await;
    let pool = Pool::new(4);
    for idle in [0, 0, 1] {
        let mut response = post(&pool, &target).await.unwrap();
        assert_eq!(body(&mut response).await.unwrap(), "ok");
        assert_eq!(pool.idle(), idle);
    }
    assert_eq!(log.lock().unwrap().connections, 3);
}

#[tokio::test]
async fn an_interim_answer_is_skipped() {
    let (target, _) = serve(vec![Step::Answer(vec![
        b"HTTP/1.1 100 Continue\r\n\r\n",
        b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 2\r\ncontent-length: 4\r\n\r\nslow",
    ])])
    .await;
    let pool = Pool::new(4);
    let mut response = post(&pool, &target).await.unwrap();
    assert_eq!(response.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers["retry-after"], "2");
    assert_eq!(body(&mut response).await.unwrap(), "slow");
}

#[tokio::test]
async fn a_kept_connection_the_server_dropped_is_replaced_by_a_new_one() {
    let answer: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    let (target, log) = serve(vec![
        Step::Answer(vec![answer]),
        Step::Close,
        Step::Answer(vec![answer]),
    ])
    .await;
    let pool = Pool::new(4);
    let mut response = post(&pool, &target).await.unwrap();
    body(&mut response).await.unwrap();
    let mut response = post(&pool, &target).await.unwrap();
    assert_eq!(body(&mut response).await.unwrap(), "ok");
    let log = log.lock().unwrap();
    assert_eq!(log.connections, 2);
    assert_eq!(
        log.requests.len(),
        3,
        "sent on the kept connection, then on a new one"
    );
}

#[tokio::test]
async fn a_new_connection_closed_without_an_answer_is_an_error() {
    let (target, log) = serve(vec![Step::Close]).await;
    let pool = Pool::new(4);
    let error = post(&pool, &target).await.err().unwrap();
    assert_eq!(error.kind, HttpErrorKind::Other);
    assert!(
        error.message.contains("closed before an answer came"),
        "{}",
        error.message
    );
    assert_eq!(log.lock().unwrap().requests.len(), 1, "not sent twice");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let (target, _) = serve(vec![Step::Hang]).await;
    let pool = Pool::new(4);
    let started = Instant::now();
    let error = post_within(&pool, &target, Duration::from_millis(300))
        .await
        .err()
        .unwrap();
    assert_eq!(error.kind, HttpErrorKind::Timeout);
    assert!(
        error.message.contains("no answer within 0.3 s"),
        "{}",
        error.message
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_body_that_stops_coming_times_out() {
    let (target, _) = serve(vec![Step::Answer(vec![
        b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf",
    ])])
    .await;
    let pool = Pool::new(4);
    let mut response = post_within(&pool, &target, Duration::from_millis(300))
        .await
        .unwrap();
    let error = body(&mut response).await.err().unwrap();
    assert_eq!(error.kind, HttpErrorKind::Timeout);
    assert!(
        error.message.contains("did not end within 0.3 s"),
        "{}",
        error.message
    );
    assert_eq!(pool.idle(), 0);
}

#[tokio::test]
async fn broken_answers_are_located_errors() {
    let cases: Vec<(&'static [u8], &str)> = vec![
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "is not HTTP/1.1"),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",
            "closed before the end of the answer's body",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 3, 4\r\n\r\nabc",
            "two different content-lengths",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: lots\r\n\r\n",
            "is not a length",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            "is not hexadecimal",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabc\r\n",
            "longer than its size",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab",
            "in the middle of a chunk",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-le",
            "in the middle of the answer's headers",
        ),
    ];
    for (answer, expected) in cases {
        let (target, _) = serve(vec![Step::AnswerAndClose(vec![answer])]).await;
        let pool = Pool::new(4);
        let error = match post(&pool, &target).await {
            Ok(mut response) => body(&mut response).await.err().unwrap(),
            Err(error) => error,
        };
        assert!(
            error.message.contains(expected) && error.message.contains("http://127.0.0.1:"),
            "{expected}: {}",
            error.message
        );
        assert_eq!(pool.idle(), 0);
    }
}

/// What a request-smuggling review tries on a client's framing: each answer is an error
/// or, where the answer can be read, its connection is not kept for another request.
#[tokio::test]
async fn framing_a_smuggling_review_would_try_is_refused_or_not_kept() {
    static CHUNK_LINE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let cases: Vec<&'static [u8]> = vec![
        // A length that is not one number.
        b"HTTP/1.1 200 OK\r\ncontent-length: +2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999999\r\n\r\n",
        // Chunk sizes past 64 bits, one with a sign, and a size line without end.
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nfffffffffffffffff\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n+2\r\nok\r\n0\r\n\r\n",
        CHUNK_LINE.get_or_init(|| {
            let mut bytes = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2;".to_vec();
            bytes.resize(bytes.len() + MAX_CHUNK_LINE * 4, b'x');
            bytes
        }),
        // Both framings, in either order and spelling.
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 40\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        // A header folded over two lines, and a space before the colon.
        b"HTTP/1.1 200 OK\r\ntransfer-encoding:\r\n chunked\r\ncontent-length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding : chunked\r\ncontent-length: 2\r\n\r\nok",
        // A NUL in a header. (A bare LF ending a head's line is read as CRLF, as RFC
        // 9112, 2.2 allows: the answer is not ambiguous.)
        b"HTTP/1.1 200 OK\r\nx-a: b\0c\r\ncontent-length: 2\r\n\r\nok",
    ];
    for answer in cases {
        let (target, _) = serve(vec![Step::Answer(vec![answer]), Step::Close]).await;
        let pool = Pool::new(4);
        let outcome = match post(&pool, &target).await {
            Ok(mut response) => body(&mut response).await,
            Err(error) => Err(error),
        };
        match outcome {
            Err(error) => assert!(
                error.message.contains("http://127.0.0.1:"),
                "{}: {}",
                String::from_utf8_lossy(answer),
                error.message
            ),
            // Read as one answer: its connection carries nothing more.
            Ok(_) => assert_eq!(pool.idle(), 0, "{}", String::from_utf8_lossy(answer)),
        }
    }
}

#[tokio::test]
async fn headers_past_their_limits_are_errors() {
    static LONG: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    static MANY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let long = LONG.get_or_init(|| {
        let mut bytes = b"HTTP/1.1 200 OK\r\nx-padding: ".to_vec();
        bytes.resize(MAX_HEAD + 1024, b'a');
        bytes
    });
    let many = MANY.get_or_init(|| {
        let mut bytes = b"HTTP/1.1 200 OK\r\n".to_vec();
        for _ in 0..=MAX_HEADERS {
            bytes.extend_from_slice(b"x-padding: a\r\n");
        }
        bytes.extend_from_slice(b"\r\n");
        bytes
    });
    for (answer, expected) in [(long, "over 64 KB"), (many, "more than 128 headers")] {
        let (target, _) = serve(vec![Step::Answer(vec![answer.as_slice()])]).await;
        let error = post(&Pool::new(4), &target).await.err().unwrap();
        assert!(error.message.contains(expected), "{}", error.message);
    }
}

#[tokio::test]
async fn a_body_dropped_before_its_end_closes_its_connection() {
    let (target, log) = serve(vec![Step::Answer(vec![
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n",
    ])])
    .await;
    let pool = Pool::new(4);
    let mut response = post(&pool, &target).await.unwrap();
    assert_eq!(&response.body.chunk().await.unwrap().unwrap()[..], b"abc");
    drop(response);
    assert_eq!(pool.idle(), 0);
    // The server sees the connection end: it stops working on the answer.
    for _ in 0..100 {
        if log.lock().unwrap().closed_by_client == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the dropped answer's connection stayed open");
}

#[tokio::test]
async fn the_pool_keeps_at_most_its_limit() {
    let answer: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
    let (target, log) = serve((0..3).map(|_| Step::Answer(vec![answer])).collect()).await;
    let pool = Pool::new(2);
    let mut responses = Vec::new();
    for _ in 0..3 {
        responses.push(post(&pool, &target).await.unwrap());
    }
    for mut response in responses {
        body(&mut response).await.unwrap();
    }
    assert_eq!(log.lock().unwrap().connections, 3);
    assert_eq!(pool.idle(), 2);
}

#[tokio::test]
async fn nothing_listening_is_a_connect_error() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let target = Target::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap();
    let error = post(&Pool::new(4), &target).await.err().unwrap();
    assert_eq!(error.kind, HttpErrorKind::Connect);
    assert!(
        error
            .message
            .contains(&format!("connecting to 127.0.0.1:{port}")),
        "{}",
        error.message
    );
}

#[test]
fn only_plain_http_urls_are_targets() {
    assert!(Target::parse("https://api.openai.com/v1/chat/completions").is_none());
    assert!(Target::parse("http://user:secret@localhost:8080/v1").is_none());
    assert!(Target::parse("not a url").is_none());
    let target = Target::parse("http://localhost/v1/chat/completions").unwrap();
    assert_eq!((target.host.as_str(), target.port), ("localhost", 80));
    assert_eq!(target.authority, "localhost");
    assert_eq!(target.path, "/v1/chat/completions");
    let target = Target::parse("http://[::1]:8080/api?key=a%20b").unwrap();
    assert_eq!((target.host.as_str(), target.port), ("::1", 8080));
    assert_eq!(target.authority, "[::1]:8080");
    assert_eq!(target.path, "/api?key=a%20b");
}

#[tokio::test]
async fn a_released_stream_is_read_to_its_end_and_its_connection_kept() {
    let (target, _) = serve(vec![Step::Answer(vec![
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        b"e\r\ndata: [DONE]\n\n\r\n",
        b"0\r\n\r\n",
    ])])
    .await;
    let pool = Pool::new(4);
    let mut response = post(&pool, &target).await.unwrap();
    assert_eq!(
        &response.body.chunk().await.unwrap().unwrap()[..],
        b"data: [DONE]\n\n"
    );
    assert_eq!(pool.idle(), 0, "the body's end has not been read");
    super::super::Response::Plain(response).release();
    for _ in 0..100 {
        if pool.idle() == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the released answer's connection was not kept");
}

#[tokio::test]
async fn an_answer_before_the_request_was_read_is_read_and_its_connection_not_kept() {
    let (target, _) = serve(vec![Step::AnswerEarly(
        b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 8\r\n\r\ntoo long",
    )])
    .await;
    let pool = Pool::new(4);
    let huge = Bytes::from(vec![b' '; 32 << 20]);
    let mut response = pool
        .post_json(
            &target,
            &[],
            &huge,
            Duration::from_secs(2),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(response.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(body(&mut response).await.unwrap(), "too long");
    assert_eq!(pool.idle(), 0);
}

#[tokio::test]
async fn a_header_with_a_line_break_is_refused_without_its_value() {
    let (target, log) = serve(vec![]).await;
    let headers = [(
        "authorization",
        "Bearer sk-secret\r\nx-injected: 1".to_owned(),
    )];
    let error = Pool::new(4)
        .post_json(
            &target,
            &headers,
            &Bytes::new(),
            Duration::from_secs(2),
            Duration::from_secs(2),
        )
        .await
        .err()
        .unwrap();
    assert_eq!(error.kind, HttpErrorKind::Invalid);
    assert!(
        error
            .message
            .contains("the `authorization` header has a line break"),
        "{}",
        error.message
    );
    assert!(!error.message.contains("sk-secret"), "{}", error.message);
    assert_eq!(log.lock().unwrap().connections, 0);
}

#[tokio::test]
async fn an_ambiguously_framed_answer_does_not_keep_its_connection() {
    let (target, _) = serve(vec![
        Step::Answer(vec![
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 99\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        ]),
        Step::Answer(vec![b"HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\n\r\n"]),
    ])
    .await;
    let pool = Pool::new(4);
    for expected in ["ok", ""] {
        let mut response = post(&pool, &target).await.unwrap();
        assert_eq!(body(&mut response).await.unwrap(), expected);
        assert_eq!(pool.idle(), 0);
    }
}

/// The response parser over arbitrary bytes, cut anywhere: whatever a server sends, the
/// client ends, within the time a closed connection takes, with an answer or an error
/// naming the URL — never a panic, never a hang — and never yields more body than it
/// was sent.
mod arbitrary {
    use proptest::prelude::*;

    use super::*;

    /// What answers start with, so that the bytes after get past the status line.
    const STARTS: &[&[u8]] = &[
        b"",
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nabcde\r\n",
        b"HTTP/1.0 200 OK\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\n",
    ];

    fn cut(bytes: &'static [u8], at: &[usize]) -> Vec<&'static [u8]> {
        let mut pieces = Vec::new();
        let mut rest = bytes;
        for &n in at {
            let n = n.min(rest.len());
            let (piece, after) = rest.split_at(n);
            pieces.push(piece);
            rest = after;
        }
        pieces.push(rest);
        pieces
    }

    async fn read_all(response: &mut Response) -> Result<Vec<u8>, HttpError> {
        let mut bytes = Vec::new();
        while let Some(piece) = response.body.chunk().await? {
            bytes.extend_from_slice(&piece);
        }
        Ok(bytes)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn any_answer_ends_in_a_body_or_a_located_error(
            start in 0..STARTS.len(),
            tail in prop::collection::vec(
                prop_oneof![
                    any::<u8>(),
                    Just(b'\r'),
                    Just(b'\n'),
                    Just(b':'),
                    Just(b'0'),
                    Just(b'f'),
                ],
                0..400,
            ),
            cuts in prop::collection::vec(0usize..80, 0..6),
        ) {
            let mut bytes = STARTS[start].to_vec();
            bytes.extend_from_slice(&tail);
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let outcome = runtime.block_on(async {
                let (target, _) = serve(vec![Step::AnswerAndClose(cut(bytes, &cuts))]).await;
                let pool = Pool::new(4);
                tokio::time::timeout(Duration::from_secs(4), async {
                    match post(&pool, &target).await {
                        Ok(mut response) => read_all(&mut response).await,
                        Err(error) => Err(error),
                    }
                })
                .await
            });
            let Ok(outcome) = outcome else {
                return Err(TestCaseError::fail(format!(
                    "hung on {:?}",
                    String::from_utf8_lossy(bytes)
                )));
            };
            match outcome {
                Ok(body) => prop_assert!(body.len() <= bytes.len()),
                Err(error) => prop_assert!(
                    error.message.contains("http://127.0.0.1:"),
                    "{}",
                    error.message
                ),
            }
        }
    }
}
