//! An in-process HTTP/1.1 server for protocol tests: it records every request and answers
//! from a script — a JSON body, a server-sent event stream, an error status with headers,
//! a delay, a dropped connection. Tests assert on the exact requests sent.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("the request body is JSON")
    }
}

#[derive(Clone, Debug)]
pub enum Reply {
    /// A complete answer.
    Body {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
        delay: Duration,
    },
    /// `text/event-stream`, one `data:` event per chunk.
    Events {
        events: Vec<String>,
        delay: Duration,
    },
    /// Close the connection without answering.
    Drop,
}

impl Reply {
    pub fn json(body: serde_json::Value) -> Reply {
        Reply::Body {
            status: 200,
            headers: Vec::new(),
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }

    pub fn status(status: u16, body: &str) -> Reply {
        Reply::Body {
            status,
            headers: Vec::new(),
            body: body.to_owned(),
            delay: Duration::ZERO,
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Body { headers, .. } = &mut self {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }

    pub fn delayed(mut self, by: Duration) -> Reply {
        match &mut self {
            Reply::Body { delay, .. } | Reply::Events { delay, .. } => *delay = by,
            Reply::Drop => {}
        }
        self
    }
}

type Script = dyn Fn(&RecordedRequest, usize) -> Reply + Send + Sync;

pub struct MockServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
    task: tokio::task::JoinHandle<()>,
}

impl MockServer {
    /// Starts on a free loopback port. `script` gets each request and its index.
    pub async fn start(
        script: impl Fn(&RecordedRequest, usize) -> Reply + Send + Sync + 'static,
    ) -> MockServer {
        // A deep accept queue: a thousand clients connecting at once must not have their
        // SYNs dropped (each drop costs the client a one-second retransmission).
        let socket = TcpSocket::new_v4().expect("a TCP socket");
        socket
            .bind("127.0.0.1:0".parse().expect("an address"))
            .expect("bind a loopback port");
        let listener = socket.listen(4096).expect("listen");
        let addr = listener.local_addr().expect("local address");
        let requests: Arc<Mutex<Vec<RecordedRequest>>> = Arc::default();
        let script: Arc<Script> = Arc::new(script);
        let counter = Arc::new(AtomicUsize::new(0));
        let recorded = requests.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (script, recorded, counter) =
                    (script.clone(), recorded.clone(), counter.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, script, recorded, counter).await;
                });
            }
        });
        MockServer {
            addr,
            requests,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<RecordedRequest>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_owned();
    let path = first.next().unwrap_or("").to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        })
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(RecordedRequest {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }))
}

async fn serve(
    mut stream: TcpStream,
    script: Arc<Script>,
    recorded: Arc<Mutex<Vec<RecordedRequest>>>,
    counter: Arc<AtomicUsize>,
) -> std::io::Result<()> {
    let Some(request) = read_request(&mut stream).await? else {
        return Ok(());
    };
    let index = counter.fetch_add(1, Ordering::SeqCst);
    recorded.lock().unwrap().push(request.clone());
    match script(&request, index) {
        Reply::Drop => Ok(()),
        Reply::Body {
            status,
            headers,
            body,
            delay,
        } => {
            tokio::time::sleep(delay).await;
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                reason(status),
                body.len()
            );
            for (n, v) in headers {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str("\r\n");
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
            stream.flush().await
        }
        Reply::Events { events, delay } => {
            tokio::time::sleep(delay).await;
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            for event in events {
                stream
                    .write_all(format!("data: {event}\n\n").as_bytes())
                    .await?;
                stream.flush().await?;
            }
            stream.shutdown().await
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        408 => "Request Timeout",
        409 => "Conflict",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
