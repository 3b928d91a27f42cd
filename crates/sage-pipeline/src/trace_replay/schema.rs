//! The published format `sage.replay/1` (`docs/replay.md`) as types of its own.
//!
//! Every record `sage replay --format json` prints is defined here, with its field names and
//! serde attributes, and converted explicitly from the values the replay works with
//! ([`super::TraceReplay`] and its artefacts, [`crate::execute`]'s execution report). Those
//! values derive no serde: renaming or adding a field of theirs stops the build here, at the
//! conversion, instead of silently changing the published JSON. Nothing reads the format
//! back, so the conversions go one way.
//!
//! [`mirror!`] writes a record with the same field names as its internal value; its
//! conversion takes the internal value apart with an exhaustive pattern, so each internal
//! field is named once here. A field the format leaves out is listed after `not published`.

use crate::execute;
use serde::Serialize;
use std::collections::BTreeMap;

/// A conversion from a value of the replay to its published record (`Vec` and `Option`
/// element by element).
pub(crate) trait Conv<T> {
    fn conv(self) -> T;
}

macro_rules! as_is {
    ($($t:ty),*) => {$(
        impl Conv<$t> for $t {
            fn conv(self) -> $t {
                self
            }
        }
    )*};
}
as_is!(&'static str, String, usize, BTreeMap<String, usize>);

impl<A: Conv<B>, B> Conv<Vec<B>> for Vec<A> {
    fn conv(self) -> Vec<B> {
        self.into_iter().map(Conv::conv).collect()
    }
}

impl<A: Conv<B>, B> Conv<Option<B>> for Option<A> {
    fn conv(self) -> Option<B> {
        self.map(Conv::conv)
    }
}

/// A published record with the fields of an internal struct, and `From` the internal value.
macro_rules! mirror {
    ($(#[$m:meta])* pub struct $name:ident = $internal:ty {
        $( $(#[$fm:meta])* $f:ident : $t:ty ),* $(,)?
    } $(not published { $($skip:ident),* })?) => {
        #[derive(Debug, Clone, PartialEq, Serialize)]
        $(#[$m])*
        pub struct $name {
            $( $(#[$fm])* pub $f: $t ),*
        }
        impl From<$internal> for $name {
            fn from(v: $internal) -> $name {
                type Internal = $internal;
                let Internal { $( $f, )* $($( $skip: _, )*)? } = v;
                $name { $( $f: $f.conv() ),* }
            }
        }
        impl Conv<$name> for $internal {
            fn conv(self) -> $name {
                self.into()
            }
        }
    };
}

// `sage.case-check/1` (`crate::authoring::check::schema`) is written with the same macro.
pub(crate) use mirror;

mirror! {
    /// The replay of one trace.
    pub struct TraceReplay = super::TraceReplay {
        schema: &'static str,
        trace: String,
        framework: String,
        writes: usize,
        results: Vec<String>,
        artefacts: Vec<ArtefactReplay>,
        counts: Counts,
        execution: ExecutionReport,
    }
}

mirror! {
    /// Files per verdict (also in `sage case check`'s report).
    #[derive(Default, Eq)]
    pub struct Counts = super::Counts {
        files: usize,
        matches: usize,
        differs: usize,
        unverifiable: usize,
    }
}

mirror! {
    /// One artefact: its baseline, final state and verdict.
    pub struct ArtefactReplay = super::ArtefactReplay {
        path: String,
        baseline: String,
        writes: usize,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        failed_writes: Vec<String>,
        #[serde(rename = "final")]
        final_state: FinalView,
        verdict: Verdict,
        #[serde(skip_serializing_if = "Option::is_none")]
        hunk: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        checks: Vec<Check>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        executed: Vec<ExecutedWrite>,
    }
}

mirror! {
    /// The replay against one recorded result.
    pub struct Check = super::Check {
        against: String,
        verdict: Verdict,
        #[serde(skip_serializing_if = "Option::is_none")]
        hunk: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    }
}

mirror! {
    /// A run of consecutive known lines of a partial final state.
    pub struct KnownRun = super::KnownRun {
        first_line: usize,
        lines: Vec<String>,
    }
}

mirror! {
    /// Replay by execution: what was run, refused and written.
    pub struct ExecutionReport = execute::ExecutionReport {
        state: String,
        executed: BTreeMap<String, usize>,
        refused: BTreeMap<String, usize>,
        not_executed: BTreeMap<String, usize>,
        read_statically: usize,
        writes: BTreeMap<String, usize>,
        commands: Vec<CommandReport>,
    } not published { diverged_naming }
}

mirror! {
    /// One shell command of the trace.
    pub struct CommandReport = execute::CommandReport {
        turn: usize,
        raw: String,
        command: String,
        outcome: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        writes: Vec<String>,
    }
}

mirror! {
    /// One executed write of an artefact.
    pub struct ExecutedWrite = execute::ExecutedWrite {
        turn: usize,
        command: String,
        check: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    }
}

/// A file's verdict (also in `sage case check`'s report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Matches,
    Differs,
    Unverifiable,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        super::Verdict::from(self).as_str()
    }
}

impl From<Verdict> for super::Verdict {
    fn from(v: Verdict) -> super::Verdict {
        match v {
            Verdict::Matches => super::Verdict::Matches,
            Verdict::Differs => super::Verdict::Differs,
            Verdict::Unverifiable => super::Verdict::Unverifiable,
        }
    }
}

impl From<super::Verdict> for Verdict {
    fn from(v: super::Verdict) -> Verdict {
        match v {
            super::Verdict::Matches => Verdict::Matches,
            super::Verdict::Differs => Verdict::Differs,
            super::Verdict::Unverifiable => Verdict::Unverifiable,
        }
    }
}

impl Conv<Verdict> for super::Verdict {
    fn conv(self) -> Verdict {
        self.into()
    }
}

/// The replayed final state of an artefact, tagged by `state`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum FinalView {
    Full {
        content: String,
    },
    Partial {
        known_lines: usize,
        total_lines: usize,
        runs: Vec<KnownRun>,
    },
    Absent,
}

impl From<super::FinalView> for FinalView {
    fn from(v: super::FinalView) -> FinalView {
        match v {
            super::FinalView::Full { content } => FinalView::Full { content },
            super::FinalView::Partial {
                known_lines,
                total_lines,
                runs,
            } => FinalView::Partial {
                known_lines,
                total_lines,
                runs: runs.conv(),
            },
            super::FinalView::Absent => FinalView::Absent,
        }
    }
}

impl Conv<FinalView> for super::FinalView {
    fn conv(self) -> FinalView {
        self.into()
    }
}
