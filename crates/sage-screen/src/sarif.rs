//! SARIF 2.1.0 output, so screening results open in code-scanning tools. One run; every
//! finding is a result whose location is the artefact path, with the case id in
//! `properties.case`.

use crate::{CaseResult, Report};
use serde_json::{json, Value};
use std::collections::BTreeMap;

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

struct Rules {
    ids: BTreeMap<String, (String, String)>,
}

impl Rules {
    fn add(&mut self, id: &str, name: &str, text: &str) {
        self.ids
            .entry(id.to_string())
            .or_insert_with(|| (name.to_string(), text.to_string()));
    }
}

fn result(
    rule: &str,
    level: &str,
    message: String,
    case: &CaseResult,
    path: &str,
    line: usize,
    col: usize,
) -> Value {
    json!({
        "ruleId": rule,
        "level": level,
        "message": {"text": message},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": {"uri": uri(path)},
                "region": {"startLine": line.max(1), "startColumn": col.max(1)}
            }
        }],
        "properties": {
            "case": case.id,
            "status": case.status.as_str(),
            "candidate": case.candidate,
        }
    })
}

/// Artefact paths as relative URIs (spaces and `%` escaped, separators kept).
fn uri(path: &str) -> String {
    let mut out = String::new();
    for ch in path.trim_start_matches("./").chars() {
        match ch {
            ' ' => out.push_str("%20"),
            '%' => out.push_str("%25"),
            '\\' => out.push('/'),
            c => out.push(c),
        }
    }
    out
}

/// The report as a SARIF 2.1.0 log.
pub fn to_sarif(report: &Report) -> Value {
    let mut rules = Rules {
        ids: BTreeMap::new(),
    };
    let mut results = Vec::new();
    for c in &report.cases {
        for a in &c.artefacts {
            for e in &a.syntax_errors {
                rules.add(
                    "L0/syntax-error",
                    "SyntaxError",
                    "The final snapshot does not parse (L0).",
                );
                results.push(result(
                    "L0/syntax-error",
                    "error",
                    format!("{} {}", e.node, e.message),
                    c,
                    &a.path,
                    e.line,
                    e.col,
                ));
            }
            for m in &a.missing_definitions {
                rules.add(
                    "L1/missing-definition",
                    "MissingDefinition",
                    "A function or class the baseline defines is gone from the final snapshot (L1).",
                );
                results.push(result(
                    "L1/missing-definition",
                    "error",
                    format!("{m} is defined in the baseline but not in the final snapshot"),
                    c,
                    &a.path,
                    1,
                    1,
                ));
            }
            for i in &a.imports {
                if i.resolution == crate::l1::Resolution::Unresolved && !i.optional {
                    rules.add(
                        "L1/unresolved-import",
                        "UnresolvedImport",
                        "An import of the final snapshot does not resolve (L1).",
                    );
                    results.push(result(
                        "L1/unresolved-import",
                        "error",
                        format!("import {} does not resolve", i.module),
                        c,
                        &a.path,
                        i.line,
                        i.col,
                    ));
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
                );
                let level = match f.severity.as_str() {
                    "HIGH" => "error",
                    "MEDIUM" => "warning",
                    _ => "note",
                };
                results.push(result(
                    &id,
                    level,
                    format!(
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
                    c,
                    &a.path,
                    f.line,
                    f.col,
                ));
            }
            for m in &a.nosec_added {
                rules.add(
                    "L2/nosec-added",
                    "NosecAdded",
                    "The agent added a `# nosec` marker that silences Bandit.",
                );
                results.push(result(
                    "L2/nosec-added",
                    "warning",
                    format!("`# nosec` added: {}", m.text),
                    c,
                    &a.path,
                    m.line,
                    1,
                ));
            }
            for h in
                a.l3.hits
                    .iter()
                    .filter(|h| h.kind == crate::l3::HitKind::Sink)
            {
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
                );
                results.push(result(
                    &id,
                    if a.l3.flagged { "warning" } else { "note" },
                    format!(
                        "{} contributes {} to R={} of this file{}",
                        h.rule,
                        h.contribution,
                        a.l3.r,
                        if a.l3.flagged { " (flagged)" } else { "" }
                    ),
                    c,
                    &a.path,
                    h.line,
                    h.col,
                ));
            }
        }
    }
    let rule_list: Vec<Value> = rules
        .ids
        .iter()
        .map(|(id, (name, text))| {
            json!({
                "id": id,
                "name": name,
                "shortDescription": {"text": text},
            })
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
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "sage-screen",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rule_list,
            }},
            "results": results,
            "properties": {
                "rules": report.rules,
                "bandit": report.bandit,
                "summary": report.summary,
            }
        }]
    })
}
