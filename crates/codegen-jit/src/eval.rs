//! The reference evaluator: a direct interpreter of the IR. It defines what every
//! operation means, and is the oracle the native code generator is tested against.
//!
//! It runs on a plain thread (LLM calls block on the host's tokio runtime) with a big
//! stack; recursion beyond `Limits::max_depth`, or beyond what the stack holds, is an
//! error, never a stack overflow.
//!
//! It depends on the host, the shared meaning of operations (`ops.rs`) and the heap's
//! `Slot` (its value type), never on the native code generator.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ir::{BinOp, Const, FuncId, Op, SrcSpan, Terminator, Type, UnOp};
use runtime::value::{StructValue, ToolRef};
use runtime::{Context, TypeDesc, Value};

use crate::heap::Slot;
use crate::host::{Engine, ExecError, Host, StackFrame, out_of_range};
use crate::ops::{collect_iterations, int_op};

/// The stack one evaluated call may need, at most.
const EVAL_CALL_ROOM: usize = 64 << 10;

pub struct Evaluator<'h> {
    host: &'h Host,
    iterations: AtomicU64,
}

fn err(message: impl Into<String>, span: Option<SrcSpan>) -> ExecError {
    ExecError::new(message, span)
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        Value::Bool(b) => *b as i64,
        Value::Enum { variant, .. } => *variant as i64,
        _ => 0,
    }
}

fn float(v: &Value) -> f64 {
    match v {
        Value::Float(x) => *x,
        _ => 0.0,
    }
}

/// The evaluator as seen by builtins that call sap functions (the `aot` executor).
struct EvalEngine<'e, 'h> {
    eval: &'e Evaluator<'h>,
    depth: u32,
}

impl Engine for EvalEngine<'_, '_> {
    fn call_function(&self, f: FuncId, args: Vec<Value>) -> Result<Value, ExecError> {
        let func = &self.eval.host.module.functions[f as usize];
        let mut values = args.into_iter();
        let slots = func
            .params
            .iter()
            .map(|p| match p.ty {
                Type::Context => Slot::Ctx(Context::new()),
                _ => Slot::Val(values.next().unwrap_or(Value::Unit)),
            })
            .collect();
        Ok(self.eval.call(f, slots, self.depth + 1)?.val().clone())
    }
}

impl<'h> Evaluator<'h> {
    pub fn new(host: &'h Host) -> Evaluator<'h> {
        Evaluator {
            host,
            iterations: AtomicU64::new(0),
        }
    }

    /// Runs `main`, giving it a new context if it takes one.
    pub fn run_main(&self) -> Result<Value, ExecError> {
        let module = &self.host.module;
        let main = module
            .main
            .ok_or_else(|| err("the program has no `main` function", None))?;
        let f = &module.functions[main as usize];
        let mut arguments = crate::host::main_arguments(self.host, f)?.into_iter();
        let args = f
            .params
            .iter()
            .map(|p| {
                if p.ty == Type::Context {
                    Slot::Ctx(Context::new())
                } else {
                    Slot::Val(arguments.next().expect("a value per parameter"))
                }
            })
            .collect();
        Ok(self.call(main, args, 0)?.val().clone())
    }

    pub fn call(&self, id: FuncId, args: Vec<Slot>, depth: u32) -> Result<Slot, ExecError> {
        let f = &self.host.module.functions[id as usize];
        // A budget error is raised in the function it stops, which is then the innermost
        // frame of the stack (as in compiled code).
        let in_this_function = |message: String| {
            let mut e = err(message, Some(f.span));
            e.stack.push(StackFrame {
                function: f.name.clone(),
                span: Some(f.span),
            });
            e
        };
        if depth >= self.host.limits.max_depth {
            return Err(in_this_function(format!(
                "recursion deeper than {} calls",
                self.host.limits.max_depth
            )));
        }
        // A call here takes kilobytes of the Rust stack: recursion stops where the stack
        // would end, as in compiled code.
        if runtime::tasks::stack_room().is_some_and(|room| room < EVAL_CALL_ROOM) {
            return Err(in_this_function(format!(
                "recursion deeper than {depth} calls: as deep as the program's stack holds (`--max-depth` is {})",
                self.host.limits.max_depth
            )));
        }
        let mut locals: Vec<Slot> = vec![Slot::Empty; f.locals.len()];
        for (i, a) in args.into_iter().enumerate() {
            locals[i] = a;
        }
        let mut values: Vec<Slot> = vec![Slot::Empty; f.value_count as usize];
        let mut block = 0usize;
        loop {
            let b = &f.blocks[block];
            for inst in &b.insts {
                let result = self.inst(
                    &inst.op,
                    inst.span,
                    inst.dest.as_ref().map(|d| &d.1),
                    &mut locals,
                    &values,
                    depth,
                );
                let slot = match result {
                    Ok(slot) => slot,
                    Err(mut e) => {
                        e.stack.push(StackFrame {
                            function: f.name.clone(),
                            span: inst.span.or(e.span),
                        });
                        return Err(e);
                    }
                };
                if let Some((v, _)) = &inst.dest {
                    values[*v as usize] = slot;
                }
            }
            let next = match &b.term {
                Terminator::Return(v) => return Ok(values[*v as usize].clone()),
                Terminator::Jump(t) => *t as usize,
                Terminator::Loop(t, span) => {
                    // One more loop iteration.
                    let n = self.iterations.fetch_add(1, Ordering::Relaxed) + 1;
                    if n > self.host.limits.max_loop_iterations {
                        let mut e = err(
                            format!(
                                "more than {} loop iterations",
                                self.host.limits.max_loop_iterations
                            ),
                            Some(*span),
                        );
                        e.stack.push(StackFrame {
                            function: f.name.clone(),
                            span: Some(*span),
                        });
                        return Err(e);
                    }
                    *t as usize
                }
                Terminator::Branch(c, t, e) => {
                    if matches!(values[*c as usize].val(), Value::Bool(true)) {
                        *t as usize
                    } else {
                        *e as usize
                    }
                }
                Terminator::Switch(v, targets) => {
                    let i = int(values[*v as usize].val()) as usize;
                    *targets
                        .get(i)
                        .ok_or_else(|| err(format!("internal: no arm {i}"), Some(f.span)))?
                        as usize
                }
                Terminator::Unreachable => {
                    return Err(err(
                        format!("internal: `{}` reached an unreachable block", f.name),
                        Some(f.span),
                    ));
                }
            };
            block = next;
        }
    }

    fn inst(
        &self,
        op: &Op,
        span: Option<SrcSpan>,
        ty: Option<&Type>,
        locals: &mut [Slot],
        values: &[Slot],
        depth: u32,
    ) -> Result<Slot, ExecError> {
        let host = self.host;
        let v = |id: &u32| values[*id as usize].val();
        let ctx = |id: &u32| match &values[*id as usize] {
            Slot::Ctx(c) => Ok(c.clone()),
            _ => Err(err("internal: not a context", span)),
        };
        Ok(match op {
            Op::Const(c) => Slot::Val(match c {
                Const::Unit => Value::Unit,
                Const::Bool(b) => Value::Bool(*b),
                Const::Int(n) => Value::Int(*n),
                Const::Float(x) => Value::Float(*x),
                Const::Str(s) => Value::str(s),
                Const::Tool { name, function } => Value::Tool(ToolRef {
                    name: Arc::from(name.as_str()),
                    function: *function,
                }),
                Const::Variant(t, i) => match host.types.get(*t as usize) {
                    Some(TypeDesc::Enum(e)) => Value::Enum {
                        ty: e.clone(),
                        variant: *i,
                    },
                    _ => Value::Int(*i as i64),
                },
            }),
            Op::Load(l) => locals[*l as usize].clone(),
            Op::Store(l, x) => {
                locals[*l as usize] = values[*x as usize].clone();
                Slot::Empty
            }
            Op::Binary(op, t, a, b) => Slot::Val(self.binary(*op, t, v(a), v(b), span)?),
            Op::Unary(UnOp::Not, _, a) => {
                Slot::Val(Value::Bool(!matches!(v(a), Value::Bool(true))))
            }
            Op::Unary(UnOp::Neg, t, a) => Slot::Val(match t {
                Type::F64 => Value::Float(-float(v(a))),
                _ => Value::Int(int_op(BinOp::Sub, t, 0, int(v(a)), span)?),
            }),
            Op::Call(f, args) => {
                let args = args.iter().map(|a| values[*a as usize].clone()).collect();
                self.call(*f, args, depth + 1)?
            }
            Op::CallExtern(name, args) => {
                let args: Vec<Value> = args.iter().map(|a| v(a).clone()).collect();
                let engine = EvalEngine { eval: self, depth };
                Slot::Val(host.call_extern(name, &args, span, &engine)?)
            }
            Op::CallBuiltin(b, args) => {
                let args: Vec<Value> = args.iter().map(|a| v(a).clone()).collect();
                let engine = EvalEngine { eval: self, depth };
                Slot::Val(host.call_builtin(*b, &args, span, &engine)?)
            }
            Op::Release(l) => {
                locals[*l as usize] = Slot::Empty;
                Slot::Empty
            }
            Op::SetInPlace(l, i, x) => {
                let (index, item) = (int(v(i)), v(x).clone());
                match &mut locals[*l as usize] {
                    Slot::Val(Value::List(items)) => {
                        let len = items.len();
                        let at = usize::try_from(index)
                            .ok()
                            .filter(|&at| at < len)
                            .ok_or_else(|| err(out_of_range(index, len), span))?;
                        Arc::make_mut(items)[at] = item;
                    }
                    _ => return Err(err("internal: set on a non-list", span)),
                }
                Slot::Empty
            }
            Op::PushInPlace(l, x) => {
                let item = v(x).clone();
                match &mut locals[*l as usize] {
                    Slot::Val(Value::List(items)) => Arc::make_mut(items).push(item),
                    other => *other = Slot::Val(Value::List(Arc::new(vec![item]))),
                }
                Slot::Empty
            }
            Op::List(items) => Slot::Val(Value::List(Arc::new(
                items.iter().map(|i| v(i).clone()).collect(),
            ))),
            Op::Struct(t, fields) => {
                let Some(TypeDesc::Struct(desc)) = host.types.get(*t as usize) else {
                    return Err(err("internal: not a struct type", span));
                };
                Slot::Val(Value::Struct(Arc::new(StructValue {
                    ty: desc.clone(),
                    fields: fields.iter().map(|f| v(f).clone()).collect(),
                })))
            }
            Op::Field(s, i) => match v(s) {
                Value::Struct(s) => {
                    Slot::Val(s.fields.get(*i as usize).cloned().unwrap_or(Value::Unit))
                }
                _ => return Err(err("internal: field of a non-struct", span)),
            },
            Op::Index(l, i) | Op::Element(l, i) => {
                let i = int(v(i));
                match v(l) {
                    Value::List(items) => {
                        match usize::try_from(i).ok().and_then(|i| items.get(i)) {
                            Some(x) => Slot::Val(x.clone()),
                            None => return Err(err(out_of_range(i, items.len()), span)),
                        }
                    }
                    _ => return Err(err("internal: index of a non-list", span)),
                }
            }
            Op::ContextNew => Slot::Ctx(Context::new()),
            Op::ContextChild(c) => Slot::Ctx(ctx(c)?.child()),
            Op::ContextEnter(c, f) => Slot::Ctx(ctx(c)?.enter(Arc::from(f.as_str()))),
            Op::Instruct(c, text) => {
                ctx(c)?.instruct(text);
                Slot::Empty
            }
            Op::Inject {
                ctx: c,
                value,
                function,
                label,
            } => {
                ctx(c)?.inject_value(v(value).clone(), function, label);
                Slot::Empty
            }
            Op::Produce {
                site,
                ctx: c,
                schema,
            } => Slot::Val(host.produce(*site, &ctx(c)?, schema.as_ref().map(&v))?),
            Op::Decide { site, ctx: c } => Slot::Val(Value::Bool(host.decide(*site, &ctx(c)?)?)),
            Op::Fill { site, ctx: c } => Slot::Pack(None, Arc::new(host.fill(*site, &ctx(c)?)?)),
            Op::Choose { site, ctx: c } => {
                let (arm, args) = host.choose(*site, &ctx(c)?)?;
                Slot::Pack(Some(arm), Arc::new(args))
            }
            Op::Arg(p, i) => match &values[*p as usize] {
                Slot::Pack(_, args) => {
                    Slot::Val(args.get(*i as usize).cloned().unwrap_or(Value::Unit))
                }
                _ => return Err(err("internal: not an argument pack", span)),
            },
            Op::Arm(p) => match &values[*p as usize] {
                Slot::Pack(Some(arm), _) => Slot::Val(Value::Int(*arm as i64)),
                _ => return Err(err("internal: not a choice", span)),
            },
            Op::ParallelFor {
                list,
                body,
                captures,
            } => {
                let items = match v(list) {
                    Value::List(items) => items.clone(),
                    _ => return Err(err("internal: parallel for over a non-list", span)),
                };
                let captured: Vec<Slot> = captures
                    .iter()
                    .map(|c| values[*c as usize].clone())
                    .collect();
                let _ = ty;
                Slot::Val(Value::List(Arc::new(
                    self.parallel(*body, &captured, &items, depth)?,
                )))
            }
        })
    }

    /// Runs the iterations concurrently, at most `Limits::concurrency` at once, and
    /// gives their results in input order; the first error (in input order) wins.
    fn parallel(
        &self,
        body: FuncId,
        captured: &[Slot],
        items: &[Value],
        depth: u32,
    ) -> Result<Vec<Value>, ExecError> {
        let results = runtime::tasks::fan_out(
            items.len(),
            self.host.limits.concurrency,
            |i| {
                let mut args = captured.to_vec();
                args.push(Slot::Val(items[i].clone()));
                self.call(body, args, depth + 1).map(|s| s.val().clone())
            },
            Result::is_err,
        );
        collect_iterations(results)
    }

    fn binary(
        &self,
        op: BinOp,
        ty: &Type,
        a: &Value,
        b: &Value,
        span: Option<SrcSpan>,
    ) -> Result<Value, ExecError> {
        use std::cmp::Ordering as O;
        let ordering = || -> Option<O> {
            match ty {
                Type::F64 => float(a).partial_cmp(&float(b)),
                Type::Str => match (a, b) {
                    (Value::Str(x), Value::Str(y)) => Some(x.cmp(y)),
                    _ => None,
                },
                Type::Unit => Some(O::Equal),
                _ => Some(int(a).cmp(&int(b))),
            }
        };
        Ok(match op {
            BinOp::Concat => match (a, b) {
                (Value::Str(x), Value::Str(y)) => Value::str(&format!("{x}{y}")),
                _ => return Err(err("internal: concatenation of non-strings", span)),
            },
            // Lists, options, structs and `Json` are equal when their values are,
            // element by element and field by field.
            BinOp::Eq | BinOp::Ne
                if matches!(
                    ty,
                    Type::List(_) | Type::Option(_) | Type::Struct(_) | Type::Json
                ) =>
            {
                Value::Bool((a == b) == (op == BinOp::Eq))
            }
            BinOp::Eq => Value::Bool(ordering() == Some(O::Equal)),
            BinOp::Ne => Value::Bool(ordering() != Some(O::Equal)),
            BinOp::Lt => Value::Bool(ordering() == Some(O::Less)),
            BinOp::Le => Value::Bool(matches!(ordering(), Some(O::Less | O::Equal))),
            BinOp::Gt => Value::Bool(ordering() == Some(O::Greater)),
            BinOp::Ge => Value::Bool(matches!(ordering(), Some(O::Greater | O::Equal))),
            arithmetic if *ty == Type::F64 => {
                let (x, y) = (float(a), float(b));
                Value::Float(match arithmetic {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => x / y,
                    _ => x % y,
                })
            }
            arithmetic => Value::Int(int_op(arithmetic, ty, int(a), int(b), span)?),
        })
    }
}
