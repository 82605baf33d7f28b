//! The runtime side of the native ABI: the functions compiled code calls for everything
//! that is not arithmetic or control flow.
//!
//! In native code every value is one `i64`: `()` is 0, Booleans 0 or 1, integers
//! sign-extended, `f64` its bits, enum values their variant index, and everything else
//! (strings, lists, structs, options, JSON, tools, contexts) a pointer to a
//! reference-counted [`Slot`] (`Arc::into_raw`), 0 meaning "no value yet". Compiled code
//! retains and releases those pointers through [`sap_retain`] and [`sap_release`].
//!
//! Static information a call needs (types, spans, names) is passed as a pointer to a
//! descriptor the compiler built and keeps alive as long as the code.
//!
//! No panic may cross into native code: every intrinsic that could panic catches it and
//! turns it into a sap runtime error in [`Env`].

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use lower::ir::{BinOp, Builtin, SrcSpan, Type};
use runtime::value::StructValue;
use runtime::{Context, TypeDesc, Value};

use crate::eval::{Slot, int_op};
use crate::host::{ExecError, Host, StackFrame, out_of_range};
use crate::rawlist::RawList;

/// What compiled code reads and writes directly, at fixed offsets (see `jit.rs`), then
/// what only the intrinsics use.
#[repr(C)]
pub struct Env {
    /// Nonzero when an error is pending: compiled code checks it after every intrinsic
    /// call (a sap function also returns it).
    pub failed: u64,
    /// The call depth where compiled code hands over to the runtime (entering the
    /// program, a tool the plan executor runs, a `parallel for` body); within compiled
    /// code the budget left travels as a parameter.
    pub depth: u64,
    pub max_depth: u64,
    /// Loop iterations so far; in a function with loops the count lives in a register
    /// and is written here around calls that read or advance it.
    pub iterations: u64,
    pub max_iterations: u64,
    /// Where a slow path's adapter leaves the intrinsic's result (see `jit.rs`).
    pub out: i64,
    pub host: *const Host,
    pub program: *const crate::jit::JitProgram,
    pub error: Option<ExecError>,
}

pub const OFFSET_FAILED: i32 = 0;
pub const OFFSET_DEPTH: i32 = 8;
pub const OFFSET_MAX_DEPTH: i32 = 16;
pub const OFFSET_ITERATIONS: i32 = 24;
pub const OFFSET_MAX_ITERATIONS: i32 = 32;
pub const OFFSET_OUT: i32 = 40;

impl Env {
    pub fn new(host: &Host, program: &crate::jit::JitProgram) -> Env {
        Env {
            failed: 0,
            depth: 0,
            max_depth: host.limits.max_depth as u64,
            iterations: 0,
            max_iterations: host.limits.max_loop_iterations,
            out: 0,
            host,
            program,
            error: None,
        }
    }

    fn host(&self) -> &Host {
        // SAFETY: the host outlives every run of compiled code (`JitProgram::run_main`).
        unsafe { &*self.host }
    }

    pub fn fail(&mut self, e: ExecError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.failed = 1;
    }
}

// ---------------------------------------------------------------- objects

pub fn new_obj(slot: Slot) -> i64 {
    Arc::into_raw(Arc::new(slot)) as i64
}

/// # Safety
/// `p` is 0 or a pointer from [`new_obj`] whose reference the caller holds.
unsafe fn obj<'a>(p: i64) -> Option<&'a Slot> {
    if p == 0 {
        None
    } else {
        Some(unsafe { &*(p as *const Slot) })
    }
}

pub extern "C" fn sap_retain(p: i64) {
    if p != 0 {
        // SAFETY: `p` came from `new_obj` and is alive (compiled code holds a reference).
        unsafe { Arc::increment_strong_count(p as *const Slot) }
    }
}

pub extern "C" fn sap_release(p: i64) {
    if p != 0 {
        // SAFETY: as above; this gives back one reference.
        unsafe { Arc::decrement_strong_count(p as *const Slot) }
    }
}

/// A native value as a sap value.
pub fn to_value(host: &Host, ty: &Type, raw: i64) -> Value {
    match ty {
        Type::Unit => Value::Unit,
        Type::Bool => Value::Bool(raw != 0),
        Type::I32 | Type::I64 => Value::Int(raw),
        Type::F64 => Value::Float(f64::from_bits(raw as u64)),
        Type::Enum(id) => match host.types.get(*id as usize) {
            Some(TypeDesc::Enum(e)) => Value::Enum {
                ty: e.clone(),
                variant: raw as u32,
            },
            _ => Value::Int(raw),
        },
        // SAFETY: heap-typed native values are object pointers.
        _ => match unsafe { obj(raw) } {
            Some(Slot::Val(v)) => v.clone(),
            Some(Slot::Raw(list)) => {
                let Type::List(elem) = ty else {
                    return Value::Unit;
                };
                Value::List(Arc::new(
                    list.as_slice()
                        .iter()
                        .map(|x| to_value(host, elem, *x))
                        .collect(),
                ))
            }
            _ => Value::Unit,
        },
    }
}

/// A sap value as a native value (an owned reference for heap types).
pub fn from_value(ty: &Type, v: Value) -> i64 {
    match (ty, &v) {
        (Type::Unit, _) => 0,
        (Type::Bool, Value::Bool(b)) => *b as i64,
        (Type::I32 | Type::I64, Value::Int(n)) => *n,
        (Type::F64, Value::Float(x)) => x.to_bits() as i64,
        (Type::Enum(_), Value::Enum { variant, .. }) => *variant as i64,
        _ if ty.is_heap() => new_obj(Slot::Val(v)),
        _ => 0,
    }
}

fn guard(
    env: &mut Env,
    span: Option<SrcSpan>,
    f: impl FnOnce(&mut Env) -> Result<i64, ExecError>,
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

// ---------------------------------------------------------------- descriptors

/// Why compiled code stopped, with what it knew.
pub enum FailKind {
    Overflow {
        op: BinOp,
        ty: Type,
    },
    Depth,
    Iterations,
    /// A broken invariant of the code generator, with its message.
    Internal(String),
}

pub struct FailDesc {
    pub kind: FailKind,
    pub span: Option<SrcSpan>,
}

pub struct FrameDesc {
    pub function: String,
    pub span: Option<SrcSpan>,
}

pub struct HostCallDesc {
    pub builtin: Option<Builtin>,
    pub name: String,
    pub args: Vec<Type>,
    pub ret: Type,
    pub span: Option<SrcSpan>,
}

pub struct TypeArg {
    pub ty: Type,
    pub span: Option<SrcSpan>,
}

pub struct BinaryDesc {
    pub op: BinOp,
    pub ty: Type,
}

pub struct StructDesc {
    pub type_id: u32,
    pub fields: Vec<Type>,
}

pub struct InjectDesc {
    pub ty: Type,
    pub function: String,
    pub label: String,
}

pub enum LlmKind {
    Produce(Type),
    Decide,
    Fill,
    Choose,
}

pub struct LlmDesc {
    pub kind: LlmKind,
    pub site: u32,
}

pub struct ParallelDesc {
    pub body: u32,
    pub captures: Vec<Type>,
    pub elem: Type,
    pub result: Type,
    pub span: Option<SrcSpan>,
}

// ---------------------------------------------------------------- intrinsics

/// # Safety (all intrinsics below)
/// `env` is the running program's environment; descriptor pointers come from the
/// compiler and live as long as the code; object arguments are live references.
pub unsafe extern "C" fn sap_fail(env: *mut Env, desc: *const FailDesc, a: i64, b: i64) {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    let message = match &desc.kind {
        FailKind::Overflow { op, ty } => match int_op(*op, ty, a, b, desc.span) {
            Err(e) => e.message,
            Ok(_) => "integer overflow".to_owned(),
        },
        FailKind::Depth => format!("recursion deeper than {} calls", env.max_depth),
        FailKind::Iterations => format!("more than {} loop iterations", env.max_iterations),
        FailKind::Internal(message) => message.clone(),
    };
    env.fail(ExecError::new(message, desc.span));
}

pub unsafe extern "C" fn sap_unwind(env: *mut Env, desc: *const FrameDesc) {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    if let Some(e) = &mut env.error {
        if e.span.is_none() {
            e.span = desc.span;
        }
        e.stack.push(StackFrame {
            function: desc.function.clone(),
            span: desc.span,
        });
    }
}

pub unsafe extern "C" fn sap_binary(env: *mut Env, desc: *const BinaryDesc, a: i64, b: i64) -> i64 {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    guard(env, None, |env| {
        let host = env.host();
        let (x, y) = (to_value(host, &desc.ty, a), to_value(host, &desc.ty, b));
        Ok(match desc.op {
            BinOp::Concat => match (&x, &y) {
                (Value::Str(p), Value::Str(q)) => {
                    new_obj(Slot::Val(Value::str(&format!("{p}{q}"))))
                }
                _ => 0,
            },
            op => {
                let ordering = match (&x, &y) {
                    (Value::Str(p), Value::Str(q)) => p.cmp(q),
                    _ => std::cmp::Ordering::Equal,
                };
                use std::cmp::Ordering::*;
                let r = match op {
                    BinOp::Eq => ordering == Equal,
                    BinOp::Ne => ordering != Equal,
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

pub unsafe extern "C" fn sap_call_host(
    env: *mut Env,
    desc: *const HostCallDesc,
    args: *const i64,
) -> i64 {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    let raw = unsafe { std::slice::from_raw_parts(args, desc.args.len()) };
    guard(env, desc.span, |env| {
        if desc.builtin == Some(Builtin::Toposort)
            && let Some(layers) = toposort_native(raw[0])
        {
            return layers.map_err(|e| ExecError::new(e, desc.span));
        }
        let host = env.host();
        let values: Vec<Value> = desc
            .args
            .iter()
            .zip(raw)
            .map(|(t, r)| to_value(host, t, *r))
            .collect();
        let engine = crate::jit::JitEngine {
            // SAFETY: the program outlives every run of its code.
            program: unsafe { &*env.program },
            host,
            depth: env.depth,
            max_iterations: env.max_iterations.saturating_sub(env.iterations),
        };
        let result = match desc.builtin {
            Some(b) => host.call_builtin(b, &values, desc.span, &engine)?,
            None => host.call_extern(&desc.name, &values, desc.span, &engine)?,
        };
        Ok(from_value(&desc.ret, result))
    })
}

/// `toposort` of a native list, read and answered in place (no runtime values); `None`
/// when the list came from the host.
fn toposort_native(deps: i64) -> Option<Result<i64, String>> {
    let Some(Slot::Raw(deps)) = (unsafe { obj(deps) }) else {
        return None;
    };
    let deps = deps.as_slice();
    let mut offsets = Vec::with_capacity(deps.len() + 1);
    let mut targets = Vec::with_capacity(deps.len() * 2);
    offsets.push(0);
    for d in deps {
        // SAFETY: the elements of a native `List<List<i64>>` are live list objects.
        match unsafe { obj(*d) } {
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
    struct Layer(i64);
    impl Drop for Layer {
        fn drop(&mut self) {
            sap_release(self.0);
        }
    }
    let layers = crate::toposort::layers_flat(&offsets, &targets, |layer| {
        let nodes = layer.iter().map(|&n| n as i64).collect();
        Layer(new_obj(Slot::Raw(RawList::from_vec(nodes, false))))
    });
    Some(layers.map(|layers| {
        let layers = layers
            .into_iter()
            .map(|l| std::mem::ManuallyDrop::new(l).0)
            .collect();
        new_obj(Slot::Raw(RawList::from_vec(layers, true)))
    }))
}

/// Appends `item` (borrowed) to the list in `list` (whose reference it takes over), in
/// place when nothing else holds it; the result is always a native list. Compiled code
/// appends by itself when it can (see `rawlist::layout`), and calls this otherwise: the
/// first element, a full buffer, a shared list, a list that came from the host.
pub unsafe extern "C" fn sap_push(
    env: *mut Env,
    desc: *const TypeArg,
    list: i64,
    item: i64,
) -> i64 {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    guard(env, desc.span, |_| {
        let heap = desc.ty.is_heap();
        if heap {
            // The list's own reference.
            sap_retain(item);
        }
        if list == 0 {
            return Ok(new_obj(Slot::Raw(RawList::from_vec(vec![item], heap))));
        }
        // SAFETY: we own one reference to `list`.
        let mut arc: Arc<Slot> = unsafe { Arc::from_raw(list as *const Slot) };
        if let Some(Slot::Raw(items)) = Arc::get_mut(&mut arc) {
            debug_assert_eq!(items.heap(), heap, "a native list's element kind");
            items.push(item);
            return Ok(Arc::into_raw(arc) as i64);
        }
        let mut items = native_items(&arc, &desc.ty);
        items.push(item);
        drop(arc);
        Ok(new_obj(Slot::Raw(RawList::from_vec(items, heap))))
    })
}

/// The elements of a list object as native values of type `elem`, with references of
/// their own (a copy: the list itself is left as it is).
fn native_items(list: &Slot, elem: &Type) -> Vec<i64> {
    match list {
        Slot::Raw(items) => items.clone().into_vec(),
        Slot::Val(Value::List(values)) => {
            values.iter().map(|v| from_value(elem, v.clone())).collect()
        }
        _ => Vec::new(),
    }
}

/// A native list with the elements of `list` (borrowed): the same list, with a new
/// reference, when it is native already; a copy when it came from the host.
pub unsafe extern "C" fn sap_native(env: *mut Env, desc: *const TypeArg, list: i64) -> i64 {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    guard(env, desc.span, |_| match unsafe { obj(list) } {
        Some(Slot::Raw(_)) => {
            sap_retain(list);
            Ok(list)
        }
        other => {
            let items = other.map_or_else(Vec::new, |l| native_items(l, &desc.ty));
            Ok(new_obj(Slot::Raw(RawList::from_vec(
                items,
                desc.ty.is_heap(),
            ))))
        }
    })
}

/// `xs = set(xs, index, item)`: replaces an element of the list in `list` (whose
/// reference it takes over; `item` is borrowed), in place when nothing else holds it;
/// the result is always a native list. Compiled code replaces by itself when it can.
pub unsafe extern "C" fn sap_set(
    env: *mut Env,
    desc: *const TypeArg,
    list: i64,
    index: i64,
    item: i64,
) -> i64 {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    guard(env, desc.span, |_| {
        let heap = desc.ty.is_heap();
        // No list (0) has no elements.
        let len = match unsafe { obj(list) } {
            Some(Slot::Raw(items)) => items.as_slice().len(),
            Some(Slot::Val(Value::List(values))) => values.len(),
            _ => 0,
        };
        let Some(at) = usize::try_from(index).ok().filter(|&at| at < len) else {
            // The variable keeps its reference; the run stops.
            return Err(ExecError::new(out_of_range(index, len), desc.span));
        };
        // SAFETY: we own one reference to `list`, a live list object (it has elements).
        let mut arc: Arc<Slot> = unsafe { Arc::from_raw(list as *const Slot) };
        if heap {
            // The list's own reference.
            sap_retain(item);
        }
        if let Some(Slot::Raw(items)) = Arc::get_mut(&mut arc) {
            debug_assert_eq!(items.heap(), heap, "a native list's element kind");
            let old = std::mem::replace(&mut items.as_mut_slice()[at], item);
            if heap {
                sap_release(old);
            }
            return Ok(Arc::into_raw(arc) as i64);
        }
        let mut items = native_items(&arc, &desc.ty);
        let old = std::mem::replace(&mut items[at], item);
        if heap {
            sap_release(old);
        }
        drop(arc);
        Ok(new_obj(Slot::Raw(RawList::from_vec(items, heap))))
    })
}

pub unsafe extern "C" fn sap_list(
    env: *mut Env,
    desc: *const TypeArg,
    items: *const i64,
    n: i64,
) -> i64 {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    let raw = unsafe { std::slice::from_raw_parts(items, n as usize) };
    guard(env, None, |_| {
        let heap = desc.ty.is_heap();
        if heap {
            for p in raw {
                sap_retain(*p);
            }
        }
        Ok(new_obj(Slot::Raw(RawList::from_vec(raw.to_vec(), heap))))
    })
}

pub unsafe extern "C" fn sap_struct(
    env: *mut Env,
    desc: *const StructDesc,
    fields: *const i64,
) -> i64 {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    let raw = unsafe { std::slice::from_raw_parts(fields, desc.fields.len()) };
    guard(env, None, |env| {
        let host = env.host();
        let Some(TypeDesc::Struct(s)) = host.types.get(desc.type_id as usize) else {
            return Err(ExecError::new("internal: not a struct type", None));
        };
        let fields = desc
            .fields
            .iter()
            .zip(raw)
            .map(|(t, r)| to_value(host, t, *r))
            .collect();
        Ok(new_obj(Slot::Val(Value::Struct(Arc::new(StructValue {
            ty: s.clone(),
            fields,
        })))))
    })
}

pub unsafe extern "C" fn sap_field(
    env: *mut Env,
    desc: *const TypeArg,
    value: i64,
    index: i64,
) -> i64 {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    guard(env, desc.span, |_| match unsafe { obj(value) } {
        Some(Slot::Val(Value::Struct(s))) => Ok(from_value(
            &desc.ty,
            s.fields.get(index as usize).cloned().unwrap_or(Value::Unit),
        )),
        _ => Err(ExecError::new("internal: field of a non-struct", desc.span)),
    })
}

pub unsafe extern "C" fn sap_index(
    env: *mut Env,
    desc: *const TypeArg,
    list: i64,
    index: i64,
) -> i64 {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    let out_of_range = |len: usize| ExecError::new(out_of_range(index, len), desc.span);
    guard(env, desc.span, |_| match unsafe { obj(list) } {
        Some(Slot::Raw(items)) => {
            let items = items.as_slice();
            match usize::try_from(index).ok().and_then(|i| items.get(i)) {
                Some(x) => {
                    if desc.ty.is_heap() {
                        sap_retain(*x);
                    }
                    Ok(*x)
                }
                None => Err(out_of_range(items.len())),
            }
        }
        Some(Slot::Val(Value::List(items))) => {
            match usize::try_from(index).ok().and_then(|i| items.get(i)) {
                Some(v) => Ok(from_value(&desc.ty, v.clone())),
                None => Err(out_of_range(items.len())),
            }
        }
        _ => Err(ExecError::new("internal: index of a non-list", desc.span)),
    })
}

pub unsafe extern "C" fn sap_list_len(list: i64) -> i64 {
    match unsafe { obj(list) } {
        Some(Slot::Val(Value::List(items))) => items.len() as i64,
        Some(Slot::Raw(items)) => items.as_slice().len() as i64,
        _ => 0,
    }
}

pub extern "C" fn sap_ctx_new() -> i64 {
    new_obj(Slot::Ctx(Context::new()))
}

pub unsafe extern "C" fn sap_ctx_child(ctx: i64) -> i64 {
    match unsafe { obj(ctx) } {
        Some(Slot::Ctx(c)) => new_obj(Slot::Ctx(c.child())),
        _ => new_obj(Slot::Ctx(Context::new())),
    }
}

pub unsafe extern "C" fn sap_instruct(ctx: i64, text: i64) {
    if let (Some(Slot::Ctx(c)), Some(Slot::Val(Value::Str(t)))) = unsafe { (obj(ctx), obj(text)) } {
        c.instruct(t);
    }
}

pub unsafe extern "C" fn sap_inject(env: *mut Env, desc: *const InjectDesc, ctx: i64, value: i64) {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    guard(env, None, |env| {
        if let Some(Slot::Ctx(c)) = unsafe { obj(ctx) } {
            c.inject_value(
                to_value(env.host(), &desc.ty, value),
                &desc.function,
                &desc.label,
            );
        }
        Ok(0)
    });
}

/// `schema` is the `Json` schema a produced `Json` must match (borrowed), or 0.
pub unsafe extern "C" fn sap_llm(
    env: *mut Env,
    desc: *const LlmDesc,
    ctx: i64,
    schema: i64,
) -> i64 {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    guard(env, None, |env| {
        let host = env.host();
        let Some(Slot::Ctx(c)) = (unsafe { obj(ctx) }) else {
            return Err(ExecError::new(
                "internal: an LLM call without a context",
                None,
            ));
        };
        Ok(match &desc.kind {
            LlmKind::Produce(ty) => {
                let schema = (schema != 0).then(|| to_value(host, &Type::Json, schema));
                from_value(ty, host.produce(desc.site, c, schema.as_ref())?)
            }
            LlmKind::Decide => host.decide(desc.site, c)? as i64,
            LlmKind::Fill => new_obj(Slot::Pack(None, Arc::new(host.fill(desc.site, c)?))),
            LlmKind::Choose => {
                let (arm, args) = host.choose(desc.site, c)?;
                new_obj(Slot::Pack(Some(arm), Arc::new(args)))
            }
        })
    })
}

pub unsafe extern "C" fn sap_arg(desc: *const TypeArg, pack: i64, i: i64) -> i64 {
    let desc = unsafe { &*desc };
    match unsafe { obj(pack) } {
        Some(Slot::Pack(_, args)) => from_value(
            &desc.ty,
            args.get(i as usize).cloned().unwrap_or(Value::Unit),
        ),
        _ => 0,
    }
}

pub unsafe extern "C" fn sap_arm(pack: i64) -> i64 {
    match unsafe { obj(pack) } {
        Some(Slot::Pack(Some(arm), _)) => *arm as i64,
        _ => 0,
    }
}

pub unsafe extern "C" fn sap_parallel(
    env: *mut Env,
    desc: *const ParallelDesc,
    list: i64,
    captures: *const i64,
) -> i64 {
    let (env, desc) = unsafe { (&mut *env, &*desc) };
    let captured: Vec<i64> =
        unsafe { std::slice::from_raw_parts(captures, desc.captures.len()) }.to_vec();
    let program = env.program;
    guard(env, desc.span, |env| {
        // SAFETY: the host outlives the run; it is not part of `env`'s mutable state.
        let host: &Host = unsafe { &*env.host };
        let items: Vec<Value> = match to_value(host, &Type::List(Box::new(desc.elem.clone())), list)
        {
            Value::List(items) => Arc::unwrap_or_clone(items),
            _ => Vec::new(),
        };
        // SAFETY: the program outlives the run.
        let program = unsafe { &*program };
        let results = program.run_parallel(host, env, desc, &captured, &items)?;
        Ok(new_obj(Slot::Val(Value::List(Arc::new(results)))))
    })
}
