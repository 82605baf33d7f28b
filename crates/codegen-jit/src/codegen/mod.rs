//! The code generator: every IR function becomes a native function `fn(depth_left,
//! params…) -> (result, failed)` with the `Env` in the pinned register (see `abi.rs`),
//! plus a trampoline to call it from Rust and the adapters of the slow paths. Arithmetic (with overflow and division checks),
//! comparisons, control flow, calls between sap functions, recursion and the common
//! list operations are native code; everything else calls the intrinsics.
//!
//! [`compile`] makes a [`NativeProgram`]: each function's machine code and relocations,
//! the pins the code points at (`abi::Pin`) and its error sites (`abi::Site`), as plain
//! data. Nothing here knows where the code will live: `link.rs` lays it out in one
//! piece, and `jit.rs` puts that in executable memory, either right away (`sapc run`)
//! or after `native_module.rs` wrote it to the build cache and mapped it back (`sapc
//! build`, then `sapc run`). Only the functions `main` can reach are compiled,
//! and they are compiled in parallel, one Cranelift context per thread.
//!
//! - `function.rs`: [`FnCg`](function::FnCg), one function's blocks and values;
//! - `instructions.rs`: what each IR instruction becomes;
//! - `calls.rs`: calls out of compiled code, budgets and error exits;
//! - `counted.rs`: the loops whose iteration budget is paid on the way in;
//! - `arith.rs`: arithmetic and comparisons;
//! - `lists.rs`: native list operations and their register caches;
//! - `ownership.rs`: reference counts in compiled code, and the loads that need none;
//! - `ranges.rs`: the overflow checks a dominating branch makes unnecessary.

mod arith;
mod calls;
mod counted;
mod function;
mod inline;
mod instructions;
mod lists;
mod ownership;
mod ranges;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    self as clif, AbiParam, InstBuilder, MemFlagsData as MemFlags, Signature, UserFuncName, types,
};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa, TargetIsa};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, ModuleReloc};

use crate::abi::{OFFSET_DEPTH, OFFSET_INTRINSICS, OFFSET_MAX_DEPTH, OFFSET_OUT, Pin, Site, Word};
use crate::intrinsics::Intr;
use function::{Callable, Callees, FnCg, import};

const I64: clif::Type = types::I64;

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

/// A program compiled to machine code, not yet anywhere in memory.
pub struct NativeProgram {
    /// The target the code was compiled for ([`target_id`]).
    pub target: String,
    /// Every defined function: its declaration (see [`declarations`]) and its code.
    pub functions: Vec<CompiledFunction>,
    /// What the code points at, by pin index.
    pub pins: Vec<Pin>,
    /// Where the code can fail, by site index.
    pub sites: Vec<Site>,
}

impl NativeProgram {
    /// The most stack one call of any of its functions takes.
    pub fn frame_bytes(&self) -> usize {
        self.functions
            .iter()
            .map(|f| f.frame as usize)
            .max()
            .unwrap_or(16)
    }
}

/// The pins and sites of a program being compiled: each distinct one once, however
/// many places point at it (an inlined function's checks and frames repeat in every
/// copy).
#[derive(Default)]
pub(super) struct PinTable {
    pins: Interned<Pin>,
    sites: Interned<Site>,
}

struct Interned<T> {
    list: Vec<T>,
    index: std::collections::HashMap<T, usize>,
}

impl<T> Default for Interned<T> {
    fn default() -> Self {
        Interned {
            list: Vec::new(),
            index: std::collections::HashMap::new(),
        }
    }
}

impl<T: Clone + Eq + std::hash::Hash> Interned<T> {
    /// The index of `item`, added if new.
    fn intern(&mut self, item: T) -> usize {
        let next = self.list.len();
        *self.index.entry(item).or_insert_with_key(|item| {
            self.list.push(item.clone());
            next
        })
    }
}

/// One function's machine code and the places in it to patch when it is loaded.
pub struct CompiledFunction {
    /// Its index in [`declarations`].
    pub decl: u32,
    pub alignment: u64,
    /// The most stack a call of it takes: its frame, saved registers and return
    /// address (deep recursion is stopped before it fills the stack).
    pub frame: u32,
    pub code: Vec<u8>,
    /// Targets are `User { namespace: 0 }` for a declared function, `User { namespace: 1
    /// }` for a pin, a libcall, or an offset in the function itself.
    pub relocs: Vec<ModuleReloc>,
}

/// A function the code may call or define, in the order of [`declarations`].
pub struct Declaration {
    pub linkage: Linkage,
    pub signature: Signature,
}

/// Where each kind of function starts in [`declarations`]: the intrinsics (imported),
/// then the adapters of `SLOW_PATHS`, then every IR function, then each one's
/// trampoline.
pub struct Layout {
    pub slow_paths: usize,
    pub functions: usize,
    pub trampolines: usize,
    /// Each function's plain twin: compiled without inlining, for a function with
    /// inlined copies, which passes a call near the depth limit to it.
    pub plains: usize,
    /// How many functions are declared in all.
    pub declared: usize,
}

impl Layout {
    pub fn new(function_count: usize) -> Layout {
        let slow_paths = Intr::ALL.len();
        let functions = slow_paths + SLOW_PATHS.len();
        let trampolines = functions + function_count;
        let plains = trampolines + function_count;
        Layout {
            slow_paths,
            functions,
            trampolines,
            plains,
            declared: plains + function_count,
        }
    }
}

/// The host's ISA, as both `compile` and the loader use it: detected once per process.
pub fn host_isa() -> Result<OwnedTargetIsa, String> {
    static ISA: std::sync::OnceLock<Result<OwnedTargetIsa, String>> = std::sync::OnceLock::new();
    ISA.get_or_init(detect_host_isa).clone()
}

fn detect_host_isa() -> Result<OwnedTargetIsa, String> {
    use cranelift_codegen::settings::{self, Configurable};
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").map_err(|e| e.to_string())?;
    flags.set("is_pic", "false").map_err(|e| e.to_string())?;
    // The `Env` lives in a register of its own (r15 on x86-64) for the whole of compiled
    // code: no call passes it, no function keeps it in a callee-saved register.
    flags
        .set("enable_pinned_reg", "true")
        .map_err(|e| e.to_string())?;
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
    cranelift_native::builder()
        .map_err(|e| format!("this machine is not supported by Cranelift: {e}"))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| e.to_string())
}

/// What code compiled for `isa` needs of the machine that runs it: the target triple
/// and every ISA flag (the CPU features `cranelift_native` detected among them).
pub fn target_id(isa: &dyn TargetIsa) -> String {
    let flags: Vec<String> = isa.isa_flags().iter().map(|v| v.to_string()).collect();
    format!("{} {}", isa.triple(), flags.join(","))
}

/// Every function of a program of `ir`'s shape, in a fixed order ([`Layout`]): a
/// declaration's index is its `FuncId`, and its entry's index in the laid-out code
/// (`link::Laid::entries`).
pub fn declarations(isa: &dyn TargetIsa, ir: &ir::Module) -> Vec<Declaration> {
    let call_conv = isa.default_call_conv();
    let words = |params: usize, returns: usize| {
        let mut sig = Signature::new(call_conv);
        sig.params.extend((0..params).map(|_| AbiParam::new(I64)));
        sig.returns.extend((0..returns).map(|_| AbiParam::new(I64)));
        sig
    };
    let mut out = Vec::new();
    for which in Intr::ALL {
        let mut sig = Signature::new(call_conv);
        let word = |w: &Word| {
            AbiParam::new(match w {
                Word::Int => I64,
                Word::Float => types::F64,
            })
        };
        sig.params.extend(which.params().iter().map(word));
        sig.returns.extend(which.result().as_ref().map(word));
        out.push(Declaration {
            linkage: Linkage::Import,
            signature: sig,
        });
    }
    for _ in SLOW_PATHS {
        let mut sig = words(5, 0);
        sig.call_conv = CallConv::PreserveAll;
        out.push(Declaration {
            linkage: Linkage::Local,
            signature: sig,
        });
    }
    // `fn(depth_left, params…) -> (result, failed)`, the `Env` in the pinned register.
    for f in &ir.functions {
        out.push(Declaration {
            linkage: Linkage::Local,
            signature: words(1 + f.params.len(), 2),
        });
    }
    // `fn(env, args: *const i64) -> result`.
    for _ in &ir.functions {
        out.push(Declaration {
            linkage: Linkage::Local,
            signature: words(2, 1),
        });
    }
    // The plain twins, with the functions' own signatures.
    for f in &ir.functions {
        out.push(Declaration {
            linkage: Linkage::Local,
            signature: words(1 + f.params.len(), 2),
        });
    }
    out
}

/// Compiles the functions of `ir` that `main` can reach (and their trampolines) for
/// `isa`.
pub fn compile(isa: &dyn TargetIsa, ir: &ir::Module) -> Result<NativeProgram, String> {
    let decls = declarations(isa, ir);
    let layout = Layout::new(ir.functions.len());
    let callables: Vec<Callable> = decls
        .iter()
        .enumerate()
        .map(|(i, d)| Callable {
            id: FuncId::from_u32(i as u32),
            signature: d.signature.clone(),
            colocated: d.linkage != Linkage::Import,
        })
        .collect();
    let intrinsics = &callables[..layout.slow_paths];
    let slow_paths = &callables[layout.slow_paths..layout.functions];
    let functions = &callables[layout.functions..layout.trampolines];
    let plains = &callables[layout.plains..layout.declared];
    let frontend = isa.frontend_config();

    // Cranelift functions are built here, one after another (they share the pins), and
    // compiled below, in parallel.
    let mut built: Vec<(u32, clif::Function, String)> = Vec::new();
    for (i, which) in SLOW_PATHS.iter().enumerate() {
        let decl = (layout.slow_paths + i) as u32;
        let func = slow_path(
            &callables[decl as usize],
            &intrinsics[*which as usize],
            *which,
            frontend,
        );
        built.push((decl, func, format!("slow path {i}")));
    }
    let mut pins = PinTable::default();
    let mut fctx = FunctionBuilderContext::new();
    let reachable = ir.reachable();
    for (i, f) in ir.functions.iter().enumerate() {
        if !reachable[i] {
            continue;
        }
        let inlined = inline::inline(ir, f);
        // A function with inlined copies passes a call made near the depth limit to
        // its plain twin, so that its copies need no depth checks of their own.
        let deepest = inlined.scopes.iter().map(|s| s.level).max();
        let plain = deepest.map(|_| inline::Inlined::plain(f));
        let mut versions = vec![(0, layout.functions + i, &inlined, deepest)];
        if let Some(plain) = &plain {
            versions.push((1, layout.plains + i, plain, None));
        }
        for (namespace, decl, version, deepest) in versions {
            let mut func = clif::Function::with_name_signature(
                UserFuncName::user(namespace, i as u32),
                functions[i].signature.clone(),
            );
            let b = FunctionBuilder::new(&mut func, &mut fctx);
            let callees = Callees::new(intrinsics, functions, slow_paths, plains);
            let mut cg = FnCg::new(b, ir, &mut pins, callees, version);
            cg.twin = deepest.map(|level| (level, i as u32));
            cg.body()
                .map_err(|e| format!("cannot compile `{}`: {e}", f.name))?;
            cg.b.finalize(frontend);
            let name = match namespace {
                0 => f.name.clone(),
                _ => format!("the plain twin of `{}`", f.name),
            };
            built.push((decl as u32, func, name));
        }
        let decl = (layout.trampolines + i) as u32;
        let func = trampoline(
            &callables[decl as usize],
            &functions[i],
            f.params.len(),
            &mut fctx,
            frontend,
        );
        built.push((decl, func, format!("the trampoline of `{}`", f.name)));
    }

    let compiled = compile_all(isa, built)?;
    Ok(NativeProgram {
        target: target_id(isa),
        functions: compiled,
        pins: pins.pins.list,
        sites: pins.sites.list,
    })
}

/// Compiles the built functions on every core: each thread takes the next function
/// until none is left. The result keeps the input's order.
fn compile_all(
    isa: &dyn TargetIsa,
    built: Vec<(u32, clif::Function, String)>,
) -> Result<Vec<CompiledFunction>, String> {
    // A thread for every 32 functions, up to one per core; a small program (most) is
    // compiled on this thread without asking how many cores there are (which reads
    // cgroup files on Linux: a millisecond).
    let wanted = built.len().div_ceil(32);
    let threads = if wanted > 1 {
        std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(wanted)
    } else {
        1
    };
    let next = AtomicUsize::new(0);
    // The largest functions first: a program's one big function (a `main` that calls
    // two thousand others) compiled last would leave the other cores idle meanwhile.
    let mut order: Vec<usize> = (0..built.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(built[i].1.dfg.num_insts()));
    let work: Vec<Mutex<Option<(u32, clif::Function, String)>>> =
        built.into_iter().map(|b| Mutex::new(Some(b))).collect();
    let results: Vec<Mutex<Option<Result<CompiledFunction, String>>>> =
        (0..work.len()).map(|_| Mutex::new(None)).collect();
    let run = || {
        let mut ctx = cranelift_codegen::Context::new();
        let mut ctrl = ControlPlane::default();
        while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
            let slot = &work[i];
            let Some((decl, func, what)) = slot.lock().unwrap_or_else(|e| e.into_inner()).take()
            else {
                continue;
            };
            let result = compile_one(isa, &mut ctx, &mut ctrl, decl, func, &what);
            *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
        }
    };
    if threads == 1 {
        run();
    } else {
        std::thread::scope(|scope| {
            for _ in 1..threads {
                scope.spawn(run);
            }
            run();
        });
    }
    results
        .into_iter()
        .map(|r| {
            r.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| Err("a function was not compiled".to_owned()))
        })
        .collect()
}

fn compile_one(
    isa: &dyn TargetIsa,
    ctx: &mut cranelift_codegen::Context,
    ctrl: &mut ControlPlane,
    decl: u32,
    func: clif::Function,
    what: &str,
) -> Result<CompiledFunction, String> {
    ctx.clear();
    ctx.func = func;
    let dump = std::env::var_os("SAP_JIT_DUMP");
    ctx.set_disasm(dump.is_some());
    let alignment = ctx
        .compile(isa, ctrl)
        .map_err(|e| format!("cannot compile {what}: {:?}", e.inner))?
        .buffer
        .alignment as u64;
    let compiled = ctx.compiled_code().expect("compiled just now");
    let relocs = compiled
        .buffer
        .relocs()
        .iter()
        .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, FuncId::from_u32(decl)))
        .collect();
    let code = compiled.code_buffer().to_vec();
    // For people working on the code generator: `SAP_JIT_DUMP=dir` writes each
    // function's machine code to `dir/<name>.bin` (`objdump -D -b binary -m i386:x86-64`),
    // its CLIF after Cranelift's optimizations to `<name>.clif`, and the allocated
    // instructions, with the register allocator's moves, to `<name>.vcode`.
    if let Some(dir) = dump {
        let dir = std::path::Path::new(&dir);
        let _ = std::fs::write(dir.join(format!("{what}.bin")), &code);
        let _ = std::fs::write(
            dir.join(format!("{what}.clif")),
            ctx.func.display().to_string(),
        );
        if let Some(vcode) = &compiled.vcode {
            let _ = std::fs::write(dir.join(format!("{what}.vcode")), vcode);
        }
    }
    // The return address and the saved frame pointer, then what the prologue reserves.
    let frame = 16
        + compiled
            .buffer
            .frame_layout()
            .map_or(0, |l| l.frame_to_fp_offset);
    Ok(CompiledFunction {
        decl,
        alignment,
        frame,
        code,
        relocs,
    })
}

/// The trampoline of a function of `arity` parameters: unpack the argument array, call,
/// return.
fn trampoline(
    this: &Callable,
    function: &Callable,
    arity: usize,
    fctx: &mut FunctionBuilderContext,
    frontend: cranelift_codegen::isa::TargetFrontendConfig,
) -> clif::Function {
    let mut func = clif::Function::with_name_signature(
        UserFuncName::user(1, this.id.as_u32()),
        this.signature.clone(),
    );
    let mut b = FunctionBuilder::new(&mut func, fctx);
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
    let mut call_args = vec![left];
    for k in 0..arity {
        call_args.push(b.ins().load(I64, MemFlags::trusted(), args, (k * 8) as i32));
    }
    // The caller's pinned register is its own (Rust code keeps r15 for itself; compiled
    // code calling back into the host has its `Env` there): set it for the call, and
    // give it back.
    let outer = b.ins().get_pinned_reg(I64);
    b.ins().set_pinned_reg(env);
    let callee = import(b.func, function);
    let call = b.ins().call(callee, &call_args);
    let result = b.inst_results(call)[0];
    b.ins().set_pinned_reg(outer);
    b.ins().return_(&[result]);
    b.seal_all_blocks();
    b.finalize(frontend);
    func
}

/// The address of intrinsic `which`, read from the table `env` points at
/// (`Env::intrinsics`): compiled code names no address, so it runs wherever it is
/// mapped, with nothing to patch.
fn intrinsic_address(b: &mut FunctionBuilder<'_>, env: clif::Value, which: Intr) -> clif::Value {
    let flags = MemFlags::trusted().with_readonly();
    let table = b.ins().load(I64, flags, env, OFFSET_INTRINSICS);
    b.ins().load(I64, flags, table, (which as i32) * 8)
}

/// The slow paths of inline list operations go through adapters that preserve every
/// register: the values a loop keeps in registers stay there across them, instead of
/// living in callee-saved registers or on the stack for the sake of a rare call.
fn slow_path(
    this: &Callable,
    intrinsic: &Callable,
    which: Intr,
    frontend: cranelift_codegen::isa::TargetFrontendConfig,
) -> clif::Function {
    let mut func = clif::Function::with_name_signature(
        UserFuncName::user(2, this.id.as_u32()),
        this.signature.clone(),
    );
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut func, &mut fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let arity = which.params().len();
    let signature = b.func.import_signature(intrinsic.signature.clone());
    let address = intrinsic_address(&mut b, params[0], which);
    // `Env` and a descriptor first, or (`ListLen`) just the list after the `Env`.
    let args = if arity >= 3 {
        &params[..arity]
    } else {
        &params[1..=arity]
    };
    let call = b.ins().call_indirect(signature, address, args);
    let result = b.inst_results(call)[0];
    b.ins()
        .store(MemFlags::trusted(), result, params[0], OFFSET_OUT);
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(frontend);
    func
}
