//! Runs every case of `../shared/agreement/vectors.json` (118 reference cases computed with
//! exact rational arithmetic) and matches each to 1e-12 relative.

use crate::bootstrap::{kalpha_bootstrap, kalpha_setup};
use crate::stats::*;
use serde_json::Value;

const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/agreement/vectors.json"
);

fn label(v: &Value) -> Option<Label> {
    match v {
        Value::Null => None,
        Value::Number(n) => Label::num(n.as_f64().expect("number")),
        Value::String(s) => Some(Label::text(s.clone())),
        other => panic!("unexpected label {other}"),
    }
}

fn rows(v: &Value) -> Vec<Vec<Option<Label>>> {
    v.as_array()
        .expect("rows")
        .iter()
        .map(|r| r.as_array().expect("row").iter().map(label).collect())
        .collect()
}

fn labels(v: &Value) -> Vec<Label> {
    v.as_array()
        .expect("labels")
        .iter()
        .map(|x| label(x).expect("label"))
        .collect()
}

fn counts(v: &Value) -> Vec<Vec<u64>> {
    v.as_array()
        .expect("table")
        .iter()
        .map(|r| {
            r.as_array()
                .expect("row")
                .iter()
                .map(|x| x.as_u64().expect("count"))
                .collect()
        })
        .collect()
}

fn close(got: f64, want: f64) -> bool {
    got == want || (got - want).abs() <= 1e-12 * want.abs().max(1e-300)
}

/// Compares a result with `expected` (a number, or null = undefined).
fn check(name: &str, got: &StatResult, expected: &Value, failures: &mut Vec<String>) {
    match (expected.as_f64(), got) {
        (Some(want), Ok(e)) if close(e.value, want) => {}
        (None, Err(StatError::Undefined { .. })) => {}
        (want, got) => failures.push(format!("{name}: expected {want:?}, got {got:?}")),
    }
}

fn gwet_weights(p: &Value) -> AgreementWeights {
    serde_json::from_value(p["weights"].clone()).expect("weights")
}

#[test]
fn all_reference_vectors_match() {
    let Ok(text) = std::fs::read_to_string(VECTORS) else {
        // On a clone without ../shared: one line, not a failure, except in CI, which has it
        // (tests/it/need.rs does the same for the integration tests).
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(!ci, "{VECTORS} missing; CI must run every test");
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED all_reference_vectors_match: needs {VECTORS}, which is missing"
        );
        return;
    };
    let doc: Value = serde_json::from_str(&text).expect("parse vectors.json");
    let cases = doc["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 118);
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let p = &case["parameters"];
        let fmt = case["data_format"].as_str().expect("format");
        let stat = case["statistic"].as_str().expect("statistic");
        ran += 1;
        match stat {
            "krippendorff_alpha" => {
                let level: Level =
                    serde_json::from_value(p["level_of_measurement"].clone()).expect("level");
                let domain = p.get("value_domain").map(labels);
                let got = krippendorff_alpha(&rows(&case["data"]), level, domain.as_deref());
                check(name, &got, &case["expected"], &mut failures);
                // The coded path must agree with the streaming path for numbers.
                if let (Ok(e), Ok(coded)) = (&got, Coded::new(&rows(&case["data"]))) {
                    if domain.is_none() && coded.numeric_values().is_some() {
                        let c = alpha_coded(&coded, level).expect("coded alpha");
                        if !close(c.value, e.value) {
                            failures.push(format!("{name}: coded {} vs {}", c.value, e.value));
                        }
                    }
                }
            }
            "cohen_kappa" => {
                let d = &case["data"];
                let data = vec![
                    d["rater1"]
                        .as_array()
                        .expect("r1")
                        .iter()
                        .map(label)
                        .collect(),
                    d["rater2"]
                        .as_array()
                        .expect("r2")
                        .iter()
                        .map(label)
                        .collect(),
                ];
                let coded = match p.get("labels") {
                    Some(l) => Coded::with_categories(&data, &labels(l)),
                    None => Coded::new(&data),
                }
                .expect("code");
                let w: KappaWeights =
                    serde_json::from_value(p["weights"].clone()).expect("weights");
                let scores = match p["weight_scores"].as_str() {
                    Some("value") => Scores::Value,
                    _ => Scores::Position,
                };
                check(
                    name,
                    &cohen_kappa(&coded, w, scores),
                    &case["expected"],
                    &mut failures,
                );
            }
            "fleiss_kappa" => {
                let method: FleissMethod =
                    serde_json::from_value(p["method"].clone()).expect("method");
                if fmt == "counts_units_x_categories" {
                    let got = fleiss_kappa_counts(&counts(&case["data"]), method);
                    check(name, &got, &case["expected"], &mut failures);
                    // Same from raw ratings.
                    let coded = Coded::new(&rows(&case["raw_data_raters_x_units"])).expect("c");
                    let raw = fleiss_kappa(&coded, method, FleissMissing::Reject);
                    check(name, &raw, &case["expected"], &mut failures);
                } else {
                    let coded = Coded::new(&rows(&case["data"])).expect("code");
                    match p["missing"].as_str() {
                        Some("gwet_generalised") => check(
                            name,
                            &fleiss_kappa(&coded, method, FleissMissing::Gwet),
                            &case["expected"],
                            &mut failures,
                        ),
                        _ => {
                            check(
                                name,
                                &fleiss_kappa(&coded, method, FleissMissing::Reject),
                                &case["expected"],
                                &mut failures,
                            );
                            let v = &case["variants"];
                            check(
                                name,
                                &fleiss_kappa(&coded, method, FleissMissing::Listwise),
                                &v["listwise_deletion (R irr kappam.fleiss)"]["expected"],
                                &mut failures,
                            );
                            check(
                                name,
                                &fleiss_kappa(&coded, method, FleissMissing::Gwet),
                                &v["gwet_generalised (irrCAC fleiss)"]["expected"],
                                &mut failures,
                            );
                        }
                    }
                }
            }
            "gwet_ac1" | "gwet_ac2" | "percent_agreement" => {
                let w = gwet_weights(p);
                if fmt == "contingency_table_rater1_rows" {
                    let got = gwet_ac_table(&counts(&case["data"]), w);
                    check(name, &got, &case["expected"], &mut failures);
                    let coded = Coded::new(&rows(&case["raw_data_raters_x_units"])).expect("c");
                    check(name, &gwet_ac(&coded, w), &case["expected"], &mut failures);
                    continue;
                }
                let data = rows(&case["data"]);
                let coded = match p.get("categories") {
                    Some(c) => Coded::with_categories(&data, &labels(c)),
                    None => Coded::new(&data),
                }
                .expect("code");
                let got = if stat == "percent_agreement" {
                    percent_agreement(&coded, w)
                } else {
                    gwet_ac(&coded, w)
                };
                check(name, &got, &case["expected"], &mut failures);
                if let (Ok(e), Some(pa)) = (&got, case["intermediate"]["pa"].as_f64()) {
                    if !close(e.observed, pa) {
                        failures.push(format!("{name}: pa {} vs {pa}", e.observed));
                    }
                }
            }
            "krippendorff_alpha_bootstrap_replicate" => {
                let level: Level =
                    serde_json::from_value(p["level_of_measurement"].clone()).expect("level");
                let coded = Coded::new(&rows(&case["data"])).expect("code");
                let s = kalpha_setup(&coded, level).expect("setup");
                let setup = &case["setup"];
                let want_m = setup["M_draws_per_replicate"].as_u64().expect("M") as usize;
                let want_q = setup["Q_nonzero_coincidence_cells"].as_u64().expect("Q") as usize;
                let want_pairs = setup["pairs_sum_mu_mu_minus_1_over_2"].as_u64().expect("P");
                if s.m_draws != want_m || s.q_nonzero != want_q || s.pairs != want_pairs {
                    failures.push(format!(
                        "{name}: M/Q/P {}/{}/{} vs {want_m}/{want_q}/{want_pairs}",
                        s.m_draws, s.q_nonzero, s.pairs
                    ));
                }
                let de = setup["expected_disagreement_De"].as_f64().expect("De");
                if !close(s.expected_disagreement, de) {
                    failures.push(format!("{name}: De {} vs {de}", s.expected_disagreement));
                }
                // Our cells omit zero-probability cells; compare the non-zero steps.
                let want_cum: Vec<f64> = setup["cumulative_probability"]
                    .as_array()
                    .expect("cum")
                    .iter()
                    .map(|x| x.as_f64().expect("f"))
                    .collect();
                let mut steps = Vec::new();
                let mut prev = 0.0;
                for &c in &want_cum {
                    if c > prev {
                        steps.push(c);
                    }
                    prev = c;
                }
                let cum_ok = steps.len() == s.cumulative.len()
                    && steps.iter().zip(&s.cumulative).all(|(a, b)| close(*b, *a));
                if !cum_ok {
                    failures.push(format!("{name}: cumulative {:?}", s.cumulative));
                }
                for rep in case["replicates"].as_array().expect("reps") {
                    let u: Vec<f64> = rep["uniforms"]
                        .as_array()
                        .expect("u")
                        .iter()
                        .map(|x| x.as_f64().expect("f"))
                        .collect();
                    let want = rep["expected_alpha"].as_f64().expect("alpha");
                    let got = s.replicate(u);
                    if !close(got, want) {
                        failures.push(format!("{name}: replicate {got} vs {want}"));
                    }
                }
            }
            "krippendorff_alpha_bootstrap_ci" => {
                let level: Level =
                    serde_json::from_value(p["level_of_measurement"].clone()).expect("level");
                let coded = Coded::new(&rows(&case["data"])).expect("code");
                let r = kalpha_bootstrap(&coded, level, 20_000, 7, 0.95).expect("bootstrap");
                let e = &case["expected"];
                let spread = &case["monte_carlo_spread_n_boot_10000"];
                if !close(r.alpha, e["alpha"].as_f64().expect("alpha")) {
                    failures.push(format!("{name}: alpha {}", r.alpha));
                }
                if r.m_draws as u64 != e["M_draws_per_replicate"].as_u64().expect("M") {
                    failures.push(format!("{name}: M {}", r.m_draws));
                }
                for (got, key, sd) in [
                    (r.ci_low, "ci_low", "ci_low_sd"),
                    (r.ci_high, "ci_high", "ci_high_sd"),
                ] {
                    let want = e[key].as_f64().expect("ci");
                    let tol = 4.0 * spread[sd].as_f64().expect("sd") + 1e-12;
                    if (got - want).abs() > tol {
                        failures.push(format!("{name}: {key} {got} vs {want} ± {tol}"));
                    }
                }
            }
            other => failures.push(format!("{name}: unknown statistic {other}")),
        }
    }
    assert_eq!(ran, 118);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
