//! Arithmetic and comparisons: native, with the overflow and division checks that make
//! a failure report exactly what the evaluator reports (`ops::int_op` words the message
//! from the operands compiled code passes). Strings and other heap values compare in
//! the runtime.

use cranelift_codegen::ir as clif;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData as MemFlags, types};
use ir::{BinOp, SrcSpan, Type};

use super::I64;
use super::function::FnCg;
use crate::abi::{BinaryDesc, FailKind, Pin};
use crate::intrinsics::Intr;

impl FnCg<'_, '_> {
    pub(super) fn binary(
        &mut self,
        op: BinOp,
        ty: &Type,
        a: clif::Value,
        b: clif::Value,
        span: Option<SrcSpan>,
    ) -> clif::Value {
        let cmp = |op: BinOp| match op {
            BinOp::Eq => Some((IntCC::Equal, FloatCC::Equal)),
            BinOp::Ne => Some((IntCC::NotEqual, FloatCC::NotEqual)),
            BinOp::Lt => Some((IntCC::SignedLessThan, FloatCC::LessThan)),
            BinOp::Le => Some((IntCC::SignedLessThanOrEqual, FloatCC::LessThanOrEqual)),
            BinOp::Gt => Some((IntCC::SignedGreaterThan, FloatCC::GreaterThan)),
            BinOp::Ge => Some((IntCC::SignedGreaterThanOrEqual, FloatCC::GreaterThanOrEqual)),
            _ => None,
        };
        match ty {
            Type::Str
            | Type::List(_)
            | Type::Option(_)
            | Type::Struct(_)
            | Type::Json
            | Type::Tool
            | Type::Context => {
                let d = self.pin(Pin::Binary(BinaryDesc { op, ty: ty.clone() }));
                let r = self.call_env(Intr::Binary, &[d, a, b]).unwrap_or(d);
                self.check_failed(span);
                r
            }
            Type::Unit => {
                let equal = matches!(op, BinOp::Eq | BinOp::Le | BinOp::Ge);
                self.iconst(equal as i64)
            }
            Type::F64 => {
                let x = self.b.ins().bitcast(types::F64, MemFlags::new(), a);
                let y = self.b.ins().bitcast(types::F64, MemFlags::new(), b);
                if let Some((_, cc)) = cmp(op) {
                    let r = self.b.ins().fcmp(cc, x, y);
                    return self.b.ins().uextend(I64, r);
                }
                let r = match op {
                    BinOp::Add => self.b.ins().fadd(x, y),
                    BinOp::Sub => self.b.ins().fsub(x, y),
                    BinOp::Mul => self.b.ins().fmul(x, y),
                    BinOp::Div => self.b.ins().fdiv(x, y),
                    _ => self.call(Intr::Fmod, &[x, y]).expect("returns"),
                };
                self.b.ins().bitcast(I64, MemFlags::new(), r)
            }
            _ => {
                if let Some((cc, _)) = cmp(op) {
                    // A counted loop's header compares with where its budget runs out.
                    let b = self.counted_end().unwrap_or(b);
                    let r = self.b.ins().icmp(cc, a, b);
                    return self.b.ins().uextend(I64, r);
                }
                let kind = || FailKind::Overflow { op, ty: ty.clone() };
                if matches!(op, BinOp::Div | BinOp::Rem) {
                    let zero = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
                    self.fail_if(zero, kind(), span, a, b);
                    if *ty == Type::I64 {
                        // i64::MIN / -1 does not fit (and traps on x86).
                        let min = self.b.ins().icmp_imm_s(IntCC::Equal, a, i64::MIN);
                        let neg = self.b.ins().icmp_imm_s(IntCC::Equal, b, -1);
                        let both = self.b.ins().band(min, neg);
                        self.fail_if(both, kind(), span, a, b);
                    }
                    let r = if op == BinOp::Div {
                        self.b.ins().sdiv(a, b)
                    } else {
                        self.b.ins().srem(a, b)
                    };
                    if *ty == Type::I32 {
                        self.check_i32(r, kind(), span, a, b);
                    }
                    return r;
                }
                let delta = match (op, self.constant(b)) {
                    (BinOp::Add, Some(c)) => Some(c),
                    (BinOp::Sub, Some(c)) => c.checked_neg(),
                    _ => None,
                };
                if let Some(delta) = delta
                    && *ty == Type::I64
                    && self.unfailing.contains(&self.current_dest)
                {
                    // A branch bounds `x` so that `x ± c` fits (`ranges`).
                    return self.b.ins().iadd_imm_s(a, delta);
                }
                if let (BinOp::Add | BinOp::Sub, Some(c)) = (op, self.constant(b)) {
                    // `x + c` overflows exactly when `x` is past a bound: one comparison.
                    let (r, overflow) = self.add_constant(op, a, c);
                    self.fail_if(overflow, kind(), span, a, b);
                    if *ty == Type::I32 {
                        self.check_i32(r, kind(), span, a, b);
                    }
                    return r;
                }
                let (r, overflow) = match op {
                    BinOp::Add => self.b.ins().sadd_overflow(a, b),
                    BinOp::Sub => self.b.ins().ssub_overflow(a, b),
                    _ => self.b.ins().smul_overflow(a, b),
                };
                if matches!(op, BinOp::Add | BinOp::Sub) && *ty == Type::I64 {
                    self.fail_if_sum(op, overflow, kind(), span, r, b);
                } else {
                    self.fail_if(overflow, kind(), span, a, b);
                }
                if *ty == Type::I32 {
                    self.check_i32(r, kind(), span, a, b);
                }
                r
            }
        }
    }

    /// The value of `v` when it is a constant.
    pub(super) fn constant(&self, v: clif::Value) -> Option<i64> {
        let clif::ValueDef::Result(inst, _) = self.b.func.dfg.value_def(v) else {
            return None;
        };
        match self.b.func.dfg.insts[inst] {
            clif::InstructionData::UnaryImm {
                opcode: clif::Opcode::Iconst,
                imm,
            } => Some(imm.bits()),
            _ => None,
        }
    }

    /// `a + c` or `a - c` for a constant `c`, and whether it overflows an `i64`.
    pub(super) fn add_constant(
        &mut self,
        op: BinOp,
        a: clif::Value,
        c: i64,
    ) -> (clif::Value, clif::Value) {
        // `a - c` is `a + (-c)`, except that `-i64::MIN` does not exist.
        let (c, add) = match (op, c.checked_neg()) {
            (BinOp::Add, _) => (c, true),
            (_, Some(neg)) => (neg, true),
            (_, None) => (c, false),
        };
        if !add {
            // `a - i64::MIN` overflows unless `a` is negative.
            let overflow = self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, a, 0);
            let r = self.b.ins().iadd_imm_s(a, c);
            return (r, overflow);
        }
        let overflow = if c >= 0 {
            self.b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThan, a, i64::MAX - c)
        } else {
            self.b
                .ins()
                .icmp_imm_s(IntCC::SignedLessThan, a, i64::MIN - c)
        };
        let r = self.b.ins().iadd_imm_s(a, c);
        (r, overflow)
    }

    /// Fails unless `r` fits in an `i32`.
    pub(super) fn check_i32(
        &mut self,
        r: clif::Value,
        kind: FailKind,
        span: Option<SrcSpan>,
        a: clif::Value,
        b: clif::Value,
    ) {
        let narrow = self.b.ins().ireduce(types::I32, r);
        let wide = self.b.ins().sextend(I64, narrow);
        let differs = self.b.ins().icmp(IntCC::NotEqual, wide, r);
        self.fail_if(differs, kind, span, a, b);
    }
}
