//! The deterministic half of the Atom of Thought prelude: plan parsing in the seed's
//! format, validation of every defect, schema, layers, execution and drawings.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use llm::types::{ParamDesc, TypeDesc};
use runtime::Value;
use runtime::atom_plan::{self, ExecOptions, ToolSig, Yields};
use serde_json::{Value as JsonValue, json};

fn binary(name: &str) -> ToolSig {
    let param = |n: &str| ParamDesc {
        name: n.to_owned(),
        doc: None,
        ty: TypeDesc::I64,
    };
    ToolSig {
        name: name.to_owned(),
        doc: Some(format!("{name} two integers")),
        params: vec![param("a"), param("b")],
        ret: TypeDesc::I64,
        compensate: None,
        trusted: Vec::new(),
        yields: Yields::Trusted,
    }
}

fn calculator() -> Vec<ToolSig> {
    let mut tools: Vec<ToolSig> = ["add", "subtract", "multiply", "divide"]
        .into_iter()
        .map(binary)
        .collect();
    tools.push(ToolSig {
        name: "shout".to_owned(),
        doc: None,
        params: vec![ParamDesc {
            name: "text".to_owned(),
            doc: None,
            ty: TypeDesc::String,
        }],
        ret: TypeDesc::String,
        compensate: None,
        trusted: Vec::new(),
        yields: Yields::Trusted,
    });
    tools
}

fn calc(tool: &ToolSig, args: Vec<Value>) -> atom_plan::ToolResult {
    let (Value::Int(a), Value::Int(b)) = (&args[0], &args[1]) else {
        return Err("expected integers".into());
    };
    let r = match tool.name.as_str() {
        "add" => a.checked_add(*b),
        "subtract" => a.checked_sub(*b),
        "multiply" => a.checked_mul(*b),
        "divide" if *b == 0 => return Err("division by zero".into()),
        "divide" => a.checked_div(*b),
        other => return Err(format!("no tool {other}")),
    };
    r.map(Value::Int).ok_or_else(|| "integer overflow".into())
}

/// The seed's worked example, exactly as printed: the final atom has `dependsOn`, the
/// tool atoms have none (it is inferred from the references).
fn seed_plan() -> JsonValue {
    json!({
      "atoms": [
        {"id": 1, "kind": "tool", "name": "add", "input": {"a": 15, "b": 7}},
        {"id": 2, "kind": "tool", "name": "multiply", "input": {"a": "<result_of_1>", "b": 3}},
        {"id": 3, "kind": "tool", "name": "subtract", "input": {"a": "<result_of_2>", "b": 10}},
        {"id": 4, "kind": "final", "name": "report", "dependsOn": [3]}
      ]
    })
}

fn errors(plan: JsonValue) -> Vec<String> {
    match atom_plan::check(&plan, &calculator()) {
        Ok(_) => Vec::new(),
        Err(es) => es.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn the_seed_plan_is_accepted_and_runs() {
    let plan = atom_plan::check(&seed_plan(), &calculator()).expect("valid");
    assert_eq!(
        plan.atoms[1].depends_on,
        vec![1],
        "inferred from <result_of_1>"
    );
    assert!(!plan.atoms[1].depends_written);
    let run =
        atom_plan::execute(&plan, &calculator(), &calc, &ExecOptions::default()).expect("runs");
    assert_eq!(run.answer, json!(56), "(15 + 7) * 3 - 10");
    let order: Vec<(i64, usize)> = run.atoms.iter().map(|a| (a.id, a.layer)).collect();
    assert_eq!(order, vec![(1, 0), (2, 1), (3, 2)]);
}

#[test]
fn every_defect_is_reported_with_its_atom() {
    let es = errors(json!({"atoms": [
        {"id": 1, "kind": "tool", "name": "add", "input": {"a": 1, "b": 2}},
        {"id": 1, "kind": "tool", "name": "add", "input": {"a": 1, "b": 2}},
        {"id": 2, "kind": "tool", "name": "power", "input": {"a": 2, "b": 8}},
        {"id": 3, "kind": "tool", "name": "add", "input": {"a": "seven", "b": 2}},
        {"id": 4, "kind": "tool", "name": "add", "input": {"a": "<result_of_9>", "b": 2}},
        {"id": 5, "kind": "tool", "name": "add", "input": {"a": "<result_of_1>", "b": 2}, "dependsOn": [3]},
        {"id": 6, "kind": "tool", "name": "add", "input": {"a": "<result_of_7>", "b": 1}},
        {"id": 7, "kind": "tool", "name": "add", "input": {"a": "<result_of_6>", "b": 1}},
        {"id": 8, "kind": "tool", "name": "add", "input": {"a": 1}},
        {"id": 10, "kind": "tool", "name": "add", "input": {"a": 1, "b": 2, "c": 3}},
        {"id": 11, "kind": "tool", "name": "add", "input": {"a": "<result_of_12>", "b": 1}},
        {"id": 12, "kind": "tool", "name": "shout", "input": {"text": "hi"}},
        {"id": 13, "kind": "final", "name": "report", "dependsOn": [5]}
    ]}));
    let expect = [
        "atom 1: duplicate atom id",
        "atom 2: unknown tool `power` (the tools are: add, subtract, multiply, divide, shout)",
        "atom 3: argument `a` of `add` must be a i64: expected an integer, found a string",
        "atom 4: depends on atom 9, which is not in the plan",
        "atom 5: uses `<result_of_1>` but atom 1 is not in its `dependsOn`",
        "dependency cycle: 6 -> 7 -> 6",
        "atom 8: `add` needs its argument `b: i64`",
        "atom 10: `add` has no parameter `c` (its parameters are: a, b)",
        "atom 11: argument `a` of `add` is a i64, but atom 12 produces a String",
    ];
    for e in expect {
        assert!(
            es.iter().any(|got| got.contains(e)),
            "missing {e:?} in {es:#?}"
        );
    }
    assert_eq!(es.len(), expect.len(), "{es:#?}");
}

#[test]
fn structural_problems_are_reported_for_every_atom() {
    let es = errors(json!({"atoms": [
        {"kind": "tool", "name": "add"},
        {"id": 2, "kind": "think", "name": "add"},
        {"id": 3, "kind": "tool", "name": "add", "input": [1, 2]},
        "atom"
    ]}));
    assert_eq!(
        es,
        vec![
            "atoms[0] has no integer `id`",
            "atom 2: `kind` is `think`; it must be `tool` or `final`",
            "atom 3: `input` must be an object",
            "atoms[3] is not an object",
        ]
    );
    assert_eq!(
        errors(json!([1])),
        vec!["a plan is an object with an `atoms` array"]
    );
    assert_eq!(errors(json!({"atoms": []})), vec!["the plan has no atoms"]);
}

#[test]
fn a_self_reference_and_two_finals_are_defects() {
    let es = errors(json!({"atoms": [
        {"id": 1, "kind": "tool", "name": "add", "input": {"a": "<result_of_1>", "b": 1}},
        {"id": 2, "kind": "final", "dependsOn": [1]},
        {"id": 3, "kind": "final", "dependsOn": [1]},
        {"id": 4, "kind": "tool", "name": "add", "input": {"a": "<result_of_3>", "b": 1}}
    ]}));
    assert!(
        es.contains(&"atom 1: is on a dependency cycle: 1 -> 1".to_owned()),
        "{es:#?}"
    );
    assert!(
        es.contains(&"the plan has 2 final atoms (2, 3); it may have one".to_owned()),
        "{es:#?}"
    );
    assert!(
        es.contains(
            &"atom 4: depends on the final atom 3; nothing may follow the final atom".to_owned()
        ),
        "{es:#?}"
    );
}

#[test]
fn execution_stops_at_the_failing_atom_with_its_error() {
    let plan = atom_plan::check(
        &json!({"atoms": [
            {"id": 1, "kind": "tool", "name": "subtract", "input": {"a": 5, "b": 5}},
            {"id": 2, "kind": "tool", "name": "divide", "input": {"a": 10, "b": "<result_of_1>"}},
            {"id": 3, "kind": "tool", "name": "add", "input": {"a": "<result_of_2>", "b": 1}},
            {"id": 4, "kind": "final", "dependsOn": [3]}
        ]}),
        &calculator(),
    )
    .expect("valid");
    let called = Mutex::new(Vec::new());
    let host = |t: &ToolSig, args: Vec<Value>| {
        called.lock().unwrap().push(t.name.clone());
        calc(t, args)
    };
    let failure =
        atom_plan::execute(&plan, &calculator(), &host, &ExecOptions::default()).unwrap_err();
    assert_eq!(failure.atom, 2);
    assert_eq!(
        failure.to_string(),
        "atom 2 (`divide`) failed: division by zero"
    );
    assert_eq!(
        *called.lock().unwrap(),
        vec!["subtract", "divide"],
        "atom 3 never runs"
    );
}

#[test]
fn a_failing_atom_is_retried() {
    let plan = atom_plan::check(&seed_plan(), &calculator()).unwrap();
    let failures_left = Mutex::new(2);
    let flaky = |t: &ToolSig, args: Vec<Value>| {
        let mut left = failures_left.lock().unwrap();
        if t.name == "multiply" && *left > 0 {
            *left -= 1;
            return Err("temporarily unavailable".into());
        }
        calc(t, args)
    };
    let options = ExecOptions {
        retries: 2,
        ..ExecOptions::default()
    };
    let run =
        atom_plan::execute(&plan, &calculator(), &flaky, &options).expect("third attempt works");
    assert_eq!(run.answer, json!(56));
    assert_eq!(run.atoms[1].attempts, 3);

    *failures_left.lock().unwrap() = 5;
    let failure = atom_plan::execute(&plan, &calculator(), &flaky, &options).unwrap_err();
    assert_eq!((failure.atom, failure.attempts), (2, 3));
}

#[test]
fn compensations_run_in_reverse_order() {
    let mut tools = calculator();
    for t in &mut tools {
        if t.name == "add" || t.name == "multiply" {
            t.compensate = Some("subtract".into());
        }
    }
    let plan = atom_plan::check(
        &json!({"atoms": [
            {"id": 1, "kind": "tool", "name": "add", "input": {"a": 1, "b": 2}},
            {"id": 2, "kind": "tool", "name": "multiply", "input": {"a": "<result_of_1>", "b": 2}},
            {"id": 3, "kind": "tool", "name": "divide", "input": {"a": "<result_of_2>", "b": 0}}
        ]}),
        &tools,
    )
    .unwrap();
    let log = Mutex::new(Vec::new());
    let host = |t: &ToolSig, args: Vec<Value>| {
        log.lock().unwrap().push(format!("{}{:?}", t.name, args));
        calc(t, args)
    };
    let failure = atom_plan::execute(&plan, &tools, &host, &ExecOptions::default()).unwrap_err();
    assert_eq!(failure.compensated, vec![2, 1]);
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            "add[Int(1), Int(2)]",
            "multiply[Int(3), Int(2)]",
            "divide[Int(6), Int(0)]",
            "subtract[Int(3), Int(2)]",
            "subtract[Int(1), Int(2)]",
        ]
    );
}

#[test]
fn independent_atoms_overlap_in_time() {
    let mut atoms: Vec<JsonValue> = (1..=8)
        .map(|i| json!({"id": i, "kind": "tool", "name": "add", "input": {"a": i, "b": 0}}))
        .collect();
    atoms.push(json!({"id": 9, "kind": "final", "dependsOn": [1, 2, 3, 4, 5, 6, 7, 8]}));
    let plan = atom_plan::check(&json!({ "atoms": atoms }), &calculator()).unwrap();
    assert_eq!(atom_plan::layers(&plan).len(), 2);
    // A tool that waits as model calls and MCP tools do: its task suspends.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let handle = rt.handle().clone();
    let slow = |t: &ToolSig, args: Vec<Value>| {
        runtime::tasks::block_on(&handle, async {
            tokio::time::sleep(Duration::from_millis(200)).await;
        });
        calc(t, args)
    };
    let start = Instant::now();
    let run = atom_plan::execute(&plan, &calculator(), &slow, &ExecOptions::default()).unwrap();
    let parallel = start.elapsed();
    assert_eq!(run.answer, json!([1, 2, 3, 4, 5, 6, 7, 8]));
    // Eight 200 ms atoms one after another take 1.6 s; together, one sleep. The bound
    // is loose: it only has to tell overlap from sequence on a busy machine.
    assert!(parallel < Duration::from_millis(1200), "took {parallel:?}");
}

#[test]
fn the_schema_offers_each_tool_with_its_arguments() {
    let schema = atom_plan::plan_schema(&calculator());
    let variants = &schema["properties"]["atoms"]["items"]["anyOf"];
    assert_eq!(
        variants.as_array().unwrap().len(),
        6,
        "five tools and the final atom"
    );
    assert_eq!(variants[0]["properties"]["name"]["enum"], json!(["add"]));
    assert_eq!(
        variants[0]["properties"]["input"]["properties"]["a"]["anyOf"][1]["pattern"],
        json!("^<result_of_[0-9]+>$")
    );
    // A valid plan validates against the schema.
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&json!({"atoms": [
        {"id": 1, "kind": "tool", "name": "add", "input": {"a": 1, "b": "<result_of_2>"}, "dependsOn": [2]},
        {"id": 2, "kind": "final", "name": "report", "dependsOn": [1]}
    ]})));
    assert!(!validator.is_valid(&json!({"atoms": [
        {"id": 1, "kind": "tool", "name": "power", "input": {"a": 1, "b": 2}, "dependsOn": []}
    ]})));
}

#[test]
fn plans_are_drawn_as_dot_and_mermaid() {
    let plan = atom_plan::check(&seed_plan(), &calculator()).unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    test_support::snapshot::assert_snapshot(&dir, "aot_seed_plan.dot", &atom_plan::to_dot(&plan));
    test_support::snapshot::assert_snapshot(
        &dir,
        "aot_seed_plan.mmd",
        &atom_plan::to_mermaid(&plan),
    );

    // Quotes in arguments cannot break out of a label.
    let quoted = atom_plan::check(
        &json!({"atoms": [{"id": 1, "kind": "tool", "name": "shout", "input": {"text": "say \"hi\"\n"}}]}),
        &calculator(),
    )
    .unwrap();
    assert!(atom_plan::to_dot(&quoted).contains(r#"label="1: shout(text='say \"hi\"\n')""#));
    assert!(
        atom_plan::to_mermaid(&quoted).contains(r#"a1["1: shout(text='say #quot;hi#quot; ')"]"#)
    );
}

mod random_plans {
    use super::*;
    use proptest::prelude::*;

    /// An argument: a literal of some kind or a reference to a (maybe missing) atom.
    fn argument() -> impl Strategy<Value = JsonValue> {
        prop_oneof![
            (-5i64..5).prop_map(|n| json!(n)),
            (0i64..8).prop_map(|r| json!(format!("<result_of_{r}>"))),
            Just(json!("text")),
            Just(json!(null)),
            Just(json!([1, "<result_of_2>"])),
        ]
    }

    fn atom() -> impl Strategy<Value = JsonValue> {
        (
            0i64..8,
            prop_oneof![Just("tool"), Just("final"), Just("other")],
            prop_oneof![Just("add"), Just("divide"), Just("shout"), Just("nope")],
            proptest::collection::btree_map(
                prop_oneof![
                    Just("a".to_owned()),
                    Just("b".to_owned()),
                    Just("text".to_owned())
                ],
                argument(),
                0..3,
            ),
            proptest::option::of(proptest::collection::vec(-1i64..8, 0..3)),
        )
            .prop_map(|(id, kind, name, input, depends)| {
                let mut atom = json!({ "id": id, "kind": kind, "name": name, "input": input });
                if let Some(d) = depends {
                    atom["dependsOn"] = json!(d);
                }
                atom
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Any plan is either rejected with located defects or runs to an answer or an
        /// atom's failure: no panic, no hang.
        #[test]
        fn any_plan_is_rejected_or_runs(atoms in proptest::collection::vec(atom(), 0..8)) {
            let plan = json!({ "atoms": atoms });
            let tools = calculator();
            match atom_plan::check(&plan, &tools) {
                Err(errors) => prop_assert!(!errors.is_empty()),
                Ok(plan) => {
                    let _ = atom_plan::to_dot(&plan);
                    let _ = atom_plan::to_mermaid(&plan);
                    let layers = atom_plan::layers(&plan);
                    prop_assert_eq!(layers.iter().map(Vec::len).sum::<usize>(), plan.atoms.len());
                    let text = |t: &ToolSig, args: Vec<Value>| -> atom_plan::ToolResult {
                        if t.name == "shout" { Ok(args[0].clone()) } else { calc(t, args) }
                    };
                    let _ = atom_plan::execute(&plan, &tools, &text, &ExecOptions::default());
                }
            }
        }
    }
}

/// A tool of strings: `name(params…) -> String`, with its trusted parameters and what
/// its result yields.
fn text_tool(name: &str, params: &[&str], trusted: &[&str], yields: Yields) -> ToolSig {
    ToolSig {
        name: name.to_owned(),
        doc: None,
        params: params
            .iter()
            .map(|p| ParamDesc {
                name: (*p).to_owned(),
                doc: None,
                ty: TypeDesc::String,
            })
            .collect(),
        ret: TypeDesc::String,
        compensate: None,
        trusted: trusted.iter().map(|t| (*t).to_owned()).collect(),
        yields,
    }
}

#[test]
fn a_result_carrying_untrusted_data_may_not_fill_a_trusted_parameter() {
    // Found by AgentDojo (#40): a plan read a bill and paid the account it named.
    let tools = vec![
        text_tool("read_bill", &["name"], &[], Yields::Untrusted),
        text_tool("pay", &["to", "memo"], &["to"], Yields::Trusted),
        text_tool("upper", &["text"], &[], Yields::FromArguments),
        text_tool("own_account", &[], &[], Yields::Trusted),
    ];
    let check = |atoms: JsonValue| -> Vec<String> {
        match atom_plan::check(&json!({ "atoms": atoms }), &tools) {
            Ok(_) => Vec::new(),
            Err(errors) => errors.iter().map(ToString::to_string).collect(),
        }
    };
    let read = json!({"id": 1, "kind": "tool", "name": "read_bill", "input": {"name": "may"}});
    // Straight from the bill, and through a pure function: both refused, naming the source.
    let direct = check(
        json!([read, {"id": 2, "kind": "tool", "name": "pay", "input": {"to": "<result_of_1>", "memo": "x"}}]),
    );
    assert_eq!(direct.len(), 1, "{direct:?}");
    assert!(direct[0].starts_with("atom 2: `pay(to:)` is a `trusted` parameter, and `<result_of_1>` carries untrusted data (from `read_bill`)"), "{direct:?}");
    let laundered = check(json!([read,
        {"id": 2, "kind": "tool", "name": "upper", "input": {"text": "<result_of_1>"}},
        {"id": 3, "kind": "tool", "name": "pay", "input": {"to": "<result_of_2>", "memo": "x"}}]));
    assert_eq!(laundered.len(), 1, "{laundered:?}");
    assert!(laundered[0].contains("(from `read_bill`)"), "{laundered:?}");
    // Untrusted data in a parameter that is not trusted, and a trusted tool's result in
    // a trusted one, are the plan's to use.
    assert!(check(json!([read,
        {"id": 2, "kind": "tool", "name": "own_account", "input": {}},
        {"id": 3, "kind": "tool", "name": "upper", "input": {"text": "<result_of_2>"}},
        {"id": 4, "kind": "tool", "name": "pay", "input": {"to": "<result_of_3>", "memo": "<result_of_1>"}}])).is_empty());
    // Nested inside a larger argument, too.
    let nested = check(
        json!([read, {"id": 2, "kind": "tool", "name": "pay", "input": {"to": ["<result_of_1>"], "memo": "x"}}]),
    );
    assert!(
        nested.iter().any(|e| e.contains("carries untrusted data")),
        "{nested:?}"
    );
}
