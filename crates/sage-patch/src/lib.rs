//! The one unified-diff model of sage.
//!
//! Patches reach sage from three places: writes in agent traces (Aider `udiff`, `git diff`
//! output pasted into a message, `str_replace_editor` diffs), the submissions traces carry
//! (`git_patch`, SWE-bench predictions, a case's `patch.diff`), and git itself (`sage szz`).
//! They are all read here, by one parser with one set of rules, so a fix to how a hunk or a
//! path is read reaches every stage at once:
//!
//! - [`parse`] reads a (multi-file) patch into [`FilePatch`]es with numbered [`Hunk`]s. It
//!   reads git's output exactly (extended headers, C-quoted names, the TAB after a name with
//!   a space) and LLM-written diffs tolerantly (hunks without line numbers, miscounted hunks,
//!   bare empty context lines, prose between hunks). It never fails: a malformed hunk header is
//!   recorded on its hunk and reported by whoever needs the hunk ([`apply`], blame).
//! - [`find_in_text`] locates the diffs inside a chat message (they end where the message's
//!   prose or a code fence resumes).
//! - [`apply`] applies a one-file patch to a file's content, as `patch` does without fuzz.
//! - [`make`] writes the unified diff of two states (for reports and views).
//!
//! This crate knows no trace format, judge or repository: it depends on no other sage crate.

#![warn(missing_docs)]

mod apply;
mod make;
mod model;
mod parse;
mod paths;

pub use apply::apply;
pub use make::{changed_lines, make};
pub use model::{ChangeKind, FilePatch, Hunk, HunkLine, PatchError};
pub use parse::{find_in_text, parse, Located};
pub use paths::{header_path, unquote};

#[cfg(test)]
mod tests;
