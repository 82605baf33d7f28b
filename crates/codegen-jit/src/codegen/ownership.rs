//! Ownership in compiled code, and where counting can be skipped.
//!
//! A heap value produced by an instruction is an owned count; `Load` retains, `Store`
//! retains the new value and releases the old, a function retains its heap parameters
//! on entry and releases its variables on return, and a temporary is released at the
//! end of the block that made it (values used in later blocks live in variables, see
//! [`cross_block_values`]). An error returns at once without giving back the counts its
//! frames hold (the failed run ends; a failed tool call of a plan leaves them behind).
//! [`borrowed_loads`] finds the loads that need no count of their own.

use std::collections::{HashMap, HashSet};

use cranelift_frontend::Variable;
use ir::{Function, Op, Terminator};

/// Loads of heap variables that need no reference of their own: the value is used only
/// in this block, and the variable is not assigned before its last use, so the variable's
/// reference keeps the object alive. This saves an atomic increment and decrement per use
/// (a loop reading a list element by element).
pub(super) fn borrowed_loads(block: &ir::Block, cross: &HashMap<u32, Variable>) -> HashSet<u32> {
    let mut borrowed = HashSet::new();
    for (i, inst) in block.insts.iter().enumerate() {
        let (Op::Load(local), Some((id, ty))) = (&inst.op, &inst.dest) else {
            continue;
        };
        if !ty.is_heap() || cross.contains_key(id) {
            continue;
        }
        let mut last_use = None;
        let mut ops = Vec::new();
        for (j, later) in block.insts.iter().enumerate().skip(i + 1) {
            ops.clear();
            later.op.operands(&mut ops);
            if ops.contains(id) {
                last_use = Some(j);
            }
        }
        if let Terminator::Return(v) = &block.term
            && v == id
        {
            // A returned value must be owned.
            continue;
        }
        let Some(last) = last_use else { continue };
        let reassigned = block.insts[i + 1..=last].iter().any(
            |later| matches!(&later.op, Op::Store(l, _) | Op::PushInPlace(l, _) | Op::SetInPlace(l, _, _) if l == local),
        );
        if !reassigned {
            borrowed.insert(*id);
        }
    }
    borrowed
}

/// The values used outside the block that defines them, in order of first use: they
/// live in variables, and are released on return rather than at their block's end.
pub(super) fn cross_block_values(f: &Function) -> Vec<u32> {
    let mut defined_in: HashMap<u32, usize> = HashMap::new();
    for (bi, block) in f.blocks.iter().enumerate() {
        for inst in &block.insts {
            if let Some((v, _)) = inst.dest {
                defined_in.insert(v, bi);
            }
        }
    }
    let mut cross_ids = Vec::new();
    for (bi, block) in f.blocks.iter().enumerate() {
        let mut used = Vec::new();
        for inst in &block.insts {
            inst.op.operands(&mut used);
        }
        if let Terminator::Branch(v, _, _) | Terminator::Switch(v, _) | Terminator::Return(v) =
            &block.term
        {
            used.push(*v);
        }
        for v in used {
            if defined_in.get(&v).is_some_and(|d| *d != bi) && !cross_ids.contains(&v) {
                cross_ids.push(v);
            }
        }
    }
    cross_ids
}
