//! OpenInference spans (Arize Phoenix exports, the TRAIL benchmark): spans whose attributes
//! follow the OpenInference semantic conventions (`arize-ai.github.io/openinference/spec`),
//! flattened keys such as `llm.output_messages.0.message.content`.
//!
//! Inputs: a trace object `{trace_id, spans: [...]}` whose spans nest their children in
//! `child_spans` (TRAIL), a bare list of spans, or JSON Lines of spans (Phoenix). A span's
//! attributes are in `span_attributes` (TRAIL) or `attributes` (Phoenix). Spans are read
//! depth-first in document order, children after their parent, sorted by start time when
//! every span has one (`start_time` / `timestamp`).
//!
//! `openinference.span.kind` decides: `LLM` → an agent turn (the text of
//! `llm.output_messages.0.message.content`, else `output.value`; tool calls from
//! `llm.output_messages.0.message.tool_calls.N.tool_call.{id, function.name,
//! function.arguments}`), the actor the name of the nearest `AGENT` ancestor span;
//! `TOOL` → a tool result (`output.value`; `status_code` ERROR → error) of the latest agent
//! turn, or of the call with the same id (`tool_call.id` or `message.tool_call_id`);
//! `AGENT`, `CHAIN` and the other kinds → dropped (structure, not messages). The first LLM
//! span's user input is the task: not mapped. Writes: none (tool effects are not in the
//! conventions).

use crate::support::*;
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::{Actor, CanonicalTrace, RawRef, TextItem, Turn, TurnKind};
use serde_json::Value;

pub struct OpenInference;

const KIND: &str = "openinference.span.kind";

impl Adapter for OpenInference {
    fn name(&self) -> &'static str {
        "openinference"
    }
    fn versions(&self) -> &'static str {
        "OpenInference spans: Arize Phoenix JSON / JSON Lines exports, TRAIL trace files (child_spans)"
    }
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        let main = crate::support::main_file(files)?;
        let text = main.read_text()?;
        // (line, pointer, span) in reading order.
        let mut spans: Vec<(Option<usize>, String, Value)> = Vec::new();
        match serde_json::from_str::<Value>(&text) {
            Ok(doc) => {
                let (list, base) = match &doc {
                    Value::Array(_) => (doc.clone(), String::new()),
                    Value::Object(m) if m.get("spans").is_some_and(Value::is_array) => {
                        (m["spans"].clone(), "/spans".to_string())
                    }
                    Value::Object(_) => (Value::Array(vec![doc.clone()]), "\u{0}".to_string()),
                    _ => {
                        return Err(AdapterError::new(
                            &main.name,
                            Some("line 1".into()),
                            "not a span, a list of spans or a trace with spans",
                        ))
                    }
                };
                let items = list.as_array().cloned().unwrap_or_default();
                for (i, sp) in items.into_iter().enumerate() {
                    let p = if base == "\u{0}" {
                        String::new()
                    } else {
                        format!("{base}/{i}")
                    };
                    flatten(None, p, sp, &mut spans);
                }
            }
            Err(whole) => {
                let mut n = 0usize;
                for (k, l) in text.lines().enumerate() {
                    if l.trim().is_empty() {
                        continue;
                    }
                    let v = parse_json(&main.name, l, Some(k + 1)).map_err(|e| {
                        if n == 0 {
                            AdapterError::new(
                                &main.name,
                                Some(format!("line {}, column {}", whole.line(), whole.column())),
                                format!("not valid JSON: {whole}"),
                            )
                        } else {
                            e
                        }
                    })?;
                    n += 1;
                    flatten(Some(k + 1), String::new(), v, &mut spans);
                }
            }
        }
        drop(text);
        let start = |v: &Value| {
            v.get("start_time")
                .or_else(|| v.get("timestamp"))
                .map(value_text)
        };
        if spans.iter().all(|(_, _, v)| start(v).is_some()) {
            // Stable: ties keep document order (parents before children).
            spans.sort_by_key(|(_, _, v)| start(v));
        }
        let mut b = TraceBuilder::new("openinference", files);
        let f = main.name.clone();
        // span id → agent name, for the nearest AGENT ancestor.
        let mut agent_of: std::collections::HashMap<String, String> = Default::default();
        let mut parent_of: std::collections::HashMap<String, String> = Default::default();
        for (_, _, v) in &spans {
            if let Some(id) = span_id(v) {
                if let Some(p) = parent_id(v) {
                    parent_of.insert(id.clone(), p);
                }
                if attr(v, KIND).and_then(Value::as_str) == Some("AGENT") {
                    let name = s(v, "span_name")
                        .or_else(|| s(v, "name"))
                        .unwrap_or("agent");
                    agent_of.insert(id, name.to_string());
                }
            }
        }
        for (line, p, v) in &spans {
            let ap = attrs_ptr(v);
            let raw_attr = |k: &str| RawRef::json(&f, *line, ptr(&format!("{p}{ap}"), k));
            let kind = attr(v, KIND).and_then(Value::as_str).unwrap_or("");
            match kind {
                "LLM" => {
                    let mut actor = "agent".to_string();
                    let mut cur = span_id(v);
                    while let Some(id) = cur {
                        if let Some(a) = agent_of.get(&id) {
                            actor = a.clone();
                            break;
                        }
                        cur = parent_of.get(&id).cloned();
                    }
                    let model = attr(v, "llm.model_name").and_then(Value::as_str);
                    let mut t = Turn::new(Actor::new(&actor, model), TurnKind::Planning);
                    let mk = "llm.output_messages.0.message.content";
                    t.message = match attr(v, mk).and_then(Value::as_str) {
                        Some(m) if !m.is_empty() => Some(TextItem {
                            text: m.to_string(),
                            raw: raw_attr(mk),
                        }),
                        _ => attr(v, "output.value")
                            .and_then(Value::as_str)
                            .filter(|m| !m.is_empty())
                            .map(|m| TextItem {
                                text: m.to_string(),
                                raw: raw_attr("output.value"),
                            }),
                    };
                    let mut calls = Vec::new();
                    for j in 0.. {
                        let pre = format!("llm.output_messages.0.message.tool_calls.{j}.tool_call");
                        let name_k = format!("{pre}.function.name");
                        let Some(name) = attr(v, &name_k).and_then(Value::as_str) else {
                            break;
                        };
                        let args_k = format!("{pre}.function.arguments");
                        let args = attr(v, &args_k).map(value_text).unwrap_or_default();
                        let id = attr(v, &format!("{pre}.id")).and_then(Value::as_str);
                        // The call's text is its arguments; without them, its name.
                        let raw = if attr(v, &args_k).is_some() {
                            raw_attr(&args_k)
                        } else {
                            raw_attr(&name_k)
                        };
                        calls.push(tool_call(id, name, &args, raw));
                    }
                    if t.message.is_none() && calls.is_empty() {
                        b.drop_record(
                            RawRef::json(&f, *line, p.clone()),
                            "LLM span without output message or tool call",
                        );
                        continue;
                    }
                    let at = b.push(t);
                    for c in calls {
                        b.call(at, c);
                    }
                }
                "TOOL" => {
                    let out = attr(v, "output.value").map(value_text).unwrap_or_default();
                    let err = s(v, "status_code") == Some("ERROR")
                        || v.pointer("/status/code").and_then(Value::as_str) == Some("ERROR");
                    let id = attr(v, "tool_call.id")
                        .or_else(|| attr(v, "message.tool_call_id"))
                        .and_then(Value::as_str);
                    let raw = if attr(v, "output.value").is_some() {
                        raw_attr("output.value")
                    } else {
                        RawRef::json(&f, *line, p.clone())
                    };
                    if b.result(tool_result(id, &out, err, raw.clone())).is_none() {
                        b.drop_record(raw, "TOOL span before any agent turn");
                    }
                }
                "" => b.drop_record(
                    RawRef::json(&f, *line, p.clone()),
                    "span without openinference.span.kind",
                ),
                other => b.drop_record(
                    RawRef::json(&f, *line, p.clone()),
                    format!("{other} span: structure, not a message"),
                ),
            }
        }
        Ok(b.finish())
    }
}

/// A span and its `child_spans`, depth-first, with the JSON pointer of each; a nested span
/// without `parent_span_id` gets its parent's id (the nesting says it).
fn flatten(
    line: Option<usize>,
    p: String,
    v: Value,
    out: &mut Vec<(Option<usize>, String, Value)>,
) {
    flatten_under(None, line, p, v, out)
}

fn flatten_under(
    parent: Option<String>,
    line: Option<usize>,
    p: String,
    mut v: Value,
    out: &mut Vec<(Option<usize>, String, Value)>,
) {
    if let (Some(par), Some(m)) = (parent, v.as_object_mut()) {
        if !m.contains_key("parent_span_id") && !m.contains_key("parent_id") {
            m.insert("parent_span_id".into(), Value::String(par));
        }
    }
    let id = span_id(&v);
    let children = v
        .get_mut("child_spans")
        .map(Value::take)
        .and_then(|c| match c {
            Value::Array(a) => Some(a),
            _ => None,
        })
        .unwrap_or_default();
    out.push((line, p.clone(), v));
    for (i, c) in children.into_iter().enumerate() {
        flatten_under(id.clone(), line, format!("{p}/child_spans/{i}"), c, out);
    }
}

fn attrs_ptr(v: &Value) -> &'static str {
    if v.get("span_attributes").is_some() {
        "/span_attributes"
    } else {
        "/attributes"
    }
}

/// A flattened attribute (`span_attributes["llm.model_name"]`), or a nested one
/// (`attributes.llm.model_name` as objects), whichever the span carries.
fn attr<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    let a = v.get("span_attributes").or_else(|| v.get("attributes"))?;
    a.get(key)
}

fn span_id(v: &Value) -> Option<String> {
    s(v, "span_id")
        .or_else(|| v.pointer("/context/span_id").and_then(Value::as_str))
        .map(String::from)
}

fn parent_id(v: &Value) -> Option<String> {
    s(v, "parent_span_id")
        .or_else(|| s(v, "parent_id"))
        .map(String::from)
}
