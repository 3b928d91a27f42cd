//! `sage localize` with an LLM judge, end to end (prints figures; no timing assertions):
//! the real binary against the fake server on 127.0.0.1 at 1 s simulated latency.
//!
//! 1. Throughput: scored turns per second on one 200-turn trace and on the bundled corpus,
//!    at `--concurrency` 1, 16 and 64.
//! 2. Context budget: prompt tokens sent per trace versus the trace's own tokens, for 20-,
//!    200- and 2,000-turn traces under a 32,000-token `context_tokens`, the largest request
//!    against the budget, and peak memory of the sage process.
//! 3. The longest real trace bundled in ../shared (a Claude Code session), under the same
//!    budget: every turn scored or context-overflow, never a request over the budget.
//!
//! Run: `cargo bench --bench localize_llm` (optimized: an unoptimized build is CPU-bound on
//! building request bodies before it is latency-bound). SAGE_BENCH_LATENCY_MS (default 1000), SAGE_BENCH_QUICK=1 skips concurrency 1.

use sage_llm::fake::FakeServer;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const KEY: &str = "sk-bench";
const CONTEXT: u64 = 32_000;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &p);
        } else {
            std::fs::copy(e.path(), p).unwrap();
        }
    }
}

/// The bundled open-redirect case with `n` extra planner messages (about 600 bytes each)
/// before its last three; returns the case folder and the trace's own tokens (bytes / 4).
fn long_case(root: &Path, n: usize) -> (PathBuf, u64) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/ag2-open-redirect-prefix");
    let dir = root.join(format!("long-{n}"));
    copy_dir(&src, &dir);
    let mut chat: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("chat.json")).unwrap()).unwrap();
    let h = chat["chat_history"].as_array_mut().unwrap();
    let tail = h.split_off(h.len() - 3);
    for i in 1..=n {
        h.push(serde_json::json!({
            "role": "user",
            "name": if i % 2 == 0 { "planner" } else { "reviewer" },
            "content": format!(
                "Step {i}: the redirect target must be checked against the allow-list before redirect() is called. {}",
                "We read next from the query string, normalise it and compare the host. ".repeat(7)
            ),
        }));
    }
    h.extend(tail);
    let text = serde_json::to_string_pretty(&chat).unwrap();
    std::fs::write(dir.join("chat.json"), &text).unwrap();
    let mut case: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap()).unwrap();
    case.as_object_mut().unwrap().remove("expected");
    case["id"] = serde_json::json!(format!("long-{n}"));
    std::fs::write(dir.join("case.json"), case.to_string()).unwrap();
    (dir, (text.len() as u64).div_ceil(4))
}

/// A case around the longest Claude Code session in ../shared, if present.
fn real_case(root: &Path) -> Option<(PathBuf, u64)> {
    let trace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/traces/claude-code/spotter-fum.8463c716.jsonl");
    if !trace.is_file() {
        println!("../shared absent: skipping the real-trace run");
        return None;
    }
    let dir = root.join("spotter-fum");
    std::fs::create_dir_all(dir.join("baseline")).unwrap();
    std::fs::copy(&trace, dir.join("trace.jsonl")).unwrap();
    std::fs::write(dir.join("baseline/transcript_renderer.ex"), "").unwrap();
    let case = serde_json::json!({
        "schema": "sage.case/1", "id": "spotter-fum",
        "trace": {"files": ["trace.jsonl"], "framework": "claude-code"},
        "baseline": {"lib/spotter/services/transcript_renderer.ex": "baseline/transcript_renderer.ex"},
        "task": {"id": "spotter-fum", "description": "Claude Code session on the spotter project.", "cwe": "CWE-400"},
        "anchor": {"artefact": "lib/spotter/services/transcript_renderer.ex", "fragment": "@max_result_lines 5",
                   "category": "defence-absent", "cwe": "CWE-400",
                   "description": "constructed anchor: this run measures the judge, not the origin"},
    });
    std::fs::write(dir.join("case.json"), case.to_string()).unwrap();
    let len = std::fs::metadata(&trace).unwrap().len();
    Some((dir, len.div_ceil(4)))
}

struct Run {
    secs: f64,
    scored: usize,
    overflow: usize,
    failed: usize,
    prompt_tokens: u64,
    cached_tokens: u64,
    max_rss_mb: f64,
    exit: Option<i32>,
}

/// `sage localize DIR --judge bench` under /usr/bin/time (peak RSS), returning what the
/// result set and the cost summary say.
fn localize(work: &Path, dir: &Path, base: &str, concurrency: usize) -> Run {
    let out_json = work.join("out.json");
    let started = Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("SAGE_BENCH_MAXRSS_KB=%M")
        .arg(env!("CARGO_BIN_EXE_sage"))
        .current_dir(work)
        .env("SAGE_BENCH_KEY", KEY)
        .env("OPENAI_BASE_URL", base)
        .args(["localize"])
        .arg(dir)
        .args([
            "--judge",
            "bench",
            "--no-ledger",
            "--no-write",
            "--no-progress",
        ])
        .args(["--concurrency", &concurrency.to_string(), "--output"])
        .arg(&out_json)
        .output()
        .expect("run sage under /usr/bin/time");
    let secs = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let grab = |prefix: &str| -> u64 {
        stderr
            .lines()
            .find_map(|l| l.split_once(prefix).map(|(_, r)| r))
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let cached = stderr
        .lines()
        .find_map(|l| l.split_once(" prompt (").map(|(_, r)| r))
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let mut run = Run {
        secs,
        scored: 0,
        overflow: 0,
        failed: 0,
        prompt_tokens: grab("tokens (new calls): "),
        cached_tokens: cached,
        max_rss_mb: grab("SAGE_BENCH_MAXRSS_KB=") as f64 / 1024.0,
        exit: out.status.code(),
    };
    if let Ok(text) = std::fs::read_to_string(&out_json) {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for r in v["results"].as_array().into_iter().flatten() {
            for s in r["scores"].as_array().into_iter().flatten() {
                match s["status"].as_str() {
                    Some("scored") => run.scored += 1,
                    Some("context-overflow") => run.overflow += 1,
                    Some("failed") => run.failed += 1,
                    _ => {}
                }
            }
        }
    }
    if run.exit != Some(0) {
        eprintln!("{stderr}");
    }
    run
}

fn main() {
    let latency = Duration::from_millis(env_num("SAGE_BENCH_LATENCY_MS", 1000));
    let quick = std::env::var("SAGE_BENCH_QUICK").is_ok();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("sage.toml"),
        format!(
            "[judges.bench]\nbackend = \"openai\"\nmodel = \"gpt-4.1-mini\"\n\
             api_key_env = \"SAGE_BENCH_KEY\"\ncontext_tokens = {CONTEXT}\n"
        ),
    )
    .unwrap();
    let server = FakeServer::start(latency);
    let base = server.openai_base();
    println!(
        "sage localize --judge openai:gpt-4.1-mini (context_tokens {CONTEXT}) against the fake server, {} ms latency",
        latency.as_millis()
    );

    println!("\n1. throughput (scored turns per second, wall clock of the whole command)");
    println!("| input | concurrency | turns scored | seconds | turns/s | turns/s ÷ concurrency |");
    println!("|---|---|---|---|---|---|");
    let (one, _) = long_case(&work.path().join("one"), 200);
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora");
    for (name, dir) in [("one 200-turn trace", &one), ("bundled corpus", &corpus)] {
        for c in [1usize, 16, 64] {
            if quick && c == 1 {
                continue;
            }
            let r = localize(work.path(), dir, &base, c);
            let tps = r.scored as f64 / r.secs;
            println!(
                "| {name} | {c} | {} | {:.1} | {:.1} | {:.2} |",
                r.scored,
                r.secs,
                tps,
                tps / (c.min(r.scored.max(1))) as f64
            );
        }
    }

    println!("\n2. prompt tokens per trace under the budget (concurrency 64)");
    println!("| trace | turns scored | context-overflow | seconds | trace tokens | prompt tokens sent | sent ÷ trace | cached | largest request (tokens) | peak RSS MB |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut rows: Vec<(String, PathBuf, u64)> = [20usize, 200, 2_000]
        .iter()
        .map(|&n| {
            let (d, t) = long_case(&work.path().join(format!("l{n}")), n);
            (format!("synthetic, {n} extra turns"), d, t)
        })
        .collect();
    if let Some((d, t)) = real_case(&work.path().join("real")) {
        rows.push(("Claude Code spotter-fum (1,320 turns)".into(), d, t));
    }
    for (name, dir, own) in rows {
        let before = server.requests().len();
        let r = localize(work.path(), &dir, &base, 64);
        let reqs = server.requests();
        let largest = reqs[before..]
            .iter()
            .map(|q| (q.body.len() as u64).div_ceil(4))
            .max()
            .unwrap_or(0);
        println!(
            "| {name} | {} | {} | {:.1} | {own} | {} | {:.1} | {} | {largest} (budget {}) | {:.0} |",
            r.scored,
            r.overflow,
            r.secs,
            r.prompt_tokens,
            r.prompt_tokens as f64 / own as f64,
            r.cached_tokens,
            CONTEXT - 2048,
            r.max_rss_mb
        );
        assert!(largest <= CONTEXT - 2048, "a request exceeded the budget");
        if r.failed > 0 || r.exit.is_some_and(|c| c > 1) {
            println!("  ({} scoring failures, exit {:?})", r.failed, r.exit);
        }
    }
}
