//! Edit languages shared by the adapters: Aider's SEARCH/REPLACE blocks (`diff`,
//! `diff-fenced`), whole-file listings, unified diffs (`udiff`), the `*** Begin Patch`
//! format (Aider `patch`, Codex `apply_patch`), fenced code blocks, and plain shell edits
//! (`sed -i` with a simple substitution, a heredoc or `cat >` into a file, `tee`, `rm`).
//!
//! Every parser returns byte spans into its input, so an adapter can point each write at the
//! exact raw bytes it came from. What looks like an edit but is not plain is returned as
//! [`Uninterpreted`], never guessed.

use regex::Regex;
use sage_trace::WriteOp;
use std::ops::Range;
use std::sync::LazyLock;

/// One edit found in a text.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedEdit {
    pub path: String,
    pub op: WriteOp,
    /// Bytes of the input holding the edit.
    pub span: Range<usize>,
}

/// Something that writes a file but is not plain enough to interpret.
#[derive(Debug, Clone, PartialEq)]
pub struct Uninterpreted {
    pub reason: String,
    /// The command or block, shortened for messages.
    pub text: String,
    pub span: Range<usize>,
}

/// Edits found in a text, and the ones that could not be interpreted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Edits {
    pub edits: Vec<ParsedEdit>,
    pub uninterpreted: Vec<Uninterpreted>,
}

/// Normalize a path as the trace names it: trim, drop a leading `./`.
pub(crate) fn clean_path(p: &str) -> String {
    let p = p.trim();
    p.strip_prefix("./").unwrap_or(p).to_string()
}

/// Lines of `text` with their byte offsets (each line without its `\n`).
pub fn lines_with_offsets(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut pos = 0;
    for l in text.split_inclusive('\n') {
        out.push((pos, l.strip_suffix('\n').unwrap_or(l)));
        pos += l.len();
    }
    out
}

fn shorten(s: &str) -> String {
    let one: String = s.trim().chars().take(120).collect();
    one.replace('\n', "⏎")
}

// ---------------------------------------------------------------------------------------------
// SEARCH/REPLACE (aider `editblock_coder.py`)

static HEAD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^<{5,9} SEARCH>?\s*$").unwrap());
static DIVIDER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^={5,9}\s*$").unwrap());
static UPDATED: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^>{5,9} REPLACE\s*$").unwrap());

/// One SEARCH/REPLACE block.
#[derive(Debug, Clone, PartialEq)]
pub struct SrBlock {
    /// The file it edits (the nearest filename line before it, else the previous block's).
    pub path: Option<String>,
    pub search: String,
    pub replace: String,
    /// From the HEAD line to the end of the REPLACE line.
    pub span: Range<usize>,
}

/// Aider's `strip_filename`: a filename candidate from a line, or `None`.
fn strip_filename(line: &str) -> Option<String> {
    let mut f = line.trim();
    if f == "..." || f.is_empty() {
        return None;
    }
    if let Some(rest) = f.strip_prefix("```") {
        let rest = rest.trim();
        // ```python is a language, ```src/app.py a file.
        if !rest.is_empty() && (rest.contains('.') || rest.contains('/')) {
            return Some(rest.to_string());
        }
        return None;
    }
    f = f.trim_end_matches(':');
    f = f.trim_start_matches('#');
    f = f.trim();
    f = f.trim_matches('`');
    f = f.trim_matches('*');
    let f = f.trim();
    if f.is_empty() || f.contains("<<<<<<<") {
        return None;
    }
    Some(f.to_string())
}

/// The filename for a block whose HEAD is at line `i`: the closest of the (up to) three lines
/// before it, continuing past fence lines only (aider's `find_filename`).
fn find_filename(lines: &[(usize, &str)], i: usize) -> Option<String> {
    let lo = i.saturating_sub(3);
    for k in (lo..i).rev() {
        let l = lines[k].1;
        if let Some(f) = strip_filename(l) {
            return Some(f);
        }
        if !l.trim_start().starts_with("```") && !l.trim_start().starts_with("````") {
            break;
        }
    }
    None
}

/// Every SEARCH/REPLACE block in `text` (`diff` and `diff-fenced` formats alike).
pub(crate) fn search_replace_blocks(text: &str) -> Vec<SrBlock> {
    let lines = lines_with_offsets(text);
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        if !HEAD.is_match(lines[i].1) {
            i += 1;
            continue;
        }
        let start = lines[i].0;
        let fname = find_filename(&lines, i).or_else(|| current.clone());
        let mut j = i + 1;
        let mut search = String::new();
        while j < lines.len() && !DIVIDER.is_match(lines[j].1) && !HEAD.is_match(lines[j].1) {
            search.push_str(lines[j].1);
            search.push('\n');
            j += 1;
        }
        if j >= lines.len() || !DIVIDER.is_match(lines[j].1) {
            i = j.max(i + 1);
            continue; // unterminated block
        }
        j += 1;
        let mut replace = String::new();
        while j < lines.len()
            && !UPDATED.is_match(lines[j].1)
            && !DIVIDER.is_match(lines[j].1)
            && !HEAD.is_match(lines[j].1)
        {
            replace.push_str(lines[j].1);
            replace.push('\n');
            j += 1;
        }
        if j >= lines.len() || !UPDATED.is_match(lines[j].1) {
            i = j.max(i + 1);
            continue;
        }
        let end = lines[j].0 + lines[j].1.len();
        current = fname.clone();
        out.push(SrBlock {
            path: fname,
            search,
            replace,
            span: start..end,
        });
        i = j + 1;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Fenced blocks and whole-file listings

/// A fenced code block.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeBlock {
    /// The info string after the fence (`python`, `diff`, or empty).
    pub lang: String,
    /// The lines between the fences, each with its `\n`.
    pub code: String,
    /// Bytes of `code` in the input.
    pub code_span: Range<usize>,
    /// Index of the opening fence line.
    pub open_line: usize,
}

fn fence_of(line: &str) -> Option<(&str, &str)> {
    let t = line.trim_start();
    let n = t.chars().take_while(|c| *c == '`').count();
    if n >= 3 {
        Some((&t[..n], t[n..].trim()))
    } else {
        None
    }
}

/// Fenced code blocks of a markdown text (a closing fence has at least the opening's
/// backticks and no info string; an unclosed block runs to the end).
pub(crate) fn code_blocks(text: &str) -> Vec<CodeBlock> {
    let lines = lines_with_offsets(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some((fence, lang)) = fence_of(lines[i].1) else {
            i += 1;
            continue;
        };
        let body_start = lines.get(i + 1).map(|l| l.0).unwrap_or(text.len());
        let mut j = i + 1;
        while j < lines.len() {
            if let Some((f, info)) = fence_of(lines[j].1) {
                if f.len() >= fence.len() && info.is_empty() {
                    break;
                }
            }
            j += 1;
        }
        let body_end = lines.get(j).map(|l| l.0).unwrap_or(text.len());
        if j < lines.len() {
            out.push(CodeBlock {
                lang: lang.to_string(),
                code: text[body_start..body_end].to_string(),
                code_span: body_start..body_end,
                open_line: i,
            });
        }
        i = j + 1;
    }
    out
}

/// AutoGen's code-executor convention: a first line `# filename: <path>` saves the block to
/// that file.
/// The line is `^\s*(?:#|//|--)\s*filename:\s*(\S+)\s*$`, read without compiling that regex
/// (a tenth of a small AG2 trace's start-up).
pub(crate) fn filename_comment(code: &str) -> Option<String> {
    let first = code.lines().next()?.trim_start();
    let rest = ["#", "//", "--"]
        .iter()
        .find_map(|m| first.strip_prefix(m))?
        .trim_start()
        .strip_prefix("filename:")?;
    let name = rest.trim();
    (!name.is_empty() && !name.contains(char::is_whitespace)).then(|| clean_path(name))
}

/// A whole-file listing (aider `whole` format): a filename line, then a fenced block with the
/// file's entire new content.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    pub path: String,
    pub content: String,
    /// Bytes of the content in the input.
    pub content_span: Range<usize>,
}

/// Whole-file listings as aider's `WholeFileCoder` reads them: every fenced block is a
/// listing of the file named on the line before its opening fence (`**`, `:`, `#` and
/// backticks stripped).
pub(crate) fn whole_listings(text: &str) -> Vec<Listing> {
    let lines = lines_with_offsets(text);
    let mut out = Vec::new();
    for b in code_blocks(text) {
        if b.open_line == 0 {
            continue;
        }
        let prev = lines[b.open_line - 1].1.trim();
        let f = prev
            .trim_matches('*')
            .trim_end_matches(':')
            .trim_matches('`');
        let f = f.trim_start_matches('#').trim();
        if f.is_empty() || f.len() > 250 {
            continue;
        }
        out.push(Listing {
            path: clean_path(f),
            content: b.code.clone(),
            content_span: b.code_span.clone(),
        });
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Unified diffs

/// Unified diffs in `text` (aider `udiff`, `git diff` patches): one edit per file section,
/// its text verbatim from the `---` line to the section's end (located by the one patch
/// model, [`sage_patch::find_in_text`]).
pub fn unified_diffs(text: &str) -> Edits {
    let mut out = Edits::default();
    for d in sage_patch::find_in_text(text) {
        let span = d.span.clone();
        match (d.old_path, d.new_path) {
            (_, Some(new)) => out.edits.push(ParsedEdit {
                path: clean_path(&new),
                op: WriteOp::UnifiedDiff {
                    diff: text[span.clone()].to_string(),
                },
                span,
            }),
            (Some(old), None) => out.edits.push(ParsedEdit {
                path: clean_path(&old),
                op: WriteOp::Delete,
                span,
            }),
            (None, None) => out.uninterpreted.push(Uninterpreted {
                text: text[span.clone()].lines().next().unwrap_or("").to_string(),
                reason: "a unified diff from /dev/null to /dev/null names no file".into(),
                span,
            }),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// *** Begin Patch (aider `patch`, Codex `apply_patch`)

/// Parse a `*** Begin Patch` text: `Add File` → full content, `Delete File` → delete,
/// `Update File` → one search/replace per hunk (context and removed lines → added lines).
/// A `Move to` is reported as uninterpreted (the move itself is not a write).
pub fn parse_apply_patch(text: &str) -> Edits {
    let lines = lines_with_offsets(text);
    let mut out = Edits::default();
    let mut i = 0;
    let file_end = |l: &str| l.starts_with("*** ");
    while i < lines.len() {
        let l = lines[i].1;
        let start = lines[i].0;
        if let Some(p) = l.strip_prefix("*** Add File: ") {
            let mut content = String::new();
            let mut j = i + 1;
            while j < lines.len() && !file_end(lines[j].1) {
                let x = lines[j].1;
                content.push_str(x.strip_prefix('+').unwrap_or(x));
                content.push('\n');
                j += 1;
            }
            let end = lines.get(j).map(|x| x.0).unwrap_or(text.len());
            out.edits.push(ParsedEdit {
                path: clean_path(p),
                op: WriteOp::FullContent { content },
                span: start..end,
            });
            i = j;
        } else if let Some(p) = l.strip_prefix("*** Delete File: ") {
            out.edits.push(ParsedEdit {
                path: clean_path(p),
                op: WriteOp::Delete,
                span: start..start + l.len(),
            });
            i += 1;
        } else if let Some(p) = l.strip_prefix("*** Update File: ") {
            let path = clean_path(p);
            let mut j = i + 1;
            if let Some(to) = lines.get(j).and_then(|x| x.1.strip_prefix("*** Move to: ")) {
                out.uninterpreted.push(Uninterpreted {
                    reason: format!("file moved to {}", to.trim()),
                    text: shorten(l),
                    span: start..lines[j].0 + lines[j].1.len(),
                });
                j += 1;
            }
            // Hunks: split at `@@` lines.
            let mut search = String::new();
            let mut replace = String::new();
            let mut hstart = lines.get(j).map(|x| x.0).unwrap_or(text.len());
            let flush = |s: &mut String, r: &mut String, span: Range<usize>, out: &mut Edits| {
                if !s.is_empty() || !r.is_empty() {
                    out.edits.push(ParsedEdit {
                        path: path.clone(),
                        op: WriteOp::SearchReplace {
                            search: std::mem::take(s),
                            replace: std::mem::take(r),
                            tolerance: sage_trace::Tolerance::LinesThenElision,
                        },
                        span,
                    });
                }
            };
            while j < lines.len() && !file_end(lines[j].1) {
                let x = lines[j].1;
                if x.starts_with("@@") {
                    flush(&mut search, &mut replace, hstart..lines[j].0, &mut out);
                    hstart = lines[j].0;
                } else if let Some(r) = x.strip_prefix('+') {
                    replace.push_str(r);
                    replace.push('\n');
                } else if let Some(r) = x.strip_prefix('-') {
                    search.push_str(r);
                    search.push('\n');
                } else {
                    let r = x.strip_prefix(' ').unwrap_or(x);
                    search.push_str(r);
                    search.push('\n');
                    replace.push_str(r);
                    replace.push('\n');
                }
                j += 1;
            }
            let end = lines.get(j).map(|x| x.0).unwrap_or(text.len());
            flush(&mut search, &mut replace, hstart..end, &mut out);
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Plain shell edits

static HEREDOC: LazyLock<Regex> = LazyLock::new(|| {
    // cat > f <<'EOF' | cat <<EOF > f | tee [-a] f <<EOF | cat >> f <<-"EOF"
    Regex::new(
        r#"(?m)(?:^|[;&|(])[ \t]*(?:(?P<cat>cat)\s*(?:(?P<r1>>>?)\s*(?P<f1>[^\s<>;|&]+)\s*<<-?\s*(?P<q1>['"]?)(?P<d1>\w+)['"]?|<<-?\s*(?P<q2>['"]?)(?P<d2>\w+)['"]?\s*(?P<r2>>>?)\s*(?P<f2>[^\s<>;|&]+))|(?P<tee>tee)\s+(?P<ta>-a\s+)?(?P<f3>[^\s<>;|&]+)\s*<<-?\s*['"]?(?P<d3>\w+)['"]?(?:\s*>\s*/dev/null)?)[ \t]*(?:;|&&)?[^\n]*\n"#,
    )
    .unwrap()
});

static SED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"sed\s+-i(?:\s*''|\s+''|\.bak)?\s+(?:-e\s+)?(?P<q>['"])(?P<expr>.*?)['"]\s+(?P<files>[^;&|\n<>]+)"#)
        .unwrap()
});

static WRITE_LIKE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:^|[\s;&|])(?:sed\s+-i|perl\s+-p?i|>\s*[^\s&>|]|>>|tee\s|python3?\s+-c|mv\s|cp\s|patch\s|git\s+apply)"#).unwrap()
});

fn unescape_sed(s: &str, delim: char) -> Option<String> {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            let n = it.next()?;
            if n == delim || n == '\\' || n == '/' || n == '&' || "[].*^$".contains(n) {
                out.push(n);
            } else if n == 'n' {
                out.push('\n');
            } else {
                return None; // \1, \t, ... not plain
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// Parse `s<d>pattern<d>replacement<d>flags` with a literal pattern.
fn plain_substitution(expr: &str) -> Result<(String, String, bool), String> {
    let mut chars = expr.chars();
    if chars.next() != Some('s') {
        return Err("not a substitution (address or other command)".into());
    }
    let d = chars.next().ok_or("empty expression")?;
    let rest: String = chars.collect();
    // Split at unescaped delimiters.
    let mut parts = vec![String::new()];
    let mut esc = false;
    for c in rest.chars() {
        if esc {
            parts.last_mut().unwrap().push('\\');
            parts.last_mut().unwrap().push(c);
            esc = false;
        } else if c == '\\' {
            esc = true;
        } else if c == d {
            parts.push(String::new());
        } else {
            parts.last_mut().unwrap().push(c);
        }
    }
    if parts.len() != 3 {
        return Err("not a single s/// expression".into());
    }
    let flags = parts[2].trim();
    if !(flags.is_empty() || flags == "g") {
        return Err(format!("flags {flags:?}"));
    }
    let pat = &parts[0];
    // Regex metacharacters (unescaped) make the pattern not literal.
    let mut esc = false;
    for c in pat.chars() {
        if esc {
            esc = false;
            continue;
        }
        if c == '\\' {
            esc = true;
        } else if "[]*.^$".contains(c) {
            return Err("pattern is a regular expression".into());
        }
    }
    if parts[1].contains('&') && !parts[1].contains("\\&") {
        return Err("replacement uses &".into());
    }
    let old = unescape_sed(pat, d).ok_or("escape in pattern")?;
    let new = unescape_sed(&parts[1], d).ok_or("escape in replacement")?;
    if old.is_empty() {
        return Err("empty pattern".into());
    }
    Ok((old, new, flags == "g"))
}

/// Plain shell edits in a command (or script): heredocs into files (`cat > f <<EOF`,
/// `cat <<EOF > f`, `cat >> f`, `tee [-a] f <<EOF`), `sed -i 's/old/new/[g]' file` with a
/// literal pattern, and `rm [-f] file`. Anything else that looks like it writes a file
/// (redirections, `python -c`, `perl -i`, `mv`, `cp`, `patch`, complex `sed`) is returned as
/// uninterpreted.
///
/// `sed` without `g` replaces the first match of each line; it is mapped like `g`
/// (all occurrences) and the difference noted in `via` by the caller; see docs/adapters.md.
pub(crate) fn shell_edits(cmd: &str) -> Edits {
    let mut out = Edits::default();
    let mut covered: Vec<Range<usize>> = Vec::new();
    // Heredocs.
    let mut pos = 0;
    while let Some(c) = HEREDOC.captures_at(cmd, pos) {
        let whole = c.get(0).unwrap();
        let (file, delim, append) = if c.name("cat").is_some() {
            if let Some(f) = c.name("f1") {
                (f.as_str(), c.name("d1").unwrap().as_str(), &c["r1"] == ">>")
            } else {
                (
                    c.name("f2").unwrap().as_str(),
                    c.name("d2").unwrap().as_str(),
                    &c["r2"] == ">>",
                )
            }
        } else {
            (
                c.name("f3").unwrap().as_str(),
                c.name("d3").unwrap().as_str(),
                c.name("ta").is_some(),
            )
        };
        let body_start = whole.end();
        // The body runs to a line that is exactly the delimiter (tabs allowed for <<-).
        let mut end = None;
        let mut p = body_start;
        for l in cmd[body_start..].split_inclusive('\n') {
            if l.trim_end_matches('\n').trim_start_matches('\t') == delim {
                end = Some((p, p + l.len()));
                break;
            }
            p += l.len();
        }
        let Some((body_end, after)) = end else {
            out.uninterpreted.push(Uninterpreted {
                reason: "heredoc without its end delimiter".into(),
                text: shorten(whole.as_str()),
                span: whole.start()..cmd.len(),
            });
            break;
        };
        let content = cmd[body_start..body_end].to_string();
        let path = clean_path(file.trim_matches(|c| c == '"' || c == '\''));
        let op = if append {
            WriteOp::SearchReplace {
                search: String::new(),
                replace: content,
                tolerance: sage_trace::Tolerance::LinesThenElision,
            }
        } else {
            WriteOp::FullContent { content }
        };
        out.edits.push(ParsedEdit {
            path,
            op,
            span: whole.start()..after,
        });
        covered.push(whole.start()..after);
        pos = after;
    }
    // sed -i.
    for c in SED.captures_iter(cmd) {
        let m = c.get(0).unwrap();
        if covered.iter().any(|r| r.contains(&m.start())) {
            continue;
        }
        covered.push(m.range());
        if &c["q"] == "\"" {
            // The shell undoes its double-quote escapes before sed sees the expression.
            match sed_double_quoted(&cmd[m.start()..]) {
                Some(edits) => {
                    out.edits
                        .extend(edits.into_iter().map(|(f, old, new)| ParsedEdit {
                            path: clean_path(&f),
                            op: WriteOp::StrReplace {
                                old,
                                new,
                                all: true,
                                tolerance: sage_trace::Tolerance::TrimmedRetry,
                            },
                            span: m.range(),
                        }))
                }
                None => out.uninterpreted.push(Uninterpreted {
                    reason:
                        "sed -i with a double-quoted expression that is not a plain substitution"
                            .into(),
                    text: shorten(m.as_str()),
                    span: m.range(),
                }),
            }
            continue;
        }
        let expr = c.name("expr").unwrap().as_str();
        let files: Vec<&str> = c["files"].split_whitespace().collect();
        match plain_substitution(expr) {
            Ok((old, new, _global)) if !files.is_empty() => {
                for f in files {
                    out.edits.push(ParsedEdit {
                        path: clean_path(f.trim_matches(|c| c == '"' || c == '\'')),
                        op: WriteOp::StrReplace {
                            old: old.clone(),
                            new: new.clone(),
                            // Without `g` sed replaces the first match per line;
                            // mapped as all occurrences (docs/adapters.md).
                            all: true,
                            tolerance: sage_trace::Tolerance::TrimmedRetry,
                        },
                        span: m.range(),
                    });
                }
            }
            Ok(_) => out.uninterpreted.push(Uninterpreted {
                reason: "sed -i without a file".into(),
                text: shorten(m.as_str()),
                span: m.range(),
            }),
            Err(why) => out.uninterpreted.push(Uninterpreted {
                reason: format!("sed -i not a plain substitution: {why}"),
                text: shorten(m.as_str()),
                span: m.range(),
            }),
        }
    }
    // rm (of one or more plain file names).
    static RM: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"(?m)(?:^|[;&|])[ \t]*(?P<cmd>rm\s[^;&|\n]*)"#).unwrap());
    for c in RM.captures_iter(cmd) {
        let m = c.name("cmd").unwrap();
        if covered.iter().any(|r| r.contains(&m.start())) {
            continue;
        }
        let Some(files) = plain_rm(m.as_str()) else {
            continue;
        };
        covered.push(m.range());
        for f in files {
            let path = clean_path(&f);
            let dup = out
                .edits
                .iter()
                .any(|e| e.path == path && e.op == WriteOp::Delete);
            if !dup {
                out.edits.push(ParsedEdit {
                    path,
                    op: WriteOp::Delete,
                    span: m.range(),
                });
            }
        }
    }
    // Everything else that looks like a write.
    for m in WRITE_LIKE.find_iter(cmd) {
        if covered
            .iter()
            .any(|r| r.contains(&m.start()) || r.contains(&(m.end() - 1)))
        {
            continue;
        }
        // Redirection to /dev/null or a stream is not a file write.
        let tail = &cmd[m.start()..];
        if tail.contains("/dev/null") && tail.find("/dev/null").unwrap_or(99) < 8 {
            continue;
        }
        if tail.trim_start().starts_with(">&") || tail.trim_start().starts_with("2>") {
            continue;
        }
        let line_end = cmd[m.start()..]
            .find('\n')
            .map(|e| m.start() + e)
            .unwrap_or(cmd.len());
        let line_start = cmd[..m.start()].rfind('\n').map(|s| s + 1).unwrap_or(0);
        covered.push(line_start..line_end.max(line_start + 1));
        out.uninterpreted.push(Uninterpreted {
            reason: "command may write a file; not a plain edit".into(),
            text: shorten(&cmd[line_start..line_end]),
            span: line_start..line_end,
        });
    }
    out.edits.sort_by_key(|e| e.span.start);
    out
}

/// `rm [-f|-rf] a b c` with plain file names (no globs, variables or substitutions).
fn plain_rm(text: &str) -> Option<Vec<String>> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.first() != Some(&"rm") {
        return None;
    }
    let files: Vec<String> = words[1..]
        .iter()
        .filter(|w| !w.starts_with('-'))
        .map(|w| w.trim_matches(['"', '\'']).to_string())
        .collect();
    let plain = !files.is_empty()
        && files
            .iter()
            .all(|f| !f.contains(['*', '?', '$', '`', '{', '(', '>', '<']));
    plain.then_some(files)
}

/// `sed -i "s/PAT/REP/[g]" FILE...` with a double-quoted expression: undo the shell's
/// double-quote escapes, then accept only a literal basic-regex pattern. Returns
/// (file, old, new) per file.
fn sed_double_quoted(text: &str) -> Option<Vec<(String, String, String)>> {
    let start = text.find("sed -i \"")? + 8;
    // The closing quote: the first unescaped `"`.
    let mut expr = String::new();
    let mut it = text[start..].char_indices();
    let mut end = None;
    while let Some((k, c)) = it.next() {
        match c {
            '\\' => match it.next() {
                Some((_, n @ ('\\' | '"' | '$' | '`'))) => expr.push(n),
                Some((_, '\n')) => {}
                Some((_, n)) => {
                    expr.push('\\');
                    expr.push(n);
                }
                None => return None,
            },
            '"' => {
                end = Some(start + k + 1);
                break;
            }
            '$' | '`' => return None,
            c => expr.push(c),
        }
    }
    let files: Vec<String> = text[end?..]
        .split_whitespace()
        .take_while(|w| !w.starts_with(['&', ';', '|', '>', '<']))
        .map(|w| w.trim_matches(['"', '\'']).to_string())
        .collect();
    if files.is_empty() {
        return None;
    }
    // The expression as sed sees it is read by the one s/// reader.
    let (old, new, _global) = plain_substitution(&expr).ok()?;
    Some(
        files
            .into_iter()
            .map(|f| (f, old.clone(), new.clone()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The hand-read `# filename:` line is the regex it replaces.
        #[test]
        fn a_filename_comment_is_read_as_the_regex_reads_it(
            parts in proptest::collection::vec(
                "( |\t|\u{a0}|#|//|--|-|/|filename:|filename|FILENAME:|app\\.py|a b|\n|\r|x)",
                0..8,
            )
        ) {
            let code: String = parts.concat();
            let re = Regex::new(r"^\s*(?:#|//|--)\s*filename:\s*(\S+)\s*$").unwrap();
            let by_regex = code
                .lines()
                .next()
                .and_then(|first| re.captures(first).map(|c| clean_path(&c[1])));
            proptest::prop_assert_eq!(filename_comment(&code), by_regex);
        }
    }

    #[test]
    fn search_replace_both_formats() {
        let diff = "Change:\n\napp.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n";
        let b = search_replace_blocks(diff);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].path.as_deref(), Some("app.py"));
        assert_eq!(b[0].search, "x = 1\n");
        assert_eq!(b[0].replace, "x = 2\n");
        assert!(diff[b[0].span.clone()].starts_with("<<<<<<< SEARCH"));
        assert!(diff[b[0].span.clone()].ends_with(">>>>>>> REPLACE"));
        let fenced = "```python\nsrc/a.py\n<<<<<<< SEARCH\n=======\nnew\n>>>>>>> REPLACE\n```\n\n```\n<<<<<<< SEARCH\nnew\n=======\nnewer\n>>>>>>> REPLACE\n```\n";
        let b = search_replace_blocks(fenced);
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].path.as_deref(), Some("src/a.py"));
        assert_eq!(b[0].search, "");
        assert_eq!(
            b[1].path.as_deref(),
            Some("src/a.py"),
            "inherits the previous file"
        );
        assert!(search_replace_blocks("<<<<<<< SEARCH\nx\n").is_empty());
    }

    #[test]
    fn whole_and_fences() {
        let t = "Here:\n\n**src/app.py**\n```python\nprint(1)\n```\n\nand\n````\n```inner\n````\n";
        let l = whole_listings(t);
        assert_eq!(l[0].path, "src/app.py");
        assert_eq!(l[0].content, "print(1)\n");
        assert_eq!(&t[l[0].content_span.clone()], "print(1)\n");
        assert_eq!(code_blocks(t).len(), 2);
        assert_eq!(code_blocks(t)[1].code, "```inner\n");
        assert_eq!(
            filename_comment("# filename: ./app.py\nx=1\n").as_deref(),
            Some("app.py")
        );
        assert_eq!(filename_comment("x=1\n"), None);
    }

    #[test]
    fn unified_and_apply_patch() {
        let t = "```diff\n--- a/app.py\n+++ b/app.py\n@@ ... @@\n-x = 1\n+x = 2\n```\n";
        let e = unified_diffs(t);
        assert_eq!(e.edits.len(), 1);
        assert_eq!(e.edits[0].path, "app.py");
        let WriteOp::UnifiedDiff { diff } = &e.edits[0].op else {
            panic!()
        };
        assert!(diff.ends_with("+x = 2\n"));
        let p = "*** Begin Patch\n*** Add File: n.py\n+a\n+b\n*** Update File: o.py\n@@ def f():\n ctx\n-old\n+new\n*** Delete File: d.py\n*** End Patch\n";
        let e = parse_apply_patch(p);
        assert_eq!(e.edits.len(), 3);
        assert_eq!(
            e.edits[0].op,
            WriteOp::FullContent {
                content: "a\nb\n".into()
            }
        );
        assert_eq!(
            e.edits[1].op,
            WriteOp::SearchReplace {
                search: "ctx\nold\n".into(),
                replace: "ctx\nnew\n".into(),
                tolerance: sage_trace::Tolerance::LinesThenElision,
            }
        );
        assert_eq!(e.edits[2].op, WriteOp::Delete);
    }

    #[test]
    fn one_shell_reader_for_every_form_of_sed_and_rm() {
        // A single- and a double-quoted sed in one command: both are read, each once (the
        // second reader that used to patch this one dropped the single-quoted edit).
        let e = shell_edits(r#"sed -i 's/md5/sha256/g' a.py && sed -i "s/\$x/y/" b.py"#);
        assert!(
            e.uninterpreted.iter().all(|u| !u.text.contains("a.py")),
            "{e:?}"
        );
        let e = shell_edits(r#"sed -i 's/md5/sha256/g' a.py && sed -i "s/old\"q/new/" b.py"#);
        let got: Vec<(&str, &WriteOp)> = e.edits.iter().map(|x| (x.path.as_str(), &x.op)).collect();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, "a.py");
        assert_eq!(
            got[1],
            (
                "b.py",
                &WriteOp::StrReplace {
                    old: "old\"q".into(),
                    new: "new".into(),
                    all: true,
                    tolerance: sage_trace::Tolerance::TrimmedRetry,
                }
            )
        );
        // rm of several plain names, each once; a glob is not a plain rm
        let e = shell_edits("rm -f a.py b/c.py a.py; rm *.pyc");
        let paths: Vec<&str> = e.edits.iter().map(|x| x.path.as_str()).collect();
        assert_eq!(paths, vec!["a.py", "b/c.py"]);
    }

    #[test]
    fn shell_edits_plain_and_not() {
        let c = "cd /repo && cat > app.py <<'EOF'\nimport os\nprint(1)\nEOF\npython app.py";
        let e = shell_edits(c);
        assert_eq!(e.edits.len(), 1);
        assert_eq!(e.edits[0].path, "app.py");
        assert_eq!(
            e.edits[0].op,
            WriteOp::FullContent {
                content: "import os\nprint(1)\n".into()
            }
        );
        let e = shell_edits("cat <<EOF >> log.txt\nmore\nEOF\n");
        assert_eq!(
            e.edits[0].op,
            WriteOp::SearchReplace {
                search: String::new(),
                replace: "more\n".into(),
                tolerance: sage_trace::Tolerance::LinesThenElision,
            }
        );
        let e = shell_edits("tee -a b.txt <<EOF\nx\nEOF\n");
        assert_eq!(e.edits[0].path, "b.txt");
        let e = shell_edits("sed -i 's/md5/sha256/g' src/hash.py");
        assert_eq!(
            e.edits[0].op,
            WriteOp::StrReplace {
                old: "md5".into(),
                new: "sha256".into(),
                all: true,
                tolerance: sage_trace::Tolerance::TrimmedRetry,
            }
        );
        let e = shell_edits("sed -i 's/a.*b/c/' f.py");
        assert!(e.edits.is_empty());
        assert_eq!(e.uninterpreted.len(), 1);
        let e = shell_edits("sed -i '12s/a/b/' f.py");
        assert_eq!(e.uninterpreted.len(), 1);
        let e = shell_edits("python -c \"open('x','w').write('y')\"");
        assert_eq!(e.uninterpreted.len(), 1);
        let e = shell_edits("ls -la && grep foo bar.py 2>/dev/null");
        assert!(e.edits.is_empty() && e.uninterpreted.is_empty(), "{e:?}");
        let e = shell_edits("rm -f old.py");
        assert_eq!(e.edits[0].op, WriteOp::Delete);
    }
}
