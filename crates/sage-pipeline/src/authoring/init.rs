//! `sage case init`: a case folder from a trace.
//!
//! The framework is detected from the trace's content; the artefacts are named as the trace
//! names them (the canonical names every later stage matches on). Baselines come from a git
//! revision, a folder, or the trace itself (a whole-file view or an editor's pre-edit content
//! before the first write, else the submitted patch's pre-image or the trace's views and the
//! patch's lines together when they make up the whole file); whenever the patch names the
//! file's blob id, the baseline must have that id. The final state is the patch applied to the
//! baseline (checked against the patch's post-image blob id), or, without a patch, the trace's
//! own replay (said so in the case's note: it cannot confirm the replay). The anchor is left to
//! fill unless given.

use super::blob;
use super::{closest, contiguous_text, patch_old_lines};
use sage_adapters::normalize_seen;
use sage_adapters::seen::Seen;
use sage_adapters::support::{split_unified_diff, FileDiff};
use sage_adapters::SourceFile;
use sage_history::{self as history, ArtefactHistory};
use sage_trace::case::{
    CaseManifest, DeficiencyCategory, FailureAnchor, Metadata, TaskContext, TraceSource, TraceSpec,
    CASE_SCHEMA, MANIFEST_NAME,
};
use sage_trace::{CanonicalTrace, RawStore, WriteOp};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Placeholder written for anchor fields left to fill; `case check` and every loader reject it.
pub const TODO: &str = "TODO";

/// Where baselines come from besides the trace.
#[derive(Debug, Clone)]
pub enum BaselineSource {
    /// `git -C REPO show REV:PATH`, ended after `timeout`.
    Git {
        repo: PathBuf,
        rev: String,
        timeout: std::time::Duration,
    },
    /// `DIR/PATH`.
    Dir(PathBuf),
}

impl BaselineSource {
    /// `REPO@REV` (the last `@` splits, so a path may hold one), each `git show` ended after
    /// `timeout`.
    pub fn parse_git(
        s: &str,
        timeout: std::time::Duration,
    ) -> Result<BaselineSource, crate::InputError> {
        let (repo, rev) = s
            .rsplit_once('@')
            .filter(|(r, v)| !r.is_empty() && !v.is_empty())
            .ok_or_else(|| {
                crate::InputError(format!(
                    "{s:?}: expected REPO@REV (a git folder and a revision)"
                ))
            })?;
        Ok(BaselineSource::Git {
            repo: repo.into(),
            rev: rev.into(),
            timeout,
        })
    }

    fn describe(&self) -> String {
        match self {
            BaselineSource::Git { repo, rev, .. } => format!("git {}@{rev}", repo.display()),
            BaselineSource::Dir(d) => format!("folder {}", d.display()),
        }
    }

    /// The file's content, `Ok(None)` when the source does not have it; a file of a folder
    /// is read within `limits`.
    fn read(
        &self,
        artefact: &str,
        limits: &sage_trace::safe::Limits,
    ) -> Result<Option<String>, String> {
        match self {
            BaselineSource::Dir(d) => {
                // the artefact's name comes from the trace: read only inside the folder
                let p = d.join(artefact);
                if !p.is_file() {
                    return Ok(None);
                }
                sage_trace::case::read_case_text(d, artefact, limits)
                    .map(Some)
                    .map_err(|e| e.to_string())
            }
            BaselineSource::Git { repo, rev, timeout } => {
                use sage_sandbox::child;
                let mut cmd = child::command("git");
                cmd.arg("-C")
                    .arg(repo)
                    .arg("show")
                    .arg(format!("{rev}:{artefact}"))
                    .stdin(std::process::Stdio::null());
                let what = || format!("git -C {} show {rev}:{artefact}", repo.display());
                // a blob past the input limit is refused as a file of a folder would be
                let capture = child::Capture::Apart {
                    stdout: limits.max_input_bytes,
                    stderr: 64 * 1024,
                };
                let out = child::run(cmd, *timeout, capture)
                    .map_err(|e| format!("cannot run git: {e}"))?;
                let status = match out.end {
                    child::End::Exited(s) => s,
                    child::End::TimedOut => {
                        return Err(format!(
                            "{}: no answer within {} s (killed; --git-timeout)",
                            what(),
                            timeout.as_secs_f64()
                        ))
                    }
                    child::End::OutputCapped => {
                        return Err(format!(
                            "{}: larger than the input limit of {} bytes",
                            what(),
                            limits.max_input_bytes
                        ))
                    }
                };
                if !status.success() {
                    let err = String::from_utf8_lossy(&out.stderr);
                    // A path the revision does not have is "not in the source".
                    if err.contains("does not exist") || err.contains("exists on disk, but not in")
                    {
                        return Ok(None);
                    }
                    return Err(format!("{}: {}", what(), err.trim()));
                }
                String::from_utf8(out.stdout).map(Some).map_err(|e| {
                    format!(
                        "{rev}:{artefact}: not UTF-8 (byte {})",
                        e.utf8_error().valid_up_to()
                    )
                })
            }
        }
    }
}

/// The anchor fields given on the command line.
#[derive(Debug, Clone, Default)]
pub struct AnchorFlags {
    pub artefact: Option<String>,
    pub fragment: Option<String>,
    pub category: Option<DeficiencyCategory>,
    pub cwe: Option<String>,
    pub description: Option<String>,
}

/// What `case init` is asked to do.
#[derive(Debug, Clone)]
pub struct InitOptions {
    pub trace: PathBuf,
    pub framework: Option<String>,
    pub baseline: Option<BaselineSource>,
    pub patch: Option<PathBuf>,
    /// A file holding the task statement (else the trace's first user message).
    pub task: Option<PathBuf>,
    pub task_id: Option<String>,
    pub cwe: Option<String>,
    pub cve: Option<String>,
    pub dataset: Option<String>,
    pub id: Option<String>,
    pub anchor: AnchorFlags,
    pub trace_source: TraceSource,
    pub out: PathBuf,
    pub force: bool,
    /// How the trace and baselines are read (the user's rules and limits, else the
    /// embedded ones).
    pub rules: crate::Rules,
}

/// One artefact of the new case.
#[derive(Debug, Clone, PartialEq)]
pub struct InitArtefact {
    pub name: String,
    pub writes: usize,
    /// The baseline and where it came from, when the file existed before the run.
    pub baseline: Option<(String, String)>,
    /// The final file and where it came from.
    pub final_state: Option<(String, String)>,
}

/// What `case init` did or found.
#[derive(Debug, Clone, Default)]
pub struct InitReport {
    /// What was done, one line each.
    pub lines: Vec<String>,
    /// Things the user should look at (the case was still written).
    pub warnings: Vec<String>,
    /// Errors, each naming the file and the record; nothing is written when there is one.
    pub errors: Vec<String>,
    pub manifest: Option<CaseManifest>,
    pub artefacts: Vec<InitArtefact>,
    pub written: bool,
}

fn safe_rel(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('/')
        && !name.contains('\\')
        && name
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != "..")
}

/// A file the trace shows as existing before its first write: viewed before writing, or
/// first written by an edit that needs an existing file.
fn pre_existing(trace: &CanonicalTrace, seen: &Seen, artefact: &str) -> bool {
    if seen.full.contains_key(artefact)
        || seen
            .views
            .iter()
            .any(|v| v.artefact == artefact && v.after_writes == 0)
    {
        return true;
    }
    trace
        .writes()
        .find(|(_, w)| w.artefact == artefact)
        .is_some_and(|(_, w)| !matches!(w.op, WriteOp::FullContent { .. }))
}

/// Build the case described by `o` (writes it unless there is an error).
pub fn init(o: &InitOptions) -> InitReport {
    let mut r = InitReport::default();
    let trace_name = match o.trace.file_name() {
        Some(n) => n.to_string_lossy().into_owned(),
        None => {
            r.errors
                .push(format!("{}: not a trace file", o.trace.display()));
            return r;
        }
    };
    if o.out.join(MANIFEST_NAME).exists() && !o.force {
        r.errors.push(format!(
            "{}: a case already exists there (pass --force to replace it)",
            o.out.join(MANIFEST_NAME).display()
        ));
        return r;
    }
    let src = SourceFile::new(trace_name.clone(), &o.trace);
    let how = sage_adapters::NormalizeOptions {
        rules: o.rules.adapters.clone(),
        ..sage_adapters::NormalizeOptions::framework(o.framework.as_deref())
    };
    let (mut trace, mut seen) = match normalize_seen(std::slice::from_ref(&src), &how) {
        Ok(x) => x,
        Err(e) => {
            r.errors.push(format!(
                "{}{}: {}",
                o.trace.display(),
                e.record.map(|x| format!(" ({x})")).unwrap_or_default(),
                e.message
            ));
            return r;
        }
    };
    if !trace.turns.iter().any(|t| t.is_applicable()) {
        r.errors.push(format!(
            "{}: the {} adapter finds no agent turn in it (`sage normalize` shows what it reads); \
             pass --framework NAME if the format was misdetected",
            o.trace.display(),
            trace.framework
        ));
        return r;
    }
    r.lines.push(format!(
        "trace {}: framework {}{}, {} turns, {} writes",
        o.trace.display(),
        trace.framework,
        seen.agent
            .as_deref()
            .map(|a| format!(" (agent {a})"))
            .unwrap_or_default(),
        trace.turns.len(),
        trace.writes().count()
    ));

    // The submitted patch, per file.
    // `--patch` takes what `sage replay --result` takes (a diff, a SWE-bench `.pred`, a
    // commit series); without it, the trace's own submission (SWE-agent's `info.submission`).
    let patch: Vec<FileDiff> = match &o.patch {
        None => {
            let own: Vec<FileDiff> = trace
                .submissions
                .iter()
                .filter_map(|w| match &w.op {
                    WriteOp::UnifiedDiff { diff } => Some(split_unified_diff(diff)),
                    _ => None,
                })
                .flatten()
                .collect();
            if !own.is_empty() {
                r.lines.push(format!(
                    "patch: the trace's own submission ({} file(s))",
                    own.len()
                ));
            }
            own
        }
        Some(p) => {
            match crate::trace_replay::patch_of_result(p, o.rules.limits().max_input_bytes) {
                Ok(t) => {
                    let d = split_unified_diff(&t);
                    if d.is_empty() {
                        r.errors.push(format!(
                            "{}: not a unified diff (no file header)",
                            p.display()
                        ));
                        return r;
                    }
                    d
                }
                Err(e) => {
                    r.errors.push(e.to_string());
                    return r;
                }
            }
        }
    };
    let patch_name = o
        .patch
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "the trace's submission".into());

    // The trace may name its files under the checkout folder (`/workspace/<repo>/...`) where
    // the patch names them from the repository root: the path rule learns that folder from
    // the patch, and the case uses the patch's names (as localize and replay read them).
    let written_names: Vec<String> = trace.writes().map(|(_, w)| w.artefact.clone()).collect();
    let patch_names: Vec<String> = patch.iter().map(|d| d.path.clone()).collect();
    let checkout = history::learn_checkout_prefix(&written_names, &patch_names);
    if let Some(x) = &checkout {
        let strip = |a: &str| history::without_prefix(a, Some(x));
        history::strip_checkout(&mut trace, x);
        seen.full = std::mem::take(&mut seen.full)
            .into_iter()
            .map(|(a, f)| (strip(&a), f))
            .collect();
        for v in &mut seen.views {
            v.artefact = strip(&v.artefact);
        }
        r.lines.push(format!(
            "the trace names its files under {x} (the checkout folder); read as the patch names \
             them from the repository root"
        ));
    }

    // Artefacts the trace writes, in order of first write.
    let mut written: Vec<(String, usize)> = Vec::new();
    for (_, w) in trace.writes() {
        match written.iter_mut().find(|(a, _)| *a == w.artefact) {
            Some(x) => x.1 += 1,
            None => written.push((w.artefact.clone(), 1)),
        }
    }
    let touched: BTreeSet<String> = written
        .iter()
        .map(|x| x.0.clone())
        .chain(seen.views.iter().map(|v| v.artefact.clone()))
        .collect();
    for d in &patch {
        if !touched.contains(&d.path) {
            let near = closest(&d.path, &touched, 3);
            r.warnings.push(format!(
                "{patch_name}: the patch changes {} but the trace never writes or views it{}",
                d.path,
                if near.is_empty() {
                    String::new()
                } else {
                    format!(" (the trace names: {})", near.join(", "))
                }
            ));
        }
    }

    // Which artefacts need a baseline: the files the patch modifies, and every file the
    // trace writes that existed before (so that its writes replay).
    let mut wanted: Vec<String> = Vec::new();
    for d in patch.iter().filter(|d| !d.is_new) {
        if !wanted.contains(&d.path) {
            wanted.push(d.path.clone());
        }
    }
    for (a, _) in &written {
        if !wanted.contains(a) && pre_existing(&trace, &seen, a) {
            wanted.push(a.clone());
        }
    }
    let mut anchor_created = false;
    if let Some(a) = &o.anchor.artefact {
        if !touched.contains(a) && !in_patch_names(&patch, a) {
            let near = closest(a, &touched, 3);
            r.errors.push(format!(
                "--artefact {a}: the trace never writes or views it{}; name the artefact as the \
                 trace does",
                if near.is_empty() {
                    String::new()
                } else {
                    format!(" (did you mean {}?)", near.join(" or "))
                }
            ));
            return r;
        }
        // A file the agent created has no baseline (it did not exist): the anchor may be in
        // it, and its fragment is then agent-introduced by construction.
        let created = !pre_existing(&trace, &seen, a)
            && trace.writes().any(|(_, w)| w.artefact == *a)
            && !patch.iter().any(|d| d.path == *a && !d.is_new);
        anchor_created = created;
        if created {
            r.lines.push(format!(
                "anchor artefact {a}: created by the agent (no baseline: it did not exist before \
                 the run)"
            ));
        } else if !wanted.contains(a) {
            wanted.push(a.clone());
        }
    }
    let in_patch: BTreeMap<&str, &FileDiff> = patch.iter().map(|d| (d.path.as_str(), d)).collect();

    // Baselines.
    let mut baselines: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut missing: Vec<String> = Vec::new();
    let mut contradicted: Vec<String> = Vec::new();
    for a in &wanted {
        if !safe_rel(a) {
            r.errors.push(format!(
                "{}: the trace names {a:?}, which is not a path relative to the repository root \
                 (the adapter did not recognise the workspace root); it cannot be a case file",
                o.trace.display()
            ));
            continue;
        }
        let diff = in_patch.get(a.as_str()).copied();
        let old_id = diff
            .and_then(|d| blob::index_ids(&d.text))
            .and_then(|x| x.0);
        match baseline_of(a, o, &seen, diff, old_id.as_deref(), &trace_name) {
            Ok(Some((content, how))) => {
                baselines.insert(a.clone(), (content, how));
            }
            Ok(None) => missing.push(a.clone()),
            // A source that contradicts the blob id is fatal when the user named it; the
            // trace's own view (a range the exporter did not mark) only rules itself out.
            Err(e) if o.baseline.is_some() => r.errors.push(e),
            Err(e) => {
                r.warnings.push(e);
                contradicted.push(a.clone());
            }
        }
    }
    for a in &missing {
        let shown = seen.lines_before_first_write(a);
        let what = if shown.is_empty() {
            "the trace never shows it before its first write".to_string()
        } else {
            format!(
                "the trace shows {} of its lines before its first write, not the whole file",
                shown.len()
            )
        };
        let msg = format!(
            "{}: no baseline for {a}: {what}; pass --baseline-from REPO@REV or --baseline-dir DIR",
            o.trace.display()
        );
        if o.anchor.artefact.as_deref() == Some(a) {
            r.errors.push(msg);
        } else {
            r.warnings.push(if shown.is_empty() {
                format!(
                    "{msg} (the case is written without it; its writes will not replay, and \
                     `sage case check` reports them)"
                )
            } else {
                format!(
                    "{msg} (the case is written without it; its writes replay on the lines the \
                     trace shows, and `sage case check` reports any that need another line)"
                )
            });
        }
    }
    if let Some(a) = o
        .anchor
        .artefact
        .as_ref()
        .filter(|a| contradicted.contains(a))
    {
        r.errors.push(format!(
            "--artefact {a}: no baseline that matches the patch"
        ));
    }
    missing.extend(contradicted);
    // the anchor's file, created by the agent: an empty baseline (the convention for a file
    // that did not exist; its fragment is then absent from the baseline by construction)
    if let Some(a) = o.anchor.artefact.as_ref().filter(|_| anchor_created) {
        baselines.insert(
            a.clone(),
            (
                String::new(),
                "empty: the agent created the file".to_string(),
            ),
        );
    }
    if baselines.is_empty() && r.errors.is_empty() {
        r.errors.push(format!(
            "{}: no baseline found for any file the run changed ({}); pass --baseline-from \
             REPO@REV or --baseline-dir DIR",
            o.trace.display(),
            wanted.join(", ")
        ));
    }

    // Final states.
    let plain: BTreeMap<String, String> = baselines
        .iter()
        .map(|(k, (c, _))| (k.clone(), c.clone()))
        .collect();
    // The same knowledge of the files as `localize` will have: these baselines, then what the
    // trace shows of the other files.
    let mut known =
        history::knowledge::FileKnowledge::of_whole(&plain, &o.rules.workspace_roots, |_| {
            "baseline".into()
        });
    crate::knowledge::learn_from_trace(&mut known, &seen, &|a| a.to_string());
    let hist = history::reconstruct_known(&known, &trace, &[]);
    let mut finals: BTreeMap<String, (String, String)> = BTreeMap::new();
    for (a, (base, _)) in &baselines {
        if let Some(d) = in_patch.get(a.as_str()) {
            if d.is_delete {
                continue;
            }
            match history::apply(
                Some(base),
                &WriteOp::UnifiedDiff {
                    diff: d.text.clone(),
                },
            ) {
                Ok(applied) => {
                    let content = applied.content.unwrap_or_default();
                    let new_id = blob::index_ids(&d.text).and_then(|x| x.1);
                    match new_id {
                        Some(id) if !blob::matches(&content, &id) => r.errors.push(format!(
                            "{patch_name} ({a}): the patch applied to the baseline gives blob {}, \
                             but its index line names {id}: the baseline or the patch is not the \
                             run's",
                            &blob::blob_id(&content)[..10]
                        )),
                        Some(id) => {
                            finals.insert(
                                a.clone(),
                                (
                                    content,
                                    format!(
                                        "baseline + {patch_name} (post-image blob {id} verified)"
                                    ),
                                ),
                            );
                        }
                        None => {
                            finals.insert(a.clone(), (content, format!("baseline + {patch_name}")));
                        }
                    }
                }
                Err(e) => r.errors.push(format!(
                    "{patch_name} ({a}): the patch does not apply to the baseline: {e}"
                )),
            }
        } else if patch.is_empty() {
            match replay_end(&hist, a) {
                Ok(Some(c)) => {
                    finals.insert(
                        a.clone(),
                        (
                            c,
                            "the trace's own replay (no submitted patch: it cannot confirm the \
                             replay)"
                                .into(),
                        ),
                    );
                }
                Ok(None) => {}
                Err(e) => r.warnings.push(format!(
                    "{}: no final state for {a}: {e}",
                    o.trace.display()
                )),
            }
        }
    }
    // Does the replay reproduce the patch's result? (`case check` reports the same.)
    for (a, (want, _)) in &finals {
        if let Some(got) = sage_history::final_state::replayed_end(&hist, a) {
            if let Some((line, g, w)) = sage_history::final_state::first_difference(&got, want) {
                r.warnings.push(format!(
                    "{a}: the trace's writes, replayed, differ from the final state at line {line} \
                     (replay {g:?}, final {w:?}); run `sage case check` on the case"
                ));
            }
        }
    }

    // Task.
    let description = match &o.task {
        Some(p) => match sage_trace::case::read_text(p, o.rules.limits().max_input_bytes) {
            Ok(t) => Some((t, format!("task statement from {}", p.display()))),
            Err(e) => {
                r.errors.push(e.to_string());
                None
            }
        },
        None => task_from_trace(&trace, &seen, &o.trace, o.rules.limits()).map(|t| {
            (
                t,
                "task statement: the trace's first user message".to_string(),
            )
        }),
    };
    let Some((description, task_how)) = description else {
        if r.errors.is_empty() {
            r.errors.push(format!(
                "{}: the trace holds no user message to take the task from; pass --task FILE",
                o.trace.display()
            ));
        }
        return r;
    };
    let stem = Path::new(&trace_name)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let task_id = o.task_id.clone().unwrap_or_else(|| stem.clone());

    // Anchor.
    if let Some(a) = &o.anchor.artefact {
        if !baselines.contains_key(a) && !missing.contains(a) {
            r.errors.push(format!(
                "--artefact {a}: not an artefact of the case (known: {})",
                baselines.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    if let (Some(a), Some(f)) = (&o.anchor.artefact, &o.anchor.fragment) {
        if let Some((fin, _)) = finals.get(a) {
            if !sage_history::fragment::find(a, f, fin).0 {
                r.warnings.push(format!(
                    "--fragment is not found in the final state of {a}; copy it verbatim from final/{a}"
                ));
            }
        }
    }
    let filled = o.anchor.artefact.is_some()
        && o.anchor.category.is_some()
        && o.anchor.description.is_some()
        && (o.anchor.cwe.is_some() || o.cwe.is_some());
    let anchor = FailureAnchor {
        artefact: o
            .anchor
            .artefact
            .clone()
            .unwrap_or_else(|| TODO.to_string()),
        fragment: o
            .anchor
            .fragment
            .clone()
            .or_else(|| (!filled).then(|| TODO.to_string())),
        category: o
            .anchor
            .category
            .unwrap_or(DeficiencyCategory::DefenceAbsent),
        cwe: o
            .anchor
            .cwe
            .clone()
            .or_else(|| o.cwe.clone())
            .unwrap_or_else(|| TODO.to_string()),
        description: o
            .anchor
            .description
            .clone()
            .unwrap_or_else(|| TODO.to_string()),
    };

    if !r.errors.is_empty() {
        return r;
    }

    // The manifest.
    let file_of = |dir: &str, a: &str| format!("{dir}/{a}");
    let mut note = format!(
        "Built by sage case init from {trace_name} ({} adapter). {task_how}.",
        trace.framework
    );
    for (a, (_, how)) in &baselines {
        note.push_str(&format!(" Baseline {a}: {how}."));
    }
    for (a, (_, how)) in &finals {
        note.push_str(&format!(" final_state {a}: {how}."));
    }
    let manifest = CaseManifest {
        schema: CASE_SCHEMA.into(),
        id: o.id.clone().unwrap_or_else(|| {
            o.out
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        }),
        trace: TraceSpec {
            files: vec![trace_name.clone()],
            framework: Some(trace.framework.clone()),
            run: None,
            checkout: checkout.clone(),
        },
        baseline: baselines
            .keys()
            .map(|a| (a.clone(), file_of("baseline", a)))
            .collect(),
        final_state: finals
            .keys()
            .map(|a| (a.clone(), file_of("final", a)))
            .collect(),
        patch: None,
        task: TaskContext {
            id: task_id.clone(),
            description,
            cwe: o.cwe.clone(),
            cve: o.cve.clone(),
        },
        anchor: Some(anchor),
        metadata: Metadata {
            framework: Some(
                seen.agent
                    .clone()
                    .unwrap_or_else(|| trace.framework.clone()),
            ),
            base_model: seen.model.clone(),
            task_id: Some(task_id),
            dataset: o.dataset.clone(),
            trace_source: Some(o.trace_source),
        },
        excluded: None,
        expected: None,
        note: Some(note),
        tests: None,
    };
    for (a, n) in &written {
        r.artefacts.push(InitArtefact {
            name: a.clone(),
            writes: *n,
            baseline: baselines.get(a).cloned(),
            final_state: finals.get(a).cloned(),
        });
    }
    for a in baselines.keys() {
        if !written.iter().any(|(w, _)| w == a) {
            r.artefacts.push(InitArtefact {
                name: a.clone(),
                writes: 0,
                baseline: baselines.get(a).cloned(),
                final_state: finals.get(a).cloned(),
            });
        }
    }

    // Write.
    // Artefact names come from the trace and the patch: a name like `../../.bashrc` must
    // not make sage write outside the new case folder.
    let write = |rel: &str, text: &[u8]| -> Result<(), String> {
        let p = sage_trace::safe::safe_join(&o.out, rel).ok_or_else(|| {
            format!("{rel:?}: the trace names a file outside the case folder; refusing to write it")
        })?;
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))
    };
    let trace_bytes = match std::fs::read(&o.trace) {
        Ok(b) => b,
        Err(e) => {
            r.errors
                .push(format!("{}: cannot read: {e}", o.trace.display()));
            return r;
        }
    };
    let mut res = write(&trace_name, &trace_bytes);
    for (a, (c, _)) in &baselines {
        res = res.and_then(|_| write(&file_of("baseline", a), c.as_bytes()));
    }
    for (a, (c, _)) in &finals {
        res = res.and_then(|_| write(&file_of("final", a), c.as_bytes()));
    }
    // An anchor category not given is written as the placeholder, so that the case cannot
    // be used before someone fills it in (the enum has no placeholder of its own).
    let mut value = serde_json::to_value(&manifest).unwrap_or_default();
    if o.anchor.category.is_none() {
        value["anchor"]["category"] = serde_json::Value::String(TODO.into());
    }
    let json = serde_json::to_string_pretty(&value).unwrap_or_default() + "\n";
    res = res.and_then(|_| write(MANIFEST_NAME, json.as_bytes()));
    if let Err(e) = res {
        r.errors.push(e);
        return r;
    }
    r.written = true;
    r.manifest = Some(manifest);
    r
}

/// The baseline of `a` and how it was found; `Ok(None)` when no source has it. A candidate
/// that contradicts the patch's pre-image blob id is never used.
fn baseline_of(
    a: &str,
    o: &InitOptions,
    seen: &Seen,
    diff: Option<&FileDiff>,
    old_id: Option<&str>,
    trace_name: &str,
) -> Result<Option<(String, String)>, String> {
    let verified = |c: &str| old_id.map(|id| blob::matches(c, id));
    let tag = |how: String, c: &str| -> String {
        match (verified(c), old_id) {
            (Some(true), Some(id)) => format!(
                "{how}; git blob {} matches the patch's index {id}",
                &blob::blob_id(c)[..10]
            ),
            _ => format!("{how}; not verified (no blob id names it)"),
        }
    };
    if let Some(src) = &o.baseline {
        return match src.read(a, o.rules.limits())? {
            Some(c) => match (verified(&c), old_id) {
                (Some(false), Some(id)) => Err(format!(
                    "{} ({a}): blob {} does not match the patch's index line ({id}): that is not \
                     the file the run started from",
                    src.describe(),
                    &blob::blob_id(&c)[..10]
                )),
                _ => Ok(Some((c.clone(), tag(src.describe(), &c)))),
            },
            None => Ok(None),
        };
    }
    let mut tried: Vec<String> = Vec::new();
    if let Some(f) = seen.full.get(a) {
        match verified(&f.content) {
            Some(false) => tried.push(format!(
                "the {} at {} (blob {})",
                f.how,
                f.raw.display(),
                &blob::blob_id(&f.content)[..10]
            )),
            _ => {
                return Ok(Some((
                    f.content.clone(),
                    tag(format!("{} at {}", f.how, f.raw.display()), &f.content),
                )))
            }
        }
    }
    // Only with a blob id to confirm it: the patch's pre-image, alone or with the views.
    if let (Some(d), Some(id)) = (diff, old_id) {
        let (old, no_nl) = patch_old_lines(&d.text);
        let mut candidates: Vec<(String, String)> = Vec::new();
        if let Some(c) = contiguous_text(&old, no_nl) {
            candidates.push((
                c,
                "the patch's pre-image (its hunks cover the whole file)".into(),
            ));
        }
        let mut lines: BTreeMap<usize, String> = seen
            .lines_before_first_write(a)
            .into_iter()
            .map(|(n, (t, _))| (n, t))
            .collect();
        lines.extend(old);
        for nn in [false, true] {
            if let Some(c) = contiguous_text(&lines, nn) {
                candidates.push((c, format!("the lines {trace_name}'s views show before the first write, with the patch's pre-image lines")));
            }
        }
        for (c, how) in candidates {
            if blob::matches(&c, id) {
                return Ok(Some((c.clone(), tag(how, &c))));
            }
        }
    }
    if !tried.is_empty() {
        return Err(format!(
            "{trace_name} ({a}): {} does not match the patch's index line ({}); the trace's view \
             is not the file the run started from (a ranged view?); pass --baseline-from REPO@REV \
             or --baseline-dir DIR",
            tried.join(", "),
            old_id.unwrap_or("")
        ));
    }
    Ok(None)
}

fn in_patch_names(patch: &[FileDiff], a: &str) -> bool {
    patch.iter().any(|d| d.path == a)
}

/// The replayed end state of `a`, or why there is none.
fn replay_end(h: &ArtefactHistory, a: &str) -> Result<Option<String>, String> {
    let failed: Vec<_> = h.failures.iter().filter(|f| f.artefact == a).collect();
    if let Some(f) = failed.first() {
        return Err(format!(
            "write {} at turn {} could not be applied ({})",
            f.write, f.turn, f.reason
        ));
    }
    Ok(sage_history::final_state::replayed_end(h, a))
}

/// The first user message of the trace: what the adapter reports, else the first record it
/// dropped as not agent-authored.
fn task_from_trace(
    trace: &CanonicalTrace,
    seen: &Seen,
    path: &Path,
    limits: &sage_trace::safe::Limits,
) -> Option<String> {
    if let Some(t) = &seen.task {
        return Some(t.text.clone());
    }
    let d = trace
        .dropped
        .iter()
        .find(|d| d.reason == sage_adapters::mapping::NOT_AGENT_AUTHORED)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let store = RawStore::load(trace, dir, limits.max_input_bytes).ok()?;
    store.resolve(&d.raw).ok()
}
