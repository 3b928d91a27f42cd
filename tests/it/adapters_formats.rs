//! Formats with no real sample in `../shared/traces`, each on a constructed sample documented
//! from its specification (the sample's `notes` field names the spec): Harbor ATIF
//! trajectories and OpenInference spans (TRAIL layout). Golden counts derived by hand from the
//! sample, raw pointers verified, and a bounded mutation proptest per adapter.

use proptest::prelude::*;
use sage_adapters::SourceFile;
use sage_trace::{CanonicalTrace, RawStore, TurnKind, WriteOp};
use std::path::Path;

const ATIF: &str = "tests/fixtures/atif/trajectory.json";
const OI: &str = "tests/fixtures/openinference/trail_like_trace.json";

fn read(rel: &str) -> CanonicalTrace {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let t = sage_adapters::normalize(&[SourceFile::new(rel, &p)], &Default::default())
        .unwrap_or_else(|e| panic!("{rel}: {e}"));
    let store = RawStore::load(
        &t,
        Path::new(env!("CARGO_MANIFEST_DIR")),
        sage_trace::safe::DEFAULT_MAX_INPUT_BYTES,
    )
    .unwrap();
    let bad = sage_adapters::verify_raw_refs(&t, &store);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    t
}

#[test]
fn atif_trajectory_golden() {
    let t = read(ATIF);
    assert_eq!(t.framework, "atif");
    // Steps: 1 system → administrative turn 1; 2 user → dropped (task); 3 agent (message,
    // bash heredoc, its observation) → turn 2 with the write; 4 agent (reasoning only, one
    // call) → turn 3; 5 agent (message) → turn 4.
    let c = t.counts();
    assert_eq!(
        (
            c.turns,
            c.administrative,
            c.tool_calls,
            c.tool_results,
            c.writes,
            c.dropped
        ),
        (4, 1, 2, 2, 1, 1)
    );
    assert_eq!(t.turns[0].kind, TurnKind::Administrative);
    assert_eq!(t.turns[1].actor.name, "terminus-2");
    assert_eq!(t.turns[1].actor.role.as_deref(), Some("gpt-4o-2024-08-06"));
    assert_eq!(
        t.turns[1].tool_results[0].call_id.as_deref(),
        Some("call_1")
    );
    let w = &t.turns[1].writes[0];
    assert_eq!(w.artefact, "greet.py");
    assert_eq!(
        w.op,
        WriteOp::FullContent {
            content: "print(\"hello, world\")\n".into()
        }
    );
    assert_eq!(
        t.turns[2].message.as_ref().unwrap().text,
        "Check that it runs."
    );
    assert_eq!(t.turns[2].tool_results[0].output, "hello, world\n");
    assert_eq!(t.dropped[0].reason, "not agent-authored: task/user message");
}

#[test]
fn openinference_trail_layout_golden() {
    let t = read(OI);
    assert_eq!(t.framework, "openinference");
    // Spans depth-first by timestamp: AGENT a1 (dropped: structure), LLM l1 → turn 1 (text +
    // read_file call_1), TOOL t1 → its result, LLM l2 → turn 2 (output.value, no call),
    // TOOL t2 (ERROR) → a result of turn 2 marked error, CHAIN c1 → dropped.
    let c = t.counts();
    assert_eq!(
        (
            c.turns,
            c.administrative,
            c.tool_calls,
            c.tool_results,
            c.writes,
            c.dropped
        ),
        (2, 0, 1, 2, 0, 2)
    );
    // The actor is the nearest AGENT ancestor (nesting gives the parent).
    assert!(t.turns.iter().all(|x| x.actor.name == "CodeAgent.run"));
    assert_eq!(t.turns[0].actor.role.as_deref(), Some("gpt-4o"));
    assert_eq!(t.turns[0].tool_calls[0].name, "read_file");
    assert_eq!(
        t.turns[0].tool_results[0].output,
        "def add(a, b):\n    return a - b\n"
    );
    assert!(!t.turns[0].tool_results[0].is_error);
    assert!(t.turns[1].tool_results[0].is_error);
    assert_eq!(
        t.turns[1].message.as_ref().unwrap().text,
        "add subtracts; it should return a + b."
    );
}

fn mutate(bytes: &[u8], ops: &[(u8, usize, u8)]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for &(kind, pos, byte) in ops {
        if b.is_empty() {
            break;
        }
        let i = pos % b.len();
        match kind % 3 {
            0 => b[i] = byte,
            1 => {
                b.remove(i);
            }
            _ => b.truncate(i),
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn mutated_constructed_samples_never_panic(
        which in 0..2usize,
        ops in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..5),
    ) {
        let (rel, fw) = [(ATIF, "atif"), (OI, "openinference")][which];
        let bytes = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap();
        let data = mutate(&bytes, &ops);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trace");
        std::fs::write(&p, &data).unwrap();
        let f = SourceFile::new("trace", &p);
        match sage_adapters::by_name(fw).unwrap().normalize(std::slice::from_ref(&f)) {
            Ok(t) => {
                let mut store = RawStore::new();
                store.insert("trace", data.clone());
                let bad = sage_adapters::verify_raw_refs(&t, &store);
                prop_assert!(bad.is_empty(), "{}", bad.join("\n"));
            }
            Err(e) => {
                prop_assert_eq!(e.file.as_str(), "trace");
                prop_assert!(e.record.is_some(), "no location: {}", e);
            }
        }
        let _ = sage_adapters::normalize(&[f], &Default::default());
    }
}

/// A message split over several text blocks keeps every block, each with its own raw pointer
/// (`tests/fixtures/multi-block/README.md` derives the expected turns).
#[test]
fn a_message_split_over_blocks_keeps_every_block() {
    let messages = |t: &CanonicalTrace| -> Vec<String> {
        t.turns
            .iter()
            .filter_map(|x| x.message.as_ref().map(|m| m.text.clone()))
            .collect()
    };
    let t = read("tests/fixtures/multi-block/mini-swe-agent.traj.json");
    assert_eq!(t.framework, "mini-swe-agent");
    let m = messages(&t);
    assert_eq!(m[1], "First I look at the folder.");
    assert!(m[2].starts_with("Then I run:"), "{m:?}");
    assert_eq!(t.turns[1].tool_calls.len(), 1);
    assert_eq!(t.turns[1].tool_calls[0].arguments, "ls");
    let outs: Vec<&str> = t.turns[1]
        .tool_results
        .iter()
        .map(|r| r.output.as_str())
        .collect();
    assert_eq!(
        outs,
        [
            "<returncode>0</returncode>\n<output>\n",
            "app.py\n</output>"
        ]
    );

    let t = read("tests/fixtures/multi-block/swe-agent.traj");
    assert_eq!(t.framework, "swe-agent");
    let m = messages(&t);
    assert_eq!(&m[1..], ["Part one of my plan.", "Part two of my plan."]);
    assert_eq!(t.turns[1].tool_calls.len(), 1);
    assert_eq!(t.turns[1].tool_results.len(), 2);

    let t = read("tests/fixtures/multi-block/openhands-sdk.events.jsonl");
    assert_eq!(t.framework, "openhands-sdk");
    assert_eq!(messages(&t), ["I will look first.", "Then I decide."]);
    assert_eq!(t.turns[0].tool_calls.len(), 1);

    let t = read("tests/fixtures/multi-block/ag2.chat.json");
    assert_eq!(t.framework, "ag2");
    assert_eq!(
        messages(&t),
        ["First block of the reply.", "Second block of the reply."]
    );
    assert!(t.turns.iter().all(|x| x.actor.name == "coder"));
}
