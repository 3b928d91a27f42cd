//! Results written while a localize run goes: each case's results leave memory as the case
//! finishes, so a run over ten thousand cases (or one very long trace) holds one batch of
//! results at a time, never the whole result set.
//!
//! [`ResultsDoc`] writes a `sage.results/1` document (`results.json`, `--output`, `--format
//! json`) byte for byte as [`pretty`] prints the whole [`ResultSet`]: the
//! fields that follow `results` (skipped cases, problems, summaries) are only known at the
//! end, and they come last in the document. [`ResultsDir`] writes the results folder.
//!
//! Each result is serialized once, through a [`ScrubWriter`], to every output at once, each
//! at its own nesting depth ([`write_entries`]): no result is ever held as text, which for a
//! long trace runs to tens of megabytes.

use crate::localize::PreparedCase;
use crate::results::{CaseResult, Problem, ResultSet, Skipped, Summary, RESULTS_VERSION};
use sage_judge::JudgeId;
use sage_llm::secrets::ScrubWriter;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A value as pretty JSON, scrubbed of secrets, at nesting depth 0 (no trailing newline).
fn piece<T: serde::Serialize + ?Sized>(v: &T) -> String {
    let s = serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    match sage_llm::secrets::scrub(&s) {
        std::borrow::Cow::Owned(o) => o,
        std::borrow::Cow::Borrowed(_) => s,
    }
}

/// Write depth-0 pretty JSON at nesting `depth`: every line after the first indented by two
/// spaces per level, as the pretty printer indents a nested value. (A JSON string holds no
/// raw newline, so every newline is the printer's own.)
fn write_nested(w: &mut dyn Write, bytes: &[u8], depth: usize) -> io::Result<()> {
    const SPACES: &[u8] = &[b' '; 64];
    let indent = &SPACES[..(2 * depth).min(SPACES.len())];
    let mut rest = bytes;
    while let Some(i) = memchr::memchr(b'\n', rest) {
        w.write_all(&rest[..=i])?;
        w.write_all(indent)?;
        rest = &rest[i + 1..];
    }
    w.write_all(rest)
}

/// One top-level field of the document: `  "key": value`.
fn field(w: &mut dyn Write, key: &str, v: &impl serde::Serialize) -> io::Result<()> {
    write!(w, "  {}: ", serde_json::to_string(key).unwrap_or_default())?;
    write_nested(w, piece(v).as_bytes(), 1)
}

/// An output that results are appended to one at a time: a results document, a case file.
pub trait Entries {
    /// Start one entry (write the separator before it); the writer and the nesting depth the
    /// entry is written at.
    fn entry(&mut self) -> io::Result<(&mut dyn Write, usize)>;
}

/// Bytes written to several outputs, each at its own nesting depth.
struct Tee<'a>(Vec<(&'a mut dyn Write, usize)>);

impl Write for Tee<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for (w, depth) in self.0.iter_mut() {
            write_nested(*w, buf, *depth)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Append each result to every output: serialized once, scrubbed of secrets on the way.
pub fn write_entries<'r>(
    results: impl IntoIterator<Item = &'r CaseResult>,
    outputs: &mut [&mut dyn Entries],
) -> io::Result<()> {
    for r in results {
        let mut to = Vec::with_capacity(outputs.len());
        for o in outputs.iter_mut() {
            to.push(o.entry()?);
        }
        let mut w = io::BufWriter::with_capacity(1 << 16, ScrubWriter::new(Tee(to)));
        serde_json::to_writer_pretty(&mut w, r).map_err(io::Error::from)?;
        w.into_inner().map_err(|e| e.into_error())?.finish()?;
    }
    Ok(())
}

/// A `sage.results/1` document written result by result.
pub struct ResultsDoc<W: Write> {
    w: W,
    results: usize,
}

impl<W: Write> Entries for ResultsDoc<W> {
    fn entry(&mut self) -> io::Result<(&mut dyn Write, usize)> {
        self.w.write_all(if self.results == 0 {
            b"\n    "
        } else {
            b",\n    "
        })?;
        self.results += 1;
        Ok((&mut self.w, 2))
    }
}

impl<W: Write> ResultsDoc<W> {
    /// Write the fields before `results` and open it.
    pub fn begin(w: W, judges: &[JudgeId], runs: u32) -> io::Result<Self> {
        Self::begin_at(w, judges, runs, None)
    }

    /// [`ResultsDoc::begin`] of a document that records where its case folders are
    /// ([`ResultSet::case_root`]).
    pub fn begin_at(
        mut w: W,
        judges: &[JudgeId],
        runs: u32,
        case_root: Option<&str>,
    ) -> io::Result<Self> {
        w.write_all(b"{\n")?;
        field(&mut w, "version", &RESULTS_VERSION)?;
        w.write_all(b",\n")?;
        field(&mut w, "sage_version", &env!("CARGO_PKG_VERSION"))?;
        w.write_all(b",\n")?;
        let judges: Vec<crate::results::schema::JudgeId> =
            judges.iter().cloned().map(Into::into).collect();
        field(&mut w, "judges", &judges)?;
        w.write_all(b",\n")?;
        field(&mut w, "runs", &runs)?;
        if let Some(root) = case_root {
            w.write_all(b",\n")?;
            field(&mut w, "case_root", &root)?;
        }
        w.write_all(b",\n  \"results\": [")?;
        Ok(ResultsDoc { w, results: 0 })
    }

    /// Close `results`, write the fields after it and return the writer, flushed.
    pub fn finish(
        mut self,
        skipped: &[Skipped],
        problems: &[Problem],
        summaries: &[Summary],
    ) -> io::Result<W> {
        self.w.write_all(if self.results == 0 {
            b"],\n"
        } else {
            b"\n  ],\n"
        })?;
        field(&mut self.w, "skipped", &skipped)?;
        self.w.write_all(b",\n")?;
        field(&mut self.w, "problems", &problems)?;
        self.w.write_all(b",\n")?;
        field(&mut self.w, "summaries", &summaries)?;
        self.w.write_all(b"\n}\n")?;
        self.w.flush()?;
        Ok(self.w)
    }
}

/// A file written whole or not at all: a temporary file beside it, renamed over it when
/// [`AtomicFile::commit`]ted, removed if dropped before.
pub struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    w: Option<io::BufWriter<std::fs::File>>,
}

impl AtomicFile {
    pub fn create(path: &Path) -> io::Result<Self> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        remove_stale_temporaries(dir, &name);
        let tmp = dir.join(format!(".tmp-{}-{name}", std::process::id()));
        let f = std::fs::File::create(&tmp)?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            tmp,
            w: Some(io::BufWriter::with_capacity(1 << 16, f)),
        })
    }

    /// Flush and rename into place. Not synced to disk: the rename alone keeps a reader
    /// (and a killed run) from ever seeing part of a file, and what a power loss could take
    /// is rebuilt by a rerun from the trace and the judges' ledger, which is synced (an
    /// `fsync` per output cost ~5 ms each on a VM disk: most of a small run's time).
    pub fn commit(mut self) -> io::Result<()> {
        let w = self.w.take().expect("committed once");
        w.into_inner().map_err(|e| e.into_error())?;
        replace(&self.tmp, &self.path)
    }
}

/// Move the file `tmp` to `path`, replacing the file there at once. On Linux, over an existing
/// file, the two are exchanged (`renameat2` with `RENAME_EXCHANGE`) and the old one, now at
/// `tmp`, removed: a rename over a file makes ext4 start writing the new one out at once
/// (`auto_da_alloc`, ~0.1 ms per file on this VM's disk, four files in a one-case run), which
/// an exchange does not. A reader sees the old file or the new one, as with a rename.
fn replace(tmp: &Path, path: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        // a regular file only: a directory or a link at `path` is left to rename's rules
        let over_file = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file());
        if over_file && renameat_with(CWD, tmp, CWD, path, RenameFlags::EXCHANGE).is_ok() {
            // (a leftover is another run's stale temporary, removed by the next run)
            let _ = std::fs::remove_file(tmp);
            return Ok(());
        }
    }
    std::fs::rename(tmp, path)
}

/// When this process first wrote an atomic file: a temporary modified since may be another
/// run's, in progress.
static RUN_START: std::sync::OnceLock<std::time::SystemTime> = std::sync::OnceLock::new();

/// Remove the temporaries of `name` that killed runs left beside it: exactly the names
/// [`AtomicFile::create`] makes (`.tmp-PID-NAME`), of another process, not modified since
/// this run started, and (where `/proc` tells) of a process that no longer runs. Best
/// effort: a file that cannot be removed is left.
fn remove_stale_temporaries(dir: &Path, name: &str) {
    let start = *RUN_START.get_or_init(std::time::SystemTime::now);
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(pid) = file
            .to_str()
            .and_then(|f| f.strip_prefix(".tmp-"))
            .and_then(|f| f.strip_suffix(name))
            .and_then(|f| f.strip_suffix('-'))
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(meta) = e.metadata() else { continue };
        let old = meta.modified().is_ok_and(|m| m < start);
        let running = Path::new("/proc").is_dir() && Path::new(&format!("/proc/{pid}")).exists();
        if meta.is_file() && old && !running {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.w.as_mut() {
            Some(w) => w.write(buf),
            None => Err(io::Error::other("file already committed")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.w.as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.w.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// One case's results file, `cases/<case-id>.json`: a JSON array of its results.
struct CaseFile {
    file: AtomicFile,
    n: usize,
}

impl Entries for CaseFile {
    fn entry(&mut self) -> io::Result<(&mut dyn Write, usize)> {
        self.file
            .write_all(if self.n == 0 { b"[\n  " } else { b",\n  " })?;
        self.n += 1;
        Ok((&mut self.file, 1))
    }
}

impl CaseFile {
    fn commit(mut self) -> io::Result<()> {
        self.file
            .write_all(if self.n == 0 { b"[]\n" } else { b"\n]\n" })?;
        self.file.commit()
    }
}

/// A results folder written as the run goes: `cases/<case-id>.json` as each case finishes,
/// then `summary.json`, then `results.json` (streamed to a temporary file, renamed last: a
/// reader that finds `results.json` finds the per-case files of the same run). Case files of
/// an earlier run that this run did not write are removed at the end, so the folder holds
/// this run only. Dropped before [`ResultsDir::finish`] (the run stopped), it leaves the case
/// files written so far and the previous `results.json`, never a partial one.
pub struct ResultsDir {
    dir: PathBuf,
    cases: PathBuf,
    written: BTreeSet<String>,
    doc: ResultsDoc<AtomicFile>,
    /// The case file being written (as a [`ResultSink`]).
    current: Option<CaseFile>,
    /// `DIR/.sage.lock`, locked for as long as the folder is written (released by the
    /// system when the process ends, however it ends).
    _lock: std::fs::File,
}

/// The lock file of a results folder.
pub const LOCK_FILE: &str = ".sage.lock";

impl ResultsDir {
    /// Start writing the results folder `dir`. Two runs never write one folder: the second
    /// is refused with an error naming the folder (`WouldBlock`), instead of the two racing
    /// on its files. Temporary files that a killed run left (`.tmp-*`) are removed first:
    /// with the lock held, no other run can be writing them.
    pub fn create(dir: &Path, judges: &[JudgeId], runs: u32) -> io::Result<Self> {
        Self::create_at(dir, judges, runs, None)
    }

    /// [`ResultsDir::create`] whose `results.json` records where its case folders are
    /// ([`ResultSet::case_root`]).
    pub fn create_at(
        dir: &Path,
        judges: &[JudgeId],
        runs: u32,
        case_root: Option<&str>,
    ) -> io::Result<Self> {
        let cases = dir.join("cases");
        std::fs::create_dir_all(&cases)?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "another sage run is writing {} (it holds {LOCK_FILE}); wait for it to \
                         finish or choose another output folder",
                        dir.display()
                    ),
                ))
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
        for d in [dir, cases.as_path()] {
            for e in std::fs::read_dir(d)?.flatten() {
                let stale = e.file_name().to_string_lossy().starts_with(".tmp-");
                if stale && e.file_type().is_ok_and(|t| t.is_file()) {
                    std::fs::remove_file(e.path())?;
                }
            }
        }
        let file = AtomicFile::create(&dir.join("results.json"))?;
        Ok(ResultsDir {
            dir: dir.to_path_buf(),
            cases,
            written: BTreeSet::new(),
            doc: ResultsDoc::begin_at(file, judges, runs, case_root)?,
            current: None,
            _lock: lock,
        })
    }

    /// One case's results (every judge run): its case file and its entries in
    /// `results.json`, and in every one of `others` (serialized once for all).
    pub fn case(
        &mut self,
        id: &str,
        results: &[CaseResult],
        others: &mut [&mut dyn Entries],
    ) -> io::Result<()> {
        let mut file = self.open_case(id)?;
        let mut outs: Vec<&mut dyn Entries> = vec![&mut file, &mut self.doc];
        outs.extend(others.iter_mut().map(|o| &mut **o as &mut dyn Entries));
        write_entries(results, &mut outs)?;
        file.commit()
    }

    fn open_case(&mut self, id: &str) -> io::Result<CaseFile> {
        let name = format!("{}.json", sage_trace::safe::file_stem(id));
        let file = AtomicFile::create(&self.cases.join(&name))?;
        self.written.insert(name);
        Ok(CaseFile { file, n: 0 })
    }

    /// Finish the folder: stale case files removed, `summary.json`, then `results.json`.
    pub fn finish(
        self,
        skipped: &[Skipped],
        problems: &[Problem],
        summaries: &[Summary],
    ) -> io::Result<()> {
        for e in std::fs::read_dir(&self.cases)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            // Only sage's own files: a case's results or an interrupted write of one.
            let ours = name.ends_with(".json") || name.starts_with(".tmp-");
            if ours && !self.written.contains(&name) && e.file_type()?.is_file() {
                std::fs::remove_file(e.path())?;
            }
        }
        write_atomic(&self.dir.join("summary.json"), pretty(summaries).as_bytes())?;
        self.doc.finish(skipped, problems, summaries)?.commit()
    }
}

/// Where a localize run's results go as each case finishes: the results folder
/// ([`ResultsDir`]), a results document in a file ([`ResultsFile`]) or on a stream whose
/// reader may go away ([`ResultsStream`]), the SARIF view ([`SarifFile`]), the HTML view
/// ([`crate::view::ViewSite`]). The caller
/// chooses the sinks and hands each case's results to all of them at once through
/// [`ResultSinks`].
pub trait ResultSink {
    /// The output's name in an error ("writing NAME, NAME"), for a sink that writes results
    /// documents; `None` for one that takes the results another way.
    fn name(&self) -> Option<String>;
    /// Open the case's outputs and give the results documents its results are appended to
    /// (each result is serialized once for every sink's documents).
    fn documents(&mut self, case_id: &str) -> io::Result<Vec<&mut dyn Entries>>;
    /// The case's results were appended to the documents: close the case's own files, or
    /// take the results another way (an error names the output that failed). `prepared` is
    /// the case the results were computed from, when the run still holds it (a sink that
    /// needs the trace or the history reads the case again without it).
    fn case_done(
        &mut self,
        results: &[CaseResult],
        prepared: Option<&PreparedCase>,
    ) -> Result<(), SinkError>;
    /// The run ended: write what comes last and put the output in place.
    fn finish(self: Box<Self>, end: &RunEnd<'_>) -> Result<(), SinkError>;
    /// The output's reader went away (a closed pipe): what is written to it is dropped.
    fn gone(&self) -> bool {
        false
    }
    /// What the sink wrote less of than asked without failing (the view's pages without
    /// trace text), known once the last case is done.
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
}

/// What a results document holds after its results, known only when the run ends.
pub struct RunEnd<'a> {
    pub skipped: &'a [Skipped],
    pub problems: &'a [Problem],
    pub summaries: &'a [Summary],
}

/// An output that could not be written; `context` names it (`writing NAME`), absent for a
/// closed pipe, which ends a run quietly.
#[derive(Debug, thiserror::Error)]
#[error("{}", context.as_deref().unwrap_or("writing the results"))]
pub struct SinkError {
    pub context: Option<String>,
    #[source]
    pub io: io::Error,
}

impl SinkError {
    pub(crate) fn writing(what: impl std::fmt::Display) -> impl FnOnce(io::Error) -> SinkError {
        move |io| SinkError {
            context: Some(format!("writing {what}")),
            io,
        }
    }

    fn bare(io: io::Error) -> SinkError {
        SinkError { context: None, io }
    }

    fn closed() -> SinkError {
        SinkError::bare(io::ErrorKind::BrokenPipe.into())
    }
}

/// Every sink of a run, fed together: each case's results are serialized once for all their
/// documents, then handed to the sinks that take them otherwise.
#[derive(Default)]
pub struct ResultSinks {
    sinks: Vec<Box<dyn ResultSink>>,
}

impl ResultSinks {
    pub fn push(&mut self, sink: impl ResultSink + 'static) {
        self.sinks.push(Box::new(sink));
    }

    pub fn is_empty(&self) -> bool {
        self.sinks.is_empty()
    }

    /// One case's results (every judge run), to every sink, with the case they were
    /// computed from when the run holds it.
    pub fn case(
        &mut self,
        results: &[CaseResult],
        prepared: Option<&PreparedCase>,
    ) -> Result<(), SinkError> {
        let Some(first) = results.first() else {
            return Ok(());
        };
        // A failure names every document output: they share one serialization.
        let names: Vec<String> = self.sinks.iter().filter_map(|s| s.name()).collect();
        let failed = |e: io::Error| {
            if e.kind() == io::ErrorKind::BrokenPipe {
                SinkError::bare(e)
            } else {
                SinkError::writing(names.join(", "))(e)
            }
        };
        let mut docs: Vec<&mut dyn Entries> = Vec::new();
        for s in self.sinks.iter_mut() {
            docs.extend(s.documents(&first.case_id).map_err(&failed)?);
        }
        if !docs.is_empty() {
            write_entries(results, &mut docs).map_err(&failed)?;
        }
        for s in self.sinks.iter_mut() {
            s.case_done(results, prepared)?;
        }
        // With nothing but outputs whose reader went away, the run has no reader left.
        if !self.sinks.is_empty() && self.sinks.iter().all(|s| s.gone()) {
            return Err(SinkError::closed());
        }
        Ok(())
    }

    /// Every sink's warnings so far, in the order the sinks were added.
    pub fn warnings(&self) -> Vec<String> {
        self.sinks.iter().flat_map(|s| s.warnings()).collect()
    }

    /// Finish every sink, in the order they were added, whichever fails: an output that
    /// cannot be written or whose reader went away loses no other (the SARIF file after a
    /// closed stdout is written). The first error is returned; an output whose reader went
    /// away, when nothing else failed, ends the run quietly.
    pub fn finish(self, end: &RunEnd<'_>) -> Result<(), SinkError> {
        let mut first = None;
        let mut gone = false;
        for s in self.sinks {
            gone |= s.gone();
            if let Err(e) = s.finish(end) {
                first.get_or_insert(e);
            }
        }
        match first {
            Some(e) => Err(e),
            None if gone => Err(SinkError::closed()),
            None => Ok(()),
        }
    }
}

impl ResultSink for ResultsDir {
    fn name(&self) -> Option<String> {
        Some(self.dir.display().to_string())
    }

    fn documents(&mut self, case_id: &str) -> io::Result<Vec<&mut dyn Entries>> {
        let file = self.open_case(case_id)?;
        let file = self.current.insert(file);
        Ok(vec![file, &mut self.doc])
    }

    fn case_done(&mut self, _: &[CaseResult], _: Option<&PreparedCase>) -> Result<(), SinkError> {
        match self.current.take() {
            Some(file) => file.commit().map_err(SinkError::writing(format!(
                "results to {}",
                self.dir.display()
            ))),
            None => Ok(()),
        }
    }

    fn finish(self: Box<Self>, end: &RunEnd<'_>) -> Result<(), SinkError> {
        let context = SinkError::writing(format!("results to {}", self.dir.display()));
        ResultsDir::finish(*self, end.skipped, end.problems, end.summaries).map_err(context)
    }
}

/// A results document written to a file (`--output`), renamed into place when the run ends.
pub struct ResultsFile {
    path: PathBuf,
    doc: ResultsDoc<AtomicFile>,
}

impl ResultsFile {
    pub fn create(
        path: &Path,
        judges: &[JudgeId],
        runs: u32,
        case_root: Option<&str>,
    ) -> io::Result<Self> {
        let doc = ResultsDoc::begin_at(AtomicFile::create(path)?, judges, runs, case_root)?;
        Ok(ResultsFile {
            path: path.to_path_buf(),
            doc,
        })
    }
}

impl ResultSink for ResultsFile {
    fn name(&self) -> Option<String> {
        Some(self.path.display().to_string())
    }

    fn documents(&mut self, _: &str) -> io::Result<Vec<&mut dyn Entries>> {
        Ok(vec![&mut self.doc])
    }

    fn case_done(&mut self, _: &[CaseResult], _: Option<&PreparedCase>) -> Result<(), SinkError> {
        Ok(())
    }

    fn finish(self: Box<Self>, end: &RunEnd<'_>) -> Result<(), SinkError> {
        let context = SinkError::writing(self.path.display());
        self.doc
            .finish(end.skipped, end.problems, end.summaries)
            .and_then(AtomicFile::commit)
            .map_err(context)
    }
}

/// A results document written to a stream whose reader may go away (standard output
/// piped to `head`): then the rest is dropped instead of failing the write, so one result
/// is never left half written to the other outputs that share its serialization.
pub struct ResultsStream<W: Write> {
    name: String,
    doc: ResultsDoc<PipeGuard<W>>,
    closed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl<W: Write> ResultsStream<W> {
    /// Begin the document on `w`, named `name` in errors.
    pub fn begin(
        name: &str,
        w: W,
        judges: &[JudgeId],
        runs: u32,
        case_root: Option<&str>,
    ) -> io::Result<Self> {
        let closed = std::sync::Arc::<std::sync::atomic::AtomicBool>::default();
        let guard = PipeGuard {
            inner: w,
            closed: closed.clone(),
        };
        Ok(ResultsStream {
            name: name.to_string(),
            doc: ResultsDoc::begin_at(guard, judges, runs, case_root)?,
            closed,
        })
    }
}

impl<W: Write> ResultSink for ResultsStream<W> {
    fn name(&self) -> Option<String> {
        Some(self.name.clone())
    }

    fn documents(&mut self, _: &str) -> io::Result<Vec<&mut dyn Entries>> {
        Ok(vec![&mut self.doc])
    }

    fn case_done(&mut self, _: &[CaseResult], _: Option<&PreparedCase>) -> Result<(), SinkError> {
        Ok(())
    }

    fn finish(self: Box<Self>, end: &RunEnd<'_>) -> Result<(), SinkError> {
        self.doc
            .finish(end.skipped, end.problems, end.summaries)
            .map(drop)
            .map_err(SinkError::bare)
    }

    fn gone(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A writer whose reader may go away: a broken pipe sets `closed` and drops what follows.
struct PipeGuard<W> {
    inner: W,
    closed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl<W: Write> PipeGuard<W> {
    fn closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl<W: Write> Write for PipeGuard<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.closed() {
            return Ok(buf.len());
        }
        match self.inner.write(buf) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.close();
                Ok(buf.len())
            }
            r => r,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.closed() {
            return Ok(());
        }
        match self.inner.flush() {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.close();
                Ok(())
            }
            r => r,
        }
    }
}

/// The SARIF view of the run (`--sarif`), written when the run ends.
pub struct SarifFile {
    path: PathBuf,
    log: crate::sarif_view::SarifLog,
}

impl SarifFile {
    /// The SARIF view written to `path`, its trace regions read by `rules`.
    pub fn new(path: &Path, rules: &crate::Rules) -> SarifFile {
        SarifFile {
            path: path.to_path_buf(),
            log: crate::sarif_view::SarifLog::new(rules),
        }
    }
}

impl ResultSink for SarifFile {
    fn name(&self) -> Option<String> {
        None
    }

    fn documents(&mut self, _: &str) -> io::Result<Vec<&mut dyn Entries>> {
        Ok(Vec::new())
    }

    fn case_done(
        &mut self,
        results: &[CaseResult],
        _: Option<&PreparedCase>,
    ) -> Result<(), SinkError> {
        for r in results {
            self.log.add(r);
        }
        Ok(())
    }

    fn finish(self: Box<Self>, _: &RunEnd<'_>) -> Result<(), SinkError> {
        std::fs::write(&self.path, pretty(&self.log.finish()))
            .map_err(SinkError::writing(self.path.display()))
    }
}

/// Write a result set as a results folder: `results.json` (everything), `summary.json`
/// (the Table-5 summaries) and `cases/<case-id>.json` (each case's results, all judge runs).
///
/// File names come from [`sage_trace::safe::file_stem`] (injective, length-capped); ids that
/// would still share a file (one id for two case folders, or names equal but for case) are an
/// error before anything is written, never a silent overwrite. Every file is scrubbed of
/// secrets.
///
/// Case files are written in case-id order, `results.json` in the set's order (see
/// [`ResultsDir`]).
pub fn write_results_dir(dir: &Path, set: &ResultSet) -> io::Result<()> {
    let by_case =
        results_by_case(set).map_err(|m| io::Error::new(io::ErrorKind::InvalidData, m))?;
    let mut out = ResultsDir::create_at(dir, &set.judges, set.runs, set.case_root.as_deref())?;
    for (id, rs) in by_case {
        let mut file = out.open_case(id)?;
        write_entries(rs, &mut [&mut file])?;
        file.commit()?;
    }
    write_entries(&set.results, &mut [&mut out.doc])?;
    out.finish(&set.skipped, &set.problems, &set.summaries)
}

/// A whole result set as one document written to `w`.
pub fn write_doc<W: Write>(w: W, set: &ResultSet) -> io::Result<W> {
    let mut doc = ResultsDoc::begin_at(w, &set.judges, set.runs, set.case_root.as_deref())?;
    write_entries(&set.results, &mut [&mut doc])?;
    doc.finish(&set.skipped, &set.problems, &set.summaries)
}

/// The results grouped by case id, checked so that one id is one case folder and no two ids
/// share a file name ([`sage_trace::safe::stem_collisions`]).
pub fn results_by_case(
    set: &ResultSet,
) -> Result<BTreeMap<&str, Vec<&CaseResult>>, crate::InputError> {
    group_by_case(set).map_err(crate::InputError)
}

fn group_by_case(set: &ResultSet) -> Result<BTreeMap<&str, Vec<&CaseResult>>, String> {
    let mut by_case: BTreeMap<&str, Vec<&CaseResult>> = BTreeMap::new();
    for r in &set.results {
        let rs = by_case.entry(r.case_id.as_str()).or_default();
        if let Some(first) = rs.first() {
            if first.case_dir != r.case_dir {
                return Err(format!(
                    "case id {:?} names two case folders ({} and {}); give each case its own id",
                    r.case_id, first.case_dir, r.case_dir
                ));
            }
        }
        rs.push(r);
    }
    if let Some(g) = sage_trace::safe::stem_collisions(by_case.keys().copied()).first() {
        return Err(format!(
            "case ids {} differ only in letter case and would share a file; rename one",
            g.iter()
                .map(|i| format!("{i:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(by_case)
}

/// Write `path` so a reader sees the old file or the whole new one, never a part: a
/// temporary file in the same folder, flushed, then renamed over it.
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)?;
    f.commit()
}

/// Pretty JSON with a trailing newline, scrubbed of secrets.
pub fn pretty<T: serde::Serialize + ?Sized>(v: &T) -> String {
    let s = serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    // Scrubbed in place when a secret occurs, else the text as it is: a result set runs to
    // tens of megabytes, and copying it once more was a visible part of `localize`.
    let scrubbed = match sage_llm::secrets::scrub(&s) {
        std::borrow::Cow::Owned(o) => Some(o),
        std::borrow::Cow::Borrowed(_) => None,
    };
    let mut out = scrubbed.unwrap_or(s);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two bundled cases localized with the lexicon judge, plus a skipped entry and a
    /// problem, so every field of the document is non-empty.
    fn set() -> ResultSet {
        let tmp = tempfile::tempdir().unwrap();
        let corpora = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpora");
        for c in ["ag2-fig1a-aes-ecb", "ag2-defect-systemrandom"] {
            let to = tmp.path().join(c);
            std::fs::create_dir_all(to.join("baseline")).unwrap();
            for e in walk(&corpora.join(c)) {
                let rel = e.strip_prefix(corpora.join(c)).unwrap();
                std::fs::create_dir_all(to.join(rel).parent().unwrap()).unwrap();
                std::fs::copy(&e, to.join(rel)).unwrap();
            }
        }
        let opts = crate::localize::Options::default();
        let mut set = futures::executor::block_on(crate::localize::localize_dir(tmp.path(), &opts));
        assert_eq!(set.results.len(), 2, "{:?}", set.skipped);
        set.skipped.push(Skipped {
            case: "x".into(),
            stage: "case".into(),
            message: "m".into(),
        });
        set.problems.push(Problem {
            case: "y".into(),
            message: "p\nq".into(),
        });
        set
    }

    fn walk(d: &Path) -> Vec<PathBuf> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                v.extend(walk(&p));
            } else {
                v.push(p);
            }
        }
        v
    }

    /// A committed file replaces the file at its path (by exchange on Linux) and leaves no
    /// temporary; a directory or a link at the path is treated as a rename treats it.
    #[test]
    fn a_commit_replaces_a_file_and_leaves_nothing_beside_it() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.json");
        write_atomic(&p, b"first").unwrap();
        write_atomic(&p, b"second").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second");
        let names: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["out.json"]);
        // a directory in the way: the commit fails, the directory stays
        let dir = d.path().join("taken");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("inside"), b"x").unwrap();
        assert!(write_atomic(&dir, b"data").is_err());
        assert_eq!(std::fs::read(dir.join("inside")).unwrap(), b"x");
        // a link in the way is replaced, its target untouched
        #[cfg(unix)]
        {
            let target = d.path().join("target");
            std::fs::write(&target, b"kept").unwrap();
            let link = d.path().join("link.json");
            std::os::unix::fs::symlink(&target, &link).unwrap();
            write_atomic(&link, b"new").unwrap();
            assert!(!std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink());
            assert_eq!(std::fs::read(&link).unwrap(), b"new");
            assert_eq!(std::fs::read(&target).unwrap(), b"kept");
        }
    }

    #[test]
    fn a_streamed_document_is_the_pretty_result_set_byte_for_byte() {
        let full = set();
        for n in 0..=2 {
            let mut s = full.clone();
            s.results.truncate(n);
            if n == 0 {
                s.skipped.clear();
                s.problems.clear();
                s.summaries.clear();
            }
            let streamed = write_doc(Vec::new(), &s).unwrap();
            assert_eq!(
                String::from_utf8(streamed).unwrap(),
                pretty(&s),
                "{n} results"
            );
        }
    }

    #[test]
    fn a_results_folder_holds_what_the_whole_set_printed_would() {
        let s = set();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cases")).unwrap();
        // A case file of an earlier run is removed; a file that is not sage's stays.
        std::fs::write(dir.path().join("cases/old.json"), "[]").unwrap();
        std::fs::write(dir.path().join("cases/notes.txt"), "mine").unwrap();
        write_results_dir(dir.path(), &s).unwrap();
        let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).unwrap();
        assert_eq!(read("results.json"), pretty(&s));
        assert_eq!(read("summary.json"), pretty(&s.summaries));
        for r in &s.results {
            let name = format!("cases/{}.json", sage_trace::safe::file_stem(&r.case_id));
            assert_eq!(read(&name), pretty(&vec![r]));
        }
        assert!(!dir.path().join("cases/old.json").exists());
        assert_eq!(read("cases/notes.txt"), "mine");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".tmp-"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn attack_two_runs_write_one_folder_and_a_killed_run_leaves_temp_files() {
        // Before: a second run wrote the same folder at once (the two raced: "writing cc: No
        // such file or directory"), and the 0-byte `.tmp-*` files of a run killed with -9
        // stayed for ever.
        let s = set();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cases")).unwrap();
        std::fs::write(dir.path().join(".tmp-999999-results.json"), "").unwrap();
        std::fs::write(dir.path().join("cases/.tmp-999999-a.json"), "").unwrap();
        let first = ResultsDir::create(dir.path(), &s.judges, s.runs).unwrap();
        let names = |d: &Path| -> Vec<String> {
            std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("999999"))
                .collect()
        };
        assert!(names(dir.path()).is_empty() && names(&dir.path().join("cases")).is_empty());
        let second = ResultsDir::create(dir.path(), &s.judges, s.runs)
            .err()
            .unwrap();
        assert_eq!(second.kind(), io::ErrorKind::WouldBlock);
        assert!(
            second.to_string().contains("another sage run is writing"),
            "{second}"
        );
        first.finish(&[], &[], &[]).unwrap();
        // once the first is done, the folder is free again
        ResultsDir::create(dir.path(), &s.judges, s.runs).unwrap();
    }

    #[test]
    fn a_folder_that_is_not_finished_keeps_the_previous_results_json() {
        let s = set();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("results.json"), "previous").unwrap();
        {
            let mut out = ResultsDir::create(dir.path(), &s.judges, s.runs).unwrap();
            out.case(&s.results[0].case_id, &s.results[..1], &mut [])
                .unwrap();
            // Dropped without finish: the run stopped.
        }
        let results = std::fs::read_to_string(dir.path().join("results.json")).unwrap();
        assert_eq!(results, "previous");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with(".tmp-")), "{names:?}");
    }

    /// A reader that goes away after `left` bytes (`| head -c N`).
    struct Head {
        left: usize,
        got: std::rc::Rc<std::cell::RefCell<Vec<u8>>>,
    }

    impl Write for Head {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.left == 0 {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            let n = buf.len().min(self.left);
            self.left -= n;
            self.got.borrow_mut().extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_sink_of_a_run_holds_the_whole_set_and_a_reader_that_went_away_ends_it_last() {
        let s = set();
        let dir = tempfile::tempdir().unwrap();
        let (out, file, sarif) = (
            dir.path().join("out"),
            dir.path().join("o.json"),
            dir.path().join("s.sarif"),
        );
        let got = std::rc::Rc::default();
        let head = Head {
            left: 100,
            got: std::rc::Rc::clone(&got),
        };
        let mut sinks = ResultSinks::default();
        // the stream first: the sinks after it are finished all the same
        sinks.push(ResultsStream::begin("standard output", head, &s.judges, s.runs, None).unwrap());
        sinks.push(ResultsDir::create(&out, &s.judges, s.runs).unwrap());
        sinks.push(ResultsFile::create(&file, &s.judges, s.runs, None).unwrap());
        sinks.push(SarifFile::new(&sarif, &crate::Rules::default()));
        for (_, rs) in results_by_case(&s).unwrap() {
            let rs: Vec<CaseResult> = rs.into_iter().cloned().collect();
            sinks.case(&rs, None).unwrap();
        }
        let end = RunEnd {
            skipped: &s.skipped,
            problems: &s.problems,
            summaries: &s.summaries,
        };
        let e = sinks.finish(&end).unwrap_err();
        assert_eq!(e.io.kind(), io::ErrorKind::BrokenPipe);
        assert!(e.context.is_none());
        // by case id, as fed; the set's own order may differ
        let mut by_id = s.clone();
        by_id.results.sort_by(|a, b| a.case_id.cmp(&b.case_id));
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(&out.join("results.json")), pretty(&by_id));
        assert_eq!(read(&file), pretty(&by_id));
        let sarif_log = crate::sarif_view::to_sarif(&by_id, &crate::Rules::default());
        assert_eq!(read(&sarif), pretty(&sarif_log));
        assert_eq!(*got.borrow(), pretty(&by_id).as_bytes()[..100]);
    }

    #[test]
    fn with_only_a_reader_that_went_away_the_run_stops_at_the_next_case() {
        let s = set();
        let head = Head {
            left: 10,
            got: Default::default(),
        };
        let mut sinks = ResultSinks::default();
        sinks.push(ResultsStream::begin("standard output", head, &s.judges, s.runs, None).unwrap());
        let e = sinks.case(&s.results[..1], None).unwrap_err();
        assert_eq!(e.io.kind(), io::ErrorKind::BrokenPipe);
        // no sink at all is no reader gone
        ResultSinks::default().case(&s.results[..1], None).unwrap();
    }

    #[test]
    fn pieces_are_scrubbed_of_registered_secrets() {
        let secret = "sk-sink-test-SECRET-0123456789";
        sage_llm::secrets::register_env_secrets([("OPENAI_API_KEY", secret)]);
        let mut s = set();
        s.results[0].task_description = format!("key {secret} here");
        let doc = String::from_utf8(write_doc(Vec::new(), &s).unwrap()).unwrap();
        assert!(!doc.contains(secret) && doc.contains("[redacted]"));
        assert_eq!(doc, pretty(&s));
    }
}
