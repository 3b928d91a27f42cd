//! OpenAI Codex CLI rollouts (`~/.codex/sessions/.../rollout-*.jsonl`): one
//! `{timestamp, type, payload}` per line (older rollouts: the response item itself).
//!
//! `response_item`s make the turns: user messages, assistant messages and reasoning summaries
//! (agent text), `function_call` / `custom_tool_call` (tool calls, grouped with the agent text
//! before them), `*_output` (results). `apply_patch` calls (`*** Begin Patch` format, as a
//! custom tool or inside a `shell` command) become writes: added files → full content,
//! updated hunks → `str_replace` of the hunk's old lines by its new lines, deleted files →
//! deletion; a `patch_apply_end` with `success: false` withdraws them, and one with
//! `changes` supplies the writes when no call carried the patch. `session_meta`,
//! `turn_context`, `token_count`, task events and `compacted` are administrative; the
//! `event_msg` copies of messages (`user_message`, `agent_message`, `agent_reasoning`) are
//! not repeated.

use crate::support::*;
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::{Actor, CanonicalTrace, RawRef, TextItem, Turn, TurnKind, WriteOp};
use serde_json::Value;
use std::collections::HashMap;

pub struct Codex;

impl Adapter for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }
    fn versions(&self) -> &'static str {
        "Codex CLI rollout JSONL (codex-rs, 0.2x–0.77: session_meta/response_item/event_msg; \
         apply_patch custom tool and shell forms, patch_apply_end)"
    }
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        let main = crate::support::main_file(files)?;
        let mut cx = Ctx {
            b: TraceBuilder::new("codex", files),
            file: main.name.clone(),
            roots: PathRoots::default(),
            open: None,
            by_call: HashMap::new(),
            lines: 0,
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
            return Err(AdapterError::new(&main.name, None, "empty rollout"));
        }
        Ok(cx.b.finish())
    }
}

struct Ctx {
    b: TraceBuilder,
    file: String,
    roots: PathRoots,
    /// The agent turn that further calls of the same response attach to.
    open: Option<usize>,
    /// call id → (turn, number of writes the call added, index of its first write).
    by_call: HashMap<String, (usize, usize, usize)>,
    lines: usize,
}

impl Ctx {
    fn raw(&self, n: usize, p: &str) -> RawRef {
        RawRef::json(&self.file, Some(n), p)
    }

    fn line(&mut self, n: usize, v: &Value) {
        // Legacy "direct" rollouts (2025): a header line `{id, timestamp, instructions}`, bare
        // response items, and `{"record_type": "state"}` markers between them.
        if v.get("record_type").is_some() && v.get("type").is_none() {
            self.open = None;
            self.b.drop_record(
                self.raw(n, ""),
                "rollout state record (record_type, no content)",
            );
            return;
        }
        if v.get("type").is_none() && v.get("instructions").is_some() && v.get("id").is_some() {
            self.open = None;
            self.b
                .admin("session header", &value_text(v), self.raw(n, ""));
            return;
        }
        let (ty, payload, pp) = match (s(v, "type"), v.get("payload")) {
            (Some(t), Some(p)) => (t.to_string(), p.clone(), "/payload".to_string()),
            // Older rollouts: the response item itself.
            _ => ("response_item".to_string(), v.clone(), String::new()),
        };
        match ty.as_str() {
            "response_item" => self.item(n, &payload, &pp),
            "event_msg" => self.event(n, &payload, &pp),
            "session_meta" | "turn_context" => {
                if let Some(cwd) = s(&payload, "cwd")
                    .or_else(|| payload.pointer("/meta/cwd").and_then(Value::as_str))
                {
                    self.roots.add(cwd);
                }
                self.open = None;
                self.b.admin(&ty, &value_text(&payload), self.raw(n, &pp));
            }
            _ => {
                self.open = None;
                self.b.admin(&ty, &value_text(&payload), self.raw(n, &pp));
            }
        }
    }

    fn agent_turn(&mut self, with_message: Option<TextItem>) -> usize {
        if let (Some(at), None) = (self.open, &with_message) {
            return at;
        }
        if let (Some(at), Some(m)) = (self.open, &with_message) {
            if self.b.trace.turns[at].message.is_none()
                && self.b.trace.turns[at].tool_calls.is_empty()
            {
                self.b.trace.turns[at].message = Some(m.clone());
                return at;
            }
        }
        let mut t = Turn::new(Actor::new("codex", Some("assistant")), TurnKind::Planning);
        t.message = with_message;
        let at = self.b.push(t);
        self.open = Some(at);
        at
    }

    fn item(&mut self, n: usize, p: &Value, pp: &str) {
        let ty = s(p, "type").unwrap_or("");
        match ty {
            "message" => {
                let role = s(p, "role").unwrap_or("");
                let texts = p
                    .get("content")
                    .map(|c| content_texts(c, &ptr(pp, "content")))
                    .unwrap_or_default();
                for (t, tp) in texts {
                    match role {
                        "assistant" => {
                            let item = TextItem {
                                text: t,
                                raw: self.raw(n, &tp),
                            };
                            self.agent_turn(Some(item));
                        }
                        "user" => {
                            self.open = None;
                            self.b.user(&t, self.raw(n, &tp));
                        }
                        _ => {
                            self.open = None;
                            self.b.admin(role, &t, self.raw(n, &tp));
                        }
                    }
                }
            }
            "reasoning" => {
                let summary = p
                    .get("summary")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for (k, x) in summary.iter().enumerate() {
                    if let Some(t) = ne(x, "text") {
                        let item = TextItem {
                            text: t.to_string(),
                            raw: self.raw(n, &format!("{pp}/summary/{k}/text")),
                        };
                        self.agent_turn(Some(item));
                    }
                }
            }
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                let at = self.agent_turn(None);
                let name = s(p, "name").unwrap_or(ty);
                let (args, ap) = match ty {
                    "custom_tool_call" => {
                        (s(p, "input").unwrap_or("").to_string(), ptr(pp, "input"))
                    }
                    "local_shell_call" => (
                        p.get("action").map(value_text).unwrap_or_default(),
                        ptr(pp, "action"),
                    ),
                    _ => (
                        p.get("arguments").map(value_text).unwrap_or_default(),
                        ptr(pp, "arguments"),
                    ),
                };
                let id = s(p, "call_id").or_else(|| s(p, "id"));
                self.b
                    .call(at, tool_call(id, name, &args, self.raw(n, &ap)));
                // apply_patch: the custom tool's input, or a shell command's argument.
                // Where the patch text is inside the arguments, when they are JSON text in a
                // string (`shell` heredocs: `{"command": ["bash", "-lc", "apply_patch <<..."]}`).
                let mut inner: Option<String> = None;
                let patch = if args.contains("*** Begin Patch") {
                    if ty == "custom_tool_call" {
                        Some(args.clone())
                    } else {
                        serde_json::from_str::<Value>(&args).ok().and_then(|a| {
                            a.get("command").and_then(|c| match c {
                                Value::Array(xs) => xs
                                    .iter()
                                    .enumerate()
                                    .filter_map(|(k, x)| x.as_str().map(|x| (k, x)))
                                    .find(|(_, x)| x.contains("*** Begin Patch"))
                                    .map(|(k, x)| {
                                        inner = Some(format!("/command/{k}"));
                                        x.to_string()
                                    }),
                                Value::String(x) => {
                                    inner = Some("/command".into());
                                    Some(x.clone())
                                }
                                _ => None,
                            })
                        })
                    }
                } else {
                    None
                };
                if let Some(patch) = patch {
                    let first = self.b.trace.turns[at].writes.len();
                    let string_args = p.get("arguments").is_some_and(Value::is_string);
                    let raw = match (&inner, string_args) {
                        (Some(i), true) => RawRef::json_inner(&self.file, Some(n), &ap, i),
                        _ => self.raw(n, &ap),
                    };
                    let mut count = 0;
                    for w in apply_patch_writes(&patch, &self.roots, &raw) {
                        match w {
                            Ok(w) => {
                                self.b.write(at, w);
                                count += 1;
                            }
                            Err(e) => self.b.drop_record(raw.clone(), e),
                        }
                    }
                    if let Some(id) = id {
                        self.by_call.insert(id.to_string(), (at, count, first));
                    }
                } else if name == "shell" || name == "exec_command" || ty == "local_shell_call" {
                    let cmd = serde_json::from_str::<Value>(&args)
                        .ok()
                        .and_then(|a| {
                            a.get("command").or_else(|| a.get("cmd")).map(|c| match c {
                                Value::Array(xs) => xs
                                    .iter()
                                    .filter_map(Value::as_str)
                                    .collect::<Vec<_>>()
                                    .join(" "),
                                other => value_text(other),
                            })
                        })
                        .unwrap_or_default();
                    let cmd = cmd.strip_prefix("bash -lc ").unwrap_or(&cmd).to_string();
                    let raw = self.raw(n, &ap);
                    for w in shell_writes(&cmd, &self.roots, raw.clone()) {
                        match w {
                            Ok(w) => self.b.write(at, w),
                            Err(e) => self.b.drop_record(raw.clone(), e),
                        }
                    }
                }
            }
            "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                let out = p.get("output").map(value_text).unwrap_or_default();
                let id = s(p, "call_id");
                let failed = out.contains("\"exit_code\":1")
                    || out.starts_with("apply_patch verification failed")
                    || out.contains("Failed to apply patch");
                let r = tool_result(id, &out, failed, self.raw(n, &ptr(pp, "output")));
                if self.b.result(r).is_none() {
                    self.b
                        .drop_record(self.raw(n, pp), "tool output before any agent turn");
                }
                if failed {
                    if let Some(id) = id {
                        self.withdraw(id);
                    }
                }
                self.open = None;
            }
            "" => self
                .b
                .drop_record(self.raw(n, pp), "response item without a type"),
            other => {
                // web_search_call and newer item kinds: kept, not interpreted.
                let at = self.agent_turn(None);
                self.b.call(
                    at,
                    tool_call(
                        s(p, "call_id").or_else(|| s(p, "id")),
                        other,
                        &value_text(p),
                        self.raw(n, pp),
                    ),
                );
            }
        }
    }

    /// Remove the writes of a call whose patch did not apply.
    fn withdraw(&mut self, id: &str) {
        if let Some((at, count, first)) = self.by_call.remove(id) {
            let ws = &mut self.b.trace.turns[at].writes;
            if first + count <= ws.len() {
                ws.drain(first..first + count);
            }
        }
    }

    fn event(&mut self, n: usize, p: &Value, pp: &str) {
        let ty = s(p, "type").unwrap_or("");
        match ty {
            // Copies of response items.
            "user_message"
            | "agent_message"
            | "agent_reasoning"
            | "agent_reasoning_raw_content"
            | "exec_command_begin"
            | "exec_command_end"
            | "exec_command_output_delta"
            | "patch_apply_begin" => {}
            "patch_apply_end" => {
                let id = s(p, "call_id").unwrap_or("");
                let ok = p.get("success").and_then(Value::as_bool).unwrap_or(true);
                if !ok {
                    self.withdraw(id);
                } else if !self.by_call.contains_key(id) {
                    // No call carried the patch: take the changes.
                    if let Some(ch) = p.get("changes").and_then(Value::as_object) {
                        let at = self.b.turn_of_call(id).or_else(|| self.b.last_agent_turn());
                        let Some(at) = at else {
                            self.b.drop_record(
                                self.raw(n, pp),
                                "patch applied before any agent turn",
                            );
                            return;
                        };
                        for (path, c) in ch {
                            let cp = ptr(&ptr(pp, "changes"), path);
                            let a = self.roots.rel(path);
                            let op = match s(c, "type") {
                                Some("add") => s(c, "content").map(|t| {
                                    (
                                        WriteOp::FullContent { content: t.into() },
                                        ptr(&cp, "content"),
                                    )
                                }),
                                Some("delete") => Some((WriteOp::Delete, cp.clone())),
                                Some("update") if c.get("move_path").is_none_or(Value::is_null) => {
                                    s(c, "unified_diff").map(|d| {
                                        (
                                            WriteOp::UnifiedDiff { diff: d.into() },
                                            ptr(&cp, "unified_diff"),
                                        )
                                    })
                                }
                                _ => None,
                            };
                            match op {
                                Some((op, wp)) => {
                                    let raw = self.raw(n, &wp);
                                    self.b
                                        .write(at, write(a, op, "patch_apply_end", false, raw));
                                }
                                None => self.b.drop_record(
                                    self.raw(n, &cp),
                                    format!("change to {a} not interpreted (move or unknown type)"),
                                ),
                            }
                        }
                    }
                }
            }
            _ => {
                self.b.admin(ty, &value_text(p), self.raw(n, pp));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sage_trace::Write;

    #[test]
    fn apply_patch_format() {
        let p = "*** Begin Patch\n*** Add File: /r/new.txt\n+hi\n*** Update File: /r/a.py\n@@ def f():\n     x = 1\n-    y = 2\n+    y = 3\n*** Delete File: /r/old.py\n*** End Patch";
        let roots = PathRoots::new(["/r"]);
        let raw = RawRef::json("x", Some(1), "/payload/input");
        let w: Vec<Write> = apply_patch_writes(p, &roots, &raw)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(w.len(), 3);
        assert_eq!(
            w[0].op,
            WriteOp::FullContent {
                content: "hi\n".into()
            }
        );
        assert_eq!(
            w[1].op,
            WriteOp::SearchReplace {
                search: "    x = 1\n    y = 2\n".into(),
                replace: "    x = 1\n    y = 3\n".into(),
                tolerance: sage_trace::Tolerance::LinesThenElision,
            }
        );
        assert_eq!(w[2].artefact, "old.py");
        assert_eq!(w[2].op, WriteOp::Delete);
    }
}
