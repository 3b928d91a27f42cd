//! Adapters for OpenHands (V0, SDK), SWE-agent, mini-SWE-agent, Claude Code, Codex, Inspect
//! AI and OpenTelemetry GenAI on the real samples in `../shared/traces`: golden summaries and
//! counts, format detection, raw pointers that resolve to text containing each item, and
//! robustness against mutated input.

use sage_adapters::SourceFile;
use sage_trace::{normalize_ws, CanonicalTrace, RawStore};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The real samples (`../shared/traces`).
pub fn traces() -> PathBuf {
    super::need::shared_path("traces")
}

pub fn sample(rel: &str) -> PathBuf {
    traces().join(rel)
}

pub fn source(rel: &str) -> SourceFile {
    SourceFile::new(rel, sample(rel))
}

/// Every sample of these formats, with the adapter detection must pick.
pub const SAMPLES: &[(&str, &str)] = &[
    ("openhands/runtime_trajs_basic.json", "openhands"),
    (
        "openhands/runtime_trajs_wrong_initial_state.json",
        "openhands",
    ),
    (
        "openhands/runtime_trajs_basic_interactions.json",
        "openhands",
    ),
    ("openhands/resolver_mock_output.jsonl", "openhands"),
    (
        "openhands/multi_swe_bench_output.ponylang__ponyc-4593.json",
        "openhands",
    ),
    (
        "openhands-sdk/openagentsafety_traj_safety-migrate.json",
        "openhands-sdk",
    ),
    (
        "openhands-sdk/openagentsafety_output.jsonl",
        "openhands-sdk",
    ),
    (
        "openhands-sdk/sdk_fixture_goal_events.jsonl",
        "openhands-sdk",
    ),
    ("swe-agent/pydicom__pydicom-1458.traj", "swe-agent"),
    (
        "swe-agent/6e44b9__sweagenttestrepo-1c2844.traj",
        "swe-agent",
    ),
    (
        "mini-swe-agent/django__django-10999.traj.json",
        "mini-swe-agent",
    ),
    (
        "mini-swe-agent/upstream_test_github_issue.traj.json",
        "mini-swe-agent",
    ),
    (
        "mini-swe-agent/upstream_test_local.traj.json",
        "mini-swe-agent",
    ),
    (
        "claude-code/hello-world-script.transcript.jsonl",
        "claude-code",
    ),
    (
        "claude-code/coverage-test-fix.transcript.jsonl",
        "claude-code",
    ),
    ("codex/simonw_sample_codex_session.jsonl", "codex"),
    ("inspect-ai/inspect_browser_log.json", "inspect-ai"),
    ("inspect-ai/inspect_log_read_sample.eval", "inspect-ai"),
];

pub fn normalize(rel: &str) -> CanonicalTrace {
    // Golden summaries document every sample, including the Codex excerpt with no agent turn
    // (which `sage normalize` refuses without --allow-empty; see adapters_detect).
    let opts = sage_adapters::NormalizeOptions {
        allow_empty: true,
        ..Default::default()
    };
    sage_adapters::normalize(&[source(rel)], &opts).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn clip(s: &str, n: usize) -> String {
    let one = normalize_ws(s);
    if one.chars().count() <= n {
        one
    } else {
        format!("{}…", one.chars().take(n).collect::<String>())
    }
}

/// A readable summary: counts, then one line per turn and per item, then dropped records
/// and notes.
pub fn summary(t: &CanonicalTrace) -> String {
    let mut out = String::new();
    let c = t.counts();
    writeln!(out, "framework: {}", t.framework).unwrap();
    writeln!(
        out,
        "counts: turns {} (administrative {}), tool calls {}, tool results {}, writes {}, dropped {}",
        c.turns, c.administrative, c.tool_calls, c.tool_results, c.writes, c.dropped
    )
    .unwrap();
    for turn in &t.turns {
        writeln!(
            out,
            "#{} {} [{}] {}",
            turn.index,
            turn.actor.name,
            turn.kind.as_str(),
            turn.message
                .as_ref()
                .map(|m| format!("{:?}", clip(&m.text, 70)))
                .unwrap_or_default()
        )
        .unwrap();
        for call in &turn.tool_calls {
            writeln!(
                out,
                "    call {} {:?}",
                call.name,
                clip(&call.arguments, 60)
            )
            .unwrap();
        }
        for r in &turn.tool_results {
            writeln!(
                out,
                "    result{} {:?}",
                if r.is_error { " (error)" } else { "" },
                clip(&r.output, 50)
            )
            .unwrap();
        }
        for w in &turn.writes {
            writeln!(
                out,
                "    write {} {} via {}{}",
                w.artefact,
                w.op.kind(),
                w.via,
                if w.final_state { " (final state)" } else { "" }
            )
            .unwrap();
        }
    }
    for w in &t.submissions {
        writeln!(
            out,
            "submission {} {} via {} (no turn's write)",
            w.artefact,
            w.op.kind(),
            w.via
        )
        .unwrap();
    }
    for d in &t.dropped {
        writeln!(out, "dropped {}: {}", d.raw.display(), d.reason).unwrap();
    }
    for n in &t.notes {
        writeln!(out, "note: {n}").unwrap();
    }
    out
}

fn snapshot_name(rel: &str) -> String {
    rel.replace(['/', '.'], "_")
}

#[test]
fn golden_summaries() {
    if super::need::missing_shared("traces") {
        return;
    }
    for (rel, _) in SAMPLES {
        let t = normalize(rel);
        insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!(format!("adapters_events__{}", snapshot_name(rel)), summary(&t));
        });
    }
}

#[test]
fn detection_picks_the_right_adapter() {
    if super::need::missing_shared("traces") {
        return;
    }
    for (rel, want) in SAMPLES {
        let got = sage_adapters::detect(&sample(rel), &Default::default())
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(got.name(), *want, "{rel}");
    }
}

#[test]
fn every_item_points_to_raw_text_containing_it() {
    if super::need::missing_shared("traces") {
        return;
    }
    for (rel, _) in SAMPLES {
        let t = normalize(rel);
        let store = RawStore::load(&t, &traces(), sage_trace::safe::DEFAULT_MAX_INPUT_BYTES)
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        let bad = sage_adapters::verify_raw_refs(&t, &store);
        assert!(bad.is_empty(), "{rel}: {bad:#?}");
    }
}

/// No real OTel GenAI agent trace exists among the samples: a constructed OTLP export
/// (semantic-convention attribute names and message schema) stands in.
#[test]
fn otel_genai_constructed_export() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/otel");
    let f = SourceFile::new("agent_spans.json", Path::new(dir).join("agent_spans.json"));
    assert_eq!(
        sage_adapters::detect(&f.path, &Default::default())
            .unwrap()
            .name(),
        "otel-genai"
    );
    let t = sage_adapters::normalize(std::slice::from_ref(&f), &Default::default()).unwrap();
    let store = RawStore::load(
        &t,
        Path::new(dir),
        sage_trace::safe::DEFAULT_MAX_INPUT_BYTES,
    )
    .unwrap();
    assert_eq!(
        sage_adapters::verify_raw_refs(&t, &store),
        Vec::<String>::new()
    );
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("adapters_events__otel_constructed_agent_spans", summary(&t));
    });
    let (_, w) = t.writes().next().unwrap();
    assert_eq!(w.artefact, "/repo/calc.py");
}

#[test]
fn a_demonstration_yaml_is_refused_with_a_location() {
    if super::need::missing_shared("traces") {
        return;
    }
    let e = sage_adapters::normalize(
        &[source("swe-agent/str_replace_anthropic_demo.yaml")],
        &sage_adapters::NormalizeOptions::framework(Some("swe-agent")),
    )
    .unwrap_err();
    assert_eq!(e.record.as_deref(), Some("line 1"));
    assert!(e.message.contains("demonstration"), "{e}");
}

mod robustness {
    use super::*;
    use proptest::prelude::*;

    /// Small samples of every format (mutation is cheap on them).
    const SMALL: &[&str] = &[
        "openhands/runtime_trajs_basic_interactions.json",
        "openhands/runtime_trajs_wrong_initial_state.json",
        "openhands-sdk/openagentsafety_traj_safety-migrate.json",
        "openhands-sdk/sdk_fixture_goal_events.jsonl",
        "swe-agent/6e44b9__sweagenttestrepo-1c2844.traj",
        "mini-swe-agent/upstream_test_local.traj.json",
        "claude-code/hello-world-script.transcript.jsonl",
        "codex/simonw_sample_codex_session.jsonl",
        "inspect-ai/inspect_log_read_sample.eval",
    ];

    fn mutate(bytes: &[u8], ops: &[(u8, usize, u8)]) -> Vec<u8> {
        let mut b = bytes.to_vec();
        for &(kind, pos, byte) in ops {
            if b.is_empty() {
                break;
            }
            let i = pos % b.len();
            match kind % 4 {
                0 => b[i] = byte,
                1 => {
                    b.remove(i);
                }
                2 => b.insert(i, byte),
                _ => b.truncate(i),
            }
        }
        b
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]
        #[test]
        fn mutated_samples_never_panic(
            which in 0..SMALL.len(),
            ops in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..6),
        ) {
            if crate::need::missing_shared("traces") {
                return Ok(());
            }
            let rel = SMALL[which];
            let bytes = std::fs::read(sample(rel)).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("trace");
            std::fs::write(&p, mutate(&bytes, &ops)).unwrap();
            let want = SAMPLES.iter().find(|s| s.0 == rel).unwrap().1;
            let f = SourceFile::new("trace", &p);
            // Forced adapter (detection may rightly refuse a mangled file, and so may the
            // structural check of a forced framework).
            match sage_adapters::normalize(std::slice::from_ref(&f), &sage_adapters::NormalizeOptions::framework(Some(want))) {
                Ok(t) => prop_assert_eq!(t.framework.as_str(), want),
                Err(e) => {
                    prop_assert_eq!(e.file.as_str(), "trace");
                    prop_assert!(!e.message.is_empty());
                }
            }
            // The adapter's own parser on the mangled bytes, past every check.
            match sage_adapters::by_name(want).unwrap().normalize(&[f]) {
                Ok(t) => prop_assert_eq!(t.framework.as_str(), want),
                Err(e) => {
                    prop_assert_eq!(e.file.as_str(), "trace");
                    prop_assert!(!e.message.is_empty());
                }
            }
        }
    }
}
