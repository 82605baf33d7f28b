//! The plain-HTTP/1.1 path of [`super::h1`] on hyper's low-level connection API
//! (`hyper::client::conn::http1`, with the same limits on an answer's head as ours), kept
//! as the other arm of the measurement that decided for our own client: `sapc` uses it
//! when `SAP_HTTP1_CLIENT=hyper` is set, and `tools/fanout-bench/run.py --http1
//! ours,hyper` runs the fan-out both ways side by side (docs/PERFORMANCE.md, "HTTP/1.1:
//! our client or hyper's"). Nothing else uses it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{Builder, SendRequest};
use hyper_util::rt::TokioIo;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use super::h1::{MAX_HEAD, MAX_HEADERS, Target, connect};
use super::{HttpError, HttpErrorKind};

type Sender = SendRequest<Full<Bytes>>;

/// Idle connections by host, as `h1::Pool` keeps them.
pub struct Pool {
    idle: Mutex<HashMap<String, Vec<Sender>>>,
    max_idle: usize,
}

impl Pool {
    pub fn new(max_idle: usize) -> Arc<Pool> {
        Arc::new(Pool {
            idle: Mutex::new(HashMap::new()),
            max_idle,
        })
    }

    fn checkout(&self, authority: &str) -> Option<Sender> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let kept = idle.get_mut(authority)?;
        while let Some(sender) = kept.pop() {
            if !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    fn checkin(&self, authority: &str, sender: Sender) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let kept = idle.entry(authority.to_owned()).or_default();
        if kept.len() < self.max_idle {
            kept.push(sender);
        }
    }

    /// Sends a POST of the JSON `body` to `target` and reads the answer's head, all
    /// within `timeout`.
    pub async fn post_json(
        self: &Arc<Self>,
        target: &Target,
        headers: &[(&str, String)],
        body: &Bytes,
        connect_timeout: Duration,
        timeout: Duration,
    ) -> Result<Response, HttpError> {
        let deadline = Instant::now() + timeout;
        let exchange = async {
            let reused = match self.checkout(&target.authority) {
                Some(mut sender) => sender.ready().await.is_ok().then_some(sender),
                None => None,
            };
            let mut sender = match reused {
                Some(sender) => sender,
                None => {
                    let stream = connect(target, connect_timeout, deadline).await?;
                    let (sender, connection) = Builder::new()
                        .max_buf_size(MAX_HEAD)
                        .max_headers(MAX_HEADERS)
                        .handshake(TokioIo::new(stream))
                        .await
                        .map_err(|e| failed(target, e))?;
                    tokio::spawn(async move {
                        let _ = connection.await;
                    });
                    sender
                }
            };
            let mut request = hyper::Request::post(target.path.as_str())
                .header("host", target.authority.as_str())
                .header("content-type", "application/json");
            for (name, value) in headers {
                request = request.header(*name, value.as_str());
            }
            let request = request
                .body(Full::new(body.clone()))
                .map_err(|e| HttpError {
                    kind: HttpErrorKind::Invalid,
                    message: format!("{}: {e}", target.url),
                })?;
            let answer = sender
                .send_request(request)
                .await
                .map_err(|e| failed(target, e))?;
            Ok::<_, HttpError>((sender, answer))
        };
        let (sender, answer) = tokio::time::timeout_at(deadline.into(), exchange)
            .await
            .map_err(|_| timed_out(&target.url, timeout))??;
        let (head, incoming) = answer.into_parts();
        Ok(Response {
            status: head.status,
            headers: head.headers,
            body: Body {
                incoming,
                sender: Some(sender),
                pool: self.clone(),
                authority: target.authority.clone(),
                url: target.url.clone(),
                deadline,
                timeout,
            },
        })
    }
}

fn failed(target: &Target, e: hyper::Error) -> HttpError {
    HttpError {
        kind: HttpErrorKind::Other,
        message: format!("{}: {e}", target.url),
    }
}

fn timed_out(url: &str, timeout: Duration) -> HttpError {
    HttpError {
        kind: HttpErrorKind::Timeout,
        message: format!("{url}: no whole answer within {timeout:?}"),
    }
}

pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Body,
}

pub struct Body {
    incoming: Incoming,
    /// The connection, back to the pool when the body has been read to its end.
    sender: Option<Sender>,
    pool: Arc<Pool>,
    authority: String,
    url: String,
    deadline: Instant,
    timeout: Duration,
}

impl Body {
    pub fn reusable(&self) -> bool {
        self.sender.is_some()
    }

    /// The next piece of the body; `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        loop {
            let frame = tokio::time::timeout_at(self.deadline.into(), self.incoming.frame())
                .await
                .map_err(|_| timed_out(&self.url, self.timeout))?;
            match frame {
                None => {
                    if let Some(sender) = self.sender.take() {
                        self.pool.checkin(&self.authority, sender);
                    }
                    return Ok(None);
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        return Ok(Some(data));
                    }
                }
                Some(Err(e)) => {
                    self.sender = None;
                    return Err(HttpError {
                        kind: HttpErrorKind::Other,
                        message: format!("{}: {e}", self.url),
                    });
                }
            }
        }
    }
}
