//! The code generator: every IR function becomes a native function `fn(env, depth_left,
//! params…) -> (result, failed)` (see `abi.rs`), plus a trampoline to call it from Rust
//! and the adapters of the slow paths. Arithmetic (with overflow and division checks),
//! comparisons, control flow, calls between sap functions, recursion and the common
//! list operations are native code; everything else calls the intrinsics.
//!
//! [`define_program`] works on any `cranelift_module::Module`: the JIT (`jit.rs`) gives
//! it a `JITModule` and then finalizes and runs the code; nothing here knows where the
//! code will live.
//!
//! - `function.rs`: [`FnCg`](function::FnCg), one function's blocks and values;
//! - `instructions.rs`: what each IR instruction becomes;
//! - `calls.rs`: calls out of compiled code, budgets and error exits;
//! - `arith.rs`: arithmetic and comparisons;
//! - `lists.rs`: native list operations and their register caches;
//! - `ownership.rs`: reference counts in compiled code, and the loads that need none.

mod arith;
mod calls;
mod function;
mod instructions;
mod lists;
mod ownership;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    self as clif, AbiParam, InstBuilder, MemFlagsData as MemFlags, Signature, UserFuncName, types,
};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module};

use crate::abi::{
    BinaryDesc, FailDesc, FrameDesc, HostCallDesc, InjectDesc, LlmDesc, OFFSET_DEPTH,
    OFFSET_MAX_DEPTH, OFFSET_OUT, ParallelDesc, StructDesc, TypeArg, Word,
};
use crate::heap::ObjRef;
use crate::intrinsics::Intr;
use function::{Callable, Callees, FnCg};

const I64: clif::Type = types::I64;

/// Owns everything compiled code points at: the descriptors and the constants.
/// Descriptors are boxed so their addresses, baked into the code, stay put as the vectors
/// grow.
#[derive(Default)]
#[allow(clippy::vec_box)]
pub struct Keep {
    fails: Vec<Box<FailDesc>>,
    frames: Vec<Box<FrameDesc>>,
    host_calls: Vec<Box<HostCallDesc>>,
    type_args: Vec<Box<TypeArg>>,
    binaries: Vec<Box<BinaryDesc>>,
    structs: Vec<Box<StructDesc>>,
    injects: Vec<Box<InjectDesc>>,
    llms: Vec<Box<LlmDesc>>,
    parallels: Vec<Box<ParallelDesc>>,
    /// Constant strings and tools, one count each held here.
    consts: Vec<ObjRef>,
}

/// Keeps a descriptor in `Keep` and gives its address, to bake into the code.
macro_rules! keep_ptr {
    ($vec:expr, $value:expr) => {{
        let boxed = Box::new($value);
        let ptr = &*boxed as *const _ as i64;
        $vec.push(boxed);
        ptr
    }};
}
use keep_ptr;

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

/// What [`define_program`] leaves besides the code in the module.
pub struct Program {
    /// What the code points at; it must live as long as the code.
    pub keep: Keep,
    /// The trampoline `fn(env, args: *const i64) -> result` of every IR function.
    pub trampolines: Vec<FuncId>,
}

/// Declares and defines every function of `ir` in `m`, importing the intrinsics by
/// their symbols.
pub fn define_program<M: Module>(m: &mut M, ir: &ir::Module) -> Result<Program, String> {
    let mut intrinsic_ids = Vec::new();
    for which in Intr::ALL {
        let mut sig = m.make_signature();
        let word = |w: &Word| {
            AbiParam::new(match w {
                Word::Int => I64,
                Word::Float => types::F64,
            })
        };
        sig.params.extend(which.params().iter().map(word));
        sig.returns.extend(which.result().as_ref().map(word));
        let id = m
            .declare_function(which.symbol(), Linkage::Import, &sig)
            .map_err(|e| e.to_string())?;
        intrinsic_ids.push(id);
    }
    let slow_ids = define_slow_paths(m, &intrinsic_ids)?;

    let mut func_ids = Vec::new();
    for (i, f) in ir.functions.iter().enumerate() {
        // `fn(env, depth_left, params…) -> (result, failed)`.
        let sig = words_signature(m, 2 + f.params.len(), 2);
        func_ids.push(
            m.declare_function(&format!("sap_fn_{i}"), Linkage::Local, &sig)
                .map_err(|e| e.to_string())?,
        );
    }
    let mut tramp_ids = Vec::new();
    for i in 0..ir.functions.len() {
        let sig = words_signature(m, 2, 1);
        tramp_ids.push(
            m.declare_function(&format!("sap_tramp_{i}"), Linkage::Local, &sig)
                .map_err(|e| e.to_string())?,
        );
    }

    let frontend = m.target_config();
    let callables = |ids: &[FuncId]| -> Vec<Callable> {
        ids.iter()
            .map(|&id| {
                let decl = m.declarations().get_function_decl(id);
                Callable {
                    id,
                    signature: decl.signature.clone(),
                    colocated: decl.linkage.is_final(),
                }
            })
            .collect()
    };
    let (intrinsics, functions, slow_paths) = (
        callables(&intrinsic_ids),
        callables(&func_ids),
        callables(&slow_ids),
    );
    let mut keep = Keep::default();
    let mut ctx = m.make_context();
    let mut fctx = FunctionBuilderContext::new();
    for (i, f) in ir.functions.iter().enumerate() {
        ctx.func.signature = functions[i].signature.clone();
        ctx.func.name = UserFuncName::user(0, i as u32);
        {
            let b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let callees = Callees::new(&intrinsics, &functions, &slow_paths);
            let mut cg = FnCg::new(b, ir, f, &mut keep, callees);
            cg.body()
                .map_err(|e| format!("cannot compile `{}`: {e}", f.name))?;
            cg.b.finalize(frontend);
        }
        m.define_function(func_ids[i], &mut ctx)
            .map_err(|e| format!("cannot compile `{}`: {e:?}", f.name))?;
        // For people working on the code generator: `SAP_JIT_DUMP=dir` writes each
        // function's machine code to `dir/<name>.bin` (`objdump -D -b binary -m i386:x86-64`).
        if let (Some(code), Some(dir)) = (ctx.compiled_code(), std::env::var_os("SAP_JIT_DUMP")) {
            let path = std::path::Path::new(&dir).join(format!("{}.bin", f.name));
            let _ = std::fs::write(path, code.buffer.data());
        }
        m.clear_context(&mut ctx);

        // The trampoline: unpack the argument array, call, return.
        ctx.func.signature = m
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
            let callee = m.declare_func_in_func(func_ids[i], b.func);
            let call = b.ins().call(callee, &call_args);
            let result = b.inst_results(call)[0];
            b.ins().return_(&[result]);
            b.seal_all_blocks();
            b.finalize(frontend);
        }
        m.define_function(tramp_ids[i], &mut ctx)
            .map_err(|e| format!("cannot compile a trampoline: {e:?}"))?;
        m.clear_context(&mut ctx);
    }
    Ok(Program {
        keep,
        trampolines: tramp_ids,
    })
}

/// A signature of `params` words returning `returns` words, in the default convention.
fn words_signature<M: Module>(m: &M, params: usize, returns: usize) -> Signature {
    let mut sig = m.make_signature();
    sig.params.extend((0..params).map(|_| AbiParam::new(I64)));
    sig.returns.extend((0..returns).map(|_| AbiParam::new(I64)));
    sig
}

/// The slow paths of inline list operations go through adapters that preserve every
/// register: the values a loop keeps in registers stay there across them, instead of
/// living in callee-saved registers or on the stack for the sake of a rare call.
fn define_slow_paths<M: Module>(
    m: &mut M,
    intrinsic_ids: &[FuncId],
) -> Result<Vec<FuncId>, String> {
    let mut slow_ids = Vec::new();
    for (i, which) in SLOW_PATHS.iter().enumerate() {
        let mut sig = words_signature(m, 5, 0);
        sig.call_conv = CallConv::PreserveAll;
        let id = m
            .declare_function(&format!("sap_slow_{i}"), Linkage::Local, &sig)
            .map_err(|e| e.to_string())?;
        let frontend = m.target_config();
        let mut ctx = m.make_context();
        ctx.func.signature = sig;
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let arity = which.params().len();
        let callee = m.declare_func_in_func(intrinsic_ids[*which as usize], b.func);
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
        m.define_function(id, &mut ctx)
            .map_err(|e| format!("cannot compile a slow path: {e:?}"))?;
        slow_ids.push(id);
    }
    Ok(slow_ids)
}
