//! Helpers shared by the event-stream adapters (OpenHands, SWE-agent, mini-SWE-agent,
//! Claude Code, Codex, Inspect, OpenTelemetry): a turn builder that ties tool results to the
//! turn of their call, JSON access with pointers, streamed JSON Lines, path roots, the
//! numbered file views agents print (`cat -n`, SWE-agent windows), multi-file unified diffs,
//! and Python string literals.

use crate::{AdapterError, SourceFile};
use sage_trace::{
    pointer_token, Actor, CanonicalTrace, DroppedRecord, RawRef, TextItem, ToolCall, ToolResult,
    Turn, TurnKind, Write, WriteOp,
};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;

/// JSON pointer `base/token` (the token escaped per RFC 6901).
pub(crate) fn ptr(base: &str, token: impl std::fmt::Display) -> String {
    format!("{base}/{}", pointer_token(&token.to_string()))
}

/// A string field, or `None` (also for JSON null).
pub fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// A non-empty string field.
pub fn ne<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    s(v, key).filter(|t| !t.trim().is_empty())
}

/// Read one whole-file JSON document, naming the file and position on failure.
pub fn read_json(file: &SourceFile) -> Result<Value, AdapterError> {
    let text = file.read_text()?;
    parse_json(&file.name, &text, None)
}

/// Parse JSON text, naming `file` (and `line`) and the position of the first error.
pub(crate) fn parse_json(
    file: &str,
    text: &str,
    line: Option<usize>,
) -> Result<Value, AdapterError> {
    serde_json::from_str(text).map_err(|e| {
        let at = match line {
            Some(l) => format!("line {l}, column {}", e.column()),
            None => format!("line {}, column {}", e.line(), e.column()),
        };
        AdapterError::new(file, Some(at), format!("not valid JSON: {e}"))
    })
}

/// Stream the lines of a JSON Lines file one at a time (blank lines skipped), so a big trace
/// is never held whole in memory; a line that is not JSON is handed over as `Err(message)`.
pub(crate) fn for_each_json_line(
    file: &SourceFile,
    mut f: impl FnMut(usize, Result<Value, String>) -> Result<(), AdapterError>,
) -> Result<(), AdapterError> {
    let fh = std::fs::File::open(&file.path)
        .map_err(|e| AdapterError::new(&file.name, None, format!("cannot read: {e}")))?;
    let mut r = std::io::BufReader::with_capacity(1 << 16, fh);
    let mut buf = Vec::new();
    let mut n = 0usize;
    loop {
        buf.clear();
        let got = r.read_until(b'\n', &mut buf).map_err(|e| {
            AdapterError::new(&file.name, Some(format!("line {}", n + 1)), e.to_string())
        })?;
        if got == 0 {
            break;
        }
        n += 1;
        let line = buf.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let v = match std::str::from_utf8(line) {
            Ok(t) => serde_json::from_str::<Value>(t).map_err(|e| format!("not valid JSON: {e}")),
            Err(e) => Err(format!("not UTF-8 text: {e}")),
        };
        f(n, v)?;
    }
    Ok(())
}

/// `head` as text (cut at the last complete character).
pub(crate) fn head_text(head: &[u8]) -> &str {
    match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or(""),
    }
}

/// The main file of a trace (the first given): every adapter reads it first.
pub(crate) fn main_file(files: &[SourceFile]) -> Result<&SourceFile, AdapterError> {
    files
        .first()
        .ok_or_else(|| AdapterError::new("-", None, "no trace file given"))
}

/// The one turn builder of every adapter: numbers turns, ties each tool result to the turn
/// of its call, and records what was dropped and why. Turn kinds are set afterwards, once,
/// by `adapters::finish` (the one classifier), whatever built the trace.
pub struct TraceBuilder {
    pub trace: CanonicalTrace,
    /// call id → index (0-based) of the turn holding the call.
    calls: HashMap<String, usize>,
}

impl TraceBuilder {
    pub fn new(framework: &str, files: &[SourceFile]) -> Self {
        TraceBuilder {
            trace: CanonicalTrace::new(framework, files.iter().map(|f| f.name.clone()).collect()),
            calls: HashMap::new(),
        }
    }

    /// Append a turn; returns its 0-based position.
    pub fn push(&mut self, turn: Turn) -> usize {
        for c in &turn.tool_calls {
            if let Some(id) = &c.id {
                self.calls.insert(id.clone(), self.trace.turns.len());
            }
        }
        self.trace.push_turn(turn);
        self.trace.turns.len() - 1
    }

    /// A turn that only holds a message.
    pub fn message(&mut self, actor: Actor, kind: TurnKind, text: &str, raw: RawRef) -> usize {
        let mut t = Turn::new(actor, kind);
        t.message = Some(TextItem {
            text: text.to_string(),
            raw,
        });
        self.push(t)
    }

    /// Keep every text block of one message: `rest` (the blocks after the one that is turn
    /// `at`'s message) become turns of their own by the same actor, right after it. A canonical
    /// turn holds one message and every item keeps its own raw pointer, so a message split
    /// over several blocks is never cut to its first. Empty blocks are skipped.
    pub fn continue_message(&mut self, at: usize, rest: Vec<TextItem>) {
        let actor = self.trace.turns[at].actor.clone();
        for item in rest.into_iter().filter(|t| !t.text.trim().is_empty()) {
            let mut t = Turn::new(actor.clone(), TurnKind::Planning);
            t.message = Some(item);
            self.push(t);
        }
    }

    /// An administrative turn (kept, never scored).
    pub fn admin(&mut self, actor: &str, text: &str, raw: RawRef) -> usize {
        self.message(
            Actor::new(actor, Some("system")),
            TurnKind::Administrative,
            text,
            raw,
        )
    }

    /// A message from the user (the task, follow-ups): not a canonical turn, since no agent
    /// authored it; recorded as dropped with the reason every adapter uses (docs/adapters.md).
    pub fn user(&mut self, _text: &str, raw: RawRef) {
        self.drop_record(raw, "not agent-authored: task/user message");
    }

    pub fn last_mut(&mut self) -> Option<&mut Turn> {
        self.trace.turns.last_mut()
    }

    /// Add a tool call to turn `at`.
    pub fn call(&mut self, at: usize, call: ToolCall) {
        if let Some(id) = &call.id {
            self.calls.insert(id.clone(), at);
        }
        self.trace.turns[at].tool_calls.push(call);
    }

    /// The turn holding call `id`.
    pub(crate) fn turn_of_call(&self, id: &str) -> Option<usize> {
        self.calls.get(id).copied()
    }

    /// Attach a result to the turn of its call, else to the last non-user turn; `None` when
    /// there is no turn to attach it to.
    pub fn result(&mut self, result: ToolResult) -> Option<usize> {
        let at = result
            .call_id
            .as_deref()
            .and_then(|id| self.turn_of_call(id))
            .or_else(|| self.last_agent_turn())?;
        self.trace.turns[at].tool_results.push(result);
        Some(at)
    }

    /// The last turn authored by an agent.
    pub(crate) fn last_agent_turn(&self) -> Option<usize> {
        self.trace
            .turns
            .iter()
            .rposition(|t| t.actor.role.as_deref() != Some("user") && t.is_applicable())
    }

    pub fn write(&mut self, at: usize, w: Write) {
        self.trace.turns[at].writes.push(w);
    }

    pub fn drop_record(&mut self, raw: RawRef, reason: impl Into<String>) {
        self.trace.dropped.push(DroppedRecord {
            raw,
            reason: reason.into(),
        });
    }

    pub fn note(&mut self, n: impl Into<String>) {
        self.trace.notes.push(n.into());
    }

    /// The trace built (its turns' kinds are set by `adapters::finish`).
    pub fn finish(self) -> CanonicalTrace {
        self.trace
    }
}

/// Strips the workspace root from absolute paths, so artefacts are named as the task (and a
/// submitted patch) names them: relative, `/` separated.
#[derive(Debug, Clone, Default)]
pub struct PathRoots {
    /// Roots, longest first, each ending with `/`.
    roots: Vec<String>,
}

impl PathRoots {
    pub fn new<I: IntoIterator<Item = S>, S: AsRef<str>>(roots: I) -> Self {
        let mut r = PathRoots::default();
        for x in roots {
            r.add(x.as_ref());
        }
        r
    }

    pub fn add(&mut self, root: &str) {
        let root = root.trim();
        if root.is_empty() || root == "/" {
            return;
        }
        let mut r = root.trim_end_matches('/').to_string();
        r.push('/');
        if !self.roots.contains(&r) {
            self.roots.push(r);
            self.roots.sort_by_key(|x| std::cmp::Reverse(x.len()));
        }
    }

    /// Learn the root from an absolute path whose relative tail is `known` (a path from a
    /// submitted patch): `/workspace/repo/a/b.py` + `a/b.py` → root `/workspace/repo/`.
    pub(crate) fn learn_from(&mut self, abs: &str, known: &[String]) {
        for k in known {
            if let Some(root) = abs.strip_suffix(k.as_str()) {
                if root.ends_with('/') {
                    self.add(root);
                    return;
                }
            }
        }
    }

    /// The artefact name of `path`.
    pub fn rel(&self, path: &str) -> String {
        let p = path.replace('\\', "/");
        for r in &self.roots {
            if let Some(rest) = p.strip_prefix(r.as_str()) {
                return clean_rel(rest);
            }
        }
        clean_rel(&p)
    }
}

fn clean_rel(p: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for part in p.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            x => out.push(x),
        }
    }
    let joined = out.join("/");
    if p.starts_with('/') && !joined.is_empty() {
        // Still absolute: keep it recognisable as such.
        format!("/{joined}")
    } else {
        joined
    }
}

/// A file view printed with line numbers: `cat -n` (`     1\tline`), SWE-agent windows
/// (`1:line`), OpenHands agentskills (`1|line`). Returns the numbered lines, and whether the
/// view claims to show the whole file (`Some(total)` when a header names the total).
#[derive(Debug, Clone, PartialEq)]
pub struct NumberedView {
    pub lines: BTreeMap<usize, String>,
    pub total: Option<usize>,
}

impl NumberedView {
    /// The full text, when lines 1..=n are all present and nothing says the file is longer.
    pub fn full_text(&self) -> Option<String> {
        let n = *self.lines.keys().last()?;
        if self.lines.len() != n || self.lines.keys().next() != Some(&1) {
            return None;
        }
        if let Some(t) = self.total {
            if t != n {
                return None;
            }
        }
        let mut s = String::new();
        for l in self.lines.values() {
            s.push_str(l);
            s.push('\n');
        }
        Some(s)
    }
}

/// Parse a numbered view; `sep` is the separator after the number (`'\t'`, `':'`, `'|'`).
pub(crate) fn parse_numbered_view(text: &str, sep: char) -> NumberedView {
    let mut lines = BTreeMap::new();
    let mut total = None;
    for l in text.split('\n') {
        let l = l.strip_suffix('\r').unwrap_or(l);
        if total.is_none() {
            if let Some(t) = total_from_header(l) {
                total = Some(t);
                continue;
            }
        }
        let trimmed = l.trim_start_matches(' ');
        let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            continue;
        }
        let rest = &trimmed[digits..];
        let Some(body) = rest.strip_prefix(sep) else {
            continue;
        };
        let Ok(n) = trimmed[..digits].parse::<usize>() else {
            continue;
        };
        if n == 0 || lines.contains_key(&n) {
            continue;
        }
        // Views are contiguous: a numbered line far past the last one is program output.
        if let Some((&last, _)) = lines.iter().next_back() {
            if n != last + 1 {
                continue;
            }
        }
        lines.insert(n, body.to_string());
    }
    NumberedView { lines, total }
}

fn total_from_header(l: &str) -> Option<usize> {
    // `[File: /p/x.py (372 lines total)]`, `(79 lines total after edit)`
    let i = l.find(" lines total")?;
    let before = &l[..i];
    let start = before.rfind('(')? + 1;
    before[start..].trim().parse().ok()
}

/// One file's part of a multi-file unified diff (`git diff` output).
#[derive(Debug, Clone, PartialEq)]
pub struct FileDiff {
    /// The file's path after the change (before it, for a deletion), without `a/` `b/`.
    pub path: String,
    pub old_path: Option<String>,
    pub is_new: bool,
    pub is_delete: bool,
    /// The text of this file's diff, from its `diff --git` (or `---`) line on.
    pub text: String,
}

/// Split a multi-file unified diff per file (CRLF line ends are turned into LF), through
/// the one patch model ([`sage_patch::parse`]). Sections that name no file are dropped.
pub fn split_unified_diff(patch: &str) -> Vec<FileDiff> {
    let patch = patch.replace("\r\n", "\n");
    sage_patch::parse(&patch)
        .into_iter()
        .filter_map(|f| {
            let path = f.path()?.to_string();
            let is_new = f.kind == sage_patch::ChangeKind::Added;
            Some(FileDiff {
                path,
                old_path: if is_new { None } else { f.old_path.clone() },
                is_new,
                is_delete: f.kind == sage_patch::ChangeKind::Deleted,
                text: patch[f.span.clone()].to_string(),
            })
        })
        .filter(|d| !d.path.is_empty())
        .collect()
}

/// Decode a Python string literal starting at `src[0]` (optional `r`/`b`/`u` prefix, single,
/// double or triple quotes). Returns the value and the number of bytes consumed.
pub(crate) fn python_string(src: &str) -> Option<(String, usize)> {
    let bytes = src.as_bytes();
    let mut i = 0;
    let mut raw = false;
    while i < bytes.len() && i < 2 && matches!(bytes[i], b'r' | b'R' | b'b' | b'B' | b'u' | b'U') {
        if matches!(bytes[i], b'r' | b'R') {
            raw = true;
        }
        i += 1;
    }
    let q = *bytes.get(i)?;
    if q != b'"' && q != b'\'' {
        return None;
    }
    let triple = bytes.get(i + 1) == Some(&q) && bytes.get(i + 2) == Some(&q);
    let delim: String = if triple {
        (q as char).to_string().repeat(3)
    } else {
        (q as char).to_string()
    };
    let body_start = i + delim.len();
    let mut out = String::new();
    let mut j = body_start;
    while j < src.len() {
        let rest = &src[j..];
        if rest.starts_with(delim.as_str()) {
            return Some((out, j + delim.len()));
        }
        let c = rest.chars().next()?;
        if c == '\\' {
            let mut it = rest[1..].chars();
            let n = it.next()?;
            j += 1 + n.len_utf8();
            if raw {
                out.push('\\');
                out.push(n);
                continue;
            }
            match n {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '\\' => out.push('\\'),
                '\'' => out.push('\''),
                '"' => out.push('"'),
                '0' => out.push('\0'),
                '\n' => {}
                'x' => {
                    let h = src.get(j..j + 2)?;
                    out.push(char::from_u32(u32::from_str_radix(h, 16).ok()?)?);
                    j += 2;
                }
                'u' => {
                    let h = src.get(j..j + 4)?;
                    out.push(char::from_u32(u32::from_str_radix(h, 16).ok()?)?);
                    j += 4;
                }
                other => {
                    out.push('\\');
                    out.push(other);
                }
            }
            continue;
        }
        if !triple && c == '\n' {
            return None;
        }
        out.push(c);
        j += c.len_utf8();
    }
    None
}

/// The call `name(...)` in Python source: positional string arguments and keyword string
/// arguments (other argument kinds make the call uninterpretable: `None`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PyCall {
    pub positional: Vec<String>,
    pub keywords: BTreeMap<String, PyArg>,
}

/// A literal argument value of a Python call.
#[derive(Debug, Clone, PartialEq)]
pub enum PyArg {
    Str(String),
    Int(i64),
    Bool(bool),
    None,
}

impl PyArg {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            PyArg::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Find every call of `name(` in `code` and parse its literal arguments; calls whose
/// arguments are not literals come back as `Err(reason)`.
pub(crate) fn python_calls(code: &str, name: &str) -> Vec<Result<PyCall, String>> {
    let mut out = Vec::new();
    let pat = format!("{name}(");
    let mut from = 0;
    while let Some(k) = code[from..].find(&pat) {
        let at = from + k;
        // Must not be part of a longer identifier.
        let prev = code[..at].chars().next_back();
        if prev.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
            from = at + pat.len();
            continue;
        }
        let start = at + pat.len();
        match parse_py_args(&code[start..]) {
            Ok((call, used)) => {
                out.push(Ok(call));
                from = start + used;
            }
            Err(e) => {
                out.push(Err(e));
                from = start;
            }
        }
    }
    out
}

fn parse_py_args(src: &str) -> Result<(PyCall, usize), String> {
    let mut call = PyCall::default();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < src.len() {
            let c = src[*i..].chars().next().unwrap_or(' ');
            if c.is_whitespace() {
                *i += c.len_utf8();
            } else {
                break;
            }
        }
    };
    loop {
        skip_ws(&mut i);
        if src[i..].starts_with(')') {
            return Ok((call, i + 1));
        }
        // keyword?
        let ident_len = src[i..]
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let mut key = None;
        if ident_len > 0 {
            let after = &src[i + ident_len..];
            let t = after.trim_start();
            if t.starts_with('=') && !t.starts_with("==") {
                key = Some(src[i..i + ident_len].to_string());
                i = src.len() - t.len() + 1;
                skip_ws(&mut i);
            }
        }
        let rest = &src[i..];
        let (val, used) = if let Some((s, used)) = python_string(rest) {
            // Implicit concatenation of adjacent literals.
            let mut s = s;
            let mut used = used;
            loop {
                let tail = &rest[used..];
                let t = tail.trim_start();
                match python_string(t) {
                    Some((s2, u2)) if !t.starts_with(['b', 'B']) || u2 > 1 => {
                        s.push_str(&s2);
                        used += tail.len() - t.len() + u2;
                    }
                    _ => break,
                }
            }
            (PyArg::Str(s), used)
        } else if rest.starts_with("None") {
            (PyArg::None, 4)
        } else if rest.starts_with("True") {
            (PyArg::Bool(true), 4)
        } else if rest.starts_with("False") {
            (PyArg::Bool(false), 5)
        } else {
            let n = rest
                .bytes()
                .take_while(|b| b.is_ascii_digit() || *b == b'-')
                .count();
            match rest[..n].parse::<i64>() {
                Ok(v) if n > 0 => (PyArg::Int(v), n),
                _ => {
                    return Err(format!(
                        "argument {} is not a literal: {:?}",
                        call.positional.len() + call.keywords.len() + 1,
                        rest.chars().take(40).collect::<String>()
                    ))
                }
            }
        };
        i += used;
        match key {
            Some(k) => {
                call.keywords.insert(k, val);
            }
            None => match val {
                PyArg::Str(s) => call.positional.push(s),
                other => call.positional.push(format!("{other:?}")),
            },
        }
        skip_ws(&mut i);
        if src[i..].starts_with(',') {
            i += 1;
        } else if src[i..].starts_with(')') {
            return Ok((call, i + 1));
        } else {
            return Err("unbalanced call arguments".into());
        }
    }
}

/// A tool call with its arguments as the raw record holds them.
pub(crate) fn tool_call(id: Option<&str>, name: &str, arguments: &str, raw: RawRef) -> ToolCall {
    ToolCall {
        id: id.map(str::to_string),
        name: name.to_string(),
        arguments: arguments.to_string(),
        raw,
    }
}

pub fn tool_result(call_id: Option<&str>, output: &str, is_error: bool, raw: RawRef) -> ToolResult {
    ToolResult {
        call_id: call_id.map(str::to_string),
        output: output.to_string(),
        is_error,
        raw,
    }
}

/// The text of a JSON value as `RawStore` renders it at a pointer (a string as is, anything
/// else as JSON text), so an item taken from it always verifies.
pub(crate) fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Texts of a message content that is a string or a list of `{type:"text", text}` blocks,
/// each with its pointer.
pub(crate) fn content_texts(content: &Value, base: &str) -> Vec<(String, String)> {
    match content {
        Value::String(t) => vec![(t.clone(), base.to_string())],
        Value::Array(items) => items
            .iter()
            .enumerate()
            .filter_map(|(i, b)| {
                let p = ptr(base, i);
                match b {
                    Value::String(t) => Some((t.clone(), p)),
                    Value::Object(_) => {
                        let ty = s(b, "type").unwrap_or("text");
                        if matches!(ty, "text" | "input_text" | "output_text" | "reasoning") {
                            s(b, "text").map(|t| (t.to_string(), ptr(&p, "text")))
                        } else {
                            None
                        }
                    }
                    _ => None,
                }
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A write with `via` and raw pointer.
pub fn write(artefact: String, op: WriteOp, via: &str, final_state: bool, raw: RawRef) -> Write {
    Write {
        artefact,
        op,
        via: via.to_string(),
        final_state,
        raw,
    }
}

/// The submitted patch as final-state writes, one per file (unified diff of that file, or a
/// deletion).
pub(crate) fn final_patch_writes(
    patch: &str,
    via: &str,
    raw: &RawRef,
    roots: &PathRoots,
) -> Vec<Write> {
    split_unified_diff(patch)
        .into_iter()
        .map(|d| {
            let op = if d.is_delete {
                WriteOp::Delete
            } else {
                WriteOp::UnifiedDiff { diff: d.text }
            };
            write(roots.rel(&d.path), op, via, true, raw.clone())
        })
        .collect()
}

/// The files a submitted patch touches.
pub(crate) fn patch_paths(patch: &str) -> Vec<String> {
    split_unified_diff(patch)
        .into_iter()
        .map(|d| d.path)
        .collect()
}

/// The plain shell edits of `cmd` as writes (heredocs, `cat >`, `tee`, `sed -i` with a
/// literal substitution, `rm`: the one shell-edit reader, [`crate::edits::shell_edits`]), or
/// the reason an edit-looking command could not be interpreted.
pub(crate) fn shell_writes(
    cmd: &str,
    roots: &PathRoots,
    raw: RawRef,
) -> Vec<Result<Write, String>> {
    shell_writes_in(cmd, roots, None, raw)
}

/// [`shell_writes`] for a command run in `cwd` (an absolute path): relative file names are
/// taken relative to it before the roots are stripped. `cd DIR` inside the command is not
/// followed here (see the callers that track a shell's directory).
pub(crate) fn shell_writes_in(
    cmd: &str,
    roots: &PathRoots,
    cwd: Option<&str>,
    raw: RawRef,
) -> Vec<Result<Write, String>> {
    let name = |p: &str| -> String {
        match cwd {
            Some(d) if !p.starts_with('/') => {
                roots.rel(&format!("{}/{p}", d.trim_end_matches('/')))
            }
            _ => roots.rel(p),
        }
    };
    // `apply_patch <<'EOF' *** Begin Patch ... EOF` (Codex's patch tool called from a shell;
    // other agents copy the habit): the patch's own writes, whatever the framework.
    if invokes_apply_patch(cmd) {
        return apply_patch_named(cmd, &name, &raw);
    }
    let parsed = crate::edits::shell_edits(cmd);
    let mut out: Vec<Result<Write, String>> = Vec::new();
    for e in parsed.edits {
        let via = match &e.op {
            WriteOp::Delete => "shell rm",
            WriteOp::StrReplace { .. } => "shell sed -i",
            WriteOp::SearchReplace { .. } => "shell append",
            _ => "shell redirect",
        };
        out.push(Ok(write(name(&e.path), e.op, via, false, raw.clone())));
    }
    for u in parsed.uninterpreted {
        out.push(Err(format!("{}: {}", u.reason, u.text)));
    }
    out
}

/// The writes of an `apply_patch` patch (`*** Begin Patch` … `*** End Patch`), read by
/// [`crate::edits::parse_apply_patch`]; a move comes back as `Err`.
pub(crate) fn apply_patch_writes(
    patch: &str,
    roots: &PathRoots,
    raw: &RawRef,
) -> Vec<Result<Write, String>> {
    apply_patch_named(patch, &|p: &str| roots.rel(p), raw)
}

/// [`apply_patch_writes`] with each path named by `name` (a shell's folder, the roots).
fn apply_patch_named(
    patch: &str,
    name: &dyn Fn(&str) -> String,
    raw: &RawRef,
) -> Vec<Result<Write, String>> {
    let parsed = crate::edits::parse_apply_patch(patch);
    let mut out: Vec<Result<Write, String>> = parsed
        .edits
        .into_iter()
        .map(|e| {
            Ok(write(
                name(&e.path),
                e.op,
                "apply_patch",
                false,
                raw.clone(),
            ))
        })
        .collect();
    out.extend(
        parsed
            .uninterpreted
            .into_iter()
            .map(|u| Err(format!("apply_patch: {}: {}", u.reason, u.text))),
    );
    out
}

/// Whether a shell command runs `apply_patch` (or `applypatch`) on a `*** Begin Patch` text,
/// possibly after `cd DIR &&`.
fn invokes_apply_patch(cmd: &str) -> bool {
    if !cmd.contains("*** Begin Patch") {
        return false;
    }
    cmd.split(['\n', ';'])
        .flat_map(|l| l.split("&&"))
        .map(str::trim_start)
        .any(|c| c.starts_with("apply_patch") || c.starts_with("applypatch"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_literals() {
        assert_eq!(python_string(r#""a\nb" x"#), Some(("a\nb".into(), 6)));
        assert_eq!(
            python_string("\"\"\"x\n'y'\"\"\")"),
            Some(("x\n'y'".into(), 11))
        );
        assert_eq!(python_string(r"r'\d'"), Some((r"\d".into(), 5)));
        assert_eq!(python_string("'abc"), None);
        let calls = python_calls(
            "edit_file_by_replace(\n'/a.py',\nto_replace=\"\"\"x\"\"\",\nnew_content='y')",
            "edit_file_by_replace",
        );
        let c = calls[0].as_ref().unwrap();
        assert_eq!(c.positional, vec!["/a.py"]);
        assert_eq!(c.keywords["to_replace"], PyArg::Str("x".into()));
        assert_eq!(c.keywords["new_content"], PyArg::Str("y".into()));
        assert!(python_calls("f(x)", "f")[0].is_err());
    }

    #[test]
    fn numbered_views() {
        let v = parse_numbered_view(
            "Here's the result of running `cat -n` on /a:\n     1\tx\n     2\t\n     3\ty",
            '\t',
        );
        assert_eq!(v.full_text().unwrap(), "x\n\ny\n");
        let w = parse_numbered_view(
            "[File: /r/a.py (372 lines total)]\n(272 more lines above)\n273:a\n274:b\n",
            ':',
        );
        assert_eq!(w.total, Some(372));
        assert_eq!(w.lines.len(), 2);
        assert!(w.full_text().is_none());
    }

    #[test]
    fn split_diffs() {
        let p = "diff --git a/x.py b/x.py\r\nnew file mode 100644\r\n--- /dev/null\r\n+++ b/x.py\r\n@@ -0,0 +1 @@\r\n+a\r\ndiff --git a/y.py b/y.py\n--- a/y.py\n+++ b/y.py\n@@ -1 +1 @@\n--- old\n+++ new\n";
        let d = split_unified_diff(p);
        assert_eq!(d.len(), 2);
        assert!(d[0].is_new);
        assert_eq!(d[0].path, "x.py");
        assert_eq!(d[1].path, "y.py");
        assert!(d[1].text.ends_with("+++ new\n"));
    }

    #[test]
    fn shell_edits_beyond_the_shared_parser() {
        let raw = RawRef::json("t", None, "/c");
        let r = PathRoots::default();
        let w: Vec<Write> = shell_writes("rm a.py b/c.py", &r, raw.clone())
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(w.len(), 2);
        assert_eq!(w[1].artefact, "b/c.py");
        let cmd = r#"sed -i "s/x(?=\\\\d+)'/y\\\\d/" f.py"#;
        let w: Vec<Write> = shell_writes(cmd, &r, raw.clone())
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            w[0].op,
            WriteOp::StrReplace {
                old: r"x(?=\d+)'".into(),
                new: r"y\d".into(),
                all: true,
                tolerance: sage_trace::Tolerance::TrimmedRetry,
            }
        );
        assert!(shell_writes(r#"sed -i "s/a.*b/c/" f"#, &r, raw)
            .iter()
            .all(|x| x.is_err()));
    }

    #[test]
    fn apply_patch_heredoc_in_any_shell() {
        let r = PathRoots::new(["/testbed"]);
        let raw = RawRef::lines("t", 1, 1);
        let cmd = "cd /testbed && applypatch <<'EOF'\n*** Begin Patch\n*** Update File: src/app.py\n@@\n-x = 1\n+x = 2\n*** End Patch\nEOF";
        let w: Vec<Write> = shell_writes(cmd, &r, raw.clone())
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].artefact, "src/app.py");
        assert_eq!(w[0].via, "apply_patch");
        // Run in a folder: the patch's relative names are the folder's.
        let w: Vec<Write> = shell_writes_in(
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: new.txt\n+hi\n*** End Patch\nEOF",
            &r,
            Some("/testbed/pkg"),
            raw.clone(),
        )
        .into_iter()
        .map(Result::unwrap)
        .collect();
        assert_eq!(w[0].artefact, "pkg/new.txt");
        // A patch printed, not applied, is no write.
        assert!(
            shell_writes("cat <<'EOF'\n*** Begin Patch\n*** End Patch\nEOF", &r, raw).is_empty()
        );
    }

    #[test]
    fn roots() {
        let mut r = PathRoots::new(["/workspace"]);
        r.learn_from("/workspace/repo__x/a/b.py", &["a/b.py".to_string()]);
        assert_eq!(r.rel("/workspace/repo__x/a/b.py"), "a/b.py");
        assert_eq!(r.rel("/workspace/other.py"), "other.py");
        assert_eq!(r.rel("./c/../d.py"), "d.py");
    }
}
