//! Deterministic programs, side by side in one run: the Cranelift JIT, the reference
//! evaluator, CPython 3 running the same program, and the same program written in Rust.
//! Issue targets: the JIT ≥ 30× faster than CPython and within 2× of Rust.
//!
//! Run with `cargo bench -p codegen-jit --bench programs`; prints a Markdown table.
//! Each time is the best of several runs (the evaluator: one run), compile time excluded
//! for the JIT (shown apart).

use std::hint::black_box;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use codegen_jit::{Evaluator, Externs, Host, Limits, on_big_stack};

#[global_allocator]
static ALLOC: codegen_jit::Allocator = codegen_jit::Allocator;

struct Program {
    name: &'static str,
    sap: &'static str,
    python: &'static str,
    rust: fn() -> i64,
    /// Whether to time the reference evaluator too. It copies a list on every in-place
    /// `set` while a read of it is still held in the same statement, which makes the
    /// dynamic-programming program quadratic there (hours at this size).
    evaluator: bool,
}

const FIB: &str = "fn fib(n: i64) -> i64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }\nfn main() -> i64 { fib(30) }\n";
const LOOP: &str = "fn main() -> i64 {\n    let acc: i64 = 0\n    let i: i64 = 0\n    while i < 25000000 {\n        acc = (acc * 31 + i) % 1000003\n        i += 1\n    }\n    acc\n}\n";
const TOPO: &str = "fn main() -> i64 {\n    let deps: List<List<i64>> = []\n    let i: i64 = 0\n    while i < 100000 {\n        if i == 0 { deps = push(deps, []) } else { deps = push(deps, [i - 1, i / 2]) }\n        i += 1\n    }\n    let layers = toposort(deps)\n    len(layers)\n}\n";
const LIST: &str = "fn main() -> i64 {\n    let xs: List<i64> = []\n    let i: i64 = 0\n    while i < 1000000 {\n        xs = push(xs, i)\n        i += 1\n    }\n    let total: i64 = 0\n    for x in xs { total += x }\n    total\n}\n";

const DP: &str = "fn main() -> i64 {\n    let n = 1000000\n    let dp: List<i64> = []\n    let i = 0\n    while i < n { dp = push(dp, 0); i += 1 }\n    dp = set(dp, 1, 1)\n    i = 2\n    while i < n {\n        dp = set(dp, i, (dp[i - 1] + dp[i - 2]) % 1000000007)\n        i += 1\n    }\n    dp[n - 1]\n}\n";

const PY_FIB: &str =
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nresult = fib(30)\n";
const PY_LOOP: &str = "acc = 0\ni = 0\nwhile i < 25000000:\n    acc = (acc * 31 + i) % 1000003\n    i += 1\nresult = acc\n";
const PY_TOPO: &str = "deps = [[] if i == 0 else [i - 1, i // 2] for i in range(100000)]\nindeg = [len(d) for d in deps]\nrev = [[] for _ in deps]\nfor n, ds in enumerate(deps):\n    for d in ds:\n        rev[d].append(n)\nlayer = [n for n in range(len(deps)) if indeg[n] == 0]\nlayers = []\nwhile layer:\n    layers.append(layer)\n    nxt = []\n    for n in layer:\n        for m in rev[n]:\n            indeg[m] -= 1\n            if indeg[m] == 0:\n                nxt.append(m)\n    nxt.sort()\n    layer = nxt\nresult = len(layers)\n";
const PY_DP: &str = "n = 1000000\ndp = []\ni = 0\nwhile i < n:\n    dp.append(0)\n    i += 1\ndp[1] = 1\ni = 2\nwhile i < n:\n    dp[i] = (dp[i - 1] + dp[i - 2]) % 1000000007\n    i += 1\nresult = dp[n - 1]\n";
const PY_LIST: &str = "xs = []\ni = 0\nwhile i < 1000000:\n    xs.append(i)\n    i += 1\ntotal = 0\nfor x in xs:\n    total += x\nresult = total\n";

/// Checked arithmetic, like the sap program's.
fn rust_fib() -> i64 {
    fn fib(n: i64) -> i64 {
        if n < 2 {
            n
        } else {
            fib(black_box(n.checked_sub(1).unwrap()))
                .checked_add(fib(black_box(n.checked_sub(2).unwrap())))
                .unwrap()
        }
    }
    fib(black_box(30))
}

fn rust_loop() -> i64 {
    let mut acc: i64 = 0;
    let mut i: i64 = 0;
    while i < black_box(25_000_000) {
        acc = (acc.checked_mul(31).unwrap().checked_add(i).unwrap()) % 1_000_003;
        i += 1;
    }
    acc
}

fn rust_topo() -> i64 {
    let n = black_box(100_000usize);
    let deps: Vec<Vec<usize>> = (0..n)
        .map(|i| if i == 0 { vec![] } else { vec![i - 1, i / 2] })
        .collect();
    let mut indeg: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut rev = vec![Vec::new(); n];
    for (node, ds) in deps.iter().enumerate() {
        for &d in ds {
            rev[d].push(node);
        }
    }
    let mut layer: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut layers = 0;
    while !layer.is_empty() {
        layers += 1;
        let mut next = Vec::new();
        for &node in &layer {
            for &m in &rev[node] {
                indeg[m] -= 1;
                if indeg[m] == 0 {
                    next.push(m);
                }
            }
        }
        next.sort_unstable();
        layer = next;
    }
    layers
}

/// Checked additions, like the sap program's (and `rust_loop`'s).
fn rust_list() -> i64 {
    let mut xs = Vec::new();
    let mut i: i64 = 0;
    while i < black_box(1_000_000) {
        xs.push(i);
        i = i.checked_add(1).unwrap();
    }
    let mut total: i64 = 0;
    for x in &xs {
        total = total.checked_add(*x).unwrap();
    }
    total
}

/// Checked arithmetic and bounds-checked indexing, like the sap program's.
fn rust_dp() -> i64 {
    let n = black_box(1_000_000usize);
    let mut dp: Vec<i64> = Vec::new();
    let mut i = 0;
    while i < n {
        dp.push(0);
        i += 1;
    }
    dp[1] = 1;
    let mut i = 2;
    while i < n {
        dp[i] = dp[i - 1].checked_add(dp[i - 2]).unwrap() % 1_000_000_007;
        i += 1;
    }
    dp[n - 1]
}

/// The same with wrapping arithmetic, which lets Rust vectorize the sum: printed apart.
fn rust_list_unchecked() -> i64 {
    let mut xs = Vec::new();
    for i in 0..black_box(1_000_000i64) {
        xs.push(i);
    }
    xs.iter().sum()
}

fn module(source: &str) -> Arc<ir::Module> {
    let mut db = hir::Database::default();
    db.add_file("bench.sap", source);
    Arc::new(lower::lower_workspace(&db).expect("the benchmark program checks"))
}

/// Runs of the JIT and of Rust; the best counts. The machine is shared: a few ms programs
/// need many runs for the best to be stable.
const RUNS: usize = 15;

fn best(runs: usize, mut f: impl FnMut() -> i64) -> (Duration, i64) {
    let mut best = Duration::MAX;
    let mut value = 0;
    for _ in 0..runs {
        let started = Instant::now();
        value = f();
        best = best.min(started.elapsed());
    }
    (best, value)
}

/// CPython's own time for the program (interpreter start-up excluded).
fn python(code: &str, runs: usize) -> Option<(Duration, i64)> {
    let script = format!(
        "import time\nbest = None\nfor _ in range({runs}):\n    t = time.perf_counter()\n{}\n    e = time.perf_counter() - t\n    best = e if best is None or e < best else best\nprint(best, result)\n",
        code.lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace();
    let seconds: f64 = parts.next()?.parse().ok()?;
    let result: i64 = parts.next()?.parse().ok()?;
    Some((Duration::from_secs_f64(seconds), result))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        // `cargo test` builds and lists benches; nothing to list here.
        return;
    }
    let programs = [
        Program {
            name: "fib(30), recursive",
            sap: FIB,
            python: PY_FIB,
            rust: rust_fib,
            evaluator: true,
        },
        Program {
            name: "integer loop, 25M iterations (10^8 operations)",
            sap: LOOP,
            python: PY_LOOP,
            rust: rust_loop,
            evaluator: true,
        },
        Program {
            name: "toposort of a 100,000-node DAG (building it included)",
            sap: TOPO,
            python: PY_TOPO,
            rust: rust_topo,
            evaluator: true,
        },
        Program {
            name: "build and sum a 10^6-element list",
            sap: LIST,
            python: PY_LIST,
            rust: rust_list,
            evaluator: true,
        },
        Program {
            name: "dynamic programming over 10^6 elements (`dp = set(dp, i, …)`)",
            sap: DP,
            python: PY_DP,
            rust: rust_dp,
            evaluator: false,
        },
    ];
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| program | JIT | JIT compile | evaluator | CPython 3 | Rust | CPython / JIT | JIT / Rust |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for p in programs {
        let module = module(p.sap);
        let host = Host::new(
            module.clone(),
            None,
            tokio.handle().clone(),
            Externs::default(),
            Limits::default(),
        );
        let started = Instant::now();
        let program = codegen_jit::compile(module).expect("compiles");
        let compile = started.elapsed();
        let value_of = |v: runtime::Value| {
            if let runtime::Value::Int(n) = v {
                n
            } else {
                -1
            }
        };
        let (jit, jit_value) =
            on_big_stack(|| best(RUNS, || value_of(program.run_main(&host).expect("runs"))));
        let evaluated = p.evaluator.then(|| {
            on_big_stack(|| {
                best(1, || {
                    value_of(Evaluator::new(&host).run_main().expect("runs"))
                })
            })
        });
        let (rust, rust_value) = best(RUNS, p.rust);
        let py = python(p.python, 3);
        if let Some((_, eval_value)) = evaluated {
            assert_eq!(
                jit_value, eval_value,
                "{}: the JIT and the evaluator disagree",
                p.name
            );
        }
        assert_eq!(
            jit_value, rust_value,
            "{}: the JIT and Rust disagree",
            p.name
        );
        let (py_time, py_ratio) = match py {
            Some((t, v)) => {
                assert_eq!(v, jit_value, "{}: CPython disagrees", p.name);
                (
                    ms(t),
                    format!("{:.0}×", t.as_secs_f64() / jit.as_secs_f64()),
                )
            }
            None => ("(no python3)".to_owned(), "-".to_owned()),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.2}× |",
            p.name,
            ms(jit),
            ms(compile),
            evaluated.map_or("—".to_owned(), |(t, _)| ms(t)),
            py_time,
            ms(rust),
            py_ratio,
            jit.as_secs_f64() / rust.as_secs_f64()
        );
    }
    let (unchecked, _) = best(RUNS, rust_list_unchecked);
    println!(
        "\nRust building and summing the list with wrapping (unchecked) additions: {}",
        ms(unchecked)
    );
}
