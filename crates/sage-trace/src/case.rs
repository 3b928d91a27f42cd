//! Cases: one recorded agent run = task context + baseline + trace, and once confirmed, the
//! failure anchor (paper: run → candidate → confirmation → confirmed case).
//!
//! A case is a folder holding its manifest, the trace file(s) and the baseline artefact(s).
//! A confirmed case's manifest is `case.json` (`sage.case/1`, schema in
//! `docs/case.schema.json`), with its anchor; a run's is `run.json` (`sage.run/1`,
//! `docs/funnel.md`), without one, and may name the submission as a `patch` or say why the
//! harness recorded it as `excluded`. Both load into one [`Case`]: [`Case::load`] reads a
//! confirmed case, [`Case::load_run`] anything that can be screened, and [`Case::anchor`]
//! names the manifest when a run is asked for the anchor it does not have yet. [`discover`]
//! finds confirmed cases recursively, [`discover_runs`] runs and cases.

use crate::safe::Limits;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Version tag of the case manifest.
pub const CASE_SCHEMA: &str = "sage.case/1";
/// The manifest's file name inside a case folder.
pub const MANIFEST_NAME: &str = "case.json";
/// Version tag of the run manifest.
pub const RUN_SCHEMA: &str = "sage.run/1";
/// The manifest's file name inside a run folder.
pub const RUN_MANIFEST_NAME: &str = "run.json";

/// The manifest of one case, as written in `case.json`, or of one run, as written in
/// `run.json` (the same fields but `anchor` and `expected`, plus `patch` and `excluded`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CaseManifest {
    /// [`CASE_SCHEMA`] for a confirmed case, [`RUN_SCHEMA`] for a run.
    pub schema: String,
    /// Stable id of the case (defaults to the folder name when empty).
    #[serde(default)]
    pub id: String,
    /// The trace file(s), relative to the case folder, with the framework when known.
    pub trace: TraceSpec,
    /// Artefact path (as the trace names it) → baseline file, relative to the case folder.
    pub baseline: BTreeMap<String, String>,
    /// Artefact path → the final file as submitted, when the trace does not carry it
    /// (traces that kept only the final file: `final-only`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub final_state: BTreeMap<String, String>,
    /// A run's submission as a unified diff against the baseline (relative to the folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// The task the agent was given (what a judge may see).
    pub task: TaskContext,
    /// The confirmed silent failure the origin is localized for: a case's, never a run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<FailureAnchor>,
    /// Where the case came from.
    #[serde(default)]
    pub metadata: Metadata,
    /// Why the harness recorded a run as invalid (it is counted as excluded, not screened).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded: Option<String>,
    /// What the case is expected to produce under a named judge (used by tests; sage
    /// reports a mismatch but never uses it to decide anything).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<serde_json::Value>,
    /// Free-text provenance of the case (e.g. "constructed for the bundled corpus").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The task's tests, run by the L1 screen when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestSpec>,
}

/// How to run a task's tests (L1 screening): `command` runs in a scratch directory holding
/// the final artefacts (at their artefact paths) and `files` (relative to the case folder).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TestSpec {
    /// Program and arguments; `{python}` stands for the interpreter (`--python`, else
    /// `python3`).
    pub command: Vec<String>,
    /// Files the tests need besides the artefacts, relative to the case folder.
    #[serde(default)]
    pub files: Vec<String>,
    /// Seconds before the tests are killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

/// The trace file(s) of a case.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TraceSpec {
    /// Files relative to the case folder; the first is the main trace.
    pub files: Vec<String>,
    /// Adapter name; detected from content when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework: Option<String>,
    /// The run to read when the main file holds several (1-based: the Nth record of an
    /// OpenHands `output.jsonl`, the Nth sample of an Inspect log); the first when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<usize>,
    /// The folder the trace names its files under where the case names them from the
    /// repository root (`requests/` for an OpenHands run in `/workspace/requests/`): removed
    /// from the start of every name the trace writes before the names are matched. `sage
    /// case init` learns it from the patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkout: Option<String>,
}

/// What the agent was asked to do. This is all a judge may see besides the trace prefix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct TaskContext {
    /// The task's id in its dataset (e.g. `CWE-327_codeql_1.py`).
    #[serde(default)]
    pub id: String,
    /// The task description given to the agent.
    pub description: String,
    /// The task's target CWE (`CWE-327`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwe: Option<String>,
    /// The CVE the task was cut from (`CVE-2023-28836`), when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cve: Option<String>,
}

/// The confirmed deficiency. Never holds an origin label.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FailureAnchor {
    /// The affected artefact (a key of the case's baseline map).
    pub artefact: String,
    /// The anchor-linked code fragment; absent when there is no identifiable code location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fragment: Option<String>,
    /// The deficiency category.
    pub category: DeficiencyCategory,
    /// The weakness (`CWE-79`).
    pub cwe: String,
    /// What is wrong, in the annotator's words.
    pub description: String,
}

/// The deficiency category of a failure anchor.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum DeficiencyCategory {
    /// A required defence is missing.
    DefenceAbsent,
    /// A defence is present but does not suffice.
    DefenceInsufficient,
    /// The change itself introduces the vulnerability.
    VulnerabilityIntroduced,
}

impl DeficiencyCategory {
    /// The category's name in manifests and results (`defence-absent`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            DeficiencyCategory::DefenceAbsent => "defence-absent",
            DeficiencyCategory::DefenceInsufficient => "defence-insufficient",
            DeficiencyCategory::VulnerabilityIntroduced => "vulnerability-introduced",
        }
    }
}

/// Where the case came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Metadata {
    /// The agent framework that produced the trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework: Option<String>,
    /// The base model the agent ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_model: Option<String>,
    /// The benchmark task's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The dataset the task comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// Whether the trace is a recorded run of a real agent or written by hand; results and
    /// summaries report the two apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_source: Option<TraceSource>,
}

/// Where a case's trace comes from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum TraceSource {
    /// A recorded run of a real agent (copied as the framework or benchmark exported it).
    Real,
    /// Written by hand in a framework's format (a test or demonstration case).
    Constructed,
}

impl TraceSource {
    /// The source's name in manifests and results (`real`, `constructed`).
    pub fn as_str(self) -> &'static str {
        match self {
            TraceSource::Real => "real",
            TraceSource::Constructed => "constructed",
        }
    }
}

/// A case or run loaded from disk: the manifest plus the contents of the files it names.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case id (the manifest's, else the folder name).
    pub id: String,
    /// The case folder.
    pub dir: PathBuf,
    /// The manifest as read.
    pub manifest: CaseManifest,
    /// Which manifest it came from (`case.json` or `run.json`).
    pub manifest_path: PathBuf,
    /// Artefact path → baseline content.
    pub baselines: BTreeMap<String, String>,
    /// Artefact path → final content (final-only traces, runs that kept the submitted files).
    pub final_files: BTreeMap<String, String>,
    /// A run's submitted patch's text, when its manifest names one.
    pub patch: Option<String>,
}

/// Why a case could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// A case file could not be read.
    #[error("{path}: cannot read: {msg}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        msg: String,
    },
    /// A case file is not UTF-8 text.
    #[error("{path}: not UTF-8 text (byte {offset})")]
    NotUtf8 {
        /// The file.
        path: String,
        /// The first byte that is not UTF-8.
        offset: usize,
    },
    /// The manifest could not be parsed.
    #[error("{path}: invalid case manifest: {msg}")]
    Manifest {
        /// The manifest.
        path: String,
        /// What is wrong with it.
        msg: String,
    },
    /// The case is inconsistent (a file outside the case, an anchor the baselines do not hold, ...).
    #[error("{path}: {msg}")]
    Invalid {
        /// The case folder or file.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// A confirmed case was needed and the manifest holds no failure anchor (a run's, or a
    /// `case.json` without `anchor`).
    #[error(
        "{path}: no failure anchor: a run, not a confirmed case (a case.json needs `anchor`, \
         docs/case.md; `sage confirm` turns runs into cases, docs/funnel.md)"
    )]
    NoAnchor {
        /// The manifest.
        path: String,
    },
}

/// Read a file as UTF-8 text, naming the file and the first bad byte on failure. Only
/// regular files of at most `limit` bytes (the input size limit) are read.
pub fn read_text(path: &Path, limit: u64) -> Result<String, CaseError> {
    let bytes = crate::safe::read_limited(path, limit).map_err(|e| CaseError::Io {
        path: path.display().to_string(),
        msg: e.to_string(),
    })?;
    utf8(path, bytes)
}

fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String, CaseError> {
    String::from_utf8(bytes).map_err(|e| CaseError::NotUtf8 {
        path: path.display().to_string(),
        offset: e.utf8_error().valid_up_to(),
    })
}

/// Read the file `rel` of the case folder `dir` as UTF-8 text: it must stay inside the
/// folder (after `..` and symbolic links), be a regular file and fit the size limit (see
/// [`crate::safe::read_case_file`]). A manifest is untrusted input: it could name
/// `/proc/self/environ` and have sage copy its own environment into every result.
pub fn read_case_text(dir: &Path, rel: &str, limits: &Limits) -> Result<String, CaseError> {
    let shown = dir.join(rel);
    let bytes = crate::safe::read_case_file(dir, rel, limits).map_err(|e| CaseError::Io {
        path: shown.display().to_string(),
        msg: e.to_string(),
    })?;
    utf8(&shown, bytes)
}

/// Adapters read a trace later, by path: check now that `rel` is a regular file of the case
/// folder `dir` within the size limit (see [`read_case_text`]).
fn check_trace_file(dir: &Path, rel: &str, limits: &Limits) -> Result<(), crate::safe::InputError> {
    use crate::safe::InputError;
    let real = crate::safe::resolve_case_path(dir, rel, limits)?;
    let meta = std::fs::metadata(&real).map_err(|e| InputError::Io(e.to_string()))?;
    if !meta.is_file() {
        return Err(InputError::NotRegular);
    }
    let limit = limits.max_input_bytes;
    if meta.len() > limit {
        return Err(InputError::TooLarge {
            what: format!("{} bytes, ", meta.len()),
            limit,
        });
    }
    Ok(())
}

/// The two manifests a folder may hold: a confirmed case's and a run's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Case,
    Run,
}

impl Kind {
    fn file(self) -> &'static str {
        match self {
            Kind::Case => MANIFEST_NAME,
            Kind::Run => RUN_MANIFEST_NAME,
        }
    }

    fn schema(self) -> &'static str {
        match self {
            Kind::Case => CASE_SCHEMA,
            Kind::Run => RUN_SCHEMA,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Kind::Case => "case",
            Kind::Run => "run",
        }
    }
}

/// What only a confirmed case's manifest must hold: a filled-in anchor on one of its
/// baselines, and none of a run's fields.
fn check_anchor(
    m: &CaseManifest,
    path: &str,
    invalid: &dyn Fn(String) -> CaseError,
) -> Result<(), CaseError> {
    let Some(a) = &m.anchor else {
        return Err(CaseError::NoAnchor { path: path.into() });
    };
    // `sage case init` leaves what it cannot know as TODO.
    for (field, v) in [
        ("artefact", Some(&a.artefact)),
        ("fragment", a.fragment.as_ref()),
        ("cwe", Some(&a.cwe)),
        ("description", Some(&a.description)),
    ] {
        if v.is_some_and(|v| v.trim() == "TODO") {
            return Err(invalid(format!(
                "anchor.{field} is still the placeholder TODO: fill in the failure anchor \
                 (docs/case.md)"
            )));
        }
    }
    if !m.baseline.contains_key(&a.artefact) {
        return Err(invalid(format!(
            "anchor names artefact {:?}, which is not in baseline (known: {})",
            a.artefact,
            m.baseline.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    if a.fragment.as_ref().is_some_and(|f| f.trim().is_empty()) {
        return Err(invalid(
            "anchor.fragment is empty; omit it for no identifiable code location".into(),
        ));
    }
    for (field, set) in [
        ("patch", m.patch.is_some()),
        ("excluded", m.excluded.is_some()),
    ] {
        if set {
            return Err(invalid(format!(
                "{field}: a confirmed case has none (only a run's {RUN_MANIFEST_NAME} does)"
            )));
        }
    }
    Ok(())
}

impl Case {
    /// Load the confirmed case in `dir` (which holds `case.json`, with its anchor), its files
    /// read within `limits`.
    pub fn load(dir: &Path, limits: &Limits) -> Result<Case, CaseError> {
        Case::read(dir, Kind::Case, limits)
    }

    /// Load the run in `dir`: `run.json`, else `case.json` (a confirmed case is a run too,
    /// and keeps its anchor), its files read within `limits`.
    pub fn load_run(dir: &Path, limits: &Limits) -> Result<Case, CaseError> {
        let kind = if dir.join(RUN_MANIFEST_NAME).is_file() {
            Kind::Run
        } else {
            Kind::Case
        };
        Case::read(dir, kind, limits)
    }

    /// The one manifest reader: the manifest of `kind` in `dir`, read inside the folder
    /// within `limits` and parsed, then checked and its files read.
    fn read(dir: &Path, kind: Kind, limits: &Limits) -> Result<Case, CaseError> {
        let text = read_case_text(dir, kind.file(), limits)?;
        let manifest = crate::json::parse(&text).map_err(|e| CaseError::Manifest {
            path: dir.join(kind.file()).display().to_string(),
            msg: e.0,
        })?;
        Case::build(dir, kind, manifest, limits)
    }

    /// Build a case from a manifest whose relative paths resolve against `dir`, its files
    /// read within `limits`: a run's when its schema is [`RUN_SCHEMA`], else a confirmed
    /// case's.
    pub fn from_manifest(
        dir: &Path,
        manifest: CaseManifest,
        limits: &Limits,
    ) -> Result<Case, CaseError> {
        let kind = if manifest.schema == RUN_SCHEMA {
            Kind::Run
        } else {
            Kind::Case
        };
        Case::build(dir, kind, manifest, limits)
    }

    fn build(
        dir: &Path,
        kind: Kind,
        manifest: CaseManifest,
        limits: &Limits,
    ) -> Result<Case, CaseError> {
        let manifest_path = dir.join(kind.file());
        let shown = manifest_path.display().to_string();
        let invalid = |msg: String| CaseError::Invalid {
            path: shown.clone(),
            msg,
        };
        let (schema, expected) = (&manifest.schema, kind.schema());
        if schema != expected {
            return Err(invalid(format!(
                "schema is {schema:?}, expected {expected:?}"
            )));
        }
        if manifest.trace.files.is_empty() {
            return Err(invalid("trace.files is empty".into()));
        }
        if manifest.baseline.is_empty() {
            return Err(invalid(format!(
                "baseline names no artefact{}",
                match kind {
                    Kind::Case => "",
                    Kind::Run => " (a run needs the files the agent started from)",
                }
            )));
        }
        match kind {
            Kind::Case => check_anchor(&manifest, &shown, &invalid)?,
            Kind::Run => {
                for (field, set) in [
                    ("anchor", manifest.anchor.is_some()),
                    ("expected", manifest.expected.is_some()),
                ] {
                    if set {
                        return Err(invalid(format!(
                            "{field}: a run has none; confirmation writes it into a \
                             {MANIFEST_NAME} (docs/funnel.md)"
                        )));
                    }
                }
            }
        }
        // The manifest is untrusted: every file it names stays inside the folder (see
        // `read_case_text`).
        let file = |what: String, rel: &str| -> Result<String, CaseError> {
            let p = dir.join(rel);
            if !p.exists() {
                return Err(invalid(format!("{what}: file {} is missing", p.display())));
            }
            read_case_text(dir, rel, limits)
        };
        let mut baselines = BTreeMap::new();
        for (a, f) in &manifest.baseline {
            baselines.insert(a.clone(), file(format!("baseline of {a:?}"), f)?);
        }
        let mut final_files = BTreeMap::new();
        for (a, f) in &manifest.final_state {
            final_files.insert(a.clone(), file(format!("final_state of {a:?}"), f)?);
        }
        for f in &manifest.trace.files {
            if !dir.join(f).exists() {
                return Err(invalid(format!(
                    "trace file {} is missing",
                    dir.join(f).display()
                )));
            }
            check_trace_file(dir, f, limits)
                .map_err(|e| invalid(format!("trace file {f:?}: {e}")))?;
        }
        let patch = match &manifest.patch {
            Some(p) => Some(file("patch".into(), p)?),
            None => None,
        };
        if let Some(t) = &manifest.tests {
            for f in &t.files {
                crate::safe::resolve_case_path(dir, f, limits)
                    .map_err(|m| invalid(format!("tests file {f:?}: {m}")))?;
            }
        }
        let id = if manifest.id.is_empty() {
            dir.file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| kind.word().into())
        } else {
            manifest.id.clone()
        };
        crate::safe::check_id(&id)
            .map_err(|m| invalid(format!("{} id {id:?}: {m}", kind.word())))?;
        Ok(Case {
            id,
            dir: dir.to_path_buf(),
            manifest,
            manifest_path,
            baselines,
            final_files,
            patch,
        })
    }

    /// The case's failure anchor; a run has none yet, which is an error naming its manifest.
    pub fn anchor(&self) -> Result<&FailureAnchor, CaseError> {
        self.manifest
            .anchor
            .as_ref()
            .ok_or_else(|| CaseError::NoAnchor {
                path: self.manifest_path.display().to_string(),
            })
    }

    /// The case's task context.
    pub fn task(&self) -> &TaskContext {
        &self.manifest.task
    }

    /// The framework: the trace's adapter name, else the metadata's.
    pub fn framework(&self) -> Option<String> {
        self.manifest
            .trace
            .framework
            .clone()
            .or_else(|| self.manifest.metadata.framework.clone())
    }
}

/// Every case folder (a folder holding `case.json`) under `root`, sorted by path.
/// `root` itself may be a case folder. Symbolic links are followed only while they stay
/// inside `root` (see [`discover_with`]).
pub fn discover(root: &Path) -> Result<Vec<PathBuf>, CaseError> {
    discover_with(root, false)
}

/// [`discover`]; with `follow_out`, symbolic links leading out of `root` are followed too
/// (`--follow-links`). Without it a link to `/proc` or `$HOME` inside a corpus folder is
/// not walked: a corpus is untrusted input and must not make sage read other folders.
pub fn discover_with(root: &Path, follow_out: bool) -> Result<Vec<PathBuf>, CaseError> {
    discover_manifests(root, &[MANIFEST_NAME], follow_out)
}

/// Every run folder (holding `run.json` or `case.json`) under `root`, sorted by path; links
/// are followed only while they stay inside `root` (see [`discover_with`]).
pub fn discover_runs(root: &Path) -> Result<Vec<PathBuf>, CaseError> {
    discover_manifests(root, &[RUN_MANIFEST_NAME, MANIFEST_NAME], false)
}

/// Every folder under `root` holding a manifest named one of `names`, sorted by path, each
/// once (see [`discover_with`]); `root` may be such a folder or a manifest itself.
fn discover_manifests(
    root: &Path,
    names: &[&str],
    follow_out: bool,
) -> Result<Vec<PathBuf>, CaseError> {
    let is_manifest = |n: &std::ffi::OsStr| names.iter().any(|m| n == *m);
    if !root.exists() {
        return Err(CaseError::Io {
            path: root.display().to_string(),
            msg: "no such file or directory".into(),
        });
    }
    if root.is_file() {
        return Ok(if root.file_name().is_some_and(is_manifest) {
            vec![root.parent().unwrap_or(Path::new(".")).to_path_buf()]
        } else {
            Vec::new()
        });
    }
    let canon_root = root.canonicalize().map_err(|e| CaseError::Io {
        path: root.display().to_string(),
        msg: e.to_string(),
    })?;
    let mut out: Vec<PathBuf> = walkdir::WalkDir::new(root)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            follow_out
                || !e.path_is_symlink()
                || e.path()
                    .canonicalize()
                    .is_ok_and(|c| c.starts_with(&canon_root))
        })
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file() && is_manifest(e.file_name()))
        .filter_map(|e| e.path().parent().map(Path::to_path_buf))
        .collect();
    out.sort();
    // a folder with two manifests (a run's and a case's) is one folder
    out.dedup();
    // A case reached twice (through a link inside the corpus) is one case.
    let mut real = std::collections::BTreeSet::new();
    out.retain(|d| real.insert(d.canonicalize().unwrap_or_else(|_| d.clone())));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir.join(name).parent().unwrap()).unwrap();
        std::fs::write(dir.join(name), text).unwrap();
    }

    fn manifest(anchor_artefact: &str) -> String {
        format!(
            r#"{{"schema":"sage.case/1","id":"c1",
            "trace":{{"files":["trace.md"],"framework":"aider"}},
            "baseline":{{"app.py":"baseline/app.py"}},
            "task":{{"id":"t","description":"fix it","cwe":"CWE-89"}},
            "anchor":{{"artefact":"{anchor_artefact}","fragment":"x = 1","category":"defence-absent",
                      "cwe":"CWE-89","description":"sql"}}}}"#
        )
    }

    #[test]
    fn loads_and_validates() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "trace.md", "hi");
        write(d.path(), "baseline/app.py", "x = 1\n");
        write(d.path(), "case.json", &manifest("app.py"));
        let c = Case::load(d.path(), &Limits::default()).unwrap();
        assert_eq!(c.id, "c1");
        assert_eq!(c.baselines["app.py"], "x = 1\n");

        write(d.path(), "case.json", &manifest("other.py"));
        let e = Case::load(d.path(), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("other.py"), "{e}");
    }

    #[test]
    fn non_utf8_is_named() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "trace.md", "hi");
        std::fs::create_dir_all(d.path().join("baseline")).unwrap();
        std::fs::write(d.path().join("baseline/app.py"), b"ok\xff\xfe").unwrap();
        write(d.path(), "case.json", &manifest("app.py"));
        let e = Case::load(d.path(), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("not UTF-8") && e.contains("byte 2"), "{e}");
    }

    #[test]
    fn discovers_recursively() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "a/case.json", "{}");
        write(d.path(), "b/c/case.json", "{}");
        write(d.path(), "b/other.json", "{}");
        let found = discover(d.path()).unwrap();
        assert_eq!(found.len(), 2);
        assert!(discover(&d.path().join("nope")).is_err());
    }

    const RUN: &str = r#"{"schema":"sage.run/1","trace":{"files":["t.json"]},
        "baseline":{"app.py":"base/app.py"},"patch":"p.diff",
        "task":{"description":"fix it"},"metadata":{"framework":"aider"}}"#;

    #[test]
    fn a_run_loads_with_its_patch_and_no_anchor() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "run.json", RUN);
        write(d.path(), "t.json", "[]");
        write(d.path(), "base/app.py", "x = 1\n");
        write(d.path(), "p.diff", "--- a/app.py\n+++ b/app.py\n");
        let r = Case::load_run(d.path(), &Limits::default()).unwrap();
        assert_eq!(r.baselines["app.py"], "x = 1\n");
        assert!(r.patch.as_deref().unwrap().starts_with("--- a/app.py"));
        assert_eq!(r.framework().as_deref(), Some("aider"));
        // asked for the anchor it does not have yet, a run names its manifest
        let e = r.anchor().unwrap_err();
        assert!(matches!(e, CaseError::NoAnchor { .. }), "{e:?}");
        assert!(e.to_string().contains("run.json"), "{e}");
        // a run is not a confirmed case: `load` reads case.json only
        assert!(Case::load(d.path(), &Limits::default()).is_err());
    }

    #[test]
    fn a_case_is_a_run_with_its_anchor() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "trace.md", "hi");
        write(d.path(), "baseline/app.py", "x = 1\n");
        write(d.path(), "case.json", &manifest("app.py"));
        let r = Case::load_run(d.path(), &Limits::default()).unwrap();
        assert_eq!(r.manifest_path, d.path().join("case.json"));
        assert_eq!(r.anchor().unwrap().cwe, "CWE-89");
    }

    #[test]
    fn a_case_without_an_anchor_names_its_manifest() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "trace.md", "hi");
        write(d.path(), "baseline/app.py", "x = 1\n");
        let m: serde_json::Value = serde_json::from_str(&manifest("app.py")).unwrap();
        let mut m = m.as_object().unwrap().clone();
        m.remove("anchor");
        write(
            d.path(),
            "case.json",
            &serde_json::Value::Object(m).to_string(),
        );
        let e = Case::load(d.path(), &Limits::default()).unwrap_err();
        assert!(matches!(e, CaseError::NoAnchor { .. }), "{e:?}");
        assert!(
            e.to_string().contains("case.json: no failure anchor"),
            "{e}"
        );
    }

    #[test]
    fn each_manifest_holds_only_its_own_fields() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "trace.md", "hi");
        write(d.path(), "t.json", "[]");
        write(d.path(), "baseline/app.py", "x = 1\n");
        write(d.path(), "base/app.py", "x = 1\n");
        write(d.path(), "p.diff", "--- a/app.py\n+++ b/app.py\n");
        let case = manifest("app.py").replace(r#""id":"c1","#, r#""id":"c1","patch":"p.diff","#);
        write(d.path(), "case.json", &case);
        let e = Case::load(d.path(), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("case.json") && e.contains("patch: a confirmed case"),
            "{e}"
        );
        let anchor = r#""anchor":{"artefact":"app.py","category":"defence-absent","cwe":"CWE-1","description":"d"},"#;
        write(
            d.path(),
            "run.json",
            &RUN.replace(r#""patch""#, &format!("{anchor}\"patch\"")),
        );
        let e = Case::load_run(d.path(), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("run.json") && e.contains("anchor: a run has none"),
            "{e}"
        );
    }

    #[test]
    fn a_run_without_a_baseline_names_its_manifest() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "run.json",
            &RUN.replace(r#"{"app.py":"base/app.py"}"#, "{}"),
        );
        write(d.path(), "t.json", "[]");
        let e = Case::load_run(d.path(), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("run.json") && e.contains("baseline names no artefact"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_patch_file_is_named() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "run.json", RUN);
        write(d.path(), "t.json", "[]");
        write(d.path(), "base/app.py", "x = 1\n");
        let e = Case::load_run(d.path(), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("patch: file") && e.contains("p.diff"), "{e}");
    }

    #[test]
    fn discover_runs_finds_runs_and_cases() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "a/run.json", "{}");
        write(d.path(), "b/case.json", "{}");
        write(d.path(), "c/other.json", "{}");
        // a folder with both manifests is one run; case discovery sees only case.json
        write(d.path(), "b/run.json", "{}");
        let found = discover_runs(d.path()).unwrap();
        assert_eq!(found, vec![d.path().join("a"), d.path().join("b")]);
        assert_eq!(discover(d.path()).unwrap(), vec![d.path().join("b")]);
        // a manifest given itself names its folder
        assert_eq!(
            discover_runs(&d.path().join("a/run.json")).unwrap(),
            vec![d.path().join("a")]
        );
        assert!(discover(&d.path().join("a/run.json")).unwrap().is_empty());
    }

    #[test]
    fn attack_run_manifest_names_proc_self_environ() {
        // The run loader reads what a run.json names, like the case loader: confined too.
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "t.json", "[]");
        write(d.path(), "base/app.py", "x = 1\n");
        for (field, value) in [
            ("patch", "/proc/self/environ"),
            ("patch", "../../../../../../proc/self/environ"),
        ] {
            let text = RUN.replace("\"p.diff\"", &format!("{value:?}"));
            assert!(text.contains(field));
            write(d.path(), "run.json", &text);
            let e = Case::load_run(d.path(), &Limits::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains("absolute path") || e.contains("outside"), "{e}");
        }
        #[cfg(unix)]
        {
            write(d.path(), "p.diff", "--- a/app.py\n+++ b/app.py\n");
            std::os::unix::fs::symlink("/proc/self/environ", d.path().join("env.json")).unwrap();
            write(
                d.path(),
                "run.json",
                &RUN.replace("\"t.json\"", "\"env.json\""),
            );
            let e = Case::load_run(d.path(), &Limits::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains("outside"), "{e}");
        }
    }
}
