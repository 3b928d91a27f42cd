//! The sandbox: one command, run on a scratch copy of the workspace inside new user, mount,
//! network and PID namespaces (`unshare(1)` of util-linux, no root needed), with an empty
//! environment, a wall-clock limit, an output cap, a process-count limit and a file-size
//! limit. The threat model is `docs/security.md`, "The replay sandbox".

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The script run inside the namespaces (builds the root, then runs the command).
const SETUP: &str = include_str!("setup.sh");

/// The unprivileged user the sandbox runs as when sage runs as root (`nobody`): root's
/// processes escape `RLIMIT_NPROC`, and a mapped root must not be the host's root.
const NOBODY: u32 = 65534;

/// The limits of one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time before the command is killed.
    pub wall: Duration,
    /// Bytes of output (stdout and stderr together) read before the command is killed.
    pub output_bytes: usize,
    /// Processes the sandbox's user may run at once (`RLIMIT_NPROC`).
    pub processes: u32,
    /// Largest file the command may write (`RLIMIT_FSIZE`, bytes).
    pub file_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            wall: Duration::from_secs(20),
            output_bytes: 1 << 20,
            processes: 128,
            file_bytes: 64 << 20,
        }
    }
}

/// Where and how to make sandboxes.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// A folder for the scratch copies (each run makes and removes its own folder in it).
    pub scratch: PathBuf,
    /// The limits of every command.
    pub limits: Limits,
}

/// Why no sandbox can be made, or a run could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A program the sandbox needs is not installed.
    #[error("no sandbox: `{0}` is not installed (util-linux)")]
    Missing(&'static str),
    /// The namespaces could not be made (the kernel or its settings refuse them).
    #[error("no sandbox: {0}")]
    Refused(String),
    /// The scratch copy could not be written or read.
    #[error("sandbox scratch folder {path}: {source}")]
    Scratch {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A path of the workspace leaves it (`..`, absolute).
    #[error("refusing a workspace path that leaves the workspace: {0}")]
    BadPath(String),
}

/// A sandbox that this machine can make (found by [`Sandbox::probe`]).
#[derive(Debug, Clone)]
pub struct Sandbox {
    config: SandboxConfig,
    as_nobody: bool,
    shell: String,
}

/// One command to run.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    /// Where the workspace is mounted inside, absolute (the trace's own path: `/testbed`).
    pub root: &'a str,
    /// The working directory inside (absolute; the root when it does not exist).
    pub cwd: &'a str,
    /// The workspace's files: path relative to the root → content.
    pub files: &'a BTreeMap<String, Vec<u8>>,
    /// The command line, run by `bash -c` (else `sh -c`).
    pub command: &'a str,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal ended it (e.g. `SIGXFSZ` past the file-size limit).
    Signal,
    /// Killed at the wall-clock limit.
    TimedOut(Duration),
    /// Killed when its output passed the cap.
    OutputCapped(usize),
    /// The sandbox could not be set up for this command (the setup's own message).
    SetupFailed(String),
}

impl Exit {
    /// Why the command's effects cannot be kept, if they cannot.
    pub fn refusal(&self) -> Option<String> {
        match self {
            Exit::Code(_) | Exit::Signal => None,
            Exit::TimedOut(d) => Some(format!("killed at the time limit ({} s)", d.as_secs())),
            Exit::OutputCapped(n) => Some(format!("killed at the output limit ({n} bytes)")),
            Exit::SetupFailed(m) => Some(format!("the sandbox could not be set up: {m}")),
        }
    }
}

/// A file the command created, changed or deleted (path relative to the root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Created or changed: the new content.
    Written {
        /// Path relative to the workspace root.
        path: String,
        /// The new bytes.
        content: Vec<u8>,
    },
    /// Deleted.
    Deleted {
        /// Path relative to the workspace root.
        path: String,
    },
}

impl Change {
    /// The file's path relative to the workspace root.
    pub fn path(&self) -> &str {
        match self {
            Change::Written { path, .. } | Change::Deleted { path } => path,
        }
    }
}

/// What one command did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// How it ended.
    pub exit: Exit,
    /// Its stdout and stderr, interleaved as written (lossy UTF-8, at most the cap).
    pub output: String,
    /// Every file it created, changed or deleted in the workspace, by path.
    pub changes: Vec<Change>,
}

fn which(prog: &'static str) -> Result<PathBuf, SandboxError> {
    for dir in ["/usr/bin", "/bin", "/usr/sbin", "/sbin"] {
        let p = Path::new(dir).join(prog);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(SandboxError::Missing(prog))
}

fn scratch_err(path: &Path) -> impl FnOnce(std::io::Error) -> SandboxError + '_ {
    move |source| SandboxError::Scratch {
        path: path.to_path_buf(),
        source,
    }
}

/// A relative path that stays inside the workspace.
fn inside(rel: &str) -> Result<PathBuf, SandboxError> {
    let p = Path::new(rel);
    if rel.is_empty()
        || p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(SandboxError::BadPath(rel.to_string()));
    }
    Ok(p.to_path_buf())
}

fn chown_tree(p: &Path, uid: u32) -> std::io::Result<()> {
    std::os::unix::fs::lchown(p, Some(uid), Some(uid))?;
    if p.is_dir() && !p.is_symlink() {
        for e in std::fs::read_dir(p)? {
            chown_tree(&e?.path(), uid)?;
        }
    }
    Ok(())
}

/// Every regular file under `dir`, relative path → content (symlinks and special files are
/// not followed and not reported).
fn read_tree(dir: &Path) -> std::io::Result<BTreeMap<String, Vec<u8>>> {
    fn walk(base: &Path, d: &Path, out: &mut BTreeMap<String, Vec<u8>>) -> std::io::Result<()> {
        for e in std::fs::read_dir(d)? {
            let e = e?;
            let t = e.file_type()?;
            let p = e.path();
            if t.is_dir() {
                walk(base, &p, out)?;
            } else if t.is_file() {
                let rel = p.strip_prefix(base).unwrap_or(&p);
                out.insert(rel.to_string_lossy().into_owned(), std::fs::read(&p)?);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out)?;
    Ok(out)
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Sandbox {
    /// Whether a sandbox can be made here: the programs are installed and a trivial command
    /// runs through the whole path (namespaces, mounts, limits). The error says why not.
    pub fn probe(config: SandboxConfig) -> Result<Sandbox, SandboxError> {
        for p in ["unshare", "prlimit", "chroot", "mount", "env"] {
            which(p)?;
        }
        let as_nobody = std::fs::metadata("/proc/self")
            .map(|m| m.uid() == 0)
            .unwrap_or(false);
        if as_nobody {
            which("setpriv")?;
        }
        // by name, so `$0` is `bash` as in the agents' shells (`bash: -c: line 3: ...`)
        let shell = if Path::new("/bin/bash").is_file() {
            "bash"
        } else {
            "sh"
        };
        let sb = Sandbox {
            config,
            as_nobody,
            shell: shell.to_string(),
        };
        let files = BTreeMap::new();
        let out = sb.run(&Job {
            root: "/workspace",
            cwd: "/workspace",
            files: &files,
            command: "echo sage-sandbox-ok",
        })?;
        match out.exit {
            Exit::Code(0) if out.output.trim() == "sage-sandbox-ok" => Ok(sb),
            _ => Err(SandboxError::Refused(
                out.output
                    .lines()
                    .rfind(|l| !l.trim().is_empty())
                    .unwrap_or("the namespaces could not be made")
                    .trim()
                    .to_string(),
            )),
        }
    }

    /// The limits every command runs under.
    pub fn limits(&self) -> Limits {
        self.config.limits
    }

    /// Run one command on a scratch copy of `job.files` mounted at `job.root`.
    pub fn run(&self, job: &Job) -> Result<Outcome, SandboxError> {
        if !job.root.starts_with('/') || job.root.contains("/../") || job.root == "/" {
            return Err(SandboxError::BadPath(job.root.to_string()));
        }
        let lim = self.config.limits;
        std::fs::create_dir_all(&self.config.scratch).map_err(scratch_err(&self.config.scratch))?;
        let dir = tempdir_in(&self.config.scratch)?;
        let scratch = Scratch(dir);
        let ws = scratch.0.join("ws");
        let newroot = scratch.0.join("root");
        for d in [&ws, &newroot] {
            std::fs::create_dir(d).map_err(scratch_err(d))?;
        }
        for (rel, content) in job.files {
            let p = ws.join(inside(rel)?);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).map_err(scratch_err(parent))?;
            }
            std::fs::write(&p, content).map_err(scratch_err(&p))?;
        }
        let script = scratch.0.join("setup.sh");
        std::fs::write(&script, SETUP).map_err(scratch_err(&script))?;
        if self.as_nobody {
            chown_tree(&scratch.0, NOBODY).map_err(scratch_err(&scratch.0))?;
        }

        let mut argv: Vec<String> = Vec::new();
        if self.as_nobody {
            argv.extend(
                [
                    "setpriv",
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                ]
                .map(String::from),
            );
        }
        argv.push("prlimit".into());
        argv.push(format!("--nproc={}", lim.processes));
        argv.push(format!("--fsize={}", lim.file_bytes));
        argv.push("--core=0".into());
        argv.push("--".into());
        argv.extend(
            [
                "unshare",
                "--user",
                "--map-root-user",
                "--net",
                "--mount",
                "--pid",
                "--fork",
                "--kill-child",
                "--",
                "/bin/sh",
            ]
            .map(String::from),
        );
        argv.push(script.display().to_string());
        argv.push(newroot.display().to_string());
        argv.push(ws.display().to_string());
        argv.push(job.root.to_string());
        argv.push(job.cwd.to_string());
        argv.push(self.shell.clone());
        argv.push(job.command.to_string());

        let prog = which(if self.as_nobody { "setpriv" } else { "prlimit" })?;
        let mut cmd = crate::child::command(prog);
        cmd.args(&argv[1..])
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .current_dir("/")
            .stdin(Stdio::null());
        // Killing unshare kills the namespace's first process (--kill-child), and with it
        // every process of the PID namespace.
        let ran = crate::child::run(
            cmd,
            lim.wall,
            crate::child::Capture::Together(lim.output_bytes as u64),
        )
        .map_err(|e| SandboxError::Refused(format!("cannot start {}: {e}", argv[0])))?;
        let exit = match ran.end {
            crate::child::End::OutputCapped => Exit::OutputCapped(lim.output_bytes),
            crate::child::End::TimedOut => Exit::TimedOut(lim.wall),
            crate::child::End::Exited(st) => match st.code() {
                Some(125) => Exit::SetupFailed(String::new()),
                Some(c) => Exit::Code(c),
                None => Exit::Signal,
            },
        };
        let bytes = ran.stdout;
        let output = String::from_utf8_lossy(&bytes).into_owned();
        let exit = match exit {
            Exit::SetupFailed(_) => Exit::SetupFailed(
                output
                    .lines()
                    .find_map(|l| l.strip_prefix("sage-sandbox: setup failed: "))
                    .map(str::to_string)
                    .unwrap_or_else(|| {
                        output
                            .lines()
                            .rfind(|l| !l.trim().is_empty())
                            .unwrap_or("exit status 125")
                            .to_string()
                    }),
            ),
            e => e,
        };
        let after = read_tree(&ws).map_err(scratch_err(&ws))?;
        let mut changes = Vec::new();
        for (p, c) in &after {
            if job.files.get(p) != Some(c) {
                changes.push(Change::Written {
                    path: p.clone(),
                    content: c.clone(),
                });
            }
        }
        for p in job.files.keys() {
            let norm = inside(p)?.to_string_lossy().into_owned();
            if !after.contains_key(&norm) {
                changes.push(Change::Deleted { path: norm });
            }
        }
        changes.sort_by(|a, b| a.path().cmp(b.path()));
        Ok(Outcome {
            exit,
            output,
            changes,
        })
    }
}

fn tempdir_in(parent: &Path) -> Result<PathBuf, SandboxError> {
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    for _ in 0..100 {
        let n = N.fetch_add(1, Ordering::SeqCst);
        let p = parent.join(format!("sage-sandbox-{}-{nanos:x}-{n}", std::process::id()));
        match std::fs::create_dir(&p) {
            Ok(()) => {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700));
                return Ok(p);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(scratch_err(&p)(e)),
        }
    }
    Err(SandboxError::Scratch {
        path: parent.to_path_buf(),
        source: std::io::Error::other("no free name"),
    })
}
