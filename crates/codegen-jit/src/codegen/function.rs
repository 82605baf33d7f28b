//! The code generator of one IR function: [`FnCg`] walks its blocks and terminators,
//! keeps the IR's values in Cranelift values (or in variables when they cross blocks),
//! and owns the function's ownership discipline at block ends and returns. What each
//! instruction becomes is `instructions.rs`; calls out and error exits `calls.rs`;
//! arithmetic `arith.rs`; lists `lists.rs`; which loads need no count `ownership.rs`.

use std::collections::{HashMap, HashSet};

use cranelift_codegen::ir as clif;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData as MemFlags, StackSlotData, StackSlotKind};
use cranelift_frontend::{FunctionBuilder, Variable};
use ir::{Const, Function, Module, Op, SrcSpan, Terminator, Type};

use super::counted::Counted;
use super::inline::{InlineScope, Inlined};
use super::ownership::{borrowed_loads, cross_block_values};
use super::{I64, PinTable};
use crate::abi::{FailKind, OFFSET_PINS, Pin, Site};
use crate::intrinsics::Intr;

pub(super) struct FnCg<'a, 'b> {
    pub(super) b: FunctionBuilder<'b>,
    pub(super) module: &'a Module,
    pub(super) f: &'a Function,
    /// What the program's code points at, shared by all its functions.
    pub(super) pins: &'a mut PinTable,
    pub(super) callees: Callees<'a>,
    pub(super) vars: Vec<Variable>,
    /// Values used outside the block that defines them live in variables.
    pub(super) cross: HashMap<u32, Variable>,
    pub(super) values: HashMap<u32, clif::Value>,
    pub(super) blocks: Vec<clif::Block>,
    /// The run's loop-iteration count, kept in a register in a function with loops:
    /// written back to the `Env` around every call that can read or advance it, and on
    /// return. A function without loops leaves it in the `Env`.
    pub(super) iterations: Option<Variable>,
    /// How many more nested calls the depth budget allows this function's callees.
    pub(super) deeper: clif::Value,
    /// Loads in the current block that borrow the variable's reference (see
    /// `borrowed_loads`).
    pub(super) borrowed: HashSet<u32>,
    /// The value the instruction being compiled defines.
    pub(super) current_dest: u32,
    /// Whether code is being emitted on the slow side of a fast path: blocks made there
    /// are laid out after the hot code.
    pub(super) cold: bool,
    /// The shared exit of the error paths outside inlined code (see `unwind`), once one
    /// needs it: it takes the frame's descriptor.
    pub(super) unwind_exit: Option<clif::Block>,
    /// The shared exit of failing checks outside inlined code: it takes the failure's
    /// descriptor, its two operands and the frame's descriptor.
    pub(super) fail_exit: Option<clif::Block>,
    /// The local each `Load` reads, by the value it defines.
    pub(super) loaded_from: HashMap<u32, u32>,
    /// For the hidden local holding the list a `for` loop walks: a variable with the
    /// list's element buffer when it is native, else 0. The local is assigned once per
    /// loop and holds its own reference, so nothing can append to that list in place
    /// (that needs the only reference) and the buffer stays put for the whole loop.
    pub(super) buffers: HashMap<u32, Variable>,
    /// For each local appended to in place, the parts of its list (see `Appender`).
    pub(super) appenders: HashMap<u32, Appender>,
    /// The inlined calls, and for each IR block the one it belongs to, if any.
    pub(super) inlined: &'a Inlined<'a>,
    /// The IR block being compiled.
    pub(super) block: usize,
    /// Additions and subtractions whose overflow check cannot fail (`ranges`).
    pub(super) unfailing: HashSet<u32>,
    /// The loops whose budget is paid on the way in, by header block (`counted`), each
    /// with its variables (`Paid`).
    pub(super) counted: HashMap<usize, (Counted, Paid)>,
    /// For a function with inlined copies: the deepest copy's level, and the function,
    /// whose plain twin takes the calls made with no more depth budget left than that.
    pub(super) twin: Option<(u32, u32)>,
}

/// A function compiled code may call: its id in the module, its signature, and whether
/// it is defined in the same module (a direct call) or imported (an intrinsic, called
/// through the intrinsic table rather than by name).
pub(super) struct Callable {
    pub(super) id: cranelift_module::FuncId,
    pub(super) signature: clif::Signature,
    pub(super) colocated: bool,
}

/// What a function's code may call: the intrinsics (by `Intr`, through the table the
/// `Env` points at), the sap functions (by `FuncId`) and the adapters of `SLOW_PATHS`
/// (in order). Each is declared in the function the first time its code calls it, so a
/// function's size — and the time to compile it — does not grow with the number of
/// functions in the program.
pub(super) struct Callees<'t> {
    pub(super) intrinsics: &'t [Callable],
    pub(super) functions: &'t [Callable],
    pub(super) slow_paths: &'t [Callable],
    pub(super) plains: &'t [Callable],
    declared: HashMap<(u8, usize), clif::FuncRef>,
    signatures: HashMap<usize, clif::SigRef>,
}

impl<'t> Callees<'t> {
    pub(super) fn new(
        intrinsics: &'t [Callable],
        functions: &'t [Callable],
        slow_paths: &'t [Callable],
        plains: &'t [Callable],
    ) -> Callees<'t> {
        Callees {
            intrinsics,
            functions,
            slow_paths,
            plains,
            declared: HashMap::new(),
            signatures: HashMap::new(),
        }
    }

    /// The signature of intrinsic `which`, to call it through the intrinsic table (see
    /// `intrinsic_address`).
    pub(super) fn intrinsic(&mut self, func: &mut clif::Function, which: Intr) -> clif::SigRef {
        let callable = &self.intrinsics[which as usize];
        *self
            .signatures
            .entry(which as usize)
            .or_insert_with(|| func.import_signature(callable.signature.clone()))
    }

    pub(super) fn function(&mut self, func: &mut clif::Function, id: u32) -> clif::FuncRef {
        self.declare(func, 1, id as usize)
    }

    pub(super) fn plain(&mut self, func: &mut clif::Function, id: u32) -> clif::FuncRef {
        self.declare(func, 3, id as usize)
    }

    pub(super) fn slow_path(&mut self, func: &mut clif::Function, index: usize) -> clif::FuncRef {
        self.declare(func, 2, index)
    }

    fn declare(&mut self, func: &mut clif::Function, table: u8, index: usize) -> clif::FuncRef {
        let callable = match table {
            1 => &self.functions[index],
            2 => &self.slow_paths[index],
            _ => &self.plains[index],
        };
        *self
            .declared
            .entry((table, index))
            .or_insert_with(|| import(func, callable))
    }
}

/// Declares `callable` in `func`, as `cranelift_module::Module::declare_func_in_func`
/// does.
pub(super) fn import(func: &mut clif::Function, callable: &Callable) -> clif::FuncRef {
    let signature = func.import_signature(callable.signature.clone());
    let name = func.declare_imported_user_function(clif::UserExternalName {
        namespace: 0,
        index: callable.id.as_u32(),
    });
    func.import_function(clif::ExtFuncData {
        name: clif::ExternalName::user(name),
        signature,
        colocated: callable.colocated,
        patchable: false,
    })
}

pub(super) fn span_of(inst_span: Option<SrcSpan>, f: &Function) -> Option<SrcSpan> {
    inst_span.or(Some(f.span))
}

/// What a counted loop's entry (`counted`) leaves for the rest of it.
#[derive(Clone, Copy)]
pub(super) struct Paid {
    /// The value the header compares the variable with instead of the bound.
    pub(super) end: Variable,
    /// 1 when the budget could not pay for every trip: leaving the loop is then the
    /// error.
    pub(super) short: Variable,
}

/// The length, capacity and buffer of the list in a local that `xs = push(xs, x)`
/// appends to, as compiled code last saw them; capacity 0 (no room) when the list is not
/// native or not seen yet (a parameter), which sends the next append to the runtime. They
/// stay true while the local holds the same list: only an append through this local can
/// change a list it holds alone (anyone else's append finds the list shared and copies
/// it); every assignment to the local and every append the runtime makes reads them
/// again. An append in place then reads one word of the object, its reference count,
/// and writes its length.
///
/// A capacity of 0 stands for "not native" too, so one comparison (`len < cap`) asks
/// both. The three cost registers; an earlier version kept buffer and capacity this way
/// while the loop budget lived across calls, and spilled. Now that every intrinsic call
/// writes the budget back and reads it again, the list loop of the programs benchmark
/// keeps all three without a spill (12 % fewer instructions than with the length alone).
#[derive(Clone, Copy)]
pub(super) struct Appender {
    pub(super) len: Variable,
    pub(super) cap: Variable,
    pub(super) items: Variable,
}

impl<'a, 'b> FnCg<'a, 'b> {
    /// The address of pin `pin` (see `abi::Pin`): entry `i` of the running program's
    /// pin table, which `Env::pins` points at.
    pub(super) fn pin(&mut self, pin: Pin) -> clif::Value {
        let index = self.pins.pins.intern(pin);
        let flags = MemFlags::trusted().with_readonly();
        let env = self.env();
        let table = self.b.ins().load(I64, flags, env, OFFSET_PINS);
        let offset = i32::try_from(index * 8).expect("fewer than 2^28 pins in one program");
        self.b.ins().load(I64, flags, table, offset)
    }

    /// The index of site `site` (see `abi::Site`), as a constant.
    pub(super) fn site(&mut self, site: Site) -> clif::Value {
        let index = self.site_index(site);
        self.iconst(i64::from(index))
    }

    pub(super) fn site_index(&mut self, site: Site) -> u32 {
        u32::try_from(self.pins.sites.intern(site)).expect("fewer than 2^32 sites")
    }

    pub(super) fn new(
        b: FunctionBuilder<'b>,
        module: &'a Module,
        pins: &'a mut PinTable,
        callees: Callees<'a>,
        inlined: &'a Inlined<'a>,
    ) -> Self {
        FnCg {
            b,
            module,
            f: &inlined.function,
            pins,
            callees,
            vars: Vec::new(),
            cross: HashMap::new(),
            unwind_exit: None,
            fail_exit: None,
            values: HashMap::new(),
            blocks: Vec::new(),
            iterations: None,
            deeper: clif::Value::from_u32(0),
            borrowed: Default::default(),
            current_dest: u32::MAX,
            cold: false,
            loaded_from: HashMap::new(),
            buffers: HashMap::new(),
            appenders: HashMap::new(),
            inlined,
            block: 0,
            unfailing: super::ranges::unfailing_checks(&inlined.function),
            counted: HashMap::new(),
            twin: None,
        }
    }

    /// The inlined call the current block's code belongs to, if any.
    pub(super) fn scope(&self) -> Option<&'a InlineScope> {
        let frame = self.inlined.frames.get(self.block).copied().flatten()?;
        Some(&self.inlined.scopes[frame.scope])
    }

    /// The depth budget left for a call made here: a level fewer for each inlined call
    /// around it, which stands for a call of its own.
    pub(super) fn deeper_here(&mut self) -> clif::Value {
        match self.scope() {
            Some(scope) => self
                .b
                .ins()
                .iadd_imm_s(self.deeper, -i64::from(scope.level)),
            None => self.deeper,
        }
    }

    /// The `Env`, from the pinned register (read where it is used, so that it never has
    /// to live in another register).
    pub(super) fn env(&mut self) -> clif::Value {
        self.b.ins().get_pinned_reg(I64)
    }

    pub(super) fn iconst(&mut self, n: i64) -> clif::Value {
        self.b.ins().iconst(I64, n)
    }

    pub(super) fn load_env(&mut self, offset: i32) -> clif::Value {
        let env = self.env();
        self.b.ins().load(I64, MemFlags::trusted(), env, offset)
    }

    pub(super) fn store_env(&mut self, value: clif::Value, offset: i32) {
        let env = self.env();
        self.b.ins().store(MemFlags::trusted(), value, env, offset);
    }

    pub(super) fn value(&mut self, id: u32) -> clif::Value {
        match self.cross.get(&id) {
            Some(var) => self.b.use_var(*var),
            None => self
                .values
                .get(&id)
                .copied()
                .unwrap_or_else(|| self.b.ins().iconst(I64, 0)),
        }
    }

    pub(super) fn define(&mut self, id: u32, ty: &Type, v: clif::Value) {
        match self.cross.get(&id).copied() {
            Some(var) => {
                if ty.is_heap() {
                    let old = self.b.use_var(var);
                    self.call(Intr::Release, &[old]);
                }
                self.b.def_var(var, v);
            }
            None => {
                self.values.insert(id, v);
            }
        }
    }

    pub(super) fn array(&mut self, values: &[clif::Value]) -> clif::Value {
        let size = (values.len().max(1) * 8) as u32;
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            size,
            3,
        ));
        for (i, v) in values.iter().enumerate() {
            self.b.ins().stack_store(I64, *v, slot, (i * 8) as i32);
        }
        self.b.ins().stack_addr(I64, slot, 0)
    }

    pub(super) fn body(&mut self) -> Result<(), String> {
        let f = self.f;
        let cross_ids = cross_block_values(f);

        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.blocks = f.blocks.iter().map(|_| self.b.create_block()).collect();
        self.b.switch_to_block(entry);
        let depth_left = self.b.block_params(entry)[0];
        let params: Vec<clif::Value> = self.b.block_params(entry)[1..].to_vec();
        if let Some((deepest, id)) = self.twin {
            // Near the depth limit a copy's check could fail: the plain twin, with
            // every call a call, runs the call instead, and its answer is this one's
            // (no frame is recorded here: the twin is this function).
            let near = self.b.ins().icmp_imm_u(
                IntCC::UnsignedLessThanOrEqual,
                depth_left,
                i64::from(deepest),
            );
            let forward = self.b.create_block();
            let body = self.b.create_block();
            self.b.set_cold_block(forward);
            self.b.ins().brif(near, forward, &[], body, &[]);
            self.b.switch_to_block(forward);
            let twin = self.callees.plain(self.b.func, id);
            let args: Vec<clif::Value> = self.b.block_params(entry).to_vec();
            let call = self.b.ins().call(twin, &args);
            let results = self.b.inst_results(call).to_vec();
            self.b.ins().return_(&results);
            self.b.switch_to_block(body);
        }
        for local in &f.locals {
            let _ = local;
            let var = self.b.declare_var(I64);
            self.vars.push(var);
        }
        let zero = self.iconst(0);
        for (i, var) in self.vars.clone().into_iter().enumerate() {
            if i < params.len() {
                if f.locals[i].ty.is_heap() {
                    self.call(Intr::Retain, &[params[i]]);
                }
                self.b.def_var(var, params[i]);
            } else {
                self.b.def_var(var, zero);
            }
        }
        for id in cross_ids {
            let var = self.b.declare_var(I64);
            self.b.def_var(var, zero);
            self.cross.insert(id, var);
        }
        self.declare_list_caches(zero);
        let has_loops = f
            .blocks
            .iter()
            .any(|b| matches!(b.term, Terminator::Loop(..)));
        if has_loops {
            self.iterations = Some(self.b.declare_var(I64));
            self.reload_iterations();
            for (header, counted) in super::counted::counted_loops(f) {
                let paid = Paid {
                    end: self.b.declare_var(I64),
                    short: self.b.declare_var(I64),
                };
                self.b.def_var(paid.end, zero);
                self.b.def_var(paid.short, zero);
                self.counted.insert(header, (counted, paid));
            }
        }
        // Recursion depth: the caller passes how many more nested calls the budget
        // allows; none left is an error, and callees get one fewer. Nothing is loaded
        // or stored, so calls do not wait on memory.
        // A function with copies has passed such a call to its twin already.
        if self.twin.is_none() {
            let too_deep = self.b.ins().icmp_imm_s(IntCC::Equal, depth_left, 0);
            self.fail_if(too_deep, FailKind::Depth, Some(f.span), zero, zero);
        }
        self.deeper = self.b.ins().iadd_imm_s(depth_left, -1);
        let first = self.blocks[0];
        self.b.ins().jump(first, &[]);

        for (bi, block) in f.blocks.iter().enumerate() {
            self.b.switch_to_block(self.blocks[bi]);
            self.block = bi;
            let mut temps: Vec<u32> = Vec::new();
            self.borrowed = borrowed_loads(block, &self.cross);
            self.counted_exit(bi);
            for inst in &block.insts {
                self.current_dest = inst.dest.as_ref().map_or(u32::MAX, |d| d.0);
                let result = self.inst(&inst.op, inst.span, inst.dest.as_ref().map(|d| &d.1))?;
                if let (Some((id, ty)), Some(v)) = (&inst.dest, result) {
                    self.define(*id, ty, v);
                    if ty.is_heap() && !self.cross.contains_key(id) && !self.borrowed.contains(id) {
                        temps.push(*id);
                    }
                }
            }
            match &block.term {
                Terminator::Return(v) => {
                    let ret_ty = &f.ret;
                    let result = self.value(*v);
                    if ret_ty.is_heap() {
                        self.call(Intr::Retain, &[result]);
                    }
                    self.release_temps(&temps);
                    for (i, local) in f.locals.iter().enumerate() {
                        if local.ty.is_heap() {
                            let v = self.b.use_var(self.vars[i]);
                            self.call(Intr::Release, &[v]);
                        }
                    }
                    for (id, var) in self.cross.clone() {
                        if self.value_type(id).is_some_and(|t| t.is_heap()) {
                            let v = self.b.use_var(var);
                            self.call(Intr::Release, &[v]);
                        }
                    }
                    self.save_iterations();
                    let ok = self.iconst(0);
                    self.b.ins().return_(&[result, ok]);
                }
                Terminator::Jump(t) | Terminator::Loop(t, _) => {
                    self.release_temps(&temps);
                    if let Terminator::Loop(_, span) = block.term {
                        if !self.counted.contains_key(&(*t as usize)) {
                            // Count the iteration against the budget: one fewer left (a
                            // counted loop paid its iterations on the way in).
                            let var = self.iterations.expect("a function with loops");
                            let left = self.b.use_var(var);
                            let none = self.b.ins().icmp_imm_s(IntCC::Equal, left, 0);
                            self.fail_if(none, FailKind::Iterations, Some(span), left, left);
                            let fewer = self.b.ins().iadd_imm_s(left, -1);
                            self.b.def_var(var, fewer);
                        }
                        if self.test_again(*t)? {
                            continue;
                        }
                    } else {
                        self.counted_entry(bi, *t as usize);
                    }
                    let target = self.blocks[*t as usize];
                    self.b.ins().jump(target, &[]);
                }
                Terminator::Branch(c, t, e) => {
                    let c = self.value(*c);
                    self.release_temps(&temps);
                    let (t, e) = (self.blocks[*t as usize], self.blocks[*e as usize]);
                    self.b.ins().brif(c, t, &[], e, &[]);
                }
                Terminator::Switch(v, targets) => {
                    let v = self.value(*v);
                    self.release_temps(&temps);
                    // A chain of comparisons: selects have a handful of arms.
                    for (i, target) in targets.iter().enumerate() {
                        let target = self.blocks[*target as usize];
                        if i + 1 == targets.len() {
                            self.b.ins().jump(target, &[]);
                        } else {
                            let is = self.b.ins().icmp_imm_s(IntCC::Equal, v, i as i64);
                            let next = self.b.create_block();
                            self.b.ins().brif(is, target, &[], next, &[]);
                            self.b.switch_to_block(next);
                        }
                    }
                    if targets.is_empty() {
                        self.fail_now(
                            FailKind::Internal("internal: no arm".to_owned()),
                            span_of(None, f),
                        );
                    }
                }
                Terminator::Unreachable => {
                    let message = format!("internal: `{}` reached an unreachable block", f.name);
                    self.fail_now(FailKind::Internal(message), Some(f.span));
                }
            }
        }
        self.b.seal_all_blocks();
        Ok(())
    }

    /// At the end of a loop's iteration: when the loop's head only tests a condition on
    /// numbers (`i < n`), the test is made here again and branches straight to the body
    /// or the exit, so an iteration takes one branch instead of a jump back to the
    /// head and a branch there (Cranelift does not rotate loops). Whether it did.
    fn test_again(&mut self, head: u32) -> Result<bool, String> {
        /// Instructions a head may have and be copied.
        const MOST: usize = 8;
        let block = &self.f.blocks[head as usize];
        let Terminator::Branch(c, then, otherwise) = block.term else {
            return Ok(false);
        };
        let simple = block.insts.len() <= MOST
            && block.insts.iter().all(|inst| {
                let scalar = inst.dest.as_ref().is_some_and(|(_, ty)| !ty.is_heap());
                scalar
                    && matches!(
                        &inst.op,
                        Op::Load(_)
                            | Op::Const(Const::Int(_) | Const::Bool(_))
                            | Op::Binary(..)
                            | Op::Unary(..)
                    )
            });
        if !simple {
            return Ok(false);
        }
        for inst in &block.insts {
            self.current_dest = inst.dest.as_ref().map_or(u32::MAX, |d| d.0);
            let result = self.inst(&inst.op, inst.span, inst.dest.as_ref().map(|d| &d.1))?;
            if let (Some((id, ty)), Some(v)) = (&inst.dest, result) {
                self.define(*id, ty, v);
            }
        }
        let c = self.value(c);
        let (then, otherwise) = (self.blocks[then as usize], self.blocks[otherwise as usize]);
        self.b.ins().brif(c, then, &[], otherwise, &[]);
        Ok(true)
    }

    pub(super) fn value_type(&self, id: u32) -> Option<&Type> {
        self.f
            .blocks
            .iter()
            .flat_map(|b| &b.insts)
            .find_map(|i| i.dest.as_ref().filter(|d| d.0 == id).map(|d| &d.1))
    }

    pub(super) fn release_temps(&mut self, temps: &[u32]) {
        for id in temps {
            if let Some(v) = self.values.get(id).copied() {
                self.call(Intr::Release, &[v]);
            }
        }
    }
}
