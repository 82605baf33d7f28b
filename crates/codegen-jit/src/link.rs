//! The linker: lays a compiled program's functions out one after another in one piece
//! of code and resolves the calls between them, which are all relative to where the
//! caller is. Compiled code names no absolute address — it reaches intrinsics through
//! the table `Env::intrinsics` points at, and pins through `Env::pins` — so the piece
//! runs wherever it is mapped, unchanged: in this process right after compiling, or in
//! another one straight from the build cache's file (`native_module.rs`).
//!
//! Cranelift's own JIT linker (`cranelift-jit`) was used before: it allocates and
//! patches every function on its own and resolves each relocation through a map of
//! names, 47 M instructions to link the 16k-line `wide` program of
//! `tools/compile-bench` (43% of a cached start). This one takes a few hundred
//! thousand, and the code it lays out is what the cache maps.

use cranelift_codegen::binemit::Reloc;
use cranelift_module::ModuleRelocTarget;

use crate::codegen::{Layout, NativeProgram};

/// A program's code in one piece, and where each defined function starts in it.
pub struct Laid {
    pub code: Vec<u8>,
    /// The offset of each declared function (`codegen::declarations`), or [`ABSENT`]
    /// for one the program does not define (an intrinsic, a function `main` cannot
    /// reach).
    pub entries: Vec<u32>,
}

/// The entry of a function that is not in the code.
pub const ABSENT: u32 = u32::MAX;

/// Lays out `native`, compiled from a module of `functions` IR functions. Fails on a
/// relocation that is not relative to the code itself: Cranelift emits none for the
/// code `codegen` builds, on x86-64 or AArch64.
pub fn lay_out(native: &NativeProgram, functions: usize) -> Result<Laid, String> {
    let layout = Layout::new(functions);
    let mut entries = vec![ABSENT; layout.declared];
    let mut code = Vec::with_capacity(native.functions.iter().map(|f| f.code.len() + 16).sum());
    for f in &native.functions {
        let decl = f.decl as usize;
        let slot = entries
            .get_mut(decl)
            .filter(|_| decl >= layout.slow_paths)
            .ok_or_else(|| format!("function {decl} is not one the program can define"))?;
        if *slot != ABSENT {
            return Err(format!("function {decl} is defined twice"));
        }
        if !f.alignment.is_power_of_two() || f.alignment > 4096 {
            return Err(format!(
                "function {decl} asks for alignment {}",
                f.alignment
            ));
        }
        code.resize(code.len().next_multiple_of(f.alignment as usize), 0);
        *slot = u32::try_from(code.len()).map_err(|_| "the code is over 4 GiB".to_owned())?;
        code.extend_from_slice(&f.code);
    }
    for f in &native.functions {
        let start = entries[f.decl as usize] as usize;
        for r in &f.relocs {
            let at = r.offset as usize;
            let target = match r.name {
                ModuleRelocTarget::User {
                    namespace: 0,
                    index,
                } => match entries.get(index as usize) {
                    Some(&entry) if entry != ABSENT => entry as usize,
                    _ => {
                        return Err(format!(
                            "function {} calls function {index}, which is not in the program",
                            f.decl
                        ));
                    }
                },
                ModuleRelocTarget::FunctionOffset(_, offset)
                    if (offset as usize) < f.code.len() =>
                {
                    start + offset as usize
                }
                ref other => {
                    return Err(format!(
                        "function {} refers to {other:?}, which cannot be linked",
                        f.decl
                    ));
                }
            };
            // Every kind linked here patches four bytes.
            let width = 4;
            if at + width > f.code.len() {
                return Err(format!(
                    "a relocation of function {} is outside its code",
                    f.decl
                ));
            }
            let site = start + at;
            let distance = (target as i64) + r.addend - (site as i64);
            let field = &mut code[site..site + width];
            match r.kind {
                Reloc::X86PCRel4 | Reloc::X86CallPCRel4 | Reloc::X86CallPLTRel4 => {
                    let rel = i32::try_from(distance)
                        .map_err(|_| "a call spans more than 2 GiB of code".to_owned())?;
                    field.copy_from_slice(&rel.to_le_bytes());
                }
                Reloc::Arm64Call => {
                    // `bl`: the distance in instructions, in the low 26 bits.
                    let words = distance >> 2;
                    if !(-(1 << 25)..1 << 25).contains(&words) {
                        return Err("a call spans more than 128 MiB of code".to_owned());
                    }
                    let inst = u32::from_le_bytes(field[..4].try_into().expect("4 bytes"));
                    let inst = inst | (words as u32 & 0x03ff_ffff);
                    field.copy_from_slice(&inst.to_le_bytes());
                }
                other => {
                    return Err(format!(
                        "function {} has a relocation of kind {other:?}, which cannot be linked",
                        f.decl
                    ));
                }
            }
        }
    }
    Ok(Laid { code, entries })
}
