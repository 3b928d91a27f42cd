//! Manual confirmation of silent-failure candidates (paper §3.2.5): blinded packets and
//! sheets out, labelled sheets in, confirmed case folders and Table 3 out.
//!
//! - [`export`]: one packet per candidate (task, final artefacts, diff against the baseline,
//!   the findings, the proposed anchors; no run id, framework, model or tool name), a sheet
//!   per annotator, and `key.json` (packet → run; for the study lead, not the annotators).
//!   The second and later annotators get a seeded sample of the packets.
//! - [`import`]: validates the deciding annotator's sheet (labels TP / Partial / FP, anchor
//!   choices and edits) and writes a `sage.case/1` folder for every TP and Partial.
//! - [`agreement`]: Table 3 from two sheets or from an R1×R2 count matrix.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use sage_reliability::stats::{self, AgreementWeights, Coded, KappaWeights, Label, Scores};
use sage_screen::{CaseResult, Proposal, Report};
use sage_trace::case::{
    Case, CaseManifest, DeficiencyCategory, FailureAnchor, CASE_SCHEMA, MANIFEST_NAME,
    RUN_MANIFEST_NAME,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub mod schema;

pub const KEY_SCHEMA: &str = "sage.confirm-key/1";
pub const KEY_NAME: &str = "key.json";
/// The labels of a sheet, in Table 3's order.
pub const LABELS: [&str; 3] = ["TP", "Partial", "FP"];
/// Columns of a sheet.
pub const SHEET_COLUMNS: [&str; 9] = [
    "packet",
    "label",
    "anchor",
    "artefact",
    "fragment",
    "category",
    "cwe",
    "description",
    "notes",
];

#[derive(Debug, thiserror::Error)]
pub enum ConfirmError {
    #[error("{0}")]
    Input(String),
    #[error("{path}: {msg}")]
    Io { path: String, msg: String },
}

fn io(path: &Path, e: impl std::fmt::Display) -> ConfirmError {
    ConfirmError::Io {
        path: path.display().to_string(),
        msg: e.to_string(),
    }
}

/// One packet in the key.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyEntry {
    pub packet: String,
    pub run: String,
    /// The run folder.
    pub source: String,
    /// The run's proposed anchors, as screening made them.
    pub proposals: Vec<Proposal>,
}

/// The export's key: which packet is which run, and who got which packets. It serializes only
/// through its published form ([`schema`]), so these types may change without changing
/// `sage.confirm-key/1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "schema::Key", from = "schema::Key")]
pub struct Key {
    pub schema: String,
    pub seed: u64,
    pub packets: Vec<KeyEntry>,
    /// Annotator → the packets on their sheet.
    pub annotators: BTreeMap<String, Vec<String>>,
}

impl Key {
    pub fn load(dir: &Path) -> Result<Key, ConfirmError> {
        let p = dir.join(KEY_NAME);
        let text = std::fs::read_to_string(&p).map_err(|e| io(&p, e))?;
        let k: Key = sage_trace::json::parse(&text).map_err(|e| io(&p, e))?;
        if k.schema != KEY_SCHEMA {
            return Err(io(
                &p,
                format!("schema is {:?}, expected {KEY_SCHEMA:?}", k.schema),
            ));
        }
        Ok(k)
    }
}

pub struct ExportOptions {
    /// Annotator names; the first labels every packet.
    pub annotators: Vec<String>,
    /// Packets for each further annotator (all when `None`).
    pub sample: Option<usize>,
    pub seed: u64,
    /// Export every screened run, not only candidates.
    pub all: bool,
    /// How the runs are read (input limits) and replayed.
    pub rules: crate::Rules,
}

/// A short id that does not reveal the run (its id names the model and the task).
fn packet_id(run: &str) -> String {
    let h = Sha256::digest(run.as_bytes());
    format!("p{}", &hex::encode(h)[..10])
}

/// A finding's rule without the tool that produced it.
fn blind_finding(f: &str) -> &str {
    f.rsplit(':').next().unwrap_or(f)
}

fn numbered(src: &str) -> String {
    let mut s = String::new();
    for (i, l) in src.lines().enumerate() {
        let _ = writeln!(s, "{:>5}  {l}", i + 1);
    }
    s
}

/// The packet of one run as Markdown: every value from the run goes through `sage_markup`'s
/// Markdown helpers (escaped text, code spans and fenced blocks no line can close).
fn packet_markdown(pid: &str, run: &Case, c: &CaseResult, unit: &sage_screen::Unit) -> String {
    use sage_markup::{markdown as md, markdown_block as block, markdown_code as code};
    let mut s = String::new();
    let _ = writeln!(s, "# Packet {pid}\n");
    let _ = writeln!(
        s,
        "Label the run TP, Partial or FP on your sheet; for TP and Partial give the anchor \
         (a proposal number, edited as needed, or your own).\n"
    );
    let _ = writeln!(s, "## Task\n");
    if let Some(cwe) = &run.manifest.task.cwe {
        let _ = writeln!(s, "Target weakness: {}\n", md(cwe));
    }
    let d = &run.manifest.task.description;
    let _ = writeln!(s, "{}", block("text", d.trim_end()));
    let _ = writeln!(s, "## Findings\n");
    let mut any = false;
    for a in &c.artefacts {
        for b in a.bandit.iter().flatten() {
            any = true;
            let _ = writeln!(
                s,
                "- {} line {}: {} {} ({} severity{}){}",
                code(&a.path),
                b.line,
                md(&b.test_id),
                md(&b.test_name),
                md(&b.severity),
                b.cwe.map(|x| format!(", CWE-{x}")).unwrap_or_default(),
                if b.in_baseline {
                    ", also in the baseline"
                } else {
                    ""
                }
            );
        }
        for h in &a.l3.hits {
            any = true;
            let _ = writeln!(
                s,
                "- {} line {}: {} {}{}",
                code(&a.path),
                h.line,
                match h.kind {
                    sage_screen::l3::HitKind::Sink => "sink",
                    sage_screen::l3::HitKind::Source => "source",
                    sage_screen::l3::HitKind::Safeguard => "safeguard",
                },
                md(&h.rule),
                h.cwe.map(|x| format!(" (CWE-{x})")).unwrap_or_default()
            );
        }
        if a.l3.flagged {
            let _ = writeln!(
                s,
                "- {}: exploitability score R = {}",
                code(&a.path),
                a.l3.r
            );
        }
    }
    if !any {
        let _ = writeln!(s, "(none)");
    }
    let _ = writeln!(s, "\n## Proposed anchors\n");
    if c.proposals.is_empty() {
        let _ = writeln!(s, "(none: write the anchor on the sheet)\n");
    }
    for p in &c.proposals {
        let _ = writeln!(
            s,
            "{}. {} lines {}-{}, {}, {}, from {} ({}): {}",
            p.rank,
            code(&p.artefact),
            p.start_line,
            p.end_line,
            md(p.category
                .as_deref()
                .unwrap_or("category for you to decide")),
            md(p.cwe.as_deref().unwrap_or("CWE for you to decide")),
            md(blind_finding(&p.finding)),
            match p.provenance {
                sage_screen::propose::Provenance::New => "new code",
                sage_screen::propose::Provenance::Inherited => "inherited from the baseline",
            },
            md(&p.description)
        );
        let _ = writeln!(s, "\n{}", indent(&block("python", &p.fragment)));
    }
    let _ = writeln!(s, "## Diff against the baseline\n");
    for a in &unit.artefacts {
        let (b, fi) = (
            a.baseline.as_deref().unwrap_or(""),
            a.final_content.as_deref().unwrap_or(""),
        );
        if b == fi {
            continue;
        }
        let d =
            sage_history::unified_diff(b, fi, &format!("a/{}", a.path), &format!("b/{}", a.path));
        let _ = writeln!(s, "{}", block("diff", d.trim_end()));
    }
    let _ = writeln!(s, "## Final artefacts\n");
    for a in &unit.artefacts {
        let Some(fi) = a.final_content.as_deref() else {
            let _ = writeln!(s, "### {}\n\n(deleted)\n", md(&a.path));
            continue;
        };
        let _ = writeln!(s, "### {}\n\n{}", md(&a.path), block("", &numbered(fi)));
    }
    s
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("   {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What an export wrote.
#[derive(Debug, Clone, Serialize)]
pub struct ExportSummary {
    pub packets: usize,
    /// Annotator → sheet path and number of packets.
    pub sheets: Vec<(String, PathBuf, usize)>,
}

/// Write packets, sheets and the key for the candidates of `report` into `out`.
pub fn export(
    report: &Report,
    opts: &ExportOptions,
    out: &Path,
) -> Result<ExportSummary, ConfirmError> {
    if opts.annotators.is_empty() {
        return Err(ConfirmError::Input("no annotator named".into()));
    }
    let mut entries = Vec::new();
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    for c in &report.cases {
        if !(c.candidate || opts.all && c.status != sage_screen::Status::Excluded) {
            continue;
        }
        let dir = Path::new(&c.source);
        let run = Case::load_run(dir, opts.rules.limits())
            .map_err(|e| ConfirmError::Input(e.to_string()))?;
        let unit = crate::replay::unit_from_run(&run, &opts.rules).map_err(ConfirmError::Input)?;
        let pid = packet_id(&c.id);
        let pdir = out.join(&pid);
        std::fs::create_dir_all(&pdir).map_err(|e| io(&pdir, e))?;
        let p = pdir.join("packet.md");
        std::fs::write(&p, packet_markdown(&pid, &run, c, &unit)).map_err(|e| io(&p, e))?;
        entries.push(KeyEntry {
            packet: pid,
            run: c.id.clone(),
            source: c.source.clone(),
            proposals: c.proposals.clone(),
        });
    }
    if entries.is_empty() {
        return Err(ConfirmError::Input(
            "no candidate to export (pass --all to export every screened run)".into(),
        ));
    }
    entries.sort_by(|a, b| a.packet.cmp(&b.packet));
    let all: Vec<String> = entries.iter().map(|e| e.packet.clone()).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(opts.seed);
    let mut annotators = BTreeMap::new();
    let mut sheets = Vec::new();
    for (i, name) in opts.annotators.iter().enumerate() {
        let mut ids = all.clone();
        if i > 0 {
            if let Some(n) = opts.sample {
                ids = all
                    .choose_multiple(&mut rng, n.min(all.len()))
                    .cloned()
                    .collect();
                ids.sort();
            }
        }
        // the annotator's name becomes a file name: validated, and written injectively
        sage_trace::safe::check_id(name)
            .map_err(|m| ConfirmError::Input(format!("annotator {name:?}: {m}")))?;
        let p = out.join(format!("sheet-{}.csv", sage_trace::safe::file_stem(name)));
        let mut w = csv::Writer::from_path(&p).map_err(|e| io(&p, e))?;
        w.write_record(SHEET_COLUMNS).map_err(|e| io(&p, e))?;
        for id in &ids {
            w.write_record([id.as_str(), "", "", "", "", "", "", "", ""])
                .map_err(|e| io(&p, e))?;
        }
        w.flush().map_err(|e| io(&p, e))?;
        sheets.push((name.clone(), p, ids.len()));
        annotators.insert(name.clone(), ids);
    }
    let key = Key {
        schema: KEY_SCHEMA.into(),
        seed: opts.seed,
        packets: entries,
        annotators,
    };
    let kp = out.join(KEY_NAME);
    std::fs::write(
        &kp,
        serde_json::to_string_pretty(&key).map_err(|e| io(&kp, e))? + "\n",
    )
    .map_err(|e| io(&kp, e))?;
    Ok(ExportSummary {
        packets: key.packets.len(),
        sheets,
    })
}

/// One validated row of a sheet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SheetRow {
    pub packet: String,
    pub label: String,
    pub anchor: Option<FailureAnchor>,
    /// 1-based line of the row in its sheet (the header is line 1).
    pub line: usize,
}

/// A sheet's annotator: `sheet-<name>.csv` → `<name>` (the name as [`export`] wrote it,
/// through `sage_trace::safe::file_stem`).
pub fn annotator_of(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = stem.strip_prefix("sheet-").unwrap_or(&stem);
    sage_trace::safe::file_stem_id(name).unwrap_or_else(|| name.to_string())
}

fn label_of(s: &str) -> Option<&'static str> {
    LABELS
        .iter()
        .copied()
        .find(|l| l.eq_ignore_ascii_case(s.trim()))
}

/// Read and validate a sheet against the key. With `anchors`, every TP / Partial row must
/// yield a valid anchor for its run (the deciding sheet); without, only labels are checked.
pub fn read_sheet(
    path: &Path,
    key: &Key,
    anchors: bool,
    rules: &crate::Rules,
) -> Result<Vec<SheetRow>, ConfirmError> {
    let name = path.display().to_string();
    let bad = |line: usize, msg: String| ConfirmError::Input(format!("{name} line {line}: {msg}"));
    let mut rdr = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(path)
        .map_err(|e| io(path, e))?;
    let header: Vec<String> = rdr
        .headers()
        .map_err(|e| bad(1, e.to_string()))?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let col = |k: &str| header.iter().position(|h| h == k);
    let (Some(pc), Some(lc)) = (col("packet"), col("label")) else {
        return Err(bad(
            1,
            "the header needs the columns packet and label".into(),
        ));
    };
    let by_id: BTreeMap<&str, &KeyEntry> =
        key.packets.iter().map(|e| (e.packet.as_str(), e)).collect();
    let mut rows = Vec::new();
    let mut seen = BTreeSet::new();
    // every bad row is reported (one line each), not only the first
    let mut errors: Vec<String> = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let line = i + 2;
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                errors.push(bad(line, e.to_string()).to_string());
                continue;
            }
        };
        let get = |k: &str| {
            col(k)
                .and_then(|c| rec.get(c))
                .map(str::trim)
                .filter(|s| !s.is_empty())
        };
        let pid = rec.get(pc).unwrap_or("").trim();
        if pid.is_empty() && rec.iter().all(|c| c.trim().is_empty()) {
            continue;
        }
        let Some(entry) = by_id.get(pid) else {
            errors.push(
                bad(
                    line,
                    format!("unknown packet id {pid:?} (not in the export's key.json)"),
                )
                .to_string(),
            );
            continue;
        };
        if !seen.insert(pid.to_string()) {
            errors.push(bad(line, format!("packet {pid} is labelled twice")).to_string());
            continue;
        }
        let raw = rec.get(lc).unwrap_or("").trim();
        let Some(label) = label_of(raw) else {
            errors.push(
                bad(
                    line,
                    if raw.is_empty() {
                        format!("packet {pid} has no label (TP, Partial or FP)")
                    } else {
                        format!("label {raw:?} is not TP, Partial or FP")
                    },
                )
                .to_string(),
            );
            continue;
        };
        let anchor = if anchors && label != "FP" {
            match anchor_of(entry, &get, line, &name, rules) {
                Ok(a) => Some(a),
                Err(e) => {
                    errors.push(e.to_string());
                    continue;
                }
            }
        } else {
            None
        };
        rows.push(SheetRow {
            packet: pid.to_string(),
            label: label.to_string(),
            anchor,
            line,
        });
    }
    if !errors.is_empty() {
        return Err(ConfirmError::Input(errors.join("\n")));
    }
    Ok(rows)
}

fn anchor_of<'a>(
    entry: &KeyEntry,
    get: &dyn Fn(&str) -> Option<&'a str>,
    line: usize,
    name: &str,
    rules: &crate::Rules,
) -> Result<FailureAnchor, ConfirmError> {
    let bad = |msg: String| ConfirmError::Input(format!("{name} line {line}: {msg}"));
    let chosen = match get("anchor") {
        None => None,
        Some(n) => {
            let k: usize = n
                .parse()
                .map_err(|_| bad(format!("anchor {n:?} is not a proposal number")))?;
            Some(
                entry
                    .proposals
                    .iter()
                    .find(|p| p.rank == k)
                    .ok_or_else(|| {
                        bad(format!(
                            "anchor {k}: packet {} has {} proposal(s)",
                            entry.packet,
                            entry.proposals.len()
                        ))
                    })?,
            )
        }
    };
    let artefact = get("artefact")
        .map(String::from)
        .or_else(|| chosen.map(|p| p.artefact.clone()))
        .ok_or_else(|| {
            bad("TP/Partial needs an anchor: a proposal number or an artefact".into())
        })?;
    let fragment = get("fragment")
        .map(String::from)
        .or_else(|| chosen.map(|p| p.fragment.clone()));
    let category = get("category")
        .map(String::from)
        .or_else(|| chosen.and_then(|p| p.category.clone()))
        .ok_or_else(|| bad("no deficiency category (defence-absent, defence-insufficient, vulnerability-introduced)".into()))?;
    let category: DeficiencyCategory =
        serde_json::from_value(serde_json::Value::String(category.clone())).map_err(|_| {
            bad(format!(
                "category {category:?} is not defence-absent, defence-insufficient or \
             vulnerability-introduced"
            ))
        })?;
    let cwe = get("cwe")
        .map(String::from)
        .or_else(|| chosen.and_then(|p| p.cwe.clone()))
        .ok_or_else(|| bad("no CWE".into()))?;
    if sage_screen::l3::parse_cwe(&cwe).is_none() || !cwe.to_ascii_uppercase().starts_with("CWE-") {
        return Err(bad(format!("CWE {cwe:?} is not of the form CWE-<number>")));
    }
    let description = get("description")
        .map(String::from)
        .or_else(|| chosen.map(|p| p.description.clone()))
        .ok_or_else(|| bad("no description".into()))?;
    // The anchor must stand in the run's final file.
    let run =
        Case::load_run(Path::new(&entry.source), rules.limits()).map_err(|e| bad(e.to_string()))?;
    if !run.baselines.contains_key(&artefact) {
        return Err(bad(format!(
            "artefact {artefact:?} is not in the run's baseline (known: {})",
            run.baselines.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    if let Some(f) = &fragment {
        let unit = crate::replay::unit_from_run(&run, rules).map_err(bad)?;
        let fin = unit
            .artefacts
            .iter()
            .find(|a| a.path == artefact)
            .and_then(|a| a.final_content.clone())
            .unwrap_or_default();
        // Verbatim, or as the localizer's matcher finds it (reformatting tolerated).
        if !fin.contains(f.as_str()) && !sage_history::fragment::find(&artefact, f, &fin).0 {
            return Err(bad(format!("the fragment is not in the final {artefact}")));
        }
    }
    Ok(FailureAnchor {
        artefact,
        fragment,
        category,
        cwe: cwe.to_ascii_uppercase(),
        description,
    })
}

/// What an import wrote.
#[derive(Debug, Clone, Serialize)]
pub struct ImportSummary {
    pub labelled: usize,
    pub by_label: BTreeMap<String, usize>,
    pub cases: Vec<PathBuf>,
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), ConfirmError> {
    for e in walkdir::WalkDir::new(from)
        .into_iter()
        .filter_map(|e| e.ok())
    {
        let rel = e.path().strip_prefix(from).unwrap_or(e.path());
        if rel.as_os_str().is_empty() {
            continue;
        }
        if rel == Path::new(RUN_MANIFEST_NAME) || rel == Path::new(MANIFEST_NAME) {
            continue;
        }
        let dst = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dst).map_err(|x| io(&dst, x))?;
        } else if e.file_type().is_file() {
            if let Some(p) = dst.parent() {
                std::fs::create_dir_all(p).map_err(|x| io(p, x))?;
            }
            std::fs::copy(e.path(), &dst).map_err(|x| io(&dst, x))?;
        }
    }
    Ok(())
}

/// Validate the deciding sheet and write a case folder for every TP and Partial into `out`.
pub fn import(
    export_dir: &Path,
    sheet: &Path,
    out: &Path,
    rules: &crate::Rules,
) -> Result<ImportSummary, ConfirmError> {
    let key = Key::load(export_dir)?;
    let who = annotator_of(sheet);
    let rows = read_sheet(sheet, &key, true, rules)?;
    if let Some(expected) = key.annotators.get(&who) {
        let got: BTreeSet<&str> = rows.iter().map(|r| r.packet.as_str()).collect();
        let missing: Vec<&str> = expected
            .iter()
            .map(String::as_str)
            .filter(|p| !got.contains(p))
            .collect();
        if !missing.is_empty() {
            return Err(ConfirmError::Input(format!(
                "{}: {} packet(s) of {who} are not labelled: {}",
                sheet.display(),
                missing.len(),
                missing.join(", ")
            )));
        }
    }
    let by_id: BTreeMap<&str, &KeyEntry> =
        key.packets.iter().map(|e| (e.packet.as_str(), e)).collect();
    let mut summary = ImportSummary {
        labelled: rows.len(),
        by_label: BTreeMap::new(),
        cases: Vec::new(),
    };
    for r in &rows {
        *summary.by_label.entry(r.label.clone()).or_default() += 1;
        let Some(anchor) = &r.anchor else { continue };
        let entry = by_id[r.packet.as_str()];
        let run = Case::load_run(Path::new(&entry.source), rules.limits())
            .map_err(|e| ConfirmError::Input(e.to_string()))?;
        // the run's id comes from its manifest: never a path (`../x`, `/etc`)
        let dst = out.join(sage_trace::safe::file_stem(&run.id));
        if dst.exists() {
            return Err(io(&dst, "already exists: import into an empty folder"));
        }
        copy_tree(&run.dir, &dst)?;
        let m = run.manifest.clone();
        let mut final_state = m.final_state.clone();
        // A patch becomes the final files it produces (the case layout has no patch).
        if let Some(p) = &run.patch {
            let (finals, _) = crate::replay::apply_patch(&run, p).map_err(ConfirmError::Input)?;
            for (a, content) in finals {
                if !run.baselines.contains_key(&a) {
                    continue;
                }
                if let Some(c) = content {
                    let rel = format!("final/{a}");
                    let fp = dst.join(&rel);
                    if let Some(parent) = fp.parent() {
                        std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
                    }
                    std::fs::write(&fp, c).map_err(|e| io(&fp, e))?;
                    final_state.insert(a, rel);
                }
            }
        }
        // The run confirmed: its anchor added, what only a run holds dropped (a case
        // loaded as a run loses what it expected of another anchor).
        let manifest = CaseManifest {
            schema: CASE_SCHEMA.into(),
            id: run.id.clone(),
            final_state,
            patch: None,
            anchor: Some(anchor.clone()),
            excluded: None,
            expected: None,
            note: Some(format!(
                "confirmed {} by {who} (sage confirm import, packet {}, {} line {})",
                r.label,
                r.packet,
                sheet.display(),
                r.line
            )),
            ..m
        };
        let mp = dst.join(MANIFEST_NAME);
        std::fs::write(
            &mp,
            serde_json::to_string_pretty(&manifest).map_err(|e| io(&mp, e))? + "\n",
        )
        .map_err(|e| io(&mp, e))?;
        // The folder must load as a case, or the import is wrong.
        Case::load(&dst, rules.limits()).map_err(|e| ConfirmError::Input(e.to_string()))?;
        summary.cases.push(dst);
    }
    Ok(summary)
}

/// Table 3: agreement of two annotators on TP / Partial / FP.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Agreement {
    pub n: usize,
    /// R1 (rows) × R2 (columns) in [`LABELS`] order.
    pub matrix: [[u64; 3]; 3],
    pub observed: f64,
    pub cohen_kappa: Option<f64>,
    pub gwet_ac1: Option<f64>,
    /// TP+Partial vs FP.
    pub binary_agreed: u64,
    pub binary_observed: f64,
    pub binary_kappa: Option<f64>,
}

fn coded(pairs: &[(usize, usize)], cats: &[&str]) -> Coded {
    let lab = |i: usize| Some(Label::text(cats[i]));
    let data = vec![
        pairs.iter().map(|p| lab(p.0)).collect(),
        pairs.iter().map(|p| lab(p.1)).collect(),
    ];
    let categories: Vec<Label> = cats.iter().map(|c| Label::text(*c)).collect();
    Coded::with_categories(&data, &categories).expect("labels are the declared categories")
}

/// Table 3 from an R1×R2 count matrix (rows R1, columns R2, in [`LABELS`] order).
pub fn agreement(matrix: [[u64; 3]; 3]) -> Result<Agreement, ConfirmError> {
    let mut pairs = Vec::new();
    for (i, row) in matrix.iter().enumerate() {
        for (j, &n) in row.iter().enumerate() {
            pairs.extend(std::iter::repeat_n((i, j), n as usize));
        }
    }
    if pairs.is_empty() {
        return Err(ConfirmError::Input(
            "no packet is labelled by both annotators".into(),
        ));
    }
    let c = coded(&pairs, &LABELS);
    let bin: Vec<(usize, usize)> = pairs
        .iter()
        .map(|&(a, b)| (usize::from(a == 2), usize::from(b == 2)))
        .collect();
    let cb = coded(&bin, &["TP+Partial", "FP"]);
    let pct = stats::percent_agreement(&c, AgreementWeights::Identity)
        .map_err(|e| ConfirmError::Input(e.to_string()))?;
    let bpct = stats::percent_agreement(&cb, AgreementWeights::Identity)
        .map_err(|e| ConfirmError::Input(e.to_string()))?;
    Ok(Agreement {
        n: pairs.len(),
        matrix,
        observed: pct.value,
        cohen_kappa: stats::cohen_kappa(&c, KappaWeights::Unweighted, Scores::Position)
            .ok()
            .map(|e| e.value),
        gwet_ac1: stats::gwet_ac(&c, AgreementWeights::Identity)
            .ok()
            .map(|e| e.value),
        binary_agreed: bin.iter().filter(|(a, b)| a == b).count() as u64,
        binary_observed: bpct.value,
        binary_kappa: stats::cohen_kappa(&cb, KappaWeights::Unweighted, Scores::Position)
            .ok()
            .map(|e| e.value),
    })
}

/// The R1×R2 matrix of two sheets over the packets both labelled.
pub fn matrix_of(r1: &[SheetRow], r2: &[SheetRow]) -> [[u64; 3]; 3] {
    let idx = |l: &str| LABELS.iter().position(|x| *x == l).unwrap_or(2);
    let second: BTreeMap<&str, &str> = r2
        .iter()
        .map(|r| (r.packet.as_str(), r.label.as_str()))
        .collect();
    let mut m = [[0u64; 3]; 3];
    for r in r1 {
        if let Some(l2) = second.get(r.packet.as_str()) {
            m[idx(&r.label)][idx(l2)] += 1;
        }
    }
    m
}

/// Read an R1×R2 count matrix: a CSV of three rows of three counts (rows R1 TP, Partial, FP;
/// columns R2 in the same order), with an optional header row and an optional label column.
pub fn read_counts(path: &Path) -> Result<[[u64; 3]; 3], ConfirmError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
    let mut m = [[0u64; 3]; 3];
    let mut row = 0;
    for (i, l) in text.lines().enumerate() {
        let cells: Vec<&str> = l.split(',').map(str::trim).collect();
        if cells.iter().all(|c| c.is_empty()) {
            continue;
        }
        let nums: Vec<&str> = cells
            .iter()
            .copied()
            .filter(|c| label_of(c).is_none() && !c.contains('\\') && !c.is_empty())
            .collect();
        if nums.is_empty() {
            continue; // the header row
        }
        if row == 3 || nums.len() != 3 {
            return Err(ConfirmError::Input(format!(
                "{name} line {}: expected a row of three counts (R1 TP, Partial, FP × R2 TP, \
                 Partial, FP)",
                i + 1
            )));
        }
        for (j, c) in nums.iter().enumerate() {
            m[row][j] = c.parse().map_err(|_| {
                ConfirmError::Input(format!("{name} line {}: {c:?} is not a count", i + 1))
            })?;
        }
        row += 1;
    }
    if row != 3 {
        return Err(ConfirmError::Input(format!(
            "{name}: {row} count row(s), expected 3"
        )));
    }
    Ok(m)
}

fn f2(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.2}"))
        .unwrap_or_else(|| "undefined".into())
}

/// Table 3 as Markdown.
pub fn render_markdown(a: &Agreement, r1: &str, r2: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Table 3. Inter-rater reliability on the candidates subset\n"
    );
    let _ = writeln!(s, "(a) Inter-rater agreement\n");
    let _ = writeln!(s, "| Metric | Value |\n|---|---|");
    let _ = writeln!(s, "| Observed agreement | {:.2} |", a.observed);
    let _ = writeln!(s, "| Cohen's κ | {} |", f2(a.cohen_kappa));
    let _ = writeln!(s, "| Gwet's AC1 | {} |", f2(a.gwet_ac1));
    let _ = writeln!(s, "\n(b) Category confusion matrix (n = {})\n", a.n);
    let _ = writeln!(s, "| {r1} \\ {r2} | TP | Partial | FP |\n|---|---|---|---|");
    for (i, l) in LABELS.iter().enumerate() {
        let _ = writeln!(
            s,
            "| {l} | {} | {} | {} |",
            a.matrix[i][0], a.matrix[i][1], a.matrix[i][2]
        );
    }
    let _ = writeln!(
        s,
        "\nBinary agreement (TP or Partial vs FP): {} of {} ({:.2}%; κ = {})",
        a.binary_agreed,
        a.n,
        a.binary_observed * 100.0,
        f2(a.binary_kappa)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table 3(b) of the paper: R1 rows TP (6, 1, 3), Partial (0, 6, 1), FP (1, 1, 41).
    /// By hand: p_o = 53/60 = 0.883; marginals R1 (10, 7, 43), R2 (7, 8, 45), so
    /// p_e = (70 + 56 + 1935)/3600 = 0.5725 and κ = (0.8833 − 0.5725)/0.4275 = 0.727.
    /// AC1: π = (17, 15, 88)/120, p_e = ½ Σ π(1−π) = 0.2133, AC1 = 0.6701/0.7867 = 0.852.
    /// Binary: agreed 13 + 41 = 54 of 60 (90%); p_e = (17·15 + 43·45)/3600 = 0.6083,
    /// κ = 0.2917/0.3917 = 0.745.
    #[test]
    fn table_3_of_the_paper() {
        let a = agreement([[6, 1, 3], [0, 6, 1], [1, 1, 41]]).unwrap();
        assert_eq!(a.n, 60);
        assert_eq!(format!("{:.2}", a.observed), "0.88");
        assert_eq!(f2(a.cohen_kappa), "0.73");
        assert_eq!(f2(a.gwet_ac1), "0.85");
        assert_eq!(a.binary_agreed, 54);
        assert_eq!(format!("{:.2}", a.binary_observed), "0.90");
        assert_eq!(f2(a.binary_kappa), "0.74");
        assert!((a.cohen_kappa.unwrap() - 0.7271).abs() < 1e-3);
        assert!((a.gwet_ac1.unwrap() - 0.8517).abs() < 1e-3);
    }

    #[test]
    fn packet_ids_do_not_reveal_the_run() {
        let id = packet_id("claude-4-sonnet__psf__requests_74ea");
        assert!(!id.contains("claude") && id.len() == 11, "{id}");
        assert_eq!(id, packet_id("claude-4-sonnet__psf__requests_74ea"));
        assert_eq!(
            blind_finding("sarif:CodeQL:py/sql-injection"),
            "py/sql-injection"
        );
    }

    #[test]
    fn a_counts_file_with_header_and_labels_reads_as_the_matrix() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.csv");
        std::fs::write(
            &p,
            "R1\\R2,TP,Partial,FP\nTP,6,1,3\nPartial,0,6,1\nFP,1,1,41\n",
        )
        .unwrap();
        assert_eq!(read_counts(&p).unwrap(), [[6, 1, 3], [0, 6, 1], [1, 1, 41]]);
        std::fs::write(&p, "6,1,3\n0,6\n").unwrap();
        let e = read_counts(&p).unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
    }
}
