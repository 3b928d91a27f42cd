//! Helpers shared by the test modules.

use std::path::Path;

/// Copy the folder `from` (files and subfolders) to `to`, e.g. a bundled case into a
/// temporary corpus that a test may write into. File contents only: a read-only source (the
/// `../shared` CI lays out without write bits) gives writable copies.
pub fn copy_dir(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(from).unwrap();
        let dest = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::write(&dest, std::fs::read(e.path()).unwrap()).unwrap();
        }
    }
}
