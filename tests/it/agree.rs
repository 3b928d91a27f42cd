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

/// The labels as `sage agree` defines them, read cell by cell the plain way: raters × units,
/// trimmed, empty = missing, numbers when every cell is one, else all text.
fn labels_of(body: &str) -> Vec<Vec<Option<sage_reliability::Label>>> {
    use sage_reliability::Label;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(body.as_bytes());
    let k = rdr.headers().expect("header").len();
    let mut cells: Vec<Vec<Option<String>>> = vec![Vec::new(); k];
    for rec in rdr.records() {
        let rec = rec.expect("record");
        for (i, c) in rec.iter().enumerate() {
            let t = c.trim();
            cells[i].push((!t.is_empty()).then(|| t.to_string()));
        }
    }
    let numeric = cells
        .iter()
        .flatten()
        .flatten()
        .all(|c| Label::parse(c).as_f64().is_some());
    cells
        .iter()
        .map(|r| {
            r.iter()
                .map(|c| {
                    c.as_ref().map(|c| {
                        if numeric {
                            Label::parse(c)
                        } else {
                            Label::text(c.clone())
                        }
                    })
                })
                .collect()
        })
        .collect()
}

#[test]
fn the_one_pass_reader_gives_the_figures_of_coding_cell_by_cell() {
    // Before: every cell was kept as a String, then a Label, then coded (262 MiB for a 5.8 MB
    // file). Now the reader codes each distinct text once and keeps 4 bytes a cell: the
    // categories and figures must be those of coding the cells one by one.
    use sage_reliability as r;
    let dir = tempfile::tempdir().expect("tmp");
    let bodies = [
        // "1", "1.0" and " 1 " are one category; -0 and 0 are one; a quoted line break
        "a,b,c\n1,1.0, 1 \n2,\"2\",3\n-0,0,\n\n4,4,5\n\"1\n\",1,1\n3,3,3\n",
        // text labels (one cell is not a number, so all are text: "1" and "1.0" differ)
        "a,b,c\nyes,no,yes\n1,1.0,1\nno,no,\n,maybe,maybe\nyes,yes,yes\n",
        // more distinct values than the reader's short list holds
        &("x,y\n".to_string()
            + &(0..60)
                .map(|i| format!("{},{}\n", i % 40, (i * 7) % 40))
                .collect::<String>()),
    ];
    for (i, body) in bodies.iter().enumerate() {
        let p = temp_csv(&dir, &format!("b{i}.csv"), body);
        let path = p.to_str().expect("utf8");
        let labels = labels_of(body);
        let coded = r::Coded::new(&labels).expect("coded");
        let numeric = coded.categories.iter().all(|c| c.as_f64().is_some());
        let cats: Vec<String> = coded.categories.iter().map(|c| c.to_string()).collect();
        let mut checks: Vec<(&str, Vec<&str>, r::StatResult)> = vec![
            (
                "alpha nominal",
                vec!["--metric", "alpha"],
                r::alpha_coded(&coded, r::Level::Nominal),
            ),
            (
                "percent",
                vec!["--metric", "percent"],
                r::percent_agreement(&coded, r::AgreementWeights::Identity),
            ),
            (
                "gwet",
                vec!["--metric", "gwet"],
                r::gwet_ac(&coded, r::AgreementWeights::Identity),
            ),
            (
                "fleiss listwise",
                vec!["--metric", "fleiss", "--missing", "listwise"],
                r::fleiss_kappa(&coded, r::FleissMethod::Fleiss, r::FleissMissing::Listwise),
            ),
            (
                "fleiss gwet",
                vec!["--metric", "fleiss", "--missing", "gwet"],
                r::fleiss_kappa(&coded, r::FleissMethod::Fleiss, r::FleissMissing::Gwet),
            ),
        ];
        if numeric {
            let numbers: Vec<Vec<Option<f64>>> = labels
                .iter()
                .map(|row| {
                    row.iter()
                        .map(|l| l.as_ref().and_then(|l| l.as_f64()))
                        .collect()
                })
                .collect();
            checks.push((
                "alpha ordinal",
                vec!["--metric", "alpha", "--level", "ordinal"],
                r::alpha_coded(&coded, r::Level::Ordinal),
            ));
            for level in ["interval", "ratio"] {
                let lvl = if level == "interval" {
                    r::Level::Interval
                } else {
                    r::Level::Ratio
                };
                checks.push((
                    level,
                    vec!["--metric", "alpha", "--level", level],
                    r::alpha_numeric(&numbers, lvl),
                ));
            }
        }
        for (what, args, want) in checks {
            let mut all = vec!["agree", path];
            all.extend(args);
            let v = json_of(&all);
            let shown: Vec<String> = v["categories"]
                .as_array()
                .expect("categories")
                .iter()
                .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_string))
                .collect();
            assert_eq!(shown, cats, "body {i} {what}: categories");
            match want {
                Ok(e) => {
                    // compared as printed (serde_json parses floats to within an ulp)
                    let printed: Value =
                        serde_json::from_str(&serde_json::to_string(&e.value).expect("print"))
                            .expect("parse");
                    assert_eq!(v["value"], printed, "body {i} {what}");
                    assert_eq!(v["n"].as_u64(), Some(e.units as u64), "body {i} {what}");
                }
                Err(_) => assert!(v["value"].is_null(), "body {i} {what}: {v}"),
            }
        }
    }

    // Messages name the line of the row (after a quoted line break) and the first cell, rater
    // by rater, as before.
    let text = temp_csv(&dir, "t.csv", "a,b\n\"1\n\",2\n1,x\nlow,3\n");
    sage()
        .arg("agree")
        .arg(&text)
        .args(["--metric", "alpha", "--level", "interval"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("line 5 (rater a): \"low\""));
    let order = temp_csv(&dir, "o.csv", "a,b\nlo,hi\nhi,mid\n");
    sage()
        .arg("agree")
        .arg(&order)
        .args([
            "--metric", "alpha", "--level", "ordinal", "--order", "lo,hi",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "rater 2 unit 2: label mid is not a declared category",
        ));
    let blank = temp_csv(&dir, "w.csv", " \n\t\n");
    sage()
        .arg("agree")
        .arg(&blank)
        .args(["--metric", "alpha"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("empty file"));
}
