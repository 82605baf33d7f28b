//! The runtime side of the native ABI: the functions compiled code calls for everything
//! that is not arithmetic or control flow, declared once in the [`intrinsics!`] table
//! that gives the code generator the [`Intr`] enum, each intrinsic's symbol and
//! signature, and the JIT each one's address.
//!
//! Parameters say what compiled code passes: the [`Env`] and a descriptor as references
//! (the descriptors live as long as the code), object words as `i64` (see `heap.rs`),
//! arrays of words as [`Words`].
//!
//! No panic may cross into native code: every intrinsic that could panic catches it and
//! turns it into a sap runtime error in [`Env`].

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use ir::{BinOp, Builtin, FuncId, SrcSpan, Type};
use runtime::value::StructValue;
use runtime::{Context, TypeDesc, Value};

use crate::abi::{
    BinaryDesc, Env, FailKind, HostCallDesc, InjectDesc, LlmDesc, LlmKind, ParallelDesc, Program,
    Site, StructDesc, TypeArg, Word,
};
use crate::heap::{self, ObjRef, RawList, Slot, Words, borrow, from_value, new_obj, to_value};
use crate::host::{Engine, ExecError, Host, StackFrame, out_of_range};
use crate::ops::int_op;

/// Declares the intrinsics once: `Variant => function as "symbol" (parameters) -> result`
/// gives [`Intr`], and for each intrinsic its signature and address (the symbol names
/// it for people: compiled code calls it through [`table`]).
macro_rules! intrinsics {
    ($($name:ident => $f:path as $_symbol:literal ($($param:ident),*) $(-> $result:ident)?;)*) => {
        /// An intrinsic compiled code can call.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Intr {
            $($name),*
        }

        impl Intr {
            pub const ALL: &[Intr] = &[$(Intr::$name),*];

            pub fn params(self) -> &'static [Word] {
                match self {
                    $(Intr::$name => &[$(Word::$param),*]),*
                }
            }

            pub fn result(self) -> Option<Word> {
                match self {
                    $(Intr::$name => {
                        let result: &[Word] = &[$(Word::$result)?];
                        result.first().copied()
                    }),*
                }
            }

            /// Where the function is in this process.
            pub fn address(self) -> *const u8 {
                match self {
                    $(Intr::$name => $f as *const u8),*
                }
            }
        }

        /// The address of every intrinsic, by `Intr`: the table compiled code calls
        /// through (`Env::intrinsics`).
        pub fn table() -> *const usize {
            static TABLE: std::sync::LazyLock<Vec<usize>> = std::sync::LazyLock::new(|| {
                Intr::ALL.iter().map(|i| i.address() as usize).collect()
            });
            TABLE.as_ptr()
        }
    };
}

intrinsics! {
    Retain => heap::retain as "sap_retain" (Int);
    Release => heap::release as "sap_release" (Int);
    Fail => sap_fail as "sap_fail" (Int, Int, Int, Int);
    Unwind => sap_unwind as "sap_unwind" (Int, Int);
    Binary => sap_binary as "sap_binary" (Int, Int, Int, Int) -> Int;
    Fmod => sap_fmod as "sap_fmod" (Float, Float) -> Float;
    CallHost => sap_call_host as "sap_call_host" (Int, Int, Int) -> Int;
    Push => sap_push as "sap_push" (Int, Int, Int, Int) -> Int;
    List => sap_list as "sap_list" (Int, Int, Int, Int) -> Int;
    Struct => sap_struct as "sap_struct" (Int, Int, Int) -> Int;
    Field => sap_field as "sap_field" (Int, Int, Int, Int) -> Int;
    Index => sap_index as "sap_index" (Int, Int, Int, Int) -> Int;
    ListLen => sap_list_len as "sap_list_len" (Int) -> Int;
    CtxNew => sap_ctx_new as "sap_ctx_new" () -> Int;
    CtxChild => sap_ctx_child as "sap_ctx_child" (Int) -> Int;
    CtxEnter => sap_ctx_enter as "sap_ctx_enter" (Int, Int) -> Int;
    Instruct => sap_instruct as "sap_instruct" (Int, Int);
    Inject => sap_inject as "sap_inject" (Int, Int, Int, Int);
    Llm => sap_llm as "sap_llm" (Int, Int, Int, Int) -> Int;
    Arg => sap_arg as "sap_arg" (Int, Int, Int) -> Int;
    Arm => sap_arm as "sap_arm" (Int) -> Int;
    Parallel => sap_parallel as "sap_parallel" (Int, Int, Int, Int) -> Int;
    Native => sap_native as "sap_native" (Int, Int, Int) -> Int;
    Set => sap_set as "sap_set" (Int, Int, Int, Int, Int) -> Int;
}

/// The compiled program as a host `Engine`, for builtins that call sap functions (the
/// `aot` executor): each call runs on its own `Env`, under the caller's depth and
/// remaining iteration budget.
struct CallBack<'a> {
    program: &'a dyn Program,
    host: &'a Host,
    depth: u64,
    max_iterations: u64,
}

impl Engine for CallBack<'_> {
    fn call_function(&self, f: FuncId, args: Vec<Value>) -> Result<Value, ExecError> {
        self.program
            .call_function(self.host, self.depth, self.max_iterations, f, args)
    }
}

fn guard(
    env: &mut Env<'_>,
    span: Option<SrcSpan>,
    f: impl FnOnce(&mut Env<'_>) -> Result<i64, ExecError>,
) -> i64 {
    match catch_unwind(AssertUnwindSafe(|| f(env))) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            env.fail(e);
            0
        }
        Err(_) => {
            env.fail(ExecError::new(
                "internal error in the runtime (a panic was caught)",
                span,
            ));
            0
        }
    }
}

// ---------------------------------------------------------------- intrinsics

/// Fails the run at site `site` (a `Site::Fail`), whose check saw the operands `a`, `b`.
pub extern "C" fn sap_fail(env: &mut Env<'_>, site: i64, a: i64, b: i64) {
    let program = env.program;
    let Some(Site::Fail(desc)) = program.site(site as usize) else {
        env.fail(ExecError::new(
            format!("the program failed at site {site}, which it does not describe"),
            None,
        ));
        return;
    };
    let message = match &desc.kind {
        FailKind::Overflow { op, ty } => match int_op(*op, ty, a, b, desc.span) {
            Err(e) => e.message,
            Ok(_) => "integer overflow".to_owned(),
        },
        FailKind::Depth if env.depth_is_the_stacks() => format!(
            "recursion deeper than {} calls: as deep as the program's stack holds (`--max-depth` is {})",
            env.max_depth, env.host.limits.max_depth
        ),
        FailKind::Depth => format!("recursion deeper than {} calls", env.max_depth),
        FailKind::Iterations => format!("more than {} loop iterations", env.max_iterations),
        FailKind::Internal(message) => message.clone(),
    };
    env.fail(ExecError::new(message, desc.span));
    if let Some(frame) = desc.frame {
        sap_unwind(env, i64::from(frame));
    }
}

/// Adds the frame of site `site` (a `Site::Frame`) to the pending error's stack.
pub extern "C" fn sap_unwind(env: &mut Env<'_>, site: i64) {
    let program = env.program;
    if let (Some(e), Some(Site::Frame(desc))) = (&mut env.error, program.site(site as usize)) {
        if e.span.is_none() {
            e.span = desc.span;
        }
        e.stack.push(StackFrame {
            function: desc.function.clone(),
            span: desc.span,
        });
    }
}

pub extern "C" fn sap_binary(env: &mut Env<'_>, desc: &BinaryDesc, a: i64, b: i64) -> i64 {
    guard(env, None, |env| {
        let host = env.host;
        let (x, y) = (to_value(host, &desc.ty, a), to_value(host, &desc.ty, b));
        Ok(match desc.op {
            BinOp::Concat => match (&x, &y) {
                (Value::Str(p), Value::Str(q)) => {
                    let joined = new_obj(Slot::Val(Value::str(&format!("{p}{q}"))));
                    heap::mark(joined, first_origin([heap::origin(a), heap::origin(b)]));
                    joined
                }
                _ => 0,
            },
            // Lists, options, structs and `Json` are equal when their values are,
            // element by element and field by field.
            BinOp::Eq => (x == y) as i64,
            BinOp::Ne => (x != y) as i64,
            op => {
                let ordering = match (&x, &y) {
                    (Value::Str(p), Value::Str(q)) => p.cmp(q),
                    _ => std::cmp::Ordering::Equal,
                };
                use std::cmp::Ordering::*;
                let r = match op {
                    BinOp::Lt => ordering == Less,
                    BinOp::Le => ordering != Greater,
                    BinOp::Gt => ordering == Greater,
                    _ => ordering != Less,
                };
                r as i64
            }
        })
    })
}

pub extern "C" fn sap_fmod(a: f64, b: f64) -> f64 {
    a % b
}

pub extern "C" fn sap_call_host(env: &mut Env<'_>, desc: &HostCallDesc, args: Words) -> i64 {
    let raw = args.get(desc.args.len());
    guard(env, desc.span, |env| {
        if desc.builtin == Some(Builtin::Toposort)
            && let Some(layers) = toposort_native(raw[0])
        {
            return layers.map_err(|e| ExecError::new(e, desc.span));
        }
        let host = env.host;
        // Provenance (docs/SECURITY.md): what the arguments came from, and the run's
        // refusal of untrusted data for a `trusted` parameter.
        let origins: Vec<u32> = if heap::any_marked() {
            desc.args
                .iter()
                .zip(raw)
                .map(|(t, r)| heap::deep_origin(t, *r))
                .collect()
        } else {
            Vec::new()
        };
        if desc.builtin.is_none() && origins.iter().any(|&o| o != 0) {
            check_trusted_args(host, desc, &origins)?;
        }
        let values: Vec<Value> = desc
            .args
            .iter()
            .zip(raw)
            .map(|(t, r)| to_value(host, t, *r))
            .collect();
        let engine = CallBack {
            program: env.program,
            host,
            depth: env.depth,
            max_iterations: env.iterations_left,
        };
        let result = match desc.builtin {
            Some(b) => host.call_builtin(b, &values, desc.span, &engine)?,
            None => host.call_extern(&desc.name, &values, desc.span, &engine)?,
        };
        let word = from_value(&desc.ret, result);
        let origin = match (desc.builtin, host.untrusted_result(&desc.name)) {
            // Declassified.
            (Some(Builtin::Trust), _) => 0,
            (Some(Builtin::ReadFile), _) => heap::origin_id("std:read_file"),
            (None, Some(origin)) => origin,
            // A builtin's or a host extern's result follows its arguments.
            _ => first_origin(origins.iter().copied()),
        };
        heap::mark_value(&desc.ret, word, origin);
        Ok(word)
    })
}

/// The first nonzero origin.
fn first_origin(origins: impl IntoIterator<Item = u32>) -> u32 {
    origins.into_iter().find(|&o| o != 0).unwrap_or(0)
}

/// The run's own check of the checker's E0134: an argument marked as coming from
/// untrusted data does not reach a `trusted` parameter. Each untrusted argument is
/// traced with where it came from.
fn check_trusted_args(host: &Host, desc: &HostCallDesc, origins: &[u32]) -> Result<(), ExecError> {
    let label = |o: u32| heap::origin_label(o).map_or_else(String::new, |l| l.to_string());
    let untrusted: serde_json::Map<String, serde_json::Value> = origins
        .iter()
        .enumerate()
        .filter(|(_, o)| **o != 0)
        .map(|(i, o)| (i.to_string(), serde_json::Value::String(label(*o))))
        .collect();
    host.trace(&serde_json::json!({
        "event": "provenance",
        "call": desc.name,
        "untrusted_args": untrusted,
    }));
    for (i, name) in host.trusted_params(&desc.name) {
        if let Some(&o) = origins.get(*i)
            && o != 0
        {
            let callee = desc.name.rsplit("::").next().unwrap_or(&desc.name);
            return Err(ExecError::new(
                format!(
                    "refused: `{callee}({name}:)` is a `trusted` parameter, and this argument came from untrusted data ({})",
                    label(o)
                ),
                desc.span,
            ));
        }
    }
    Ok(())
}

/// `toposort` of a native list, read and answered in place (no runtime values); `None`
/// when the list came from the host.
fn toposort_native(deps: i64) -> Option<Result<i64, String>> {
    let Some(Slot::Raw(deps)) = borrow(deps) else {
        return None;
    };
    let deps = deps.as_slice();
    let mut offsets = Vec::with_capacity(deps.len() + 1);
    let mut targets = Vec::with_capacity(deps.len() * 2);
    offsets.push(0);
    for d in deps {
        // The elements of a native `List<List<i64>>` are list objects.
        match borrow(*d) {
            Some(Slot::Raw(node)) => targets.extend_from_slice(node.as_slice()),
            Some(Slot::Val(Value::List(node))) => targets.extend(
                node.iter()
                    .map(|v| if let Value::Int(n) = v { *n } else { -1 }),
            ),
            _ => {}
        }
        offsets.push(targets.len());
    }
    // Each layer as a list object, released if the graph turns out to have a cycle.
    let layers = crate::toposort::layers_flat(&offsets, &targets, |layer| {
        let nodes = layer.iter().map(|&n| n as i64).collect();
        ObjRef::new(Slot::Raw(RawList::from_vec(nodes, false)))
    });
    Some(layers.map(|layers| {
        let layers = layers.into_iter().map(ObjRef::into_word).collect();
        new_obj(Slot::Raw(RawList::from_vec(layers, true)))
    }))
}

/// Appends `item` (borrowed) to the list in `list` (whose count it takes over), in
/// place when nothing else holds it; the result is always a native list. Compiled code
/// appends by itself when it can (see `codegen/lists.rs`), and calls this otherwise: the
/// first element, a full buffer, a shared list, a list that came from the host.
pub extern "C" fn sap_push(env: &mut Env<'_>, desc: &TypeArg, list: i64, item: i64) -> i64 {
    guard(env, desc.span, |_| {
        let heap = desc.ty.is_heap();
        if heap {
            // The list's own reference.
            heap::retain(item);
        }
        // We own one count of `list`.
        let Some(mut list) = ObjRef::take(list) else {
            return Ok(new_obj(Slot::Raw(RawList::from_vec(vec![item], heap))));
        };
        if let Some(Slot::Raw(items)) = list.get_mut() {
            debug_assert_eq!(items.heap(), heap, "a native list's element kind");
            items.push(item);
            return Ok(list.into_word());
        }
        let mut items = native_items(list.word(), &list, &desc.ty);
        items.push(item);
        drop(list);
        Ok(new_obj(Slot::Raw(RawList::from_vec(items, heap))))
    })
}

/// The elements of a list object (`word`) as native values of type `elem`, with
/// references of their own (a copy: the list itself is left as it is). Elements made
/// from a host list carry the list's mark.
fn native_items(word: i64, list: &Slot, elem: &Type) -> Vec<i64> {
    match list {
        Slot::Raw(items) => items.clone().into_vec(),
        Slot::Val(Value::List(values)) => {
            let origin = heap::origin(word);
            values
                .iter()
                .map(|v| {
                    let item = from_value(elem, v.clone());
                    heap::mark_value(elem, item, origin);
                    item
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// A native list with the elements of `list` (borrowed): the same list, with a new
/// reference, when it is native already; a copy when it came from the host.
pub extern "C" fn sap_native(env: &mut Env<'_>, desc: &TypeArg, list: i64) -> i64 {
    guard(env, desc.span, |_| match borrow(list) {
        Some(Slot::Raw(_)) => {
            heap::retain(list);
            Ok(list)
        }
        other => {
            let items = other.map_or_else(Vec::new, |l| native_items(list, l, &desc.ty));
            Ok(new_obj(Slot::Raw(RawList::from_vec(
                items,
                desc.ty.is_heap(),
            ))))
        }
    })
}

/// `xs = set(xs, index, item)`: replaces an element of the list in `list` (whose
/// count it takes over; `item` is borrowed), in place when nothing else holds it;
/// the result is always a native list. Compiled code replaces by itself when it can.
pub extern "C" fn sap_set(
    env: &mut Env<'_>,
    desc: &TypeArg,
    list: i64,
    index: i64,
    item: i64,
) -> i64 {
    guard(env, desc.span, |_| {
        let heap = desc.ty.is_heap();
        // No list (0) has no elements.
        let len = match borrow(list) {
            Some(Slot::Raw(items)) => items.as_slice().len(),
            Some(Slot::Val(Value::List(values))) => values.len(),
            _ => 0,
        };
        let Some(at) = usize::try_from(index).ok().filter(|&at| at < len) else {
            // The variable keeps its reference; the run stops.
            return Err(ExecError::new(out_of_range(index, len), desc.span));
        };
        // We own one count of `list`, a live list object (it has elements).
        let Some(mut list) = ObjRef::take(list) else {
            return Err(ExecError::new("internal: set on no list", desc.span));
        };
        if heap {
            // The list's own reference.
            heap::retain(item);
        }
        if let Some(Slot::Raw(items)) = list.get_mut() {
            debug_assert_eq!(items.heap(), heap, "a native list's element kind");
            let old = std::mem::replace(&mut items.as_mut_slice()[at], item);
            if heap {
                heap::release(old);
            }
            return Ok(list.into_word());
        }
        let mut items = native_items(list.word(), &list, &desc.ty);
        let old = std::mem::replace(&mut items[at], item);
        if heap {
            heap::release(old);
        }
        drop(list);
        Ok(new_obj(Slot::Raw(RawList::from_vec(items, heap))))
    })
}

pub extern "C" fn sap_list(env: &mut Env<'_>, desc: &TypeArg, items: Words, n: i64) -> i64 {
    let raw = items.get(n as usize);
    guard(env, None, |_| {
        let heap = desc.ty.is_heap();
        if heap {
            for p in raw {
                heap::retain(*p);
            }
        }
        Ok(new_obj(Slot::Raw(RawList::from_vec(raw.to_vec(), heap))))
    })
}

pub extern "C" fn sap_struct(env: &mut Env<'_>, desc: &StructDesc, fields: Words) -> i64 {
    let raw = fields.get(desc.fields.len());
    guard(env, None, |env| {
        let host = env.host;
        let Some(TypeDesc::Struct(s)) = host.types.get(desc.type_id as usize) else {
            return Err(ExecError::new("internal: not a struct type", None));
        };
        let fields = desc
            .fields
            .iter()
            .zip(raw)
            .map(|(t, r)| to_value(host, t, *r))
            .collect();
        let origin = first_origin(
            desc.fields
                .iter()
                .zip(raw)
                .map(|(t, r)| heap::deep_origin(t, *r)),
        );
        let word = new_obj(Slot::Val(Value::Struct(Arc::new(StructValue {
            ty: s.clone(),
            fields,
        }))));
        heap::mark(word, origin);
        Ok(word)
    })
}

pub extern "C" fn sap_field(env: &mut Env<'_>, desc: &TypeArg, value: i64, index: i64) -> i64 {
    guard(env, desc.span, |_| match borrow(value) {
        Some(Slot::Val(Value::Struct(s))) => {
            let field = from_value(
                &desc.ty,
                s.fields.get(index as usize).cloned().unwrap_or(Value::Unit),
            );
            heap::mark_value(&desc.ty, field, heap::origin(value));
            Ok(field)
        }
        _ => Err(ExecError::new("internal: field of a non-struct", desc.span)),
    })
}

pub extern "C" fn sap_index(env: &mut Env<'_>, desc: &TypeArg, list: i64, index: i64) -> i64 {
    let out_of_range = |len: usize| ExecError::new(out_of_range(index, len), desc.span);
    guard(env, desc.span, |_| match borrow(list) {
        Some(Slot::Raw(items)) => {
            let items = items.as_slice();
            match usize::try_from(index).ok().and_then(|i| items.get(i)) {
                Some(x) => {
                    if desc.ty.is_heap() {
                        heap::retain(*x);
                    }
                    Ok(*x)
                }
                None => Err(out_of_range(items.len())),
            }
        }
        Some(Slot::Val(Value::List(items))) => {
            match usize::try_from(index).ok().and_then(|i| items.get(i)) {
                Some(v) => {
                    let item = from_value(&desc.ty, v.clone());
                    heap::mark_value(&desc.ty, item, heap::origin(list));
                    Ok(item)
                }
                None => Err(out_of_range(items.len())),
            }
        }
        _ => Err(ExecError::new("internal: index of a non-list", desc.span)),
    })
}

pub extern "C" fn sap_list_len(list: i64) -> i64 {
    match borrow(list) {
        Some(Slot::Val(Value::List(items))) => items.len() as i64,
        Some(Slot::Raw(items)) => items.as_slice().len() as i64,
        _ => 0,
    }
}

pub extern "C" fn sap_ctx_new() -> i64 {
    new_obj(Slot::Ctx(Context::new()))
}

pub extern "C" fn sap_ctx_child(ctx: i64) -> i64 {
    match borrow(ctx) {
        Some(Slot::Ctx(c)) => new_obj(Slot::Ctx(c.child())),
        _ => new_obj(Slot::Ctx(Context::new())),
    }
}

pub extern "C" fn sap_ctx_enter(ctx: i64, function: i64) -> i64 {
    let parent = match borrow(ctx) {
        Some(Slot::Ctx(c)) => c.clone(),
        _ => Context::new(),
    };
    match borrow(function) {
        Some(Slot::Val(Value::Str(f))) => new_obj(Slot::Ctx(parent.enter(f.clone()))),
        _ => new_obj(Slot::Ctx(parent.child())),
    }
}

pub extern "C" fn sap_instruct(ctx: i64, text: i64) {
    if let (Some(Slot::Ctx(c)), Some(Slot::Val(Value::Str(t)))) = (borrow(ctx), borrow(text)) {
        c.instruct(t);
    }
}

pub extern "C" fn sap_inject(env: &mut Env<'_>, desc: &InjectDesc, ctx: i64, value: i64) {
    guard(env, None, |env| {
        if let Some(Slot::Ctx(c)) = borrow(ctx) {
            let origin = heap::deep_origin(&desc.ty, value);
            let untrusted = (origin != 0).then(|| heap::origin_label(origin)).flatten();
            c.inject_from(
                to_value(env.host, &desc.ty, value),
                &desc.function,
                &desc.label,
                untrusted.as_deref(),
            );
        }
        Ok(0)
    });
}

/// `schema` is the `Json` schema a produced `Json` must match (borrowed), or 0.
pub extern "C" fn sap_llm(env: &mut Env<'_>, desc: &LlmDesc, ctx: i64, schema: i64) -> i64 {
    guard(env, None, |env| {
        let host = env.host;
        let Some(Slot::Ctx(c)) = borrow(ctx) else {
            return Err(ExecError::new(
                "internal: an LLM call without a context",
                None,
            ));
        };
        // The answer, and whether it is an object (only an object carries a mark).
        let (answer, object) = match &desc.kind {
            LlmKind::Produce(ty) => {
                let schema = (schema != 0).then(|| to_value(host, &Type::Json, schema));
                let answer = from_value(ty, host.produce(desc.site, c, schema.as_ref())?);
                (answer, ty.is_heap())
            }
            LlmKind::Decide => (host.decide(desc.site, c)? as i64, false),
            LlmKind::Fill => {
                let args = host.fill(desc.site, c)?;
                (new_obj(Slot::Pack(None, Arc::new(args))), true)
            }
            LlmKind::Choose => {
                let (arm, args) = host.choose(desc.site, c)?;
                (new_obj(Slot::Pack(Some(arm), Arc::new(args))), true)
            }
        };
        // An answer given from a context that holds untrusted data is untrusted (a
        // context can hold some only once something has been marked).
        if object
            && heap::any_marked()
            && let Some(source) = c.untrusted_source()
        {
            heap::mark(answer, heap::origin_id(&source));
        }
        Ok(answer)
    })
}

pub extern "C" fn sap_arg(desc: &TypeArg, pack: i64, i: i64) -> i64 {
    match borrow(pack) {
        Some(Slot::Pack(_, args)) => {
            let arg = from_value(
                &desc.ty,
                args.get(i as usize).cloned().unwrap_or(Value::Unit),
            );
            heap::mark_value(&desc.ty, arg, heap::origin(pack));
            arg
        }
        _ => 0,
    }
}

pub extern "C" fn sap_arm(pack: i64) -> i64 {
    match borrow(pack) {
        Some(Slot::Pack(Some(arm), _)) => *arm as i64,
        _ => 0,
    }
}

pub extern "C" fn sap_parallel(
    env: &mut Env<'_>,
    desc: &ParallelDesc,
    list: i64,
    captures: Words,
) -> i64 {
    let captured = captures.get(desc.captures.len()).to_vec();
    guard(env, desc.span, |env| {
        let (host, program) = (env.host, env.program);
        let items: Vec<Value> = match to_value(host, &Type::List(Box::new(desc.elem.clone())), list)
        {
            Value::List(items) => Arc::unwrap_or_clone(items),
            _ => Vec::new(),
        };
        let origin = heap::deep_origin(&Type::List(Box::new(desc.elem.clone())), list);
        let (results, results_origin) =
            program.run_parallel(host, env, desc, &captured, &items, origin)?;
        let word = new_obj(Slot::Val(Value::List(Arc::new(results))));
        heap::mark(word, results_origin);
        Ok(word)
    })
}
