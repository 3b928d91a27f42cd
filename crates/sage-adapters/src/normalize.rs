//! Detection and normalization of a trace: the one path every command takes from files to a
//! canonical trace (forced or detected adapter, `--run N`, the no-empty-trace rule, the
//! submissions and turn kinds every trace gets), and the raw-pointer check.

use crate::detect::{self};
use crate::mapping::Mapping;
use crate::registry::shared_registry;
use crate::rules::Rules;
use crate::shape::DETECT_BYTES;
use crate::{by_name, kinds, registry, seen, Adapter, AdapterError};
use crate::{MappingAdapter, SourceFile};
use sage_trace::{CanonicalTrace, RawStore};
use std::path::Path;

/// Detect the format of `path` from its content (a sample across the whole file, see
/// [`detect::sample`]) by `rules`: the best adapter by [`detect::MARGIN`], else an error
/// naming what the file is or which adapters tie.
pub fn detect(path: &Path, rules: &Rules) -> Result<Box<dyn Adapter>, AdapterError> {
    let best = detect_shared(path, rules)?.0.name();
    let name = path.display().to_string();
    registry()
        .into_iter()
        .find(|a| a.name() == best)
        .ok_or_else(|| AdapterError::new(&name, None, "format not recognized"))
}

/// [`detect`] among the adapters built once per process, with the winner's score and evidence.
fn detect_shared(
    path: &Path,
    rules: &Rules,
) -> Result<(&'static dyn Adapter, detect::Candidate), AdapterError> {
    let name = path.display().to_string();
    let reg = shared_registry();
    let d = detect::detect_file(reg, path, &name, rules)?;
    // A file that is not a trace is told by its first line(s); no verdict concerns the file
    // as a whole.
    let at = if d.not_a_trace.is_some() {
        "line 1"
    } else {
        "whole file"
    };
    let best = d
        .verdict()
        .map_err(|e| AdapterError::new(&name, Some(at.into()), e.to_string()))?
        .clone();
    reg.iter()
        .find(|a| a.name() == best.framework)
        .map(|a| (a.as_ref(), best))
        .ok_or_else(|| AdapterError::new(&name, None, "format not recognized"))
}

/// Read the first [`DETECT_BYTES`] of a file.
pub fn read_head(path: &Path, name: &str) -> Result<Vec<u8>, AdapterError> {
    use std::io::Read;
    let mut head = Vec::with_capacity(DETECT_BYTES);
    std::fs::File::open(path)
        .and_then(|f| f.take(DETECT_BYTES as u64).read_to_end(&mut head))
        .map_err(|e| AdapterError::new(name, None, format!("cannot read: {e}")))?;
    Ok(head)
}

/// How to normalize a trace.
#[derive(Debug, Clone, Default)]
pub struct NormalizeOptions {
    /// Force this adapter instead of detecting one; refused when its detector does not
    /// recognise the file (the detector's evidence is in the error).
    pub framework: Option<String>,
    /// Field paths replacing the embedded mapping of the adapter it names (`--adapter FILE`);
    /// the user's mapping is trusted, so the structural check of a forced framework is skipped.
    pub mapping: Option<Mapping>,
    /// Accept a trace with no agent-authored turn (else it is an error naming what was found).
    pub allow_empty: bool,
    /// The run to read from a file that holds several (1-based): the Nth record of an
    /// OpenHands `output.jsonl`, the Nth sample of an Inspect log. `None` reads the first and
    /// reports every other run as a dropped record.
    pub run: Option<usize>,
    /// Where `framework` was given, for messages (`trace.framework of case.json`); `None`
    /// for the `--framework` flag.
    pub framework_from: Option<String>,
    /// The turn classifier, the detection rules and the input limits (the embedded data and
    /// default limits unless the CLI read the user's).
    pub rules: Rules,
}

/// The files of the trace a case or run manifest names (`trace.files`, relative to its
/// folder `dir`; the first is the main trace).
pub fn case_sources(dir: &Path, spec: &sage_trace::case::TraceSpec) -> Vec<SourceFile> {
    spec.files
        .iter()
        .map(|f| SourceFile::new(f.clone(), dir.join(f)))
        .collect()
}

impl NormalizeOptions {
    /// The adapter named `framework`, or the detected one when `None`.
    pub fn framework(framework: Option<&str>) -> NormalizeOptions {
        NormalizeOptions {
            framework: framework.map(String::from),
            ..NormalizeOptions::default()
        }
    }

    /// How the trace a case or run manifest names is read (`trace`: its framework, forced
    /// when given, and the run to read from a file that holds several); its files are
    /// [`case_sources`]; read by `rules`.
    pub fn of_manifest(spec: &sage_trace::case::TraceSpec, rules: &Rules) -> NormalizeOptions {
        NormalizeOptions {
            framework: spec.framework.clone(),
            run: spec.run,
            framework_from: Some("the manifest's trace.framework".into()),
            rules: rules.clone(),
            ..NormalizeOptions::default()
        }
    }
}

/// Normalize a trace with `opts`: the one path from files to a canonical trace. The adapter
/// is the one `opts` names or the detected one, its field paths taken from `opts.mapping`
/// when given (`--adapter FILE`: the mapping replaces the embedded one of the adapter it
/// names, or defines a new format). A trace without an agent-authored turn is an error unless
/// `opts.allow_empty`.
pub fn normalize(
    files: &[SourceFile],
    opts: &NormalizeOptions,
) -> Result<CanonicalTrace, AdapterError> {
    normalize_as(files, opts, false).map(|(t, _)| t)
}

/// [`normalize`], with what the trace shows of its files besides its writes
/// ([`Adapter::normalize_seen`]; nothing for a mapping file's format): the same checks and
/// refusals, one reading of the files. Every history sage builds starts from this.
pub fn normalize_with_seen(
    files: &[SourceFile],
    opts: &NormalizeOptions,
) -> Result<(CanonicalTrace, seen::Seen), AdapterError> {
    normalize_as(files, opts, true)
}

fn normalize_as(
    files: &[SourceFile],
    opts: &NormalizeOptions,
    with_seen: bool,
) -> Result<(CanonicalTrace, seen::Seen), AdapterError> {
    let files = &limited(files, &opts.rules);
    let main = crate::support::main_file(files)?;
    // Every adapter may stream its files: only regular files within the size limit get
    // that far (a FIFO blocks, `/dev/zero` has no end and no newline).
    let limit = opts.rules.limits.max_input_bytes;
    for f in files {
        let meta = std::fs::metadata(&f.path)
            .map_err(|e| AdapterError::new(&f.name, None, format!("cannot read: {e}")))?;
        if !meta.is_file() {
            return Err(AdapterError::new(&f.name, None, "not a regular file"));
        }
        if meta.len() > limit {
            return Err(AdapterError::new(
                &f.name,
                None,
                format!(
                    "{} bytes, larger than the input limit of {limit} bytes (set SAGE_MAX_INPUT_MB to raise it)",
                    meta.len()
                ),
            ));
        }
    }
    let framework = opts.framework.as_deref();
    // The detected adapter's score and evidence, when it was detected (not forced).
    let mut detected: Option<detect::Candidate> = None;
    let (trace, seen) = if let Some(m) = opts.mapping.clone() {
        let target = framework.unwrap_or(m.name()).to_string();
        let adapter: Box<dyn Adapter> = match by_name(&target) {
            Some(a) => match a.with_mapping(m) {
                Some(b) => b,
                None => {
                    return Err(AdapterError::new(
                        &main.name,
                        None,
                        format!("the {target} format is parsed by code; it takes no mapping file"),
                    ))
                }
            },
            None => Box::new(MappingAdapter::new(m)),
        };
        if opts.run.is_some_and(|n| n != 1) {
            return Err(AdapterError::new(
                &main.name,
                None,
                "--run takes no mapping file (runs are told apart by the OpenHands and Inspect readers)",
            ));
        }
        (adapter.normalize(files)?, seen::Seen::default())
    } else {
        let adapter: &dyn Adapter = match framework {
            Some(n) => {
                let a = shared_registry()
                    .iter()
                    .find(|a| a.name() == n)
                    .map(|a| a.as_ref())
                    .ok_or_else(|| {
                        AdapterError::new(
                            &main.name,
                            None,
                            format!("unknown framework {n:?}; see `sage adapters`"),
                        )
                    })?;
                check_forced(a, main, opts.framework_from.as_deref(), &opts.rules)?;
                a
            }
            None => {
                let (a, c) = detect_shared(&main.path, &opts.rules).map_err(|mut e| {
                    e.file = main.name.clone();
                    e
                })?;
                detected = Some(c);
                a
            }
        };
        if let Some(n) = opts.run {
            check_run(adapter, main, n)?;
        }
        match opts.run.filter(|n| *n > 1) {
            Some(n) => adapter.normalize_run(files, n)?,
            None if with_seen => adapter.normalize_seen(files)?,
            None => (adapter.normalize(files)?, seen::Seen::default()),
        }
    };
    let trace = finish(trace, &opts.rules.kinds);
    if !opts.allow_empty {
        if let Some(why) = no_agent_turn(&trace) {
            // Weak evidence that gives nothing was a guess, not a format: say so rather than
            // "this ag2 trace".
            let why = match detected.filter(|c| c.score < detect::WEAK_BELOW) {
                Some(c) => not_recognized_weak(&c, &trace),
                None => why,
            };
            return Err(AdapterError::new(
                &main.name,
                Some("whole file".into()),
                why,
            ));
        }
    }
    Ok((trace, seen))
}

/// `files` read up to the input size limit of `rules`.
fn limited(files: &[SourceFile], rules: &Rules) -> Vec<SourceFile> {
    files
        .iter()
        .map(|f| SourceFile {
            limit: rules.limits.max_input_bytes,
            ..f.clone()
        })
        .collect()
}

/// Whether `--run n` makes sense for the format.
fn check_run(adapter: &dyn Adapter, main: &SourceFile, n: usize) -> Result<(), AdapterError> {
    if n == 0 {
        return Err(AdapterError::new(
            &main.name,
            None,
            "--run counts runs from 1",
        ));
    }
    if n > 1 && !adapter.holds_runs() {
        let framework = adapter.name();
        return Err(AdapterError::new(
            &main.name,
            None,
            format!(
                "a {framework} file holds one run; --run N reads the Nth record of an OpenHands \
                 output.jsonl or the Nth sample of an Inspect log"
            ),
        ));
    }
    Ok(())
}

/// What every adapter's output goes through, whatever the format: submitted final states
/// leave the turns ([`CanonicalTrace::separate_submissions`]) and every agent turn's kind is
/// set from what it did by the one classifier of [`kinds`].
pub fn finish(mut trace: CanonicalTrace, kinds: &kinds::Classifier) -> CanonicalTrace {
    trace.separate_submissions();
    kinds::classify_trace(&mut trace, kinds);
    trace
}

/// The error of a file detected only on weak evidence ([`detect::WEAK_BELOW`]) that gives no
/// agent-authored turn: the format is not recognized, and what was looked for.
fn not_recognized_weak(c: &detect::Candidate, trace: &CanonicalTrace) -> String {
    format!(
        "format not recognized: no adapter's rules recognise this file, only weak evidence \
         ({} scores {} of 100, below {}: {}), and read as {} it gives no agent-authored turn \
         ({} turns, {} dropped records); sage looked for the structure of every format it \
         reads (`sage adapters` lists them, `sage adapters detect FILE` shows the evidence); \
         pass --framework NAME or --adapter MAPPING if it is one of them",
        c.framework,
        c.score,
        detect::WEAK_BELOW,
        c.evidence,
        c.framework,
        trace.turns.len(),
        trace.dropped.len()
    )
}

/// A forced adapter must recognise the file's structure: `--framework aider` on an OpenHands
/// export would otherwise give a made-up trace. `from` says where the framework was given
/// (`None`: the `--framework` flag).
fn check_forced(
    a: &dyn Adapter,
    main: &SourceFile,
    from: Option<&str>,
    rules: &Rules,
) -> Result<(), AdapterError> {
    let d = detect::detect_file(shared_registry(), &main.path, &main.name, rules)?;
    if d.file_bytes == 0 {
        return Err(AdapterError::new(
            &main.name,
            Some("whole file".into()),
            detect::NoVerdict::Empty.to_string(),
        ));
    }
    if let Some(what) = &d.not_a_trace {
        return Err(AdapterError::new(
            &main.name,
            Some("line 1".into()),
            format!("not a trace: {what}"),
        ));
    }
    if d.score_of(a.name()) > 0 {
        return Ok(());
    }
    let found = if d.candidates.is_empty() {
        format!(
            "no adapter recognises it (the file is {})",
            d.structure.join("; ")
        )
    } else {
        d.candidates
            .iter()
            .take(3)
            .map(|c| format!("{} scores {} ({})", c.framework, c.score, c.evidence))
            .collect::<Vec<_>>()
            .join("; ")
    };
    Err(AdapterError::new(
        &main.name,
        Some("whole file".into()),
        match from {
            None => format!(
                "--framework {} refused: its detector does not recognise this file's structure; {found}",
                a.name()
            ),
            Some(from) => format!(
                "framework {} ({from}) refused: its detector does not recognise this file's structure; {found}",
                a.name()
            ),
        },
    ))
}

/// `Some(what was found instead)` when `trace` has no agent-authored turn.
pub(crate) fn no_agent_turn(trace: &CanonicalTrace) -> Option<String> {
    let agent = trace
        .turns
        .iter()
        .filter(|t| t.kind != sage_trace::TurnKind::Administrative)
        .count();
    if agent > 0 {
        return None;
    }
    let admin = trace.turns.len();
    let mut reasons: std::collections::BTreeMap<&str, usize> = Default::default();
    for d in &trace.dropped {
        *reasons.entry(d.reason.as_str()).or_default() += 1;
    }
    let mut found = format!(
        "{admin} administrative turns, {} dropped records",
        trace.dropped.len()
    );
    let top: Vec<String> = {
        let mut r: Vec<_> = reasons.into_iter().collect();
        r.sort_by_key(|x| std::cmp::Reverse(x.1));
        r.into_iter()
            .take(3)
            .map(|(k, n)| format!("{n} {k}"))
            .collect()
    };
    if !top.is_empty() {
        found.push_str(&format!(" ({})", top.join("; ")));
    }
    Some(format!(
        "no agent-authored turn in this {} trace: found {found}; is it the right format? (--allow-empty accepts it)",
        trace.framework
    ))
}

/// Normalize a trace and report what it shows besides its turns ([`Adapter::normalize_seen`]):
/// the adapter `opts.framework` names (else the detected one), run `opts.run` of a file that
/// holds several. Only those two options apply: no mapping file, and a trace without an
/// agent-authored turn is returned, not refused (`sage case init` and `check` report it).
pub fn normalize_seen(
    files: &[SourceFile],
    opts: &NormalizeOptions,
) -> Result<(CanonicalTrace, seen::Seen), AdapterError> {
    let files = &limited(files, &opts.rules);
    let main = crate::support::main_file(files)?;
    let adapter: &dyn Adapter = match opts.framework.as_deref() {
        Some(n) => shared_registry()
            .iter()
            .find(|a| a.name() == n)
            .map(|a| a.as_ref())
            .ok_or_else(|| {
                AdapterError::new(
                    &main.name,
                    None,
                    format!("unknown framework {n:?}; see `sage adapters`"),
                )
            })?,
        None => {
            detect_shared(&main.path, &opts.rules)
                .map_err(|mut e| {
                    e.file = main.name.clone();
                    e
                })?
                .0
        }
    };
    if let Some(n) = opts.run {
        check_run(adapter, main, n)?;
    }
    let (trace, seen) = match opts.run.filter(|n| *n > 1) {
        Some(n) => adapter.normalize_run(files, n)?,
        None => adapter.normalize_seen(files)?,
    };
    Ok((finish(trace, &opts.rules.kinds), seen))
}

/// Check that every item of `trace` points to raw text that holds it: each text item of each
/// turn (message, tool-call arguments, tool results, write contents) must resolve through
/// [`RawStore::resolve`] to text that contains the item's text, and every dropped record's
/// pointer must resolve. Returns one line per failure (empty = all verified). Judges' quotes
/// are verified through the same pointers, so an item that fails here can never be quoted.
///
/// Writes derived from a form that does not keep the new text verbatim (`*** Begin Patch`
/// hunks, whose lines carry `+`/` ` prefixes; LangGraph v1 file states, stored as a list of
/// lines) are checked line by line.
pub fn verify_raw_refs(trace: &CanonicalTrace, store: &RawStore) -> Vec<String> {
    let mut bad = Vec::new();
    for t in &trace.turns {
        for (text, raw) in t.text_items() {
            match store.resolve(raw) {
                Ok(r) if r.contains(text) => {}
                Ok(r) if text.lines().all(|l| r.contains(l)) && is_derived_write(t, raw) => {}
                Ok(_) => bad.push(format!(
                    "turn {}: {} does not contain the item's text ({:?}...)",
                    t.index,
                    raw.display(),
                    text.chars().take(60).collect::<String>()
                )),
                Err(sage_trace::RawError::Synthetic { .. }) => {}
                Err(e) => bad.push(format!("turn {}: {e}", t.index)),
            }
        }
    }
    for d in &trace.dropped {
        if let Err(e) = store.resolve(&d.raw) {
            bad.push(format!("dropped record: {e}"));
        }
    }
    for w in &trace.submissions {
        match store.resolve(&w.raw) {
            Ok(_) | Err(sage_trace::RawError::Synthetic { .. }) => {}
            Err(e) => bad.push(format!("submission of {}: {e}", w.artefact)),
        }
    }
    bad
}

fn is_derived_write(t: &sage_trace::Turn, raw: &sage_trace::RawRef) -> bool {
    t.writes.iter().any(|w| &w.raw == raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{embedded_mapping, EMBEDDED_MAPPINGS};

    #[test]
    fn embedded_mappings_parse_and_names_are_unique() {
        for (name, _) in EMBEDDED_MAPPINGS {
            let m = embedded_mapping(name).unwrap();
            assert_eq!(m.name(), *name);
        }
        let names: Vec<_> = registry().iter().map(|a| a.name()).collect();
        let mut dedup = names.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(names.len(), dedup.len(), "{names:?}");
    }

    #[test]
    fn unknown_content_is_not_detected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.txt");
        std::fs::write(&p, "hello world").unwrap();
        let e = detect(&p, &Rules::default()).err().unwrap();
        assert!(e.to_string().contains("not recognized"), "{e}");
    }
}
