//! Claude Code session JSONL (`~/.claude/projects/<cwd>/<sessionId>.jsonl`, v2.x).
//!
//! Streamed line by line. One API response is often split over several `assistant` lines
//! sharing `message.id`: they are one agent turn (a second text block in the same response
//! starts a new turn, since a canonical turn holds one message). `user` lines carry the task,
//! hook feedback (`isMeta`, administrative) or `tool_result` blocks; their structured
//! `toolUseResult` gives the writes: `Write` → full content, `Edit` → `str_replace` (with
//! `replaceAll`), `MultiEdit` → one `str_replace` per edit. `originalFile` (the full file
//! before an edit) and whole-file `Read` results are the baselines. Paths are made relative
//! to the session's `cwd`. `queue-operation`, `file-history-snapshot`, `summary` and `system`
//! lines are administrative.

use crate::support::*;
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::{Actor, CanonicalTrace, RawRef, TextItem, Turn, TurnKind, WriteOp};
use serde_json::Value;
use std::collections::BTreeMap;

pub struct ClaudeCode;

impl Adapter for ClaudeCode {
    fn name(&self) -> &'static str {
        "claude-code"
    }
    fn versions(&self) -> &'static str {
        "Claude Code session JSONL v1.x–v2.x (split API responses grouped by message.id; Edit, \
         MultiEdit, Write with originalFile; sidechains)"
    }
    fn normalize_seen(
        &self,
        files: &[SourceFile],
    ) -> Result<(CanonicalTrace, crate::seen::Seen), AdapterError> {
        let main = crate::support::main_file(files)?;
        let (t, full) = normalize_with_baselines(files)?;
        let seen = crate::seen::Seen::shown(
            &main.name,
            full,
            "whole-file Read or originalFile",
            Default::default(),
        );
        Ok((t, seen))
    }
}

/// The canonical trace and the pre-edit contents it records (`originalFile` of a file's first
/// edit, whole-file `Read` results before any write).
pub(crate) fn normalize_with_baselines(
    files: &[SourceFile],
) -> Result<(CanonicalTrace, BTreeMap<String, String>), AdapterError> {
    let main = crate::support::main_file(files)?;
    let mut cx = Ctx {
        b: TraceBuilder::new("claude-code", files),
        file: main.name.clone(),
        roots: PathRoots::default(),
        response: None,
        baselines: BTreeMap::new(),
        written: Default::default(),
        lines: 0,
        cwds: Vec::new(),
    };
    for_each_json_line(main, |n, v| {
        cx.lines += 1;
        match v {
            Ok(v) => cx.line(n, &v),
            Err(e) => cx.b.drop_record(RawRef::json(&main.name, Some(n), ""), e),
        }
        Ok(())
    })?;
    if cx.lines == 0 {
        return Err(AdapterError::new(&main.name, None, "empty session"));
    }
    Ok((cx.b.finish(), cx.baselines))
}

struct Ctx {
    b: TraceBuilder,
    file: String,
    roots: PathRoots,
    /// The API response being read: (message.id, its current turn, whether that turn has a
    /// message already).
    response: Option<(String, usize, bool)>,
    baselines: BTreeMap<String, String>,
    written: std::collections::BTreeSet<String>,
    lines: usize,
    /// The working directories that are roots, in the order seen.
    cwds: Vec<String>,
}

impl Ctx {
    fn raw(&self, line: usize, p: &str) -> RawRef {
        RawRef::json(&self.file, Some(line), p)
    }

    fn line(&mut self, n: usize, v: &Value) {
        if let Some(cwd) = s(v, "cwd") {
            // A working directory inside one already seen (`cd assets`) is not a new root:
            // names stay relative to the project (`assets/js/app.js`, not `js/app.js`).
            let nested = self.cwds.iter().any(|c| {
                cwd.strip_prefix(c.trim_end_matches('/'))
                    .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1)
            });
            if !nested && !self.cwds.iter().any(|c| c == cwd) {
                self.roots.add(cwd);
                self.cwds.push(cwd.to_string());
            }
        }
        let ty = s(v, "type").unwrap_or("");
        match ty {
            "assistant" => self.assistant(n, v),
            "user" => {
                self.response = None;
                self.user(n, v)
            }
            "" => self.b.drop_record(self.raw(n, ""), "line without a type"),
            _ => {
                // queue-operation, file-history-snapshot, summary, system, progress...
                self.response = None;
                let (text, p) = if let Some(c) = ne(v, "content") {
                    (c.to_string(), "/content".to_string())
                } else if let Some(c) = ne(v, "summary") {
                    (c.to_string(), "/summary".to_string())
                } else {
                    (value_text(v), String::new())
                };
                self.b.admin(ty, &text, self.raw(n, &p));
            }
        }
    }

    fn actor(v: &Value) -> Actor {
        if v.get("isSidechain")
            .and_then(Value::as_bool)
            .unwrap_or(false)
        {
            Actor::new(
                format!("subagent {}", s(v, "agentId").unwrap_or("")).trim_end(),
                Some("assistant"),
            )
        } else {
            Actor::new("claude", Some("assistant"))
        }
    }

    fn assistant(&mut self, n: usize, v: &Value) {
        let id = v
            .pointer("/message/id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let Some(content) = v.pointer("/message/content") else {
            self.b
                .drop_record(self.raw(n, ""), "assistant line without message content");
            return;
        };
        let blocks: Vec<(Value, String)> = match content {
            Value::String(_) => vec![(
                serde_json::json!({"type": "text", "text": content}),
                "/message/content".into(),
            )],
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(k, b)| (b.clone(), ptr("/message/content", k)))
                .collect(),
            _ => Vec::new(),
        };
        for (block, bp) in blocks {
            let ty = s(&block, "type").unwrap_or("");
            let text_field = match ty {
                "text" => Some("text"),
                "thinking" => Some("thinking"),
                _ => None,
            };
            if let Some(f) = text_field {
                let Some(t) = ne(&block, f) else { continue };
                let tp = if bp == "/message/content" {
                    bp.clone()
                } else {
                    ptr(&bp, f)
                };
                let reuse = match &self.response {
                    Some((rid, at, has_msg)) if *rid == id && !id.is_empty() && !has_msg => {
                        Some(*at)
                    }
                    _ => None,
                };
                let item = TextItem {
                    text: t.to_string(),
                    raw: self.raw(n, &tp),
                };
                let at = match reuse {
                    Some(at) => {
                        self.b.trace.turns[at].message = Some(item);
                        at
                    }
                    None => {
                        let mut turn = Turn::new(Self::actor(v), TurnKind::Planning);
                        turn.message = Some(item);
                        self.b.push(turn)
                    }
                };
                self.response = Some((id.clone(), at, true));
            } else if ty == "tool_use" {
                let at = match &self.response {
                    Some((rid, at, _)) if *rid == id && !id.is_empty() => *at,
                    _ => {
                        let at = self.b.push(Turn::new(Self::actor(v), TurnKind::Planning));
                        self.response = Some((id.clone(), at, false));
                        at
                    }
                };
                let args = block.get("input").map(value_text).unwrap_or_default();
                let name = s(&block, "name").unwrap_or("tool");
                self.b.call(
                    at,
                    tool_call(
                        s(&block, "id"),
                        name,
                        &args,
                        self.raw(n, &ptr(&bp, "input")),
                    ),
                );
            } else {
                // redacted_thinking, server tool blocks, images: nothing to quote or replay.
                self.b.drop_record(
                    self.raw(n, &bp),
                    format!("assistant content block of type {ty:?} not mapped"),
                );
            }
        }
    }

    fn user(&mut self, n: usize, v: &Value) {
        let Some(content) = v.pointer("/message/content") else {
            self.b
                .drop_record(self.raw(n, ""), "user line without message content");
            return;
        };
        let meta = v.get("isMeta").and_then(Value::as_bool).unwrap_or(false);
        let add_text = |this: &mut Self, t: &str, p: &str| {
            if meta {
                this.b.admin("hook", t, this.raw(n, p));
            } else {
                this.b.user(t, this.raw(n, p));
            }
        };
        match content {
            Value::String(t) => add_text(self, t, "/message/content"),
            Value::Array(blocks) => {
                for (k, block) in blocks.iter().enumerate() {
                    let bp = ptr("/message/content", k);
                    match s(block, "type") {
                        Some("tool_result") => self.tool_result(n, v, block, &bp),
                        Some("text") => {
                            if let Some(t) = s(block, "text") {
                                add_text(self, t, &ptr(&bp, "text"));
                            }
                        }
                        other => self.b.drop_record(
                            self.raw(n, &bp),
                            format!("user content block of type {other:?} not mapped"),
                        ),
                    }
                }
            }
            _ => self.b.drop_record(
                self.raw(n, "/message/content"),
                "content is neither text nor blocks",
            ),
        }
    }

    fn tool_result(&mut self, n: usize, v: &Value, block: &Value, bp: &str) {
        let call_id = s(block, "tool_use_id");
        let is_error = block
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        // A result split over several text blocks keeps every block: one tool result per
        // block, each with its own pointer (one joined text would have no raw text to
        // point at).
        let mut more: Vec<(String, String)> = Vec::new();
        let (out, op) = match block.get("content") {
            Some(Value::String(t)) => (t.clone(), ptr(bp, "content")),
            Some(c @ Value::Array(_)) => {
                let mut texts = content_texts(c, &ptr(bp, "content")).into_iter();
                let first = texts
                    .next()
                    .unwrap_or_else(|| (value_text(c), ptr(bp, "content")));
                more.extend(texts);
                first
            }
            _ => (String::new(), ptr(bp, "content")),
        };
        let r = tool_result(call_id, &out, is_error, self.raw(n, &op));
        let Some(at) = self.b.result(r) else {
            self.b
                .drop_record(self.raw(n, bp), "tool result before any agent turn");
            return;
        };
        for (t, p) in more {
            let r = tool_result(call_id, &t, is_error, self.raw(n, &p));
            self.b.result(r);
        }
        if is_error {
            return;
        }
        let is_bash = call_id.is_some_and(|id| {
            self.b.trace.turns[at]
                .tool_calls
                .iter()
                .any(|c| c.id.as_deref() == Some(id) && c.name == "Bash")
        });
        if is_bash {
            self.bash(at, call_id);
            return;
        }
        let Some(tur) = v.get("toolUseResult").filter(|x| x.is_object()) else {
            return;
        };
        let tool = call_id
            .and_then(|id| {
                self.b.trace.turns[at]
                    .tool_calls
                    .iter()
                    .find(|c| c.id.as_deref() == Some(id))
                    .map(|c| c.name.clone())
            })
            .unwrap_or_default();
        self.structured(n, at, &tool, tur);
    }

    /// Plain shell edits of a successful Bash call.
    fn bash(&mut self, at: usize, call_id: Option<&str>) {
        let Some(call) = call_id.and_then(|id| {
            self.b.trace.turns[at]
                .tool_calls
                .iter()
                .find(|c| c.id.as_deref() == Some(id))
                .cloned()
        }) else {
            return;
        };
        let Some(cmd) = serde_json::from_str::<Value>(&call.arguments)
            .ok()
            .and_then(|a| s(&a, "command").map(str::to_string))
        else {
            return;
        };
        let mut raw = call.raw.clone();
        if let sage_trace::Locator::Json { pointer, .. } = &mut raw.at {
            *pointer = ptr(pointer, "command");
        }
        for w in shell_writes(&cmd, &self.roots, raw.clone()) {
            match w {
                Ok(w) => {
                    self.written.insert(w.artefact.clone());
                    self.b.write(at, w);
                }
                Err(e) => self.b.drop_record(raw.clone(), e),
            }
        }
    }

    /// The write(s) of one `toolUseResult`.
    fn structured(&mut self, n: usize, at: usize, tool: &str, tur: &Value) {
        // Read: a whole file seen before any write is its baseline.
        if let Some(f) = tur.get("file").filter(|f| f.is_object()) {
            if let (Some(path), Some(c)) = (s(f, "filePath"), s(f, "content")) {
                let whole = f.get("startLine").and_then(Value::as_u64).unwrap_or(1) == 1
                    && f.get("numLines").and_then(Value::as_u64)
                        == f.get("totalLines").and_then(Value::as_u64);
                if whole {
                    let a = self.roots.rel(path);
                    self.saw(&a, c);
                }
            }
            return;
        }
        let Some(path) = s(tur, "filePath") else {
            return;
        };
        let a = self.roots.rel(path);
        if let Some(orig) = s(tur, "originalFile") {
            self.saw(&a, orig);
        }
        let ty = s(tur, "type");
        if let (Some("create" | "update"), Some(c)) = (ty, s(tur, "content")) {
            self.add(
                n,
                at,
                a,
                WriteOp::FullContent { content: c.into() },
                "Write",
                "/toolUseResult/content",
            );
        } else if let Some(edits) = tur.get("edits").and_then(Value::as_array) {
            for (k, e) in edits.iter().enumerate() {
                let old = s(e, "old_string").or_else(|| s(e, "oldString"));
                let new = s(e, "new_string").or_else(|| s(e, "newString"));
                let all = e
                    .get("replace_all")
                    .or_else(|| e.get("replaceAll"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let key = if e.get("new_string").is_some() {
                    "new_string"
                } else {
                    "newString"
                };
                match (old, new) {
                    (Some(o), Some(nw)) => self.add(
                        n,
                        at,
                        a.clone(),
                        WriteOp::StrReplace {
                            old: o.into(),
                            new: nw.into(),
                            all,
                            tolerance: sage_trace::Tolerance::TrimmedRetry,
                        },
                        "MultiEdit",
                        &format!("/toolUseResult/edits/{k}/{key}"),
                    ),
                    _ => self.b.drop_record(
                        self.raw(n, &format!("/toolUseResult/edits/{k}")),
                        "MultiEdit edit without old/new strings",
                    ),
                }
            }
        } else if let (Some(o), Some(nw)) = (s(tur, "oldString"), s(tur, "newString")) {
            let all = tur
                .get("replaceAll")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let via = if tool.is_empty() { "Edit" } else { tool };
            self.add(
                n,
                at,
                a,
                WriteOp::StrReplace {
                    old: o.into(),
                    new: nw.into(),
                    all,
                    tolerance: sage_trace::Tolerance::TrimmedRetry,
                },
                via,
                "/toolUseResult/newString",
            );
        } else if tool == "Write" || tool == "Edit" || tool == "MultiEdit" || tool == "NotebookEdit"
        {
            self.b.drop_record(
                self.raw(n, "/toolUseResult"),
                format!("{tool} result on {a} not interpreted"),
            );
        }
    }

    fn saw(&mut self, a: &str, content: &str) {
        if !self.written.contains(a) && !self.baselines.contains_key(a) {
            self.baselines.insert(a.to_string(), content.to_string());
        }
    }

    fn add(&mut self, n: usize, at: usize, a: String, op: WriteOp, via: &str, p: &str) {
        self.written.insert(a.clone());
        let raw = self.raw(n, p);
        self.b.write(at, write(a, op, via, false, raw));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_result_split_over_text_blocks_keeps_every_block() {
        // As line 988 of the real spotter-fum session: one tool_result, two text blocks.
        let lines = [
            r#"{"type":"user","message":{"role":"user","content":"go"},"cwd":"/p"}"#,
            r#"{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Grep","input":{"pattern":"x"}}]},"cwd":"/p"}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"first block"},{"type":"text","text":"second block"}]}]},"cwd":"/p"}"#,
        ];
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.jsonl");
        std::fs::write(&p, lines.join("\n")).unwrap();
        let (t, _) = normalize_with_baselines(&[SourceFile::new("s.jsonl", &p)]).unwrap();
        let results: Vec<(&str, String)> = t
            .turns
            .iter()
            .flat_map(|t| t.tool_results.iter())
            .map(|r| (r.output.as_str(), r.raw.display()))
            .collect();
        assert_eq!(results.len(), 2, "{results:?}");
        assert_eq!(results[0].0, "first block");
        assert_eq!(results[1].0, "second block");
        assert!(
            results[1].1.contains("/message/content/0/content/1/text"),
            "{results:?}"
        );
        // Every pointer resolves to the block's own text.
        let mut t = t;
        t.sources = vec![p.display().to_string()];
        for turn in &mut t.turns {
            for r in &mut turn.tool_results {
                r.raw.file = p.display().to_string();
            }
        }
        let store = sage_trace::RawStore::load(&t, std::path::Path::new(""), u64::MAX).unwrap();
        let r = &t.turns.iter().flat_map(|t| &t.tool_results).nth(1).unwrap();
        assert_eq!(store.resolve(&r.raw).unwrap(), "second block");
    }
}
