//! Inlining, three levels deep: a call to a small pure function on numbers is replaced
//! by a copy of the callee's blocks before the caller is compiled, and so are such calls
//! in the copy. A call in compiled code costs a frame, saved registers and moves around it
//! (Cranelift does not inline), and in call-heavy code — `fib` — that is most of the
//! time.
//!
//! Nothing observable changes:
//! - the order of operations is the callee's, so the same overflow or division by zero
//!   is reported, at the same span;
//! - an error in a copy records a frame on the sap stack for every call it stands for:
//!   the callee's at the failing operation, then each caller's at its call;
//! - a copy counts against the depth budget as the call did: the calls it makes pass as
//!   many levels fewer as copies enclose them, and a call to a function with copies
//!   made with no more budget left than its deepest copy's level runs in the function's
//!   plain twin (compiled from [`Inlined::plain`]), where every call is a call and the
//!   depth error comes where it would.
//!
//! Calls in the innermost copies stay calls: a recursive function is unrolled three
//! times, and `MAX_SITES` bounds how much a caller grows. At those calls only the
//! callee's guard is copied (`Guard`: the paths from its entry that return without a call, such as
//! `fib`'s `n < 2`), falling back on the call itself where a path would make one: half
//! of the calls `fib` still made were to `fib(0)` or `fib(1)`, each paying a frame to
//! return its argument. `fib(35)` makes 3.8 million calls instead of 30 million. The
//! reference evaluator runs the IR as lowered; the JIT is tested against it.

use std::borrow::Cow;

use ir::{Function, LocalDef, Module, Op, SrcSpan, Terminator};

/// Instructions a callee may have and still be inlined.
const MAX_CALLEE_INSTS: usize = 40;

/// Call sites inlined into one caller at most, so a function of many small calls does
/// not grow without bound.
const MAX_SITES: usize = 16;

/// Copies inside copies at most (three: `fib(35)` in 27 ms against 29 ms with two, and
/// 59 ms with one, whole process; code grows about eightfold per level).
const MAX_LEVEL: u32 = 3;

/// Guard copies (see `Guard`) made in one caller at most.
const MAX_GUARDS: usize = 16;

/// One inlined call: the callee copied and the call it replaced.
#[derive(Clone, Debug)]
pub(super) struct InlineScope {
    /// The callee's name, for its frame on the sap stack.
    pub(super) function: String,
    /// The callee's own span: its frame's location when the failure has none.
    pub(super) span: SrcSpan,
    /// The call the copy replaced, for the caller's frame.
    pub(super) call: Option<SrcSpan>,
    /// The copy the call was in, if it was in one.
    pub(super) parent: Option<usize>,
    /// How many copies enclose this one's code, itself included (1 for a copy in the
    /// function's own code).
    pub(super) level: u32,
}

/// A block of inlined code: the copy it belongs to.
#[derive(Clone, Copy, Debug)]
pub(super) struct InlineFrame {
    pub(super) scope: usize,
}

/// A function ready for code generation: the caller with its inlined calls, and for
/// each of its blocks the copy it belongs to, if any.
pub(super) struct Inlined<'f> {
    /// The function itself when it has no call to inline (most do not).
    pub(super) function: Cow<'f, Function>,
    pub(super) scopes: Vec<InlineScope>,
    pub(super) frames: Vec<Option<InlineFrame>>,
}

impl<'f> Inlined<'f> {
    /// `f` as it is, with nothing inlined.
    pub(super) fn plain(f: &'f Function) -> Inlined<'f> {
        Inlined {
            function: Cow::Borrowed(f),
            scopes: Vec::new(),
            frames: vec![None; f.blocks.len()],
        }
    }
}

/// `f` with its calls to small pure functions inlined (or `f` as it is when it has
/// none).
pub(super) fn inline<'f>(module: &Module, f: &'f Function) -> Inlined<'f> {
    let mut out = Inlined::plain(f);
    let mut sites = 0;
    let mut guards = 0;
    // Blocks holding the call a guard copy falls back on: that call is not looked at
    // again.
    let mut fallbacks = vec![false; f.blocks.len()];
    let mut bi = 0;
    while bi < out.function.blocks.len() {
        let level = out.frames[bi].map_or(0, |fr| out.scopes[fr.scope].level);
        let found = (!fallbacks[bi])
            .then(|| {
                out.function.blocks[bi]
                    .insts
                    .iter()
                    .enumerate()
                    .find_map(|(ii, inst)| match &inst.op {
                        Op::Call(callee, args) => {
                            let g = &module.functions[*callee as usize];
                            inlinable(g).then(|| (ii, g, args.clone()))
                        }
                        _ => None,
                    })
            })
            .flatten();
        let mut calls = Vec::new();
        if let Some((ii, g, args)) = found {
            if level < MAX_LEVEL && sites < MAX_SITES {
                splice(&mut out, bi, ii, g, &args, None);
                sites += 1;
            } else if guards < MAX_GUARDS
                && let Some(guard) = Guard::of(g)
            {
                calls = splice(&mut out, bi, ii, g, &args, Some(&guard));
                guards += 1;
            }
        }
        fallbacks.resize(out.function.blocks.len(), false);
        for b in calls {
            fallbacks[b] = true;
        }
        // After a splice, the rest of the block is the continuation, scanned in its
        // turn.
        bi += 1;
    }
    out
}

/// Whether `g` can be inlined: pure, small, without loops, and working only on values
/// that are not reference counted (so the copy needs no retains or releases).
fn inlinable(g: &Function) -> bool {
    let size: usize = g.blocks.iter().map(|b| b.insts.len()).sum();
    g.effect == ir::Effect::Pure
        && g.context.is_none()
        && !g.ret.is_heap()
        && size <= MAX_CALLEE_INSTS
        && g.locals.iter().all(|l| !l.ty.is_heap())
        && g.blocks.iter().all(|b| {
            !matches!(b.term, Terminator::Loop(..))
                && b.insts.iter().all(|i| {
                    i.dest.as_ref().is_none_or(|(_, t)| !t.is_heap())
                        && matches!(
                            i.op,
                            Op::Const(
                                ir::Const::Unit
                                    | ir::Const::Bool(_)
                                    | ir::Const::Int(_)
                                    | ir::Const::Float(_)
                                    | ir::Const::Variant(..)
                            ) | Op::Load(_)
                                | Op::Store(..)
                                | Op::Binary(..)
                                | Op::Unary(..)
                                | Op::Call(..)
                        )
                })
        })
}

/// The part of a callee copied at a call that is not inlined whole (a guard copy): the
/// blocks its entry reaches without making a call — for `fib`, the test `n < 2` and
/// the return of `n` — and, where a path would make a call, the original call itself.
/// A call whose arguments take the cheap path then costs no frame; one that does not
/// is made as before.
struct Guard {
    /// For each of the callee's blocks, its index among the copied ones.
    kept: Vec<Option<u32>>,
    /// For each of the callee's blocks, whether reaching it falls back on the call.
    fallback: Vec<bool>,
}

impl Guard {
    /// The guard of `g`, when its entry makes no call and some path from it returns
    /// without making one.
    fn of(g: &Function) -> Option<Guard> {
        let calls = |b: &ir::Block| b.insts.iter().any(|i| matches!(i.op, Op::Call(..)));
        let mut kept = vec![None; g.blocks.len()];
        let mut fallback = vec![false; g.blocks.len()];
        let mut returns = false;
        let mut next = 0;
        let mut work = vec![0usize];
        while let Some(b) = work.pop() {
            if kept[b].is_some() {
                continue;
            }
            kept[b] = Some(next);
            next += 1;
            let block = &g.blocks[b];
            if calls(block) {
                fallback[b] = true;
                continue;
            }
            match &block.term {
                Terminator::Return(_) => returns = true,
                Terminator::Jump(t) | Terminator::Loop(t, _) => work.push(*t as usize),
                Terminator::Branch(_, t, e) => work.extend([*t as usize, *e as usize]),
                Terminator::Switch(_, targets) => work.extend(targets.iter().map(|t| *t as usize)),
                Terminator::Unreachable => {}
            }
        }
        (returns && !fallback[0]).then_some(Guard { kept, fallback })
    }
}

/// Replaces instruction `ii` of block `bi` of `f` (a call to `g` with `args`) by a copy
/// of `g` (of its guard only, with `guard`): the block ends by storing the arguments
/// into the copy's parameters and jumping to its entry; the copy's returns store the
/// result and jump to a new block holding the rest of the original block. Returns the
/// blocks that fall back on the call.
fn splice(
    out: &mut Inlined<'_>,
    bi: usize,
    ii: usize,
    g: &Function,
    args: &[ir::ValueId],
    guard: Option<&Guard>,
) -> Vec<usize> {
    let f = out.function.to_mut();
    let outer = out.frames[bi];
    let local_base = f.locals.len() as u32;
    let value_base = f.value_count;
    let block_base = f.blocks.len() as u32;
    f.locals.extend(g.locals.iter().map(|l| LocalDef {
        name: format!("{}::{}", g.name, l.name),
        ty: l.ty.clone(),
    }));
    let result = f.locals.len() as u32;
    f.locals.push(LocalDef {
        name: format!("{}::result", g.name),
        ty: g.ret.clone(),
    });
    f.value_count += g.value_count;

    let block = &mut f.blocks[bi];
    let call = block.insts[ii].clone();
    let scope = out.scopes.len();
    out.scopes.push(InlineScope {
        function: g.name.clone(),
        span: g.span,
        call: call.span,
        parent: outer.map(|fr| fr.scope),
        level: outer.map_or(0, |fr| out.scopes[fr.scope].level) + 1,
    });
    let rest: Vec<ir::Inst> = block.insts.split_off(ii + 1);
    block.insts.pop();
    let term = std::mem::replace(&mut block.term, Terminator::Jump(block_base));
    for (i, a) in args.iter().enumerate() {
        block.insts.push(ir::Inst {
            dest: None,
            op: Op::Store(local_base + i as u32, *a),
            span: None,
        });
    }

    // The copy: the callee's blocks with its locals, values and blocks renumbered.
    let kept = |gi: usize| guard.map_or(Some(gi as u32), |g| g.kept[gi]);
    let target = |t: &u32| block_base + kept(*t as usize).expect("a copied block");
    let mut order: Vec<usize> = (0..g.blocks.len())
        .filter(|&gi| kept(gi).is_some())
        .collect();
    order.sort_by_key(|&gi| kept(gi));
    let continuation = block_base + order.len() as u32;
    let mut fallbacks = Vec::new();
    for gi in order {
        let gb = &g.blocks[gi];
        if guard.is_some_and(|g| g.fallback[gi]) {
            // The call as it was, in the caller's code: its frame, span and depth
            // budget are the original call's.
            let value = f.value_count;
            f.value_count += 1;
            fallbacks.push(f.blocks.len());
            f.blocks.push(ir::Block {
                insts: vec![
                    ir::Inst {
                        dest: Some((value, g.ret.clone())),
                        op: call.op.clone(),
                        span: call.span,
                    },
                    ir::Inst {
                        dest: None,
                        op: Op::Store(result, value),
                        span: None,
                    },
                ],
                term: Terminator::Jump(continuation),
            });
            out.frames.push(outer);
            continue;
        }
        let mut insts: Vec<ir::Inst> = gb
            .insts
            .iter()
            .map(|inst| ir::Inst {
                dest: inst.dest.as_ref().map(|(v, t)| (v + value_base, t.clone())),
                op: renumbered(&inst.op, local_base, value_base),
                span: inst.span,
            })
            .collect();
        let term = match &gb.term {
            Terminator::Return(v) => {
                insts.push(ir::Inst {
                    dest: None,
                    op: Op::Store(result, v + value_base),
                    span: None,
                });
                Terminator::Jump(continuation)
            }
            Terminator::Jump(t) => Terminator::Jump(target(t)),
            Terminator::Loop(t, span) => Terminator::Loop(target(t), *span),
            Terminator::Branch(c, t, e) => Terminator::Branch(c + value_base, target(t), target(e)),
            Terminator::Switch(v, targets) => {
                Terminator::Switch(v + value_base, targets.iter().map(target).collect())
            }
            Terminator::Unreachable => Terminator::Unreachable,
        };
        f.blocks.push(ir::Block { insts, term });
        out.frames.push(Some(InlineFrame { scope }));
    }

    // The continuation: the call's result, then what followed the call.
    let mut insts = vec![ir::Inst {
        dest: call.dest.clone(),
        op: Op::Load(result),
        span: None,
    }];
    insts.extend(rest);
    f.blocks.push(ir::Block { insts, term });
    // It is in whatever copy the call was in.
    out.frames.push(outer);
    fallbacks
}

/// `op` of a callee, with its locals and values moved past the caller's.
fn renumbered(op: &Op, locals: u32, values: u32) -> Op {
    match op {
        Op::Load(l) => Op::Load(l + locals),
        Op::Store(l, v) => Op::Store(l + locals, v + values),
        Op::Binary(o, t, a, b) => Op::Binary(*o, t.clone(), a + values, b + values),
        Op::Unary(o, t, v) => Op::Unary(*o, t.clone(), v + values),
        Op::Call(g, args) => Op::Call(*g, args.iter().map(|a| a + values).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(text: &str) -> Module {
        let mut db = hir::Database::default();
        db.add_file("main.sap", text);
        lower::lower_workspace(&db).expect("the program checks")
    }

    #[test]
    fn fib_is_unrolled_three_times_with_guards_below() {
        let m = module(
            "fn fib(n: i64) -> i64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }\n\
             fn main() -> () { print(to_string(fib(10))) }",
        );
        let fib = m.functions.iter().find(|f| f.name == "fib").unwrap();
        let out = inline(&m, fib);
        // Both calls were replaced by copies, theirs by copies, and theirs again; the
        // calls of the innermost copies stay calls, each behind a guard copy of `n < 2`.
        let calls = |f: &Function| {
            f.blocks
                .iter()
                .flat_map(|b| &b.insts)
                .filter(|i| matches!(i.op, Op::Call(..)))
                .count()
        };
        assert_eq!(calls(fib), 2);
        assert_eq!(calls(&out.function), 16);
        assert_eq!(out.frames.len(), out.function.blocks.len());
        assert_eq!(out.scopes.len(), 14 + 16);
        // Every copy has blocks of its own.
        let copies: std::collections::HashSet<usize> =
            out.frames.iter().flatten().map(|f| f.scope).collect();
        assert_eq!(copies.len(), 14 + 16);
        let levels: Vec<u32> = out.scopes.iter().map(|s| s.level).collect();
        for (level, copies) in [(1, 2), (2, 4), (3, 8), (4, 16)] {
            assert_eq!(levels.iter().filter(|&&l| l == level).count(), copies);
        }
        for s in &out.scopes {
            assert_eq!(s.parent.is_some(), s.level >= 2);
        }
        // Every remaining call is in an innermost copy's code (the caller's side of its
        // guard), never inside a guard.
        for (b, frame) in out.function.blocks.iter().zip(&out.frames) {
            if b.insts.iter().any(|i| matches!(i.op, Op::Call(..))) {
                let level = frame.map(|fr| out.scopes[fr.scope].level);
                assert_eq!(level, Some(3));
            }
        }
    }
}
