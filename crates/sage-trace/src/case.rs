//! Cases: one confirmed silent failure = task context + baseline + trace + failure anchor.
//!
//! A case is a folder holding `case.json` (the manifest, schema in `docs/case.schema.json`),
//! the trace file(s) and the baseline artefact(s). [`discover`] finds cases recursively.

use crate::safe::Limits;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Version tag of the case manifest.
pub const CASE_SCHEMA: &str = "sage.case/1";
/// The manifest's file name inside a case folder.
pub const MANIFEST_NAME: &str = "case.json";

/// The manifest of one case, as written in `case.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CaseManifest {
    /// Always [`CASE_SCHEMA`].
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
    /// The task the agent was given (what a judge may see).
    pub task: TaskContext,
    /// The confirmed silent failure the origin is localized for.
    pub anchor: FailureAnchor,
    /// Where the case came from.
    #[serde(default)]
    pub metadata: Metadata,
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

/// A case loaded from disk: the manifest plus the baseline contents.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case id (the manifest's, else the folder name).
    pub id: String,
    /// The case folder.
    pub dir: PathBuf,
    /// The manifest as read.
    pub manifest: CaseManifest,
    /// Artefact path → baseline content.
    pub baselines: BTreeMap<String, String>,
    /// Artefact path → final content, for final-only traces.
    pub final_files: BTreeMap<String, String>,
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
pub(crate) fn check_trace_file(
    dir: &Path,
    rel: &str,
    limits: &Limits,
) -> Result<(), crate::safe::InputError> {
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

/// The manifest `name` of the case or run folder `dir`, read inside the folder within
/// `limits` and parsed (what cases and runs share).
pub(crate) fn read_manifest<M: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
    limits: &Limits,
) -> Result<M, CaseError> {
    let text = read_case_text(dir, name, limits)?;
    crate::json::parse(&text).map_err(|e| CaseError::Manifest {
        path: dir.join(name).display().to_string(),
        msg: e.0,
    })
}

/// What a case and a run manifest must both hold: the schema `expected`, a trace file and a
/// baseline (`why_baseline` ends the message of a missing one).
pub(crate) fn check_shape(
    (schema, expected): (&str, &str),
    trace: &TraceSpec,
    baseline: &BTreeMap<String, String>,
    why_baseline: &str,
    invalid: &dyn Fn(String) -> CaseError,
) -> Result<(), CaseError> {
    if schema != expected {
        return Err(invalid(format!(
            "schema is {schema:?}, expected {expected:?}"
        )));
    }
    if trace.files.is_empty() {
        return Err(invalid("trace.files is empty".into()));
    }
    if baseline.is_empty() {
        return Err(invalid(format!("baseline names no artefact{why_baseline}")));
    }
    Ok(())
}

/// The files a case or run folder's manifest names, read inside the folder.
pub(crate) struct FolderFiles {
    pub(crate) baselines: BTreeMap<String, String>,
    pub(crate) final_files: BTreeMap<String, String>,
}

/// Read the baselines and final files a manifest names and check its trace files: each must
/// exist, stay inside `dir` and fit the input limit (what cases and runs share).
pub(crate) fn read_folder_files(
    dir: &Path,
    baseline: &BTreeMap<String, String>,
    final_state: &BTreeMap<String, String>,
    trace_files: &[String],
    limits: &Limits,
    invalid: &dyn Fn(String) -> CaseError,
) -> Result<FolderFiles, CaseError> {
    let file = |what: String, rel: &str| -> Result<String, CaseError> {
        let p = dir.join(rel);
        if !p.exists() {
            return Err(invalid(format!("{what}: file {} is missing", p.display())));
        }
        read_case_text(dir, rel, limits)
    };
    let mut baselines = BTreeMap::new();
    for (a, f) in baseline {
        baselines.insert(a.clone(), file(format!("baseline of {a:?}"), f)?);
    }
    let mut final_files = BTreeMap::new();
    for (a, f) in final_state {
        final_files.insert(a.clone(), file(format!("final_state of {a:?}"), f)?);
    }
    for f in trace_files {
        if !dir.join(f).exists() {
            return Err(invalid(format!(
                "trace file {} is missing",
                dir.join(f).display()
            )));
        }
        check_trace_file(dir, f, limits).map_err(|e| invalid(format!("trace file {f:?}: {e}")))?;
    }
    Ok(FolderFiles {
        baselines,
        final_files,
    })
}

/// The id of a case or run folder: the manifest's, else the folder name (else `kind`);
/// checked by [`crate::safe::check_id`].
pub(crate) fn folder_id(
    dir: &Path,
    id: &str,
    kind: &str,
    invalid: &dyn Fn(String) -> CaseError,
) -> Result<String, CaseError> {
    let id = if id.is_empty() {
        dir.file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| kind.into())
    } else {
        id.to_string()
    };
    crate::safe::check_id(&id).map_err(|m| invalid(format!("{kind} id {id:?}: {m}")))?;
    Ok(id)
}

impl Case {
    /// Load the case in `dir` (which holds `case.json`), its files read within `limits`.
    pub fn load(dir: &Path, limits: &Limits) -> Result<Case, CaseError> {
        let manifest = read_manifest(dir, MANIFEST_NAME, limits)?;
        Case::from_manifest(dir, manifest, limits)
    }

    /// Build a case from a manifest whose relative paths resolve against `dir`, its files
    /// read within `limits`.
    pub fn from_manifest(
        dir: &Path,
        manifest: CaseManifest,
        limits: &Limits,
    ) -> Result<Case, CaseError> {
        let mpath = dir.join(MANIFEST_NAME).display().to_string();
        let invalid = |msg: String| CaseError::Invalid {
            path: mpath.clone(),
            msg,
        };
        check_shape(
            (&manifest.schema, CASE_SCHEMA),
            &manifest.trace,
            &manifest.baseline,
            "",
            &invalid,
        )?;
        // `sage case init` leaves what it cannot know as TODO.
        let a = &manifest.anchor;
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
        if !manifest.baseline.contains_key(&manifest.anchor.artefact) {
            return Err(invalid(format!(
                "anchor names artefact {:?}, which is not in baseline (known: {})",
                manifest.anchor.artefact,
                manifest
                    .baseline
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if let Some(f) = &manifest.anchor.fragment {
            if f.trim().is_empty() {
                return Err(invalid(
                    "anchor.fragment is empty; omit it for no identifiable code location".into(),
                ));
            }
        }
        let FolderFiles {
            baselines,
            final_files,
        } = read_folder_files(
            dir,
            &manifest.baseline,
            &manifest.final_state,
            &manifest.trace.files,
            limits,
            &invalid,
        )?;
        if let Some(t) = &manifest.tests {
            for f in &t.files {
                crate::safe::resolve_case_path(dir, f, limits)
                    .map_err(|m| invalid(format!("tests file {f:?}: {m}")))?;
            }
        }
        let id = folder_id(dir, &manifest.id, "case", &invalid)?;
        Ok(Case {
            id,
            dir: dir.to_path_buf(),
            manifest,
            baselines,
            final_files,
        })
    }

    /// The case's failure anchor.
    pub fn anchor(&self) -> &FailureAnchor {
        &self.manifest.anchor
    }

    /// The case's task context.
    pub fn task(&self) -> &TaskContext {
        &self.manifest.task
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

/// Every folder under `root` holding a manifest named one of `names`, sorted by path, each
/// once (see [`discover_with`]); `root` may be such a folder or a manifest itself. What
/// discovering cases and runs share.
pub(crate) fn discover_manifests(
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
}
