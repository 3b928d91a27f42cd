//! Human annotation files (`docs/annotations.md`): CSV with `case_id, annotator, provenance,
//! introducing_write`. Parsing from text ([`Sheet`], the one sheet reader); bad rows are
//! reported with their line and skipped.

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

/// A sheet cell whose value is not one the column allows (the message quotes it and names
/// the allowed values).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CellError(pub String);

/// Normalises a provenance cell; `Ok(None)` for an empty cell.
pub fn normalize_provenance(s: &str) -> Result<Option<String>, CellError> {
    let k = keyword(s);
    if k.is_empty() {
        return Ok(None);
    }
    if PROVENANCE.contains(&k.as_str()) {
        Ok(Some(k))
    } else {
        Err(CellError(format!(
            "provenance {s:?} is not one of {}",
            PROVENANCE.join(", ")
        )))
    }
}

/// Normalises an introducing-write cell to `turn:N`, `none` or `cannot-determine`.
pub fn normalize_introducing_write(s: &str) -> Result<Option<String>, CellError> {
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
        _ => Err(CellError(format!(
            "introducing_write {s:?} is not a turn number, none or cannot-determine"
        ))),
    }
}

/// The value of a cell that sage wrote formula-neutralized (the one helper, in `sage-markup`).
pub use sage_markup::csv_uncell;

/// An annotation sheet read as CSV: the one reader of the sheets sage exports and the stores
/// it keeps (`sage annotate import` validates filled sheets on top of it; `sage reliability`
/// reads stores with [`parse_annotations`]). Header names match ignoring case, `_`, `-` and
/// blanks; cells are trimmed and lose the formula marker sage wrote ([`csv_uncell`]); rows
/// that are entirely blank are skipped; every row carries its real file line (a quoted note
/// may span lines).
#[derive(Debug, Clone, Default)]
pub struct Sheet {
    columns: Vec<String>,
    /// The data rows, in file order.
    pub rows: Vec<SheetRow>,
    /// Rows the CSV reader could not read (and a header that could not be read).
    pub errors: Vec<AnnotationError>,
}

/// One data row of a [`Sheet`].
#[derive(Debug, Clone)]
pub struct SheetRow {
    /// The 1-based file line where the row starts.
    pub line: u64,
    cells: Vec<String>,
}

impl SheetRow {
    /// The cell of column `col` (empty when the column or the cell is absent).
    pub fn get(&self, col: Option<usize>) -> &str {
        col.and_then(|i| self.cells.get(i))
            .map(String::as_str)
            .unwrap_or("")
    }
}

impl Sheet {
    /// Read `text` (a sheet with a header row).
    pub fn read(text: &str) -> Sheet {
        let mut sheet = Sheet::default();
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(true)
            .from_reader(text.as_bytes());
        match rdr.headers() {
            Ok(h) => sheet.columns = h.iter().map(keyword).collect(),
            Err(e) => {
                sheet.errors.push(AnnotationError {
                    line: 1,
                    message: format!("cannot read the header row: {e}"),
                });
                return sheet;
            }
        }
        // record offsets only grow: lines are counted from the previous record on, so a
        // sheet of n rows is read in O(n), not O(n²) (issue 29)
        let mut lines = LineCounter::new(text);
        for rec in rdr.records() {
            let rec = match rec {
                Ok(r) => r,
                Err(e) => {
                    sheet.errors.push(AnnotationError {
                        line: e.position().map_or(0, |p| lines.line_at(p.byte())),
                        message: format!("malformed CSV: {e}"),
                    });
                    continue;
                }
            };
            if rec.iter().all(|c| c.trim().is_empty()) {
                continue;
            }
            sheet.rows.push(SheetRow {
                // counted from the byte offset: the reader's own line count is off after a
                // quoted field that spans lines
                line: rec.position().map_or(0, |p| lines.line_at(p.byte())),
                cells: rec
                    .iter()
                    .map(|c| csv_uncell(c.trim()).to_string())
                    .collect(),
            });
        }
        sheet
    }

    /// Whether the header row could be read (when not, [`Sheet::errors`] says why and there
    /// are no rows).
    pub fn has_header(&self) -> bool {
        !self.columns.is_empty()
    }

    /// The index of column `name`, if the header has it.
    pub fn column(&self, name: &str) -> Option<usize> {
        let k = keyword(name);
        self.columns.iter().position(|c| *c == k)
    }
}

/// 1-based file lines of records at byte offsets in `text`. The csv reader puts a record's
/// offset at the end of the previous one (before the `\n` of a CRLF, before blank lines), so
/// line breaks right there are stepped over first. Newlines are counted from the last offset
/// asked for, so asking in increasing order (as a reader does) is linear in the text.
struct LineCounter<'a> {
    text: &'a [u8],
    /// Offset counted up to, and the newlines before it.
    at: usize,
    newlines: u64,
}

impl<'a> LineCounter<'a> {
    fn new(text: &'a str) -> LineCounter<'a> {
        LineCounter {
            text: text.as_bytes(),
            at: 0,
            newlines: 0,
        }
    }

    fn line_at(&mut self, byte: u64) -> u64 {
        let b = self.text;
        let mut end = usize::try_from(byte).unwrap_or(usize::MAX).min(b.len());
        while end < b.len() && (b[end] == b'\n' || b[end] == b'\r') {
            end += 1;
        }
        if end < self.at {
            // asked out of order: count from the start again
            self.at = 0;
            self.newlines = 0;
        }
        self.newlines += memchr_count(&b[self.at..end]);
        self.at = end;
        self.newlines + 1
    }
}

fn memchr_count(b: &[u8]) -> u64 {
    b.iter().filter(|&&c| c == b'\n').count() as u64
}

/// Parses one annotation file; returns the annotators found (in order of appearance) and the
/// rows that could not be read.
pub fn parse_annotations(text: &str) -> (Vec<Annotations>, Vec<AnnotationError>) {
    let sheet = Sheet::read(text);
    let mut errors = sheet.errors.clone();
    let names = ["case_id", "annotator", "provenance", "introducing_write"];
    let cols = names.map(|n| sheet.column(n));
    let missing: Vec<&str> = names
        .iter()
        .zip(&cols)
        .filter(|(_, c)| c.is_none())
        .map(|(n, _)| *n)
        .collect();
    if !missing.is_empty() {
        if errors.is_empty() {
            errors.push(AnnotationError {
                line: 1,
                message: format!("header lacks column(s) {}", missing.join(", ")),
            });
        }
        return (Vec::new(), errors);
    }
    let [ci, ai, pi, wi] = cols;
    let mut order: Vec<String> = Vec::new();
    let mut by: BTreeMap<String, Vec<ArtefactLabel>> = BTreeMap::new();
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    for rec in &sheet.rows {
        let line = rec.line;
        let (case_id, annotator) = (rec.get(ci), rec.get(ai));
        if case_id.is_empty() || annotator.is_empty() {
            errors.push(AnnotationError {
                line,
                message: "case_id and annotator are required".into(),
            });
            continue;
        }
        let prov = normalize_provenance(rec.get(pi));
        let iw = normalize_introducing_write(rec.get(wi));
        let (prov, iw) = match (prov, iw) {
            (Ok(p), Ok(w)) => (p, w),
            (Err(e), _) | (_, Err(e)) => {
                errors.push(AnnotationError {
                    line,
                    message: e.to_string(),
                });
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
    errors.sort_by_key(|e| e.line);
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
    fn line_counter_counts_in_order_and_out_of_order() {
        let text = "h\r\na\n\nb\r\nc";
        let mut l = LineCounter::new(text);
        // offsets at the end of the previous record step over its line break
        assert_eq!(l.line_at(1), 2);
        assert_eq!(l.line_at(4), 4);
        assert_eq!(l.line_at(7), 5);
        assert_eq!(l.line_at(0), 1, "out of order counts again from the start");
        assert_eq!(l.line_at(99), 5);
    }

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
