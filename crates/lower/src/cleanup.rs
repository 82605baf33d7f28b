//! Removes what lowering emits for uniformity but nothing uses: constants and loads
//! whose values are never read (the `()` of every statement, for one).

use std::collections::HashSet;

use ir::*;

pub fn function(f: &mut Function) {
    let mut used = HashSet::new();
    let mut scratch = Vec::new();
    for block in &f.blocks {
        for inst in &block.insts {
            scratch.clear();
            inst.op.operands(&mut scratch);
            used.extend(scratch.iter().copied());
        }
        used.extend(block.term.operand());
    }
    for block in &mut f.blocks {
        block.insts.retain(|inst| {
            let removable = matches!(inst.op, Op::Const(_) | Op::Load(_));
            !(removable && inst.dest.as_ref().is_some_and(|(v, _)| !used.contains(v)))
        });
    }
}
