//! The build cache's native module format: a file this compiler wrote for this machine
//! reads back and runs; anything else — damaged, truncated, foreign, of another format,
//! or well-formed but naming what is not there — is refused with a reason, never
//! linked and never a panic.

use std::sync::Arc;

use codegen_jit::native_module::{self, FORMAT, checksum};
use codegen_jit::{Externs, Host, Limits, on_big_stack};
use cranelift_module::{ModuleReloc, ModuleRelocTarget};

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
    let read = native_module::read(&bytes, "id").unwrap();
    assert!(read.ir.functions.iter().all(|f| f.blocks.is_empty()));
    assert!(!read.calls_model);
    // `unused` is not reachable from `main`, so it was not compiled.
    let defined = read.program.functions.len();
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
    let program = codegen_jit::load(&read.program, ir).unwrap();
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
            native_module::read(&damaged, "id").is_err(),
            "a flipped byte at {at} was not noticed"
        );
    }
    for len in (0..bytes.len()).step_by(61) {
        assert!(native_module::read(&bytes[..len], "id").is_err());
    }
}

#[test]
fn foreign_entries_are_refused_with_a_reason() {
    let (_, bytes) = stored();
    let error = |b: &[u8], id: &str| native_module::read(b, id).err().unwrap();
    assert!(error(&bytes, "other").contains("another compiler"));
    // Code for another machine reads, but does not link.
    let mut foreign = native_module::read(&bytes, "id").unwrap();
    foreign.program.target = "riscv64 other".to_owned();
    let linked = codegen_jit::load(&foreign.program, Arc::new(foreign.ir));
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
        let bytes = native_module::write("id", &module, &native).unwrap();
        native_module::read(&bytes, "id").err()
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
        .contains("names 1:")
    );
    assert!(
        outside(&|r, _| r.name = ModuleRelocTarget::User {
            namespace: 0,
            index: 1 << 20
        })
        .is_some()
    );
}
