//! `sage agree` through the binary.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::path::PathBuf;

const K2011: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/agree/krippendorff2011.csv"
);
const YES_NO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/agree/cohen_yes_no.csv"
);

fn sage() -> Command {
    Command::cargo_bin("sage").expect("binary")
}

fn json_of(args: &[&str]) -> Value {
    let out = sage()
        .args(args)
        .args(["--format", "json"])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

fn temp_csv(dir: &tempfile::TempDir, name: &str, body: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, body).expect("write");
    p
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs()
}

#[test]
fn alpha_levels_match_krippendorff_2011() {
    for (level, want) in [
        ("nominal", 0.743421052631579),
        ("ordinal", 0.8153875037548813),
        ("interval", 0.8491071428571428),
        ("ratio", 0.797402774711612),
    ] {
        let v = json_of(&["agree", K2011, "--metric", "alpha", "--level", level]);
        let got = v["value"].as_f64().expect("value");
        assert!(close(got, want), "{level}: {got} vs {want}");
        assert_eq!(v["n"], 11, "pairable units");
        assert_eq!(v["categories"].as_array().map(Vec::len), Some(5));
    }
}

#[test]
fn cohen_percent_gwet_fleiss() {
    let v = json_of(&["agree", YES_NO, "--metric", "cohen"]);
    assert!(close(v["value"].as_f64().expect("kappa"), 0.4));
    assert_eq!(v["n"], 50);
    let v = json_of(&["agree", YES_NO, "--metric", "percent"]);
    assert!(close(v["value"].as_f64().expect("pa"), 0.7));
    let v = json_of(&["agree", K2011, "--metric", "gwet"]);
    assert!(close(v["value"].as_f64().expect("ac1"), 0.775444068126995));
    let v = json_of(&["agree", K2011, "--metric", "gwet", "--weights", "quadratic"]);
    assert!(close(v["value"].as_f64().expect("ac2"), 0.9140007235516048));
    let v = json_of(&["agree", K2011, "--metric", "fleiss", "--missing", "gwet"]);
    assert!(close(
        v["value"].as_f64().expect("fleiss"),
        0.7611692754224111
    ));
    // Missing ratings without a choice: undefined with the reason, exit 0.
    let v = json_of(&["agree", K2011, "--metric", "fleiss"]);
    assert!(v["value"].is_null());
    assert!(v["reason"].as_str().expect("reason").contains("missing"));
}

#[test]
fn bootstrap_is_seeded_and_reported() {
    let args = [
        "agree",
        K2011,
        "--metric",
        "alpha",
        "--bootstrap",
        "2000",
        "--seed",
        "5",
    ];
    let a = json_of(&args);
    let b = json_of(&args);
    assert_eq!(a["bootstrap"], b["bootstrap"]);
    let lo = a["bootstrap"]["ci_low"].as_f64().expect("lo");
    let hi = a["bootstrap"]["ci_high"].as_f64().expect("hi");
    assert!(lo < 0.7434 && 0.7434 < hi, "[{lo}, {hi}]");
}

#[test]
fn table_output_names_the_metric() {
    sage()
        .args(["agree", K2011, "--metric", "alpha", "--level", "interval"])
        .assert()
        .success()
        .stdout(predicate::str::contains("0.8491"));
}

#[test]
fn bad_inputs_give_a_message_never_a_panic() {
    let dir = tempfile::tempdir().expect("tmp");
    let ragged = temp_csv(&dir, "ragged.csv", "a,b\n1,2\n1\n");
    sage()
        .args(["agree"])
        .arg(&ragged)
        .args(["--metric", "alpha"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("line 3"));

    let text = temp_csv(&dir, "text.csv", "a,b\n1,2\n1,high\n");
    sage()
        .arg("agree")
        .arg(&text)
        .args(["--metric", "alpha", "--level", "interval"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("line 3").and(predicate::str::contains("\"high\"")));

    let empty = temp_csv(&dir, "empty.csv", "");
    sage()
        .arg("agree")
        .arg(&empty)
        .args(["--metric", "percent"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("empty file"));

    // One category: undefined with a reason, not 1.0.
    let single = temp_csv(&dir, "single.csv", "a,b,c\nx,x,x\nx,x,\n");
    for metric in ["alpha", "cohen", "fleiss", "gwet"] {
        let path = single.to_str().expect("utf8");
        let out = sage()
            .args(["agree", path, "--metric", metric, "--format", "json"])
            .output()
            .expect("run");
        if metric == "cohen" {
            assert_eq!(out.status.code(), Some(1), "three columns for cohen");
            continue;
        }
        let v: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert!(v["value"].is_null(), "{metric}: {v}");
        assert!(v["reason"].is_string());
    }

    // One rater: nothing is pairable.
    let one = temp_csv(&dir, "one.csv", "a\n1\n2\n");
    let v = json_of(&["agree", one.to_str().expect("utf8"), "--metric", "alpha"]);
    assert!(v["value"].is_null());
    assert!(v["reason"].as_str().expect("reason").contains("pairable"));

    // Header only.
    let header = temp_csv(&dir, "header.csv", "a,b\n");
    let v = json_of(&["agree", header.to_str().expect("utf8"), "--metric", "gwet"]);
    assert!(v["value"].is_null());

    // Usage error.
    sage()
        .args(["agree", K2011, "--metric", "cohen", "--bootstrap", "10"])
        .assert()
        .code(2);
}

#[test]
fn ordinal_text_labels_need_an_order() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = temp_csv(&dir, "t.csv", "a,b\nlow,low\nhigh,mid\nmid,mid\nlow,mid\n");
    let p = f.to_str().expect("utf8");
    sage()
        .args(["agree", p, "--metric", "alpha", "--level", "ordinal"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--order"));
    let v = json_of(&[
        "agree",
        p,
        "--metric",
        "alpha",
        "--level",
        "ordinal",
        "--order",
        "low,mid,high",
    ]);
    assert!(v["value"].is_f64());
}
