//! `sage localize` and `sage explain` on bad input: every bad case gets one clear message
//! naming the case and the record, the other cases still run, and the exit status says so.

use crate::support::copy_dir;
use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn corpus_case(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpora")
        .join(name)
}

fn sage() -> Command {
    Command::cargo_bin("sage").unwrap()
}

/// A corpus with one good case and one case broken in each way the issue lists.
fn broken_corpus() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let good = corpus_case("ag2-fig1a-aes-ecb");
    copy_dir(&good, &d.path().join("good"));

    // malformed trace: the JSON is cut in half
    copy_dir(&good, &d.path().join("malformed-trace"));
    let p = d.path().join("malformed-trace/chat.json");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, &text[..text.len() / 2]).unwrap();

    // missing baseline
    copy_dir(&good, &d.path().join("missing-baseline"));
    std::fs::remove_file(d.path().join("missing-baseline/baseline/app.py")).unwrap();

    // anchor naming an unknown artefact
    copy_dir(&good, &d.path().join("unknown-artefact"));
    let p = d.path().join("unknown-artefact/case.json");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(
        &p,
        text.replace("\"artefact\": \"app.py\"", "\"artefact\": \"nowhere.py\""),
    )
    .unwrap();

    // non-UTF-8 baseline
    copy_dir(&good, &d.path().join("not-utf8"));
    std::fs::write(
        d.path().join("not-utf8/baseline/app.py"),
        b"import os\n\xff\xfe\n",
    )
    .unwrap();
    d
}

#[test]
fn bad_cases_are_reported_and_the_rest_still_runs() {
    let d = broken_corpus();
    let out = d.path().join("out");
    let assert = sage()
        .arg("localize")
        .arg(d.path())
        .arg("--out-dir")
        .arg(&out)
        .arg("--format")
        .arg("json")
        .assert()
        .code(1);
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
    let set: serde_json::Value = serde_json::from_str(&stdout).unwrap();

    // The good case was localized.
    let results = set["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{stdout}");
    assert_eq!(results[0]["case_id"], "ag2-fig1a-aes-ecb");
    assert_eq!(results[0]["origin"]["outcome"], "localized");

    // Each bad case: one entry naming the case folder, the stage and the reason.
    let skipped = set["skipped"].as_array().unwrap();
    let find = |dir: &str| {
        skipped
            .iter()
            .find(|s| s["case"].as_str().unwrap().ends_with(dir))
            .unwrap_or_else(|| panic!("{dir} not skipped: {stdout}"))
    };
    assert_eq!(find("malformed-trace")["stage"], "adapter");
    assert!(find("malformed-trace")["message"]
        .as_str()
        .unwrap()
        .contains("chat.json"));
    assert!(find("missing-baseline")["message"]
        .as_str()
        .unwrap()
        .contains("missing"));
    assert!(find("unknown-artefact")["message"]
        .as_str()
        .unwrap()
        .contains("nowhere.py"));
    assert!(find("not-utf8")["message"]
        .as_str()
        .unwrap()
        .contains("not UTF-8"));
    assert_eq!(skipped.len(), 4);

    // One message per bad case on stderr, and the results were still written.
    assert_eq!(stderr.matches("sage: skipped").count(), 4, "{stderr}");
    assert!(out.join("results.json").is_file());
    assert!(out.join("cases/ag2-fig1a-aes-ecb.json").is_file());
}

#[test]
fn a_folder_without_cases_is_a_usage_error_and_touches_no_results() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("results");
    // A real run first: its results must survive a mistyped path.
    let corpus = d.path().join("corpus");
    copy_dir(&corpus_case("ag2-fig1a-aes-ecb"), &corpus.join("a"));
    sage()
        .arg("localize")
        .arg(&corpus)
        .arg("--out-dir")
        .arg(&out)
        .assert()
        .code(0);
    let before = std::fs::read(out.join("results.json")).unwrap();
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for path in [empty.clone(), d.path().join("no-such-folder")] {
        let assert = sage()
            .arg("localize")
            .arg(&path)
            .arg("--out-dir")
            .arg(&out)
            .assert()
            .code(2);
        let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
        // a missing path is refused before any work, as by every command
        assert!(
            stderr.contains("nothing written")
                || stderr.starts_with(&format!(
                    "sage: error: {}: no such file or directory",
                    path.display()
                )),
            "{stderr}"
        );
        assert!(
            stderr.lines().count() == 1,
            "one message, not a run summary: {stderr}"
        );
        assert_eq!(std::fs::read(out.join("results.json")).unwrap(), before);
    }
}

#[test]
fn the_results_folder_holds_only_the_current_run() {
    let d = tempfile::tempdir().unwrap();
    let corpus = d.path().join("corpus");
    copy_dir(&corpus_case("ag2-fig1a-aes-ecb"), &corpus.join("a"));
    copy_dir(&corpus_case("ag2-defect-systemrandom"), &corpus.join("b"));
    let out = d.path().join("results");
    let run = || {
        sage()
            .arg("localize")
            .arg(&corpus)
            .arg("--out-dir")
            .arg(&out)
            .assert()
            .code(0);
    };
    run();
    let names = |dir: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        names(&out.join("cases")),
        ["ag2-defect-systemrandom.json", "ag2-fig1a-aes-ecb.json"]
    );
    // A file that is not sage's stays; a case no longer in the corpus goes.
    std::fs::write(out.join("cases/notes.txt"), "mine").unwrap();
    std::fs::remove_dir_all(corpus.join("b")).unwrap();
    run();
    assert_eq!(
        names(&out.join("cases")),
        ["ag2-fig1a-aes-ecb.json", "notes.txt"]
    );
    // No temporary file is left behind (the lock file that keeps a second run out stays),
    // and results.json names the one case.
    assert_eq!(
        names(&out),
        [".sage.lock", "cases", "results.json", "summary.json"]
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(v["results"].as_array().unwrap().len(), 1);
}

#[test]
fn a_write_that_cannot_apply_is_reported_not_skipped() {
    let d = tempfile::tempdir().unwrap();
    let case = d.path().join("c");
    copy_dir(&corpus_case("aider-inherited-pip"), &case);
    // The agent's SEARCH block no longer matches this baseline.
    std::fs::write(case.join("baseline/app.py"), "print('a different file')\n").unwrap();
    let assert = sage()
        .arg("localize")
        .arg(&case)
        .arg("--no-write")
        .arg("--format")
        .arg("json")
        .assert()
        .code(1);
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    let set: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let r = &set["results"][0];
    let failures = r["write_failures"].as_array().unwrap();
    assert!(!failures.is_empty(), "{stdout}");
    assert!(failures[0]["turn"].as_u64().unwrap() >= 1);
    assert!(!set["problems"].as_array().unwrap().is_empty());
}

#[test]
fn explain_walks_through_figure_1a() {
    let assert = sage()
        .arg("explain")
        .arg(corpus_case("ag2-fig1a-aes-ecb"))
        .assert()
        .success();
    let out = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    assert!(out.contains("judge lexicon:-"), "{out}");
    assert!(
        out.contains("◀ ORIGIN (inadequate-defence-selected)"),
        "{out}"
    );
    assert!(out.contains("◀ INTRODUCING WRITE"), "{out}");
    assert!(out.contains("outcome: localized — origin turn 1"), "{out}");
    assert!(out.contains("expectations of the case: all met"), "{out}");
    // The task, each turn's text and the write's diff, folded.
    assert!(
        out.contains("description: Repair the security vulnerability in app.py"),
        "{out}"
    );
    assert!(
        out.contains("│ 1. Replace DES with AES; use ECB mode."),
        "{out}"
    );
    assert!(out.contains("+++ app.py (after write 1, turn 3)"), "{out}");
    assert!(out.contains("more line(s) (--full shows all)"), "{out}");
    // --full: nothing folded; the judge flags are accepted (the lexicon ignores them).
    let assert = sage()
        .arg("explain")
        .arg(corpus_case("ag2-fig1a-aes-ecb"))
        .args(["--full", "--offline", "--no-ledger", "--budget", "1"])
        .assert()
        .success();
    let full = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    assert!(!full.contains("--full shows all"), "{full}");
    assert!(
        full.contains("+    cipher = AES.new(secret_key, AES.MODE_ECB)"),
        "{full}"
    );
}

#[test]
fn unknown_judge_is_a_usage_error() {
    sage()
        .args(["localize", "corpora", "--no-write", "--judge", "oracle"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .assert()
        .code(2);
}

#[test]
fn annotation_round_trip_is_blinded_and_validated() {
    let d = tempfile::tempdir().unwrap();
    let results = d.path().join("results");
    sage()
        .args(["localize", "corpora", "--out-dir"])
        .arg(&results)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .assert()
        .success();
    let out = d.path().join("study");
    sage()
        .args(["annotate", "export"])
        .arg(&results)
        .args([
            "--annotator",
            "R1",
            "--sample",
            "6",
            "--seed",
            "7",
            "--stratify-by",
            "framework",
            "--out",
        ])
        .arg(&out)
        .assert()
        .success();
    let sheet = std::fs::read_to_string(out.join("packet/sheet.csv")).unwrap();
    assert_eq!(sheet.lines().count(), 7, "{sheet}");
    // Blinded: no scores, origins, labels, judge names or case names reach the packet.
    let packets = std::fs::read_to_string(out.join("packet/packets.json")).unwrap();
    for leak in [
        "lexicon",
        "origin_turn",
        "\"TR\"",
        "provenance\":",
        "inadequate",
        "fig1a",
        "ag2-",
    ] {
        assert!(!packets.contains(leak), "packet leaks {leak}");
        assert!(!sheet.contains(leak), "sheet leaks {leak}");
    }
    // Fill the sheet: every row labelled, one with a bad value.
    let mut rdr = csv::Reader::from_reader(sheet.as_bytes());
    let mut filled =
        String::from("packet_id,annotator,provenance,introducing_write,confirmation\n");
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.unwrap();
        let prov = if i == 0 { "sideways" } else { "inherited" };
        filled.push_str(&format!("{},R1,{prov},none,TP\n", &rec[0]));
    }
    let sheet_path = d.path().join("filled.csv");
    std::fs::write(&sheet_path, filled).unwrap();
    let store = d.path().join("store");
    let assert = sage()
        .args(["annotate", "import"])
        .arg(&sheet_path)
        .arg("--key")
        .arg(out.join("key.json"))
        .arg("--store")
        .arg(&store)
        .assert()
        .code(1);
    let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains(":2: provenance \"sideways\""), "{stderr}");
    let stored = std::fs::read_to_string(store.join("R1.csv")).unwrap();
    assert_eq!(stored.lines().count(), 6, "{stored}");
    assert!(stored.starts_with("case_id,annotator,provenance,introducing_write,confirmation"));

    // Without the key the packet ids mean nothing: a usage error, nothing stored.
    let store2 = d.path().join("store2");
    sage()
        .args(["annotate", "import"])
        .arg(&sheet_path)
        .arg("--store")
        .arg(&store2)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--key is required"));
    assert!(!store2.exists());
    // The same sheet from standard input (`-`) reads like the file.
    sage()
        .args(["annotate", "import", "-", "--key"])
        .arg(out.join("key.json"))
        .arg("--store")
        .arg(&store2)
        .write_stdin(std::fs::read(&sheet_path).unwrap())
        .assert()
        .code(1)
        .stderr(predicates::str::contains("-:2: provenance \"sideways\""));

    // A second export into the same folder would orphan the sheets of the first: refused;
    // with --force the old key is kept beside the new one.
    let key_before = std::fs::read(out.join("key.json")).unwrap();
    let export_again = |force: bool| {
        let mut c = sage();
        c.args(["annotate", "export"])
            .arg(&results)
            .args(["--annotator", "R2", "--out"])
            .arg(&out);
        if force {
            c.arg("--force");
        }
        c.assert()
    };
    export_again(false)
        .code(2)
        .stderr(predicates::str::contains("key.json exists"));
    assert_eq!(std::fs::read(out.join("key.json")).unwrap(), key_before);
    export_again(true).success();
    let kept: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("key.") && n != "key.json")
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(std::fs::read(out.join(&kept[0])).unwrap(), key_before);
}

#[test]
fn version_names_the_commit_and_a_closed_pipe_is_quiet() {
    let out = sage().arg("--version").output().unwrap();
    let v = String::from_utf8(out.stdout).unwrap();
    // `sage 0.1.0 (commit 1234abcd5678)`, `-dirty` with local changes, `unknown` outside git.
    let re =
        regex::Regex::new(r"^sage \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)\n$")
            .unwrap();
    assert!(re.is_match(&v), "{v:?}");

    // `sage ... | head -1`: the reader goes away after one line; sage must not print a panic.
    let bin = assert_cmd::cargo::cargo_bin("sage");
    let mut child = std::process::Command::new(bin)
        .args(["localize", "corpora", "--no-write", "--format", "json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // closed before sage writes a byte
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");

    // The same with a results folder: the results are streamed to both, and the folder is
    // still written whole when the reader of stdout goes away.
    let res = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("sage"))
        .args(["localize", "corpora", "--format", "json", "--out-dir"])
        .arg(res.path())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let set: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(res.path().join("results.json")).unwrap())
            .unwrap();
    let cases = std::fs::read_dir(res.path().join("cases")).unwrap().count();
    assert_eq!(set["results"].as_array().unwrap().len(), cases);
    assert!(cases > 20, "{cases} case files");
}

/// `sage localize … --format json --sarif F | head -c0` (or a reader that leaves after a few
/// kilobytes): with stdout gone, every file the run writes is still written whole (the
/// results folder, `--output`, the SARIF view, which was lost, and the HTML view), and the
/// run ends quietly with status 0.
#[test]
fn a_closed_stdout_loses_no_output_file() {
    use std::io::Read;
    let json = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    for read_first in [0, 4096] {
        let d = tempfile::tempdir().unwrap();
        let (res, output, sarif) = (
            d.path().join("res"),
            d.path().join("o.json"),
            d.path().join("s.sarif"),
        );
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("sage"))
            .args(["localize", "corpora", "--format", "json", "--out-dir"])
            .arg(&res)
            .arg("--output")
            .arg(&output)
            .arg("--sarif")
            .arg(&sarif)
            .arg("--view")
            .arg(d.path().join("view"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut head = vec![0; read_first];
        stdout.read_exact(&mut head).unwrap();
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{stderr}"
        );
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let doc = std::fs::read(&output).unwrap();
        assert!(doc.starts_with(&head), "stdout was the document's start");
        assert_eq!(std::fs::read(res.join("results.json")).unwrap(), doc);
        let n = json(&output)["results"].as_array().unwrap().len();
        assert!(n > 20, "{n} results");
        let log = json(&sarif);
        assert_eq!(log["version"], "2.1.0");
        assert_eq!(log["runs"][0]["results"].as_array().unwrap().len(), n);
        let index = std::fs::read_to_string(d.path().join("view/index.html")).unwrap();
        assert!(index.contains(&format!("{n} case result(s)")), "{index}");
    }
}

/// `trace.run` in a case manifest reads the Nth run of a file that holds several: the
/// resolver's `output.jsonl` holds two runs, and only the second (dark mode) writes
/// `src/PullRequestViewer.tsx`, the anchor's artefact. The baseline is built from the old
/// texts of that run's three `str_replace` edits, so every write applies.
#[test]
fn a_case_manifest_names_the_run_it_reads() {
    if crate::need::missing_shared("traces/openhands/resolver_mock_output.jsonl") {
        return;
    }
    let src = crate::need::shared_path("traces/openhands/resolver_mock_output.jsonl");
    let t = sage_adapters::normalize(
        &[sage_adapters::SourceFile::new("output.jsonl", &src)],
        &sage_adapters::NormalizeOptions {
            run: Some(2),
            ..Default::default()
        },
    )
    .unwrap();
    let olds: Vec<String> = t
        .writes()
        .filter(|(_, w)| w.artefact == "src/PullRequestViewer.tsx")
        .map(|(_, w)| match &w.op {
            sage_trace::WriteOp::StrReplace { old, .. } => old.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(olds.len(), 3);
    let root = tempfile::tempdir().unwrap();
    let case = root.path().join("resolver-dark-mode");
    std::fs::create_dir_all(case.join("baseline/src")).unwrap();
    std::fs::copy(&src, case.join("output.jsonl")).unwrap();
    std::fs::write(
        case.join("baseline/src/PullRequestViewer.tsx"),
        olds.join("\n\n") + "\n",
    )
    .unwrap();
    let manifest = |run: &str| {
        format!(
            r#"{{"schema": "sage.case/1", "id": "resolver-dark-mode",
 "trace": {{"files": ["output.jsonl"], "framework": "openhands"{run}}},
 "baseline": {{"src/PullRequestViewer.tsx": "baseline/src/PullRequestViewer.tsx"}},
 "task": {{"id": "dark-mode", "description": "Add a toggle for dark mode."}},
 "anchor": {{"artefact": "src/PullRequestViewer.tsx", "fragment": "const toggleDarkMode = () => {{",
   "category": "vulnerability-introduced", "cwe": "CWE-79", "description": "a test anchor"}}}}"#
        )
    };
    std::fs::write(case.join("case.json"), manifest(r#", "run": 2"#)).unwrap();
    let out = sage()
        .args(["localize", "--format", "json", "--out-dir"])
        .arg(root.path().join("out"))
        .arg(root.path())
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &r["results"][0];
    assert_eq!(c["provenance"]["provenance"], "agent-introduced", "{r:#}");
    // The second run's toggle is written by its 19th turn (22 turns, 4 writes).
    assert_eq!(c["provenance"]["introducing_write"]["turn"], 19, "{c:#}");
    assert_eq!(c["counts"]["turns"], 22);
    // Without `run` the first run is read, which never touches the anchor's file.
    std::fs::write(case.join("case.json"), manifest("")).unwrap();
    let out = sage()
        .args(["localize", "--format", "json", "--out-dir"])
        .arg(root.path().join("out1"))
        .arg(root.path())
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["results"].as_array().unwrap().is_empty(), "{r:#}");
    let why = r["skipped"][0]["message"].as_str().unwrap();
    assert!(why.contains("src/PullRequestViewer.tsx"), "{why}");
}

/// Each case's results are written out as the case finishes (issue 19): the results folder,
/// `--output` and the JSON on stdout are the one document, whatever the number of cases and
/// whichever cases were skipped; an `--output` that cannot be written is an error naming it
/// and leaves no temporary file.
#[test]
fn streamed_outputs_are_one_document_and_a_bad_output_is_named() {
    let corpus = broken_corpus();
    let out = tempfile::tempdir().unwrap();
    let res = out.path().join("res");
    let file = out.path().join("all.json");
    let o = sage()
        .args([
            "localize",
            corpus.path().to_str().unwrap(),
            "--format",
            "json",
        ])
        .arg("--out-dir")
        .arg(&res)
        .arg("--output")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "some cases were skipped");
    let stdout = String::from_utf8(o.stdout).unwrap();
    let written = std::fs::read_to_string(res.join("results.json")).unwrap();
    assert_eq!(stdout, written);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), written);
    let set: serde_json::Value = serde_json::from_str(&written).unwrap();
    let results = set["results"].as_array().unwrap();
    assert!(!results.is_empty() && !set["skipped"].as_array().unwrap().is_empty());
    // Each case file holds that case's entries of results.json.
    for r in results {
        let id = r["case_id"].as_str().unwrap();
        let case: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(res.join(format!("cases/{id}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(case.as_array().unwrap()[0], *r);
    }
    let leftovers = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".tmp-"))
            .collect()
    };
    assert!(leftovers(out.path()).is_empty() && leftovers(&res).is_empty());

    let missing = out.path().join("no-such-folder/all.json");
    let o = sage()
        .args(["localize", corpus.path().to_str().unwrap(), "--no-write"])
        .arg("--output")
        .arg(&missing)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("no-such-folder/all.json"), "{stderr}");
}

/// A trace that names its files under a checkout folder the case does not (`repo/app.py` for
/// the case's `app.py`): without `trace.checkout` the anchor's artefact is never written (the
/// fragment is not found as the agent's); with it, the result is the original case's.
#[test]
fn the_case_checkout_folder_reconciles_the_trace_names() {
    let d = tempfile::tempdir().unwrap();
    let case = d.path().join("c");
    copy_dir(&corpus_case("ag2-fig1a-aes-ecb"), &case);
    let chat = std::fs::read_to_string(case.join("chat.json")).unwrap();
    std::fs::write(
        case.join("chat.json"),
        chat.replace("# filename: app.py", "# filename: repo/app.py"),
    )
    .unwrap();
    let run = |case: &Path| {
        sage()
            .arg("localize")
            .arg(case)
            .args(["--no-write", "--format", "json"])
            .output()
            .unwrap()
    };
    // without it the case's app.py is never written: the agent's code is not found
    let without = run(&case);
    let v: serde_json::Value = serde_json::from_slice(&without.stdout).unwrap();
    assert_ne!(
        v["results"][0]["provenance"]["provenance"], "agent-introduced",
        "the misnamed trace gave the original's answer"
    );
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(case.join("case.json")).unwrap()).unwrap();
    m["trace"]["checkout"] = serde_json::json!("repo/");
    std::fs::write(case.join("case.json"), m.to_string()).unwrap();
    let with = run(&case);
    assert_eq!(with.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&with.stdout).unwrap();
    let r = &v["results"][0];
    assert_eq!(r["provenance"]["provenance"], "agent-introduced");
    assert_eq!(r["origin"]["origin_turn"], 1);
    assert_eq!(r["provenance"]["introducing_write"]["turn"], 3);
    assert_eq!(
        r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["passed"] == false)
            .count(),
        0
    );
}
