//! What each IR instruction becomes: native code for constants, variables, arithmetic
//! and calls between sap functions, and intrinsic calls (with their descriptors) for
//! host calls, data, contexts and LLM sites.

use cranelift_codegen::ir as clif;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData as MemFlags, types};
use ir::{BinOp, Const, Op, SrcSpan, Type, UnOp};

use super::I64;
use super::function::FnCg;
use super::lists::element_type;
use crate::abi::{
    HostCallDesc, InjectDesc, LlmDesc, LlmKind, ParallelDesc, Pin, StructDesc, TypeArg,
};
use crate::intrinsics::Intr;

impl FnCg<'_, '_> {
    pub(super) fn type_arg(&mut self, ty: Type, span: Option<SrcSpan>) -> clif::Value {
        self.pin(Pin::TypeArg(TypeArg { ty, span }))
    }

    /// A constant object (a string or a tool), with a count for the code that uses it.
    pub(super) fn const_obj(&mut self, pin: Pin) -> clif::Value {
        let v = self.pin(pin);
        self.call(Intr::Retain, &[v]);
        v
    }

    pub(super) fn inst(
        &mut self,
        op: &Op,
        span: Option<SrcSpan>,
        ty: Option<&Type>,
    ) -> Result<Option<clif::Value>, String> {
        let ty = ty.cloned().unwrap_or(Type::Unit);
        Ok(Some(match op {
            Op::Const(c) => match c {
                Const::Unit => self.iconst(0),
                Const::Bool(b) => self.iconst(*b as i64),
                Const::Int(n) => self.iconst(*n),
                Const::Float(x) => self.iconst(x.to_bits() as i64),
                Const::Variant(_, i) => self.iconst(*i as i64),
                Const::Str(s) => self.const_obj(Pin::Str(s.clone())),
                Const::Tool { name, function } => self.const_obj(Pin::Tool {
                    name: name.clone(),
                    function: *function,
                }),
            },
            Op::Load(l) => {
                let v = self.b.use_var(self.vars[*l as usize]);
                let id = self.current_dest;
                if self.f.locals[*l as usize].ty.is_heap() && !self.borrowed.contains(&id) {
                    self.call(Intr::Retain, &[v]);
                }
                v
            }
            Op::Store(l, x) => {
                let v = self.value(*x);
                let var = self.vars[*l as usize];
                if self.f.locals[*l as usize].ty.is_heap() {
                    self.call(Intr::Retain, &[v]);
                    let old = self.b.use_var(var);
                    self.call(Intr::Release, &[old]);
                }
                self.b.def_var(var, v);
                self.see_appender_list(*l, v);
                if let Some(buffer) = self.buffers.get(l).copied() {
                    let elem = element_type(&self.f.locals[*l as usize].ty);
                    self.walk_native(*l, buffer, v, &elem);
                }
                return Ok(None);
            }
            Op::Binary(op, t, a, b) => {
                let (a, b) = (self.value(*a), self.value(*b));
                self.binary(*op, t, a, b, span)
            }
            Op::Unary(UnOp::Not, _, a) => {
                let a = self.value(*a);
                let r = self.b.ins().icmp_imm_s(IntCC::Equal, a, 0);
                self.b.ins().uextend(I64, r)
            }
            Op::Unary(UnOp::Neg, t, a) => {
                let a = self.value(*a);
                match t {
                    Type::F64 => {
                        let x = self.b.ins().bitcast(types::F64, MemFlags::new(), a);
                        let n = self.b.ins().fneg(x);
                        self.b.ins().bitcast(I64, MemFlags::new(), n)
                    }
                    _ => {
                        let zero = self.iconst(0);
                        self.binary(BinOp::Sub, t, zero, a, span)
                    }
                }
            }
            Op::Call(callee, args) => {
                let mut values = vec![self.deeper_here()];
                for a in args {
                    values.push(self.value(*a));
                }
                let r = self.callees.function(self.b.func, *callee);
                self.save_iterations();
                let inst = self.b.ins().call(r, &values);
                let (result, failed) = (self.b.inst_results(inst)[0], self.b.inst_results(inst)[1]);
                self.reload_iterations();
                self.unwind_if(failed, span);
                result
            }
            Op::CallExtern(_, args) | Op::CallBuiltin(_, args) => {
                let builtin = match op {
                    Op::CallBuiltin(b, _) => Some(*b),
                    _ => None,
                };
                let arg_types: Vec<Type> = args
                    .iter()
                    .map(|a| self.value_type(*a).cloned().unwrap_or(Type::Unit))
                    .collect();
                let name = match op {
                    Op::CallExtern(n, _) => n.clone(),
                    _ => String::new(),
                };
                if builtin == Some(ir::Builtin::Len)
                    && matches!(arg_types.first(), Some(Type::List(_)))
                {
                    let l = self.value(args[0]);
                    return Ok(Some(self.list_len(l)));
                }
                let d = self.pin(Pin::HostCall(HostCallDesc {
                    builtin,
                    name,
                    args: arg_types,
                    ret: ty.clone(),
                    span,
                }));
                let values: Vec<clif::Value> = args.iter().map(|a| self.value(*a)).collect();
                let array = self.array(&values);
                self.publish_depth();
                let r = self.call_env(Intr::CallHost, &[d, array]).unwrap_or(d);
                self.check_failed(span);
                r
            }
            Op::PushInPlace(l, x) => {
                let elem = element_type(&self.f.locals[*l as usize].ty);
                let item = self.value(*x);
                self.push_in_place(*l, item, &elem, span);
                return Ok(None);
            }
            Op::Release(l) => {
                let var = self.vars[*l as usize];
                if self.f.locals[*l as usize].ty.is_heap() {
                    let v = self.b.use_var(var);
                    self.call(Intr::Release, &[v]);
                }
                let zero = self.iconst(0);
                self.b.def_var(var, zero);
                return Ok(None);
            }
            Op::SetInPlace(l, i, x) => {
                let elem = element_type(&self.f.locals[*l as usize].ty);
                let (index, item) = (self.value(*i), self.value(*x));
                self.set_in_place(*l, index, item, &elem, span);
                return Ok(None);
            }
            Op::List(items) => {
                let elem = element_type(&ty);
                let values: Vec<clif::Value> = items.iter().map(|i| self.value(*i)).collect();
                let array = self.array(&values);
                let d = self.type_arg(elem, span);
                let n = self.iconst(values.len() as i64);
                let r = self.call_env(Intr::List, &[d, array, n]).unwrap_or(n);
                self.check_failed(span);
                r
            }
            Op::Struct(t, fields) => {
                let field_types: Vec<Type> = fields
                    .iter()
                    .map(|v| self.value_type(*v).cloned().unwrap_or(Type::Unit))
                    .collect();
                let d = self.pin(Pin::Struct(StructDesc {
                    type_id: *t,
                    fields: field_types,
                }));
                let values: Vec<clif::Value> = fields.iter().map(|v| self.value(*v)).collect();
                let array = self.array(&values);
                let r = self.call_env(Intr::Struct, &[d, array]).unwrap_or(d);
                self.check_failed(span);
                r
            }
            Op::Field(s, i) => {
                let s = self.value(*s);
                let d = self.type_arg(ty.clone(), span);
                let i = self.iconst(*i as i64);
                let r = self.call_env(Intr::Field, &[d, s, i]).unwrap_or(i);
                self.check_failed(span);
                r
            }
            Op::Index(l, i) => {
                let (l, i) = (self.value(*l), self.value(*i));
                self.list_index(l, i, &ty, span)
            }
            Op::Element(l, i) => {
                let buffer = self
                    .loaded_from
                    .get(l)
                    .and_then(|local| self.buffers.get(local))
                    .map(|var| self.b.use_var(*var));
                let (l, i) = (self.value(*l), self.value(*i));
                match buffer {
                    Some(items) => self.element_of_buffer(items, i, &ty),
                    // Lowering always loads the hidden local right before; indexing
                    // with its checks is the same read.
                    None => self.list_index(l, i, &ty, span),
                }
            }
            Op::ContextNew => self.call(Intr::CtxNew, &[]).expect("returns"),
            Op::ContextChild(c) => {
                let c = self.value(*c);
                self.call(Intr::CtxChild, &[c]).expect("returns")
            }
            Op::ContextEnter(c, f) => {
                // The name is a pinned string the intrinsic only reads: no count to keep.
                let c = self.value(*c);
                let name = self.pin(Pin::Str(f.to_string()));
                self.call(Intr::CtxEnter, &[c, name]).expect("returns")
            }
            Op::Instruct(c, text) => {
                let c = self.value(*c);
                let t = self.const_obj(Pin::Str(text.to_string()));
                self.call(Intr::Instruct, &[c, t]);
                self.call(Intr::Release, &[t]);
                return Ok(None);
            }
            Op::Inject {
                ctx,
                value,
                function,
                label,
            } => {
                let value_ty = self.value_type(*value).cloned().unwrap_or(Type::Unit);
                let d = self.pin(Pin::Inject(InjectDesc {
                    ty: value_ty,
                    function: function.clone(),
                    label: label.clone(),
                }));
                let (c, v) = (self.value(*ctx), self.value(*value));
                self.call_env(Intr::Inject, &[d, c, v]);
                self.check_failed(span);
                return Ok(None);
            }
            Op::Produce { site, ctx, .. }
            | Op::Decide { site, ctx }
            | Op::Fill { site, ctx }
            | Op::Choose { site, ctx } => {
                let kind = match op {
                    Op::Produce { .. } => LlmKind::Produce(ty.clone()),
                    Op::Decide { .. } => LlmKind::Decide,
                    Op::Fill { .. } => LlmKind::Fill,
                    _ => LlmKind::Choose,
                };
                let d = self.pin(Pin::Llm(LlmDesc { kind, site: *site }));
                let c = self.value(*ctx);
                // The schema a `Json` result must match, or 0.
                let extra = match op {
                    Op::Produce {
                        schema: Some(s), ..
                    } => self.value(*s),
                    _ => self.iconst(0),
                };
                let r = self.call_env(Intr::Llm, &[d, c, extra]).unwrap_or(d);
                self.check_failed(span);
                r
            }
            Op::Arg(p, i) => {
                let p = self.value(*p);
                let d = self.type_arg(ty.clone(), span);
                let i = self.iconst(*i as i64);
                self.call(Intr::Arg, &[d, p, i]).expect("returns")
            }
            Op::Arm(p) => {
                let p = self.value(*p);
                self.call(Intr::Arm, &[p]).expect("returns")
            }
            Op::ParallelFor {
                list,
                body,
                captures,
            } => {
                let body_f = &self.module.functions[*body as usize];
                let capture_types: Vec<Type> = captures
                    .iter()
                    .map(|c| self.value_type(*c).cloned().unwrap_or(Type::Unit))
                    .collect();
                let elem = body_f.params.last().map_or(Type::Unit, |p| p.ty.clone());
                let d = self.pin(Pin::Parallel(ParallelDesc {
                    body: *body,
                    captures: capture_types,
                    elem,
                    result: body_f.ret.clone(),
                    span,
                }));
                let values: Vec<clif::Value> = captures.iter().map(|c| self.value(*c)).collect();
                let array = self.array(&values);
                let l = self.value(*list);
                self.publish_depth();
                let r = self.call_env(Intr::Parallel, &[d, l, array]).unwrap_or(d);
                self.check_failed(span);
                r
            }
        }))
    }
}
