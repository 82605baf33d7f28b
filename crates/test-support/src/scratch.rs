//! Folders of a test's own under the system's temporary directory.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// An empty folder for one test, `sap-NAME-PID-N` under the temporary directory (`N`
/// counts the folders this process made, so tests running at once never share one);
/// removed with everything in it when the value is dropped, also when the test fails,
/// so runs leave nothing behind.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("sap-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot make {}: {e}", dir.display()));
        Scratch(dir)
    }
}

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::Scratch;

    #[test]
    fn scratch_folders_are_apart_empty_and_gone_when_dropped() {
        let (a, b) = {
            let a = Scratch::new("scratch-test");
            let b = Scratch::new("scratch-test");
            assert_ne!(*a, *b);
            assert!(a.read_dir().unwrap().next().is_none(), "made empty");
            std::fs::write(a.join("x"), "x").unwrap();
            std::fs::create_dir(b.join("sub")).unwrap();
            std::fs::write(b.join("sub/y"), "y").unwrap();
            (a.to_path_buf(), b.to_path_buf())
        };
        for p in [a, b] {
            assert!(!p.exists(), "{} is left behind", p.display());
        }
    }
}
