//! Adapters: each framework's native trace → [`CanonicalTrace`].
//!
//! Every adapter detects its format from content (never from the file name), maps records to
//! canonical turns keeping a [`crate::trace::RawRef`] per item, and accounts for every record
//! it could not map in [`CanonicalTrace::dropped`]. Mappings that are only field paths live as
//! data in `adapters/*.toml` (embedded, overridable with `--adapter FILE`); formats that need
//! real parsing are code.

use crate::trace::CanonicalTrace;
use std::path::{Path, PathBuf};

/// One raw input file of a trace.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The name recorded in [`CanonicalTrace::sources`] and in every raw pointer
    /// (relative to the case folder, or the path as the user gave it).
    pub name: String,
    /// Where to read it.
    pub path: PathBuf,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        SourceFile {
            name: name.into(),
            path: path.into(),
        }
    }

    /// Read the whole file as UTF-8, naming the file and the first bad byte on failure.
    pub fn read_text(&self) -> Result<String, AdapterError> {
        let bytes = std::fs::read(&self.path)
            .map_err(|e| AdapterError::new(&self.name, None, format!("cannot read: {e}")))?;
        String::from_utf8(bytes).map_err(|e| {
            AdapterError::new(
                &self.name,
                Some(format!("byte {}", e.utf8_error().valid_up_to())),
                "not UTF-8 text",
            )
        })
    }
}

/// An adapter could not read a trace: which file, which record, why.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
#[error("{file}{}: {message}", record.as_ref().map(|r| format!(" ({r})")).unwrap_or_default())]
pub struct AdapterError {
    pub file: String,
    /// The record: `line 12`, `/messages/3`, `byte 77`, ...
    pub record: Option<String>,
    pub message: String,
}

impl AdapterError {
    pub fn new(file: &str, record: Option<String>, message: impl Into<String>) -> Self {
        AdapterError {
            file: file.to_string(),
            record,
            message: message.into(),
        }
    }
}

/// A trace format.
pub trait Adapter: Send + Sync {
    /// The name used by `--framework` and in case manifests (`aider`, `ag2`, ...).
    fn name(&self) -> &'static str;
    /// The framework versions and format eras this adapter covers, for `sage adapters`.
    fn versions(&self) -> &'static str;
    /// How sure the adapter is that `head` (the first bytes of the main file) is its format:
    /// 0 = not mine, 100 = certain.
    fn detect(&self, head: &[u8]) -> u8;
    /// Normalize the trace whose files are `files` (the first is the main trace).
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError>;
}

/// Every built-in adapter.
pub fn registry() -> Vec<Box<dyn Adapter>> {
    vec![]
}

/// The adapter named `name`.
pub fn by_name(name: &str) -> Option<Box<dyn Adapter>> {
    registry().into_iter().find(|a| a.name() == name)
}

/// How many bytes of the main file detection looks at.
pub const DETECT_BYTES: usize = 64 * 1024;

/// Detect the format of `path` from its content.
pub fn detect(path: &Path) -> Result<Box<dyn Adapter>, AdapterError> {
    use std::io::Read;
    let name = path.display().to_string();
    let mut f = std::fs::File::open(path)
        .map_err(|e| AdapterError::new(&name, None, format!("cannot read: {e}")))?;
    let mut head = Vec::with_capacity(DETECT_BYTES);
    f.by_ref()
        .take(DETECT_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|e| AdapterError::new(&name, None, format!("cannot read: {e}")))?;
    registry()
        .into_iter()
        .map(|a| (a.detect(&head), a))
        .filter(|(c, _)| *c > 0)
        .max_by_key(|(c, _)| *c)
        .map(|(_, a)| a)
        .ok_or_else(|| {
            AdapterError::new(
                &name,
                None,
                "format not recognized; pass --framework NAME (see `sage adapters`)",
            )
        })
}

/// Normalize a trace, with the named adapter or the detected one.
pub fn normalize(
    files: &[SourceFile],
    framework: Option<&str>,
) -> Result<CanonicalTrace, AdapterError> {
    let main = files
        .first()
        .ok_or_else(|| AdapterError::new("-", None, "no trace file given"))?;
    let adapter = match framework {
        Some(n) => by_name(n).ok_or_else(|| {
            AdapterError::new(
                &main.name,
                None,
                format!("unknown framework {n:?}; see `sage adapters`"),
            )
        })?,
        None => detect(&main.path).map_err(|mut e| {
            e.file = main.name.clone();
            e
        })?,
    };
    adapter.normalize(files)
}
