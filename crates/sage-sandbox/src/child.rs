//! The one bounded runner of a child process: a command run with a wall-clock limit and an
//! output cap, killed with every process it started (its own process group) when it passes
//! either. Every child process sage starts goes through it: the sandbox's commands,
//! `sage-szz`'s git calls and bench, `sage-screen`'s interpreter, Bandit and a case's tests,
//! `sage case init`'s `git show`, the CLI's Bandit probe. [`command`] is the one place a
//! `Command` is made (`tests/it/architecture.rs` checks it), so none runs without a limit.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// What is kept of the command's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capture {
    /// stdout and stderr apart: at most `stdout` bytes of stdout (one more kills the command);
    /// of stderr the first `stderr` bytes are kept and the rest is read and dropped, so the
    /// command never blocks on a full pipe.
    Apart {
        /// The cap on stdout, in bytes.
        stdout: u64,
        /// The bytes of stderr kept.
        stderr: u64,
    },
    /// stdout and stderr into one pipe, in the order written: at most this many bytes (one
    /// more kills the command); returned as stdout.
    Together(u64),
    /// Nothing: the caller set the command's stdout and stderr (a log file, null).
    Nothing,
}

/// How a bounded command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// It exited (or was killed by a signal) by itself.
    Exited(ExitStatus),
    /// It was killed at the time limit.
    TimedOut,
    /// It was killed at the output cap.
    OutputCapped,
}

/// What a bounded command gave.
#[derive(Debug)]
pub struct Ran {
    /// How it ended.
    pub end: End,
    /// Its stdout (both streams with [`Capture::Together`]); the first cap's worth when it
    /// passed the cap.
    pub stdout: Vec<u8>,
    /// The kept part of its stderr ([`Capture::Apart`]).
    pub stderr: Vec<u8>,
    /// Its process id, which is also its process group's ([`kill_group`]).
    pub pid: u32,
}

/// A command for `program`, to be run by [`run`] or [`run_fed`] (the one constructor: a
/// command made here runs with a limit).
pub fn command(program: impl AsRef<OsStr>) -> Command {
    Command::new(program)
}

/// Run `cmd` in a process group of its own for at most `wall`, keeping its output as
/// `capture` says. Only a command that cannot be started is an error.
pub fn run(cmd: Command, wall: Duration, capture: Capture) -> std::io::Result<Ran> {
    run_with(cmd, None, wall, capture)
}

/// [`run`], with `input` written to the command's stdin (then closed). A command that stops
/// reading is still ended at the limit: the writer gives up when the group is killed.
pub fn run_fed(
    cmd: Command,
    input: Vec<u8>,
    wall: Duration,
    capture: Capture,
) -> std::io::Result<Ran> {
    run_with(cmd, Some(input), wall, capture)
}

fn run_with(
    mut cmd: Command,
    input: Option<Vec<u8>>,
    wall: Duration,
    capture: Capture,
) -> std::io::Result<Ran> {
    if input.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut together = None;
    match capture {
        Capture::Apart { .. } => {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        Capture::Together(_) => {
            let (reader, writer) = std::io::pipe()?;
            let writer2 = writer.try_clone()?;
            cmd.stdout(writer).stderr(writer2);
            together = Some(reader);
        }
        Capture::Nothing => {}
    }
    // its own process group, so a kill also ends whatever it started
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    drop(cmd); // our copies of the pipe's write end: the reader ends when the command's do
    let pid = child.id();
    // fed from a thread of its own, so a command that writes before it reads cannot block us
    let feeder = match (input, child.stdin.take()) {
        (Some(bytes), Some(mut stdin)) => Some(std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        })),
        _ => None,
    };

    // A watchdog ends the command at the deadline, which also ends a read that would
    // otherwise wait for a command that never closes its output.
    let timed_out = Arc::new(AtomicBool::new(false));
    let (done, deadline) = mpsc::channel::<()>();
    let watchdog = {
        let timed_out = Arc::clone(&timed_out);
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = deadline.recv_timeout(wall) {
                timed_out.store(true, Ordering::SeqCst);
                kill_group(pid);
            }
        })
    };

    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let mut capped = false;
    match capture {
        Capture::Apart {
            stdout: cap,
            stderr: kept,
        } => {
            let mut err = child.stderr.take().expect("piped stderr");
            let err_reader = std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = err.by_ref().take(kept).read_to_end(&mut buf);
                let _ = std::io::copy(&mut err, &mut std::io::sink());
                buf
            });
            let out = child.stdout.take().expect("piped stdout");
            capped = read_capped(out, cap, &mut stdout);
            if capped {
                // nothing more is read: end the command now, so stderr's reader ends too
                kill_group(pid);
                let _ = child.kill();
            }
            stderr = err_reader.join().unwrap_or_default();
        }
        Capture::Together(cap) => {
            let out = together.take().expect("the pipe's read end");
            capped = read_capped(out, cap, &mut stdout);
            if capped {
                kill_group(pid);
                let _ = child.kill();
            }
        }
        Capture::Nothing => {}
    }
    if capped {
        stdout.truncate(usize::try_from(cap_of(capture)).unwrap_or(usize::MAX));
    }
    // The output is closed: the command has exited or soon will; wait for it, within the
    // limit, with short naps that grow (most commands are done at once).
    let mut nap = Duration::from_micros(100);
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if timed_out.load(Ordering::SeqCst) || start.elapsed() >= wall {
            timed_out.store(true, Ordering::SeqCst);
            kill_group(pid);
            let _ = child.kill();
            break child.wait()?;
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(20));
    };
    let _ = done.send(());
    let _ = watchdog.join();
    if let Some(f) = feeder {
        let _ = f.join();
    }
    let end = if capped {
        End::OutputCapped
    } else if timed_out.load(Ordering::SeqCst) {
        End::TimedOut
    } else {
        End::Exited(status)
    };
    Ok(Ran {
        end,
        stdout,
        stderr,
        pid,
    })
}

/// The cap on the output `capture` reads.
fn cap_of(capture: Capture) -> u64 {
    match capture {
        Capture::Apart { stdout, .. } => stdout,
        Capture::Together(cap) => cap,
        Capture::Nothing => u64::MAX,
    }
}

/// Read `r` into `out` up to `cap` bytes; true when it held more (reading stops there).
fn read_capped(r: impl Read, cap: u64, out: &mut Vec<u8>) -> bool {
    let _ = r.take(cap.saturating_add(1)).read_to_end(out);
    out.len() as u64 > cap
}

/// Kill the process group `pid` leads (a command and whatever it started, or left running
/// in the background after it exited).
pub fn kill_group(pid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]).stdin(Stdio::null());
        c
    }

    const APART: Capture = Capture::Apart {
        stdout: 1 << 20,
        stderr: 1 << 10,
    };

    #[test]
    fn a_command_that_ends_gives_its_output_and_status() {
        let r = run(
            sh("echo out; echo err >&2; exit 3"),
            Duration::from_secs(60),
            APART,
        )
        .unwrap();
        assert!(matches!(r.end, End::Exited(s) if s.code() == Some(3)));
        assert_eq!(r.stdout, b"out\n");
        assert_eq!(r.stderr, b"err\n");
        let r = run(
            sh("echo a; echo b >&2"),
            Duration::from_secs(60),
            Capture::Together(100),
        )
        .unwrap();
        assert!(matches!(r.end, End::Exited(s) if s.success()));
        assert_eq!(r.stdout, b"a\nb\n");
    }

    #[test]
    fn a_command_is_fed_its_input() {
        let r = run_fed(
            sh("tr a-z A-Z"),
            b"fed\n".to_vec(),
            Duration::from_secs(60),
            APART,
        )
        .unwrap();
        assert!(matches!(r.end, End::Exited(s) if s.success()));
        assert_eq!(r.stdout, b"FED\n");
        // a command that never reads a large input is still ended at its limit
        let r = run_fed(
            sh("sleep 600"),
            vec![b'x'; 1 << 22],
            Duration::from_millis(300),
            APART,
        )
        .unwrap();
        assert_eq!(r.end, End::TimedOut);
    }

    #[test]
    fn a_hang_is_killed_at_its_limit() {
        // the child sleeps on after its shell; the group is killed, so the output closes
        for capture in [APART, Capture::Together(100), Capture::Nothing] {
            let r = run(
                sh("sleep 600 & sleep 600"),
                Duration::from_millis(300),
                capture,
            )
            .unwrap();
            assert_eq!(r.end, End::TimedOut, "{capture:?}");
        }
        // a command that closes its output and hangs on
        let r = run(
            sh("exec >/dev/null 2>&1; sleep 600"),
            Duration::from_millis(300),
            APART,
        )
        .unwrap();
        assert_eq!(r.end, End::TimedOut);
    }

    #[test]
    fn a_flood_is_capped() {
        let cap = 10_000;
        for capture in [
            Capture::Apart {
                stdout: cap,
                stderr: 10,
            },
            Capture::Together(cap),
        ] {
            let r = run(sh("yes"), Duration::from_secs(600), capture).unwrap();
            assert_eq!(r.end, End::OutputCapped, "{capture:?}");
            assert_eq!(r.stdout.len() as u64, cap);
        }
        // a flood on stderr is read and dropped past what is kept: the command ends
        let r = run(
            sh("yes | head -c 1000000 >&2; echo done"),
            Duration::from_secs(600),
            Capture::Apart {
                stdout: cap,
                stderr: 10,
            },
        )
        .unwrap();
        assert!(matches!(r.end, End::Exited(s) if s.success()));
        assert_eq!(r.stdout, b"done\n");
        assert_eq!(r.stderr.len(), 10);
    }
}
