//! The canonical trace: every framework's run, normalized into numbered canonical turns.
//!
//! A canonical turn is one agent-authored message together with the tool calls, tool results
//! and artefact writes tied to it. Every item keeps a [`RawRef`] to the raw record it came
//! from, so a judge's quote can be checked against the raw trace (see [`RawStore`]).
//! The JSON form is versioned by [`CANONICAL_VERSION`] and documented in
//! `docs/canonical-trace.md`.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// Version tag written into every canonical trace.
pub const CANONICAL_VERSION: &str = "sage.canonical/1";

/// One agent run in canonical form.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CanonicalTrace {
    /// Always [`CANONICAL_VERSION`].
    pub version: String,
    /// The adapter that produced this trace (`aider`, `ag2`, ...).
    pub framework: String,
    /// The raw files the trace was read from, as given to the adapter.
    pub sources: Vec<String>,
    /// Canonical turns, numbered from 1 in trace order.
    pub turns: Vec<Turn>,
    /// Raw records the adapter saw but could not map, each with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<DroppedRecord>,
    /// Anything else the adapter wants a reader to know (e.g. an edit it could not interpret).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The trace's own record of its result (an OpenHands `git_patch`, a SWE-agent or
    /// mini-SWE-agent `info.submission`, a framework's final file state), one entry per
    /// artefact. A submission is no turn's write: it never enters a turn, never reaches a
    /// judge, and is used only to verify the replay of the turns' writes
    /// (`final-state-matches-replay`) or, when the trace has no write to an artefact, as
    /// that artefact's only known final state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub submissions: Vec<Write>,
}

impl CanonicalTrace {
    /// A trace of `framework` read from `sources`, with no turns yet.
    pub fn new(framework: impl Into<String>, sources: Vec<String>) -> Self {
        CanonicalTrace {
            version: CANONICAL_VERSION.to_string(),
            framework: framework.into(),
            sources,
            turns: Vec::new(),
            dropped: Vec::new(),
            notes: Vec::new(),
            submissions: Vec::new(),
        }
    }

    /// Move every final-state write out of the turns into [`CanonicalTrace::submissions`]
    /// (adapters attach a submitted patch to some turn; it belongs to no turn). Called once
    /// on every adapter's output by `sage_adapters::normalize`; idempotent.
    pub fn separate_submissions(&mut self) {
        for t in &mut self.turns {
            if !t.writes.iter().any(|w| w.final_state) {
                continue;
            }
            let (fin, steps): (Vec<Write>, Vec<Write>) = std::mem::take(&mut t.writes)
                .into_iter()
                .partition(|w| w.final_state);
            t.writes = steps;
            self.submissions.extend(fin);
        }
    }

    /// Append a turn, giving it the next index (from 1).
    pub fn push_turn(&mut self, mut turn: Turn) -> usize {
        turn.index = self.turns.len() + 1;
        self.turns.push(turn);
        self.turns.len()
    }

    /// The turn with 1-based index `k`.
    pub fn turn(&self, k: usize) -> Option<&Turn> {
        k.checked_sub(1).and_then(|i| self.turns.get(i))
    }

    /// Every write in trace order, with the index of its turn.
    pub fn writes(&self) -> impl Iterator<Item = (usize, &Write)> {
        self.turns
            .iter()
            .flat_map(|t| t.writes.iter().map(move |w| (t.index, w)))
    }

    /// Counts for golden tests and summaries.
    pub fn counts(&self) -> TraceCounts {
        TraceCounts {
            turns: self.turns.len(),
            administrative: self
                .turns
                .iter()
                .filter(|t| t.kind == TurnKind::Administrative)
                .count(),
            tool_calls: self.turns.iter().map(|t| t.tool_calls.len()).sum(),
            tool_results: self.turns.iter().map(|t| t.tool_results.len()).sum(),
            writes: self.turns.iter().map(|t| t.writes.len()).sum(),
            dropped: self.dropped.len(),
            submissions: self.submissions.len(),
        }
    }
}

/// How many of each item a canonical trace holds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct TraceCounts {
    /// Canonical turns.
    pub turns: usize,
    /// Administrative turns (not applicable to scoring).
    pub administrative: usize,
    /// Tool calls over all turns.
    pub tool_calls: usize,
    /// Tool results over all turns.
    pub tool_results: usize,
    /// Writes over all turns (submissions not counted).
    pub writes: usize,
    /// Raw records the adapter could not map.
    pub dropped: usize,
    /// Submitted final states (not writes of any turn).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub submissions: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One canonical turn.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Turn {
    /// 1-based position in the trace.
    pub index: usize,
    /// Who authored the turn.
    pub actor: Actor,
    /// The turn's kind (planning, implementation, review, verification, administrative).
    pub kind: TurnKind,
    /// The agent-authored message (may be absent for a turn that is only a tool call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<TextItem>,
    /// The tool calls the turn makes, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The tool results the turn received, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_results: Vec<ToolResult>,
    /// The artefact writes the turn performs, in order (never a submission).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<Write>,
    /// Positions in `tool_calls` of the calls that change a file by a command or an edit tool
    /// and whose result does not say they failed (set by the adapters' turn classifier). A
    /// call here that produced no write is an edit sage could not replay: the turn still
    /// changed the file it names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edit_calls: Vec<usize>,
}

impl Turn {
    /// A turn with no items yet; its index is set by [`CanonicalTrace::push_turn`].
    pub fn new(actor: Actor, kind: TurnKind) -> Self {
        Turn {
            index: 0,
            actor,
            kind,
            message: None,
            tool_calls: Vec::new(),
            tool_results: Vec::new(),
            writes: Vec::new(),
            edit_calls: Vec::new(),
        }
    }

    /// Every text item of this turn (message, tool-call arguments, tool results, write
    /// contents), each with its raw pointer. A final-state write (a submission that an
    /// adapter left in a turn) is never an item of the turn.
    pub fn text_items(&self) -> Vec<(&str, &RawRef)> {
        let mut out = self.agent_text_items();
        for r in &self.tool_results {
            out.push((r.output.as_str(), &r.raw));
        }
        out
    }

    /// The agent-authored items of this turn: its message, its tool-call arguments and the
    /// new text of its writes. Tool results are the environment's words, not the agent's
    /// reasoning, so a judge's quote must come from one of these.
    pub fn agent_text_items(&self) -> Vec<(&str, &RawRef)> {
        let mut out = Vec::new();
        if let Some(m) = &self.message {
            out.push((m.text.as_str(), &m.raw));
        }
        for c in &self.tool_calls {
            out.push((c.arguments.as_str(), &c.raw));
        }
        for w in self.writes.iter().filter(|w| !w.final_state) {
            if let Some(t) = w.op.new_text() {
                out.push((t, &w.raw));
            }
        }
        out
    }

    /// All the text of the turn joined, for judges and search.
    pub fn full_text(&self) -> String {
        self.text_items()
            .iter()
            .map(|(t, _)| *t)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Whether the turn is applicable to scoring: every kind but administrative.
    pub fn is_applicable(&self) -> bool {
        self.kind != TurnKind::Administrative
    }
}

/// Who authored a turn: the agent's name and, where the framework says, its role.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct Actor {
    /// The agent's name as the framework gives it.
    pub name: String,
    /// The agent's role, where the framework records one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

impl Actor {
    /// An actor named `name` with an optional role.
    pub fn new(name: impl Into<String>, role: Option<&str>) -> Self {
        Actor {
            name: name.into(),
            role: role.map(str::to_string),
        }
    }
}

/// The workflow stage a turn belongs to. Administrative turns are kept but never scored.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum TurnKind {
    /// Analyses the task or plans the change.
    Planning,
    /// Changes the code.
    Implementation,
    /// Reviews a change.
    Review,
    /// Runs tests or checks a change.
    Verification,
    /// Framework bookkeeping with no agent reasoning (not scored).
    Administrative,
}

impl TurnKind {
    /// The kind's name as written in canonical traces and results (`planning`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TurnKind::Planning => "planning",
            TurnKind::Implementation => "implementation",
            TurnKind::Review => "review",
            TurnKind::Verification => "verification",
            TurnKind::Administrative => "administrative",
        }
    }

    /// The kind named `s` (the inverse of [`TurnKind::as_str`]).
    pub fn parse(s: &str) -> Option<TurnKind> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "planning" | "plan" => TurnKind::Planning,
            "implementation" | "implement" | "coding" => TurnKind::Implementation,
            "review" => TurnKind::Review,
            "verification" | "verify" | "test" | "testing" => TurnKind::Verification,
            "administrative" | "admin" => TurnKind::Administrative,
            _ => return None,
        })
    }
}

/// A piece of text with the raw record it came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TextItem {
    /// The text, exactly as the raw record holds it.
    pub text: String,
    /// Where the text lives in the raw trace.
    pub raw: RawRef,
}

/// A tool call made by the agent in this turn.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolCall {
    /// The call's id, when the framework gives one (results name it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments as the trace recorded them (usually JSON text).
    pub arguments: String,
    /// Where the call lives in the raw trace.
    pub raw: RawRef,
}

/// A tool result returned to the agent in this turn.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolResult {
    /// The id of the call this result answers, when the framework gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The tool's output text.
    pub output: String,
    /// The framework marked the result as an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Where the result lives in the raw trace.
    pub raw: RawRef,
}

/// A change to an artefact recorded in the trace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Write {
    /// The artefact's path, as the task names it (relative, `/` separated).
    pub artefact: String,
    /// The edit the write performs.
    pub op: WriteOp,
    /// How the trace expressed the write (tool name, edit format, shell command, ...).
    pub via: String,
    /// True when this write is the final state only (a submitted patch or final file), not an
    /// intermediate step: a trace whose writes are all final-state is `final-only`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub final_state: bool,
    /// Where the write lives in the raw trace.
    pub raw: RawRef,
}

/// The edit a write performs. Applied to the previous snapshot by the artefact history (`sage-history`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum WriteOp {
    /// The artefact's whole new content.
    FullContent {
        /// The whole new content.
        content: String,
    },
    /// Search/replace (Aider's SEARCH/REPLACE block): the first occurrence of `search` is
    /// replaced; an empty `search` appends to (or creates) the file.
    SearchReplace {
        /// The text to find (empty: append or create).
        search: String,
        /// The text that replaces it.
        replace: String,
        /// What the recording editor accepts when `search` is not in the file as written.
        /// Absent in a canonical trace: [`Tolerance::LinesThenElision`], what every
        /// search/replace got before the tolerance was written on the op.
        #[serde(
            default = "Tolerance::lines_then_elision",
            skip_serializing_if = "Tolerance::is_lines_then_elision"
        )]
        tolerance: Tolerance,
    },
    /// `str_replace`: `old` must occur exactly once unless `all` is set.
    StrReplace {
        /// The text to replace.
        old: String,
        /// The replacement.
        new: String,
        /// Replace every occurrence, not exactly one.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        all: bool,
        /// What the recording editor accepts when `old` is not in the file as written.
        /// Absent in a canonical trace: [`Tolerance::TrimmedRetry`], what every
        /// `str_replace` got before the tolerance was written on the op.
        #[serde(
            default = "Tolerance::trimmed_retry",
            skip_serializing_if = "Tolerance::is_trimmed_retry"
        )]
        tolerance: Tolerance,
    },
    /// Insert `text` after line `after_line` (0 = at the top).
    Insert {
        /// The line after which `text` goes (0 = the top).
        after_line: usize,
        /// The inserted text.
        text: String,
    },
    /// Replace lines `start..=end` (1-based, inclusive) with `text` (SWE-agent's `edit N:M`).
    ReplaceLines {
        /// First replaced line (1-based).
        start: usize,
        /// Last replaced line (inclusive).
        end: usize,
        /// The replacement lines.
        text: String,
    },
    /// A unified diff of this one artefact.
    UnifiedDiff {
        /// The diff's text, verbatim.
        diff: String,
    },
    /// The artefact was deleted.
    Delete,
    /// The artefact as a shell command left it when sage ran the command again in its
    /// sandbox (replay by execution): the whole new content, or none when the command deleted
    /// it. The write's raw pointer is the command's.
    Executed {
        /// The whole new content (`None`: deleted).
        content: Option<String>,
    },
}

/// How far a search/replace or `str_replace` may stray from the file and still apply, as the
/// editor that recorded it behaves: data the adapter puts on the op, so the history applies
/// the edit without knowing which format it came from. (Every editor also reads a CRLF file
/// with universal newlines; that is not a tolerance of one editor and is always tried.)
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Tolerance {
    /// The text must occur in the file as written.
    Exact,
    /// Aider's fallbacks: whole lines matched ignoring surrounding whitespace (the replacement
    /// re-indented), then `...` lines eliding unchanged code in both blocks.
    LinesThenElision,
    /// openhands-aci's: an `old` that is not found is retried once with both texts stripped of
    /// surrounding whitespace (only when that finds exactly one occurrence).
    TrimmedRetry,
}

impl Tolerance {
    fn lines_then_elision() -> Tolerance {
        Tolerance::LinesThenElision
    }
    fn is_lines_then_elision(&self) -> bool {
        *self == Tolerance::LinesThenElision
    }
    fn trimmed_retry() -> Tolerance {
        Tolerance::TrimmedRetry
    }
    fn is_trimmed_retry(&self) -> bool {
        *self == Tolerance::TrimmedRetry
    }
}

impl WriteOp {
    /// The new text this write brings, if any (where a judge may find a quote).
    pub fn new_text(&self) -> Option<&str> {
        match self {
            WriteOp::FullContent { content } => Some(content),
            WriteOp::SearchReplace { replace, .. } => Some(replace),
            WriteOp::StrReplace { new, .. } => Some(new),
            WriteOp::Insert { text, .. } => Some(text),
            WriteOp::ReplaceLines { text, .. } => Some(text),
            WriteOp::UnifiedDiff { diff } => Some(diff),
            WriteOp::Delete => None,
            WriteOp::Executed { content } => content.as_deref(),
        }
    }

    /// The op's name as written in canonical traces (`full-content`, `str-replace`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            WriteOp::FullContent { .. } => "full-content",
            WriteOp::SearchReplace { .. } => "search-replace",
            WriteOp::StrReplace { .. } => "str-replace",
            WriteOp::Insert { .. } => "insert",
            WriteOp::ReplaceLines { .. } => "replace-lines",
            WriteOp::UnifiedDiff { .. } => "unified-diff",
            WriteOp::Delete => "delete",
            WriteOp::Executed { .. } => "executed",
        }
    }
}

/// A record the adapter could not map, with where it is and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DroppedRecord {
    /// Where the record lives in the raw trace.
    pub raw: RawRef,
    /// Why the adapter could not map it.
    pub reason: String,
}

/// A pointer back into a raw trace file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct RawRef {
    /// The raw file, as listed in [`CanonicalTrace::sources`].
    pub file: String,
    /// Where in the file.
    #[serde(flatten)]
    pub at: Locator,
}

/// Where in the raw file an item lives.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(tag = "locator", rename_all = "kebab-case")]
pub enum Locator {
    /// Byte range `start..end` of the file; the item's text is exactly these bytes.
    Bytes {
        /// First byte.
        start: usize,
        /// One past the last byte.
        end: usize,
    },
    /// Lines `start..=end` (1-based) of the file.
    Lines {
        /// First line (1-based).
        start: usize,
        /// Last line (inclusive).
        end: usize,
    },
    /// A JSON value: `pointer` (RFC 6901) into the whole file, or into the JSON value that
    /// starts on line `line` (1-based) of a JSON Lines file (or of a file of concatenated,
    /// pretty-printed JSON values). The item's text is the string at the pointer (or the
    /// value's JSON text when it is not a string). When `inner` is set, the string at
    /// `pointer` is itself JSON text (logs that nest JSON in a string field, e.g. AG2's
    /// `json_state`) and `inner` points into it.
    Json {
        /// The line (1-based) where the JSON value starts, for JSON Lines files.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        line: Option<usize>,
        /// RFC 6901 pointer to the value.
        pointer: String,
        /// RFC 6901 pointer into the JSON text held by the string at `pointer`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inner: Option<String>,
    },
    /// Synthesized by sage (e.g. a final-state write taken from the case folder); `what`
    /// says from where. Quotes never verify against a synthetic item.
    Synthetic {
        /// From where sage synthesized the item.
        what: String,
    },
}

impl RawRef {
    /// A byte range `start..end` of `file`.
    pub fn bytes(file: &str, start: usize, end: usize) -> Self {
        RawRef {
            file: file.to_string(),
            at: Locator::Bytes { start, end },
        }
    }
    /// Lines `start..=end` (1-based) of `file`.
    pub fn lines(file: &str, start: usize, end: usize) -> Self {
        RawRef {
            file: file.to_string(),
            at: Locator::Lines { start, end },
        }
    }
    /// The JSON value at `pointer` (in the value starting on `line`, for JSON Lines) of `file`.
    pub fn json(file: &str, line: Option<usize>, pointer: impl Into<String>) -> Self {
        RawRef {
            file: file.to_string(),
            at: Locator::Json {
                line,
                pointer: pointer.into(),
                inner: None,
            },
        }
    }
    /// A value inside the JSON text held by the string at `pointer` (see [`Locator::Json`]).
    pub fn json_inner(
        file: &str,
        line: Option<usize>,
        pointer: impl Into<String>,
        inner: impl Into<String>,
    ) -> Self {
        RawRef {
            file: file.to_string(),
            at: Locator::Json {
                line,
                pointer: pointer.into(),
                inner: Some(inner.into()),
            },
        }
    }
    /// An item sage synthesized (`what` says from where); quotes never verify against it.
    pub fn synthetic(file: &str, what: impl Into<String>) -> Self {
        RawRef {
            file: file.to_string(),
            at: Locator::Synthetic { what: what.into() },
        }
    }

    /// A short human form: `trace.md:12-18`, `chat.json#/3/content`.
    pub fn display(&self) -> String {
        match &self.at {
            Locator::Bytes { start, end } => format!("{}@{}..{}", self.file, start, end),
            Locator::Lines { start, end } if start == end => format!("{}:{}", self.file, start),
            Locator::Lines { start, end } => format!("{}:{}-{}", self.file, start, end),
            Locator::Json {
                line,
                pointer,
                inner,
            } => {
                let mut s = match line {
                    Some(l) => format!("{}:{}#{}", self.file, l, pointer),
                    None => format!("{}#{}", self.file, pointer),
                };
                if let Some(i) = inner {
                    s.push_str(" -> ");
                    s.push_str(i);
                }
                s
            }
            Locator::Synthetic { what } => format!("{} (synthetic: {})", self.file, what),
        }
    }
}

/// Errors resolving a raw pointer.
#[derive(Debug, thiserror::Error)]
pub enum RawError {
    /// The raw file is not in the store.
    #[error("raw file {0} is not loaded")]
    UnknownFile(String),
    /// The raw file could not be read (file, cause).
    #[error("{0}: {1}")]
    Io(String, String),
    /// The pointer lies outside the file.
    #[error("{at}: out of range")]
    OutOfRange {
        /// The pointer.
        at: String,
    },
    /// The pointer's record is not valid JSON.
    #[error("{at}: not valid JSON: {msg}")]
    Json {
        /// The pointer.
        at: String,
        /// The parser's message.
        msg: String,
    },
    /// The pointer names no value in its record.
    #[error("{at}: the pointer names no value")]
    NoValue {
        /// The pointer.
        at: String,
    },
    /// The item was synthesized by sage: there is no raw record to resolve.
    #[error("{at}: synthetic item, no raw record")]
    Synthetic {
        /// The pointer.
        at: String,
    },
}

/// The byte range of the JSON value a pointer starts from, by (file, line of the value's
/// start; `None`: the whole file).
type JsonRoots = HashMap<(String, Option<usize>), std::ops::Range<usize>>;

/// The children of large JSON containers, by (file, byte offset of the container).
type JsonKids = HashMap<(String, usize), Arc<crate::rawjson::Children>>;

/// Containers at least this large keep their children's ranges once read; a smaller one
/// (a record) is read again on each use, which costs O(the record).
const KEEP_CHILDREN: usize = 4096;

/// The raw trace files of one trace, loaded once, resolving [`RawRef`]s to their text.
///
/// This is what makes quotes checkable: a quote verifies only if it occurs in the text that
/// the raw record itself holds, re-read from disk, not in the adapter's copy of it.
///
/// Resolving takes `&self`: one store serves every thread that verifies quotes of its trace
/// (the caches below fill on first use behind locks), so the raw bytes are held once.
#[derive(Debug, Default)]
pub struct RawStore {
    files: HashMap<String, Vec<u8>>,
    /// JSON pointers resolve over the raw bytes ([`crate::rawjson`]): where each document
    /// starts, checked once, and the children of its large containers.
    json_roots: RwLock<JsonRoots>,
    json_kids: RwLock<JsonKids>,
    /// Byte offset of every line start, per file, indexed on first use: resolving a line
    /// pointer costs O(the record), not O(the file), so a long trace stays linear.
    line_starts: HashMap<String, OnceLock<Vec<usize>>>,
    /// Bytes scanned to build line indexes (a work counter the tests check).
    scanned: AtomicU64,
}

impl Clone for RawStore {
    /// The files; the caches refill on use.
    fn clone(&self) -> Self {
        let mut s = RawStore::new();
        for (name, bytes) in &self.files {
            s.insert(name, bytes.clone());
        }
        s
    }
}

impl RawStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Load every source of `trace`, resolving names relative to `base` (the paths a user
    /// gave on the command line). Only regular files of at most `limit` bytes (the input
    /// size limit) are read.
    pub fn load(trace: &CanonicalTrace, base: &Path, limit: u64) -> Result<Self, RawError> {
        let resolve = |f: &str| -> PathBuf {
            if Path::new(f).is_absolute() {
                PathBuf::from(f)
            } else {
                base.join(f)
            }
        };
        Self::load_with(
            trace,
            |f| crate::safe::read_limited(&resolve(f), limit).map_err(|e| e.to_string()),
            |archive| Ok(resolve(archive)),
            limit,
        )
    }

    /// Load the sources of a case's trace: each must be one of the case's `trace_files`
    /// (or a member of one of them), read from inside the case folder `dir` (see
    /// [`crate::safe::read_case_file`], within `limits`). An adapter cannot make sage read
    /// anything else.
    pub fn load_case(
        trace: &CanonicalTrace,
        dir: &Path,
        trace_files: &[String],
        limits: &crate::safe::Limits,
    ) -> Result<Self, RawError> {
        for f in &trace.sources {
            let file = f.split_once("!/").map_or(f.as_str(), |(a, _)| a);
            if !trace_files.iter().any(|t| t == file) {
                return Err(RawError::Io(
                    f.clone(),
                    "not a trace file of the case".into(),
                ));
            }
        }
        Self::load_with(
            trace,
            |f| crate::safe::read_case_file(dir, f, limits).map_err(|e| e.to_string()),
            |archive| {
                crate::safe::resolve_case_path(dir, archive, limits).map_err(|e| e.to_string())
            },
            limits.max_input_bytes,
        )
    }

    fn load_with(
        trace: &CanonicalTrace,
        read: impl Fn(&str) -> Result<Vec<u8>, String>,
        archive_path: impl Fn(&str) -> Result<PathBuf, String>,
        limit: u64,
    ) -> Result<Self, RawError> {
        let mut s = RawStore::new();
        for f in &trace.sources {
            // `log.eval!/samples/1_epoch_1.json`: a member of a zip archive.
            let bytes = match f.split_once("!/") {
                Some((archive, member)) => {
                    let ap = archive_path(archive).map_err(|m| RawError::Io(f.clone(), m))?;
                    crate::archive::read_zip_member(&ap, member, limit)
                        .map_err(|m| RawError::Io(f.clone(), m.0))?
                }
                None => read(f).map_err(|m| RawError::Io(f.clone(), m))?,
            };
            s.insert(f, bytes);
        }
        Ok(s)
    }

    /// Bytes scanned so far to index line starts (each file is scanned at most once).
    pub fn bytes_scanned(&self) -> u64 {
        self.scanned.load(Ordering::Relaxed)
    }

    /// Load `name`'s bytes (replacing an earlier load of the same name).
    pub fn insert(&mut self, name: &str, bytes: Vec<u8>) {
        self.line_starts.insert(name.to_string(), OnceLock::new());
        self.json_roots
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(f, _), _| f != name);
        self.json_kids
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(f, _), _| f != name);
        self.files.insert(name.to_string(), bytes);
    }

    /// The text the raw record holds.
    pub fn resolve(&self, r: &RawRef) -> Result<String, RawError> {
        let data = self
            .files
            .get(&r.file)
            .ok_or_else(|| RawError::UnknownFile(r.file.clone()))?;
        let by_line = matches!(
            r.at,
            Locator::Lines { .. } | Locator::Json { line: Some(_), .. }
        );
        let starts: &[usize] = match self.line_starts.get(&r.file) {
            Some(index) if by_line => index.get_or_init(|| {
                self.scanned.fetch_add(data.len() as u64, Ordering::Relaxed);
                line_starts(data)
            }),
            _ => &[],
        };
        match &r.at {
            Locator::Bytes { start, end } => data
                .get(*start..*end)
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .ok_or(RawError::OutOfRange { at: r.display() }),
            Locator::Lines { start, end } => {
                if *start == 0 || *start > *end || *end > starts.len() {
                    return Err(RawError::OutOfRange { at: r.display() });
                }
                let from = starts[start - 1];
                let to = starts.get(*end).copied().unwrap_or(data.len());
                Ok(String::from_utf8_lossy(&data[from..to]).into_owned())
            }
            Locator::Json {
                line,
                pointer,
                inner,
            } => {
                let root = cached(&self.json_roots, (r.file.clone(), *line), || {
                    let from = match line {
                        None => 0,
                        Some(l) => line_start(starts, data.len(), *l)
                            .ok_or(RawError::OutOfRange { at: r.display() })?,
                    };
                    // The first JSON value from there on: the line of a JSON Lines file, or
                    // a pretty-printed value spanning several lines.
                    crate::rawjson::first_value(data, from).map_err(|e| RawError::Json {
                        at: r.display(),
                        msg: e.to_string(),
                    })
                })?;
                let at = self
                    .pointer_range(&r.file, data, root, pointer)
                    .ok_or(RawError::NoValue { at: r.display() })?;
                let v: serde_json::Value =
                    serde_json::from_slice(&data[at]).map_err(|e| RawError::Json {
                        at: r.display(),
                        msg: e.to_string(),
                    })?;
                let v = match inner {
                    None => v,
                    Some(ip) => {
                        let s = v.as_str().ok_or(RawError::NoValue { at: r.display() })?;
                        let nested: serde_json::Value =
                            serde_json::from_str(s).map_err(|e| RawError::Json {
                                at: r.display(),
                                msg: e.to_string(),
                            })?;
                        crate::rawjson::json_pointer(&nested, ip)
                            .cloned()
                            .ok_or(RawError::NoValue { at: r.display() })?
                    }
                };
                Ok(match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                })
            }
            Locator::Synthetic { .. } => Err(RawError::Synthetic { at: r.display() }),
        }
    }

    /// The byte range `pointer` names inside the JSON value at `root` of `file` (RFC 6901,
    /// as [`crate::json_pointer`] resolves it over the parsed value).
    fn pointer_range(
        &self,
        file: &str,
        data: &[u8],
        root: std::ops::Range<usize>,
        pointer: &str,
    ) -> Option<std::ops::Range<usize>> {
        if pointer.is_empty() {
            return Some(root);
        }
        if !pointer.starts_with('/') {
            return None;
        }
        let mut at = root;
        for raw in pointer.split('/').skip(1) {
            let token: std::borrow::Cow<str> = if raw.contains('~') {
                raw.replace("~1", "/").replace("~0", "~").into()
            } else {
                raw.into()
            };
            let read = || {
                crate::rawjson::children(data, at.clone())
                    .map(Arc::new)
                    .ok()
            };
            let kids = if at.len() >= KEEP_CHILDREN {
                cached(&self.json_kids, (file.to_string(), at.start), || {
                    read().ok_or(())
                })
                .ok()?
            } else {
                read()?
            };
            at = crate::rawjson::child(&kids, &token)?;
        }
        Some(at)
    }
}

/// The value under `key`, computed by `make` and kept the first time (an error is not kept).
fn cached<K: std::hash::Hash + Eq, V: Clone, E>(
    map: &RwLock<HashMap<K, V>>,
    key: K,
    make: impl FnOnce() -> Result<V, E>,
) -> Result<V, E> {
    if let Some(v) = map.read().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(v.clone());
    }
    let v = make()?;
    map.write()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, v.clone());
    Ok(v)
}

/// Byte offsets where the lines of `data` start (the lines of `split_inclusive('\n')`).
fn line_starts(data: &[u8]) -> Vec<usize> {
    let mut v = Vec::with_capacity(data.len() / 40 + 1);
    if !data.is_empty() {
        v.push(0);
    }
    v.extend(
        data.iter()
            .enumerate()
            .filter(|(i, b)| **b == b'\n' && i + 1 < data.len())
            .map(|(i, _)| i + 1),
    );
    v
}

/// Byte offset where 1-based line `l` starts, from the file's line-start index.
fn line_start(starts: &[usize], len: usize, l: usize) -> Option<usize> {
    match l {
        0 => None,
        1 => Some(0),
        _ => starts.get(l - 1).copied().filter(|s| *s < len),
    }
}

/// Collapse every run of whitespace to one space and trim: the only normalization a quote
/// gets before it is compared with the raw record.
pub fn normalize_ws(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for w in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// Escape one JSON-pointer reference token (RFC 6901).
pub fn pointer_token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    proptest::proptest! {
        /// The line index resolves exactly what splitting the whole file did.
        #[test]
        fn line_pointers_match_split_inclusive(text in "[a-c\\n]{0,60}", a in 1usize..12, n in 0usize..4) {
            let mut s = RawStore::new();
            s.insert("f", text.as_bytes().to_vec());
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            let b = a + n;
            let got = s.resolve(&RawRef { file: "f".into(), at: Locator::Lines { start: a, end: b } });
            if b <= lines.len() {
                proptest::prop_assert_eq!(got.unwrap(), lines[a - 1..b].concat());
            } else {
                proptest::prop_assert!(got.is_err());
            }
        }
    }

    use super::*;

    #[test]
    fn resolves_every_locator() {
        let mut s = RawStore::new();
        s.insert("a.md", b"one\ntwo\nthree\n".to_vec());
        s.insert("b.json", br#"{"m":[{"content":"hi there"}]}"#.to_vec());
        s.insert("c.jsonl", b"{\"x\":1}\n{\"x\":\"y\"}\n".to_vec());
        assert_eq!(
            s.resolve(&RawRef::lines("a.md", 2, 3)).unwrap(),
            "two\nthree\n"
        );
        assert_eq!(s.resolve(&RawRef::bytes("a.md", 0, 3)).unwrap(), "one");
        assert_eq!(
            s.resolve(&RawRef::json("b.json", None, "/m/0/content"))
                .unwrap(),
            "hi there"
        );
        assert_eq!(
            s.resolve(&RawRef::json("c.jsonl", Some(2), "/x")).unwrap(),
            "y"
        );
        s.insert(
            "d.json",
            b"{\n \"a\": 1\n}\n{\n \"a\": \"two\",\n \"s\": \"{\\\"r\\\": \\\"in\\\"}\"\n}\n"
                .to_vec(),
        );
        assert_eq!(
            s.resolve(&RawRef::json("d.json", Some(4), "/a")).unwrap(),
            "two"
        );
        assert_eq!(
            s.resolve(&RawRef::json_inner("d.json", Some(4), "/s", "/r"))
                .unwrap(),
            "in"
        );
        assert!(s.resolve(&RawRef::json("c.jsonl", Some(9), "/x")).is_err());
        assert!(s.resolve(&RawRef::lines("a.md", 3, 9)).is_err());
        assert!(s.resolve(&RawRef::json("b.json", None, "/nope")).is_err());
        assert!(s.resolve(&RawRef::lines("zzz", 1, 1)).is_err());
        assert!(s.resolve(&RawRef::synthetic("a.md", "final")).is_err());
    }

    #[test]
    fn whitespace_normalization() {
        assert_eq!(normalize_ws("  a \n\t b  c "), "a b c");
    }

    #[test]
    fn canonical_json_round_trip() {
        let mut t = CanonicalTrace::new("aider", vec!["x.md".into()]);
        let mut turn = Turn::new(Actor::new("planner", Some("assistant")), TurnKind::Planning);
        turn.message = Some(TextItem {
            text: "Use AES".into(),
            raw: RawRef::lines("x.md", 1, 1),
        });
        turn.writes.push(Write {
            artefact: "app.py".into(),
            op: WriteOp::StrReplace {
                old: "a".into(),
                new: "b".into(),
                all: false,
                tolerance: crate::Tolerance::TrimmedRetry,
            },
            via: "str_replace".into(),
            final_state: false,
            raw: RawRef::lines("x.md", 1, 1),
        });
        assert_eq!(t.push_turn(turn), 1);
        let j = serde_json::to_string(&t).unwrap();
        let back: CanonicalTrace = serde_json::from_str(&j).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.counts().writes, 1);
    }

    /// A store holding `t.jsonl`, `n` records `{"i": i, "t": "line i"}`, and its length.
    fn jsonl_store(n: usize) -> (RawStore, u64) {
        let text: String = (0..n)
            .map(|i| format!("{{\"i\":{i},\"t\":\"line {i}\"}}\n"))
            .collect();
        let len = text.len() as u64;
        let mut s = RawStore::new();
        s.insert("t.jsonl", text.into_bytes());
        (s, len)
    }

    #[test]
    fn attack_jsonl_pointer_check_rescans_the_file_for_every_line() {
        // Before: resolving the pointer of line n scanned the file from its start to find
        // line n, so checking every line of a JSON Lines file read it n²/2 times over.
        let n = 3000;
        let (s, len) = jsonl_store(n);
        for i in 0..n {
            let got = s
                .resolve(&RawRef::json("t.jsonl", Some(i + 1), "/t"))
                .unwrap();
            assert_eq!(got, format!("line {i}"));
            let l = s.resolve(&RawRef::lines("t.jsonl", i + 1, i + 1)).unwrap();
            assert!(l.contains(&format!("line {i}\"")));
        }
        assert_eq!(
            s.bytes_scanned(),
            len,
            "the file was scanned more than once"
        );
    }

    #[test]
    fn one_store_serves_every_thread_and_scans_each_file_once() {
        // Quote verification runs on every driver thread against the trace's one store
        // (it used to be cloned per batch and locked per turn).
        let n = 400;
        let (mut s, len) = jsonl_store(n);
        s.insert("doc.json", br#"{"a": {"b": "whole"}}"#.to_vec());
        std::thread::scope(|scope| {
            for t in 0..4 {
                let s = &s;
                scope.spawn(move || {
                    for i in (0..n).rev().skip(t) {
                        let got = s.resolve(&RawRef::json("t.jsonl", Some(i + 1), "/t"));
                        assert_eq!(got.unwrap(), format!("line {i}"));
                        let whole = s.resolve(&RawRef::json("doc.json", None, "/a/b"));
                        assert_eq!(whole.unwrap(), "whole");
                    }
                });
            }
        });
        assert_eq!(s.bytes_scanned(), len, "t.jsonl indexed more than once");
        // A clone holds the files and refills its caches.
        let c = s.clone();
        assert_eq!(c.bytes_scanned(), 0);
        let got = c.resolve(&RawRef::json("t.jsonl", Some(7), "/i")).unwrap();
        assert_eq!(got, "6");
        // Replacing a file drops what was cached of it.
        s.insert("doc.json", br#"{"a": {"b": "new"}}"#.to_vec());
        let got = s.resolve(&RawRef::json("doc.json", None, "/a/b")).unwrap();
        assert_eq!(got, "new");
    }

    #[test]
    fn raw_files_are_regular_files_of_the_case() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("t.md"), "hello\n").unwrap();
        let t = CanonicalTrace::new("x", vec!["t.md".into()]);
        assert!(RawStore::load_case(&t, d.path(), &["t.md".into()], &Default::default()).is_ok());
        // a source the manifest does not name is refused, even inside the folder
        assert!(
            RawStore::load_case(&t, d.path(), &["other.md".into()], &Default::default()).is_err()
        );
        let t = CanonicalTrace::new("x", vec!["/etc/hostname".into()]);
        assert!(
            RawStore::load_case(&t, d.path(), &["/etc/hostname".into()], &Default::default())
                .is_err()
        );
    }
}
