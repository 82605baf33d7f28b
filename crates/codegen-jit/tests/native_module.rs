//! The build cache's native module format: a file this compiler wrote for this machine
//! reads back and runs; anything else — damaged, truncated, foreign, of another format,
//! or well-formed but naming what is not there — is refused with a reason, never
//! mapped as code and never a panic.

use std::sync::Arc;

use codegen_jit::native_module::{self, FORMAT, NativeModule, checksum};
use codegen_jit::{Externs, Host, Limits, on_big_stack};
use cranelift_module::{ModuleReloc, ModuleRelocTarget};
use test_support::Scratch;

fn module() -> ir::Module {
    let mut db = hir::Database::default();
    db.add_prelude();
    let file = db.add_file(
        "t.sap",
        "fn sq(x: i64) -> i64 { x * x }\nfn unused() -> i64 { 7 }\nfn main() -> i64 { sq(12) + len(\"abc\") }\n",
    );
    assert!(hir::check_file(&db, file).iter().all(|d| !d.is_error()));
    lower::lower_workspace(&db).unwrap()
}

fn stored() -> (ir::Module, Vec<u8>) {
    let module = module();
    let native = codegen_jit::compile_native(&module).unwrap();
    let bytes = native_module::write("id", &module, &native).unwrap();
    (module, bytes)
}

/// Reads `bytes` as a cache entry's file.
fn read(bytes: &[u8], identity: &str) -> Result<NativeModule, String> {
    let dir = Scratch::new("native-module");
    let path = dir.join("entry.sapm");
    std::fs::write(&path, bytes).unwrap();
    native_module::read(&std::fs::File::open(&path).unwrap(), identity)
}

/// Replaces the checksum so that only the structure is judged.
fn reseal(bytes: &mut Vec<u8>) {
    let n = bytes.len() - 8;
    bytes.truncate(n);
    let sum = checksum(bytes);
    bytes.extend_from_slice(&sum.to_le_bytes());
}

#[test]
fn a_stored_module_reads_back_and_runs() {
    let (module, bytes) = stored();
    let read = read(&bytes, "id").unwrap();
    assert!(read.ir.functions.iter().all(|f| f.blocks.is_empty()));
    assert!(!read.calls_model);
    // `unused` is not reachable from `main`, so it was not compiled.
    let defined = read
        .program
        .entries
        .iter()
        .filter(|&&e| e != u32::MAX)
        .count();
    let native = codegen_jit::compile_native(&module).unwrap();
    assert_eq!(defined, native.functions.len());
    let ir = Arc::new(read.ir);
    let tokio = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let host = Host::new(
        ir.clone(),
        None,
        tokio.handle().clone(),
        Externs::default(),
        Limits::default(),
    );
    let program = codegen_jit::load_mapped(read.program, ir).unwrap();
    let result = on_big_stack(|| program.run_main(&host)).unwrap();
    assert_eq!(result, runtime::Value::Int(147));
}

#[test]
fn damage_anywhere_is_refused() {
    let (_, bytes) = stored();
    for at in (0..bytes.len()).step_by(97) {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x40;
        assert!(
            read(&damaged, "id").is_err(),
            "a flipped byte at {at} was not noticed"
        );
    }
    for len in (0..bytes.len()).step_by(61) {
        assert!(read(&bytes[..len], "id").is_err());
    }
}

#[test]
fn foreign_entries_are_refused_with_a_reason() {
    let (_, bytes) = stored();
    let error = |b: &[u8], id: &str| read(b, id).err().unwrap();
    assert!(error(&bytes, "other").contains("another compiler"));
    // Code for another machine reads, but does not link.
    let mut foreign = read(&bytes, "id").unwrap();
    foreign.program.target = "riscv64 other".to_owned();
    let linked = codegen_jit::load_mapped(foreign.program, Arc::new(foreign.ir));
    assert!(linked.err().unwrap().contains("not this machine"));
    let mut newer = bytes.clone();
    newer[8..12].copy_from_slice(&(FORMAT + 1).to_le_bytes());
    reseal(&mut newer);
    assert!(error(&newer, "id").contains("format"));
    assert!(error(b"{ not a module }", "id").contains("not a sap native module"));
}

#[test]
fn relocations_that_point_outside_are_refused() {
    let module = module();
    let outside = |edit: &dyn Fn(&mut ModuleReloc, usize)| {
        let mut native = codegen_jit::compile_native(&module).unwrap();
        let f = native
            .functions
            .iter_mut()
            .find(|f| !f.relocs.is_empty())
            .expect("a function with a relocation");
        let len = f.code.len();
        edit(&mut f.relocs[0], len);
        // Refused when linked, for the cache as for a run.
        let refused = native_module::write("id", &module, &native).err();
        assert_eq!(
            refused,
            codegen_jit::load(&native, Arc::new(module.clone())).err()
        );
        refused
    };
    assert!(
        outside(&|r, len| r.offset = len as u32 - 2)
            .unwrap()
            .contains("outside its code")
    );
    assert!(
        outside(&|r, _| r.name = ModuleRelocTarget::User {
            namespace: 1,
            index: 1 << 20
        })
        .unwrap()
        .contains("cannot be linked")
    );
    assert!(
        outside(&|r, _| r.name = ModuleRelocTarget::User {
            namespace: 0,
            index: 1 << 20
        })
        .unwrap()
        .contains("not in the program")
    );
}

/// What the cache maps is the code as laid out, byte for byte: nothing in it is patched
/// for where it lands (it names no absolute address), and it runs there (the first
/// test).
#[test]
fn the_mapped_code_is_the_laid_out_code() {
    let module = module();
    let native = codegen_jit::compile_native(&module).unwrap();
    let laid = codegen_jit::link::lay_out(&native, module.functions.len()).unwrap();
    let (_, bytes) = stored();
    let entry = read(&bytes, "id").unwrap();
    assert_eq!(entry.program.image.bytes(), &laid.code[..]);
    assert_eq!(entry.program.entries, laid.entries);
}

/// Entries outside the code are refused when the program is loaded.
#[test]
fn entries_outside_the_code_are_refused() {
    let (_, bytes) = stored();
    let len = read(&bytes, "id").unwrap().program.image.bytes().len();
    let code_at = bytes.len() - 8 - len;
    // The code's offset and length follow the entries: the last entry is the u32
    // before them.
    let mut place = (code_at as u64).to_le_bytes().to_vec();
    place.extend_from_slice(&(len as u64).to_le_bytes());
    let at = bytes[..code_at]
        .windows(16)
        .position(|w| w == place.as_slice())
        .expect("the code's place in the header");
    let mut edited = bytes.clone();
    edited[at - 4..at].copy_from_slice(&(1u32 << 30).to_le_bytes());
    reseal(&mut edited);
    // The file reads; loading it refuses the entry, as for any program.
    let entry = read(&edited, "id").unwrap();
    let error = codegen_jit::load_mapped(entry.program, Arc::new(entry.ir))
        .err()
        .unwrap();
    assert!(error.contains("starts outside the code"), "{error}");
}
