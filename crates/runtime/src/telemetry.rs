//! OpenTelemetry export (`sapc run --otlp URL`, or `OTEL_EXPORTER_OTLP_ENDPOINT`): one
//! span per call of a function with a context, per model call and per extern call, over
//! OTLP/HTTP (protobuf), with the `opentelemetry` SDK and the `opentelemetry-otlp`
//! exporter on our own reqwest client.
//!
//! - The run is a root span, `sap run FILE`.
//! - A function's span starts when its context frame is entered ([`Context::enter`])
//!   and ends when the frame is dropped, i.e. when the function returns; its parent is
//!   the span of the nearest named frame below it.
//! - A model call's span (`chat MODEL`, kind client) follows the GenAI semantic
//!   conventions: `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
//!   `gen_ai.usage.input_tokens` / `output_tokens`, `gen_ai.response.finish_reasons`,
//!   `error.type`; sap adds the call's kind, site, attempts and repairs. Prompts and
//!   answers are not exported (they may hold data the run was given; `--trace` has them).
//! - An extern call's span (`execute_tool NAME`) has `gen_ai.tool.name`; its parent is
//!   the innermost function span open on the calling thread.
//!
//! Nothing is exported, and nothing costs more than a check of one static, when no
//! endpoint is configured.
//!
//! [`Context::enter`]: crate::context::Context::enter

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context as OtelContext, KeyValue};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};

pub use opentelemetry::Context as SpanContext;

struct Telemetry {
    provider: SdkTracerProvider,
    tracer: Tracer,
    /// The run's span: the parent of every span with no other.
    root: OtelContext,
}

static ACTIVE: OnceLock<Telemetry> = OnceLock::new();

/// Whether spans are being exported.
#[inline]
pub fn active() -> bool {
    ACTIVE.get().is_some()
}

/// The exporter's HTTP client: our reqwest client, run on the program's tokio runtime
/// (the SDK's batch processor exports from a thread of its own, outside any runtime).
#[derive(Debug)]
struct Client {
    http: reqwest::Client,
    tokio: tokio::runtime::Handle,
}

impl HttpClient for Client {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let http = self.http.clone();
        let task = self.tokio.spawn(async move {
            let request = reqwest::Request::try_from(request)?;
            let response = http.execute(request).await?;
            let mut reply = Response::builder().status(response.status());
            for (name, value) in response.headers() {
                reply = reply.header(name, value);
            }
            let body = response.bytes().await?;
            Ok::<_, HttpError>(reply.body(body)?)
        });
        Box::pin(async move { task.await.map_err(|e| Box::new(e) as HttpError)? })
    }
}

/// Where to export to.
pub struct OtlpConfig {
    /// The collector's base URL (`http://localhost:4318`; `/v1/traces` is added unless
    /// the URL already ends with it), or `None` for the `OTEL_EXPORTER_OTLP_*`
    /// environment variables.
    pub endpoint: Option<String>,
    /// The program, for the run's span and the resource.
    pub program: String,
    pub tokio: tokio::runtime::Handle,
}

/// Whether spans are to be exported: an endpoint was given (`--otlp`), or the
/// `OTEL_EXPORTER_OTLP_*` environment variables name one.
pub fn wanted(endpoint: Option<&str>) -> bool {
    endpoint.is_some()
        || [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|u| !u.is_empty()))
}

/// Starts exporting for this process when an endpoint is wanted ([`wanted`]): the
/// front ends' one call. `program` names the run's span and the resource.
pub fn start(
    endpoint: Option<&str>,
    program: &str,
    tokio: &tokio::runtime::Handle,
) -> Result<(), String> {
    if !wanted(endpoint) {
        return Ok(());
    }
    let _entered = tokio.enter();
    install(OtlpConfig {
        endpoint: endpoint.map(str::to_owned),
        program: program.to_owned(),
        tokio: tokio.clone(),
    })
}

/// Starts exporting for this process. Fails on a malformed endpoint; a collector that
/// cannot be reached is reported by the SDK when it exports, and never stops the run.
pub fn install(config: OtlpConfig) -> Result<(), String> {
    // rustls needs a process-wide crypto provider; a second install is a no-op.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("cannot make the OTLP HTTP client: {e}"))?;
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(Client {
            http,
            tokio: config.tokio,
        })
        .with_protocol(Protocol::HttpBinary);
    if let Some(url) = &config.endpoint {
        let url = url.trim_end_matches('/');
        let url = if url.ends_with("/v1/traces") {
            url.to_owned()
        } else {
            format!("{url}/v1/traces")
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "`--otlp {url}`: the OTLP endpoint must be an http:// or https:// URL (OTLP/HTTP, e.g. http://localhost:4318)"
            ));
        }
        builder = builder.with_endpoint(url);
    }
    let exporter = builder
        .build()
        .map_err(|e| format!("cannot export to OTLP: {e}"))?;
    let resource = Resource::builder()
        .with_service_name("sap")
        .with_attribute(KeyValue::new("sap.program", config.program.clone()))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "sap");
    let span = tracer
        .span_builder(format!("sap run {}", config.program))
        .with_kind(SpanKind::Internal)
        .with_attributes([KeyValue::new("sap.program", config.program)])
        .start(&tracer);
    let root = OtelContext::new().with_span(span);
    ACTIVE
        .set(Telemetry {
            provider,
            tracer,
            root,
        })
        .map_err(|_| "OpenTelemetry export is already set up in this process".to_owned())
}

/// Ends the run's span, exports what is left and stops. `failed` marks the run's span
/// as an error.
pub fn shutdown(failed: Option<&str>) {
    let Some(t) = ACTIVE.get() else { return };
    let span = t.root.span();
    if let Some(message) = failed {
        span.set_status(Status::error(message.to_owned()));
    }
    span.end();
    let _ = t.provider.shutdown();
}

/// The span of a call of `function`, a function with a context, under `parent` (the
/// run's span when `None`). It ends when the returned context is dropped.
pub(crate) fn function_span(function: &str, parent: Option<&OtelContext>) -> Option<OtelContext> {
    let t = ACTIVE.get()?;
    let parent = parent.unwrap_or(&t.root);
    let span = t
        .tracer
        .span_builder(function.to_owned())
        .with_kind(SpanKind::Internal)
        .with_attributes([KeyValue::new("code.function.name", function.to_owned())])
        .start_with_context(&t.tracer, parent);
    Some(parent.with_span(span))
}

/// A span in progress: attributes are added as the call goes, and it ends when dropped.
pub struct CallSpan(Option<OtelContext>);

impl CallSpan {
    pub fn none() -> CallSpan {
        CallSpan(None)
    }

    pub fn set(&self, key: &'static str, value: impl Into<opentelemetry::Value>) {
        if let Some(cx) = &self.0 {
            cx.span().set_attribute(KeyValue::new(key, value));
        }
    }

    /// Marks the call failed: `error.type` and an error status.
    pub fn fail(&self, kind: &str, message: &str) {
        if let Some(cx) = &self.0 {
            let span = cx.span();
            span.set_attribute(KeyValue::new("error.type", kind.to_owned()));
            span.set_status(Status::error(message.to_owned()));
        }
    }
}

impl Drop for CallSpan {
    fn drop(&mut self) {
        if let Some(cx) = &self.0 {
            cx.span().end();
        }
    }
}

/// The span of a model call (GenAI semantic conventions), under `parent`.
pub(crate) fn llm_span(
    parent: Option<&OtelContext>,
    provider: &str,
    model: &str,
    attributes: Vec<KeyValue>,
) -> CallSpan {
    let Some(t) = ACTIVE.get() else {
        return CallSpan::none();
    };
    let parent = parent.unwrap_or(&t.root);
    let mut all = vec![
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("gen_ai.provider.name", provider.to_owned()),
        KeyValue::new("gen_ai.output.type", "json"),
    ];
    if !model.is_empty() {
        all.push(KeyValue::new("gen_ai.request.model", model.to_owned()));
    }
    all.extend(attributes);
    let name = if model.is_empty() {
        "chat".to_owned()
    } else {
        format!("chat {model}")
    };
    let span = t
        .tracer
        .span_builder(name)
        .with_kind(SpanKind::Client)
        .with_attributes(all)
        .start_with_context(&t.tracer, parent);
    CallSpan(Some(parent.with_span(span)))
}

/// The span of an extern call, under `parent` (the innermost function span open on the
/// calling thread: `context::innermost_span`), or the run's span.
pub fn tool_span(parent: Option<SpanContext>, tool: &str, attributes: Vec<KeyValue>) -> CallSpan {
    let Some(t) = ACTIVE.get() else {
        return CallSpan::none();
    };
    let parent = parent.unwrap_or_else(|| t.root.clone());
    let mut all = vec![
        KeyValue::new("gen_ai.operation.name", "execute_tool"),
        KeyValue::new("gen_ai.tool.name", tool.to_owned()),
    ];
    all.extend(attributes);
    let span = t
        .tracer
        .span_builder(format!("execute_tool {tool}"))
        .with_kind(SpanKind::Internal)
        .with_attributes(all)
        .start_with_context(&t.tracer, &parent);
    CallSpan(Some(parent.with_span(span)))
}

pub use opentelemetry::KeyValue as Attribute;
