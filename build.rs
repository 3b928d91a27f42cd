//! Records the commit sage is built from, for `sage --version` (`SAGE_COMMIT`): the short
//! hash, `-dirty` when the tree has uncommitted changes, `unknown` outside a git checkout
//! (a source tarball, `cargo install` from crates.io).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let from_env = std::env::var("SAGE_COMMIT").ok().filter(|c| !c.is_empty());
    let commit = from_env.unwrap_or_else(|| {
        git(&["rev-parse", "--short=12", "HEAD"]).map_or_else(
            || "unknown".to_string(),
            |c| match git(&["status", "--porcelain", "--untracked-files=no"]) {
                Some(s) if !s.is_empty() => format!("{c}-dirty"),
                _ => c,
            },
        )
    });
    println!("cargo:rustc-env=SAGE_COMMIT={commit}");
    // Re-run when HEAD moves (a commit, a checkout) or the index changes (dirty state).
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
    }
    if let Some(index) = git(&["rev-parse", "--git-path", "index"]) {
        println!("cargo:rerun-if-changed={index}");
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git(&["rev-parse", "--git-path", &r]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-env-changed=SAGE_COMMIT");
}
