//! An attack for each escape of the replay sandbox (docs/security.md, "The replay sandbox"),
//! each a real command run through `Sandbox::run`. Skipped (with a line saying so) only where
//! no sandbox can be made; then `sage replay` does not execute either.

use sage_sandbox::{Change, Exit, Job, Limits, Sandbox, SandboxConfig};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Sandboxed commands of one test binary run one at a time: the process-count limit counts
/// every process of the sandbox's user, so a fork bomb in one test would starve another
/// test's command running beside it (in use, sage runs a trace's commands one by one).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn sandbox(limits: Limits) -> Option<Sandbox> {
    // The scratch copies go to the system's temp folder (it must be traversable by the
    // sandbox's unprivileged user); the attack's own files go to a private temp folder.
    let config = SandboxConfig {
        scratch: std::env::temp_dir().join(format!("sage-sandbox-tests-{}", uid())),
        limits,
    };
    match Sandbox::probe(config) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("skipped: {e}");
            assert!(
                std::env::var_os("SAGE_REQUIRE_SANDBOX").is_none(),
                "SAGE_REQUIRE_SANDBOX is set and no sandbox: {e}"
            );
            None
        }
    }
}

/// The user running the tests (each user its own scratch folder).
fn uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0)
}

fn limits() -> Limits {
    Limits {
        wall: Duration::from_secs(10),
        ..Limits::default()
    }
}

fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    pairs
        .iter()
        .map(|(p, c)| (p.to_string(), c.as_bytes().to_vec()))
        .collect()
}

fn run(sb: &Sandbox, files: &BTreeMap<String, Vec<u8>>, command: &str) -> sage_sandbox::Outcome {
    sb.run(&Job {
        root: "/testbed",
        cwd: "/testbed",
        files,
        command,
    })
    .unwrap()
}

#[test]
fn a_command_runs_at_the_traces_path_and_its_writes_are_captured() {
    let _serial = serial();
    let Some(sb) = sandbox(limits()) else { return };
    let f = files(&[("pkg/a.py", "x = 1\n"), ("old.txt", "bye\n")]);
    let out = run(
        &sb,
        &f,
        "pwd; sed -i 's/1/2/' pkg/a.py && printf 'new\\n' > pkg/b.py && rm old.txt && echo $HOME-$USER-$PATH",
    );
    assert_eq!(out.exit, Exit::Code(0), "{}", out.output);
    assert_eq!(
        out.output,
        "/testbed\n--/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/.sage-bin\n"
    );
    assert_eq!(
        out.changes,
        vec![
            Change::Deleted {
                path: "old.txt".into()
            },
            Change::Written {
                path: "pkg/a.py".into(),
                content: b"x = 2\n".to_vec()
            },
            Change::Written {
                path: "pkg/b.py".into(),
                content: b"new\n".to_vec()
            },
        ]
    );
}

#[test]
fn attack_network_a_listener_on_the_hosts_loopback_is_unreachable() {
    let _serial = serial();
    let Some(sb) = sandbox(limits()) else { return };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // Control: the same command outside reaches the listener (so the attack can fail).
    let outside = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("echo hello > /dev/tcp/127.0.0.1/{port}"))
        .status()
        .unwrap();
    assert!(outside.success());
    assert!(listener.accept().is_ok(), "the control connection arrived");
    let out = run(
        &sb,
        &BTreeMap::new(),
        &format!(
            "echo hello > /dev/tcp/127.0.0.1/{port} && echo CONNECTED; \
             python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2); print(\"CONNECTED\")'"
        ),
    );
    assert!(!out.output.contains("CONNECTED"), "{}", out.output);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        listener.accept().is_err(),
        "a connection from the sandbox reached the host"
    );
}

#[test]
fn attack_writing_outside_the_scratch_copy_changes_nothing() {
    let _serial = serial();
    let Some(sb) = sandbox(limits()) else { return };
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "untouched\n").unwrap();
    let v = victim.display();
    let out = run(
        &sb,
        &files(&[("a.txt", "a\n")]),
        &format!(
            "echo pwned > {v}; echo pwned > ../../{v}; mkdir -p {d}; echo pwned > {v}; \
             echo pwned > /usr/pwned; echo pwned > /pwned; echo pwned > /etc/pwned; \
             ln -s {v} link && echo pwned > link; ls /",
            d = dir.path().display()
        ),
    );
    assert!(matches!(out.exit, Exit::Code(_)), "{:?}", out.exit);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
    for p in ["/usr/pwned", "/pwned", "/etc/pwned"] {
        assert!(!std::path::Path::new(p).exists(), "{p} written");
    }
    // inside, the host's folders are not even there
    assert!(
        !out.output.contains("root\n") && !out.output.contains("work\n"),
        "{}",
        out.output
    );
}

#[test]
fn attack_reading_the_hosts_files_finds_nothing() {
    let _serial = serial();
    let Some(sb) = sandbox(limits()) else { return };
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET-7731\n").unwrap();
    let out = run(
        &sb,
        &BTreeMap::new(),
        &format!(
            "cat {}; cat /proc/1/root{}; ls /root /home /work; cat ../../{}; env",
            secret.display(),
            secret.display(),
            secret.display()
        ),
    );
    assert!(!out.output.contains("TOP-SECRET-7731"), "{}", out.output);
    assert!(out.output.contains("No such file"), "{}", out.output);
    // the environment is PATH only: no variable of the host's reaches the command
    assert!(!out.output.contains("HOME="), "{}", out.output);
}

#[test]
fn attack_fork_bomb_is_bounded_and_killed() {
    let marker = format!("sagebomb{}", std::process::id());
    let _serial = serial();
    let Some(sb) = sandbox(Limits {
        wall: Duration::from_secs(4),
        processes: 64,
        ..Limits::default()
    }) else {
        return;
    };
    let start = Instant::now();
    let out = run(
        &sb,
        &BTreeMap::new(),
        &format!("{marker}(){{ {marker} | {marker} & }}; {marker}; sleep 600"),
    );
    assert_eq!(
        out.exit,
        Exit::TimedOut(Duration::from_secs(4)),
        "{}",
        out.output
    );
    assert!(out.exit.refusal().unwrap().contains("time limit"));
    assert!(start.elapsed() < Duration::from_secs(60));
    // the process-count limit held: forks were refused
    assert!(
        out.output.contains("fork") || out.output.contains("Resource temporarily unavailable"),
        "{}",
        &out.output[..out.output.len().min(500)]
    );
    // and nothing of it survives: no process carries the marker
    let alive = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read(e.unwrap().path().join("cmdline")).ok())
            .filter(|c| String::from_utf8_lossy(c).contains(&marker))
            .count()
    };
    let mut n = alive();
    for _ in 0..50 {
        if n == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        n = alive();
    }
    assert_eq!(n, 0, "processes of the bomb survive the sandbox");
}

#[test]
fn attack_a_hang_is_killed_at_the_limit() {
    let _serial = serial();
    let Some(sb) = sandbox(Limits {
        wall: Duration::from_secs(2),
        ..Limits::default()
    }) else {
        return;
    };
    let start = Instant::now();
    let out = run(
        &sb,
        &BTreeMap::new(),
        "trap '' TERM INT HUP; sleep 600 & wait; sleep 600",
    );
    assert_eq!(out.exit, Exit::TimedOut(Duration::from_secs(2)));
    assert!(start.elapsed() < Duration::from_secs(60));
}

#[test]
fn attack_a_flood_of_output_is_capped() {
    let _serial = serial();
    let Some(sb) = sandbox(Limits {
        output_bytes: 64 * 1024,
        ..limits()
    }) else {
        return;
    };
    let out = run(&sb, &BTreeMap::new(), "yes sage-flood");
    assert_eq!(out.exit, Exit::OutputCapped(64 * 1024));
    assert!(out.output.len() <= 64 * 1024);
    assert!(out.output.starts_with("sage-flood\n"));
}

#[test]
fn attack_a_huge_file_is_cut_at_the_file_size_limit() {
    let _serial = serial();
    let Some(sb) = sandbox(Limits {
        file_bytes: 1 << 20,
        ..limits()
    }) else {
        return;
    };
    let out = run(
        &sb,
        &BTreeMap::new(),
        "head -c 50000000 /dev/zero > big.bin; echo after",
    );
    let big = out.changes.iter().find(|c| c.path() == "big.bin");
    match big {
        Some(Change::Written { content, .. }) => assert!(content.len() <= 1 << 20),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_workspace_path_that_leaves_the_workspace_is_refused() {
    let _serial = serial();
    let Some(sb) = sandbox(limits()) else { return };
    let f = files(&[("../escape.txt", "x")]);
    assert!(sb
        .run(&Job {
            root: "/testbed",
            cwd: "/testbed",
            files: &f,
            command: "true",
        })
        .is_err());
}
