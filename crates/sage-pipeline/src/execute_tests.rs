use super::*;
use sage_sandbox::{Limits, SandboxConfig};
use sage_trace::{Actor, RawRef, ToolCall, ToolResult, Turn, TurnKind};
use std::time::Duration;

/// [`super::run_commands`] with the embedded workspace roots.
fn run_commands(
    trace: &mut CanonicalTrace,
    baselines: &BTreeMap<String, String>,
    execution: &Execution,
) -> (ExecutionReport, BTreeMap<String, Vec<ExecutedWrite>>) {
    super::run_commands(trace, baselines, execution, &Default::default())
}

/// Sandboxed commands of one test binary run one at a time: the process-count limit counts
/// every process of the sandbox's user, so a fork bomb in one test would starve another
/// test's command running beside it (in use, sage runs a trace's commands one by one).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn on(wall: u64) -> Option<Execution> {
    let config = SandboxConfig {
        scratch: std::env::temp_dir().join("sage-execute-tests"),
        limits: Limits {
            wall: Duration::from_secs(wall),
            ..Limits::default()
        },
    };
    match Sandbox::probe(config) {
        Ok(sandbox) => Some(Execution::On {
            sandbox,
            rules: Rules::embedded(),
        }),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// A shell-driven trace: one bash call per turn, with the recorded output.
fn trace(steps: &[(&str, &str)]) -> CanonicalTrace {
    let mut t = CanonicalTrace::new("test", vec!["t.json".into()]);
    for (i, (cmd, out)) in steps.iter().enumerate() {
        let mut turn = Turn::new(Actor::new("agent", None), TurnKind::Implementation);
        let raw = RawRef::json("t.json", None, format!("/messages/{}/content", 2 * i));
        turn.tool_calls.push(ToolCall {
            id: None,
            name: "bash".into(),
            arguments: cmd.to_string(),
            raw: raw.clone(),
        });
        turn.tool_results.push(ToolResult {
            call_id: None,
            output: format!("<returncode>0</returncode>\n<output>\n{out}</output>"),
            is_error: false,
            raw: RawRef::json("t.json", None, format!("/messages/{}/content", 2 * i + 1)),
        });
        t.push_turn(turn);
    }
    t
}

fn base(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn a_python_heredoc_edit_becomes_a_verified_executed_write() {
    let _serial = serial();
    let Some(ex) = on(20) else { return };
    let mut t = trace(&[
        ("cd /testbed && ls", "pkg\n"),
        (
            "python3 - <<'PY'\nfrom pathlib import Path\np = Path('pkg/m.py')\np.write_text(p.read_text().replace('a = 1', 'a = 2'))\nprint('patched')\nPY",
            "patched\n",
        ),
        ("pytest -q", "1 passed\n"),
    ]);
    let (r, per) = run_commands(&mut t, &base(&[("pkg/m.py", "a = 1\nb = 3\n")]), &ex);
    assert_eq!(r.refused.get("read-only"), Some(&1));
    assert_eq!(r.refused.get("test-runner"), Some(&1));
    assert_eq!(r.executed.get("python3"), Some(&1), "{r:?}");
    let w = &t.turns[1].writes;
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].artefact, "pkg/m.py");
    assert_eq!(
        w[0].op,
        WriteOp::Executed {
            content: Some("a = 2\nb = 3\n".into())
        }
    );
    assert_eq!(w[0].raw, t.turns[1].tool_calls[0].raw);
    assert_eq!(per["pkg/m.py"][0].check, "verified");
}

#[test]
fn a_command_whose_output_differs_keeps_its_write_as_diverged() {
    let _serial = serial();
    let Some(ex) = on(20) else { return };
    let mut t = trace(&[(
        "sed -i.bak 's/x/y/' f.txt && rm f.txt.bak && wc -l f.txt",
        "7 f.txt\n",
    )]);
    let (_, per) = run_commands(&mut t, &base(&[("f.txt", "x\n")]), &ex);
    let e = &per["f.txt"][0];
    assert_eq!(e.check, "diverged");
    assert!(
        e.detail.as_deref().unwrap().contains("\"1 f.txt\""),
        "{e:?}"
    );
    assert_eq!(
        t.turns[0].writes[0].op,
        WriteOp::Executed {
            content: Some("y\n".into())
        }
    );
    assert!(!per.contains_key("f.txt.bak"));
}

#[test]
fn a_later_command_sees_the_earlier_executed_writes_and_deletes_are_writes() {
    let _serial = serial();
    let Some(ex) = on(20) else { return };
    let mut t = trace(&[
        ("printf 'one\\n' > new.txt", ""),
        ("cat new.txt >> log.txt && rm new.txt", ""),
    ]);
    let (r, per) = run_commands(&mut t, &base(&[("log.txt", "zero\n")]), &ex);
    assert_eq!(r.executed.values().sum::<usize>(), 2);
    assert_eq!(per["new.txt"].len(), 2);
    assert_eq!(per["log.txt"][0].check, "not comparable");
    let last: Vec<_> = t.turns[1]
        .writes
        .iter()
        .map(|w| (&w.artefact, &w.op))
        .collect();
    assert_eq!(
        last,
        vec![
            (
                &"log.txt".to_string(),
                &WriteOp::Executed {
                    content: Some("zero\none\n".into())
                }
            ),
            (&"new.txt".to_string(), &WriteOp::Executed { content: None }),
        ]
    );
}

#[test]
fn a_fork_bomb_is_not_executed_and_the_rest_of_the_trace_is_replayed() {
    let _serial = serial();
    let Some(ex) = on(3) else { return };
    let mut t = trace(&[
        ("b(){ b | b & }; b; echo x > bomb.txt; sleep 600", ""),
        ("echo ok > after.txt", ""),
    ]);
    let (r, per) = run_commands(&mut t, &BTreeMap::new(), &ex);
    assert!(r.commands[0]
        .outcome
        .starts_with("not executed: killed at the time limit"));
    assert!(
        t.turns[0].writes.is_empty(),
        "a killed command leaves no write"
    );
    assert!(!per.contains_key("bomb.txt"));
    assert_eq!(per["after.txt"].len(), 1);
}

#[test]
fn execution_off_runs_nothing_and_says_why() {
    let mut t = trace(&[("echo hi > a.txt", "")]);
    let (r, per) = run_commands(
        &mut t,
        &BTreeMap::new(),
        &Execution::Off("no sandbox: `unshare` is not installed (util-linux)".into()),
    );
    assert_eq!(
        r.state,
        "off: no sandbox: `unshare` is not installed (util-linux)"
    );
    assert!(per.is_empty() && t.turns[0].writes.is_empty() && r.commands.is_empty());
}

#[test]
fn the_command_of_a_call_is_read_from_each_argument_shape() {
    assert_eq!(command_of("ls -la"), "ls -la");
    assert_eq!(
        command_of(r#"{"command":"sed -i s/a/b/ f"}"#),
        "sed -i s/a/b/ f"
    );
    assert_eq!(
        command_of(r#"{"command":["bash","-lc","echo hi > f"],"timeout_ms":1}"#),
        "echo hi > f"
    );
    assert_eq!(leading_cd("cd /testbed && ls").as_deref(), Some("/testbed"));
    assert_eq!(
        program("cd /x && python3 - <<'PY'\nprint(1)\nPY"),
        "python3"
    );
}

#[test]
fn an_ipython_cell_is_run_as_python_code() {
    let _serial = serial();
    let Some(ex) = on(20) else { return };
    let mut t = trace(&[]);
    let mut turn = Turn::new(Actor::new("agent", None), TurnKind::Implementation);
    turn.tool_calls.push(ToolCall {
        id: None,
        name: "run_ipython".into(),
        arguments: "with open('LICENSE', 'w') as f:\n    f.write('MIT\\n')\nprint('ok')".into(),
        raw: RawRef::json("t.json", None, "/history/3"),
    });
    turn.tool_results.push(ToolResult {
        call_id: None,
        output: "ok\n[Jupyter current working directory: /workspace]".into(),
        is_error: false,
        raw: RawRef::json("t.json", None, "/history/4"),
    });
    t.push_turn(turn);
    let (_, per) = run_commands(&mut t, &BTreeMap::new(), &ex);
    assert_eq!(per["LICENSE"][0].check, "verified");
    assert_eq!(
        t.turns[0].writes[0].op,
        WriteOp::Executed {
            content: Some("MIT\n".into())
        }
    );
}

/// An append to a file the trace never shows: in the sandbox the file holds only the appended
/// text, which is not the file; no write is kept, and the file's executed entry says why. An
/// append to a file sage knows is a write as any other.
#[test]
fn an_append_to_a_file_nobody_knows_is_not_kept() {
    let _serial = serial();
    let Some(ex) = on(20) else { return };
    let mut t = trace(&[
        ("echo 'x = 1' >> unknown.py", ""),
        ("echo 'b = 2' >> known.py", ""),
        ("echo 'new' > created.py", ""),
    ]);
    let (r, per) = run_commands(&mut t, &base(&[("known.py", "a = 1\n")]), &ex);
    assert!(t.turns[0].writes.is_empty(), "{:?}", t.turns[0].writes);
    assert_eq!(per["unknown.py"][0].check, "not kept", "{per:?}");
    assert_eq!(r.writes.get("not kept"), Some(&1));
    assert_eq!(
        t.turns[1].writes[0].op,
        WriteOp::Executed {
            content: Some("a = 1\nb = 2\n".into())
        }
    );
    // A file a command creates whole is a write.
    assert_eq!(t.turns[2].writes[0].artefact, "created.py");
}

#[test]
fn appends_are_told_from_other_writes() {
    assert!(appends_to("echo x >> notes.txt", "notes.txt"));
    assert!(appends_to("cd /w && printf 'a' >>\"src/m.py\"", "src/m.py"));
    assert!(appends_to("echo x | tee -a log/out.txt", "log/out.txt"));
    assert!(appends_to(
        "python3 - <<'PY'\nopen('conf.ini', 'a').write('x')\nPY",
        "conf.ini"
    ));
    assert!(!appends_to("echo x > notes.txt", "notes.txt"));
    assert!(!appends_to("echo x >> other.txt", "notes.txt"));
}
