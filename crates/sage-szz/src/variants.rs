//! The deterministic variants, following PySZZ's conventions (see `docs/szz.md`):
//!
//! - common front end: the fix's diff against its first parent; files the fix adds are
//!   skipped; the blamed path is the new path, or the old one for a deletion or rename;
//!   **deleted lines only**, old-side numbers; blame at `fix^` with consecutive lines merged
//!   into `-L` ranges; binary files skipped with a note;
//! - B-SZZ: no flags, no filter; AG-SZZ: `-w`, comment filter, the > 20 files rule as an
//!   `--ignore-rev` loop; MA-SZZ: AG plus `-M -C` and meta-changes; R-SZZ: latest; L-SZZ:
//!   most modified lines; V-SZZ: similarity walk-back, earliest chain end.

use crate::blame::{blame_lines, blame_output, parse_blame_output, BlameFlags, BlameLine};
use crate::comments::{comment_lines, is_blank};
use crate::diff::{commit_diff, file_diff, name_status, ChangeKind, FileDiff};
use crate::git::{short, Git};
use crate::{joined, tally, Candidate, Chain, LineRef, SzzError, SzzResult, Variant};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

/// Options shared by the variants. Defaults are pyszz's.
#[derive(Debug, Clone)]
pub struct Options {
    /// pyszz `file_ext_to_parse`: keep a file when the part of its name after the *first*
    /// dot (lower-cased) is in the list (`foo.test.c` reads as `test`, as in pyszz).
    pub extensions: Option<Vec<String>>,
    /// AG/MA: a commit modifying more than this many files is excluded (pyszz default 20).
    pub max_change_size: usize,
    /// AG and up, V: also drop blamed lines that are blank (pyszz does not; on by default,
    /// `--keep-blank` restores pyszz's behaviour).
    pub skip_blank: bool,
    /// AG and up, V: drop blamed comment lines (pyszz's filter; `--keep-comments` turns it
    /// off, which is what pyszz does when srcML is not installed).
    pub skip_comments: bool,
    /// MA: ignore revert commits as meta-changes (pyszz `filter_revert_commits`, off).
    pub filter_revert: bool,
    /// MA: number of `-C` flags (pyszz `DetectLineMoved.SAME_COMMIT` = 1).
    pub copies: u8,
    /// AG/MA: wall-clock budget of the ignore-rev loop (pyszz: one hour).
    pub loop_budget: Duration,
    /// V: maximum chain length per line.
    pub max_chain: usize,
    /// The CVE or bug description (used by the agent).
    pub cve: Option<String>,
    /// Reproduce pyszz's blame bookkeeping bug for bug-compatible baselines: blamed lines are
    /// read from `git blame --incremental` in emission order and deduplicated by (path, line
    /// number in the blamed commit), so a commit whose only line collides with another
    /// commit's line number disappears (pyszz's `BlameData` hashes on those two fields).
    pub pyszz_compat: bool,
    /// V: threads that map lines through a commit's change (each line's mapping is
    /// independent of the others; the answer does not depend on this number).
    pub threads: std::num::NonZeroUsize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            extensions: None,
            max_change_size: 20,
            skip_blank: true,
            skip_comments: true,
            filter_revert: false,
            copies: 1,
            loop_budget: Duration::from_secs(3600),
            max_chain: 200,
            cve: None,
            pyszz_compat: false,
            threads: std::thread::available_parallelism().unwrap_or(std::num::NonZeroUsize::MIN),
        }
    }
}

/// Blamed lines (with the fix-side path) and the commits ignored on the way.
type Blamed = (Vec<(String, BlameLine)>, Vec<String>);

/// A file of the fix with the old-side lines to blame.
#[derive(Debug, Clone)]
pub struct Impacted {
    /// The path at `fix^`.
    pub path: String,
    /// Deleted lines: (old-side line number, text).
    pub lines: Vec<(usize, String)>,
    pub diff: FileDiff,
}

/// The resolved fix and its parent.
#[derive(Debug, Clone)]
pub struct Fix {
    pub hash: String,
    pub parent: String,
    pub files: Vec<FileDiff>,
}

/// Resolve the fix and read its diff against the first parent.
pub(crate) fn load_fix(git: &Git, fix: &str) -> Result<Fix, SzzError> {
    let hash = git.resolve_commit(fix)?;
    let info = git.commit_info(&hash)?;
    let Some(parent) = info.parents.first().cloned() else {
        return Err(SzzError::NoParent { commit: hash });
    };
    let files = commit_diff(git, &hash, 3)?;
    Ok(Fix {
        hash,
        parent,
        files,
    })
}

/// pyszz's extension test: `filename.split('.')[1].lower()` must be in the list.
pub(crate) fn ext_matches(path: &str, exts: &[String]) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let mut parts = name.split('.');
    parts.next();
    match parts.next() {
        Some(e) => exts.iter().any(|x| x.eq_ignore_ascii_case(e)),
        None => false,
    }
}

/// The common front end: which lines of which files get blamed.
pub(crate) fn impacted_files(fix: &Fix, opts: &Options, notes: &mut Vec<String>) -> Vec<Impacted> {
    let mut out = Vec::new();
    for f in &fix.files {
        let path = f.blame_path().to_string();
        if f.kind == ChangeKind::Added || f.old_path.is_none() {
            continue;
        }
        if let Some(exts) = &opts.extensions {
            let name = f.new_path.as_deref().unwrap_or(&path);
            if !ext_matches(name, exts) {
                notes.push(format!("{path}: skipped by the extension filter"));
                continue;
            }
        }
        if f.binary {
            notes.push(format!("{path}: binary file, skipped"));
            continue;
        }
        let lines = f.deleted();
        if lines.is_empty() {
            continue;
        }
        out.push(Impacted {
            path,
            lines,
            diff: f.clone(),
        });
    }
    if out.is_empty() {
        notes.push("the fix deletes no lines in the files considered: no candidates (pyszz blames deleted lines only)".into());
    }
    out
}

/// Run one of the classic (non-agent) variants on a loaded fix, filling `result`.
pub(crate) fn classic(
    git: &Git,
    fix: &Fix,
    variant: Variant,
    opts: &Options,
    result: &mut SzzResult,
) -> Result<(), SzzError> {
    let mut notes = Vec::new();
    let impacted = impacted_files(fix, opts, &mut notes);
    let mut filter = LineFilter::new(opts.skip_blank, opts.skip_comments);
    match variant {
        Variant::B => {
            let mut lines = Vec::new();
            for imp in &impacted {
                let flags = BlameFlags {
                    incremental: opts.pyszz_compat,
                    ..Default::default()
                };
                let b = blame_file(git, fix, imp, &flags, None)?;
                lines.extend(b);
            }
            result.candidates = candidates(git, &lines)?;
        }
        Variant::Ag => {
            let (lines, ignored) = ag(git, fix, &impacted, opts, &mut filter, &mut notes)?;
            result.candidates = candidates(git, &lines)?;
            result.ignored = ignored;
        }
        Variant::Ma | Variant::R | Variant::L => {
            let (lines, ignored) = ma(git, fix, &impacted, opts, &mut filter, &mut notes)?;
            result.candidates = candidates(git, &lines)?;
            result.ignored = ignored;
            if variant == Variant::R {
                // max committed_date; the first seen wins a tie
                let best = result
                    .candidates
                    .iter()
                    .enumerate()
                    .max_by_key(|(i, c)| (c.committed, std::cmp::Reverse(*i)))
                    .map(|(_, c)| c.clone());
                result.candidates = best.into_iter().collect();
            } else if variant == Variant::L {
                // strictly more lines than the best so far, starting from 0 (pyszz)
                let mut best: Option<(u64, Candidate)> = None;
                for c in &result.candidates {
                    let n = git.lines_changed(&c.commit)?;
                    if n > best.as_ref().map(|b| b.0).unwrap_or(0) {
                        best = Some((n, c.clone()));
                    }
                }
                result.candidates = best.map(|b| b.1).into_iter().collect();
            }
            if matches!(variant, Variant::R | Variant::L) {
                result.selected = result.candidates.first().map(|c| c.commit.clone());
            }
        }
        Variant::V => {
            v_szz(git, fix, &impacted, opts, &mut filter, &mut notes, result)?;
        }
        Variant::Agent => unreachable!("find_inducing runs the agent variant"),
    }
    notes.extend(filter.notes());
    result.notes.extend(notes);
    Ok(())
}

/// Group blamed lines by commit, in order of first appearance.
pub fn candidates(git: &Git, lines: &[(String, BlameLine)]) -> Result<Vec<Candidate>, SzzError> {
    let mut out: Vec<Candidate> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (path, l) in lines {
        let r = LineRef {
            path: path.clone(),
            line: l.final_line,
            orig_path: l.orig_path.clone(),
            orig_line: l.orig_line,
            content: l.content.clone(),
        };
        match index.get(&l.commit) {
            Some(&i) => out[i].lines.push(r),
            None => {
                let info = git.commit_info(&l.commit)?;
                index.insert(l.commit.clone(), out.len());
                out.push(Candidate {
                    commit: l.commit.clone(),
                    committed: info.committed,
                    subject: info.subject.clone(),
                    lines: vec![r],
                    score: None,
                });
            }
        }
    }
    Ok(out)
}

/// Which lines of a file are comments (by 1-based number), shared by the filter's caches.
type Mask = std::rc::Rc<Vec<bool>>;

/// Comment and blank-line filter over blamed lines, reading the blamed commit's version of
/// the file (cached per commit and path).
pub struct LineFilter {
    skip_blank: bool,
    skip_comments: bool,
    /// commit → path → comment mask (looked up by `&str`: no key built per line).
    masks: HashMap<String, HashMap<String, Mask>>,
    /// The (commit, path) of the line before and its mask (`None`: a path the filter does
    /// not read): consecutive blamed lines mostly share them, so most lines are answered by
    /// two string comparisons instead of two keyed hashes and a lower-cased copy of the path.
    last: Option<(String, String, Option<Mask>)>,
    comments: usize,
    blanks: usize,
}

impl LineFilter {
    pub fn new(skip_blank: bool, skip_comments: bool) -> Self {
        LineFilter {
            skip_blank,
            skip_comments,
            masks: HashMap::new(),
            last: None,
            comments: 0,
            blanks: 0,
        }
    }

    /// True when the line must be dropped.
    pub fn drop(&mut self, git: &Git, l: &BlameLine) -> Result<bool, SzzError> {
        if self.skip_blank && is_blank(&l.content) {
            self.blanks += 1;
            return Ok(true);
        }
        if !self.skip_comments {
            return Ok(false);
        }
        let mask = match &self.last {
            Some((c, p, mask)) if *c == l.commit && *p == l.orig_path => mask.clone(),
            _ => {
                let mask = self.mask(git, l)?;
                self.last = Some((l.commit.clone(), l.orig_path.clone(), mask.clone()));
                mask
            }
        };
        let is_comment = mask.is_some_and(|m| m.get(l.orig_line).copied().unwrap_or(false));
        self.comments += usize::from(is_comment);
        Ok(is_comment)
    }

    /// A comment mask read ahead (kept only if none was read for the pair yet).
    fn prefill(&mut self, commit: String, path: String, mask: Vec<bool>) {
        self.masks
            .entry(commit)
            .or_default()
            .entry(path)
            .or_insert_with(|| std::rc::Rc::new(mask));
    }

    /// The comment mask of the line's commit and path, read from git once per pair (`None`
    /// for a language the filter does not know).
    fn mask(&mut self, git: &Git, l: &BlameLine) -> Result<Option<Mask>, SzzError> {
        if !crate::comments::supported(&l.orig_path) {
            return Ok(None);
        }
        if let Some(mask) = self.masks.get(&l.commit).and_then(|m| m.get(&l.orig_path)) {
            return Ok(Some(mask.clone()));
        }
        let mask = std::rc::Rc::new(match git.file_at(&l.commit, &l.orig_path)? {
            Some(bytes) => comment_lines(&String::from_utf8_lossy(&bytes), &l.orig_path),
            None => Vec::new(),
        });
        self.masks
            .entry(l.commit.clone())
            .or_default()
            .insert(l.orig_path.clone(), mask.clone());
        Ok(Some(mask))
    }

    pub fn notes(&self) -> Vec<String> {
        let mut n = Vec::new();
        if self.comments > 0 {
            n.push(format!("{} blamed comment line(s) dropped", self.comments));
        }
        if self.blanks > 0 {
            n.push(format!("{} blamed blank line(s) dropped", self.blanks));
        }
        n
    }
}

/// Blame one impacted file at `fix^`; with a filter, comment (and blank) lines are dropped.
/// A blame that git refuses is an error of the whole run, never "no candidate": an empty
/// answer would read as "nothing introduced these lines".
fn blame_file(
    git: &Git,
    fix: &Fix,
    imp: &Impacted,
    flags: &BlameFlags,
    filter: Option<&mut LineFilter>,
) -> Result<Vec<(String, BlameLine)>, SzzError> {
    let blame = blame_at_fix_parent(git, fix, imp, flags)?;
    filter_blamed(git, imp, blame.lines, flags, filter)
}

/// The blame of an impacted file's lines at `fix^`.
fn blame_at_fix_parent(
    git: &Git,
    fix: &Fix,
    imp: &Impacted,
    flags: &BlameFlags,
) -> Result<crate::blame::Blame, SzzError> {
    blame_at_fix_parent_then(git, fix, imp, flags, |_| ())
}

/// [`blame_at_fix_parent`], with `glance` shown git's output before it is parsed.
fn blame_at_fix_parent_then(
    git: &Git,
    fix: &Fix,
    imp: &Impacted,
    flags: &BlameFlags,
    glance: impl FnOnce(&std::sync::Arc<String>),
) -> Result<crate::blame::Blame, SzzError> {
    let nums: Vec<usize> = imp.lines.iter().map(|(n, _)| *n).collect();
    let context = |e| match e {
        SzzError::Git { args, stderr } => SzzError::Git {
            args,
            stderr: format!(
                "blaming {:?} at the fix's parent {} failed: {stderr}",
                imp.path,
                short(&fix.parent)
            ),
        },
        other => other,
    };
    let Some(out) = blame_output(git, &fix.parent, &imp.path, &nums, flags).map_err(context)?
    else {
        return Ok(crate::blame::Blame::default());
    };
    let out = std::sync::Arc::new(out);
    glance(&out);
    parse_blame_output(git, &out, &fix.parent, &imp.path, flags).map_err(context)
}

/// Blamed lines of an impacted file, with the fix-side path, less what the filter drops.
fn filter_blamed(
    git: &Git,
    imp: &Impacted,
    lines: Vec<BlameLine>,
    flags: &BlameFlags,
    mut filter: Option<&mut LineFilter>,
) -> Result<Vec<(String, BlameLine)>, SzzError> {
    let mut out = Vec::new();
    let mut seen: HashSet<(String, usize)> = HashSet::new();
    for l in lines {
        if let Some(f) = filter.as_deref_mut() {
            if f.drop(git, &l)? {
                continue;
            }
        }
        // pyszz compatibility: the first line seen per (orig path, orig line) wins
        if flags.incremental && !seen.insert((l.orig_path.clone(), l.orig_line)) {
            continue;
        }
        out.push((imp.path.clone(), l));
    }
    Ok(out)
}

/// pyszz `_exclude_commits_by_change_size`: from `commit` backwards in `git log` order,
/// the consecutive commits that modify more than `max` files (empty when `commit` itself
/// is small).
pub(crate) fn large_commits(git: &Git, commit: &str, max: usize) -> Result<Vec<String>, SzzError> {
    let mut out = Vec::new();
    if git.modified_files(commit)? <= max {
        return Ok(out);
    }
    out.push(commit.to_string());
    let mut skip = 1;
    loop {
        let batch = git.rev_list(commit, skip, 64)?;
        if batch.is_empty() {
            return Ok(out);
        }
        for c in &batch {
            if git.modified_files(c)? > max {
                out.push(c.clone());
            } else {
                return Ok(out);
            }
        }
        skip += batch.len();
    }
}

/// AG-SZZ: `-w` blame with the comment filter, re-run with `--ignore-rev` until no new large
/// commit appears; large commits are then dropped from the answer.
fn ag(
    git: &Git,
    fix: &Fix,
    impacted: &[Impacted],
    opts: &Options,
    filter: &mut LineFilter,
    notes: &mut Vec<String>,
) -> Result<Blamed, SzzError> {
    let start = Instant::now();
    let mut ignore: BTreeSet<String> = BTreeSet::new();
    let mut large_cache: HashMap<String, Vec<String>> = HashMap::new();
    let mut large = |c: &str| -> Result<Vec<String>, SzzError> {
        if let Some(v) = large_cache.get(c) {
            return Ok(v.clone());
        }
        let v = large_commits(git, c, opts.max_change_size)?;
        large_cache.insert(c.to_string(), v.clone());
        Ok(v)
    };
    loop {
        let flags = BlameFlags {
            ignore_whitespace: true,
            ignore_revs: ignore.iter().cloned().collect(),
            incremental: opts.pyszz_compat,
            ..Default::default()
        };
        let mut lines = Vec::new();
        for imp in impacted {
            lines.extend(blame_file(git, fix, imp, &flags, Some(filter))?);
        }
        let mut new: BTreeSet<String> = BTreeSet::new();
        for (_, l) in &lines {
            if !new.contains(&l.commit) && !ignore.contains(&l.commit) {
                new.extend(large(&l.commit)?);
            }
        }
        let done = new.is_empty();
        if !done && start.elapsed() > opts.loop_budget {
            notes.push("AG-SZZ: ignore-rev loop stopped at the time budget".into());
        }
        let stop = done || start.elapsed() > opts.loop_budget;
        ignore.extend(new);
        if stop {
            let mut kept = Vec::new();
            for (p, l) in lines {
                if large(&l.commit)?.is_empty() {
                    kept.push((p, l));
                }
            }
            return Ok((kept, ignore.into_iter().collect()));
        }
    }
}

/// MA-SZZ meta-changes of `commit` for `file` (pyszz `select_meta_changes`): a revert (when
/// enabled), a `mode change` of the file in `git show --summary`, or a rename or copy of the
/// file.
pub(crate) fn is_meta_change(
    git: &Git,
    commit: &str,
    file: &str,
    filter_revert: bool,
) -> Result<bool, SzzError> {
    let info = git.commit_info(commit)?;
    if filter_revert
        && (info.message.starts_with("Revert") || info.message.contains("This reverts commit"))
    {
        return Ok(true);
    }
    let summary = git.run(&[
        "show",
        "--summary",
        "--format=",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--end-of-options",
        commit,
    ])?;
    if summary
        .lines()
        .any(|l| l.trim().starts_with("mode change") && l.contains(file))
    {
        return Ok(true);
    }
    Ok(name_status(git, commit)?
        .iter()
        .any(|f| matches!(f.kind, ChangeKind::Renamed | ChangeKind::Copied) && f.touches(file)))
}

/// MA-SZZ: per file, AG's loop with `-M -C`, also ignoring merge commits and the file's
/// meta-changes.
fn ma(
    git: &Git,
    fix: &Fix,
    impacted: &[Impacted],
    opts: &Options,
    filter: &mut LineFilter,
    notes: &mut Vec<String>,
) -> Result<Blamed, SzzError> {
    let start = Instant::now();
    let mut ignore_all: BTreeSet<String> = BTreeSet::new();
    let mut ignored_report: BTreeSet<String> = BTreeSet::new();
    let mut large_cache: HashMap<String, Vec<String>> = HashMap::new();
    let mut kept = Vec::new();
    for imp in impacted {
        let mut ignore_file = ignore_all.clone();
        let lines = loop {
            let flags = BlameFlags {
                ignore_whitespace: true,
                moves: true,
                copies: opts.copies,
                ignore_revs: ignore_file.iter().cloned().collect(),
                incremental: opts.pyszz_compat,
            };
            let lines = blame_file(git, fix, imp, &flags, Some(filter))?;
            let mut new: BTreeSet<String> = BTreeSet::new();
            let mut new_file: BTreeSet<String> = BTreeSet::new();
            for (_, l) in &lines {
                let c = &l.commit;
                if new.contains(c) || new_file.contains(c) || ignore_file.contains(c) {
                    continue;
                }
                if !large_cache.contains_key(c) {
                    let v = large_commits(git, c, opts.max_change_size)?;
                    large_cache.insert(c.clone(), v);
                }
                new.extend(large_cache[c].iter().cloned());
                if git.commit_info(c)?.is_merge() {
                    new.insert(c.clone());
                }
                if is_meta_change(git, c, &l.orig_path, opts.filter_revert)? {
                    new_file.insert(c.clone());
                }
            }
            let done = new.is_empty() && new_file.is_empty();
            let over = start.elapsed() > opts.loop_budget;
            if !done && over {
                notes.push(format!(
                    "MA-SZZ: {}: ignore-rev loop stopped at the time budget",
                    imp.path
                ));
            }
            ignore_all.extend(new);
            ignore_file.extend(ignore_all.iter().cloned());
            ignore_file.extend(new_file);
            if done || over {
                break lines;
            }
        };
        ignored_report.extend(ignore_file.iter().cloned());
        for (p, l) in lines {
            let big = match large_cache.get(&l.commit) {
                Some(v) => !v.is_empty(),
                None => !large_commits(git, &l.commit, opts.max_change_size)?.is_empty(),
            };
            if !big {
                kept.push((p, l));
            }
        }
    }
    Ok((kept, ignored_report.into_iter().collect()))
}

/// V-SZZ's similarity: `Levenshtein.ratio` (indel distance) of the two lines with all
/// whitespace removed.
pub(crate) fn line_ratio(a: &str, b: &str) -> f64 {
    ratio_chars(&strip_ws(a), &strip_ws(b))
}

fn strip_ws(s: &str) -> Vec<char> {
    // (sized for the text at once: a filter gives `collect` no size to start from, and a
    // line's vector would grow four times)
    let mut out = Vec::with_capacity(s.len());
    out.extend(s.chars().filter(|c| !c.is_whitespace()));
    out
}

/// [`line_ratio`] of lines already stripped of whitespace.
fn ratio_chars(a: &[char], b: &[char]) -> f64 {
    let total = a.len() + b.len();
    if total == 0 {
        return 1.0;
    }
    if b.len() <= 64 {
        return 2.0 * lcs_bits(a, b) as f64 / total as f64;
    }
    ratio_dp(a, b)
}

/// The length of the longest common subsequence of `a` and `b` (at most 64 characters),
/// bit-parallel (Hyyrö 2004): one word operation per character of `a` instead of a row of
/// the table.
fn lcs_bits(a: &[char], b: &[char]) -> usize {
    Pattern::new(b).map_or(0, |p| p.lcs(a))
}

/// A text of at most 64 characters as the bit masks of where each character occurs: the
/// part of [`lcs_bits`] that depends on that text only, built once for a text compared with
/// many lines.
struct Pattern {
    ascii: [u64; 128],
    other: Vec<(char, u64)>,
    len: usize,
}

impl Pattern {
    /// `None` for an empty text or one longer than 64 characters.
    fn new(b: &[char]) -> Option<Pattern> {
        if b.is_empty() || b.len() > 64 {
            return None;
        }
        let mut p = Pattern {
            ascii: [0u64; 128],
            other: Vec::new(),
            len: b.len(),
        };
        for (j, &c) in b.iter().enumerate() {
            match usize::try_from(u32::from(c)).ok().filter(|u| *u < 128) {
                Some(u) => p.ascii[u] |= 1 << j,
                None => match p.other.iter_mut().find(|(x, _)| *x == c) {
                    Some((_, bits)) => *bits |= 1 << j,
                    None => p.other.push((c, 1 << j)),
                },
            }
        }
        Some(p)
    }

    /// The length of the longest common subsequence of this text and `a` (of any length).
    fn lcs(&self, a: &[char]) -> usize {
        let m = self.len;
        let mask = if m == 64 { u64::MAX } else { (1u64 << m) - 1 };
        let mut v = u64::MAX;
        for &c in a {
            let pm = match usize::try_from(u32::from(c)).ok().filter(|u| *u < 128) {
                Some(u) => self.ascii[u],
                None => self
                    .other
                    .iter()
                    .find(|(x, _)| *x == c)
                    .map_or(0, |(_, b)| *b),
            };
            let u = v & pm;
            v = v.wrapping_add(u) | v.wrapping_sub(u);
        }
        m - (v & mask).count_ones() as usize
    }
}

/// [`ratio_chars`] by the dynamic-programming table (any length).
fn ratio_dp(a: &[char], b: &[char]) -> f64 {
    let total = a.len() + b.len();
    if total == 0 {
        return 1.0;
    }
    // LCS by dynamic programming; ratio = 2·LCS / (|a| + |b|)
    let mut prev = vec![0u32; b.len() + 1];
    let mut cur = vec![0u32; b.len() + 1];
    for ca in a {
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = if ca == cb {
                prev[j] + 1
            } else {
                prev[j + 1].max(cur[j])
            };
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    2.0 * prev[b.len()] as f64 / total as f64
}

/// One deleted line, ready to compare: its old-side number and where its text, stripped of
/// whitespace, is among the change's characters ([`FileDeleted::text`]).
struct Deleted {
    line: usize,
    start: usize,
    end: usize,
}

/// Deleted lines with their texts stripped of whitespace into one vector of characters
/// (one allocation for all of them, not one a line).
/// `room`: lines and characters to make room for (the first of two halves makes room for
/// both, so that the second is appended without moving the first).
fn deleted_lines<S: AsRef<str>>(
    deleted: &[(usize, S)],
    room: (usize, usize),
) -> (Vec<Deleted>, Vec<char>) {
    let mut chars = Vec::with_capacity(room.1);
    let mut lines = Vec::with_capacity(room.0);
    lines.extend(deleted.iter().map(|(n, t)| {
        let start = chars.len();
        chars.extend(t.as_ref().chars().filter(|c| !c.is_whitespace()));
        Deleted {
            line: *n,
            start,
            end: chars.len(),
        }
    }));
    (lines, chars)
}

/// Character counts in 16 buckets (by the low four bits: the ten digits apart): 32 bytes a
/// line, read before the line's [`Hist`]. Summing the smaller count of each bucket bounds the
/// characters two texts share from above, as the finer histogram does, only more loosely.
type Coarse = [u16; 16];

fn coarse(chars: &[char]) -> Coarse {
    if chars.len() > usize::from(u16::MAX) {
        // counts that cannot overflow bound nothing
        return [u16::MAX; 16];
    }
    let mut k = [0u16; 16];
    for &c in chars {
        k[(u32::from(c) & 15) as usize] += 1;
    }
    k
}

fn coarse_common(a: &Coarse, b: &Coarse) -> usize {
    a.iter().zip(b).map(|(x, y)| usize::from(*x.min(y))).sum()
}

/// Character counts: ASCII one by one, everything else in one bucket.
#[derive(Clone)]
struct Hist {
    ascii: [u16; 128],
    other: u32,
}

impl Hist {
    fn of(chars: &[char]) -> Hist {
        let mut h = Hist {
            ascii: [0; 128],
            other: 0,
        };
        for c in chars {
            match usize::try_from(u32::from(*c)).ok().filter(|u| *u < 128) {
                Some(u) => h.ascii[u] = h.ascii[u].saturating_add(1),
                None => h.other += 1,
            }
        }
        h
    }
}

/// The deleted lines of one commit's change of one path, in order, where each distinct
/// text occurs, and which lines hold each 4-gram (and, when asked, 3-gram) of characters.
struct FileDeleted {
    lines: Vec<Deleted>,
    /// The lines' texts, stripped of whitespace, one after the other.
    chars: Vec<char>,
    /// Each line's [`coarse`] counts, side by side: the first bound tried on a candidate.
    coarse: Vec<Coarse>,
    /// Identical texts, found without a key allocated per line.
    exact: Exact,
    /// 4-gram → the lines holding it: rarer than 3-grams, so fewer lines to count.
    grams: Grams,
    /// 3-gram → the lines holding it, built once [`GRAMS3_AFTER`] texts were too short (or
    /// too far from their best line) for 4-grams to narrow the search: until then such a
    /// text is compared with every line, which is cheaper than the index for a few texts.
    grams3: std::sync::OnceLock<Grams>,
    /// Texts that 4-grams could not narrow so far.
    unnarrowed: std::sync::atomic::AtomicUsize,
    /// [`GRAMS3_AFTER`], or 0 in tests (to exercise the 3-gram filter on one text).
    grams3_after: usize,
}

/// Where each distinct text occurs, as a table of keyed hashes (of the UTF-8 text) to the
/// first line holding it, and a chain from each line to the next with the same hash: one
/// table entry per distinct text and no string kept per line. A look-up compares the text
/// itself, so a hash collision only lengthens a chain; the keys are random per process, so
/// a file cannot be made to collide.
struct Exact {
    hasher: std::collections::hash_map::RandomState,
    first: HashMap<u64, u32, std::hash::BuildHasherDefault<Prehashed>>,
    /// The next line with the same hash, or `u32::MAX`.
    next: Vec<u32>,
}

impl Exact {
    fn new<'a>(lines: impl ExactSizeIterator<Item = &'a [char]>) -> Exact {
        let hasher = std::collections::hash_map::RandomState::new();
        let n = lines.len();
        let mut hashes = Vec::with_capacity(n);
        let mut text = String::new();
        for chars in lines {
            text.clear();
            text.extend(chars);
            hashes.push(std::hash::BuildHasher::hash_one(&hasher, text.as_str()));
        }
        let mut first: HashMap<u64, u32, _> = HashMap::default();
        first.reserve(n);
        let mut next = vec![u32::MAX; n];
        // from the last line back, so that each chain runs in ascending line order
        for (i, h) in hashes.into_iter().enumerate().rev() {
            if let Some(prev) = first.insert(h, i as u32) {
                next[i] = prev;
            }
        }
        Exact {
            hasher,
            first,
            next,
        }
    }

    /// The lines whose text is `text`, ascending; `equal(i)`: whether line `i` holds it.
    fn same<'a>(
        &'a self,
        text: &str,
        equal: impl Fn(usize) -> bool + 'a,
    ) -> impl Iterator<Item = usize> + 'a {
        let h = std::hash::BuildHasher::hash_one(&self.hasher, text);
        let mut at = self.first.get(&h).copied().unwrap_or(u32::MAX);
        std::iter::from_fn(move || {
            while at != u32::MAX {
                let i = at as usize;
                at = self.next[i];
                if equal(i) {
                    return Some(i);
                }
            }
            None
        })
    }
}

/// A hasher for keys that are already keyed hashes: the key is the hash.
#[derive(Default)]
struct Prehashed(u64);

impl std::hash::Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // (only `u64` keys are hashed: this keeps any other key correct, if slower)
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Texts compared with every line before a 3-gram index of the lines is built: building it
/// costs about as much as comparing a few hundred texts with every line.
const GRAMS3_AFTER: usize = 64;

type DeletedLines = Option<FileDeleted>;

/// A candidate's rank: higher ratio, then nearer, then earlier in the change.
type Ranked = (f64, usize, usize); // (ratio, distance, index)

fn outranks(a: Ranked, b: Ranked) -> bool {
    a.0 > b.0 || (a.0 == b.0 && (a.1 < b.1 || (a.1 == b.1 && a.2 < b.2)))
}

impl FileDeleted {
    fn new<S: AsRef<str> + Sync>(
        deleted: &[(usize, S)],
        threads: std::num::NonZeroUsize,
    ) -> FileDeleted {
        // Two halves on two threads when the change is large: the parts are independent,
        // and a rewrite of a 40,000-line file spends tens of milliseconds here.
        let split = threads.get() > 1 && deleted.len() >= 2 * LINES_PER_THREAD;
        let bytes = |d: &[(usize, S)]| d.iter().map(|(_, t)| t.as_ref().len()).sum::<usize>();
        let (lines, chars) = if split {
            let (a, b) = deleted.split_at(deleted.len() / 2);
            std::thread::scope(|s| {
                let second = s.spawn(|| deleted_lines(b, (b.len(), bytes(b))));
                let (mut lines, mut chars) = deleted_lines(a, (deleted.len(), bytes(deleted)));
                let (more, more_chars) = joined(second.join());
                let at = chars.len();
                lines.extend(more.into_iter().map(|d| Deleted {
                    line: d.line,
                    start: d.start + at,
                    end: d.end + at,
                }));
                chars.extend_from_slice(&more_chars);
                (lines, chars)
            })
        } else {
            deleted_lines(deleted, (deleted.len(), bytes(deleted)))
        };
        let texts = || lines.iter().map(|l| &chars[l.start..l.end]);
        let grams4 = || Grams::new_on(4, texts(), threads);
        let rest = || {
            let exact = Exact::new(texts());
            let coarse: Vec<Coarse> = texts().map(coarse).collect();
            (exact, coarse)
        };
        let (grams, (exact, coarse)) = if split {
            std::thread::scope(|s| {
                let r = s.spawn(rest);
                let g = grams4();
                (g, joined(r.join()))
            })
        } else {
            (grams4(), rest())
        };
        FileDeleted {
            lines,
            chars,
            coarse,
            exact,
            grams,
            grams3: Default::default(),
            unnarrowed: Default::default(),
            grams3_after: GRAMS3_AFTER,
        }
    }

    /// Line `i`'s text, stripped of whitespace.
    fn text(&self, i: usize) -> &[char] {
        let d = &self.lines[i];
        &self.chars[d.start..d.end]
    }

    /// The deleted line most similar to `text` (ties: nearest to `line`, then first), if
    /// its ratio exceeds 0.75: the answer of comparing `text` with every line, found faster.
    /// An identical line (ratio 1, the maximum) is looked up. Otherwise the lines nearest to
    /// `line` are compared first, which sets a ratio `t` the answer must reach; a line that
    /// reaches it is within `D` insertions and deletions of `text`, so it holds one of any
    /// `Q·D + 1` of `text`'s Q-grams (each edit breaks at most `Q`): only the lines holding
    /// one of the rarest such grams are compared. A line whose length or character counts
    /// bound its ratio below the best so far (or the threshold) is skipped.
    ///
    /// `scratch`: tables the caller keeps between calls (the tally all zeros between them), so that
    /// threads can share one `FileDeleted`.
    fn best(&self, text: &str, line: usize, scratch: &mut Scratch) -> Option<usize> {
        // (the text stripped, in the caller's buffers: two allocations a line fewer)
        let mut stripped = std::mem::take(&mut scratch.text);
        let mut a = std::mem::take(&mut scratch.chars);
        stripped.clear();
        a.clear();
        for c in text.chars().filter(|c| !c.is_whitespace()) {
            stripped.push(c);
            a.push(c);
        }
        let found = self.best_stripped(&stripped, &a, line, scratch);
        scratch.text = stripped;
        scratch.chars = a;
        found
    }

    /// [`FileDeleted::best`] of a text stripped of whitespace (`a`, its characters).
    fn best_stripped(
        &self,
        stripped: &str,
        a: &[char],
        line: usize,
        scratch: &mut Scratch,
    ) -> Option<usize> {
        if let Some(same) = self
            .exact
            .same(stripped, |i| self.text(i) == a)
            .map(|i| self.lines[i].line)
            .min_by_key(|n| n.abs_diff(line))
        {
            return Some(same);
        }
        let ka = coarse(a);
        // `a` as bit masks, once for every line it is compared with (LCS is symmetric)
        let pattern = Pattern::new(a);
        // Without them (a text over 64 characters) the LCS is a table, quadratic: a finer
        // bound first, from both texts' character counts. With them, the LCS costs about
        // what counting a line's characters would, so the bound would save nothing.
        let fine = pattern.is_none().then(|| {
            // the ASCII characters `a` holds, each once: the bound sums over these only
            // (the same sum)
            let mut seen = 0u128;
            let present: Vec<usize> = a
                .iter()
                .filter_map(|&c| usize::try_from(u32::from(c)).ok().filter(|u| *u < 128))
                .filter(|&u| {
                    let new = seen & (1 << u) == 0;
                    seen |= 1 << u;
                    new
                })
                .collect();
            (Hist::of(a), present)
        });
        let common = |(ha, present): &(Hist, Vec<usize>), h: &Hist| -> usize {
            present
                .iter()
                .map(|&c| usize::from(ha.ascii[c].min(h.ascii[c])))
                .sum::<usize>()
                + ha.other.min(h.other) as usize
        };
        let mut best: Option<Ranked> = None;
        let consider = |i: usize, best: &mut Option<Ranked>| {
            let (d, dc) = (&self.lines[i], self.text(i));
            let total = a.len() + dc.len();
            let bound = |common: usize| {
                if total == 0 {
                    1.0
                } else {
                    2.0 * common as f64 / total as f64
                }
            };
            let cannot = |b: f64| b <= 0.75 || best.is_some_and(|(br, _, _)| b < br);
            // (a bound only skips a line that cannot be the answer: below the threshold or
            // the best so far, as its ratio would be)
            if cannot(bound(a.len().min(dc.len())))
                || cannot(bound(coarse_common(&ka, &self.coarse[i])))
            {
                return;
            }
            let ratio = match (&pattern, &fine) {
                (Some(p), _) => 2.0 * p.lcs(dc) as f64 / total as f64,
                (None, Some(fine)) => {
                    if cannot(bound(common(fine, &Hist::of(dc)))) {
                        return;
                    }
                    ratio_chars(a, dc)
                }
                (None, None) => ratio_chars(a, dc),
            };
            let r = (ratio, d.line.abs_diff(line), i);
            if best.is_none_or(|b| outranks(r, b)) {
                *best = Some(r);
            }
        };
        // the lines nearest to `line` first: in a rewrite, usually the answer
        let at = self.lines.partition_point(|d| d.line < line);
        let mut near = [0usize; 4];
        let mut k = 0;
        for i in at.saturating_sub(2)..(at + 2).min(self.lines.len()) {
            near[k] = i;
            k += 1;
        }
        near[..k].sort_by_key(|&i| self.lines[i].line.abs_diff(line));
        for &i in &near[..k] {
            consider(i, &mut best);
        }
        // the posting lists of `a`'s 4-grams, in the order of their positions in `a`
        let at_pos = self.grams.at_positions(a);
        let t = |best: Option<Ranked>| best.map_or(0.75, |b| b.0.max(0.75));
        let mut narrowed = self.narrow(a, &at_pos, t(best), scratch);
        if narrowed.is_none() {
            // a few lines sharing its rarest grams (where an edited line moved) may set a
            // ratio high enough to narrow the search
            let lists = rarest_first(&at_pos);
            for &i in lists.iter().flat_map(|l| l.iter()).take(16) {
                consider(i as usize, &mut best);
            }
            narrowed = self.narrow(a, &at_pos, t(best), scratch);
        }
        match narrowed {
            Some(c) => c.into_iter().for_each(|i| consider(i as usize, &mut best)),
            None => (0..self.lines.len()).for_each(|i| consider(i, &mut best)),
        }
        best.filter(|b| b.0 > 0.75).map(|b| self.lines[b.2].line)
    }

    /// The lines that can reach ratio `t` with `a` (a superset), or `None` when nothing
    /// narrows the search. Tried in order of cost: disjoint 4-grams
    /// ([`FileDeleted::disjoint`]), the count of 4-grams ([`FileDeleted::candidates`]), then
    /// both with 3-grams, which narrow the search for shorter texts and more edits (each edit
    /// breaks fewer of them). `at_pos`: the lines holding each of `a`'s 4-grams, by position.
    fn narrow(
        &self,
        a: &[char],
        at_pos: &[&[u32]],
        t: f64,
        scratch: &mut Scratch,
    ) -> Option<Vec<u32>> {
        let d_max = max_edits(a.len(), t);
        self.disjoint(4, at_pos, d_max, scratch)
            .or_else(|| self.candidates(4, a, &rarest_first(at_pos), t, scratch))
            .or_else(|| {
                use std::sync::atomic::Ordering;
                if self.grams3.get().is_none()
                    && self.unnarrowed.fetch_add(1, Ordering::Relaxed) < self.grams3_after
                {
                    return None;
                }
                let g3 = self
                    .grams3
                    .get_or_init(|| Grams::new(3, (0..self.lines.len()).map(|i| self.text(i))));
                let at_pos3 = g3.at_positions(a);
                self.disjoint(3, &at_pos3, d_max, scratch)
                    .or_else(|| self.candidates(3, a, &rarest_first(&at_pos3), t, scratch))
            })
    }

    /// The lines holding one of `d_max + 1` of `a`'s `q`-grams that do not overlap in `a`,
    /// chosen with the fewest lines in all (or `None` when they do not fit in `a`, or hold
    /// more than half the lines). A line within `d_max` insertions and deletions of `a`
    /// holds one of them: a deletion breaks at most one of the disjoint grams, an insertion
    /// splits at most one, so at least one is left whole.
    fn disjoint(
        &self,
        q: usize,
        at_pos: &[&[u32]],
        d_max: usize,
        scratch: &mut Scratch,
    ) -> Option<Vec<u32>> {
        let need = d_max.checked_add(1)?;
        let m = at_pos.len();
        // `need` grams `q` apart fit when the last can start at (need - 1)·q < m
        if need.checked_sub(1)?.checked_mul(q)? >= m {
            return None;
        }
        // cost[j·m + p]: the fewest lines of j + 1 disjoint grams, the last one at p
        // (`from[j·m + p]`: where the one before it is)
        let w = |p: usize| at_pos[p].len();
        let Scratch {
            count, cost, from, ..
        } = scratch;
        cost.clear();
        cost.resize(need * m, usize::MAX);
        from.clear();
        from.resize(need * m, 0);
        for (c, l) in cost.iter_mut().zip(at_pos) {
            *c = l.len();
        }
        for j in 1..need {
            // the cheapest earlier gram ending before p (prefix minimum over p - q)
            let mut best: Option<(usize, usize)> = None;
            for p in (j * q)..m {
                let e = p - q;
                let pc = cost[(j - 1) * m + e];
                if pc != usize::MAX && best.is_none_or(|(bc, _)| pc < bc) {
                    best = Some((pc, e));
                }
                if let Some((bc, bp)) = best {
                    cost[j * m + p] = bc + w(p);
                    from[j * m + p] = bp;
                }
            }
        }
        let (total, mut p) = cost[(need - 1) * m..]
            .iter()
            .enumerate()
            .filter(|(_, c)| **c != usize::MAX)
            .map(|(p, c)| (*c, p))
            .min()?;
        if total > self.lines.len() / 2 {
            return None;
        }
        if count.len() < self.lines.len() {
            count.resize(self.lines.len(), 0);
        }
        let mut c = Vec::with_capacity(total);
        for j in (0..need).rev() {
            for &i in at_pos[p] {
                if count[i as usize] == 0 {
                    count[i as usize] = 1;
                    c.push(i);
                }
            }
            p = from[j * m + p];
        }
        for &i in &c {
            count[i as usize] = 0;
        }
        Some(c)
    }

    /// The lines that can reach ratio `t` with `a` (a superset, ascending), or `None` when
    /// the grams cannot narrow the search (then every line is a candidate). `lists`: the
    /// lines holding each of `a`'s `q`-grams, rarest first.
    ///
    /// Of any `k` of `a`'s gram positions, at most `q·D` are broken by `D` edits, so a line
    /// within `D` edits holds the grams of at least `k - q·D` of them: the `k` rarest are
    /// taken (as many as stay cheap, at least `q·D + 1`) and lines with fewer hits dropped.
    fn candidates(
        &self,
        q: usize,
        a: &[char],
        lists: &[&[u32]],
        t: f64,
        scratch: &mut Scratch,
    ) -> Option<Vec<u32>> {
        if a.len() < q {
            return None;
        }
        let d_max = max_edits(a.len(), t);
        let broken = q.checked_mul(d_max)?;
        let need = broken.checked_add(1)?;
        // (the tally below counts to `k` ≤ u16::MAX)
        if need > lists.len() || need > usize::from(u16::MAX) {
            return None;
        }
        let base: usize = lists[..need].iter().map(|l| l.len()).sum();
        if base > self.lines.len() / 2 {
            return None;
        }
        let budget = (4 * base).max(64).min(self.lines.len() / 2);
        let mut k = need;
        let mut total = base;
        while k < lists.len().min(usize::from(u16::MAX)) && total + lists[k].len() <= budget {
            total += lists[k].len();
            k += 1;
        }
        let hits = k - broken;
        // hits per line, counted in a scratch table that is all zeros between calls
        let count = &mut scratch.count;
        if count.len() < self.lines.len() {
            count.resize(self.lines.len(), 0);
        }
        let mut c = Vec::new();
        for l in &lists[..k] {
            for &i in *l {
                let n = &mut count[i as usize];
                *n += 1;
                if usize::from(*n) == hits {
                    c.push(i);
                }
            }
        }
        for l in &lists[..k] {
            for &i in *l {
                count[i as usize] = 0;
            }
        }
        Some(c)
    }
}

/// Tables one mapping thread reuses from line to line instead of allocating them per line.
#[derive(Default)]
struct Scratch {
    /// The text compared, stripped of whitespace, and its characters.
    text: String,
    chars: Vec<char>,
    /// A tally per deleted line, all zeros between calls.
    count: Vec<u16>,
    /// [`FileDeleted::disjoint`]'s table of costs and where each came from.
    cost: Vec<usize>,
    from: Vec<usize>,
}

/// Which lines hold each q-gram, as one table sorted by gram: built by one sort instead of
/// a hash map entry per gram occurrence, looked up by binary search (and no hash an
/// adversarial file could make collide; std's keyed hash was slower here).
struct Grams {
    q: usize,
    /// The distinct grams, ascending ([`gram_key`]).
    keys: Vec<u64>,
    /// `lines[starts[i]..starts[i + 1]]` hold `keys[i]`.
    starts: Vec<u32>,
    /// Line indices, ascending within each gram, each line once.
    lines: Vec<u32>,
    /// For a large table: where the grams whose first two characters are `(a, b)` (both
    /// ASCII as the key holds them) begin among `keys`, at `a·128 + b` (the end of the last
    /// at 128·128): a look-up searches that stretch, not the whole table.
    pairs: Option<Vec<u32>>,
}

/// Grams from which a table is worth its pair index (128·128 entries, 64 KiB).
const PAIRS_FROM: usize = 4096;

/// Sort `(gram, line)` pairs by gram, keeping the order of equal grams (LSD radix, a byte
/// at a time, skipping the bytes every gram shares, as the high byte of each ASCII
/// character): a few passes over the pairs instead of a comparison sort of a million.
fn sort_by_key_stable(v: &mut Vec<(u64, u32)>) {
    let mut counts = [[0usize; 256]; 8];
    for &(k, _) in v.iter() {
        for (b, c) in counts.iter_mut().enumerate() {
            c[((k >> (8 * b)) & 0xff) as usize] += 1;
        }
    }
    let mut tmp = vec![(0u64, 0u32); v.len()];
    for (b, c) in counts.iter().enumerate() {
        if c.contains(&v.len()) {
            continue;
        }
        let mut at = [0usize; 256];
        let mut sum = 0;
        for (a, n) in at.iter_mut().zip(c) {
            *a = sum;
            sum += n;
        }
        for &e in v.iter() {
            let d = ((e.0 >> (8 * b)) & 0xff) as usize;
            tmp[at[d]] = e;
            at[d] += 1;
        }
        std::mem::swap(v, &mut tmp);
    }
}

/// An ASCII gram as one number, 7 bits a character (the first highest): ordered as its
/// [`gram_key`] is.
fn ascii_key(w: &[char]) -> u64 {
    w.iter()
        .fold(0u64, |k, &c| (k << 7) | u64::from(u32::from(c) & 0x7f))
}

/// The [`gram_key`] of the `q`-character gram whose [`ascii_key`] is `k`.
fn widen_ascii_key(k: u64, q: usize) -> u64 {
    (0..q).fold(0u64, |w, i| {
        let c = (k >> (7 * (q - 1 - i))) & 0x7f;
        (w << 16) | c
    })
}

/// The numbers of two ascending slices, in ascending order.
struct Merged<'a> {
    a: &'a [u64],
    b: &'a [u64],
}

impl<'a> Merged<'a> {
    fn new(a: &'a [u64], b: &'a [u64]) -> Merged<'a> {
        Merged { a, b }
    }
}

impl Iterator for Merged<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let take_b = match (self.a.first(), self.b.first()) {
            (Some(x), Some(y)) => y < x,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        let side = if take_b { &mut self.b } else { &mut self.a };
        let (&x, rest) = side.split_first()?;
        *side = rest;
        Some(x)
    }
}

/// Sort numbers by their bits from 32 to `32 + bits`, keeping the order of equal ones (LSD
/// radix, 11 bits a pass, skipping a digit every number shares). The low 32 bits ride along.
fn radix_sort_high(v: &mut Vec<u64>, bits: u32) {
    const DIGIT: u32 = 11;
    let passes = bits.div_ceil(DIGIT) as usize;
    let mut counts = vec![[0usize; 1 << DIGIT]; passes];
    let digit = |x: u64, p: usize| ((x >> (32 + DIGIT * p as u32)) & ((1 << DIGIT) - 1)) as usize;
    for &x in v.iter() {
        for (p, c) in counts.iter_mut().enumerate() {
            c[digit(x, p)] += 1;
        }
    }
    let mut tmp = vec![0u64; v.len()];
    for (p, c) in counts.iter().enumerate() {
        if c.contains(&v.len()) {
            continue;
        }
        let mut at = [0usize; 1 << DIGIT];
        let mut sum = 0;
        for (a, n) in at.iter_mut().zip(c) {
            *a = sum;
            sum += n;
        }
        for &x in v.iter() {
            let d = digit(x, p);
            tmp[at[d]] = x;
            at[d] += 1;
        }
        std::mem::swap(v, &mut tmp);
    }
}

/// Posting lists, rarest first.
fn rarest_first<'a>(at_pos: &[&'a [u32]]) -> Vec<&'a [u32]> {
    let mut lists = at_pos.to_vec();
    lists.sort_by_key(|l| l.len());
    lists
}

/// The most insertions and deletions that leave a ratio of at least `t` with a text of `len`
/// characters: ratio ≥ t bounds the other length to len·(2-t)/t, and the edits to
/// (1-t)·(len + other).
fn max_edits(len: usize, t: f64) -> usize {
    ((1.0 - t) * 2.0 * len as f64 / t + 1e-9).floor() as usize
}

/// A gram as one number, 16 bits a character: exact for the Basic Multilingual Plane;
/// characters beyond it are folded, so two grams may share a key, which only adds lines to
/// a posting list (the filter stays a superset: the answer does not change).
fn gram_key(w: &[char]) -> u64 {
    w.iter().fold(0u64, |k, &c| {
        let c = u32::from(c);
        (k << 16) | u64::from((c ^ (c >> 16)) & 0xffff)
    })
}

impl Grams {
    fn new<'a>(q: usize, lines: impl Iterator<Item = &'a [char]>) -> Grams {
        Grams::new_on(q, lines, std::num::NonZeroUsize::MIN)
    }

    /// [`Grams::new`], the ASCII table of many lines sorted in two halves on two threads.
    fn new_on<'a>(
        q: usize,
        lines: impl Iterator<Item = &'a [char]>,
        threads: std::num::NonZeroUsize,
    ) -> Grams {
        let lines: Vec<&[char]> = lines.collect();
        let n: usize = lines.iter().map(|l| (l.len() + 1).saturating_sub(q)).sum();
        let ascii = |l: &&[char]| l.iter().all(|c| c.is_ascii());
        if q <= 4 && lines.iter().all(ascii) {
            // ASCII grams (most source text): 7 bits a character, so a gram and its line
            // pack into one u64, half the bytes the radix sort moves
            let sorted = |from: usize, part: &[&[char]]| {
                let size = part.iter().map(|l| (l.len() + 1).saturating_sub(q)).sum();
                let mut packed: Vec<u64> = Vec::with_capacity(size);
                for (i, chars) in part.iter().enumerate() {
                    let i = (from + i) as u64;
                    packed.extend(chars.windows(q).map(|w| (ascii_key(w) << 32) | i));
                }
                radix_sort_high(&mut packed, 7 * q as u32);
                packed
            };
            let widen = |p: u64| (widen_ascii_key(p >> 32, q), p as u32);
            if threads.get() > 1 && lines.len() >= 2 * LINES_PER_THREAD {
                let (a, b) = lines.split_at(lines.len() / 2);
                let (a, b) = std::thread::scope(|s| {
                    let second = s.spawn(|| sorted(a.len(), b));
                    (sorted(0, a), joined(second.join()))
                });
                // (every line of the second half comes after the first's: merged by value,
                // (gram, line) pairs keep the order one sort of all of them gives; read as
                // they are merged, not stored again)
                let mut merged = Merged::new(&a, &b);
                let mut last = None;
                let pairs = std::iter::from_fn(|| loop {
                    let p = merged.next()?;
                    if last != Some(p) {
                        last = Some(p);
                        return Some(widen(p));
                    }
                });
                return Grams::of_sorted(q, a.len() + b.len(), pairs);
            }
            let mut packed = sorted(0, &lines);
            packed.dedup();
            return Grams::of_sorted(q, packed.len(), packed.iter().map(|p| widen(*p)));
        }
        let mut pairs: Vec<(u64, u32)> = Vec::with_capacity(n);
        for (i, chars) in lines.into_iter().enumerate() {
            pairs.extend(chars.windows(q).map(|w| (gram_key(w), i as u32)));
        }
        sort_by_key_stable(&mut pairs);
        pairs.dedup();
        Grams::of_sorted(q, pairs.len(), pairs.into_iter())
    }

    /// The table of `n` (gram, line) pairs sorted by gram, then line, without duplicates.
    fn of_sorted(q: usize, n: usize, pairs: impl Iterator<Item = (u64, u32)>) -> Grams {
        let mut g = Grams {
            q,
            keys: Vec::new(),
            starts: Vec::new(),
            lines: Vec::with_capacity(n),
            pairs: None,
        };
        for (k, i) in pairs {
            if g.keys.last() != Some(&k) {
                g.keys.push(k);
                g.starts.push(g.lines.len() as u32);
            }
            g.lines.push(i);
        }
        g.starts.push(g.lines.len() as u32);
        if g.keys.len() >= PAIRS_FROM {
            g.index_pairs();
        }
        g
    }

    /// Build [`Grams::pairs`] (one pass over the sorted keys).
    fn index_pairs(&mut self) {
        if self.q < 2 {
            return;
        }
        let mut pairs = Vec::with_capacity(128 * 128 + 1);
        let mut k = 0;
        for pair in 0..=128 * 128u64 {
            let first = ((pair / 128) << 16) | (pair % 128);
            while k < self.keys.len() && self.pair(self.keys[k]) < first {
                k += 1;
            }
            pairs.push(k as u32);
        }
        self.pairs = Some(pairs);
    }

    /// A key's first two characters, as one number (16 bits each, the first high).
    fn pair(&self, key: u64) -> u64 {
        key >> (16 * (self.q - 2))
    }

    /// The lines holding each of `a`'s grams, in the order of the grams in `a`.
    fn at_positions(&self, a: &[char]) -> Vec<&[u32]> {
        a.windows(self.q).map(|w| self.lines(w)).collect()
    }

    /// The lines holding the gram `w` (empty when none does).
    fn lines(&self, w: &[char]) -> &[u32] {
        let key = gram_key(w);
        let (a, b) = (self.pair(key) >> 16, self.pair(key) & 0xffff);
        let (lo, hi) = match &self.pairs {
            Some(p) if a < 128 && b < 128 => {
                let at = (a * 128 + b) as usize;
                (p[at] as usize, p[at + 1] as usize)
            }
            _ => (0, self.keys.len()),
        };
        match self.keys[lo..hi].binary_search(&key) {
            Ok(i) => {
                let i = lo + i;
                &self.lines[self.starts[i] as usize..self.starts[i + 1] as usize]
            }
            Err(_) => &[],
        }
    }
}

/// V-SZZ's per-file mappings, computed once per (commit, path): a fix that deletes 40,000
/// lines of one file asks git for that file's change once, not once per line.
#[derive(Default)]
pub struct MapCache {
    /// commit → path → its deleted lines (looked up by `&str`, no key built per line).
    files: HashMap<String, HashMap<String, DeletedLines>>,
}

impl MapCache {
    /// Read `commit`'s change of `path` unless it was read before.
    /// `walks`: how many walks go through this change (a large share of its deleted lines
    /// has the parent blamed ahead, into `ahead`).
    fn load(
        &mut self,
        git: &Git,
        commit: &str,
        path: &str,
        walks: usize,
        threads: std::num::NonZeroUsize,
        ahead: &mut BlameAhead,
    ) -> Result<(), SzzError> {
        if self.get(commit, path).is_none() {
            let files = name_status(git, commit)?;
            let v = match files.iter().find(|f| f.blame_path() == path) {
                Some(f) if f.kind != ChangeKind::Added && f.old_path.is_some() => {
                    match file_diff(git, commit, f, 0)? {
                        Some(d) => {
                            // (the lines' text borrowed from the diff, not copied)
                            let deleted: Vec<(usize, &str)> = d
                                .hunks
                                .iter()
                                .flat_map(|h| h.deleted())
                                .filter_map(|l| l.old.map(|n| (n, l.text.as_str())))
                                .collect();
                            if walks >= BLAME_AHEAD_FROM && 2 * walks >= deleted.len() {
                                // (cached: `file_diff` read it)
                                if let Some(parent) = git.commit_info(commit)?.parents.first() {
                                    let lines = deleted.iter().map(|(n, _)| *n).collect();
                                    ahead.start(git, parent, path, lines);
                                }
                            }
                            Some(FileDeleted::new(&deleted, threads))
                        }
                        None => None,
                    }
                }
                _ => None,
            };
            self.files
                .entry(commit.to_string())
                .or_default()
                .insert(path.to_string(), v);
        }
        Ok(())
    }

    /// A change read by [`MapCache::load`] (`Some(None)`: it deletes nothing in the path).
    fn get(&self, commit: &str, path: &str) -> Option<&DeletedLines> {
        self.files.get(commit).and_then(|m| m.get(path))
    }
}

/// Walks through one change from which its parent is blamed ahead (see [`BlameAhead`]).
const BLAME_AHEAD_FROM: usize = 2048;

/// Blames of a parent started on a thread while the lines are mapped into it: when most of
/// a change's deleted lines have a walk through it, most of them will be blamed in its
/// parent, so every deleted line is blamed there at once, and the mapped lines are read
/// from that answer. Blame passes each line through the same whole-file diffs whichever
/// lines are asked (no `-M`/`-C` here), so a line's answer is the one of blaming it alone.
/// With the comment filter on, the thread then reads the comment mask of each blamed
/// (commit, path) the filter will ask for. A blame or a file not used in the end (its lines
/// did not map) still counts among the git calls.
struct BlameAhead {
    /// (parent, path) → the lines asked (ascending) and the thread blaming them.
    started: Vec<BlameStarted>,
    /// Whether to read comment masks after a blame (the comment filter is on).
    masks: bool,
}

/// A blame and the comment masks read after it, by (commit, path).
type Ahead = (crate::blame::Blame, Vec<((String, String), Vec<bool>)>);

type BlameStarted = (
    (String, String),
    Vec<usize>,
    std::thread::JoinHandle<(Git, Result<Ahead, SzzError>)>,
);

impl BlameAhead {
    fn new(masks: bool) -> BlameAhead {
        BlameAhead {
            started: Vec::new(),
            masks,
        }
    }

    fn start(&mut self, git: &Git, parent: &str, path: &str, lines: Vec<usize>) {
        let masks = self.masks;
        let key = (parent.to_string(), path.to_string());
        if self.started.iter().any(|(k, _, _)| *k == key) {
            return;
        }
        let fork = git.fork();
        let (rev, file, asked) = (key.0.clone(), key.1.clone(), lines.clone());
        let handle = std::thread::spawn(move || {
            let ahead = blame_lines(&fork, &rev, &file, &asked, &BlameFlags::default()).map(|b| {
                let m = if masks {
                    comment_masks(&fork, &b)
                } else {
                    Vec::new()
                };
                (b, m)
            });
            (fork, ahead)
        });
        self.started.push((key, lines, handle));
    }

    /// The blame of `lines` of `path` in `parent`, if one started ahead asked for all of
    /// them and succeeded, and the comment masks read after it (its calls are counted in
    /// `git` either way).
    fn take(&mut self, git: &Git, parent: &str, path: &str, lines: &[usize]) -> Option<Ahead> {
        let at = self
            .started
            .iter()
            .position(|((p, f), _, _)| p == parent && f == path)?;
        let (_, asked, handle) = self.started.swap_remove(at);
        let (fork, ahead) = joined(handle.join());
        git.absorb(fork);
        let covered = lines.iter().all(|l| asked.binary_search(l).is_ok());
        ahead.ok().filter(|_| covered)
    }

    /// Wait for the blames nobody took, counting their calls.
    fn finish(&mut self, git: &Git) {
        for (_, _, handle) in self.started.drain(..) {
            git.absorb(joined(handle.join()).0);
        }
    }
}

/// The changes of the commits that blame found most lines in at `fix^`, read on a thread
/// while the comment filter reads those lines (and each one's parent blamed ahead, see
/// [`BlameAhead`]): the walks start in these changes, so V-SZZ reads them next. A change
/// read for lines the filter then drops all of still counts among the git calls.
struct ReadAhead {
    handle: std::thread::JoinHandle<(Git, MapCache, BlameAhead)>,
}

impl ReadAhead {
    /// A thread reading each (commit, path) that `lines` hold at least
    /// [`BLAME_AHEAD_FROM`] times, if any does.
    fn start(
        git: &Git,
        imp: &Impacted,
        counts: Counts,
        opts: &Options,
        filter: &LineFilter,
    ) -> Option<ReadAhead> {
        if let Counts::Lines(c) = &counts {
            if c.iter().all(|(_, n)| *n < BLAME_AHEAD_FROM) {
                return None;
            }
        }
        let (fork, path, threads) = (git.fork(), imp.path.clone(), opts.threads);
        let masks = filter.skip_comments;
        let handle = std::thread::spawn(move || {
            let mut cache = MapCache::default();
            let mut ahead = BlameAhead::new(masks);
            let counts = match counts {
                Counts::Lines(c) => c,
                Counts::Porcelain(out) => crate::blame::porcelain_counts(&out)
                    .into_iter()
                    .map(|(c, n)| (c.to_string(), n))
                    .collect(),
            };
            let big = counts.into_iter().filter(|(_, n)| *n >= BLAME_AHEAD_FROM);
            for (commit, n) in big {
                // (a change git cannot read is read again where it is needed, and fails there)
                if cache
                    .load(&fork, &commit, &path, n, threads, &mut ahead)
                    .is_err()
                {
                    break;
                }
            }
            (fork, cache, ahead)
        });
        Some(ReadAhead { handle })
    }

    /// Wait for the thread; its changes and blames become the walk's own.
    fn finish(self, git: &Git, cache: &mut MapCache, ahead: &mut BlameAhead) {
        let (fork, read, started) = joined(self.handle.join());
        git.absorb(fork);
        for (commit, files) in read.files {
            let mine = cache.files.entry(commit).or_default();
            for (path, f) in files {
                mine.entry(path).or_insert(f);
            }
        }
        ahead.started.extend(started.started);
    }
}

/// How many blamed lines each commit has, in order of first appearance: counted, or to be
/// counted from git's porcelain output on the thread that reads ahead.
enum Counts {
    Lines(Vec<(String, usize)>),
    Porcelain(std::sync::Arc<String>),
}

/// How many of `lines` each commit has, in order of first appearance.
fn line_counts(lines: &[BlameLine]) -> Vec<(String, usize)> {
    tally(lines.iter().map(|l| l.commit.as_str()))
        .into_iter()
        .map(|(c, n)| (c.to_string(), n))
        .collect()
}

/// The comment mask of each (commit, path) of `blame`'s lines that the filter reads, in
/// order of first appearance (a file git cannot show is left to the filter, which says so).
fn comment_masks(git: &Git, blame: &crate::blame::Blame) -> Vec<((String, String), Vec<bool>)> {
    let mut out: Vec<((String, String), Vec<bool>)> = Vec::new();
    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    for l in &blame.lines {
        let key = (l.commit.as_str(), l.orig_path.as_str());
        if is_blank(&l.content) || !seen.insert(key) || !crate::comments::supported(key.1) {
            continue;
        }
        if let Ok(Some(bytes)) = git.file_at(key.0, key.1) {
            let mask = comment_lines(&String::from_utf8_lossy(&bytes), key.1);
            out.push(((key.0.to_string(), key.1.to_string()), mask));
        }
    }
    out
}

/// Lines below which mapping is not worth a thread.
const LINES_PER_THREAD: usize = 512;

/// V-SZZ's mapping (`map_modified_line`) of each `(change, text, line)`: in the change, the
/// deleted line most similar to `text` (ties: nearest to `line`), if its ratio exceeds 0.75.
/// Each line's answer is independent of the others, so the lines are split across up to
/// `threads` threads; the answers come back in order.
fn map_lines(
    jobs: &[(&FileDeleted, &str, usize)],
    threads: std::num::NonZeroUsize,
) -> Vec<Option<usize>> {
    let run = |chunk: &[(&FileDeleted, &str, usize)]| {
        let mut scratch = Scratch::default();
        chunk
            .iter()
            .map(|(f, text, line)| f.best(text, *line, &mut scratch))
            .collect::<Vec<_>>()
    };
    let threads = threads.get().min(jobs.len() / LINES_PER_THREAD);
    if threads <= 1 {
        return run(jobs);
    }
    let size = jobs.len().div_ceil(threads);
    std::thread::scope(|s| {
        let parts: Vec<_> = jobs.chunks(size).map(|c| s.spawn(move || run(c))).collect();
        parts.into_iter().flat_map(|p| joined(p.join())).collect()
    })
}

/// Where each line number is among a blame's lines: a table by number when the numbers are
/// dense (a blame of most of a file), a map otherwise.
enum LineIndex {
    Table(Vec<u32>),
    Map(HashMap<usize, usize>),
}

impl LineIndex {
    fn new(lines: impl ExactSizeIterator<Item = usize> + Clone) -> LineIndex {
        let n = lines.len();
        let max = lines.clone().max().unwrap_or(0);
        if max <= 4 * n + 1024 && n < u32::MAX as usize {
            let mut t = vec![u32::MAX; max + 1];
            for (k, l) in lines.enumerate() {
                t[l] = k as u32;
            }
            LineIndex::Table(t)
        } else {
            LineIndex::Map(lines.enumerate().map(|(k, l)| (l, k)).collect())
        }
    }

    /// Where `line` is (the last such line, as a map built in order keeps).
    fn get(&self, line: usize) -> Option<usize> {
        match self {
            LineIndex::Table(t) => t.get(line).filter(|&&k| k != u32::MAX).map(|&k| k as usize),
            LineIndex::Map(m) => m.get(&line).copied(),
        }
    }
}

/// A parent commit and the path blamed in it.
type ParentPath = (String, String);

/// One deleted line's walk back through V-SZZ's chain.
struct Walk {
    /// The fix-side path and the file's path as blamed (not updated across renames, as in
    /// V-SZZ).
    path: String,
    /// The impacted file (its `path` is the path blamed).
    imp: usize,
    /// The line's number at `fix^`, where the walk starts.
    start_line: usize,
    cur: BlameLine,
    /// The commits the line walked through, each once (a commit met again ends the walk).
    chain: Vec<String>,
    done: bool,
}

/// V-SZZ: blame each deleted line, then follow it back through similar deleted lines; each
/// line's answer is its chain end, the fix's single answer the earliest chain end.
///
/// All lines walk back in step: at each step the lines sitting in one commit are mapped
/// through that commit's change computed once ([`MapCache`]) and blamed in its parent with
/// one `git blame` for all of them. The answer is the one of walking each line alone.
fn v_szz(
    git: &Git,
    fix: &Fix,
    impacted: &[Impacted],
    opts: &Options,
    filter: &mut LineFilter,
    notes: &mut Vec<String>,
    result: &mut SzzResult,
) -> Result<(), SzzError> {
    let mut walks: Vec<Walk> = Vec::new();
    let mut read_ahead = Vec::new();
    for (ix, imp) in impacted.iter().enumerate() {
        let flags = BlameFlags {
            incremental: opts.pyszz_compat,
            ..Default::default()
        };
        // (porcelain output is glanced at for the commits it blames most, whose changes are
        // then read while it is parsed; pyszz's incremental output, once parsed)
        let mut started = false;
        let blame = blame_at_fix_parent_then(git, fix, imp, &flags, |out| {
            if !flags.incremental && imp.lines.len() >= BLAME_AHEAD_FROM {
                read_ahead.extend(ReadAhead::start(
                    git,
                    imp,
                    Counts::Porcelain(out.clone()),
                    opts,
                    filter,
                ));
                started = true;
            }
        })?;
        if !started {
            let counts = Counts::Lines(line_counts(&blame.lines));
            read_ahead.extend(ReadAhead::start(git, imp, counts, opts, filter));
        }
        walks.reserve(blame.lines.len());
        for (path, start) in filter_blamed(git, imp, blame.lines, &flags, Some(filter))? {
            walks.push(Walk {
                path,
                imp: ix,
                start_line: start.final_line,
                chain: vec![start.commit.clone()],
                cur: start,
                done: false,
            });
        }
    }
    let mut cache = MapCache::default();
    let mut ahead = BlameAhead::new(filter.skip_comments);
    for r in read_ahead {
        r.finish(git, &mut cache, &mut ahead);
    }
    // each commit's first parent, asked once (not a copy of its metadata per line)
    let mut parents: HashMap<String, Option<String>> = HashMap::new();
    loop {
        for w in walks.iter_mut() {
            if w.chain.len() >= opts.max_chain {
                w.done = true;
            }
        }
        // Map every live line into its commit's parent: (parent, path) → [(walk, old line)].
        // Each (commit, path) change is read once, then the lines are mapped together.
        let mut live: Vec<usize> = Vec::new();
        for (i, w) in walks.iter_mut().enumerate().filter(|(_, w)| !w.done) {
            if w.cur.content.trim().is_empty() {
                w.done = true;
                continue;
            }
            live.push(i);
        }
        // each change the live walks go through, with how many walks go through it
        let changes = tally(live.iter().map(|&i| {
            (
                walks[i].cur.commit.as_str(),
                impacted[walks[i].imp].path.as_str(),
            )
        }));
        for ((commit, path), n) in changes {
            cache.load(git, commit, path, n, opts.threads, &mut ahead)?;
        }
        // (walk, its change): consecutive walks mostly share one, looked up once
        let mut changed: Vec<(usize, Option<&FileDeleted>)> = Vec::with_capacity(live.len());
        let mut last: Option<(&str, &str, Option<&FileDeleted>)> = None;
        for &i in &live {
            let w = &walks[i];
            let blamed_path = &impacted[w.imp].path;
            let f = match last {
                Some((c, p, f)) if c == w.cur.commit && p == blamed_path => f,
                _ => cache
                    .get(&w.cur.commit, blamed_path)
                    .and_then(|f| f.as_ref()),
            };
            last = Some((&w.cur.commit, blamed_path, f));
            changed.push((i, f));
        }
        let jobs: Vec<(&FileDeleted, &str, usize)> = changed
            .iter()
            .filter_map(|&(i, f)| Some((f?, walks[i].cur.content.trim(), walks[i].cur.orig_line)))
            .collect();
        let mut mapped = map_lines(&jobs, opts.threads).into_iter();
        let changed: Vec<(usize, bool)> = changed.iter().map(|(i, f)| (*i, f.is_some())).collect();
        drop(jobs);
        let mut steps: Vec<(ParentPath, Vec<(usize, usize)>)> = Vec::new();
        for (i, has_change) in changed {
            let w = &mut walks[i];
            let Some(old_line) = has_change.then(|| mapped.next().flatten()).flatten() else {
                w.done = true;
                continue;
            };
            if !parents.contains_key(&w.cur.commit) {
                let p = git.commit_info(&w.cur.commit)?.parents.first().cloned();
                parents.insert(w.cur.commit.clone(), p);
            }
            let Some(parent) = &parents[&w.cur.commit] else {
                w.done = true;
                continue;
            };
            let blamed_path = &impacted[w.imp].path;
            match steps
                .iter_mut()
                .find(|((p, b), _)| p == parent && b == blamed_path)
            {
                Some((_, v)) => v.push((i, old_line)),
                None => steps.push(((parent.clone(), blamed_path.clone()), vec![(i, old_line)])),
            }
        }
        if steps.is_empty() {
            break;
        }
        for ((parent, path), members) in steps {
            let lines: Vec<usize> = members.iter().map(|(_, l)| *l).collect();
            let b = match ahead.take(git, &parent, &path, &lines) {
                Some((b, masks)) => {
                    for ((commit, file), mask) in masks {
                        filter.prefill(commit, file, mask);
                    }
                    b
                }
                None => blame_lines(git, &parent, &path, &lines, &BlameFlags::default())?,
            };
            // each blamed line moves to the walk that asked for it (copied only for a line
            // two walks asked for)
            let by_line = LineIndex::new(b.lines.iter().map(|l| l.final_line));
            let mut wanted = vec![0usize; b.lines.len()];
            for (_, l) in &members {
                if let Some(k) = by_line.get(*l) {
                    wanted[k] += 1;
                }
            }
            let mut slots: Vec<Option<BlameLine>> = b.lines.into_iter().map(Some).collect();
            for (i, old_line) in members {
                let w = &mut walks[i];
                let next = by_line.get(old_line).and_then(|k| {
                    wanted[k] -= 1;
                    if wanted[k] == 0 {
                        slots[k].take()
                    } else {
                        slots[k].clone()
                    }
                });
                let Some(next) = next else {
                    w.done = true;
                    continue;
                };
                if filter.drop(git, &next)? || w.chain.contains(&next.commit) {
                    w.done = true;
                    continue;
                }
                w.chain.push(next.commit.clone());
                w.cur = next;
            }
        }
    }
    ahead.finish(git);
    let mut ends: Vec<(String, BlameLine)> = Vec::with_capacity(walks.len());
    result.chains.reserve(walks.len());
    for w in walks {
        if w.chain.len() >= opts.max_chain {
            notes.push(format!(
                "{}:{}: chain cut at {} commits",
                w.path, w.start_line, opts.max_chain
            ));
        }
        result.chains.push(Chain {
            path: w.path.clone(),
            line: w.start_line,
            commits: w.chain,
        });
        let mut end = w.cur;
        end.final_line = w.start_line;
        ends.push((w.path, end));
    }
    result.candidates = candidates(git, &ends)?;
    result.selected = result
        .candidates
        .iter()
        .min_by_key(|c| c.committed)
        .map(|c| c.commit.clone());
    if let Some(s) = &result.selected {
        notes.push(format!("earliest chain end: {}", short(s)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_matches_levenshtein_indel_ratio() {
        assert_eq!(line_ratio("abc", "abc"), 1.0);
        assert_eq!(line_ratio("", ""), 1.0);
        // python-Levenshtein: ratio("kitten", "sitting") = 0.6153846153846154
        assert!((line_ratio("kitten", "sitting") - 8.0 / 13.0).abs() < 1e-12);
        assert_eq!(line_ratio("a b c", "abc"), 1.0);
    }

    /// The mapping as V-SZZ writes it: every deleted line compared, the best ratio, ties to
    /// the nearest line.
    fn brute(deleted: &[(usize, String)], text: &str, line: usize) -> Option<usize> {
        let mut best: Option<(f64, usize, usize)> = None;
        for (n, t) in deleted {
            let r = line_ratio(text, t);
            let dist = n.abs_diff(line);
            let better = match best {
                None => true,
                Some((br, bd, _)) => r > br || (r == br && dist < bd),
            };
            if better {
                best = Some((r, dist, *n));
            }
        }
        best.filter(|b| b.0 > 0.75).map(|b| b.2)
    }

    proptest::proptest! {
        #[test]
        fn the_fast_mapping_equals_comparing_every_line(
            lines in proptest::collection::vec("[abc (),=é]{0,12}", 0..25),
            text in "[abc (),=é]{1,12}",
            at in 0usize..30,
        ) {
            let deleted: Vec<(usize, String)> =
                lines.into_iter().enumerate().map(|(i, t)| (i + 1, t)).collect();
            let mut f = FileDeleted::new(&deleted, std::num::NonZeroUsize::MIN);
            f.grams3_after = 0;
            proptest::prop_assert_eq!(f.best(&text, at, &mut Scratch::default()), brute(&deleted, &text, at));
        }
    }

    /// `line` with each of `edits` applied: an even position inserts its character there,
    /// an odd one removes the character at it.
    fn edited(line: &str, edits: &[(usize, String)]) -> String {
        let mut text: Vec<char> = line.chars().collect();
        for (pos, c) in edits {
            if text.is_empty() || pos % 2 == 0 {
                text.insert((*pos).min(text.len()), c.chars().next().unwrap_or('a'));
            } else {
                text.remove(pos % text.len());
            }
        }
        text.into_iter().collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// Long lines, many of them, and a text that is one of them edited: the 3-gram filter
        /// narrows the search, and the answer is still the one of comparing every line.
        #[test]
        fn the_gram_filter_keeps_the_answer_of_comparing_every_line(
            lines in proptest::collection::vec("[abcdxyz0-9(),= ]{0,40}", 1..200),
            pick in 0usize..200,
            edits in proptest::collection::vec((0usize..40, "[abz9,]"), 0..4),
            at in 0usize..220,
        ) {
            let text = edited(&lines[pick % lines.len()], &edits);
            let deleted: Vec<(usize, String)> =
                lines.into_iter().enumerate().map(|(i, t)| (2 * i + 1, t)).collect();
            let mut f = FileDeleted::new(&deleted, std::num::NonZeroUsize::MIN);
            f.grams3_after = 0;
            proptest::prop_assert_eq!(f.best(&text, at, &mut Scratch::default()), brute(&deleted, &text, at));
        }
    }

    proptest::proptest! {
        #[test]
        fn the_bit_parallel_lcs_equals_the_table(
            a in "[abcé0-9(), ]{0,80}",
            b in "[abcé0-9(), ]{0,64}",
        ) {
            let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
            if !(a.is_empty() && b.is_empty()) {
                proptest::prop_assert_eq!(ratio_chars(&a, &b), ratio_dp(&a, &b));
            }
        }
    }

    proptest::proptest! {
        /// A table with its pair index finds every gram's lines as the whole-table search
        /// does, for grams it holds and grams it does not (non-ASCII and folded characters
        /// among them).
        #[test]
        fn the_pair_index_finds_what_the_whole_table_finds(
            lines in proptest::collection::vec("[ab\u{7f}\u{80}é\u{1007f}0-9]{0,12}", 1..40),
            probes in proptest::collection::vec("[ab\u{7f}\u{80}é\u{1007f}0-9]{4}", 0..40),
            q in 3usize..5,
        ) {
            let chars: Vec<Vec<char>> = lines.iter().map(|l| l.chars().collect()).collect();
            let plain = Grams::new(q, chars.iter().map(Vec::as_slice));
            let mut indexed = Grams::new(q, chars.iter().map(Vec::as_slice));
            indexed.index_pairs();
            proptest::prop_assert!(indexed.pairs.is_some());
            let probes: Vec<Vec<char>> = probes.iter().map(|p| p.chars().take(q).collect()).collect();
            for w in chars.iter().flat_map(|c| c.windows(q)).chain(probes.iter().map(Vec::as_slice)) {
                proptest::prop_assert_eq!(indexed.lines(w), plain.lines(w));
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn the_radix_sort_sorts_by_gram_and_keeps_the_line_order(
            keys in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..300),
            small in proptest::collection::vec(0u64..5, 0..300),
        ) {
            for ks in [keys, small] {
                let mut v: Vec<(u64, u32)> =
                    ks.iter().enumerate().map(|(i, k)| (*k, i as u32)).collect();
                let mut want = v.clone();
                want.sort();
                sort_by_key_stable(&mut v);
                proptest::prop_assert_eq!(v, want);
            }
        }
    }

    #[test]
    fn lines_mapped_on_threads_get_the_answers_of_one_thread() {
        let deleted: Vec<(usize, String)> = (0..3000)
            .map(|i| {
                (
                    i + 1,
                    format!("value_{} = compute({}, {})", i % 977, i, i % 13),
                )
            })
            .collect();
        let f = FileDeleted::new(&deleted, std::num::NonZeroUsize::MIN);
        let texts: Vec<(String, usize)> = (0..2500)
            .map(|i| {
                (
                    format!(
                        "value_{} = compute({}, {}, y)",
                        i % 977,
                        i * 7 % 3000,
                        i % 5
                    ),
                    i,
                )
            })
            .collect();
        let jobs: Vec<(&FileDeleted, &str, usize)> =
            texts.iter().map(|(t, l)| (&f, t.as_str(), *l)).collect();
        let one = map_lines(&jobs, std::num::NonZeroUsize::MIN);
        let four = map_lines(&jobs, std::num::NonZeroUsize::new(4).unwrap());
        assert_eq!(one.len(), jobs.len());
        assert!(one.iter().filter(|m| m.is_some()).count() > 2000);
        assert_eq!(one, four);
    }

    #[test]
    fn extension_filter_uses_first_dot() {
        let exts = vec!["c".to_string(), "java".to_string()];
        assert!(ext_matches("src/a.c", &exts));
        assert!(ext_matches("src/A.JAVA", &exts));
        assert!(!ext_matches("src/foo.test.c", &exts));
        assert!(!ext_matches("Makefile", &exts));
    }

    /// A large change is built on two threads; its answers are those of one built on one
    /// thread and of comparing every line, identical texts (several lines each) included.
    #[test]
    fn a_change_built_on_two_threads_answers_as_one_built_on_one() {
        let deleted: Vec<(usize, String)> = (0..2400)
            .map(|i| {
                let t = match i % 3 {
                    0 => format!("same_{} = 1", i % 7),
                    _ => format!("value_{} = compute({}, {})", i % 977, i, i % 13),
                };
                (2 * i + 1, t)
            })
            .collect();
        let one = FileDeleted::new(&deleted, std::num::NonZeroUsize::MIN);
        let two = FileDeleted::new(&deleted, std::num::NonZeroUsize::new(2).unwrap());
        let mut texts: Vec<(String, usize)> =
            (0..7).map(|k| (format!("same_{k}  =1"), 37 * k)).collect();
        texts.extend((0..300).map(|i| {
            (
                format!("value_{} = compute({}, y)", i % 977, i * 11),
                i * 13,
            )
        }));
        for (text, at) in &texts {
            let a = one.best(text, *at, &mut Scratch::default());
            assert_eq!(a, two.best(text, *at, &mut Scratch::default()), "{text}");
            assert_eq!(a, brute(&deleted, text, *at), "{text}");
        }
        // an identical text maps to its nearest occurrence: "same_3 = 1" is at i = 3 + 21k,
        // lines 7, 49, .., 175, 217; from 200, 217 is 17 away and 175 is 25
        assert_eq!(
            one.best("same_3 = 1", 200, &mut Scratch::default()),
            Some(217)
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// Texts over 64 characters take the table and the character-count bound: the answer
        /// is still the one of comparing every line.
        #[test]
        fn long_texts_get_the_answer_of_comparing_every_line(
            lines in proptest::collection::vec("[abé0-9(),= ]{50,90}", 1..40),
            pick in 0usize..40,
            edits in proptest::collection::vec((0usize..90, "[abz9,é]"), 0..12),
            at in 0usize..90,
        ) {
            let text = edited(&lines[pick % lines.len()], &edits);
            let deleted: Vec<(usize, String)> =
                lines.into_iter().enumerate().map(|(i, t)| (2 * i + 1, t)).collect();
            let f = FileDeleted::new(&deleted, std::num::NonZeroUsize::MIN);
            proptest::prop_assert_eq!(f.best(&text, at, &mut Scratch::default()), brute(&deleted, &text, at));
        }
    }

    proptest::proptest! {
        /// ASCII lines take the packed sort: the table is the one the general sort builds.
        #[test]
        fn the_packed_ascii_table_equals_the_general_one(
            lines in proptest::collection::vec("[ -~]{0,14}", 1..60),
            q in 3usize..5,
        ) {
            let chars: Vec<Vec<char>> = lines.iter().map(|l| l.chars().collect()).collect();
            let packed = Grams::new(q, chars.iter().map(Vec::as_slice));
            let mut pairs: Vec<(u64, u32)> = chars
                .iter()
                .enumerate()
                .flat_map(|(i, c)| c.windows(q).map(move |w| (gram_key(w), i as u32)))
                .collect();
            pairs.sort();
            pairs.dedup();
            let got: Vec<(u64, u32)> = packed
                .keys
                .iter()
                .enumerate()
                .flat_map(|(k, key)| {
                    packed.lines[packed.starts[k] as usize..packed.starts[k + 1] as usize]
                        .iter()
                        .map(move |&l| (*key, l))
                })
                .collect();
            proptest::prop_assert_eq!(got, pairs);
            for w in chars.iter().flat_map(|c| c.windows(q)) {
                proptest::prop_assert_eq!(widen_ascii_key(ascii_key(w), q), gram_key(w));
            }
        }
    }

    proptest::proptest! {
        /// The line index finds what a map built in order finds, dense (a table) or sparse
        /// (a map), repeated numbers included.
        #[test]
        fn the_line_index_finds_what_a_map_finds(
            lines in proptest::collection::vec(0usize..3000, 0..40),
            spread in 1usize..200,
        ) {
            let lines: Vec<usize> = lines.iter().map(|l| l * spread).collect();
            let map: HashMap<usize, usize> =
                lines.iter().enumerate().map(|(k, l)| (*l, k)).collect();
            let index = LineIndex::new(lines.iter().copied());
            let dense = lines.iter().max().is_none_or(|m| *m <= 4 * lines.len() + 1024);
            proptest::prop_assert_eq!(matches!(index, LineIndex::Table(_)), dense);
            for probe in (0..3000 * spread).step_by(spread.max(7) / 7 + 1) {
                proptest::prop_assert_eq!(index.get(probe), map.get(&probe).copied());
            }
        }
    }

    /// The ASCII table of many lines, sorted in two halves and merged, is the one sort of
    /// all of them builds.
    #[test]
    fn the_table_sorted_in_halves_is_the_table_sorted_at_once() {
        let lines: Vec<Vec<char>> = (0..3000)
            .map(|i| {
                format!("v_{} = f({}, {})", i % 37, i * 7 % 1000, i % 5)
                    .chars()
                    .collect()
            })
            .collect();
        let one = Grams::new_on(
            4,
            lines.iter().map(Vec::as_slice),
            std::num::NonZeroUsize::MIN,
        );
        let two = Grams::new_on(
            4,
            lines.iter().map(Vec::as_slice),
            std::num::NonZeroUsize::new(2).unwrap(),
        );
        assert_eq!(
            (one.keys, one.starts, one.lines),
            (two.keys, two.starts, two.lines)
        );
    }
}
