//! The prelude's digest, fixed when the compiler is built: the build cache keys on it
//! (`session::cache`), so a cached run need not hash the prelude's text at every start.

use std::hash::{DefaultHasher, Hasher};

fn main() {
    println!("cargo:rerun-if-changed=prelude");
    let mut files: Vec<_> = std::fs::read_dir("prelude")
        .expect("crates/hir/prelude")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sap"))
        .collect();
    files.sort();
    // Two SipHash passes with different first words: 128 bits.
    let mut a = DefaultHasher::new();
    let mut b = DefaultHasher::new();
    b.write_u8(1);
    for path in files {
        let text = std::fs::read(&path).expect("a prelude file");
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        for h in [&mut a, &mut b] {
            h.write(name.as_bytes());
            h.write_usize(text.len());
            h.write(&text);
        }
    }
    println!(
        "cargo:rustc-env=SAP_PRELUDE_DIGEST={:016x}{:016x}",
        a.finish(),
        b.finish()
    );
}
