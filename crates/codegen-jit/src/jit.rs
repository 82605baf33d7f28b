//! The Cranelift backend: every IR function becomes a native function
//! `fn(env, depth_left, params…) -> (result, failed)`. Arithmetic (with overflow and
//! division checks), comparisons, control flow, calls between sap functions, recursion
//! and the common list operations (see `rawlist.rs`) are native code; everything else
//! calls the intrinsics in `intrinsics.rs`.
//!
//! Ownership: a heap value produced by an instruction is an owned reference; `Load`
//! retains, `Store` retains the new value and releases the old, a function retains its
//! heap parameters on entry and releases its variables on return, and a temporary is
//! released at the end of the block that made it (values used in later blocks live in
//! variables). An error returns at once without giving back the references its frames
//! hold (the failed run ends; a failed tool call of a plan leaves them behind).

use std::collections::HashMap;
use std::sync::Arc;

use cranelift_codegen::ir;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    AbiParam, InstBuilder, MemFlagsData as MemFlags, StackSlotData, StackSlotKind, UserFuncName,
    types,
};
use cranelift_codegen::isa::CallConv;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module as _};
use lower::ir::{BinOp, Const, FuncId, Function, Module, Op, SrcSpan, Terminator, Type, UnOp};
use runtime::{Context, Value};

use crate::eval::Slot;
use crate::host::{Engine, ExecError, Host};
use crate::intrinsics::*;
use crate::rawlist;

const I64: ir::Type = types::I64;

/// Owns everything compiled code points at: the code, the descriptors, the constants.
/// Descriptors are boxed so their addresses, baked into the code, stay put as the vectors
/// grow.
#[derive(Default)]
#[allow(clippy::vec_box)]
struct Keep {
    fails: Vec<Box<FailDesc>>,
    frames: Vec<Box<FrameDesc>>,
    host_calls: Vec<Box<HostCallDesc>>,
    type_args: Vec<Box<TypeArg>>,
    binaries: Vec<Box<BinaryDesc>>,
    structs: Vec<Box<StructDesc>>,
    injects: Vec<Box<InjectDesc>>,
    llms: Vec<Box<LlmDesc>>,
    parallels: Vec<Box<ParallelDesc>>,
    /// Constant strings and tools, one reference each held here.
    consts: Vec<Arc<Slot>>,
}

macro_rules! keep_ptr {
    ($vec:expr, $value:expr) => {{
        let boxed = Box::new($value);
        let ptr = &*boxed as *const _ as i64;
        $vec.push(boxed);
        ptr
    }};
}

pub struct JitProgram {
    _module: JITModule,
    _keep: Keep,
    ir: Arc<Module>,
    /// `fn(env, args: *const i64) -> i64` for every function, to call from Rust.
    trampolines: Vec<*const u8>,
}

// SAFETY: the code and descriptors are immutable once finalized; compiled code is
// reentrant and keeps its state in the `Env` each thread passes.
unsafe impl Send for JitProgram {}
unsafe impl Sync for JitProgram {}

type Trampoline = unsafe extern "C" fn(*mut Env, *const i64) -> i64;

#[derive(Clone, Copy)]
enum Intr {
    Retain,
    Release,
    Fail,
    Unwind,
    Binary,
    Fmod,
    CallHost,
    Push,
    List,
    Struct,
    Field,
    Index,
    ListLen,
    CtxNew,
    CtxChild,
    Instruct,
    Inject,
    Llm,
    Arg,
    Arm,
    Parallel,
    Native,
    Set,
}

const INTRINSICS: &[(Intr, &str, usize, bool)] = &[
    // (which, symbol, i64 parameters, returns i64)
    (Intr::Retain, "sap_retain", 1, false),
    (Intr::Release, "sap_release", 1, false),
    (Intr::Fail, "sap_fail", 4, false),
    (Intr::Unwind, "sap_unwind", 2, false),
    (Intr::Binary, "sap_binary", 4, true),
    (Intr::Fmod, "sap_fmod", 2, true),
    (Intr::CallHost, "sap_call_host", 3, true),
    (Intr::Push, "sap_push", 4, true),
    (Intr::List, "sap_list", 4, true),
    (Intr::Struct, "sap_struct", 3, true),
    (Intr::Field, "sap_field", 4, true),
    (Intr::Index, "sap_index", 4, true),
    (Intr::ListLen, "sap_list_len", 1, true),
    (Intr::CtxNew, "sap_ctx_new", 0, true),
    (Intr::CtxChild, "sap_ctx_child", 1, true),
    (Intr::Instruct, "sap_instruct", 2, false),
    (Intr::Inject, "sap_inject", 4, false),
    (Intr::Llm, "sap_llm", 4, true),
    (Intr::Arg, "sap_arg", 3, true),
    (Intr::Arm, "sap_arm", 1, true),
    (Intr::Parallel, "sap_parallel", 4, true),
    (Intr::Native, "sap_native", 3, true),
    (Intr::Set, "sap_set", 5, true),
];

/// Intrinsics called from the cold side of an inline fast path, through an adapter that
/// preserves every register and leaves the result in `Env::out` (`FnCg::slow_paths`, in
/// this order). Each takes the `Env`, a descriptor and its arguments, or one argument.
const SLOW_PATHS: &[Intr] = &[
    Intr::Index,
    Intr::Push,
    Intr::ListLen,
    Intr::Native,
    Intr::Set,
];

fn intrinsic_address(i: Intr) -> *const u8 {
    match i {
        Intr::Retain => sap_retain as *const u8,
        Intr::Release => sap_release as *const u8,
        Intr::Fail => sap_fail as *const u8,
        Intr::Unwind => sap_unwind as *const u8,
        Intr::Binary => sap_binary as *const u8,
        Intr::Fmod => sap_fmod as *const u8,
        Intr::CallHost => sap_call_host as *const u8,
        Intr::Push => sap_push as *const u8,
        Intr::List => sap_list as *const u8,
        Intr::Struct => sap_struct as *const u8,
        Intr::Field => sap_field as *const u8,
        Intr::Index => sap_index as *const u8,
        Intr::ListLen => sap_list_len as *const u8,
        Intr::CtxNew => sap_ctx_new as *const u8,
        Intr::CtxChild => sap_ctx_child as *const u8,
        Intr::Instruct => sap_instruct as *const u8,
        Intr::Inject => sap_inject as *const u8,
        Intr::Llm => sap_llm as *const u8,
        Intr::Arg => sap_arg as *const u8,
        Intr::Arm => sap_arm as *const u8,
        Intr::Parallel => sap_parallel as *const u8,
        Intr::Native => sap_native as *const u8,
        Intr::Set => sap_set as *const u8,
    }
}

/// Compiles every function of `module` to native code.
pub fn compile(module: Arc<Module>) -> Result<JitProgram, String> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").map_err(|e| e.to_string())?;
    flags.set("is_pic", "false").map_err(|e| e.to_string())?;
    // The IR verifier checks our code generator; tests (debug builds) keep it, release
    // builds skip its cost at start-up.
    let verify = if cfg!(debug_assertions) {
        "true"
    } else {
        "false"
    };
    flags
        .set("enable_verifier", verify)
        .map_err(|e| e.to_string())?;
    let isa = cranelift_native::builder()
        .map_err(|e| format!("this machine is not supported by Cranelift: {e}"))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| e.to_string())?;
    let mut builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    for (which, name, _, _) in INTRINSICS {
        builder.symbol(*name, intrinsic_address(*which));
    }
    let mut jit = JITModule::new(builder);

    let mut intrinsic_ids = HashMap::new();
    for (which, name, params, returns) in INTRINSICS {
        let mut sig = jit.make_signature();
        let float = matches!(which, Intr::Fmod);
        for _ in 0..*params {
            sig.params
                .push(AbiParam::new(if float { types::F64 } else { I64 }));
        }
        if *returns {
            sig.returns
                .push(AbiParam::new(if float { types::F64 } else { I64 }));
        }
        let id = jit
            .declare_function(name, Linkage::Import, &sig)
            .map_err(|e| e.to_string())?;
        intrinsic_ids.insert(*name, id);
    }

    // The slow paths of inline list operations go through adapters that preserve every
    // register: the values a loop keeps in registers stay there across them, instead of
    // living in callee-saved registers or on the stack for the sake of a rare call.
    let mut slow_ids = Vec::new();
    for (i, which) in SLOW_PATHS.iter().enumerate() {
        let mut sig = jit.make_signature();
        sig.call_conv = CallConv::PreserveAll;
        for _ in 0..5 {
            sig.params.push(AbiParam::new(I64));
        }
        let id = jit
            .declare_function(&format!("sap_slow_{i}"), Linkage::Local, &sig)
            .map_err(|e| e.to_string())?;
        let frontend = jit.target_config();
        let mut ctx = jit.make_context();
        ctx.func.signature = sig;
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let (_, name, arity, _) = INTRINSICS[*which as usize];
        let callee = jit.declare_func_in_func(intrinsic_ids[name], b.func);
        // `Env` and a descriptor first, or (`ListLen`) just the list after the `Env`.
        let args = if arity >= 3 {
            &params[..arity]
        } else {
            &params[1..=arity]
        };
        let call = b.ins().call(callee, args);
        let result = b.inst_results(call)[0];
        b.ins()
            .store(MemFlags::trusted(), result, params[0], OFFSET_OUT);
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(frontend);
        jit.define_function(id, &mut ctx)
            .map_err(|e| format!("cannot compile a slow path: {e:?}"))?;
        slow_ids.push(id);
    }

    let mut func_ids = Vec::new();
    for (i, f) in module.functions.iter().enumerate() {
        // `fn(env, depth_left, params…) -> (result, failed)`: how many more nested calls
        // the depth budget allows, and whether the call failed, travel in registers.
        let mut sig = jit.make_signature();
        sig.params.push(AbiParam::new(I64));
        sig.params.push(AbiParam::new(I64));
        for _ in &f.params {
            sig.params.push(AbiParam::new(I64));
        }
        sig.returns.push(AbiParam::new(I64));
        sig.returns.push(AbiParam::new(I64));
        func_ids.push(
            jit.declare_function(&format!("sap_fn_{i}"), Linkage::Local, &sig)
                .map_err(|e| e.to_string())?,
        );
    }
    let mut tramp_ids = Vec::new();
    for i in 0..module.functions.len() {
        let mut sig = jit.make_signature();
        sig.params.push(AbiParam::new(I64));
        sig.params.push(AbiParam::new(I64));
        sig.returns.push(AbiParam::new(I64));
        tramp_ids.push(
            jit.declare_function(&format!("sap_tramp_{i}"), Linkage::Local, &sig)
                .map_err(|e| e.to_string())?,
        );
    }

    let frontend = jit.target_config();
    let mut keep = Keep::default();
    let mut ctx = jit.make_context();
    let mut fctx = FunctionBuilderContext::new();
    for (i, f) in module.functions.iter().enumerate() {
        ctx.func.signature = jit
            .declarations()
            .get_function_decl(func_ids[i])
            .signature
            .clone();
        ctx.func.name = UserFuncName::user(0, i as u32);
        {
            let b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let mut cg = FnCg::new(b, &module, f, &mut keep);
            cg.intrinsics = INTRINSICS
                .iter()
                .map(|(which, name, _, _)| {
                    (
                        *which as usize,
                        jit.declare_func_in_func(intrinsic_ids[name], cg.b.func),
                    )
                })
                .collect();
            cg.functions = func_ids
                .iter()
                .map(|id| jit.declare_func_in_func(*id, cg.b.func))
                .collect();
            cg.slow_paths = slow_ids
                .iter()
                .map(|id| jit.declare_func_in_func(*id, cg.b.func))
                .collect();
            cg.body()
                .map_err(|e| format!("cannot compile `{}`: {e}", f.name))?;
            cg.b.finalize(frontend);
        }
        jit.define_function(func_ids[i], &mut ctx)
            .map_err(|e| format!("cannot compile `{}`: {e:?}", f.name))?;
        // For people working on the code generator: `SAP_JIT_DUMP=dir` writes each
        // function's machine code to `dir/<name>.bin` (`objdump -D -b binary -m i386:x86-64`).
        if let (Some(code), Some(dir)) = (ctx.compiled_code(), std::env::var_os("SAP_JIT_DUMP")) {
            let path = std::path::Path::new(&dir).join(format!("{}.bin", f.name));
            let _ = std::fs::write(path, code.buffer.data());
        }
        jit.clear_context(&mut ctx);

        // The trampoline: unpack the argument array, call, return.
        ctx.func.signature = jit
            .declarations()
            .get_function_decl(tramp_ids[i])
            .signature
            .clone();
        ctx.func.name = UserFuncName::user(1, i as u32);
        {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            let (env, args) = (b.block_params(entry)[0], b.block_params(entry)[1]);
            // The depth budget left: none when the depth has reached the limit.
            let depth = b.ins().load(I64, MemFlags::trusted(), env, OFFSET_DEPTH);
            let max = b
                .ins()
                .load(I64, MemFlags::trusted(), env, OFFSET_MAX_DEPTH);
            let left = b.ins().isub(max, depth);
            let spent = b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, depth, max);
            let none = b.ins().iconst(I64, 0);
            let left = b.ins().select(spent, none, left);
            let mut call_args = vec![env, left];
            for k in 0..f.params.len() {
                call_args.push(b.ins().load(I64, MemFlags::trusted(), args, (k * 8) as i32));
            }
            let callee = jit.declare_func_in_func(func_ids[i], b.func);
            let call = b.ins().call(callee, &call_args);
            let result = b.inst_results(call)[0];
            b.ins().return_(&[result]);
            b.seal_all_blocks();
            b.finalize(frontend);
        }
        jit.define_function(tramp_ids[i], &mut ctx)
            .map_err(|e| format!("cannot compile a trampoline: {e:?}"))?;
        jit.clear_context(&mut ctx);
    }
    jit.finalize_definitions().map_err(|e| e.to_string())?;
    let trampolines = tramp_ids
        .iter()
        .map(|id| jit.get_finalized_function(*id))
        .collect();
    Ok(JitProgram {
        _module: jit,
        _keep: keep,
        ir: module,
        trampolines,
    })
}

struct FnCg<'a, 'b> {
    b: FunctionBuilder<'b>,
    module: &'a Module,
    f: &'a Function,
    keep: &'a mut Keep,
    intrinsics: HashMap<usize, ir::FuncRef>,
    functions: Vec<ir::FuncRef>,
    /// The adapters of `SLOW_PATHS`, in order.
    slow_paths: Vec<ir::FuncRef>,
    env: ir::Value,
    vars: Vec<Variable>,
    /// Values used outside the block that defines them live in variables.
    cross: HashMap<u32, Variable>,
    values: HashMap<u32, ir::Value>,
    blocks: Vec<ir::Block>,
    /// The run's loop-iteration count, kept in a register in a function with loops:
    /// written back to the `Env` around every call that can read or advance it, and on
    /// return. A function without loops leaves it in the `Env`.
    iterations: Option<Variable>,
    /// How many more nested calls the depth budget allows this function's callees.
    deeper: ir::Value,
    /// Where native lists keep their parts.
    layout: rawlist::Layout,
    /// Loads in the current block that borrow the variable's reference (see
    /// `borrowed_loads`).
    borrowed: std::collections::HashSet<u32>,
    /// The value the instruction being compiled defines.
    current_dest: u32,
    /// Whether code is being emitted on the slow side of a fast path: blocks made there
    /// are laid out after the hot code.
    cold: bool,
    /// The local each `Load` reads, by the value it defines.
    loaded_from: HashMap<u32, u32>,
    /// For the hidden local holding the list a `for` loop walks: a variable with the
    /// list's element buffer when it is native, else 0. The local is assigned once per
    /// loop and holds its own reference, so nothing can append to that list in place
    /// (that needs the only reference) and the buffer stays put for the whole loop.
    buffers: HashMap<u32, Variable>,
    /// For each local appended to in place, the parts of its list (see `Appender`).
    appenders: HashMap<u32, Appender>,
}

/// The buffer, length and capacity of the list in a local that `xs = push(xs, x)`
/// appends to, as compiled code last saw them; all 0 (no room) when the list is not
/// native or not seen yet (a parameter), which sends the next append to the runtime.
/// They stay true while the local holds the same list: only an append through this
/// local can change a list it holds alone (anyone else's append finds the list shared
/// and copies it); every assignment to the local and every append the runtime makes
/// reads them again.
#[derive(Clone, Copy)]
struct Appender {
    items: Variable,
    len: Variable,
    cap: Variable,
}

fn span_of(inst_span: Option<SrcSpan>, f: &Function) -> Option<SrcSpan> {
    inst_span.or(Some(f.span))
}

impl<'a, 'b> FnCg<'a, 'b> {
    fn new(
        b: FunctionBuilder<'b>,
        module: &'a Module,
        f: &'a Function,
        keep: &'a mut Keep,
    ) -> Self {
        FnCg {
            b,
            module,
            f,
            keep,
            intrinsics: HashMap::new(),
            functions: Vec::new(),
            slow_paths: Vec::new(),
            env: ir::Value::from_u32(0),
            vars: Vec::new(),
            cross: HashMap::new(),
            values: HashMap::new(),
            blocks: Vec::new(),
            iterations: None,
            deeper: ir::Value::from_u32(0),
            layout: rawlist::layout(),
            borrowed: Default::default(),
            current_dest: u32::MAX,
            cold: false,
            loaded_from: HashMap::new(),
            buffers: HashMap::new(),
            appenders: HashMap::new(),
        }
    }

    /// Calls an intrinsic; one given the `Env` sees the iteration count as it is.
    fn call(&mut self, which: Intr, args: &[ir::Value]) -> Option<ir::Value> {
        let with_env = args.first() == Some(&self.env);
        if with_env {
            self.save_iterations();
        }
        let r = self.intrinsics[&(which as usize)];
        let inst = self.b.ins().call(r, args);
        let result = self.b.inst_results(inst).first().copied();
        if with_env {
            self.reload_iterations();
        }
        result
    }

    /// Calls the adapter of a slow path (see `SLOW_PATHS`) with the `Env` and up to
    /// three arguments, and returns what the intrinsic returned. Registers survive it.
    fn slow_call(&mut self, which: Intr, args: &[ir::Value]) -> ir::Value {
        let index = SLOW_PATHS
            .iter()
            .position(|w| *w as usize == which as usize)
            .expect("a slow path");
        let mut values = vec![self.env];
        values.extend_from_slice(args);
        while values.len() < 5 {
            values.push(self.env);
        }
        // These intrinsics neither read nor count iterations: the count stays where it is
        // (a value redefined here would have to be merged at every join).
        let r = self.slow_paths[index];
        self.b.ins().call(r, &values);
        self.load_env(OFFSET_OUT)
    }

    /// Tells the runtime the depth of a call it makes on this function's behalf (a tool
    /// the plan executor runs, a `parallel for` body).
    fn publish_depth(&mut self) {
        let max = self.load_env(OFFSET_MAX_DEPTH);
        let depth = self.b.ins().isub(max, self.deeper);
        self.store_env(depth, OFFSET_DEPTH);
    }

    /// Writes the count back: the register holds the iterations left, so the count is
    /// the budget minus it.
    fn save_iterations(&mut self) {
        if let Some(var) = self.iterations {
            let left = self.b.use_var(var);
            let max = self.load_env(OFFSET_MAX_ITERATIONS);
            let n = self.b.ins().isub(max, left);
            self.store_env(n, OFFSET_ITERATIONS);
        }
    }

    /// Reads the iterations left (none when the count has reached the budget: the
    /// iterations of a `parallel for` are added after they ran).
    fn reload_iterations(&mut self) {
        if let Some(var) = self.iterations {
            let n = self.load_env(OFFSET_ITERATIONS);
            let max = self.load_env(OFFSET_MAX_ITERATIONS);
            let left = self.b.ins().isub(max, n);
            let spent = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, n, max);
            let zero = self.iconst(0);
            let left = self.b.ins().select(spent, zero, left);
            self.b.def_var(var, left);
        }
    }

    /// Continues in a new block when `list` is a native list, and goes to `slow` when it
    /// is not (a list from the host, or none).
    fn when_native_list(&mut self, list: ir::Value, slow: ir::Block) {
        let native = self.b.create_block();
        let present = self.b.create_block();
        self.b.ins().brif(list, present, &[], slow, &[]);
        self.b.switch_to_block(present);
        let tag = self.b.ins().load(I64, MemFlags::trusted(), list, 0);
        let is_native = self
            .b
            .ins()
            .icmp_imm_s(IntCC::Equal, tag, self.layout.raw_tag);
        self.b.ins().brif(is_native, native, &[], slow, &[]);
        self.b.switch_to_block(native);
    }

    /// Continues in a new block when `condition` holds, and goes to `otherwise` if not.
    fn continue_if(&mut self, condition: ir::Value, otherwise: ir::Block) {
        let next = self.b.create_block();
        self.b.ins().brif(condition, next, &[], otherwise, &[]);
        self.b.switch_to_block(next);
    }

    fn list_field(&mut self, list: ir::Value, offset: i32) -> ir::Value {
        self.b.ins().load(I64, MemFlags::trusted(), list, offset)
    }

    /// The number of elements of a list: read in place from a native list.
    fn list_len(&mut self, list: ir::Value) -> ir::Value {
        let slow = self.b.create_block();
        let done = self.b.create_block();
        let result = self.b.declare_var(I64);
        self.when_native_list(list, slow);
        let len = self.list_field(list, self.layout.len);
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
    fn list_index(
        &mut self,
        list: ir::Value,
        index: ir::Value,
        elem: &Type,
        span: Option<SrcSpan>,
    ) -> ir::Value {
        let slow = self.b.create_block();
        self.when_native_list(list, slow);
        let len = self.list_field(list, self.layout.len);
        let in_range = self.b.ins().icmp(IntCC::UnsignedLessThan, index, len);
        self.continue_if(in_range, slow);
        let items = self.list_field(list, self.layout.ptr);
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
    fn walk_native(&mut self, local: u32, buffer: Variable, list: ir::Value, elem: &Type) {
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
        let items = self.list_field(list, self.layout.ptr);
        self.b.def_var(buffer, items);
    }

    /// Element `index` of a native list's buffer `items` (an owned reference for a heap
    /// element): the list a `for` loop walks keeps its buffer in a register.
    fn element_of_buffer(&mut self, items: ir::Value, index: ir::Value, elem: &Type) -> ir::Value {
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
    /// The buffer, length and capacity of the variable's list are kept in registers (see
    /// `Appender`), so a loop of appends does not read back the length it just stored.
    fn push_in_place(&mut self, local: u32, item: ir::Value, elem: &Type, span: Option<SrcSpan>) {
        let var = self.vars[local as usize];
        let list = self.b.use_var(var);
        let slow = self.b.create_block();
        let done = self.b.create_block();
        if let (Some(strong), Some(cache)) =
            (self.layout.strong, self.appenders.get(&local).copied())
        {
            // Room first: a list that is not native has no room here (see `Appender`),
            // and then the reference count is that of a native list.
            let len = self.b.use_var(cache.len);
            let cap = self.b.use_var(cache.cap);
            let room = self.b.ins().icmp(IntCC::UnsignedLessThan, len, cap);
            self.continue_if(room, slow);
            let count = self.list_field(list, strong);
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
                .store(MemFlags::trusted(), longer, list, self.layout.len);
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
    fn update_in_runtime(
        &mut self,
        local: u32,
        which: Intr,
        args: &[ir::Value],
        elem: &Type,
        span: Option<SrcSpan>,
    ) {
        let d = self.type_arg(elem.clone(), span);
        let mut values = vec![d];
        values.extend_from_slice(args);
        let new = self.slow_call(which, &values);
        self.b.def_var(self.vars[local as usize], new);
        self.cold = self.layout.strong.is_some();
        self.check_failed(span);
        self.cold = false;
        if let Some(cache) = self.appenders.get(&local).copied() {
            self.see_native_list(cache, new);
        }
    }

    /// `xs = set(xs, i, x)` on the variable of `local`: written in place when the list is
    /// native, held by the variable alone and `i` is in range; otherwise the runtime
    /// replaces (copying a shared list or one from the host) or reports the bad index.
    fn set_in_place(
        &mut self,
        local: u32,
        index: ir::Value,
        item: ir::Value,
        elem: &Type,
        span: Option<SrcSpan>,
    ) {
        let var = self.vars[local as usize];
        let list = self.b.use_var(var);
        let slow = self.b.create_block();
        let done = self.b.create_block();
        if let Some(strong) = self.layout.strong {
            self.when_native_list(list, slow);
            let count = self.list_field(list, strong);
            let unique = self.b.ins().icmp_imm_s(IntCC::Equal, count, 1);
            self.continue_if(unique, slow);
            let len = self.list_field(list, self.layout.len);
            let in_range = self.b.ins().icmp(IntCC::UnsignedLessThan, index, len);
            self.continue_if(in_range, slow);
            let items = self.list_field(list, self.layout.ptr);
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
        } else {
            self.b.ins().jump(slow, &[]);
        }
        self.b.switch_to_block(slow);
        self.update_in_runtime(local, Intr::Set, &[list, index, item], elem, span);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    fn see_native_list(&mut self, cache: Appender, list: ir::Value) {
        for (v, offset) in [
            (cache.items, self.layout.ptr),
            (cache.len, self.layout.len),
            (cache.cap, self.layout.cap),
        ] {
            let x = self.list_field(list, offset);
            self.b.def_var(v, x);
        }
    }

    /// The variable of `local` now holds `list`: its parts, if it is native, or no room.
    fn see_appender_list(&mut self, local: u32, list: ir::Value) {
        let Some(cache) = self.appenders.get(&local).copied() else {
            return;
        };
        let other = self.b.create_block();
        let done = self.b.create_block();
        let zero = self.iconst(0);
        for v in [cache.items, cache.len, cache.cap] {
            self.b.def_var(v, zero);
        }
        self.when_native_list(list, other);
        self.see_native_list(cache, list);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(other);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    fn iconst(&mut self, n: i64) -> ir::Value {
        self.b.ins().iconst(I64, n)
    }

    fn load_env(&mut self, offset: i32) -> ir::Value {
        self.b
            .ins()
            .load(I64, MemFlags::trusted(), self.env, offset)
    }

    fn store_env(&mut self, value: ir::Value, offset: i32) {
        self.b
            .ins()
            .store(MemFlags::trusted(), value, self.env, offset);
    }

    /// Branches to an error exit (after recording `frame` on the sap stack) when an
    /// error is pending.
    fn check_failed(&mut self, span: Option<SrcSpan>) {
        let failed = self.load_env(OFFSET_FAILED);
        self.unwind_if(failed, span);
    }

    /// Branches to an error exit when `failed` is nonzero (a sap callee's second result,
    /// or the `Env`'s flag).
    fn unwind_if(&mut self, failed: ir::Value, span: Option<SrcSpan>) {
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
    fn unwind(&mut self, span: Option<SrcSpan>) {
        let desc = keep_ptr!(
            self.keep.frames,
            FrameDesc {
                function: self.f.name.clone(),
                span: span_of(span, self.f)
            }
        );
        let d = self.iconst(desc);
        self.call(Intr::Unwind, &[self.env, d]);
        let zero = self.iconst(0);
        let failed = self.iconst(1);
        self.b.ins().return_(&[zero, failed]);
    }

    /// Fails with `kind` when `condition` is nonzero.
    fn fail_if(
        &mut self,
        condition: ir::Value,
        kind: FailKind,
        span: Option<SrcSpan>,
        a: ir::Value,
        b: ir::Value,
    ) {
        let fail = self.b.create_block();
        let ok = self.b.create_block();
        self.b.ins().brif(condition, fail, &[], ok, &[]);
        self.b.switch_to_block(fail);
        self.b.set_cold_block(fail);
        let desc = keep_ptr!(self.keep.fails, FailDesc { kind, span });
        let d = self.iconst(desc);
        self.call(Intr::Fail, &[self.env, d, a, b]);
        self.unwind(span);
        self.b.switch_to_block(ok);
    }

    /// Fails with `kind` here, ending the block.
    fn fail_now(&mut self, kind: FailKind, span: Option<SrcSpan>) {
        let desc = keep_ptr!(self.keep.fails, FailDesc { kind, span });
        let d = self.iconst(desc);
        let zero = self.iconst(0);
        self.call(Intr::Fail, &[self.env, d, zero, zero]);
        self.unwind(span);
    }

    fn value(&mut self, id: u32) -> ir::Value {
        match self.cross.get(&id) {
            Some(var) => self.b.use_var(*var),
            None => self
                .values
                .get(&id)
                .copied()
                .unwrap_or_else(|| self.b.ins().iconst(I64, 0)),
        }
    }

    fn define(&mut self, id: u32, ty: &Type, v: ir::Value) {
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

    fn array(&mut self, values: &[ir::Value]) -> ir::Value {
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

    fn body(&mut self) -> Result<(), String> {
        let f = self.f;
        // Which values are used outside their block.
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

        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.blocks = f.blocks.iter().map(|_| self.b.create_block()).collect();
        self.b.switch_to_block(entry);
        self.env = self.b.block_params(entry)[0];
        let depth_left = self.b.block_params(entry)[1];
        let params: Vec<ir::Value> = self.b.block_params(entry)[2..].to_vec();
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
        // The locals appended to in place, and the lists `for` loops walk: their parts
        // are kept in registers.
        for block in &f.blocks {
            for inst in &block.insts {
                match (&inst.op, &inst.dest) {
                    (Op::Load(local), Some((id, _))) => {
                        self.loaded_from.insert(*id, *local);
                    }
                    (Op::PushInPlace(local, _), _) if !self.appenders.contains_key(local) => {
                        let [items, len, cap] = [(); 3].map(|_| {
                            let v = self.b.declare_var(I64);
                            self.b.def_var(v, zero);
                            v
                        });
                        self.appenders.insert(*local, Appender { items, len, cap });
                    }
                    _ => {}
                }
            }
        }
        for block in &f.blocks {
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
        let has_loops = f
            .blocks
            .iter()
            .any(|b| matches!(b.term, Terminator::Loop(_)));
        if has_loops {
            self.iterations = Some(self.b.declare_var(I64));
            self.reload_iterations();
        }
        // Recursion depth: the caller passes how many more nested calls the budget
        // allows; none left is an error, and callees get one fewer. Nothing is loaded
        // or stored, so calls do not wait on memory.
        let too_deep = self.b.ins().icmp_imm_s(IntCC::Equal, depth_left, 0);
        self.fail_if(too_deep, FailKind::Depth, Some(f.span), zero, zero);
        self.deeper = self.b.ins().iadd_imm_s(depth_left, -1);
        let first = self.blocks[0];
        self.b.ins().jump(first, &[]);

        for (bi, block) in f.blocks.iter().enumerate() {
            self.b.switch_to_block(self.blocks[bi]);
            let mut temps: Vec<u32> = Vec::new();
            self.borrowed = borrowed_loads(block, &self.cross);
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
                Terminator::Jump(t) | Terminator::Loop(t) => {
                    self.release_temps(&temps);
                    if matches!(block.term, Terminator::Loop(_)) {
                        // Count the iteration against the budget: one fewer left.
                        let var = self.iterations.expect("a function with loops");
                        let left = self.b.use_var(var);
                        let none = self.b.ins().icmp_imm_s(IntCC::Equal, left, 0);
                        self.fail_if(none, FailKind::Iterations, Some(f.span), left, left);
                        let fewer = self.b.ins().iadd_imm_s(left, -1);
                        self.b.def_var(var, fewer);
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

    fn value_type(&self, id: u32) -> Option<&Type> {
        self.f
            .blocks
            .iter()
            .flat_map(|b| &b.insts)
            .find_map(|i| i.dest.as_ref().filter(|d| d.0 == id).map(|d| &d.1))
    }

    fn release_temps(&mut self, temps: &[u32]) {
        for id in temps {
            if let Some(v) = self.values.get(id).copied() {
                self.call(Intr::Release, &[v]);
            }
        }
    }

    fn type_arg(&mut self, ty: Type, span: Option<SrcSpan>) -> ir::Value {
        let p = keep_ptr!(self.keep.type_args, TypeArg { ty, span });
        self.iconst(p)
    }

    fn const_obj(&mut self, slot: Slot) -> ir::Value {
        let arc = Arc::new(slot);
        let ptr = Arc::as_ptr(&arc) as i64;
        self.keep.consts.push(arc);
        let v = self.iconst(ptr);
        self.call(Intr::Retain, &[v]);
        v
    }

    fn inst(
        &mut self,
        op: &Op,
        span: Option<SrcSpan>,
        ty: Option<&Type>,
    ) -> Result<Option<ir::Value>, String> {
        let ty = ty.cloned().unwrap_or(Type::Unit);
        Ok(Some(match op {
            Op::Const(c) => match c {
                Const::Unit => self.iconst(0),
                Const::Bool(b) => self.iconst(*b as i64),
                Const::Int(n) => self.iconst(*n),
                Const::Float(x) => self.iconst(x.to_bits() as i64),
                Const::Variant(_, i) => self.iconst(*i as i64),
                Const::Str(s) => self.const_obj(Slot::Val(Value::str(s))),
                Const::Tool { name, function } => {
                    self.const_obj(Slot::Val(Value::Tool(runtime::value::ToolRef {
                        name: Arc::from(name.as_str()),
                        function: *function,
                    })))
                }
            },
            Op::Load(l) => {
                let v = self.b.use_var(self.vars[*l as usize]);
                let id = self.current_dest;
                if self.f.locals[*l as usize].ty.is_heap() && !self.borrowed.contains(&id) {
                    self.call(Intr::Retain, &[v]);
                }
                v
            }
            Op::Store(l, x) => {
                let v = self.value(*x);
                let var = self.vars[*l as usize];
                if self.f.locals[*l as usize].ty.is_heap() {
                    self.call(Intr::Retain, &[v]);
                    let old = self.b.use_var(var);
                    self.call(Intr::Release, &[old]);
                }
                self.b.def_var(var, v);
                self.see_appender_list(*l, v);
                if let Some(buffer) = self.buffers.get(l).copied() {
                    let elem = element_type(&self.f.locals[*l as usize].ty);
                    self.walk_native(*l, buffer, v, &elem);
                }
                return Ok(None);
            }
            Op::Binary(op, t, a, b) => {
                let (a, b) = (self.value(*a), self.value(*b));
                self.binary(*op, t, a, b, span)
            }
            Op::Unary(UnOp::Not, _, a) => {
                let a = self.value(*a);
                let r = self.b.ins().icmp_imm_s(IntCC::Equal, a, 0);
                self.b.ins().uextend(I64, r)
            }
            Op::Unary(UnOp::Neg, t, a) => {
                let a = self.value(*a);
                match t {
                    Type::F64 => {
                        let x = self.b.ins().bitcast(types::F64, MemFlags::new(), a);
                        let n = self.b.ins().fneg(x);
                        self.b.ins().bitcast(I64, MemFlags::new(), n)
                    }
                    _ => {
                        let zero = self.iconst(0);
                        self.binary(BinOp::Sub, t, zero, a, span)
                    }
                }
            }
            Op::Call(callee, args) => {
                let mut values = vec![self.env, self.deeper];
                for a in args {
                    values.push(self.value(*a));
                }
                let r = self.functions[*callee as usize];
                self.save_iterations();
                let inst = self.b.ins().call(r, &values);
                let (result, failed) = (self.b.inst_results(inst)[0], self.b.inst_results(inst)[1]);
                self.reload_iterations();
                self.unwind_if(failed, span);
                result
            }
            Op::CallExtern(_, args) | Op::CallBuiltin(_, args) => {
                let builtin = match op {
                    Op::CallBuiltin(b, _) => Some(*b),
                    _ => None,
                };
                let arg_types: Vec<Type> = args
                    .iter()
                    .map(|a| self.value_type(*a).cloned().unwrap_or(Type::Unit))
                    .collect();
                let name = match op {
                    Op::CallExtern(n, _) => n.clone(),
                    _ => String::new(),
                };
                if builtin == Some(lower::ir::Builtin::Len)
                    && matches!(arg_types.first(), Some(Type::List(_)))
                {
                    let l = self.value(args[0]);
                    return Ok(Some(self.list_len(l)));
                }
                let desc = keep_ptr!(
                    self.keep.host_calls,
                    HostCallDesc {
                        builtin,
                        name,
                        args: arg_types,
                        ret: ty.clone(),
                        span
                    }
                );
                let values: Vec<ir::Value> = args.iter().map(|a| self.value(*a)).collect();
                let array = self.array(&values);
                let d = self.iconst(desc);
                self.publish_depth();
                let r = self
                    .call(Intr::CallHost, &[self.env, d, array])
                    .unwrap_or(d);
                self.check_failed(span);
                r
            }
            Op::PushInPlace(l, x) => {
                let elem = element_type(&self.f.locals[*l as usize].ty);
                let item = self.value(*x);
                self.push_in_place(*l, item, &elem, span);
                return Ok(None);
            }
            Op::Release(l) => {
                let var = self.vars[*l as usize];
                if self.f.locals[*l as usize].ty.is_heap() {
                    let v = self.b.use_var(var);
                    self.call(Intr::Release, &[v]);
                }
                let zero = self.iconst(0);
                self.b.def_var(var, zero);
                return Ok(None);
            }
            Op::SetInPlace(l, i, x) => {
                let elem = element_type(&self.f.locals[*l as usize].ty);
                let (index, item) = (self.value(*i), self.value(*x));
                self.set_in_place(*l, index, item, &elem, span);
                return Ok(None);
            }
            Op::List(items) => {
                let elem = element_type(&ty);
                let values: Vec<ir::Value> = items.iter().map(|i| self.value(*i)).collect();
                let array = self.array(&values);
                let d = self.type_arg(elem, span);
                let n = self.iconst(values.len() as i64);
                let r = self.call(Intr::List, &[self.env, d, array, n]).unwrap_or(n);
                self.check_failed(span);
                r
            }
            Op::Struct(t, fields) => {
                let field_types: Vec<Type> = fields
                    .iter()
                    .map(|v| self.value_type(*v).cloned().unwrap_or(Type::Unit))
                    .collect();
                let desc = keep_ptr!(
                    self.keep.structs,
                    StructDesc {
                        type_id: *t,
                        fields: field_types
                    }
                );
                let values: Vec<ir::Value> = fields.iter().map(|v| self.value(*v)).collect();
                let array = self.array(&values);
                let d = self.iconst(desc);
                let r = self.call(Intr::Struct, &[self.env, d, array]).unwrap_or(d);
                self.check_failed(span);
                r
            }
            Op::Field(s, i) => {
                let s = self.value(*s);
                let d = self.type_arg(ty.clone(), span);
                let i = self.iconst(*i as i64);
                let r = self.call(Intr::Field, &[self.env, d, s, i]).unwrap_or(i);
                self.check_failed(span);
                r
            }
            Op::Index(l, i) => {
                let (l, i) = (self.value(*l), self.value(*i));
                self.list_index(l, i, &ty, span)
            }
            Op::Element(l, i) => {
                let buffer = self
                    .loaded_from
                    .get(l)
                    .and_then(|local| self.buffers.get(local))
                    .map(|var| self.b.use_var(*var));
                let (l, i) = (self.value(*l), self.value(*i));
                match buffer {
                    Some(items) => self.element_of_buffer(items, i, &ty),
                    // Lowering always loads the hidden local right before; indexing
                    // with its checks is the same read.
                    None => self.list_index(l, i, &ty, span),
                }
            }
            Op::ContextNew => self.call(Intr::CtxNew, &[]).expect("returns"),
            Op::ContextChild(c) => {
                let c = self.value(*c);
                self.call(Intr::CtxChild, &[c]).expect("returns")
            }
            Op::Instruct(c, text) => {
                let c = self.value(*c);
                let t = self.const_obj(Slot::Val(Value::str(text)));
                self.call(Intr::Instruct, &[c, t]);
                self.call(Intr::Release, &[t]);
                return Ok(None);
            }
            Op::Inject {
                ctx,
                value,
                function,
                label,
            } => {
                let value_ty = self.value_type(*value).cloned().unwrap_or(Type::Unit);
                let desc = keep_ptr!(
                    self.keep.injects,
                    InjectDesc {
                        ty: value_ty,
                        function: function.clone(),
                        label: label.clone()
                    }
                );
                let (c, v) = (self.value(*ctx), self.value(*value));
                let d = self.iconst(desc);
                self.call(Intr::Inject, &[self.env, d, c, v]);
                self.check_failed(span);
                return Ok(None);
            }
            Op::Produce { site, ctx, .. }
            | Op::Decide { site, ctx }
            | Op::Fill { site, ctx }
            | Op::Choose { site, ctx } => {
                let kind = match op {
                    Op::Produce { .. } => LlmKind::Produce(ty.clone()),
                    Op::Decide { .. } => LlmKind::Decide,
                    Op::Fill { .. } => LlmKind::Fill,
                    _ => LlmKind::Choose,
                };
                let desc = keep_ptr!(self.keep.llms, LlmDesc { kind, site: *site });
                let c = self.value(*ctx);
                let d = self.iconst(desc);
                // The schema a `Json` result must match, or 0.
                let extra = match op {
                    Op::Produce {
                        schema: Some(s), ..
                    } => self.value(*s),
                    _ => self.iconst(0),
                };
                let r = self.call(Intr::Llm, &[self.env, d, c, extra]).unwrap_or(d);
                self.check_failed(span);
                r
            }
            Op::Arg(p, i) => {
                let p = self.value(*p);
                let d = self.type_arg(ty.clone(), span);
                let i = self.iconst(*i as i64);
                self.call(Intr::Arg, &[d, p, i]).expect("returns")
            }
            Op::Arm(p) => {
                let p = self.value(*p);
                self.call(Intr::Arm, &[p]).expect("returns")
            }
            Op::ParallelFor {
                list,
                body,
                captures,
            } => {
                let body_f = &self.module.functions[*body as usize];
                let capture_types: Vec<Type> = captures
                    .iter()
                    .map(|c| self.value_type(*c).cloned().unwrap_or(Type::Unit))
                    .collect();
                let elem = body_f.params.last().map_or(Type::Unit, |p| p.ty.clone());
                let desc = keep_ptr!(
                    self.keep.parallels,
                    ParallelDesc {
                        body: *body,
                        captures: capture_types,
                        elem,
                        result: body_f.ret.clone(),
                        span
                    }
                );
                let values: Vec<ir::Value> = captures.iter().map(|c| self.value(*c)).collect();
                let array = self.array(&values);
                let l = self.value(*list);
                let d = self.iconst(desc);
                self.publish_depth();
                let r = self
                    .call(Intr::Parallel, &[self.env, d, l, array])
                    .unwrap_or(d);
                self.check_failed(span);
                r
            }
        }))
    }

    fn binary(
        &mut self,
        op: BinOp,
        ty: &Type,
        a: ir::Value,
        b: ir::Value,
        span: Option<SrcSpan>,
    ) -> ir::Value {
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
                let desc = keep_ptr!(self.keep.binaries, BinaryDesc { op, ty: ty.clone() });
                let d = self.iconst(desc);
                let r = self.call(Intr::Binary, &[self.env, d, a, b]).unwrap_or(d);
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
                self.fail_if(overflow, kind(), span, a, b);
                if *ty == Type::I32 {
                    self.check_i32(r, kind(), span, a, b);
                }
                r
            }
        }
    }

    /// The value of `v` when it is a constant.
    fn constant(&self, v: ir::Value) -> Option<i64> {
        let ir::ValueDef::Result(inst, _) = self.b.func.dfg.value_def(v) else {
            return None;
        };
        match self.b.func.dfg.insts[inst] {
            ir::InstructionData::UnaryImm {
                opcode: ir::Opcode::Iconst,
                imm,
            } => Some(imm.bits()),
            _ => None,
        }
    }

    /// `a + c` or `a - c` for a constant `c`, and whether it overflows an `i64`.
    fn add_constant(&mut self, op: BinOp, a: ir::Value, c: i64) -> (ir::Value, ir::Value) {
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
    fn check_i32(
        &mut self,
        r: ir::Value,
        kind: FailKind,
        span: Option<SrcSpan>,
        a: ir::Value,
        b: ir::Value,
    ) {
        let narrow = self.b.ins().ireduce(types::I32, r);
        let wide = self.b.ins().sextend(I64, narrow);
        let differs = self.b.ins().icmp(IntCC::NotEqual, wide, r);
        self.fail_if(differs, kind, span, a, b);
    }
}

/// The element type of a list type.
fn element_type(list: &Type) -> Type {
    match list {
        Type::List(e) => (**e).clone(),
        _ => Type::Unit,
    }
}

/// Loads of heap variables that need no reference of their own: the value is used only
/// in this block, and the variable is not assigned before its last use, so the variable's
/// reference keeps the object alive. This saves an atomic increment and decrement per use
/// (a loop reading a list element by element).
fn borrowed_loads(
    block: &lower::ir::Block,
    cross: &HashMap<u32, Variable>,
) -> std::collections::HashSet<u32> {
    let mut borrowed = std::collections::HashSet::new();
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

/// The JIT as seen by builtins that call sap functions (the `aot` executor): each call
/// runs on its own `Env`, under the caller's depth and remaining iteration budget.
pub(crate) struct JitEngine<'a> {
    pub program: &'a JitProgram,
    pub host: &'a Host,
    pub depth: u64,
    pub max_iterations: u64,
}

impl Engine for JitEngine<'_> {
    fn call_function(&self, f: FuncId, args: Vec<Value>) -> Result<Value, ExecError> {
        let func = &self.program.ir.functions[f as usize];
        let mut values = args.into_iter();
        let raw: Vec<i64> = func
            .params
            .iter()
            .map(|p| match &p.ty {
                Type::Context => new_obj(Slot::Ctx(Context::new())),
                t => from_value(t, values.next().unwrap_or(Value::Unit)),
            })
            .collect();
        let mut env = Env::new(self.host, self.program);
        env.depth = self.depth;
        env.max_iterations = self.max_iterations;
        // SAFETY: the trampoline reads one argument per parameter, which `raw` holds.
        let out = unsafe { self.program.trampoline(f)(&mut env, raw.as_ptr()) };
        for (p, a) in func.params.iter().zip(raw) {
            if p.ty.is_heap() {
                sap_release(a);
            }
        }
        if env.failed != 0 {
            return Err(env
                .error
                .take()
                .unwrap_or_else(|| ExecError::new("a tool failed", Some(func.span))));
        }
        let value = to_value(self.host, &func.ret, out);
        if func.ret.is_heap() {
            sap_release(out);
        }
        Ok(value)
    }
}

struct SendPtr(*const u8);
// SAFETY: code pointers are immutable and valid for the program's lifetime.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    fn get(&self) -> *const u8 {
        self.0
    }
}

impl JitProgram {
    fn trampoline(&self, f: FuncId) -> Trampoline {
        // SAFETY: every trampoline was compiled with this signature.
        unsafe { std::mem::transmute::<*const u8, Trampoline>(self.trampolines[f as usize]) }
    }

    /// Runs `main` (call it on a thread with a big stack: see `on_big_stack`).
    pub fn run_main(&self, host: &Host) -> Result<Value, ExecError> {
        let main = self
            .ir
            .main
            .ok_or_else(|| ExecError::new("the program has no `main` function", None))?;
        let f = &self.ir.functions[main as usize];
        let args: Vec<i64> = f
            .params
            .iter()
            .map(|p| {
                if p.ty == Type::Context {
                    new_obj(Slot::Ctx(Context::new()))
                } else {
                    0
                }
            })
            .collect();
        let mut env = Env::new(host, self);
        // SAFETY: the trampoline reads `args.len()` arguments, which `f` has.
        let raw = unsafe { self.trampoline(main)(&mut env, args.as_ptr()) };
        for a in args {
            sap_release(a);
        }
        if env.failed != 0 {
            return Err(env
                .error
                .take()
                .unwrap_or_else(|| ExecError::new("the program failed", None)));
        }
        let value = to_value(host, &f.ret, raw);
        if f.ret.is_heap() {
            sap_release(raw);
        }
        Ok(value)
    }

    pub(crate) fn run_parallel(
        &self,
        host: &Host,
        env: &mut Env,
        desc: &ParallelDesc,
        captured: &[i64],
        items: &[Value],
    ) -> Result<Vec<Value>, ExecError> {
        let body = SendPtr(self.trampolines[desc.body as usize]);
        let depth = env.depth;
        let remaining = env.max_iterations.saturating_sub(env.iterations);
        let used = std::sync::atomic::AtomicU64::new(0);
        let results = runtime::window::sliding_window(
            items.len(),
            host.limits.concurrency,
            |i| {
                let mut child = Env::new(host, self);
                child.depth = depth;
                child.max_iterations = remaining;
                let mut args = captured.to_vec();
                args.push(from_value(&desc.elem, items[i].clone()));
                // SAFETY: the body's trampoline takes the captures, then the element.
                let tramp = unsafe { std::mem::transmute::<*const u8, Trampoline>(body.get()) };
                let raw = unsafe { tramp(&mut child, args.as_ptr()) };
                if desc.elem.is_heap() {
                    sap_release(*args.last().expect("the element"));
                }
                used.fetch_add(child.iterations, std::sync::atomic::Ordering::Relaxed);
                if child.failed != 0 {
                    Err(child.error.take().unwrap_or_else(|| {
                        ExecError::new("a parallel iteration failed", desc.span)
                    }))
                } else {
                    let v = to_value(host, &desc.result, raw);
                    if desc.result.is_heap() {
                        sap_release(raw);
                    }
                    Ok(v)
                }
            },
            Result::is_err,
        );
        env.iterations = env.iterations.saturating_add(used.into_inner());
        crate::eval::collect_iterations(results)
    }
}

/// Keeps the intrinsic table's order in sync with `Intr`.
#[cfg(test)]
mod tests {
    #[test]
    fn intrinsic_table_matches_the_enum() {
        for (i, (which, _, _, _)) in super::INTRINSICS.iter().enumerate() {
            assert_eq!(*which as usize, i);
        }
    }
}
