//! A SARIF 2.1.0 view of localize results: one result per case and judge run, located at the
//! failure anchor (the fragment's lines in the final artefact), with the origin turn and the
//! introducing write as related locations into the trace (byte, line or JSON-pointer
//! position of the raw record they come from). The anchor's CWE is a result-level `taxa`
//! reference into the run's CWE taxonomy.
//!
//! Trace files are addressed relative to their case folder through one `originalUriBaseIds`
//! entry per case (`CASE1`, `CASE2`, …), so the log stays valid when the artefact paths are
//! repository paths.

use crate::results::{CaseResult, ResultSet};
use sage_screen::sarif::{cwe_relationship, cwe_taxonomy, srcroot_base, SRCROOT};
use sage_trace::case::Case;
use sage_trace::{CanonicalTrace, Locator, RawRef};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

fn region_of(raw: &RawRef) -> (Option<Value>, Option<String>) {
    match &raw.at {
        Locator::Bytes { start, end } => (
            Some(json!({"byteOffset": start, "byteLength": end.saturating_sub(*start)})),
            None,
        ),
        Locator::Lines { start, end } => (
            Some(json!({"startLine": (*start).max(1), "endLine": (*end).max(*start).max(1)})),
            None,
        ),
        Locator::Json {
            line,
            pointer,
            inner,
        } => (
            line.map(|l| json!({"startLine": l.max(1)})),
            Some(match inner {
                Some(i) => format!("{pointer} → {i}"),
                None => pointer.clone(),
            }),
        ),
        Locator::Synthetic { .. } => (None, None),
    }
}

fn related(id: usize, text: String, raw: &RawRef, base: &str) -> Option<Value> {
    if matches!(raw.at, Locator::Synthetic { .. }) {
        return None;
    }
    let (region, pointer) = region_of(raw);
    // a trace file the manifest named: relative to its case folder, percent-encoded
    let uri = sage_markup::sarif_uri(&raw.file).ok()?;
    let mut phys = json!({"artifactLocation": {"uri": uri, "uriBaseId": base}});
    if let Some(r) = region {
        phys["region"] = r;
    }
    let mut v = json!({"id": id, "message": {"text": text}, "physicalLocation": phys});
    if let Some(p) = pointer {
        v["properties"] = json!({"jsonPointer": p});
    }
    Some(v)
}

/// The turn's first raw record: its message, else its first tool call, else its first write.
fn turn_raw(trace: &CanonicalTrace, turn: usize) -> Option<&RawRef> {
    let t = trace.turns.iter().find(|t| t.index == turn)?;
    t.message
        .as_ref()
        .map(|m| &m.raw)
        .or_else(|| t.tool_calls.first().map(|c| &c.raw))
        .or_else(|| t.writes.first().map(|w| &w.raw))
}

/// Write `n` (1-based, trace order).
fn write_raw(trace: &CanonicalTrace, n: usize) -> Option<&RawRef> {
    trace
        .turns
        .iter()
        .flat_map(|t| t.writes.iter())
        .nth(n.checked_sub(1)?)
        .map(|w| &w.raw)
}

/// The anchor fragment's 1-based line span in the final artefact.
fn anchor_lines(case: &Case, r: &CaseResult, rules: &crate::Rules) -> Option<(usize, usize)> {
    let frag = r.anchor.fragment.as_deref()?;
    let unit = crate::replay::unit_from_run(case, rules).ok()?;
    let fin = unit
        .artefacts
        .iter()
        .find(|a| a.path == r.anchor.artefact)?
        .final_content
        .clone()?;
    let at = fin.find(frag)?;
    let start = fin[..at].matches('\n').count() + 1;
    Some((start, start + frag.matches('\n').count()))
}

/// A case folder as a `file:` URI ending in `/` (the base of its trace files), encoded by
/// the `url` crate, so a folder name with `#`, `%` or `?` stays one path.
fn file_uri(dir: &Path) -> String {
    let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    match url::Url::from_directory_path(&abs) {
        Ok(u) => u.to_string(),
        // a relative path that cannot be made absolute: its segments, encoded
        Err(()) => {
            let rel = abs.display().to_string();
            format!(
                "file:///{}/",
                sage_markup::sarif_uri(&rel).unwrap_or_default()
            )
        }
    }
}

/// The result set as a SARIF 2.1.0 log, its cases read again by `rules`. A case whose
/// folder or trace can no longer be read keeps its result, without the locations that need
/// them.
pub fn to_sarif(set: &ResultSet, rules: &crate::Rules) -> Value {
    let mut log = SarifLog::new(rules);
    for r in &set.results {
        log.add(r);
    }
    log.finish()
}

/// A SARIF log built result by result (a streamed run adds each case's results as the case
/// finishes and keeps only their SARIF entries, which are small).
pub struct SarifLog {
    cwes: BTreeSet<u32>,
    rule_ids: BTreeMap<String, String>,
    bases: serde_json::Map<String, Value>,
    results: Vec<(Option<u32>, Value)>,
    case_base: BTreeMap<String, String>,
    /// How the cases' folders and traces are read again for their locations.
    rules: crate::Rules,
}

impl SarifLog {
    /// An empty log whose cases are read by `rules`.
    pub fn new(rules: &crate::Rules) -> SarifLog {
        SarifLog {
            cwes: BTreeSet::new(),
            rule_ids: BTreeMap::new(),
            bases: serde_json::Map::new(),
            results: Vec::new(),
            case_base: BTreeMap::new(),
            rules: rules.clone(),
        }
    }

    /// Add one result.
    pub fn add(&mut self, r: &CaseResult) {
        let cwe = sage_screen::l3::parse_cwe(&r.anchor.cwe);
        if let Some(c) = cwe {
            self.cwes.insert(c);
        }
        // Only the parts the log shows: the whole result of a long trace is megabytes.
        let origin = serde_json::to_value(&r.origin).unwrap_or(Value::Null);
        let provenance = serde_json::to_value(&r.provenance).unwrap_or(Value::Null);
        let kind = origin["origin_type"]
            .as_str()
            .or_else(|| origin["outcome"].as_str())
            .unwrap_or("unknown")
            .to_string();
        let rule = format!("sage/origin/{kind}");
        self.rule_ids.entry(rule.clone()).or_insert_with(|| {
            format!("The origin of the silent failure is of type {kind} (SAGE origin rule).")
        });
        let n = self.case_base.len() + 1;
        let base = self
            .case_base
            .entry(r.case_dir.clone())
            .or_insert_with(|| format!("CASE{n}"))
            .clone();
        self.bases.insert(
            base.clone(),
            json!({"uri": file_uri(Path::new(&r.case_dir))}),
        );
        // A result is a confirmed case's: its case.json, never a trace that happens to be
        // named run.json beside it.
        let case = Case::load(Path::new(&r.case_dir), self.rules.limits()).ok();
        let trace = case.as_ref().and_then(|case| {
            let files = sage_adapters::case_sources(&case.dir, &case.manifest.trace);
            let how = sage_adapters::NormalizeOptions {
                rules: self.rules.adapters.clone(),
                ..sage_adapters::NormalizeOptions::framework(Some(&r.framework))
            };
            sage_adapters::normalize(&files, &how).ok()
        });
        let mut region = None;
        if let Some((s, e)) = case
            .as_ref()
            .and_then(|case| anchor_lines(case, r, &self.rules))
        {
            region = Some(json!({"startLine": s, "endLine": e}));
        }
        // The anchor's artefact is a name from the case: a relative, percent-encoded URI
        // under SRCROOT, never a scheme or an absolute path (docs/security.md); a name that
        // is not a relative path is kept as text, without a physical location.
        let location = match sage_markup::sarif_uri(&r.anchor.artefact) {
            Ok(uri) => {
                let mut phys = json!({"artifactLocation": {"uri": uri, "uriBaseId": SRCROOT}});
                if let Some(reg) = region {
                    phys["region"] = reg;
                }
                json!({"physicalLocation": phys})
            }
            Err(why) => json!({"message": {"text": format!(
                "artefact {:?} is {why}, not a path under the repository root",
                r.anchor.artefact
            )}}),
        };
        let origin_turn = origin["origin_turn"].as_u64().map(|x| x as usize);
        let iw = &provenance["introducing_write"];
        let mut rel = Vec::new();
        if let (Some(t), Some(tr)) = (origin_turn, trace.as_ref()) {
            if let Some(raw) = turn_raw(tr, t) {
                rel.extend(related(1, format!("origin: turn {t} ({kind})"), raw, &base));
            }
        }
        if let (Some(w), Some(tr)) = (iw["write"].as_u64(), trace.as_ref()) {
            if let Some(raw) = write_raw(tr, w as usize) {
                rel.extend(related(
                    2,
                    format!(
                        "introducing write {w} (turn {})",
                        iw["turn"].as_u64().unwrap_or(0)
                    ),
                    raw,
                    &base,
                ));
            }
        }
        let message = match origin_turn {
            Some(t) => format!(
                "Silent failure ({}, {}): origin at turn {t} ({kind}). {}",
                r.anchor.category.as_str(),
                r.anchor.cwe,
                r.anchor.description
            ),
            None => format!(
                "Silent failure ({}, {}): no origin turn ({kind}). {}",
                r.anchor.category.as_str(),
                r.anchor.cwe,
                r.anchor.description
            ),
        };
        let fp = hex::encode(Sha256::digest(
            format!(
                "{}\0{}\0{}\0{}\0{}",
                r.case_id,
                r.anchor.artefact,
                r.anchor.fragment.as_deref().unwrap_or(""),
                r.judge.name,
                r.run
            )
            .as_bytes(),
        ));
        let mut res = json!({
            "ruleId": rule,
            "level": "warning",
            "message": {"text": message},
            "locations": [location],
            "partialFingerprints": {"sage/v1": fp},
            "properties": {
                "case": r.case_id,
                "judge": r.judge.name,
                "run": r.run,
                "origin": origin,
                "provenance": provenance["provenance"],
            }
        });
        if !rel.is_empty() {
            res["relatedLocations"] = Value::Array(rel);
        }
        self.results.push((cwe, res));
    }

    /// The log.
    pub fn finish(self) -> Value {
        let (taxonomy, cwe_index) = cwe_taxonomy(&self.cwes);
        let index: BTreeMap<&String, usize> = self
            .rule_ids
            .keys()
            .enumerate()
            .map(|(i, k)| (k, i))
            .collect();
        let results: Vec<Value> = self
            .results
            .into_iter()
            .map(|(cwe, mut r)| {
                if let Some(c) = cwe {
                    let mut t = cwe_relationship(c, cwe_index[&c])["target"].clone();
                    t["id"] = json!(c.to_string());
                    r["taxa"] = json!([t]);
                }
                let id = r["ruleId"].as_str().unwrap_or("").to_string();
                if let Some(i) = index.get(&id) {
                    r["ruleIndex"] = json!(i);
                }
                r
            })
            .collect();
        let rules: Vec<Value> = self
            .rule_ids
            .iter()
            .map(|(id, text)| {
                json!({"id": id, "shortDescription": {"text": text},
                       "properties": {"tags": ["security", "silent-failure-origin"]}})
            })
            .collect();
        let mut bases = self.bases;
        bases.insert(SRCROOT.into(), srcroot_base());
        json!({
            "$schema": SCHEMA,
            "version": "2.1.0",
            "runs": [{
                "tool": {"driver": {
                    "name": "sage-localize",
                    "version": env!("CARGO_PKG_VERSION"),
                    "rules": rules,
                    "supportedTaxonomies": [{"name": "CWE", "index": 0}],
                }},
                "originalUriBaseIds": bases,
                "taxonomies": [taxonomy],
                "results": results,
            }]
        })
    }
}
