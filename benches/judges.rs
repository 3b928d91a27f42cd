//! Judge benchmarks (prints figures; no timing assertions anywhere):
//! 1. scored turns per second through the real HTTP client against the fake server on
//!    127.0.0.1 at 1 s simulated latency, concurrency 64;
//! 2. prompt tokens per trace, shared-prefix layout vs the naive layout, on the bundled
//!    corpus traces: total, and the part a provider's prefix cache cannot serve.
//!
//! Run: `cargo bench --profile dev --bench judges` (I/O-bound: the dev profile is enough).
//! Options via environment: SAGE_BENCH_TURNS (default 640), SAGE_BENCH_CONCURRENCY (64),
//! SAGE_BENCH_LATENCY_MS (1000).

use sage_judge::concurrent::{score_traces_concurrently, ScoreItem, ScoreOptions};
use sage_judge::llm::prompt::{estimate_tokens, Rubric};
use sage_judge::llm::{LlmJudge, SessionParts};
use sage_judge::{Judge, TurnRequest};
use sage_llm::fake::FakeServer;
use sage_llm::{ApiKey, LlmSettings, Provider};
use sage_trace::case::TaskContext;
use sage_trace::{Actor, CanonicalTrace, RawRef, RawStore, TextItem, Turn, TurnKind};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn synthetic_trace(name: &str, n: usize) -> (CanonicalTrace, RawStore) {
    let mut t = CanonicalTrace::new("bench", vec![format!("{name}.md")]);
    let mut raw = String::new();
    for i in 1..=n {
        let text = format!(
            "{name} turn {i}: I will check the redirect target against the allow-list before calling redirect(); {}",
            "the handler reads the next parameter from the query string. ".repeat(4)
        );
        raw.push_str(&text);
        raw.push('\n');
        let mut turn = Turn::new(Actor::new("coder", None), TurnKind::Implementation);
        turn.message = Some(TextItem {
            text,
            raw: RawRef::lines(&format!("{name}.md"), i, i),
        });
        t.push_turn(turn);
    }
    let mut s = RawStore::new();
    s.insert(&format!("{name}.md"), raw.into_bytes());
    (t, s)
}

fn throughput() {
    let turns = env_num("SAGE_BENCH_TURNS", 640) as usize;
    let conc = env_num("SAGE_BENCH_CONCURRENCY", 64) as usize;
    let latency = Duration::from_millis(env_num("SAGE_BENCH_LATENCY_MS", 1000));
    let per_trace = 20;
    let traces: Vec<_> = (0..turns.div_ceil(per_trace))
        .map(|i| synthetic_trace(&format!("t{i}"), per_trace))
        .collect();
    let server = FakeServer::start(latency);
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let mut s = LlmSettings::from_env(provider, "bench-model", &sage_llm::Env::default());
        s.base_url = match provider {
            Provider::OpenAi => server.openai_base(),
            Provider::Anthropic => server.anthropic_base(),
        };
        s.api_key = ApiKey::new("bench-key");
        let parts = SessionParts::default(); // no ledger: every turn is a real HTTP call
        let stats = parts.stats.clone();
        let judge: Arc<dyn Judge> = Arc::new(LlmJudge::new(s, parts).expect("judge"));
        let task = TaskContext {
            id: "bench".into(),
            description: "Fix the open redirect.".into(),
            cwe: Some("CWE-601".into()),
            cve: None,
        };
        let items: Vec<ScoreItem> = traces
            .iter()
            .map(|(t, st)| ScoreItem {
                id: "bench",
                task: &task,
                trace: t,
                store: st,
            })
            .collect();
        let opts = ScoreOptions {
            concurrency: std::num::NonZeroUsize::new(conc).unwrap(),
            runs: std::num::NonZeroU32::MIN,
            max_attempts: std::num::NonZeroU32::new(3).unwrap(),
            progress: None,
            stats: Some(stats.clone()),
            ..Default::default()
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let t0 = Instant::now();
        let out = rt.block_on(score_traces_concurrently(&[judge], &items, &opts));
        let secs = t0.elapsed().as_secs_f64();
        let scored: usize = out
            .scores
            .iter()
            .flatten()
            .flatten()
            .map(|ts| ts.turns.iter().filter(|o| o.scored().is_some()).count())
            .sum();
        println!(
            "throughput {:9}: {scored} turns scored (of {}) in {secs:.2} s at {} ms latency, concurrency {conc}: {:.1} turns/s (ideal {:.1})",
            provider.name(),
            traces.len() * per_trace,
            latency.as_millis(),
            scored as f64 / secs,
            conc as f64 / latency.as_secs_f64().max(1e-9),
        );
    }
}

/// Tokens a prefix cache cannot serve for `cur` given the previous request `prev` of the same
/// trace: OpenAI caches in 128-token steps once 1,024 tokens match (Anthropic is similar at
/// block boundaries), so count the matched prefix the same way.
fn uncached(prev: Option<&str>, cur: &str) -> u64 {
    let total = estimate_tokens(cur);
    let Some(p) = prev else { return total };
    let lcp = p
        .bytes()
        .zip(cur.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    let lcp_tok = (lcp as u64) / 4;
    let cached = if lcp_tok < 1024 {
        0
    } else {
        1024 + (lcp_tok - 1024) / 128 * 128
    };
    total - cached.min(total)
}

fn prompt_tokens() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora");
    let dirs = sage_trace::case::discover(&corpus).unwrap_or_default();
    let rubric = Rubric::embedded();
    let mut rows = Vec::new();
    let mut prepared = Vec::new();
    for d in &dirs {
        match sage_pipeline::localize::prepare(d, &Default::default()) {
            Ok((p, _)) => prepared.push((p.case.id.clone(), p.case.task().clone(), p.trace)),
            Err(s) => eprintln!("skipped {}: {}", s.case, s.message),
        }
    }
    // Long synthetic traces too: the corpus traces are short.
    for n in [20usize, 60] {
        let (t, _) = synthetic_trace(&format!("synthetic-{n}"), n);
        prepared.push((format!("synthetic-{n}-turns"), TaskContext::default(), t));
    }
    for (id, task, trace) in &prepared {
        let (mut shared_total, mut naive_total, mut shared_unc, mut naive_unc) = (0, 0, 0, 0);
        let (mut prev_s, mut prev_n): (Option<String>, Option<String>) = (None, None);
        let mut requests = 0;
        for k in 1..=trace.turns.len() {
            let Some(req) = TurnRequest::prefix(task, trace, k) else {
                continue;
            };
            if !req.target().is_applicable() {
                continue;
            }
            requests += 1;
            let p = rubric.render(&req);
            let shared = format!("{}{}", p.system, p.user_text());
            let naive = format!("{}{}", p.system, p.naive_user_text());
            shared_total += estimate_tokens(&shared);
            naive_total += estimate_tokens(&naive);
            shared_unc += uncached(prev_s.as_deref(), &shared);
            naive_unc += uncached(prev_n.as_deref(), &naive);
            prev_s = Some(shared);
            prev_n = Some(naive);
        }
        rows.push((
            id.clone(),
            requests,
            shared_total,
            shared_unc,
            naive_total,
            naive_unc,
        ));
    }
    println!(
        "{:<34} {:>4} {:>12} {:>12} {:>12} {:>12}",
        "trace", "reqs", "shared tok", "shared unc", "naive tok", "naive unc"
    );
    let mut sums = (0u64, 0u64, 0u64, 0u64);
    for (id, r, st, su, nt, nu) in &rows {
        println!("{id:<34} {r:>4} {st:>12} {su:>12} {nt:>12} {nu:>12}");
        sums.0 += st;
        sums.1 += su;
        sums.2 += nt;
        sums.3 += nu;
    }
    let n = rows.len().max(1) as u64;
    println!(
        "per trace (mean of {}): shared-prefix {} prompt tokens, {} not servable from cache; naive {} prompt tokens, {} not servable ({:.0}% fewer uncached tokens with the shared prefix)",
        rows.len(),
        sums.0 / n,
        sums.1 / n,
        sums.2 / n,
        sums.3 / n,
        100.0 * (1.0 - sums.1 as f64 / sums.3.max(1) as f64)
    );
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    prompt_tokens();
    throughput();
}
