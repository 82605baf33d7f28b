//! A person answers each call at the terminal: they see the prompt and the schema, type
//! JSON (ended by an empty line, or as soon as it parses), and are asked again with the
//! validation error when it does not fit — the same re-ask loop a model gets.

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use llm::{BoxFuture, Finish, LlmRequest, LlmResponse, Provider, ProviderError, Usage};

type Input = Box<dyn BufRead + Send>;
type Output = Box<dyn Write + Send>;

pub struct InteractiveProvider {
    io: Arc<Mutex<(Input, Output)>>,
}

impl InteractiveProvider {
    /// Reads standard input, writes standard error (standard output is the program's).
    pub fn stdio() -> InteractiveProvider {
        InteractiveProvider::new(
            Box::new(std::io::BufReader::new(std::io::stdin())),
            Box::new(std::io::stderr()),
        )
    }

    pub fn new(input: Input, output: Output) -> InteractiveProvider {
        InteractiveProvider {
            io: Arc::new(Mutex::new((input, output))),
        }
    }
}

fn ask(io: &mut (Input, Output), request: &LlmRequest) -> Result<String, ProviderError> {
    let (input, output) = io;
    let write_error = |e: std::io::Error| {
        ProviderError::Interactive(format!("cannot write to the terminal: {e}"))
    };
    let schema = serde_json::to_string_pretty(&*request.schema).unwrap_or_default();
    match request.corrections.last() {
        None => {
            writeln!(output, "\n──── the program asks ────\n{}\n──── answer with JSON matching ({}) ────\n{schema}", request.user_text(), request.schema_name)
                .map_err(write_error)?;
        }
        Some(c) => writeln!(output, "\n{}", c.message).map_err(write_error)?,
    }
    write!(output, "> ")
        .and_then(|_| output.flush())
        .map_err(write_error)?;
    let mut answer = String::new();
    loop {
        let mut line = String::new();
        let n = input
            .read_line(&mut line)
            .map_err(|e| ProviderError::Interactive(format!("cannot read the answer: {e}")))?;
        if n == 0 {
            if answer.trim().is_empty() {
                return Err(ProviderError::Interactive(
                    "the input ended before an answer was given".to_owned(),
                ));
            }
            break;
        }
        if line.trim().is_empty() && !answer.trim().is_empty() {
            break;
        }
        answer.push_str(&line);
        if serde_json::from_str::<serde_json::Value>(answer.trim()).is_ok() {
            break;
        }
    }
    Ok(answer.trim().to_owned())
}

impl Provider for InteractiveProvider {
    fn name(&self) -> &str {
        "interactive"
    }

    /// A person answers one question at a time: in the program's order.
    fn in_order(&self) -> bool {
        true
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        let io = self.io.clone();
        let request = request.clone();
        Box::pin(async move {
            // Reading a terminal blocks; it must not hold up the runtime's workers.
            let text = tokio::task::spawn_blocking(move || {
                let mut io = io.lock().unwrap_or_else(|e| e.into_inner());
                ask(&mut io, &request)
            })
            .await
            .map_err(|e| {
                ProviderError::Interactive(format!("the terminal reader stopped: {e}"))
            })??;
            Ok(LlmResponse {
                text,
                finish: Finish::Stop,
                usage: Usage::default(),
                retries: 0,
                structured: None,
                sampling: None,
            })
        })
    }
}
