//! Runs: one recorded agent run before confirmation = task + baseline + trace + the submitted
//! result, with no failure anchor (that is what confirmation adds).
//!
//! A run folder holds `run.json` (`sage.run/1`): the case layout without `anchor`, plus an
//! optional `patch` (the submission as a unified diff against the baseline) and `excluded`
//! (why the harness recorded the run as invalid: timeout, incomplete generation). A case folder
//! is also a run: its anchor is ignored ([`Run::from_case`]). [`discover`] finds both.

use crate::case::{self, Case, CaseError, Metadata, TaskContext, TestSpec, TraceSpec};
use crate::safe::Limits;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Version tag of the run manifest.
pub const RUN_SCHEMA: &str = "sage.run/1";
/// The manifest's file name inside a run folder.
pub const RUN_MANIFEST_NAME: &str = "run.json";

/// The manifest of one run, as written in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RunManifest {
    /// Always [`RUN_SCHEMA`].
    pub schema: String,
    /// Stable id of the run (defaults to the folder name when empty).
    #[serde(default)]
    pub id: String,
    /// The trace file(s), relative to the run folder, with the framework when known.
    pub trace: TraceSpec,
    /// Artefact path → baseline file, relative to the run folder.
    pub baseline: BTreeMap<String, String>,
    /// Artefact path → the final file as submitted.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub final_state: BTreeMap<String, String>,
    /// The submission as a unified diff against the baseline (relative to the run folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// The task the agent was given.
    pub task: TaskContext,
    /// Where the run came from.
    #[serde(default)]
    pub metadata: Metadata,
    /// Why the harness recorded this run as invalid (it is counted as excluded, not screened).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded: Option<String>,
    /// A free-text note for the reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// How to run the task's tests (only with `sage screen --run-tests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestSpec>,
}

/// A run loaded from disk.
#[derive(Debug, Clone)]
pub struct Run {
    /// The run id (the manifest's, else the folder name).
    pub id: String,
    /// The run folder.
    pub dir: PathBuf,
    /// The manifest as read.
    pub manifest: RunManifest,
    /// Which manifest it came from (`run.json` or `case.json`).
    pub manifest_path: PathBuf,
    /// Artefact path → baseline content.
    pub baselines: BTreeMap<String, String>,
    /// Artefact path → final content as submitted.
    pub final_files: BTreeMap<String, String>,
    /// The submitted patch's text, when the manifest names one.
    pub patch: Option<String>,
}

impl Run {
    /// Load the run in `dir`: `run.json`, else `case.json` (a case with its anchor removed).
    pub fn load(dir: &Path, limits: &Limits) -> Result<Run, CaseError> {
        if !dir.join(RUN_MANIFEST_NAME).is_file() {
            return Case::load(dir, limits).map(Run::from_case);
        }
        let manifest = case::read_manifest(dir, RUN_MANIFEST_NAME, limits)?;
        Run::from_manifest(dir, manifest, limits)
    }

    /// A case seen as a run: everything but the anchor.
    pub fn from_case(c: Case) -> Run {
        let m = c.manifest;
        Run {
            id: c.id,
            manifest_path: c.dir.join(case::MANIFEST_NAME),
            dir: c.dir,
            manifest: RunManifest {
                schema: RUN_SCHEMA.into(),
                id: m.id,
                trace: m.trace,
                baseline: m.baseline,
                final_state: m.final_state,
                patch: None,
                task: m.task,
                metadata: m.metadata,
                excluded: None,
                note: m.note,
                tests: m.tests,
            },
            baselines: c.baselines,
            final_files: c.final_files,
            patch: None,
        }
    }

    /// Build a run from a manifest whose relative paths resolve against `dir`.
    pub fn from_manifest(
        dir: &Path,
        manifest: RunManifest,
        limits: &Limits,
    ) -> Result<Run, CaseError> {
        let mpath = dir.join(RUN_MANIFEST_NAME);
        let invalid = |msg: String| CaseError::Invalid {
            path: mpath.display().to_string(),
            msg,
        };
        case::check_shape(
            (&manifest.schema, RUN_SCHEMA),
            &manifest.trace,
            &manifest.baseline,
            " (a run needs the files the agent started from)",
            &invalid,
        )?;
        // A run manifest is untrusted like a case manifest: every file it names stays
        // inside the run folder (see `case::read_case_text`).
        let case::FolderFiles {
            baselines,
            final_files,
        } = case::read_folder_files(
            dir,
            &manifest.baseline,
            &manifest.final_state,
            &manifest.trace.files,
            limits,
            &invalid,
        )?;
        let patch = match &manifest.patch {
            None => None,
            Some(p) => {
                if !dir.join(p).exists() {
                    return Err(invalid(format!(
                        "patch: file {} is missing",
                        dir.join(p).display()
                    )));
                }
                Some(case::read_case_text(dir, p, limits)?)
            }
        };
        let id = case::folder_id(dir, &manifest.id, "run", &invalid)?;
        Ok(Run {
            id,
            dir: dir.to_path_buf(),
            manifest,
            manifest_path: mpath,
            baselines,
            final_files,
            patch,
        })
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

/// Every run folder (holding `run.json` or `case.json`) under `root`, sorted by path; links
/// are followed only while they stay inside `root` (see [`case::discover`]).
pub fn discover(root: &Path) -> Result<Vec<PathBuf>, CaseError> {
    case::discover_manifests(root, &[RUN_MANIFEST_NAME, case::MANIFEST_NAME], false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
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
        let r = Run::load(d.path(), &Limits::default()).unwrap();
        assert_eq!(r.baselines["app.py"], "x = 1\n");
        assert!(r.patch.as_deref().unwrap().starts_with("--- a/app.py"));
        assert_eq!(r.framework().as_deref(), Some("aider"));
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
        let e = Run::load(d.path(), &Limits::default())
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
        let e = Run::load(d.path(), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("patch: file") && e.contains("p.diff"), "{e}");
    }

    #[test]
    fn discover_finds_runs_and_cases() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "a/run.json", "{}");
        write(d.path(), "b/case.json", "{}");
        write(d.path(), "c/other.json", "{}");
        // a folder with both manifests is one run; case discovery sees only case.json
        write(d.path(), "b/run.json", "{}");
        let found = discover(d.path()).unwrap();
        assert_eq!(found, vec![d.path().join("a"), d.path().join("b")]);
        assert_eq!(case::discover(d.path()).unwrap(), vec![d.path().join("b")]);
        // a manifest given itself names its folder
        assert_eq!(
            discover(&d.path().join("a/run.json")).unwrap(),
            vec![d.path().join("a")]
        );
        assert!(case::discover(&d.path().join("a/run.json"))
            .unwrap()
            .is_empty());
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
            let e = Run::load(d.path(), &Limits::default())
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
            let e = Run::load(d.path(), &Limits::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains("outside"), "{e}");
        }
    }
}
