//! Finding a result's case folder again, wherever the results are opened from.
//!
//! `results.json` names each case folder as `sage localize` was given it (relative to the
//! folder it ran in, e.g. `corpora/ag2-fig1a-aes-ecb`). A later `sage view` or `sage annotate
//! export` may run anywhere: the folder is looked for (1) as written, from the current folder;
//! (0) from the folder the results say the run was made in (`case_root`);
//! (2) beside the results file and beside each folder above it (a results folder made inside
//! the project finds `corpora/` above it); (3) after each `--relocate OLD=NEW` that applies,
//! first. Only a folder holding a case manifest counts.

use std::path::{Component, Path, PathBuf};

/// Why a case folder was not found, or a `--relocate` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LocateError(pub String);

/// Where to look for case folders named by a result set.
#[derive(Debug, Clone, Default)]
pub struct CaseLocator {
    /// The folder of the results file (absolute when it could be made so).
    results_dir: Option<PathBuf>,
    /// The folder the run was made in (the set's `case_root`, absolute).
    case_root: Option<String>,
    /// `OLD=NEW` prefix rewrites, tried before the plain lookups.
    relocate: Vec<(PathBuf, PathBuf)>,
}

impl CaseLocator {
    /// A locator for the results at `results` (`results.json` or the folder holding it).
    pub fn for_results(results: &Path) -> CaseLocator {
        let dir = if results.is_dir() {
            results.to_path_buf()
        } else {
            results.parent().map(Path::to_path_buf).unwrap_or_default()
        };
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        CaseLocator {
            results_dir: Some(dir),
            case_root: None,
            relocate: Vec::new(),
        }
    }

    /// A locator for the result set `set` read from `results`: its recorded `case_root` is
    /// tried first.
    pub fn for_set(results: &Path, set: &crate::results::ResultSet) -> CaseLocator {
        CaseLocator {
            case_root: set.case_root.clone(),
            ..CaseLocator::for_results(results)
        }
    }

    /// Add `OLD=NEW` rewrites (the `--relocate` flag); an entry without `=` is refused.
    pub fn with_relocations(mut self, specs: &[String]) -> Result<CaseLocator, LocateError> {
        for s in specs {
            let Some((old, new)) = s.split_once('=') else {
                return Err(LocateError(format!("--relocate {s:?}: expected OLD=NEW")));
            };
            if old.is_empty() || new.is_empty() {
                return Err(LocateError(format!(
                    "--relocate {s:?}: OLD and NEW must both be given"
                )));
            }
            self.relocate.push((PathBuf::from(old), PathBuf::from(new)));
        }
        Ok(self)
    }

    /// The places `case_dir` may be, in the order they are tried.
    pub fn candidates(&self, case_dir: &str) -> Vec<PathBuf> {
        let d = Path::new(case_dir);
        let mut out = Vec::new();
        for (old, new) in &self.relocate {
            if let Ok(rest) = d.strip_prefix(old) {
                out.push(new.join(rest));
            }
        }
        if let Some(root) = &self.case_root {
            if d.is_relative() {
                out.push(Path::new(root).join(d));
            }
        }
        out.push(d.to_path_buf());
        if d.is_relative() && !d.components().any(|c| c == Component::ParentDir) {
            if let Some(dir) = &self.results_dir {
                out.extend(dir.ancestors().map(|a| a.join(d)));
            }
        }
        out
    }

    /// The case folder, or a message saying where it was looked for and what to do.
    pub fn locate(&self, case_dir: &str) -> Result<PathBuf, LocateError> {
        let tried = self.candidates(case_dir);
        if let Some(found) = tried.iter().find(|p| is_case(p)) {
            return Ok(found.clone());
        }
        let first = Path::new(case_dir)
            .components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .unwrap_or_default();
        Err(LocateError(format!(
            "case folder {case_dir} not found (looked from the current folder and beside the \
             results); give --relocate {first}=WHERE_IT_IS_NOW"
        )))
    }
}

/// A folder holding a case (or run) manifest.
fn is_case(p: &Path) -> bool {
    p.join(sage_trace::case::MANIFEST_NAME).is_file()
        || p.join(sage_trace::case::RUN_MANIFEST_NAME).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(root: &Path, rel: &str) {
        let d = root.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("case.json"), "{}").unwrap();
    }

    #[test]
    fn a_results_folder_inside_the_project_finds_the_corpus_above_it() {
        let t = tempfile::tempdir().unwrap();
        case(t.path(), "corpora/a");
        let res = t.path().join("out/res");
        std::fs::create_dir_all(&res).unwrap();
        let l = CaseLocator::for_results(&res);
        let found = l.locate("corpora/a").unwrap();
        assert!(found.ends_with("corpora/a") && is_case(&found), "{found:?}");
    }

    #[test]
    fn relocate_rewrites_a_prefix_first_and_a_miss_says_how_to_fix_it() {
        let t = tempfile::tempdir().unwrap();
        case(t.path(), "moved/a");
        let res = tempfile::tempdir().unwrap();
        let l = CaseLocator::for_results(res.path());
        let e = l.locate("corpora/a").unwrap_err().0;
        assert!(e.contains("--relocate corpora=WHERE_IT_IS_NOW"), "{e}");
        let spec = format!("corpora={}", t.path().join("moved").display());
        let l = l.with_relocations(&[spec]).unwrap();
        assert_eq!(l.locate("corpora/a").unwrap(), t.path().join("moved/a"));
        assert!(CaseLocator::default()
            .with_relocations(&["nothing".into()])
            .is_err());
    }

    #[test]
    fn the_recorded_case_root_finds_a_corpus_anywhere() {
        let project = tempfile::tempdir().unwrap();
        case(project.path(), "corpora/a");
        let elsewhere = tempfile::tempdir().unwrap();
        let l = CaseLocator {
            case_root: Some(project.path().display().to_string()),
            ..CaseLocator::for_results(elsewhere.path())
        };
        let found = l.locate("corpora/a").unwrap();
        assert_eq!(found, project.path().join("corpora/a"));
    }

    #[test]
    fn parent_paths_are_not_searched_upwards() {
        let l = CaseLocator::for_results(Path::new("/tmp"));
        assert_eq!(l.candidates("../x"), vec![PathBuf::from("../x")]);
    }
}
