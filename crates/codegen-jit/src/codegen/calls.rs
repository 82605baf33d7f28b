//! Calls out of compiled code: intrinsics, the slow paths of inline operations (through
//! adapters that preserve every register), the depth and iteration budgets carried
//! across them, and the error exits that record a frame on the sap stack.

use cranelift_codegen::ir as clif;
use cranelift_codegen::ir::InstBuilder;
use cranelift_codegen::ir::condcodes::IntCC;
use ir::{BinOp, SrcSpan};

use super::counted::Bound;
use super::function::{FnCg, span_of};
use super::{I64, SLOW_PATHS};
use crate::abi::{
    FailDesc, FailKind, FrameDesc, OFFSET_DEPTH, OFFSET_FAILED, OFFSET_ITERATIONS_LEFT,
    OFFSET_MAX_DEPTH, OFFSET_OUT, Site,
};
use crate::intrinsics::Intr;

impl FnCg<'_, '_> {
    /// Calls an intrinsic that does not take the `Env`. The iterations left are written
    /// back before it and read again after it, as around every call that clobbers
    /// registers: a count kept live across calls must sit in one of the few
    /// callee-saved registers, and the register allocator then spills it for the whole
    /// function, loops included (a load and a store per iteration).
    pub(super) fn call(&mut self, which: Intr, args: &[clif::Value]) -> Option<clif::Value> {
        let signature = self.callees.intrinsic(self.b.func, which);
        let env = self.env();
        let address = super::intrinsic_address(&mut self.b, env, which);
        self.save_iterations();
        let inst = self.b.ins().call_indirect(signature, address, args);
        let result = self.b.inst_results(inst).first().copied();
        self.reload_iterations();
        result
    }

    /// Calls an intrinsic with the `Env` before `args`; it sees the iteration count as
    /// it is.
    pub(super) fn call_env(&mut self, which: Intr, args: &[clif::Value]) -> Option<clif::Value> {
        let mut values = vec![self.env()];
        values.extend_from_slice(args);
        self.call(which, &values)
    }

    /// Calls the adapter of a slow path (see `SLOW_PATHS`) with the `Env` and up to
    /// three arguments, and returns what the intrinsic returned. Registers survive it.
    pub(super) fn slow_call(&mut self, which: Intr, args: &[clif::Value]) -> clif::Value {
        let index = SLOW_PATHS
            .iter()
            .position(|w| *w == which)
            .expect("a slow path");
        let env = self.env();
        let mut values = vec![env];
        values.extend_from_slice(args);
        while values.len() < 5 {
            values.push(env);
        }
        // These intrinsics neither read nor count iterations: the count stays where it is
        // (a value redefined here would have to be merged at every join).
        let r = self.callees.slow_path(self.b.func, index);
        self.b.ins().call(r, &values);
        self.load_env(OFFSET_OUT)
    }

    /// Tells the runtime the depth of a call it makes on this function's behalf (a tool
    /// the plan executor runs, a `parallel for` body).
    pub(super) fn publish_depth(&mut self) {
        let max = self.load_env(OFFSET_MAX_DEPTH);
        let depth = self.b.ins().isub(max, self.deeper);
        self.store_env(depth, OFFSET_DEPTH);
    }

    /// Writes the iterations left back to the `Env`.
    pub(super) fn save_iterations(&mut self) {
        if let Some(var) = self.iterations {
            let left = self.b.use_var(var);
            self.store_env(left, OFFSET_ITERATIONS_LEFT);
        }
    }

    /// Reads the iterations left (a `parallel for` subtracts its iterations after they
    /// ran, never below none).
    pub(super) fn reload_iterations(&mut self) {
        if let Some(var) = self.iterations {
            let left = self.load_env(OFFSET_ITERATIONS_LEFT);
            self.b.def_var(var, left);
        }
    }

    /// Branches to an error exit (after recording `frame` on the sap stack) when an
    /// error is pending.
    pub(super) fn check_failed(&mut self, span: Option<SrcSpan>) {
        let failed = self.load_env(OFFSET_FAILED);
        self.unwind_if(failed, span);
    }

    /// Branches to an error exit when `failed` is nonzero (a sap callee's second result,
    /// or the `Env`'s flag).
    pub(super) fn unwind_if(&mut self, failed: clif::Value, span: Option<SrcSpan>) {
        let error = self.b.create_block();
        let ok = self.b.create_block();
        self.b.ins().brif(failed, error, &[], ok, &[]);
        self.b.switch_to_block(error);
        self.b.set_cold_block(error);
        self.unwind(span);
        self.b.switch_to_block(ok);
        if self.cold {
            self.b.set_cold_block(ok);
        }
    }

    /// Records this function on the sap stack and returns from it with the error.
    /// In inlined code, the innermost callee's frame is recorded first, then each
    /// caller's at the call its copy replaced, as the calls would have.
    ///
    /// Outside inlined code the function's one frame is all there is to record: every
    /// such error path jumps to one shared exit with the frame's descriptor, so a
    /// function of a thousand calls has one exit, not a thousand (each a call and a
    /// return for the register allocator to place around).
    pub(super) fn unwind(&mut self, span: Option<SrcSpan>) {
        if self.scope().is_none() {
            let frame = self.own_frame(span);
            self.jump_to_unwind_exit(frame);
            return;
        }
        let mut frames = Vec::new();
        let mut at = span;
        let mut scope = self.scope();
        while let Some(s) = scope {
            frames.push((s.function.clone(), at.or(Some(s.span))));
            at = s.call;
            scope = s.parent.map(|p| &self.inlined.scopes[p]);
        }
        frames.push((self.f.name.clone(), span_of(at, self.f)));
        for (function, span) in frames {
            let d = self.site(Site::Frame(FrameDesc { function, span }));
            self.call_env(Intr::Unwind, &[d]);
        }
        let zero = self.iconst(0);
        let failed = self.iconst(1);
        self.b.ins().return_(&[zero, failed]);
    }

    /// This function's frame on the sap stack at `span`, as a site's value.
    fn own_frame(&mut self, span: Option<SrcSpan>) -> clif::Value {
        let site = self.own_frame_site(span);
        self.iconst(site as i64)
    }

    /// The index of the site of this function's frame on the sap stack, at `span`.
    fn own_frame_site(&mut self, span: Option<SrcSpan>) -> u32 {
        let function = self.f.name.clone();
        self.site_index(Site::Frame(FrameDesc {
            function,
            span: span_of(span, self.f),
        }))
    }

    /// Ends the current block with a jump to the shared exit that records `frame` and
    /// returns the error, made (after the jump) the first time.
    fn jump_to_unwind_exit(&mut self, frame: clif::Value) {
        let (exit, new) = self.shared_exit(|cg| &mut cg.unwind_exit, 1);
        self.b.ins().jump(exit, &[frame.into()]);
        if new {
            self.b.switch_to_block(exit);
            let frame = self.b.block_params(exit)[0];
            self.call_env(Intr::Unwind, &[frame]);
            let zero = self.iconst(0);
            let failed = self.iconst(1);
            self.b.ins().return_(&[zero, failed]);
        }
    }

    /// The shared exit in `slot`, with `params` words as its parameters, and whether it
    /// was made just now (then its code is still to be written).
    fn shared_exit(
        &mut self,
        slot: impl Fn(&mut Self) -> &mut Option<clif::Block>,
        params: usize,
    ) -> (clif::Block, bool) {
        if let Some(exit) = *slot(self) {
            return (exit, false);
        }
        let exit = self.b.create_block();
        for _ in 0..params {
            self.b.append_block_param(exit, I64);
        }
        self.b.set_cold_block(exit);
        *slot(self) = Some(exit);
        (exit, true)
    }

    /// Fails with `kind` when `condition` is nonzero; the failure's message quotes the
    /// operands `a` and `b`.
    pub(super) fn fail_if(
        &mut self,
        condition: clif::Value,
        kind: FailKind,
        span: Option<SrcSpan>,
        a: clif::Value,
        b: clif::Value,
    ) {
        self.fail_if_with(condition, kind, span, |_| (a, b));
    }

    /// `fail_if` for the overflow of `r = a + b` or `r = a - b`, whose failure gets `a`
    /// back from the wrapped `r` as `r - b` or `r + b`: `a` need not live past the sum,
    /// which can then overwrite it, rather than a copy being kept for the message (fib's
    /// `fib(n - 1) + fib(n - 2)`: a move or two fewer per sum).
    pub(super) fn fail_if_sum(
        &mut self,
        op: BinOp,
        overflow: clif::Value,
        kind: FailKind,
        span: Option<SrcSpan>,
        r: clif::Value,
        b: clif::Value,
    ) {
        self.fail_if_with(overflow, kind, span, |cg| {
            let a = match op {
                BinOp::Add => cg.b.ins().isub(r, b),
                _ => cg.b.ins().iadd(r, b),
            };
            (a, b)
        });
    }

    /// Fails with `kind` when `condition` is nonzero, with the operands `operands`
    /// computes in the failing block.
    fn fail_if_with(
        &mut self,
        condition: clif::Value,
        kind: FailKind,
        span: Option<SrcSpan>,
        operands: impl FnOnce(&mut Self) -> (clif::Value, clif::Value),
    ) {
        let fail = self.b.create_block();
        let ok = self.b.create_block();
        self.b.ins().brif(condition, fail, &[], ok, &[]);
        self.b.switch_to_block(fail);
        self.b.set_cold_block(fail);
        let (a, b) = operands(self);
        if self.scope().is_some() {
            let d = self.site(Site::Fail(FailDesc {
                kind,
                span,
                frame: None,
            }));
            self.call_env(Intr::Fail, &[d, a, b]);
            self.unwind(span);
        } else {
            // Outside inlined code, one shared exit reports every failure of the
            // function (see `unwind`); the failure's site names the frame to record.
            let frame = self.own_frame_site(span);
            let d = self.site(Site::Fail(FailDesc {
                kind,
                span,
                frame: Some(frame),
            }));
            let (exit, new) = self.shared_exit(|cg| &mut cg.fail_exit, 3);
            self.b.ins().jump(exit, &[d.into(), a.into(), b.into()]);
            if new {
                self.b.switch_to_block(exit);
                let [d, a, b] = [0, 1, 2].map(|i| self.b.block_params(exit)[i]);
                self.call_env(Intr::Fail, &[d, a, b]);
                let zero = self.iconst(0);
                let failed = self.iconst(1);
                self.b.ins().return_(&[zero, failed]);
            }
        }
        self.b.switch_to_block(ok);
    }

    /// Fails with `kind` here, ending the block.
    pub(super) fn fail_now(&mut self, kind: FailKind, span: Option<SrcSpan>) {
        let d = self.site(Site::Fail(FailDesc {
            kind,
            span,
            frame: None,
        }));
        let zero = self.iconst(0);
        self.call_env(Intr::Fail, &[d, zero, zero]);
        self.unwind(span);
    }
}

/// Counted loops (`counted`): the budget paid on the way in.
impl FnCg<'_, '_> {
    /// On the jump from `block` into `header`, when it enters a counted loop: pays the
    /// loop's budget and sets the value its header compares with.
    pub(super) fn counted_entry(&mut self, block: usize, header: usize) {
        let Some(&(c, paid)) = self.counted.get(&header) else {
            return;
        };
        if c.entry != block {
            return;
        }
        let var = self.iterations.expect("a function with loops");
        let i0 = self.b.use_var(self.vars[c.var as usize]);
        let bound = self.bound(c.bound);
        let zero = self.iconst(0);
        // How many times the body runs: `bound - i0`, or none (unsigned: the difference
        // of two `i64`s fits in a `u64`).
        let below = self.b.ins().icmp(IntCC::SignedLessThan, i0, bound);
        let difference = self.b.ins().isub(bound, i0);
        let trips = self.b.ins().select(below, difference, zero);
        let left = self.b.use_var(var);
        let short = self.b.ins().icmp(IntCC::UnsignedGreaterThan, trips, left);
        // Short of budget, the body runs once more than it pays for: the iteration whose
        // back edge finds none left.
        let one_more = self.b.ins().iadd_imm_s(left, 1);
        let runs = self.b.ins().select(short, one_more, trips);
        let end = self.b.ins().iadd(i0, runs);
        self.b.def_var(paid.end, end);
        let short = self.b.ins().uextend(I64, short);
        self.b.def_var(paid.short, short);
        let cost = self.b.ins().umin(trips, left);
        let rest = self.b.ins().isub(left, cost);
        self.b.def_var(var, rest);
    }

    /// The value a counted loop's header compares its variable with, when the
    /// instruction being compiled is that comparison.
    pub(super) fn counted_end(&mut self) -> Option<clif::Value> {
        let dest = self.current_dest;
        let &(_, paid) = self.counted.values().find(|(c, _)| c.cond == dest)?;
        Some(self.b.use_var(paid.end))
    }

    /// At the start of the block a counted loop leaves to: when the budget was short,
    /// the loop ran to the iteration whose back edge fails.
    pub(super) fn counted_exit(&mut self, block: usize) {
        let Some(&(c, paid)) = self.counted.values().find(|(c, _)| c.exit == block) else {
            return;
        };
        let short = self.b.use_var(paid.short);
        let left = self
            .b
            .use_var(self.iterations.expect("a function with loops"));
        self.fail_if(short, FailKind::Iterations, Some(c.span), left, left);
    }

    fn bound(&mut self, bound: Bound) -> clif::Value {
        match bound {
            Bound::Const(k) => self.iconst(k),
            Bound::Local(l) => self.b.use_var(self.vars[l as usize]),
        }
    }
}
