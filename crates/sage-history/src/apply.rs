//! Write application: one canonical edit applied to an artefact's content, with the
//! tolerances the editors that recorded it have (`docs/design-history.md`).

use sage_trace::{Tolerance, WriteOp};

/// The result of applying one write to an artefact's content.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The content after the write; `None` when the artefact was deleted.
    pub content: Option<String>,
    /// An edit applied only through its editor's tolerance ([`Tolerance`]): the
    /// whitespace-tolerant line match or the `...` elision of a search/replace, or the trimmed
    /// retry of a `str_replace`.
    pub fuzzy: bool,
    /// The edit matched only after the file's CRLF line ends were read as LF (as Python
    /// editors read with universal newlines); the result has LF line ends.
    pub crlf_normalized: bool,
}

impl Applied {
    fn exact(content: String) -> Result<Applied, ApplyError> {
        Ok(Applied {
            content: Some(content),
            fuzzy: false,
            crlf_normalized: false,
        })
    }
}

/// Why a write does not apply to the artefact as it stands. The message names the edit and
/// what in the file it did not find; it is recorded as the write's failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The edit needs the artefact, which does not exist (the edit's name).
    #[error("{0}: artefact does not exist")]
    Missing(&'static str),
    /// A `str_replace` with an empty old text.
    #[error("str_replace: old text is empty")]
    EmptyOld,
    /// A `str_replace` whose old text is not in the file.
    #[error("str_replace: old text not found")]
    OldNotFound,
    /// A `str_replace` whose old text occurs more than once.
    #[error("str_replace: old text occurs {0} times (must occur exactly once)")]
    OldAmbiguous(usize),
    /// A SEARCH block that is not in the file, even ignoring indentation.
    #[error(
        "search/replace: search text not found (exactly or ignoring indentation and trailing whitespace)"
    )]
    SearchNotFound,
    /// A SEARCH block with `...` elisions whose pieces do not pair or match.
    #[error("search/replace: {0}")]
    Elision(String),
    /// An insert past the end of the file.
    #[error("insert: line {after} is beyond the end of the file ({lines} lines)")]
    InsertBeyond {
        /// The line to insert after.
        after: usize,
        /// The file's line count.
        lines: usize,
    },
    /// A line-range replacement outside the file.
    #[error("replace-lines: lines {start}..={end} are not within the file ({lines} lines)")]
    LinesOutside {
        /// First line to replace.
        start: usize,
        /// Last line to replace.
        end: usize,
        /// The file's line count.
        lines: usize,
    },
    /// A unified diff that does not apply.
    #[error(transparent)]
    Patch(#[from] sage_patch::PatchError),
}

/// Apply one edit to `current` (`None`: the artefact does not exist). `Err` is the reason.
pub fn apply(current: Option<&str>, op: &WriteOp) -> Result<Applied, ApplyError> {
    // Editors (OpenHands', SWE-agent's, Aider's) read files with universal newlines: an LF
    // edit written against a CRLF file matches the file read as LF, and the file is written
    // back with LF line ends. Tried only when the edit does not match the file as it is.
    if let (Some(cur), Some(old)) = (current, op_search_text(op)) {
        if cur.contains("\r\n") && !old.contains('\r') && old.contains('\n') && !cur.contains(old) {
            let lf = cur.replace("\r\n", "\n");
            if let Ok(mut a) = apply_exact(Some(&lf), op) {
                a.crlf_normalized = true;
                return Ok(a);
            }
        }
    }
    apply_exact(current, op)
}

/// The text an edit must find in the file (search/replace, str_replace).
fn op_search_text(op: &WriteOp) -> Option<&str> {
    match op {
        WriteOp::SearchReplace { search, .. } if !search.trim().is_empty() => Some(search),
        WriteOp::StrReplace { old, .. } => Some(old),
        _ => None,
    }
}

fn apply_exact(current: Option<&str>, op: &WriteOp) -> Result<Applied, ApplyError> {
    match op {
        WriteOp::FullContent { content } => Applied::exact(content.clone()),
        WriteOp::SearchReplace {
            search,
            replace,
            tolerance,
        } => {
            // A blank SEARCH appends to the file, creating it if needed.
            if search.trim().is_empty() {
                return Applied::exact(format!("{}{}", current.unwrap_or(""), replace));
            }
            let cur = current.ok_or(ApplyError::Missing("search/replace"))?;
            if let Some(pos) = cur.find(search.as_str()) {
                let mut out = String::with_capacity(cur.len() + replace.len());
                out.push_str(&cur[..pos]);
                out.push_str(replace);
                out.push_str(&cur[pos + search.len()..]);
                return Applied::exact(out);
            }
            if *tolerance != Tolerance::LinesThenElision {
                return Err(ApplyError::SearchNotFound);
            }
            let fuzzy = |content: String| {
                Ok(Applied {
                    content: Some(content),
                    fuzzy: true,
                    crlf_normalized: false,
                })
            };
            if let Some(out) = fuzzy_replace(cur, search, replace) {
                return fuzzy(out);
            }
            // The last resort: `...` lines elide unchanged code in both blocks.
            match dotdotdots(cur, search, replace) {
                Some(Ok(out)) => fuzzy(out),
                Some(Err(e)) => Err(ApplyError::Elision(e)),
                None => Err(ApplyError::SearchNotFound),
            }
        }
        WriteOp::StrReplace {
            old,
            new,
            all,
            tolerance,
        } => {
            let cur = current.ok_or(ApplyError::Missing("str_replace"))?;
            if old.is_empty() {
                return Err(ApplyError::EmptyOld);
            }
            match cur.matches(old.as_str()).count() {
                // The trimmed retry: a missing `old` is retried with both strings stripped
                // of surrounding whitespace; an edit recorded as landed that only matches that
                // way is applied that way.
                0 if *tolerance == Tolerance::TrimmedRetry
                    && !*all
                    && old.trim() != old.as_str()
                    && !old.trim().is_empty()
                    && cur.matches(old.trim()).count() == 1 =>
                {
                    Ok(Applied {
                        content: Some(cur.replacen(old.trim(), new.trim(), 1)),
                        fuzzy: true,
                        crlf_normalized: false,
                    })
                }
                0 => Err(ApplyError::OldNotFound),
                n if n > 1 && !all => Err(ApplyError::OldAmbiguous(n)),
                _ if *all => Applied::exact(cur.replace(old.as_str(), new)),
                _ => Applied::exact(cur.replacen(old.as_str(), new, 1)),
            }
        }
        WriteOp::Insert { after_line, text } => {
            let cur = match current {
                Some(c) => c,
                None if *after_line == 0 => "",
                None => return Err(ApplyError::Missing("insert")),
            };
            let lines: Vec<&str> = cur.split_inclusive('\n').collect();
            if *after_line > lines.len() {
                return Err(ApplyError::InsertBeyond {
                    after: *after_line,
                    lines: lines.len(),
                });
            }
            let mut out = lines[..*after_line].concat();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(text);
            let rest = lines[*after_line..].concat();
            if !text.is_empty()
                && !text.ends_with('\n')
                && (!rest.is_empty() || cur.ends_with('\n'))
            {
                out.push('\n');
            }
            out.push_str(&rest);
            Applied::exact(out)
        }
        WriteOp::ReplaceLines { start, end, text } => {
            let cur = current.ok_or(ApplyError::Missing("replace-lines"))?;
            let lines: Vec<&str> = cur.split_inclusive('\n').collect();
            if *start == 0 || end < start || *end > lines.len() {
                return Err(ApplyError::LinesOutside {
                    start: *start,
                    end: *end,
                    lines: lines.len(),
                });
            }
            let mut out = lines[..start - 1].concat();
            out.push_str(text);
            let rest = lines[*end..].concat();
            let replaced_had_newline = lines[end - 1].ends_with('\n');
            if !text.is_empty()
                && !text.ends_with('\n')
                && (!rest.is_empty() || replaced_had_newline)
            {
                out.push('\n');
            }
            out.push_str(&rest);
            Applied::exact(out)
        }
        WriteOp::UnifiedDiff { diff } => apply_unified_diff(current, diff).map(|content| Applied {
            content,
            fuzzy: false,
            crlf_normalized: false,
        }),
        WriteOp::Delete => match current {
            Some(_) => Ok(Applied {
                content: None,
                fuzzy: false,
                crlf_normalized: false,
            }),
            None => Err(ApplyError::Missing("delete")),
        },
    }
}

fn leading_ws(s: &str) -> &str {
    &s[..s.len() - s.trim_start().len()]
}

/// [`Tolerance::LinesThenElision`], first (as Aider's fallback when SEARCH is not found
/// verbatim): match whole lines ignoring leading and
/// trailing whitespace (and blank lines around SEARCH), then re-indent REPLACE by the
/// indentation difference of the first non-blank matched line.
fn fuzzy_replace(cur: &str, search: &str, replace: &str) -> Option<String> {
    let file: Vec<&str> = cur.split_inclusive('\n').collect();
    let s: Vec<&str> = search.lines().collect();
    let first = s.iter().position(|l| !l.trim().is_empty())?;
    let last = s.iter().rposition(|l| !l.trim().is_empty())?;
    let s = &s[first..=last];
    if s.len() > file.len() {
        return None;
    }
    let at = (0..=file.len() - s.len()).find(|&i| {
        s.iter()
            .enumerate()
            .all(|(j, l)| file[i + j].trim() == l.trim())
    })?;
    let fi = leading_ws(file[at]);
    let si = leading_ws(s[0]);
    let reindent = |line: &str| -> String {
        if line.trim().is_empty() {
            String::new()
        } else if let Some(extra) = fi.strip_prefix(si) {
            format!("{extra}{line}")
        } else if let Some(extra) = si.strip_prefix(fi) {
            line.strip_prefix(extra).unwrap_or(line).to_string()
        } else {
            line.to_string()
        }
    };
    let mut out = file[..at].concat();
    let end = at + s.len();
    let replaced: Vec<String> = replace.lines().map(reindent).collect();
    if !replaced.is_empty() {
        out.push_str(&replaced.join("\n"));
        if file[end - 1].ends_with('\n') || end < file.len() {
            out.push('\n');
        }
    }
    out.push_str(&file[end..].concat());
    Some(out)
}

/// [`Tolerance::LinesThenElision`], last (as Aider's `try_dotdotdots`): when SEARCH and
/// REPLACE hold lines of only `...`, the blocks are
/// cut there into pieces, the `...` lines must pair up, and each SEARCH piece must occur
/// exactly once and is replaced by its REPLACE piece (an empty SEARCH piece appends). `None`
/// when there is no `...` line; `Err` when the pieces do not pair or match.
fn dotdotdots(whole: &str, search: &str, replace: &str) -> Option<Result<String, String>> {
    let with_nl = |s: &str| {
        if s.ends_with('\n') {
            s.to_string()
        } else {
            format!("{s}\n")
        }
    };
    let (search, replace) = (with_nl(search), with_nl(replace));
    // Split keeping the `...` lines: pieces at even positions, separators at odd ones.
    let split = |s: &str| -> Vec<String> {
        let mut out = vec![String::new()];
        for line in s.split_inclusive('\n') {
            if line.trim() == "..." {
                out.push(line.to_string());
                out.push(String::new());
            } else if let Some(last) = out.last_mut() {
                last.push_str(line);
            }
        }
        out
    };
    let sp = split(&search);
    let rp = split(&replace);
    if sp.len() == 1 {
        return None;
    }
    if sp.len() != rp.len() {
        return Some(Err("unpaired ... in SEARCH/REPLACE block".into()));
    }
    if (1..sp.len()).step_by(2).any(|i| sp[i] != rp[i]) {
        return Some(Err("unmatched ... in SEARCH/REPLACE block".into()));
    }
    let mut whole = whole.to_string();
    for (part, rep) in sp.iter().zip(&rp).step_by(2) {
        if part.is_empty() && rep.is_empty() {
            continue;
        }
        if part.is_empty() {
            if !whole.ends_with('\n') {
                whole.push('\n');
            }
            whole.push_str(rep);
            continue;
        }
        match whole.matches(part.as_str()).count() {
            1 => whole = whole.replacen(part.as_str(), rep, 1),
            0 => {
                return Some(Err(format!(
                    "a piece of the SEARCH block between `...` lines is not in the file: {:?}",
                    part.lines().next().unwrap_or("")
                )))
            }
            n => {
                return Some(Err(format!(
                    "a piece of the SEARCH block between `...` lines occurs {n} times"
                )))
            }
        }
    }
    Some(Ok(whole))
}

/// Apply a unified diff through the one patch model ([`sage_patch::apply`]).
fn apply_unified_diff(current: Option<&str>, diff: &str) -> Result<Option<String>, ApplyError> {
    Ok(sage_patch::apply(current, diff)?)
}
