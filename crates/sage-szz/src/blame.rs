//! `git blame --porcelain`: running it with the flags each variant needs, and parsing it.

use crate::git::Git;
use crate::SzzError;
use std::collections::HashMap;

/// One blamed line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlameLine {
    /// Line number in the blamed revision (the `-L` side).
    pub final_line: usize,
    /// The commit the line is attributed to.
    pub commit: String,
    /// Line number in that commit's version of the file.
    pub orig_line: usize,
    /// Path of the file in that commit.
    pub orig_path: String,
    /// The line's text (without the newline).
    pub content: String,
    /// git marked the commit as a boundary (a root commit, or the edge of a range).
    pub boundary: bool,
}

/// Per-commit metadata that porcelain prints once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlameCommit {
    pub author_time: i64,
    pub committer_time: i64,
    pub summary: String,
    /// `previous <sha> <path>`: the parent and path to continue blaming from.
    pub previous: Option<(String, String)>,
    pub boundary: bool,
    pub filename: String,
}

/// A parsed porcelain blame.
#[derive(Debug, Clone, Default)]
pub struct Blame {
    pub lines: Vec<BlameLine>,
    pub commits: HashMap<String, BlameCommit>,
}

/// Parse `git blame --porcelain` (or `--line-porcelain`) output. Malformed input gives an
/// error naming the line.
pub(crate) fn parse_porcelain(text: &str) -> Result<Blame, String> {
    let mut blame = Blame::default();
    // (commit, orig_line, final_line) of the group being read
    let mut current: Option<(String, usize, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(content) = line.strip_prefix('\t') {
            let Some((sha, orig, fin)) = current.take() else {
                return Err(format!("line {}: content line without a header", i + 1));
            };
            // the commit's file name and boundary flag, not a copy of all its metadata
            let (orig_path, boundary) = blame
                .commits
                .get(&sha)
                .map_or((String::new(), false), |m| (m.filename.clone(), m.boundary));
            blame.lines.push(BlameLine {
                final_line: fin,
                commit: sha,
                orig_line: orig,
                orig_path,
                content: content.to_string(),
                boundary,
            });
            continue;
        }
        match &current {
            None => {
                // a header: <sha> <orig> <final> [<count>]
                let mut it = line.split(' ');
                let sha = it.next().unwrap_or_default();
                let orig = it.next().and_then(|s| s.parse::<usize>().ok());
                let fin = it.next().and_then(|s| s.parse::<usize>().ok());
                let (Some(orig), Some(fin)) = (orig, fin) else {
                    return Err(format!(
                        "line {}: expected a blame header, got {line:?}",
                        i + 1
                    ));
                };
                if sha.len() < 40 || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(format!("line {}: bad commit id in {line:?}", i + 1));
                }
                if !blame.commits.contains_key(sha) {
                    blame
                        .commits
                        .insert(sha.to_string(), BlameCommit::default());
                }
                current = Some((sha.to_string(), orig, fin));
            }
            Some((sha, _, _)) => {
                // (inserted with the header)
                let Some(meta) = blame.commits.get_mut(sha) else {
                    continue;
                };
                let (key, value) = line.split_once(' ').unwrap_or((line, ""));
                match key {
                    "author-time" => meta.author_time = value.parse().unwrap_or(0),
                    "committer-time" => meta.committer_time = value.parse().unwrap_or(0),
                    "summary" => meta.summary = value.to_string(),
                    "boundary" => meta.boundary = true,
                    "filename" => meta.filename = unquote(value),
                    "previous" => {
                        if let Some((p, f)) = value.split_once(' ') {
                            meta.previous = Some((p.to_string(), unquote(f)));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    if current.is_some() {
        return Err("output ends inside a group (no content line)".into());
    }
    Ok(blame)
}

/// Parse `git blame --incremental` output into lines in the order git emitted them; line
/// texts are left empty (incremental output has none).
pub(crate) fn parse_incremental(text: &str) -> Result<Blame, String> {
    let mut blame = Blame::default();
    let mut current: Option<(String, usize, usize, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        match &current {
            None => {
                let mut it = line.split(' ');
                let sha = it.next().unwrap_or_default();
                let nums: Vec<usize> = it.filter_map(|s| s.parse().ok()).collect();
                if nums.len() != 3 || sha.len() < 40 || !sha.chars().all(|c| c.is_ascii_hexdigit())
                {
                    return Err(format!(
                        "line {}: expected an incremental header, got {line:?}",
                        i + 1
                    ));
                }
                blame.commits.entry(sha.to_string()).or_default();
                current = Some((sha.to_string(), nums[0], nums[1], nums[2]));
            }
            Some((sha, orig, fin, count)) => {
                let (key, value) = line.split_once(' ').unwrap_or((line, ""));
                let meta = blame.commits.entry(sha.clone()).or_default();
                match key {
                    "author-time" => meta.author_time = value.parse().unwrap_or(0),
                    "committer-time" => meta.committer_time = value.parse().unwrap_or(0),
                    "summary" => meta.summary = value.to_string(),
                    "boundary" => meta.boundary = true,
                    "previous" => {
                        if let Some((p, f)) = value.split_once(' ') {
                            meta.previous = Some((p.to_string(), unquote(f)));
                        }
                    }
                    "filename" => {
                        let path = unquote(value);
                        meta.filename = path.clone();
                        let boundary = meta.boundary;
                        for k in 0..*count {
                            blame.lines.push(BlameLine {
                                final_line: fin + k,
                                commit: sha.clone(),
                                orig_line: orig + k,
                                orig_path: path.clone(),
                                content: String::new(),
                                boundary,
                            });
                        }
                        current = None;
                    }
                    _ => {}
                }
            }
        }
    }
    if current.is_some() {
        return Err("output ends inside an entry (no filename line)".into());
    }
    Ok(blame)
}

/// Undo git's C-style path quoting (`"a\tb"`): the one reader, in `sage-patch`.
/// How many lines of porcelain output each commit was blamed for, in order of first
/// appearance: a glance at the output (one header a line, the line after a content line),
/// taken before it is parsed. Malformed output only miscounts; the parse says what is wrong.
pub(crate) fn porcelain_counts(out: &str) -> Vec<(&str, usize)> {
    let mut header = true;
    let shas = out.split('\n').filter_map(|line| {
        if header {
            header = false;
            return line.split(' ').next().filter(|sha| !sha.is_empty());
        }
        header = line.starts_with('\t');
        None
    });
    crate::tally(shas)
}

pub use sage_patch::unquote;

/// Flags of one blame call.
#[derive(Debug, Clone, Default)]
pub struct BlameFlags {
    /// `-w`: ignore whitespace (AG-SZZ and up).
    pub ignore_whitespace: bool,
    /// `-M`: detect lines moved within the file (MA-SZZ).
    pub moves: bool,
    /// Number of `-C` flags (0-3): lines moved or copied from other files (MA-SZZ uses 1).
    pub copies: u8,
    /// `--ignore-rev` commits.
    pub ignore_revs: Vec<String>,
    /// `--incremental` instead of `--porcelain`: entries in the order git resolves them
    /// (pyszz's `blame_incremental`), line texts read from the blamed commits.
    pub incremental: bool,
}

/// Merge sorted line numbers into `-L a,b` ranges of consecutive lines (pyszz
/// `_parse_line_ranges`).
pub(crate) fn line_ranges(lines: &[usize]) -> Vec<(usize, usize)> {
    let mut sorted: Vec<usize> = lines.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<(usize, usize)> = Vec::new();
    for l in sorted {
        match out.last_mut() {
            Some((_, end)) if l == *end + 1 => *end = l,
            _ => out.push((l, l)),
        }
    }
    out
}

/// Blame `lines` of `path` at `rev`. Lines past the end of the file are an error from git.
pub(crate) fn blame_lines(
    git: &Git,
    rev: &str,
    path: &str,
    lines: &[usize],
    flags: &BlameFlags,
) -> Result<Blame, SzzError> {
    match blame_output(git, rev, path, lines, flags)? {
        Some(out) => parse_blame_output(git, &out, rev, path, flags),
        None => Ok(Blame::default()),
    }
}

/// What git prints for [`blame_lines`] (`None`, and no call, for no lines).
pub(crate) fn blame_output(
    git: &Git,
    rev: &str,
    path: &str,
    lines: &[usize],
    flags: &BlameFlags,
) -> Result<Option<String>, SzzError> {
    if lines.is_empty() {
        return Ok(None);
    }
    let mut args: Vec<String> = vec![
        "blame".into(),
        // a repository's config can name a textconv command, which blame would run
        "--no-textconv".into(),
        if flags.incremental {
            "--incremental"
        } else {
            "--porcelain"
        }
        .into(),
        // clear any blame.ignoreRevsFile from the repository's configuration
        "--ignore-revs-file".into(),
        String::new(),
    ];
    if flags.ignore_whitespace {
        args.push("-w".into());
    }
    if flags.moves {
        args.push("-M".into());
    }
    for _ in 0..flags.copies.min(3) {
        args.push("-C".into());
    }
    for r in &flags.ignore_revs {
        args.push("--ignore-rev".into());
        args.push(r.clone());
    }
    for (a, b) in line_ranges(lines) {
        args.push("-L".into());
        args.push(format!("{a},{b}"));
    }
    args.push(rev.to_string());
    args.push("--".into());
    args.push(path.to_string());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    git.run(&refs).map(Some)
}

/// The blame in `out`, as [`blame_output`] returned it for these arguments.
pub(crate) fn parse_blame_output(
    git: &Git,
    out: &str,
    rev: &str,
    path: &str,
    flags: &BlameFlags,
) -> Result<Blame, SzzError> {
    let bad = |e: String| SzzError::Git {
        args: format!("blame {rev} -- {path}"),
        stderr: format!("unparseable blame output: {e}"),
    };
    if !flags.incremental {
        return parse_porcelain(out).map_err(bad);
    }
    let mut blame = parse_incremental(out).map_err(bad)?;
    // the line texts, from each blamed commit's version of the file (as pyszz reads them)
    let mut files: HashMap<(String, String), Vec<String>> = HashMap::new();
    for l in &mut blame.lines {
        let key = (l.commit.clone(), l.orig_path.clone());
        if !files.contains_key(&key) {
            let text = git
                .file_at(&l.commit, &l.orig_path)?
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .lines()
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            files.insert(key.clone(), text);
        }
        l.content = files[&key]
            .get(l.orig_line.wrapping_sub(1))
            .cloned()
            .unwrap_or_default();
    }
    Ok(blame)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
1111111111111111111111111111111111111111 3 5 2
author A
author-time 100
committer-time 200
summary first
boundary
filename src/a.c
\tint x;
1111111111111111111111111111111111111111 4 6
\tint y;
2222222222222222222222222222222222222222 1 9 1
author B
committer-time 300
summary second
previous 1111111111111111111111111111111111111111 \"old name.c\"
filename \"src/b\\tc.c\"
\treturn 0;
";

    #[test]
    fn parses_groups_and_repeated_commits() {
        let b = parse_porcelain(SAMPLE).unwrap();
        assert_eq!(b.lines.len(), 3);
        assert_eq!(b.lines[0].final_line, 5);
        assert_eq!(b.lines[0].orig_line, 3);
        assert_eq!(b.lines[1].orig_path, "src/a.c");
        assert_eq!(b.lines[1].content, "int y;");
        assert!(b.lines[1].boundary);
        assert_eq!(b.lines[2].orig_path, "src/b\tc.c");
        let c2 = &b.commits["2222222222222222222222222222222222222222"];
        assert_eq!(c2.committer_time, 300);
        assert_eq!(c2.previous.as_ref().unwrap().1, "old name.c");
    }

    #[test]
    fn rejects_malformed() {
        assert!(parse_porcelain("garbage\n").is_err());
        assert!(parse_porcelain("\tcontent\n").is_err());
        assert!(
            parse_porcelain("1111111111111111111111111111111111111111 1 1 1\nauthor x\n").is_err()
        );
    }

    #[test]
    fn incremental_keeps_emission_order_and_expands_groups() {
        let text = "\
2222222222222222222222222222222222222222 6 6 1
author B
summary b
filename f.java
1111111111111111111111111111111111111111 3 3 2
author A
boundary
filename f.java
2222222222222222222222222222222222222222 9 8 1
filename f.java
";
        let b = parse_incremental(text).unwrap();
        let got: Vec<(usize, usize)> = b
            .lines
            .iter()
            .map(|l| (l.final_line, l.orig_line))
            .collect();
        assert_eq!(got, vec![(6, 6), (3, 3), (4, 4), (8, 9)]);
        assert!(b.lines[1].boundary);
        assert!(parse_incremental("1111111111111111111111111111111111111111 1 1 1\n").is_err());
    }

    #[test]
    fn ranges_merge_consecutive_lines() {
        assert_eq!(
            line_ranges(&[5, 1, 2, 3, 7, 8]),
            vec![(1, 3), (5, 5), (7, 8)]
        );
        assert!(line_ranges(&[]).is_empty());
    }

    #[test]
    fn unquote_handles_octal_and_escapes() {
        assert_eq!(unquote("plain"), "plain");
        assert_eq!(unquote("\"a\\\"b\""), "a\"b");
        assert_eq!(unquote("\"caf\\303\\251\""), "café");
    }

    /// The glance at porcelain output counts what the parse finds, commit by commit.
    #[test]
    fn porcelain_counts_are_the_parsed_lines_per_commit() {
        let b = parse_porcelain(SAMPLE).unwrap();
        let mut want: Vec<(&str, usize)> = Vec::new();
        for l in &b.lines {
            match want.iter_mut().find(|(c, _)| *c == l.commit) {
                Some((_, n)) => *n += 1,
                None => want.push((&l.commit, 1)),
            }
        }
        assert!(want.len() > 1);
        assert_eq!(porcelain_counts(SAMPLE), want);
    }
}
