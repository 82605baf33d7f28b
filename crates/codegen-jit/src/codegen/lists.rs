//! List lowering: indexing, `len`, `for` and `xs = push(xs, x)` / `xs = set(xs, i, x)`
//! on native lists are inline code reading the object in place (offsets from
//! `heap::layout`); the rest, and every list from the host, goes to the runtime through
//! slow paths laid out cold.
//!
//! Two caches in registers, both sound because only the sole holder of a list may change
//! it: a `for` loop's hidden list local keeps its buffer (`FnCg::buffers`), and a
//! variable appended to keeps its list's length, capacity and buffer (`Appender`),
//! forgotten on every assignment and every append the runtime makes.

use cranelift_codegen::ir as clif;
use cranelift_codegen::ir::InstBuilder;
use cranelift_codegen::ir::MemFlagsData as MemFlags;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_frontend::Variable;
use ir::{Op, SrcSpan, Type};

use super::I64;
use super::function::{Appender, FnCg};
use crate::heap::layout;
use crate::intrinsics::Intr;

impl FnCg<'_, '_> {
    /// Declares the register caches: the lengths, capacities and buffers of the lists in
    /// locals appended to in place (no room at first), and the buffers of the lists `for`
    /// loops walk (`zero` at first).
    pub(super) fn declare_list_caches(&mut self, zero: clif::Value) {
        for block in &self.f.blocks {
            for inst in &block.insts {
                match (&inst.op, &inst.dest) {
                    (Op::Load(local), Some((id, _))) => {
                        self.loaded_from.insert(*id, *local);
                    }
                    (Op::PushInPlace(local, _), _) if !self.appenders.contains_key(local) => {
                        let len = self.b.declare_var(I64);
                        let cap = self.b.declare_var(I64);
                        let items = self.b.declare_var(I64);
                        self.b.def_var(len, zero);
                        self.b.def_var(cap, zero);
                        self.b.def_var(items, zero);
                        self.appenders.insert(*local, Appender { len, cap, items });
                    }
                    _ => {}
                }
            }
        }
        for block in &self.f.blocks {
            for inst in &block.insts {
                if let Op::Element(l, _) = &inst.op
                    && let Some(local) = self.loaded_from.get(l).copied()
                    && !self.buffers.contains_key(&local)
                {
                    let var = self.b.declare_var(I64);
                    self.b.def_var(var, zero);
                    self.buffers.insert(local, var);
                }
            }
        }
    }

    /// Continues in a new block when `list` is a native list, and goes to `slow` when it
    /// is not (a list from the host, or none).
    pub(super) fn when_native_list(&mut self, list: clif::Value, slow: clif::Block) {
        let native = self.b.create_block();
        let present = self.b.create_block();
        self.b.ins().brif(list, present, &[], slow, &[]);
        self.b.switch_to_block(present);
        let tag = self.list_field(list, layout::TAG);
        let is_native = self.b.ins().icmp_imm_s(IntCC::Equal, tag, layout::RAW_TAG);
        self.b.ins().brif(is_native, native, &[], slow, &[]);
        self.b.switch_to_block(native);
    }

    /// Continues in a new block when `condition` holds, and goes to `otherwise` if not.
    pub(super) fn continue_if(&mut self, condition: clif::Value, otherwise: clif::Block) {
        let next = self.b.create_block();
        self.b.ins().brif(condition, next, &[], otherwise, &[]);
        self.b.switch_to_block(next);
    }

    pub(super) fn list_field(&mut self, list: clif::Value, offset: i32) -> clif::Value {
        self.b.ins().load(I64, MemFlags::trusted(), list, offset)
    }

    /// The number of elements of a list: read in place from a native list.
    pub(super) fn list_len(&mut self, list: clif::Value) -> clif::Value {
        let slow = self.b.create_block();
        let done = self.b.create_block();
        let result = self.b.declare_var(I64);
        self.when_native_list(list, slow);
        let len = self.list_field(list, layout::LEN);
        self.b.def_var(result, len);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(slow);
        self.b.set_cold_block(slow);
        let len = self.slow_call(Intr::ListLen, &[list]);
        self.b.def_var(result, len);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        self.b.use_var(result)
    }

    /// `list[index]`: loaded in place from a native list when the index is in range (an
    /// owned reference for a heap element); the runtime handles other lists and reports
    /// a bad index.
    pub(super) fn list_index(
        &mut self,
        list: clif::Value,
        index: clif::Value,
        elem: &Type,
        span: Option<SrcSpan>,
    ) -> clif::Value {
        let slow = self.b.create_block();
        self.when_native_list(list, slow);
        let len = self.list_field(list, layout::LEN);
        let in_range = self.b.ins().icmp(IntCC::UnsignedLessThan, index, len);
        self.continue_if(in_range, slow);
        let items = self.list_field(list, layout::ITEMS);
        let done = self.b.create_block();
        let result = self.b.declare_var(I64);
        let x = self.element_of_buffer(items, index, elem);
        self.b.def_var(result, x);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(slow);
        self.b.set_cold_block(slow);
        let d = self.type_arg(elem.clone(), span);
        let x = self.slow_call(Intr::Index, &[d, list, index]);
        self.b.def_var(result, x);
        self.cold = true;
        self.check_failed(span);
        self.cold = false;
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        self.b.use_var(result)
    }

    /// The hidden local of a `for` loop was just set to `list`: makes sure it holds a
    /// native list (a list from the host is converted once, here, so that no element
    /// read needs the runtime), and keeps the list's element buffer in `buffer`.
    pub(super) fn walk_native(
        &mut self,
        local: u32,
        buffer: Variable,
        list: clif::Value,
        elem: &Type,
    ) {
        let var = self.vars[local as usize];
        let convert = self.b.create_block();
        let done = self.b.create_block();
        self.when_native_list(list, convert);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(convert);
        self.b.set_cold_block(convert);
        let d = self.type_arg(elem.clone(), None);
        let native = self.slow_call(Intr::Native, &[d, list]);
        self.cold = true;
        self.check_failed(None);
        self.cold = false;
        // The local's reference moves to the native copy.
        self.call(Intr::Release, &[list]);
        self.b.def_var(var, native);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        let list = self.b.use_var(var);
        let items = self.list_field(list, layout::ITEMS);
        self.b.def_var(buffer, items);
    }

    /// Element `index` of a native list's buffer `items` (an owned reference for a heap
    /// element): the list a `for` loop walks keeps its buffer in a register.
    pub(super) fn element_of_buffer(
        &mut self,
        items: clif::Value,
        index: clif::Value,
        elem: &Type,
    ) -> clif::Value {
        let offset = self.b.ins().ishl_imm_u(index, 3);
        let at = self.b.ins().iadd(items, offset);
        let x = self.b.ins().load(I64, MemFlags::trusted(), at, 0);
        if elem.is_heap() {
            self.call(Intr::Retain, &[x]);
        }
        x
    }

    /// `xs = push(xs, x)` on the variable of `local`: written in place when the list is
    /// native, held by the variable alone and has room; otherwise the runtime appends
    /// (growing, copying a shared list, or converting one from the host).
    ///
    /// The length, capacity and buffer of the variable's list are kept in registers (see
    /// `Appender`): an append reads only the reference count from the object.
    pub(super) fn push_in_place(
        &mut self,
        local: u32,
        item: clif::Value,
        elem: &Type,
        span: Option<SrcSpan>,
    ) {
        let var = self.vars[local as usize];
        let list = self.b.use_var(var);
        let slow = self.b.create_block();
        let done = self.b.create_block();
        if let Some(cache) = self.appenders.get(&local).copied() {
            // A list that is not native has no room (see `Appender`) and goes to the
            // runtime, which gives back a native one.
            let len = self.b.use_var(cache.len);
            let cap = self.b.use_var(cache.cap);
            let room = self.b.ins().icmp(IntCC::UnsignedLessThan, len, cap);
            self.continue_if(room, slow);
            let count = self.list_field(list, layout::COUNT);
            let unique = self.b.ins().icmp_imm_s(IntCC::Equal, count, 1);
            self.continue_if(unique, slow);
            let items = self.b.use_var(cache.items);
            let offset = self.b.ins().ishl_imm_u(len, 3);
            let at = self.b.ins().iadd(items, offset);
            self.b.ins().store(MemFlags::trusted(), item, at, 0);
            if elem.is_heap() {
                // The list's own reference.
                self.call(Intr::Retain, &[item]);
            }
            let longer = self.b.ins().iadd_imm_s(len, 1);
            self.b
                .ins()
                .store(MemFlags::trusted(), longer, list, layout::LEN);
            self.b.def_var(cache.len, longer);
            self.b.ins().jump(done, &[]);
            self.b.set_cold_block(slow);
        } else {
            self.b.ins().jump(slow, &[]);
        }
        self.b.switch_to_block(slow);
        self.update_in_runtime(local, Intr::Push, &[list, item], elem, span);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    /// The runtime's side of `xs = push(xs, …)` or `xs = set(xs, …)` on the variable of
    /// `local`: it takes over the variable's reference and gives the list back, always
    /// native, maybe a new one.
    pub(super) fn update_in_runtime(
        &mut self,
        local: u32,
        which: Intr,
        args: &[clif::Value],
        elem: &Type,
        span: Option<SrcSpan>,
    ) {
        let d = self.type_arg(elem.clone(), span);
        let mut values = vec![d];
        values.extend_from_slice(args);
        let new = self.slow_call(which, &values);
        self.b.def_var(self.vars[local as usize], new);
        self.cold = true;
        self.check_failed(span);
        self.cold = false;
        if let Some(cache) = self.appenders.get(&local).copied() {
            self.see_native_list(cache, new);
        }
    }

    /// `xs = set(xs, i, x)` on the variable of `local`: written in place when the list is
    /// native, held by the variable alone and `i` is in range; otherwise the runtime
    /// replaces (copying a shared list or one from the host) or reports the bad index.
    pub(super) fn set_in_place(
        &mut self,
        local: u32,
        index: clif::Value,
        item: clif::Value,
        elem: &Type,
        span: Option<SrcSpan>,
    ) {
        let var = self.vars[local as usize];
        let list = self.b.use_var(var);
        let slow = self.b.create_block();
        let done = self.b.create_block();
        self.when_native_list(list, slow);
        let count = self.list_field(list, layout::COUNT);
        let unique = self.b.ins().icmp_imm_s(IntCC::Equal, count, 1);
        self.continue_if(unique, slow);
        let len = self.list_field(list, layout::LEN);
        let in_range = self.b.ins().icmp(IntCC::UnsignedLessThan, index, len);
        self.continue_if(in_range, slow);
        let items = self.list_field(list, layout::ITEMS);
        let offset = self.b.ins().ishl_imm_u(index, 3);
        let at = self.b.ins().iadd(items, offset);
        let old = self.b.ins().load(I64, MemFlags::trusted(), at, 0);
        self.b.ins().store(MemFlags::trusted(), item, at, 0);
        if elem.is_heap() {
            self.call(Intr::Retain, &[item]);
            self.call(Intr::Release, &[old]);
        }
        self.b.ins().jump(done, &[]);
        self.b.set_cold_block(slow);
        self.b.switch_to_block(slow);
        self.update_in_runtime(local, Intr::Set, &[list, index, item], elem, span);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    pub(super) fn see_native_list(&mut self, cache: Appender, list: clif::Value) {
        let len = self.list_field(list, layout::LEN);
        self.b.def_var(cache.len, len);
        let cap = self.list_field(list, layout::CAP);
        self.b.def_var(cache.cap, cap);
        let items = self.list_field(list, layout::ITEMS);
        self.b.def_var(cache.items, items);
    }

    /// The variable of `local` now holds `list`: its length, capacity and buffer, if it is
    /// native.
    pub(super) fn see_appender_list(&mut self, local: u32, list: clif::Value) {
        let Some(cache) = self.appenders.get(&local).copied() else {
            return;
        };
        let other = self.b.create_block();
        let done = self.b.create_block();
        // No room until the list is known to be native.
        let none = self.iconst(0);
        self.b.def_var(cache.cap, none);
        self.when_native_list(list, other);
        self.see_native_list(cache, list);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(other);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }
}

/// The element type of a list type.
pub(super) fn element_type(list: &Type) -> Type {
    match list {
        Type::List(e) => (**e).clone(),
        _ => Type::Unit,
    }
}
