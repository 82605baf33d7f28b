//! Overflow checks that cannot fail. `n - 1` is checked, but in the `else` of
//! `if n < 2` it cannot overflow: the branch bounds `n` below by 2. This pass finds the
//! additions and subtractions of a constant whose operand is bounded by the comparisons
//! of the branches that lead to them, so that code generation leaves their check out —
//! in `fib`, inlined three levels deep, two checks of every copy.
//!
//! A bound is known for a local whose value cannot change between the comparison and
//! the use: a parameter never assigned, or a local assigned once (an inlined callee's
//! parameter) where that assignment dominates the comparison; or a loop's variable
//! (`while i < n { …; i += 1 }`, a `for`'s index) when no write to it lies on a path
//! from the branch to the use that does not pass the comparison again. The bound holds
//! in the blocks the branch's target dominates, when the branch is the target's only
//! way in. Compared with a constant, the bound is the constant's; compared with any
//! other value, `x < y` still bounds `x` by `i64::MAX - 1`, so a loop's `x + 1` fits.
//! The program's behaviour is unchanged: only checks that cannot fail are left out,
//! and the reference evaluator, which makes them all, is the test.

use std::collections::{HashMap, HashSet};

use ir::{BinOp, Const, Function, Op, Terminator, Type};

/// What a local is known to lie within.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bounds {
    lo: i64,
    hi: i64,
}

impl Bounds {
    const ANY: Bounds = Bounds {
        lo: i64::MIN,
        hi: i64::MAX,
    };

    fn and(self, other: Bounds) -> Bounds {
        Bounds {
            lo: self.lo.max(other.lo),
            hi: self.hi.min(other.hi),
        }
    }
}

/// The values defined by additions and subtractions of a constant (on `i64`) that
/// cannot overflow.
pub(super) fn unfailing_checks(f: &Function) -> HashSet<u32> {
    let mut safe = HashSet::new();
    let preds = predecessors(f);
    let idom = dominators(f, &preds);
    let dominates = |a: usize, mut b: usize| loop {
        if a == b {
            return true;
        }
        match idom[b] {
            Some(up) if up != b => b = up,
            _ => return false,
        }
    };

    let mut consts: HashMap<u32, i64> = HashMap::new();
    // The local each value was loaded from, and where.
    let mut loads: HashMap<u32, (u32, usize, usize)> = HashMap::new();
    // Every write to each local: the block and the instruction.
    let mut writes: HashMap<u32, Vec<(usize, usize)>> = HashMap::new();
    for (bi, block) in f.blocks.iter().enumerate() {
        for (ii, inst) in block.insts.iter().enumerate() {
            match (&inst.op, &inst.dest) {
                (Op::Const(Const::Int(k)), Some((d, _))) => {
                    consts.insert(*d, *k);
                }
                (Op::Load(l), Some((d, _))) => {
                    loads.insert(*d, (*l, bi, ii));
                }
                (
                    Op::Store(l, _)
                    | Op::PushInPlace(l, _)
                    | Op::SetInPlace(l, _, _)
                    | Op::Release(l),
                    _,
                ) => writes.entry(*l).or_default().push((bi, ii)),
                _ => {}
            }
        }
    }
    // Whether local `l`, loaded at instruction `ii` of block `bi`, holds the value it
    // will hold wherever that block dominates.
    let settled = |l: u32, bi: usize, ii: usize| {
        if f.locals.get(l as usize).map(|d| &d.ty) != Some(&Type::I64) {
            return false;
        }
        match writes.get(&l).map(Vec::as_slice) {
            None | Some([]) => (l as usize) < f.params.len(),
            Some(&[(sb, si)]) => (sb == bi && si < ii) || (sb != bi && dominates(sb, bi)),
            Some(_) => false,
        }
    };

    // The bounds each branch puts on the blocks it alone leads to, each with where the
    // compared value was loaded when the local may be written again (a loop's
    // variable): such a bound holds only where no write can come between.
    let mut facts: Vec<Vec<Fact>> = vec![Vec::new(); f.blocks.len()];
    for (bi, block) in f.blocks.iter().enumerate() {
        let Terminator::Branch(cond, yes, no) = &block.term else {
            continue;
        };
        let Some(Op::Binary(op, Type::I64, x, y)) = block
            .insts
            .iter()
            .find(|i| i.dest.as_ref().is_some_and(|d| d.0 == *cond))
            .map(|i| &i.op)
        else {
            continue;
        };
        let is_i64 = |l: u32| f.locals.get(l as usize).map(|d| &d.ty) == Some(&Type::I64);
        let (l, li, op, k) = match (loads.get(x), consts.get(y), consts.get(x), loads.get(y)) {
            (Some(&(l, lb, li)), k, _, _) if lb == bi && is_i64(l) => (l, li, *op, k.copied()),
            (_, _, k, Some(&(l, lb, li))) if lb == bi && is_i64(l) => {
                (l, li, mirrored(*op), k.copied())
            }
            _ => continue,
        };
        let (when_true, when_false) = match k {
            Some(k) => split(op, k),
            // Below (or above) some value: below the largest `i64` at least.
            None => split_unknown(op),
        };
        let since = (!settled(l, bi, li)).then_some(li);
        for (target, bounds) in [(*yes, when_true), (*no, when_false)] {
            let t = target as usize;
            if yes != no && t != 0 && t != bi && preds[t] == [bi] && bounds != Bounds::ANY {
                facts[t].push(Fact {
                    local: l,
                    bounds,
                    branch: bi,
                    since,
                });
            }
        }
    }
    // Whether no write to `l` can come between its load at instruction `since` of
    // `branch` and its load at instruction `li` of block `b`, on the way through `t`.
    let unchanged = |l: u32, branch: usize, since: usize, t: usize, b: usize, li: usize| {
        let reach = reachable_avoiding(f, &[t], branch);
        if !reach.contains(&b) {
            return false;
        }
        let again = reachable_avoiding(f, &successors_of(f, b), branch).contains(&b);
        writes.get(&l).into_iter().flatten().all(|&(wb, wi)| {
            if wb == branch {
                wi < since
            } else if wb == b {
                !again && wi > li
            } else {
                !reach.contains(&wb)
            }
        })
    };

    for block in &f.blocks {
        for inst in &block.insts {
            let (Op::Binary(op @ (BinOp::Add | BinOp::Sub), Type::I64, x, y), Some((d, _))) =
                (&inst.op, &inst.dest)
            else {
                continue;
            };
            let (Some(&(l, lb, li)), Some(&c)) = (loads.get(x), consts.get(y)) else {
                continue;
            };
            let mut bounds = Bounds::ANY;
            let mut at = Some(lb);
            while let Some(b) = at {
                for fact in facts[b].iter().filter(|fact| fact.local == l) {
                    let holds = match fact.since {
                        None => true,
                        Some(since) => unchanged(l, fact.branch, since, b, lb, li),
                    };
                    if holds {
                        bounds = bounds.and(fact.bounds);
                    }
                }
                at = idom[b].filter(|&up| up != b);
            }
            let fits = match (op, c.checked_neg()) {
                (BinOp::Add, _) => within(bounds, c),
                (_, Some(neg)) => within(bounds, neg),
                (_, None) => false,
            };
            if fits {
                safe.insert(*d);
            }
        }
    }
    safe
}

/// A bound a branch puts on a local in the blocks it alone leads to.
#[derive(Clone)]
struct Fact {
    local: u32,
    bounds: Bounds,
    /// The block of the branch.
    branch: usize,
    /// For a local written again after the comparison (a loop's variable), the
    /// instruction of the branch's block that loaded the compared value.
    since: Option<usize>,
}

/// The blocks reachable from `from` (themselves included) without passing `avoid`.
fn reachable_avoiding(f: &Function, from: &[usize], avoid: usize) -> HashSet<usize> {
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = from.iter().copied().filter(|&b| b != avoid).collect();
    while let Some(b) = stack.pop() {
        if b >= f.blocks.len() || !seen.insert(b) {
            continue;
        }
        for s in successors(&f.blocks[b].term) {
            if s as usize != avoid {
                stack.push(s as usize);
            }
        }
    }
    seen
}

fn successors_of(f: &Function, b: usize) -> Vec<usize> {
    successors(&f.blocks[b].term)
        .into_iter()
        .map(|s| s as usize)
        .collect()
}

/// The bounds on `x` where `x op y` is true, and where it is false, for a `y` not known.
fn split_unknown(op: BinOp) -> (Bounds, Bounds) {
    let below = Bounds {
        hi: i64::MAX - 1,
        ..Bounds::ANY
    };
    let above = Bounds {
        lo: i64::MIN + 1,
        ..Bounds::ANY
    };
    match op {
        BinOp::Lt => (below, Bounds::ANY),
        BinOp::Gt => (above, Bounds::ANY),
        BinOp::Le => (Bounds::ANY, above),
        BinOp::Ge => (Bounds::ANY, below),
        _ => (Bounds::ANY, Bounds::ANY),
    }
}

/// Whether `x + c` fits in an `i64` for every `x` within `bounds`.
fn within(bounds: Bounds, c: i64) -> bool {
    if c >= 0 {
        bounds.hi <= i64::MAX - c
    } else {
        bounds.lo >= i64::MIN - c
    }
}

/// `k op x` as `x op' k`.
fn mirrored(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Le => BinOp::Ge,
        BinOp::Gt => BinOp::Lt,
        BinOp::Ge => BinOp::Le,
        other => other,
    }
}

/// The bounds on `x` where `x op k` is true, and where it is false.
fn split(op: BinOp, k: i64) -> (Bounds, Bounds) {
    let below =
        |hi: Option<i64>| hi.map_or(Bounds { lo: 0, hi: -1 }, |hi| Bounds { hi, ..Bounds::ANY });
    let above =
        |lo: Option<i64>| lo.map_or(Bounds { lo: 0, hi: -1 }, |lo| Bounds { lo, ..Bounds::ANY });
    let exactly = Bounds { lo: k, hi: k };
    match op {
        BinOp::Lt => (below(k.checked_sub(1)), above(Some(k))),
        BinOp::Le => (below(Some(k)), above(k.checked_add(1))),
        BinOp::Gt => (above(k.checked_add(1)), below(Some(k))),
        BinOp::Ge => (above(Some(k)), below(k.checked_sub(1))),
        BinOp::Eq => (exactly, Bounds::ANY),
        BinOp::Ne => (Bounds::ANY, exactly),
        _ => (Bounds::ANY, Bounds::ANY),
    }
}

/// Each block's predecessors, in order, without repeats.
pub(super) fn predecessors(f: &Function) -> Vec<Vec<usize>> {
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); f.blocks.len()];
    for (bi, block) in f.blocks.iter().enumerate() {
        for t in successors(&block.term) {
            let t = t as usize;
            if t < preds.len() && !preds[t].contains(&bi) {
                preds[t].push(bi);
            }
        }
    }
    preds
}

fn successors(term: &Terminator) -> Vec<u32> {
    match term {
        Terminator::Jump(t) | Terminator::Loop(t, _) => vec![*t],
        Terminator::Branch(_, a, b) => vec![*a, *b],
        Terminator::Switch(_, ts) => ts.clone(),
        Terminator::Return(_) | Terminator::Unreachable => Vec::new(),
    }
}

/// Each block's immediate dominator (the entry's is itself; unreachable blocks have
/// none), by the iterative algorithm of Cooper, Harvey and Kennedy.
fn dominators(f: &Function, preds: &[Vec<usize>]) -> Vec<Option<usize>> {
    let n = f.blocks.len();
    // Reverse postorder from the entry.
    let mut order = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    let mut stack = vec![(0usize, 0usize)];
    if n > 0 {
        seen[0] = true;
    }
    while let Some((b, next)) = stack.pop() {
        let succ = successors(&f.blocks[b].term);
        if let Some(&s) = succ.get(next) {
            stack.push((b, next + 1));
            let s = s as usize;
            if s < n && !seen[s] {
                seen[s] = true;
                stack.push((s, 0));
            }
        } else {
            order.push(b);
        }
    }
    order.reverse();
    let mut rank = vec![usize::MAX; n];
    for (i, &b) in order.iter().enumerate() {
        rank[b] = i;
    }
    let mut idom: Vec<Option<usize>> = vec![None; n];
    if n == 0 {
        return idom;
    }
    idom[0] = Some(0);
    let mut changed = true;
    while changed {
        changed = false;
        for &b in order.iter().skip(1) {
            let mut new: Option<usize> = None;
            for &p in &preds[b] {
                if idom[p].is_none() {
                    continue;
                }
                new = Some(match new {
                    None => p,
                    Some(mut a) => {
                        let mut p = p;
                        while a != p {
                            while rank[a] > rank[p] {
                                a = idom[a].expect("processed");
                            }
                            while rank[p] > rank[a] {
                                p = idom[p].expect("processed");
                            }
                        }
                        a
                    }
                });
            }
            if new.is_some() && idom[b] != new {
                idom[b] = new;
                changed = true;
            }
        }
    }
    idom
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(text: &str) -> ir::Module {
        let mut db = hir::Database::default();
        db.add_file("main.sap", text);
        lower::lower_workspace(&db).expect("the program checks")
    }

    fn fib() -> ir::Module {
        module(
            "fn fib(n: i64) -> i64 {\n    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }\n}\n\nfn main() {\n    print(to_string(fib(10)))\n}\n",
        )
    }

    /// The values that `op`'s instructions define in `f`.
    fn defined_by(f: &Function, op: BinOp) -> Vec<u32> {
        f.blocks
            .iter()
            .flat_map(|b| &b.insts)
            .filter(|i| matches!(i.op, Op::Binary(o, ..) if o == op))
            .map(|i| i.dest.as_ref().unwrap().0)
            .collect()
    }

    #[test]
    fn a_branch_bounds_the_subtractions_it_guards() {
        let m = fib();
        let f = m.functions.iter().find(|f| f.name == "fib").unwrap();
        let safe = unfailing_checks(f);
        let subs = defined_by(f, BinOp::Sub);
        assert_eq!(subs.len(), 2);
        assert!(subs.iter().all(|s| safe.contains(s)), "{safe:?} {subs:?}");
        // The sum of the two calls is not bounded.
        let adds = defined_by(f, BinOp::Add);
        assert_eq!(adds.len(), 1);
        assert!(!safe.contains(&adds[0]));
    }

    #[test]
    fn every_subtraction_of_inlined_fib_is_bounded() {
        let m = fib();
        let f = m.functions.iter().find(|f| f.name == "fib").unwrap();
        let inlined = super::super::inline::inline(&m, f);
        let f = &inlined.function;
        let safe = unfailing_checks(f);
        let subs = defined_by(f, BinOp::Sub);
        assert!(subs.len() > 2);
        assert!(subs.iter().all(|s| safe.contains(s)), "{safe:?} {subs:?}");
    }

    #[test]
    fn a_bound_is_not_taken_past_an_assignment_or_off_its_branch() {
        let m = module(
            "fn f(n: i64) -> i64 {\n    let m = n\n    if m > -5 {\n        m = -9223372036854775807\n    }\n    let a = m - 1\n    if n < 0 { n - 1 } else { n + 1 + a }\n}\n\nfn main() {\n    print(to_string(f(3)))\n}\n",
        );
        let f = m.functions.iter().find(|f| f.name == "f").unwrap();
        let safe = unfailing_checks(f);
        // `m` is assigned twice, `n - 1` is bounded above only, `n + 1` below only.
        assert!(safe.is_empty(), "{safe:?}");
    }

    /// The additions of `f` in `m` whose check is left out, as (constant, safe) pairs
    /// in the order they appear.
    fn additions(m: &ir::Module, name: &str) -> Vec<(i64, bool)> {
        let f = m.functions.iter().find(|f| f.name == name).unwrap();
        let safe = unfailing_checks(f);
        let mut consts = HashMap::new();
        let mut out = Vec::new();
        for inst in f.blocks.iter().flat_map(|b| &b.insts) {
            match (&inst.op, &inst.dest) {
                (Op::Const(Const::Int(k)), Some((d, _))) => {
                    consts.insert(*d, *k);
                }
                (Op::Binary(BinOp::Add, Type::I64, _, y), Some((d, _))) => {
                    if let Some(&k) = consts.get(y) {
                        out.push((k, safe.contains(d)));
                    }
                }
                _ => {}
            }
        }
        out
    }

    #[test]
    fn a_loop_bounds_its_variable_where_nothing_writes_it_between() {
        let m = module(
            "fn f(n: i64, xs: List<i64>) -> i64 {\n    let i = 0\n    let t = 0\n    while i < n {\n        t += i\n        i += 1\n    }\n    for x in xs {\n        t += x\n    }\n    let j = 0\n    while j < 100 {\n        j = j * 2\n        j += 3\n    }\n    let k = 0\n    while k < 100 {\n        k += 1\n        k += 2\n    }\n    t + j + k\n}\n\nfn main() {\n    print(to_string(f(3, [1])))\n}\n",
        );
        // `i += 1` under `i < n`, the `for`'s index under its count: safe. `j += 3` after
        // `j = j * 2`, and `k += 2` after `k += 1`: not. `t += …` adds no constant.
        assert_eq!(
            additions(&m, "f"),
            [(1, true), (1, true), (3, false), (1, true), (2, false)]
        );
    }

    #[test]
    fn bounds_meet_the_limits_of_i64_exactly() {
        assert!(within(
            Bounds {
                lo: i64::MIN + 1,
                hi: 0
            },
            -1
        ));
        assert!(!within(
            Bounds {
                lo: i64::MIN,
                hi: 0
            },
            -1
        ));
        assert!(within(
            Bounds {
                lo: 0,
                hi: i64::MAX - 2
            },
            2
        ));
        assert!(!within(
            Bounds {
                lo: 0,
                hi: i64::MAX - 1
            },
            2
        ));
        assert_eq!(split(BinOp::Lt, i64::MIN).0, Bounds { lo: 0, hi: -1 });
    }
}
