//! mini-SWE-agent `.traj.json` (`SWE-agent/mini-swe-agent`, `agents/default.py`):
//! `{info, messages, trajectory_format}` (v1 `mini-swe-agent-1`, v2 `mini-swe-agent-1.1`) or,
//! in old fixtures, a bare list of messages.
//!
//! The only tool is bash: v1 takes the single ```` ```bash ```` block of an assistant message
//! as its action and the next `user` message (`<returncode>..<output>..`) as the result; v2
//! has `tool_calls` / `role: tool` or `extra.actions`. Writes are the plain shell edits among
//! the commands (`sed -i`, heredocs, `cat >`, `tee`, `rm`); `info.submission` (or the v2
//! `exit` message's `extra.submission`) becomes the final-state writes of the last turn.

use crate::support::*;
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::{Actor, CanonicalTrace, RawRef, TextItem, Turn, TurnKind};
use serde_json::Value;
use std::collections::BTreeMap;

pub struct MiniSweAgent;

impl Adapter for MiniSweAgent {
    fn name(&self) -> &'static str {
        "mini-swe-agent"
    }
    fn versions(&self) -> &'static str {
        "mini-SWE-agent .traj.json: trajectory_format mini-swe-agent-1 (v1.x, bash blocks) and \
         mini-swe-agent-1.1 (v2, tool calls / extra.actions), and bare message lists (pre-1.0)"
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
            "cat of the whole file",
            Default::default(),
        );
        Ok((t, seen))
    }
}

/// The canonical trace and the files the agent printed whole (`cat FILE` with exit code 0)
/// before it first wrote them.
pub(crate) fn normalize_with_baselines(
    files: &[SourceFile],
) -> Result<(CanonicalTrace, BTreeMap<String, String>), AdapterError> {
    let main = crate::support::main_file(files)?;
    let v = read_json(main)?;
    let (messages, base) = match &v {
        Value::Array(a) => (a, String::new()),
        Value::Object(_) => (
            v.get("messages").and_then(Value::as_array).ok_or_else(|| {
                AdapterError::new(&main.name, Some("/messages".into()), "no messages list")
            })?,
            "/messages".to_string(),
        ),
        _ => {
            return Err(AdapterError::new(
                &main.name,
                Some("/".into()),
                "expected an object with messages or a list of messages",
            ))
        }
    };
    let file = main.name.clone();
    let raw = |p: &str| RawRef::json(&file, None, p);
    let mut b = TraceBuilder::new("mini-swe-agent", files);
    let mut baselines = BTreeMap::new();
    let mut written = std::collections::BTreeSet::new();
    let roots = PathRoots::new(["/testbed"]);
    // The command awaiting its output: (turn, command).
    let mut pending: Option<(usize, String, String)> = None;
    let mut submission: Option<(String, RawRef)> = v
        .pointer("/info/submission")
        .and_then(Value::as_str)
        .filter(|x| !x.trim().is_empty())
        .map(|x| (x.to_string(), raw("/info/submission")));
    for (i, m) in messages.iter().enumerate() {
        let p = ptr(&base, i);
        let role = s(m, "role").unwrap_or("");
        let texts = m
            .get("content")
            .map(|c| content_texts(c, &ptr(&p, "content")))
            .unwrap_or_default();
        // A message split over several text blocks: the first is the turn's (or the
        // result's) text, the others are kept beside it (continuation turns, more results).
        let (text, tp) = texts.first().cloned().unwrap_or_default();
        let rest: Vec<TextItem> = texts
            .iter()
            .skip(1)
            .map(|(t, bp)| TextItem {
                text: t.clone(),
                raw: raw(bp),
            })
            .collect();
        let whole = texts
            .iter()
            .map(|(t, _)| t.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        match role {
            "system" => {
                b.admin("system", &text, raw(&tp));
            }
            "assistant" => {
                let mut t = Turn::new(Actor::new("agent", Some("assistant")), TurnKind::Planning);
                if !text.trim().is_empty() {
                    t.message = Some(TextItem {
                        text: text.clone(),
                        raw: raw(&tp),
                    });
                }
                let at = b.push(t);
                let mut cmds: Vec<(Option<String>, String, String)> = Vec::new();
                if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
                    for (j, c) in calls.iter().enumerate() {
                        let args = c
                            .pointer("/function/arguments")
                            .map(value_text)
                            .unwrap_or_default();
                        let cmd = serde_json::from_str::<Value>(&args)
                            .ok()
                            .and_then(|a| s(&a, "command").map(str::to_string))
                            .unwrap_or_else(|| args.clone());
                        cmds.push((
                            s(c, "id").map(str::to_string),
                            cmd,
                            format!("{p}/tool_calls/{j}/function/arguments"),
                        ));
                    }
                } else if let Some(acts) = m.pointer("/extra/actions").and_then(Value::as_array) {
                    for (j, a) in acts.iter().enumerate() {
                        if let Some(c) = s(a, "command") {
                            cmds.push((
                                None,
                                c.to_string(),
                                format!("{p}/extra/actions/{j}/command"),
                            ));
                        }
                    }
                } else if let Some((c, bp)) = texts
                    .iter()
                    .find_map(|(t, bp)| bash_block(t).map(|c| (c, bp.clone())))
                {
                    cmds.push((None, c, bp));
                }
                for (id, cmd, cp) in &cmds {
                    b.call(at, tool_call(id.as_deref(), "bash", cmd, raw(cp)));
                }
                b.continue_message(at, rest);
                pending = cmds.into_iter().next().map(|(_, c, cp)| (at, c, cp));
            }
            "user" | "tool" => match pending.take() {
                None => {
                    b.user(&text, raw(&tp));
                }
                Some((at, cmd, cp)) => {
                    if texts.is_empty() {
                        let r = tool_result(s(m, "tool_call_id"), "", false, raw(&tp));
                        b.trace.turns[at].tool_results.push(r);
                    }
                    for (t, bp) in &texts {
                        let r = tool_result(s(m, "tool_call_id"), t, false, raw(bp));
                        b.trace.turns[at].tool_results.push(r);
                    }
                    let text = whole;
                    let ok = returncode(&text) == Some(0);
                    // A whole-file `cat` before any write is a baseline.
                    if ok {
                        if let Some(f) = cat_target(&cmd) {
                            let a = roots.rel(&f);
                            if !written.contains(&a) && !baselines.contains_key(&a) {
                                if let Some(out) = output_of(&text) {
                                    baselines.insert(a, out);
                                }
                            }
                        }
                    }
                    // The submission command prints the patch; it is not an edit.
                    if cmd.contains("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
                        || cmd.contains("MINI_SWE_AGENT_FINAL_OUTPUT")
                    {
                        continue;
                    }
                    for w in shell_writes(&cmd, &roots, raw(&cp)) {
                        match w {
                            Ok(w) => {
                                if ok {
                                    written.insert(w.artefact.clone());
                                    b.write(at, w);
                                }
                            }
                            Err(reason) => b.drop_record(raw(&cp), reason),
                        }
                    }
                }
            },
            "exit" => {
                if let Some(sub) = m.pointer("/extra/submission").and_then(Value::as_str) {
                    if submission.is_none() && !sub.trim().is_empty() {
                        submission = Some((sub.to_string(), raw(&format!("{p}/extra/submission"))));
                    }
                }
                b.admin("exit", &text, raw(&tp));
            }
            other => b.drop_record(raw(&p), format!("message with unknown role {other:?}")),
        }
    }
    if let Some((sub, r)) = submission {
        let writes = final_patch_writes(&sub, "info.submission", &r, &roots);
        match b.last_agent_turn() {
            Some(at) => writes.into_iter().for_each(|w| b.write(at, w)),
            None => b.drop_record(r, "submission but no agent turn to hold it"),
        }
    }
    if let Some(st) = v.pointer("/info/exit_status").and_then(Value::as_str) {
        b.note(format!("exit status: {st}"));
    }
    Ok((b.finish(), baselines))
}

/// The single ```` ```bash ```` block of a v1 assistant message.
pub(crate) fn bash_block(text: &str) -> Option<String> {
    // ```bash (v1 default) or ```mswea_bash_command (later templates).
    let (start, tag) = ["```mswea_bash_command", "```bash"]
        .iter()
        .filter_map(|t| text.find(t).map(|i| (i, t.len())))
        .min()?;
    let after = &text[start + tag..];
    let after = after
        .strip_prefix('\n')
        .or_else(|| after.strip_prefix("\r\n"))
        .unwrap_or(after.trim_start_matches(' '));
    let end = after.find("\n```").or_else(|| after.find("```"))?;
    Some(after[..end].to_string())
}

fn returncode(obs: &str) -> Option<i64> {
    let s = obs.find("<returncode>")? + 12;
    let e = obs[s..].find("</returncode>")? + s;
    obs[s..e].trim().parse().ok()
}

/// The exact stdout inside `<output>\n...</output>`.
fn output_of(obs: &str) -> Option<String> {
    let s = obs.find("<output>\n")? + 9;
    let e = obs.rfind("</output>")?;
    (e >= s).then(|| obs[s..e].to_string())
}

/// `cat FILE` (one plain file, nothing else) → FILE.
fn cat_target(cmd: &str) -> Option<String> {
    let c = cmd.trim();
    let rest = c.strip_prefix("cat ")?.trim();
    if rest.contains(['|', '>', '<', ';', '&', '$', '`', '*', ' ']) || rest.starts_with('-') {
        return None;
    }
    Some(rest.trim_matches(['"', '\'']).to_string())
}
