//! SWE-agent `.traj` (`SWE-agent/SWE-agent`, `sweagent/types.py`): one JSON object with
//! `history` (chat messages), `trajectory` (steps), `info` (`submission`, `exit_status`).
//!
//! Turns come from `history`: demonstration messages (`is_demo`) are skipped (reported as
//! dropped), the system prompt is administrative, each assistant message is an agent turn and
//! the following observation is its tool result. Writes: 0.x windowed
//! `edit N:M\n...\nend_of_edit` (replace lines N..M of the open file), `create F`, 1.0
//! `edit 'search' 'replace' replace-all` (its `tool_calls` carry the exact strings),
//! `str_replace_editor` calls (1.x), each only when its observation shows it landed (a lint
//! failure reverts a 0.x edit). `info.submission` becomes the final-state writes of the turn
//! that submitted.

use crate::support::*;
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::{Actor, CanonicalTrace, RawRef, TextItem, Turn, TurnKind, WriteOp};
use serde_json::Value;
use std::collections::BTreeMap;

pub struct SweAgent;

impl Adapter for SweAgent {
    fn name(&self) -> &'static str {
        "swe-agent"
    }
    fn versions(&self) -> &'static str {
        "SWE-agent .traj 0.x (windowed `edit N:M`, demonstrations) and 1.x (tool_calls, \
         edit_replace, str_replace_editor); info.submission as final patch"
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
        let main = crate::support::main_file(files)?;
        let (t, part) = normalize_with_baselines(files)?;
        let full = part
            .iter()
            .filter_map(|(a, v)| v.full_text().map(|c| (a.clone(), c)))
            .collect();
        let views = part.into_iter().map(|(a, v)| (a, v.lines)).collect();
        let how = "window showing the whole file";
        Ok((t, crate::seen::Seen::shown(&main.name, full, how, views)))
    }
}

/// The canonical trace and what the trace shows of each file before the agent first wrote
/// it: windows (`[File: p (N lines total)]` + numbered lines). A window that shows the whole
/// file is a full baseline; others are partial.
pub(crate) fn normalize_with_baselines(
    files: &[SourceFile],
) -> Result<(CanonicalTrace, BTreeMap<String, NumberedView>), AdapterError> {
    let main = crate::support::main_file(files)?;
    let text = main.read_text()?;
    if text.trim_start().starts_with('#') || text.starts_with("history:") {
        return Err(AdapterError::new(
            &main.name,
            Some("line 1".into()),
            "a SWE-agent demonstration (YAML replay input), not a recorded trajectory",
        ));
    }
    let v = parse_lean(&main.name, &text)?;
    drop(text);
    let history = v
        .history
        .as_ref()
        .and_then(Value::as_array)
        .ok_or_else(|| AdapterError::new(&main.name, Some("/history".into()), "no history list"))?;
    let mut cx = Ctx {
        b: TraceBuilder::new("swe-agent", files),
        file: main.name.clone(),
        roots: PathRoots::default(),
        open_file: None,
        views: BTreeMap::new(),
        written: Default::default(),
    };
    // The repository root: the working directory of the steps, and the submission's paths.
    for state in v.states.iter().flatten() {
        let st = match state {
            Some(Value::String(s)) => {
                serde_json::from_str::<Value>(s.trim()).unwrap_or(Value::Null)
            }
            Some(x) => x.clone(),
            None => Value::Null,
        };
        if let Some(w) = s(&st, "working_dir") {
            cx.roots.add(w);
        }
    }
    let info = v.info.as_ref();
    let submission = info
        .and_then(|i| i.pointer("/submission"))
        .and_then(Value::as_str);
    let known = submission.map(patch_paths).unwrap_or_default();
    for m in history {
        for c in [s(m, "content"), s(m, "action")].into_iter().flatten() {
            for l in c.lines() {
                if let Some(p) = l.strip_prefix("[File: ") {
                    let p = p
                        .split(" (")
                        .next()
                        .unwrap_or("")
                        .trim_end_matches([']', '\r']);
                    cx.roots.learn_from(p, &known);
                }
            }
        }
    }
    let mut pending: Option<usize> = None; // turn awaiting its observation
    let mut pending_msg: Option<usize> = None; // history index of that assistant message
    for (i, m) in history.iter().enumerate() {
        let p = ptr("/history", i);
        let role = s(m, "role").unwrap_or("");
        if m.get("is_demo").and_then(Value::as_bool).unwrap_or(false) {
            cx.b.drop_record(
                cx.raw(&p),
                "demonstration message (is_demo), not part of this run",
            );
            continue;
        }
        // The content's text blocks, each with its own pointer (a string is one block).
        let blocks = m
            .get("content")
            .map(|c| content_texts(c, &ptr(&p, "content")))
            .unwrap_or_default();
        let (content, cp) = blocks
            .first()
            .cloned()
            .unwrap_or_else(|| (String::new(), ptr(&p, "content")));
        let rest: Vec<TextItem> = blocks
            .iter()
            .skip(1)
            .map(|(t, bp)| TextItem {
                text: t.clone(),
                raw: cx.raw(bp),
            })
            .collect();
        match role {
            "system" => {
                cx.b.admin("system", &content, cx.raw(&cp));
            }
            "assistant" => {
                let mut t = Turn::new(
                    Actor::new(s(m, "agent").unwrap_or("main"), Some("assistant")),
                    TurnKind::Planning,
                );
                if !content.trim().is_empty() {
                    t.message = Some(TextItem {
                        text: content.clone(),
                        raw: cx.raw(&cp),
                    });
                }
                let at = cx.b.push(t);
                match m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .filter(|a| !a.is_empty())
                {
                    Some(calls) => {
                        for (j, c) in calls.iter().enumerate() {
                            let cp2 = ptr(&ptr(&ptr(&p, "tool_calls"), j), "function");
                            let name = c
                                .pointer("/function/name")
                                .and_then(Value::as_str)
                                .unwrap_or("tool");
                            let args = c
                                .pointer("/function/arguments")
                                .map(value_text)
                                .unwrap_or_default();
                            cx.b.call(
                                at,
                                tool_call(s(c, "id"), name, &args, cx.raw(&ptr(&cp2, "arguments"))),
                            );
                        }
                    }
                    None => {
                        if let Some(a) = ne(m, "action") {
                            let name = a.split_whitespace().next().unwrap_or("action");
                            cx.b.call(at, tool_call(None, name, a, cx.raw(&ptr(&p, "action"))));
                        }
                    }
                }
                cx.b.continue_message(at, rest);
                pending = Some(at);
                pending_msg = Some(i);
            }
            "user" | "tool" => {
                let is_task = pending.is_none();
                if is_task {
                    cx.b.user(&content, cx.raw(&cp));
                    continue;
                }
                let at = pending.unwrap_or(0);
                let call_id = m
                    .get("tool_call_ids")
                    .and_then(Value::as_array)
                    .and_then(|a| a.first())
                    .and_then(Value::as_str)
                    .or_else(|| s(m, "tool_call_id"));
                let r = tool_result(call_id, &content, false, cx.raw(&cp));
                cx.b.trace.turns[at].tool_results.push(r);
                for item in rest {
                    let r = tool_result(call_id, &item.text, false, item.raw);
                    cx.b.trace.turns[at].tool_results.push(r);
                }
                let whole = blocks
                    .iter()
                    .map(|(t, _)| t.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                if let Some(mi) = pending_msg.take() {
                    cx.apply(at, &history[mi], &ptr("/history", mi), &whole);
                }
                cx.learn_view(&whole);
            }
            other => {
                cx.b.drop_record(cx.raw(&p), format!("message with unknown role {other:?}"))
            }
        }
    }
    if let Some(sub) = submission.filter(|x| !x.trim().is_empty()) {
        let raw = RawRef::json(&main.name, None, "/info/submission");
        let writes = final_patch_writes(sub, "info.submission", &raw, &cx.roots);
        match cx.b.last_agent_turn() {
            Some(at) => writes.into_iter().for_each(|w| cx.b.write(at, w)),
            None => {
                cx.b.drop_record(raw, "submission but no agent turn to hold it")
            }
        }
    }
    if let Some(st) = info
        .and_then(|i| i.pointer("/exit_status"))
        .and_then(Value::as_str)
    {
        cx.b.note(format!("exit status: {st}"));
    }
    Ok((cx.b.finish(), cx.views))
}

/// What the adapter reads of a trajectory: `history` and `info` whole, and of each
/// `trajectory` step only its `state`. The steps' other fields (`query` repeats the whole
/// conversation at every step, `observation` and `response` repeat `history`) are parsed
/// and skipped, never built: most of a large trajectory, and most of the memory a whole
/// `serde_json::Value` of it took. Anything that is not an object where one is read counts
/// as absent, as `Value::get` had it; a key given twice keeps its last value.
#[derive(Default)]
struct Lean {
    history: Option<Value>,
    /// One entry per step: its `state`, if it is an object with one.
    states: Option<Vec<Option<Value>>>,
    info: Option<Value>,
}

/// Parse the trajectory, naming the file and position of the first error as
/// [`parse_json`] does.
fn parse_lean(file: &str, text: &str) -> Result<Lean, AdapterError> {
    serde_json::from_str::<Lean>(text).map_err(|e| {
        AdapterError::new(
            file,
            Some(format!("line {}, column {}", e.line(), e.column())),
            format!("not valid JSON: {e}"),
        )
    })
}

/// A visitor that takes any JSON value: maps go to `map`, everything else (drained) to
/// `T::default()`.
macro_rules! any_value_visitor {
    ($name:ident, $t:ty, $what:expr, |$m:ident| $map:block) => {
        struct $name;
        impl<'de> serde::de::Visitor<'de> for $name {
            type Value = $t;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str($what)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut $m: A) -> Result<$t, A::Error> {
                $map
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<$t, A::Error> {
                while s.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(<$t>::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<$t, E> {
                Ok(<$t>::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<$t, E> {
                Ok(<$t>::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<$t, E> {
                Ok(<$t>::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<$t, E> {
                Ok(<$t>::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<$t, E> {
                Ok(<$t>::default())
            }
            fn visit_unit<E>(self) -> Result<$t, E> {
                Ok(<$t>::default())
            }
        }
    };
}

any_value_visitor!(LeanVisitor, Lean, "a SWE-agent trajectory", |m| {
    let mut out = Lean::default();
    while let Some(k) = m.next_key::<String>()? {
        match k.as_str() {
            "history" => out.history = Some(m.next_value()?),
            "info" => out.info = Some(m.next_value()?),
            "trajectory" => out.states = Some(m.next_value::<Steps>()?.0),
            _ => {
                m.next_value::<serde::de::IgnoredAny>()?;
            }
        }
    }
    Ok(out)
});

impl<'de> serde::Deserialize<'de> for Lean {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Lean, D::Error> {
        d.deserialize_any(LeanVisitor)
    }
}

/// The `state` of each step (`None` for a step that is not an object or has none); a
/// `trajectory` that is not a list has no steps.
#[derive(Default)]
struct Steps(Vec<Option<Value>>);

struct StepsVisitor;
impl<'de> serde::de::Visitor<'de> for StepsVisitor {
    type Value = Steps;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("the trajectory's steps")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Steps, A::Error> {
        let mut out = Vec::new();
        while let Some(st) = s.next_element::<StepState>()? {
            out.push(st.0);
        }
        Ok(Steps(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Steps, A::Error> {
        while m
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(Steps::default())
    }
    fn visit_bool<E>(self, _: bool) -> Result<Steps, E> {
        Ok(Steps::default())
    }
    fn visit_i64<E>(self, _: i64) -> Result<Steps, E> {
        Ok(Steps::default())
    }
    fn visit_u64<E>(self, _: u64) -> Result<Steps, E> {
        Ok(Steps::default())
    }
    fn visit_f64<E>(self, _: f64) -> Result<Steps, E> {
        Ok(Steps::default())
    }
    fn visit_str<E>(self, _: &str) -> Result<Steps, E> {
        Ok(Steps::default())
    }
    fn visit_unit<E>(self) -> Result<Steps, E> {
        Ok(Steps::default())
    }
}

impl<'de> serde::Deserialize<'de> for Steps {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Steps, D::Error> {
        d.deserialize_any(StepsVisitor)
    }
}

/// One step's `state`.
#[derive(Default)]
struct StepState(Option<Value>);

any_value_visitor!(StepStateVisitor, StepState, "a trajectory step", |m| {
    let mut state = None;
    while let Some(k) = m.next_key::<String>()? {
        if k == "state" {
            state = Some(m.next_value::<Value>()?);
        } else {
            m.next_value::<serde::de::IgnoredAny>()?;
        }
    }
    Ok(StepState(state))
});

impl<'de> serde::Deserialize<'de> for StepState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<StepState, D::Error> {
        d.deserialize_any(StepStateVisitor)
    }
}

struct Ctx {
    b: TraceBuilder,
    file: String,
    roots: PathRoots,
    open_file: Option<String>,
    /// artefact → lines seen before the first write.
    views: BTreeMap<String, NumberedView>,
    written: std::collections::BTreeSet<String>,
}

impl Ctx {
    fn raw(&self, p: &str) -> RawRef {
        RawRef::json(&self.file, None, p)
    }

    /// Record a `[File: p (N lines total)]` window; it also sets the open file.
    fn learn_view(&mut self, obs: &str) {
        let Some(start) = obs.find("[File: ") else {
            return;
        };
        let header = &obs[start + 7..];
        let path = header
            .split(" (")
            .next()
            .unwrap_or("")
            .trim_end_matches([']', '\r'])
            .trim();
        if path.is_empty() {
            return;
        }
        let a = self.roots.rel(path);
        self.open_file = Some(a.clone());
        if self.written.contains(&a) {
            return;
        }
        let view = parse_numbered_view(&obs[start..], ':');
        let e = self.views.entry(a).or_insert(NumberedView {
            lines: BTreeMap::new(),
            total: None,
        });
        if e.total.is_none() {
            e.total = view.total;
        }
        if view.total.is_some() && e.total != view.total {
            return;
        }
        for (n, l) in view.lines {
            e.lines.entry(n).or_insert(l);
        }
    }

    /// The write(s) an action performed, judged by its observation.
    fn apply(&mut self, at: usize, m: &Value, p: &str, obs: &str) {
        let action = s(m, "action").unwrap_or("");
        let ap = ptr(p, "action");
        let failed = obs.contains("Your proposed edit has introduced new syntax error")
            || obs.contains("No replacement was performed")
            || obs.starts_with("Error")
            || obs.contains("ERROR:")
            || obs.contains("Usage: edit");
        // 1.x function calls.
        if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
            for (j, c) in calls.iter().enumerate() {
                let name = c
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let args_text = c
                    .pointer("/function/arguments")
                    .map(value_text)
                    .unwrap_or_default();
                let args: Value = serde_json::from_str(&args_text).unwrap_or(Value::Null);
                let cp = format!("{p}/tool_calls/{j}/function/arguments");
                match name {
                    "edit" if args.get("search").is_some() => {
                        if failed || !obs.contains("Replaced") {
                            continue;
                        }
                        let Some(file) = self.open_file.clone() else {
                            self.b.drop_record(self.raw(&cp), "edit with no open file");
                            continue;
                        };
                        let op = WriteOp::StrReplace {
                            old: s(&args, "search").unwrap_or("").into(),
                            new: s(&args, "replace").unwrap_or("").into(),
                            all: args
                                .get("replace-all")
                                .and_then(Value::as_bool)
                                .unwrap_or(false),
                            tolerance: sage_trace::Tolerance::TrimmedRetry,
                        };
                        let string_args = c
                            .pointer("/function/arguments")
                            .is_some_and(Value::is_string);
                        self.add_arg(at, file, op, "edit_replace", &cp, "/replace", string_args);
                    }
                    "str_replace_editor" => {
                        if failed {
                            continue;
                        }
                        let string_args = c
                            .pointer("/function/arguments")
                            .is_some_and(Value::is_string);
                        self.str_replace_editor(at, &args, &cp, string_args);
                    }
                    "bash" => {
                        if let Some(cmd) = s(&args, "command") {
                            let cmd = cmd.to_string();
                            self.shell(at, &cmd, &cp, obs);
                        }
                    }
                    "create" => {
                        if let Some(f) = s(&args, "filename") {
                            let a = self.roots.rel(f);
                            self.add(
                                at,
                                a,
                                WriteOp::FullContent {
                                    content: "\n".into(),
                                },
                                "create",
                                &cp,
                            );
                        }
                    }
                    _ => {}
                }
            }
            if !calls.is_empty() {
                return;
            }
        }
        // 0.x action strings.
        let first = action.split_whitespace().next().unwrap_or("");
        match first {
            "edit" => {
                if failed {
                    return;
                }
                match parse_line_edit(action) {
                    Some((start, end, text)) => {
                        let Some(file) = self.open_file.clone() else {
                            self.b.drop_record(self.raw(&ap), "edit with no open file");
                            return;
                        };
                        self.add(
                            at,
                            file,
                            WriteOp::ReplaceLines { start, end, text },
                            "edit N:M",
                            &ap,
                        );
                    }
                    None => self
                        .b
                        .drop_record(self.raw(&ap), "edit command not interpreted"),
                }
            }
            "create" => {
                if let Some(f) = action.split_whitespace().nth(1) {
                    if !obs.contains("already exists") {
                        let a = self.roots.rel(f.trim_matches(['"', '\'']));
                        self.add(
                            at,
                            a,
                            WriteOp::FullContent {
                                content: "\n".into(),
                            },
                            "create",
                            &ap,
                        );
                    }
                }
            }
            "str_replace_editor" => self.b.drop_record(
                self.raw(&ap),
                "str_replace_editor as an action string is not interpreted (its tool call is)",
            ),
            _ => self.shell(at, action, &ap, obs),
        }
    }

    /// Plain shell edits of a command, unless its output shows it failed.
    fn shell(&mut self, at: usize, cmd: &str, p: &str, obs: &str) {
        let failed = [
            "No such file or directory",
            "Permission denied",
            "command not found",
        ]
        .iter()
        .any(|m| obs.contains(m));
        if failed {
            return;
        }
        let raw = self.raw(p);
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

    fn str_replace_editor(&mut self, at: usize, args: &Value, cp: &str, string_args: bool) {
        let Some(path) = s(args, "path") else { return };
        let a = self.roots.rel(path);
        let op = match s(args, "command") {
            Some("create") => {
                s(args, "file_text").map(|t| WriteOp::FullContent { content: t.into() })
            }
            Some("str_replace") => s(args, "old_str").map(|o| WriteOp::StrReplace {
                old: o.into(),
                new: s(args, "new_str").unwrap_or("").into(),
                all: false,
                tolerance: sage_trace::Tolerance::TrimmedRetry,
            }),
            Some("insert") => match (
                args.get("insert_line").and_then(Value::as_u64),
                s(args, "new_str"),
            ) {
                (Some(l), Some(t)) => Some(WriteOp::Insert {
                    after_line: l as usize,
                    text: t.into(),
                }),
                _ => None,
            },
            Some("view") => return,
            _ => None,
        };
        match op {
            Some(op) => {
                let field = match op {
                    WriteOp::FullContent { .. } => "/file_text",
                    _ => "/new_str",
                };
                self.add_arg(at, a, op, "str_replace_editor", cp, field, string_args)
            }
            None => self.b.drop_record(
                self.raw(cp),
                format!("str_replace_editor on {a} not interpreted"),
            ),
        }
    }

    /// A write whose new text is the argument `field` of a call: when the arguments are JSON
    /// text in a string, the pointer goes into it (the escaped string would not hold text
    /// with quotes or backslashes verbatim).
    #[allow(clippy::too_many_arguments)]
    fn add_arg(
        &mut self,
        at: usize,
        artefact: String,
        op: WriteOp,
        via: &str,
        p: &str,
        field: &str,
        string_args: bool,
    ) {
        if !string_args {
            return self.add(at, artefact, op, via, p);
        }
        self.written.insert(artefact.clone());
        let raw = RawRef::json_inner(&self.file, None, p, field);
        self.b.write(at, write(artefact, op, via, false, raw));
    }

    fn add(&mut self, at: usize, artefact: String, op: WriteOp, via: &str, p: &str) {
        self.written.insert(artefact.clone());
        let raw = self.raw(p);
        self.b.write(at, write(artefact, op, via, false, raw));
    }
}

/// `edit N:M\n<lines>\nend_of_edit` → (N, M, the lines, each ending in `\n`).
pub(crate) fn parse_line_edit(action: &str) -> Option<(usize, usize, String)> {
    let (head, rest) = action.split_once('\n')?;
    let range = head.trim().strip_prefix("edit")?.trim();
    let (a, b) = range.split_once(':')?;
    let (start, end) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
    let body_end = rest.rfind("end_of_edit")?;
    let body = &rest[..body_end];
    Some((start, end, body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_edit() {
        assert_eq!(
            parse_line_edit("edit 3:4\n  a\nb\nend_of_edit\n"),
            Some((3, 4, "  a\nb\n".to_string()))
        );
        assert_eq!(parse_line_edit("edit 'a' 'b'"), None);
    }
}
