//! Human annotation files (`docs/annotations.md`): CSV with `case_id, annotator, provenance,
//! introducing_write`. Parsing from text; bad rows are reported with their line and skipped.

use crate::measures::ArtefactLabel;
use crate::report::Annotations;
use std::collections::{BTreeMap, BTreeSet};

/// A row that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationError {
    pub line: u64,
    pub message: String,
}

const PROVENANCE: [&str; 4] = [
    "inherited",
    "agent-introduced",
    "no-code-location",
    "cannot-determine",
];

fn keyword(s: &str) -> String {
    s.trim().to_lowercase().replace(['_', ' '], "-")
}

/// Normalises a provenance cell; `Ok(None)` for an empty cell.
pub fn normalize_provenance(s: &str) -> Result<Option<String>, String> {
    let k = keyword(s);
    if k.is_empty() {
        return Ok(None);
    }
    if PROVENANCE.contains(&k.as_str()) {
        Ok(Some(k))
    } else {
        Err(format!(
            "provenance {s:?} is not one of {}",
            PROVENANCE.join(", ")
        ))
    }
}

/// Normalises an introducing-write cell to `turn:N`, `none` or `cannot-determine`.
pub fn normalize_introducing_write(s: &str) -> Result<Option<String>, String> {
    let k = keyword(s);
    if k.is_empty() {
        return Ok(None);
    }
    if k == "none" || k == "cannot-determine" {
        return Ok(Some(k));
    }
    let digits = k.strip_prefix("turn:").unwrap_or(&k);
    match digits.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(Some(format!("turn:{n}"))),
        _ => Err(format!(
            "introducing_write {s:?} is not a turn number, none or cannot-determine"
        )),
    }
}

/// The value of a cell that sage wrote formula-neutralized: a leading `'` before `=`, `+`,
/// `-`, `@`, a tab, a carriage return or another `'` is dropped. The inverse of
/// `sage_trace::safe::csv_cell` (this crate depends on no other sage crate, so it lives here
/// too; `tests/it/security.rs` checks that the two agree).
pub fn csv_uncell(s: &str) -> &str {
    match s.strip_prefix('\'') {
        Some(rest) if rest.starts_with(['=', '+', '-', '@', '\t', '\r', '\'']) => rest,
        _ => s,
    }
}

/// Parses one annotation file; returns the annotators found (in order of appearance) and the
/// rows that could not be read.
pub fn parse_annotations(text: &str) -> (Vec<Annotations>, Vec<AnnotationError>) {
    let mut errors = Vec::new();
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(text.as_bytes());
    let header = match rdr.headers() {
        Ok(h) => h.clone(),
        Err(e) => {
            errors.push(AnnotationError {
                line: 1,
                message: format!("cannot read the header row: {e}"),
            });
            return (Vec::new(), errors);
        }
    };
    let col = |name: &str| header.iter().position(|h| keyword(h) == keyword(name));
    let cols = [
        col("case_id"),
        col("annotator"),
        col("provenance"),
        col("introducing_write"),
    ];
    let missing: Vec<&str> = ["case_id", "annotator", "provenance", "introducing_write"]
        .iter()
        .zip(&cols)
        .filter(|(_, c)| c.is_none())
        .map(|(n, _)| *n)
        .collect();
    if !missing.is_empty() {
        errors.push(AnnotationError {
            line: 1,
            message: format!("header lacks column(s) {}", missing.join(", ")),
        });
        return (Vec::new(), errors);
    }
    let [Some(ci), Some(ai), Some(pi), Some(wi)] = cols else {
        return (Vec::new(), errors);
    };
    let mut order: Vec<String> = Vec::new();
    let mut by: BTreeMap<String, Vec<ArtefactLabel>> = BTreeMap::new();
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    for rec in rdr.records() {
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                errors.push(AnnotationError {
                    line: e.position().map_or(0, |p| p.line()),
                    message: format!("malformed CSV: {e}"),
                });
                continue;
            }
        };
        let line = rec.position().map_or(0, |p| p.line());
        if rec.iter().all(|c| c.trim().is_empty()) {
            continue;
        }
        // cells sage wrote start with `'` when they would read as a formula
        let get = |i: usize| csv_uncell(rec.get(i).unwrap_or("").trim());
        let (case_id, annotator) = (get(ci), get(ai));
        if case_id.is_empty() || annotator.is_empty() {
            errors.push(AnnotationError {
                line,
                message: "case_id and annotator are required".into(),
            });
            continue;
        }
        let prov = normalize_provenance(get(pi));
        let iw = normalize_introducing_write(get(wi));
        let (prov, iw) = match (prov, iw) {
            (Ok(p), Ok(w)) => (p, w),
            (Err(e), _) | (_, Err(e)) => {
                errors.push(AnnotationError { line, message: e });
                continue;
            }
        };
        if !seen.insert((case_id.to_string(), annotator.to_string())) {
            errors.push(AnnotationError {
                line,
                message: format!("case {case_id} is annotated twice by {annotator}"),
            });
            continue;
        }
        if !by.contains_key(annotator) {
            order.push(annotator.to_string());
        }
        by.entry(annotator.to_string())
            .or_default()
            .push(ArtefactLabel {
                case_id: case_id.to_string(),
                provenance: prov,
                introducing_write: iw,
            });
    }
    let out = order
        .into_iter()
        .map(|a| Annotations {
            labels: by.remove(&a).unwrap_or_default(),
            annotator: a,
        })
        .collect();
    (out, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_reports_bad_rows() {
        let text = "annotator,case_id,provenance,introducing_write,notes\n\
                    R1,c1,Inherited,none,ok\n\
                    R1,c2,agent-introduced,7,\n\
                    R2,c1,agent_introduced,turn:5,\n\
                    R2,c2,weird,none,\n\
                    R1,c1,inherited,none,\n\
                    R2,c3,,,\n";
        let (a, e) = parse_annotations(text);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].annotator, "R1");
        assert_eq!(a[0].labels.len(), 2);
        assert_eq!(a[0].labels[1].introducing_write.as_deref(), Some("turn:7"));
        assert_eq!(
            a[1].labels[0].provenance.as_deref(),
            Some("agent-introduced")
        );
        assert_eq!(a[1].labels[1].provenance, None, "empty = not labelled");
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].line, 5);
        assert!(e[1].message.contains("twice"));
    }

    #[test]
    fn missing_columns_are_reported() {
        let (a, e) = parse_annotations("case_id,annotator\nc1,R1\n");
        assert!(a.is_empty());
        assert!(e[0].message.contains("provenance"));
    }
}
