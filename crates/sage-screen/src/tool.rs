//! The outside tools screening asks (the interpreter, Bandit), each run through the one
//! bounded runner (`sage_sandbox::child`): a run that passes its time limit is killed, with
//! everything it started, and the error names the tool and what it was asked about.

use sage_sandbox::child;
use std::process::Command;
use std::time::Duration;

/// The default of [`crate::Options::tool_timeout`]: one run covers a whole batch.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// The limit of a probe (`bandit --version`, a namespace test): it does no work.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// The most a tool's answer may hold.
const MAX_OUTPUT: u64 = 256 << 20;

/// What a tool that ended by itself gave.
pub(crate) struct Answer {
    pub(crate) status: std::process::ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
}

/// Why a tool gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// It could not be started.
    #[error("cannot run {tool}: {cause}")]
    Start {
        /// The tool's command.
        tool: String,
        /// The operating system's message.
        cause: String,
    },
    /// It passed its time limit and was killed.
    #[error("{tool} gave no answer within {limit:?} {task} (killed; --tool-timeout)")]
    TimedOut {
        /// The tool's command.
        tool: String,
        /// The limit.
        limit: Duration,
        /// What it was asked, naming the files and cases.
        task: String,
    },
    /// It printed more than an answer may hold, and was killed.
    #[error("{tool} printed more than {bytes} bytes {task} (killed)")]
    TooLarge {
        /// The tool's command.
        tool: String,
        /// The cap.
        bytes: u64,
        /// What it was asked.
        task: String,
    },
}

/// Run `cmd` (the tool `tool`, asked `task`), fed `input` when given, for at most `wall`.
pub(crate) fn ask(
    cmd: Command,
    tool: &str,
    task: &str,
    input: Option<Vec<u8>>,
    wall: Duration,
) -> Result<Answer, ToolError> {
    let capture = child::Capture::Apart {
        stdout: MAX_OUTPUT,
        stderr: 64 << 10,
    };
    let ran = match input {
        Some(bytes) => child::run_fed(cmd, bytes, wall, capture),
        None => child::run(cmd, wall, capture),
    }
    .map_err(|e| ToolError::Start {
        tool: tool.to_string(),
        cause: e.to_string(),
    })?;
    match ran.end {
        child::End::Exited(status) => Ok(Answer {
            status,
            stdout: ran.stdout,
            stderr: ran.stderr,
        }),
        child::End::TimedOut => Err(ToolError::TimedOut {
            tool: tool.to_string(),
            limit: wall,
            task: task.to_string(),
        }),
        child::End::OutputCapped => Err(ToolError::TooLarge {
            tool: tool.to_string(),
            bytes: MAX_OUTPUT,
            task: task.to_string(),
        }),
    }
}

/// Some names, in words: `a, b, c and 4 more`.
pub(crate) fn some(names: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut s = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    s
}
