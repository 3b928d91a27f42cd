//! SARIF 2.1.0 output as GitHub code scanning reads it. One run; every finding is a result
//! at the artefact path, with the case id in `properties.case`.
//!
//! - Rules carry their CWE twice: `relationships` into the run's CWE `taxonomies` (the SARIF
//!   way) and `properties.tags` `external/cwe/cwe-NNN` (what GitHub shows), plus
//!   `properties.security-severity` from `rules/sarif_severity.tsv`.
//! - `partialFingerprints["sage/v1"]` hashes the case, rule, artefact, the finding line's text
//!   (trimmed) and its occurrence number, so a finding keeps its fingerprint when lines move.
//! - `baselineState` is `unchanged` for a finding the baseline already has (same Bandit test
//!   on the same line text, or an L3 hit on a line the baseline holds), else `new`.
//! - A finding on a line where the agent added `# nosec` carries an `inSource` suppression
//!   (Bandit runs with `--ignore-nosec`, so the finding is still reported).

use crate::schema;
use crate::{l3, CaseResult, Report, Unit};
use sage_schema::Conv;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// The base every artefact URI is relative to: the root of the repository the run changed.
pub const SRCROOT: &str = "SRCROOT";

/// The run's `originalUriBaseIds` entry for [`SRCROOT`] (its location is the consumer's).
pub fn srcroot_base() -> Value {
    json!({"description": {"text": "The root of the repository the agent changed."}})
}
const SEVERITY_TSV: &str = include_str!("../rules/sarif_severity.tsv");

fn severities() -> BTreeMap<String, String> {
    SEVERITY_TSV
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let mut it = l.split('\t');
            Some((it.next()?.to_string(), it.next()?.trim().to_string()))
        })
        .collect()
}

struct RuleInfo {
    name: String,
    text: String,
    cwe: Option<u32>,
    severity: Option<String>,
    security: bool,
}

#[derive(Default)]
struct Rules {
    ids: BTreeMap<String, RuleInfo>,
}

impl Rules {
    fn add(&mut self, id: &str, name: &str, text: &str, cwe: Option<u32>, sev: Option<String>) {
        let e = self.ids.entry(id.to_string()).or_insert_with(|| RuleInfo {
            name: name.to_string(),
            text: text.to_string(),
            cwe,
            severity: None,
            security: id.starts_with("L2/") || id.starts_with("L3/"),
        });
        // The highest severity any of its results has.
        if let Some(s) = sev {
            let higher = e
                .severity
                .as_ref()
                .is_none_or(|old| s.parse::<f64>().unwrap_or(0.0) > old.parse().unwrap_or(0.0));
            if higher {
                e.severity = Some(s);
            }
        }
    }
}

/// What a result needs from the screened files.
struct Ctx<'a> {
    case: &'a CaseResult,
    path: &'a str,
    final_lines: Vec<&'a str>,
    baseline_lines: BTreeSet<&'a str>,
    nosec: BTreeMap<usize, String>,
}

impl Ctx<'_> {
    fn line(&self, n: usize) -> &str {
        self.final_lines
            .get(n.saturating_sub(1))
            .copied()
            .unwrap_or("")
            .trim()
    }
}

struct Finding<'a> {
    rule: &'a str,
    level: &'a str,
    message: String,
    line: usize,
    col: usize,
    /// Some(true): the baseline has it; None: not applicable (L0/L1).
    in_baseline: Option<bool>,
}

fn result(f: Finding, cx: &Ctx, seen: &mut BTreeMap<(String, String), usize>) -> Value {
    let text = cx.line(f.line).to_string();
    let k = seen
        .entry((f.rule.to_string(), text.clone()))
        .and_modify(|k| *k += 1)
        .or_insert(0);
    let fp = hex::encode(Sha256::digest(
        format!("{}\0{}\0{}\0{}\0{k}", cx.case.id, f.rule, cx.path, text).as_bytes(),
    ));
    let mut region = json!({"startLine": f.line.max(1), "startColumn": f.col.max(1)});
    if !text.is_empty() {
        region["snippet"] = json!({"text": cx.final_lines[f.line.max(1) - 1]});
    }
    let mut r = json!({
        "ruleId": f.rule,
        "level": f.level,
        "message": {"text": f.message},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": {"uri": "", "uriBaseId": SRCROOT},
                "region": region,
            }
        }],
        "partialFingerprints": {"sage/v1": fp},
        "properties": {
            "case": cx.case.id,
            "status": cx.case.status.as_str(),
            "candidate": cx.case.candidate,
        }
    });
    // The artefact path is the run's (from a patch or a trace): a relative, percent-encoded
    // URI under SRCROOT, or no physical location at all (docs/security.md).
    match sage_markup::sarif_uri(cx.path) {
        Ok(u) => r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] = json!(u),
        Err(why) => {
            r["locations"] = json!([{"message": {"text": format!(
                "artefact {:?} is {why}, not a path under the repository root",
                cx.path
            )}}]);
        }
    }
    if let Some(b) = f.in_baseline {
        r["baselineState"] = json!(if b { "unchanged" } else { "new" });
    }
    if let Some(m) = cx.nosec.get(&f.line) {
        if f.rule != "L2/nosec-added" {
            r["suppressions"] = json!([{
                "kind": "inSource",
                "justification": format!("`# nosec` added by the agent: {m}"),
            }]);
        }
    }
    r
}

/// Artefact paths as relative URIs (spaces and `%` escaped, separators kept).
/// The CWE taxonomy component naming `cwes`, and each CWE's index in it.
pub fn cwe_taxonomy(cwes: &BTreeSet<u32>) -> (Value, BTreeMap<u32, usize>) {
    let taxa: Vec<Value> = cwes
        .iter()
        .map(|c| {
            json!({
                "id": c.to_string(),
                "name": format!("CWE-{c}"),
                "helpUri": format!("https://cwe.mitre.org/data/definitions/{c}.html"),
            })
        })
        .collect();
    let index = cwes.iter().enumerate().map(|(i, c)| (*c, i)).collect();
    (
        json!({
            "name": "CWE",
            "organization": "MITRE",
            "informationUri": "https://cwe.mitre.org/",
            "shortDescription": {"text": "The MITRE Common Weakness Enumeration"},
            "taxa": taxa,
        }),
        index,
    )
}

/// A rule's CWE relationship into taxonomy 0.
pub fn cwe_relationship(cwe: u32, index: usize) -> Value {
    json!({
        "target": {"id": cwe.to_string(), "index": index, "toolComponent": {"name": "CWE", "index": 0}},
        "kinds": ["superset"],
    })
}

/// The report as a SARIF 2.1.0 log; `units` are the screened inputs (for line texts).
pub fn to_sarif(report: &Report, units: &[Unit]) -> Value {
    let sev = severities();
    let mut rules = Rules::default();
    let mut results = Vec::new();
    for c in &report.cases {
        let unit = units.iter().find(|u| u.id == c.id && u.source == c.source);
        let mut seen = BTreeMap::new();
        for a in &c.artefacts {
            let art = unit.and_then(|u| u.artefacts.iter().find(|x| x.path == a.path));
            let cx = Ctx {
                case: c,
                path: &a.path,
                final_lines: art
                    .and_then(|x| x.final_content.as_deref())
                    .map(|s| s.lines().collect())
                    .unwrap_or_default(),
                baseline_lines: art
                    .and_then(|x| x.baseline.as_deref())
                    .map(|s| s.lines().map(str::trim).collect())
                    .unwrap_or_default(),
                nosec: a
                    .nosec_added
                    .iter()
                    .map(|m| (m.line, m.text.clone()))
                    .collect(),
            };
            for e in &a.syntax_errors {
                rules.add(
                    "L0/syntax-error",
                    "SyntaxError",
                    "The final snapshot does not parse (L0).",
                    None,
                    None,
                );
                let f = Finding {
                    rule: "L0/syntax-error",
                    level: "error",
                    message: format!("{} {}", e.node, e.message),
                    line: e.line,
                    col: e.col,
                    in_baseline: None,
                };
                results.push(result(f, &cx, &mut seen));
            }
            for m in &a.missing_definitions {
                rules.add(
                    "L1/missing-definition",
                    "MissingDefinition",
                    "A function or class the baseline defines is gone from the final snapshot (L1).",
                    None,
                    None,
                );
                let f = Finding {
                    rule: "L1/missing-definition",
                    level: "error",
                    message: format!(
                        "{m} is defined in the baseline but not in the final snapshot"
                    ),
                    line: 1,
                    col: 1,
                    in_baseline: None,
                };
                results.push(result(f, &cx, &mut seen));
            }
            for i in &a.imports {
                if i.resolution == crate::l1::Resolution::Unresolved && !i.optional {
                    rules.add(
                        "L1/unresolved-import",
                        "UnresolvedImport",
                        "An import of the final snapshot does not resolve (L1).",
                        None,
                        None,
                    );
                    let f = Finding {
                        rule: "L1/unresolved-import",
                        level: "error",
                        message: format!("import {} does not resolve", i.module),
                        line: i.line,
                        col: i.col,
                        in_baseline: None,
                    };
                    results.push(result(f, &cx, &mut seen));
                }
            }
            for f in a.bandit.iter().flatten() {
                let id = format!("L2/{}", f.test_id);
                rules.add(
                    &id,
                    &f.test_name,
                    &format!(
                        "Bandit {} {}{}",
                        f.test_id,
                        f.test_name,
                        f.cwe.map(|c| format!(" (CWE-{c})")).unwrap_or_default()
                    ),
                    f.cwe,
                    sev.get(&format!("bandit:{}", f.severity)).cloned(),
                );
                let level = match f.severity.as_str() {
                    "HIGH" => "error",
                    "MEDIUM" => "warning",
                    _ => "note",
                };
                let r = Finding {
                    rule: &id,
                    level,
                    message: format!(
                        "{} [{} severity, {} confidence{}]",
                        f.text,
                        f.severity,
                        f.confidence,
                        if f.in_baseline {
                            ", also in baseline"
                        } else {
                            ""
                        }
                    ),
                    line: f.line,
                    col: f.col,
                    in_baseline: Some(f.in_baseline),
                };
                results.push(result(r, &cx, &mut seen));
            }
            for m in &a.nosec_added {
                rules.add(
                    "L2/nosec-added",
                    "NosecAdded",
                    "The agent added a `# nosec` marker that silences Bandit.",
                    None,
                    sev.get("nosec-added").cloned(),
                );
                let f = Finding {
                    rule: "L2/nosec-added",
                    level: "warning",
                    message: format!("`# nosec` added: {}", m.text),
                    line: m.line,
                    col: 1,
                    in_baseline: Some(false),
                };
                results.push(result(f, &cx, &mut seen));
            }
            for h in a.l3.hits.iter().filter(|h| h.kind == l3::HitKind::Sink) {
                let id = format!("L3/{}", h.rule);
                rules.add(
                    &id,
                    &h.rule,
                    &format!(
                        "L3 sink {}{} (weight {})",
                        h.rule,
                        h.cwe.map(|c| format!(" CWE-{c}")).unwrap_or_default(),
                        h.w
                    ),
                    h.cwe,
                    sev.get(if a.l3.flagged {
                        "l3:sink-flagged"
                    } else {
                        "l3:sink"
                    })
                    .cloned(),
                );
                let old = cx.baseline_lines.contains(cx.line(h.line));
                let f = Finding {
                    rule: &id,
                    level: if a.l3.flagged { "warning" } else { "note" },
                    message: format!(
                        "{} contributes {} to R={} of this file{}",
                        h.rule,
                        h.contribution,
                        a.l3.r,
                        if a.l3.flagged { " (flagged)" } else { "" }
                    ),
                    line: h.line,
                    col: h.col,
                    in_baseline: Some(old),
                };
                results.push(result(f, &cx, &mut seen));
            }
        }
    }
    let cwes: BTreeSet<u32> = rules.ids.values().filter_map(|r| r.cwe).collect();
    let (taxonomy, cwe_index) = cwe_taxonomy(&cwes);
    let rule_list: Vec<Value> = rules
        .ids
        .iter()
        .map(|(id, r)| {
            let mut tags = vec![if r.security {
                "security"
            } else {
                "correctness"
            }
            .to_string()];
            let mut props = json!({});
            let mut v = json!({
                "id": id,
                "name": r.name,
                "shortDescription": {"text": r.text},
            });
            if let Some(c) = r.cwe {
                tags.push(format!("external/cwe/cwe-{c:03}"));
                v["relationships"] = json!([cwe_relationship(c, cwe_index[&c])]);
            }
            props["tags"] = json!(tags);
            if let Some(s) = &r.severity {
                props["security-severity"] = json!(s);
            }
            v["properties"] = props;
            v
        })
        .collect();
    let index: BTreeMap<&String, usize> =
        rules.ids.keys().enumerate().map(|(i, k)| (k, i)).collect();
    for r in results.iter_mut() {
        let id = r["ruleId"].as_str().unwrap_or("").to_string();
        if let Some(i) = index.get(&id) {
            r["ruleIndex"] = json!(i);
        }
    }
    // the published records, as in the JSON report
    let bandit: schema::ToolRun = report.bandit.clone().conv();
    let summary: Vec<schema::SummaryRow> = report.summary.clone().conv();
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "sage-screen",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rule_list,
                "supportedTaxonomies": [{"name": "CWE", "index": 0}],
            }},
            "originalUriBaseIds": {SRCROOT: srcroot_base()},
            "taxonomies": [taxonomy],
            "results": results,
            "properties": {
                "rules": report.rules,
                "bandit": bandit,
                "summary": summary,
            }
        }]
    })
}
