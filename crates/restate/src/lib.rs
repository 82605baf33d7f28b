//! `sapc serve --restate HOST:PORT FILE`: a program's `export fn`s as the handlers of a
//! Restate service named after the file (`triage.sap` → `triage`), served over HTTP/2
//! with Restate's SDK. An invocation's body is a JSON object of the function's
//! parameters by name; its output is the result as JSON. Every effect of the call (a
//! model call, an extern, MCP or standard-tool call, `input`, `print`) goes through the
//! invocation's journal, kept in Restate's (`store`), so an attempt on another worker
//! answers the calls an earlier one completed and repeats none of them.
//!
//! Versions: the worker serves one version of the program, named by its identity
//! (`session::cache::program_identity`), at the path `/<identity>/` of its address;
//! Restate pins an invocation to the deployment (the URI) it started on, and a request
//! for another version's path is refused, naming both, never replayed on changed code.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use bytes::Bytes;
use codegen_jit::Host;
use http_body_util::{Either, Full};
use restate_sdk::discovery::{
    Handler, HandlerName, InputPayload, OutputPayload, Service as Discovered, ServiceName,
    ServiceType,
};
use restate_sdk::endpoint::{ContextInternal, Endpoint, ResponseBody};
use restate_sdk::prelude::*;
use restate_sdk::serde::Json;
use restate_sdk::service::Service;
use restate_sdk::service::macro_support::{ServiceBoxFuture, service_definition};
use runtime::TypeDesc;
use serde_json::{Map, Value as JsonValue};
use session::Options;
use session::{CallError, Failure, Function, Loaded};

mod store;

use store::{Op, RestateStore, Write};

/// Exit codes, as `sapc`'s.
const ERRORS: u8 = 1;
const USAGE: u8 = 2;

/// Invocations a connection from Restate carries at once.
const STREAMS_PER_CONNECTION: u32 = 16;

/// What every invocation of the service shares.
struct Shared {
    loaded: Arc<Loaded>,
    host: Arc<Host>,
    exports: HashMap<String, Function>,
}

/// The service: one handler per `export fn`, known only once the program is loaded.
#[derive(Clone)]
struct Procedures(Arc<Shared>);

/// Serves `file`'s exports for Restate at `listen` (`HOST:PORT`) until the process is
/// stopped. Several workers may serve the same address (`SO_REUSEPORT`): Restate's
/// connections are spread over them, and a worker's death moves its invocations' next
/// attempts to the others.
pub fn serve(file: &Path, listen: &str, options: Options) -> u8 {
    let started = Instant::now();
    let options = Options {
        serving: true,
        ..options
    };
    if options.journal.is_some() {
        eprintln!(
            "error: `sapc serve --restate` keeps each invocation's journal in Restate's; `--journal` is for `sapc run`"
        );
        return USAGE;
    }
    let Ok(addr) = listen.parse::<SocketAddr>() else {
        eprintln!(
            "error: `--restate` takes the address to serve at, as HOST:PORT (`127.0.0.1:9080`), not `{listen}`"
        );
        return USAGE;
    };
    let loaded = match session::load_exports(file) {
        Ok(loaded) => loaded,
        Err(Failure::Diagnostics(d)) => {
            d.print();
            return ERRORS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ERRORS;
        }
    };
    let service = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if ServiceName::try_from(service.clone()).is_err() {
        eprintln!(
            "error: a Restate service is named after the program's file, and `{service}` is not a name Restate takes (a letter first, then letters, digits, `.`, `_` or `-`): rename the file"
        );
        return USAGE;
    }
    let identity = match session::cache::Inputs::read(file) {
        Ok(inputs) => session::cache::program_identity(&inputs),
        Err(e) => {
            eprintln!("error: {e}");
            return ERRORS;
        }
    };
    let tokio = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(tokio) => tokio,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ERRORS;
        }
    };
    let program = file.display().to_string();
    if let Err(e) = runtime::telemetry::start(options.otlp.as_deref(), &program, tokio.handle()) {
        eprintln!("error: {e}");
        return USAGE;
    }
    let (host, _runtime) = match loaded.host(&options, &tokio.handle().clone().into(), started) {
        Ok(made) => made,
        Err(e) => {
            eprintln!("error: {e}");
            return ERRORS;
        }
    };
    let exports: HashMap<String, Function> = loaded
        .module
        .exports
        .iter()
        .filter_map(|&id| loaded.function(&host, &loaded.module.functions[id as usize].name))
        .map(|f| (f.name.clone(), f))
        .collect();
    let mut functions: Vec<&Function> = exports.values().collect();
    functions.sort_by(|a, b| a.name.cmp(&b.name));
    let names: Vec<String> = functions.iter().map(|f| f.name.clone()).collect();
    let discovered = match discovery(&service, &functions) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    let procedures = Procedures(Arc::new(Shared {
        loaded: Arc::new(loaded),
        host: Arc::new(host),
        exports,
    }));
    let endpoint = Endpoint::builder()
        .bind(service_definition(procedures, discovered))
        .build();
    tokio.block_on(async move {
        let listener = match listen_shared(addr) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: cannot serve at {addr}: {e}");
                return ERRORS;
            }
        };
        // Listening on every interface, the deployment is registered at one of them.
        let uri = if addr.ip().is_unspecified() {
            format!("http://THIS-MACHINE:{}/{identity}/", addr.port())
        } else {
            format!("http://{addr}/{identity}/")
        };
        eprintln!(
            "serving `{service}` ({}) for Restate, version {identity}\nregister it: curl -X POST http://127.0.0.1:9070/deployments -H 'content-type: application/json' -d '{{\"uri\": \"{uri}\"}}'",
            names.join(", ")
        );
        let identity: Arc<str> = identity.into();
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(e) => {
                    eprintln!("error: cannot watch for SIGTERM: {e}");
                    return ERRORS;
                }
            };
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = tokio::signal::ctrl_c() => break,
                _ = terminate.recv() => break,
            };
            let (stream, _) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    eprintln!("warning: a connection was not accepted: {e}");
                    continue;
                }
            };
            let (endpoint, identity, service) =
                (endpoint.clone(), identity.clone(), service.clone());
            tokio::spawn(async move {
                let answer = hyper::service::service_fn(move |req| {
                    let response = route(&endpoint, &identity, &service, req);
                    async move { Ok::<_, Infallible>(response) }
                });
                let _ = hyper::server::conn::http2::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                // Restate opens another connection when one is full: with a few streams
                // each, its load is over several connections, which the kernel spreads
                // over the workers sharing the address.
                .max_concurrent_streams(STREAMS_PER_CONNECTION)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), answer)
                .await;
            });
        }
        // Stopped: the invocations this worker held are Restate's to retry, on the
        // workers left; the spans not yet exported are sent now.
        eprintln!("stopping: Restate retries the invocations in flight here on the other workers");
        runtime::telemetry::shutdown(None);
        0
    })
}

/// A listener on `addr` that other workers may share (`SO_REUSEPORT`).
fn listen_shared(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

type Body = Either<ResponseBody, Full<Bytes>>;

/// Requests under this version's path go to the SDK; one under another version's is
/// refused, naming both (Restate retries it, and a worker of that version serves it).
fn route(
    endpoint: &Endpoint,
    identity: &str,
    service: &str,
    req: http::Request<hyper::body::Incoming>,
) -> http::Response<Body> {
    let path = req.uri().path().to_owned();
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    if first == identity {
        return endpoint.handle(req).map(Either::Left);
    }
    if path.ends_with("/health") || path == "/health" {
        return text(http::StatusCode::OK, String::new());
    }
    let message = if is_identity(first) {
        format!(
            "this worker serves version {identity} of `{service}`, and the request is for version {first}: an invocation stays with the version it started on, so keep a worker of version {first} serving until its invocations have finished"
        )
    } else {
        format!(
            "a deployment of `{service}` is registered with its version in the path: http://HOST:PORT/{identity}/ (this worker's version), not {path}"
        )
    };
    eprintln!("refused: {message}");
    text(http::StatusCode::CONFLICT, message)
}

fn is_identity(segment: &str) -> bool {
    segment.len() == 32 && segment.bytes().all(|b| b.is_ascii_hexdigit())
}

fn text(status: http::StatusCode, body: String) -> http::Response<Body> {
    let mut response = http::Response::new(Either::Right(Full::new(Bytes::from(body))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    response
}

/// What the SDK tells the server about the service: a handler per export, with its
/// doc comment and the JSON Schemas of its body and its result (for Restate's UI and
/// the OpenAPI it serves).
fn discovery(service: &str, functions: &[&Function]) -> Result<Discovered, String> {
    let handlers = functions
        .iter()
        .map(|f| {
            let h = &f.name;
            Ok(Handler {
                name: HandlerName::try_from(h.clone()).map_err(|_| {
                    format!("`{h}` is not a handler name Restate takes (letters, digits and `_`)")
                })?,
                input: Some(InputPayload {
                    content_type: Some("application/json".into()),
                    json_schema: Some(input_schema(f)),
                    required: Some(false),
                }),
                output: Some(OutputPayload {
                    content_type: Some("application/json".into()),
                    json_schema: Some(output_schema(f)),
                    set_content_type_if_empty: Some(false),
                }),
                ty: None,
                documentation: f.doc.clone(),
                metadata: Default::default(),
                abort_timeout: None,
                inactivity_timeout: None,
                journal_retention: None,
                idempotency_retention: None,
                workflow_completion_retention: None,
                enable_lazy_state: None,
                ingress_private: None,
                retry_policy_initial_interval: None,
                retry_policy_max_interval: None,
                retry_policy_max_attempts: None,
                retry_policy_exponentiation_factor: None,
                retry_policy_on_max_attempts: None,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Discovered {
        ty: ServiceType::Service,
        name: ServiceName::try_from(service.to_owned()).map_err(|e| e.to_string())?,
        handlers,
        documentation: None,
        metadata: Default::default(),
        abort_timeout: None,
        inactivity_timeout: None,
        journal_retention: None,
        idempotency_retention: None,
        enable_lazy_state: None,
        ingress_private: None,
        retry_policy_initial_interval: None,
        retry_policy_max_interval: None,
        retry_policy_max_attempts: None,
        retry_policy_exponentiation_factor: None,
        retry_policy_on_max_attempts: None,
    })
}

/// The body's schema: the parameters by name, an `Option` one not required.
fn input_schema(f: &Function) -> JsonValue {
    let mut schema = llm::schema::arguments_schema(&f.params);
    if let Some(required) = schema.get_mut("required").and_then(JsonValue::as_array_mut) {
        required.retain(|name| {
            !f.params.iter().any(|p| {
                Some(p.name.as_str()) == name.as_str() && matches!(p.ty, TypeDesc::Option(_))
            })
        });
    }
    schema
}

/// The result's schema, as the response holds it (not wrapped in an object).
fn output_schema(f: &Function) -> JsonValue {
    let (schema, wrapped) = llm::schema::value_schema(&f.ret);
    match schema.pointer("/properties/value") {
        Some(inner) if wrapped => inner.clone(),
        _ => schema,
    }
}

impl Service for Procedures {
    type Future = ServiceBoxFuture;

    fn handle(&self, ctx: ContextInternal) -> ServiceBoxFuture {
        let shared = self.0.clone();
        Box::pin(async move {
            let (input, meta) = ctx.input::<Bytes>().await;
            let name = ctx.handler_name().to_owned();
            let context: Context<'_> = (&ctx, meta).into();
            let result = invoke(&shared, &context, &name, input).await;
            ctx.handle_handler_result(result);
            ctx.end();
            Ok(())
        })
    }
}

/// One invocation (or one attempt of it): the journal read back, the call run with it,
/// and its effects recorded as they come.
async fn invoke(
    shared: &Arc<Shared>,
    ctx: &Context<'_>,
    name: &str,
    input: Bytes,
) -> HandlerResult<Bytes> {
    let Some(function) = shared.exports.get(name).cloned() else {
        return Err(
            TerminalError::new_with_code(404, format!("there is no procedure `{name}`")).into(),
        );
    };
    let arguments =
        arguments(&function, &input).map_err(|m| TerminalError::new_with_code(400, m))?;
    // The journal so far: the batches of earlier attempts, until the first that is new.
    let mut batch = 0u32;
    let mut ops = Vec::new();
    loop {
        let ran = Arc::new(AtomicBool::new(false));
        let marker = ran.clone();
        let Json(recorded): Json<Vec<Op>> = ctx
            .run(move || async move {
                marker.store(true, Ordering::SeqCst);
                Ok(Json(Vec::new()))
            })
            .name(format!("b{batch}"))
            .await?;
        batch += 1;
        if ran.load(Ordering::SeqCst) {
            break;
        }
        ops.extend(recorded);
    }
    let records = store::replay(ops);
    let (writes, mut queued) = tokio::sync::mpsc::unbounded_channel::<Write>();
    let store = RestateStore::new(ctx.invocation_id(), writes, &records);
    let journal = Arc::new(journal::Journal::with_store(
        Box::new(store),
        records,
        journal::Policy::Stop,
    ));
    let (loaded, host) = (shared.loaded.clone(), shared.host.clone());
    let call = tokio::task::spawn_blocking(move || {
        codegen_jit::on_big_stack(|| {
            runtime::durable::with_call_scope(Some(journal), || {
                loaded.call_on_this_thread(&host, &function, &arguments, None)
            })
        })
    });
    tokio::pin!(call);
    let outcome = loop {
        tokio::select! {
            Some(first) = queued.recv() => {
                let mut writes = vec![first];
                while let Ok(w) = queued.try_recv() {
                    writes.push(w);
                }
                record(ctx, &mut batch, writes).await?;
            }
            done = &mut call => break done,
        }
    };
    // What was handed over without waiting (a `print`'s record) is recorded before
    // the output.
    let mut rest = Vec::new();
    while let Ok(w) = queued.try_recv() {
        rest.push(w);
    }
    if !rest.is_empty() {
        record(ctx, &mut batch, rest).await?;
    }
    match outcome {
        Ok(Ok(value)) => Ok(Bytes::from(value.to_json().to_string())),
        Ok(Err(CallError::Arguments(m))) => Err(TerminalError::new_with_code(400, m).into()),
        Ok(Err(CallError::Run(e))) => {
            let message = match shared.loaded.located(&e, false) {
                Failure::Located(text) => text,
                other => other.to_string(),
            };
            // A model server that could not be reached, or failed, may answer the next
            // attempt: Restate retries it (with its back-off), and the calls completed
            // before are answered from the journal. Any other failure of the program
            // would fail the same way again.
            if e.kind == Some(runtime::ErrorKind::Provider) {
                return Err(HandlerError::from(message));
            }
            Err(TerminalError::new_with_code(500, message).into())
        }
        Err(e) => Err(TerminalError::new_with_code(500, format!("the call stopped: {e}")).into()),
    }
}

/// Records `writes` as the next batch, then tells whoever waits on them.
async fn record(
    ctx: &Context<'_>,
    batch: &mut u32,
    writes: Vec<Write>,
) -> Result<(), TerminalError> {
    let (ops, waiting): (Vec<Op>, Vec<_>) = writes.into_iter().map(|w| (w.op, w.recorded)).unzip();
    ctx.run(move || async move { Ok(Json(ops)) })
        .name(format!("b{batch}"))
        .await?;
    *batch += 1;
    for done in waiting.into_iter().flatten() {
        let _ = done.send(());
    }
    Ok(())
}

/// The call's arguments: a JSON object of its parameters by name (an empty body for a
/// function that takes none, or only optional ones).
fn arguments(function: &Function, input: &[u8]) -> Result<Map<String, JsonValue>, String> {
    if input.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<JsonValue>(input) {
        Ok(JsonValue::Object(map)) => Ok(map),
        Ok(_) | Err(_) => {
            let params: Vec<String> = function
                .params
                .iter()
                .map(|p| {
                    let optional = matches!(p.ty, TypeDesc::Option(_));
                    format!(
                        "\"{}\"{}",
                        p.name,
                        if optional { " (optional)" } else { "" }
                    )
                })
                .collect();
            Err(format!(
                "the body of a call of `{}` is a JSON object of its parameters by name: {{{}}}",
                function.name,
                params.join(", ")
            ))
        }
    }
}
