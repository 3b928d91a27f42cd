//! Detection and refusal on every file of `../shared/traces`, through the real binary: each
//! file is either read (at least one agent-authored turn, every raw pointer resolving) or
//! refused with a reason that names what it is. Nothing yields a silent empty trace.

use crate::support::copy_dir;
use assert_cmd::Command;
use std::path::{Path, PathBuf};

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/traces");

fn shared() -> Option<&'static Path> {
    if crate::need::missing_shared("traces") {
        return None;
    }
    Some(Path::new(TRACES))
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("sage")
        .unwrap()
        .current_dir(TRACES)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `N turns (A administrative)` from the counts summary.
fn agent_turns(stderr: &str) -> usize {
    let line = stderr.lines().find(|l| l.contains(" turns (")).unwrap();
    let after = line.split_once(": ").unwrap().1;
    let n: usize = after.split(' ').next().unwrap().parse().unwrap();
    let a: usize = after
        .split_once('(')
        .unwrap()
        .1
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    n - a
}

#[test]
fn every_shared_file_is_read_or_refused_with_a_reason() {
    let Some(root) = shared() else { return };
    let mut files = Vec::new();
    files_under(root, &mut files);
    let (mut read, mut not_trace, mut empty) = (Vec::new(), Vec::new(), Vec::new());
    for f in &files {
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        let (code, _, err) = run(&["normalize", "--format", "summary", &rel]);
        if code == 0 {
            assert!(
                agent_turns(&err) >= 1,
                "{rel}: read without agent turn: {err}"
            );
            assert!(
                err.contains("raw pointers: all "),
                "{rel}: raw pointers do not all resolve: {err}"
            );
            read.push(rel);
        } else {
            assert_eq!(code, 1, "{rel}: {err}");
            if err.contains("not a trace: ") {
                not_trace.push(rel);
            } else if err.contains("no agent-authored turn") {
                empty.push(rel);
            } else {
                panic!("{rel}: refused without naming what it is: {err}");
            }
        }
    }
    // The corpus as collected (MANIFEST.tsv): every trace is read; the results, specs,
    // reports, side files and docs are named; one Codex excerpt has only user messages.
    for must in [
        "who-and-when/algorithm_generated_1.json",
        "who-and-when/algorithm_generated_47.json",
        "who-and-when/hand_crafted_24.json",
        "who-and-when/hand_crafted_6.json",
        "codex/codex-session-viewer.example.rollout.jsonl",
        "swe-agent/mas-evaluation.issue_4__matplotlib__matplotlib-22719.traj",
    ] {
        assert!(read.contains(&must.to_string()), "{must} not read");
    }
    assert_eq!(empty, vec!["codex/simonw_sample_codex_session.jsonl"]);
    assert!(not_trace.iter().all(|f| !f.ends_with(".traj")));
    assert_eq!(
        (read.len(), not_trace.len(), empty.len()),
        (43, 41, 1),
        "read {read:#?}\nnot a trace {not_trace:#?}"
    );
}

#[test]
fn a_file_that_is_not_a_trace_is_named() {
    if shared().is_none() {
        return;
    }
    for (f, what) in [
        ("otel-genai/gen-ai-input-messages.json", "a JSON Schema"),
        ("swe-agent/pydicom__pydicom-1458.patch", "a patch"),
        (
            "mini-swe-agent/django__django-10999.report.json",
            "evaluation report",
        ),
        (
            "openhands/mas-evaluation.issue_2__pallets__flask-5014.diff",
            "a patch",
        ),
        (
            "swe-agent/str_replace_anthropic_demo.yaml",
            "SWE-agent demonstration",
        ),
    ] {
        let (code, out, err) = run(&["normalize", f]);
        assert_eq!(code, 1, "{f}");
        assert!(out.is_empty(), "{f}: printed a trace");
        assert!(err.contains(what), "{f}: {err}");
    }
}

#[test]
fn a_forced_framework_that_does_not_match_is_refused_with_evidence() {
    if shared().is_none() {
        return;
    }
    // The issue's case: aider forced on an OpenHands export used to give a one-turn trace.
    let (code, out, err) = run(&[
        "normalize",
        "--framework",
        "aider",
        "openhands/runtime_trajs_basic.json",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty());
    assert!(err.contains("--framework aider refused"), "{err}");
    assert!(err.contains("openhands scores"), "{err}");
    // A forced framework that matches is accepted.
    let (code, _, err) = run(&[
        "normalize",
        "--format",
        "summary",
        "--framework",
        "openhands",
        "openhands/runtime_trajs_basic.json",
    ]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn no_agent_turn_is_an_error_unless_allowed() {
    if shared().is_none() {
        return;
    }
    // 3 user messages, 6 turn_context lines and a session_meta: nothing the agent wrote.
    let f = "codex/simonw_sample_codex_session.jsonl";
    let (code, out, err) = run(&["normalize", f]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(
        err.contains("no agent-authored turn in this codex trace"),
        "{err}"
    );
    assert!(
        err.contains("3 not agent-authored: task/user message"),
        "{err}"
    );
    let (code, _, err) = run(&["normalize", "--allow-empty", "--format", "summary", f]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("codex: 7 turns (7 administrative)"), "{err}");
}

#[test]
fn adapters_detect_prints_the_evidence() {
    if shared().is_none() {
        return;
    }
    let (code, out, _) = run(&["adapters", "detect", "who-and-when/hand_crafted_6.json"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("sampled whole file"), "{out}");
    assert!(out.contains("structure: one JSON object, keys ["), "{out}");
    assert!(out.contains("read as a JSON document"), "{out}");
    assert!(
        out.contains("Who&When run (history with mistake labels): form document; has /history, /mistake_agent"),
        "{out}"
    );
    assert!(out.contains("verdict: who-and-when"), "{out}");
    // A file larger than the sample: head + windows.
    let (code, out, _) = run(&[
        "adapters",
        "detect",
        "codex/codex-session-viewer.example.rollout.jsonl",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("head 64 KiB + 8 windows"), "{out}");
    assert!(out.contains("verdict: codex"), "{out}");
    let (code, out, _) = run(&[
        "adapters",
        "detect",
        "--format",
        "json",
        "otel-genai/gen-ai-input-messages.json",
    ]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v[0]["verdict"]["error"]
        .as_str()
        .unwrap()
        .contains("JSON Schema"));
}

#[test]
fn legacy_codex_rollout_is_read_with_its_apply_patch_heredocs() {
    if shared().is_none() {
        return;
    }
    let f = "codex/codex-session-viewer.example.rollout.jsonl";
    let (code, out, err) = run(&["normalize", f]);
    assert_eq!(code, 0, "{err}");
    let t: sage_trace::CanonicalTrace = serde_json::from_str(&out).unwrap();
    assert_eq!(t.framework, "codex");
    // 628 `{"record_type":"state"}` lines: dropped with their reason, never turns.
    let state = t
        .dropped
        .iter()
        .filter(|d| d.reason.starts_with("rollout state record"))
        .count();
    assert_eq!(state, 628);
    // 91 function_call lines carry `*** Begin Patch` (grep); each is a `shell` heredoc whose
    // writes come from apply_patch; none is read as a plain shell edit.
    let patch_calls: std::collections::BTreeSet<_> = t
        .turns
        .iter()
        .flat_map(|x| x.writes.iter())
        .filter(|w| w.via == "apply_patch")
        .map(|w| w.raw.display())
        .collect();
    assert!(
        patch_calls.len() >= 80 && patch_calls.len() <= 91,
        "{}",
        patch_calls.len()
    );
    assert!(patch_calls.iter().all(|r| r.contains("/arguments")));
    assert!(err.contains("raw pointers: all "), "{err}");
}

#[test]
fn localize_skips_a_case_whose_trace_has_no_agent_turn_or_the_wrong_framework() {
    let good = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/ag2-fig1a-aes-ecb");
    let d = tempfile::tempdir().unwrap();
    copy_dir(&good, &d.path().join("good"));
    // Only the user speaks: the trace holds no agent-authored turn.
    copy_dir(&good, &d.path().join("user-only"));
    std::fs::write(
        d.path().join("user-only/chat.json"),
        r#"[{"name": "user_proxy", "role": "user", "content": "Fix app.py."}]"#,
    )
    .unwrap();
    // The manifest forces aider on an AG2 chat list.
    copy_dir(&good, &d.path().join("wrong-framework"));
    let p = d.path().join("wrong-framework/case.json");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(
        &p,
        text.replacen("\"framework\": \"ag2\"", "\"framework\": \"aider\"", 1),
    )
    .unwrap();
    let out = Command::cargo_bin("sage")
        .unwrap()
        .arg("localize")
        .arg(d.path())
        .arg("--out-dir")
        .arg(d.path().join("out"))
        .arg("--format")
        .arg("json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let set: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(set["results"].as_array().unwrap().len(), 1);
    let skipped = set["skipped"].as_array().unwrap();
    let find = |dir: &str| {
        skipped
            .iter()
            .find(|s| s["case"].as_str().unwrap().ends_with(dir))
            .unwrap_or_else(|| panic!("{dir} not skipped: {set}"))
    };
    assert_eq!(find("user-only")["stage"], "adapter");
    assert!(find("user-only")["message"]
        .as_str()
        .unwrap()
        .contains("no agent-authored turn"));
    assert!(find("wrong-framework")["message"]
        .as_str()
        .unwrap()
        .contains("framework aider (the manifest's trace.framework) refused"));
    // Neither became a silent no-code-location result.
    assert_eq!(skipped.len(), 2);
}

/// A single-line JSON layout with a space after every `:` and `,` (what Python's
/// `json.dumps` writes), where the shared samples are mostly compact.
struct Spaced;

impl serde_json::ser::Formatter for Spaced {
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }
}

/// Every object's keys in reverse order (the samples' writers put discriminators first).
fn reversed(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let mut out = serde_json::Map::new();
            for (k, x) in m.iter().rev() {
                out.insert(k.clone(), reversed(x));
            }
            serde_json::Value::Object(out)
        }
        serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(reversed).collect()),
        x => x.clone(),
    }
}

fn spaced(v: &serde_json::Value) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Spaced);
    serde::Serialize::serialize(v, &mut ser).unwrap();
    String::from_utf8(out).unwrap()
}

/// The same records as `text` written another way: JSON documents pretty-printed or compact,
/// JSON Lines spaced or compact, keys reversed or not. `None` for a file that is not JSON.
fn rewritten(text: &str) -> Option<Vec<(&'static str, String)>> {
    if let Ok(doc) = serde_json::from_str::<serde_json::Value>(text) {
        let rev = reversed(&doc);
        return Some(vec![
            (
                "pretty, keys reversed",
                serde_json::to_string_pretty(&rev).unwrap(),
            ),
            ("compact", serde_json::to_string(&doc).unwrap()),
            ("spaced, keys reversed", spaced(&rev)),
        ]);
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let values: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l))
        .collect::<Result<_, _>>()
        .ok()?;
    let join = |f: &dyn Fn(&serde_json::Value) -> String| {
        values.iter().map(f).collect::<Vec<_>>().join("\n") + "\n"
    };
    Some(vec![
        ("lines spaced", join(&|v| spaced(v))),
        (
            "lines spaced, keys reversed",
            join(&|v| spaced(&reversed(v))),
        ),
        (
            "lines compact, keys reversed",
            join(&|v| serde_json::to_string(&reversed(v)).unwrap()),
        ),
    ])
}

/// Detection reads structure, not bytes: every shared trace that is read keeps its verdict
/// when the same records are written with other spacing, key order and indentation (the old
/// byte-needle detector listed `"type":"assistant"` and `"type": "assistant"` apart and missed
/// any third way).
#[test]
fn detection_does_not_depend_on_how_the_json_is_written() {
    let Some(root) = shared() else { return };
    let reg = sage_adapters::registry();
    let mut files = Vec::new();
    files_under(root, &mut files);
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for f in &files {
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        let Ok(d) = sage_adapters::detect::detect_file(&reg, f, &rel, &Default::default()) else {
            continue;
        };
        let Ok(verdict) = d.verdict() else { continue };
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        let Some(variants) = rewritten(&text) else {
            continue;
        };
        for (how, body) in variants {
            let p = dir.path().join("variant");
            std::fs::write(&p, &body).unwrap();
            let v =
                sage_adapters::detect::detect_file(&reg, &p, &rel, &Default::default()).unwrap();
            assert_eq!(
                v.verdict().map(|c| c.framework.clone()).ok(),
                Some(verdict.framework.clone()),
                "{rel} written {how}:\n{}",
                v.report()
            );
        }
        checked += 1;
    }
    // The JSON traces of MANIFEST.tsv (the Markdown, text and zip ones have no JSON layout).
    println!("{checked} traces rewritten three ways each");
    assert!(checked >= 35, "only {checked} traces checked");
}

/// `SAGE_DETECT_RULES=FILE` replaces the code adapters' rules; a file that cannot be used is
/// named and the embedded rules stay.
#[test]
fn detection_rules_are_data_a_user_can_replace() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("session.log");
    std::fs::write(
        &log,
        "MYAGENT v1\n#### fix the bug  \n> Applied edit to app.py  \n",
    )
    .unwrap();
    let rules = dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "version = \"mine-1\"\n[[rule]]\nadapter = \"aider\"\nwhy = \"my aider wrapper\"\nform = [\"text\"]\nlines = ['^MYAGENT v']\nscore = 95\n",
    )
    .unwrap();
    let detect = |env: Option<&std::path::Path>| {
        let mut c = Command::cargo_bin("sage").unwrap();
        c.args(["adapters", "detect"]).arg(&log);
        if let Some(p) = env {
            c.env("SAGE_DETECT_RULES", p);
        }
        let out = c.output().unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (out, _) = detect(Some(&rules));
    assert!(out.contains("95  aider"), "{out}");
    assert!(
        out.contains("my aider wrapper: form text; lines ^MYAGENT v"),
        "{out}"
    );
    // The embedded rule for a banner-less history scores it 60 instead.
    let (out, _) = detect(None);
    assert!(out.contains("60  aider"), "{out}");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[rule]]\nscore = 1\n").unwrap();
    let (out, err) = detect(Some(&bad));
    assert!(err.contains("SAGE_DETECT_RULES ignored"), "{err}");
    assert!(out.contains("60  aider"), "{out}");
    // A misspelt adapter name would leave its rules silently unused: refused, named.
    let typo = dir.path().join("typo.toml");
    std::fs::write(
        &typo,
        "version = \"t\"\n[[rule]]\nadapter = \"aidr\"\nform = [\"text\"]\nlines = ['^MYAGENT v']\nscore = 95\n",
    )
    .unwrap();
    let (out, err) = detect(Some(&typo));
    assert!(err.contains("unknown adapter(s) aidr"), "{err}");
    assert!(out.contains("60  aider"), "{out}");
}
