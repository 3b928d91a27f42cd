//! Reconstruction: the baseline and the snapshot after every write, derived from the trace
//! alone (no judge), and what the history answers about them.
//!
//! [`reconstruct`] applies every write of a canonical trace to the baselines in trace order.
//! Edit semantics and the project's decisions are in `docs/design-history.md`.

use crate::apply::*;
use crate::paths::*;
use sage_trace::{CanonicalTrace, RawRef};
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
    /// The workspace roots the history was built with, for naming artefacts later
    /// ([`ArtefactHistory::resolve_name`]); not part of the record.
    #[serde(skip)]
    pub roots: WorkspaceRoots,
}
/// Apply every write to the baselines in trace order (see [`reconstruct_with_final`]; no
/// case final files).
pub fn reconstruct(
    baselines: &BTreeMap<String, String>,
    trace: &CanonicalTrace,
    roots: &WorkspaceRoots,
) -> ArtefactHistory {
    reconstruct_with_final(baselines, trace, &[], roots)
}

/// Apply every turn's write to the baselines in trace order, and derive the recorded final
/// states (the trace's submissions applied to the baseline, the case's final files).
///
/// Writes are numbered from 1 among all writes of the turns (failed ones too). A write that
/// cannot be applied goes to `failures` with its reason and leaves the artefact unchanged.
/// A final-state write still found in a turn is treated as a submission, never applied as a
/// step. Trace paths name baselines under the path rule with the workspace `roots`.
pub fn reconstruct_with_final(
    baselines: &BTreeMap<String, String>,
    trace: &CanonicalTrace,
    case_finals: &[SuppliedFinal],
    roots: &WorkspaceRoots,
) -> ArtefactHistory {
    reconstruct_from(baselines, &[], trace, case_finals, roots)
}

/// [`reconstruct_with_final`] from the one store of file knowledge: its baselines, and its
/// later views put in, each at its point of the history, where nothing else tells of the
/// lines they show (a file the trace shows only in snippets after its edits). Paths are
/// named under the store's workspace roots.
pub fn reconstruct_known(
    known: &crate::knowledge::FileKnowledge,
    trace: &CanonicalTrace,
    case_finals: &[SuppliedFinal],
) -> ArtefactHistory {
    reconstruct_from(
        &known.baselines(),
        known.later_views(),
        trace,
        case_finals,
        known.roots(),
    )
}

fn reconstruct_from(
    baselines: &BTreeMap<String, String>,
    later: &[crate::knowledge::LaterView],
    trace: &CanonicalTrace,
    case_finals: &[SuppliedFinal],
    roots: &WorkspaceRoots,
) -> ArtefactHistory {
    let keys: Vec<String> = baselines.keys().cloned().collect();
    let mut path_matches: BTreeMap<String, String> = BTreeMap::new();
    let mut name_of = |path: &str| -> String {
        let norm = normalize_path(path);
        match match_key(path, &keys, roots) {
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
    // Later views are put in when the history reaches them: after as many of the trace's own
    // writes (executed writes, added by the replay, are not the adapter's to count).
    let mut pending: Vec<&crate::knowledge::LaterView> = later.iter().collect();
    pending.sort_by_key(|v| v.after_writes);
    let mut pending = pending.into_iter().peekable();
    let mut own_writes = 0;
    for (i, (turn, w)) in writes.iter().enumerate() {
        while let Some(v) = pending.next_if(|v| v.after_writes <= own_writes) {
            let n = name_of(&v.artefact);
            let cur = state.get(&n).map(|c| c.as_deref());
            // A file the trace deleted stays deleted.
            if cur.is_some_and(|c| c.is_none()) {
                continue;
            }
            if let Some(filled) = crate::knowledge::fill(cur.flatten(), &v.lines) {
                state.insert(n, Some(filled));
            }
        }
        if !matches!(w.op, sage_trace::WriteOp::Executed { .. }) {
            own_writes += 1;
        }
        let name = name_of(&w.artefact);
        let current = state.get(&name).cloned().flatten();
        let mut result = apply(current.as_deref(), &w.op);
        // An insert needs only its position: into a file nothing is known of, but that the
        // trace shows later (so it exists), it lands after that many unknown lines.
        if let (Err(ApplyError::Missing(_)), sage_trace::WriteOp::Insert { after_line, .. }) =
            (&result, &w.op)
        {
            let shown_later = later.iter().any(|v| name_of(&v.artefact) == name);
            if !state.contains_key(&name) && shown_later {
                let unknown = crate::knowledge::unknown_file(*after_line);
                result = apply(Some(&unknown), &w.op);
            }
        }
        match result {
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
                reason: failure_reason(&reason, state.contains_key(&name), current.as_deref()),
                artefact: name,
                op: w.op.kind().to_string(),
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
        roots: roots.clone(),
    }
}

/// Why a write failed, saying which knowledge it lacked: a file nothing is known of (no
/// baseline, never shown, never created by an earlier write) is not a file that "does not
/// exist", and an edit on a partial baseline may need lines the trace never shows.
fn failure_reason(e: &ApplyError, known: bool, current: Option<&str>) -> String {
    match e {
        ApplyError::Missing(op) if !known => format!(
            "{op}: nothing is known of the file before this write (no baseline, the trace \
             shows none of its lines before it, no earlier write creates it); give it in the \
             case's baseline or with --baseline-dir / --baseline-from"
        ),
        _ if current.is_some_and(crate::knowledge::is_partial) => format!(
            "{e} among the lines the trace shows (only some lines of the file are known: the \
             edit may need lines the trace never shows; give the file with --baseline-dir / \
             --baseline-from)"
        ),
        _ => e.to_string(),
    }
}

/// A unified diff of two states of an artefact (for reports).
pub use sage_patch::make as unified_diff;

impl ArtefactHistory {
    /// The history's name for `artefact` (the baseline key it names under the path rule of
    /// [`match_key`], else the normalized path).
    pub fn resolve_name(&self, artefact: &str) -> String {
        match_key(artefact, self.baselines.keys(), &self.roots)
            .unwrap_or_else(|| normalize_path(artefact))
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
        // A partial baseline's placeholders are shown as what they are.
        Some(unified_diff(
            &crate::knowledge::readable(before),
            &crate::knowledge::readable(after),
            &old_name,
            &new_name,
        ))
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
