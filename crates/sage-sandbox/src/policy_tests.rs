use super::*;

fn kind(cmd: &str) -> String {
    match Rules::embedded().decide(cmd) {
        Decision::Execute => "execute".into(),
        Decision::Refuse { kind, .. } => kind,
    }
}

#[test]
fn read_only_commands_are_never_executed() {
    for c in [
        "cat requests/models.py",
        "ls -la",
        "nl -ba requests/sessions.py | sed -n '400,460p'",
        "grep -R --line-number \"builtin_str(\" -n requests || true",
        "find . -name '*.py' | head",
        "cd /testbed && git diff",
        "git log --oneline -5",
        "git show HEAD:setup.py",
        "git status",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached",
        "head -50 a.py 2>/dev/null",
    ] {
        assert_eq!(kind(c), "read-only", "{c}");
    }
}

#[test]
fn test_runners_are_never_executed() {
    for c in [
        "pytest tests/test_x.py -q",
        "cd /testbed && python -m pytest -x tests",
        "python3 -m unittest discover",
        "tox -e py39",
        "npm test",
        "npm run test -- --watch=false",
        "cargo test -p foo",
        "sed -i 's/a/b/' x.py && python -m pytest",
        "./tests/runtests.py admin_views",
        "python tests/runtests.py utils_tests",
        "npx vitest run 2>&1",
        "npm run -s test -- --pool=threads",
    ] {
        assert_eq!(kind(c), "test-runner", "{c}");
    }
}

#[test]
fn package_installs_are_never_executed() {
    for c in [
        "pip install -e .",
        "python -m pip install requests",
        "apt-get install -y jq",
        "sudo apt update",
        "npm install highlight.js",
        "yarn add left-pad",
        "poetry install",
        "conda install numpy",
        "npx prettier --write src",
    ] {
        assert_eq!(kind(c), "package-install", "{c}");
    }
}

#[test]
fn network_tools_are_never_executed() {
    for c in [
        "curl -s https://example.com",
        "wget http://x/y.tar.gz",
        "git clone https://github.com/a/b",
        "ssh host ls",
    ] {
        assert_eq!(kind(c), "network", "{c}");
    }
}

#[test]
fn writing_commands_are_executed() {
    for c in [
        "python3 - <<'PY'\nfrom pathlib import Path\np = Path('a.py')\np.write_text(p.read_text().replace('a', 'b'))\nPY",
        "cat > notes.txt <<'EOF'\nhello | world && pytest\nEOF",
        "echo hi > out.txt",
        "ls && echo x >> log.txt",
        "sed -i 's/a/b/' x.py",
        "mv a.py b.py",
        "rm -f scratch.py",
        "patch -p1 < fix.diff",
        "git apply fix.diff",
        "python reproduce.py",
        "awk '{print}' a > b",
    ] {
        assert_eq!(kind(c), "execute", "{c}");
    }
}

#[test]
fn heredoc_bodies_are_not_split() {
    let s = simple_commands("python3 - <<'PY'\nprint('a | b && pip install x')\nPY\necho done");
    assert_eq!(s, vec!["python3 - <<'PY'", "echo done"]);
}

#[test]
fn outputs_compare_inside_a_wrapper_and_up_to_volatile_parts() {
    let r = Rules::embedded();
    let rec = "<returncode>0</returncode>\n<output>\npatched at 2024-05-01 10:11:12\n/tmp/tmpab12/x\n</output>\nReflect on it";
    assert_eq!(
        r.compare_output("patched at 2026-12-06 05:58:09\n/tmp/q9/x\n", Some(rec)),
        OutputCheck::Equal
    );
    assert_eq!(
        r.compare_output(
            "patched\nsecond\n",
            Some("<output>\npatched\nother\n</output>")
        ),
        OutputCheck::Differs {
            line: 2,
            ran: "second".into(),
            recorded: "other".into()
        }
    );
    assert!(matches!(
        r.compare_output("", Some("x")),
        OutputCheck::NotComparable(_)
    ));
    assert!(matches!(
        r.compare_output("x", None),
        OutputCheck::NotComparable(_)
    ));
}

#[test]
fn rules_are_overridable_and_versioned() {
    let r = Rules::parse(
        "version = 1\nshell_tools = [\"sh\"]\n[[class]]\nname = \"read-only\"\nreason = \"r\"\npatterns = ['^python']\n",
    )
    .unwrap();
    assert!(r.is_shell_tool("sh") && !r.is_shell_tool("bash"));
    assert_eq!(
        r.decide("python x.py"),
        Decision::Refuse {
            kind: "read-only".into(),
            reason: "r".into()
        }
    );
    assert!(matches!(
        Rules::parse("version = 2"),
        Err(RulesError::Version(2))
    ));
    assert!(matches!(
        Rules::parse("version = 1\n[[class]]\nname = \"x\"\nreason = \"r\"\npatterns = ['(']\n"),
        Err(RulesError::Pattern { .. })
    ));
}

#[test]
fn caches_are_not_kept_as_writes() {
    let r = Rules::embedded();
    assert!(r.ignores_written("pkg/__pycache__/m.cpython-311.pyc"));
    assert!(r.ignores_written("a.pyc"));
    assert!(!r.ignores_written("pkg/m.py"));
}
