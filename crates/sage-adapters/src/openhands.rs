//! OpenHands V0 event streams (`openhands/events/serialization`), in all three eras:
//!
//! * 21 Dec 2024 – 11 Feb 2025: oh_aci editor run through IPython; `FileEditObservation`
//!   `extras.old_content/new_content` are the FULL file before/after → full-content writes.
//! * from 12 Feb 2025: `old_content/new_content` are the `old_str/new_str` snippets and
//!   `extras.diff` is a zero-context diff → the action's `str_replace` / `insert` / `create`
//!   becomes the write, only when the observation shows it succeeded (`diff` non-empty).
//! * 2024 legacy: flat events without `args`/`extras`; edits are agentskills calls inside
//!   `run_ipython` code (`edit_file_by_replace`, `insert_content_at_line`, `append_file`,
//!   `create_file`).
//!
//! Input: a bare event list (trajectory), one evaluation record `{instance_id, history,
//! test_result.git_patch, ...}`, or an `output.jsonl` of such records (the first record is
//! the trace; the others are reported as dropped). The submitted `git_patch` becomes the
//! final-state writes of the last agent turn.

use crate::support::*;
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::{Actor, CanonicalTrace, RawRef, Turn, TurnKind, WriteOp};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

pub struct OpenHands;

impl Adapter for OpenHands {
    fn name(&self) -> &'static str {
        "openhands"
    }
    fn versions(&self) -> &'static str {
        "OpenHands V0 event streams: 2024 legacy (agentskills run_ipython edits), Dec 2024–Feb 2025 \
         (full old_content/new_content), Feb 2025 on (snippets + zero-context diff); trajectories, \
         evaluation output records and output.jsonl"
    }
    fn detect(
        &self,
        shape: &crate::shape::Shape,
        rules: &crate::rules::DetectRules,
    ) -> Option<(u8, String)> {
        crate::claude_stream::detect_agent_or_stream(self.name(), shape, rules)
    }
    fn normalize_seen(
        &self,
        files: &[SourceFile],
    ) -> Result<(CanonicalTrace, crate::seen::Seen), AdapterError> {
        // This agent's run exported as a Claude-stream-like list (SusVibes): its own reader.
        if let Some(t) = crate::claude_stream::hand_over(files)? {
            return Ok(t);
        }
        seen(files, normalize_with_baselines(files)?)
    }
    fn holds_runs(&self) -> bool {
        true
    }
    fn normalize_run(
        &self,
        files: &[SourceFile],
        n: usize,
    ) -> Result<(CanonicalTrace, crate::seen::Seen), AdapterError> {
        let main = crate::support::main_file(files)?;
        seen(files, normalize_record(files, record_line(main, n)?)?)
    }
}

/// The trace and what it shows: full views or `old_content`, and numbered views.
fn seen(
    files: &[SourceFile],
    (t, (full, part)): (CanonicalTrace, Known),
) -> Result<(CanonicalTrace, crate::seen::Seen), AdapterError> {
    let main = crate::support::main_file(files)?;
    let views = part.into_iter().map(|(a, v)| (a, v.lines)).collect();
    let seen = crate::seen::Seen::shown(&main.name, full, "full view or old_content", views);
    Ok((t, seen))
}

/// The line (1-based) of the `n`th record of a JSON Lines file.
fn record_line(main: &SourceFile, n: usize) -> Result<usize, AdapterError> {
    let text = main.read_text()?;
    let mut records = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let count = text.lines().filter(|l| !l.trim().is_empty()).count();
    if count < 2 {
        return Err(AdapterError::new(
            &main.name,
            None,
            format!("the file holds one run (not an output.jsonl of several records), no run {n}"),
        ));
    }
    records.nth(n - 1).map(|(i, _)| i + 1).ok_or_else(|| {
        AdapterError::new(
            &main.name,
            None,
            format!("the file holds {count} runs (one per line), no run {n}"),
        )
    })
}

/// The canonical trace and the pre-edit contents the trace itself records (the first full
/// view of each file before the agent writes it: `old_content`, full `cat -n` views,
/// agentskills `open_file` windows that show the whole file).
pub(crate) fn normalize_with_baselines(
    files: &[SourceFile],
) -> Result<(CanonicalTrace, Known), AdapterError> {
    let main = crate::support::main_file(files)?;
    let text = main.read_text()?;
    let lead = text.trim_start();
    let mut cx = Ctx::new(files);
    if lead.starts_with('[') {
        let v = parse_json(&main.name, &text, None)?;
        drop(text);
        cx.events(&v, "", None)?;
    } else if lead.starts_with('{') && is_single_json(lead) {
        let v = parse_json(&main.name, &text, None)?;
        drop(text);
        cx.record(&v, None)?;
    } else {
        // output.jsonl: one evaluation record per line.
        drop(text);
        let mut first = true;
        for_each_json_line(main, |n, v| {
            let raw = RawRef::json(&main.name, Some(n), "");
            match v {
                Err(e) => cx.b.drop_record(raw, e),
                Ok(v) if first => {
                    first = false;
                    cx.record(&v, Some(n))?;
                }
                Ok(v) => cx.b.drop_record(
                    raw,
                    format!(
                        "another run in the same file (instance {}); sage normalizes the first \
                         run of an output.jsonl",
                        v.get("instance_id").map(value_text).unwrap_or_default()
                    ),
                ),
            }
            Ok(())
        })?;
        if first {
            return Err(AdapterError::new(&main.name, None, "no evaluation record"));
        }
    }
    let (t, full, partial) = cx.finish_all();
    Ok((t, (full, partial)))
}

/// What the trace shows of files before the agent writes them: whole files, and the lines
/// of windows (agentskills `open_file`, ranged `cat -n` views).
pub type Known = (BTreeMap<String, String>, BTreeMap<String, NumberedView>);

/// Normalize record `line` (1-based) of an `output.jsonl` of evaluation records, with what
/// it shows of the files before they are written.
pub(crate) fn normalize_record(
    files: &[SourceFile],
    line: usize,
) -> Result<(CanonicalTrace, Known), AdapterError> {
    let main = crate::support::main_file(files)?;
    let mut cx = Ctx::new(files);
    let mut found = false;
    for_each_json_line(main, |n, v| {
        if n == line {
            let v = v.map_err(|e| AdapterError::new(&main.name, Some(format!("line {n}")), e))?;
            cx.record(&v, Some(n))?;
            found = true;
        }
        Ok(())
    })?;
    if !found {
        return Err(AdapterError::new(
            &main.name,
            Some(format!("line {line}")),
            "no such record",
        ));
    }
    let (t, full, partial) = cx.finish_all();
    Ok((t, (full, partial)))
}

fn is_single_json(t: &str) -> bool {
    // A pretty-printed record spans lines; JSON Lines put one record on the first line.
    let first = t.lines().next().unwrap_or("");
    serde_json::from_str::<Value>(first).is_err() || t.trim_end().lines().count() == 1
}

/// A pending action: where it lives and what it asked for.
struct Pending {
    turn: usize,
    ptr: String,
    action: String,
    args: Value,
}

struct Ctx {
    b: TraceBuilder,
    file: String,
    line: Option<usize>,
    roots: PathRoots,
    patch_paths: Vec<String>,
    /// event id → the action.
    actions: HashMap<i64, Pending>,
    /// `model_response.id` of the last agent turn (parallel calls of one LLM response).
    last_response: Option<(String, usize)>,
    /// The latest action (legacy observations carry no `cause`).
    last_action: Option<i64>,
    /// Ids for events that carry none (legacy), counting down from -1.
    synthetic: i64,
    baselines: BTreeMap<String, String>,
    written: std::collections::BTreeSet<String>,
    /// The latest agentskills window of each file (line number → text), to find the whole
    /// lines an `edit_file_by_replace` replaces.
    windows: HashMap<String, BTreeMap<usize, String>>,
    /// Lines of each file seen in windows before the agent first wrote it.
    partial: BTreeMap<String, NumberedView>,
    final_patch: Option<(String, RawRef)>,
}

impl Ctx {
    fn new(files: &[SourceFile]) -> Self {
        Ctx {
            b: TraceBuilder::new("openhands", files),
            file: files[0].name.clone(),
            line: None,
            roots: PathRoots::new(["/workspace"]),
            patch_paths: Vec::new(),
            actions: HashMap::new(),
            last_response: None,
            last_action: None,
            synthetic: 0,
            baselines: BTreeMap::new(),
            written: Default::default(),
            windows: HashMap::new(),
            partial: BTreeMap::new(),
            final_patch: None,
        }
    }

    fn raw(&self, p: &str) -> RawRef {
        RawRef::json(&self.file, self.line, p)
    }

    fn at(&self, p: &str) -> String {
        match self.line {
            Some(l) => format!("line {l}, {p}"),
            None => p.to_string(),
        }
    }

    /// One evaluation record `{instance_id, history, test_result | git_patch, ...}`.
    fn record(&mut self, v: &Value, line: Option<usize>) -> Result<(), AdapterError> {
        self.line = line;
        let (patch, patch_ptr) =
            if let Some(p) = v.pointer("/test_result/git_patch").and_then(Value::as_str) {
                (Some(p), "/test_result/git_patch")
            } else {
                (s(v, "git_patch"), "/git_patch")
            };
        if let Some(p) = patch.filter(|p| !p.trim().is_empty()) {
            self.patch_paths = patch_paths(p);
            self.final_patch = Some((p.to_string(), self.raw(patch_ptr)));
        }
        let history = v.get("history").ok_or_else(|| {
            AdapterError::new(
                &self.file,
                Some(self.at("/history")),
                "record has no history",
            )
        })?;
        self.events(history, "/history", line)
    }

    fn events(
        &mut self,
        list: &Value,
        base: &str,
        line: Option<usize>,
    ) -> Result<(), AdapterError> {
        self.line = line;
        let items = list.as_array().ok_or_else(|| {
            AdapterError::new(
                &self.file,
                Some(self.at(if base.is_empty() { "/" } else { base })),
                "expected a list of events",
            )
        })?;
        // Learn the workspace root from paths the submitted patch names.
        if !self.patch_paths.is_empty() {
            let mut paths = Vec::new();
            collect_paths(list, &mut paths);
            for p in paths {
                let known = self.patch_paths.clone();
                self.roots.learn_from(&p, &known);
            }
        }
        for (i, e) in items.iter().enumerate() {
            let p = ptr(base, i);
            match e {
                // Very old trajectories: [action, observation] pairs.
                Value::Array(pair) => {
                    for (j, x) in pair.iter().enumerate() {
                        self.event(x, &ptr(&p, j));
                    }
                }
                Value::Object(_) => self.event(e, &p),
                _ => self.b.drop_record(self.raw(&p), "event is not an object"),
            }
        }
        Ok(())
    }

    fn event(&mut self, e: &Value, p: &str) {
        let legacy = e.get("args").is_none() && e.get("extras").is_none();
        if let Some(action) = s(e, "action") {
            let args_ptr = if legacy {
                p.to_string()
            } else {
                ptr(p, "args")
            };
            let args = if legacy {
                e.clone()
            } else {
                e.get("args").cloned().unwrap_or(Value::Null)
            };
            self.action(e, action, &args, p, &args_ptr);
        } else if let Some(obs) = s(e, "observation") {
            let extras_ptr = if legacy {
                p.to_string()
            } else {
                ptr(p, "extras")
            };
            let extras = if legacy {
                e.clone()
            } else {
                e.get("extras").cloned().unwrap_or(Value::Null)
            };
            self.observation(e, obs, &extras, p, &extras_ptr);
        } else {
            self.b
                .drop_record(self.raw(p), "neither an action nor an observation");
        }
    }

    fn action(&mut self, e: &Value, action: &str, args: &Value, p: &str, ap: &str) {
        let legacy = e.get("args").is_none();
        let source = match s(e, "source") {
            Some(x) => x,
            // Legacy events name no source: the first message is the task.
            None if action == "message" && self.b.last_agent_turn().is_none() => "user",
            None => "agent",
        };
        let id = e.get("id").and_then(Value::as_i64).or_else(|| {
            self.synthetic -= 1;
            Some(self.synthetic)
        });
        if legacy || e.get("id").is_some() {
            self.last_action = id;
        }
        // The text of a message action, else the event's `message`.
        let text_of = |this: &Self| -> Option<(String, RawRef)> {
            if let Some(t) = ne(args, "content") {
                return Some((t.to_string(), this.raw(&ptr(ap, "content"))));
            }
            ne(e, "message").map(|t| (t.to_string(), this.raw(&ptr(p, "message"))))
        };
        match action {
            "system"
            | "recall"
            | "change_agent_state"
            | "null"
            | "condensation"
            | "agent_state_changed" => {
                let (t, r) = text_of(self)
                    .unwrap_or_else(|| (action.to_string(), self.raw(&ptr(p, "action"))));
                self.b.admin(action, &t, r);
                return;
            }
            "message" if source == "user" || source == "environment" => {
                if let Some((t, r)) = text_of(self) {
                    self.b.user(&t, r);
                } else {
                    self.b.drop_record(self.raw(p), "empty user message");
                }
                self.last_response = None;
                return;
            }
            _ => {}
        }
        if source == "user" {
            // A user-side action other than a message (e.g. a user-run command).
            let t = text_of(self)
                .map(|x| x.0)
                .unwrap_or_else(|| action.to_string());
            self.b.user(&t, self.raw(p));
            return;
        }
        // Agent action. Thought (or message content) is the agent's message.
        let response_id = e
            .pointer("/tool_call_metadata/model_response/id")
            .and_then(Value::as_str)
            .map(str::to_string);
        let thought: Option<(String, RawRef)> = match action {
            "message" => text_of(self),
            "finish" => ne(args, "final_thought")
                .map(|t| (t.to_string(), self.raw(&ptr(ap, "final_thought"))))
                .or_else(|| {
                    ne(args, "thought").map(|t| (t.to_string(), self.raw(&ptr(ap, "thought"))))
                })
                .or_else(|| {
                    ne(e, "message").map(|t| (t.to_string(), self.raw(&ptr(p, "message"))))
                }),
            _ => ne(args, "thought").map(|t| (t.to_string(), self.raw(&ptr(ap, "thought")))),
        };
        let same_response = match (&response_id, &self.last_response) {
            (Some(r), Some((last, _))) => r == last,
            _ => false,
        };
        let turn = if same_response && thought.is_none() {
            self.last_response.as_ref().map(|x| x.1).unwrap_or(0)
        } else {
            let mut t = Turn::new(Actor::new("agent", Some("assistant")), TurnKind::Planning);
            if let Some((text, raw)) = thought {
                t.message = Some(sage_trace::TextItem { text, raw });
            }
            self.b.push(t)
        };
        self.last_response = response_id.map(|r| (r, turn));
        if action == "message" {
            return;
        }
        // The tool call.
        let call_id = e
            .pointer("/tool_call_metadata/tool_call_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| id.map(|i| format!("event-{i}")));
        let name = e
            .pointer("/tool_call_metadata/function_name")
            .and_then(Value::as_str)
            .unwrap_or(action)
            .to_string();
        let (arguments, arg_ptr) = match action {
            "run" => (s(args, "command").map(str::to_string), ptr(ap, "command")),
            "run_ipython" => (s(args, "code").map(str::to_string), ptr(ap, "code")),
            "browse" => (s(args, "url").map(str::to_string), ptr(ap, "url")),
            _ => (None, String::new()),
        };
        let (arguments, arg_ptr) = match arguments {
            Some(a) => (a, arg_ptr),
            None => (value_text(args), ap.to_string()),
        };
        self.b.call(
            turn,
            tool_call(call_id.as_deref(), &name, &arguments, self.raw(&arg_ptr)),
        );
        if let Some(i) = id {
            self.actions.insert(
                i,
                Pending {
                    turn,
                    ptr: ap.to_string(),
                    action: action.to_string(),
                    args: args.clone(),
                },
            );
        }
        // A legacy run_ipython's edits are applied when its observation shows success; a
        // write action has none in some eras, so it is applied at the action.
        if action == "write" && !has_observation_era(args) {
            if let (Some(path), Some(_)) = (s(args, "path"), s(args, "content")) {
                let a = self.roots.rel(path);
                self.add_write(
                    turn,
                    a,
                    WriteOp::FullContent {
                        content: s(args, "content").unwrap_or("").into(),
                    },
                    "write",
                    &ptr(ap, "content"),
                );
            }
        }
    }

    fn observation(&mut self, e: &Value, obs: &str, extras: &Value, p: &str, xp: &str) {
        let content = s(e, "content").unwrap_or("");
        let legacy = e.get("extras").is_none();
        let cause =
            e.get("cause")
                .and_then(Value::as_i64)
                .or(if legacy { self.last_action } else { None });
        if matches!(
            obs,
            "recall" | "agent_state_changed" | "null" | "user_rejected" | "agent_condensation"
        ) && cause.is_none_or(|c| !self.actions.contains_key(&c))
        {
            let t = if content.is_empty() { obs } else { content };
            let r = if content.is_empty() {
                self.raw(&ptr(p, "observation"))
            } else {
                self.raw(&ptr(p, "content"))
            };
            self.b.admin(obs, t, r);
            return;
        }
        if obs == "recall" || obs == "agent_state_changed" {
            let t = if content.is_empty() { obs } else { content };
            self.b.admin(obs, t, self.raw(&ptr(p, "content")));
            return;
        }
        let call_id = e
            .pointer("/tool_call_metadata/tool_call_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| cause.map(|c| format!("event-{c}")));
        let is_error = obs == "error" || content.starts_with("ERROR:");
        let result = tool_result(
            call_id.as_deref(),
            content,
            is_error,
            self.raw(&ptr(p, "content")),
        );
        let pending_turn = cause.and_then(|c| self.actions.get(&c)).map(|a| a.turn);
        let at = match pending_turn {
            Some(t) => {
                self.b.trace.turns[t].tool_results.push(result);
                Some(t)
            }
            None => self.b.result(result),
        };
        let Some(at) = at else {
            self.b
                .drop_record(self.raw(p), "observation before any agent action");
            return;
        };
        let pending = cause
            .and_then(|c| self.actions.get(&c))
            .map(|a| (a.ptr.clone(), a.action.clone(), a.args.clone()));
        match obs {
            "edit" => self.edit_observation(at, content, extras, xp, pending, p),
            "write" => {
                if let Some((ap, action, args)) = pending {
                    if action == "write" && !is_error && has_observation_era(&args) {
                        if let (Some(path), Some(c)) = (s(&args, "path"), s(&args, "content")) {
                            let a = self.roots.rel(path);
                            self.add_write(
                                at,
                                a,
                                WriteOp::FullContent { content: c.into() },
                                "write",
                                &ptr(&ap, "content"),
                            );
                        }
                    }
                }
            }
            "read" => {
                self.read_view(content, extras, pending.as_ref().map(|x| &x.2));
            }
            "run_ipython" => {
                if let Some((ap, action, args)) = pending {
                    if action == "run_ipython" {
                        self.ipython(at, content, &args, &ap, p);
                    }
                }
            }
            "run" => {
                if let Some((ap, _, args)) = pending {
                    // Exit code: `extras.metadata.exit_code` (V0) or `exit_code` (legacy).
                    let code = extras
                        .pointer("/metadata/exit_code")
                        .or_else(|| extras.get("exit_code"))
                        .and_then(|c| {
                            c.as_i64()
                                .or_else(|| c.as_str().and_then(|x| x.parse().ok()))
                        });
                    if let (Some(cmd), Some(0) | None) = (s(&args, "command"), code) {
                        let cmd = cmd.to_string();
                        self.shell(at, &cmd, &ptr(&ap, "command"));
                    }
                }
            }
            _ => {}
        }
    }

    /// A `FileEditObservation`: which era, and did the edit land?
    fn edit_observation(
        &mut self,
        at: usize,
        content: &str,
        extras: &Value,
        xp: &str,
        pending: Option<(String, String, Value)>,
        p: &str,
    ) {
        let Some(path) = s(extras, "path") else {
            self.b
                .drop_record(self.raw(p), "edit observation without a path");
            return;
        };
        let a = self.roots.rel(path);
        if content.starts_with("ERROR:") {
            return; // the edit failed: its result is in the turn, no write
        }
        if let Some(diff) = extras.get("diff") {
            // Feb 2025 on: snippets + zero-context diff of the full file.
            let diff = diff.as_str().unwrap_or("");
            if diff.trim().is_empty() {
                return; // no change landed
            }
            let Some((ap, _, args)) = pending else {
                self.add_write(
                    at,
                    a,
                    WriteOp::UnifiedDiff { diff: diff.into() },
                    "oh_aci diff",
                    &ptr(xp, "diff"),
                );
                return;
            };
            let command = s(&args, "command").unwrap_or("");
            let op = match command {
                "create" => s(&args, "file_text")
                    .map(|t| (WriteOp::FullContent { content: t.into() }, "file_text")),
                "str_replace" => match (s(&args, "old_str"), s(&args, "new_str")) {
                    (Some(o), n) => Some((
                        WriteOp::StrReplace {
                            old: o.into(),
                            new: n.unwrap_or("").into(),
                            all: false,
                            tolerance: sage_trace::Tolerance::TrimmedRetry,
                        },
                        "new_str",
                    )),
                    _ => None,
                },
                "insert" => match (
                    args.get("insert_line").and_then(Value::as_u64),
                    s(&args, "new_str"),
                ) {
                    (Some(l), Some(t)) => Some((
                        WriteOp::Insert {
                            after_line: l as usize,
                            text: t.into(),
                        },
                        "new_str",
                    )),
                    _ => None,
                },
                _ => None,
            };
            match op {
                Some((op, field)) => self.add_write(
                    at,
                    a,
                    op,
                    &format!("str_replace_editor {command}"),
                    &ptr(&ap, field),
                ),
                // undo_edit, LLM-based edits: the zero-context diff is all there is.
                None => self.add_write(
                    at,
                    a,
                    WriteOp::UnifiedDiff { diff: diff.into() },
                    "oh_aci diff",
                    &ptr(xp, "diff"),
                ),
            }
            return;
        }
        // Dec 2024 – Feb 2025: full file before/after.
        match extras.get("new_content").and_then(Value::as_str) {
            Some(new) => {
                if let Some(old) = extras.get("old_content").and_then(Value::as_str) {
                    self.saw_full(&a, old);
                }
                let via = pending
                    .as_ref()
                    .and_then(|(_, _, args)| s(args, "translated_ipython_code"))
                    .map(|c| {
                        c.split("'command': '")
                            .nth(1)
                            .and_then(|x| x.split('\'').next())
                            .unwrap_or("edit")
                    })
                    .map(|c| format!("file_editor {c}"))
                    .unwrap_or_else(|| "edit".into());
                self.add_write(
                    at,
                    a,
                    WriteOp::FullContent {
                        content: new.into(),
                    },
                    &via,
                    &ptr(xp, "new_content"),
                );
            }
            None => self.b.drop_record(
                self.raw(p),
                "edit observation carries neither a diff nor the new content",
            ),
        }
    }

    /// A full file view seen before any write to the file is its baseline.
    fn saw_full(&mut self, artefact: &str, content: &str) {
        if !self.written.contains(artefact) && !self.baselines.contains_key(artefact) {
            self.baselines
                .insert(artefact.to_string(), content.to_string());
        }
    }

    /// Lines a window shows of a file not yet written (a window of another length is
    /// ignored: the file changed).
    fn saw_partial(&mut self, artefact: &str, view: &NumberedView) {
        if self.written.contains(artefact) {
            return;
        }
        let e = self
            .partial
            .entry(artefact.to_string())
            .or_insert(NumberedView {
                lines: BTreeMap::new(),
                total: view.total,
            });
        if e.total.is_some() && view.total.is_some() && e.total != view.total {
            return;
        }
        e.total = e.total.or(view.total);
        for (n, l) in &view.lines {
            e.lines.entry(*n).or_insert_with(|| l.clone());
        }
    }

    fn read_view(&mut self, content: &str, extras: &Value, args: Option<&Value>) {
        let Some(path) = s(extras, "path") else {
            return;
        };
        if !content.contains("cat -n") {
            return;
        }
        let ranged = args.is_some_and(|a| {
            a.get("view_range").is_some_and(|v| !v.is_null())
                || a.get("start")
                    .and_then(Value::as_i64)
                    .is_some_and(|x| x > 1)
                || a.get("end").and_then(Value::as_i64).is_some_and(|x| x > 0)
        });
        let view = parse_numbered_view(content, '\t');
        let a = self.roots.rel(path);
        self.saw_partial(&a, &view);
        if ranged || content.contains("<response clipped>") {
            return;
        }
        if let Some(full) = view.full_text() {
            self.saw_full(&a, &full);
        }
    }

    /// Legacy agentskills calls inside `run_ipython` code.
    fn ipython(&mut self, at: usize, content: &str, args: &Value, ap: &str, op_ptr: &str) {
        let code = s(args, "code").unwrap_or("");
        let cp = ptr(ap, "code");
        // Windows `[File: p (N lines total)]` + `n|line`: the latest one of each file is
        // kept; an `open_file` window that shows the whole file is a baseline.
        let mut window_of_this_call: Option<(String, BTreeMap<usize, String>)> = None;
        if content.starts_with("[File: ") {
            if let Some(path) = content
                .strip_prefix("[File: ")
                .and_then(|r| r.split(" (").next())
            {
                let view = parse_numbered_view(content, '|');
                let a = self.roots.rel(path);
                if code.contains("open_file(") {
                    if let Some(full) = view.full_text() {
                        self.saw_full(&a, &full);
                    }
                }
                self.saw_partial(&a, &view);
                window_of_this_call = Some((a, view.lines));
            }
        }
        let failed = content.contains("[No exact match found")
            || content.contains("introduced new syntax error")
            || content.contains("Traceback (most recent call last)")
            || content.contains("ERROR:");
        let mut any = false;
        for (func, kind) in [
            ("edit_file_by_replace", 0),
            ("insert_content_at_line", 1),
            ("append_file", 2),
            ("create_file", 3),
            ("edit_file_by_line", 4),
        ] {
            for call in python_calls(code, func) {
                any = true;
                if failed {
                    continue;
                }
                let call = match call {
                    Ok(c) => c,
                    Err(why) => {
                        self.b.drop_record(
                            self.raw(&cp),
                            format!("{func} call not interpreted: {why}"),
                        );
                        continue;
                    }
                };
                let path = call.positional.first().cloned().or_else(|| {
                    call.keywords
                        .get("file_name")
                        .and_then(|x| x.as_str())
                        .map(str::to_string)
                });
                let Some(path) = path else {
                    self.b
                        .drop_record(self.raw(&cp), format!("{func} call without a file name"));
                    continue;
                };
                let arg = |i: usize, k: &str| -> Option<String> {
                    call.keywords
                        .get(k)
                        .and_then(|x| x.as_str())
                        .map(str::to_string)
                        .or_else(|| call.positional.get(i).cloned())
                };
                let a = self.roots.rel(&path);
                let op = match kind {
                    // agentskills replaces the whole lines the match spans.
                    0 => match (arg(1, "to_replace"), arg(2, "new_content")) {
                        (Some(o), Some(n)) => {
                            let old = match self.windows.get(&a) {
                                Some(w) => whole_lines(w, &o),
                                None => o,
                            };
                            Some(WriteOp::StrReplace {
                                old,
                                new: n,
                                all: false,
                                tolerance: sage_trace::Tolerance::TrimmedRetry,
                            })
                        }
                        _ => None,
                    },
                    1 => {
                        let line = call
                            .keywords
                            .get("line_number")
                            .and_then(|x| match x {
                                PyArg::Int(i) => Some(*i),
                                _ => None,
                            })
                            .or_else(|| call.positional.get(1).and_then(|x| x.parse().ok()));
                        match (line, arg(2, "content")) {
                            (Some(l), Some(t)) if l >= 1 => Some(WriteOp::Insert {
                                after_line: (l - 1) as usize,
                                text: t,
                            }),
                            _ => None,
                        }
                    }
                    2 => arg(1, "content").map(|t| WriteOp::SearchReplace {
                        search: String::new(),
                        replace: t,
                        tolerance: sage_trace::Tolerance::LinesThenElision,
                    }),
                    3 => Some(WriteOp::FullContent {
                        content: String::new(),
                    }),
                    _ => None,
                };
                match op {
                    Some(op) => self.add_write(at, a, op, &format!("agentskills {func}"), &cp),
                    None => self.b.drop_record(
                        self.raw(&cp),
                        format!("{func} on {a}: arguments not interpreted"),
                    ),
                }
            }
        }
        if let Some((a, lines)) = window_of_this_call {
            self.windows.insert(a, lines);
        }
        if !any && !failed && writes_file_in_python(code) {
            self.b.drop_record(
                self.raw(op_ptr),
                "python code writes a file (open(..., 'w')); the write is not interpreted",
            );
        }
    }

    fn shell(&mut self, at: usize, cmd: &str, cp: &str) {
        let raw = self.raw(cp);
        for w in shell_writes(cmd, &self.roots, raw.clone()) {
            match w {
                Ok(w) => {
                    self.written.insert(w.artefact.clone());
                    self.b.write(at, w)
                }
                Err(e) => self.b.drop_record(raw.clone(), e),
            }
        }
    }

    fn add_write(&mut self, at: usize, artefact: String, op: WriteOp, via: &str, p: &str) {
        self.written.insert(artefact.clone());
        let raw = self.raw(p);
        self.b.write(at, write(artefact, op, via, false, raw));
    }

    fn finish_all(
        mut self,
    ) -> (
        CanonicalTrace,
        BTreeMap<String, String>,
        BTreeMap<String, NumberedView>,
    ) {
        if let Some((patch, raw)) = self.final_patch.take() {
            let writes = final_patch_writes(&patch, "git_patch", &raw, &self.roots);
            match self.b.last_agent_turn() {
                Some(at) => {
                    for w in writes {
                        self.b.write(at, w);
                    }
                }
                None => self
                    .b
                    .drop_record(raw, "submitted patch but no agent turn to hold it"),
            }
        }
        (self.b.finish(), self.baselines, self.partial)
    }
}

/// Extend `old` to the whole lines it spans, using the window's lines: the first line's
/// text before the match and the last line's text after it. Unchanged when the window does
/// not show those lines unambiguously.
fn whole_lines(window: &BTreeMap<usize, String>, old: &str) -> String {
    let first = old.split('\n').next().unwrap_or("");
    let last = old.rsplit('\n').next().unwrap_or("");
    let single = !old.contains('\n');
    if first.trim().is_empty() && last.trim().is_empty() {
        return old.to_string();
    }
    let unique = |f: &dyn Fn(&str) -> bool| {
        let mut it = window.values().filter(|l| f(l));
        match (it.next(), it.next()) {
            (Some(l), None) => Some(l.clone()),
            _ => None,
        }
    };
    if single {
        let Some(line) = unique(&|l: &str| l.matches(first).count() == 1) else {
            return old.to_string();
        };
        return line;
    }
    let prefix = if first.is_empty() {
        Some(String::new())
    } else {
        unique(&|l: &str| l.ends_with(first)).map(|l| l[..l.len() - first.len()].to_string())
    };
    let suffix = if last.is_empty() {
        Some(String::new())
    } else {
        unique(&|l: &str| l.starts_with(last)).map(|l| l[last.len()..].to_string())
    };
    match (prefix, suffix) {
        (Some(p), Some(x)) => format!("{p}{old}{x}"),
        _ => old.to_string(),
    }
}

fn has_observation_era(args: &Value) -> bool {
    // Every era with `args` reports writes through an observation.
    args.is_object()
}

fn writes_file_in_python(code: &str) -> bool {
    code.contains("open(")
        && (code.contains("'w'")
            || code.contains("\"w\"")
            || code.contains("'a'")
            || code.contains(".write("))
}

/// Every absolute path an event names (`path` fields), to learn the workspace root.
fn collect_paths(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == "path" {
                    if let Some(p) = x.as_str() {
                        if p.starts_with('/') {
                            out.push(p.to_string());
                        }
                    }
                } else if matches!(x, Value::Object(_) | Value::Array(_))
                    && k != "tool_call_metadata"
                {
                    collect_paths(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_paths(x, out)),
        _ => {}
    }
}
