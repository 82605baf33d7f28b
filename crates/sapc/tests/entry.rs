//! What stands between `sapc run` and a program's end that is not the program's own
//! code: `main`'s arguments from the command line, the externs the host serves, and
//! the stack deep recursion stops at.

mod common;

use common::{fails, ok, program, sapc, stderr, stdout};

#[test]
fn recursion_past_a_raised_depth_limit_stops_where_the_stack_ends() {
    let (_dir, path) = program(
        "deep",
        "fn down(n: i64) -> i64 { 1 + down(n + 1) }\n\
         fn main() {\n    print(to_string(down(0)))\n}\n",
    );
    let (_task_dir, in_task) = program(
        "deep_task",
        "fn down(n: i64) -> i64 { 1 + down(n + 1) }\n\
         fn main() {\n    let all = parallel for i in [1, 2] { down(i) }\n    print(to_string(len(all)))\n}\n",
    );
    for file in [&path, &in_task] {
        for engine in ["jit", "eval"] {
            let out = sapc(&[
                "run",
                file.to_str().unwrap(),
                "--engine",
                engine,
                "--max-depth",
                "4000000000",
            ]);
            fails(
                &out,
                1,
                "calls: as deep as the program's stack holds (`--max-depth` is 4000000000)",
            );
            assert!(stderr(&out).contains("in `down`"), "{}", stderr(&out));
        }
    }
}

#[test]
fn main_takes_the_command_line_after_a_double_dash() {
    let (_dir, rest) = program(
        "args",
        "fn main(args: List<String>) {\n    for a in args {\n        print(\"[\" + a + \"]\")\n    }\n}\n",
    );
    let (_typed_dir, typed) = program(
        "typed_args",
        "fn main(ctx: Context, name: String, times: i64, tags: List<String>) {\n    \
         print(name + \" x\" + to_string(times) + \" \" + to_string(len(tags)))\n}\n",
    );
    let (rest, typed) = (rest.to_str().unwrap(), typed.to_str().unwrap());
    for engine in ["jit", "eval"] {
        let run = |file: &str, args: &[&str]| {
            let mut all = vec!["run", file, "--engine", engine, "--"];
            all.extend_from_slice(args);
            sapc(&all)
        };
        let out = run(rest, &["one", "two words", "--stats"]);
        ok(&out);
        assert_eq!(stdout(&out), "[one]\n[two words]\n[--stats]\n");
        let out = run(typed, &["Ada", "3", "a", "b"]);
        ok(&out);
        assert_eq!(stdout(&out), "Ada x3 2\n");
        let takes =
            "`main` takes (name: String, times: i64, tags: List<String>) from the command line";
        fails(
            &run(typed, &["Ada"]),
            1,
            &format!("no argument for `times`: {takes}"),
        );
        fails(
            &run(typed, &["Ada", "three"]),
            1,
            "the argument `three` for `times` is not a i64",
        );
    }
    let out = sapc(&["run", rest]);
    ok(&out);
    assert_eq!(stdout(&out), "");
    let (_extra_dir, one) = program("one_arg", "fn main(name: String) {\n    print(name)\n}\n");
    fails(
        &sapc(&["run", one.to_str().unwrap(), "--", "a", "b"]),
        1,
        "an argument too many (`b`): `main` takes (name: String)",
    );
}

#[test]
fn an_extern_the_host_cannot_serve_is_reported_at_its_declaration() {
    let (_dir, unknown) = program(
        "unknown_extern",
        "fn main() {\n    print(\"hi\")\n}\nextern fn mystery(x: i32) -> i32;\n",
    );
    let out = sapc(&["run", unknown.to_str().unwrap()]);
    fails(&out, 1, "provides no extern of that name");
    assert!(
        stderr(&out).contains("unknown_extern.sap:4:1") && !stderr(&out).contains("call stack"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "", "nothing ran");
    let (_dir, mismatch) = program(
        "extern_mismatch",
        "extern fn add(x: String, y: i32) -> i32;\nfn main() {\n    print(\"hi\")\n}\n",
    );
    let out = sapc(&["run", mismatch.to_str().unwrap()]);
    fails(
        &out,
        1,
        "`extern fn add` is declared as (String, i32) -> i32",
    );
    assert!(
        stderr(&out).contains("extern_mismatch.sap:1:1"),
        "{}",
        stderr(&out)
    );
}
