//! Artefact history: the baseline and the snapshot after every write, derived from the trace
//! alone (no judge), then code provenance and the introducing write.
//!
//! [`reconstruct`] applies every write of a canonical trace to the baselines in trace order;
//! [`provenance`] compares the anchor fragment (see [`crate::fragment`]) with the baseline and
//! every snapshot of the anchor's artefact; [`checks`] re-derives the history-only automatic
//! checks. Edit semantics and the project's decisions are in `docs/design-history.md`.

use crate::fragment::Matcher;
use sage_trace::case::FailureAnchor;
use sage_trace::{CanonicalTrace, RawRef, WriteOp};
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

/// The reconstructed history of every artefact of a trace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ArtefactHistory {
    /// Artefact path → baseline content (absent for a file the agent created).
    pub baselines: BTreeMap<String, String>,
    /// Every applied write in trace order.
    pub snapshots: Vec<Snapshot>,
    pub failures: Vec<WriteFailure>,
    pub condition: ReconstructionCondition,
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

/// Where the anchor fragment is found: the baseline and after each write to its artefact.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Presence {
    /// `None` for the baseline, else the write's position.
    pub write: Option<usize>,
    pub turn: Option<usize>,
    pub present: bool,
}

/// The introducing write: the write and its turn.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct IntroducingWrite {
    pub write: usize,
    pub turn: usize,
    /// True when an earlier write had introduced the fragment, a later one removed it, and
    /// this one reinstated it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reinstated: bool,
}

/// Code provenance and the introducing write of one anchor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProvenanceResult {
    pub provenance: Provenance,
    pub introducing_write: Option<IntroducingWrite>,
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

/// An artefact path as compared: `/` separators, no leading `./`.
pub fn normalize_path(p: &str) -> String {
    let mut s = p.trim().replace('\\', "/");
    while let Some(rest) = s.strip_prefix("./") {
        s = rest.to_string();
    }
    s
}

/// The result of applying one write to an artefact's content.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The content after the write; `None` when the artefact was deleted.
    pub content: Option<String>,
    /// A search/replace applied by the whitespace-tolerant line match.
    pub fuzzy: bool,
}

impl Applied {
    fn exact(content: String) -> Result<Applied, String> {
        Ok(Applied {
            content: Some(content),
            fuzzy: false,
        })
    }
}

/// Apply every write to the baselines in trace order.
///
/// Writes are numbered from 1 among all writes of the trace (failed ones too). A write that
/// cannot be applied goes to `failures` with its reason and leaves the artefact unchanged.
pub fn reconstruct(
    baselines: &BTreeMap<String, String>,
    trace: &CanonicalTrace,
) -> ArtefactHistory {
    // Normalized path → the name the history uses (the baseline's own key when there is one).
    let mut names: BTreeMap<String, String> = baselines
        .keys()
        .map(|k| (normalize_path(k), k.clone()))
        .collect();
    let mut state: BTreeMap<String, Option<String>> = baselines
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    let mut snapshots = Vec::new();
    let mut failures = Vec::new();
    let writes: Vec<_> = trace.writes().collect();
    for (i, (turn, w)) in writes.iter().enumerate() {
        let norm = normalize_path(&w.artefact);
        let name = names.entry(norm.clone()).or_insert(norm).clone();
        let current = state.get(&name).cloned().flatten();
        // A submitted patch (final-state diff) is relative to the baseline, not to the last
        // step: apply it there first, and to the current state only when that fails.
        let result = match (&w.op, w.final_state) {
            (WriteOp::UnifiedDiff { .. }, true) => {
                let base = baselines.get(&name).map(String::as_str);
                apply(base, &w.op).or_else(|e| apply(current.as_deref(), &w.op).map_err(|_| e))
            }
            _ => apply(current.as_deref(), &w.op),
        };
        match result {
            Ok(applied) => {
                state.insert(name.clone(), applied.content.clone());
                snapshots.push(Snapshot {
                    write: i + 1,
                    turn: *turn,
                    artefact: name,
                    op: w.op.kind().to_string(),
                    via: w.via.clone(),
                    final_state: w.final_state,
                    fuzzy: applied.fuzzy,
                    content: applied.content,
                    raw: w.raw.clone(),
                });
            }
            Err(reason) => failures.push(WriteFailure {
                write: i + 1,
                turn: *turn,
                artefact: name,
                op: w.op.kind().to_string(),
                reason,
                raw: w.raw.clone(),
            }),
        }
    }
    let condition = if writes.is_empty() {
        ReconstructionCondition::NoWrite
    } else if writes.iter().all(|(_, w)| w.final_state) {
        // Only the final file is known, even when that is a single write.
        ReconstructionCondition::FinalOnly
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
    }
}

/// Apply one edit to `current` (`None`: the artefact does not exist). `Err` is the reason.
pub fn apply(current: Option<&str>, op: &WriteOp) -> Result<Applied, String> {
    match op {
        WriteOp::FullContent { content } => Applied::exact(content.clone()),
        WriteOp::SearchReplace { search, replace } => {
            // Aider: a blank SEARCH appends to the file, creating it if needed.
            if search.trim().is_empty() {
                return Applied::exact(format!("{}{}", current.unwrap_or(""), replace));
            }
            let cur = current.ok_or("search/replace: artefact does not exist")?;
            if let Some(pos) = cur.find(search.as_str()) {
                let mut out = String::with_capacity(cur.len() + replace.len());
                out.push_str(&cur[..pos]);
                out.push_str(replace);
                out.push_str(&cur[pos + search.len()..]);
                return Applied::exact(out);
            }
            match fuzzy_replace(cur, search, replace) {
                Some(out) => Ok(Applied {
                    content: Some(out),
                    fuzzy: true,
                }),
                None => Err(
                    "search/replace: search text not found (exactly or ignoring \
                             indentation and trailing whitespace)"
                        .to_string(),
                ),
            }
        }
        WriteOp::StrReplace { old, new, all } => {
            let cur = current.ok_or("str_replace: artefact does not exist")?;
            if old.is_empty() {
                return Err("str_replace: old text is empty".to_string());
            }
            match cur.matches(old.as_str()).count() {
                0 => Err("str_replace: old text not found".to_string()),
                n if n > 1 && !all => Err(format!(
                    "str_replace: old text occurs {n} times (must occur exactly once)"
                )),
                _ if *all => Applied::exact(cur.replace(old.as_str(), new)),
                _ => Applied::exact(cur.replacen(old.as_str(), new, 1)),
            }
        }
        WriteOp::Insert { after_line, text } => {
            let cur = match current {
                Some(c) => c,
                None if *after_line == 0 => "",
                None => return Err("insert: artefact does not exist".to_string()),
            };
            let lines: Vec<&str> = cur.split_inclusive('\n').collect();
            if *after_line > lines.len() {
                return Err(format!(
                    "insert: line {after_line} is beyond the end of the file ({} lines)",
                    lines.len()
                ));
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
            let cur = current.ok_or("replace-lines: artefact does not exist")?;
            let lines: Vec<&str> = cur.split_inclusive('\n').collect();
            if *start == 0 || end < start || *end > lines.len() {
                return Err(format!(
                    "replace-lines: lines {start}..={end} are not within the file ({} lines)",
                    lines.len()
                ));
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
        }),
        WriteOp::Delete => match current {
            Some(_) => Ok(Applied {
                content: None,
                fuzzy: false,
            }),
            None => Err("delete: artefact does not exist".to_string()),
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

/// One hunk of a unified diff.
#[derive(Debug, Clone, PartialEq)]
struct Hunk {
    header: String,
    /// `None` for Aider-style `@@ ... @@` headers without line numbers.
    old_start: Option<usize>,
    counts: Option<(usize, usize)>,
    /// (`' '` / `'-'` / `'+'`, text, was a bare empty line).
    lines: Vec<(char, String, bool)>,
    old_no_newline: bool,
    new_no_newline: bool,
}

impl Hunk {
    fn seen(&self) -> (usize, usize) {
        let old = self.lines.iter().filter(|l| l.0 != '+').count();
        let new = self.lines.iter().filter(|l| l.0 != '-').count();
        (old, new)
    }
    fn wants_more(&self) -> bool {
        match self.counts {
            None => true,
            Some((o, n)) => {
                let (so, sn) = self.seen();
                so < o || sn < n
            }
        }
    }
    fn finish(mut self) -> Hunk {
        if self.counts.is_none() {
            // A bare empty line at the end of a number-less hunk is the diff's own layout.
            while self.lines.last().is_some_and(|l| l.2) {
                self.lines.pop();
            }
        }
        self
    }
}

#[derive(Debug, Default)]
struct ParsedDiff {
    old_path: Option<String>,
    new_path: Option<String>,
    hunks: Vec<Hunk>,
}

fn parse_hunk_header(line: &str) -> Result<Hunk, String> {
    let bad = || format!("unified diff: malformed hunk header `{line}`");
    let inner = line
        .strip_prefix("@@")
        .and_then(|r| r.find("@@").map(|e| r[..e].trim()))
        .ok_or_else(bad)?;
    let mut hunk = Hunk {
        header: line.trim_end().to_string(),
        old_start: None,
        counts: None,
        lines: Vec::new(),
        old_no_newline: false,
        new_no_newline: false,
    };
    if inner.is_empty() || inner == "..." {
        return Ok(hunk);
    }
    let range = |s: &str, sign: char| -> Option<(usize, usize)> {
        let s = s.strip_prefix(sign)?;
        match s.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((s.parse().ok()?, 1)),
        }
    };
    let mut parts = inner.split_whitespace();
    let (Some(o), Some(n), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let ((os, oc), (_, nc)) = range(o, '-').zip(range(n, '+')).ok_or_else(bad)?;
    hunk.old_start = Some(os);
    hunk.counts = Some((oc, nc));
    Ok(hunk)
}

fn parse_unified_diff(diff: &str) -> Result<ParsedDiff, String> {
    let mut lines: Vec<&str> = diff.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    let mut parsed = ParsedDiff::default();
    let mut hunk: Option<Hunk> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let next_is_new_header = lines.get(i + 1).is_some_and(|n| n.starts_with("+++ "));
        let is_file_header = line.starts_with("--- ") && next_is_new_header;
        if line.starts_with("@@") {
            if let Some(h) = hunk.take() {
                parsed.hunks.push(h.finish());
            }
            hunk = Some(parse_hunk_header(line)?);
            i += 1;
            continue;
        }
        if let Some(h) = hunk.as_mut() {
            if line.starts_with('\\') {
                match h.lines.last().map(|l| l.0) {
                    Some('-') => h.old_no_newline = true,
                    Some('+') => h.new_no_newline = true,
                    _ => {
                        h.old_no_newline = true;
                        h.new_no_newline = true;
                    }
                }
                i += 1;
                continue;
            }
            // While a counted hunk still wants lines, its counts decide (a removed `-- x`
            // line is not a file header). Past its counts (LLM diffs often miscount) or in a
            // hunk without counts, hunk-looking lines still extend it, rather than being
            // dropped as preamble, until a file header.
            let more = h.wants_more();
            let counted = h.counts.is_some() && more;
            let mut chars = line.chars();
            let take = match chars.next() {
                Some(' ' | '-' | '+') => counted || !is_file_header,
                None => more,
                _ => false,
            };
            if take {
                let kind = line.chars().next().unwrap_or(' ');
                h.lines
                    .push((kind, chars.as_str().to_string(), line.is_empty()));
                i += 1;
                continue;
            }
            if let Some(h) = hunk.take() {
                parsed.hunks.push(h.finish());
            }
        }
        if is_file_header {
            if parsed.old_path.is_some() && !parsed.hunks.is_empty() {
                return Err("unified diff: holds more than one file".to_string());
            }
            parsed.old_path = Some(header_path(line));
            parsed.new_path = Some(header_path(lines[i + 1]));
            i += 2;
            continue;
        }
        // Anything else outside a hunk (`diff --git`, `index`, prose) is preamble.
        i += 1;
    }
    if let Some(h) = hunk.take() {
        parsed.hunks.push(h.finish());
    }
    Ok(parsed)
}

fn header_path(line: &str) -> String {
    let p = line[4..].split('\t').next().unwrap_or("").trim();
    p.to_string()
}

/// Apply a unified diff: exact context, hunks in order, each placed at its stated line or at
/// the nearest offset where its old lines match (as `patch` does without fuzz).
fn apply_unified_diff(current: Option<&str>, diff: &str) -> Result<Option<String>, String> {
    // An empty diff (e.g. `git diff` with nothing to report) changes nothing.
    if diff.trim().is_empty() {
        return match current {
            Some(c) => Ok(Some(c.to_string())),
            None => Err("unified diff: empty diff for an artefact that does not exist".into()),
        };
    }
    let parsed = parse_unified_diff(diff)?;
    let creates = parsed.old_path.as_deref() == Some("/dev/null");
    let deletes = parsed.new_path.as_deref() == Some("/dev/null");
    if parsed.hunks.is_empty() && !deletes {
        return Err("unified diff: no hunk found".to_string());
    }
    if creates && current.is_some_and(|c| !c.is_empty()) {
        return Err("unified diff: creates the file (from /dev/null) but it already exists".into());
    }
    let cur = match current {
        Some(c) => c,
        None if parsed
            .hunks
            .iter()
            .all(|h| h.lines.iter().all(|l| l.0 == '+')) =>
        {
            ""
        }
        None => return Err("unified diff: artefact does not exist".to_string()),
    };
    let mut final_newline = cur.is_empty() || cur.ends_with('\n');
    let file: Vec<&str> = {
        let body = cur.strip_suffix('\n').unwrap_or(cur);
        if cur.is_empty() {
            Vec::new()
        } else {
            body.split('\n').collect()
        }
    };
    let mut out: Vec<&str> = Vec::with_capacity(file.len());
    let mut cursor = 0usize; // next unconsumed line of `file`
    let mut offset: isize = 0;
    for (n, h) in parsed.hunks.iter().enumerate() {
        let old: Vec<&str> = h
            .lines
            .iter()
            .filter(|l| l.0 != '+')
            .map(|l| l.1.as_str())
            .collect();
        let stated = h.old_start.map(|s| {
            if old.is_empty() {
                s
            } else {
                s.saturating_sub(1)
            }
        });
        let expected = stated
            .map(|s| (s as isize + offset).clamp(cursor as isize, file.len() as isize) as usize)
            .unwrap_or(cursor);
        let fits = |p: usize| p + old.len() <= file.len() && file[p..p + old.len()] == old[..];
        let pos = if old.is_empty() {
            Some(expected)
        } else {
            // Nearest match to the expected line, searching both ways, never before `cursor`.
            let span = file.len().saturating_sub(old.len());
            (0..=file.len()).find_map(|d| {
                let after = expected + d;
                if after <= span && fits(after) {
                    return Some(after);
                }
                let before = expected.checked_sub(d).filter(|b| *b >= cursor)?;
                fits(before).then_some(before)
            })
        };
        let Some(p) = pos else {
            return Err(hunk_mismatch(n + 1, h, &file, &old, expected));
        };
        if let Some(s) = stated {
            offset = p as isize - s as isize;
        }
        out.extend_from_slice(&file[cursor..p]);
        out.extend(h.lines.iter().filter(|l| l.0 != '-').map(|l| l.1.as_str()));
        cursor = p + old.len();
        if cursor == file.len() {
            final_newline = !h.new_no_newline;
        }
    }
    if deletes {
        return Ok(None);
    }
    out.extend_from_slice(&file[cursor..]);
    let mut text = out.join("\n");
    if final_newline && !out.is_empty() {
        text.push('\n');
    }
    Ok(Some(text))
}

fn hunk_mismatch(n: usize, h: &Hunk, file: &[&str], old: &[&str], expected: usize) -> String {
    let first_diff = old
        .iter()
        .enumerate()
        .find(|(j, l)| file.get(expected + j) != Some(*l));
    let detail = match first_diff {
        Some((j, want)) => match file.get(expected + j) {
            Some(got) => format!(
                "; at line {} expected `{}`, found `{}`",
                expected + j + 1,
                want.trim(),
                got.trim()
            ),
            None => format!("; expected `{}` past the end of the file", want.trim()),
        },
        None => String::new(),
    };
    format!(
        "unified diff: hunk {n} ({}) does not apply: its context and removed lines are not in \
         the file at any offset{detail}",
        h.header
    )
}

/// A unified diff of two states of an artefact (for reports).
pub fn unified_diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string()
}

impl ArtefactHistory {
    /// The history's name for `artefact` (the baseline key, matched after path normalization).
    pub fn resolve_name(&self, artefact: &str) -> String {
        let norm = normalize_path(artefact);
        self.baselines
            .keys()
            .find(|k| normalize_path(k) == norm)
            .cloned()
            .unwrap_or(norm)
    }

    /// Every artefact the history knows: baselines and written files.
    pub fn artefacts(&self) -> Vec<String> {
        let mut names: Vec<String> = self.baselines.keys().cloned().collect();
        for s in &self.snapshots {
            if !names.contains(&s.artefact) {
                names.push(s.artefact.clone());
            }
        }
        names
    }

    pub fn baseline(&self, artefact: &str) -> Option<&str> {
        self.baselines
            .get(&self.resolve_name(artefact))
            .map(String::as_str)
    }

    /// The snapshots of one artefact, in trace order.
    pub fn snapshots_of(&self, artefact: &str) -> Vec<&Snapshot> {
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

    /// The artefact's final content: its last snapshot, else its baseline (`None`: deleted or
    /// never existed).
    pub fn final_content(&self, artefact: &str) -> Option<&str> {
        match self.snapshots_of(artefact).last() {
            Some(s) => s.content.as_deref(),
            None => self.baseline(artefact),
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
    pub fn artefact_diffs(&self, artefact: &str) -> Vec<(usize, String)> {
        self.snapshots_of(artefact)
            .iter()
            .filter_map(|s| self.write_diff(s.write).map(|d| (s.write, d)))
            .collect()
    }
}

/// The fragment's presence in the baseline and after each applied write to `artefact`.
pub fn presence_along(
    matcher: &Matcher,
    history: &ArtefactHistory,
    artefact: &str,
) -> Vec<Presence> {
    let mut out = vec![Presence {
        write: None,
        turn: None,
        present: history
            .baseline(artefact)
            .is_some_and(|b| matcher.found_in(b)),
    }];
    for s in history.snapshots_of(artefact) {
        out.push(Presence {
            write: Some(s.write),
            turn: Some(s.turn),
            present: s.content.as_deref().is_some_and(|c| matcher.found_in(c)),
        });
    }
    out
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
        _ => "the baseline".to_string(),
    }
}

/// Code provenance and the introducing write of `anchor` in `history` (SAGE.md, "Artefact
/// history", and the decisions in `docs/design-history.md`).
pub fn provenance(anchor: &FailureAnchor, history: &ArtefactHistory) -> ProvenanceResult {
    let no_location = |presence, matching: &str, reason: &str| ProvenanceResult {
        provenance: Provenance::NoCodeLocation,
        introducing_write: None,
        presence,
        matching: matching.to_string(),
        reason: reason.to_string(),
    };
    let Some(fragment) = anchor.fragment.as_deref().filter(|f| !f.trim().is_empty()) else {
        return no_location(
            Vec::new(),
            "none",
            "the failure anchor has no code fragment",
        );
    };
    let artefact = history.resolve_name(&anchor.artefact);
    let matcher = matcher_for(fragment, &artefact, history);
    let matching = matcher.method().as_str();
    let presence = presence_along(&matcher, history, &artefact);
    if !presence.iter().any(|p| p.present) {
        let reason =
            format!("fragment found in neither the baseline nor any snapshot of {artefact}");
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
        let reason = if last == 0 {
            format!("fragment present in the baseline and no write changed {artefact}")
        } else {
            format!("fragment present in the baseline and in all {last} snapshot(s) of {artefact}")
        };
        return ProvenanceResult {
            provenance: Provenance::Inherited,
            introducing_write: None,
            presence,
            matching: matching.to_string(),
            reason,
        };
    };
    let intro = &presence[gap + 1];
    let reinstated = presence[..gap].iter().any(|p| p.present);
    let (Some(write), Some(turn)) = (intro.write, intro.turn) else {
        // Unreachable: entries after the baseline are snapshots. Report rather than panic.
        return no_location(
            presence,
            matching,
            "internal: introducing state is the baseline",
        );
    };
    let reason = if reinstated {
        let first = presence.iter().position(|p| p.present).unwrap_or(0);
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
        }),
        presence,
        matching: matching.to_string(),
        reason,
    }
}

/// The automatic checks of SAGE.md that depend on the history only, re-derived from `history`
/// (not from `result.presence`), so a result that disagrees with its history fails them.
/// The origin check (origin turn <= introducing write) belongs to the origin rule.
pub fn checks(
    anchor: &FailureAnchor,
    history: &ArtefactHistory,
    result: &ProvenanceResult,
) -> Vec<Check> {
    let mut out = Vec::new();
    let no_intro = |out: &mut Vec<Check>| {
        let passed = result.introducing_write.is_none();
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
    let fragment = anchor.fragment.as_deref().filter(|f| !f.trim().is_empty());
    let (Some(fragment), false) = (fragment, result.provenance == Provenance::NoCodeLocation)
    else {
        no_intro(&mut out);
        return out;
    };
    let artefact = history.resolve_name(&anchor.artefact);
    let matcher = matcher_for(fragment, &artefact, history);
    let presence = presence_along(&matcher, history, &artefact);
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
                    format!("fragment found in all {} snapshot(s)", presence.len() - 1)
                } else {
                    format!("fragment missing after {}", absent.join(", "))
                },
            ));
            no_intro(&mut out);
        }
        Provenance::AgentIntroduced => {
            let Some(iw) = result.introducing_write else {
                out.push(Check::new(
                    "fragment-present-after-introducing-write",
                    false,
                    "agent-introduced code without an introducing write",
                ));
                return out;
            };
            let idx = presence.iter().position(|p| p.write == Some(iw.write));
            let Some(idx) = idx else {
                out.push(Check::new(
                    "fragment-present-after-introducing-write",
                    false,
                    format!("write {} is not an applied write to {artefact}", iw.write),
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
                if here {
                    format!("fragment found after {}", at(&presence[idx]))
                } else {
                    format!("fragment not found after {}", at(&presence[idx]))
                },
            ));
            let absent = missing(&presence[idx + 1..]);
            out.push(Check::new(
                "fragment-present-in-every-later-snapshot",
                absent.is_empty(),
                if absent.is_empty() {
                    format!(
                        "fragment found in all {} later snapshot(s)",
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
        apply(current, &op).map(|a| a.content)
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

    #[test]
    fn unified_diff_multi_hunk_exact() {
        let d = "--- a/app.py\n+++ b/app.py\n@@ -1,3 +1,3 @@\n l1\n-l2\n+L2\n l3\n@@ -8,3 +8,4 @@\n l8\n l9\n+l9b\n l10\n";
        assert_eq!(
            diff(Some(TEN), d).unwrap().unwrap(),
            "l1\nL2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl9b\nl10\n"
        );
    }

    #[test]
    fn unified_diff_tolerates_offset() {
        // Line numbers off by 3 (as after an unrecorded edit above): patch applies at offset.
        let d = "@@ -2,2 +2,2 @@\n l5\n-l6\n+L6\n";
        assert_eq!(
            diff(Some(TEN), d).unwrap().unwrap(),
            "l1\nl2\nl3\nl4\nl5\nL6\nl7\nl8\nl9\nl10\n"
        );
    }

    #[test]
    fn unified_diff_without_line_numbers_aider_style() {
        let d = "--- app.py\n+++ app.py\n@@ ... @@\n l4\n-l5\n+L5\n\n";
        assert_eq!(
            diff(Some(TEN), d).unwrap().unwrap(),
            "l1\nl2\nl3\nl4\nL5\nl6\nl7\nl8\nl9\nl10\n"
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
    fn unified_diff_with_wrong_counts_keeps_every_line() {
        // The header claims 2 lines on each side; the hunk holds more. Nothing is dropped.
        let d = "--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n l1\n-l2\n+L2\n l3\n-l4\n+L4\n";
        assert_eq!(
            diff(Some(TEN), d).unwrap().unwrap(),
            "l1\nL2\nl3\nL4\nl5\nl6\nl7\nl8\nl9\nl10\n"
        );
        // Too few lines: the next hunk header ends it.
        let d = "@@ -1,5 +1,5 @@\n l1\n-l2\n+L2\n@@ -9,2 +9,2 @@\n-l9\n+L9\n l10\n";
        assert_eq!(
            diff(Some(TEN), d).unwrap().unwrap(),
            "l1\nL2\nl3\nl4\nl5\nl6\nl7\nl8\nL9\nl10\n"
        );
    }

    #[test]
    fn unified_diff_no_newline_at_end_of_file() {
        let d = "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n";
        assert_eq!(diff(Some("a\nb"), d).unwrap().unwrap(), "a\nc\n");
        let d = "@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n";
        assert_eq!(diff(Some("a\nb\n"), d).unwrap().unwrap(), "a\nc");
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
    fn unified_diff_removed_line_starting_with_dashes() {
        // `--- x` inside a counted hunk is a removed line `-- x`, not a file header.
        let d = "@@ -1,2 +1,1 @@\n a\n--- x\n";
        assert_eq!(diff(Some("a\n-- x\n"), d).unwrap().unwrap(), "a\n");
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
        let h = reconstruct(&base("a\n"), &trace(vec![fin, fc()]));
        assert_eq!(h.condition, ReconstructionCondition::PerWrite);
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
                reinstated: false
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
                reinstated: true
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
                reinstated: true
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
mod final_patch_tests {
    use super::*;
    use sage_trace::{Actor, RawRef, Turn, TurnKind, Write};

    #[test]
    fn a_submitted_patch_applies_to_the_baseline_after_step_edits() {
        let mut t = CanonicalTrace::new("t", vec!["t".into()]);
        let mut turn = Turn::new(Actor::new("a", None), TurnKind::Implementation);
        turn.writes.push(Write {
            artefact: "app.py".into(),
            op: WriteOp::StrReplace {
                old: "b = 1".into(),
                new: "b = 2".into(),
                all: false,
            },
            via: "str_replace".into(),
            final_state: false,
            raw: RawRef::lines("t", 1, 1),
        });
        turn.writes.push(Write {
            artefact: "app.py".into(),
            op: WriteOp::UnifiedDiff {
                diff: unified_diff("a = 0\nb = 1\n", "a = 0\nb = 2\n", "a/app.py", "b/app.py"),
            },
            via: "submission".into(),
            final_state: true,
            raw: RawRef::lines("t", 1, 1),
        });
        t.push_turn(turn);
        let baselines: BTreeMap<String, String> =
            [("app.py".to_string(), "a = 0\nb = 1\n".to_string())].into();
        let h = reconstruct(&baselines, &t);
        assert!(h.failures.is_empty(), "{:?}", h.failures);
        assert_eq!(h.final_content("app.py"), Some("a = 0\nb = 2\n"));
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

        #[test]
        fn unified_diffs_from_similar_round_trip(
            a in prop::collection::vec(0u8..4, 0..12),
            b in prop::collection::vec(0u8..4, 0..12),
            a_nl in any::<bool>(),
            b_nl in any::<bool>(),
            radius in 0usize..4,
        ) {
            // Few distinct lines, so hunks have repeated context to confuse a sloppy placer.
            let text = |v: &[u8], nl: bool| {
                let mut s = v.iter().map(|x| format!("line {x}")).collect::<Vec<_>>().join("\n");
                if nl && !s.is_empty() {
                    s.push('\n');
                }
                s
            };
            let (old, new) = (text(&a, a_nl), text(&b, b_nl));
            prop_assume!(old != new);
            let diff = similar::TextDiff::from_lines(&old, &new)
                .unified_diff()
                .context_radius(radius)
                .header("a/app.py", "b/app.py")
                .to_string();
            let got = apply(Some(&old), &WriteOp::UnifiedDiff { diff: diff.clone() });
            prop_assert_eq!(got.map(|a| a.content), Ok(Some(new)), "diff:\n{}", diff);
        }
    }
}
