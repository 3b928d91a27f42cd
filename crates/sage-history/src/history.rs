//! Artefact history: the baseline and the snapshot after every write, derived from the trace
//! alone (no judge), then code provenance and the introducing write.
//!
//! [`reconstruct`] applies every write of a canonical trace to the baselines in trace order;
//! [`provenance`] compares the anchor fragment (see [`crate::fragment`]) with the baseline and
//! every snapshot of the anchor's artefact; [`checks`] re-derives the history-only automatic
//! checks. Edit semantics and the project's decisions are in `docs/design-history.md`.

use crate::fragment::Matcher;
use sage_trace::case::FailureAnchor;
use sage_trace::{normalize_ws, CanonicalTrace, RawRef, WriteOp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How much of the code's evolution the trace preserves.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum ReconstructionCondition {
    /// Exactly one write.
    SingleWrite,
    /// Several writes, each state recoverable.
    PerWrite,
    /// Only the final file is known (every write is a final-state write).
    FinalOnly,
    /// The trace writes nothing: the final state is the baseline.
    NoWrite,
}

impl ReconstructionCondition {
    pub fn as_str(self) -> &'static str {
        match self {
            ReconstructionCondition::SingleWrite => "single-write",
            ReconstructionCondition::PerWrite => "per-write",
            ReconstructionCondition::FinalOnly => "final-only",
            ReconstructionCondition::NoWrite => "no-write",
        }
    }
}

/// One write, applied: the artefact's content after it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Snapshot {
    /// 1-based position of the write among all writes of the trace.
    pub write: usize,
    /// The canonical turn that holds the write.
    pub turn: usize,
    pub artefact: String,
    /// The edit kind (`full-content`, `str-replace`, ...) and how the trace expressed it.
    pub op: String,
    pub via: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub final_state: bool,
    /// True when a search/replace did not match exactly and was applied by the
    /// whitespace-tolerant line match (as Aider does).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fuzzy: bool,
    /// True when the edit matched only once the file's CRLF line ends were read as LF.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub crlf_normalized: bool,
    /// The content after the write; `None` when the write deleted the artefact.
    pub content: Option<String>,
    pub raw: RawRef,
}

/// A write that could not be applied: reported, never skipped silently.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WriteFailure {
    pub write: usize,
    pub turn: usize,
    pub artefact: String,
    pub op: String,
    pub reason: String,
    pub raw: RawRef,
}

/// The final state of one artefact as a record other than the turns' writes gives it: the
/// trace's own submission (a submitted patch applied to the baseline, a final file state) or
/// the case's final file. It verifies the replay; it is never a turn's write.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FinalState {
    /// The history's name of the artefact.
    pub artefact: String,
    /// Where it comes from: `submission (git_patch)`, `case final file final/app.py`, ...
    pub source: String,
    /// The content it gives (`None`: the artefact is deleted), when it could be derived.
    pub content: Option<String>,
    /// Why no content could be derived (e.g. the submitted patch does not apply to the
    /// baseline); `content` is then meaningless.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub raw: RawRef,
}

impl FinalState {
    pub fn usable(&self) -> bool {
        self.error.is_none()
    }
}

/// A final file supplied by the case (`final_state` in `case.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct SuppliedFinal {
    pub artefact: String,
    /// The file, relative to the case folder (for messages).
    pub file: String,
    pub content: String,
}

/// The reconstructed history of every artefact of a trace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ArtefactHistory {
    /// Artefact path → baseline content (absent for a file the agent created).
    pub baselines: BTreeMap<String, String>,
    /// Every applied write in trace order.
    pub snapshots: Vec<Snapshot>,
    pub failures: Vec<WriteFailure>,
    pub condition: ReconstructionCondition,
    /// Final states recorded outside the turns (submissions, the case's final files), case
    /// final files first. See [`FinalState`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub final_states: Vec<FinalState>,
    /// Trace path → the history's name, for every path that was renamed by the path rule
    /// (`/workspace/repo/app.py` → `app.py`), so a reader sees how paths were matched.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub path_matches: BTreeMap<String, String>,
}

/// Code provenance of a failure anchor.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Provenance {
    Inherited,
    AgentIntroduced,
    NoCodeLocation,
}

impl Provenance {
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Inherited => "inherited",
            Provenance::AgentIntroduced => "agent-introduced",
            Provenance::NoCodeLocation => "no-code-location",
        }
    }
}

/// Where the anchor fragment is found: the baseline, after each write to its artefact, and
/// in the recorded final state when that differs from the replay (or nothing replays).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Presence {
    /// `None` for the baseline and the final state, else the write's position.
    pub write: Option<usize>,
    pub turn: Option<usize>,
    pub present: bool,
    /// True for the recorded final state (a submission or the case's final file), which no
    /// turn's replayed write produced.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub final_state: bool,
}

/// The introducing write: the write and its turn.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct IntroducingWrite {
    /// The write's position among all writes of the trace; 0 when the turn changed the
    /// artefact by an edit sage could not replay (see `deduced`).
    pub write: usize,
    pub turn: usize,
    /// True when an earlier write had introduced the fragment, a later one removed it, and
    /// this one reinstated it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reinstated: bool,
    /// True when no replayed snapshot shows the change: only the recorded final state holds
    /// the fragment, and this turn is the only one the trace records changing the artefact
    /// after the last replayed state (a write that could not be applied, or an edit command
    /// sage could not replay). [`ProvenanceResult::introducing_write_basis`] says which.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deduced: bool,
}

/// Code provenance and the introducing write of one anchor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProvenanceResult {
    pub provenance: Provenance,
    pub introducing_write: Option<IntroducingWrite>,
    /// Agent-introduced code whose change only the recorded final state shows, with no single
    /// turn recorded making it: the introducing write is `cannot-determine` (and
    /// `introducing_write` is `None`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub introducing_write_cannot_determine: bool,
    /// When the introducing write is not a replayed write: how it was deduced, or why it
    /// cannot be determined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introducing_write_basis: Option<String>,
    /// The fragment's presence along the history (empty for no fragment).
    pub presence: Vec<Presence>,
    /// How the fragment was compared: `python-tokens` or `normalized-text`.
    pub matching: String,
    /// Why this provenance (one sentence).
    pub reason: String,
}

/// One automatic check on a result: a failed check is reported, never hidden.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Check {
    /// Kebab-case name, e.g. `fragment-absent-from-baseline`.
    pub name: String,
    pub passed: bool,
    /// What was found, in words.
    pub detail: String,
}

impl Check {
    fn new(name: &str, passed: bool, detail: impl Into<String>) -> Check {
        Check {
            name: name.to_string(),
            passed,
            detail: detail.into(),
        }
    }
}

/// An artefact path as compared: `/` separators, no leading `./`, no empty or `.`
/// components.
pub fn normalize_path(p: &str) -> String {
    let s = p.trim().replace('\\', "/");
    let abs = s.starts_with('/');
    let parts: Vec<&str> = s
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let joined = parts.join("/");
    if abs {
        format!("/{joined}")
    } else {
        joined
    }
}

/// The embedded workspace roots (`crates/sage-history/data/workspace-roots.txt`).
pub const DEFAULT_WORKSPACE_ROOTS: &str = include_str!("../data/workspace-roots.txt");

/// Parse a workspace-roots file: one absolute folder per line, `#` comments.
pub fn parse_workspace_roots(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| l.starts_with('/') && *l != "/")
        .map(|l| format!("{}/", normalize_path(l)))
        .collect()
}

static WORKSPACE_ROOTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Use `roots` instead of the embedded list for the rest of the process (the CLI's
/// `SAGE_WORKSPACE_ROOTS=FILE`). False when the roots were already in use.
pub fn override_workspace_roots(roots: Vec<String>) -> bool {
    WORKSPACE_ROOTS.set(roots).is_ok()
}

/// The workspace roots in use: an override, else the embedded list.
pub(crate) fn workspace_roots() -> &'static [String] {
    WORKSPACE_ROOTS.get_or_init(|| parse_workspace_roots(DEFAULT_WORKSPACE_ROOTS))
}

/// The relative forms an absolute path may stand for under the workspace-roots rule: the
/// path after a root, and after a root plus one folder (the checkout). A relative path stands
/// for itself.
pub fn relative_forms(path: &str) -> Vec<String> {
    let p = normalize_path(path);
    if !p.starts_with('/') {
        return vec![p];
    }
    let mut out = Vec::new();
    for root in workspace_roots() {
        if let Some(tail) = p.strip_prefix(root.as_str()) {
            if tail.is_empty() {
                continue;
            }
            out.push(tail.to_string());
            if let Some((_, rest)) = tail.split_once('/') {
                out.push(rest.to_string());
            }
        }
    }
    out
}

/// The case key that a trace's `path` names under the documented rule
/// (`docs/design-history.md`, "Artefact paths"): equal after normalization; else, when one
/// side is absolute, one of its [`relative_forms`] equals the other side (or a relative form
/// of it); the longest matching key wins.
pub fn match_key<'k>(path: &str, keys: impl IntoIterator<Item = &'k String>) -> Option<String> {
    let p = normalize_path(path);
    let forms = relative_forms(&p);
    let mut best: Option<(&String, usize)> = None;
    for k in keys {
        let kn = normalize_path(k);
        if kn == p {
            return Some(k.clone());
        }
        if !p.starts_with('/') && !kn.starts_with('/') {
            continue;
        }
        let kforms = relative_forms(&kn);
        let hit = forms
            .iter()
            .filter(|f| kforms.contains(f))
            .map(|f| f.len())
            .max();
        if let Some(len) = hit {
            if best.is_none_or(|(_, l)| len > l) {
                best = Some((k, len));
            }
        }
    }
    best.map(|(k, _)| k.clone())
}

/// The result of applying one write to an artefact's content.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The content after the write; `None` when the artefact was deleted.
    pub content: Option<String>,
    /// A search/replace applied by the whitespace-tolerant line match, or by Aider's
    /// `...` elision.
    pub fuzzy: bool,
    /// The edit matched only after the file's CRLF line ends were read as LF (as Python
    /// editors read with universal newlines); the result has LF line ends.
    pub crlf_normalized: bool,
}

impl Applied {
    fn exact(content: String) -> Result<Applied, ApplyError> {
        Ok(Applied {
            content: Some(content),
            fuzzy: false,
            crlf_normalized: false,
        })
    }
}

/// Apply every write to the baselines in trace order (see [`reconstruct_with_final`]; no
/// case final files).
pub fn reconstruct(
    baselines: &BTreeMap<String, String>,
    trace: &CanonicalTrace,
) -> ArtefactHistory {
    reconstruct_with_final(baselines, trace, &[])
}

/// Apply every turn's write to the baselines in trace order, and derive the recorded final
/// states (the trace's submissions applied to the baseline, the case's final files).
///
/// Writes are numbered from 1 among all writes of the turns (failed ones too). A write that
/// cannot be applied goes to `failures` with its reason and leaves the artefact unchanged.
/// A final-state write still found in a turn is treated as a submission, never applied as a
/// step.
pub fn reconstruct_with_final(
    baselines: &BTreeMap<String, String>,
    trace: &CanonicalTrace,
    case_finals: &[SuppliedFinal],
) -> ArtefactHistory {
    let keys: Vec<String> = baselines.keys().cloned().collect();
    let mut path_matches: BTreeMap<String, String> = BTreeMap::new();
    let mut name_of = |path: &str| -> String {
        let norm = normalize_path(path);
        match match_key(path, &keys) {
            Some(k) => {
                if normalize_path(&k) != norm {
                    path_matches.insert(path.to_string(), k.clone());
                }
                k
            }
            None => norm,
        }
    };
    let mut state: BTreeMap<String, Option<String>> = baselines
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    let mut snapshots = Vec::new();
    let mut failures = Vec::new();
    let writes: Vec<_> = trace
        .turns
        .iter()
        .flat_map(|t| t.writes.iter().map(move |w| (t.index, w)))
        .filter(|(_, w)| !w.final_state)
        .collect();
    for (i, (turn, w)) in writes.iter().enumerate() {
        let name = name_of(&w.artefact);
        let current = state.get(&name).cloned().flatten();
        match apply(current.as_deref(), &w.op) {
            Ok(applied) => {
                state.insert(name.clone(), applied.content.clone());
                snapshots.push(Snapshot {
                    write: i + 1,
                    turn: *turn,
                    artefact: name,
                    op: w.op.kind().to_string(),
                    via: w.via.clone(),
                    final_state: false,
                    fuzzy: applied.fuzzy,
                    crlf_normalized: applied.crlf_normalized,
                    content: applied.content,
                    raw: w.raw.clone(),
                });
            }
            Err(reason) => failures.push(WriteFailure {
                write: i + 1,
                turn: *turn,
                artefact: name,
                op: w.op.kind().to_string(),
                reason: reason.to_string(),
                raw: w.raw.clone(),
            }),
        }
    }
    let mut final_states = Vec::new();
    for f in case_finals {
        final_states.push(FinalState {
            artefact: name_of(&f.artefact),
            source: format!("case final file {}", f.file),
            content: Some(f.content.clone()),
            error: None,
            raw: RawRef::synthetic(&f.file, "final file given by the case"),
        });
    }
    let submitted = trace
        .submissions
        .iter()
        .chain(trace.writes().map(|(_, w)| w).filter(|w| w.final_state));
    for w in submitted {
        let name = name_of(&w.artefact);
        // A submission is the run's result relative to its input: it applies to the baseline,
        // never to the replayed state.
        let base = baselines.get(&name).map(String::as_str);
        let applied = apply(base, &w.op).or_else(|e| {
            // Patch transports (terminal output, JSON exports) often turn CRLF into LF: a
            // CRLF baseline is then matched as editors read it, with universal newlines.
            match base.filter(|b| b.contains("\r\n")) {
                Some(b) => apply(Some(&b.replace("\r\n", "\n")), &w.op).map_err(|_| e),
                None => Err(e),
            }
        });
        let (content, error) = match applied {
            Ok(a) => (a.content, None),
            Err(e) => (
                None,
                Some(format!(
                    "the submission does not apply to the baseline: {e}"
                )),
            ),
        };
        final_states.push(FinalState {
            artefact: name,
            source: format!("submission ({})", w.via),
            content,
            error,
            raw: w.raw.clone(),
        });
    }
    let condition = if writes.is_empty() {
        if final_states.is_empty() {
            ReconstructionCondition::NoWrite
        } else {
            // Only the final file is known.
            ReconstructionCondition::FinalOnly
        }
    } else if writes.len() == 1 {
        ReconstructionCondition::SingleWrite
    } else {
        ReconstructionCondition::PerWrite
    };
    ArtefactHistory {
        baselines: baselines.clone(),
        snapshots,
        failures,
        condition,
        final_states,
        path_matches,
    }
}

/// Why a write does not apply to the artefact as it stands. The message names the edit and
/// what in the file it did not find; it is recorded as the write's failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The edit needs the artefact, which does not exist (the edit's name).
    #[error("{0}: artefact does not exist")]
    Missing(&'static str),
    /// A `str_replace` with an empty old text.
    #[error("str_replace: old text is empty")]
    EmptyOld,
    /// A `str_replace` whose old text is not in the file.
    #[error("str_replace: old text not found")]
    OldNotFound,
    /// A `str_replace` whose old text occurs more than once.
    #[error("str_replace: old text occurs {0} times (must occur exactly once)")]
    OldAmbiguous(usize),
    /// A SEARCH block that is not in the file, even ignoring indentation.
    #[error(
        "search/replace: search text not found (exactly or ignoring indentation and trailing whitespace)"
    )]
    SearchNotFound,
    /// A SEARCH block with `...` elisions whose pieces do not pair or match.
    #[error("search/replace: {0}")]
    Elision(String),
    /// An insert past the end of the file.
    #[error("insert: line {after} is beyond the end of the file ({lines} lines)")]
    InsertBeyond {
        /// The line to insert after.
        after: usize,
        /// The file's line count.
        lines: usize,
    },
    /// A line-range replacement outside the file.
    #[error("replace-lines: lines {start}..={end} are not within the file ({lines} lines)")]
    LinesOutside {
        /// First line to replace.
        start: usize,
        /// Last line to replace.
        end: usize,
        /// The file's line count.
        lines: usize,
    },
    /// A unified diff that does not apply.
    #[error(transparent)]
    Patch(#[from] sage_patch::PatchError),
}

/// Apply one edit to `current` (`None`: the artefact does not exist). `Err` is the reason.
pub fn apply(current: Option<&str>, op: &WriteOp) -> Result<Applied, ApplyError> {
    // Editors (OpenHands', SWE-agent's, Aider's) read files with universal newlines: an LF
    // edit written against a CRLF file matches the file read as LF, and the file is written
    // back with LF line ends. Tried only when the edit does not match the file as it is.
    if let (Some(cur), Some(old)) = (current, op_search_text(op)) {
        if cur.contains("\r\n") && !old.contains('\r') && old.contains('\n') && !cur.contains(old) {
            let lf = cur.replace("\r\n", "\n");
            if let Ok(mut a) = apply_exact(Some(&lf), op) {
                a.crlf_normalized = true;
                return Ok(a);
            }
        }
    }
    apply_exact(current, op)
}

/// The text an edit must find in the file (search/replace, str_replace).
fn op_search_text(op: &WriteOp) -> Option<&str> {
    match op {
        WriteOp::SearchReplace { search, .. } if !search.trim().is_empty() => Some(search),
        WriteOp::StrReplace { old, .. } => Some(old),
        _ => None,
    }
}

fn apply_exact(current: Option<&str>, op: &WriteOp) -> Result<Applied, ApplyError> {
    match op {
        WriteOp::FullContent { content } => Applied::exact(content.clone()),
        WriteOp::SearchReplace { search, replace } => {
            // Aider: a blank SEARCH appends to the file, creating it if needed.
            if search.trim().is_empty() {
                return Applied::exact(format!("{}{}", current.unwrap_or(""), replace));
            }
            let cur = current.ok_or(ApplyError::Missing("search/replace"))?;
            if let Some(pos) = cur.find(search.as_str()) {
                let mut out = String::with_capacity(cur.len() + replace.len());
                out.push_str(&cur[..pos]);
                out.push_str(replace);
                out.push_str(&cur[pos + search.len()..]);
                return Applied::exact(out);
            }
            let fuzzy = |content: String| {
                Ok(Applied {
                    content: Some(content),
                    fuzzy: true,
                    crlf_normalized: false,
                })
            };
            if let Some(out) = fuzzy_replace(cur, search, replace) {
                return fuzzy(out);
            }
            // Aider's last resort: `...` lines elide unchanged code in both blocks.
            match dotdotdots(cur, search, replace) {
                Some(Ok(out)) => fuzzy(out),
                Some(Err(e)) => Err(ApplyError::Elision(e)),
                None => Err(ApplyError::SearchNotFound),
            }
        }
        WriteOp::StrReplace { old, new, all } => {
            let cur = current.ok_or(ApplyError::Missing("str_replace"))?;
            if old.is_empty() {
                return Err(ApplyError::EmptyOld);
            }
            match cur.matches(old.as_str()).count() {
                // OpenHands' editor (openhands-aci) retries a missing `old_str` with both
                // strings stripped of surrounding whitespace; an edit recorded as landed that
                // only matches that way is applied that way.
                0 if !*all
                    && old.trim() != old.as_str()
                    && !old.trim().is_empty()
                    && cur.matches(old.trim()).count() == 1 =>
                {
                    Ok(Applied {
                        content: Some(cur.replacen(old.trim(), new.trim(), 1)),
                        fuzzy: true,
                        crlf_normalized: false,
                    })
                }
                0 => Err(ApplyError::OldNotFound),
                n if n > 1 && !all => Err(ApplyError::OldAmbiguous(n)),
                _ if *all => Applied::exact(cur.replace(old.as_str(), new)),
                _ => Applied::exact(cur.replacen(old.as_str(), new, 1)),
            }
        }
        WriteOp::Insert { after_line, text } => {
            let cur = match current {
                Some(c) => c,
                None if *after_line == 0 => "",
                None => return Err(ApplyError::Missing("insert")),
            };
            let lines: Vec<&str> = cur.split_inclusive('\n').collect();
            if *after_line > lines.len() {
                return Err(ApplyError::InsertBeyond {
                    after: *after_line,
                    lines: lines.len(),
                });
            }
            let mut out = lines[..*after_line].concat();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(text);
            let rest = lines[*after_line..].concat();
            if !text.is_empty()
                && !text.ends_with('\n')
                && (!rest.is_empty() || cur.ends_with('\n'))
            {
                out.push('\n');
            }
            out.push_str(&rest);
            Applied::exact(out)
        }
        WriteOp::ReplaceLines { start, end, text } => {
            let cur = current.ok_or(ApplyError::Missing("replace-lines"))?;
            let lines: Vec<&str> = cur.split_inclusive('\n').collect();
            if *start == 0 || end < start || *end > lines.len() {
                return Err(ApplyError::LinesOutside {
                    start: *start,
                    end: *end,
                    lines: lines.len(),
                });
            }
            let mut out = lines[..start - 1].concat();
            out.push_str(text);
            let rest = lines[*end..].concat();
            let replaced_had_newline = lines[end - 1].ends_with('\n');
            if !text.is_empty()
                && !text.ends_with('\n')
                && (!rest.is_empty() || replaced_had_newline)
            {
                out.push('\n');
            }
            out.push_str(&rest);
            Applied::exact(out)
        }
        WriteOp::UnifiedDiff { diff } => apply_unified_diff(current, diff).map(|content| Applied {
            content,
            fuzzy: false,
            crlf_normalized: false,
        }),
        WriteOp::Delete => match current {
            Some(_) => Ok(Applied {
                content: None,
                fuzzy: false,
                crlf_normalized: false,
            }),
            None => Err(ApplyError::Missing("delete")),
        },
    }
}

fn leading_ws(s: &str) -> &str {
    &s[..s.len() - s.trim_start().len()]
}

/// Aider's fallback when SEARCH is not found verbatim: match whole lines ignoring leading and
/// trailing whitespace (and blank lines around SEARCH), then re-indent REPLACE by the
/// indentation difference of the first non-blank matched line.
fn fuzzy_replace(cur: &str, search: &str, replace: &str) -> Option<String> {
    let file: Vec<&str> = cur.split_inclusive('\n').collect();
    let s: Vec<&str> = search.lines().collect();
    let first = s.iter().position(|l| !l.trim().is_empty())?;
    let last = s.iter().rposition(|l| !l.trim().is_empty())?;
    let s = &s[first..=last];
    if s.len() > file.len() {
        return None;
    }
    let at = (0..=file.len() - s.len()).find(|&i| {
        s.iter()
            .enumerate()
            .all(|(j, l)| file[i + j].trim() == l.trim())
    })?;
    let fi = leading_ws(file[at]);
    let si = leading_ws(s[0]);
    let reindent = |line: &str| -> String {
        if line.trim().is_empty() {
            String::new()
        } else if let Some(extra) = fi.strip_prefix(si) {
            format!("{extra}{line}")
        } else if let Some(extra) = si.strip_prefix(fi) {
            line.strip_prefix(extra).unwrap_or(line).to_string()
        } else {
            line.to_string()
        }
    };
    let mut out = file[..at].concat();
    let end = at + s.len();
    let replaced: Vec<String> = replace.lines().map(reindent).collect();
    if !replaced.is_empty() {
        out.push_str(&replaced.join("\n"));
        if file[end - 1].ends_with('\n') || end < file.len() {
            out.push('\n');
        }
    }
    out.push_str(&file[end..].concat());
    Some(out)
}

/// Aider's `try_dotdotdots`: when SEARCH and REPLACE hold lines of only `...`, the blocks are
/// cut there into pieces, the `...` lines must pair up, and each SEARCH piece must occur
/// exactly once and is replaced by its REPLACE piece (an empty SEARCH piece appends). `None`
/// when there is no `...` line; `Err` when the pieces do not pair or match.
fn dotdotdots(whole: &str, search: &str, replace: &str) -> Option<Result<String, String>> {
    let with_nl = |s: &str| {
        if s.ends_with('\n') {
            s.to_string()
        } else {
            format!("{s}\n")
        }
    };
    let (search, replace) = (with_nl(search), with_nl(replace));
    // Split keeping the `...` lines: pieces at even positions, separators at odd ones.
    let split = |s: &str| -> Vec<String> {
        let mut out = vec![String::new()];
        for line in s.split_inclusive('\n') {
            if line.trim() == "..." {
                out.push(line.to_string());
                out.push(String::new());
            } else if let Some(last) = out.last_mut() {
                last.push_str(line);
            }
        }
        out
    };
    let sp = split(&search);
    let rp = split(&replace);
    if sp.len() == 1 {
        return None;
    }
    if sp.len() != rp.len() {
        return Some(Err("unpaired ... in SEARCH/REPLACE block".into()));
    }
    if (1..sp.len()).step_by(2).any(|i| sp[i] != rp[i]) {
        return Some(Err("unmatched ... in SEARCH/REPLACE block".into()));
    }
    let mut whole = whole.to_string();
    for (part, rep) in sp.iter().zip(&rp).step_by(2) {
        if part.is_empty() && rep.is_empty() {
            continue;
        }
        if part.is_empty() {
            if !whole.ends_with('\n') {
                whole.push('\n');
            }
            whole.push_str(rep);
            continue;
        }
        match whole.matches(part.as_str()).count() {
            1 => whole = whole.replacen(part.as_str(), rep, 1),
            0 => {
                return Some(Err(format!(
                    "a piece of the SEARCH block between `...` lines is not in the file: {:?}",
                    part.lines().next().unwrap_or("")
                )))
            }
            n => {
                return Some(Err(format!(
                    "a piece of the SEARCH block between `...` lines occurs {n} times"
                )))
            }
        }
    }
    Some(Ok(whole))
}

/// Apply a unified diff through the one patch model ([`sage_patch::apply`]).
fn apply_unified_diff(current: Option<&str>, diff: &str) -> Result<Option<String>, ApplyError> {
    Ok(sage_patch::apply(current, diff)?)
}

/// A unified diff of two states of an artefact (for reports).
pub use sage_patch::make as unified_diff;

impl ArtefactHistory {
    /// The history's name for `artefact` (the baseline key it names under the path rule of
    /// [`match_key`], else the normalized path).
    pub fn resolve_name(&self, artefact: &str) -> String {
        match_key(artefact, self.baselines.keys()).unwrap_or_else(|| normalize_path(artefact))
    }

    /// Every artefact the history knows: baselines, written files and recorded final states.
    pub fn artefacts(&self) -> Vec<String> {
        let mut names: Vec<String> = self.baselines.keys().cloned().collect();
        let more = self
            .snapshots
            .iter()
            .map(|s| &s.artefact)
            .chain(self.final_states.iter().map(|f| &f.artefact));
        for a in more {
            if !names.contains(a) {
                names.push(a.clone());
            }
        }
        names
    }

    /// The recorded final states of one artefact (case final file first).
    pub fn final_states_of(&self, artefact: &str) -> Vec<&FinalState> {
        let name = self.resolve_name(artefact);
        self.final_states
            .iter()
            .filter(|f| f.artefact == name)
            .collect()
    }

    /// The recorded final state that stands for the artefact's delivered content: the case's
    /// final file, else the trace's submission (the first one that could be derived).
    pub(crate) fn recorded_final(&self, artefact: &str) -> Option<&FinalState> {
        self.final_states_of(artefact)
            .into_iter()
            .find(|f| f.usable())
    }

    /// The artefact's content after the last replayed write (else its baseline); `None`:
    /// deleted or never existed. Unlike [`ArtefactHistory::final_content`], recorded final
    /// states play no part.
    pub fn replayed_final(&self, artefact: &str) -> Option<&str> {
        match self.snapshots_of(artefact).last() {
            Some(s) => s.content.as_deref(),
            None => self.baseline(artefact),
        }
    }

    /// The writes to `artefact` that could not be applied.
    pub(crate) fn failures_of(&self, artefact: &str) -> Vec<&WriteFailure> {
        let name = self.resolve_name(artefact);
        self.failures
            .iter()
            .filter(|f| f.artefact == name)
            .collect()
    }

    pub fn baseline(&self, artefact: &str) -> Option<&str> {
        self.baselines
            .get(&self.resolve_name(artefact))
            .map(String::as_str)
    }

    /// The snapshots of one artefact, in trace order.
    pub(crate) fn snapshots_of(&self, artefact: &str) -> Vec<&Snapshot> {
        let name = self.resolve_name(artefact);
        self.snapshots
            .iter()
            .filter(|s| s.artefact == name)
            .collect()
    }

    /// The snapshot left by write `write` (1-based among all writes), if it applied.
    pub fn snapshot(&self, write: usize) -> Option<&Snapshot> {
        self.snapshots.iter().find(|s| s.write == write)
    }

    /// The artefact's final content: its recorded final state when there is one (the trace's
    /// own record of its result), else its last snapshot, else its baseline (`None`: deleted
    /// or never existed).
    pub fn final_content(&self, artefact: &str) -> Option<&str> {
        match self.recorded_final(artefact) {
            Some(f) => f.content.as_deref(),
            None => self.replayed_final(artefact),
        }
    }

    /// The content of write `write`'s artefact just before it.
    pub fn state_before(&self, write: usize) -> Option<&str> {
        let snap = self.snapshot(write)?;
        match self
            .snapshots
            .iter()
            .rfind(|s| s.artefact == snap.artefact && s.write < write)
        {
            Some(prev) => prev.content.as_deref(),
            None => self.baseline(&snap.artefact),
        }
    }

    /// The unified diff write `write` made (from the previous state of its artefact).
    pub fn write_diff(&self, write: usize) -> Option<String> {
        let snap = self.snapshot(write)?;
        let before = self.state_before(write).unwrap_or("");
        let after = snap.content.as_deref().unwrap_or("");
        let old_name = format!("{} (before write {write})", snap.artefact);
        let new_name = format!(
            "{} (after write {write}, turn {})",
            snap.artefact, snap.turn
        );
        Some(unified_diff(before, after, &old_name, &new_name))
    }

    /// The diff of every applied write to `artefact`: (write, diff).
    #[cfg(test)]
    pub(crate) fn artefact_diffs(&self, artefact: &str) -> Vec<(usize, String)> {
        self.snapshots_of(artefact)
            .iter()
            .filter_map(|s| self.write_diff(s.write).map(|d| (s.write, d)))
            .collect()
    }
}

/// The fragment's presence in the baseline, after each applied write to `artefact`, and in
/// its recorded final state when that differs from the replayed one (or nothing replays).
pub(crate) fn presence_along<'h>(
    matcher: &Matcher,
    history: &'h ArtefactHistory,
    artefact: &str,
) -> Vec<Presence> {
    // A state equal to one already matched (a write that rewrites the file unchanged, a
    // revert) has the same answer: each distinct state is tokenized once.
    let mut seen: std::collections::HashMap<&str, bool> = Default::default();
    let mut found = |c: Option<&'h str>| -> bool {
        let Some(c) = c else { return false };
        *seen.entry(c).or_insert_with(|| matcher.found_in(c))
    };
    let mut out = vec![Presence {
        write: None,
        turn: None,
        present: found(history.baseline(artefact)),
        final_state: false,
    }];
    for s in history.snapshots_of(artefact) {
        out.push(Presence {
            write: Some(s.write),
            turn: Some(s.turn),
            present: found(s.content.as_deref()),
            final_state: false,
        });
    }
    if let Some(f) = history.recorded_final(artefact) {
        if f.content.as_deref() != history.replayed_final(artefact) {
            out.push(Presence {
                write: None,
                turn: None,
                present: found(f.content.as_deref()),
                final_state: true,
            });
        }
    }
    out
}

/// The anchor's fragment matched along its artefact's history once: the baseline, each
/// snapshot and the recorded final state ([`presence_along`]), each distinct state
/// tokenized once. Provenance and every check that needs the matcher's answers read them
/// from here, so a case's states are parsed once between them (they used to be parsed once
/// for provenance and again for the checks).
#[derive(Debug, Clone)]
pub struct FragmentStates {
    /// The anchor's artefact under the history's names.
    pub artefact: String,
    /// The matcher and the presence along the history; `None` when the anchor has no
    /// (non-blank) fragment.
    matched: Option<(Matcher, Vec<Presence>)>,
}

impl FragmentStates {
    /// Match `anchor`'s fragment along `history`.
    pub fn of(anchor: &FailureAnchor, history: &ArtefactHistory) -> FragmentStates {
        let artefact = history.resolve_name(&anchor.artefact);
        let matched = anchor
            .fragment
            .as_deref()
            .filter(|f| !f.trim().is_empty())
            .map(|fragment| {
                let matcher = matcher_for(fragment, &artefact, history);
                let presence = presence_along(&matcher, history, &artefact);
                (matcher, presence)
            });
        FragmentStates { artefact, matched }
    }

    /// The matcher and the fragment's presence along the history (baseline first), when the
    /// anchor has a fragment.
    pub fn matched(&self) -> Option<(&Matcher, &[Presence])> {
        self.matched.as_ref().map(|(m, p)| (m, p.as_slice()))
    }
}

fn matcher_for(fragment: &str, artefact: &str, history: &ArtefactHistory) -> Matcher {
    let sample = history
        .baseline(artefact)
        .or_else(|| history.final_content(artefact));
    Matcher::new(artefact, fragment, sample)
}

fn at(p: &Presence) -> String {
    match (p.write, p.turn) {
        (Some(w), Some(t)) => format!("write {w} (turn {t})"),
        _ if p.final_state => "the recorded final state".to_string(),
        _ => "the baseline".to_string(),
    }
}

/// The turns after `after` (every turn when `None`) that the trace records changing
/// `artefact` without a replayed snapshot: a write to it that could not be applied, or an
/// edit command naming it that produced no write to it. With the failed write's number.
pub(crate) fn unreplayed_changes(
    history: &ArtefactHistory,
    trace: Option<&CanonicalTrace>,
    artefact: &str,
    after: Option<usize>,
) -> BTreeMap<usize, (Option<usize>, String)> {
    let name = history.resolve_name(artefact);
    let later = |t: usize| after.is_none_or(|a| t > a);
    let mut out: BTreeMap<usize, (Option<usize>, String)> = BTreeMap::new();
    for f in history.failures_of(&name) {
        if later(f.turn) {
            out.entry(f.turn).or_insert((
                Some(f.write),
                format!(
                    "write {} ({}) could not be applied: {}",
                    f.write, f.op, f.reason
                ),
            ));
        }
    }
    if let Some(trace) = trace {
        let base = sage_trace::text::basename(&name);
        for t in &trace.turns {
            if !later(t.index) || out.contains_key(&t.index) || !t.is_applicable() {
                continue;
            }
            let writes_it = t
                .writes
                .iter()
                .any(|w| !w.final_state && history.resolve_name(&w.artefact) == name);
            if writes_it {
                continue;
            }
            // The adapters' classifier marks the calls that change a file (`edit_calls`).
            let edit = t
                .edit_calls
                .iter()
                .filter_map(|i| t.tool_calls.get(*i))
                .find(|c| sage_trace::text::names_file(&c.arguments, base));
            if let Some(call) = edit {
                out.insert(
                    t.index,
                    (
                        None,
                        format!(
                            "its {} call edits {name} in a way sage cannot replay ({})",
                            call.name,
                            call.raw.display()
                        ),
                    ),
                );
            }
        }
    }
    out
}

/// Code provenance and the introducing write of `anchor` in `history` (SAGE.md, "Artefact
/// history", and the decisions in `docs/design-history.md`), without the trace: a change
/// only the recorded final state shows is attributed from failed writes alone.
pub fn provenance(anchor: &FailureAnchor, history: &ArtefactHistory) -> ProvenanceResult {
    provenance_in(anchor, history, None)
}

/// [`provenance`], with the trace's unreplayed edit commands as evidence of which turn made a
/// change that only the recorded final state shows.
pub(crate) fn provenance_in(
    anchor: &FailureAnchor,
    history: &ArtefactHistory,
    trace: Option<&CanonicalTrace>,
) -> ProvenanceResult {
    provenance_from(&FragmentStates::of(anchor, history), history, trace)
}

/// [`provenance_in`] on the fragment's presence already matched along the history
/// ([`FragmentStates::of`] of the same anchor and history), so that provenance and its
/// checks tokenize each state once between them.
pub fn provenance_from(
    states: &FragmentStates,
    history: &ArtefactHistory,
    trace: Option<&CanonicalTrace>,
) -> ProvenanceResult {
    let no_location = |presence, matching: &str, reason: &str| ProvenanceResult {
        provenance: Provenance::NoCodeLocation,
        introducing_write: None,
        introducing_write_cannot_determine: false,
        introducing_write_basis: None,
        presence,
        matching: matching.to_string(),
        reason: reason.to_string(),
    };
    let Some((matcher, presence)) = states.matched() else {
        return no_location(
            Vec::new(),
            "none",
            "the failure anchor has no code fragment",
        );
    };
    let artefact = states.artefact.clone();
    let matching = matcher.method().as_str();
    let presence = presence.to_vec();
    if !presence.iter().any(|p| p.present) {
        let reason = format!(
            "fragment found in neither the baseline nor any snapshot{} of {artefact}",
            if presence.iter().any(|p| p.final_state) {
                " nor the recorded final state"
            } else {
                ""
            }
        );
        return no_location(presence, matching, &reason);
    }
    let last = presence.len() - 1;
    if !presence[last].present {
        return no_location(
            presence,
            matching,
            "fragment not present in the final snapshot",
        );
    }
    // The introducing write follows the last state without the fragment.
    let Some(gap) = presence.iter().rposition(|p| !p.present) else {
        let snaps = presence.iter().filter(|p| p.write.is_some()).count();
        let reason = if last == 0 {
            format!("fragment present in the baseline and no write changed {artefact}")
        } else if snaps == 0 {
            format!(
                "fragment present in the baseline and in the recorded final state of {artefact}"
            )
        } else {
            format!(
                "fragment present in the baseline and in all {last} later state(s) of {artefact}"
            )
        };
        return ProvenanceResult {
            provenance: Provenance::Inherited,
            introducing_write: None,
            introducing_write_cannot_determine: false,
            introducing_write_basis: None,
            presence,
            matching: matching.to_string(),
            reason,
        };
    };
    let intro = &presence[gap + 1];
    let reinstated = presence[..gap].iter().any(|p| p.present);
    let first = presence.iter().position(|p| p.present).unwrap_or(0);
    if intro.final_state {
        // No replayed snapshot shows the change: only the recorded final state holds the
        // fragment. The introducing write is the turn the trace records making the change,
        // when there is exactly one; else it cannot be determined.
        let source = history
            .recorded_final(&artefact)
            .map(|f| f.source.clone())
            .unwrap_or_default();
        let after = history.snapshots_of(&artefact).last().map(|s| s.turn);
        let changes = unreplayed_changes(history, trace, &artefact, after);
        let since = match after {
            Some(t) => format!(" after the last replayed write (turn {t})"),
            None => " (no write of the trace replays it)".to_string(),
        };
        let reason = if reinstated {
            format!(
                "fragment present in {}, eliminated by {}, and present again only in the \
                 recorded final state ({source})",
                at(&presence[first]),
                at(&presence[gap])
            )
        } else {
            format!(
                "fragment absent from the baseline and present only in the recorded final state \
                 ({source})"
            )
        };
        let mut result = ProvenanceResult {
            provenance: Provenance::AgentIntroduced,
            introducing_write: None,
            introducing_write_cannot_determine: true,
            introducing_write_basis: None,
            presence,
            matching: matching.to_string(),
            reason,
        };
        if changes.len() == 1 {
            let (turn, (write, how)) = changes.into_iter().next().unwrap_or_default();
            result.introducing_write = Some(IntroducingWrite {
                write: write.unwrap_or(0),
                turn,
                reinstated,
                deduced: true,
            });
            result.introducing_write_cannot_determine = false;
            result.introducing_write_basis = Some(format!(
                "turn {turn} is the only turn the trace records changing {artefact}{since}: {how}"
            ));
        } else if changes.is_empty() {
            result.introducing_write_basis = Some(format!(
                "cannot determine: {artefact} is changed only in the recorded final state and \
                 the trace records no turn making a change to it{since}"
            ));
        } else {
            let turns: Vec<String> = changes.keys().map(|t| t.to_string()).collect();
            result.introducing_write_basis = Some(format!(
                "cannot determine: the trace records {} turns changing {artefact}{since} \
                 without a replayable write (turns {}), and only the final state is known",
                turns.len(),
                turns.join(", ")
            ));
        }
        return result;
    }
    let (Some(write), Some(turn)) = (intro.write, intro.turn) else {
        // Unreachable: entries after the baseline are snapshots or the final state.
        return no_location(
            presence,
            matching,
            "internal: introducing state is the baseline",
        );
    };
    let reason = if reinstated {
        format!(
            "fragment present in {}, eliminated by {}, reinstated by write {write} (turn {turn}) \
             and present through the final snapshot",
            at(&presence[first]),
            at(&presence[gap]),
        )
    } else {
        format!(
            "fragment absent from the baseline and present from write {write} (turn {turn}) \
             through the final snapshot"
        )
    };
    ProvenanceResult {
        provenance: Provenance::AgentIntroduced,
        introducing_write: Some(IntroducingWrite {
            write,
            turn,
            reinstated,
            deduced: false,
        }),
        introducing_write_cannot_determine: false,
        introducing_write_basis: None,
        presence,
        matching: matching.to_string(),
        reason,
    }
}

impl ProvenanceResult {
    /// The introducing-write label as annotators write it: `turn:N`, `none` or
    /// `cannot-determine`.
    pub fn introducing_write_label(&self) -> String {
        match (
            &self.introducing_write,
            self.introducing_write_cannot_determine,
        ) {
            (Some(w), _) => format!("turn:{}", w.turn),
            (None, true) => "cannot-determine".to_string(),
            (None, false) => "none".to_string(),
        }
    }
}

/// The automatic checks of SAGE.md that depend on the history only, re-derived from `history`
/// (not from `result.presence`), so a result that disagrees with its history fails them.
/// The origin check (origin turn <= introducing write) belongs to the origin rule; the
/// checks that use evidence other than the fragment matcher are [`independent_checks`].
pub fn checks(
    anchor: &FailureAnchor,
    history: &ArtefactHistory,
    result: &ProvenanceResult,
) -> Vec<Check> {
    checks_from(&FragmentStates::of(anchor, history), result)
}

/// [`checks`] on the fragment's presence matched along the history ([`FragmentStates::of`]),
/// not on `result.presence`: a result that disagrees with its history still fails them.
pub fn checks_from(states: &FragmentStates, result: &ProvenanceResult) -> Vec<Check> {
    let mut out = Vec::new();
    let no_intro = |out: &mut Vec<Check>| {
        let passed =
            result.introducing_write.is_none() && !result.introducing_write_cannot_determine;
        out.push(Check::new(
            "no-introducing-write",
            passed,
            if passed {
                format!(
                    "{} code has no introducing write",
                    result.provenance.as_str()
                )
            } else {
                format!(
                    "{} code names an introducing write",
                    result.provenance.as_str()
                )
            },
        ));
    };
    let (Some((_, presence)), false) = (
        states.matched(),
        result.provenance == Provenance::NoCodeLocation,
    ) else {
        no_intro(&mut out);
        return out;
    };
    let artefact = &states.artefact;
    let missing =
        |ps: &[Presence]| -> Vec<String> { ps.iter().filter(|p| !p.present).map(at).collect() };
    match result.provenance {
        Provenance::Inherited => {
            let base = presence[0].present;
            out.push(Check::new(
                "fragment-present-in-baseline",
                base,
                if base {
                    "fragment found in the baseline".to_string()
                } else {
                    format!("fragment not found in the baseline of {artefact}")
                },
            ));
            let absent = missing(&presence[1..]);
            out.push(Check::new(
                "fragment-present-in-every-snapshot",
                absent.is_empty(),
                if absent.is_empty() {
                    format!(
                        "fragment found in all {} later state(s)",
                        presence.len() - 1
                    )
                } else {
                    format!("fragment missing after {}", absent.join(", "))
                },
            ));
            no_intro(&mut out);
        }
        Provenance::AgentIntroduced => {
            // The state the result says introduced the fragment: the introducing write's
            // snapshot, or the recorded final state when no replayed snapshot shows it.
            let idx = match result.introducing_write {
                Some(iw) if !iw.deduced => presence.iter().position(|p| p.write == Some(iw.write)),
                Some(_) => presence.iter().position(|p| p.final_state),
                None if result.introducing_write_cannot_determine => {
                    presence.iter().position(|p| p.final_state)
                }
                None => {
                    out.push(Check::new(
                        "fragment-present-after-introducing-write",
                        false,
                        "agent-introduced code without an introducing write",
                    ));
                    return out;
                }
            };
            let Some(idx) = idx.filter(|i| *i > 0) else {
                out.push(Check::new(
                    "fragment-present-after-introducing-write",
                    false,
                    match result.introducing_write {
                        Some(iw) if !iw.deduced => {
                            format!("write {} is not an applied write to {artefact}", iw.write)
                        }
                        _ => format!("{artefact} has no recorded final state beyond the replay"),
                    },
                ));
                return out;
            };
            let base = presence[0].present;
            let before = &presence[idx - 1];
            let (passed, detail) = match (base, before.present) {
                (false, false) => (true, "fragment not found in the baseline".to_string()),
                (true, false) => (
                    true,
                    format!(
                        "fragment in the baseline but eliminated before the introducing write \
                         (absent after {})",
                        at(before)
                    ),
                ),
                (_, true) => (
                    false,
                    format!(
                        "fragment already present in {}, before the introducing write",
                        at(before)
                    ),
                ),
            };
            out.push(Check::new("fragment-absent-from-baseline", passed, detail));
            let here = presence[idx].present;
            out.push(Check::new(
                "fragment-present-after-introducing-write",
                here,
                {
                    let where_ = if presence[idx].final_state {
                        format!("in {}", at(&presence[idx]))
                    } else {
                        format!("after {}", at(&presence[idx]))
                    };
                    if here {
                        format!("fragment found {where_}")
                    } else {
                        format!("fragment not found {where_}")
                    }
                },
            ));
            let absent = missing(&presence[idx + 1..]);
            out.push(Check::new(
                "fragment-present-in-every-later-snapshot",
                absent.is_empty(),
                if absent.is_empty() {
                    format!(
                        "fragment found in all {} later state(s)",
                        presence.len() - idx - 1
                    )
                } else {
                    format!("fragment missing after {}", absent.join(", "))
                },
            ));
        }
        // Handled above: no-code-location only has the no-introducing-write check.
        Provenance::NoCodeLocation => {}
    }
    out
}

/// Whitespace-normalized literal containment: the fragment's text as written, runs of
/// whitespace collapsed, nothing else (no tokenizer).
pub(crate) fn literally_contains(state: &str, fragment: &str) -> bool {
    let f = normalize_ws(fragment);
    !f.is_empty() && normalize_ws(state).contains(&f)
}

/// The checks that can fail independently of the code that produced the result: each uses
/// evidence other than the replay and the fragment matcher (the trace's own submission or the
/// case's final file, the canonical trace's write records, literal text search).
///
/// - `every-write-applied`: no write to the anchor's artefact failed, and no turn ran an edit
///   command naming it that sage could not replay;
/// - `final-state-matches-replay`, per artefact: the replayed final state equals each
///   recorded final state (submission, case final file) of an artefact the trace changes;
/// - `introducing-write-is-a-write-of-the-trace`: the introducing write is write N of the
///   canonical trace, held by its turn, to the anchor's artefact (or, deduced, a turn the
///   trace records changing it);
/// - `fragment-literally-absent` (no-code-location): the fragment's text occurs in no state;
/// - `fragment-in-baseline-literal-and-tokens`: a literal occurrence in the baseline is
///   also found by the token matcher.
pub fn independent_checks(
    anchor: &FailureAnchor,
    history: &ArtefactHistory,
    trace: &CanonicalTrace,
    result: &ProvenanceResult,
) -> Vec<Check> {
    independent_checks_from(
        &FragmentStates::of(anchor, history),
        anchor,
        history,
        trace,
        result,
    )
}

/// [`independent_checks`], reading the token matcher's answer on the baseline from `states`
/// ([`FragmentStates::of`] of the same anchor and history) instead of tokenizing it again.
pub fn independent_checks_from(
    states: &FragmentStates,
    anchor: &FailureAnchor,
    history: &ArtefactHistory,
    trace: &CanonicalTrace,
    result: &ProvenanceResult,
) -> Vec<Check> {
    let mut out = Vec::new();
    let artefact = history.resolve_name(&anchor.artefact);

    // every-write-applied
    let failed = history.failures_of(&artefact);
    let unreplayed: Vec<(usize, String)> =
        unreplayed_changes(history, Some(trace), &artefact, None)
            .into_iter()
            .filter(|(_, (w, _))| w.is_none())
            .map(|(t, (_, how))| (t, how))
            .collect();
    let mut problems: Vec<String> = failed
        .iter()
        .map(|f| {
            format!(
                "write {} (turn {}, {}) failed: {}",
                f.write, f.turn, f.op, f.reason
            )
        })
        .collect();
    // An unreplayed edit is covered when the artefact's recorded final state is known: the
    // history then takes the final state from that record (and final-state-matches-replay
    // compares it with whatever did replay); without one, the replay is silently short.
    let covered = history.recorded_final(&artefact).map(|f| f.source.clone());
    let notes: Vec<String> = unreplayed
        .iter()
        .map(|(t, how)| format!("turn {t}: {how}"))
        .collect();
    if covered.is_none() {
        problems.extend(notes.iter().cloned());
    }
    out.push(Check::new(
        "every-write-applied",
        problems.is_empty(),
        if !problems.is_empty() {
            problems.join("; ")
        } else if let (false, Some(src)) = (notes.is_empty(), &covered) {
            format!(
                "all {} replayable write(s) to {artefact} applied; not replayed, and covered by the \
                 {src}: {}",
                history.snapshots_of(&artefact).len(),
                notes.join("; ")
            )
        } else {
            format!(
                "all {} write(s) to {artefact} applied; no unreplayed edit names it",
                history.snapshots_of(&artefact).len()
            )
        },
    ));

    // final-state-matches-replay, per artefact the trace changes (or that has several records)
    let has_trace_submission =
        !trace.submissions.is_empty() || trace.writes().any(|(_, w)| w.final_state);
    let mut names: Vec<String> = history
        .final_states
        .iter()
        .map(|f| f.artefact.clone())
        .collect();
    if has_trace_submission {
        // A submitted patch covers the whole repository: a baseline artefact the replay
        // changed but the patch does not name must have stayed as it was.
        for k in history.baselines.keys() {
            if !history.snapshots_of(k).is_empty() {
                names.push(k.clone());
            }
        }
    }
    names.sort();
    names.dedup();
    for name in names {
        let recorded: Vec<&FinalState> = history.final_states_of(&name);
        // Something replays when the trace has write records for the artefact.
        let replays =
            !history.snapshots_of(&name).is_empty() || !history.failures_of(&name).is_empty();
        let replayed = history.replayed_final(&name);
        if recorded.is_empty() {
            // Named by no submission: the patch says the file is unchanged.
            let base = history.baseline(&name);
            out.push(Check::new(
                "final-state-matches-replay",
                replayed == base,
                if replayed == base {
                    format!("{name}: replay ends where it started, as the submission (which does not name it) says")
                } else {
                    format!("{name}: the replay changes it, but the submission does not name it (unchanged)")
                },
            ));
            continue;
        }
        if !replays {
            // Nothing to replay: the recorded states can only be compared with each other.
            let usable: Vec<&&FinalState> = recorded.iter().filter(|f| f.usable()).collect();
            if recorded.len() > 1 {
                let agree = usable.len() == recorded.len()
                    && usable.windows(2).all(|w| w[0].content == w[1].content);
                out.push(Check::new(
                    "final-state-sources-agree",
                    agree,
                    format!(
                        "{name}: {} (no write of the trace replays it)",
                        recorded
                            .iter()
                            .map(|f| match &f.error {
                                Some(e) => format!("{}: {e}", f.source),
                                None => f.source.clone(),
                            })
                            .collect::<Vec<_>>()
                            .join(if agree { " = " } else { " vs " })
                    ),
                ));
            } else if let Some(e) = &recorded[0].error {
                out.push(Check::new(
                    "final-state-matches-replay",
                    false,
                    format!("{name}: {}: {e}", recorded[0].source),
                ));
            }
            continue;
        }
        let lf = |x: Option<&str>| x.map(|t| t.replace("\r\n", "\n"));
        for f in recorded {
            let (passed, detail) = match (&f.error, f.content.as_deref()) {
                (Some(e), _) => (false, format!("{name}: {}: {e}", f.source)),
                (None, rec) if rec == replayed => (
                    true,
                    format!("{name}: the replayed final state equals the {}", f.source),
                ),
                (None, rec) if lf(rec) == lf(replayed) => (
                    true,
                    format!(
                        "{name}: the replayed final state equals the {} up to CRLF/LF line ends",
                        f.source
                    ),
                ),
                (None, rec) => (
                    false,
                    format!("{name}: {}", first_difference(replayed, rec, &f.source)),
                ),
            };
            out.push(Check::new("final-state-matches-replay", passed, detail));
        }
    }

    // introducing-write-is-a-write-of-the-trace
    if let Some(iw) = result.introducing_write {
        let (passed, detail) = if iw.deduced {
            let turn_changes = unreplayed_changes(history, Some(trace), &artefact, None);
            match turn_changes.get(&iw.turn) {
                Some((_, how)) => (
                    true,
                    format!("turn {} records a change to {artefact}: {how}", iw.turn),
                ),
                None => (
                    false,
                    format!("turn {} records no change to {artefact}", iw.turn),
                ),
            }
        } else {
            let nth = trace
                .turns
                .iter()
                .flat_map(|t| t.writes.iter().map(move |w| (t.index, w)))
                .filter(|(_, w)| !w.final_state)
                .nth(iw.write.wrapping_sub(1));
            match nth {
                Some((t, w)) if t == iw.turn && history.resolve_name(&w.artefact) == artefact => (
                    true,
                    format!(
                        "write {} of the trace is turn {t}'s {} to {}",
                        iw.write,
                        w.via,
                        w.artefact
                    ),
                ),
                Some((t, w)) => (
                    false,
                    format!(
                        "write {} of the trace is turn {t}'s write to {}, not turn {}'s to {artefact}",
                        iw.write, w.artefact, iw.turn
                    ),
                ),
                None => (false, format!("the trace has no write {}", iw.write)),
            }
        };
        out.push(Check::new(
            "introducing-write-is-a-write-of-the-trace",
            passed,
            detail,
        ));
    }

    let fragment = anchor.fragment.as_deref().filter(|f| !f.trim().is_empty());
    if let (Some(fragment), Some((matcher, presence))) = (fragment, states.matched()) {
        // fragment-literally-absent
        if result.provenance == Provenance::NoCodeLocation {
            let mut found = Vec::new();
            if history
                .baseline(&artefact)
                .is_some_and(|b| literally_contains(b, fragment))
            {
                found.push("the baseline".to_string());
            }
            for s in history.snapshots_of(&artefact) {
                if s.content
                    .as_deref()
                    .is_some_and(|c| literally_contains(c, fragment))
                {
                    found.push(format!("write {} (turn {})", s.write, s.turn));
                }
            }
            for f in history.final_states_of(&artefact) {
                if f.content
                    .as_deref()
                    .is_some_and(|c| literally_contains(c, fragment))
                {
                    found.push(f.source.clone());
                }
            }
            out.push(Check::new(
                "fragment-literally-absent",
                found.is_empty(),
                if found.is_empty() {
                    format!("the fragment's text occurs in no state of {artefact}")
                } else {
                    format!("the fragment's text occurs in {}", found.join(", "))
                },
            ));
        }
        // fragment-in-baseline-literal-and-tokens (comments cut first in Python, naively to
        // the end of the line on both sides, so old code kept in a comment is not "present")
        if let Some(b) = history.baseline(&artefact) {
            let literal = if matcher.method() == crate::fragment::Method::PythonTokens {
                let cut = |t: &str| {
                    t.lines()
                        .map(|l| l.split('#').next().unwrap_or(""))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                literally_contains(&cut(b), &cut(fragment))
            } else {
                literally_contains(b, fragment)
            };
            // The baseline's entry of the presence: the token matcher on this baseline.
            let tokens = presence[0].present;
            let word = |x: bool| if x { "present" } else { "absent" };
            out.push(Check::new(
                "fragment-in-baseline-literal-and-tokens",
                !literal || tokens,
                format!(
                    "in the baseline of {artefact}: literally {}, by {} {}",
                    word(literal),
                    matcher.method().as_str(),
                    word(tokens)
                ),
            ));
        }
    }
    out
}

/// Where two final states first differ, in words.
fn first_difference(replayed: Option<&str>, recorded: Option<&str>, source: &str) -> String {
    match (replayed, recorded) {
        (None, None) => format!("both the replay and the {source} have no file"),
        (None, Some(_)) => format!("the replay leaves no file, the {source} has one"),
        (Some(_), None) => format!("the replay leaves a file, the {source} deletes it"),
        (Some(a), Some(b)) => {
            let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
            let n = la
                .iter()
                .zip(&lb)
                .position(|(x, y)| x != y)
                .unwrap_or(la.len().min(lb.len()));
            let show = |v: &[&str]| {
                v.get(n)
                    .map(|l| format!("`{}`", l.trim()))
                    .unwrap_or_else(|| "end of file".into())
            };
            let eol = if la == lb {
                " (line ends or final newline differ)"
            } else {
                ""
            };
            format!(
                "the replayed final state differs from the {source} at line {}: replay {}, \
                 {source} {}{eol}",
                n + 1,
                show(&la),
                show(&lb)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sage_trace::case::DeficiencyCategory;
    use sage_trace::{Actor, Turn, TurnKind, Write};

    fn w(artefact: &str, op: WriteOp) -> Write {
        Write {
            artefact: artefact.to_string(),
            op,
            via: "test".to_string(),
            final_state: false,
            raw: RawRef::synthetic("t", "test"),
        }
    }

    /// One turn per write.
    fn trace(writes: Vec<Write>) -> CanonicalTrace {
        let mut t = CanonicalTrace::new("test", vec![]);
        for wr in writes {
            let mut turn = Turn::new(Actor::new("engineer", None), TurnKind::Implementation);
            turn.writes.push(wr);
            t.push_turn(turn);
        }
        t
    }

    fn base(content: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("app.py".to_string(), content.to_string())])
    }

    fn anchor(fragment: Option<&str>) -> FailureAnchor {
        FailureAnchor {
            artefact: "app.py".into(),
            fragment: fragment.map(str::to_string),
            category: DeficiencyCategory::VulnerabilityIntroduced,
            cwe: "CWE-327".into(),
            description: "ECB".into(),
        }
    }

    fn one(current: Option<&str>, op: WriteOp) -> Result<Option<String>, String> {
        apply(current, &op)
            .map(|a| a.content)
            .map_err(|e| e.to_string())
    }

    fn ok(current: &str, op: WriteOp) -> String {
        one(Some(current), op).unwrap().unwrap()
    }

    #[test]
    fn full_content_and_delete() {
        assert_eq!(
            one(
                None,
                WriteOp::FullContent {
                    content: "x\n".into()
                }
            ),
            Ok(Some("x\n".into()))
        );
        assert_eq!(one(Some("x"), WriteOp::Delete), Ok(None));
        assert_eq!(
            one(None, WriteOp::Delete),
            Err("delete: artefact does not exist".into())
        );
    }

    #[test]
    fn search_replace_exact_first_occurrence() {
        let op = WriteOp::SearchReplace {
            search: "a = 1\n".into(),
            replace: "a = 2\n".into(),
        };
        assert_eq!(ok("a = 1\nb\na = 1\n", op), "a = 2\nb\na = 1\n");
    }

    #[test]
    fn search_replace_empty_search_appends_or_creates() {
        let op = || WriteOp::SearchReplace {
            search: "".into(),
            replace: "new\n".into(),
        };
        assert_eq!(ok("old\n", op()), "old\nnew\n");
        assert_eq!(one(None, op()), Ok(Some("new\n".into())));
    }

    #[test]
    fn search_replace_whitespace_tolerant_is_recorded_fuzzy() {
        let file = "class A:\n    def f(self):\n        x = 1   \n        return x\n";
        let op = WriteOp::SearchReplace {
            search: "def f(self):\n    x = 1\n".into(),
            replace: "def f(self):\n    x = 2\n".into(),
        };
        let a = apply(Some(file), &op).unwrap();
        assert!(a.fuzzy);
        assert_eq!(
            a.content.unwrap(),
            "class A:\n    def f(self):\n        x = 2\n        return x\n"
        );
        let miss = WriteOp::SearchReplace {
            search: "y = 1".into(),
            replace: "y = 2".into(),
        };
        let e = one(Some(file), miss).unwrap_err();
        assert!(e.contains("search text not found"), "{e}");
    }

    #[test]
    fn search_replace_with_aider_elision() {
        // Aider's `...` lines: the pieces between them are replaced one by one.
        let file = "def a():\n    x = 1\n    y = 2\n    z = 3\n    return x\n";
        let op = WriteOp::SearchReplace {
            search: "def a():\n    x = 1\n...\n    return x\n".into(),
            replace: "def a():\n    x = 10\n...\n    return x + 1\n".into(),
        };
        let a = apply(Some(file), &op).unwrap();
        assert!(a.fuzzy);
        assert_eq!(
            a.content.unwrap(),
            "def a():\n    x = 10\n    y = 2\n    z = 3\n    return x + 1\n"
        );
        let unpaired = WriteOp::SearchReplace {
            search: "x = 1\n...\nreturn x\n".into(),
            replace: "x = 10\n".into(),
        };
        let e = one(Some(file), unpaired).unwrap_err();
        assert!(e.contains("unpaired"), "{e}");
        let missing = WriteOp::SearchReplace {
            search: "    x = 1\n...\n    nope\n".into(),
            replace: "    x = 1\n...\n    yes\n".into(),
        };
        assert!(one(Some(file), missing)
            .unwrap_err()
            .contains("not in the file"));
    }

    #[test]
    fn lf_edits_apply_to_crlf_files_as_editors_read_them() {
        let file = "def f():\r\n    a = 1\r\n    b = 2\r\n";
        let op = WriteOp::StrReplace {
            old: "    a = 1\n    b = 2".into(),
            new: "    a = 3\n    b = 4".into(),
            all: false,
        };
        let a = apply(Some(file), &op).unwrap();
        assert!(a.crlf_normalized);
        assert_eq!(a.content.unwrap(), "def f():\n    a = 3\n    b = 4\n");
        // A one-line edit matches the CRLF file as it is and keeps its line ends.
        let one_line = WriteOp::StrReplace {
            old: "a = 1".into(),
            new: "a = 5".into(),
            all: false,
        };
        let a = apply(Some(file), &one_line).unwrap();
        assert!(!a.crlf_normalized);
        assert_eq!(a.content.unwrap(), "def f():\r\n    a = 5\r\n    b = 2\r\n");
        // Aider search/replace too, without falling back to the fuzzy line match.
        let sr = WriteOp::SearchReplace {
            search: "    a = 1\n    b = 2\n".into(),
            replace: "    a = 9\n".into(),
        };
        let a = apply(Some(file), &sr).unwrap();
        assert!(a.crlf_normalized && !a.fuzzy);
        assert_eq!(a.content.unwrap(), "def f():\n    a = 9\n");
    }

    #[test]
    fn str_replace_must_match_once() {
        let op = |all| WriteOp::StrReplace {
            old: "x".into(),
            new: "y".into(),
            all,
        };
        assert_eq!(ok("a x b", op(false)), "a y b");
        assert_eq!(
            one(Some("x x x"), op(false)),
            Err("str_replace: old text occurs 3 times (must occur exactly once)".into())
        );
        assert_eq!(ok("x x x", op(true)), "y y y");
        assert_eq!(
            one(Some("abc"), op(false)),
            Err("str_replace: old text not found".into())
        );
        assert_eq!(
            one(None, op(false)),
            Err("str_replace: artefact does not exist".into())
        );
        let empty = WriteOp::StrReplace {
            old: "".into(),
            new: "y".into(),
            all: false,
        };
        assert!(one(Some("abc"), empty).is_err());
    }

    #[test]
    fn insert_after_line() {
        let op = |n, t: &str| WriteOp::Insert {
            after_line: n,
            text: t.into(),
        };
        assert_eq!(ok("a\nb\n", op(0, "z")), "z\na\nb\n");
        assert_eq!(ok("a\nb\n", op(1, "z\n")), "a\nz\nb\n");
        assert_eq!(ok("a\nb\n", op(2, "z")), "a\nb\nz\n");
        assert_eq!(ok("a\nb", op(2, "z")), "a\nb\nz");
        assert_eq!(one(None, op(0, "z\n")), Ok(Some("z\n".into())));
        assert_eq!(
            one(Some("a\nb\n"), op(5, "z")),
            Err("insert: line 5 is beyond the end of the file (2 lines)".into())
        );
        assert!(one(None, op(3, "z")).is_err());
    }

    #[test]
    fn replace_lines_inclusive() {
        let op = |s, e, t: &str| WriteOp::ReplaceLines {
            start: s,
            end: e,
            text: t.into(),
        };
        assert_eq!(ok("a\nb\nc\nd\n", op(2, 3, "X")), "a\nX\nd\n");
        assert_eq!(ok("a\nb\nc\n", op(3, 3, "X\nY\n")), "a\nb\nX\nY\n");
        assert_eq!(ok("a\nb\nc\n", op(1, 3, "")), "");
        assert_eq!(
            one(Some("a\nb\n"), op(2, 4, "X")),
            Err("replace-lines: lines 2..=4 are not within the file (2 lines)".into())
        );
        assert!(one(Some("a\n"), op(0, 1, "X")).is_err());
        assert!(one(Some("a\nb\n"), op(2, 1, "X")).is_err());
    }

    const TEN: &str = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n";

    fn diff(current: Option<&str>, d: &str) -> Result<Option<String>, String> {
        one(current, WriteOp::UnifiedDiff { diff: d.into() })
    }

    // The patch model's own rules are tested in sage-patch; these check that a
    // `unified-diff` write goes through it, errors included.
    #[test]
    fn unified_diff_multi_hunk_exact() {
        let d = "--- a/app.py\n+++ b/app.py\n@@ -1,3 +1,3 @@\n l1\n-l2\n+L2\n l3\n@@ -8,3 +8,4 @@\n l8\n l9\n+l9b\n l10\n";
        assert_eq!(
            diff(Some(TEN), d).unwrap().unwrap(),
            "l1\nL2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl9b\nl10\n"
        );
    }

    #[test]
    fn unified_diff_fails_clearly() {
        let d = "@@ -1,2 +1,2 @@\n l1\n-nope\n+x\n";
        let e = diff(Some(TEN), d).unwrap_err();
        assert!(e.contains("hunk 1 (@@ -1,2 +1,2 @@) does not apply"), "{e}");
        assert!(e.contains("expected `nope`, found `l2`"), "{e}");
        assert!(diff(Some(TEN), "just prose\n")
            .unwrap_err()
            .contains("no hunk"));
        assert_eq!(diff(Some(TEN), "\n"), Ok(Some(TEN.to_string())));
        assert!(diff(None, "").is_err());
        assert!(diff(Some(TEN), "@@ -x +y @@\n")
            .unwrap_err()
            .contains("malformed"));
        assert!(diff(None, "@@ -1 +1 @@\n-l1\n+x\n")
            .unwrap_err()
            .contains("does not exist"));
    }

    #[test]
    fn unified_diff_new_and_deleted_file() {
        let d = "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+import os\n+x = 1\n";
        assert_eq!(diff(None, d).unwrap().unwrap(), "import os\nx = 1\n");
        assert!(diff(Some("exists\n"), d)
            .unwrap_err()
            .contains("already exists"));
        let del = "--- a/x.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n";
        assert_eq!(diff(Some("a\nb\n"), del), Ok(None));
    }

    #[test]
    fn reconstruct_numbers_writes_records_failures_and_continues() {
        let t = trace(vec![
            w(
                "app.py",
                WriteOp::StrReplace {
                    old: "a".into(),
                    new: "b".into(),
                    all: false,
                },
            ),
            w(
                "app.py",
                WriteOp::StrReplace {
                    old: "zzz".into(),
                    new: "q".into(),
                    all: false,
                },
            ),
            w(
                "./app.py",
                WriteOp::Insert {
                    after_line: 1,
                    text: "c\n".into(),
                },
            ),
            w(
                "new.py",
                WriteOp::FullContent {
                    content: "n\n".into(),
                },
            ),
        ]);
        let h = reconstruct(&base("a\n"), &t);
        assert_eq!(h.condition, ReconstructionCondition::PerWrite);
        assert_eq!(h.snapshots.len(), 3);
        assert_eq!(h.failures.len(), 1);
        let f = &h.failures[0];
        assert_eq!((f.write, f.turn, f.artefact.as_str()), (2, 2, "app.py"));
        assert_eq!(f.reason, "str_replace: old text not found");
        assert_eq!(h.snapshots[1].write, 3);
        assert_eq!(h.snapshots[1].artefact, "app.py");
        assert_eq!(h.final_content("app.py"), Some("b\nc\n"));
        assert_eq!(h.final_content("new.py"), Some("n\n"));
        assert_eq!(h.snapshots_of("app.py").len(), 2);
        assert_eq!(h.state_before(3), Some("b\n"));
        let d = h.write_diff(3).unwrap();
        assert!(d.contains("+c"), "{d}");
        assert_eq!(h.artefact_diffs("app.py").len(), 2);
        assert_eq!(h.artefacts(), ["app.py", "new.py"]);
    }

    #[test]
    fn reconstruction_conditions() {
        let none = reconstruct(&base("a\n"), &trace(vec![]));
        assert_eq!(none.condition, ReconstructionCondition::NoWrite);
        assert_eq!(none.final_content("app.py"), Some("a\n"));
        let fc = || {
            w(
                "app.py",
                WriteOp::FullContent {
                    content: "b\n".into(),
                },
            )
        };
        let single = reconstruct(&base("a\n"), &trace(vec![fc()]));
        assert_eq!(single.condition, ReconstructionCondition::SingleWrite);
        let mut fin = fc();
        fin.final_state = true;
        let h = reconstruct(&base("a\n"), &trace(vec![fin.clone()]));
        assert_eq!(h.condition, ReconstructionCondition::FinalOnly);
        assert_eq!(h.final_content("app.py"), Some("b\n"));
        assert!(h.snapshots.is_empty(), "a final state is no turn's write");
        // One edit plus its submission is one write, not two (cause 1 of issue 12).
        let h = reconstruct(&base("a\n"), &trace(vec![fin, fc()]));
        assert_eq!(h.condition, ReconstructionCondition::SingleWrite);
        assert_eq!(h.snapshots.len(), 1);
        assert_eq!(h.snapshots[0].write, 1);
        assert_eq!(h.snapshots[0].turn, 2);
        assert_eq!(h.final_states.len(), 1);
        let two = reconstruct(&base("a\n"), &trace(vec![fc(), fc()]));
        assert_eq!(two.condition, ReconstructionCondition::PerWrite);
    }

    const ECB: &str = "cipher = AES.new(key, AES.MODE_ECB)";
    const GCM: &str = "cipher = AES.new(key, AES.MODE_GCM)";

    fn history_of(baseline: &str, contents: &[&str]) -> ArtefactHistory {
        let t = trace(
            contents
                .iter()
                .map(|c| {
                    w(
                        "app.py",
                        WriteOp::FullContent {
                            content: c.to_string(),
                        },
                    )
                })
                .collect(),
        );
        reconstruct(&base(baseline), &t)
    }

    #[test]
    fn presence_matches_each_state_once_with_the_same_answers() {
        // Repeated and reverted states (answered from the memo) get the answer a fresh match
        // of that state gives, in order.
        let (with, without) = (
            "key = 1\ncipher = AES.new(key, AES.MODE_ECB)\n",
            "key = 1\n",
        );
        let h = history_of(
            without,
            &[with, with, without, with, without, without, with],
        );
        let m = Matcher::new("app.py", "AES.new(key, AES.MODE_ECB)", None);
        let along: Vec<bool> = presence_along(&m, &h, "app.py")
            .iter()
            .map(|p| p.present)
            .collect();
        let fresh: Vec<bool> = std::iter::once(without)
            .chain(h.snapshots.iter().filter_map(|s| s.content.as_deref()))
            .map(|c| m.found_in(c))
            .collect();
        assert_eq!(along, fresh);
        assert_eq!(along, [false, true, true, false, true, false, false, true]);
        // Provenance and checks on the states matched once equal the one-call forms.
        let a = anchor(Some("AES.new(key, AES.MODE_ECB)"));
        let states = FragmentStates::of(&a, &h);
        let p = provenance_from(&states, &h, None);
        assert_eq!(p, provenance(&a, &h));
        assert_eq!(checks_from(&states, &p), checks(&a, &h, &p));
    }

    fn prov(baseline: &str, contents: &[&str]) -> (ProvenanceResult, Vec<Check>) {
        let h = history_of(baseline, contents);
        let a = anchor(Some("cipher = AES.new(key,\n    AES.MODE_ECB)"));
        let r = provenance(&a, &h);
        let c = checks(&a, &h, &r);
        (r, c)
    }

    fn all_pass(c: &[Check]) {
        assert!(c.iter().all(|c| c.passed), "{c:#?}");
        assert!(!c.is_empty());
    }

    #[test]
    fn agent_introduced_with_introducing_write() {
        let (r, c) = prov("x = 1\n", &["x = 2\n", ECB, ECB]);
        assert_eq!(r.provenance, Provenance::AgentIntroduced);
        assert_eq!(
            r.introducing_write,
            Some(IntroducingWrite {
                write: 2,
                turn: 2,
                reinstated: false,
                deduced: false,
            })
        );
        assert_eq!(r.matching, "python-tokens");
        let seq: Vec<bool> = r.presence.iter().map(|p| p.present).collect();
        assert_eq!(seq, [false, false, true, true]);
        all_pass(&c);
        let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "fragment-absent-from-baseline",
                "fragment-present-after-introducing-write",
                "fragment-present-in-every-later-snapshot"
            ]
        );
    }

    #[test]
    fn remove_then_reinstate_names_the_reinstating_write() {
        let (r, c) = prov("x = 1\n", &[ECB, GCM, ECB]);
        assert_eq!(
            r.introducing_write,
            Some(IntroducingWrite {
                write: 3,
                turn: 3,
                reinstated: true,
                deduced: false,
            })
        );
        all_pass(&c);
    }

    #[test]
    fn baseline_eliminated_then_reinstated_is_agent_introduced() {
        let (r, c) = prov(ECB, &[GCM, ECB]);
        assert_eq!(r.provenance, Provenance::AgentIntroduced);
        assert_eq!(
            r.introducing_write,
            Some(IntroducingWrite {
                write: 2,
                turn: 2,
                reinstated: true,
                deduced: false,
            })
        );
        assert!(r.reason.contains("eliminated by write 1"), "{}", r.reason);
        all_pass(&c);
        assert!(c[0].detail.contains("eliminated"), "{}", c[0].detail);
    }

    #[test]
    fn inherited_when_never_eliminated() {
        let (r, c) = prov(ECB, &[&format!("import os\n{ECB}\n")]);
        assert_eq!(r.provenance, Provenance::Inherited);
        assert_eq!(r.introducing_write, None);
        all_pass(&c);
        let (r, c) = prov(ECB, &[]);
        assert_eq!(r.provenance, Provenance::Inherited);
        assert_eq!(r.presence.len(), 1);
        all_pass(&c);
    }

    #[test]
    fn no_code_location_cases() {
        let h = history_of(ECB, &[GCM]);
        let r = provenance(&anchor(None), &h);
        assert_eq!(r.provenance, Provenance::NoCodeLocation);
        assert_eq!(r.reason, "the failure anchor has no code fragment");
        assert!(r.presence.is_empty());
        all_pass(&checks(&anchor(None), &h, &r));
        let a = anchor(Some("hashlib.md5(data)"));
        let r = provenance(&a, &h);
        assert_eq!(r.provenance, Provenance::NoCodeLocation);
        assert!(r.reason.contains("neither the baseline nor any snapshot"));
        assert_eq!(r.presence.len(), 2);
        // Found earlier but gone from the final snapshot: decision (b).
        let (r, c) = prov(ECB, &[GCM]);
        assert_eq!(r.provenance, Provenance::NoCodeLocation);
        assert_eq!(r.reason, "fragment not present in the final snapshot");
        assert_eq!(r.introducing_write, None);
        all_pass(&c);
    }

    #[test]
    fn checks_catch_an_inconsistent_result() {
        let h = history_of("x = 1\n", &[ECB, ECB]);
        let a = anchor(Some(ECB));
        let mut r = provenance(&a, &h);
        r.introducing_write = Some(IntroducingWrite {
            write: 2,
            turn: 2,
            reinstated: false,
            deduced: false,
        });
        let c = checks(&a, &h, &r);
        let bad: Vec<&str> = c
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(bad, ["fragment-absent-from-baseline"]);
        r.provenance = Provenance::Inherited;
        let c = checks(&a, &h, &r);
        assert!(c
            .iter()
            .any(|c| !c.passed && c.name == "fragment-present-in-baseline"));
        assert!(c
            .iter()
            .any(|c| !c.passed && c.name == "no-introducing-write"));
    }

    #[test]
    fn failed_write_leaves_state_and_is_not_a_snapshot() {
        let t = trace(vec![
            w(
                "app.py",
                WriteOp::StrReplace {
                    old: "MODE_GCM".into(),
                    new: "MODE_ECB".into(),
                    all: false,
                },
            ),
            w(
                "app.py",
                WriteOp::StrReplace {
                    old: "nothing".into(),
                    new: "x".into(),
                    all: false,
                },
            ),
        ]);
        let h = reconstruct(&base(&format!("{GCM}\n")), &t);
        assert_eq!(h.failures.len(), 1);
        let r = provenance(&anchor(Some(ECB)), &h);
        assert_eq!(r.introducing_write.map(|i| i.write), Some(1));
        assert_eq!(r.presence.len(), 2);
    }
}

#[cfg(test)]
mod final_state_tests {
    //! Issue 12, cause 1 and the checks of cause 9: a submission or a case's final file is
    //! the record the replay is checked against, never a turn's write.
    use super::*;
    use sage_trace::case::DeficiencyCategory;
    use sage_trace::{Actor, RawRef, ToolCall, Turn, TurnKind, Write};

    const ECB: &str = "cipher = AES.new(key, AES.MODE_ECB)";

    fn w(artefact: &str, op: WriteOp, final_state: bool) -> Write {
        Write {
            artefact: artefact.into(),
            op,
            via: if final_state {
                "git_patch"
            } else {
                "str_replace"
            }
            .into(),
            final_state,
            raw: RawRef::lines("t", 1, 1),
        }
    }

    fn turn(writes: Vec<Write>, calls: Vec<&str>) -> Turn {
        let mut t = Turn::new(Actor::new("agent", None), TurnKind::Implementation);
        t.writes = writes;
        t.tool_calls = calls
            .into_iter()
            .map(|a| ToolCall {
                id: None,
                name: "bash".into(),
                arguments: a.into(),
                raw: RawRef::lines("t", 1, 1),
            })
            .collect();
        // What the adapters' classifier marks: here every `sed`/`perl` call is an edit.
        t.edit_calls = (0..t.tool_calls.len())
            .filter(|&i| {
                let a = &t.tool_calls[i].arguments;
                a.starts_with("sed ") || a.starts_with("perl ")
            })
            .collect();
        t
    }

    fn anchor() -> FailureAnchor {
        FailureAnchor {
            artefact: "app.py".into(),
            fragment: Some(ECB.into()),
            category: DeficiencyCategory::VulnerabilityIntroduced,
            cwe: "CWE-327".into(),
            description: "ECB".into(),
        }
    }

    fn base() -> BTreeMap<String, String> {
        [("app.py".to_string(), "import os\nx = 1\n".to_string())].into()
    }

    fn patch_to(content: &str) -> WriteOp {
        WriteOp::UnifiedDiff {
            diff: unified_diff("import os\nx = 1\n", content, "a/app.py", "b/app.py"),
        }
    }

    fn named<'c>(c: &'c [Check], name: &str) -> Vec<&'c Check> {
        c.iter().filter(|c| c.name == name).collect()
    }

    #[test]
    fn the_introducing_write_is_the_step_not_the_submission() {
        // Turn 1 writes the fragment; turn 2 only finishes; the submitted patch is attached
        // to turn 2 by the adapter. Before the fix the patch was write 2 at turn 2, the
        // condition per-write and the final turn an implementation turn.
        let after = format!("import os\n{ECB}\n");
        let mut t = CanonicalTrace::new("t", vec!["t".into()]);
        t.push_turn(turn(
            vec![w(
                "app.py",
                WriteOp::StrReplace {
                    old: "x = 1".into(),
                    new: ECB.into(),
                    all: false,
                },
                false,
            )],
            vec![],
        ));
        t.push_turn(turn(vec![w("app.py", patch_to(&after), true)], vec![]));
        let h = reconstruct(&base(), &t);
        assert_eq!(h.condition, ReconstructionCondition::SingleWrite);
        assert_eq!(h.snapshots.len(), 1);
        let p = provenance_in(&anchor(), &h, Some(&t));
        let iw = p.introducing_write.unwrap();
        assert_eq!((iw.write, iw.turn, iw.deduced), (1, 1, false));
        let c = independent_checks(&anchor(), &h, &t, &p);
        let f = named(&c, "final-state-matches-replay");
        assert_eq!(f.len(), 1);
        assert!(f[0].passed, "{f:?}");
        assert!(c.iter().all(|c| c.passed), "{c:#?}");
    }

    #[test]
    fn a_replay_that_misses_an_edit_fails_the_final_state_check() {
        // The trace's own edit is unreplayable (a regex sed), the submission shows the result.
        let after = format!("import os\n{ECB}\n");
        let mut t = CanonicalTrace::new("t", vec!["t".into()]);
        t.push_turn(turn(
            vec![w(
                "app.py",
                WriteOp::StrReplace {
                    old: "import os".into(),
                    new: "import os".into(),
                    all: false,
                },
                false,
            )],
            vec![],
        ));
        t.push_turn(turn(
            vec![],
            vec![r#"sed -i 's/x = [0-9]/cipher = .../' app.py"#],
        ));
        t.submissions.push(w("app.py", patch_to(&after), true));
        let h = reconstruct(&base(), &t);
        let p = provenance_in(&anchor(), &h, Some(&t));
        // Only the final state holds the fragment; turn 2 is the only turn after the last
        // replayed write that changes app.py: the deduced introducing write.
        assert_eq!(p.provenance, Provenance::AgentIntroduced);
        let iw = p.introducing_write.unwrap();
        assert_eq!((iw.turn, iw.deduced), (2, true));
        let c = independent_checks(&anchor(), &h, &t, &p);
        let f = named(&c, "final-state-matches-replay");
        assert!(!f[0].passed && f[0].detail.contains("line 2"), "{f:?}");
        let wa = named(&c, "every-write-applied");
        assert!(wa[0].passed && wa[0].detail.contains("covered"), "{wa:?}");
        assert!(named(&c, "introducing-write-is-a-write-of-the-trace")[0].passed);
        assert!(checks(&anchor(), &h, &p).iter().all(|c| c.passed));
    }

    #[test]
    fn a_final_only_trace_has_no_introducing_write_unless_one_turn_shows_it() {
        let after = format!("import os\n{ECB}\n");
        let supplied = [SuppliedFinal {
            artefact: "app.py".into(),
            file: "final/app.py".into(),
            content: after.clone(),
        }];
        // No turn writes or edits app.py: cannot-determine.
        let mut t = CanonicalTrace::new("t", vec!["t".into()]);
        t.push_turn(turn(vec![], vec!["ls"]));
        t.push_turn(turn(vec![], vec![]));
        let h = reconstruct_with_final(&base(), &t, &supplied);
        assert_eq!(h.condition, ReconstructionCondition::FinalOnly);
        let p = provenance_in(&anchor(), &h, Some(&t));
        assert_eq!(p.provenance, Provenance::AgentIntroduced);
        assert_eq!(p.introducing_write, None);
        assert!(p.introducing_write_cannot_determine);
        assert_eq!(p.introducing_write_label(), "cannot-determine");
        assert!(p
            .introducing_write_basis
            .as_deref()
            .unwrap()
            .starts_with("cannot determine"));
        assert!(checks(&anchor(), &h, &p).iter().all(|c| c.passed));
        // Two turns edit it by commands sage cannot replay: still cannot-determine.
        let mut t2 = CanonicalTrace::new("t", vec!["t".into()]);
        t2.push_turn(turn(vec![], vec!["perl -pi -e 's/x/y/' app.py"]));
        t2.push_turn(turn(vec![], vec!["sed -i 's/y = 1/z/' app.py"]));
        let p = provenance_in(
            &anchor(),
            &reconstruct_with_final(&base(), &t2, &supplied),
            Some(&t2),
        );
        assert!(p.introducing_write_cannot_determine);
        assert!(p.introducing_write_basis.unwrap().contains("turns 1, 2"));
        // One turn does: it is the introducing write, marked deduced.
        let mut t3 = CanonicalTrace::new("t", vec!["t".into()]);
        t3.push_turn(turn(vec![], vec!["cat app.py"]));
        t3.push_turn(turn(vec![], vec!["sed -i 's/x = 1/.../' app.py"]));
        let p = provenance_in(
            &anchor(),
            &reconstruct_with_final(&base(), &t3, &supplied),
            Some(&t3),
        );
        assert_eq!(
            p.introducing_write.map(|w| (w.turn, w.deduced)),
            Some((2, true))
        );
        assert_eq!(p.introducing_write_label(), "turn:2");
    }

    #[test]
    fn a_case_final_file_is_checked_even_when_the_trace_writes_the_artefact() {
        // Before the fix a case's final_state was silently ignored when the trace had any
        // write to that file.
        let mut t = CanonicalTrace::new("t", vec!["t".into()]);
        t.push_turn(turn(
            vec![w(
                "app.py",
                WriteOp::FullContent {
                    content: "import os\nx = 2\n".into(),
                },
                false,
            )],
            vec![],
        ));
        let supplied = [SuppliedFinal {
            artefact: "app.py".into(),
            file: "final/app.py".into(),
            content: format!("import os\n{ECB}\n"),
        }];
        let h = reconstruct_with_final(&base(), &t, &supplied);
        let p = provenance_in(&anchor(), &h, Some(&t));
        let c = independent_checks(&anchor(), &h, &t, &p);
        let f = named(&c, "final-state-matches-replay");
        assert_eq!(f.len(), 1);
        assert!(!f[0].passed);
        assert!(
            f[0].detail.contains("case final file final/app.py"),
            "{}",
            f[0].detail
        );
    }

    #[test]
    fn a_patch_that_does_not_apply_to_the_baseline_is_reported() {
        let mut t = CanonicalTrace::new("t", vec!["t".into()]);
        t.push_turn(turn(
            vec![w(
                "app.py",
                WriteOp::FullContent {
                    content: "import os\nx = 2\n".into(),
                },
                false,
            )],
            vec![],
        ));
        t.submissions.push(w(
            "app.py",
            WriteOp::UnifiedDiff {
                diff: "@@ -1,2 +1,2 @@\n import sys\n-y = 1\n+y = 2\n".into(),
            },
            true,
        ));
        let h = reconstruct(&base(), &t);
        assert!(h.final_states[0].error.is_some());
        let p = provenance_in(&anchor(), &h, Some(&t));
        let c = independent_checks(&anchor(), &h, &t, &p);
        let f = named(&c, "final-state-matches-replay");
        assert!(!f[0].passed && f[0].detail.contains("does not apply to the baseline"));
    }

    #[test]
    fn no_code_location_is_checked_literally_and_an_introducing_write_by_the_trace() {
        let mut t = CanonicalTrace::new("t", vec!["t".into()]);
        t.push_turn(turn(
            vec![w(
                "app.py",
                WriteOp::FullContent {
                    content: "import os\nx = 2\n".into(),
                },
                false,
            )],
            vec![],
        ));
        let h = reconstruct(&base(), &t);
        let a = anchor();
        let p = provenance_in(&a, &h, Some(&t));
        assert_eq!(p.provenance, Provenance::NoCodeLocation);
        let c = independent_checks(&a, &h, &t, &p);
        assert!(named(&c, "fragment-literally-absent")[0].passed);
        // A result claiming no-code-location while the text is in a state fails the check.
        let mut wrong = p.clone();
        let mut a2 = a.clone();
        a2.fragment = Some("x = 2".into());
        wrong.provenance = Provenance::NoCodeLocation;
        let c = independent_checks(&a2, &h, &t, &wrong);
        let f = named(&c, "fragment-literally-absent");
        assert!(!f[0].passed && f[0].detail.contains("write 1"), "{f:?}");
        // An introducing write the trace does not hold fails, even when the history agrees.
        let mut bogus = provenance_in(&a2, &h, Some(&t));
        bogus.introducing_write = Some(IntroducingWrite {
            write: 1,
            turn: 2,
            reinstated: false,
            deduced: false,
        });
        let c = independent_checks(&a2, &h, &t, &bogus);
        assert!(!named(&c, "introducing-write-is-a-write-of-the-trace")[0].passed);
    }

    #[test]
    fn a_literal_occurrence_the_tokens_miss_fails() {
        let t = CanonicalTrace::new("t", vec![]);
        let run = |baseline: &str| {
            let b: BTreeMap<String, String> = [("app.py".to_string(), baseline.to_string())].into();
            let h = reconstruct(&b, &t);
            let p = provenance_in(&anchor(), &h, Some(&t));
            let c = independent_checks(&anchor(), &h, &t, &p);
            (
                p,
                named(&c, "fragment-in-baseline-literal-and-tokens")[0].clone(),
            )
        };
        // Present as code: both agree.
        let (p, c) = run(&format!("import os\n{ECB}\n"));
        assert_eq!(p.provenance, Provenance::Inherited);
        assert!(c.passed && c.detail.contains("literally present"), "{c:?}");
        // Kept in a comment: neither counts it.
        let (_, c) = run(&format!("import os\n# {ECB}\n"));
        assert!(c.passed && c.detail.contains("literally absent"), "{c:?}");
        // Verbatim inside a string: the tokens say absent, the text is there: reported.
        let (p, c) = run(&format!("import os\nDOC = \"{ECB}\"\n"));
        assert_eq!(p.provenance, Provenance::NoCodeLocation);
        assert!(!c.passed, "{c:?}");
    }

    #[test]
    fn trace_paths_match_case_keys_by_the_documented_rule() {
        let keys: Vec<String> = vec!["app.py".into(), "src/util/http.py".into()];
        let m = |p: &str| match_key(p, &keys);
        assert_eq!(m("app.py").as_deref(), Some("app.py"));
        assert_eq!(m("./app.py").as_deref(), Some("app.py"));
        assert_eq!(m("/workspace/app.py").as_deref(), Some("app.py"));
        assert_eq!(
            m("/workspace/django__django-1/app.py").as_deref(),
            Some("app.py")
        );
        assert_eq!(
            m("/testbed/src/util/http.py").as_deref(),
            Some("src/util/http.py")
        );
        assert_eq!(
            m("/project/repo/src/util/http.py").as_deref(),
            Some("src/util/http.py")
        );
        // Never deeper than one folder inside a root, never under an unknown root, never a
        // relative path with extra folders.
        assert_eq!(m("/workspace/a/b/app.py"), None);
        assert_eq!(m("/tmp/app.py"), None);
        assert_eq!(m("tests/app.py"), None);
        // A case key written absolutely matches the trace's relative name.
        let abs: Vec<String> = vec!["/testbed/app.py".into()];
        assert_eq!(
            match_key("app.py", &abs).as_deref(),
            Some("/testbed/app.py")
        );
        assert_eq!(
            match_key("/workspace/app.py", &abs).as_deref(),
            Some("/testbed/app.py")
        );
        // The history uses the case key, and says how it matched.
        let mut t = CanonicalTrace::new("t", vec!["t".into()]);
        t.push_turn(turn(
            vec![w(
                "/workspace/repo/app.py",
                WriteOp::FullContent {
                    content: "y = 1\n".into(),
                },
                false,
            )],
            vec![],
        ));
        let h = reconstruct(&base(), &t);
        assert_eq!(h.snapshots[0].artefact, "app.py");
        assert_eq!(h.path_matches["/workspace/repo/app.py"], "app.py");
    }
}

#[cfg(test)]
mod proptests {
    //! Generated histories: random baselines and write sequences built against a model of
    //! the artefact, with the anchor fragment inserted and removed at random points.
    use super::*;
    use proptest::prelude::*;
    use sage_trace::case::DeficiencyCategory;
    use sage_trace::{Actor, Turn, TurnKind, Write};

    /// The fragment as the anchor states it, and the ways a write may spell it.
    const FRAGMENT: &str = "cipher = AES.new(key, AES.MODE_ECB)";
    const SPELLINGS: [&str; 4] = [
        "cipher = AES.new(key, AES.MODE_ECB)",
        "cipher = AES.new(\n    key,\n    AES.MODE_ECB,\n)",
        "cipher=AES.new(key,AES.MODE_ECB)  # fast",
        "cipher = AES.new(key,  # the key\n                 AES.MODE_ECB)",
    ];

    #[derive(Debug, Clone, PartialEq)]
    enum Item {
        Plain(usize),
        Frag(usize),
        Safe,
    }

    impl Item {
        fn text(&self) -> String {
            match self {
                Item::Plain(i) => format!("v{i} = {i}"),
                Item::Frag(s) => SPELLINGS[*s].to_string(),
                Item::Safe => "cipher = AES.new(key, AES.MODE_GCM)".to_string(),
            }
        }
        fn lines(&self) -> usize {
            self.text().lines().count()
        }
    }

    fn render(items: &[Item]) -> String {
        items.iter().map(|i| i.text() + "\n").collect()
    }

    fn has_fragment(items: &[Item]) -> bool {
        items.iter().any(|i| matches!(i, Item::Frag(_)))
    }

    /// An abstract action; the numbers pick positions and items modulo the current state.
    #[derive(Debug, Clone)]
    enum Action {
        Full(Vec<u8>),
        Insert(usize, u8),
        StrReplace(usize, u8),
        ReplaceLines(usize, u8),
        SearchReplace(usize, u8),
        Diff(Vec<u8>),
    }

    /// 0..=3: a fragment spelling, 4: the safe variant, else a fresh plain line.
    fn pick(code: u8, next: &mut usize) -> Item {
        match code % 8 {
            c @ 0..=3 => Item::Frag(c as usize),
            4 => Item::Safe,
            _ => {
                *next += 1;
                Item::Plain(*next)
            }
        }
    }

    fn action() -> impl Strategy<Value = Action> {
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..6).prop_map(Action::Full),
            (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Action::Insert(a, b)),
            (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Action::StrReplace(a, b)),
            (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Action::ReplaceLines(a, b)),
            (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Action::SearchReplace(a, b)),
            prop::collection::vec(any::<u8>(), 0..6).prop_map(Action::Diff),
        ]
    }

    fn write(op: WriteOp) -> Write {
        Write {
            artefact: "app.py".into(),
            op,
            via: "generated".into(),
            final_state: false,
            raw: RawRef::synthetic("t", "generated"),
        }
    }

    /// Turn the actions into concrete writes, returning them with the model state after each.
    fn build(base: &[u8], actions: &[Action]) -> (Vec<Item>, Vec<(Write, Vec<Item>)>) {
        let mut next = 0;
        let baseline: Vec<Item> = base.iter().map(|c| pick(*c, &mut next)).collect();
        let mut cur = baseline.clone();
        let mut out = Vec::new();
        for a in actions {
            let before = render(&cur);
            let op = match a {
                Action::Full(codes) | Action::Diff(codes) => {
                    let new: Vec<Item> = codes.iter().map(|c| pick(*c, &mut next)).collect();
                    let after = render(&new);
                    cur = new;
                    match a {
                        Action::Full(_) => WriteOp::FullContent { content: after },
                        _ => WriteOp::UnifiedDiff {
                            diff: unified_diff(&before, &after, "a/app.py", "b/app.py"),
                        },
                    }
                }
                Action::Insert(at, code) => {
                    let j = at % (cur.len() + 1);
                    let item = pick(*code, &mut next);
                    let after_line = cur[..j].iter().map(Item::lines).sum();
                    let text = item.text() + "\n";
                    cur.insert(j, item);
                    WriteOp::Insert { after_line, text }
                }
                Action::StrReplace(at, code)
                | Action::ReplaceLines(at, code)
                | Action::SearchReplace(at, code) => {
                    if cur.is_empty() {
                        let item = pick(*code, &mut next);
                        let text = item.text() + "\n";
                        cur.push(item);
                        WriteOp::Insert {
                            after_line: 0,
                            text,
                        }
                    } else {
                        let j = at % cur.len();
                        let item = pick(*code, &mut next);
                        let old = cur[j].text();
                        let new = item.text();
                        let op = match a {
                            Action::StrReplace(..) => {
                                // Equal items are all replaced (`all`), as the model does.
                                let all = cur.iter().filter(|i| **i == cur[j]).count() > 1;
                                let target = cur[j].clone();
                                for i in cur.iter_mut().filter(|i| **i == target) {
                                    *i = item.clone();
                                }
                                WriteOp::StrReplace {
                                    old: old + "\n",
                                    new: new + "\n",
                                    all,
                                }
                            }
                            Action::ReplaceLines(..) => {
                                let start = cur[..j].iter().map(Item::lines).sum::<usize>() + 1;
                                let end = start + cur[j].lines() - 1;
                                cur[j] = item;
                                WriteOp::ReplaceLines {
                                    start,
                                    end,
                                    text: new + "\n",
                                }
                            }
                            _ => {
                                // Search/replace hits the first equal item.
                                let first = cur.iter().position(|i| *i == cur[j]).unwrap_or(j);
                                cur[first] = item;
                                WriteOp::SearchReplace {
                                    search: old + "\n",
                                    replace: new + "\n",
                                }
                            }
                        };
                        op
                    }
                }
            };
            out.push((write(op), cur.clone()));
        }
        (baseline, out)
    }

    fn trace_of(writes: &[(Write, Vec<Item>)]) -> CanonicalTrace {
        let mut t = CanonicalTrace::new("generated", vec![]);
        for (w, _) in writes {
            let mut turn = Turn::new(Actor::new("engineer", None), TurnKind::Implementation);
            turn.writes.push(w.clone());
            t.push_turn(turn);
        }
        t
    }

    fn anchor() -> FailureAnchor {
        FailureAnchor {
            artefact: "app.py".into(),
            fragment: Some(FRAGMENT.into()),
            category: DeficiencyCategory::VulnerabilityIntroduced,
            cwe: "CWE-327".into(),
            description: "ECB mode".into(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn generated_histories_keep_the_invariants(
            base in prop::collection::vec(any::<u8>(), 0..6),
            actions in prop::collection::vec(action(), 0..8),
        ) {
            let (baseline, writes) = build(&base, &actions);
            let baselines = BTreeMap::from([("app.py".to_string(), render(&baseline))]);
            let h = reconstruct(&baselines, &trace_of(&writes));
            // Every generated write applies, and each snapshot is the model's state.
            prop_assert!(h.failures.is_empty(), "{:?}", h.failures);
            prop_assert_eq!(h.snapshots.len(), writes.len());
            for (s, (_, model)) in h.snapshots.iter().zip(&writes) {
                let want = render(model);
                prop_assert_eq!(s.content.as_deref(), Some(want.as_str()), "write {}", s.write);
            }
            let model: Vec<bool> = std::iter::once(has_fragment(&baseline))
                .chain(writes.iter().map(|(_, m)| has_fragment(m)))
                .collect();

            let r = provenance(&anchor(), &h);
            let seen: Vec<bool> = r.presence.iter().map(|p| p.present).collect();
            prop_assert_eq!(&seen, &model, "token matching disagrees with the model");
            match r.provenance {
                Provenance::Inherited => {
                    prop_assert!(r.introducing_write.is_none());
                    prop_assert!(model.iter().all(|p| *p));
                }
                Provenance::NoCodeLocation => {
                    prop_assert!(r.introducing_write.is_none());
                    prop_assert!(!model[model.len() - 1]);
                }
                Provenance::AgentIntroduced => {
                    let iw = r.introducing_write.expect("agent-introduced has an introducing write");
                    let idx = iw.write; // one write per turn, every write to app.py
                    prop_assert_eq!(iw.turn, iw.write);
                    prop_assert!(!model[idx - 1], "present just before the introducing write");
                    prop_assert!(model[idx..].iter().all(|p| *p), "absent after the introducing write");
                    prop_assert_eq!(iw.reinstated, model[..idx - 1].iter().any(|p| *p));
                    if model[0] {
                        prop_assert!(iw.reinstated, "baseline fragment must have been eliminated");
                    }
                }
            }
            let c = checks(&anchor(), &h, &r);
            prop_assert!(c.iter().all(|c| c.passed), "{:#?}", c);
        }
    }
}
