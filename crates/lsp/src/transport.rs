//! The language server's standard input and output: LSP's base protocol (headers with a
//! `Content-Length`, then a JSON body), read with limits.
//!
//! A body that is not JSON is answered with a parse error (-32700) and one that is not a
//! JSON-RPC message with an invalid-request error (-32600), and the server goes on. A
//! frame that cannot be read — a header without `:`, no `Content-Length`, a length past
//! [`MAX_MESSAGE`], the input ending inside a message — ends the connection, since there
//! is no telling where the next message would start; the server then stops as it does
//! when its input ends.

use std::io::{self, BufRead, Read, Write};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, select, unbounded};
use lsp_server::{Connection, Message};
use serde_json::{Value as JsonValue, json};

/// The largest message read: a document of tens of megabytes is not source code.
pub const MAX_MESSAGE: usize = 64 << 20;
/// The longest header line.
const MAX_HEADER_LINE: u64 = 8 << 10;

/// The threads behind [`stdio`]'s connection.
pub struct Threads {
    writer: JoinHandle<io::Result<()>>,
    /// Tells the writer to stop after what was sent before.
    stop: Sender<Message>,
}

/// The method of the message that stops the writer: the server has exited, though a
/// thread of its (a test run from a code lens) may still hold a sender.
const STOP: &str = "$/sap/stopWriting";

impl Threads {
    /// Writes everything the server sent, then stops. The reader is not waited for: it
    /// may be blocked on input that never comes.
    pub fn join(self) -> Result<(), String> {
        let _ = self
            .stop
            .send(Message::Notification(lsp_server::Notification::new(
                STOP.to_owned(),
                JsonValue::Null,
            )));
        match self.writer.join() {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(_) => Err("the output thread panicked".to_owned()),
        }
    }
}

/// A connection over this process's standard input and output.
pub fn stdio() -> (Connection, Threads) {
    let (to_server, from_client) = unbounded::<Message>();
    let (to_client, from_server) = unbounded::<Message>();
    let (errors, error_replies) = unbounded::<JsonValue>();
    std::thread::Builder::new()
        .name("lsp-reader".to_owned())
        .spawn(move || {
            let stdin = io::stdin();
            let result = read_messages(&mut stdin.lock(), &to_server, &errors);
            if let Err(e) = result {
                eprintln!("sapc lsp: stopped reading its input: {e}");
            }
        })
        .expect("start the reader thread");
    let writer = std::thread::Builder::new()
        .name("lsp-writer".to_owned())
        .spawn(move || write_messages(&mut io::stdout().lock(), &from_server, &error_replies))
        .expect("start the writer thread");
    let connection = Connection {
        sender: to_client.clone(),
        receiver: from_client,
    };
    (
        connection,
        Threads {
            writer,
            stop: to_client,
        },
    )
}

/// Forwards each message read to the server, until the input ends or says `exit`.
/// Errors of one message are answered through `errors`.
pub fn read_messages(
    input: &mut impl BufRead,
    server: &Sender<Message>,
    errors: &Sender<JsonValue>,
) -> io::Result<()> {
    while let Some(body) = read_frame(input)? {
        // A message is read once; only one that is not is read again, to say why.
        let message: Message = match serde_json::from_slice(&body) {
            Ok(message) => message,
            Err(e) => {
                let _ = errors.send(refusal(&body, e));
                continue;
            }
        };
        let exit = matches!(&message, Message::Notification(n) if n.method == "exit");
        if server.send(message).is_err() || exit {
            break;
        }
    }
    Ok(())
}

/// The answer to a body that is not a message: a parse error (-32700) if it is not
/// JSON, else an invalid request (-32600), under the request's id when it has one.
fn refusal(body: &[u8], e: serde_json::Error) -> JsonValue {
    let json: JsonValue = match serde_json::from_slice(body) {
        Ok(json) => json,
        Err(e) => return error_reply(-32700, format!("the message is not JSON: {e}")),
    };
    let mut reply = error_reply(
        -32600,
        format!("the message is not a JSON-RPC request, response or notification: {e}"),
    );
    if let Some(id) = json.get("id").filter(|id| id.is_number() || id.is_string()) {
        reply["id"] = id.clone();
    }
    reply
}

/// An error answer to a message whose id could not be read: JSON-RPC's `"id": null`.
fn error_reply(code: i32, message: String) -> JsonValue {
    json!({ "jsonrpc": "2.0", "id": null, "error": { "code": code, "message": message } })
}

/// Writes what the server sends, and the reader's error answers, until the server's
/// side of the connection is dropped.
fn write_messages(
    output: &mut impl Write,
    from_server: &Receiver<Message>,
    error_replies: &Receiver<JsonValue>,
) -> io::Result<()> {
    let mut reader_open = true;
    loop {
        let json = if reader_open {
            select! {
                recv(from_server) -> m => match m {
                    Ok(Message::Notification(n)) if n.method == STOP => return Ok(()),
                    Ok(m) => message_json(&m)?,
                    Err(_) => return Ok(()),
                },
                recv(error_replies) -> m => match m {
                    Ok(json) => json,
                    Err(_) => {
                        reader_open = false;
                        continue;
                    }
                },
            }
        } else {
            match from_server.recv() {
                Ok(Message::Notification(n)) if n.method == STOP => return Ok(()),
                Ok(m) => message_json(&m)?,
                Err(_) => return Ok(()),
            }
        };
        let body = json.to_string();
        write!(output, "Content-Length: {}\r\n\r\n{body}", body.len())?;
        output.flush()?;
    }
}

fn message_json(message: &Message) -> io::Result<JsonValue> {
    let mut json = serde_json::to_value(message)?;
    if let Some(object) = json.as_object_mut() {
        object.insert("jsonrpc".to_owned(), "2.0".into());
    }
    Ok(json)
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Reads one message's body; `None` when the input ends between messages.
pub fn read_frame(input: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut length: Option<usize> = None;
    let mut headers = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = input
            .by_ref()
            .take(MAX_HEADER_LINE)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return if headers == 0 {
                Ok(None)
            } else {
                Err(invalid(
                    "the input ended inside a message's headers".to_owned(),
                ))
            };
        }
        if !line.ends_with(b"\n") {
            return Err(invalid(format!(
                "a header line longer than {MAX_HEADER_LINE} bytes"
            )));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            // Blank lines between messages are skipped; after headers, the body starts.
            if headers == 0 {
                continue;
            }
            break;
        }
        headers += 1;
        let Some((name, value)) = text.split_once(':') else {
            return Err(invalid(format!("a header without `:`: {text:?}")));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let n: usize = value.trim().parse().map_err(|_| {
                invalid(format!("Content-Length {:?} is not a length", value.trim()))
            })?;
            if n > MAX_MESSAGE {
                return Err(invalid(format!(
                    "a message of {n} bytes, past the limit of {MAX_MESSAGE}"
                )));
            }
            length = Some(n);
        }
    }
    let length = length.ok_or_else(|| invalid("a message without Content-Length".to_owned()))?;
    let mut body = vec![0; length];
    input.read_exact(&mut body).map_err(|_| {
        invalid(format!(
            "the input ended inside a message of {length} bytes"
        ))
    })?;
    Ok(Some(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8]) -> Vec<io::Result<Option<Vec<u8>>>> {
        let mut reader = io::BufReader::new(input);
        let mut out = Vec::new();
        loop {
            let frame = read_frame(&mut reader);
            let end = !matches!(frame, Ok(Some(_)));
            out.push(frame);
            if end {
                return out;
            }
        }
    }

    #[test]
    fn frames_are_read_with_either_line_ending_and_any_header_case() {
        let got = frames(b"Content-Length: 2\r\n\r\n{}content-length:4\n\n[12]\r\n");
        assert_eq!(got[0].as_ref().unwrap().as_deref(), Some(&b"{}"[..]));
        assert_eq!(got[1].as_ref().unwrap().as_deref(), Some(&b"[12]"[..]));
        assert!(matches!(got[2], Ok(None)));
    }

    #[test]
    fn broken_frames_end_the_connection_with_a_reason() {
        for (input, reason) in [
            (
                &b"Content-Length: 99999999999\r\n\r\n{"[..],
                "past the limit",
            ),
            (b"Content-Length: abc\r\n\r\n", "is not a length"),
            (b"Content-Type: x\r\n\r\n{}", "without Content-Length"),
            (b"garbage\r\n\r\n", "without `:`"),
            (
                b"Content-Length: 10\r\n\r\n{}",
                "ended inside a message of 10 bytes",
            ),
            (
                b"Content-Length: 10\r\n",
                "ended inside a message's headers",
            ),
        ] {
            let got = frames(input);
            let error = got.last().unwrap().as_ref().unwrap_err();
            assert!(error.to_string().contains(reason), "{reason}: {error}");
        }
    }

    #[test]
    fn a_body_that_is_not_a_message_is_answered_and_reading_goes_on() {
        let mut input = Vec::new();
        for body in [
            "{not json",
            "42",
            r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#,
        ] {
            input.extend(format!("Content-Length: {}\r\n\r\n{body}", body.len()).bytes());
        }
        let (server, received) = unbounded();
        let (errors, replies) = unbounded();
        read_messages(&mut io::BufReader::new(&input[..]), &server, &errors).unwrap();
        let replies: Vec<JsonValue> = replies.try_iter().collect();
        assert_eq!(replies.len(), 2);
        assert_eq!(replies[0]["error"]["code"], -32700);
        assert_eq!(replies[1]["error"]["code"], -32600);
        assert!(
            replies
                .iter()
                .all(|r| r["id"].is_null() && r["jsonrpc"] == "2.0")
        );
        assert!(
            matches!(received.try_recv(), Ok(Message::Notification(n)) if n.method == "initialized")
        );
    }
}
