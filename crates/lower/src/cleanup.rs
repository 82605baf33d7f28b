//! Removes what lowering emits for uniformity but nothing uses: constants and loads
//! whose values are never read (the `()` of every statement, for one).

use std::collections::HashSet;

use crate::ir::*;

fn operands(op: &Op, out: &mut Vec<ValueId>) {
    match op {
        Op::Const(_) | Op::Load(_) | Op::ContextNew => {}
        Op::Store(_, v)
        | Op::Unary(_, _, v)
        | Op::PushInPlace(_, v)
        | Op::Field(v, _)
        | Op::ContextChild(v) => out.push(*v),
        Op::Binary(_, _, a, b) | Op::Index(a, b) => out.extend([*a, *b]),
        Op::Call(_, args)
        | Op::CallExtern(_, args)
        | Op::CallBuiltin(_, args)
        | Op::List(args)
        | Op::Struct(_, args) => out.extend(args),
        Op::Instruct(c, _) => out.push(*c),
        Op::Inject { ctx, value, .. } => out.extend([*ctx, *value]),
        Op::Produce { ctx, .. }
        | Op::Fill { ctx, .. }
        | Op::Choose { ctx, .. }
        | Op::Decide { ctx, .. } => out.push(*ctx),
        Op::Arg(v, _) | Op::Arm(v) => out.push(*v),
        Op::ParallelFor { list, captures, .. } => {
            out.push(*list);
            out.extend(captures);
        }
    }
}

pub fn function(f: &mut Function) {
    let mut used = HashSet::new();
    let mut scratch = Vec::new();
    for block in &f.blocks {
        for inst in &block.insts {
            scratch.clear();
            operands(&inst.op, &mut scratch);
            used.extend(scratch.iter().copied());
        }
        match &block.term {
            Terminator::Branch(v, _, _) | Terminator::Switch(v, _) | Terminator::Return(v) => {
                used.insert(*v);
            }
            Terminator::Jump(_) | Terminator::Unreachable => {}
        }
    }
    for block in &mut f.blocks {
        block.insts.retain(|inst| {
            let removable = matches!(inst.op, Op::Const(_) | Op::Load(_));
            !(removable && inst.dest.as_ref().is_some_and(|(v, _)| !used.contains(v)))
        });
    }
}
