//! Aider: `.aider.chat.history.md` (plus `.aider.input.history` and an LLM history file when
//! given as extra files). Parsed by code: the chat history is markdown with three kinds of
//! lines, which aider writes with a trailing two-space line break:
//!
//! - `#### text  ` — user input (dropped: not agent-authored),
//! - `> text  ` — aider's own output (tool output, prompts, `Applied edit to`, `Commit`),
//! - anything else — the assistant's reply, verbatim.
//!
//! Each assistant reply is one canonical turn (actor `main`; `architect` and `editor` in
//! architect mode). Its edits are parsed in the edit format aider announced
//! (`> Main model: M with FORMAT edit format`): SEARCH/REPLACE (`diff`, `diff-fenced`),
//! whole-file listings (`whole`), unified diffs (`udiff`) or `*** Begin Patch` (`patch`). An
//! edit becomes a write only if it landed: the block of `>` lines after the reply says
//! `> Applied edit to <path>`, or aider's error report says the other blocks "were applied
//! successfully". Edits that did not land are dropped records with the reason. The `>` block
//! after a reply is the reply's tool result; other `>` blocks (session start, command output)
//! are administrative turns. Aider's error reports sent back to the model (reflections) are
//! not agent-authored and are dropped.
//!
//! Kinds: a reply with edit blocks is `implementation`; the architect's reply is `planning`;
//! a reply without edit blocks is `review` when an earlier write has landed and the user's
//! request was `/ask ...` or asks to review / check / verify (`REVIEW_ASK`), else `planning`.
//!
//! Modes: `/architect X`, `/ask X`, `/code X` set the mode of the replies to X;
//! `> Main model: ... with architect edit format` makes it the session's mode. In architect
//! mode aider echoes the architect's reply as `#### ` lines (the hand-off to the editor coder;
//! dropped as not agent-authored), and the next reply is the editor's (actor `editor`), in the
//! announced editor format (`> Editor model: ...`), else whole if the main format is whole,
//! else SEARCH/REPLACE.

use crate::edits::{self, clean_path};
use crate::mapping::NOT_AGENT_AUTHORED;
use crate::support::TraceBuilder;
use crate::{Adapter, AdapterError, SourceFile};
use regex::Regex;
use sage_trace::normalize_ws;
use sage_trace::{
    Actor, CanonicalTrace, RawRef, TextItem, ToolResult, Turn, TurnKind, Write, WriteOp,
};
use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::LazyLock;

pub struct Aider;

impl Adapter for Aider {
    fn name(&self) -> &'static str {
        "aider"
    }
    fn versions(&self) -> &'static str {
        "aider 0.50-0.86 chat history markdown (+ input history, LLM history); edit formats diff, diff-fenced, whole, udiff, patch, architect/editor-*"
    }
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        let main = crate::support::main_file(files)?;
        let text = main.read_text()?;
        let mut trace = parse_chat_history(&text, &main.name);
        trace.sources = files.iter().map(|f| f.name.clone()).collect();
        for extra in &files[1..] {
            let t = extra.read_text()?;
            trace.notes.push(describe_extra(&t, &extra.name));
        }
        Ok(trace)
    }
}

/// A note on an extra file: the input history (inputs with timestamps) or the LLM history
/// (exact prompts and responses with timestamps). Neither adds turns: the chat history
/// already holds every reply verbatim.
fn describe_extra(t: &str, name: &str) -> String {
    let llm_calls = t.lines().filter(|l| l.starts_with("TO LLM ")).count();
    let llm_resp = t.lines().filter(|l| l.starts_with("LLM RESPONSE ")).count();
    if llm_calls + llm_resp > 0 {
        return format!(
            "{name}: LLM history with {llm_calls} requests and {llm_resp} responses (exact prompts and per-call timestamps; not mapped to turns)"
        );
    }
    let inputs = t.lines().filter(|l| l.starts_with("# 2")).count();
    if inputs > 0 && t.lines().any(|l| l.starts_with('+')) {
        return format!(
            "{name}: input history with {inputs} timestamped user inputs (user input is not agent-authored; not mapped to turns)"
        );
    }
    format!("{name}: extra file not recognized as an aider input or LLM history; ignored")
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Class {
    User,
    Tool,
    Text,
    Blank,
}

fn classify(line: &str) -> Class {
    if line.trim().is_empty() {
        Class::Blank
    } else if line.starts_with("#### ") && (line.ends_with("  ") || line == "#### <blank>") {
        Class::User
    } else if line.starts_with("# aider chat started at")
        || (line.starts_with('>') && (line.ends_with("  ") || line.trim_end() == ">"))
    {
        Class::Tool
    } else {
        Class::Text
    }
}

/// A run of lines of one class (blank lines inside it included, trailing ones not).
#[derive(Debug, Clone)]
struct Segment {
    class: Class,
    /// 0-based line indexes, inclusive.
    first: usize,
    last: usize,
}

/// Where the edits of a reply stand until aider's output says which landed.
struct Pending {
    turn: usize,
    edits: Vec<edits::ParsedEdit>,
    via: String,
}

/// Parse a chat history into canonical turns. Never fails: anything unrecognized is text.
pub(crate) fn parse_chat_history(text: &str, file: &str) -> CanonicalTrace {
    let lines = edits::lines_with_offsets(text);
    let mut segs: Vec<Segment> = Vec::new();
    for (i, (_, l)) in lines.iter().enumerate() {
        let c = classify(l);
        if c == Class::Blank {
            continue;
        }
        match segs.last_mut() {
            // Blank lines never separate: only a line of another class does.
            Some(s) if s.class == c => s.last = i,
            _ => segs.push(Segment {
                class: c,
                first: i,
                last: i,
            }),
        }
    }
    let span = |s: &Segment| -> Range<usize> {
        let start = lines[s.first].0;
        let end = lines[s.last].0 + lines[s.last].1.len();
        start..end
    };

    let mut b = TraceBuilder::new("aider", &[SourceFile::new(file, file)]);
    let mut format = String::from("diff");
    let mut architect = false;
    let mut pending: Option<Pending> = None;
    // Set by a `>` block reporting failed edits: the next text starts with the reflection.
    let mut reflection_due = false;
    let mut failed: Vec<(String, String)> = Vec::new();
    let mut prev: Option<Class> = None;
    let mut editor_next = false;
    let mut editor_format: Option<String> = None;
    // `/architect X`, `/ask X`, ... set the mode of the replies to X.
    let mut exchange_mode: Option<String> = None;
    let mut last_input = String::new();

    for seg in &segs {
        let r = span(seg);
        let body = &text[r.clone()];
        match seg.class {
            Class::User => {
                settle(&mut b, pending.take(), &BTreeSet::new(), &[], false, file);
                let input = user_input(body);
                // Aider hands the architect's reply to the editor coder as user input, so it
                // is echoed as `#### ` lines: that echo starts the editor's reply.
                let echo = b.trace.turns.last().is_some_and(|t| {
                    t.actor.name == "architect"
                        && t.message
                            .as_ref()
                            .is_some_and(|m| normalize_ws(&m.text) == normalize_ws(&input))
                });
                if echo {
                    b.drop_record(
                        RawRef::lines(file, seg.first + 1, seg.last + 1),
                        "not agent-authored: the architect's reply handed to the editor (echo)",
                    );
                    editor_next = true;
                } else {
                    b.drop_record(
                        RawRef::lines(file, seg.first + 1, seg.last + 1),
                        NOT_AGENT_AUTHORED,
                    );
                    editor_next = false;
                    exchange_mode = command_mode(&input);
                    last_input = input;
                }
                reflection_due = false;
            }
            Class::Tool => {
                for l in body.lines() {
                    if let Some(f) = announced_format(l) {
                        if l.starts_with("> Editor model:") {
                            editor_format = Some(f);
                            continue;
                        }
                        architect = f == "architect";
                        format = f;
                    }
                }
                let applied: BTreeSet<String> = body
                    .lines()
                    .filter_map(|l| l.strip_prefix("> Applied edit to "))
                    .map(|p| clean_path(p.trim_end()))
                    .collect();
                let failure = body.contains("failed to match") || body.contains("did not conform");
                let in_architect = architect || exchange_mode.as_deref() == Some("architect");
                if in_architect && body.contains("Edit the files?") {
                    editor_next = true;
                }
                if prev == Some(Class::Text) && !b.trace.turns.is_empty() {
                    let k = b.trace.turns.len() - 1;
                    b.trace.turns[k].tool_results.push(ToolResult {
                        call_id: None,
                        output: body.to_string(),
                        is_error: failure,
                        raw: RawRef::bytes(file, r.start, r.end),
                    });
                    if failure {
                        // Which blocks failed is only known from the reflection that follows.
                        reflection_due = true;
                        failed.clear();
                        // Keep pending until the reflection is read; apply `Applied` lines now.
                        if !applied.is_empty() {
                            let p = pending.take();
                            settle(&mut b, p, &applied, &[], false, file);
                        }
                    } else {
                        settle(&mut b, pending.take(), &applied, &[], false, file);
                    }
                } else {
                    if !reflection_due {
                        settle(&mut b, pending.take(), &applied, &[], false, file);
                    }
                    let mut t =
                        Turn::new(Actor::new("aider", Some("tool")), TurnKind::Administrative);
                    t.message = Some(TextItem {
                        text: body.to_string(),
                        raw: RawRef::bytes(file, r.start, r.end),
                    });
                    b.push(t);
                    if failure {
                        reflection_due = true;
                    }
                }
            }
            Class::Text => {
                let mut start = r.start;
                if reflection_due {
                    // The reflection runs to aider's closing sentence.
                    let end = reflection_end(body).map(|e| r.start + e);
                    let refl_end = end.unwrap_or(r.end);
                    let refl = &text[r.start..refl_end];
                    for b in edits::search_replace_blocks(refl) {
                        let path = failing_path(refl, b.span.start).or(b.path.clone());
                        failed.push((path.unwrap_or_default(), b.search.clone()));
                    }
                    let others_applied = refl.contains("were applied successfully");
                    b.drop_record(
                        RawRef::bytes(file, r.start, refl_end),
                        "not agent-authored: aider's edit-error report sent back to the model",
                    );
                    settle(
                        &mut b,
                        pending.take(),
                        &BTreeSet::new(),
                        &failed,
                        others_applied,
                        file,
                    );
                    reflection_due = false;
                    // Skip blank lines to the rest (the next reply, if on the same run).
                    start = refl_end;
                    while start < r.end && text.as_bytes()[start].is_ascii_whitespace() {
                        start += 1;
                    }
                    if start >= r.end {
                        prev = Some(Class::User);
                        continue;
                    }
                } else {
                    settle(&mut b, pending.take(), &BTreeSet::new(), &[], false, file);
                }
                let msg = &text[start..r.end];
                let in_architect = architect || exchange_mode.as_deref() == Some("architect");
                let (name, role) = if editor_next {
                    ("editor", "editor")
                } else if in_architect {
                    ("architect", "architect")
                } else {
                    ("main", "coder")
                };
                let fmt = match name {
                    // The editor's format: announced, else the main model's family.
                    "editor" => editor_format.clone().unwrap_or_else(|| {
                        if format == "whole" {
                            "whole".into()
                        } else {
                            "editor-any".into()
                        }
                    }),
                    "architect" => "architect".to_string(),
                    _ => match exchange_mode.as_deref() {
                        Some(m @ ("ask" | "help" | "context")) => m.to_string(),
                        _ => format.clone(),
                    },
                };
                let found = parse_edits(msg, &fmt, start);
                let landed_before = b.trace.turns.iter().any(|t| !t.writes.is_empty());
                let kind = if name == "architect" {
                    TurnKind::Planning
                } else if !found.edits.is_empty() {
                    TurnKind::Implementation
                } else if landed_before
                    && (exchange_mode.as_deref() == Some("ask") || REVIEW_ASK.is_match(&last_input))
                {
                    TurnKind::Review
                } else {
                    TurnKind::Planning
                };
                let mut t = Turn::new(Actor::new(name, Some(role)), kind);
                t.message = Some(TextItem {
                    text: msg.to_string(),
                    raw: RawRef::bytes(file, start, r.end),
                });
                let idx = b.push(t) + 1;
                for u in found.uninterpreted {
                    b.note(format!(
                        "{}: edit not interpreted ({}): {}",
                        RawRef::bytes(file, u.span.start, u.span.end).display(),
                        u.reason,
                        u.text
                    ));
                }
                if !found.edits.is_empty() && name != "architect" {
                    pending = Some(Pending {
                        turn: idx,
                        edits: found.edits,
                        via: format!("aider {fmt}"),
                    });
                }
                editor_next = false;
            }
            Class::Blank => {}
        }
        prev = Some(seg.class);
    }
    settle(&mut b, pending.take(), &BTreeSet::new(), &[], false, file);
    b.finish()
}

/// A user request asking to review or check the work so far.
static REVIEW_ASK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(review|check|verify|audit|double-check|look over|is (it|this|that) (safe|secure|correct|right)|safe now)\b")
        .unwrap()
});

/// The user's input without the `#### ` prefixes and aider's trailing two spaces.
fn user_input(body: &str) -> String {
    body.lines()
        .map(|l| l.strip_prefix("#### ").unwrap_or(l).trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The chat mode a slash command sets for its own replies.
fn command_mode(input: &str) -> Option<String> {
    let first = input.lines().next().unwrap_or("").trim();
    let cmd = first.strip_prefix('/')?.split_whitespace().next()?;
    match cmd {
        "architect" | "ask" | "code" | "context" | "help" => Some(cmd.to_string()),
        _ => None,
    }
}

/// `> Main model: M with FORMAT edit format` (also `> Model:`, `> Editor model:`).
fn announced_format(l: &str) -> Option<String> {
    let rest = l
        .strip_prefix("> Main model: ")
        .or_else(|| l.strip_prefix("> Model: "))
        .or_else(|| l.strip_prefix("> Editor model: "))?;
    let i = rest.find(" with ")?;
    let tail = &rest[i + 6..];
    let j = tail.find(" edit format")?;
    Some(tail[..j].trim().to_string())
}

/// Byte offset just past the reflection's closing sentence, if present.
fn reflection_end(body: &str) -> Option<usize> {
    const ENDS: &[&str] = &[
        "Just reply with fixed versions of the",
        "The SEARCH section must exactly match",
    ];
    let mut best = None;
    for (off, l) in edits::lines_with_offsets(body) {
        if ENDS.iter().any(|e| l.starts_with(e)) {
            best = Some(off + l.len());
            if l.starts_with(ENDS[0]) {
                break;
            }
        }
    }
    best
}

/// `## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in PATH`
/// before the block at `at`.
fn failing_path(refl: &str, at: usize) -> Option<String> {
    let before = &refl[..at];
    let l = before
        .lines()
        .rev()
        .find(|l| l.contains("failed to exactly match lines in "))?;
    let p = l.split("failed to exactly match lines in ").nth(1)?;
    Some(clean_path(p))
}

/// The edits of one reply in edit format `fmt`; spans are made absolute with `base`.
fn parse_edits(msg: &str, fmt: &str, base: usize) -> edits::Edits {
    let f = fmt.trim_start_matches("editor-");
    let mut out = match f {
        "whole" => edits::Edits {
            edits: edits::whole_listings(msg)
                .into_iter()
                .map(|l| edits::ParsedEdit {
                    path: l.path,
                    op: WriteOp::FullContent { content: l.content },
                    span: l.content_span,
                })
                .collect(),
            uninterpreted: vec![],
        },
        "udiff" | "udiff-simple" => edits::unified_diffs(msg),
        "patch" => edits::parse_apply_patch(msg),
        "ask" | "help" | "context" | "architect" => edits::Edits::default(),
        // Editor of unknown format: SEARCH/REPLACE blocks, else whole listings (only those
        // aider reports as applied become writes).
        "any" => {
            let e = parse_edits(msg, "diff", 0);
            if e.edits.is_empty() {
                parse_edits(msg, "whole", 0)
            } else {
                e
            }
        }
        _ => {
            let blocks = edits::search_replace_blocks(msg);
            let mut e = edits::Edits::default();
            for b in blocks {
                match b.path {
                    Some(p) => e.edits.push(edits::ParsedEdit {
                        path: clean_path(&p),
                        op: WriteOp::SearchReplace {
                            search: b.search,
                            replace: b.replace,
                            tolerance: sage_trace::Tolerance::LinesThenElision,
                        },
                        span: b.span,
                    }),
                    None => e.uninterpreted.push(edits::Uninterpreted {
                        reason: "SEARCH/REPLACE block without a file name".into(),
                        text: b.search.lines().next().unwrap_or("").to_string(),
                        span: b.span,
                    }),
                }
            }
            e
        }
    };
    for e in &mut out.edits {
        e.span = e.span.start + base..e.span.end + base;
    }
    for u in &mut out.uninterpreted {
        u.span = u.span.start + base..u.span.end + base;
    }
    out
}

/// Turn a reply's pending edits into writes (those that landed) and dropped records (the
/// rest). In whole format only the last listing of a file counts (aider writes them in order).
fn settle(
    b: &mut TraceBuilder,
    pending: Option<Pending>,
    applied: &BTreeSet<String>,
    failed: &[(String, String)],
    others_applied: bool,
    file: &str,
) {
    let Some(p) = pending else { return };
    let is_failed = |e: &edits::ParsedEdit| match &e.op {
        WriteOp::SearchReplace { search, .. } => failed
            .iter()
            .any(|(fp, fs)| (fp.is_empty() || *fp == e.path) && fs == search),
        _ => false,
    };
    for e in p.edits {
        let landed = applied.contains(&e.path) || (others_applied && !is_failed(&e));
        let raw = RawRef::bytes(file, e.span.start, e.span.end);
        if landed {
            if p.turn >= 1 && p.turn <= b.trace.turns.len() {
                b.write(
                    p.turn - 1,
                    Write {
                        artefact: e.path,
                        op: e.op,
                        via: p.via.clone(),
                        final_state: false,
                        raw,
                    },
                );
            }
        } else {
            let why = if is_failed(&e) {
                "edit block failed to match (aider's error report)".to_string()
            } else {
                format!("edit block not applied (no `> Applied edit to {}`)", e.path)
            };
            b.drop_record(raw, why);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\n# aider chat started at 2025-05-04 17:02:36\n\n> Main model: m with diff-fenced edit format  \n\n#### fix it  \n\nI will fix it.\n\n```python\napp.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n\n```python\nother.py\n<<<<<<< SEARCH\ny = 1\n=======\ny = 2\n>>>>>>> REPLACE\n```\n\n> Tokens: 1k sent, 2 received.  \n> Applied edit to app.py  \n> Commit abc1234 fix  \n\n#### thanks  \n\nYou're welcome.\n";

    #[test]
    fn turns_writes_and_landing() {
        let t = parse_chat_history(SAMPLE, "h.md");
        assert_eq!(t.turns.len(), 3, "{:#?}", t.turns);
        assert_eq!(t.turns[0].kind, TurnKind::Administrative);
        assert_eq!(t.turns[1].kind, TurnKind::Implementation);
        assert_eq!(t.turns[1].actor.name, "main");
        assert_eq!(t.turns[1].writes.len(), 1);
        assert_eq!(t.turns[1].writes[0].artefact, "app.py");
        assert_eq!(t.turns[1].tool_results.len(), 1);
        assert_eq!(t.turns[2].kind, TurnKind::Planning);
        let reasons: Vec<_> = t.dropped.iter().map(|d| d.reason.as_str()).collect();
        assert_eq!(
            reasons.iter().filter(|r| **r == NOT_AGENT_AUTHORED).count(),
            2
        );
        assert!(reasons.iter().any(|r| r.contains("other.py")));
        let mut store = sage_trace::RawStore::new();
        store.insert("h.md", SAMPLE.as_bytes().to_vec());
        for turn in &t.turns {
            for (text, raw) in turn.text_items() {
                assert!(store.resolve(raw).unwrap().contains(text));
            }
        }
    }

    #[test]
    fn architect_hand_off_and_review() {
        let h = "# aider chat started at 2025-01-01 00:00:00\n\n> Main model: m with diff edit format  \n\n#### /architect make it safe  \n\n#### make it safe  \n\nUse a safe loader.\n\n> Tokens: 1k sent, 2 received.  \n\n#### Use a safe loader.  \n\napp.py\n```python\n<<<<<<< SEARCH\nyaml.load(x)\n=======\nyaml.safe_load(x)\n>>>>>>> REPLACE\n```\n\n> Tokens: 1k sent, 2 received.  \n> Applied edit to app.py  \n\n#### Please review the change you made.  \n\nIt is fine.\n";
        let t = parse_chat_history(h, "h.md");
        let names: Vec<_> = t
            .turns
            .iter()
            .map(|x| (x.actor.name.as_str(), x.kind))
            .collect();
        assert_eq!(
            names,
            vec![
                ("aider", TurnKind::Administrative),
                ("architect", TurnKind::Planning),
                ("editor", TurnKind::Implementation),
                ("main", TurnKind::Review)
            ]
        );
        assert_eq!(t.turns[2].writes.len(), 1);
        assert!(t
            .dropped
            .iter()
            .any(|d| d.reason.contains("handed to the editor")));
    }

    #[test]
    fn udiff_and_patch_formats() {
        let h = "# aider chat started at 2025-01-01 00:00:00\n\n> Main model: m with udiff edit format  \n\n#### fix  \n\n```diff\n--- app.py\n+++ app.py\n@@ ... @@\n-x = 1\n+x = 2\n```\n\n> Applied edit to app.py  \n\n#### /model n  \n> Main model: n with patch edit format  \n\n#### more  \n\n*** Begin Patch\n*** Update File: app.py\n@@\n-x = 2\n+x = 3\n*** End Patch\n\n> Applied edit to app.py  \n";
        let t = parse_chat_history(h, "h.md");
        let ws: Vec<_> = t.writes().map(|(k, w)| (k, w.op.kind())).collect();
        assert_eq!(ws, vec![(2, "unified-diff"), (4, "search-replace")]);
        let mut store = sage_trace::RawStore::new();
        store.insert("h.md", h.as_bytes().to_vec());
        assert!(crate::verify_raw_refs(&t, &store).is_empty());
    }

    #[test]
    fn formats_are_announced() {
        assert_eq!(
            announced_format("> Main model: gemini/x with whole edit format  ").as_deref(),
            Some("whole")
        );
        assert_eq!(announced_format("> Weak model: q"), None);
    }
}
