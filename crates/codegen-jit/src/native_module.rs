//! The native module: a compiled program as the build cache stores it, so `sapc run`
//! starts without parsing, checking, lowering or compiling. One file holds:
//!
//! | field | encoding |
//! |---|---|
//! | magic | the 8 bytes `SAPNATV1` |
//! | format version | u32 ([`FORMAT`]) |
//! | identity | string: what the caller keys the entry on (compiler, sources) |
//! | target | string: triple and ISA flags the code was compiled for |
//! | calls the model | u8 |
//! | module | bytes: the IR without function bodies ([postcard]) |
//! | pins | bytes: the descriptors and constants the code points at ([postcard]) |
//! | functions | u32 count, then each: u32 declaration, u64 alignment, u32 frame size, bytes of machine code, u32 relocation count, relocations |
//! | relocation | u32 offset, u8 kind, i64 addend, then the target: u8 0 + u32 namespace + u32 index (a declared function or a pin), u8 1 + string (a libcall), u8 2 + u32 offset (in the function itself) |
//! | checksum | u64: FNV-1a of every byte before it |
//!
//! Integers are little-endian; a string or byte run is a u32 length and the bytes.
//!
//! [postcard]: https://docs.rs/postcard (a compact serde format: the IR's own derives,
//! a tenth of JSON's size and parse time)
//! [`read`] trusts nothing: a wrong magic, version, identity or checksum, a truncated
//! file, an unknown relocation, or one that would write outside its function or name
//! something that is not there is an error, and the caller compiles from source
//! instead. A file that passes is code this compiler wrote for this machine.

use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::ir::LibCall;
use cranelift_module::{FuncId, ModuleReloc, ModuleRelocTarget};

use crate::abi::Pin;
use crate::codegen::{CompiledFunction, Layout, NativeProgram};

const MAGIC: &[u8; 8] = b"SAPNATV1";

/// The version of this layout; a file of another version is not read.
pub const FORMAT: u32 = 5;

/// What a native module file holds besides the code.
pub struct NativeModule {
    /// The module the code was compiled from, without function bodies.
    pub ir: ir::Module,
    /// Whether running `main` can reach a model call (`ir::Module::calls_model`).
    pub calls_model: bool,
    pub program: NativeProgram,
}

/// The relocation kinds the format stores, with the bytes each one patches.
const KINDS: &[(Reloc, u8, usize)] = &[
    (Reloc::Abs4, 1, 4),
    (Reloc::Abs8, 2, 8),
    (Reloc::X86PCRel4, 3, 4),
    (Reloc::X86CallPCRel4, 4, 4),
    (Reloc::X86CallPLTRel4, 5, 4),
    (Reloc::Arm64Call, 6, 4),
];

/// The file's bytes for `program`, compiled from `module`. Fails only on a relocation
/// the format cannot store (Cranelift emits none of those for this code on x86-64 or
/// AArch64).
pub fn write(
    identity: &str,
    module: &ir::Module,
    program: &NativeProgram,
) -> Result<Vec<u8>, String> {
    let meta = module.without_bodies();
    let mut w = Writer(Vec::with_capacity(1 << 20));
    w.0.extend_from_slice(MAGIC);
    w.u32(FORMAT);
    w.str(identity);
    w.str(&program.target);
    w.0.push(u8::from(module.calls_model()));
    w.bytes(&postcard::to_allocvec(&meta).map_err(|e| e.to_string())?);
    w.bytes(&postcard::to_allocvec(&program.pins).map_err(|e| e.to_string())?);
    w.u32(program.functions.len() as u32);
    for f in &program.functions {
        w.u32(f.decl);
        w.u64(f.alignment);
        w.u32(f.frame);
        w.bytes(&f.code);
        w.u32(f.relocs.len() as u32);
        for r in &f.relocs {
            let (_, code, _) = KINDS
                .iter()
                .find(|(k, _, _)| *k == r.kind)
                .ok_or_else(|| format!("the relocation {:?} cannot be stored", r.kind))?;
            w.u32(r.offset);
            w.0.push(*code);
            w.u64(r.addend as u64);
            match &r.name {
                ModuleRelocTarget::User { namespace, index } => {
                    w.0.push(0);
                    w.u32(*namespace);
                    w.u32(*index);
                }
                ModuleRelocTarget::LibCall(call) => {
                    w.0.push(1);
                    w.str(&call.to_string());
                }
                ModuleRelocTarget::FunctionOffset(_, offset) => {
                    w.0.push(2);
                    w.u32(*offset);
                }
                other => return Err(format!("the relocation target {other:?} cannot be stored")),
            }
        }
    }
    let sum = checksum(&w.0);
    w.u64(sum);
    Ok(w.0)
}

/// Reads a file [`write`] made with the same `identity`. Whether its code suits this
/// machine is `jit::load`'s check, as for any compiled program.
pub fn read(bytes: &[u8], identity: &str) -> Result<NativeModule, String> {
    let body = bytes
        .len()
        .checked_sub(8)
        .map(|n| &bytes[..n])
        .ok_or("the file is truncated")?;
    let stored = u64::from_le_bytes(bytes[body.len()..].try_into().expect("8 bytes"));
    if !body.starts_with(MAGIC) {
        return Err("not a sap native module".to_owned());
    }
    let mut r = Reader {
        bytes: body,
        at: MAGIC.len(),
    };
    let format = r.u32()?;
    if format != FORMAT {
        return Err(format!("written in format {format}, not {FORMAT}"));
    }
    if r.str()? != identity {
        return Err("written by another compiler or for other sources".to_owned());
    }
    if checksum(body) != stored {
        return Err("the checksum does not match: the file is damaged".to_owned());
    }
    let written_for = r.str()?;
    let calls_model = r.u8()? != 0;
    let ir: ir::Module = postcard::from_bytes(r.bytes()?).map_err(|e| format!("module: {e}"))?;
    let pins: Vec<Pin> = postcard::from_bytes(r.bytes()?).map_err(|e| format!("pins: {e}"))?;
    let layout = Layout::new(ir.functions.len());
    let declared = layout.declared;
    let count = r.u32()? as usize;
    let mut functions = Vec::with_capacity(count.min(declared));
    let mut defined = vec![false; declared];
    for _ in 0..count {
        let decl = r.u32()?;
        let slot = defined
            .get_mut(decl as usize)
            .filter(|_| decl as usize >= layout.slow_paths)
            .ok_or_else(|| format!("function {decl} is not one the module can define"))?;
        if std::mem::replace(slot, true) {
            return Err(format!("function {decl} is defined twice"));
        }
        let alignment = r.u64()?;
        if !alignment.is_power_of_two() || alignment > 4096 {
            return Err(format!("function {decl} has alignment {alignment}"));
        }
        let frame = r.u32()?;
        if !(16..=1 << 26).contains(&frame) {
            return Err(format!("function {decl} has a frame of {frame} bytes"));
        }
        let code = r.bytes()?.to_vec();
        let n = r.u32()? as usize;
        let mut relocs = Vec::with_capacity(n.min(code.len()));
        for _ in 0..n {
            let offset = r.u32()?;
            let kind_code = r.u8()?;
            let addend = r.u64()? as i64;
            let (kind, width) = KINDS
                .iter()
                .find(|(_, c, _)| *c == kind_code)
                .map(|(k, _, w)| (*k, *w))
                .ok_or_else(|| format!("unknown relocation kind {kind_code}"))?;
            if offset as usize + width > code.len() {
                return Err(format!(
                    "a relocation of function {decl} is outside its code"
                ));
            }
            let name = match r.u8()? {
                0 => {
                    let (namespace, index) = (r.u32()?, r.u32()?);
                    let known = match namespace {
                        0 => (index as usize) < declared,
                        1 => (index as usize) < pins.len(),
                        _ => false,
                    };
                    if !known {
                        return Err(format!("a relocation names {namespace}:{index}"));
                    }
                    ModuleRelocTarget::User { namespace, index }
                }
                1 => {
                    let name = r.str()?;
                    let call: LibCall = name
                        .parse()
                        .map_err(|_| format!("unknown libcall `{name}`"))?;
                    ModuleRelocTarget::LibCall(call)
                }
                2 => {
                    let at = r.u32()?;
                    if at as usize >= code.len() {
                        return Err(format!("a relocation of function {decl} points outside it"));
                    }
                    ModuleRelocTarget::FunctionOffset(FuncId::from_u32(decl), at)
                }
                other => return Err(format!("unknown relocation target {other}")),
            };
            relocs.push(ModuleReloc {
                offset,
                kind,
                name,
                addend,
            });
        }
        functions.push(CompiledFunction {
            decl,
            alignment,
            frame,
            code,
            relocs,
        });
    }
    if r.at != r.bytes.len() {
        return Err("the file has bytes after its functions".to_owned());
    }
    // A call or address may only name an intrinsic (imported) or a function the file
    // defines: the linker could not resolve anything else.
    for f in &functions {
        for reloc in &f.relocs {
            if let ModuleRelocTarget::User {
                namespace: 0,
                index,
            } = reloc.name
                && index as usize >= layout.slow_paths
                && !defined[index as usize]
            {
                return Err(format!(
                    "function {} calls function {index}, which is not in the file",
                    f.decl
                ));
            }
        }
    }
    Ok(NativeModule {
        ir,
        calls_model,
        program: NativeProgram {
            target: written_for.to_owned(),
            functions,
            pins,
        },
    })
}

/// FNV-1a, 64 bits, eight bytes at a time folded in order: stable across Rust versions
/// and fast enough for a few megabytes at start-up.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        hash ^= u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    for b in chunks.remainder() {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

struct Writer(Vec<u8>);

impl Writer {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or("the file is truncated")?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn str(&mut self) -> Result<&'a str, String> {
        std::str::from_utf8(self.bytes()?).map_err(|_| "a string is not UTF-8".to_owned())
    }
}
