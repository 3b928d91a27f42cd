//! LLM judges against a fake server on 127.0.0.1 speaking both APIs, with injected faults.

use crate::support::copy_dir;
use sage_judge::concurrent::{score_traces_concurrently, ScoreItem, ScoredBatch};
use sage_judge::config::Config;
use sage_judge::spec::{BuiltJudge, JudgeOptions, JudgeSession};
use sage_judge::{verify_judgment, JudgeError, TurnOutcome};
use sage_llm::fake::{Captured, FakeServer, Fault};
use sage_llm::http::RetryPolicy;
use sage_trace::case::TaskContext;
use sage_trace::{Actor, CanonicalTrace, RawRef, RawStore, TextItem, Turn, TurnKind};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const KEY: &str = "sk-test-SENTINEL-KEY-7f3a9";
const ANCHOR_SENTINEL: &str = "ANCHOR-SENTINEL-zq81";

/// A trace whose turn i says `MARK-<i>-` so any leak of a later turn is visible.
fn trace(name: &str, n: usize) -> (CanonicalTrace, RawStore) {
    let mut t = CanonicalTrace::new("test", vec![format!("{name}.md")]);
    let mut raw = String::new();
    for i in 1..=n {
        let kind = if i == 2 {
            TurnKind::Administrative
        } else {
            TurnKind::Implementation
        };
        let text = format!("MARK-{i}- we should validate the redirect target in {name} turn {i}");
        raw.push_str(&text);
        raw.push('\n');
        let mut turn = Turn::new(Actor::new("coder", Some("assistant")), kind);
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

fn task() -> TaskContext {
    TaskContext {
        id: "CWE-601_demo".into(),
        description: "Fix the open redirect in login().".into(),
        cwe: Some("CWE-601".into()),
        cve: None,
    }
}

fn config() -> Config {
    Config::parse(
        r#"
[judges.fake-openai]
backend = "openai"
model = "fake-model"
api_key_env = "SAGE_TEST_NEVER_SET"

[prices.fake-model]
input = 1000.0
output = 1000.0
"#,
        "sage.toml",
    )
    .unwrap()
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 4,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(50),
        max_retry_after: Duration::from_secs(2),
        ..Default::default()
    }
}

struct Setup {
    session: JudgeSession,
    judge: BuiltJudge,
    concurrency: std::num::NonZeroUsize,
}

/// A session whose judge talks to `base` with `KEY`, keyed through the settings directly
/// (tests never set process-wide environment variables).
fn setup(spec: &str, base: &str, ledger: &Path, tweak: impl FnOnce(&mut JudgeOptions)) -> Setup {
    setup_with(spec, base, ledger, 8, tweak)
}

/// [`setup`] scoring `concurrency` requests at once.
fn setup_with(
    spec: &str,
    base: &str,
    ledger: &Path,
    concurrency: usize,
    tweak: impl FnOnce(&mut JudgeOptions),
) -> Setup {
    let mut o = JudgeOptions {
        ledger_dir: Some(ledger.to_path_buf()),
        timeout: Some(Duration::from_millis(800)),
        retry: Some(fast_retry()),
        ..Default::default()
    };
    tweak(&mut o);
    let session = JudgeSession::new(&config(), o).unwrap();
    let parsed = sage_judge::spec::JudgeSpec::parse(spec).unwrap();
    let mut s = session.llm_settings(&parsed).unwrap().unwrap();
    s.base_url = base.to_string();
    s.api_key = sage_llm::ApiKey::new(KEY);
    let llm = Arc::new(sage_judge::llm::LlmJudge::new(s, session.parts.clone()).unwrap());
    Setup {
        judge: BuiltJudge {
            judge: llm.clone(),
            llm: Some(llm),
        },
        session,
        concurrency: std::num::NonZeroUsize::new(concurrency).unwrap(),
    }
}

fn score(st: &Setup, traces: &[(CanonicalTrace, RawStore)], runs: u32) -> ScoredBatch {
    let t = task();
    let items: Vec<ScoreItem> = traces
        .iter()
        .map(|(tr, s)| ScoreItem {
            id: "case",
            task: &t,
            trace: tr,
            store: s,
        })
        .collect();
    let mut opts = st.session.score_options(st.concurrency);
    opts.runs = std::num::NonZeroU32::new(runs).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(score_traces_concurrently(
        std::slice::from_ref(&st.judge.judge),
        &items,
        &opts,
    ))
}

/// The turn a captured request scores.
fn scored_turn(c: &Captured) -> usize {
    let at = c.body.rfind("Score turn ").expect("instruction present");
    c.body[at + 11..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

fn grep_dir(dir: &Path, needle: &str) -> Vec<String> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            std::fs::read(e.path())
                .map(|b| String::from_utf8_lossy(&b).contains(needle))
                .unwrap_or(false)
        })
        .map(|e| e.path().display().to_string())
        .collect()
}

/// Every applicable turn scored exactly once per run, and every accepted quote verifies
/// against the raw trace when checked again here.
fn assert_complete_and_verified(
    out: &ScoredBatch,
    traces: &[(CanonicalTrace, RawStore)],
    runs: u32,
) {
    assert!(out.stopped.is_none(), "stopped: {:?}", out.stopped);
    for (i, (tr, store)) in traces.iter().enumerate() {
        for run in 0..runs {
            let ts = out.get(i, 0, run, runs).expect("complete");
            assert_eq!(ts.turns.len(), tr.turns.len());
            for (k, o) in ts.turns.iter().enumerate() {
                assert_eq!(o.turn(), k + 1);
                match o {
                    TurnOutcome::Scored(s) => {
                        assert_eq!(s.run, run);
                        verify_judgment(
                            store,
                            &tr.turns[k],
                            &s.judgment,
                            &sage_judge::injection::Rules::embedded(),
                        )
                        .expect("accepted quotes verify");
                        assert!(!s.quotes.is_empty(), "the fake judge quotes every turn");
                    }
                    TurnOutcome::Administrative { .. } => assert_eq!(k + 1, 2),
                    TurnOutcome::Failed { reason, .. } => panic!("turn {} failed: {reason}", k + 1),
                    TurnOutcome::ContextOverflow { .. } => panic!("turn {} overflowed", k + 1),
                }
            }
        }
    }
}

#[test]
fn no_later_turn_and_no_anchor_text_reaches_a_request_for_either_api() {
    // The case on disk has an anchor full of sentinels; only its task context is passed on.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("case/baseline")).unwrap();
    std::fs::write(dir.path().join("case/trace.md"), "x\n").unwrap();
    std::fs::write(dir.path().join("case/baseline/app.py"), "redirect(url)\n").unwrap();
    std::fs::write(
        dir.path().join("case/case.json"),
        format!(
            r#"{{"schema":"sage.case/1","id":"c1","trace":{{"files":["trace.md"]}},
            "baseline":{{"app.py":"baseline/app.py"}},
            "task":{{"id":"CWE-601_demo","description":"Fix the open redirect in login().","cwe":"CWE-601"}},
            "anchor":{{"artefact":"app.py","fragment":"{ANCHOR_SENTINEL}-fragment","category":"defence-absent",
                       "cwe":"CWE-601","description":"{ANCHOR_SENTINEL} redirect not validated"}}}}"#
        ),
    )
    .unwrap();
    let case = sage_trace::case::Case::load(&dir.path().join("case"), &Default::default()).unwrap();
    for spec in ["openai:fake-model", "anthropic:fake-model"] {
        let server = FakeServer::start(Duration::ZERO);
        let base = if spec.starts_with("openai") {
            server.openai_base()
        } else {
            server.anthropic_base()
        };
        let ledger = tempfile::tempdir().unwrap();
        let st = setup(spec, &base, ledger.path(), |_| {});
        let traces = vec![trace("a", 6)];
        let items = [ScoreItem {
            id: &case.id,
            task: case.task(),
            trace: &traces[0].0,
            store: &traces[0].1,
        }];
        let rt = tokio::runtime::Runtime::new().unwrap();
        let out = rt.block_on(score_traces_concurrently(
            std::slice::from_ref(&st.judge.judge),
            &items,
            &st.session.score_options(st.concurrency),
        ));
        assert_complete_and_verified(&out, &traces, 1);
        let reqs = server.requests();
        assert_eq!(reqs.len(), 5, "{spec}: one request per applicable turn");
        for r in &reqs {
            let k = scored_turn(r);
            assert!(!r.body.contains(ANCHOR_SENTINEL), "{spec}: anchor leaked");
            for j in 1..=6 {
                let mark = format!("MARK-{j}-");
                assert_eq!(
                    r.body.contains(&mark),
                    j <= k,
                    "{spec}: turn {j} in request for {k}"
                );
            }
            // the key travels only in the auth header
            assert!(!r.body.contains(KEY));
        }
        // the recorded hash is the hash of exactly the body that was sent
        let ts = out.get(0, 0, 0, 1).unwrap();
        let hashes: Vec<String> = reqs
            .iter()
            .map(|r| {
                use sha2::Digest;
                hex::encode(sha2::Sha256::digest(r.body.as_bytes()))
            })
            .collect();
        for s in ts.turns.iter().filter_map(TurnOutcome::scored) {
            assert!(
                hashes.contains(&s.prompt_hash),
                "{spec}: turn {} hash",
                s.turn
            );
        }
        let auth = reqs[0]
            .header("authorization")
            .or(reqs[0].header("x-api-key"))
            .unwrap();
        assert!(auth.contains(KEY));
    }
}

#[test]
fn faults_lose_no_score_duplicate_none_and_accept_none_unverified() {
    // First sight of each first-attempt body gets a fault, in rotation; retries are honest.
    let faults = [
        Fault::Status(429, Some(1)),
        Fault::Status(500, None),
        Fault::Hang(Duration::from_secs(3)),
        Fault::TruncatedBody,
        Fault::TruncatedJson,
        Fault::SchemaInvalid,
        Fault::FabricatedQuote,
        Fault::Slow(Duration::from_millis(200)),
        Fault::Status(503, None),
        Fault::None,
    ];
    let n_faults = faults.len();
    let plan = Arc::new(move |c: &Captured, n: usize, seen: usize| {
        if seen == 0 && !c.body.contains("# Correction") {
            faults[n % n_faults].clone()
        } else {
            Fault::None
        }
    });
    for (spec, anthropic) in [("openai:fake-model", false), ("anthropic:fake-model", true)] {
        let server = FakeServer::with_faults(Duration::ZERO, plan.clone());
        let base = if anthropic {
            server.anthropic_base()
        } else {
            server.openai_base()
        };
        let ledger = tempfile::tempdir().unwrap();
        let st = setup_with(spec, &base, ledger.path(), 16, |_| {});
        let traces: Vec<_> = (0..4).map(|i| trace(&format!("t{i}"), 7)).collect();
        let out = score(&st, &traces, 2);
        assert_complete_and_verified(&out, &traces, 2);
        // content faults cost a judgment retry; the fabricated quote was never accepted
        let scored: Vec<_> = (0..4)
            .flat_map(|i| (0..2).map(move |r| (i, r)))
            .flat_map(|(i, r)| out.get(i, 0, r, 2).unwrap().turns.clone())
            .filter_map(|o| o.scored().cloned())
            .collect();
        assert_eq!(scored.len(), 4 * 2 * 6);
        assert!(scored.iter().any(|s| s.attempts > 1), "{spec}");
        for s in &scored {
            assert!(s.judgment.di.score == 0, "{spec}: fabricated DI accepted");
        }
        // one ledger entry per accepted or rejected parsed answer, no duplicates
        let entries = grep_dir(ledger.path(), "sage.ledger/1");
        let ids: std::collections::HashSet<_> = entries.iter().collect();
        assert_eq!(ids.len(), entries.len());
        assert!(entries.len() >= scored.len());
        assert!(
            grep_dir(ledger.path(), KEY).is_empty(),
            "the key is on disk"
        );
        let stats = st.session.stats();
        assert!(
            stats
                .http_retries
                .load(std::sync::atomic::Ordering::Relaxed)
                > 0
        );
    }
}

#[test]
fn fabricated_quotes_every_time_make_a_scoring_failure_not_a_score() {
    let server =
        FakeServer::with_faults(Duration::ZERO, Arc::new(|_, _, _| Fault::FabricatedQuote));
    let ledger = tempfile::tempdir().unwrap();
    let st = setup(
        "openai:fake-model",
        &server.openai_base(),
        ledger.path(),
        |_| {},
    );
    let traces = vec![trace("a", 3)];
    let out = score(&st, &traces, 1);
    let ts = out.get(0, 0, 0, 1).unwrap();
    for k in [1, 3] {
        match ts.get(k).unwrap() {
            TurnOutcome::Failed {
                attempts, reason, ..
            } => {
                assert_eq!(*attempts, 3);
                assert!(reason.contains("does not occur verbatim"), "{reason}");
            }
            o => panic!("turn {k}: {o:?}"),
        }
    }
    assert_eq!(ts.failures(), vec![1, 3]);
}

#[test]
fn a_refused_key_stops_early_with_a_clear_message_and_no_key_anywhere() {
    let server =
        FakeServer::with_faults(Duration::ZERO, Arc::new(|_, _, _| Fault::Status(401, None)));
    let ledger = tempfile::tempdir().unwrap();
    let st = setup_with(
        "openai:fake-model",
        &server.openai_base(),
        ledger.path(),
        2,
        |_| {},
    );
    let traces: Vec<_> = (0..5).map(|i| trace(&format!("t{i}"), 6)).collect();
    let out = score(&st, &traces, 1);
    match &out.stopped {
        Some(JudgeError::Fatal(m)) => {
            assert!(m.contains("401") && m.contains("OPENAI_API_KEY"), "{m}");
            assert!(!m.contains(KEY));
        }
        other => panic!("expected a fatal stop, got {other:?}"),
    }
    assert!(server.requests().len() <= 3, "kept sending after a 401");
    assert!(grep_dir(ledger.path(), KEY).is_empty());
}

#[test]
fn unknown_model_is_fatal() {
    let server =
        FakeServer::with_faults(Duration::ZERO, Arc::new(|_, _, _| Fault::Status(404, None)));
    let ledger = tempfile::tempdir().unwrap();
    let st = setup(
        "anthropic:nope",
        &server.anthropic_base(),
        ledger.path(),
        |_| {},
    );
    let out = score(&st, &[trace("a", 3)], 1);
    assert!(
        matches!(&out.stopped, Some(JudgeError::Fatal(m)) if m.contains("404") && m.contains("model")),
        "{:?}",
        out.stopped
    );
}

#[test]
fn replay_from_the_ledger_is_offline_and_byte_identical() {
    let ledger = tempfile::tempdir().unwrap();
    let traces: Vec<_> = (0..3).map(|i| trace(&format!("t{i}"), 5)).collect();
    let first = {
        let server = FakeServer::start(Duration::ZERO);
        let st = setup(
            "openai:fake-model",
            &server.openai_base(),
            ledger.path(),
            |_| {},
        );
        let out = score(&st, &traces, 2);
        assert_complete_and_verified(&out, &traces, 2);
        serde_json::to_string(&out.scores).unwrap()
    }; // the server is gone
    let st = setup(
        "openai:fake-model",
        "http://127.0.0.1:9",
        ledger.path(),
        |o| o.offline = true,
    );
    let out = score(&st, &traces, 2);
    assert_eq!(serde_json::to_string(&out.scores).unwrap(), first);
    let s = st.session.stats();
    assert_eq!(s.api_calls.load(std::sync::atomic::Ordering::Relaxed), 0);
    assert_eq!(
        s.ledger_hits.load(std::sync::atomic::Ordering::Relaxed),
        3 * 4 * 2
    );
}

#[test]
fn a_budget_stop_resumes_without_repeating_finished_calls() {
    let ledger = tempfile::tempdir().unwrap();
    let server = FakeServer::start(Duration::ZERO);
    let traces: Vec<_> = (0..4).map(|i| trace(&format!("t{i}"), 6)).collect();
    // fake-model costs $1000 per million tokens: each call is a few dimes
    let st = setup_with(
        "openai:fake-model",
        &server.openai_base(),
        ledger.path(),
        2,
        |o| o.budget_usd = Some(5.0),
    );
    let out = score(&st, &traces, 1);
    assert!(
        matches!(out.stopped, Some(JudgeError::Budget(_))),
        "{:?}",
        out.stopped
    );
    let spent = st.session.parts.meter.spent();
    assert!(spent <= 5.0, "overspent: {spent}");
    let before = server.requests().len();
    assert!(before > 0 && before < 20);
    let st = setup(
        "openai:fake-model",
        &server.openai_base(),
        ledger.path(),
        |_| {},
    );
    let out = score(&st, &traces, 1);
    assert_complete_and_verified(&out, &traces, 1);
    let reqs = server.requests();
    assert_eq!(
        reqs.len(),
        4 * 5,
        "every call made exactly once across both runs"
    );
    let distinct: std::collections::HashSet<_> = reqs.iter().map(|r| r.body.clone()).collect();
    assert_eq!(distinct.len(), reqs.len());
}

#[test]
fn batch_export_then_import_scores_without_any_request() {
    for (spec, anthropic) in [("openai:fake-model", false), ("anthropic:fake-model", true)] {
        let ledger = tempfile::tempdir().unwrap();
        let traces: Vec<_> = (0..2).map(|i| trace(&format!("t{i}"), 4)).collect();
        let t = task();
        let items: Vec<ScoreItem> = traces
            .iter()
            .map(|(tr, s)| ScoreItem {
                id: "c",
                task: &t,
                trace: tr,
                store: s,
            })
            .collect();
        let st = setup(spec, "http://127.0.0.1:9", ledger.path(), |_| {});
        let mut buf = Vec::new();
        let rep = sage_judge::llm::batch::export_requests(
            st.judge.llm.as_ref().unwrap(),
            &items,
            std::num::NonZeroU32::MIN,
            std::num::NonZeroU32::new(3).unwrap(),
            &mut buf,
        )
        .unwrap();
        assert_eq!(rep.requests, 2 * 3);
        // play the provider: answer each exported request honestly
        let text = String::from_utf8(buf).unwrap();
        let mut results = String::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let id = v["custom_id"].as_str().unwrap();
            assert_eq!(id.len(), 64);
            let body = if anthropic { &v["params"] } else { &v["body"] };
            let resp: serde_json::Value = serde_json::from_str(&sage_llm::fake::honest_response(
                &body.to_string(),
                anthropic,
            ))
            .unwrap();
            let line = if anthropic {
                serde_json::json!({"custom_id": id, "result": {"type": "succeeded", "message": resp}})
            } else {
                serde_json::json!({"id": "x", "custom_id": id, "response": {"status_code": 200, "body": resp}, "error": null})
            };
            results.push_str(&line.to_string());
            results.push('\n');
        }
        let file = ledger.path().join("results.jsonl");
        std::fs::write(&file, results).unwrap();
        let st = setup(spec, "http://127.0.0.1:9", ledger.path(), |o| {
            o.batch_import = Some(file.clone());
            o.offline = true;
        });
        let out = score(&st, &traces, 1);
        assert_complete_and_verified(&out, &traces, 1);
        // everything is in the ledger now: the next export has nothing left to send
        let mut buf = Vec::new();
        let rep = sage_judge::llm::batch::export_requests(
            st.judge.llm.as_ref().unwrap(),
            &items,
            std::num::NonZeroU32::MIN,
            std::num::NonZeroU32::new(3).unwrap(),
            &mut buf,
        )
        .unwrap();
        assert_eq!((rep.requests, rep.settled), (0, 6));
    }
}

#[test]
fn cache_stats_and_prune_via_the_binary() {
    let ledger = tempfile::tempdir().unwrap();
    let server = FakeServer::start(Duration::ZERO);
    let st = setup(
        "openai:fake-model",
        &server.openai_base(),
        ledger.path(),
        |_| {},
    );
    score(&st, &[trace("a", 3)], 1);
    let out = assert_cmd::Command::cargo_bin("sage")
        .unwrap()
        .args(["cache", "stats", "--json", "--ledger"])
        .arg(ledger.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["groups"][0]["entries"], 2);
    assert_eq!(v["groups"][0]["model"], "fake-model");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(KEY));
    assert_cmd::Command::cargo_bin("sage")
        .unwrap()
        .args(["cache", "prune", "--ledger"])
        .arg(ledger.path())
        .assert()
        .code(2);
    assert_cmd::Command::cargo_bin("sage")
        .unwrap()
        .args(["cache", "prune", "--model", "fake-model", "--ledger"])
        .arg(ledger.path())
        .assert()
        .success()
        .stdout(predicates::str::contains("removed 2 file"));
}

fn read_tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path().strip_prefix(dir).unwrap().display().to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// `sage localize` end to end on a bundled corpus case with an LLM judge: prefix-only
/// requests with no anchor text, the family warning, a cost summary, the key nowhere on disk
/// or in the output, and an offline replay from the ledger giving byte-identical results.
#[test]
fn localize_with_an_llm_judge_end_to_end_and_offline_replay() {
    let work = tempfile::tempdir().unwrap();
    let case = work.path().join("cases/redirect");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/ag2-open-redirect-prefix"),
        &case,
    );
    let manifest = std::fs::read_to_string(case.join("case.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    v["anchor"]["description"] = serde_json::json!(format!("{ANCHOR_SENTINEL} open redirect"));
    v.as_object_mut().unwrap().remove("expected");
    std::fs::write(case.join("case.json"), v.to_string()).unwrap();
    let ledger = work.path().join("ledger");
    let run = |base: &str, out: &str, offline: bool| {
        let mut cmd = assert_cmd::Command::cargo_bin("sage").unwrap();
        cmd.current_dir(work.path())
            .env("OPENAI_BASE_URL", base)
            .env("OPENAI_API_KEY", KEY)
            .args([
                "localize",
                "cases",
                "--judge",
                "openai:gpt-4.1-mini",
                "--no-progress",
            ])
            .args(["--ledger", "ledger", "--out-dir", out, "--timeout", "5"]);
        if offline {
            cmd.arg("--offline");
        }
        cmd.output().unwrap()
    };
    let first = {
        let server = FakeServer::start(Duration::ZERO);
        let out = run(&server.openai_base(), "out1", false);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains("openai-gpt family"),
            "family warning: {stderr}"
        );
        assert!(stderr.contains("forecast openai:gpt-4.1-mini"), "{stderr}");
        assert!(stderr.contains("cost of new calls: $"), "{stderr}");
        let reqs = server.requests();
        assert!(!reqs.is_empty());
        for r in &reqs {
            assert!(
                !r.body.contains(ANCHOR_SENTINEL),
                "anchor text reached a request"
            );
            let k = scored_turn(r);
            assert!(r.body.contains(&format!("## Turn {k} (")));
            assert!(
                !r.body.contains(&format!("## Turn {} (", k + 1)),
                "a later turn leaked"
            );
        }
        for s in [&out.stdout, &out.stderr] {
            assert!(!String::from_utf8_lossy(s).contains(KEY));
        }
        read_tree(&work.path().join("out1"))
    };
    assert!(first.iter().any(|(p, _)| p == "results.json"));
    // offline: the server is gone; the ledger answers everything
    let out = run("http://127.0.0.1:9/v1", "out2", true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("0 to the API"));
    assert_eq!(
        read_tree(&work.path().join("out2")),
        first,
        "replay differs"
    );
    assert!(grep_dir(work.path(), KEY).is_empty(), "the key is on disk");
    assert!(!grep_dir(&ledger, "sage.ledger/1").is_empty());
}

/// Two `--shard i/2` runs merged by `sage merge-shards` equal one unsharded run, byte for byte.
#[test]
fn merged_shards_equal_the_unsharded_run() {
    let work = tempfile::tempdir().unwrap();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora");
    let localize = |extra: &[&str], out: &str| {
        let o = assert_cmd::Command::cargo_bin("sage")
            .unwrap()
            .current_dir(work.path())
            .arg("localize")
            .arg(&corpus)
            .args(["--no-write", "--no-progress", "--output", out])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            o.status.code() != Some(2),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    localize(&[], "all.json");
    localize(&["--shard", "1/2"], "s1.json");
    localize(&["--shard", "2/2"], "s2.json");
    let s1: serde_json::Value =
        serde_json::from_slice(&std::fs::read(work.path().join("s1.json")).unwrap()).unwrap();
    let n1 = s1["results"].as_array().unwrap().len();
    assert!(n1 > 0, "shard 1 is empty");
    assert_cmd::Command::cargo_bin("sage")
        .unwrap()
        .current_dir(work.path())
        .args([
            "merge-shards",
            "--output",
            "merged.json",
            "s1.json",
            "s2.json",
        ])
        .assert()
        .success();
    assert_eq!(
        std::fs::read_to_string(work.path().join("merged.json")).unwrap(),
        std::fs::read_to_string(work.path().join("all.json")).unwrap()
    );
    // overlapping shards are refused
    assert_cmd::Command::cargo_bin("sage")
        .unwrap()
        .current_dir(work.path())
        .args(["merge-shards", "--output", "x.json", "s1.json", "s1.json"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("overlap"));
}

/// A long trace under a small context budget, for both APIs: every request fits the budget,
/// carries turn k whole and no text of any later turn (each turn's `MARK-<i>-` sentinel is
/// checked in every captured body), the recorded `context` matches what the body holds, the
/// recorded hash is the body's, and a turn too large for any request is `context-overflow`
/// while every other turn is still scored.
#[test]
fn digested_requests_stay_within_the_budget_and_never_carry_a_later_turn() {
    const N: usize = 90;
    const HUGE: usize = 45;
    const CONTEXT: u64 = 12_000;
    let mut t = CanonicalTrace::new("test", vec!["long.md".into()]);
    let mut raw = String::new();
    for i in 1..=N {
        let pad = if i == HUGE { 80_000 } else { 600 };
        let text = format!(
            "MARK-{i}- we validate the redirect target {}",
            "y".repeat(pad)
        );
        raw.push_str(&text);
        raw.push('\n');
        let mut turn = Turn::new(
            Actor::new("coder", Some("assistant")),
            TurnKind::Implementation,
        );
        turn.message = Some(TextItem {
            text,
            raw: RawRef::lines("long.md", i, i),
        });
        t.push_turn(turn);
    }
    let mut store = RawStore::new();
    store.insert("long.md", raw.into_bytes());
    let traces = vec![(t, store)];
    for spec in ["openai:fake-model", "anthropic:fake-model"] {
        let server = FakeServer::start(Duration::ZERO);
        let base = if spec.starts_with("openai") {
            server.openai_base()
        } else {
            server.anthropic_base()
        };
        let ledger = tempfile::tempdir().unwrap();
        let session = JudgeSession::new(
            &config(),
            JudgeOptions {
                ledger_dir: Some(ledger.path().to_path_buf()),
                timeout: Some(Duration::from_secs(5)),
                retry: Some(fast_retry()),
                ..Default::default()
            },
        )
        .unwrap();
        let parsed = sage_judge::spec::JudgeSpec::parse(spec).unwrap();
        let mut s = session.llm_settings(&parsed).unwrap().unwrap();
        s.base_url = base;
        s.api_key = sage_llm::ApiKey::new(KEY);
        let mut llm = sage_judge::llm::LlmJudge::new(s, session.parts.clone()).unwrap();
        llm.set_context_tokens(CONTEXT);
        let budget = llm.prompt_budget();
        let llm = Arc::new(llm);
        let st = Setup {
            judge: BuiltJudge {
                judge: llm.clone(),
                llm: Some(llm),
            },
            session,
            concurrency: std::num::NonZeroUsize::new(8).unwrap(),
        };
        let t = task();
        let items = [ScoreItem {
            id: "long",
            task: &t,
            trace: &traces[0].0,
            store: &traces[0].1,
        }];
        let forecast = st.session.forecast(std::slice::from_ref(&st.judge), &items);
        // The batch file written before the run holds the same requests the run sends.
        let mut exported = Vec::new();
        let export = sage_judge::llm::batch::export_requests(
            st.judge.llm.as_ref().unwrap(),
            &items,
            std::num::NonZeroU32::MIN,
            std::num::NonZeroU32::new(3).unwrap(),
            &mut exported,
        )
        .unwrap();
        let out = score(&st, &traces, 1);
        assert!(out.stopped.is_none(), "{spec}: {:?}", out.stopped);
        let ts = out.get(0, 0, 0, 1).unwrap();
        let reqs = server.requests();
        assert_eq!(export.requests, reqs.len(), "{spec}");
        assert_eq!(export.overflow, 1, "{spec}");
        // The forecast fits requests exactly as the run does: same calls, same tokens.
        let f = &forecast.judges[0];
        assert_eq!(f.new_calls as usize, reqs.len(), "{spec}");
        assert_eq!(f.overflow, 1, "{spec}");
        let sent: u64 = reqs.iter().map(|r| (r.body.len() as u64).div_ceil(4)).sum();
        assert_eq!(f.prompt_tokens, sent, "{spec}");
        assert_eq!(export.prompt_tokens, sent, "{spec}");
        // The fake server's simulated prefix cache is reported through the usage fields.
        let stats = st.session.stats();
        let cached = stats
            .cached_input_tokens
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(cached > 0, "{spec}: no cached tokens reported");
        let by_hash: std::collections::HashMap<String, &Captured> = reqs
            .iter()
            .map(|r| {
                use sha2::Digest;
                (hex::encode(sha2::Sha256::digest(r.body.as_bytes())), r)
            })
            .collect();
        for r in &reqs {
            let k = scored_turn(r);
            assert!(
                (r.body.len() as u64).div_ceil(4) <= budget,
                "{spec}: request for turn {k} is over budget"
            );
            for j in k + 1..=N {
                assert!(
                    !r.body.contains(&format!("MARK-{j}-")),
                    "{spec}: turn {j} reached the request for turn {k}"
                );
            }
            assert!(r.body.contains(&format!("MARK-{k}-")));
        }
        let mut digested = 0;
        for o in &ts.turns {
            match o {
                TurnOutcome::Scored(s) => {
                    let r = by_hash.get(&s.prompt_hash).expect("hash of a sent body");
                    match &s.context {
                        None => {
                            for j in 1..=s.turn {
                                assert!(r.body.contains(&format!("MARK-{j}-")));
                            }
                        }
                        Some(c) => {
                            digested += 1;
                            assert_eq!(c.whole, vec![[c.digested[0][1] + 1, s.turn]]);
                            assert_eq!(c.digested[0][0], 1);
                            for j in 1..=s.turn {
                                let whole = j > c.digested[0][1];
                                assert_eq!(
                                    r.body.contains(&format!("## Turn {j} (")),
                                    whole,
                                    "{spec}: turn {j} in the request for {}",
                                    s.turn
                                );
                            }
                            assert!(c.prompt_tokens <= c.budget_tokens);
                        }
                    }
                }
                TurnOutcome::ContextOverflow {
                    turn,
                    needed_tokens,
                    budget_tokens,
                } => {
                    assert_eq!(*turn, HUGE, "{spec}");
                    assert!(needed_tokens > budget_tokens);
                }
                other => panic!("{spec}: unexpected {other:?}"),
            }
        }
        assert!(
            matches!(ts.turns[HUGE - 1], TurnOutcome::ContextOverflow { .. }),
            "{spec}"
        );
        assert!(digested > 30, "{spec}: only {digested} digested requests");
        assert_eq!(
            reqs.len(),
            N - 1,
            "{spec}: the overflowing turn is never sent"
        );
        assert_eq!(ts.failures(), vec![HUGE]);
    }
}

/// A refused key, an unknown model and a missing key are each reported once, before the
/// forecast, with exit status 2, and no scoring request is sent (the corpus has 15 cases).
#[test]
fn fatal_errors_are_reported_once_up_front_with_exit_2() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora");
    let work = tempfile::tempdir().unwrap();
    let run = |base: &str, spec: &str, key: Option<&str>| {
        let mut cmd = assert_cmd::Command::cargo_bin("sage").unwrap();
        cmd.current_dir(work.path())
            .env("OPENAI_BASE_URL", base)
            .env("ANTHROPIC_BASE_URL", base)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .arg("localize")
            .arg(&corpus)
            .args(["--judge", spec, "--no-progress", "--no-write"])
            .args(["--ledger", "ledger", "--timeout", "5"]);
        if let Some(k) = key {
            cmd.env("OPENAI_API_KEY", k).env("ANTHROPIC_API_KEY", k);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let refused =
        FakeServer::with_faults(Duration::ZERO, Arc::new(|_, _, _| Fault::Status(401, None)));
    let ok = FakeServer::start(Duration::ZERO);
    let cases = [
        (
            refused.openai_base(),
            "openai:fake-model",
            Some(KEY),
            "the API key was refused",
        ),
        (
            ok.openai_base(),
            "openai:no-such-model",
            Some(KEY),
            "unknown model",
        ),
        (
            ok.anthropic_base(),
            "anthropic:no-such-model",
            Some(KEY),
            "HTTP 404",
        ),
        (
            ok.openai_base(),
            "openai:fake-model",
            None,
            "OPENAI_API_KEY is not set",
        ),
    ];
    for (base, spec, key, said) in cases {
        let (code, stderr) = run(&base, spec, key);
        assert_eq!(code, Some(2), "{spec}: {stderr}");
        assert_eq!(stderr.matches(said).count(), 1, "{spec}: {stderr}");
        assert!(
            !stderr.contains("forecast"),
            "{spec}: checked after the forecast"
        );
        assert!(!stderr.contains(KEY));
    }
    assert!(refused.requests().is_empty() && ok.requests().is_empty());
}

/// A provider that counts more tokens than sage estimated and refuses turn 3 as too long
/// (HTTP 413): that turn is `context-overflow`, not retried and not a reason to stop; every
/// other turn is scored.
#[test]
fn a_provider_refusal_as_too_long_is_context_overflow() {
    let server = FakeServer::with_faults(
        Duration::ZERO,
        Arc::new(|c: &Captured, _, _| {
            if scored_turn(c) == 3 {
                Fault::Status(413, None)
            } else {
                Fault::None
            }
        }),
    );
    let ledger = tempfile::tempdir().unwrap();
    let st = setup(
        "openai:fake-model",
        &server.openai_base(),
        ledger.path(),
        |_| {},
    );
    let out = score(&st, &[trace("a", 6)], 1);
    assert!(out.stopped.is_none(), "{:?}", out.stopped);
    let ts = out.get(0, 0, 0, 1).unwrap();
    assert!(matches!(
        ts.turns[2],
        TurnOutcome::ContextOverflow { turn: 3, .. }
    ));
    assert_eq!(ts.failures(), vec![3]);
    let sent3 = server
        .requests()
        .iter()
        .filter(|c| scored_turn(c) == 3)
        .count();
    assert_eq!(sent3, 1, "a too-long turn is not retried");
    for k in [1, 4, 5, 6] {
        assert!(ts.score(k).is_some(), "turn {k}");
    }
}

/// A sage command in `work` against the fake server at `base` (both providers' variables
/// point at it), with the test key.
fn sage_at(work: &Path, base: &str) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("sage").unwrap();
    cmd.current_dir(work)
        .env("OPENAI_BASE_URL", format!("{base}/v1"))
        .env("OPENAI_API_KEY", KEY)
        .env("ANTHROPIC_BASE_URL", base)
        .env("ANTHROPIC_API_KEY", KEY);
    cmd
}

/// A copy of bundled corpus cases under `work/cases`, without their `expected` blocks (they
/// are written for the lexicon judge), the anchor text replaced by a sentinel.
fn copy_cases(work: &Path, names: &[&str]) {
    for name in names {
        let case = work.join("cases").join(name);
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("corpora")
                .join(name),
            &case,
        );
        let manifest = std::fs::read_to_string(case.join("case.json")).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&manifest).unwrap();
        v["anchor"]["description"] = serde_json::json!(format!("{ANCHOR_SENTINEL} anchor"));
        v.as_object_mut().unwrap().remove("expected");
        std::fs::write(case.join("case.json"), v.to_string()).unwrap();
    }
}

fn run_ok(cmd: &mut assert_cmd::Command) -> String {
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    for s in [&out.stdout, &out.stderr] {
        assert!(
            !String::from_utf8_lossy(s).contains(KEY),
            "the key was printed"
        );
    }
    stderr
}

/// `--batch submit` → `--batch poll` (running, then ended and imported) → a second round
/// for the one answer whose quote did not verify → `--offline` replays every turn from the
/// ledger, for both providers' batch APIs, through the binary against the fake server.
/// The fake server answers the first batch line with a fabricated quote: replay rejects it
/// exactly as a live run would and the next round carries attempt 2 with the reason.
#[test]
fn batch_submit_poll_import_then_offline_replay_for_both_providers() {
    use std::sync::atomic::{AtomicBool, Ordering};
    for (judge, backend, batch_prefix) in [
        ("openai:gpt-4.1-mini", "openai", "batch_"),
        ("anthropic:claude-fake", "anthropic", "msgbatch_"),
    ] {
        let work = tempfile::tempdir().unwrap();
        copy_cases(
            work.path(),
            &["ag2-open-redirect-prefix", "aider-whole-cookie"],
        );
        let once = Arc::new(AtomicBool::new(false));
        let o = once.clone();
        let server = FakeServer::with_faults(
            Duration::ZERO,
            Arc::new(move |c: &Captured, _, _| {
                let line = c.path == "/v1/chat/completions" || c.path == "/v1/messages";
                if line && !o.swap(true, Ordering::SeqCst) {
                    Fault::FabricatedQuote
                } else {
                    Fault::None
                }
            }),
        );
        let base = format!("http://{}", server.addr);
        let sage = |args: &[&str]| {
            let mut c = sage_at(work.path(), &base);
            c.args(["localize", "cases", "--judge", judge, "--ledger", "ledger"])
                .args(args);
            c
        };
        let entries = || {
            let out = sage_at(work.path(), &base)
                .args(["cache", "stats", "--json", "--ledger", "ledger"])
                .output()
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let g = &v["groups"][0];
            (
                g["entries"].as_u64().unwrap_or(0),
                g["from_batch"].as_u64().unwrap_or(0),
            )
        };

        let err = run_ok(&mut sage(&["--batch", "submit"]));
        assert!(
            err.contains(&format!("submitted batch {batch_prefix}")),
            "{err}"
        );
        let first_round = server.batch_requests().len();
        assert!(first_round > 2, "{err}");
        let records: Vec<_> = std::fs::read_dir(work.path().join("ledger/batches").join(backend))
            .unwrap()
            .collect();
        assert_eq!(records.len(), 1);
        // submitting again while the batch runs sends nothing twice
        let err = run_ok(&mut sage(&["--batch", "submit"]));
        assert!(err.contains("0 call(s) submitted in 0 batch(es)"), "{err}");
        assert!(
            err.contains(&format!("{first_round} call(s) already in a running batch")),
            "{err}"
        );
        assert_eq!(server.batch_requests().len(), first_round);

        // the batch is still running: nothing imported
        let err = run_ok(&mut sage(&["--batch", "poll"]));
        assert!(err.contains("running: in_progress"), "{err}");
        assert_eq!(entries().0, 0);
        // ended: every answer imported; the fabricated quote is rejected on replay
        let err = run_ok(&mut sage(&["--batch", "poll"]));
        assert!(
            err.contains(&format!("imported {first_round} answer(s)")),
            "{err}"
        );
        assert!(
            err.contains("1 call(s) still needed (1 stored answer(s) rejected"),
            "{err}"
        );
        assert_eq!(entries(), (first_round as u64, first_round as u64));

        // round two: exactly the retry, with the reason, as attempt 2
        server.set_batch_polls(0);
        let err = run_ok(&mut sage(&["--batch", "submit"]));
        assert!(err.contains("1 call(s) submitted in 1 batch(es)"), "{err}");
        let lines = server.batch_requests();
        assert_eq!(lines.len(), first_round + 1);
        assert!(lines[first_round]
            .body
            .contains("Your previous answer was rejected"));
        let err = run_ok(&mut sage(&["--batch", "poll"]));
        assert!(err.contains("imported 1 answer(s)"), "{err}");
        assert!(err.contains("0 call(s) still needed"), "{err}");
        assert!(err.contains("every turn-run is settled"), "{err}");

        // prefix-only holds for batch requests too: no later turn, no anchor text
        for r in &lines {
            assert!(
                !r.body.contains(ANCHOR_SENTINEL),
                "anchor text reached a batch line"
            );
            let k = scored_turn(r);
            assert!(r.body.contains(&format!("## Turn {k} (")));
            assert!(
                !r.body.contains(&format!("## Turn {} (", k + 1)),
                "a later turn leaked"
            );
        }
        drop(server);

        // offline, the server gone: the ledger answers every turn
        let err = run_ok(&mut sage(&["--offline", "--out-dir", "out"]));
        assert!(err.contains("0 to the API"), "{err}");
        let set: serde_json::Value =
            serde_json::from_slice(&std::fs::read(work.path().join("out/results.json")).unwrap())
                .unwrap();
        let results = set["results"].as_array().unwrap();
        assert_eq!(results.len(), 2);
        let mut retried = 0;
        for r in results {
            assert!(r["origin"].get("scoring_failures").is_none(), "{r}");
            let scores = r["scores"].as_array().unwrap();
            assert!(!scores.is_empty());
            for s in scores {
                assert!(
                    s["status"] == "scored" || s["status"] == "administrative",
                    "{s}"
                );
                if s["attempts"] == 2 {
                    retried += 1;
                }
            }
        }
        // the one rejected batch answer was replaced by attempt 2 of round two
        assert_eq!(retried, 1);
        assert!(grep_dir(work.path(), KEY).is_empty(), "the key is on disk");
    }
}

/// Shards judged on two machines: their ledgers merge with `sage cache merge` into one that
/// replays the whole corpus offline; two different answers to one call are refused with
/// both files named, and nothing is written.
#[test]
fn cache_merge_joins_shard_ledgers_and_refuses_conflicts() {
    let work = tempfile::tempdir().unwrap();
    let names = [
        "ag2-open-redirect-prefix",
        "aider-whole-cookie",
        "ag2-fig1b-origin-header",
        "aider-architect-yaml",
    ];
    copy_cases(work.path(), &names);
    let server = FakeServer::start(Duration::ZERO);
    let base = format!("http://{}", server.addr);
    for (shard, ledger) in [("1/2", "l1"), ("2/2", "l2")] {
        run_ok(
            sage_at(work.path(), &base)
                .args([
                    "localize",
                    "cases",
                    "--judge",
                    "openai:gpt-4.1-mini",
                    "--no-write",
                ])
                .args(["--shard", shard, "--ledger", ledger]),
        );
        assert!(
            !grep_dir(&work.path().join(ledger), "sage.ledger/1").is_empty(),
            "shard {shard} judged nothing: pick other cases"
        );
    }
    drop(server);
    let err =
        run_ok(sage_at(work.path(), &base).args(["cache", "merge", "l1", "l2", "--out", "all"]));
    assert!(err.contains("identical kept once"), "{err}");
    let err = run_ok(
        sage_at(work.path(), "http://127.0.0.1:9")
            .args([
                "localize",
                "cases",
                "--judge",
                "openai:gpt-4.1-mini",
                "--no-write",
            ])
            .args(["--offline", "--ledger", "all"]),
    );
    assert!(err.contains("0 to the API"), "{err}");
    // merging again changes nothing
    let err =
        run_ok(sage_at(work.path(), &base).args(["cache", "merge", "l1", "l2", "--out", "all"]));
    assert!(err.contains("0 entr(ies) copied"), "{err}");

    // a conflicting answer: copy one entry of l1 into l2 with another response
    let entry = walkdir::WalkDir::new(work.path().join("l1"))
        .into_iter()
        .filter_map(|e| e.ok())
        .find(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "json"))
        .unwrap();
    let rel = entry.path().strip_prefix(work.path().join("l1")).unwrap();
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(entry.path()).unwrap()).unwrap();
    v["response"] = serde_json::json!("{\"other\":true}");
    let dest = work.path().join("l2").join(rel);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::write(&dest, v.to_string()).unwrap();
    let out = sage_at(work.path(), &base)
        .args(["cache", "merge", "l1", "l2", "--out", "fresh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("answer the same call differently"), "{err}");
    assert!(
        err.contains(&dest.display().to_string()) || err.contains("l2/"),
        "{err}"
    );
    assert!(
        !work.path().join("fresh").exists(),
        "a refused merge wrote something"
    );
}

/// The floor on the real Who&When logs: "always the first agent step". By hand, from the
/// four files' labels and the adapter's turns (the human message of a hand-crafted log is
/// not an agent step): algorithm_generated_1 gold 0, first agent step 0 (hit);
/// algorithm_generated_47 gold 1, first 0 (miss, within ±1); hand_crafted_24 gold 1, first 1
/// (hit); hand_crafted_6 gold 5, first 1 (miss by 4). Every first step is the labelled agent.
/// So: step exact 2/4, within ±1 3/4, agent 4/4; per-step label TP 2, FP 2, FN 2.
#[test]
fn validate_baseline_on_the_real_who_and_when_logs() {
    if super::need::missing_shared("traces/who-and-when") {
        return;
    }
    let logs = super::need::shared_path("traces/who-and-when");
    let out = assert_cmd::Command::cargo_bin("sage")
        .unwrap()
        .args([
            "validate",
            "--judge",
            "baseline:first-agent-step",
            "--format",
            "json",
        ])
        .arg(&logs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = &v["rows"][0];
    assert_eq!(
        (all["split"].as_str(), all["subset"].as_str()),
        (Some("all"), Some("all"))
    );
    let m = &all["metrics"];
    assert_eq!(m["logs"], 4);
    assert_eq!(m["step_exact"], 0.5);
    assert_eq!(m["step_within"], 0.75);
    assert_eq!(m["agent"], 1.0);
    assert_eq!(
        (m["tp"].as_u64(), m["fp"].as_u64(), m["fn_"].as_u64()),
        (Some(2), Some(2), Some(2))
    );
    // the split is seeded: the same seed gives the same split, every log on one side
    let splits: Vec<_> = v["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["split"].clone())
        .collect();
    assert_eq!(splits.len(), 4);
    let again = assert_cmd::Command::cargo_bin("sage")
        .unwrap()
        .args([
            "validate",
            "--judge",
            "baseline:first-agent-step",
            "--format",
            "json",
        ])
        .arg(&logs)
        .output()
        .unwrap();
    assert_eq!(again.stdout, out.stdout);
}

/// The step-by-step method with an LLM judge, scripted by the fake server: it calls step 1
/// (history index) decisive and every other step not, quoting the step's first words; its
/// first "yes" for the Babylonian log quotes words that are not in the step (rejected, asked
/// again with the reason). By hand: algorithm_generated_1 has no agent step 1 (its steps are
/// 0, 2, 4, 5) → no prediction; algorithm_generated_47 → 1 (gold 1, hit); hand_crafted_24 →
/// 1 (gold 1, hit); hand_crafted_6 → 1 (gold 5, miss, agent Orchestrator right). So: exact
/// 2/4, within ±1 2/4, agent 3/4; TP 2, FP 1, FN 2: precision 2/3, recall 1/2, F1 4/7.
/// Every request holds the task and steps 0..k only, and no label.
#[test]
fn validate_step_by_step_with_a_scripted_judge() {
    if super::need::missing_shared("traces/who-and-when") {
        return;
    }
    let plan = Arc::new(|c: &Captured, _: usize, _: usize| {
        let v: serde_json::Value = serde_json::from_str(&c.body).unwrap_or_default();
        let user = sage_llm::fake::user_text(&v, false);
        let Some(at) = user.rfind("Does step ") else {
            return Fault::None;
        };
        let k: usize = user[at + 10..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap();
        // the last step's first line of data: after the last fence opening
        let last = &user[user.rfind("<<<TRACE DATA ").unwrap()..];
        let first_line = last
            .lines()
            .skip(1)
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default();
        let mut quote: String = first_line
            .split_whitespace()
            .take(4)
            .collect::<Vec<_>>()
            .join(" ");
        if user.contains("Babylonian") && !user.contains("Your previous answer was rejected") {
            quote = "words the step never said".into();
        }
        let yes = k == 1;
        Fault::Answer(serde_json::json!({
            "decisive_error": yes,
            "quote": if yes { serde_json::json!(quote) } else { serde_json::Value::Null },
            "reason": "scripted",
        }))
    });
    let server = FakeServer::with_faults(Duration::ZERO, plan);
    let logs = super::need::shared_path("traces/who-and-when");
    let work = tempfile::tempdir().unwrap();
    let ledger = work.path().join("ledger");
    let out = assert_cmd::Command::cargo_bin("sage")
        .unwrap()
        .env("OPENAI_BASE_URL", server.openai_base())
        .env("OPENAI_API_KEY", KEY)
        .args([
            "validate",
            "--judge",
            "openai:fake-model",
            "--format",
            "json",
            "--ledger",
        ])
        .arg(&ledger)
        .arg(&logs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &v["rows"][0]["metrics"];
    assert_eq!(m["logs"], 4);
    assert_eq!(m["step_exact"], 0.5);
    assert_eq!(m["step_within"], 0.5);
    assert_eq!(m["agent"], 0.75);
    assert_eq!(
        (m["tp"].as_u64(), m["fp"].as_u64(), m["fn_"].as_u64()),
        (Some(2), Some(1), Some(2))
    );
    assert!((m["f1"].as_f64().unwrap() - 4.0 / 7.0).abs() < 1e-9, "{m}");
    assert_eq!(m["failures"], 0);
    let reqs = server.requests();
    assert!(reqs
        .iter()
        .any(|r| r.body.contains("Your previous answer was rejected")));
    for r in &reqs {
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        let user = sage_llm::fake::user_text(&v, false);
        let at = user.rfind("Does step ").unwrap();
        let k: usize = user[at + 10..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap();
        for later in k + 1..12 {
            assert!(
                !user.contains(&format!("## Step {later} (")),
                "step {later} leaked into step {k}"
            );
        }
        for label in [
            "mistake_agent",
            "mistake_reason",
            "mistake_step",
            "does not verify the information",
        ] {
            assert!(!r.body.contains(label), "a label reached the judge");
        }
    }
    // Every answer is in the ledger: the validation replays offline, with no server and no
    // key, to the same figures; without the ledger, offline stops (exit 2).
    let sent = reqs.len();
    let replay = |ledger: &std::path::Path| {
        assert_cmd::Command::cargo_bin("sage")
            .unwrap()
            .env_remove("OPENAI_API_KEY")
            .env("OPENAI_BASE_URL", "http://127.0.0.1:9")
            .args([
                "validate",
                "--judge",
                "openai:fake-model",
                "--format",
                "json",
                "--offline",
                "--ledger",
            ])
            .arg(ledger)
            .arg(&logs)
            .output()
            .unwrap()
    };
    let again = replay(&ledger);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(again.stdout, out.stdout);
    assert_eq!(server.requests().len(), sent, "the replay sent a request");
    let none = replay(&work.path().join("empty"));
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("not in the ledger"));
}

/// Issue 31: a pool of N slots has N requests out before it needs any answer. The server
/// answers nothing until N have arrived, so the peak of requests in flight is N exactly when
/// every slot starts at once; a pool that sent one request alone first (waiting for its
/// answer before the others) peaks lower. Ordering only: no clock is read.
#[test]
fn every_slot_of_the_pool_starts_at_once() {
    for (spec, traces) in [
        ("openai:fake-model", vec![trace("long", 65)]),
        (
            "anthropic:fake-model",
            (0..16).map(|i| trace(&format!("t{i}"), 6)).collect(),
        ),
    ] {
        let server = FakeServer::start(Duration::ZERO);
        let base = if spec.starts_with("openai") {
            server.openai_base()
        } else {
            server.anthropic_base()
        };
        let ledger = tempfile::tempdir().unwrap();
        let st = setup_with(spec, &base, ledger.path(), 64, |o| {
            // the gate below holds answers: no request may time out meanwhile
            o.timeout = Some(Duration::from_secs(60));
        });
        server.hold_answers_until(64, Duration::from_secs(10));
        let out = score(&st, &traces, 1);
        assert_complete_and_verified(&out, &traces, 1);
        assert!(
            server.requests().len() >= 64,
            "{spec}: fewer than 64 requests"
        );
        assert_eq!(
            server.arrived_before_first_answer(),
            64,
            "{spec}: the 64 slots did not all have a request out before the first answer"
        );
        assert_eq!(
            server.peak_in_flight(),
            64,
            "{spec}: more than 64 in flight"
        );
    }
}
