//! OpenTelemetry GenAI spans (semantic conventions `gen_ai.*`, as of 2026-04) exported as
//! OTLP JSON: one `{resourceSpans: [{resource, scopeSpans: [{scope, spans}]}]}` document, or
//! one such export per line (the collector's file exporter).
//!
//! Spans are read in start-time order. An inference span (`gen_ai.operation.name` = `chat`,
//! `text_completion`, `generate_content`) is one agent turn: its `gen_ai.output.messages`
//! text parts are the message, `tool_call` parts the calls; the user's first input message
//! (`gen_ai.input.messages` of the first inference) is the task. `execute_tool` spans give
//! the call's result (`gen_ai.tool.call.result`) and, for editor tools, writes. The agent is
//! the `gen_ai.agent.name` of the nearest `invoke_agent` ancestor. `create_agent`,
//! `invoke_agent` / `invoke_workflow` spans are administrative; spans without `gen_ai.*`
//! attributes are dropped with that reason.
//!
//! Texts inside the JSON-encoded `gen_ai.*.messages` strings point into them (`inner`
//! pointer of [`sage_trace::Locator::Json`]).

use crate::support::*;
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::{Actor, CanonicalTrace, RawRef, TextItem, Turn, TurnKind, WriteOp};
use serde_json::Value;
use std::collections::HashMap;

pub struct OtelGenAi;

impl Adapter for OtelGenAi {
    fn name(&self) -> &'static str {
        "otel-genai"
    }
    fn versions(&self) -> &'static str {
        "OpenTelemetry GenAI semantic conventions (gen_ai.* span attributes, 2025–2026) in OTLP \
         JSON, whole documents or one export per line"
    }
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        let main = crate::support::main_file(files)?;
        let text = main.read_text()?;
        let mut docs: Vec<(Option<usize>, Value)> = Vec::new();
        match serde_json::from_str::<Value>(&text) {
            Ok(v) => docs.push((None, v)),
            Err(whole_err) => {
                drop(text);
                let mut any = false;
                for_each_json_line(main, |n, v| {
                    match v {
                        Ok(v) => {
                            any = true;
                            docs.push((Some(n), v))
                        }
                        Err(e) => {
                            return Err(AdapterError::new(
                                &main.name,
                                Some(format!("line {n}")),
                                e,
                            ));
                        }
                    }
                    Ok(())
                })?;
                if !any {
                    return Err(AdapterError::new(
                        &main.name,
                        None,
                        format!("not valid JSON: {whole_err}"),
                    ));
                }
            }
        }
        let mut spans: Vec<SpanRef> = Vec::new();
        for (line, d) in &docs {
            let rs = d
                .get("resourceSpans")
                .or_else(|| d.get("resource_spans"))
                .and_then(Value::as_array);
            let Some(rs) = rs else {
                return Err(AdapterError::new(
                    &main.name,
                    Some(
                        line.map(|l| format!("line {l}"))
                            .unwrap_or_else(|| "/".into()),
                    ),
                    "no resourceSpans",
                ));
            };
            for (i, r) in rs.iter().enumerate() {
                let ss = r
                    .get("scopeSpans")
                    .or_else(|| r.get("scope_spans"))
                    .and_then(Value::as_array);
                for (j, sc) in ss.into_iter().flatten().enumerate() {
                    for (k, sp) in sc
                        .get("spans")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .enumerate()
                    {
                        spans.push(SpanRef {
                            line: *line,
                            ptr: format!("/resourceSpans/{i}/scopeSpans/{j}/spans/{k}"),
                            span: sp.clone(),
                        });
                    }
                }
            }
        }
        spans.sort_by_key(|s| nanos(&s.span, "startTimeUnixNano"));
        let mut b = TraceBuilder::new("otel-genai", files);
        let file = main.name.clone();
        let names: HashMap<String, (Option<String>, Option<String>)> = spans
            .iter()
            .filter_map(|s| {
                let id = s.span.get("spanId").and_then(Value::as_str)?.to_string();
                let parent = s
                    .span
                    .get("parentSpanId")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let agent = attr(&s.span, "gen_ai.agent.name").map(|a| a.0);
                Some((id, (parent, agent)))
            })
            .collect();
        let agent_of = |span: &Value| -> String {
            let mut cur = span
                .get("spanId")
                .and_then(Value::as_str)
                .map(str::to_string);
            for _ in 0..64 {
                let Some(id) = cur else { break };
                match names.get(&id) {
                    Some((_, Some(a))) => return a.clone(),
                    Some((p, None)) => cur = p.clone().filter(|x| !x.is_empty()),
                    None => break,
                }
            }
            "agent".to_string()
        };
        let mut seen_task = false;
        for sr in &spans {
            let raw = |p: &str| RawRef::json(&file, sr.line, format!("{}{}", sr.ptr, p));
            // A value inside the JSON text of a string attribute.
            let inner_raw = |p: &str, inner: &str| {
                RawRef::json_inner(&file, sr.line, format!("{}{}", sr.ptr, p), inner)
            };
            let sp = &sr.span;
            let op = attr(sp, "gen_ai.operation.name")
                .map(|a| a.0)
                .unwrap_or_default();
            let has_genai = sp
                .get("attributes")
                .and_then(Value::as_array)
                .is_some_and(|a| {
                    a.iter()
                        .any(|x| s(x, "key").is_some_and(|k| k.starts_with("gen_ai.")))
                });
            if !has_genai {
                b.drop_record(raw(""), "span without gen_ai.* attributes");
                continue;
            }
            match op.as_str() {
                "chat" | "text_completion" | "generate_content" => {
                    if !seen_task {
                        if let Some((inp, ip)) = attr(sp, "gen_ai.input.messages") {
                            if let Ok(Value::Array(ms)) = serde_json::from_str::<Value>(&inp) {
                                for (k, m) in ms.iter().enumerate() {
                                    if s(m, "role") != Some("user") {
                                        continue;
                                    }
                                    for (t, inner) in parts(m, k, "text") {
                                        b.user(&t, inner_raw(&ip, &inner));
                                    }
                                }
                            }
                        }
                        seen_task = true;
                    }
                    let actor = Actor::new(agent_of(sp), Some("assistant"));
                    let mut turn = Turn::new(actor.clone(), TurnKind::Planning);
                    let out = attr(sp, "gen_ai.output.messages");
                    let mut calls = Vec::new();
                    let mut texts = Vec::new();
                    if let Some((o, opp)) = &out {
                        match serde_json::from_str::<Value>(o) {
                            Ok(Value::Array(ms)) => {
                                for (k, m) in ms.iter().enumerate() {
                                    texts.extend(parts(m, k, "text"));
                                    let ps = m.get("parts").and_then(Value::as_array);
                                    for (j, pt) in ps.into_iter().flatten().enumerate() {
                                        if s(pt, "type") == Some("tool_call") {
                                            calls.push((
                                                s(pt, "id").map(str::to_string),
                                                s(pt, "name").unwrap_or("tool").to_string(),
                                                pt.get("arguments")
                                                    .map(value_text)
                                                    .unwrap_or_default(),
                                                format!("/{k}/parts/{j}/arguments"),
                                            ));
                                        }
                                    }
                                }
                            }
                            _ => b.drop_record(
                                raw(opp),
                                "gen_ai.output.messages is not a JSON list of messages",
                            ),
                        }
                    }
                    let op_ptr = out.as_ref().map(|x| x.1.clone()).unwrap_or_default();
                    let mut texts = texts.into_iter();
                    if let Some((t, inner)) = texts.next() {
                        turn.message = Some(TextItem {
                            text: t,
                            raw: inner_raw(&op_ptr, &inner),
                        });
                    }
                    let mut at = b.push(turn);
                    for (t, inner) in texts {
                        at = b.message(
                            actor.clone(),
                            TurnKind::Planning,
                            &t,
                            inner_raw(&op_ptr, &inner),
                        );
                    }
                    for (id, name, args, inner) in calls {
                        b.call(
                            at,
                            tool_call(id.as_deref(), &name, &args, inner_raw(&op_ptr, &inner)),
                        );
                    }
                }
                "execute_tool" => {
                    let id = attr(sp, "gen_ai.tool.call.id").map(|a| a.0);
                    let name = attr(sp, "gen_ai.tool.name")
                        .map(|a| a.0)
                        .unwrap_or_else(|| "tool".into());
                    let args = attr(sp, "gen_ai.tool.call.arguments");
                    let at = match id.as_deref().and_then(|i| b.turn_of_call(i)) {
                        Some(at) => at,
                        None => {
                            let at = b.push(Turn::new(
                                Actor::new(agent_of(sp), Some("assistant")),
                                TurnKind::Planning,
                            ));
                            let (a, ap) = args.clone().unwrap_or_default();
                            b.call(at, tool_call(id.as_deref(), &name, &a, raw(&ap)));
                            at
                        }
                    };
                    let is_error = sp
                        .pointer("/status/code")
                        .is_some_and(|c| c == 2 || c == "STATUS_CODE_ERROR")
                        || attr(sp, "error.type").is_some();
                    if let Some((r, rp)) = attr(sp, "gen_ai.tool.call.result") {
                        b.trace.turns[at].tool_results.push(tool_result(
                            id.as_deref(),
                            &r,
                            is_error,
                            raw(&rp),
                        ));
                    }
                    if !is_error {
                        if let Some((a, ap)) = args {
                            editor_write(&mut b, at, &name, &a, raw(&ap));
                        }
                    }
                }
                _ => {
                    let what = s(sp, "name").unwrap_or("span").to_string();
                    b.admin(
                        if op.is_empty() { "span" } else { &op },
                        &what,
                        raw("/name"),
                    );
                }
            }
        }
        Ok(b.finish())
    }
}

struct SpanRef {
    line: Option<usize>,
    ptr: String,
    span: Value,
}

fn nanos(sp: &Value, k: &str) -> u128 {
    match sp.get(k) {
        Some(Value::String(x)) => x.parse().unwrap_or(0),
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0) as u128,
        _ => 0,
    }
}

/// An attribute's value as text, with its pointer relative to the span.
fn attr(sp: &Value, key: &str) -> Option<(String, String)> {
    let attrs = sp.get("attributes")?.as_array()?;
    let (i, a) = attrs
        .iter()
        .enumerate()
        .find(|(_, a)| s(a, "key") == Some(key))?;
    let v = a.get("value")?;
    for k in ["stringValue", "intValue", "boolValue", "doubleValue"] {
        if let Some(x) = v.get(k) {
            return Some((value_text(x), format!("/attributes/{i}/value/{k}")));
        }
    }
    Some((value_text(v), format!("/attributes/{i}/value")))
}

/// Parts of type `ty` of message `m` (the `k`-th message): their content and the pointer
/// into the messages JSON.
fn parts(m: &Value, k: usize, ty: &str) -> Vec<(String, String)> {
    m.get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, p)| s(p, "type") == Some(ty))
        .filter_map(|(j, p)| {
            s(p, "content").map(|c| (c.to_string(), format!("/{k}/parts/{j}/content")))
        })
        .collect()
}

fn editor_write(b: &mut TraceBuilder, at: usize, name: &str, args: &str, raw: RawRef) {
    let Ok(a) = serde_json::from_str::<Value>(args) else {
        return;
    };
    let path = s(&a, "path").or_else(|| s(&a, "file_path"));
    let Some(path) = path else { return };
    let art = PathRoots::default().rel(path);
    let sr = |old: &str, new: &str, all: bool| -> Option<WriteOp> {
        let o = s(&a, old)?;
        Some(WriteOp::StrReplace {
            old: o.into(),
            new: s(&a, new).unwrap_or("").into(),
            all,
            tolerance: sage_trace::Tolerance::TrimmedRetry,
        })
    };
    let all = a
        .get("replace_all")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let (op, field) = match (name, s(&a, "command")) {
        (_, Some("create")) => (
            s(&a, "file_text").map(|t| WriteOp::FullContent { content: t.into() }),
            "file_text",
        ),
        (_, Some("str_replace")) => (sr("old_str", "new_str", false), "new_str"),
        ("write_file", _) => (
            s(&a, "content").map(|t| WriteOp::FullContent { content: t.into() }),
            "content",
        ),
        ("edit_file", _) => (sr("old_string", "new_string", all), "new_string"),
        _ => (None, ""),
    };
    if let Some(op) = op {
        // The new text lives inside the arguments' JSON text.
        let mut raw = raw;
        if let sage_trace::Locator::Json { inner, .. } = &mut raw.at {
            *inner = Some(format!("/{field}"));
        }
        b.write(at, write(art, op, name, false, raw));
    }
}
