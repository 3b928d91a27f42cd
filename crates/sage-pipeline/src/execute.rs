//! Replay by execution (`sage replay --execute`, docs/replay.md "Replay by execution"): every
//! shell command of a trace that sage does not read statically and that the command rules do
//! not refuse is run again in the sandbox of `sage-sandbox`, on the files as reconstructed up
//! to its turn, at the trace's own paths. Every file it creates, changes or deletes becomes a
//! write of its turn (op `executed`, with the command's raw pointer), and its output is
//! compared with the output the trace recorded: `verified`, `diverged` (with the first
//! differing line) or `not comparable`. A command killed at a limit, or that the sandbox
//! cannot run, is `not executed: <reason>` and leaves no write.

use sage_history::{match_key, normalize_path, parse_workspace_roots, DEFAULT_WORKSPACE_ROOTS};
use sage_sandbox::{Change, Decision, Job, OutputCheck, Rules, Sandbox};
use sage_trace::{CanonicalTrace, ToolCall, Write, WriteOp};
use std::collections::BTreeMap;

/// Whether `sage replay` executes commands, and with what.
#[derive(Debug, Clone)]
pub enum Execution {
    /// Commands are not run; why (one line).
    Off(String),
    /// Commands are run in this sandbox under these rules.
    On { sandbox: Sandbox, rules: Rules },
}

impl Default for Execution {
    fn default() -> Self {
        Execution::Off("execution not asked".into())
    }
}

/// What the execution did, for the report.
#[derive(Debug, Clone, Default)]
pub struct ExecutionReport {
    /// `on (Linux namespaces)` or `off: WHY`.
    pub state: String,
    /// Commands run, by program (the first word of the first simple command that is not `cd`).
    pub executed: BTreeMap<String, usize>,
    /// Commands refused by the rules, by class (`read-only`, `test-runner`, ...).
    pub refused: BTreeMap<String, usize>,
    /// Commands started but not kept (killed at a limit, the sandbox could not run them), by
    /// reason.
    pub not_executed: BTreeMap<String, usize>,
    /// Shell commands whose writes sage reads statically (not run).
    pub read_statically: usize,
    /// Executed writes by output check: `verified`, `diverged`, `not comparable`.
    pub writes: BTreeMap<String, usize>,
    /// One line per shell command, in trace order.
    pub commands: Vec<CommandReport>,
    /// Per file the trace knows: the executed commands that name it (its path is in the
    /// command line) and whose output differs from the recorded one, as `turn N: DETAIL`.
    pub diverged_naming: BTreeMap<String, Vec<String>>,
}

/// One shell command of the trace.
#[derive(Debug, Clone)]
pub struct CommandReport {
    pub turn: usize,
    /// The command's raw pointer.
    pub raw: String,
    /// The command's first line (at most 120 characters).
    pub command: String,
    /// `executed`, `refused: KIND`, `not executed: REASON`, `read statically`.
    pub outcome: String,
    /// For an executed command: `verified`, `diverged: ...`, `not comparable: ...`.
    pub output: Option<String>,
    /// The files it wrote (the trace's names).
    pub writes: Vec<String>,
}

/// One executed write of an artefact.
#[derive(Debug, Clone)]
pub struct ExecutedWrite {
    pub turn: usize,
    /// The command's raw pointer.
    pub command: String,
    /// `verified`, `diverged` or `not comparable`.
    pub check: String,
    /// For `diverged`: the first differing line; for `not comparable`: why.
    pub detail: Option<String>,
}

/// The command line of a shell tool call: the `command` argument (a string, or an argv whose
/// last word is the script of `bash -c` / `-lc`), else the whole argument text.
pub fn command_of(arguments: &str) -> String {
    let t = arguments.trim_start();
    if t.starts_with('{') {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(t) {
            match v.get("command").or_else(|| v.get("cmd")) {
                Some(serde_json::Value::String(s)) => return s.clone(),
                Some(serde_json::Value::Array(a)) => {
                    let words: Vec<&str> = a.iter().filter_map(|w| w.as_str()).collect();
                    let shell = words.first().is_some_and(|w| {
                        matches!(w.rsplit('/').next(), Some("bash" | "sh" | "zsh"))
                    });
                    if shell && words.len() >= 3 && words[1].starts_with('-') {
                        return words[words.len() - 1].to_string();
                    }
                    return words.join(" ");
                }
                _ => {}
            }
        }
    }
    arguments.to_string()
}

/// The code of a Python tool call: the `code` argument, else the whole argument text.
fn code_of(arguments: &str) -> String {
    serde_json::from_str::<serde_json::Value>(arguments)
        .ok()
        .and_then(|v| v.get("code").and_then(|c| c.as_str()).map(str::to_string))
        .unwrap_or_else(|| arguments.to_string())
}

/// The program a command runs (for counting): the first word of its first simple command
/// that is not `cd`.
fn program(command: &str) -> String {
    sage_sandbox::simple_commands(command)
        .iter()
        .filter_map(|s| s.split_whitespace().next().map(str::to_string))
        .find(|w| w != "cd")
        .map(|w| w.rsplit('/').next().unwrap_or(&w).to_string())
        .unwrap_or_else(|| "(none)".into())
}

/// A leading `cd ABS` of a command line: where the agent works.
fn leading_cd(command: &str) -> Option<String> {
    let first = sage_sandbox::simple_commands(command).into_iter().next()?;
    let dir = first.strip_prefix("cd ")?.trim().trim_matches(['"', '\'']);
    (dir.starts_with('/') && !dir.contains(' ') && dir.len() > 1)
        .then(|| normalize_path(dir).trim_end_matches('/').to_string())
}

/// The folder the trace's workspace lives in: the first `cd ABS` of its commands, else the
/// workspace root (`/testbed`, `/workspace`, ...) its absolute names start with, else
/// `/workspace`.
fn workspace_root(trace: &CanonicalTrace, rules: &Rules, names: &[String]) -> String {
    for t in &trace.turns {
        for c in &t.tool_calls {
            if rules.is_shell_tool(&c.name) {
                if let Some(d) = leading_cd(&command_of(&c.arguments)) {
                    return d;
                }
            }
        }
    }
    let roots = parse_workspace_roots(DEFAULT_WORKSPACE_ROOTS);
    for n in names.iter().filter(|n| n.starts_with('/')) {
        for r in &roots {
            if n.starts_with(r.as_str()) {
                return r.trim_end_matches('/').to_string();
            }
        }
    }
    "/workspace".into()
}

/// Run the trace's commands (see the module's doc): executed writes are added to their
/// turns in `trace`; `baselines` are the files before the run (the trace's names). Returns
/// the report and, per artefact name, its executed writes. Paths name files under the
/// path rule with the workspace `roots`.
pub fn run_commands(
    trace: &mut CanonicalTrace,
    baselines: &BTreeMap<String, String>,
    execution: &Execution,
    roots: &sage_history::WorkspaceRoots,
) -> (ExecutionReport, BTreeMap<String, Vec<ExecutedWrite>>) {
    let mut report = ExecutionReport::default();
    let mut per_file: BTreeMap<String, Vec<ExecutedWrite>> = BTreeMap::new();
    let (sandbox, rules) = match execution {
        Execution::Off(why) => {
            report.state = format!("off: {why}");
            return (report, per_file);
        }
        Execution::On { sandbox, rules } => (sandbox, rules),
    };
    report.state = "on (Linux namespaces: no network, read-only host, limits)".into();
    let names: Vec<String> = baselines.keys().cloned().collect();
    let root = workspace_root(trace, rules, &names);
    let mut state: BTreeMap<String, Option<String>> = baselines
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    let name_of = |state: &BTreeMap<String, Option<String>>, path: &str| -> String {
        match_key(path, state.keys(), roots).unwrap_or_else(|| normalize_path(path))
    };
    for turn in trace.turns.iter_mut() {
        // The turn's own writes first (what sage reads statically).
        for w in &turn.writes {
            let n = name_of(&state, &w.artefact);
            let cur = state.get(&n).cloned().flatten();
            if let Ok(a) = sage_history::apply(cur.as_deref(), &w.op) {
                state.insert(n, a.content);
            }
        }
        let single = turn.tool_calls.len() == 1;
        let mut added: Vec<Write> = Vec::new();
        for (ci, call) in turn.tool_calls.iter().enumerate() {
            let python = rules.is_python_tool(&call.name);
            if !rules.is_shell_tool(&call.name) && !python {
                continue;
            }
            let command = if python {
                let code = code_of(&call.arguments);
                format!("python3 - <<'SAGE_PYTHON_CELL'\n{code}\nSAGE_PYTHON_CELL")
            } else {
                command_of(&call.arguments)
            };
            let mut line = CommandReport {
                turn: turn.index,
                raw: call.raw.display(),
                command: command
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(120)
                    .collect(),
                outcome: String::new(),
                output: None,
                writes: Vec::new(),
            };
            let statically = turn
                .writes
                .iter()
                .any(|w| w.raw == call.raw || (single && !w.final_state));
            if statically {
                line.outcome = "read statically".into();
                report.read_statically += 1;
                report.commands.push(line);
                continue;
            }
            if let (false, Decision::Refuse { kind, .. }) = (python, rules.decide(&command)) {
                line.outcome = format!("refused: {kind}");
                *report.refused.entry(kind).or_default() += 1;
                report.commands.push(line);
                continue;
            }
            // The files as known now, at the trace's paths (relative to the root).
            let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
            let mut rel_name: BTreeMap<String, String> = BTreeMap::new();
            for (n, c) in &state {
                let Some(c) = c else { continue };
                let rel = if let Some(r) = n.strip_prefix(&format!("{root}/")) {
                    r.to_string()
                } else if n.starts_with('/') {
                    continue; // outside the workspace: not materialized
                } else {
                    n.clone()
                };
                if rel.split('/').any(|p| p == "..") {
                    continue;
                }
                files.insert(rel.clone(), c.as_bytes().to_vec());
                rel_name.insert(rel, n.clone());
            }
            let cwd = leading_cd(&command).unwrap_or_else(|| root.clone());
            let outcome = match sandbox.run(&Job {
                root: &root,
                cwd: &cwd,
                files: &files,
                command: &command,
            }) {
                Ok(o) => o,
                Err(e) => {
                    let why = e.to_string();
                    line.outcome = format!("not executed: {why}");
                    *report.not_executed.entry(why).or_default() += 1;
                    report.commands.push(line);
                    continue;
                }
            };
            if let Some(why) = outcome.exit.refusal() {
                line.outcome = format!("not executed: {why}");
                *report.not_executed.entry(why).or_default() += 1;
                report.commands.push(line);
                continue;
            }
            line.outcome = "executed".into();
            *report.executed.entry(program(&command)).or_default() += 1;
            let recorded = turn
                .tool_results
                .iter()
                .find(|r| r.call_id.is_some() && r.call_id == call.id)
                .or_else(|| turn.tool_results.get(ci))
                .map(|r| r.output.as_str());
            let (check, detail) = match rules.compare_output(&outcome.output, recorded) {
                OutputCheck::Equal => ("verified", None),
                OutputCheck::Differs {
                    line: n,
                    ran,
                    recorded,
                } => (
                    "diverged",
                    Some(format!(
                        "output line {n}: the sandbox printed {ran:?}, the trace recorded {recorded:?}"
                    )),
                ),
                OutputCheck::NotComparable(why) => ("not comparable", Some(why.to_string())),
            };
            if check == "diverged" {
                for (rel, n) in &rel_name {
                    if command.contains(rel.as_str()) {
                        report
                            .diverged_naming
                            .entry(n.clone())
                            .or_default()
                            .push(format!(
                                "turn {}: {}",
                                turn.index,
                                detail.as_deref().unwrap_or_default()
                            ));
                    }
                }
            }
            line.output = Some(match &detail {
                Some(d) => format!("{check}: {d}"),
                None => check.to_string(),
            });
            for ch in &outcome.changes {
                let rel = ch.path();
                if rules.ignores_written(rel) {
                    continue;
                }
                let name = rel_name.get(rel).cloned().unwrap_or_else(|| {
                    if names.iter().any(|n| n.starts_with('/')) {
                        format!("{root}/{rel}")
                    } else {
                        rel.to_string()
                    }
                });
                let content = match ch {
                    Change::Written { content, .. } => match String::from_utf8(content.clone()) {
                        Ok(s) => Some(s),
                        Err(_) => continue, // a binary file is no artefact sage compares
                    },
                    Change::Deleted { .. } => None,
                };
                if state.get(&name).cloned().flatten() == content {
                    continue;
                }
                // A file nothing is known of, which the command appends to, existed in the run
                // with an earlier content the sandbox did not have: what it holds now is only
                // the appended text, not the file. Kept out of the history, and said.
                if !state.contains_key(&name)
                    && !files.contains_key(rel)
                    && appends_to(&command, rel)
                {
                    let why = "the command appends to a file whose earlier content is \
                               unknown: the sandbox holds only the appended text";
                    let e = executed(turn.index, call, "not kept", Some(why.into()));
                    *report.writes.entry(e.check.clone()).or_default() += 1;
                    per_file.entry(name).or_default().push(e);
                    continue;
                }
                state.insert(name.clone(), content.clone());
                line.writes.push(name.clone());
                let e = executed(turn.index, call, check, detail.clone());
                *report.writes.entry(e.check.clone()).or_default() += 1;
                per_file.entry(name.clone()).or_default().push(e);
                added.push(Write {
                    artefact: name,
                    op: WriteOp::Executed { content },
                    via: format!("executed: {}", program(&command)),
                    final_state: false,
                    raw: call.raw.clone(),
                });
            }
            report.commands.push(line);
        }
        turn.writes.extend(added);
    }
    (report, per_file)
}

/// One executed write of `call` at `turn`, with its output check.
fn executed(turn: usize, call: &ToolCall, check: &str, detail: Option<String>) -> ExecutedWrite {
    ExecutedWrite {
        turn,
        command: call.raw.display(),
        check: check.to_string(),
        detail,
    }
}

/// Whether `command` appends to the file `rel` (a path relative to the workspace root): a
/// `>>` redirection, `tee -a`, or Python's `open(..., 'a')` naming the file (by its path or
/// its file name).
fn appends_to(command: &str, rel: &str) -> bool {
    let file = rel.rsplit('/').next().unwrap_or(rel);
    let names = |s: &str| s.contains(rel) || s.contains(file);
    let redirect = command.match_indices(">>").any(|(i, _)| {
        let after = command[i + 2..].trim_start();
        let target = after
            .split(|c: char| c.is_whitespace() || c == ';' || c == '&' || c == '|')
            .next()
            .unwrap_or("")
            .trim_matches(|c| c == '"' || c == '\'');
        !target.is_empty() && (target.ends_with(rel) || target.ends_with(file))
    });
    let tee = command
        .lines()
        .any(|l| (l.contains("tee -a ") || l.contains("tee --append ")) && names(l));
    let python = command
        .lines()
        .any(|l| l.contains("open(") && names(l) && (l.contains("'a'") || l.contains("\"a\"")));
    redirect || tee || python
}

#[cfg(test)]
#[path = "execute_tests.rs"]
mod tests;
