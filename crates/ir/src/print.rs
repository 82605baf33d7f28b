//! The IR's printed form: one line per instruction, readable and stable, for snapshot
//! tests and `sapc build --emit-ir`.

use std::fmt::Write;

use crate::*;

pub fn module(m: &Module) -> String {
    let mut out = String::new();
    for (i, t) in m.types.iter().enumerate() {
        match t {
            TypeDef::Struct { name, fields, .. } => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|f| format!("{}: {}", f.name, ty(m, &f.ty)))
                    .collect();
                let _ = writeln!(out, "type t{i} = struct {name} {{ {} }}", fields.join(", "));
            }
            TypeDef::Enum { name, variants, .. } => {
                let names: Vec<&str> = variants.iter().map(|(v, _)| v.as_str()).collect();
                let _ = writeln!(out, "type t{i} = enum {name} {{ {} }}", names.join(", "));
            }
        }
    }
    for e in &m.externs {
        let params: Vec<String> = e
            .params
            .iter()
            .map(|p| format!("{}: {}", p.name, ty(m, &p.ty)))
            .collect();
        let binding = match &e.binding {
            Some(b) => format!(" = {}", b.origin()),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "extern {}({}) -> {}{binding}",
            e.name,
            params.join(", "),
            ty(m, &e.ret)
        );
    }
    for (i, s) in m.sites.iter().enumerate() {
        let kind = match &s.kind {
            SiteKind::Produce { ret } => format!("produce {} for `{}`", ty(m, ret), s.subject),
            SiteKind::Decide => format!("decide `{}`", s.subject),
            SiteKind::Fill { callee, params, .. } => {
                let names: Vec<String> = params
                    .iter()
                    .map(|p| format!("{}: {}", p.name, ty(m, &p.ty)))
                    .collect();
                format!("fill `{callee}`({})", names.join(", "))
            }
            SiteKind::Choose { arms } => {
                let arms: Vec<String> = arms
                    .iter()
                    .map(|a| {
                        let names: Vec<String> = a.params.iter().map(|p| p.name.clone()).collect();
                        format!(
                            "{}({}){}",
                            a.tool,
                            names.join(", "),
                            a.binding
                                .as_ref()
                                .map_or(String::new(), |b| format!(" as {b}"))
                        )
                    })
                    .collect();
                format!("choose [{}]", arms.join(" | "))
            }
        };
        let _ = writeln!(
            out,
            "site s{i} in {} at {}..{}: {kind}",
            s.function, s.span.start, s.span.end
        );
    }
    for (i, f) in m.functions.iter().enumerate() {
        out.push('\n');
        function(&mut out, m, i, f);
    }
    out
}

fn ty(m: &Module, t: &Type) -> String {
    match t {
        Type::Unit => "()".to_owned(),
        Type::Bool => "bool".to_owned(),
        Type::I32 => "i32".to_owned(),
        Type::I64 => "i64".to_owned(),
        Type::F64 => "f64".to_owned(),
        Type::Str => "str".to_owned(),
        Type::Json => "json".to_owned(),
        Type::Tool => "tool".to_owned(),
        Type::Context => "ctx".to_owned(),
        Type::List(e) => format!("list<{}>", ty(m, e)),
        Type::Option(e) => format!("option<{}>", ty(m, e)),
        Type::Struct(id) | Type::Enum(id) => match m.types.get(*id as usize) {
            Some(TypeDef::Struct { name, .. }) | Some(TypeDef::Enum { name, .. }) => name.clone(),
            None => format!("t{id}"),
        },
    }
}

fn vals(vs: &[ValueId]) -> String {
    let names: Vec<String> = vs.iter().map(|v| format!("v{v}")).collect();
    names.join(", ")
}

fn function(out: &mut String, m: &Module, index: usize, f: &Function) {
    let params: Vec<String> = f
        .params
        .iter()
        .map(|p| format!("{}: {}", p.name, ty(m, &p.ty)))
        .collect();
    let effect = match f.effect {
        Effect::Pure => "pure",
        Effect::ExternCalling => "extern",
        Effect::Contextual => "contextual",
    };
    let _ = writeln!(
        out,
        "fn f{index} {}({}) -> {} [{effect}]",
        f.name,
        params.join(", "),
        ty(m, &f.ret)
    );
    for (i, l) in f.locals.iter().enumerate() {
        let _ = writeln!(out, "  local l{i} {}: {}", l.name, ty(m, &l.ty));
    }
    for (b, block) in f.blocks.iter().enumerate() {
        let _ = writeln!(out, "  b{b}:");
        for inst in &block.insts {
            out.push_str("    ");
            if let Some((v, t)) = &inst.dest {
                let _ = write!(out, "v{v}: {} = ", ty(m, t));
            }
            let op = match &inst.op {
                Op::Const(c) => match c {
                    Const::Unit => "()".to_owned(),
                    Const::Bool(b) => b.to_string(),
                    Const::Int(n) => n.to_string(),
                    Const::Float(x) => format!("{x:?}"),
                    Const::Str(s) => format!("{s:?}"),
                    Const::Variant(t, i) => match m.types.get(*t as usize) {
                        Some(TypeDef::Enum { name, variants, .. }) => format!(
                            "{name}::{}",
                            variants.get(*i as usize).map_or("?", |v| v.0.as_str())
                        ),
                        _ => format!("t{t}::{i}"),
                    },
                    Const::Tool { name, .. } => format!("tool {name}"),
                },
                Op::Load(l) => format!("load l{l}"),
                Op::Store(l, v) => format!("store l{l}, v{v}"),
                Op::Binary(op, t, a, b) => format!("{op:?}.{} v{a}, v{b}", ty(m, t)).to_lowercase(),
                Op::Unary(op, t, a) => format!("{op:?}.{} v{a}", ty(m, t)).to_lowercase(),
                Op::Call(id, args) => format!(
                    "call f{id} {}({})",
                    m.functions
                        .get(*id as usize)
                        .map_or("?", |f| f.name.as_str()),
                    vals(args)
                ),
                Op::CallExtern(name, args) => format!("call extern {name}({})", vals(args)),
                Op::CallBuiltin(b, args) => format!(
                    "call builtin {}({})",
                    format!("{b:?}").to_lowercase(),
                    vals(args)
                ),
                Op::PushInPlace(l, v) => format!("push_in_place l{l}, v{v}"),
                Op::SetInPlace(l, i, v) => format!("set_in_place l{l}[v{i}], v{v}"),
                Op::Release(l) => format!("release l{l}"),
                Op::List(items) => format!("list [{}]", vals(items)),
                Op::Struct(t, fields) => {
                    format!("struct {} {{ {} }}", ty(m, &Type::Struct(*t)), vals(fields))
                }
                Op::Field(v, i) => format!("field v{v}.{i}"),
                Op::Index(v, i) => format!("index v{v}[v{i}]"),
                Op::Element(v, i) => format!("element v{v}[v{i}]"),
                Op::ContextNew => "context_new".to_owned(),
                Op::ContextChild(c) => format!("context_child v{c}"),
                Op::ContextEnter(c, f) => format!("context_enter v{c}, {f:?}"),
                Op::Instruct(c, text) => format!("instruct v{c}, {text:?}"),
                Op::Inject {
                    ctx,
                    value,
                    function,
                    label,
                } => format!("inject v{ctx}, v{value} from {function} as {label:?}"),
                Op::Produce {
                    site,
                    ctx,
                    schema: None,
                } => format!("llm.produce s{site}, v{ctx}"),
                Op::Produce {
                    site,
                    ctx,
                    schema: Some(schema),
                } => format!("llm.produce s{site}, v{ctx}, schema v{schema}"),
                Op::Fill { site, ctx } => format!("llm.fill s{site}, v{ctx}"),
                Op::Choose { site, ctx } => format!("llm.choose s{site}, v{ctx}"),
                Op::Decide { site, ctx } => format!("llm.decide s{site}, v{ctx}"),
                Op::Arg(v, i) => format!("arg v{v}.{i}"),
                Op::Arm(v) => format!("arm v{v}"),
                Op::ParallelFor {
                    list,
                    body,
                    captures,
                } => format!("parallel_for v{list} f{body}({})", vals(captures)),
            };
            out.push_str(&op);
            if let Some(span) = inst.span {
                let _ = write!(out, "  @{}..{}", span.start, span.end);
            }
            out.push('\n');
        }
        let term = match &block.term {
            Terminator::Unreachable => "unreachable".to_owned(),
            Terminator::Jump(b) => format!("jump b{b}"),
            Terminator::Loop(b, _) => format!("loop b{b}"),
            Terminator::Branch(c, t, e) => format!("branch v{c}, b{t}, b{e}"),
            Terminator::Switch(v, targets) => {
                let names: Vec<String> = targets.iter().map(|t| format!("b{t}")).collect();
                format!("switch v{v} [{}]", names.join(", "))
            }
            Terminator::Return(v) => format!("return v{v}"),
        };
        let _ = writeln!(out, "    {term}");
    }
}
