//! CAMEL: BaseMessage / FunctionCallingMessage dicts and MemoryRecord lines by the mapping
//! `crates/sage-adapters/mappings/camel.toml`; the GAIA benchmark results (concatenated JSON documents whose
//! document-level `tool_calls` belong to the document's last agent turn); and OWL
//! RolePlaying chat histories (rounds `{user, assistant, tool_calls}`), parsed here.
//!
//! In RolePlaying both sides are LLM agents: the "user" agent writes the instructions
//! (a planning turn), the "assistant" agent carries them out (its tool calls and results are
//! on its turn). OWL stores `tool_calls` as a Python `repr` string: it is scanned for its
//! dicts, and each call's arguments and result are the verbatim slices of that string (so a
//! quote checks against the raw record; escapes are kept as written).

use crate::mapping::{for_each_document, value_text, MappingRun};
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::{Actor, CanonicalTrace, RawRef, TextItem, ToolCall, ToolResult, Turn, TurnKind};
use serde_json::Value;

mapping_adapter!(Camel, "camel");

impl Adapter for Camel {
    mapping_adapter_items!(Camel, "camel");
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        let main = crate::support::main_file(files)?;
        let mut run = MappingRun::new(&self.mapping, files);
        for_each_document(main, |doc, line| {
            if is_owl_rounds(&doc) {
                owl_rounds(&mut run, &main.name, &doc, line);
            } else {
                let before = run.b.trace.turns.len();
                run.feed_document(&doc, line);
                doc_tool_calls(&mut run, &main.name, &doc, line, before);
            }
            Ok(())
        })?;
        Ok(run.finish())
    }
}

fn is_owl_rounds(doc: &Value) -> bool {
    doc.as_array().is_some_and(|a| {
        !a.is_empty()
            && a.iter()
                .all(|r| r.get("assistant").is_some() && r.get("user").is_some())
    })
}

/// GAIA results: `tool_calls: [{func_name, args, result}]` at document level, made while
/// producing the document's answer: attached to its last agent turn.
fn doc_tool_calls(
    run: &mut MappingRun,
    file: &str,
    doc: &Value,
    line: Option<usize>,
    before: usize,
) {
    let Some(Value::Array(calls)) = doc.get("tool_calls") else {
        return;
    };
    if doc.get("history").is_none() {
        return; // a message's own tool_calls were mapped already
    }
    for (i, c) in calls.iter().enumerate() {
        let at = |k: &str| format!("/tool_calls/{i}/{k}");
        if run.b.trace.turns.len() <= before {
            run.b.drop_record(
                RawRef::json(file, line, format!("/tool_calls/{i}")),
                "tool call of a document with no agent turn",
            );
            continue;
        }
        let at_turn = run.b.trace.turns.len() - 1;
        let name = c
            .get("func_name")
            .or_else(|| c.get("tool_name"))
            .and_then(Value::as_str)
            .unwrap_or("tool");
        let id = Some(format!("doc-call-{}", i + 1));
        let call = ToolCall {
            id: id.clone(),
            name: name.to_string(),
            arguments: c.get("args").map(value_text).unwrap_or_default(),
            raw: RawRef::json(file, line, at("args")),
        };
        if let Some(a) = c.get("args") {
            // The write rules fill a scratch turn, whose writes then join the real one.
            let mut scratch = Turn::new(Actor::new("", None), TurnKind::Implementation);
            run.apply_write_rules(&call, a, &at("args"), line, &mut scratch);
            for w in scratch.writes {
                run.b.write(at_turn, w);
            }
        }
        run.b.call(at_turn, call);
        if let Some(r) = c.get("result") {
            run.b.result(ToolResult {
                call_id: id,
                output: value_text(r),
                is_error: false,
                raw: RawRef::json(file, line, at("result")),
            });
        }
    }
}

fn owl_rounds(run: &mut MappingRun, file: &str, doc: &Value, line: Option<usize>) {
    let Some(rounds) = doc.as_array() else { return };
    for (i, r) in rounds.iter().enumerate() {
        let raw = |k: &str| RawRef::json(file, line, format!("/{i}/{k}"));
        if let Some(Value::String(u)) = r.get("user") {
            let mut t = Turn::new(Actor::new("user", Some("user-agent")), TurnKind::Planning);
            t.message = Some(TextItem {
                text: u.clone(),
                raw: raw("user"),
            });
            run.b.push(t);
        }
        let mut t = Turn::new(
            Actor::new("assistant", Some("assistant-agent")),
            TurnKind::Implementation,
        );
        if let Some(Value::String(a)) = r.get("assistant") {
            t.message = Some(TextItem {
                text: a.clone(),
                raw: raw("assistant"),
            });
        }
        match r.get("tool_calls") {
            Some(Value::Array(calls)) => {
                for (j, c) in calls.iter().enumerate() {
                    let at = |k: &str| RawRef::json(file, line, format!("/{i}/tool_calls/{j}/{k}"));
                    let id = c
                        .get("tool_call_id")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    let call = ToolCall {
                        id: id.clone(),
                        name: c
                            .get("tool_name")
                            .and_then(Value::as_str)
                            .unwrap_or("tool")
                            .to_string(),
                        arguments: c.get("args").map(value_text).unwrap_or_default(),
                        raw: at("args"),
                    };
                    if let Some(a) = c.get("args") {
                        let p = format!("/{i}/tool_calls/{j}/args");
                        run.apply_write_rules(&call, a, &p, line, &mut t);
                    }
                    t.tool_calls.push(call);
                    if let Some(res) = c.get("result") {
                        t.tool_results.push(ToolResult {
                            call_id: id,
                            output: value_text(res),
                            is_error: false,
                            raw: at("result"),
                        });
                    }
                }
            }
            Some(Value::String(s)) => {
                let calls = pyrepr::call_dicts(s);
                if calls.is_none() && !s.trim().is_empty() && s.trim() != "[]" {
                    run.b.drop_record(
                        raw("tool_calls"),
                        "tool_calls string is not a Python list of dicts",
                    );
                }
                for (j, c) in calls.unwrap_or_default().into_iter().enumerate() {
                    let id =
                        c.id.clone()
                            .or_else(|| Some(format!("round-{}-call-{}", i + 1, j + 1)));
                    t.tool_calls.push(ToolCall {
                        id: id.clone(),
                        name: c.name.unwrap_or_else(|| "tool".into()),
                        arguments: c.args.map(|r| s[r].to_string()).unwrap_or_default(),
                        raw: raw("tool_calls"),
                    });
                    if let Some(res) = c.result {
                        t.tool_results.push(ToolResult {
                            call_id: id,
                            output: s[res].to_string(),
                            is_error: false,
                            raw: raw("tool_calls"),
                        });
                    }
                }
            }
            _ => {}
        }
        if t.message.is_some() || !t.tool_calls.is_empty() {
            run.b.push(t);
        }
    }
}

/// A scanner for the Python `repr` of a list of dicts (OWL's `tool_calls` string): byte
/// ranges of each dict's values, no evaluation.
pub mod pyrepr {
    use std::ops::Range;

    /// One call dict: the decoded name and id, and the verbatim ranges of args and result.
    #[derive(Debug, Default, Clone, PartialEq)]
    pub struct CallDict {
        pub name: Option<String>,
        pub id: Option<String>,
        pub args: Option<Range<usize>>,
        pub result: Option<Range<usize>>,
    }

    fn ws(b: &[u8], mut i: usize) -> usize {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    }

    /// End of the string literal starting at `i` (a quote), and its decoded value (escapes
    /// kept as written except `\'`, `\"`, `\\`).
    fn string(s: &str, i: usize) -> Option<(usize, String)> {
        let b = s.as_bytes();
        let q = *b.get(i)?;
        let mut j = i + 1;
        let mut out = String::new();
        while j < b.len() {
            match b[j] {
                b'\\' => {
                    let n = *b.get(j + 1)?;
                    if n == b'\'' || n == b'"' || n == b'\\' {
                        out.push(n as char);
                    } else {
                        out.push('\\');
                        out.push(n as char);
                    }
                    j += 2;
                }
                c if c == q => return Some((j + 1, out)),
                _ => {
                    let ch = s[j..].chars().next()?;
                    out.push(ch);
                    j += ch.len_utf8();
                }
            }
        }
        None
    }

    /// End of the value starting at `i`.
    fn value(s: &str, i: usize) -> Option<usize> {
        let b = s.as_bytes();
        match *b.get(i)? {
            b'\'' | b'"' => string(s, i).map(|(e, _)| e),
            b'[' | b'{' | b'(' => {
                let close = match b[i] {
                    b'[' => b']',
                    b'{' => b'}',
                    _ => b')',
                };
                let mut j = ws(b, i + 1);
                loop {
                    if *b.get(j)? == close {
                        return Some(j + 1);
                    }
                    j = value(s, j)?;
                    j = ws(b, j);
                    if b.get(j) == Some(&b':') {
                        j = ws(b, j + 1);
                        j = value(s, j)?;
                        j = ws(b, j);
                    }
                    if b.get(j) == Some(&b',') {
                        j = ws(b, j + 1);
                    } else if *b.get(j)? != close {
                        return None;
                    }
                }
            }
            _ => {
                // number, True/False/None, or a bare name: up to a delimiter
                let mut j = i;
                while j < b.len() && !b",:]})".contains(&b[j]) && !b[j].is_ascii_whitespace() {
                    j += 1;
                }
                (j > i).then_some(j)
            }
        }
    }

    /// The call dicts of a `[{...}, {...}]` repr, or `None` if it is not one.
    pub(crate) fn call_dicts(s: &str) -> Option<Vec<CallDict>> {
        let b = s.as_bytes();
        let mut i = ws(b, 0);
        if b.get(i) != Some(&b'[') {
            return None;
        }
        i = ws(b, i + 1);
        let mut out = Vec::new();
        while b.get(i) != Some(&b']') {
            if b.get(i) != Some(&b'{') {
                return None;
            }
            let mut d = CallDict::default();
            i = ws(b, i + 1);
            while b.get(i) != Some(&b'}') {
                let (ke, key) = string(s, i)?;
                i = ws(b, ke);
                if b.get(i) != Some(&b':') {
                    return None;
                }
                i = ws(b, i + 1);
                let ve = value(s, i)?;
                let range = i..ve;
                let decoded = || string(s, range.start).map(|(_, v)| v);
                match key.as_str() {
                    "tool_name" | "func_name" | "name" => d.name = decoded(),
                    "tool_call_id" | "id" => d.id = decoded(),
                    "args" | "arguments" => d.args = Some(range.clone()),
                    "result" => d.result = Some(range.clone()),
                    _ => {}
                }
                i = ws(b, ve);
                if b.get(i) == Some(&b',') {
                    i = ws(b, i + 1);
                }
            }
            out.push(d);
            i = ws(b, i + 1);
            if b.get(i) == Some(&b',') {
                i = ws(b, i + 1);
            }
        }
        Some(out)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn scans_call_dicts() {
            let s = "[{'tool_name': 'search', 'args': {'q': 'it\\'s', 'n': 5}, 'result': ['a', \"b\"], 'tool_call_id': 'c1'}]";
            let c = call_dicts(s).unwrap();
            assert_eq!(c.len(), 1);
            assert_eq!(c[0].name.as_deref(), Some("search"));
            assert_eq!(c[0].id.as_deref(), Some("c1"));
            assert_eq!(&s[c[0].args.clone().unwrap()], "{'q': 'it\\'s', 'n': 5}");
            assert_eq!(&s[c[0].result.clone().unwrap()], "['a', \"b\"]");
            assert!(call_dicts("[{'a': }]").is_none());
            assert!(call_dicts("nope").is_none());
            assert_eq!(call_dicts("[]").unwrap().len(), 0);
        }
    }
}
