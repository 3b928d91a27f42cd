//! One raw input file of a trace, and the error of reading one.

use std::path::PathBuf;

/// One raw input file of a trace.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The name recorded in [`CanonicalTrace::sources`] and in every raw pointer
    /// (relative to the case folder, or the path as the user gave it).
    pub name: String,
    /// Where to read it.
    pub path: PathBuf,
    /// The most bytes an adapter reads of it (and of any member, when it is an archive): the
    /// input size limit, which [`crate::normalize`] sets from its options' rules.
    pub limit: u64,
}

impl SourceFile {
    /// The file `name` at `path`, read up to the default input size limit.
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        SourceFile {
            name: name.into(),
            path: path.into(),
            limit: sage_trace::safe::DEFAULT_MAX_INPUT_BYTES,
        }
    }

    /// Read the whole file as UTF-8, naming the file and the first bad byte on failure.
    /// Only a regular file within [`SourceFile::limit`] is read (not `/dev/zero`, not a FIFO).
    pub fn read_text(&self) -> Result<String, AdapterError> {
        let bytes = sage_trace::safe::read_limited(&self.path, self.limit)
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
