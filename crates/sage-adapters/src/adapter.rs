//! What an adapter is.

use crate::mapping::Mapping;
use crate::seen::Seen;
use crate::{rules, shape, AdapterError, SourceFile};
use sage_trace::CanonicalTrace;

/// A trace format.
pub trait Adapter: Send + Sync {
    /// The name used by `--framework` and in case manifests (`aider`, `ag2`, ...).
    fn name(&self) -> &'static str;
    /// The framework versions and format eras this adapter covers, for `sage adapters` (for
    /// an adapter with a mapping file: its `covers`, the one source).
    fn versions(&self) -> &str;
    /// How sure the adapter is that the file whose structure is `shape` is its format
    /// (0 = not mine, 100 = certain), and the rule that says so: the best of its rules in
    /// `mappings/detect.toml` or the user's replacement, `rules` (or its mapping file's
    /// `[[detect]]` rules); `None` when no rule holds.
    fn detect(&self, shape: &shape::Shape, rules: &rules::DetectRules) -> Option<(u8, String)> {
        rules.best(self.name(), shape)
    }
    /// Normalize the trace whose files are `files` (the first is the main trace). An adapter
    /// implements this or [`Adapter::normalize_seen`]; each defaults to the other.
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        self.normalize_seen(files).map(|(t, _)| t)
    }
    /// The trace and what it shows of its files besides its writes ([`Seen`]: whole files
    /// and numbered views before the first write). By default nothing (`reports_views` false).
    fn normalize_seen(&self, files: &[SourceFile]) -> Result<(CanonicalTrace, Seen), AdapterError> {
        Ok((self.normalize(files)?, Seen::default()))
    }
    /// Whether one file of this format may hold several runs (`--run N`).
    fn holds_runs(&self) -> bool {
        false
    }
    /// Run `n` (1-based, `n` > 1) of a file that holds several ([`Adapter::holds_runs`]),
    /// and what it shows.
    fn normalize_run(
        &self,
        files: &[SourceFile],
        n: usize,
    ) -> Result<(CanonicalTrace, Seen), AdapterError> {
        let main = crate::support::main_file(files)?;
        Err(AdapterError::new(
            &main.name,
            None,
            format!("a {} file holds one run, no run {n}", self.name()),
        ))
    }
    /// The embedded mapping file this adapter reads its field paths from, if any
    /// (`adapters/NAME.toml`), for `sage adapters` and `--adapter FILE`.
    fn mapping(&self) -> Option<&Mapping> {
        None
    }
    /// This adapter with its field paths taken from `mapping` instead of the embedded file
    /// (`--adapter FILE`); `None` when the format is parsed by code only.
    fn with_mapping(&self, _mapping: Mapping) -> Option<Box<dyn Adapter>> {
        None
    }
}
