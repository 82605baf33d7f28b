//! The build cache: `sapc build` compiles a program to native code and stores it as a
//! native module (`codegen_jit::native_module`); `sapc run` maps a fresh entry's code
//! and skips parsing, checking, lowering, compiling and linking.
//!
//! An entry is `KEY.sapm`, where the key hashes what the code depends on: this compiler
//! (its version and its executable's build time), the machine (target triple and CPU
//! features), the prelude, and the program file with every `.sap` file beside it — the
//! modules it may name; which of them it does name is only known after parsing, so a
//! change to any of them makes a new key. Files are keyed by where they are (their
//! folder's canonical path), not by how the command line spells them: `sapc build
//! fib.sap` and then `sapc run ./fib.sap`, or the same file from another folder, find the
//! same entry. The entry names the files by where they are, and a run renames them as
//! its command line spelled them, so messages and traces read as from a compiled run.
//!
//! Entries are written to a temporary file and renamed into place, so two builds at once
//! leave one whole entry and a reader never sees half of one. An entry that cannot be
//! read, or is damaged, stale or foreign, is refused with a reason and the program is
//! compiled from source.
//!
//! The cache lives in `$SAP_CACHE_DIR`, else `$XDG_CACHE_HOME/sap`, else
//! `~/.cache/sap`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use codegen_jit::NativeProgram;
use codegen_jit::native_module::{self, NativeModule};

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

/// The files a program's entry depends on: the program first, then every `.sap` file
/// beside it; each with its path as `sapc` names it in messages and its bytes, or why
/// it could not be read (which matters only if the program names it). Read once: the
/// key is made from them, and the loader takes the program's modules from them.
pub struct Inputs {
    pub files: Vec<(PathBuf, Result<Vec<u8>, String>)>,
    /// The folder they are all in, resolved (`None` when it cannot be).
    folder: Option<PathBuf>,
}

impl Inputs {
    pub fn read(program: &Path) -> Result<Inputs, String> {
        let read =
            |p: &Path| std::fs::read(p).map_err(|e| format!("cannot read `{}`: {e}", p.display()));
        let mut files = vec![(program.to_owned(), Ok(read(program)?))];
        files.extend(siblings(program).into_iter().map(|s| {
            let bytes = read(&s);
            (s, bytes)
        }));
        // One folder for all of them: resolved once.
        let folder = std::fs::canonicalize(folder_of(program)).ok();
        Ok(Inputs { files, folder })
    }

    /// Names `module`'s files by where they are, for its cache entry.
    pub fn locate_files(&self, module: &mut ir::Module) {
        rename(module, self.spelled().zip(self.located()).collect());
    }

    /// Names the files of `module`, from a cache entry, as this run's command line did.
    pub fn name_files(&self, module: &mut ir::Module) {
        rename(module, self.located().zip(self.spelled()).collect());
    }

    /// Where each file is: the resolved folder joined with its name (the path as given
    /// when the folder could not be resolved).
    fn located(&self) -> impl Iterator<Item = String> + '_ {
        self.files
            .iter()
            .map(|(path, _)| match (&self.folder, path.file_name()) {
                (Some(folder), Some(name)) => folder.join(name).display().to_string(),
                _ => path.display().to_string(),
            })
    }

    /// The program file's path and bytes.
    pub fn program(&self) -> (&Path, &[u8]) {
        let (path, bytes) = &self.files[0];
        (path, bytes.as_deref().unwrap_or_default())
    }

    /// Each file's path as the command line spelled it.
    fn spelled(&self) -> impl Iterator<Item = String> + '_ {
        self.files
            .iter()
            .map(|(path, _)| path.display().to_string())
    }
}

/// Renames the files of `module` named by `pairs` (from, to); the prelude's modules keep
/// their names.
fn rename(module: &mut ir::Module, pairs: Vec<(String, String)>) {
    for name in &mut module.files {
        if let Some((_, to)) = pairs.iter().find(|(from, _)| from == name) {
            *name = to.clone();
        }
    }
}

/// The folder `program` is in, as a path that can be listed.
fn folder_of(program: &Path) -> &Path {
    match program.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// The `.sap` files beside `program`, sorted.
pub fn siblings(program: &Path) -> Vec<PathBuf> {
    let dir = program.parent().unwrap_or(Path::new(""));
    let mut out: Vec<PathBuf> = std::fs::read_dir(folder_of(program))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| dir.join(e.file_name()))
                .filter(|p| p.extension().is_some_and(|x| x == "sap") && p.as_path() != program)
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Identifies this build of the compiler: its version, when its executable was built
/// (so a rebuilt compiler never reads code an older one wrote), and the format.
fn compiler_identity() -> String {
    let built = std::env::current_exe()
        .and_then(std::fs::metadata)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!(
        "sapc {} built {built} native format {}",
        env!("CARGO_PKG_VERSION"),
        native_module::FORMAT
    )
}

/// The key of a program's entry on this machine (`target` from `codegen_jit::target`).
pub fn key(inputs: &Inputs, target: &str) -> String {
    let files = inputs.files.iter().zip(inputs.located());
    digest(
        &[compiler_identity().as_bytes(), target.as_bytes()],
        files.map(|((_, bytes), located)| (located, bytes)),
    )
}

/// The program's identity across machines: what the build cache keys on (this sapc
/// release, the prelude, each file's name and bytes), without what is this machine's
/// own (the binary's build time, the CPU, the folder the files are in). Workers that run
/// the same files with the same release agree on it: a served program's version.
pub fn program_identity(inputs: &Inputs) -> String {
    let files = inputs.files.iter().map(|(path, bytes)| {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        (name.into_owned(), bytes)
    });
    digest(&[env!("CARGO_PKG_VERSION").as_bytes()], files)
}

/// A hash of `head`, the prelude's digest, and each file's name and bytes (or why it could not be
/// read), each part length-prefixed: 32 hex digits.
fn digest<'a>(
    head: &[&[u8]],
    files: impl Iterator<Item = (String, &'a Result<Vec<u8>, String>)>,
) -> String {
    let mut bytes = Vec::new();
    let mut put = |b: &[u8]| {
        bytes.extend_from_slice(&(b.len() as u64).to_le_bytes());
        bytes.extend_from_slice(b);
    };
    head.iter().for_each(|part| put(part));
    put(hir::PRELUDE_DIGEST.as_bytes());
    for (name, read) in files {
        put(name.as_bytes());
        match read {
            Ok(bytes) => put(bytes),
            Err(why) => put(format!("\0unreadable: {why}").as_bytes()),
        }
    }
    // Two different 64-bit hashes of the same bytes: a collision of both is beyond
    // any accident.
    let a = native_module::checksum(&bytes);
    bytes.reverse();
    let b = native_module::checksum(&bytes);
    format!("{a:016x}{b:016x}")
}

fn entry(key: &str) -> PathBuf {
    dir().join(format!("{key}.sapm"))
}

/// The entry of `key`: `Ok(None)` when there is none, `Err(why)` when there is one
/// that cannot be used.
pub fn load(key: &str) -> Result<Option<NativeModule>, String> {
    let path = entry(key);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    native_module::read(&file, key)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Stores the native module of `module` under `key`.
pub fn store(key: &str, module: &ir::Module, program: &NativeProgram) -> Result<PathBuf, String> {
    let bytes = native_module::write(key, module, program)?;
    let dir = dir();
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot create the build cache {}: {e}", dir.display()))?;
    let path = entry(key);
    // A name no other writer uses, then one rename: concurrent builds of the same
    // program each write a whole entry, and the last rename wins.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{key}.{}.{}.tmp",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::write(&tmp, &bytes).and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "cannot write the build cache in {}: {e}",
            dir.display()
        ));
    }
    Ok(path)
}
