//! Counted loops: the loop budget paid once on the way in instead of on every iteration.
//!
//! Every iteration of a `while` or `for` counts against `--max-iterations`: a test and a
//! decrement on each back edge, three instructions of the ten in `while i < n { acc =
//! acc + i; i += 1 }`. A loop that counts a local up by one to a bound it cannot move
//! is known, on the way in, to run `trips = bound - i` times, each ending on its back
//! edge. Such a loop's budget is settled at its entry: when `trips <= left` it pays
//! `trips`; otherwise the back edge would have failed on iteration `left + 1`, so the
//! header compares with `i0 + left + 1` instead of the bound and, when the loop leaves,
//! the error is the one that back edge would have reported, after as many iterations.
//!
//! What the body does is then unchanged, iteration by iteration, up to where it fails.
//! The loop qualifies when nothing in it could see the difference:
//!
//! - its header only loads the variable and the bound and compares them (`i < n`, on
//!   `i64` or `i32`: an `i32` is held sign-extended, and `i + 1` cannot leave the type
//!   below the bound), and branches into the body or out;
//! - one block jumps into the header from outside, and one back edge (`loop`) returns
//!   to it, from the block that adds one to the variable; nothing else in the loop
//!   writes the variable, and nothing in it writes the bound (a local or a constant);
//! - no block of the loop leaves it but the header (no `break`, no `return`) and no
//!   other loop is inside it (its iterations would see a budget already paid);
//! - it calls nothing that runs sap code or could ask for the budget: the instructions
//!   are arithmetic, locals, lists, structs, and the builtins `print`, `to_string`,
//!   `len`, `push` and `set`.
//!
//! This module finds the loops; `calls.rs` writes their entries and exits, and gives
//! their headers' comparison (`arith.rs`) the value to compare with.

use std::collections::{HashMap, HashSet};

use builtins::Builtin;
use ir::{BinOp, Const, Function, Op, SrcSpan, Terminator, Type};

/// The bound a counted loop's variable is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Bound {
    Const(i64),
    /// A local of the variable's type that nothing in the loop writes.
    Local(u32),
}

/// A loop whose budget is paid on the way in (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Counted {
    /// The local counted up by one on each iteration.
    pub(super) var: u32,
    pub(super) bound: Bound,
    /// The header's comparison `var < bound`.
    pub(super) cond: u32,
    /// The block whose `jump` enters the loop.
    pub(super) entry: usize,
    /// The block the header leaves to.
    pub(super) exit: usize,
    /// Where the back edge's iterations are reported.
    pub(super) span: SrcSpan,
}

/// The counted loops of `f`, by header block.
pub(super) fn counted_loops(f: &Function) -> HashMap<usize, Counted> {
    let preds = super::ranges::predecessors(f);
    let mut out = HashMap::new();
    for (latch, block) in f.blocks.iter().enumerate() {
        let Terminator::Loop(header, span) = block.term else {
            continue;
        };
        if let Some(c) = counted(f, &preds, header as usize, latch, span) {
            out.insert(header as usize, c);
        }
    }
    out
}

fn counted(
    f: &Function,
    preds: &[Vec<usize>],
    h: usize,
    latch: usize,
    span: SrcSpan,
) -> Option<Counted> {
    let head = &f.blocks[h];
    let Terminator::Branch(cond, body, exit) = head.term else {
        return None;
    };
    let (body, exit) = (body as usize, exit as usize);
    if body == exit || exit == h || head.insts.len() != 3 {
        return None;
    }
    // The header: `x = load var`, `y = load bound` (or a constant), `cond = x < y`.
    let def = |v: u32| {
        head.insts
            .iter()
            .find(|i| i.dest.as_ref().is_some_and(|d| d.0 == v))
    };
    let Op::Binary(BinOp::Lt, ty @ (Type::I64 | Type::I32), x, y) = &def(cond)?.op else {
        return None;
    };
    let (x, y) = (*x, *y);
    let Op::Load(var) = def(x)?.op else {
        return None;
    };
    let bound = match &def(y)?.op {
        Op::Const(Const::Int(k)) => Bound::Const(*k),
        Op::Load(l) => Bound::Local(*l),
        _ => return None,
    };
    let typed = |l: u32| f.locals.get(l as usize).is_some_and(|d| d.ty == *ty);
    if !typed(var) || matches!(bound, Bound::Local(l) if !typed(l) || l == var) {
        return None;
    }
    // One way in from outside, by a jump, and this one back edge.
    let entry = match preds[h].as_slice() {
        [a, b] if *a == latch && *b != latch => *b,
        [a, b] if *b == latch && *a != latch => *a,
        _ => return None,
    };
    if !matches!(f.blocks[entry].term, Terminator::Jump(t) if t as usize == h) {
        return None;
    }
    if preds[exit] != [h] {
        return None;
    }
    // The loop: the header and what reaches the latch without passing it.
    let mut blocks: HashSet<usize> = HashSet::from([h]);
    let mut stack = vec![latch];
    while let Some(b) = stack.pop() {
        if blocks.insert(b) {
            stack.extend(preds[b].iter().copied());
        }
    }
    if !blocks.contains(&body) || blocks.contains(&entry) || blocks.contains(&exit) {
        return None;
    }
    let mut increments = 0;
    for &b in &blocks {
        let block = &f.blocks[b];
        let targets: Vec<usize> = match &block.term {
            Terminator::Jump(t) => vec![*t as usize],
            Terminator::Loop(t, _) if b == latch => vec![*t as usize],
            Terminator::Branch(_, t, e) if b != h => vec![*t as usize, *e as usize],
            Terminator::Branch(..) => vec![],
            Terminator::Switch(_, ts) => ts.iter().map(|t| *t as usize).collect(),
            _ => return None,
        };
        if targets.iter().any(|t| !blocks.contains(t)) {
            return None;
        }
        let defs: HashMap<u32, &Op> = block
            .insts
            .iter()
            .filter_map(|i| i.dest.as_ref().map(|d| (d.0, &i.op)))
            .collect();
        for inst in &block.insts {
            match &inst.op {
                Op::Store(l, v) if *l == var => {
                    let by_one = matches!(
                        defs.get(v),
                        Some(Op::Binary(BinOp::Add, t, a, one))
                            if t == ty
                                && matches!(defs.get(a), Some(Op::Load(l)) if *l == var)
                                && matches!(defs.get(one), Some(Op::Const(Const::Int(1))))
                    );
                    if b != latch || !by_one {
                        return None;
                    }
                    increments += 1;
                }
                Op::Store(l, _) | Op::Release(l) if Bound::Local(*l) == bound => return None,
                Op::Release(l) if *l == var => return None,
                Op::Const(_)
                | Op::Load(_)
                | Op::Store(..)
                | Op::Binary(..)
                | Op::Unary(..)
                | Op::PushInPlace(..)
                | Op::SetInPlace(..)
                | Op::Release(_)
                | Op::List(_)
                | Op::Struct(..)
                | Op::Field(..)
                | Op::Index(..)
                | Op::Element(..) => {}
                Op::CallBuiltin(
                    Builtin::Print
                    | Builtin::ToString
                    | Builtin::Len
                    | Builtin::Push
                    | Builtin::Set,
                    _,
                ) => {}
                _ => return None,
            }
        }
    }
    (increments == 1).then_some(Counted {
        var,
        bound,
        cond,
        entry,
        exit,
        span,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counted loops of `main` in `text`: each one's variable's name and bound.
    fn counted_in(text: &str) -> Vec<(String, Bound)> {
        let mut db = hir::Database::default();
        db.add_file("main.sap", text);
        let m = lower::lower_workspace(&db).expect("the program checks");
        let f = m.functions.iter().find(|f| f.name == "main").unwrap();
        let mut loops: Vec<(usize, Counted)> = counted_loops(f).into_iter().collect();
        loops.sort_by_key(|(h, _)| *h);
        loops
            .into_iter()
            .map(|(_, c)| (f.locals[c.var as usize].name.clone(), c.bound))
            .collect()
    }

    #[test]
    fn loops_counting_up_to_a_fixed_bound_are_counted() {
        let loops = counted_in(
            "fn main() -> () {\n    let i = 0\n    let t = 0\n    while i < 100 { t += i\n i += 1 }\n    let xs = [1, 2]\n    for x in xs { t += x\n print(to_string(t)) }\n    let n = 5\n    let j = 0\n    while j < n { if t > 3 { t = t - 1 } else { t = t + 1 }\n j += 1 }\n}\n",
        );
        let names: Vec<&str> = loops.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["i", "for index", "j"], "{loops:?}");
        assert_eq!(loops[0].1, Bound::Const(100));
    }

    #[test]
    fn loops_that_could_run_otherwise_keep_their_budget() {
        let loops = counted_in(
            "fn f(n: i64) -> i64 {\n    let k = 0\n    while k < 3 { k += 1 }\n    k + n\n}\n\nfn main() -> () {\n    let a = 0\n    while a < 10 { a += 2 }\n    let b = 0\n    let n = 10\n    while b < n { n = n + 1\n b += 1 }\n    let c = 0\n    while c < 10 { if c == 5 { break }\n c += 1 }\n    let d = 0\n    while d < 10 { d += 1\n if d == 3 { d += 1 } }\n    let e = 0\n    while e < 10 { e += 1\n print(to_string(f(e))) }\n    let g = 0\n    while g < 3 { let h = 0\n while h < 3 { h += 1 }\n g += 1 }\n    let m = 0\n    while m <= 10 { m += 1 }\n}\n",
        );
        // A step of two, a bound that moves, a `break`, two increments, a call, a loop
        // inside (the inner one is counted), `<=`.
        let names: Vec<&str> = loops.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["h"], "{loops:?}");
    }
}
