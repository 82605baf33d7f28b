//! The runtime's own cost per LLM call, and concurrency (issue targets: ≤ 20 µs per call
//! for a 2 KB context, network excluded; 1,000 concurrent calls against a server with
//! 100 ms latency in ≤ 1.1 s). Run with `cargo bench -p runtime --bench overhead`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use http_transport::HttpConfig;
use llm::Provider;
use llm::types::{EnumDesc, FieldDesc, StructDesc, TypeDesc, VariantDesc};
use providers::openai::{OpenAiConfig, OpenAiProvider};
use runtime::{CallSite, Context, Runtime, RuntimeConfig, Value};
use serde_json::json;
use test_support::http::{MockServer, Reply};

fn analysis() -> TypeDesc {
    TypeDesc::Struct(Arc::new(StructDesc {
        name: "Analysis".to_owned(),
        doc: Some("What the model found in the code.".to_owned()),
        fields: vec![
            FieldDesc {
                name: "bugs".to_owned(),
                doc: Some("One sentence per bug.".to_owned()),
                ty: TypeDesc::List(Box::new(TypeDesc::String)),
            },
            FieldDesc {
                name: "severity".to_owned(),
                doc: None,
                ty: TypeDesc::Enum(Arc::new(EnumDesc {
                    name: "Severity".to_owned(),
                    doc: None,
                    variants: ["Low", "Medium", "High"]
                        .iter()
                        .map(|v| VariantDesc {
                            name: (*v).to_owned(),
                            doc: None,
                        })
                        .collect(),
                })),
            },
        ],
    }))
}

/// About 2 KB of context: instructions in two frames and a data value.
fn context_2kb() -> Context {
    let main = Context::new();
    main.instruct("You are a code analysis expert. Be precise and brief.");
    let callee = main.child();
    for i in 0..16 {
        callee.instruct(&format!(
            "Rule {i}: check edge cases, error handling, overflow and null inputs carefully."
        ));
    }
    callee.inject_value(
        Value::str(&"fn div(a, b): return a / b\n".repeat(24)),
        "analyze_code",
        "code",
    );
    callee
}

fn per_call_overhead(c: &mut Criterion) {
    let ctx = context_2kb();
    let size = ctx.render().len();
    assert!((1900..2600).contains(&size), "context is {size} bytes");
    let provider = OpenAiProvider::new(OpenAiConfig {
        api_key: Some("sk-bench".to_owned()),
        ..OpenAiConfig::new("http://127.0.0.1:9/v1", "bench")
    })
    .unwrap();
    let provider: Arc<OpenAiProvider> = Arc::new(provider);
    let rt = Runtime::new(provider.clone(), RuntimeConfig::default());
    let ty = analysis();
    let completion = json!({
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "{\"bugs\": [\"Division by zero when b is 0.\", \"No input validation.\"], \"severity\": \"High\"}" }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 600, "completion_tokens": 30 },
    })
    .to_string();
    eprintln!("context: {size} bytes");
    c.bench_function("runtime/per_call_overhead_2kb_context", |b| {
        b.iter(|| {
            // Render and build the request, serialize the body as sent, parse the
            // provider's answer, repair, validate against the schema, decode.
            let (request, shape) = rt.produce_request(black_box(&ctx), "analyze_code", &ty);
            let body = provider.body(&request).to_string();
            let parsed: serde_json::Value = serde_json::from_str(black_box(&completion)).unwrap();
            let response = providers::openai::parse_completion(&parsed).unwrap();
            let value = rt.interpret(&response.text, &shape).unwrap();
            black_box((body.len(), value))
        })
    });
}

fn concurrent_calls(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = tokio.block_on(MockServer::start(|_, _| {
        Reply::json(json!({
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": "{\"value\": 1}" }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 10, "completion_tokens": 2 },
        }))
        .delayed(Duration::from_millis(100))
    }));
    let mut group = c.benchmark_group("runtime");
    group.sample_size(10);
    group.bench_function("1000_concurrent_calls_100ms_latency", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let provider: Arc<dyn Provider> = Arc::new(
                    OpenAiProvider::new(OpenAiConfig {
                        http: HttpConfig {
                            concurrency: Some(1000),
                            ..HttpConfig::default()
                        },
                        ..OpenAiConfig::new(format!("{}/v1", server.url()), "bench")
                    })
                    .unwrap(),
                );
                let rt = Arc::new(Runtime::new(provider, RuntimeConfig::default()));
                let started = Instant::now();
                tokio.block_on(async {
                    let tasks: Vec<_> = (0..1000)
                        .map(|i| {
                            let rt = rt.clone();
                            tokio::spawn(async move {
                                let ctx = Context::new();
                                ctx.instruct(&format!("item {i}"));
                                let site = CallSite {
                                    function: "score".to_owned(),
                                    ..CallSite::default()
                                };
                                rt.produce(&site, &ctx, "score", &TypeDesc::I64).await
                            })
                        })
                        .collect();
                    for t in tasks {
                        t.await.unwrap().unwrap();
                    }
                });
                total += started.elapsed();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, per_call_overhead, concurrent_calls);
criterion_main!(benches);
