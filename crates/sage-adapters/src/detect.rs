//! Format detection from the structure of the whole file, and the refusal of files that are
//! not traces.
//!
//! Every adapter scores the same [`Shape`] (the file's key paths and short values, read as
//! [`crate::shape`] says) with its rules, which are data ([`crate::rules::DetectRule`]:
//! `mappings/detect.toml` and the mapping files' `[[detect]]`); the best wins only by
//! [`MARGIN`] over a different adapter, and the scores, the rules that held and the file's
//! structure are kept as evidence (`sage adapters detect FILE`).

use crate::shape::Shape;
use crate::shape::DETECT_BYTES;
use crate::{Adapter, AdapterError};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

pub use crate::shape::{sample, Sample, WINDOWS, WINDOW_BYTES};

/// The best adapter must score at least this much more than the next different one.
pub const MARGIN: u8 = 10;

/// A verdict whose score is below this rests on weak evidence (a rule that only says "some
/// messages"): when reading the file that way gives no agent-authored turn, the file is
/// refused as a format not recognized, not as an empty trace of that format.
pub const WEAK_BELOW: u8 = 50;

/// One adapter's score on a sample.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Candidate {
    pub framework: String,
    pub score: u8,
    /// The rule that gave the score and the conditions that held.
    pub evidence: String,
}

/// The outcome of detecting one file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Detection {
    pub file: String,
    pub file_bytes: u64,
    /// `whole file` or `head + N windows`.
    pub sampled: String,
    /// What the file is, structurally (shape, keys and record types seen).
    pub structure: Vec<String>,
    /// Every adapter with a score above 0, best first.
    pub candidates: Vec<Candidate>,
    /// What the file is when it is not a trace (a JSON Schema, a patch, a report...).
    pub not_a_trace: Option<String>,
}

/// Why detection names no adapter for a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoVerdict {
    /// The file has no bytes: there is no trace to read, whatever the format.
    #[error("empty file: no trace to read (0 bytes)")]
    Empty,
    /// The file is something else (a JSON Schema, a patch, a report...).
    #[error("not a trace: {0}")]
    NotATrace(String),
    /// No adapter scores it (what the file's structure is).
    #[error(
        "format not recognized (no adapter scores it; the file is {0}); pass --framework NAME (see `sage adapters`)"
    )]
    NotRecognized(String),
    /// Two adapters score it within the margin.
    #[error(
        "format ambiguous: {best} scores {best_score} and {second} scores {second_score} (margin {MARGIN} needed); pass --framework NAME"
    )]
    Ambiguous {
        /// The best adapter.
        best: String,
        /// Its score.
        best_score: u8,
        /// The runner-up.
        second: String,
        /// Its score.
        second_score: u8,
    },
}

impl Detection {
    /// The winner, or why there is none.
    pub fn verdict(&self) -> Result<&Candidate, NoVerdict> {
        if self.file_bytes == 0 {
            return Err(NoVerdict::Empty);
        }
        if let Some(what) = &self.not_a_trace {
            return Err(NoVerdict::NotATrace(what.clone()));
        }
        let Some(best) = self.candidates.first() else {
            return Err(NoVerdict::NotRecognized(self.structure.join("; ")));
        };
        if let Some(second) = self.candidates.get(1) {
            if best.score < second.score.saturating_add(MARGIN) {
                return Err(NoVerdict::Ambiguous {
                    best: best.framework.to_string(),
                    best_score: best.score,
                    second: second.framework.to_string(),
                    second_score: second.score,
                });
            }
        }
        Ok(best)
    }

    /// The evidence as text, one fact a line (what `sage adapters detect` prints).
    pub fn report(&self) -> String {
        let mut s = format!(
            "{}: {} bytes, sampled {}\n",
            self.file, self.file_bytes, self.sampled
        );
        for l in &self.structure {
            s.push_str(&format!("  structure: {l}\n"));
        }
        if self.candidates.is_empty() {
            s.push_str("  no adapter scores it\n");
        }
        for c in &self.candidates {
            s.push_str(&format!(
                "  {:>3}  {:<14} {}\n",
                c.score, c.framework, c.evidence
            ));
        }
        match self.verdict() {
            Ok(c) => s.push_str(&format!("  verdict: {}\n", c.framework)),
            Err(e) => s.push_str(&format!("  verdict: {e}\n")),
        }
        s
    }

    /// The score and evidence of `framework` (0 when it does not score).
    pub(crate) fn score_of(&self, framework: &str) -> u8 {
        self.candidates
            .iter()
            .find(|c| c.framework == framework)
            .map(|c| c.score)
            .unwrap_or(0)
    }
}

/// Score every adapter of `candidates` on the structure of the file at `path`.
/// The code adapters are scored by `rules.detect`; a file is read up to `rules.limits`.
pub fn detect_file(
    candidates: &[Box<dyn Adapter>],
    path: &Path,
    name: &str,
    rules: &crate::rules::Rules,
) -> Result<Detection, AdapterError> {
    let s = sample(path, name)?;
    let shape = Shape::read(path, &s, rules.limits.max_input_bytes);
    Ok(detect_shape(candidates, &s, &shape, name, &rules.detect))
}

/// The sample and structure of the file at `path` (what every adapter is scored on), reading
/// at most `limit` bytes (the input size limit).
pub fn shape_of(path: &Path, name: &str, limit: u64) -> Result<Shape, AdapterError> {
    let s = sample(path, name)?;
    Ok(Shape::read(path, &s, limit))
}

/// [`shape_of`] without walking a large JSON document whole (see [`Shape::read_opts`]):
/// its form and sampled text only.
pub(crate) fn form_of(path: &Path, name: &str, limit: u64) -> Result<Shape, AdapterError> {
    let s = sample(path, name)?;
    Ok(Shape::read_opts(path, &s, false, limit))
}

/// Score every adapter on a file's sample and structure already read.
pub(crate) fn detect_shape(
    candidates: &[Box<dyn Adapter>],
    s: &Sample,
    shape: &Shape,
    name: &str,
    rules: &crate::rules::DetectRules,
) -> Detection {
    // A file small enough to be sampled whole is parsed once, for both readings below.
    let whole = whole_json(s);
    let mut structure = structure_of(s, whole.as_ref());
    structure.push(describe_shape(shape));
    let not_a_trace = not_a_trace(s, whole.as_ref());
    let mut scored: Vec<Candidate> = candidates
        .iter()
        .filter_map(|a| {
            let (score, evidence) = a.detect(shape, rules)?;
            (score > 0).then(|| Candidate {
                framework: a.name().to_string(),
                score,
                evidence,
            })
        })
        .collect();
    scored.sort_by_key(|c| std::cmp::Reverse(c.score));
    Detection {
        file: name.to_string(),
        file_bytes: s.file_bytes,
        sampled: if s.whole {
            "whole file".to_string()
        } else {
            format!(
                "head {} KiB + {} windows",
                DETECT_BYTES / 1024,
                s.windows.len()
            )
        },
        structure,
        candidates: scored,
        not_a_trace,
    }
}

/// One line on what the structure was read from.
fn describe_shape(shape: &Shape) -> String {
    let mut s = match shape.form {
        crate::shape::Form::Document => format!(
            "read as a JSON document ({} record{}, walked whole)",
            shape.records,
            if shape.records == 1 { "" } else { "s" }
        ),
        crate::shape::Form::Lines => format!(
            "read as JSON Lines ({} records walked: the first line whole and the sampled lines{})",
            shape.records,
            if shape.bad_lines > 0 {
                format!("; {} sampled lines not JSON", shape.bad_lines)
            } else {
                String::new()
            }
        ),
        crate::shape::Form::Zip => "read as a zip archive (member names)".to_string(),
        crate::shape::Form::Text => "read as text (sampled lines)".to_string(),
    };
    if let Some(e) = &shape.error {
        s.push_str(&format!("; stopped at: {e}"));
    }
    s
}

fn text(b: &[u8]) -> &str {
    crate::support::head_text(b)
}

/// The whole file as one JSON value, when the sample is the whole file and parses.
fn whole_json(s: &Sample) -> Option<Value> {
    if !s.whole {
        return None;
    }
    serde_json::from_slice(&s.bytes).ok()
}

/// Structural facts: the shape, the top-level keys, the record types of JSON Lines.
pub fn structure(s: &Sample) -> Vec<String> {
    structure_of(s, whole_json(s).as_ref())
}

/// [`structure`], given the whole file's JSON when the sample is the whole file and parses.
fn structure_of(s: &Sample, whole: Option<&Value>) -> Vec<String> {
    let t = text(&s.bytes);
    let lead = t.trim_start();
    let mut out = Vec::new();
    if s.bytes.starts_with(b"PK\x03\x04") {
        out.push("a zip archive".to_string());
        return out;
    }
    if let Some(v) = whole {
        match v {
            Value::Object(m) => {
                out.push(format!("one JSON object, keys {}", keys(m.keys())));
                for (k, x) in m {
                    if let Some(a) = x.as_array() {
                        if let Some(e) = element_keys(a) {
                            out.push(format!("/{k}: {} items, item keys {e}", a.len()));
                        }
                    }
                }
            }
            Value::Array(a) => {
                out.push(format!("one JSON array of {} items", a.len()));
                if let Some(e) = element_keys(a) {
                    out.push(format!("item keys {e}"));
                }
            }
            _ => out.push("one JSON scalar".to_string()),
        }
        return out;
    }
    if lead.starts_with('{') || lead.starts_with('[') {
        // JSON Lines, or a document larger than the sample: count the lines that parse.
        let mut parsed = 0usize;
        let mut lines = 0usize;
        let mut key_sets: BTreeMap<String, usize> = BTreeMap::new();
        for l in t.lines().filter(|l| !l.trim().is_empty()) {
            lines += 1;
            if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(l) {
                parsed += 1;
                let mut k = keys(m.keys().take(6));
                if let Some(ty) = m.get("type").and_then(Value::as_str) {
                    k = format!("type={ty} {k}");
                } else if let Some(ty) = m.get("kind").and_then(Value::as_str) {
                    k = format!("kind={ty} {k}");
                }
                *key_sets.entry(k).or_default() += 1;
            }
        }
        if parsed > 0 {
            out.push(format!(
                "JSON Lines: {parsed} of {lines} sampled lines are JSON objects"
            ));
            let mut sets: Vec<_> = key_sets.into_iter().collect();
            sets.sort_by_key(|x| std::cmp::Reverse(x.1));
            for (k, n) in sets.into_iter().take(6) {
                out.push(format!("{n} x {k}"));
            }
        } else {
            out.push("JSON text larger than the sample, or not line-delimited".to_string());
            let mut seen: Vec<&str> = Vec::new();
            for k in quoted_keys(t) {
                if !seen.contains(&k) && seen.len() < 16 {
                    seen.push(k);
                }
            }
            out.push(format!("keys seen {}", seen.join(", ")));
        }
        return out;
    }
    let first = t.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    out.push(format!(
        "text, first line {:?}",
        first.chars().take(60).collect::<String>()
    ));
    out
}

fn keys<'a>(k: impl Iterator<Item = &'a String>) -> String {
    let v: Vec<&str> = k.map(String::as_str).collect();
    format!("[{}]", v.join(", "))
}

/// The union of the keys of the objects of `a` (first 20 items), when they are objects.
fn element_keys(a: &[Value]) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for x in a.iter().take(20) {
        for k in x.as_object()?.keys() {
            if !seen.contains(&k.as_str()) {
                seen.push(k);
            }
        }
    }
    Some(format!(
        "[{}]",
        seen.iter().take(16).cloned().collect::<Vec<_>>().join(", ")
    ))
}

/// `"key":` occurrences in JSON text, in order.
fn quoted_keys(t: &str) -> impl Iterator<Item = &str> {
    t.split('"')
        .collect::<Vec<_>>()
        .windows(2)
        .filter_map(|w| {
            let after = w[1].trim_start();
            (after.starts_with(':') && !w[0].is_empty() && w[0].len() < 40 && !w[0].contains(' '))
                .then_some(w[0])
        })
        .collect::<Vec<_>>()
        .into_iter()
}

/// What a file is when it is plainly not a trace: a JSON Schema, a patch, a benchmark report or
/// prediction, a directory snapshot, a specification document.
pub(crate) fn not_a_trace(s: &Sample, whole: Option<&Value>) -> Option<String> {
    let t = text(&s.bytes);
    let lead = t.trim_start();
    let first = lead.lines().next().unwrap_or("");
    if first.starts_with("diff --git ")
        || (first.starts_with("--- ") && lead.lines().nth(1).is_some_and(|l| l.starts_with("+++ ")))
        || (first.starts_with("commit ") && lead.contains("\ndiff --git "))
        || (first.starts_with("From ") && lead.contains("\ndiff --git "))
        || first.starts_with("Index: ")
        || first.starts_with("*** Begin Patch")
    {
        return Some("a patch (unified diff), e.g. a submitted result, not a recorded run".into());
    }
    if let Some(v) = whole {
        if let Some(m) = v.as_object() {
            let has = |k: &str| m.contains_key(k);
            if let Some(sc) = m.get("schema").and_then(Value::as_str) {
                if sc.starts_with("sage.") {
                    return Some(format!(
                        "a sage file ({sc}), not a trace; a case's trace is named in its manifest's trace.files"
                    ));
                }
            }
            if has("$schema")
                || ((has("$defs") || has("definitions"))
                    && (has("type") || has("properties") || has("anyOf") || has("oneOf")))
                || (m.get("type").and_then(Value::as_str) == Some("object")
                    && m.get("properties").is_some_and(Value::is_object)
                    && !has("history")
                    && !has("messages"))
            {
                return Some("a JSON Schema (a format's specification, not a recorded run)".into());
            }
            // SWE-bench harness report: {instance: {resolved, tests_status, ...}} or flat.
            let report_like = |o: &serde_json::Map<String, Value>| {
                o.contains_key("resolved")
                    && (o.contains_key("tests_status")
                        || o.contains_key("patch_successfully_applied")
                        || o.len() <= 6)
                    && !o.contains_key("history")
            };
            if report_like(m)
                || (m.len() <= 4 && m.values().all(|x| x.as_object().is_some_and(report_like)))
            {
                return Some(
                    "a benchmark evaluation report (resolved / tests status), not a recorded run"
                        .into(),
                );
            }
            if has("model_patch") && has("instance_id") && !has("history") && !has("messages") {
                return Some(
                    "a benchmark prediction (instance_id, model_patch), not a recorded run".into(),
                );
            }
            if !m.is_empty()
                && m.values().all(|x| {
                    x.as_str()
                        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
                })
            {
                return Some("a directory snapshot (path → sha256), not a recorded run".into());
            }
            if m.keys()
                .any(|k| k.contains("risk") || k.contains("severity"))
                && !has("history")
                && !has("messages")
                && !has("trajectory")
            {
                return Some("a static-analysis score report, not a recorded run".into());
            }
            if has("agent")
                && (has("llm") || has("workspace") || has("persistence_dir"))
                && !has("history")
                && !has("events")
                && !has("messages")
            {
                return Some(
                    "an agent configuration (agent / llm settings, e.g. an OpenHands conversation base_state.json): the events are stored in other files".into(),
                );
            }
        }
    }
    // JSON Lines of predictions: every sampled line has model_patch or fix_patch and no history.
    if lead.starts_with('{') && !s.bytes.starts_with(b"PK") {
        let lines: Vec<&str> = t.lines().filter(|l| !l.trim().is_empty()).collect();
        let preds = lines.iter().filter(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .and_then(|v| v.as_object().cloned())
                .is_some_and(|m| {
                    (m.contains_key("model_patch") || m.contains_key("fix_patch"))
                        && !m.contains_key("history")
                        && !m.contains_key("messages")
                })
        });
        if !lines.is_empty() && preds.count() == lines.len() {
            return Some(
                "benchmark predictions (one patch per instance), not a recorded run".into(),
            );
        }
    }
    if first.starts_with("TO LLM ") || first.starts_with("LLM RESPONSE ") {
        return Some(
            "an aider LLM history (--llm-history-file); give it after the chat history: sage normalize CHAT.md INPUT LLM"
                .into(),
        );
    }
    if first.starts_with("# 20")
        && first.as_bytes().get(6) == Some(&b'-')
        && lead.lines().nth(1).is_some_and(|l| l.starts_with('+'))
    {
        return Some(
            "an aider input history (.aider.input.history); give it after the chat history: sage normalize CHAT.md INPUT"
                .into(),
        );
    }
    if first.starts_with("# This is a demo file generated from trajectory file")
        || (t.contains("\nreplay_config:") && t.contains("\nhistory:"))
    {
        return Some(
            "a SWE-agent demonstration (YAML replay input), not a recorded trajectory".into(),
        );
    }
    if first.starts_with("groups:") || lead.starts_with("# yaml-language-server") {
        return Some("a YAML registry or specification, not a recorded run".into());
    }
    // Aider writes `# aider chat started at ...` as the first line of every session; a
    // markdown file that opens with another heading is a document (a README, a spec, a story).
    if (first.starts_with("<!--") || (first.starts_with('#') && !first.starts_with("####")))
        && !first.starts_with("# aider chat started at")
    {
        let what = if t.contains("semantic convention") || t.contains("Semantic Convention") {
            "a specification document (markdown)"
        } else {
            "a markdown document (no aider chat history markers)"
        };
        return Some(format!("{what}, not a recorded run"));
    }
    let tsv = lead.lines().take(5).collect::<Vec<_>>();
    if tsv.len() >= 2 && tsv.iter().all(|l| l.matches('\t').count() >= 2) {
        return Some("a table (tab-separated values), not a recorded run".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, body: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("sage-detect-{}-{name}", std::process::id()));
        std::fs::write(&p, body).unwrap();
        p
    }

    #[test]
    fn keys_written_after_a_long_history_are_seen() {
        // A hand-crafted Who&When run with 400 long messages: the labels come after the
        // history, ~300 KB into the file, beyond the old 64 KiB head.
        let mut body = String::from("{\"history\": [\n");
        for k in 0..400 {
            body.push_str(&format!(
                "  {{\"content\": \"{}\", \"role\": \"WebSurfer\"}},\n",
                "x".repeat(700 + k)
            ));
        }
        body.push_str("  {\"content\": \"done\", \"role\": \"Orchestrator (thought)\"}\n],\n");
        body.push_str(
            "\"mistake_agent\": \"WebSurfer\", \"mistake_step\": \"3\", \"question_ID\": \"q\"}\n",
        );
        let p = temp("ww.json", &body);
        let s = sample(&p, "ww.json").unwrap();
        assert!(!s.whole);
        assert_eq!(s.windows.len(), WINDOWS);
        let shape = Shape::read(&p, &s, sage_trace::safe::DEFAULT_MAX_INPUT_BYTES);
        let d = detect_shape(
            &crate::registry(),
            &s,
            &shape,
            "ww.json",
            crate::rules::DetectRules::embedded(),
        );
        assert_eq!(
            d.verdict().unwrap().framework,
            "who-and-when",
            "{}",
            d.report()
        );
        // The head alone does not hold the labels: what the old detector saw.
        let head = &s.bytes[..DETECT_BYTES];
        assert!(!String::from_utf8_lossy(head).contains("mistake_agent"));
        std::fs::remove_file(p).ok();
    }

    #[test]
    fn windows_keep_whole_lines_and_end_at_the_file_end() {
        let body: String = (0..20000).map(|k| format!("{{\"n\": {k}}}\n")).collect();
        let p = temp("lines.jsonl", &body);
        let s = sample(&p, "lines.jsonl").unwrap();
        let t = String::from_utf8(s.bytes.clone()).unwrap();
        // Every line after the head is a complete record.
        let head_end = t[..DETECT_BYTES].rfind('\n').unwrap();
        for l in t[head_end + 1..].lines().skip(1).filter(|l| !l.is_empty()) {
            assert!(l.starts_with("{\"n\": ") && l.ends_with('}'), "{l:?}");
        }
        assert!(t.ends_with("{\"n\": 19999}\n"));
        std::fs::remove_file(p).ok();
    }

    #[test]
    fn schemas_patches_and_reports_are_named() {
        let cases = [
            ("{\"$schema\": \"https://json-schema.org/draft/2020-12/schema\", \"type\": \"array\"}", "JSON Schema"),
            ("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "a patch"),
            ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "a patch"),
            ("{\"schema\": \"sage.case/1\", \"trace\": {\"files\": [\"t.json\"]}}", "sage.case/1"),
            ("{\"django__django-1\": {\"resolved\": true, \"tests_status\": {}}}", "evaluation report"),
            ("{\"instance_id\": \"a\", \"model_patch\": \"diff\"}\n{\"instance_id\": \"b\", \"model_patch\": \"diff\"}\n", "predictions"),
        ];
        for (k, (body, what)) in cases.iter().enumerate() {
            let p = temp(&format!("n{k}"), body);
            let d = detect_file(&crate::registry(), &p, "f", &Default::default()).unwrap();
            let e = d.verdict().unwrap_err().to_string();
            assert!(e.contains(what), "{body}: {e}");
            std::fs::remove_file(p).ok();
        }
    }

    #[test]
    fn a_tie_within_the_margin_is_ambiguous() {
        let d = Detection {
            file: "f".into(),
            file_bytes: 1,
            sampled: "whole file".into(),
            structure: vec![],
            candidates: vec![
                Candidate {
                    framework: "a".into(),
                    score: 85,
                    evidence: String::new(),
                },
                Candidate {
                    framework: "b".into(),
                    score: 80,
                    evidence: String::new(),
                },
            ],
            not_a_trace: None,
        };
        assert!(matches!(
            d.verdict().unwrap_err(),
            NoVerdict::Ambiguous { .. }
        ));
    }
}
