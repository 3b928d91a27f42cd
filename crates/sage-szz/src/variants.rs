//! The deterministic variants, following PySZZ's conventions (see `docs/szz.md`):
//!
//! - common front end: the fix's diff against its first parent; files the fix adds are
//!   skipped; the blamed path is the new path, or the old one for a deletion or rename;
//!   **deleted lines only**, old-side numbers; blame at `fix^` with consecutive lines merged
//!   into `-L` ranges; binary files skipped with a note;
//! - B-SZZ: no flags, no filter; AG-SZZ: `-w`, comment filter, the > 20 files rule as an
//!   `--ignore-rev` loop; MA-SZZ: AG plus `-M -C` and meta-changes; R-SZZ: latest; L-SZZ:
//!   most modified lines; V-SZZ: similarity walk-back, earliest chain end.

use crate::blame::{blame_lines, BlameFlags, BlameLine};
use crate::comments::{comment_lines, is_blank};
use crate::diff::{commit_diff, file_diff, name_status, ChangeKind, FileDiff};
use crate::git::{short, Git};
use crate::{Candidate, Chain, LineRef, SzzError, SzzResult, Variant};
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

/// Comment and blank-line filter over blamed lines, reading the blamed commit's version of
/// the file (cached per commit and path).
pub struct LineFilter {
    skip_blank: bool,
    skip_comments: bool,
    /// commit → path → comment mask (looked up by `&str`: no key built per line).
    masks: HashMap<String, HashMap<String, Vec<bool>>>,
    comments: usize,
    blanks: usize,
}

impl LineFilter {
    pub fn new(skip_blank: bool, skip_comments: bool) -> Self {
        LineFilter {
            skip_blank,
            skip_comments,
            masks: HashMap::new(),
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
        if !self.skip_comments || !crate::comments::supported(&l.orig_path) {
            return Ok(false);
        }
        let known = self
            .masks
            .get(&l.commit)
            .is_some_and(|m| m.contains_key(&l.orig_path));
        if !known {
            let mask = match git.file_at(&l.commit, &l.orig_path)? {
                Some(bytes) => comment_lines(&String::from_utf8_lossy(&bytes), &l.orig_path),
                None => Vec::new(),
            };
            self.masks
                .entry(l.commit.clone())
                .or_default()
                .insert(l.orig_path.clone(), mask);
        }
        let is_comment = self.masks[&l.commit][&l.orig_path]
            .get(l.orig_line)
            .copied()
            .unwrap_or(false);
        if is_comment {
            self.comments += 1;
        }
        Ok(is_comment)
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
    mut filter: Option<&mut LineFilter>,
) -> Result<Vec<(String, BlameLine)>, SzzError> {
    let nums: Vec<usize> = imp.lines.iter().map(|(n, _)| *n).collect();
    let blame = blame_lines(git, &fix.parent, &imp.path, &nums, flags).map_err(|e| match e {
        SzzError::Git { args, stderr } => SzzError::Git {
            args,
            stderr: format!(
                "blaming {:?} at the fix's parent {} failed: {stderr}",
                imp.path,
                short(&fix.parent)
            ),
        },
        other => other,
    })?;
    let mut out = Vec::new();
    let mut seen: HashSet<(String, usize)> = HashSet::new();
    for l in blame.lines {
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
    s.chars().filter(|c| !c.is_whitespace()).collect()
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
    debug_assert!(b.len() <= 64);
    let m = b.len();
    if m == 0 {
        return 0;
    }
    let mut ascii = [0u64; 128];
    let mut other: Vec<(char, u64)> = Vec::new();
    for (j, &c) in b.iter().enumerate() {
        match usize::try_from(u32::from(c)).ok().filter(|u| *u < 128) {
            Some(u) => ascii[u] |= 1 << j,
            None => match other.iter_mut().find(|(x, _)| *x == c) {
                Some((_, bits)) => *bits |= 1 << j,
                None => other.push((c, 1 << j)),
            },
        }
    }
    let mask = if m == 64 { u64::MAX } else { (1u64 << m) - 1 };
    let mut v = u64::MAX;
    for &c in a {
        let pm = match usize::try_from(u32::from(c)).ok().filter(|u| *u < 128) {
            Some(u) => ascii[u],
            None => other.iter().find(|(x, _)| *x == c).map_or(0, |(_, b)| *b),
        };
        let u = v & pm;
        v = v.wrapping_add(u) | v.wrapping_sub(u);
    }
    m - (v & mask).count_ones() as usize
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

/// One deleted line, ready to compare: its old-side number, its text stripped of whitespace,
/// and a histogram of its characters (a cheap upper bound on any LCS with it).
struct Deleted {
    line: usize,
    chars: Vec<char>,
    hist: Hist,
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
    /// A line's text stripped of whitespace → where it occurs (keyed by the UTF-8 text: one
    /// hash write per key, not one per character).
    exact: HashMap<String, Vec<usize>>,
    /// 4-gram → the lines holding it: rarer than 3-grams, so fewer lines to count.
    grams: Grams,
    /// 3-gram → the lines holding it, built the first time a text is too short (or too
    /// far from its best line) for 4-grams to narrow the search.
    grams3: std::cell::OnceCell<Grams>,
    /// [`FileDeleted::candidates`]' tally of hits per line (zeros between calls).
    scratch: std::cell::RefCell<Vec<u16>>,
}

type DeletedLines = Option<FileDeleted>;

/// A candidate's rank: higher ratio, then nearer, then earlier in the change.
type Ranked = (f64, usize, usize); // (ratio, distance, index)

fn outranks(a: Ranked, b: Ranked) -> bool {
    a.0 > b.0 || (a.0 == b.0 && (a.1 < b.1 || (a.1 == b.1 && a.2 < b.2)))
}

impl FileDeleted {
    fn new(deleted: Vec<(usize, String)>) -> FileDeleted {
        let lines: Vec<Deleted> = deleted
            .into_iter()
            .map(|(n, t)| {
                let chars = strip_ws(&t);
                let hist = Hist::of(&chars);
                Deleted {
                    line: n,
                    chars,
                    hist,
                }
            })
            .collect();
        let mut exact: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, l) in lines.iter().enumerate() {
            exact.entry(l.chars.iter().collect()).or_default().push(i);
        }
        let grams = Grams::new(4, lines.iter().map(|l| l.chars.as_slice()));
        FileDeleted {
            lines,
            exact,
            grams,
            grams3: Default::default(),
            scratch: Default::default(),
        }
    }

    /// The deleted line most similar to `text` (ties: nearest to `line`, then first), if
    /// its ratio exceeds 0.75: the answer of comparing `text` with every line, found faster.
    /// An identical line (ratio 1, the maximum) is looked up. Otherwise the lines nearest to
    /// `line` are compared first, which sets a ratio `t` the answer must reach; a line that
    /// reaches it is within `D` insertions and deletions of `text`, so it holds one of any
    /// `Q·D + 1` of `text`'s Q-grams (each edit breaks at most `Q`): only the lines holding
    /// one of the rarest such grams are compared. A line whose length or character counts
    /// bound its ratio below the best so far (or the threshold) is skipped.
    fn best(&self, text: &str, line: usize) -> Option<usize> {
        let stripped: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if let Some(same) = self.exact.get(&stripped) {
            return same
                .iter()
                .map(|&i| self.lines[i].line)
                .min_by_key(|n| n.abs_diff(line));
        }
        let a: Vec<char> = stripped.chars().collect();
        let ha = Hist::of(&a);
        // the ASCII characters `a` holds: the bound sums over these only (the same sum)
        let present: Vec<usize> = (0..128).filter(|&c| ha.ascii[c] > 0).collect();
        let common = |h: &Hist| -> usize {
            present
                .iter()
                .map(|&c| usize::from(ha.ascii[c].min(h.ascii[c])))
                .sum::<usize>()
                + ha.other.min(h.other) as usize
        };
        let mut best: Option<Ranked> = None;
        let consider = |i: usize, best: &mut Option<Ranked>| {
            let d = &self.lines[i];
            let total = a.len() + d.chars.len();
            let bound = |common: usize| {
                if total == 0 {
                    1.0
                } else {
                    2.0 * common as f64 / total as f64
                }
            };
            let cannot = |b: f64| b <= 0.75 || best.is_some_and(|(br, _, _)| b < br);
            if cannot(bound(a.len().min(d.chars.len()))) || cannot(bound(common(&d.hist))) {
                return;
            }
            let r = (ratio_chars(&a, &d.chars), d.line.abs_diff(line), i);
            if best.is_none_or(|b| outranks(r, b)) {
                *best = Some(r);
            }
        };
        // the lines nearest to `line` first: in a rewrite, usually the answer
        let at = self.lines.partition_point(|d| d.line < line);
        let mut near: Vec<usize> = (at.saturating_sub(2)..(at + 2).min(self.lines.len())).collect();
        near.sort_by_key(|&i| self.lines[i].line.abs_diff(line));
        for i in near {
            consider(i, &mut best);
        }
        // the posting lists of `a`'s 4-grams, rarest first
        let lists = self.grams.lists(&a);
        let t = |best: Option<Ranked>| best.map_or(0.75, |b| b.0.max(0.75));
        let mut narrowed = self.narrow(&a, &lists, t(best));
        if narrowed.is_none() {
            // a few lines sharing its rarest grams (where an edited line moved) may set a
            // ratio high enough to narrow the search
            for &i in lists.iter().flat_map(|l| l.iter()).take(16) {
                consider(i as usize, &mut best);
            }
            narrowed = self.narrow(&a, &lists, t(best));
        }
        match narrowed {
            Some(c) => c.into_iter().for_each(|i| consider(i as usize, &mut best)),
            None => (0..self.lines.len()).for_each(|i| consider(i, &mut best)),
        }
        best.filter(|b| b.0 > 0.75).map(|b| self.lines[b.2].line)
    }

    /// [`FileDeleted::candidates`] by 4-grams (`lists`), else by 3-grams, which narrow the
    /// search for shorter texts and more edits (each edit breaks fewer of them).
    fn narrow(&self, a: &[char], lists: &[&[u32]], t: f64) -> Option<Vec<u32>> {
        self.candidates(4, a, lists, t).or_else(|| {
            let g3 = self
                .grams3
                .get_or_init(|| Grams::new(3, self.lines.iter().map(|l| l.chars.as_slice())));
            self.candidates(3, a, &g3.lists(a), t)
        })
    }

    /// The lines that can reach ratio `t` with `a` (a superset, ascending), or `None` when
    /// the grams cannot narrow the search (then every line is a candidate). `lists`: the
    /// lines holding each of `a`'s `q`-grams, rarest first.
    ///
    /// Of any `k` of `a`'s gram positions, at most `q·D` are broken by `D` edits, so a line
    /// within `D` edits holds the grams of at least `k - q·D` of them: the `k` rarest are
    /// taken (as many as stay cheap, at least `q·D + 1`) and lines with fewer hits dropped.
    fn candidates(&self, q: usize, a: &[char], lists: &[&[u32]], t: f64) -> Option<Vec<u32>> {
        if a.len() < q {
            return None;
        }
        // ratio ≥ t bounds the other length to a·(2-t)/t, and the edits to (1-t)·(|a|+|b|)
        let d_max = ((1.0 - t) * 2.0 * a.len() as f64 / t + 1e-9).floor() as usize;
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
        let mut count = self.scratch.borrow_mut();
        count.resize(self.lines.len(), 0);
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

/// Which lines hold each q-gram, as one table sorted by gram: built by one sort instead of
/// a hash map entry per gram occurrence, looked up by binary search (and no hash an
/// adversarial file could make collide).
struct Grams {
    q: usize,
    /// The distinct grams, ascending ([`gram_key`]).
    keys: Vec<u64>,
    /// `lines[starts[i]..starts[i + 1]]` hold `keys[i]`.
    starts: Vec<u32>,
    /// Line indices, ascending within each gram, each line once.
    lines: Vec<u32>,
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
        let mut pairs: Vec<(u64, u32)> = Vec::new();
        for (i, chars) in lines.enumerate() {
            pairs.extend(chars.windows(q).map(|w| (gram_key(w), i as u32)));
        }
        pairs.sort_unstable();
        pairs.dedup();
        let mut g = Grams {
            q,
            keys: Vec::new(),
            starts: Vec::new(),
            lines: Vec::with_capacity(pairs.len()),
        };
        for (k, i) in pairs {
            if g.keys.last() != Some(&k) {
                g.keys.push(k);
                g.starts.push(g.lines.len() as u32);
            }
            g.lines.push(i);
        }
        g.starts.push(g.lines.len() as u32);
        g
    }

    /// The lines holding each of `a`'s grams, rarest first.
    fn lists(&self, a: &[char]) -> Vec<&[u32]> {
        let mut lists: Vec<&[u32]> = a.windows(self.q).map(|w| self.lines(w)).collect();
        lists.sort_by_key(|l| l.len());
        lists
    }

    /// The lines holding the gram `w` (empty when none does).
    fn lines(&self, w: &[char]) -> &[u32] {
        match self.keys.binary_search(&gram_key(w)) {
            Ok(i) => &self.lines[self.starts[i] as usize..self.starts[i + 1] as usize],
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
    fn deleted(&mut self, git: &Git, commit: &str, path: &str) -> Result<&DeletedLines, SzzError> {
        let known = self.files.get(commit).is_some_and(|m| m.contains_key(path));
        if !known {
            let files = name_status(git, commit)?;
            let v = match files.iter().find(|f| f.blame_path() == path) {
                Some(f) if f.kind != ChangeKind::Added && f.old_path.is_some() => {
                    file_diff(git, commit, f, 0)?.map(|d| FileDeleted::new(d.deleted()))
                }
                _ => None,
            };
            self.files
                .entry(commit.to_string())
                .or_default()
                .insert(path.to_string(), v);
        }
        Ok(&self.files[commit][path])
    }
}

/// V-SZZ's mapping (`map_modified_line`) through a [`MapCache`]: in `commit`'s change of
/// `path`, the deleted line most similar to `text` (ties: nearest to `line`), if its ratio
/// exceeds 0.75. `None` when the commit adds the file, deletes nothing in it, or does not
/// touch it under that path.
pub(crate) fn map_line_cached(
    cache: &mut MapCache,
    git: &Git,
    commit: &str,
    path: &str,
    line: usize,
    text: &str,
) -> Result<Option<usize>, SzzError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let Some(file) = cache.deleted(git, commit, path)? else {
        return Ok(None);
    };
    Ok(file.best(text, line))
}

/// A parent commit and the path blamed in it.
type ParentPath = (String, String);

/// One deleted line's walk back through V-SZZ's chain.
struct Walk {
    /// The fix-side path and the file's path as blamed (not updated across renames, as in
    /// V-SZZ).
    path: String,
    blamed_path: String,
    start: BlameLine,
    cur: BlameLine,
    chain: Vec<String>,
    seen: HashSet<String>,
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
    for imp in impacted {
        let flags = BlameFlags {
            incremental: opts.pyszz_compat,
            ..Default::default()
        };
        for (path, start) in blame_file(git, fix, imp, &flags, Some(filter))? {
            walks.push(Walk {
                path,
                blamed_path: imp.path.clone(),
                chain: vec![start.commit.clone()],
                seen: HashSet::from([start.commit.clone()]),
                cur: start.clone(),
                start,
                done: false,
            });
        }
    }
    let mut cache = MapCache::default();
    // each commit's first parent, asked once (not a copy of its metadata per line)
    let mut parents: HashMap<String, Option<String>> = HashMap::new();
    loop {
        for w in walks.iter_mut() {
            if w.chain.len() >= opts.max_chain {
                w.done = true;
            }
        }
        // Map every live line into its commit's parent: (parent, path) → [(walk, old line)].
        let mut steps: Vec<(ParentPath, Vec<(usize, usize)>)> = Vec::new();
        for (i, w) in walks.iter_mut().enumerate().filter(|(_, w)| !w.done) {
            let Some(old_line) = map_line_cached(
                &mut cache,
                git,
                &w.cur.commit,
                &w.blamed_path,
                w.cur.orig_line,
                &w.cur.content,
            )?
            else {
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
            match steps
                .iter_mut()
                .find(|((p, b), _)| p == parent && *b == w.blamed_path)
            {
                Some((_, v)) => v.push((i, old_line)),
                None => steps.push(((parent.clone(), w.blamed_path.clone()), vec![(i, old_line)])),
            }
        }
        if steps.is_empty() {
            break;
        }
        for ((parent, path), members) in steps {
            let lines: Vec<usize> = members.iter().map(|(_, l)| *l).collect();
            let b = blame_lines(git, &parent, &path, &lines, &BlameFlags::default())?;
            let by_line: HashMap<usize, &BlameLine> =
                b.lines.iter().map(|l| (l.final_line, l)).collect();
            for (i, old_line) in members {
                let w = &mut walks[i];
                let Some(next) = by_line.get(&old_line).map(|l| (*l).clone()) else {
                    w.done = true;
                    continue;
                };
                if filter.drop(git, &next)? || !w.seen.insert(next.commit.clone()) {
                    w.done = true;
                    continue;
                }
                w.chain.push(next.commit.clone());
                w.cur = next;
            }
        }
    }
    let mut ends: Vec<(String, BlameLine)> = Vec::new();
    for w in walks {
        if w.chain.len() >= opts.max_chain {
            notes.push(format!(
                "{}:{}: chain cut at {} commits",
                w.path, w.start.final_line, opts.max_chain
            ));
        }
        result.chains.push(Chain {
            path: w.path.clone(),
            line: w.start.final_line,
            commits: w.chain,
        });
        let mut end = w.cur;
        end.final_line = w.start.final_line;
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
            let f = FileDeleted::new(deleted.clone());
            proptest::prop_assert_eq!(f.best(&text, at), brute(&deleted, &text, at));
        }
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
            let mut text: Vec<char> = lines[pick % lines.len()].chars().collect();
            for (pos, c) in edits {
                if text.is_empty() || pos % 2 == 0 {
                    text.insert(pos.min(text.len()), c.chars().next().unwrap_or('a'));
                } else {
                    text.remove(pos % text.len());
                }
            }
            let text: String = text.into_iter().collect();
            let deleted: Vec<(usize, String)> =
                lines.into_iter().enumerate().map(|(i, t)| (2 * i + 1, t)).collect();
            let f = FileDeleted::new(deleted.clone());
            proptest::prop_assert_eq!(f.best(&text, at), brute(&deleted, &text, at));
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

    #[test]
    fn extension_filter_uses_first_dot() {
        let exts = vec!["c".to_string(), "java".to_string()];
        assert!(ext_matches("src/a.c", &exts));
        assert!(ext_matches("src/A.JAVA", &exts));
        assert!(!ext_matches("src/foo.test.c", &exts));
        assert!(!ext_matches("Makefile", &exts));
    }
}
