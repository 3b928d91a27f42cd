//! Benchmark: per-case time of B-SZZ (the whole variant: resolve, diff, blame, parse,
//! commit metadata) against plain `git blame --porcelain` of the same lines, run directly
//! with no parsing. The difference is sage's overhead over git itself.

use crate::blame::line_ranges;
use crate::variants::{impacted_files, load_fix, Options};
use crate::{find_inducing, Git, SzzError, Variant};
use sage_sandbox::child;
use std::process::Stdio;
use std::time::Instant;

/// One benchmarked fix (published through `schema::BenchRow`).
#[derive(Debug, Clone)]
pub struct BenchRow {
    pub fix: String,
    pub files: usize,
    pub lines: usize,
    pub candidates: usize,
    /// Median over the runs, milliseconds.
    pub bszz_ms: f64,
    pub blame_ms: f64,
    pub git_calls: u64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

/// Time one fix `runs` times each way (after one warm-up run of each).
pub fn bench_fix(git: &Git, fix: &str, runs: std::num::NonZeroUsize) -> Result<BenchRow, SzzError> {
    let opts = Options::default();
    let loaded = load_fix(git, fix)?;
    let mut notes = Vec::new();
    let impacted = impacted_files(&loaded, &opts, &mut notes);
    let lines: usize = impacted.iter().map(|i| i.lines.len()).sum();
    let plain = || -> Result<(), SzzError> {
        for imp in &impacted {
            let nums: Vec<usize> = imp.lines.iter().map(|(n, _)| *n).collect();
            let mut cmd = child::command("git");
            cmd.arg("--git-dir")
                .arg(git.git_dir())
                .args(["blame", "--no-textconv", "--porcelain"]);
            for (a, b) in line_ranges(&nums) {
                cmd.arg("-L").arg(format!("{a},{b}"));
            }
            cmd.arg(&loaded.parent).arg("--").arg(&imp.path);
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            // within the repository's git time limit, as sage's own calls are
            let ran = child::run(cmd, git.timeout(), child::Capture::Nothing)
                .map_err(|e| SzzError::Spawn(e.to_string()))?;
            let args = || format!("blame {} -- {}", loaded.parent, imp.path);
            let st = match ran.end {
                child::End::Exited(st) => st,
                _ => {
                    return Err(SzzError::Timeout {
                        args: args(),
                        secs: git.timeout().as_secs_f64(),
                    })
                }
            };
            if !st.success() {
                return Err(SzzError::Git {
                    args: args(),
                    stderr: "failed".into(),
                });
            }
        }
        Ok(())
    };
    // warm-up (page cache, commit-graph)
    plain()?;
    let warm = find_inducing(git, fix, Variant::B, &opts, None)?;
    let mut b_times = Vec::new();
    let mut p_times = Vec::new();
    let mut calls = warm.git_calls;
    for _ in 0..runs.get() {
        // a fresh handle so metadata caches do not carry over between runs
        let g = Git::open(git.git_dir(), git.timeout())?.with_max_output(git.max_output());
        let t = Instant::now();
        let r = find_inducing(&g, fix, Variant::B, &opts, None)?;
        b_times.push(t.elapsed().as_secs_f64() * 1000.0);
        calls = r.git_calls;
        let t = Instant::now();
        plain()?;
        p_times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(BenchRow {
        fix: loaded.hash,
        files: impacted.len(),
        lines,
        candidates: warm.candidates.len(),
        bszz_ms: median(b_times),
        blame_ms: median(p_times),
        git_calls: calls,
    })
}
