//! What a test needs from outside the repository: the read-only data in `../shared` and
//! optional tools (Bandit, Chromium).
//!
//! On a clone without them a test returns early after printing one line naming what is
//! missing, so `cargo test` passes with nothing but Rust. CI has everything, so there
//! (`CI` set to anything but `false`/`0`) a missing input fails the test instead: a skip in CI
//! would hide a regression.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// `../shared` beside the repository; `SAGE_SHARED` overrides it (the `.ci/fresh-clone`
/// script and a quick local check use it to pretend it is absent).
pub fn shared_root() -> PathBuf {
    match std::env::var_os("SAGE_SHARED") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"),
    }
}

/// `../shared/<rel>`.
pub fn shared_path(rel: &str) -> PathBuf {
    shared_root().join(rel)
}

/// Whether this run is CI, where nothing may be skipped.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Report a skip: one line on the real stderr (libtest captures `eprintln!` of passing tests,
/// so it would never be seen), or a failure in CI.
pub fn skip(what: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    if in_ci() {
        panic!("{test}: {what}; CI must run every test (CI is set)");
    }
    // Once per test and reason (a property test asks once per generated case).
    static SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let fresh = SEEN
        .lock()
        .map(|mut s| s.insert(format!("{test}\0{what}")))
        .unwrap_or(true);
    if fresh {
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {what}");
    }
}

/// True, after reporting the skip, when `../shared/<rel>` is absent. Usage:
/// `if need::missing_shared("traces") { return; }`
pub fn missing_shared(rel: &str) -> bool {
    let p = shared_path(rel);
    if p.exists() {
        return false;
    }
    skip(&format!(
        "needs {} (../shared/{rel}), which is missing",
        p.display()
    ));
    true
}
