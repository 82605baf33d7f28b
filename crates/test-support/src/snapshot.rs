//! Snapshot assertions: rendered output (prompts, schemas, requests) compared with a file
//! that is reviewed like code. `UPDATE_SNAPSHOTS=1` writes the files.

use std::path::Path;

/// Compares `actual` with the file `dir/name`; writes it when `UPDATE_SNAPSHOTS` is set
/// or the file does not exist yet (and then fails, so a new snapshot is always looked at).
pub fn assert_snapshot(dir: &Path, name: &str, actual: &str) {
    let path = dir.join(name);
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    match std::fs::read_to_string(&path) {
        Ok(expected) if !update => {
            assert!(
                expected == actual,
                "snapshot {} differs (UPDATE_SNAPSHOTS=1 to accept)\n--- expected\n{expected}\n--- actual\n{actual}",
                path.display()
            );
        }
        existing => {
            std::fs::create_dir_all(dir).expect("create the snapshot directory");
            std::fs::write(&path, actual).expect("write the snapshot");
            assert!(
                update || existing.is_ok(),
                "new snapshot {} written: review it and run again",
                path.display()
            );
        }
    }
}
