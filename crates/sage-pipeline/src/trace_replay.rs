//! `sage replay`: the final state of every artefact of one trace, reconstructed by
//! [`sage_history::reconstruct`] from the baselines the trace itself shows (or a folder of
//! baseline files), and, where the trace carries its own result, a verdict per file: the
//! replay `matches` that result, `differs` from it (with the first differing hunk), or is
//! `unverifiable` (with the reason). This is the fidelity check of an adapter on a user's own
//! corpus; `docs/adapters-fidelity.md` is its table over the real samples.
//!
//! The results a trace carries: its submission ([`sage_trace::CanonicalTrace::submissions`]: SWE-agent
//! `info.submission`, OpenHands `git_patch`, mini-SWE-agent's final diff), applied to the
//! baseline; the whole-file states its editor recorded before each write (Claude Code
//! `originalFile`, OpenHands SDK `old_content`, see [`sage_adapters::recorded`]), which the
//! replay must reach in turn. Results kept beside a trace are given with `--result FILE`: a
//! final diff (`git diff`, a SWE-bench `.pred` / prediction with `model_patch`), a series of
//! commits (`git show --patch` / `git log -p` output: Aider's commits, a session's commits),
//! or a directory snapshot (a JSON object path → sha256 of the file).
//!
//! Where the trace shows a file only in windows (SWE-agent `open`, numbered views), its
//! baseline is partial: the lines shown before the first write and the lines the results'
//! patches show of the old file, with placeholder lines between that no edit and no patch
//! touches. The final state is then a partial view, and a verdict on it speaks for the lines
//! the trace shows.

use sage_adapters::{recorded, support::split_unified_diff, AdapterError, SourceFile};
use sage_history::knowledge::{
    differs_on_unknown, is_partial, is_unknown, FileKnowledge, Known, UNKNOWN,
};
use sage_history::{match_key, normalize_path, ArtefactHistory};
use sage_trace::{RawStore, WriteOp};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The output format's name and version.
pub const SCHEMA: &str = "sage.replay/1";

pub mod schema;

/// How to replay a trace.
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// Force the adapter instead of detecting it.
    pub framework: Option<String>,
    /// A folder holding the files as they were before the run (paths relative to it).
    pub baseline_dir: Option<PathBuf>,
    /// Result files kept beside the trace (final diffs, commit series, directory snapshots).
    pub results: Vec<PathBuf>,
    /// Accept a trace with no agent-authored turn.
    pub allow_empty: bool,
    /// The run to replay from a file that holds several (1-based; see
    /// [`sage_adapters::NormalizeOptions::run`]).
    pub run: Option<usize>,
    /// Whether shell commands sage does not read statically are run again in a sandbox
    /// (`crate::execute`).
    pub execution: crate::execute::Execution,
    /// How the trace and result files are read (the user's rules, limits and workspace
    /// roots, else the embedded ones).
    pub rules: crate::Rules,
    /// Files known before any other source (a case's baselines: `sage case check`), trusted
    /// first in the one store of file knowledge.
    pub known: FileKnowledge,
    /// Final files given whole, to compare with (a case's `final_state`): a label, then path
    /// → content. A file they do not name is not covered by them.
    pub finals: Vec<(String, BTreeMap<String, String>)>,
    /// Placeholders of a redacted trace (`data/redactions.toml`): a result kept beside the
    /// trace equal to the replay up to them matches.
    pub redactions: crate::redactions::Redactions,
}

/// Why a trace could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Trace(#[from] AdapterError),
    #[error("{file}: {message}")]
    Input { file: String, message: String },
}

fn input(file: &Path, message: impl Into<String>) -> ReplayError {
    ReplayError::Input {
        file: file.display().to_string(),
        message: message.into(),
    }
}

/// The replay of one trace.
#[derive(Debug, Clone)]
pub struct TraceReplay {
    pub schema: &'static str,
    pub trace: String,
    pub framework: String,
    /// Turn writes of the trace (submissions excluded).
    pub writes: usize,
    /// The recorded results the replay was compared with.
    pub results: Vec<String>,
    pub artefacts: Vec<ArtefactReplay>,
    pub counts: Counts,
    /// Replay by execution: the commands run and refused, by kind, and the executed writes.
    pub execution: crate::execute::ExecutionReport,
}

/// Files per verdict.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub files: usize,
    pub matches: usize,
    pub differs: usize,
    pub unverifiable: usize,
}

/// One artefact: where its baseline comes from, its final state, and the verdict.
#[derive(Debug, Clone)]
pub struct ArtefactReplay {
    pub path: String,
    /// `baseline-dir FILE`, `shown whole by the trace (HOW)`, `partial: N lines known`,
    /// `none`.
    pub baseline: String,
    /// Turn writes to it, and those that could not be applied (with why).
    pub writes: usize,
    pub failed_writes: Vec<String>,
    pub final_state: FinalView,
    pub verdict: Verdict,
    pub hunk: Option<String>,
    pub reason: Option<String>,
    /// One per recorded result that covers the file.
    pub checks: Vec<Check>,
    /// The file's executed writes, each with its output check (`verified`, `diverged`,
    /// `not comparable`).
    pub executed: Vec<crate::execute::ExecutedWrite>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    Matches,
    Differs,
    Unverifiable,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Matches => "matches",
            Verdict::Differs => "differs",
            Verdict::Unverifiable => "unverifiable",
        }
    }
}

/// The replay against one recorded result.
#[derive(Debug, Clone)]
pub struct Check {
    pub against: String,
    pub verdict: Verdict,
    /// The first differing hunk (replay → recorded result).
    pub hunk: Option<String>,
    pub reason: Option<String>,
}

/// The replayed final state of an artefact.
#[derive(Debug, Clone, PartialEq)]
pub enum FinalView {
    /// The whole file is known.
    Full { content: String },
    /// Only some lines are known: runs of consecutive known lines (1-based numbers of the
    /// final file); the lines between were never shown by the trace.
    Partial {
        known_lines: usize,
        total_lines: usize,
        runs: Vec<KnownRun>,
    },
    /// The replay ends with the file deleted (or never created).
    Absent,
}

#[derive(Debug, Clone, PartialEq)]
pub struct KnownRun {
    pub first_line: usize,
    pub lines: Vec<String>,
}

fn view(content: Option<&str>) -> FinalView {
    let Some(c) = content else {
        return FinalView::Absent;
    };
    if !c.contains(UNKNOWN) {
        return FinalView::Full {
            content: c.to_string(),
        };
    }
    let mut runs: Vec<KnownRun> = Vec::new();
    let mut known = 0;
    let lines: Vec<&str> = c.lines().collect();
    let mut prev_known = false;
    for (i, l) in lines.iter().enumerate() {
        if is_unknown(l) {
            prev_known = false;
            continue;
        }
        known += 1;
        match runs.last_mut() {
            Some(r) if prev_known => r.lines.push(l.to_string()),
            _ => runs.push(KnownRun {
                first_line: i + 1,
                lines: vec![l.to_string()],
            }),
        }
        prev_known = true;
    }
    FinalView::Partial {
        known_lines: known,
        total_lines: lines.len(),
        runs,
    }
}

/// A recorded result kept beside the trace (`--result FILE`).
enum SideResult {
    /// A diff from the baseline to the final state of every file it names; a file it does
    /// not name is unchanged.
    FinalDiff { name: String, diff: String },
    /// Commits applied one after the other from the baseline; a file no commit names is not
    /// covered (it may be uncommitted).
    Commits {
        name: String,
        diff: String,
        commits: usize,
    },
    /// A Codex `apply_patch` patch (`*** Begin Patch`) from the baseline to the final state:
    /// like a final diff, read by the same parser as the Codex adapter's writes.
    ApplyPatch {
        name: String,
        edits: Vec<(String, WriteOp)>,
    },
    /// path → sha256 of the file's content.
    Snapshot {
        name: String,
        files: BTreeMap<String, String>,
    },
}

/// The run's patch in a result file that `sage replay --result` reads (a unified diff, a
/// SWE-bench `.pred` / `preds.json` prediction, a commit series): its unified-diff text.
/// `sage case init --patch` takes the same files. At most `limit` bytes are read.
pub fn patch_of_result(path: &Path, limit: u64) -> Result<String, ReplayError> {
    match read_result(path, limit)? {
        SideResult::FinalDiff { diff, .. } | SideResult::Commits { diff, .. } => Ok(diff),
        SideResult::ApplyPatch { .. } => Err(input(
            path,
            "a Codex apply_patch result, not a unified diff: give the run's `git diff`",
        )),
        SideResult::Snapshot { .. } => Err(input(
            path,
            "a directory snapshot (sha256 per file), not a patch",
        )),
    }
}

fn read_result(path: &Path, limit: u64) -> Result<SideResult, ReplayError> {
    let bytes = sage_trace::safe::read_limited(path, limit)
        .map_err(|e| input(path, format!("cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| input(path, "not UTF-8 text"))?;
    let name = path.display().to_string();
    let lead = text.trim_start();
    if lead.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(lead)
            .map_err(|e| input(path, format!("line {}: not JSON: {e}", e.line())))?;
        let patch_of = |v: &serde_json::Value| {
            v.get("model_patch")
                .and_then(|p| p.as_str())
                .map(str::to_string)
        };
        if let Some(diff) = patch_of(&v) {
            return Ok(SideResult::FinalDiff { name, diff });
        }
        let obj = v.as_object().cloned().unwrap_or_default();
        // preds.json: {instance: {model_patch}} with one instance.
        if obj.len() == 1 {
            if let Some(diff) = obj.values().next().and_then(patch_of) {
                return Ok(SideResult::FinalDiff { name, diff });
            }
        }
        let is_sha = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
        if !obj.is_empty() && obj.values().all(|x| x.as_str().is_some_and(is_sha)) {
            let files = obj
                .into_iter()
                .map(|(k, x)| (k, x.as_str().unwrap_or_default().to_ascii_lowercase()))
                .collect();
            return Ok(SideResult::Snapshot { name, files });
        }
        return Err(input(
            path,
            "a JSON result must hold `model_patch` (a SWE-bench prediction) or map every path \
             to a sha256 (a directory snapshot)",
        ));
    }
    if lead.starts_with("*** Begin Patch") {
        let parsed = sage_adapters::edits::parse_apply_patch(&text);
        if let Some(u) = parsed.uninterpreted.first() {
            return Err(input(
                path,
                format!("apply_patch: cannot interpret {}: {}", u.text, u.reason),
            ));
        }
        let edits = parsed.edits.into_iter().map(|e| (e.path, e.op)).collect();
        return Ok(SideResult::ApplyPatch { name, edits });
    }
    if split_unified_diff(&text).is_empty() {
        return Err(input(
            path,
            "not a result sage reads: no unified diff (--- / +++), no prediction, no directory \
             snapshot",
        ));
    }
    let commits = text
        .lines()
        .filter(|l| {
            l.strip_prefix("commit ")
                .or_else(|| l.strip_prefix("From "))
                .and_then(|r| r.split_whitespace().next())
                .is_some_and(|sha| sha.len() >= 7 && sha.bytes().all(|b| b.is_ascii_hexdigit()))
        })
        .count();
    Ok(if commits > 0 {
        SideResult::Commits {
            name,
            diff: text,
            commits,
        }
    } else {
        SideResult::FinalDiff { name, diff: text }
    })
}

/// Each file section of a unified diff as an edit, in order.
fn diff_edits(diff: &str) -> Vec<(String, WriteOp)> {
    split_unified_diff(diff)
        .into_iter()
        .map(|d| (d.path, WriteOp::UnifiedDiff { diff: d.text }))
        .collect()
}

/// The old-side lines (by number) of the first hunk series of a one-file diff section.
fn old_side(diff: &str) -> BTreeMap<usize, String> {
    let mut out = BTreeMap::new();
    let mut n = 0usize;
    let mut in_hunk = false;
    for l in diff.lines() {
        if let Some(h) = l.strip_prefix("@@ -") {
            n = h
                .split([',', ' '])
                .next()
                .and_then(|a| a.parse().ok())
                .unwrap_or(0);
            in_hunk = true;
            continue;
        }
        if !in_hunk || l.starts_with('\\') {
            continue;
        }
        if let Some(r) = l.strip_prefix('-').or_else(|| l.strip_prefix(' ')) {
            out.insert(n, r.to_string());
            n += 1;
        } else if l.is_empty() {
            // A blank context line whose leading space was stripped in transport.
            out.insert(n, String::new());
            n += 1;
        } else if !l.starts_with('+') {
            // The next file's header.
            in_hunk = false;
        }
    }
    out
}

/// The first hunk of the diff from `got` to `want`, placeholders shown as such.
fn first_hunk(got: &str, want: &str, want_name: &str) -> String {
    let d = sage_history::unified_diff(got, want, "replay", want_name);
    let mut out = String::new();
    let mut hunks = 0;
    for l in d.lines() {
        if l.starts_with("@@") {
            hunks += 1;
            if hunks > 1 {
                break;
            }
        }
        let shown = match l.find(UNKNOWN) {
            Some(i) => format!("{}<a line the trace never shows>", &l[..i]),
            None => l.to_string(),
        };
        out.push_str(&shown);
        out.push('\n');
    }
    if out.len() > 4000 {
        let cut = (0..=4000)
            .rev()
            .find(|i| out.is_char_boundary(*i))
            .unwrap_or(0);
        out.truncate(cut);
        out.push_str("\n[hunk cut at 4000 bytes]\n");
    }
    out
}

/// Compare the replay's end state with a recorded one.
/// [`compare`] with a result kept beside the trace, which may keep personal text that the
/// published trace redacted (`/home/alice/` where the trace has `/home/USER/`): equal up to
/// the redactions is `matches`, with the redactions named.
fn compare_redacted(
    got: Option<&str>,
    want: Option<&str>,
    against: &str,
    redactions: &crate::redactions::Redactions,
) -> Check {
    let c = compare(got, want, against);
    match (c.verdict, got, want) {
        (Verdict::Differs, Some(g), Some(w)) => match redactions.equal_up_to(g, w) {
            Some(names) => Check {
                against: against.to_string(),
                verdict: Verdict::Matches,
                hunk: None,
                reason: Some(format!(
                    "equal up to the trace's redaction ({}): the published trace replaced \
                     personal text the result keeps",
                    names.join(", ")
                )),
            },
            None => c,
        },
        _ => c,
    }
}

fn compare(got: Option<&str>, want: Option<&str>, against: &str) -> Check {
    let (verdict, hunk, reason) = match (got, want) {
        (a, b) if a == b => (Verdict::Matches, None, None),
        (Some(a), Some(b)) if a.replace("\r\n", "\n") == b.replace("\r\n", "\n") => (
            Verdict::Matches,
            None,
            Some("equal once CRLF line ends are read as LF".to_string()),
        ),
        (Some(a), Some(b)) if differs_on_unknown(a, b) => (
            Verdict::Unverifiable,
            None,
            Some(
                "the difference lies on lines the trace never shows (a partial baseline); give \
                 the files with --baseline-dir"
                    .into(),
            ),
        ),
        (Some(a), Some(b)) => (Verdict::Differs, Some(first_hunk(a, b, against)), None),
        (None, Some(_)) => (
            Verdict::Differs,
            None,
            Some("the replay ends without the file; the result has it".into()),
        ),
        (Some(_), None) => (
            Verdict::Differs,
            None,
            Some("the replay ends with the file; the result has none".into()),
        ),
        (None, None) => (Verdict::Matches, None, None),
    };
    Check {
        against: against.to_string(),
        verdict,
        hunk,
        reason,
    }
}

fn unverifiable(against: &str, reason: impl Into<String>) -> Check {
    Check {
        against: against.to_string(),
        verdict: Verdict::Unverifiable,
        hunk: None,
        reason: Some(reason.into()),
    }
}

fn sha(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// Every name the trace itself uses for a file, deduplicated under the path rule (with the
/// workspace roots).
struct Names(Vec<String>, sage_history::WorkspaceRoots);

impl Names {
    fn add(&mut self, path: &str) -> String {
        if let Some(k) = match_key(path, &self.0, &self.1) {
            return k;
        }
        let n = normalize_path(path);
        self.0.push(n.clone());
        n
    }
    /// The trace's name for a path a result gives: by the path rule, else the one name that
    /// ends with it (a diff taken inside the checkout, `git -C repo diff`, names
    /// `pkg/mod.py` where the trace writes `repo/pkg/mod.py`).
    fn find(&self, path: &str) -> Option<String> {
        if let Some(k) = match_key(path, &self.0, &self.1) {
            return Some(k);
        }
        sage_history::tail_match(path, &self.0)
    }
    /// [`Names::find`], else a new name.
    fn resolve(&mut self, path: &str) -> String {
        match self.find(path) {
            Some(k) => k,
            None => self.add(path),
        }
    }
}

/// Replay `files` (the trace, then any extra files of the same run) with `opts`.
pub fn replay(files: &[SourceFile], opts: &ReplayOptions) -> Result<TraceReplay, ReplayError> {
    let main = files
        .first()
        .ok_or_else(|| AdapterError::new("-", None, "no trace file given"))?;
    // The same refusals as `sage normalize` (a forced framework that does not fit, a file
    // that is not a trace, no agent turn); then what the trace shows of its files.
    let normalize = sage_adapters::NormalizeOptions {
        framework: opts.framework.clone(),
        mapping: None,
        allow_empty: opts.allow_empty,
        run: opts.run,
        framework_from: None,
        rules: opts.rules.adapters.clone(),
    };
    let (mut trace, seen) = sage_adapters::normalize_with_seen(files, &normalize)?;
    let side: Vec<SideResult> = opts
        .results
        .iter()
        .map(|p| read_result(p, opts.rules.limits().max_input_bytes))
        .collect::<Result<_, _>>()?;

    // The trace's names for its files.
    let mut names = Names(Vec::new(), opts.rules.workspace_roots.clone());
    for (_, w) in trace.writes() {
        names.add(&w.artefact);
    }
    for w in &trace.submissions {
        names.add(&w.artefact);
    }
    for a in seen.full.keys() {
        names.add(a);
    }
    for v in &seen.views {
        names.add(&v.artefact);
    }
    // Patch sections: (name, section text, is_new), per result, in order.
    let mut sections: Vec<(String, String, bool)> = Vec::new();
    for w in &trace.submissions {
        if let WriteOp::UnifiedDiff { diff } = &w.op {
            for d in split_unified_diff(diff) {
                sections.push((names.add(&w.artefact), d.text, d.is_new));
            }
        }
    }
    for r in &side {
        if let SideResult::ApplyPatch { edits, .. } = r {
            for (p, _) in edits {
                names.resolve(p);
            }
        }
        if let SideResult::FinalDiff { diff, .. } | SideResult::Commits { diff, .. } = r {
            for d in split_unified_diff(diff) {
                let n = names.resolve(&d.path);
                sections.push((n, d.text, d.is_new));
            }
        }
    }

    // Baselines: the one store of file knowledge, fed in order of trust: the folder, then
    // what the trace shows (whole files, then lines), then the old sides of the results.
    let mut known = FileKnowledge::new(&opts.rules.workspace_roots);
    for name in opts.known.names() {
        let n = names.find(name).unwrap_or_else(|| names.add(name));
        match opts.known.get(name) {
            Some(Known::Whole { content, origin }) => {
                known.add_whole(&n, content.clone(), origin.clone());
            }
            Some(Known::Lines { lines, origins }) => {
                known.add_lines(&n, lines.clone(), origins.join(", "));
            }
            None => {}
        }
    }
    for (_, files) in &opts.finals {
        for path in files.keys() {
            names.resolve(path);
        }
    }
    if let Some(dir) = &opts.baseline_dir {
        for n in &names.0 {
            let mut forms = sage_history::relative_forms(n, &opts.rules.workspace_roots);
            forms.push(n.clone());
            for f in forms {
                let Some(p) = sage_trace::safe::safe_join(dir, &f) else {
                    continue;
                };
                if !p.is_file() {
                    continue;
                }
                let bytes = sage_trace::safe::read_limited(&p, opts.rules.limits().max_input_bytes)
                    .map_err(|e| input(&p, format!("cannot read baseline: {e}")))?;
                let text = String::from_utf8(bytes)
                    .map_err(|_| input(&p, "baseline is not UTF-8 text"))?;
                known.add_whole(n, text, format!("baseline-dir {}", p.display()));
                break;
            }
        }
    }
    crate::knowledge::learn_from_trace(&mut known, &seen, &|a| {
        names.find(a).unwrap_or_else(|| normalize_path(a))
    });
    let mut first_section: BTreeSet<String> = BTreeSet::new();
    for (n, text, is_new) in &sections {
        // Only a file's first section speaks of its baseline (a later commit's old side is
        // an earlier commit's result).
        if !first_section.insert(n.clone()) || *is_new {
            continue;
        }
        known.add_lines(n, old_side(text), "the old side of a result's patch");
    }
    let baselines = known.baselines();
    let origin: BTreeMap<String, String> = known
        .names()
        .filter_map(|n| known.origin(n).map(|o| (n.clone(), o)))
        .collect();

    let (execution, mut executed) = crate::execute::run_commands(
        &mut trace,
        &baselines,
        &opts.execution,
        &opts.rules.workspace_roots,
    );
    let h = sage_history::reconstruct_known(&known, &trace, &[]);
    let mut checks: BTreeMap<String, Vec<Check>> = BTreeMap::new();
    let mut results: Vec<String> = Vec::new();
    let end = |h: &ArtefactHistory, a: &str| h.replayed_final(a).map(str::to_string);
    let written: BTreeSet<String> = h
        .snapshots
        .iter()
        .map(|s| s.artefact.clone())
        .chain(h.failures.iter().map(|f| f.artefact.clone()))
        .collect();
    let is_partial = |c: Option<&str>| c.is_some_and(is_partial);

    // 1. The submission: its final states, and every other file unchanged.
    if !trace.submissions.is_empty() {
        let mut vias: Vec<String> = trace.submissions.iter().map(|w| w.via.clone()).collect();
        vias.dedup();
        let against = format!("submission ({})", vias.join(", "));
        results.push(against.clone());
        let mut named = BTreeSet::new();
        for f in &h.final_states {
            named.insert(f.artefact.clone());
            let c = match &f.error {
                Some(e) if h.baseline(&f.artefact).is_some() => Check {
                    against: against.clone(),
                    verdict: Verdict::Differs,
                    hunk: None,
                    reason: Some(e.clone()),
                },
                Some(e) => unverifiable(&against, format!("{e}; the trace never shows the file")),
                None => compare(
                    end(&h, &f.artefact).as_deref(),
                    f.content.as_deref(),
                    &against,
                ),
            };
            checks.entry(f.artefact.clone()).or_default().push(c);
        }
        unchanged_elsewhere(&h, &written, &named, &against, &mut checks);
    }

    // 2. The editor's recorded pre-edit states, write by write.
    match RawStore::load(&trace, Path::new(""), opts.rules.limits().max_input_bytes) {
        Ok(store) => {
            let states = recorded::pre_edit_states(&trace, &store);
            if !states.is_empty() {
                let how = states[0].how;
                let against = format!("{how} chain ({} recorded states)", states.len());
                results.push(against.clone());
                let mut per: BTreeMap<String, (usize, Option<Check>)> = BTreeMap::new();
                for s in &states {
                    let name = h.resolve_name(&s.artefact);
                    let entry = per.entry(name.clone()).or_insert((0, None));
                    entry.0 += 1;
                    if entry.1.is_some() {
                        continue;
                    }
                    let Some(snap) = h.snapshot(s.before_write) else {
                        entry.1 = Some(unverifiable(
                            &against,
                            format!(
                                "write {} could not be applied, so its recorded {how} cannot be compared",
                                s.before_write
                            ),
                        ));
                        continue;
                    };
                    let _ = snap;
                    let got = h.state_before(s.before_write);
                    let label = format!(
                        "{how} before write {} ({})",
                        s.before_write,
                        s.raw.display()
                    );
                    let c = compare(got, Some(&s.content), &label);
                    if c.verdict != Verdict::Matches {
                        entry.1 = Some(Check {
                            against: against.clone(),
                            ..c
                        });
                    }
                }
                for (name, (n, bad)) in per {
                    let c = bad.unwrap_or_else(|| Check {
                        against: against.clone(),
                        verdict: Verdict::Matches,
                        hunk: None,
                        reason: Some(format!("the replay reaches all {n} recorded states")),
                    });
                    checks.entry(name).or_default().push(c);
                }
            }
        }
        Err(e) => results.push(format!(
            "raw records not readable ({e}); no recorded states compared"
        )),
    }

    // 3. Final files given whole (a case's final_state): each file they name.
    for (label, files) in &opts.finals {
        results.push(label.clone());
        for (path, want) in files {
            let n = names.find(path).unwrap_or_else(|| normalize_path(path));
            let n = h.resolve_name(&n);
            let c = compare_redacted(end(&h, &n).as_deref(), Some(want), label, &opts.redactions);
            checks.entry(n).or_default().push(c);
        }
    }

    // 4. Results kept beside the trace.
    for r in &side {
        match r {
            SideResult::FinalDiff { name, .. }
            | SideResult::Commits { name, .. }
            | SideResult::ApplyPatch { name, .. } => {
                let commits = matches!(r, SideResult::Commits { .. });
                let (against, edits): (String, Vec<(String, WriteOp)>) = match r {
                    SideResult::Commits { commits, diff, .. } => {
                        (format!("{name} ({commits} commits)"), diff_edits(diff))
                    }
                    SideResult::FinalDiff { diff, .. } => {
                        (format!("{name} (final diff)"), diff_edits(diff))
                    }
                    SideResult::ApplyPatch { edits, .. } => {
                        (format!("{name} (apply_patch)"), edits.clone())
                    }
                    SideResult::Snapshot { .. } => continue,
                };
                results.push(against.clone());
                // Every section applied in order, from the baseline.
                let mut state: BTreeMap<String, Result<Option<String>, String>> = BTreeMap::new();
                for (path, op) in edits {
                    let n = names.find(&path).unwrap_or_else(|| normalize_path(&path));
                    let n = h.resolve_name(&n);
                    let cur = state
                        .get(&n)
                        .cloned()
                        .unwrap_or_else(|| Ok(h.baseline(&n).map(str::to_string)));
                    let next = cur.and_then(|c| {
                        sage_history::apply(c.as_deref(), &op)
                            .map(|a| a.content)
                            .map_err(|e| format!("the section for {path} does not apply: {e}"))
                    });
                    state.insert(n, next);
                }
                let mut named = BTreeSet::new();
                for (n, s) in state {
                    named.insert(n.clone());
                    let c = match s {
                        Ok(want) => compare_redacted(
                            end(&h, &n).as_deref(),
                            want.as_deref(),
                            &against,
                            &opts.redactions,
                        ),
                        // A result kept beside the trace is applied to the baseline, not to
                        // the replay: a section that does not apply to the whole file the
                        // replay starts from says the result starts from another state of the
                        // file (other commits, another run), and nothing of the replay.
                        Err(e) if h.baseline(&n).is_some_and(|b| !b.contains(UNKNOWN)) => {
                            unverifiable(
                                &against,
                                format!(
                                    "{e}: the result does not start from the file the replay \
                                     starts from ({}), so it cannot speak for the replay",
                                    origin.get(&n).map(String::as_str).unwrap_or("its baseline")
                                ),
                            )
                        }
                        Err(e) => unverifiable(
                            &against,
                            format!("{e}; the trace does not show the whole file"),
                        ),
                    };
                    checks.entry(n).or_default().push(c);
                }
                if commits {
                    for a in written.iter().filter(|a| !named.contains(*a)) {
                        checks.entry(a.clone()).or_default().push(unverifiable(
                            &against,
                            "no commit names the file (it may never have been committed)",
                        ));
                    }
                } else {
                    unchanged_elsewhere(&h, &written, &named, &against, &mut checks);
                }
            }
            SideResult::Snapshot { name, files } => {
                let against = format!("{name} (directory snapshot)");
                results.push(against.clone());
                let keys: Vec<String> = files.keys().cloned().collect();
                for a in &written {
                    let got = end(&h, a);
                    let c = match match_key(a, &keys, &opts.rules.workspace_roots) {
                        Some(k) => match got {
                            Some(g) if is_partial(Some(&g)) => unverifiable(
                                &against,
                                "the snapshot records a hash of the whole file; the trace shows only part of it",
                            ),
                            Some(g) if sha(&g) == files[&k] => Check {
                                against: against.clone(),
                                verdict: Verdict::Matches,
                                hunk: None,
                                reason: None,
                            },
                            Some(g) => Check {
                                against: against.clone(),
                                verdict: Verdict::Differs,
                                hunk: None,
                                reason: Some(format!(
                                    "the replay's sha256 is {}, the snapshot's {}",
                                    sha(&g),
                                    files[&k]
                                )),
                            },
                            None => Check {
                                against: against.clone(),
                                verdict: Verdict::Differs,
                                hunk: None,
                                reason: Some("the replay ends without the file; the snapshot has it".into()),
                            },
                        },
                        None if got.is_none() => Check {
                            against: against.clone(),
                            verdict: Verdict::Matches,
                            hunk: None,
                            reason: Some("absent at the end, as in the snapshot".into()),
                        },
                        None => unverifiable(&against, "the snapshot does not list the file"),
                    };
                    checks.entry(a.clone()).or_default().push(c);
                }
            }
        }
    }

    // Every artefact the trace writes or a result names.
    let mut all: BTreeSet<String> = written.clone();
    all.extend(checks.keys().cloned());
    let mut artefacts = Vec::new();
    let mut counts = Counts::default();
    for a in all {
        let mut cs = checks.remove(&a).unwrap_or_default();
        // A write that could not be applied to a file the trace never shows whole (or at
        // all) makes every difference after it unverifiable: the edit's lines are unknown.
        let whole = h.baseline(&a).is_some_and(|b| !b.contains(UNKNOWN));
        if let Some(f) = h
            .failures
            .iter()
            .find(|f| f.artefact == a)
            .filter(|_| !whole)
        {
            for c in cs.iter_mut().filter(|c| c.verdict == Verdict::Differs) {
                c.verdict = Verdict::Unverifiable;
                c.reason = Some(format!(
                    "write {} ({}) could not be applied: {}; the trace does not show the whole \
                     file before it (give it with --baseline-dir)",
                    f.write, f.op, f.reason
                ));
                c.hunk = None;
            }
        }
        let ex = executed.remove(&a).unwrap_or_default();
        let (verdict, hunk, mut reason) = if cs.is_empty() {
            let why = if results.is_empty() {
                "the trace carries no result to compare with (give one with --result FILE)"
            } else {
                "no recorded result covers this file"
            };
            (Verdict::Unverifiable, None, Some(why.to_string()))
        } else if let Some(d) = cs.iter().find(|c| c.verdict == Verdict::Differs) {
            let no_write = !written.contains(&a);
            (
                Verdict::Differs,
                d.hunk.clone(),
                Some(format!(
                    "against {}{}{}",
                    d.against,
                    d.reason
                        .as_ref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default(),
                    if no_write {
                        "; the trace has no write to this file that sage interprets (an edit \
                         by a command sage does not run, e.g. a script, or one made outside \
                         the trace)"
                    } else {
                        ""
                    }
                )),
            )
        } else if cs.iter().any(|c| c.verdict == Verdict::Matches) {
            let partial = is_partial(end(&h, &a).as_deref());
            (
                Verdict::Matches,
                None,
                if partial {
                    Some("on the lines the trace shows (the baseline is partial)".to_string())
                } else {
                    cs.iter()
                        .find(|c| c.verdict == Verdict::Matches)
                        .and_then(|c| c.reason.clone())
                },
            )
        } else {
            let why: Vec<String> = cs
                .iter()
                .map(|c| format!("{}: {}", c.against, c.reason.clone().unwrap_or_default()))
                .collect();
            (Verdict::Unverifiable, None, Some(why.join("; ")))
        };
        // A file the trace shows only in part, that no write reaches, named by an executed
        // command whose output differs from the recorded one: the command ran on the lines
        // the trace shows and could not do what it did in the run.
        let (verdict, hunk) = match execution.diverged_naming.get(&a) {
            Some(d)
                if verdict == Verdict::Differs
                    && !written.contains(&a)
                    && h.baseline(&a).is_some_and(|b| b.contains(UNKNOWN)) =>
            {
                reason = Some(format!(
                    "{}; the command that edits it ran on the lines the trace shows and its \
                     output differs from the recorded one ({}): it needs lines the trace never \
                     shows (give the files with --baseline-dir)",
                    reason.unwrap_or_default(),
                    d[0]
                ));
                (Verdict::Unverifiable, None)
            }
            _ => (verdict, hunk),
        };
        let diverged: Vec<String> = ex
            .iter()
            .filter(|e| e.check == "diverged")
            .map(|e| format!("turn {}", e.turn))
            .collect();
        if !diverged.is_empty() {
            reason = Some(format!(
                "{}executed write(s) whose command's output differs from the recorded one: {}",
                reason.map(|r| format!("{r}; ")).unwrap_or_default(),
                diverged.join(", ")
            ));
        }
        counts.files += 1;
        match verdict {
            Verdict::Matches => counts.matches += 1,
            Verdict::Differs => counts.differs += 1,
            Verdict::Unverifiable => counts.unverifiable += 1,
        }
        let failed_writes = h
            .failures
            .iter()
            .filter(|f| f.artefact == a)
            .map(|f| {
                format!(
                    "write {} (turn {}, {}): {}",
                    f.write, f.turn, f.op, f.reason
                )
            })
            .collect();
        let writes = h.snapshots.iter().filter(|s| s.artefact == a).count()
            + h.failures.iter().filter(|f| f.artefact == a).count();
        artefacts.push(ArtefactReplay {
            baseline: origin.get(&a).cloned().unwrap_or_else(|| "none".into()),
            writes,
            failed_writes,
            final_state: view(h.replayed_final(&a)),
            verdict,
            hunk,
            reason,
            checks: cs,
            executed: ex,
            path: a,
        });
    }
    Ok(TraceReplay {
        schema: SCHEMA,
        trace: main.name.clone(),
        framework: trace.framework.clone(),
        writes: h.snapshots.len() + h.failures.len(),
        results,
        artefacts,
        counts,
        execution,
    })
}

/// A whole-run result (a submission, a final diff) leaves every file it does not name as it
/// was: a written file the replay changed is a difference, unless the replay created it
/// and removed it again (a scratch file).
fn unchanged_elsewhere(
    h: &ArtefactHistory,
    written: &BTreeSet<String>,
    named: &BTreeSet<String>,
    against: &str,
    checks: &mut BTreeMap<String, Vec<Check>>,
) {
    for a in written.iter().filter(|a| !named.contains(*a)) {
        let base = h.baseline(a);
        let got = h.replayed_final(a);
        if base.is_none() && got.is_none() {
            checks.entry(a.clone()).or_default().push(Check {
                against: against.to_string(),
                verdict: Verdict::Matches,
                hunk: None,
                reason: Some(
                    "created and removed again by the trace (a scratch file): absent at the end, \
                     as the result has it"
                        .into(),
                ),
            });
            continue;
        }
        if base.is_none() {
            checks.entry(a.clone()).or_default().push(unverifiable(
                against,
                "created by the trace and not in the result: a diff of the repository leaves \
                 untracked files out",
            ));
            continue;
        }
        let mut c = compare(got, base, against);
        if c.verdict == Verdict::Differs {
            c.reason = Some(format!(
                "the replay changes the file; {against} leaves it as it was{}",
                c.reason.map(|r| format!(" ({r})")).unwrap_or_default()
            ));
        }
        checks.entry(a.clone()).or_default().push(c);
    }
}

/// The replay as a table: one line per artefact, then the counts.
pub fn render_table(r: &TraceReplay) -> String {
    let mut s = format!(
        "{} ({}, {} writes)\nresults compared: {}\n",
        r.trace,
        r.framework,
        r.writes,
        if r.results.is_empty() {
            "none the trace carries".to_string()
        } else {
            r.results.join("; ")
        }
    );
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    t.set_header(vec![
        "file", "baseline", "writes", "final", "verdict", "why",
    ]);
    for a in &r.artefacts {
        let fin = match &a.final_state {
            FinalView::Full { content } => format!("{} lines", content.lines().count()),
            FinalView::Partial {
                known_lines,
                total_lines,
                ..
            } => format!("{known_lines} of {total_lines} lines known"),
            FinalView::Absent => "absent".into(),
        };
        let mut why = a.reason.clone().unwrap_or_default();
        if !a.failed_writes.is_empty() {
            why = format!("{} failed write(s); {why}", a.failed_writes.len());
        }
        t.add_row(vec![
            printable(&a.path),
            a.baseline.clone(),
            a.writes.to_string(),
            fin,
            a.verdict.as_str().to_string(),
            printable(&why),
        ]);
    }
    s.push_str(&t.to_string());
    s.push('\n');
    for a in r.artefacts.iter().filter(|a| a.hunk.is_some()) {
        s.push_str(&format!(
            "\nfirst differing hunk of {}:\n{}",
            printable(&a.path),
            a.hunk.as_deref().map(printable).unwrap_or_default()
        ));
    }
    if r.artefacts.iter().any(|a| a.hunk.is_some()) {
        s.push('\n');
    }
    s.push_str(&format!(
        "{} files: {} matches, {} differs, {} unverifiable\n",
        r.counts.files, r.counts.matches, r.counts.differs, r.counts.unverifiable
    ));
    let e = &r.execution;
    let by = |m: &BTreeMap<String, usize>| {
        if m.is_empty() {
            "none".to_string()
        } else {
            m.iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    s.push_str(&format!("execution: {}\n", e.state));
    if !e.state.starts_with("off") {
        s.push_str(&format!(
            "  commands executed: {}\n  refused: {}\n  not executed: {}\n  read statically: {}\n  executed writes: {}\n",
            by(&e.executed),
            by(&e.refused),
            by(&e.not_executed),
            e.read_statically,
            by(&e.writes)
        ));
    }
    s
}

/// `s` without control characters other than tabs and newlines: a trace cannot move the
/// cursor or recolour the terminal.
fn printable(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() || *c == '\t' || *c == '\n')
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sage_history::knowledge::sparse;

    #[test]
    fn old_side_numbers_context_and_removed_lines_from_the_hunk_start() {
        // @@ -3,3 @@: line 3 " a", line 4 "-b", (added "+c" has no old number), line 5 " d".
        let d = "--- a/f\n+++ b/f\n@@ -3,3 +3,3 @@\n a\n-b\n+c\n d\n";
        let o = old_side(d);
        assert_eq!(
            o.into_iter().collect::<Vec<_>>(),
            vec![(3, "a".into()), (4, "b".into()), (5, "d".into())]
        );
    }

    #[test]
    fn a_partial_baseline_keeps_known_lines_in_place_and_views_them_back() {
        let known: BTreeMap<usize, String> = [(2, "two".to_string()), (3, "three".to_string())]
            .into_iter()
            .collect();
        let b = sparse(&known);
        let lines: Vec<&str> = b.lines().collect();
        // 3 known-or-placeholder lines, then 50 placeholders.
        assert_eq!(lines.len(), 53);
        assert_eq!((lines[1], lines[2]), ("two", "three"));
        assert!(is_unknown(lines[0]) && is_unknown(lines[3]));
        match view(Some(&b)) {
            FinalView::Partial {
                known_lines,
                total_lines,
                runs,
            } => {
                assert_eq!((known_lines, total_lines), (2, 53));
                assert_eq!(runs.len(), 1);
                assert_eq!(runs[0].first_line, 2);
                assert_eq!(runs[0].lines, vec!["two", "three"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(view(None), FinalView::Absent);
    }

    #[test]
    fn a_difference_on_placeholders_only_is_not_a_difference() {
        let known: BTreeMap<usize, String> = [(1, "a".to_string())].into_iter().collect();
        let part = sparse(&known);
        // The same known line, the unknown ones replaced: unverifiable.
        let c = compare(Some(&part), Some("a\nb\n"), "r");
        assert_eq!(c.verdict, Verdict::Unverifiable);
        // A known line that differs: differs, with the hunk.
        let other = part.replacen("a\n", "z\n", 1);
        let c = compare(Some(&part), Some(&other), "r");
        assert_eq!(c.verdict, Verdict::Differs);
        assert!(c.hunk.unwrap().contains("-a\n+z\n"));
        // CRLF against LF is the same file.
        assert_eq!(
            compare(Some("a\r\n"), Some("a\n"), "r").verdict,
            Verdict::Matches
        );
    }

    #[test]
    fn result_files_are_told_apart_by_content() {
        const LIMIT: u64 = sage_trace::safe::DEFAULT_MAX_INPUT_BYTES;
        let d = tempfile::tempdir().unwrap();
        let w = |n: &str, t: &str| {
            let p = d.path().join(n);
            std::fs::write(&p, t).unwrap();
            p
        };
        let diff = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(matches!(
            read_result(&w("p.diff", diff), LIMIT).unwrap(),
            SideResult::FinalDiff { .. }
        ));
        let commits = format!("commit 0123456789abcdef\nAuthor: x\n\n    m\n\n{diff}");
        assert!(matches!(
            read_result(&w("c.patch", &commits), LIMIT).unwrap(),
            SideResult::Commits { commits: 1, .. }
        ));
        let pred = serde_json::json!({"instance_id": "i", "model_patch": diff}).to_string();
        assert!(matches!(
            read_result(&w("x.pred", &pred), LIMIT).unwrap(),
            SideResult::FinalDiff { .. }
        ));
        let snap = format!("{{\"f\": \"{}\"}}", "ab".repeat(32));
        assert!(matches!(
            read_result(&w("s.json", &snap), LIMIT).unwrap(),
            SideResult::Snapshot { .. }
        ));
        let ap = "*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n*** End Patch\n";
        assert!(matches!(
            read_result(&w("a.patch", ap), LIMIT).unwrap(),
            SideResult::ApplyPatch { .. }
        ));
        let e = read_result(&w("n.txt", "hello\n"), LIMIT)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("n.txt") && e.contains("not a result"), "{e}");
    }
}
