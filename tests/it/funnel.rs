//! The study funnel end to end: runs in (`sage screen` on run folders), proposed anchors,
//! `sage confirm export / import / report`, on the SusVibes runs of ../shared and the bundled
//! corpus.

use crate::support::copy_dir;
use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/corpora");

fn sage() -> Command {
    Command::cargo_bin("sage").expect("binary builds")
}

/// `../shared/susvibes`, or `None` after the one-line skip (a failure under CI).
fn susvibes() -> Option<PathBuf> {
    if super::need::missing_shared("susvibes/cases") {
        return None;
    }
    Some(super::need::shared_path("susvibes"))
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// A case folder turned into a run folder: anchor, expected and note removed; with
/// `use_patch`, the final files are replaced by the submitted patch.
fn case_to_run(case: &Path, dst: &Path, use_patch: bool) {
    copy_dir(case, dst);
    let manifest = ["case.json", "candidate.json"]
        .iter()
        .map(|n| dst.join(n))
        .find(|p| p.is_file())
        .unwrap();
    let mut m = read_json(&manifest);
    std::fs::remove_file(&manifest).unwrap();
    let o = m.as_object_mut().unwrap();
    o.remove("anchor");
    o.remove("note");
    o.insert("schema".into(), "sage.run/1".into());
    if use_patch && dst.join("model_patch.diff").is_file() {
        o.remove("final_state");
        std::fs::remove_dir_all(dst.join("final")).unwrap();
        o.insert("patch".into(), "model_patch.diff".into());
    }
    std::fs::write(
        dst.join("run.json"),
        serde_json::to_string_pretty(&m).unwrap(),
    )
    .unwrap();
}

fn screen_json(dir: &Path, extra: &[&str]) -> (Value, i32) {
    let out = sage()
        .arg("screen")
        .arg(dir)
        .args(["--format", "json"])
        .args(extra)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (v, out.status.code().unwrap_or(-1))
}

/// The SusVibes folders as runs: 14 cases and 3 contrast runs (anchors removed), the
/// rejected candidate, and one run the harness recorded as invalid. Where a case has its
/// model_patch.diff, the run carries the patch instead of the final file.
fn susvibes_runs(sv: &Path) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let mut n = 0;
    for group in ["cases", "contrast", "rejected"] {
        for e in std::fs::read_dir(sv.join(group)).unwrap() {
            let e = e.unwrap();
            case_to_run(&e.path(), &d.path().join(group).join(e.file_name()), true);
            n += 1;
        }
    }
    assert_eq!(n, 18);
    // An invalid run: same layout, marked excluded by the harness.
    let first = std::fs::read_dir(sv.join("contrast"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let inv = d.path().join("invalid").join("timeout-run");
    case_to_run(&first.path(), &inv, false);
    let mut m = read_json(&inv.join("run.json"));
    m["id"] = "timeout-run".into();
    m["excluded"] = "timeout after 30 min".into();
    std::fs::write(inv.join("run.json"), m.to_string()).unwrap();
    d
}

#[test]
fn runs_in_table_2_by_framework_and_patches_equal_the_final_files() {
    let Some(sv) = susvibes() else { return };
    let runs = susvibes_runs(&sv);
    let (r, code) = screen_json(runs.path(), &["--no-bandit"]);
    assert_eq!(code, 0, "{:#}", r["errors"]);
    // 18 runs screened + 1 excluded; all openhands. None is a candidate without Bandit
    // (the L3 scores of these files stay below 15, see the proposals test).
    let summary: BTreeMap<String, &Value> = r["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["framework"].as_str().unwrap().to_string(), s))
        .collect();
    let oh = summary["openhands"];
    assert_eq!(oh["excluded"], 1);
    assert_eq!(oh["valid"], 18);
    assert_eq!(summary["total"]["valid"], 18);
    // The patched runs screen exactly like the cases with their final files.
    let (cases, _) = screen_json(&sv.join("cases"), &["--no-bandit"]);
    let by_id = |v: &Value| -> BTreeMap<String, Value> {
        v["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let arts: Vec<Value> = c["artefacts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|a| !a["path"].as_str().unwrap().starts_with("test"))
                    .map(|a| a["l3"].clone())
                    .collect();
                (c["id"].as_str().unwrap().to_string(), Value::Array(arts))
            })
            .collect()
    };
    let got = by_id(&r);
    let want = by_id(&cases);
    assert_eq!(want.len(), 14);
    for (id, l3) in &want {
        assert_eq!(&got[id], l3, "{id}");
    }
}

/// How the proposals of one screened case stand to its confirmed anchor.
struct Landing {
    /// The anchor statement's first line in the final file.
    line: i64,
    /// Lines from the anchor line to the nearest finding proposal's span (0 = inside).
    finding: Option<i64>,
    /// The same over every proposal (findings and changed hunks).
    any: Option<i64>,
    /// Rank of the first proposal whose span holds the anchor line.
    first_holding: Option<u64>,
    /// Rank and distance of the first-ranked proposal on the anchored file.
    top: Option<(u64, i64)>,
}

fn landing(c: &Value) -> Landing {
    let src = Path::new(c["source"].as_str().unwrap());
    let m = read_json(&src.join("case.json"));
    let anchor = &m["anchor"];
    let art = anchor["artefact"].as_str().unwrap();
    let fin = std::fs::read_to_string(src.join(m["final_state"][art].as_str().unwrap())).unwrap();
    let frag = anchor["fragment"].as_str().unwrap();
    let at = fin
        .find(frag)
        .expect("anchors are verbatim in the final file");
    let line = fin[..at].matches('\n').count() as i64 + 1;
    let props: Vec<&Value> = c["proposals"]
        .as_array()
        .map(|a| a.iter().filter(|p| p["artefact"] == art).collect())
        .unwrap_or_default();
    // Every fragment stands verbatim in the final file.
    for p in &props {
        assert!(fin.contains(p["fragment"].as_str().unwrap()), "{p}");
    }
    let dist = |p: &Value| {
        let (s, e) = (
            p["start_line"].as_i64().unwrap(),
            p["end_line"].as_i64().unwrap(),
        );
        if (s..=e).contains(&line) {
            0
        } else {
            (s - line).abs().min((e - line).abs())
        }
    };
    let is_hunk = |p: &Value| p["finding"] == "change:hunk";
    Landing {
        line,
        finding: props.iter().filter(|p| !is_hunk(p)).map(|p| dist(p)).min(),
        any: props.iter().map(|p| dist(p)).min(),
        first_holding: props
            .iter()
            .filter(|p| dist(p) == 0)
            .map(|p| p["rank"].as_u64().unwrap())
            .min(),
        top: props
            .iter()
            .min_by_key(|p| p["rank"].as_u64())
            .map(|p| (p["rank"].as_u64().unwrap(), dist(p))),
    }
}

/// The proposals against the 14 confirmed SusVibes anchors, before (findings only, as
/// sage proposed them until the changed hunks were used) and after (a finding in a hunk the
/// agent changed ranks first, and each changed hunk no finding falls in is a proposal).
/// Measured figures, printed and asserted; `docs/funnel.md` has the table.
#[test]
fn proposals_land_on_the_confirmed_artefact() {
    let Some(sv) = susvibes() else { return };
    let (r, _) = screen_json(&sv.join("cases"), &["--no-bandit"]);
    let mut rows = Vec::new();
    for c in r["cases"].as_array().unwrap() {
        let l = landing(c);
        println!(
            "{:<70} anchor line {:>4}: nearest finding {:>4}, nearest proposal {:>3}, first \
             holding it rank {:>2}, top proposal (rank, lines away) {:?}",
            c["id"].as_str().unwrap(),
            l.line,
            l.finding.map_or("-".into(), |d| d.to_string()),
            l.any.map_or("-".into(), |d| d.to_string()),
            l.first_holding.map_or("-".into(), |d| d.to_string()),
            l.top
        );
        rows.push(l);
    }
    assert_eq!(rows.len(), 14);
    let count = |f: &dyn Fn(&Landing) -> bool| rows.iter().filter(|l| f(l)).count();
    let mut finding: Vec<i64> = rows.iter().filter_map(|l| l.finding).collect();
    finding.sort();
    println!(
        "before: findings on the anchored file {}/14, nearest {finding:?}",
        finding.len()
    );
    // Before (findings only), measured: the two wagtail forms cases (5be2b1, d9a41e) have no
    // L3 hit and no Bandit finding; the other 12 have at least one finding in the anchored
    // file, none of them on the anchor statement (the weaknesses are missing checks).
    assert_eq!(finding.len(), 12);
    assert!(
        finding.iter().all(|d| *d > 0),
        "no finding is the anchor statement"
    );
    // After: every anchor is in code the agent wrote (issue 13: all 14 are agent-introduced),
    // so the changed hunk holding it is a proposal; it ranks after the findings.
    assert_eq!(
        count(&|l| l.any.is_some()),
        14,
        "a proposal on the anchored file"
    );
    assert_eq!(
        count(&|l| l.any == Some(0)),
        14,
        "a proposal holding the anchor line"
    );
    // Measured: the hunk ranks after the case's 1 to 4 findings (2nd to 5th).
    assert!(
        rows.iter()
            .all(|l| l.first_holding.is_some_and(|r| (2..=5).contains(&r))),
        "the hunk holding the anchor ranks after the findings"
    );
    let top_holding = count(&|l| l.top.is_some_and(|(_, d)| d == 0));
    assert_eq!(
        top_holding, 0,
        "the top proposal is a finding, and no finding holds the anchor"
    );
    println!(
        "after: proposals on the anchored file 14/14, holding the anchor line 14/14, the \
         top-ranked one holding it {top_holding}/14"
    );
}

pub(crate) fn fill_sheet(export: &Path, who: &str, flip: usize) {
    fill_sheet_from(export, who, flip, &|run| run.join("case.json"))
}

/// [`fill_sheet`] for runs whose original manifest is elsewhere: `manifest_of` maps a run
/// folder to the case (or rejected candidate) manifest it was made from.
fn fill_sheet_from(export: &Path, who: &str, flip: usize, manifest_of: &dyn Fn(&Path) -> PathBuf) {
    // The scripted annotator labels each packet from the run's original case: the confirmed
    // anchor for cases, FP for contrast runs and rejected candidates; `flip` packets get the
    // other label.
    let key = read_json(&export.join("key.json"));
    let src: BTreeMap<String, String> = key["packets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["packet"].as_str().unwrap().into(),
                e["source"].as_str().unwrap().into(),
            )
        })
        .collect();
    let sheet = export.join(format!("sheet-{who}.csv"));
    let mut rdr = csv::Reader::from_path(&sheet).unwrap();
    let header = rdr.headers().unwrap().clone();
    let mut rows = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.unwrap();
        let pid = rec.get(0).unwrap().to_string();
        let m = read_json(&manifest_of(Path::new(&src[&pid])));
        let a = &m["anchor"];
        let contrast =
            a["description"].as_str().unwrap().contains("CONTRAST") || a["decision"] == "FP";
        let fp = contrast != (i < flip);
        let s = |k: &str| a[k].as_str().unwrap_or("").to_string();
        rows.push(if fp {
            vec![
                pid,
                "FP".into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]
        } else {
            vec![
                pid,
                "TP".into(),
                String::new(),
                s("artefact"),
                s("fragment"),
                s("category"),
                s("cwe"),
                s("description"),
                String::new(),
            ]
        });
    }
    let mut w = csv::Writer::from_path(&sheet).unwrap();
    w.write_record(&header).unwrap();
    for r in rows {
        w.write_record(r).unwrap();
    }
    w.flush().unwrap();
}

#[test]
fn confirm_round_trip_on_susvibes_restores_the_confirmed_anchors() {
    let Some(sv) = susvibes() else { return };
    let d = tempfile::tempdir().unwrap();
    let screen = d.path().join("screen.json");
    sage()
        .args(["screen"])
        .arg(&sv)
        .args(["--no-bandit", "--format", "json", "-o"])
        .arg(&screen)
        .assert()
        .success();
    let packets = d.path().join("packets");
    sage()
        .args(["confirm", "export"])
        .arg(&screen)
        .arg("--out")
        .arg(&packets)
        .args(["--all", "--sample", "6", "--seed", "7"])
        .assert()
        .success();
    // Blinded: no model, framework or tool name in any packet.
    for e in std::fs::read_dir(&packets).unwrap() {
        let p = e.unwrap().path().join("packet.md");
        if p.is_file() {
            let t = std::fs::read_to_string(&p).unwrap().to_lowercase();
            for w in ["claude", "gemini", "kimi", "openhands", "bandit", "sonnet"] {
                assert!(!t.contains(w), "{} names {w}", p.display());
            }
        }
    }
    let key = read_json(&packets.join("key.json"));
    assert_eq!(key["annotators"]["R1"].as_array().unwrap().len(), 17);
    assert_eq!(key["annotators"]["R2"].as_array().unwrap().len(), 6);
    fill_sheet(&packets, "R1", 0);
    fill_sheet(&packets, "R2", 1);
    let cases = d.path().join("cases");
    sage()
        .args(["confirm", "import"])
        .arg(&packets)
        .arg(packets.join("sheet-R1.csv"))
        .arg("--out")
        .arg(&cases)
        .assert()
        .success()
        .stdout(predicates::str::contains("14 confirmed case folders"));
    for e in std::fs::read_dir(&cases).unwrap() {
        let e = e.unwrap();
        let got = read_json(&e.path().join("case.json"));
        let want = read_json(&sv.join("cases").join(e.file_name()).join("case.json"));
        assert_eq!(got["anchor"], want["anchor"]);
        assert_eq!(got["final_state"], want["final_state"]);
    }
    // R2 flipped the first packet of their sample: one disagreement of six.
    let out = sage()
        .args(["confirm", "report", "--format", "json", "--export"])
        .arg(&packets)
        .arg("--sheets")
        .arg(packets.join("sheet-R1.csv"))
        .arg(packets.join("sheet-R2.csv"))
        .output()
        .unwrap();
    let a: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(a["n"], 6);
    assert_eq!(a["binary_agreed"], 5);
}

#[test]
fn confirmed_cases_from_the_corpus_localize_like_the_originals() {
    let d = tempfile::tempdir().unwrap();
    let screen = d.path().join("screen.json");
    sage()
        .args(["screen", CORPUS, "--no-bandit", "--format", "json", "-o"])
        .arg(&screen)
        .assert()
        .success();
    let packets = d.path().join("packets");
    sage()
        .args(["confirm", "export"])
        .arg(&screen)
        .arg("--out")
        .arg(&packets)
        .args(["--all", "--annotators", "A"])
        .assert()
        .success();
    fill_sheet(&packets, "A", 0);
    let cases = d.path().join("cases");
    sage()
        .args(["confirm", "import"])
        .arg(&packets)
        .arg(packets.join("sheet-A.csv"))
        .arg("--out")
        .arg(&cases)
        .assert()
        .success();
    let origin = |dir: &Path, out: &Path| -> BTreeMap<String, Value> {
        sage()
            .arg("localize")
            .arg(dir)
            .arg("--output")
            .arg(out)
            .current_dir(d.path())
            .assert()
            .success();
        read_json(out)["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["case_id"].as_str().unwrap().to_string(),
                    r["origin"].clone(),
                )
            })
            .collect()
    };
    let got = origin(&cases, &d.path().join("got.json"));
    let want = origin(Path::new(CORPUS), &d.path().join("want.json"));
    // aider-undetermined-curl leaves its file unchanged: screening excludes it (no
    // modification), so 14 of the 15 constructed cases come back, with the 14 real ones
    // (corpora/susvibes).
    assert_eq!(got.len(), 28);
    for (id, o) in &got {
        assert_eq!(o, &want[id], "{id}");
    }
}

#[test]
fn confirm_report_reproduces_table_3_of_the_paper() {
    let d = tempfile::tempdir().unwrap();
    let c = d.path().join("table3b.csv");
    // Table 3(b), rows R1, columns R2.
    std::fs::write(
        &c,
        "R1\\R2,TP,Partial,FP\nTP,6,1,3\nPartial,0,6,1\nFP,1,1,41\n",
    )
    .unwrap();
    sage()
        .args(["confirm", "report", "--counts"])
        .arg(&c)
        .assert()
        .success()
        .stdout(predicates::str::contains("| Observed agreement | 0.88 |"))
        .stdout(predicates::str::contains("| Cohen's κ | 0.73 |"))
        .stdout(predicates::str::contains("| Gwet's AC1 | 0.85 |"))
        .stdout(predicates::str::contains("54 of 60 (90.00%; κ = 0.74)"));
    // -o writes what would be printed; --json stays a hidden alias of --format json.
    let md = d.path().join("table3b.md");
    sage()
        .args(["confirm", "report", "--counts"])
        .arg(&c)
        .arg("-o")
        .arg(&md)
        .assert()
        .success()
        .stdout(predicates::str::is_empty());
    assert!(std::fs::read_to_string(&md)
        .unwrap()
        .contains("| Cohen's κ | 0.73 |"));
    for args in [["--format", "json"].as_slice(), ["--json"].as_slice()] {
        let out = sage()
            .args(["confirm", "report", "--counts"])
            .arg(&c)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success());
        let a: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(a["n"], 60, "{args:?}");
    }
}

#[test]
fn bad_sheets_and_logs_name_the_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    let screen = d.path().join("screen.json");
    sage()
        .args(["screen", CORPUS, "--no-bandit", "--format", "json", "-o"])
        .arg(&screen)
        .assert()
        .success();
    let packets = d.path().join("packets");
    sage()
        .args(["confirm", "export"])
        .arg(&screen)
        .arg("--out")
        .arg(&packets)
        .args(["--all", "--annotators", "A"])
        .assert()
        .success();
    let sheet = packets.join("sheet-A.csv");
    let good = std::fs::read_to_string(&sheet).unwrap();
    let first = good
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .to_string();
    for (body, msg) in [
        (
            good.replacen(&format!("{first},"), "p0000000000,TP", 1),
            "line 2: unknown packet id \"p0000000000\"".to_string(),
        ),
        (
            good.replacen(&format!("{first},"), &format!("{first},Maybe"), 1),
            "line 2: label \"Maybe\" is not TP, Partial or FP".into(),
        ),
        (
            good.replacen(&format!("{first},"), &format!("{first},TP,99"), 1),
            "line 2: anchor 99".into(),
        ),
    ] {
        std::fs::write(&sheet, body).unwrap();
        sage()
            .args(["confirm", "import"])
            .arg(&packets)
            .arg(&sheet)
            .arg("--out")
            .arg(d.path().join("cases"))
            .assert()
            .code(1)
            .stderr(predicates::str::contains(sheet.display().to_string()))
            .stderr(predicates::str::contains(msg));
    }
    // A SARIF log that is not 2.1.0.
    let log = d.path().join("old.sarif");
    std::fs::write(&log, r#"{"version":"2.0.0","runs":[]}"#).unwrap();
    sage()
        .args(["screen", CORPUS, "--no-bandit", "--sarif"])
        .arg(&log)
        .assert()
        .code(1)
        .stderr(predicates::str::contains(log.display().to_string()))
        .stderr(predicates::str::contains("SARIF version \"2.0.0\""));
}

#[test]
fn a_sarif_log_in_a_run_folder_becomes_the_first_proposal() {
    let Some(sv) = susvibes() else { return };
    let d = tempfile::tempdir().unwrap();
    let name =
        "claude-4-sonnet__aio-libs__aiohttp-session_1b356f01bbab57d041c9a75bacd72fbbf8524728";
    let run = d.path().join(name);
    case_to_run(&sv.join("cases").join(name), &run, false);
    let fin = std::fs::read_to_string(run.join("final/aiohttp_session/__init__.py")).unwrap();
    let line = fin
        .lines()
        .position(|l| l.contains("self._mapping = data['session'].copy()"))
        .unwrap()
        + 1;
    // A CodeQL-shaped result on the anchor line (CWE through the rule's tags).
    let log = serde_json::json!({"version":"2.1.0","runs":[{"tool":{"driver":{"name":"CodeQL",
        "rules":[{"id":"py/session-expiry","properties":{"tags":["external/cwe/cwe-613"]}}]}},
        "results":[{"ruleId":"py/session-expiry","ruleIndex":0,
          "message":{"text":"Session data is restored without an expiry check."},
          "locations":[{"physicalLocation":{
            "artifactLocation":{"uri":"file:///project/aiohttp_session/__init__.py"},
            "region":{"startLine":line}}}]}]}]});
    let lp = run.join("codeql.sarif");
    std::fs::write(&lp, log.to_string()).unwrap();
    let (r, code) = screen_json(d.path(), &["--no-bandit", "--sarif", lp.to_str().unwrap()]);
    assert_eq!(code, 0);
    let p = &r["cases"][0]["proposals"][0];
    assert_eq!(p["finding"], "sarif:CodeQL:py/session-expiry");
    assert_eq!(p["cwe"], "CWE-613");
    assert_eq!(p["fragment"], "self._mapping = data['session'].copy()");
    // The line is the agent's (absent from the baseline): new code.
    assert_eq!(p["category"], "vulnerability-introduced");
    assert_eq!(p["target_family"], true);
}

/// Run scripts/validate_sarif.py on `log`; `None` (after one printed line) when the
/// validator is not installed (scripts/setup.sh installs it; CI has it).
fn validate_sarif(log: &Path) -> Option<String> {
    // scripts/setup.sh installs the validator into the project's .venv when it can.
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv/bin/python");
    let python = if Path::new(venv).is_file() {
        venv
    } else {
        "python3"
    };
    let out = std::process::Command::new(python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/validate_sarif.py"
        ))
        .arg(log)
        .output();
    match out {
        Ok(o) if o.status.code() == Some(3) || o.status.code().is_none() => {
            super::need::skip(&format!(
                "needs the SARIF validator (bash scripts/setup.sh): {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
            None
        }
        Ok(o) => Some(format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            if o.status.success() { "" } else { "INVALID" }
        )),
        Err(e) => {
            super::need::skip(&format!("needs the SARIF validator ({python}: {e})"));
            None
        }
    }
}

fn sarif_of_pair(base: &str, fin: &str) -> Value {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("app.orig.py"), base).unwrap();
    std::fs::write(d.path().join("app.py"), fin).unwrap();
    let out = sage()
        .args(["screen", "--pairs"])
        .arg(d.path())
        .args(["--cwe", "CWE-78", "--no-bandit", "--format", "sarif"])
        .output()
        .unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn screen_sarif_carries_cwe_taxonomy_severity_fingerprints_baseline_state_and_suppressions() {
    let base = "import subprocess\n\ndef run(cmd):\n    return subprocess.call(cmd, shell=True)\n";
    // The agent keeps the inherited shell call, adds an eval silenced with `# nosec`.
    let fin = "import subprocess\n\ndef run(cmd):\n    return subprocess.call(cmd, shell=True)\n\n\
               def calc(expr):\n    return eval(expr)  # nosec\n";
    let v = sarif_of_pair(base, fin);
    let run = &v["runs"][0];
    assert_eq!(run["taxonomies"][0]["name"], "CWE");
    let taxa: Vec<&str> = run["taxonomies"][0]["taxa"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let rule = |id: &str| rules.iter().find(|r| r["id"] == id).unwrap();
    let shell = rule("L3/SNK_SUBPROCESS_SHELL");
    let rel = &shell["relationships"][0]["target"];
    assert_eq!(rel["toolComponent"]["name"], "CWE");
    assert_eq!(
        taxa[rel["index"].as_u64().unwrap() as usize],
        rel["id"].as_str().unwrap()
    );
    assert!(shell["properties"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t.as_str().unwrap().starts_with("external/cwe/cwe-")));
    assert!(shell["properties"]["security-severity"].is_string());
    let results = run["results"].as_array().unwrap();
    let on_line = |rule: &str, line: u64| {
        results
            .iter()
            .find(|r| {
                r["ruleId"] == rule
                    && r["locations"][0]["physicalLocation"]["region"]["startLine"] == line
            })
            .unwrap_or_else(|| panic!("no {rule} on line {line}: {results:#?}"))
    };
    // Line 4 is inherited, line 7 is the agent's and carries its `# nosec`.
    assert_eq!(
        on_line("L3/SNK_SUBPROCESS_SHELL", 4)["baselineState"],
        "unchanged"
    );
    let eval = on_line("L3/SNK_EVAL", 7);
    assert_eq!(eval["baselineState"], "new");
    assert_eq!(eval["suppressions"][0]["kind"], "inSource");
    assert!(on_line("L3/SNK_SUBPROCESS_SHELL", 4)
        .get("suppressions")
        .is_none());
    // Fingerprints survive moved lines (two blank lines on top) and differ between results.
    let moved = sarif_of_pair(base, &format!("\n\n{fin}"));
    let fps = |v: &Value| -> BTreeMap<String, String> {
        v["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["partialFingerprints"]["sage/v1"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                    r["ruleId"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(fps(&v), fps(&moved));
    assert_eq!(fps(&v).len(), results.len());
    // The whole log validates against the SARIF 2.1.0 schema.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("screen.sarif");
    std::fs::write(&p, v.to_string()).unwrap();
    if let Some(out) = validate_sarif(&p) {
        assert!(!out.contains("INVALID"), "{out}");
    }
    // The validator can fail: a bad baselineState is reported.
    let mut bad = v.clone();
    bad["runs"][0]["results"][0]["baselineState"] = "bogus".into();
    std::fs::write(&p, bad.to_string()).unwrap();
    if let Some(out) = validate_sarif(&p) {
        assert!(
            out.contains("INVALID") && out.contains("baselineState"),
            "{out}"
        );
    }
}

#[test]
fn screen_sarif_of_susvibes_validates() {
    let Some(sv) = susvibes() else { return };
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("sv.sarif");
    sage()
        .arg("screen")
        .arg(&sv)
        .args(["--no-bandit", "--format", "sarif", "-o"])
        .arg(&p)
        .assert()
        .success();
    if let Some(out) = validate_sarif(&p) {
        assert!(!out.contains("INVALID"), "{out}");
    }
}

#[test]
fn localize_sarif_locates_the_anchor_and_relates_the_origin_and_the_write() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("loc.sarif");
    sage()
        .args(["localize", CORPUS, "--no-write", "--sarif"])
        .arg(&p)
        .current_dir(d.path())
        .assert()
        .success();
    let v = read_json(&p);
    let run = &v["runs"][0];
    let results = run["results"].as_array().unwrap();
    // 15 constructed cases and the 14 real ones of corpora/susvibes.
    assert_eq!(results.len(), 29);
    // ag2-defect-systemrandom: anchor on app.py line 16, origin turn 1 = introducing write 1
    // (the case's expected block; tests/it/corpus.rs asserts the same through results.json).
    let r = results
        .iter()
        .find(|r| r["properties"]["case"] == "ag2-defect-systemrandom")
        .unwrap();
    let loc = &r["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "app.py");
    // The anchor `session['id'] = sysrand.randint(1, 100)` stands on line 16 of app.py as
    // the trace's last write leaves it (chat.json /chat_history/3/content: message line 19,
    // after three lines of prose and fence).
    assert_eq!(loc["region"]["startLine"], 16);
    let rel = r["relatedLocations"].as_array().unwrap();
    assert!(rel[0]["message"]["text"]
        .as_str()
        .unwrap()
        .starts_with("origin: turn 1"));
    assert!(rel[1]["message"]["text"]
        .as_str()
        .unwrap()
        .starts_with("introducing write 1"));
    let b = rel[0]["physicalLocation"]["artifactLocation"]["uriBaseId"]
        .as_str()
        .unwrap();
    assert!(run["originalUriBaseIds"][b]["uri"]
        .as_str()
        .unwrap()
        .ends_with("/ag2-defect-systemrandom/"));
    assert_eq!(r["taxa"][0]["id"], "338");
    if let Some(out) = validate_sarif(&p) {
        assert!(!out.contains("INVALID"), "{out}");
    }
}

#[test]
fn study_runs_the_funnel_in_two_commands() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("study");
    sage()
        .args([
            "study",
            CORPUS,
            "--no-bandit",
            "--all",
            "--sample",
            "5",
            "--out",
        ])
        .arg(&out)
        .assert()
        .success()
        .stdout(predicates::str::contains("## Table 2."));
    for f in [
        "screen.json",
        "screen.sarif",
        "table2.md",
        "packets/key.json",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let packets = out.join("packets");
    fill_sheet(&packets, "R1", 0);
    fill_sheet(&packets, "R2", 0);
    sage()
        .args(["study", CORPUS, "--out"])
        .arg(&out)
        .arg("--sheets")
        .arg(packets.join("sheet-R1.csv"))
        .arg(packets.join("sheet-R2.csv"))
        .current_dir(d.path())
        .assert()
        .success()
        // 14 of the 15 constructed cases (one leaves its file unchanged) and the 14 real ones.
        .stdout(predicates::str::contains("28 confirmed case folders"))
        .stdout(predicates::str::contains("| Cohen's κ |"));
    let set = read_json(&out.join("results/results.json"));
    assert_eq!(set["results"].as_array().unwrap().len(), 28);
    assert!(out.join("table3.md").is_file() && out.join("localize.sarif").is_file());
}

/// SAGE's own artefact labels of each case in a result set: (provenance, introducing write).
fn sage_labels(results: &Path) -> BTreeMap<String, (String, String)> {
    read_json(results)["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["run"] == 0)
        .map(|r| {
            let p = &r["provenance"];
            let w = match p["introducing_write"]["turn"].as_u64() {
                Some(t) => t.to_string(),
                None if p["introducing_write_cannot_determine"] == true => {
                    "cannot-determine".into()
                }
                None => "none".into(),
            };
            (
                r["case_id"].as_str().unwrap().to_string(),
                (p["provenance"].as_str().unwrap().to_string(), w),
            )
        })
        .collect()
}

/// A scripted annotator fills an annotation sheet of `sage study` (OUT/annotate/<who>/) with
/// SAGE's labels, except that on the first `disagree` rows (sheet order) whose case has an
/// introducing write it answers `cannot-determine`. Returns the case ids it disagreed on.
fn fill_annotation_sheet(
    dir: &Path,
    labels: &BTreeMap<String, (String, String)>,
    disagree: usize,
) -> Vec<String> {
    let key = read_json(&dir.join("key.json"));
    let sheet = dir.join("packet/sheet.csv");
    let mut rdr = csv::Reader::from_path(&sheet).unwrap();
    let header = rdr.headers().unwrap().clone();
    let col = |n: &str| header.iter().position(|h| h == n).unwrap();
    let (prov, intro) = (col("provenance"), col("introducing_write"));
    let mut rows = Vec::new();
    let mut flipped = Vec::new();
    for rec in rdr.records() {
        let mut rec: Vec<String> = rec.unwrap().iter().map(String::from).collect();
        let case = key["packets"][&rec[0]].as_str().unwrap().to_string();
        let (p, w) = labels[&case].clone();
        rec[prov] = p;
        rec[intro] = if flipped.len() < disagree && w.parse::<u64>().is_ok() {
            flipped.push(case);
            "cannot-determine".into()
        } else {
            w
        };
        rows.push(rec);
    }
    let mut w = csv::Writer::from_path(&sheet).unwrap();
    w.write_record(&header).unwrap();
    for r in rows {
        w.write_record(r).unwrap();
    }
    w.flush().unwrap();
    flipped
}

#[test]
fn study_writes_tables_6_and_7_from_runs_judges_and_annotations() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("study");
    sage()
        .args(["study", CORPUS, "--no-bandit", "--all", "--out"])
        .arg(&out)
        .assert()
        .success();
    let packets = out.join("packets");
    fill_sheet(&packets, "R1", 0);
    fill_sheet(&packets, "R2", 0);
    let sheets = [packets.join("sheet-R1.csv"), packets.join("sheet-R2.csv")];
    // 1. Three lexicon runs, no annotations: the runs are identical by construction, so Table
    //    6(a) stays empty and says why; blinded annotation packets are written (R1 every
    //    case, R2 a sample of 10).
    let o = sage()
        .args(["study", CORPUS, "--out"])
        .arg(&out)
        .arg("--sheets")
        .args(&sheets)
        .args(["--runs", "3", "--sample", "10"])
        .current_dir(d.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("## Table 6(a)") && stdout.contains("## Table 7"));
    assert!(
        stdout.contains("the lexicon judge is deterministic: its 3 runs are identical"),
        "{stdout}"
    );
    let rel = read_json(&out.join("reliability/reliability.json"));
    assert_eq!(rel["cases"], 28);
    assert!(
        rel["consistency"]["repeated"].is_null(),
        "{:#}",
        rel["consistency"]
    );
    assert_eq!(rel["runs_of_primary"], serde_json::json!([0]));
    for f in ["reliability.md", "figure5.svg", "figure6.svg"] {
        assert!(out.join("reliability").join(f).is_file(), "{f}");
    }
    let rows = |who: &str| {
        csv::Reader::from_path(out.join("annotate").join(who).join("packet/sheet.csv"))
            .unwrap()
            .records()
            .count()
    };
    assert_eq!((rows("R1"), rows("R2")), (28, 10));

    // 2. The annotators' labels: R1 copies SAGE's but answers cannot-determine on two cases
    //    with an introducing write, R2 copies SAGE's on its ten. Imported with `sage annotate
    //    import` and given back with --annotations: Tables 6(b), 6(c) and 7.
    let labels = sage_labels(&out.join("results/results.json"));
    assert_eq!(labels.len(), 28);
    let flipped = fill_annotation_sheet(&out.join("annotate/R1"), &labels, 2);
    assert_eq!(flipped.len(), 2);
    fill_annotation_sheet(&out.join("annotate/R2"), &labels, 0);
    let store = out.join("annotations");
    for who in ["R1", "R2"] {
        let dir = out.join("annotate").join(who);
        sage()
            .args(["annotate", "import"])
            .arg(dir.join("packet/sheet.csv"))
            .arg("--key")
            .arg(dir.join("key.json"))
            .arg("--results")
            .arg(out.join("results"))
            .arg("--store")
            .arg(&store)
            .assert()
            .success();
    }
    let o = sage()
        .args(["study", CORPUS, "--out"])
        .arg(&out)
        .arg("--sheets")
        .args(&sheets)
        .arg("--annotations")
        .arg(store.join("R1.csv"))
        .arg(store.join("R2.csv"))
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rel = read_json(&out.join("reliability/reliability.json"));
    assert_eq!(rel["annotators"], serde_json::json!(["R1", "R2"]));
    let cmp = |name: &str, cases: &str| -> Value {
        rel["human"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["comparison"] == name && h["cases"] == cases)
            .unwrap_or_else(|| panic!("{name} {cases}: {:#}", rel["human"]))
            .clone()
    };
    let share = |v: &Value| (v["count"].as_u64().unwrap(), v["total"].as_u64().unwrap());
    // Derivation: R1 differs from SAGE on exactly the two flipped introducing writes and on
    // no provenance; R2 equals SAGE on its ten cases.
    let s1 = cmp("SAGE vs R1", "all");
    assert_eq!(share(&s1["provenance"]["agreement"]), (28, 28));
    assert_eq!(share(&s1["introducing_write"]["agreement"]), (26, 28));
    let s2 = cmp("SAGE vs R2", "all");
    assert_eq!(share(&s2["introducing_write"]["agreement"]), (10, 10));
    // R1 vs R2 on R2's ten: they differ where a flipped case is in R2's sample.
    let r2: Vec<String> = read_json(&out.join("annotate/R2/key.json"))["packets"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let both = flipped.iter().filter(|c| r2.contains(c)).count() as u64;
    let rr = cmp("R1 vs R2", "shared");
    assert_eq!(
        share(&rr["introducing_write"]["agreement"]),
        (10 - both, 10)
    );
    // Table 6(b): task-disjoint resampling against R1 over all 28 cases.
    assert_eq!(rel["resampling"]["annotator"], "R1");
    assert_eq!(rel["resampling"]["introducing_write"]["n"], 28);
    // Table 7 by framework: the rows add up to the 26 of 28, and the group holding a
    // flipped case is the one short.
    let fw = rel["subgroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["subgroup"] == "framework")
        .unwrap();
    let (mut agreed, mut total) = (0, 0);
    for row in fw["rows"].as_array().unwrap() {
        let (c, t) = share(&row["introducing_write"]);
        agreed += c;
        total += t;
        assert_eq!(row["n"].as_u64().unwrap(), t);
    }
    assert_eq!((agreed, total), (26, 28));
    let md = std::fs::read_to_string(out.join("reliability/reliability.md")).unwrap();
    assert!(
        md.contains("| SAGE vs R1 | all | 28 | 100.00 (28/28) |"),
        "{md}"
    );
}

/// The issue's round trip on real runs: the SusVibes cases, contrast runs and the rejected
/// candidate as runs (anchors removed, the submission as its patch) → screen → export →
/// a sheet filled from the confirmed anchors → import → `sage localize` on the imported
/// folders. Every real case is agent-introduced (issue 13), so each imported case must
/// localize exactly as its original folder does: same provenance, introducing write and
/// origin. The task (statement and CVE) survives the trip.
#[test]
fn susvibes_runs_round_trip_through_localize_like_the_original_cases() {
    let Some(sv) = susvibes() else { return };
    let runs = susvibes_runs(&sv);
    let d = tempfile::tempdir().unwrap();
    let screen = d.path().join("screen.json");
    sage()
        .arg("screen")
        .arg(runs.path())
        .args(["--no-bandit", "--format", "json", "-o"])
        .arg(&screen)
        .assert()
        .success();
    let packets = d.path().join("packets");
    sage()
        .args(["confirm", "export"])
        .arg(&screen)
        .arg("--out")
        .arg(&packets)
        .args(["--all", "--annotators", "R1"])
        .assert()
        .success();
    let root = runs.path().to_path_buf();
    let sv2 = sv.clone();
    fill_sheet_from(&packets, "R1", 0, &move |run: &Path| {
        let orig = sv2.join(run.strip_prefix(&root).unwrap());
        ["case.json", "candidate.json"]
            .iter()
            .map(|n| orig.join(n))
            .find(|p| p.is_file())
            .unwrap()
    });
    let cases = d.path().join("cases");
    sage()
        .args(["confirm", "import"])
        .arg(&packets)
        .arg(packets.join("sheet-R1.csv"))
        .arg("--out")
        .arg(&cases)
        .assert()
        .success()
        // 18 valid runs exported: 14 TP, 3 contrast FP, 1 rejected FP.
        .stdout(predicates::str::contains("14 confirmed case folders"));
    for e in std::fs::read_dir(&cases).unwrap() {
        let e = e.unwrap();
        let got = read_json(&e.path().join("case.json"));
        let want = read_json(&sv.join("cases").join(e.file_name()).join("case.json"));
        assert_eq!(got["anchor"], want["anchor"]);
        assert_eq!(got["task"], want["task"], "task statement and CVE kept");
        assert!(got["task"]["cve"].as_str().unwrap().starts_with("CVE-"));
        // The patch became the final file: the same text as the case's final file.
        for (a, f) in want["final_state"].as_object().unwrap() {
            let rel = got["final_state"][a].as_str().unwrap();
            assert_eq!(
                std::fs::read_to_string(e.path().join(rel)).unwrap(),
                std::fs::read_to_string(
                    sv.join("cases")
                        .join(e.file_name())
                        .join(f.as_str().unwrap())
                )
                .unwrap(),
                "{a}"
            );
        }
    }
    let localize = |dir: &Path, out: &Path| -> BTreeMap<String, Value> {
        sage()
            .arg("localize")
            .arg(dir)
            .args(["--no-write", "--output"])
            .arg(out)
            .current_dir(d.path())
            .assert()
            .success();
        let set = read_json(out);
        assert_eq!(
            set["skipped"].as_array().map_or(0, Vec::len),
            0,
            "{:#}",
            set["skipped"]
        );
        set["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["case_id"].as_str().unwrap().to_string(), r.clone()))
            .collect()
    };
    let got = localize(&cases, &d.path().join("got.json"));
    let want = localize(&sv.join("cases"), &d.path().join("want.json"));
    assert_eq!(got.len(), 14);
    assert_eq!(want.len(), 14);
    for (id, r) in &got {
        let w = &want[id];
        assert_eq!(r["provenance"]["provenance"], "agent-introduced", "{id}");
        assert!(
            r["provenance"]["introducing_write"]["turn"].is_u64(),
            "{id}"
        );
        assert!(r["origin"]["outcome"] != Value::Null, "{id}");
        for k in [
            "provenance",
            "origin",
            "anchor",
            "reconstruction_condition",
            "scores",
        ] {
            assert_eq!(r[k], w[k], "{id}: {k}");
        }
    }
}

/// The fragment matcher on the real anchors that end at a comma (wagtail 5c7a60, three of
/// the four runs): the dict entry is the last before `}` in the final file, where the token
/// stream drops the trailing comma. Before issue 13's fix these cases had no code location.
#[test]
fn real_anchors_ending_at_a_comma_are_found_in_their_final_files() {
    let root = Path::new(CORPUS).join("susvibes");
    let mut ending_at_comma = 0;
    let mut n = 0;
    for e in std::fs::read_dir(&root).unwrap() {
        let dir = e.unwrap().path();
        if !dir.to_string_lossy().contains("wagtail_5c7a60") {
            continue;
        }
        n += 1;
        let m = read_json(&dir.join("case.json"));
        let a = &m["anchor"];
        let art = a["artefact"].as_str().unwrap();
        let frag = a["fragment"].as_str().unwrap();
        let fin =
            std::fs::read_to_string(dir.join(m["final_state"][art].as_str().unwrap())).unwrap();
        let base = std::fs::read_to_string(dir.join(m["baseline"][art].as_str().unwrap())).unwrap();
        if frag.trim_end().ends_with(',') {
            ending_at_comma += 1;
            // Verbatim in the file, and the line is not inside a bracket whose closing
            // bracket follows on the same line: the comma is a trailing one.
            assert!(
                fin.lines().any(|l| l.trim() == frag.trim()),
                "{}",
                dir.display()
            );
        }
        let (found, method) = sage_history::fragment::find(art, frag, &fin);
        assert!(found, "{}: {frag}", dir.display());
        assert_eq!(method, sage_history::fragment::Method::PythonTokens);
        assert!(
            !sage_history::fragment::find(art, frag, &base).0,
            "absent from the baseline"
        );
    }
    assert_eq!((n, ending_at_comma), (4, 3));
}

/// Table 6(a) through `sage study`: an LLM judge (the fake server) scored twice is the primary
/// judge's repeated scoring, the lexicon judge is the cross judge, and all ratings pool the
/// two LLM runs with the lexicon's first run (its second, a copy, is left out with a note).
/// On its second sight of a prompt for turn 3 or 4 (the first planning turns) the fake judge
/// answers "no security opportunity, all zeros", so the two LLM runs differ where that moves
/// the origin.
#[test]
fn study_fills_table_6a_from_repeated_llm_runs_and_a_second_judge() {
    use sage_llm::fake::{FakeServer, Fault};
    let d = tempfile::tempdir().unwrap();
    // The constructed cases only (small traces: few requests).
    let corpus = d.path().join("corpus");
    for e in std::fs::read_dir(CORPUS).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() && p.file_name().unwrap() != "susvibes" {
            copy_dir(&p, &corpus.join(p.file_name().unwrap()));
        }
    }
    let out = d.path().join("study");
    sage()
        .arg("study")
        .arg(&corpus)
        .args(["--no-bandit", "--all", "--annotators", "R1", "--out"])
        .arg(&out)
        .assert()
        .success();
    fill_sheet(&out.join("packets"), "R1", 0);
    let zero = serde_json::json!({"score": 0, "quote": null, "rationale": "none"});
    let quiet = serde_json::json!({"applicable": true, "security_opportunity": false,
        "TR": zero, "DI": zero, "VR": zero, "SA": zero});
    let server = FakeServer::with_faults(
        std::time::Duration::ZERO,
        std::sync::Arc::new(
            move |c, _, seen| match sage_llm::fake::scored_turn(&c.body) {
                Some(3 | 4) if seen > 0 => Fault::Answer(quiet.clone()),
                _ => Fault::None,
            },
        ),
    );
    let o = sage()
        .args(["study"])
        .arg(&corpus)
        .arg("--out")
        .arg(&out)
        .arg("--sheets")
        .arg(out.join("packets/sheet-R1.csv"))
        .args([
            "--judge",
            "openai:gpt-4.1-mini",
            "--judge",
            "lexicon",
            "--runs",
            "2",
        ])
        .args(["--ledger", "ledger", "--no-progress", "--timeout", "5"])
        .env("OPENAI_BASE_URL", server.openai_base())
        .env("OPENAI_API_KEY", "sk-test-STUDY-KEY-5d1f")
        .current_dir(d.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains("the lexicon judge is deterministic: its 2 runs"),
        "{stdout}"
    );
    let rel = read_json(&out.join("reliability/reliability.json"));
    assert!(rel["primary_judge"]
        .as_str()
        .unwrap()
        .starts_with("openai:gpt-4.1-mini"));
    assert_eq!(rel["runs_of_primary"], serde_json::json!([0, 1]));
    let c = &rel["consistency"];
    let sources = |k: &str| c[k]["sources"].as_array().map_or(0, Vec::len);
    assert_eq!(
        (
            sources("repeated"),
            sources("cross_judge"),
            sources("all_ratings")
        ),
        (2, 2, 3),
        "{c:#}"
    );
    assert!(
        c["repeated"]["joint_localization"]["count"]
            .as_u64()
            .unwrap()
            > 0
    );
    // Agreement counts stay within the jointly localized cases.
    for k in ["repeated", "cross_judge", "all_ratings"] {
        let joint = c[k]["joint_localization"]["count"].as_u64().unwrap();
        assert!(joint <= 14, "{k}");
        assert_eq!(
            c[k]["type_agreement"]["total"].as_u64().unwrap(),
            joint,
            "{k}"
        );
    }
    let md = std::fs::read_to_string(out.join("reliability/reliability.md")).unwrap();
    assert!(md.contains("| Sources | 2 | 2 | 3 |"), "{md}");
    let t6a: Vec<&str> = md
        .lines()
        .skip_while(|l| !l.starts_with("## Table 6(a)"))
        .take(12)
        .collect();
    println!("{}", t6a.join("\n"));
}

/// A bad annotation row stops nothing: it is named (file and line), the tables are written
/// from the rest, and the exit status is 1.
#[test]
fn study_names_a_bad_annotation_row_and_writes_the_tables_from_the_rest() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("study");
    sage()
        .args([
            "study",
            CORPUS,
            "--no-bandit",
            "--all",
            "--annotators",
            "R1",
            "--out",
        ])
        .arg(&out)
        .assert()
        .success();
    fill_sheet(&out.join("packets"), "R1", 0);
    let ann = d.path().join("r1.csv");
    std::fs::write(
        &ann,
        "case_id,annotator,provenance,introducing_write\n\
         ag2-fig1a-aes-ecb,R1,agent-introduced,3\n\
         ag2-fig1b-origin-header,R1,maybe,none\n",
    )
    .unwrap();
    let o = sage()
        .args(["study", CORPUS, "--out"])
        .arg(&out)
        .arg("--sheets")
        .arg(out.join("packets/sheet-R1.csv"))
        .arg("--annotations")
        .arg(&ann)
        .current_dir(d.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("r1.csv line 3"), "{stderr}");
    let rel = read_json(&out.join("reliability/reliability.json"));
    let all = rel["human"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["comparison"] == "SAGE vs R1")
        .unwrap()
        .clone();
    assert_eq!(all["provenance"]["n"], 1, "the good row is used");
}
