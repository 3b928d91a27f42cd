//! Claude-stream-like exports: a JSON list (or JSON Lines) of records `{type: system | user |
//! assistant | result, message: {role, content: [text | tool_use | tool_result]}}` — the layout
//! of Claude Code's `stream-json` output — carrying another agent's tools. SusVibes exports its
//! OpenHands runs this way (`str_replace_editor`, `execute_bash`, `think`, `task_tracking`,
//! `finish`); SWE-agent's tools (`str_replace_editor`, `bash`, `submit`) read the same.
//!
//! One `assistant` record is one agent turn (records sharing `message.id` are one response; a
//! second text block starts a new turn, since a canonical turn holds one message). `user`
//! records hold the task (not a turn) and `tool_result` blocks, tied to their call by
//! `tool_use_id`; a result whose id names no call (OpenHands' workspace context, an invalid
//! call the framework refused) is the environment's, kept as an administrative turn. `system`
//! and `result` records are administrative.
//!
//! Which calls write is data (`mappings/claude-stream.toml`, `[[writes]]`). An editor write
//! lands only when its result is not an error (`ERROR:` or `is_error`). When the exporter
//! dropped `insert_line`, the position is read from the numbered snippet the tool printed (the
//! inserted lines are found in it), and a trace note says so. `undo_edit` restores the whole
//! file its result prints. Shell commands' plain edits (heredocs, `cat >`, `sed -i`, `rm`) are
//! writes; relative paths are taken from the shell's directory, which starts at the repository
//! root and follows `cd`. Absolute paths under a root (`/project/`, the task's
//! `<uploaded_files>`) are named relative to it.

use crate::mapping::{Mapping, WriteRule};
use crate::seen::{Seen, ShownFile, ShownView};
use crate::support::*;
use crate::{embedded_mapping, Adapter, AdapterError, SourceFile};
use sage_trace::{Actor, CanonicalTrace, RawRef, TextItem, Turn, TurnKind, WriteOp};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

mapping_adapter!(
    /// The adapter, with its mapping (`mappings/claude-stream.toml` unless overridden).
    ClaudeStream,
    "claude-stream"
);

/// Whether the file of `shape` is a Claude-stream-like record list with an agent's tools (for
/// adapters that hand such a file over when they are forced onto it with `--framework`).
pub(crate) fn is_stream(shape: &crate::shape::Shape) -> bool {
    embedded_mapping("claude-stream").is_ok_and(|m| m.detect(shape).is_some())
}

/// Detection for the agents whose runs are also exported as Claude-stream-like lists
/// (OpenHands, SWE-agent): such a file scores 5 for the agent, so `--framework` may name it
/// and the stream adapter (which scores higher) reads it; any other file is scored by the
/// agent's own rules.
pub(crate) fn detect_agent_or_stream(
    agent: &str,
    shape: &crate::shape::Shape,
    rules: &crate::rules::DetectRules,
) -> Option<(u8, String)> {
    if is_stream(shape) {
        return Some((
            5,
            "a Claude-stream-like export of this agent's run (read by claude-stream)".into(),
        ));
    }
    rules.best(agent, shape)
}

/// The trace of a Claude-stream-like export handed over by the agent adapter it was forced
/// on, and what it shows (`None` when the file is the agent's own format).
pub(crate) fn hand_over(
    files: &[SourceFile],
) -> Result<Option<(CanonicalTrace, Seen)>, AdapterError> {
    let main = crate::support::main_file(files)?;
    if is_stream(&crate::detect::shape_of(
        &main.path, &main.name, main.limit,
    )?) {
        return normalize_seen(&embedded_mapping("claude-stream")?, files).map(Some);
    }
    Ok(None)
}

impl Adapter for ClaudeStream {
    mapping_adapter_items!(ClaudeStream, "claude-stream");
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        normalize_seen(&self.mapping, files).map(|(t, _)| t)
    }
    /// What the export shows (views, the task, the model) when the file has the stream's
    /// shape; a file read through a user's mapping of another shape shows nothing.
    fn normalize_seen(&self, files: &[SourceFile]) -> Result<(CanonicalTrace, Seen), AdapterError> {
        let main = crate::support::main_file(files)?;
        if is_stream(&crate::detect::shape_of(
            &main.path, &main.name, main.limit,
        )?) {
            return normalize_seen(&self.mapping, files);
        }
        Ok((self.normalize(files)?, Seen::default()))
    }
}

/// The canonical trace and what it shows besides its turns (views, the task, the model).
pub fn normalize_seen(
    m: &Mapping,
    files: &[SourceFile],
) -> Result<(CanonicalTrace, Seen), AdapterError> {
    let main = crate::support::main_file(files)?;
    let mut cx = Ctx::new(m, files);
    let text = main.read_text()?;
    let lead = text.trim_start();
    if lead.starts_with('[') {
        let v = parse_json(&main.name, &text, None)?;
        drop(text);
        let Value::Array(records) = v else {
            return Err(AdapterError::new(
                &main.name,
                Some("/".into()),
                "expected a list of records",
            ));
        };
        if records.is_empty() {
            return Err(AdapterError::new(&main.name, None, "empty list of records"));
        }
        for (i, r) in records.iter().enumerate() {
            cx.line = None;
            cx.record(r, &format!("/{i}"));
        }
    } else if lead.starts_with('{') {
        drop(text);
        let mut n_records = 0;
        for_each_json_line(main, |n, v| {
            n_records += 1;
            cx.line = Some(n);
            match v {
                Ok(v) => cx.record(&v, ""),
                Err(e) => cx.b.drop_record(RawRef::json(&main.name, Some(n), ""), e),
            }
            Ok(())
        })?;
        if n_records == 0 {
            return Err(AdapterError::new(&main.name, None, "no records"));
        }
    } else {
        return Err(AdapterError::new(
            &main.name,
            Some("byte 0".into()),
            "not a JSON list or JSON Lines of stream records",
        ));
    }
    Ok(cx.finish())
}

/// A call waiting for its result.
struct Call {
    turn: usize,
    name: String,
    args: Value,
    /// Pointer of the call's `input`.
    args_ptr: String,
    line: Option<usize>,
}

struct Ctx<'m> {
    m: &'m Mapping,
    b: TraceBuilder,
    file: String,
    line: Option<usize>,
    roots: PathRoots,
    /// The shell's directory (absolute), once known.
    cwd: Option<String>,
    calls: HashMap<String, Call>,
    /// `message.id` of the last assistant record and its latest turn.
    response: Option<(String, usize)>,
    written: BTreeSet<String>,
    seen: Seen,
    /// Tool name → calls, for the agent framework and the unknown-tool note.
    tool_counts: BTreeMap<String, usize>,
    synthetic_ids: usize,
}

const VIEW_HEADER: &str = "Here's the result of running `cat -n` on ";

impl<'m> Ctx<'m> {
    fn new(m: &'m Mapping, files: &[SourceFile]) -> Self {
        Ctx {
            m,
            b: TraceBuilder::new("claude-stream", files),
            file: files[0].name.clone(),
            line: None,
            roots: PathRoots::new(&m.file.paths.roots),
            cwd: None,
            calls: HashMap::new(),
            response: None,
            written: BTreeSet::new(),
            seen: Seen {
                reports_views: true,
                ..Seen::default()
            },
            tool_counts: BTreeMap::new(),
            synthetic_ids: 0,
        }
    }

    fn raw(&self, p: &str) -> RawRef {
        RawRef::json(&self.file, self.line, p)
    }

    fn record(&mut self, r: &Value, base: &str) {
        let Some(ty) = s(r, "type") else {
            self.b.drop_record(self.raw(base), "record without a type");
            return;
        };
        match ty {
            "assistant" => self.assistant(r, base),
            "user" => {
                self.response = None;
                self.user(r, base)
            }
            "system" | "result" => {
                self.response = None;
                // `system` names the model; `result` closes the run (subtype, turn count).
                if ty == "system" {
                    if let Some(model) = ne(r, "model") {
                        self.seen.model.get_or_insert_with(|| model.to_string());
                        self.b.admin("system", model, self.raw(&ptr(base, "model")));
                        return;
                    }
                }
                let text = value_text(r);
                self.b.admin(ty, &text, self.raw(base));
            }
            other => self.b.drop_record(
                self.raw(base),
                format!("record of type {other:?} not mapped"),
            ),
        }
    }

    fn blocks(&self, r: &Value, base: &str) -> Option<Vec<(Value, String)>> {
        let cp = format!("{base}/message/content");
        match r.pointer("/message/content")? {
            c @ Value::String(_) => {
                Some(vec![(serde_json::json!({"type": "text", "text": c}), cp)])
            }
            Value::Array(a) => Some(
                a.iter()
                    .enumerate()
                    .map(|(k, b)| (b.clone(), ptr(&cp, k)))
                    .collect(),
            ),
            _ => None,
        }
    }

    fn assistant(&mut self, r: &Value, base: &str) {
        let Some(blocks) = self.blocks(r, base) else {
            self.b
                .drop_record(self.raw(base), "assistant record without message content");
            return;
        };
        let id = r
            .pointer("/message/id")
            .and_then(Value::as_str)
            .filter(|x| !x.is_empty())
            .map(str::to_string);
        // A record continuing the previous response (same message.id) adds to its turn.
        let mut current = match (&id, &self.response) {
            (Some(i), Some((last, at))) if i == last => Some(*at),
            _ => None,
        };
        let actor = || Actor::new("agent", Some("assistant"));
        for (block, bp) in blocks {
            let ty = s(&block, "type").unwrap_or("");
            match ty {
                "text" | "thinking" => {
                    let f = if ty == "text" { "text" } else { "thinking" };
                    let Some(t) = ne(&block, f) else { continue };
                    let tp = if bp.ends_with("/message/content") {
                        bp.clone()
                    } else {
                        ptr(&bp, f)
                    };
                    let item = TextItem {
                        text: t.to_string(),
                        raw: self.raw(&tp),
                    };
                    match current {
                        Some(at) if self.b.trace.turns[at].message.is_none() => {
                            self.b.trace.turns[at].message = Some(item);
                        }
                        _ => {
                            let mut turn = Turn::new(actor(), TurnKind::Planning);
                            turn.message = Some(item);
                            current = Some(self.b.push(turn));
                        }
                    }
                }
                "tool_use" => {
                    let at = match current {
                        Some(at) => at,
                        None => {
                            let at = self.b.push(Turn::new(actor(), TurnKind::Planning));
                            current = Some(at);
                            at
                        }
                    };
                    self.tool_use(at, &block, &bp);
                }
                _ => self.b.drop_record(
                    self.raw(&bp),
                    format!("assistant content block of type {ty:?} not mapped"),
                ),
            }
        }
        if current.is_none() {
            self.b
                .drop_record(self.raw(base), "assistant record with no text or tool call");
        }
        self.response = match (id, current) {
            (Some(i), Some(at)) => Some((i, at)),
            _ => None,
        };
    }

    fn tool_use(&mut self, at: usize, block: &Value, bp: &str) {
        let name = s(block, "name").unwrap_or("tool").to_string();
        let input = block.get("input").cloned().unwrap_or(Value::Null);
        let ip = ptr(bp, "input");
        // The call's text as the agent wrote it: a shell command or a thought as plain text
        // (quotable as written), anything else as its JSON arguments.
        let (args, args_ptr) = match self.plain_argument(&name, &input) {
            Some(f) => (s(&input, f).unwrap_or("").to_string(), ptr(&ip, f)),
            None => (value_text(&input), ip.clone()),
        };
        let id = match s(block, "id").filter(|x| !x.is_empty()) {
            Some(i) => i.to_string(),
            None => {
                self.synthetic_ids += 1;
                format!("no-id-{}", self.synthetic_ids)
            }
        };
        *self.tool_counts.entry(name.clone()).or_default() += 1;
        self.b
            .call(at, tool_call(Some(&id), &name, &args, self.raw(&args_ptr)));
        self.calls.insert(
            id,
            Call {
                turn: at,
                name,
                args: input,
                args_ptr: ip,
                line: self.line,
            },
        );
    }

    /// The field of a call's input that is its whole text, when there is one.
    fn plain_argument(&self, name: &str, input: &Value) -> Option<&'static str> {
        let shell = self
            .m
            .file
            .writes
            .iter()
            .any(|w| w.op == "shell" && w.tools.iter().any(|t| t == name));
        if shell && s(input, "command").is_some() {
            return Some("command");
        }
        let editor = self
            .m
            .file
            .writes
            .iter()
            .any(|w| w.tools.iter().any(|t| t == name));
        if editor {
            return None;
        }
        let obj = input.as_object()?;
        ["thought", "message", "content"]
            .into_iter()
            .find(|f| obj.len() == 1 && obj.get(*f).is_some_and(Value::is_string))
    }

    fn user(&mut self, r: &Value, base: &str) {
        let Some(blocks) = self.blocks(r, base) else {
            self.b
                .drop_record(self.raw(base), "user record without message content");
            return;
        };
        for (block, bp) in blocks {
            match s(&block, "type") {
                Some("tool_result") => self.tool_result(&block, &bp),
                Some("text") => {
                    let tp = if bp.ends_with("/message/content") {
                        bp.clone()
                    } else {
                        ptr(&bp, "text")
                    };
                    if let Some(t) = s(&block, "text") {
                        if self.seen.task.is_none() {
                            self.learn_root_from_task(t);
                            self.seen.task = Some(TextItem {
                                text: t.to_string(),
                                raw: self.raw(&tp),
                            });
                        }
                        self.b.user(t, self.raw(&tp));
                    }
                }
                other => self.b.drop_record(
                    self.raw(&bp),
                    format!("user content block of type {other:?} not mapped"),
                ),
            }
        }
    }

    /// `<uploaded_files>\n/project\n</uploaded_files>` (OpenHands and SWE-bench prompts).
    fn learn_root_from_task(&mut self, task: &str) {
        let Some(i) = task.find("<uploaded_files>") else {
            return;
        };
        let rest = &task[i + "<uploaded_files>".len()..];
        let Some(j) = rest.find("</uploaded_files>") else {
            return;
        };
        let dir = rest[..j].trim();
        if dir.starts_with('/') && !dir.contains('\n') {
            self.roots.add(dir);
            self.cwd.get_or_insert_with(|| dir.to_string());
        }
    }

    fn tool_result(&mut self, block: &Value, bp: &str) {
        let call_id = s(block, "tool_use_id");
        let (out, op) = match block.get("content") {
            Some(Value::String(t)) => (t.clone(), ptr(bp, "content")),
            Some(c @ Value::Array(_)) => content_texts(c, &ptr(bp, "content"))
                .into_iter()
                .next()
                .unwrap_or_else(|| (value_text(c), ptr(bp, "content"))),
            Some(c) => (value_text(c), ptr(bp, "content")),
            None => (String::new(), ptr(bp, "content")),
        };
        let Some(call) = call_id.and_then(|id| self.calls.remove(id)) else {
            // No call of this id: the environment speaking (workspace context, a call the
            // framework refused before running it).
            self.b.admin("environment", &out, self.raw(&op));
            return;
        };
        let flagged = block
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let editor = self
            .rules(&call.name)
            .next()
            .is_some_and(|w| w.op != "shell");
        let is_error = flagged || (editor && out.trim_start().starts_with("ERROR:"));
        let r = tool_result(call_id, &out, is_error, self.raw(&op));
        self.b.trace.turns[call.turn].tool_results.push(r);
        if !is_error {
            self.effects(&call, &out, &op);
        }
        // After the call's own writes: a snippet shows the file after this edit.
        let path = get_str(&call.args, "/path").map(str::to_string);
        self.views_in(&out, &op, path.as_deref());
    }

    /// The `[[writes]]` rules that name tool `name`.
    fn rules<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a WriteRule> + 'a {
        self.m
            .file
            .writes
            .iter()
            .filter(move |w| w.tools.iter().any(|t| t == name))
    }

    /// Numbered views a tool result prints (`cat -n` of a file or of an edit's snippet).
    fn views_in(&mut self, out: &str, op: &str, call_path: Option<&str>) {
        let Some(i) = out.find(VIEW_HEADER) else {
            return;
        };
        let after = &out[i + VIEW_HEADER.len()..];
        let Some(colon) = after.find(":\n") else {
            return;
        };
        let (snippet, shown) = match after[..colon].strip_prefix("a snippet of ") {
            Some(p) => (true, p),
            None => (false, &after[..colon]),
        };
        // `a snippet of the edited file`: the file the call names.
        let path = match call_path {
            Some(p) if !shown.starts_with('/') => p,
            _ => shown,
        };
        let a = self.name_of(path);
        let body = &after[colon + 2..];
        let view = parse_numbered_view(body, '\t');
        if view.lines.is_empty() {
            return;
        }
        let clipped = out.contains("<response clipped>");
        let before_any_write = !self.written.contains(&a);
        let writes_so_far = self.b.trace.turns.iter().map(|t| t.writes.len()).sum();
        if before_any_write && !snippet && !clipped {
            if let Some(content) = whole_file(&view.lines, out) {
                if !self.seen.full.contains_key(&a) {
                    self.seen.full.insert(
                        a.clone(),
                        ShownFile {
                            content,
                            raw: self.raw(op),
                            how: "str_replace_editor view".into(),
                        },
                    );
                }
            }
        }
        let mut lines = view.lines;
        if clipped {
            // The clipped view's last line may be cut.
            lines.pop_last();
        }
        self.seen.views.push(ShownView {
            artefact: a,
            after_writes: if before_any_write { 0 } else { writes_so_far },
            lines,
            snippet,
            raw: self.raw(op),
        });
    }

    fn name_of(&self, path: &str) -> String {
        match &self.cwd {
            Some(d) if !path.starts_with('/') => self
                .roots
                .rel(&format!("{}/{path}", d.trim_end_matches('/'))),
            _ => self.roots.rel(path),
        }
    }

    /// The writes a successful call made.
    fn effects(&mut self, call: &Call, out: &str, result_ptr: &str) {
        let rules: Vec<WriteRule> = self
            .rules(&call.name)
            .filter(|w| match (&w.when_field, &w.when_value) {
                (Some(f), Some(v)) => call.args.pointer(f).and_then(Value::as_str) == Some(v),
                _ => true,
            })
            .cloned()
            .collect();
        for w in rules {
            if w.op == "shell" {
                self.shell(call, &w);
                continue;
            }
            let Some((path, _)) = get(&call.args, &w.path) else {
                self.drop_at(call, "", format!("{} call without a file path", call.name));
                continue;
            };
            let a = self.name_of(&path);
            let command = w.when_value.clone().unwrap_or_else(|| w.op.clone());
            let via = format!("{} {command}", call.name);
            match w.op.as_str() {
                "full-content" => match get(&call.args, &w.content) {
                    Some((c, p)) => {
                        self.add(call, a, WriteOp::FullContent { content: c }, &via, &p)
                    }
                    None => self.drop_at(call, "", format!("{via} without the file's text")),
                },
                "str-replace" => {
                    let Some((old, _)) = get(&call.args, &w.old) else {
                        self.drop_at(call, "", format!("{via} without the old text"));
                        continue;
                    };
                    // A missing new text deletes the old one (the editor's default).
                    let (new, p) = get(&call.args, &w.new).unwrap_or_default();
                    let p = if p.is_empty() {
                        w.old.first().cloned().unwrap_or_default()
                    } else {
                        p
                    };
                    self.add(
                        call,
                        a,
                        WriteOp::StrReplace {
                            old,
                            new,
                            all: false,
                            tolerance: sage_trace::Tolerance::TrimmedRetry,
                        },
                        &via,
                        &p,
                    );
                }
                "insert" => self.insert(call, &w, a, &via, out),
                "restore" => {
                    // The editor prints the whole restored file.
                    let body = out.find(VIEW_HEADER).map(|i| &out[i..]).unwrap_or("");
                    let body = body.split_once(":\n").map(|x| x.1).unwrap_or("");
                    let view = parse_numbered_view(body, '\t');
                    match whole_file(&view.lines, out)
                        .filter(|_| !out.contains("<response clipped>"))
                    {
                        Some(content) => {
                            let raw = RawRef::json(&self.file, self.line, result_ptr);
                            self.written.insert(a.clone());
                            self.b.write(
                                call.turn,
                                write(a, WriteOp::FullContent { content }, &via, false, raw),
                            );
                        }
                        None => self.drop_at(
                            call,
                            "",
                            format!(
                                "{via} on {a}: the result does not print the whole restored \
                                 file, so the state after the undo is unknown"
                            ),
                        ),
                    }
                }
                other => self.drop_at(call, "", format!("{via}: write op {other:?} not supported")),
            }
        }
    }

    fn insert(&mut self, call: &Call, w: &WriteRule, a: String, via: &str, out: &str) {
        let Some((new, p)) = get(&call.args, &w.new).or_else(|| get(&call.args, &w.content)) else {
            self.drop_at(call, "", format!("{via} without the inserted text"));
            return;
        };
        let given = w.line.iter().find_map(|lp| {
            call.args.pointer(lp).and_then(|v| {
                v.as_u64()
                    .or_else(|| v.as_str().and_then(|x| x.trim().parse().ok()))
            })
        });
        let after_line = match given {
            Some(l) => l as usize,
            None => match insert_line_from_snippet(out, &new) {
                Ok(l) => {
                    self.b.note(format!(
                        "{}: {via} on {a} carries no insert_line (dropped by the exporter); \
                         the position, after line {l}, is read from the numbered snippet of \
                         its tool result",
                        RawRef::json(&self.file, call.line, &call.args_ptr).display()
                    ));
                    l
                }
                Err(why) => {
                    self.drop_at(
                        call,
                        "",
                        format!("{via} on {a} carries no insert_line and {why}"),
                    );
                    return;
                }
            },
        };
        // The editor inserts the lines of `new_str` (split on newlines) as whole lines, so a
        // text ending in a newline also inserts an empty line.
        let text = format!("{new}\n");
        self.add(call, a, WriteOp::Insert { after_line, text }, via, &p);
    }

    fn shell(&mut self, call: &Call, w: &WriteRule) {
        let Some((cmd, p)) = get(&call.args, &w.command) else {
            return;
        };
        let cwd = self.follow_cd(&cmd);
        let raw = RawRef::json(&self.file, call.line, format!("{}{p}", call.args_ptr));
        for wr in shell_writes_in(&cmd, &self.roots, cwd.as_deref(), raw.clone()) {
            match wr {
                Ok(wr) => {
                    self.written.insert(wr.artefact.clone());
                    self.b.write(call.turn, wr);
                }
                Err(e) => self.b.drop_record(raw.clone(), e),
            }
        }
    }

    /// Follow the leading `cd DIR &&` / `cd DIR;` of a command (the shell keeps its directory
    /// between commands); returns the directory the rest of the command runs in.
    fn follow_cd(&mut self, cmd: &str) -> Option<String> {
        let mut rest = cmd.trim_start();
        while let Some(after) = rest.strip_prefix("cd ") {
            let end = after.find(['&', ';', '\n', '|']).unwrap_or(after.len());
            let dir = after[..end].trim().trim_matches(['"', '\'']);
            if dir.is_empty() || dir.contains(['$', '`', '~', '*']) {
                break;
            }
            let abs = if dir.starts_with('/') {
                dir.to_string()
            } else {
                match &self.cwd {
                    Some(c) => format!("{}/{dir}", c.trim_end_matches('/')),
                    None => break,
                }
            };
            self.cwd = Some(abs);
            rest = after[end..].trim_start_matches(['&', ';', '\n', ' ']);
        }
        self.cwd.clone()
    }

    fn add(&mut self, call: &Call, a: String, op: WriteOp, via: &str, field_ptr: &str) {
        self.written.insert(a.clone());
        let raw = RawRef::json(
            &self.file,
            call.line,
            format!("{}{field_ptr}", call.args_ptr),
        );
        self.b.write(call.turn, write(a, op, via, false, raw));
    }

    fn drop_at(&mut self, call: &Call, field_ptr: &str, why: String) {
        let raw = RawRef::json(
            &self.file,
            call.line,
            format!("{}{field_ptr}", call.args_ptr),
        );
        self.b.drop_record(raw, why);
    }

    fn finish(mut self) -> (CanonicalTrace, Seen) {
        // Editor calls that never got a result: whether they landed is unknown.
        let mut pending: Vec<(String, Call)> = self.calls.drain().collect();
        pending.sort_by(|a, b| a.1.args_ptr.cmp(&b.1.args_ptr));
        for (_, call) in pending {
            if self.rules(&call.name).next().is_some()
                && get_str(&call.args, "/command") != Some("view")
            {
                self.drop_at(
                    &call,
                    "",
                    format!("{} call without a result: not replayed", call.name),
                );
            }
        }
        // The agent framework, by the tool names it calls most.
        let agent = self
            .m
            .file
            .agents
            .iter()
            .map(|(name, tools)| {
                let n: usize = tools
                    .iter()
                    .map(|t| self.tool_counts.get(t).copied().unwrap_or(0))
                    .sum();
                (n, name.clone())
            })
            .filter(|(n, _)| *n > 0)
            .max_by_key(|(n, _)| *n)
            .map(|(_, name)| name);
        if let Some(a) = &agent {
            self.b
                .note(format!("agent framework: {a} (by the tools it calls)"));
        }
        let known: BTreeSet<&str> = self
            .m
            .file
            .agents
            .values()
            .flatten()
            .chain(self.m.file.writes.iter().flat_map(|w| w.tools.iter()))
            .map(String::as_str)
            .collect();
        let unknown: Vec<String> = self
            .tool_counts
            .iter()
            .filter(|(t, _)| !known.contains(t.as_str()))
            .map(|(t, n)| format!("{t} ({n})"))
            .collect();
        if !unknown.is_empty() {
            self.b.note(format!(
                "tools this adapter does not know as editors or shells: {}; a file they changed \
                 is not replayed",
                unknown.join(", ")
            ));
        }
        // A whole-file view contradicted by a longer one is a ranged view (the exporter drops
        // view_range): not a baseline.
        let mut longest: BTreeMap<String, usize> = BTreeMap::new();
        for v in self.seen.views.iter().filter(|v| v.after_writes == 0) {
            if let Some((&n, _)) = v.lines.last_key_value() {
                let e = longest.entry(v.artefact.clone()).or_default();
                *e = (*e).max(n);
            }
        }
        self.seen.full.retain(|a, f| {
            let lines = f.content.split('\n').count();
            longest.get(a).is_none_or(|&n| n <= lines)
        });
        self.seen.agent = agent;
        (self.b.finish(), self.seen)
    }
}

fn get_str<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

/// The first of `paths` present in `v` as text, with its pointer.
fn get(v: &Value, paths: &[String]) -> Option<(String, String)> {
    paths.iter().find_map(|p| match v.pointer(p) {
        Some(Value::String(t)) => Some((t.clone(), p.clone())),
        Some(Value::Null) | None => None,
        Some(x) => Some((x.to_string(), p.clone())),
    })
}

/// The whole file a numbered view prints, or `None` when it may show only part of it. The
/// editor numbers the lines of `text.split('\n')`, so a file ending in a newline shows an
/// empty last line; a ranged view never does. A view from line 1 whose last line is empty is
/// therefore whole (up to the rare range that ends on an empty line, which a longer view of
/// the same file or a blob id exposes). `NOTE: ... only N lines` (a range past the end) makes
/// a view from line 1 to N whole as well.
pub(crate) fn whole_file(lines: &BTreeMap<usize, String>, out: &str) -> Option<String> {
    let (&first, _) = lines.first_key_value()?;
    let (&last, last_text) = lines.last_key_value()?;
    if first != 1 || lines.len() != last {
        return None;
    }
    let joined = lines.values().cloned().collect::<Vec<_>>().join("\n");
    if last_text.is_empty() && last > 1 {
        return Some(joined);
    }
    let only = out
        .split("since there're only ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse::<usize>().ok());
    (only == Some(last)).then(|| joined + "\n")
}

/// The line after which an editor inserted `new` (its `insert_line`), read from the numbered
/// snippet the tool printed: the snippet shows up to a few lines before the insertion, the
/// inserted lines, then a few lines after. The position where `new`'s lines occur in the
/// snippet gives the line number; when they occur at several positions, the editors' context
/// of 4 lines decides (the snippet starts 4 lines before the insertion unless that is past
/// the top of the file); otherwise the position is not determined.
pub(crate) fn insert_line_from_snippet(out: &str, new: &str) -> Result<usize, String> {
    let body = out
        .find(VIEW_HEADER)
        .map(|i| &out[i..])
        .and_then(|x| x.split_once(":\n"))
        .map(|x| x.1)
        .ok_or("its result shows no numbered snippet")?;
    let view = parse_numbered_view(body, '\t');
    let numbers: Vec<usize> = view.lines.keys().copied().collect();
    let texts: Vec<&str> = view.lines.values().map(String::as_str).collect();
    let want: Vec<String> = new.split('\n').map(expand_tabs).collect();
    if want.iter().all(|l| l.is_empty()) {
        return Err("the inserted text is blank, so the snippet cannot place it".into());
    }
    let Some(&first) = numbers.first() else {
        return Err("its result shows no numbered snippet".into());
    };
    let fits = |k: usize| -> bool {
        k + want.len() <= texts.len() && want.iter().enumerate().all(|(j, l)| texts[k + j] == l)
    };
    let found: Vec<usize> = (0..texts.len()).filter(|&k| fits(k)).collect();
    let pick = match found.as_slice() {
        [] => return Err("its snippet does not show the inserted lines".into()),
        [k] => *k,
        many => {
            const CONTEXT: usize = 4;
            let by_context: Vec<usize> = many
                .iter()
                .copied()
                .filter(|&k| {
                    if first > 1 {
                        k == CONTEXT
                    } else {
                        k <= CONTEXT
                    }
                })
                .collect();
            match by_context.as_slice() {
                [k] => *k,
                _ => {
                    return Err(format!(
                        "its snippet shows the inserted lines at {} places",
                        many.len()
                    ))
                }
            }
        }
    };
    Ok(first + pick - 1)
}

/// Tabs expanded to 8-column stops (editors print views with `expandtabs()`).
pub fn expand_tabs(line: &str) -> String {
    if !line.contains('\t') {
        return line.to_string();
    }
    let mut out = String::with_capacity(line.len() + 8);
    let mut col = 0;
    for c in line.chars() {
        if c == '\t' {
            let n = 8 - col % 8;
            out.extend(std::iter::repeat_n(' ', n));
            col += n;
        } else {
            out.push(c);
            col += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sage_trace::RawStore;

    fn snippet(path: &str, first: usize, lines: &[&str]) -> String {
        let mut s = format!(
            "The file {path} has been edited. Here's the result of running `cat -n` on a snippet of {path}:\n"
        );
        for (i, l) in lines.iter().enumerate() {
            s.push_str(&format!("{:6}\t{l}\n", first + i));
        }
        s.push_str("Review the changes and make sure they are as expected.");
        s
    }

    #[test]
    fn insert_position_from_snippets() {
        // Derivation: the editor shows lines insert_line-3 .. insert_line (4 lines of context),
        // the inserted lines, then 4 more; the first inserted line is number insert_line + 1.
        // Inserted after line 10 of a long file: the snippet starts at 7, inserted at 11-12.
        let out = snippet(
            "/p/a.py",
            7,
            &["a", "b", "c", "d", "x = 1", "y = 2", "e", "f", "g", "h"],
        );
        assert_eq!(insert_line_from_snippet(&out, "x = 1\ny = 2"), Ok(10));
        // After line 2 (the snippet starts at line 1 with 2 lines of context).
        let out = snippet("/p/a.py", 1, &["import a", "import b", "new", "", "rest"]);
        assert_eq!(insert_line_from_snippet(&out, "new\n"), Ok(2));
        // At the top: insert_line 0.
        let out = snippet("/p/a.py", 1, &["new", "old1", "old2"]);
        assert_eq!(insert_line_from_snippet(&out, "new"), Ok(0));
        // A repeated line: two places fit; from line 1 the context rule allows both (k <= 4),
        // so the position is not determined.
        let out = snippet("/p/a.py", 1, &["pass", "pass", "z"]);
        assert!(insert_line_from_snippet(&out, "pass").is_err());
        // Repeated, but the snippet starts at 5, so the context is exactly 4 lines: after 8.
        let out = snippet("/p/a.py", 5, &["q", "q", "q", "q", "q", "q", "q", "q", "q"]);
        assert_eq!(insert_line_from_snippet(&out, "q"), Ok(8));
        assert!(insert_line_from_snippet("ERROR: nope", "x").is_err());
    }

    #[test]
    fn whole_views() {
        let l = |v: &[&str]| -> BTreeMap<usize, String> {
            v.iter()
                .enumerate()
                .map(|(i, t)| (i + 1, t.to_string()))
                .collect()
        };
        // The trailing empty numbered line: a file ending in a newline, shown whole.
        assert_eq!(whole_file(&l(&["a", "b", ""]), ""), Some("a\nb\n".into()));
        // No trailing empty line: possibly a range.
        assert_eq!(whole_file(&l(&["a", "b"]), ""), None);
        // A range past the end says how many lines the file has.
        assert_eq!(
            whole_file(
                &l(&["a", "b"]),
                "NOTE: We only show up to 2 since there're only 2 lines in this file."
            ),
            Some("a\nb\n".into())
        );
        let mut gap = l(&["a", "b", ""]);
        gap.remove(&2);
        assert_eq!(whole_file(&gap, ""), None);
        assert_eq!(expand_tabs("\tx\ty"), "        x       y");
    }

    fn run(records: &str) -> (CanonicalTrace, Seen, RawStore) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.json");
        std::fs::write(&p, records).unwrap();
        let m = embedded_mapping("claude-stream").unwrap();
        let (t, seen) = normalize_seen(&m, &[SourceFile::new("t.json", &p)]).unwrap();
        let mut store = RawStore::new();
        store.insert("t.json", records.as_bytes().to_vec());
        (t, seen, store)
    }

    #[test]
    fn records_turns_writes_and_gating() {
        let view =
            "Here's the result of running `cat -n` on /project/app.py:\n     1\tx = 1\n     2\t\n";
        let recs = serde_json::json!([
            {"type": "system", "model": "m-1"},
            {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "<uploaded_files>\n/project\n</uploaded_files>\nFix app.py"}]}},
            {"type": "user", "message": {"role": "tool", "content": [{"type": "tool_result", "tool_use_id": "toolu_000", "content": "Added workspace context"}]}},
            {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "text", "text": "Look first."},
                {"type": "tool_use", "id": "a", "name": "str_replace_editor", "input": {"command": "view", "path": "/project/app.py"}}]}},
            {"type": "user", "message": {"role": "tool", "content": [{"type": "tool_result", "tool_use_id": "a", "content": view}]}},
            {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "b", "name": "str_replace_editor", "input": {"command": "str_replace", "path": "/project/app.py", "old_str": "nope", "new_str": "y"}}]}},
            {"type": "user", "message": {"role": "tool", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "ERROR:\nNo replacement was performed, old_str `nope` did not appear verbatim in /project/app.py."}]}},
            {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "c", "name": "str_replace_editor", "input": {"command": "str_replace", "path": "/project/app.py", "old_str": "x = 1", "new_str": "x = 2"}}]}},
            {"type": "user", "message": {"role": "tool", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "The file /project/app.py has been edited."}]}},
            {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "d", "name": "execute_bash", "input": {"command": "cd /project/sub && cat > t.py <<'EOF'\nprint(1)\nEOF"}}]}},
            {"type": "user", "message": {"role": "tool", "content": [{"type": "tool_result", "tool_use_id": "d", "content": ""}]}},
            {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "e", "name": "think", "input": {"thought": "The check is missing."}}]}},
            {"type": "user", "message": {"role": "tool", "content": [{"type": "tool_result", "tool_use_id": "e", "content": "Your thought has been logged."}]}},
            {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "f", "name": "finish", "input": {"message": "done"}}]}},
            {"type": "result", "subtype": "completed", "num_turns": 5, "is_error": false}
        ])
        .to_string();
        let (t, seen, store) = run(&recs);
        let kinds: Vec<_> = t
            .turns
            .iter()
            .map(|x| (x.actor.name.as_str(), x.kind))
            .collect();
        // system, environment (unmatched result), 6 agent turns (view, failed edit, edit,
        // shell, think, finish), result.
        assert_eq!(kinds.len(), 9, "{kinds:?}");
        assert_eq!(kinds[0], ("system", TurnKind::Administrative));
        assert_eq!(kinds[1], ("environment", TurnKind::Administrative));
        assert_eq!(kinds[8], ("result", TurnKind::Administrative));
        // The failed str_replace writes nothing; its result is an error.
        assert!(t.turns[3].writes.is_empty());
        assert!(t.turns[3].tool_results[0].is_error);
        let w = &t.turns[4].writes[0];
        assert_eq!(w.artefact, "app.py");
        assert_eq!(
            w.op,
            WriteOp::StrReplace {
                old: "x = 1".into(),
                new: "x = 2".into(),
                all: false,
                tolerance: sage_trace::Tolerance::TrimmedRetry,
            }
        );
        // The heredoc runs in /project/sub after `cd`.
        assert_eq!(t.turns[5].writes[0].artefact, "sub/t.py");
        // Plain-text arguments of think and shell calls.
        assert_eq!(t.turns[6].tool_calls[0].arguments, "The check is missing.");
        assert_eq!(
            t.turns[5].tool_calls[0].arguments,
            "cd /project/sub && cat > t.py <<'EOF'\nprint(1)\nEOF"
        );
        assert_eq!(seen.full["app.py"].content, "x = 1\n");
        assert_eq!(seen.model.as_deref(), Some("m-1"));
        assert_eq!(seen.agent.as_deref(), Some("openhands"));
        assert!(seen.task.as_ref().unwrap().text.ends_with("Fix app.py"));
        assert_eq!(t.dropped.len(), 1, "{:?}", t.dropped);
        assert!(crate::verify_raw_refs(&t, &store).is_empty());
    }

    #[test]
    fn insert_without_line_and_undo() {
        let snip = "The file /project/a.py has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n     1\tone\n     2\tnew\n     3\ttwo\n";
        let undo = "Last edit to /project/a.py undone successfully. Here's the result of running `cat -n` on /project/a.py:\n     1\tone\n     2\ttwo\n     3\t\n";
        let recs = serde_json::json!([
            {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "a", "name": "str_replace_editor", "input": {"command": "insert", "path": "/project/a.py", "new_str": "new"}}]}},
            {"type": "user", "message": {"role": "tool", "content": [{"type": "tool_result", "tool_use_id": "a", "content": snip}]}},
            {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "b", "name": "str_replace_editor", "input": {"command": "undo_edit", "path": "/project/a.py"}}]}}, 
            {"type": "user", "message": {"role": "tool", "content": [{"type": "tool_result", "tool_use_id": "b", "content": undo}]}}
        ])
        .to_string();
        let (t, _, store) = run(&recs);
        assert_eq!(
            t.turns[0].writes[0].op,
            WriteOp::Insert {
                after_line: 1,
                text: "new\n".into()
            }
        );
        assert!(
            t.notes
                .iter()
                .any(|n| n.contains("insert_line") && n.contains("after line 1")),
            "{:?}",
            t.notes
        );
        assert_eq!(
            t.turns[1].writes[0].op,
            WriteOp::FullContent {
                content: "one\ntwo\n".into()
            }
        );
        assert!(crate::verify_raw_refs(&t, &store).is_empty());
    }

    #[test]
    fn bad_input_names_file_and_record() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.json");
        std::fs::write(&p, "[{\"type\": \"assistant\", ").unwrap();
        let m = embedded_mapping("claude-stream").unwrap();
        let e = normalize_seen(&m, &[SourceFile::new("t.json", &p)]).unwrap_err();
        assert_eq!(e.file, "t.json");
        assert!(e.record.unwrap().starts_with("line 1"),);
        std::fs::write(&p, "hello").unwrap();
        let e = normalize_seen(&m, &[SourceFile::new("t.json", &p)]).unwrap_err();
        assert!(e.message.contains("not a JSON list"), "{e}");
        std::fs::write(&p, "[1, {\"type\": \"weird\"}]").unwrap();
        let (t, _) = normalize_seen(&m, &[SourceFile::new("t.json", &p)]).unwrap();
        assert_eq!(t.dropped.len(), 2);
        assert!(t.dropped[1].reason.contains("weird"));
    }
}
