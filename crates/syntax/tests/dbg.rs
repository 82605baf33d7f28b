use pest::Parser;
#[test]
fn dbg() {
    let src = std::env::var("SRC").unwrap_or_default();
    let r = syntax::parse(&src);
    for d in &r.diagnostics { println!("{:?}", d); }
}
