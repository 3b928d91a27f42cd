//! `sage localize` and `sage explain` on bad input: every bad case gets one clear message
//! naming the case and the record, the other cases still run, and the exit status says so.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn corpus_case(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpora")
        .join(name)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
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
fn an_empty_folder_is_an_input_failure() {
    let d = tempfile::tempdir().unwrap();
    let assert = sage()
        .arg("localize")
        .arg(d.path())
        .arg("--no-write")
        .assert()
        .code(1);
    let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("no case found"), "{stderr}");
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
}
