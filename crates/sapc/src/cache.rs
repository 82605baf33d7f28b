//! The build cache: `sapc build` stores a program's lowered module under a key made from
//! the compiler's version and the content of every input; `sapc run` uses a fresh entry
//! and skips parsing, checking and lowering.
//!
//! The cache lives in `$SAP_CACHE_DIR`, else `$XDG_CACHE_HOME/sap`, else
//! `~/.cache/sap`. An entry that cannot be read is ignored (and rebuilt by `build`).

use std::path::PathBuf;

use ir::Module;

pub fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SAP_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("sap");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache").join("sap"),
        None => std::env::temp_dir().join("sap-cache"),
    }
}

/// FNV-1a, 64 bits: stable across Rust versions, unlike `DefaultHasher`.
fn fnv(bytes: &[u8], mut hash: u64) -> u64 {
    for b in bytes {
        hash ^= *b as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Identifies this build of the compiler: its version, and when its executable was built,
/// so a rebuilt compiler never reads a module an older one wrote.
fn compiler_identity() -> String {
    let built = std::env::current_exe()
        .and_then(std::fs::metadata)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{}:{built}", env!("CARGO_PKG_VERSION"))
}

/// The key of a program: the compiler and each input's path and text.
pub fn key(inputs: &[(&str, &str)]) -> String {
    let mut hash = fnv(compiler_identity().as_bytes(), 0xcbf2_9ce4_8422_2325);
    for (path, text) in inputs {
        hash = fnv(path.as_bytes(), hash);
        hash = fnv(&[0], hash);
        hash = fnv(text.as_bytes(), hash);
        hash = fnv(&[0], hash);
    }
    format!("{hash:016x}")
}

fn entry(key: &str) -> PathBuf {
    dir().join(format!("{key}.ir.json"))
}

pub fn load(key: &str) -> Option<Module> {
    let text = std::fs::read_to_string(entry(key)).ok()?;
    serde_json::from_str(&text).ok()
}

pub fn store(key: &str, module: &Module) -> Result<PathBuf, String> {
    let path = entry(key);
    std::fs::create_dir_all(dir())
        .map_err(|e| format!("cannot create the cache {}: {e}", dir().display()))?;
    let text = serde_json::to_string(module).map_err(|e| e.to_string())?;
    // Write then rename, so a reader never sees half an entry.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}
