//! The structure of a trace file, as detection's evidence.
//!
//! Detection used to look for quoted keys in the bytes (`"type":"assistant"`), so a file
//! written with other spacing, key order or indentation than the samples was missed, and a
//! key the first records happened to lack was never seen. A [`Shape`] is read from the parsed
//! JSON instead: every key path (array positions folded to `*`) with the number of records
//! holding it, and the short string values found at each path. Whitespace, key order and
//! pretty-printing change nothing.
//!
//! What is read: a JSON document whole (walked without building it, so memory stays small);
//! JSON Lines by the first line whole plus every line of the detection sample (the head and
//! windows spread over the file, see [`sample`]); a zip archive by its member
//! names; anything else as text lines of the sample.

use crate::AdapterError;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::Path;

/// How many bytes of the main file detection looks at.
pub const DETECT_BYTES: usize = 64 * 1024;
/// How many windows beyond the head are sampled.
pub const WINDOWS: usize = 8;
/// The size of one window.
pub const WINDOW_BYTES: usize = 16 * 1024;

/// What detection read of a file.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The head, then the windows, joined by newlines.
    pub bytes: Vec<u8>,
    /// The file's size.
    pub file_bytes: u64,
    /// Whether the sample is the whole file.
    pub whole: bool,
    /// Byte offsets (in the file) of the windows after the head.
    pub windows: Vec<u64>,
}

/// Read the sample of `path`: the whole file when it is small, else the first
/// [`DETECT_BYTES`] and [`WINDOWS`] windows of [`WINDOW_BYTES`] spread up to the end.
pub fn sample(path: &Path, name: &str) -> Result<Sample, AdapterError> {
    let err = |e: std::io::Error| AdapterError::new(name, None, format!("cannot read: {e}"));
    let mut f = std::fs::File::open(path).map_err(err)?;
    let len = f.metadata().map_err(err)?.len();
    let budget = (DETECT_BYTES + WINDOWS * WINDOW_BYTES) as u64;
    if len <= budget {
        let mut bytes = Vec::with_capacity(len as usize);
        f.read_to_end(&mut bytes).map_err(err)?;
        return Ok(Sample {
            bytes,
            file_bytes: len,
            whole: true,
            windows: vec![],
        });
    }
    let mut bytes = Vec::with_capacity(budget as usize + WINDOWS);
    f.by_ref()
        .take(DETECT_BYTES as u64)
        .read_to_end(&mut bytes)
        .map_err(err)?;
    let rest = len - DETECT_BYTES as u64;
    let mut windows = Vec::new();
    for k in 1..=WINDOWS as u64 {
        // Window k ends at head + k/WINDOWS of the rest: the last one ends at the file's end.
        let end = DETECT_BYTES as u64 + rest * k / WINDOWS as u64;
        let start = end.saturating_sub(WINDOW_BYTES as u64);
        f.seek(SeekFrom::Start(start)).map_err(err)?;
        let mut w = Vec::with_capacity(WINDOW_BYTES);
        f.by_ref()
            .take(end - start)
            .read_to_end(&mut w)
            .map_err(err)?;
        // Keep whole lines only (the last window keeps the file's end).
        let from = w.iter().position(|&b| b == b'\n').map(|p| p + 1);
        let to = if end == len {
            Some(w.len())
        } else {
            w.iter().rposition(|&b| b == b'\n')
        };
        if let (Some(a), Some(b)) = (from, to) {
            if a < b {
                bytes.push(b'\n');
                bytes.extend_from_slice(&w[a..b]);
                windows.push(start + a as u64);
            }
        }
    }
    Ok(Sample {
        bytes,
        file_bytes: len,
        whole: false,
        windows,
    })
}

/// Paths and values kept per file at most: a file keyed by data (file names, ids) would
/// otherwise grow without bound.
const MAX_PATHS: usize = 20_000;
/// Distinct string values kept per path.
const MAX_VALUES: usize = 64;
/// Longest string value kept (discriminators are short: `assistant`, `ActionEvent`).
const MAX_VALUE_CHARS: usize = 120;
/// Deepest path recorded.
const MAX_DEPTH: usize = 16;
/// Objects with more keys than this are keyed by data (file names, ids): their key sets are
/// not kept for same-object conditions.
const MAX_OBJECT_KEYS: usize = 48;
/// Key sets kept per object path (only the maximal ones: a set inside a kept one adds nothing).
const MAX_KEY_SETS: usize = 256;

/// How a file is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Form {
    /// One JSON value (object or array).
    Document,
    /// One JSON value per line.
    Lines,
    /// A zip archive (an Inspect `.eval` log).
    Zip,
    /// Anything else (Markdown, plain text).
    Text,
}

impl Form {
    /// The name used in detection rules.
    pub fn name(self) -> &'static str {
        match self {
            Form::Document => "document",
            Form::Lines => "lines",
            Form::Zip => "zip",
            Form::Text => "text",
        }
    }
}

/// The structure of one file.
#[derive(Debug, Clone)]
pub struct Shape {
    pub form: Form,
    /// JSON records walked (1 for a document, the lines read for JSON Lines).
    pub records: usize,
    /// Sampled lines of a JSON Lines file that are not JSON.
    pub bad_lines: usize,
    /// Key path (`/a/*/b`) → records holding it.
    paths: HashMap<String, u32>,
    /// Key path → short string values found there.
    values: HashMap<String, BTreeSet<String>>,
    /// Object path (`/messages/*`, `` for the record itself) → the key sets of the objects
    /// there (sorted, escaped as in paths), the maximal ones only: what same-object conditions
    /// (`/**/{name,role,content}`) are tested on.
    objects: HashMap<String, Vec<Vec<String>>>,
    /// The sampled text (for line rules and the needles of older mapping files).
    pub text: String,
    /// Where a JSON document stopped parsing, if it did (what was read before still counts).
    pub error: Option<String>,
}

impl Shape {
    /// The shape of the file at `path`, given its detection sample, reading at most `limit`
    /// bytes (the input size limit).
    pub fn read(path: &Path, sample: &Sample, limit: u64) -> Shape {
        Shape::read_opts(path, sample, true, limit)
    }

    /// [`Shape::read`], except that a JSON document larger than its sample is not read and
    /// walked whole (`walk_document` false): its form and sampled text are all some callers
    /// look at (the AG2 adapter asking whether a file is a runtime log), and the walk is a
    /// second parse of the whole file.
    pub(crate) fn read_opts(
        path: &Path,
        sample: &Sample,
        walk_document: bool,
        limit: u64,
    ) -> Shape {
        let mut shape = Shape::of_text(crate::support::head_text(&sample.bytes).to_string());
        if sample.bytes.starts_with(b"PK\x03\x04") {
            shape.form = Form::Zip;
            if let Ok(names) = sage_trace::archive::member_names(path) {
                for n in names {
                    shape.add_path(&format!("/{n}"));
                }
            }
            return shape;
        }
        let lead = shape.text.trim_start();
        let lead_json = lead.starts_with('{') || lead.starts_with('[');
        // JSON Lines: the first line is a whole JSON value and more follows it, or most of
        // the sampled lines after it are JSON records (a log that opens with a banner line).
        let first = first_line(path, limit).unwrap_or_default();
        let first_is_value = lead_json && is_json_record(&first);
        let after_first: Vec<&[u8]> = match sample.bytes.iter().position(|&b| b == b'\n') {
            Some(p) => sample.bytes[p + 1..]
                .split(|&b| b == b'\n')
                .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
                .collect(),
            None => vec![],
        };
        let json_after = after_first.iter().filter(|l| is_json_record(l)).count();
        let lines = if first_is_value {
            !after_first.is_empty() || rest_has_content(path, first.len())
        } else {
            json_after >= 1 && json_after * 2 > after_first.len()
        };
        if lines {
            shape.form = Form::Lines;
            if !shape.walk(&first) {
                shape.bad_lines += 1;
            }
            for l in after_first {
                if !shape.walk(l) {
                    shape.bad_lines += 1;
                }
            }
            return shape;
        }
        if !lead_json {
            return shape;
        }
        shape.form = Form::Document;
        if sample.whole {
            shape.walk(&sample.bytes);
            return shape;
        }
        if !walk_document {
            return shape;
        }
        match sage_trace::safe::read_limited(path, limit) {
            Ok(bytes) => {
                shape.walk(&bytes);
            }
            Err(e) => shape.error = Some(format!("cannot read: {e}")),
        }
        shape
    }

    /// The shape of `text` read as a file is (the product's path, through a temporary file):
    /// for tests.
    #[cfg(test)]
    pub(crate) fn of_json_text(text: &str) -> Shape {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let p = dir.path().join("trace");
        std::fs::write(&p, text).expect("a temporary file");
        let s = sample(&p, "trace").expect("the file just written");
        Shape::read(&p, &s, sage_trace::safe::DEFAULT_MAX_INPUT_BYTES)
    }

    /// A shape that is only text, before any JSON is walked.
    fn of_text(text: String) -> Shape {
        Shape {
            form: Form::Text,
            records: 0,
            bad_lines: 0,
            paths: HashMap::new(),
            values: HashMap::new(),
            objects: HashMap::new(),
            text,
            error: None,
        }
    }

    /// Walk the JSON records of `bytes` (one for a line; one or several concatenated for a
    /// document) into the path and value tables; false when it is not JSON (the paths read
    /// before the error are kept).
    fn walk(&mut self, bytes: &[u8]) -> bool {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        loop {
            let mut seen = HashSet::new();
            let result = Walker {
                path: &mut String::new(),
                depth: 0,
                shape: self,
                seen: &mut seen,
            }
            .deserialize(&mut de);
            for p in seen {
                *self.paths.entry(p).or_insert(0) += 1;
            }
            if let Err(e) = result {
                if self.form == Form::Document {
                    self.records += 1;
                    self.error = Some(e.to_string());
                }
                return false;
            }
            self.records += 1;
            // Only white space may follow a line; a document may be followed by another
            // (concatenated documents, as CAMEL writes them).
            match de.end() {
                Ok(()) => return true,
                Err(_) if self.form == Form::Document => continue,
                Err(_) => {
                    self.records -= 1;
                    return false;
                }
            }
        }
    }

    fn add_path(&mut self, p: &str) {
        if self.paths.len() < MAX_PATHS || self.paths.contains_key(p) {
            *self.paths.entry(p.to_string()).or_insert(0) += 1;
        }
    }

    /// Records holding a path matching `pattern` (see [`path_matches`]).
    pub fn count(&self, pattern: &str) -> u32 {
        if !pattern.contains('*') {
            return self.paths.get(pattern).copied().unwrap_or(0);
        }
        self.paths
            .iter()
            .filter(|(p, _)| path_matches(pattern, p))
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(0)
    }

    /// Whether some path matching `pattern` holds a string value accepted by `test`.
    pub fn has_value(&self, pattern: &str, test: impl Fn(&str) -> bool) -> bool {
        let check = |vs: &BTreeSet<String>| vs.iter().any(|v| test(v));
        if !pattern.contains('*') {
            return self.values.get(pattern).is_some_and(check);
        }
        self.values
            .iter()
            .any(|(p, vs)| path_matches(pattern, p) && check(vs))
    }

    /// Whether one object at a path matching `parent` has every key of `keys` (the keys
    /// together, on the same object of the same record, not anywhere in the file).
    pub fn has_keys_together(&self, parent: &str, keys: &[&str]) -> bool {
        let holds = |sets: &Vec<Vec<String>>| {
            sets.iter()
                .any(|set| keys.iter().all(|k| set.iter().any(|s| s == k)))
        };
        if !parent.contains('*') {
            return self.objects.get(parent).is_some_and(holds);
        }
        self.objects
            .iter()
            .any(|(p, sets)| path_matches(parent, p) && holds(sets))
    }

    /// Keep the key set of one object at `path`: only maximal sets, at most [`MAX_KEY_SETS`]
    /// per path, at most [`MAX_PATHS`] paths.
    fn add_key_set(&mut self, path: &str, mut keys: Vec<String>) {
        keys.sort_unstable();
        keys.dedup();
        if !self.objects.contains_key(path) && self.objects.len() >= MAX_PATHS {
            return;
        }
        let sets = self.objects.entry(path.to_string()).or_default();
        let within = |small: &[String], big: &[String]| small.iter().all(|k| big.contains(k));
        if sets.iter().any(|s| within(&keys, s)) {
            return;
        }
        sets.retain(|s| !within(s, &keys));
        if sets.len() < MAX_KEY_SETS {
            sets.push(keys);
        }
    }

    /// The most common top-level keys or record paths, for the evidence report.
    pub fn summary(&self, most: usize) -> Vec<(String, u32)> {
        let mut v: Vec<(String, u32)> = self
            .paths
            .iter()
            .filter(|(p, _)| p.matches('/').count() <= 2)
            .map(|(p, n)| (p.clone(), *n))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(most);
        v
    }
}

/// Whether the key path `p` matches `pattern`: segments compare literally, `*` stands for any
/// one segment, `**` for any number of segments (none included).
pub fn path_matches(pattern: &str, p: &str) -> bool {
    // Segments walked as cloned iterators, not collected: detection asks this for every
    // condition and path of the file.
    type Segs<'a> = std::iter::Skip<std::str::Split<'a, char>>;
    fn go(mut pat: Segs<'_>, mut segs: Segs<'_>) -> bool {
        match pat.next() {
            None => segs.next().is_none(),
            Some("**") => loop {
                if go(pat.clone(), segs.clone()) {
                    return true;
                }
                if segs.next().is_none() {
                    return false;
                }
            },
            Some(first) => match segs.next() {
                Some(s) => (first == "*" || first == s) && go(pat, segs),
                None => false,
            },
        }
    }
    // A pattern ending in a literal segment matches only paths ending in it: most paths of
    // a file are told apart by that alone, without the walk.
    if let Some(last) = pattern
        .strip_prefix('/')
        .map(|r| r.rsplit('/').next().unwrap_or(r))
    {
        if last != "*" && last != "**" && p.rsplit_once('/').is_none_or(|(_, l)| l != last) {
            return false;
        }
    }
    go(pattern.split('/').skip(1), p.split('/').skip(1))
}

/// Whether `line` is one whole JSON object or array.
fn is_json_record(line: &[u8]) -> bool {
    let t = line.trim_ascii_start();
    (t.starts_with(b"{") || t.starts_with(b"["))
        && serde_json::from_slice::<serde::de::IgnoredAny>(t).is_ok()
}

/// The first line of the file, whole (up to the input limit).
fn first_line(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let f = std::fs::File::open(path)?;
    let mut r = std::io::BufReader::new(f.take(limit));
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        line.pop();
    }
    Ok(line)
}

/// Whether anything but white space follows the first `skip` bytes.
fn rest_has_content(path: &Path, skip: usize) -> bool {
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    if f.seek(SeekFrom::Start(skip as u64)).is_err() {
        return false;
    }
    let mut buf = [0u8; 4096];
    loop {
        match f.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                if buf[..n].iter().any(|b| !b.is_ascii_whitespace()) {
                    return true;
                }
            }
        }
    }
}

/// Walks a JSON value recording key paths and short string values, building nothing.
struct Walker<'a> {
    path: &'a mut String,
    depth: usize,
    shape: &'a mut Shape,
    /// Paths of this record (each counted once per record).
    seen: &'a mut HashSet<String>,
}

impl<'de> DeserializeSeed<'de> for Walker<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Walker<'_> {
    fn child(&mut self) -> Walker<'_> {
        Walker {
            path: self.path,
            depth: self.depth + 1,
            shape: self.shape,
            seen: self.seen,
        }
    }
    fn note_path(&mut self) {
        if self.seen.len() < MAX_PATHS && !self.seen.contains(self.path.as_str()) {
            self.seen.insert(self.path.clone());
        }
    }
    fn note_value(&mut self, v: &str) {
        if v.chars().count() > MAX_VALUE_CHARS {
            return;
        }
        if !self.shape.values.contains_key(self.path.as_str())
            && self.shape.values.len() >= MAX_PATHS
        {
            return;
        }
        let set = self.shape.values.entry(self.path.clone()).or_default();
        if set.len() < MAX_VALUES {
            set.insert(v.to_string());
        }
    }
}

impl<'de> Visitor<'de> for Walker<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(mut self, v: &str) -> Result<(), E> {
        self.note_value(v);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let len = self.path.len();
        let deep = self.depth >= MAX_DEPTH;
        if !deep {
            self.path.push_str("/*");
        }
        let mut result = Ok(());
        loop {
            let next = if deep {
                seq.next_element::<serde::de::IgnoredAny>()
                    .map(|o| o.map(|_| ()))
            } else {
                self.note_path();
                seq.next_element_seed(self.child())
            };
            match next {
                Ok(Some(())) => {}
                Ok(None) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.path.truncate(len);
        result
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let len = self.path.len();
        // This object's keys, for same-object conditions (none past the depth limit, none
        // when there are more than an object of named fields has).
        let mut keys: Option<Vec<String>> = (self.depth < MAX_DEPTH).then(Vec::new);
        let result = loop {
            let key = match map.next_key::<std::borrow::Cow<'de, str>>() {
                Ok(Some(k)) => k,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            if self.depth >= MAX_DEPTH {
                if let Err(e) = map.next_value::<serde::de::IgnoredAny>() {
                    break Err(e);
                }
                continue;
            }
            self.path.push('/');
            // Keys are JSON-pointer escaped, so a key holding `/` stays one segment.
            for c in key.chars() {
                match c {
                    '~' => self.path.push_str("~0"),
                    '/' => self.path.push_str("~1"),
                    c => self.path.push(c),
                }
            }
            if let Some(ks) = keys.as_mut() {
                if ks.len() < MAX_OBJECT_KEYS {
                    ks.push(self.path[len + 1..].to_string());
                } else {
                    keys = None;
                }
            }
            self.note_path();
            let r = map.next_value_seed(self.child());
            self.path.truncate(len);
            if let Err(e) = r {
                break Err(e);
            }
        };
        self.path.truncate(len);
        if let (Ok(()), Some(ks)) = (&result, keys) {
            let at = self.path.clone();
            self.shape.add_key_set(&at, ks);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The form `path_matches` had (segments collected first): the reference.
    fn path_matches_collected(pattern: &str, p: &str) -> bool {
        let pat: Vec<&str> = pattern.split('/').skip(1).collect();
        let segs: Vec<&str> = p.split('/').skip(1).collect();
        fn go(pat: &[&str], segs: &[&str]) -> bool {
            match pat.split_first() {
                None => segs.is_empty(),
                Some((&"**", rest)) => (0..=segs.len()).any(|k| go(rest, &segs[k..])),
                Some((first, rest)) => match segs.split_first() {
                    Some((s, srest)) => (*first == "*" || first == s) && go(rest, srest),
                    None => false,
                },
            }
        }
        go(&pat, &segs)
    }

    proptest::proptest! {
        #[test]
        fn path_matching_answers_as_the_collected_form(
            pattern in "(/(a|b|\\*|\\*\\*)){0,5}|x|",
            path in "(/(a|b|)){0,5}|a",
        ) {
            proptest::prop_assert_eq!(
                path_matches(&pattern, &path),
                path_matches_collected(&pattern, &path)
            );
        }
    }

    #[test]
    fn spacing_order_and_indentation_change_nothing() {
        let compact = r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","name":"bash"}]}}
{"type":"user","sessionId":"s"}"#;
        let spaced = "{ \"message\" : { \"content\" : [ { \"name\" : \"bash\" , \"type\" : \"tool_use\" } ], \"role\" : \"assistant\" } , \"type\" : \"assistant\" }\n{\"sessionId\": \"s\", \"type\": \"user\"}\n";
        for t in [compact, spaced] {
            let s = Shape::of_json_text(t);
            assert_eq!(s.form, Form::Lines);
            assert_eq!(s.records, 2);
            assert_eq!(s.count("/type"), 2);
            assert_eq!(s.count("/message/content/*/name"), 1);
            assert!(s.has_value("/type", |v| v == "assistant"));
            assert!(s.has_value("/message/content/*/type", |v| v == "tool_use"));
            assert!(s.has_value("/**/name", |v| v == "bash"));
            assert_eq!(s.count("/sessionId"), 1);
        }
        let pretty = "{\n  \"history\": [\n    {\"role\": \"a\", \"content\": \"x\"}\n  ],\n  \"mistake_agent\": \"a\"\n}\n";
        let s = Shape::of_json_text(pretty);
        assert_eq!(s.form, Form::Document);
        assert_eq!(s.count("/history/*/role"), 1);
        assert_eq!(s.count("/mistake_agent"), 1);
    }

    #[test]
    fn keys_together_are_keys_of_one_object() {
        // AG2 messages: name, role and content on each message.
        let ag2 = r#"[{"name": "coder", "role": "assistant", "content": "x"}]"#;
        let s = Shape::of_json_text(ag2);
        assert!(s.has_keys_together("/**", &["name", "role", "content"]));
        assert!(s.has_keys_together("/*", &["content", "name"]));
        assert!(!s.has_keys_together("", &["name"]));
        // The same keys spread over objects (a Moatless trajectory): not together.
        let spread = r#"{"name": "t", "messages": [{"role": "user", "content": "x"}]}"#;
        let s = Shape::of_json_text(spread);
        assert!(s.count("/**/name") > 0 && s.count("/**/role") > 0);
        assert!(!s.has_keys_together("/**", &["name", "role", "content"]));
        assert!(s.has_keys_together("/messages/*", &["role", "content"]));
        // JSON Lines: one record's object, not keys from different lines.
        let lines = "{\"name\": \"a\"}\n{\"role\": \"b\", \"content\": \"c\"}\n";
        let s = Shape::of_json_text(lines);
        assert_eq!(s.form, Form::Lines);
        assert!(!s.has_keys_together("/**", &["name", "role", "content"]));
        // Only maximal key sets are kept.
        let many = r#"[{"a": 1}, {"a": 1, "b": 2}, {"a": 1}, {"c": 3}]"#;
        let s = Shape::of_json_text(many);
        assert_eq!(s.objects["/*"].len(), 2);
        assert!(s.has_keys_together("/*", &["a", "b"]));
    }

    #[test]
    fn patterns() {
        assert!(path_matches("/a/*/b", "/a/*/b"));
        assert!(path_matches("/a/*/b", "/a/x/b"));
        assert!(!path_matches("/a/*/b", "/a/b"));
        assert!(path_matches("/**/b", "/b"));
        assert!(path_matches("/**/b", "/a/*/c/b"));
        assert!(!path_matches("/**/b", "/a/b/c"));
        assert!(path_matches("/a/**", "/a/b/c"));
    }

    #[test]
    fn a_truncated_document_keeps_what_was_read() {
        let s = Shape::of_json_text("{\"history\": [{\"role\": \"x\"}, {\"rol");
        assert_eq!(s.form, Form::Document);
        assert_eq!(s.count("/history/*/role"), 1);
        assert!(s.error.is_some());
    }

    #[test]
    fn keys_made_of_data_are_bounded() {
        let mut t = String::from("{");
        for k in 0..(MAX_PATHS + 500) {
            t.push_str(&format!("\"k{k}\": 1,"));
        }
        t.push_str("\"end\": 1}");
        let s = Shape::of_json_text(&t);
        assert!(s.paths.len() <= MAX_PATHS);
    }
}
