//! The journal's own tests: keys in program order, resuming, divergence, unfinished
//! calls, and files that are not journals.

use super::*;

fn call<'a>(position: &'a [u32], request: &'a str) -> Call<'a> {
    Call {
        kind: Kind::Llm,
        position,
        name: "judge",
        site: "a.sap:3:5",
        path: "main > judge",
        request,
    }
}

/// A journal's path in a folder of the test's own, removed with the folder.
fn temp(name: &str) -> (test_support::Scratch, PathBuf) {
    let dir = test_support::Scratch::new(&format!("journal-{name}"));
    let path = dir.join("run.journal");
    (dir, path)
}

#[test]
fn positions_sort_as_the_program_runs() {
    let mut keys = [
        key(&[2]),
        key(&[1, 0, 3]),
        key(&[1]),
        key(&[1, 1]),
        key(&[10]),
    ];
    keys.sort();
    let shown: Vec<String> = keys.iter().map(|k| position_of(k)).collect();
    assert_eq!(shown, ["1", "1.0.3", "1.1", "2", "10"]);
    assert_eq!(parse_position("1.0.3"), Some(key(&[1, 0, 3])));
    assert_eq!(parse_position("1.x"), None);
}

#[test]
fn a_second_run_is_answered_from_the_journal() {
    let (_dir, path) = temp("resume");
    {
        let j = Journal::open(&path, "/p.sap", Policy::Stop).unwrap();
        assert_eq!(j.lookup(&call(&[0], "ask a"), false).unwrap(), Found::New);
        j.finish(&call(&[0], "ask a"), "{\"value\":1}").unwrap();
    }
    let j = Journal::open(&path, "/p.sap", Policy::Stop).unwrap();
    assert_eq!(
        j.lookup(&call(&[0], "ask a"), false).unwrap(),
        Found::Answer("{\"value\":1}".into())
    );
    assert_eq!(j.lookup(&call(&[1], "ask b"), false).unwrap(), Found::New);
    assert_eq!(j.resumed().llm_calls, 1);
}

#[test]
fn a_changed_request_is_named_or_rerun() {
    let (_dir, path) = temp("diverge");
    {
        let j = Journal::open(&path, "/p.sap", Policy::Stop).unwrap();
        for (i, r) in ["one", "two\nsame", "three"].iter().enumerate() {
            j.finish(&call(&[i as u32], r), "{}").unwrap();
        }
    }
    {
        let j = Journal::open(&path, "/p.sap", Policy::Stop).unwrap();
        assert!(matches!(
            j.lookup(&call(&[0], "one"), false),
            Ok(Found::Answer(_))
        ));
        let e = j.lookup(&call(&[1], "TWO\nsame"), false).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("a.sap:3:5") && m.contains("line 1"), "{m}");
        assert!(
            m.contains("journaled: two") && m.contains("now:       TWO"),
            "{m}"
        );
    }
    let j = Journal::open(&path, "/p.sap", Policy::RerunChanged).unwrap();
    assert!(matches!(
        j.lookup(&call(&[0], "one"), false),
        Ok(Found::Answer(_))
    ));
    assert_eq!(j.lookup(&call(&[1], "TWO"), false).unwrap(), Found::New);
    // Everything after the divergence is forgotten, even what still matches.
    assert_eq!(j.lookup(&call(&[2], "three"), false).unwrap(), Found::New);
    drop(j);
    let (_, rows) = read(&path).unwrap();
    assert_eq!(rows.len(), 1);
}

#[test]
fn an_unfinished_call_stops_the_run_unless_idempotent() {
    let (_dir, path) = temp("inflight");
    {
        let j = Journal::open(&path, "/p.sap", Policy::Stop).unwrap();
        j.begin(&call(&[0], "pay")).unwrap();
    }
    let j = Journal::open(&path, "/p.sap", Policy::Stop).unwrap();
    let m = j.lookup(&call(&[0], "pay"), false).unwrap_err().to_string();
    assert!(
        m.contains("`judge` (a.sap:3:5) had started") && m.contains("journal forget"),
        "{m}"
    );
    assert_eq!(j.lookup(&call(&[0], "pay"), true).unwrap(), Found::New);
    drop(j);
    assert!(forget(&path, "0").unwrap());
    let j = Journal::open(&path, "/p.sap", Policy::Stop).unwrap();
    assert_eq!(j.lookup(&call(&[0], "pay"), false).unwrap(), Found::New);
}

#[test]
fn bad_journals_are_refused_clearly() {
    let (_dir, path) = temp("bad");
    std::fs::write(&path, "this is not a database, just text that is long enough to fill a header page of sqlite for sure").unwrap();
    let m = Journal::open(&path, "/p.sap", Policy::Stop)
        .err()
        .unwrap()
        .to_string();
    assert!(m.contains("not a sap journal"), "{m}");

    let (_dir, path) = temp("other");
    drop(Journal::open(&path, "/p.sap", Policy::Stop).unwrap());
    let m = Journal::open(&path, "/q.sap", Policy::Stop)
        .err()
        .unwrap()
        .to_string();
    assert!(m.contains("belongs to a run of /p.sap"), "{m}");

    let held = Journal::open(&path, "/p.sap", Policy::Stop).unwrap();
    let m = Journal::open(&path, "/p.sap", Policy::Stop)
        .err()
        .unwrap()
        .to_string();
    assert!(m.contains("in use by another run"), "{m}");
    held.finish_run().unwrap();
    drop(held);
    let m = Journal::open(&path, "/p.sap", Policy::Stop)
        .err()
        .unwrap()
        .to_string();
    assert!(m.contains("finished"), "{m}");
}
