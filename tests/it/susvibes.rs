//! The real SusVibes traces (`../shared/susvibes`: OpenHands runs exported as Claude-stream-like
//! lists): golden summaries of every trace, detection, raw pointers, exact replays, and the
//! three `sage case` commands against the shared cases. Every test skips with one printed line
//! when ../shared is absent.

use crate::adapters_events::summary;
use crate::support::copy_dir;
use assert_cmd::Command;
use predicates::prelude::*;
use sage_adapters::{self as adapters, SourceFile};
use sage_trace::RawStore;
use std::path::{Path, PathBuf};

/// `../shared/susvibes`, or `None` after reporting the skip (a failure under CI).
fn shared(_test: &str) -> Option<PathBuf> {
    if super::need::missing_shared("susvibes/cases") {
        return None;
    }
    Some(super::need::shared_path("susvibes"))
}

fn sage() -> Command {
    Command::cargo_bin("sage").unwrap()
}

/// Every trace under cases/, contrast/ and rejected/: (its folder, the trace file).
fn traces(root: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for sub in ["cases", "contrast", "rejected"] {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        for d in dirs {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                let name = p.file_name().unwrap().to_string_lossy().to_string();
                if name.ends_with(".json") && name != "case.json" && name != "candidate.json" {
                    out.push((d.clone(), p));
                }
            }
        }
    }
    out
}

fn source(trace: &Path) -> SourceFile {
    SourceFile::new(trace.file_name().unwrap().to_string_lossy(), trace)
}

fn case_dirs(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("cases"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn golden_summaries_of_every_trace() {
    let Some(root) = shared("golden_summaries_of_every_trace") else {
        return;
    };
    let all = traces(&root);
    assert_eq!(
        all.len(),
        18,
        "14 cases, 3 contrast runs, 1 rejected candidate"
    );
    for (dir, trace) in all {
        let t = adapters::normalize(&[source(&trace)], &Default::default())
            .unwrap_or_else(|e| panic!("{}: {e}", trace.display()));
        let name = format!("susvibes__{}", dir.file_name().unwrap().to_string_lossy());
        insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!(name, summary(&t));
        });
    }
}

#[test]
fn detected_from_content_as_claude_stream_never_ag2() {
    let Some(root) = shared("detected_from_content_as_claude_stream_never_ag2") else {
        return;
    };
    let ag2 = adapters::by_name("ag2").unwrap();
    for (_, trace) in traces(&root) {
        let got = adapters::detect(&trace, &Default::default()).unwrap();
        assert_eq!(got.name(), "claude-stream", "{}", trace.display());
        let shape =
            adapters::detect::shape_of(&trace, "t", sage_trace::safe::DEFAULT_MAX_INPUT_BYTES)
                .unwrap();
        assert_eq!(
            ag2.detect(&shape, adapters::rules::DetectRules::embedded()),
            None,
            "AG2 must not claim {}",
            trace.display()
        );
        // The shared cases name the agent's framework (openhands): forced, it hands over.
        let forced = adapters::normalize(
            &[source(&trace)],
            &adapters::NormalizeOptions::framework(Some("openhands")),
        )
        .unwrap();
        assert_eq!(forced.framework, "claude-stream");
        assert!(forced.turns.len() > 10);
    }
}

#[test]
fn every_item_points_to_raw_text_containing_it() {
    let Some(root) = shared("every_item_points_to_raw_text_containing_it") else {
        return;
    };
    for (dir, trace) in traces(&root) {
        let t = adapters::normalize(&[source(&trace)], &Default::default()).unwrap();
        let store = RawStore::load(&t, &dir, sage_trace::safe::DEFAULT_MAX_INPUT_BYTES).unwrap();
        let bad = adapters::verify_raw_refs(&t, &store);
        assert!(bad.is_empty(), "{}: {bad:#?}", trace.display());
    }
}

/// The insert positions the exporter dropped, read back from the snippets. Derivation from the
/// raw tool results (the editor shows 4 lines before the insertion, then the inserted lines):
/// gemini-2.5-pro aiohttp event 25: the snippet starts at line 15 and the new `def __init__`
/// line is line 19, so insert_line = 18; gemini-3-pro aiohttp event 31: the snippet starts at 14,
/// the new_str begins with an empty line, shown as line 18 (after `class Session(...)` at 17),
/// so insert_line = 17; gemini-3-pro wagtail event 46: snippet from 12, new_str starts with an
/// empty line at 16, so insert_line = 15.
#[test]
fn insert_positions_come_from_the_snippets() {
    let Some(root) = shared("insert_positions_come_from_the_snippets") else {
        return;
    };
    let want = [
        ("gemini-2.5-pro__aio-libs__aiohttp-session", "#/25/", 18),
        ("gemini-3-pro__aio-libs__aiohttp-session", "#/31/", 17),
        ("gemini-3-pro__wagtail__wagtail_5c7a", "#/46/", 15),
    ];
    for (prefix, rec, line) in want {
        let (_, trace) = traces(&root)
            .into_iter()
            .find(|(d, _)| d.file_name().unwrap().to_string_lossy().starts_with(prefix))
            .unwrap();
        let t = adapters::normalize(&[source(&trace)], &Default::default()).unwrap();
        let (_, w) = t
            .writes()
            .find(|(_, w)| w.raw.display().contains(rec))
            .unwrap_or_else(|| panic!("{prefix}: no write at {rec}"));
        assert_eq!(
            w.op,
            sage_trace::WriteOp::Insert {
                after_line: line,
                text: match &w.op {
                    sage_trace::WriteOp::Insert { text, .. } => text.clone(),
                    _ => panic!("{prefix}: not an insert"),
                }
            },
            "{prefix}"
        );
        assert!(
            t.notes
                .iter()
                .any(|n| n.contains(rec) && n.contains(&format!("after line {line}"))),
            "{prefix}: {:?}",
            t.notes
        );
    }
}

/// Every final file of the shared cases (the submitted patch applied to the baseline, or the
/// reference replay where no patch exists) is exactly what sage's replay of the trace gives.
#[test]
fn the_replay_gives_every_final_file_exactly() {
    let Some(root) = shared("the_replay_gives_every_final_file_exactly") else {
        return;
    };
    let mut compared = 0;
    for sub in ["cases", "contrast"] {
        for e in std::fs::read_dir(root.join(sub)).unwrap() {
            let dir = e.unwrap().path();
            let (p, _) = sage_pipeline::localize::prepare(&dir, &Default::default())
                .unwrap_or_else(|s| panic!("{s:?}"));
            let checks: Vec<_> =
                sage_history::independent_checks(&p.anchor, &p.history, &p.trace, &p.provenance)
                    .into_iter()
                    .filter(|c| c.name == "final-state-matches-replay")
                    .collect();
            assert_eq!(checks.len(), p.case.final_files.len(), "{}", dir.display());
            for c in checks {
                assert!(c.passed, "{}: {}", dir.display(), c.detail);
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 18, "15 case artefacts and 3 contrast artefacts");
}

/// The two requests cases: the trace never shows the whole 806-line sessions.py (the editor
/// clipped the first view; the others are ranges), so their shared baselines came from the
/// repository; `case init` needs `--baseline-dir` for them and checks it by blob id.
const NEEDS_BASELINE: &[&str] = &["psf__requests_74ea7cf7"];
/// Cases the trace edits files of that it never shows whole: the case is written without them,
/// with a warning (exit 1).
const WARNS: &[(&str, &str)] = &[
    (
        "claude-4-sonnet__wagtail__wagtail_d9a41e7f",
        "wagtail/admin/rich_text/converters/html_ruleset.py",
    ),
    (
        "gemini-2.5-pro__aio-libs__aiohttp-session",
        "tests/test_session_dict.py",
    ),
];

#[test]
fn case_init_rebuilds_every_shared_case_from_trace_and_patch() {
    let Some(root) = shared("case_init_rebuilds_every_shared_case_from_trace_and_patch") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for dir in case_dirs(&root) {
        let id = dir.file_name().unwrap().to_string_lossy().to_string();
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap()).unwrap();
        let trace = dir.join(m["trace"]["files"][0].as_str().unwrap());
        let out = tmp.path().join(&id);
        let mut cmd = sage();
        cmd.args(["case", "init"])
            .arg(&trace)
            .arg("--out")
            .arg(&out);
        if dir.join("model_patch.diff").is_file() {
            cmd.arg("--patch").arg(dir.join("model_patch.diff"));
        }
        let needs = NEEDS_BASELINE.iter().any(|n| id.contains(n));
        if needs {
            // From the trace and patch alone: refused, naming the file, nothing written.
            let mut alone = sage();
            alone
                .args(["case", "init"])
                .arg(&trace)
                .arg("--patch")
                .arg(dir.join("model_patch.diff"))
                .arg("--out")
                .arg(tmp.path().join(format!("{id}-alone")));
            alone.assert().code(1).stderr(predicates::str::contains(
                "no baseline for requests/sessions.py",
            ));
            assert!(!tmp.path().join(format!("{id}-alone")).exists());
            cmd.arg("--baseline-dir").arg(dir.join("baseline"));
        }
        let warn = WARNS.iter().find(|(p, _)| id.starts_with(p));
        let a = cmd.assert();
        let a = match warn {
            Some((_, file)) => a.code(1).stderr(
                predicates::str::contains("warning: ").and(predicates::str::contains(*file)),
            ),
            None => a.success(),
        };
        let _ = a;
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("case.json")).unwrap()).unwrap();
        // Anchor aside, the rebuilt manifest holds what the shared one does.
        let keys = |v: &serde_json::Value| -> Vec<String> {
            v.as_object().unwrap().keys().cloned().collect()
        };
        assert_eq!(
            keys(&r["baseline"]),
            keys(&m["baseline"]),
            "{id}: baselines"
        );
        assert_eq!(
            keys(&r["final_state"]),
            keys(&m["final_state"]),
            "{id}: final"
        );
        for (field, d) in [("baseline", "baseline"), ("final_state", "final")] {
            for (a, f) in m[field].as_object().unwrap() {
                let want = std::fs::read(dir.join(f.as_str().unwrap())).unwrap();
                let got = std::fs::read(out.join(format!("{d}/{a}"))).unwrap();
                assert!(want == got, "{id}: {field} of {a} differs");
            }
        }
        assert_eq!(r["task"]["description"], m["task"]["description"], "{id}");
        assert_eq!(r["task"]["id"], m["task"]["id"], "{id}");
        for k in ["framework", "base_model", "task_id"] {
            assert_eq!(r["metadata"][k], m["metadata"][k], "{id}: metadata.{k}");
        }
        assert_eq!(r["metadata"]["trace_source"], "real");
        assert_eq!(
            std::fs::read(out.join(trace.file_name().unwrap())).unwrap(),
            std::fs::read(&trace).unwrap()
        );
    }
}

#[test]
fn case_check_on_the_shared_cases() {
    let Some(root) = shared("case_check_on_the_shared_cases") else {
        return;
    };
    let a = sage()
        .args(["case", "check", "--no-execute"])
        .arg(root.join("cases"))
        .assert()
        .success();
    let out = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert_eq!(out.matches(": ok (fragment located; ").count(), 14, "{out}");
    assert_eq!(out.matches("replay = final file").count(), 15, "{out}");
    // `sage replay`'s verdict per file: every final file matches, nothing differs, and each
    // unverifiable file says why.
    assert_eq!(out.matches("\n  replay: ").count(), 14, "{out}");
    assert_eq!(out.matches("\n    matches      ").count(), 15, "{out}");
    assert!(!out.contains("\n    differs      "), "{out}");
    assert!(
        out.lines()
            .filter(|l| l.starts_with("    unverifiable "))
            .all(|l| l.contains(": ")),
        "{out}"
    );
    // Writes to files outside the case replay on what the trace shows of them: a file shown
    // whole before its edit, and one shown only in the snippets after each edit.
    assert!(!out.contains(" do not replay "), "{out}");
    // A broken copy of a real case: its baseline loses a line the trace's view shows.
    let tmp = tempfile::tempdir().unwrap();
    let src = root
        .join("cases/kimi-k2__aio-libs__aiohttp-session_1b356f01bbab57d041c9a75bacd72fbbf8524728");
    let dst = tmp.path().join("kimi");
    copy_dir(&src, &dst);
    let base = dst.join("baseline/aiohttp_session/__init__.py");
    let text = std::fs::read_to_string(&base).unwrap();
    std::fs::write(&base, text.replacen("import json\n", "", 1)).unwrap();
    let a = sage().args(["case", "check"]).arg(&dst).assert().code(1);
    let out = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert!(
        out.contains("aiohttp_session/__init__.py line 5: the trace's view at aio-libs__aiohttp-session_1b356f01bbab57d041c9a75bacd72fbbf8524728.json#/8/message/content/0/content shows \"import json\""),
        "{out}"
    );
    assert!(
        out.contains("the replay differs from the final file"),
        "{out}"
    );
}

/// gemini-2.5-pro wagtail 5c7a6097: the agent inserts link_entity, undoes it (undo_edit at
/// events 103 and 105) and inserts it again (event 109, turn 56: the reinstating write).
#[test]
fn case_show_follows_a_real_remove_and_reinstate() {
    let Some(root) = shared("case_show_follows_a_real_remove_and_reinstate") else {
        return;
    };
    let dir = root
        .join("cases/gemini-2.5-pro__wagtail__wagtail_5c7a60977cba478f6a35390ba98cffc2bd41c8a4");
    let at = |t: &str| -> String {
        let a = sage()
            .args(["case", "show"])
            .arg(&dir)
            .args(["--at", t])
            .assert()
            .success();
        String::from_utf8_lossy(&a.get_output().stdout).to_string()
    };
    let fragment = "'href': props['entity']['data']['url'],";
    assert!(at("7").contains(fragment), "first inserted at turn 7");
    assert!(!at("55").contains("def link_entity"), "undone by turn 55");
    assert!(at("56").contains(fragment), "reinstated at turn 56");
    let a = sage()
        .args(["case", "show"])
        .arg(&dir)
        .args(["--write", "4", "--diff"])
        .assert()
        .success();
    let diff = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert!(diff.contains("via str_replace_editor undo_edit"), "{diff}");
    assert!(diff.contains("-def link_entity(props):"), "{diff}");
}
