//! The one store of what is known of a trace's files before the agent writes them.
//!
//! Every history sage builds — `localize`, `sage replay`, `sage case check` and `case init`,
//! the screening replay and `sage view` — starts from the same knowledge, fed by the callers
//! in order of trust: a case's baselines, `--baseline-dir` / `--baseline-from`, then what the
//! trace itself shows (a whole file shown before its first write, then the numbered lines it
//! shows). The first source to give a file whole wins; lines only fill what no whole file
//! gives. A file known only by some lines becomes a *partial* baseline: the known lines at
//! their numbers, a placeholder ([`UNKNOWN`]) for every line never shown, so an edit that
//! lands on known lines applies and one that needs an unseen line fails and says so.

use std::collections::BTreeMap;

use crate::paths::{match_key, normalize_path, WorkspaceRoots};

/// A line of a partial baseline that the trace never shows. No edit can match it (it holds
/// a control character no tool prints), and no patch names it.
pub const UNKNOWN: &str = "\u{1}sage-unknown-line";

/// How many placeholder lines follow the last known line of a partial baseline: an edit there
/// must not reach the end of the file.
const ROOM_AFTER: usize = 50;

/// Whether `line` is a placeholder for a line the trace never shows.
pub fn is_unknown(line: &str) -> bool {
    line.starts_with(UNKNOWN)
}

/// Whether `content` is a partial baseline (or a state replayed from one).
pub fn is_partial(content: &str) -> bool {
    content.contains(UNKNOWN)
}

/// A partial baseline: the known lines (1-based numbers), placeholders between and after.
pub fn sparse(lines: &BTreeMap<usize, String>) -> String {
    let last = lines.keys().last().copied().unwrap_or(0);
    let mut s = String::new();
    for n in 1..=last + ROOM_AFTER {
        match lines.get(&n) {
            Some(l) => s.push_str(l),
            None => s.push_str(&format!("{UNKNOWN} {n}")),
        }
        s.push('\n');
    }
    s
}

/// A file none of whose lines is known, with at least `lines` lines (and room after them).
pub fn unknown_file(lines: usize) -> String {
    let mut s = String::new();
    for n in 1..=lines + ROOM_AFTER {
        s.push_str(&format!("{UNKNOWN} {n}\n"));
    }
    s
}

/// `content` with each placeholder line written as `[a line the trace never shows]`, for
/// anything a reader sees (diffs, pages).
pub fn readable(content: &str) -> String {
    if !is_partial(content) {
        return content.to_string();
    }
    let mut out = String::with_capacity(content.len());
    for l in content.split_inclusive('\n') {
        match l.find(UNKNOWN) {
            Some(i) => {
                out.push_str(&l[..i]);
                out.push_str("[a line the trace never shows]");
                if l.ends_with('\n') {
                    out.push('\n');
                }
            }
            None => out.push_str(l),
        }
    }
    out
}

/// Whether some line the two states do not share is a placeholder of a partial baseline: a
/// difference there says nothing about the replay.
pub fn differs_on_unknown(a: &str, b: &str) -> bool {
    (is_partial(a) || is_partial(b))
        && sage_patch::make(a, b, "a", "b")
            .lines()
            .filter(|l| !l.starts_with("---") && !l.starts_with("+++"))
            .any(|l| (l.starts_with('-') || l.starts_with('+')) && l.contains(UNKNOWN))
}

/// What is known of one file.
#[derive(Debug, Clone, PartialEq)]
pub enum Known {
    /// The whole file, from `origin` (`case baseline baseline/app.py`, `shown whole by the
    /// trace (str_replace_editor view)`, ...).
    Whole { content: String, origin: String },
    /// Some of its lines: line number (1-based) → text, from the sources named.
    Lines {
        lines: BTreeMap<usize, String>,
        origins: Vec<String>,
    },
}

/// Numbered lines of a file that the trace shows after some of its writes (a later view, an
/// editor's snippet after an edit): they say what the file held at that point of the history.
#[derive(Debug, Clone, PartialEq)]
pub struct LaterView {
    pub artefact: String,
    /// How many of the trace's own writes (in trace order; executed writes not counted) came
    /// before the view.
    pub after_writes: usize,
    /// Line number (1-based) → text.
    pub lines: BTreeMap<usize, String>,
}

/// What is known of every file of a trace before the agent writes it, and what later views
/// show of files nothing else tells of. See the module docs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileKnowledge {
    files: BTreeMap<String, Known>,
    later: Vec<LaterView>,
    /// The path rule's workspace roots: how a trace's path names a known file.
    roots: WorkspaceRoots,
}

/// `state` with the lines a view shows put in where nothing was known: a file nothing is
/// known of becomes a partial one; a partial one gets its placeholders filled (a line already
/// known keeps its text); a file known whole is left as it is. `None`: nothing changes.
pub fn fill(state: Option<&str>, lines: &BTreeMap<usize, String>) -> Option<String> {
    let lines: BTreeMap<usize, String> = lines
        .iter()
        .filter(|(n, _)| **n >= 1)
        .map(|(n, l)| (*n, l.clone()))
        .collect();
    if lines.is_empty() {
        return None;
    }
    let Some(c) = state else {
        return Some(sparse(&lines));
    };
    if !is_partial(c) {
        return None;
    }
    let mut out: Vec<String> = c.lines().map(str::to_string).collect();
    let mut changed = false;
    for (n, l) in &lines {
        while out.len() < *n {
            let k = out.len() + 1;
            out.push(format!("{UNKNOWN} {k}"));
        }
        if is_unknown(&out[n - 1]) {
            out[n - 1] = l.clone();
            changed = true;
        }
    }
    if !changed {
        return None;
    }
    // Keep room after the last known line, as a partial baseline has.
    let last_known = out.iter().rposition(|l| !is_unknown(l)).unwrap_or(0) + 1;
    while out.len() < last_known + ROOM_AFTER {
        let k = out.len() + 1;
        out.push(format!("{UNKNOWN} {k}"));
    }
    let mut s = out.join("\n");
    s.push('\n');
    Some(s)
}

impl FileKnowledge {
    /// Knowledge of nothing, naming paths under the workspace `roots`.
    pub fn new(roots: &WorkspaceRoots) -> FileKnowledge {
        FileKnowledge {
            roots: roots.clone(),
            ..FileKnowledge::default()
        }
    }

    /// The workspace roots the store names paths under.
    pub fn roots(&self) -> &WorkspaceRoots {
        &self.roots
    }

    /// Knowledge of whole files only (a case's baselines), each with `origin(name)`.
    pub fn of_whole(
        files: &BTreeMap<String, String>,
        roots: &WorkspaceRoots,
        origin: impl Fn(&str) -> String,
    ) -> FileKnowledge {
        let mut k = FileKnowledge::new(roots);
        for (name, content) in files {
            k.files.insert(
                name.clone(),
                Known::Whole {
                    content: content.clone(),
                    origin: origin(name),
                },
            );
        }
        k
    }

    /// The store's name for a trace's `path`: a name already known that the path rule
    /// ([`match_key`]) matches, else the normalized path.
    pub fn name_of(&self, path: &str) -> String {
        match_key(path, self.files.keys(), &self.roots).unwrap_or_else(|| normalize_path(path))
    }

    /// Learn `path` whole. An earlier whole source wins (the sources are fed in order of
    /// trust); a whole file replaces lines known before. Returns the store's name.
    pub fn add_whole(
        &mut self,
        path: &str,
        content: impl Into<String>,
        origin: impl Into<String>,
    ) -> String {
        let name = self.name_of(path);
        if !matches!(self.files.get(&name), Some(Known::Whole { .. })) {
            self.files.insert(
                name.clone(),
                Known::Whole {
                    content: content.into(),
                    origin: origin.into(),
                },
            );
        }
        name
    }

    /// Learn some lines of `path` (1-based number → text). Nothing changes for a file known
    /// whole; a line already known keeps its first text. Returns the store's name.
    pub fn add_lines(
        &mut self,
        path: &str,
        lines: impl IntoIterator<Item = (usize, String)>,
        origin: impl Into<String>,
    ) -> String {
        let name = self.name_of(path);
        let mut lines = lines.into_iter().filter(|(n, _)| *n >= 1).peekable();
        if lines.peek().is_none() {
            return name;
        }
        let entry = self.files.entry(name.clone()).or_insert(Known::Lines {
            lines: BTreeMap::new(),
            origins: Vec::new(),
        });
        if let Known::Lines {
            lines: known,
            origins,
        } = entry
        {
            for (n, l) in lines {
                known.entry(n).or_insert(l);
            }
            let origin = origin.into();
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
        name
    }

    /// Learn what a view after some writes shows of `path` (see [`LaterView`]); used only
    /// where nothing else tells of those lines.
    pub fn add_later_view(
        &mut self,
        path: &str,
        after_writes: usize,
        lines: BTreeMap<usize, String>,
    ) {
        if !lines.is_empty() {
            self.later.push(LaterView {
                artefact: path.to_string(),
                after_writes,
                lines,
            });
        }
    }

    /// The later views, in the order learnt.
    pub fn later_views(&self) -> &[LaterView] {
        &self.later
    }

    /// The names known, whole or in part.
    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.files.keys()
    }

    /// What is known of `name`.
    pub fn get(&self, name: &str) -> Option<&Known> {
        self.files.get(name)
    }

    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Where the knowledge of `name` comes from, for a reader: the whole file's origin, or
    /// `partial: N lines known`.
    pub fn origin(&self, name: &str) -> Option<String> {
        self.files.get(name).map(|k| match k {
            Known::Whole { origin, .. } => origin.clone(),
            Known::Lines { lines, .. } => format!("partial: {} lines known", lines.len()),
        })
    }

    /// The baselines a history starts from: each whole file as it is, each partly known
    /// file as a partial baseline ([`sparse`]).
    pub fn baselines(&self) -> BTreeMap<String, String> {
        self.files
            .iter()
            .map(|(n, k)| {
                let content = match k {
                    Known::Whole { content, .. } => content.clone(),
                    Known::Lines { lines, .. } => sparse(lines),
                };
                (n.clone(), content)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[(usize, &str)]) -> Vec<(usize, String)> {
        v.iter().map(|(n, s)| (*n, s.to_string())).collect()
    }

    #[test]
    fn the_first_whole_source_wins_and_a_whole_file_replaces_lines() {
        let mut k = FileKnowledge::default();
        k.add_whole("app.py", "case\n", "case baseline");
        // The trace's view of the same file, under its absolute name: the case's copy stays.
        let n = k.add_whole("/workspace/app.py", "trace\n", "shown whole by the trace");
        assert_eq!(n, "app.py");
        assert_eq!(k.baselines()["app.py"], "case\n");
        assert_eq!(k.origin("app.py").unwrap(), "case baseline");

        k.add_lines("lib.py", lines(&[(2, "two")]), "view");
        assert_eq!(k.origin("lib.py").unwrap(), "partial: 1 lines known");
        k.add_whole("lib.py", "one\ntwo\n", "shown whole");
        assert_eq!(k.baselines()["lib.py"], "one\ntwo\n");
        // Lines never overwrite a whole file.
        k.add_lines("lib.py", lines(&[(1, "other")]), "view");
        assert_eq!(k.baselines()["lib.py"], "one\ntwo\n");
    }

    #[test]
    fn known_lines_keep_their_numbers_in_a_partial_baseline() {
        let mut k = FileKnowledge::default();
        k.add_lines("m.py", lines(&[(2, "two"), (3, "three")]), "view a");
        k.add_lines("m.py", lines(&[(3, "ignored"), (5, "five")]), "view b");
        let b = &k.baselines()["m.py"];
        let ls: Vec<&str> = b.lines().collect();
        assert!(is_unknown(ls[0]) && is_unknown(ls[3]));
        assert_eq!((ls[1], ls[2], ls[4]), ("two", "three", "five"));
        assert_eq!(ls.len(), 5 + ROOM_AFTER);
        assert!(is_partial(b));
        assert_eq!(
            readable(b).lines().next().unwrap(),
            "[a line the trace never shows]"
        );
        // An empty view teaches nothing and names no file.
        k.add_lines("empty.py", Vec::new(), "view");
        assert!(k.get("empty.py").is_none());
    }

    #[test]
    fn a_later_view_fills_what_nothing_else_tells() {
        let view: BTreeMap<usize, String> = [(2, "b".to_string()), (3, "c".to_string())]
            .into_iter()
            .collect();
        // Nothing known: the view's lines, in place.
        let s = fill(None, &view).unwrap();
        let ls: Vec<&str> = s.lines().collect();
        assert!(is_unknown(ls[0]));
        assert_eq!((ls[1], ls[2]), ("b", "c"));
        // Partial: placeholders filled, a known line kept, room kept after the last one.
        let part = sparse(&[(3, "C".to_string())].into_iter().collect());
        let s = fill(Some(&part), &view).unwrap();
        let ls: Vec<&str> = s.lines().collect();
        assert_eq!((ls[1], ls[2]), ("b", "C"));
        assert_eq!(ls.len(), 3 + ROOM_AFTER);
        // Whole, or nothing new: no change.
        assert_eq!(fill(Some("a\nb\n"), &view), None);
        assert_eq!(fill(Some(&s), &view), None);
        assert_eq!(fill(None, &BTreeMap::new()), None);
    }

    #[test]
    fn a_difference_on_placeholders_only_is_not_a_difference() {
        let part = sparse(&[(1, "a".to_string())].into_iter().collect());
        assert!(differs_on_unknown(&part, "a\nb\n"));
        assert!(!differs_on_unknown("a\n", "b\n"));
    }
}
