//! Adapter throughput on ~100 MB JSON Lines traces, next to a plain serde_json parse of the
//! same file.
//!
//! `cargo bench --bench adapters_events` (release). At bench time it writes, in a temporary folder,
//! one ~100 MB trace per streamed JSON Lines format by repeating a real sample's lines
//! (`../shared/traces`): Claude Code, Codex, OpenHands SDK events. For each it prints
//! * the plain parse: every line read and parsed into a `serde_json::Value`, nothing kept,
//! * the adapter: `sage_adapters::normalize` with the format forced (no detection),
//!
//! as MB/s, the canonical trace's counts, and the process's peak resident memory after the
//! adapter ran (the file is streamed line by line, so the peak stays near the size of the
//! canonical trace plus one line, not twice the file).
//!
//! Set `SAGE_BENCH_MB` to change the size (default 100).

use sage_adapters::SourceFile;
use std::io::{BufRead, Write};
use std::time::Instant;

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/traces");

fn build(
    dir: &std::path::Path,
    name: &str,
    sample: &str,
    mb: usize,
) -> (std::path::PathBuf, usize) {
    let src = std::fs::read_to_string(format!("{TRACES}/{sample}")).unwrap();
    let lines: Vec<&str> = src.lines().filter(|l| !l.trim().is_empty()).collect();
    let path = dir.join(name);
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let target = mb * 1024 * 1024;
    let mut written = 0usize;
    while written < target {
        for l in &lines {
            f.write_all(l.as_bytes()).unwrap();
            f.write_all(b"\n").unwrap();
            written += l.len() + 1;
        }
    }
    f.flush().unwrap();
    (path, written)
}

fn plain_parse(path: &std::path::Path) -> usize {
    let r = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut n = 0;
    for l in r.lines() {
        let l = l.unwrap();
        if l.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        std::hint::black_box(&v);
        n += 1;
    }
    n
}

fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = l.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() {
    let mb: usize = std::env::var("SAGE_BENCH_MB")
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(100);
    let dir = tempfile::tempdir().unwrap();
    println!("adapter throughput on ~{mb} MB JSON Lines traces (repeated real samples)");
    println!(
        "{:<14} {:>8} {:>12} {:>12} {:>9} {:>9} {:>10}",
        "format", "MB", "parse MB/s", "adapter MB/s", "turns", "writes", "peak RSS"
    );
    for (fw, sample) in [
        (
            "claude-code",
            "claude-code/coverage-test-fix.transcript.jsonl",
        ),
        (
            "openhands-sdk",
            "openhands-sdk/sdk_fixture_goal_events.jsonl",
        ),
        ("codex", "codex/simonw_sample_codex_session.jsonl"),
    ] {
        let (path, bytes) = build(dir.path(), &format!("{fw}.jsonl"), sample, mb);
        let size = bytes as f64 / (1024.0 * 1024.0);
        let t0 = Instant::now();
        let lines = plain_parse(&path);
        let parse = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let t = sage_adapters::normalize(
            &[SourceFile::new(format!("{fw}.jsonl"), &path)],
            &sage_adapters::NormalizeOptions::framework(Some(fw)),
        )
        .unwrap();
        let adapt = t1.elapsed().as_secs_f64();
        let c = t.counts();
        drop(t);
        println!(
            "{:<14} {:>8.1} {:>12.1} {:>12.1} {:>9} {:>9} {:>9.0}M   ({lines} lines)",
            fw,
            size,
            size / parse,
            size / adapt,
            c.turns,
            c.writes,
            peak_rss_mb().unwrap_or(f64::NAN),
        );
        std::fs::remove_file(&path).ok();
    }
}
