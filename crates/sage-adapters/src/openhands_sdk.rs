//! OpenHands SDK (V1) conversation events (`OpenHands/software-agent-sdk`): every event has a
//! `kind` discriminator. `FileEditorObservation.old_content/new_content` hold the FULL file
//! before/after each edit, so every successful edit is a full-content write (a per-write
//! snapshot) and the first `old_content` of a file is its baseline.
//!
//! Input: an event list (`traj_*.json`), JSON Lines of events (`events.jsonl`), one event per
//! file (`events/event-NNNNN-<uuid>.json`, given in order), or a benchmark `output.jsonl`
//! whose records hold the events in `history` (first record; `test_result.git_patch`, when
//! present, becomes the final-state writes).

use crate::support::*;
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::{Actor, CanonicalTrace, RawRef, TextItem, Turn, TurnKind, WriteOp};
use serde_json::Value;
use std::collections::BTreeMap;

pub struct OpenHandsSdk;

impl Adapter for OpenHandsSdk {
    fn name(&self) -> &'static str {
        "openhands-sdk"
    }
    fn versions(&self) -> &'static str {
        "OpenHands SDK / V1 conversation events (Oct 2025 `output`/`error` observations and 2026 \
         `content`/`is_error`); event lists, JSON Lines, per-event files, benchmark output.jsonl"
    }
    fn normalize_seen(
        &self,
        files: &[SourceFile],
    ) -> Result<(CanonicalTrace, crate::seen::Seen), AdapterError> {
        let main = crate::support::main_file(files)?;
        let (t, full) = normalize_with_baselines(files)?;
        let seen = crate::seen::Seen::shown(&main.name, full, "old_content", Default::default());
        Ok((t, seen))
    }
}

/// The canonical trace and the pre-edit contents the trace records (`old_content` of the
/// first edit of each file).
pub(crate) fn normalize_with_baselines(
    files: &[SourceFile],
) -> Result<(CanonicalTrace, BTreeMap<String, String>), AdapterError> {
    let main = crate::support::main_file(files)?;
    let mut cx = Ctx::new(files);
    // One event per file: every file is an event.
    if files.len() > 1 {
        for f in files {
            let v = read_json(f)?;
            cx.file = f.name.clone();
            cx.line = None;
            cx.event(&v, "");
        }
        return Ok(cx.finish());
    }
    let text = main.read_text()?;
    let lead = text.trim_start();
    let first_line_json = serde_json::from_str::<Value>(lead.lines().next().unwrap_or("")).ok();
    match first_line_json {
        Some(v) if lead.trim_end().lines().nth(1).is_some() && v.is_object() => {
            drop(text);
            // JSON Lines: events, or benchmark records with a history.
            let mut first_record = true;
            for_each_json_line(main, |n, v| {
                cx.line = Some(n);
                match v {
                    Err(e) => cx.b.drop_record(RawRef::json(&main.name, Some(n), ""), e),
                    Ok(v) if v.get("history").is_some() => {
                        if first_record {
                            first_record = false;
                            cx.record(&v)?;
                        } else {
                            cx.b.drop_record(
                                RawRef::json(&main.name, Some(n), ""),
                                format!(
                                    "another run in the same file (instance {}); sage normalizes \
                                     the first run of an output.jsonl",
                                    v.get("instance_id").map(value_text).unwrap_or_default()
                                ),
                            );
                        }
                    }
                    Ok(v) => cx.event(&v, ""),
                }
                Ok(())
            })?;
        }
        _ => {
            let v = parse_json(&main.name, &text, None)?;
            drop(text);
            match &v {
                Value::Array(items) => {
                    for (i, e) in items.iter().enumerate() {
                        cx.event(e, &ptr("", i));
                    }
                }
                Value::Object(_) if v.get("history").is_some() => cx.record(&v)?,
                Value::Object(_) if v.get("kind").is_some() => cx.event(&v, ""),
                _ => {
                    return Err(AdapterError::new(
                        &main.name,
                        Some("/".into()),
                        "expected a list of events, an event, or a record with a history",
                    ))
                }
            }
        }
    }
    Ok(cx.finish())
}

struct Ctx {
    b: TraceBuilder,
    file: String,
    line: Option<usize>,
    roots: PathRoots,
    last_response: Option<(String, usize)>,
    baselines: BTreeMap<String, String>,
    written: std::collections::BTreeSet<String>,
    final_patch: Option<(String, RawRef)>,
}

impl Ctx {
    fn new(files: &[SourceFile]) -> Self {
        Ctx {
            b: TraceBuilder::new("openhands-sdk", files),
            file: files[0].name.clone(),
            line: None,
            roots: PathRoots::new(["/workspace"]),
            last_response: None,
            baselines: BTreeMap::new(),
            written: Default::default(),
            final_patch: None,
        }
    }

    fn raw(&self, p: &str) -> RawRef {
        RawRef::json(&self.file, self.line, p)
    }

    fn record(&mut self, v: &Value) -> Result<(), AdapterError> {
        if let Some(p) = v
            .pointer("/test_result/git_patch")
            .and_then(Value::as_str)
            .filter(|p| !p.trim().is_empty())
        {
            self.final_patch = Some((p.to_string(), self.raw("/test_result/git_patch")));
        }
        let h = v.get("history").and_then(Value::as_array).ok_or_else(|| {
            AdapterError::new(
                &self.file,
                Some(match self.line {
                    Some(l) => format!("line {l}, /history"),
                    None => "/history".into(),
                }),
                "history is not a list of events",
            )
        })?;
        for (i, e) in h.iter().enumerate() {
            self.event(e, &ptr("/history", i));
        }
        Ok(())
    }

    fn event(&mut self, e: &Value, p: &str) {
        let kind = s(e, "kind").unwrap_or("");
        let source = s(e, "source").unwrap_or("");
        match kind {
            "ActionEvent" => self.action(e, p),
            "ObservationEvent" | "UserRejectObservation" | "AgentErrorEvent" => {
                self.observation(e, kind, p)
            }
            "MessageEvent" => {
                let texts = e
                    .pointer("/llm_message/content")
                    .map(|c| content_texts(c, &ptr(&ptr(p, "llm_message"), "content")))
                    .unwrap_or_default();
                if texts.is_empty() {
                    self.b.drop_record(self.raw(p), "message without text");
                    return;
                }
                for (t, tp) in texts {
                    if source == "agent" {
                        self.b.message(
                            Actor::new("agent", Some("assistant")),
                            TurnKind::Planning,
                            &t,
                            self.raw(&tp),
                        );
                    } else {
                        self.b.user(&t, self.raw(&tp));
                    }
                }
                self.last_response = None;
            }
            "SystemPromptEvent" => {
                let (t, tp) = match e.pointer("/system_prompt/text").and_then(Value::as_str) {
                    Some(t) => (t.to_string(), ptr(&ptr(p, "system_prompt"), "text")),
                    None => (kind.to_string(), ptr(p, "kind")),
                };
                self.b.admin("system", &t, self.raw(&tp));
            }
            "" => self.b.drop_record(self.raw(p), "event without a kind"),
            _ => {
                // State updates, pauses, condensations: bookkeeping.
                let (t, tp) = match e.get("key") {
                    Some(_) => (value_text(e), p.to_string()),
                    None => (kind.to_string(), ptr(p, "kind")),
                };
                self.b.admin(kind, &t, self.raw(&tp));
            }
        }
    }

    fn action(&mut self, e: &Value, p: &str) {
        let response = s(e, "llm_response_id").map(str::to_string);
        // Every non-empty thought block: the first is the turn's message, the others follow
        // it as turns of their own (no block of a split thought is dropped).
        let mut thoughts = e
            .get("thought")
            .map(|c| content_texts(c, &ptr(p, "thought")))
            .unwrap_or_default()
            .into_iter()
            .filter(|(t, _)| !t.trim().is_empty());
        let thought = thoughts.next().or_else(|| {
            ne(e, "reasoning_content").map(|t| (t.to_string(), ptr(p, "reasoning_content")))
        });
        let more: Vec<TextItem> = thoughts
            .map(|(text, tp)| TextItem {
                text,
                raw: self.raw(&tp),
            })
            .collect();
        let same = matches!((&response, &self.last_response), (Some(r), Some((l, _))) if r == l);
        let turn = if same && thought.is_none() {
            self.last_response.as_ref().map(|x| x.1).unwrap_or(0)
        } else {
            let mut t = Turn::new(Actor::new("agent", Some("assistant")), TurnKind::Planning);
            if let Some((text, tp)) = thought {
                t.message = Some(TextItem {
                    text,
                    raw: self.raw(&tp),
                });
            }
            let at = self.b.push(t);
            self.b.continue_message(at, more);
            at
        };
        self.last_response = response.map(|r| (r, turn));
        let id =
            s(e, "tool_call_id").or_else(|| e.pointer("/tool_call/id").and_then(Value::as_str));
        let name = s(e, "tool_name")
            .or_else(|| e.pointer("/tool_call/name").and_then(Value::as_str))
            .or_else(|| e.pointer("/action/kind").and_then(Value::as_str))
            .unwrap_or("action");
        let (args, ap) = match e.pointer("/tool_call/arguments").and_then(Value::as_str) {
            Some(a) => (a.to_string(), ptr(&ptr(p, "tool_call"), "arguments")),
            None => (
                e.get("action").map(value_text).unwrap_or_default(),
                ptr(p, "action"),
            ),
        };
        self.b.call(turn, tool_call(id, name, &args, self.raw(&ap)));
    }

    fn observation(&mut self, e: &Value, kind: &str, p: &str) {
        let obs = e.get("observation").unwrap_or(&Value::Null);
        let op = ptr(p, "observation");
        let call_id = s(e, "tool_call_id");
        // Output text: `output` (Oct 2025), `content:[TextContent]` (2026), `error`.
        let mut texts: Vec<(String, String)> = Vec::new();
        if let Some(t) = s(obs, "output") {
            texts.push((t.to_string(), ptr(&op, "output")));
        }
        if let Some(c) = obs.get("content") {
            texts.extend(content_texts(c, &ptr(&op, "content")));
        }
        if let Some(t) = ne(obs, "error") {
            texts.push((t.to_string(), ptr(&op, "error")));
        }
        if kind == "AgentErrorEvent" {
            if let Some(t) = s(e, "error") {
                texts.push((t.to_string(), ptr(p, "error")));
            }
        }
        if kind == "UserRejectObservation" {
            if let Some(t) = s(e, "rejection_reason") {
                texts.push((t.to_string(), ptr(p, "rejection_reason")));
            }
        }
        let is_error = kind == "AgentErrorEvent"
            || obs
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(false)
            || ne(obs, "error").is_some()
            || obs.get("error").and_then(Value::as_bool).unwrap_or(false);
        if texts.is_empty() {
            texts.push((kind.to_string(), ptr(p, "kind")));
        }
        let mut at = None;
        for (t, tp) in texts {
            let r = tool_result(call_id, &t, is_error, self.raw(&tp));
            at = self.b.result(r).or(at);
        }
        let Some(at) = at else {
            self.b
                .drop_record(self.raw(p), "observation before any agent action");
            return;
        };
        if s(obs, "kind") == Some("FileEditorObservation") && !is_error {
            self.file_edit(at, obs, &op, p);
        }
    }

    fn file_edit(&mut self, at: usize, obs: &Value, op: &str, p: &str) {
        let command = s(obs, "command").unwrap_or("");
        let Some(path) = s(obs, "path") else {
            self.b
                .drop_record(self.raw(p), "file editor observation without a path");
            return;
        };
        let a = self.roots.rel(path);
        if command == "view" {
            // A full `cat -n` view before any write is a baseline.
            let text = s(obs, "output").map(str::to_string).or_else(|| {
                obs.get("content")
                    .map(|c| content_texts(c, ""))
                    .and_then(|v| v.into_iter().next().map(|x| x.0))
            });
            if let Some(t) =
                text.filter(|t| t.contains("cat -n") && !t.contains("<response clipped>"))
            {
                if let Some(full) = parse_numbered_view(&t, '\t').full_text() {
                    self.saw_full(&a, &full);
                }
            }
            return;
        }
        if let Some(old) = s(obs, "old_content") {
            if obs
                .get("prev_exist")
                .and_then(Value::as_bool)
                .unwrap_or(true)
            {
                self.saw_full(&a, old);
            }
        }
        match s(obs, "new_content") {
            Some(new) => {
                self.written.insert(a.clone());
                let raw = self.raw(&ptr(op, "new_content"));
                self.b.write(
                    at,
                    write(
                        a,
                        WriteOp::FullContent {
                            content: new.into(),
                        },
                        &format!("file_editor {command}"),
                        false,
                        raw,
                    ),
                );
            }
            None => self.b.drop_record(
                self.raw(p),
                format!("file editor {command} on {a}: no new content recorded"),
            ),
        }
    }

    fn saw_full(&mut self, a: &str, content: &str) {
        if !self.written.contains(a) && !self.baselines.contains_key(a) {
            self.baselines.insert(a.to_string(), content.to_string());
        }
    }

    fn finish(mut self) -> (CanonicalTrace, BTreeMap<String, String>) {
        if let Some((patch, raw)) = self.final_patch.take() {
            let writes = final_patch_writes(&patch, "git_patch", &raw, &self.roots);
            match self.b.last_agent_turn() {
                Some(at) => writes.into_iter().for_each(|w| self.b.write(at, w)),
                None => self
                    .b
                    .drop_record(raw, "submitted patch but no agent turn to hold it"),
            }
        }
        (self.b.finish(), self.baselines)
    }
}

/// An edit op with the file before and after it, as the trace recorded them.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedEdit {
    pub artefact: String,
    pub op: WriteOp,
    pub before: String,
    pub after: String,
}
