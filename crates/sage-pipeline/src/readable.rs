//! Trace text as a person reads it, the same in `sage explain` and `sage view`: a tool call's
//! arguments as its command line or one `key: value` line per argument, never as one escaped
//! JSON string.

use std::fmt::Write as _;

/// A tool call's arguments as a reader wants them: a shell call (a tool the turn-kinds
/// data names in `shell_tools`) as its command line after `$ `; a JSON object as one
/// `key: value` line per argument, a multi-line string as a `key: |` block of its lines
/// (code and file contents read as written, not as one escaped string); other JSON
/// pretty-printed; text that is not JSON as recorded.
pub(crate) fn readable_arguments(
    call: &sage_trace::ToolCall,
    kinds: &sage_adapters::kinds::Classifier,
) -> String {
    use serde_json::Value;
    let Ok(v) = serde_json::from_str::<Value>(&call.arguments) else {
        return call.arguments.clone();
    };
    let map = match v {
        Value::Object(m) => m,
        Value::String(s) => return s,
        other => return serde_json::to_string_pretty(&other).unwrap_or_default(),
    };
    let mut o = String::new();
    let mut shown_key = None;
    if kinds.is_shell_tool(&call.name) {
        for key in kinds.shell_command_keys() {
            let cmd = match map.get(key.as_str()) {
                Some(Value::String(c)) => Some(c.clone()),
                // Codex: ["bash", "-lc", "cmd"]; any other argv joined, quoted where needed
                Some(Value::Array(a)) if a.iter().all(Value::is_string) => {
                    let argv: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
                    match argv.as_slice() {
                        [sh, flag, cmd] if ["-c", "-lc"].contains(flag) && !sh.is_empty() => {
                            Some((*cmd).to_string())
                        }
                        _ => Some(
                            argv.iter()
                                .map(|w| {
                                    if w.is_empty()
                                        || w.contains(|c: char| {
                                            c.is_whitespace() || "'\"$`\\".contains(c)
                                        })
                                    {
                                        format!("'{}'", w.replace('\'', "'\\''"))
                                    } else {
                                        (*w).to_string()
                                    }
                                })
                                .collect::<Vec<_>>()
                                .join(" "),
                        ),
                    }
                }
                _ => None,
            };
            if let Some(cmd) = cmd {
                let _ = writeln!(o, "$ {}", cmd.trim_end_matches('\n'));
                shown_key = Some(key.clone());
                break;
            }
        }
    }
    for (k, v) in &map {
        if shown_key.as_deref() == Some(k.as_str()) {
            continue;
        }
        match v {
            Value::String(t) if t.contains('\n') => {
                let _ = writeln!(o, "{k}: |");
                for line in t.trim_end_matches('\n').split('\n') {
                    let _ = writeln!(o, "  {line}");
                }
            }
            Value::String(t) => {
                let _ = writeln!(o, "{k}: {t}");
            }
            other => {
                let _ = writeln!(
                    o,
                    "{k}: {}",
                    serde_json::to_string_pretty(other).unwrap_or_default()
                );
            }
        }
    }
    o
}

/// A turn's text for a terminal: its message, each tool call's arguments in readable form
/// ([`readable_arguments`]) and each tool result, one after the other.
pub(crate) fn turn_text(
    turn: &sage_trace::Turn,
    kinds: &sage_adapters::kinds::Classifier,
) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(m) = &turn.message {
        parts.push(m.text.clone());
    }
    for c in &turn.tool_calls {
        parts.push(readable_arguments(c, kinds));
    }
    for r in &turn.tool_results {
        parts.push(r.output.clone());
    }
    parts
        .iter()
        .map(|p| p.trim_end_matches('\n'))
        .collect::<Vec<_>>()
        .join("\n")
}
