//! The native module: a compiled program as the build cache stores it, so `sapc run`
//! starts without parsing, checking, lowering or compiling — and without linking: the
//! code is stored laid out and linked (`link.rs`) at an offset that is a multiple of
//! 4096, and loading maps it as it is. One file holds:
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
//! | sites | bytes: where the code can fail, and its frames ([postcard]; decoded when a run fails) |
//! | frame | u32: the most stack one call of any function takes |
//! | entries | u32 count, then a u32 per declared function: where it starts in the code, or `u32::MAX` |
//! | code | u64 offset in the file (a multiple of 4096), u64 length; zeros up to the offset, then the code |
//! | checksum | u64: [`checksum`] of every byte before it |
//!
//! Integers are little-endian; a string or byte run is a u32 length and the bytes.
//!
//! [postcard]: https://docs.rs/postcard (a compact serde format: the IR's own derives,
//! a tenth of JSON's size and parse time)
//! [`read`] trusts nothing it does not check: a wrong magic, version, identity or
//! checksum, a truncated file or code that is not where the header says are errors
//! (entries that do not fit the module or start outside the code are
//! `jit::load_mapped`'s, as for any program), and the caller compiles from source
//! instead. A file that passes is code this compiler wrote for this machine.

use std::fs::File;

use crate::abi::{Pin, Sites};
use crate::codegen::NativeProgram;
use crate::jit::MappedProgram;
use crate::link;
use crate::raw::image::{self, Image};

const MAGIC: &[u8; 8] = b"SAPNATV1";

/// The version of this layout; a file of another version is not read.
pub const FORMAT: u32 = 6;

/// Where code starts in the file is a multiple of this, so that it can be mapped.
const PAGE: usize = 4096;

/// What a native module file holds besides the code.
pub struct NativeModule {
    /// The module the code was compiled from, without function bodies.
    pub ir: ir::Module,
    /// Whether running `main` can reach a model call (`ir::Module::calls_model`).
    pub calls_model: bool,
    pub program: MappedProgram,
}

/// The file's bytes for `program`, compiled from `module`. Fails only when the code
/// cannot be linked (`link::lay_out`).
pub fn write(
    identity: &str,
    module: &ir::Module,
    program: &NativeProgram,
) -> Result<Vec<u8>, String> {
    let laid = link::lay_out(program, module.functions.len())?;
    let meta = module.without_bodies();
    let mut w = Writer(Vec::with_capacity(laid.code.len() + (1 << 20)));
    w.0.extend_from_slice(MAGIC);
    w.u32(FORMAT);
    w.str(identity);
    w.str(&program.target);
    w.0.push(u8::from(module.calls_model()));
    w.bytes(&postcard::to_allocvec(&meta).map_err(|e| e.to_string())?);
    w.bytes(&postcard::to_allocvec(&program.pins).map_err(|e| e.to_string())?);
    w.bytes(&postcard::to_allocvec(&program.sites).map_err(|e| e.to_string())?);
    w.u32(program.frame_bytes() as u32);
    w.u32(laid.entries.len() as u32);
    for e in &laid.entries {
        w.u32(*e);
    }
    let offset = (w.0.len() + 16).next_multiple_of(PAGE);
    w.u64(offset as u64);
    w.u64(laid.code.len() as u64);
    w.0.resize(offset, 0);
    w.0.extend_from_slice(&laid.code);
    let sum = checksum(&w.0);
    w.u64(sum);
    Ok(w.0)
}

/// Reads a file [`write`] made with the same `identity`, mapping its code. Whether the
/// code suits this machine is `jit::load_mapped`'s check, as for any compiled program.
pub fn read(file: &File, identity: &str) -> Result<NativeModule, String> {
    // Mapped; read where the file system cannot map files.
    let (mapped, mut copy) = (image::map_file(file), Vec::new());
    let bytes: &[u8] = match &mapped {
        Ok(map) => map,
        Err(_) => {
            std::io::Read::read_to_end(&mut &*file, &mut copy)
                .map_err(|e| format!("cannot read the file: {e}"))?;
            &copy
        }
    };
    if bytes.len() < MAGIC.len() + 8 {
        return Err("the file is truncated".to_owned());
    }
    let body = &bytes[..bytes.len() - 8];
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
    let target = r.str()?.to_owned();
    let calls_model = r.u8()? != 0;
    let ir: ir::Module = postcard::from_bytes(r.bytes()?).map_err(|e| format!("module: {e}"))?;
    let pins: Vec<Pin> = postcard::from_bytes(r.bytes()?).map_err(|e| format!("pins: {e}"))?;
    let sites = Sites::encoded(r.bytes()?.to_vec());
    let frame = r.u32()?;
    if !(16..=1 << 26).contains(&frame) {
        return Err(format!("a function has a frame of {frame} bytes"));
    }
    // Whether they fit the module and the code is `jit::load_mapped`'s check.
    let count = r.u32()? as usize;
    let entries = (0..count)
        .map(|_| r.u32())
        .collect::<Result<Vec<u32>, String>>()?;
    let offset = r.u64()?;
    let len = r.u64()?;
    let code_fits = offset % PAGE as u64 == 0
        && offset >= r.at as u64
        && offset.checked_add(len) == Some(body.len() as u64);
    if !code_fits {
        return Err(format!(
            "the code ({len} bytes at {offset}) is not where it belongs"
        ));
    }
    let (offset, len) = (offset as usize, len as usize);
    if body[r.at..offset].iter().any(|&b| b != 0) {
        return Err("the file has bytes before its code".to_owned());
    }
    // Mapped as it is; copied where the file system does not let files be run (a cache
    // on a `noexec` mount).
    let image = Image::map(file, offset as u64, len)
        .or_else(|_| Image::copy_of(&body[offset..]))
        .map_err(|e| format!("cannot map the code: {e}"))?;
    Ok(NativeModule {
        ir,
        calls_model,
        program: MappedProgram {
            target,
            image,
            entries,
            frame,
            pins,
            sites,
        },
    })
}

/// A 64-bit checksum: FNV-1a over eight bytes at a time, in four interleaved lanes
/// (each takes every fourth word) folded in order at the end, so that a few megabytes of
/// code take a fraction of a millisecond. Stable across Rust versions.
pub fn checksum(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut lanes = [0xcbf2_9ce4_8422_2325_u64; 4];
    let mut chunks = bytes.chunks_exact(32);
    for chunk in &mut chunks {
        for (lane, word) in lanes.iter_mut().zip(chunk.chunks_exact(8)) {
            *lane ^= u64::from_le_bytes(word.try_into().expect("8 bytes"));
            *lane = lane.wrapping_mul(PRIME);
        }
    }
    let mut hash = lanes[0];
    for lane in &lanes[1..] {
        hash ^= lane;
        hash = hash.wrapping_mul(PRIME);
    }
    for b in chunks.remainder() {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(PRIME);
    }
    hash ^= bytes.len() as u64;
    hash.wrapping_mul(PRIME)
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
