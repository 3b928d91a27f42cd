//! `sage case check` on a large baseline (issue 30): how its time grows with the baseline's
//! lines, so that a superlinear step shows. Prints figures; asserts nothing about time.
//!
//! Run: `cargo bench --bench case_check`. A case of `corpora/` (`ag2-defect-systemrandom`)
//! is copied into a temporary folder with its baseline padded by N short lines, for N in
//! `SAGE_BENCH_LINES` (comma-separated, default `50000,100000,200000`), in two shapes: comment
//! lines (`# xxxx`: tree-sitter-python reads ahead over every following comment line at each
//! line end, which made the check quadratic) and code lines (`x1 = 1`). Each run is killed
//! after `SAGE_BENCH_LIMIT` seconds (default 120) and shown as `> LIMIT s`.
//! `SAGE_BENCH_BIN=PATH` measures another build of sage (e.g. main's, for the "before"
//! figures).

use sage_sandbox::child;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const CASE: &str = "ag2-defect-systemrandom";

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

/// The seconds `sage case check` takes on `case`; `None` when it passed `limit`.
fn check(sage: &str, case: &Path, limit: Duration) -> Option<f64> {
    let mut cmd = child::command(sage);
    cmd.args(["case", "check"])
        .arg(case)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let t = Instant::now();
    let ran = child::run(cmd, limit, child::Capture::Nothing).expect("sage starts");
    let secs = t.elapsed().as_secs_f64();
    match ran.end {
        child::End::Exited(st) => {
            // 0: no problem, 1: problems found; both are a finished check
            assert!(matches!(st.code(), Some(0 | 1)), "sage case check: {st}");
            Some(secs)
        }
        _ => None,
    }
}

fn main() {
    let sage =
        std::env::var("SAGE_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_sage").to_string());
    let lines: Vec<usize> = std::env::var("SAGE_BENCH_LINES")
        .unwrap_or_else(|_| "50000,100000,200000".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let limit = Duration::from_secs(
        std::env::var("SAGE_BENCH_LIMIT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(120),
    );
    let dir = tempfile::tempdir().unwrap();
    println!("sage: {sage}");
    for shape in ["comment", "code"] {
        let mut row = Vec::new();
        for &n in &lines {
            let case = dir.path().join(format!("{shape}-{n}"));
            copy_dir(&Path::new(ROOT).join("corpora").join(CASE), &case);
            let base = case.join("baseline/app.py");
            let mut text = std::fs::read_to_string(&base).unwrap();
            for i in 0..n {
                match shape {
                    "comment" => text.push_str("# xxxx\n"),
                    _ => text.push_str(&format!("x{i} = {i}\n")),
                }
            }
            std::fs::write(&base, text).unwrap();
            row.push(match check(&sage, &case, limit) {
                Some(s) => format!("{n} lines {s:.2} s ({:.1} µs/line)", s * 1e6 / n as f64),
                None => format!("{n} lines > {} s (killed)", limit.as_secs()),
            });
        }
        println!("case check, baseline + {shape} lines: {}", row.join("; "));
    }
}
