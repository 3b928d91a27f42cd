//! Findings from other tools' SARIF 2.1.0 logs (CodeQL, Semgrep, Bandit `-f sarif`), for
//! proposing anchors.
//!
//! A log belongs to one screened run: the run whose folder holds the file, else the run whose
//! id is `runs[].automationDetails.id`, else the only run screened. A result's file must be
//! one of that run's artefacts (its URI, with `file://`, `%20` and any leading directories
//! the run does not name removed, must end with the artefact path). Anything else is an error
//! naming the file and the result, never a silently dropped finding.

use crate::Unit;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;
use std::sync::LazyLock;

/// One result of an external SARIF log, attributed to a run and an artefact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExternalFinding {
    /// The screened run's id.
    pub run: String,
    pub tool: String,
    pub rule: String,
    pub cwe: Option<u32>,
    pub artefact: String,
    pub start_line: usize,
    pub start_col: Option<usize>,
    pub end_line: Option<usize>,
    pub text: String,
    pub level: String,
    /// The log it came from, for messages.
    pub file: String,
}

static CWE_RX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bcwe[-_/ ]?0*(\d+)").expect("static regex"));

/// The first CWE a rule names: `relationships` into a CWE taxonomy (sage, CodeQL packs),
/// `properties.tags` (`external/cwe/cwe-079`), `properties.cwe` (Semgrep, Bandit).
fn rule_cwe(rule: &Value) -> Option<u32> {
    for rel in rule["relationships"].as_array().into_iter().flatten() {
        let t = &rel["target"];
        if t["toolComponent"]["name"]
            .as_str()
            .is_some_and(|n| n.eq_ignore_ascii_case("cwe"))
        {
            if let Some(id) = t["id"].as_str() {
                if let Some(c) = CWE_RX
                    .captures(id)
                    .and_then(|c| c[1].parse().ok())
                    .or_else(|| id.parse().ok())
                {
                    return Some(c);
                }
            }
        }
    }
    let p = &rule["properties"];
    let texts: Vec<&str> = p["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(p["cwe"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .chain(p["cwe"].as_str())
        .collect();
    texts
        .iter()
        .find_map(|t| CWE_RX.captures(t).and_then(|c| c[1].parse().ok()))
}

fn decode_uri(uri: &str) -> String {
    let u = uri.strip_prefix("file://").unwrap_or(uri);
    percent_encoding::percent_decode_str(u)
        .decode_utf8_lossy()
        .replace('\\', "/")
}

/// Which artefact of `unit` a URI names.
fn artefact_of(unit: &Unit, uri: &str) -> Option<String> {
    let u = decode_uri(uri);
    let u = u.trim_start_matches("./");
    unit.artefacts
        .iter()
        .map(|a| a.path.as_str())
        .find(|a| u == *a || u.ends_with(&format!("/{a}")))
        .map(String::from)
}

/// Read one SARIF log and attribute its results to `units`.
pub fn read(path: &Path, units: &[Unit]) -> Result<Vec<ExternalFinding>, crate::InputError> {
    read_log(path, units).map_err(crate::InputError)
}

fn read_log(path: &Path, units: &[Unit]) -> Result<Vec<ExternalFinding>, String> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: cannot read: {e}"))?;
    let log: Value = serde_json::from_str(&text).map_err(|e| format!("{name}: not JSON: {e}"))?;
    match log["version"].as_str() {
        Some("2.1.0") => {}
        Some(v) => return Err(format!("{name}: SARIF version {v:?}; sage reads 2.1.0")),
        None => return Err(format!("{name}: no \"version\": not a SARIF 2.1.0 log")),
    }
    let runs = log["runs"]
        .as_array()
        .ok_or_else(|| format!("{name}: no \"runs\" array"))?;
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let by_folder = units.iter().find(|u| {
        std::fs::canonicalize(&u.source)
            .ok()
            .is_some_and(|d| d.is_dir() && abs.starts_with(&d))
    });
    let mut out = Vec::new();
    for (ri, run) in runs.iter().enumerate() {
        let at = format!("{name}: runs[{ri}]");
        let auto_id = run["automationDetails"]["id"].as_str();
        let unit = by_folder
            .or_else(|| {
                auto_id.and_then(|id| {
                    units
                        .iter()
                        .find(|u| u.id == id || u.id == id.trim_end_matches('/'))
                })
            })
            .or(if units.len() == 1 {
                units.first()
            } else {
                None
            })
            .ok_or_else(|| {
                format!(
                    "{at}: cannot tell which run this log belongs to{}: put the file in the run's \
                     folder or set runs[{ri}].automationDetails.id to the run id",
                    auto_id
                        .map(|i| format!(" (automationDetails.id {i:?} is no screened run)"))
                        .unwrap_or_default()
                )
            })?;
        let driver = &run["tool"]["driver"];
        let tool = driver["name"].as_str().unwrap_or("sarif").to_string();
        let rules: Vec<&Value> = driver["rules"].as_array().into_iter().flatten().collect();
        for (i, r) in run["results"].as_array().into_iter().flatten().enumerate() {
            let at = format!("{at}.results[{i}]");
            let rule_id = r["ruleId"]
                .as_str()
                .or_else(|| r["rule"]["id"].as_str())
                .map(String::from)
                .or_else(|| {
                    r["ruleIndex"]
                        .as_u64()
                        .and_then(|k| rules.get(k as usize))
                        .and_then(|x| x["id"].as_str())
                        .map(String::from)
                })
                .unwrap_or_else(|| "result".into());
            let rule = r["ruleIndex"]
                .as_u64()
                .and_then(|k| rules.get(k as usize).copied())
                .or_else(|| rules.iter().copied().find(|x| x["id"] == rule_id.as_str()));
            let cwe = rule.and_then(rule_cwe).or_else(|| rule_cwe(r));
            let loc = &r["locations"][0]["physicalLocation"];
            let Some(uri) = loc["artifactLocation"]["uri"].as_str() else {
                return Err(format!(
                    "{at}: no locations[0].physicalLocation.artifactLocation.uri"
                ));
            };
            let artefact = artefact_of(unit, uri).ok_or_else(|| {
                format!(
                    "{at}: names {uri:?}, which is not a file of run {} (its files: {})",
                    unit.id,
                    unit.artefacts
                        .iter()
                        .map(|a| a.path.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            let region = &loc["region"];
            let Some(start) = region["startLine"].as_u64().map(|x| x as usize) else {
                return Err(format!("{at}: no region.startLine"));
            };
            let lines = unit
                .artefacts
                .iter()
                .find(|a| a.path == artefact)
                .and_then(|a| a.final_content.as_deref())
                .map(|f| f.lines().count())
                .unwrap_or(0);
            if start == 0 || start > lines {
                return Err(format!(
                    "{at}: startLine {start} is outside {artefact} of run {} ({lines} lines in \
                     the final file)",
                    unit.id
                ));
            }
            out.push(ExternalFinding {
                run: unit.id.clone(),
                tool: tool.clone(),
                rule: rule_id,
                cwe,
                artefact,
                start_line: start,
                start_col: region["startColumn"].as_u64().map(|x| x as usize),
                end_line: region["endLine"]
                    .as_u64()
                    .map(|x| (x as usize).clamp(start, lines)),
                text: r["message"]["text"].as_str().unwrap_or("").to_string(),
                level: r["level"].as_str().unwrap_or("warning").to_string(),
                file: name.clone(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Artefact;

    fn unit(id: &str) -> Unit {
        Unit {
            id: id.into(),
            source: "/nonexistent".into(),
            framework: None,
            task_cwe: None,
            artefacts: vec![Artefact {
                path: "pkg/app.py".into(),
                baseline: Some("a = 1\n".into()),
                final_content: Some("a = 1\nos.system(x)\n".into()),
            }],
            tests: None,
            excluded: None,
            notes: Vec::new(),
        }
    }

    fn log(body: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), body).unwrap();
        f
    }

    const CODEQL: &str = r#"{"version":"2.1.0","runs":[{"automationDetails":{"id":"r2"},
      "tool":{"driver":{"name":"CodeQL","rules":[{"id":"py/command-line-injection",
        "properties":{"tags":["security","external/cwe/cwe-078"]}}]}},
      "results":[{"ruleId":"py/command-line-injection","ruleIndex":0,
        "message":{"text":"This command depends on a user-provided value."},
        "locations":[{"physicalLocation":{"artifactLocation":{"uri":"file:///src/pkg/app.py"},
          "region":{"startLine":2,"startColumn":1}}}]}]}]}"#;

    #[test]
    fn codeql_tags_give_the_cwe_and_automation_id_the_run() {
        let f = log(CODEQL);
        let got = read(f.path(), &[unit("r1"), unit("r2")]).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].run, "r2");
        assert_eq!(got[0].cwe, Some(78));
        assert_eq!(got[0].artefact, "pkg/app.py");
        assert_eq!(got[0].start_line, 2);
    }

    #[test]
    fn bad_logs_name_the_file_and_the_result() {
        let f = log(&CODEQL.replace("2.1.0", "2.0.0"));
        let e = read(f.path(), &[unit("r2")]).unwrap_err().to_string();
        assert!(
            e.contains("2.0.0") && e.contains(&f.path().display().to_string()),
            "{e}"
        );
        let f = log(&CODEQL.replace("pkg/app.py", "other.py"));
        let e = read(f.path(), &[unit("r2")]).unwrap_err().to_string();
        assert!(
            e.contains("runs[0].results[0]") && e.contains("not a file of run r2"),
            "{e}"
        );
        let f = log(&CODEQL.replace("\"startLine\":2", "\"startLine\":9"));
        let e = read(f.path(), &[unit("r2")]).unwrap_err().to_string();
        assert!(e.contains("startLine 9 is outside"), "{e}");
        let f = log(&CODEQL.replace("\"r2\"", "\"r9\""));
        let e = read(f.path(), &[unit("r1"), unit("r2")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot tell which run"), "{e}");
    }

    #[test]
    fn semgrep_cwe_property_and_sage_relationships_are_read() {
        let semgrep = serde_json::json!({"id":"x","properties":{"cwe":["CWE-89: SQL Injection"]}});
        assert_eq!(rule_cwe(&semgrep), Some(89));
        let sage = serde_json::json!({"id":"x","relationships":[
            {"target":{"id":"502","toolComponent":{"name":"CWE"}}}]});
        assert_eq!(rule_cwe(&sage), Some(502));
    }
}
