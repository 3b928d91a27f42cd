//! Untrusted input, careful output: the helpers every stage uses when it reads a file a case
//! names, writes a file named after an id, puts text into a page or a sheet, or prints
//! anything that might carry a secret. The threat model they serve is `docs/security.md`.
//!
//! One helper per job, so a fix lands everywhere at once:
//! - [`file_stem`]: an id → a file name (injective, length-capped);
//! - [`read_case_file`] / [`read_limited`]: files named by a case stay inside it, are
//!   regular files, and have a size limit.
//!
//! Secrets (API keys, base-URL credentials) are the transport's: `sage_llm::secrets`; text
//! into HTML, SVG and spreadsheet cells is `sage-markup`'s.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

// ------------------------------------------------------------------ file names

/// Longest file stem [`file_stem`] returns (bytes), leaving room for an extension well
/// under the 255-byte limit of common file systems.
pub const MAX_STEM_BYTES: usize = 120;

/// A file stem for `id` (a case id, an annotator name, a ledger path component).
///
/// Injective: ASCII letters, digits, `-` and `_` (and `.` when not leading) stand for
/// themselves, every other byte of the UTF-8 text is written `~HH`, so two different ids never
/// share a name (`dup/x` → `dup~2Fx`, `dup_x` → `dup_x`). A name longer than
/// [`MAX_STEM_BYTES`] keeps a readable prefix and ends in `~~` and 16 hex digits of the id's
/// sha256; `~~` never occurs in a name that was not shortened, so shortened and plain names
/// cannot meet either. Case-insensitive file systems can still fold two names together; the
/// writers check for that ([`stem_collisions`]).
pub fn file_stem(id: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(id.len());
    for (i, b) in id.bytes().enumerate() {
        let keep = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0);
        if keep {
            out.push(b as char);
        } else {
            let _ = write!(out, "~{b:02X}");
        }
    }
    if out.is_empty() {
        // the empty id: a name no other id produces
        out.push_str("~~empty");
    }
    if out.len() > MAX_STEM_BYTES {
        use sha2::{Digest, Sha256};
        let h = hex::encode(Sha256::digest(id.as_bytes()));
        let mut cut = MAX_STEM_BYTES - 18;
        // never cut inside a `~HH` escape (the stem is ASCII, so any byte is a boundary)
        if let Some(p) = out[..cut].rfind('~').filter(|p| cut - p < 3) {
            cut = p;
        }
        out.truncate(cut);
        out.push_str("~~");
        out.push_str(&h[..16]);
    }
    out
}

/// The id a [`file_stem`] was made from, when it was not shortened (`None` for a shortened
/// stem, which keeps only a hash of the rest, and for text no stem can be).
pub fn file_stem_id(stem: &str) -> Option<String> {
    if stem == "~~empty" {
        return Some(String::new());
    }
    if stem.contains("~~") {
        return None;
    }
    let b = stem.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'~' {
            let hex = stem.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Groups of distinct ids whose [`file_stem`]s are equal when case is ignored (they would
/// overwrite each other on a case-insensitive file system). Empty when none collide.
pub fn stem_collisions<'a>(ids: impl IntoIterator<Item = &'a str>) -> Vec<Vec<String>> {
    let mut by: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for id in ids {
        by.entry(file_stem(id).to_ascii_lowercase())
            .or_default()
            .insert(id.to_string());
    }
    by.into_values()
        .filter(|s| s.len() > 1)
        .map(|s| s.into_iter().collect())
        .collect()
}

/// Why an id cannot name a case (or an annotator): empty, control characters, surrounding
/// blanks, or longer than 512 bytes. Ids are shown in pages, sheets and terminals, so they
/// must print as what they are.
pub fn check_id(id: &str) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty);
    }
    if id.len() > 512 {
        return Err(IdError::TooLong(id.len()));
    }
    if let Some(c) = id.chars().find(|c| c.is_control()) {
        return Err(IdError::Control(c));
    }
    if id.trim() != id {
        return Err(IdError::Blanks);
    }
    Ok(())
}

/// Why an id was refused ([`check_id`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The id is empty.
    #[error("the id is empty")]
    Empty,
    /// The id is longer than 512 bytes.
    #[error("the id is {0} bytes long (at most 512)")]
    TooLong(usize),
    /// The id holds a control character.
    #[error("the id contains the control character {0:?}")]
    Control(char),
    /// The id starts or ends with blanks.
    #[error("the id starts or ends with blanks")]
    Blanks,
}

/// Why an input file was not read: it lies outside the case, is not a regular file, is too
/// large, or could not be read. The message names what the user can do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// A case named an empty path.
    #[error("the path is empty")]
    EmptyPath,
    /// A case named an absolute path.
    #[error("{0:?} is an absolute path; case files are named relative to the case folder")]
    Absolute(String),
    /// The path resolves outside the case folder and every allowed root.
    #[error(
        "{rel:?} resolves to {real}, outside the case folder (add its folder to SAGE_CASE_ROOTS to allow it)"
    )]
    Outside {
        /// The path as the case names it.
        rel: String,
        /// Where it resolves.
        real: String,
    },
    /// A device, FIFO, socket or folder.
    #[error("not a regular file")]
    NotRegular,
    /// Larger than the input limit (by its size on disk, or by the bytes a reader gave).
    #[error(
        "{what}larger than the input limit of {limit} bytes (set SAGE_MAX_INPUT_MB to raise it)"
    )]
    TooLarge {
        /// What was read, with its size when known (`"123 bytes, "`, `"member x: "`).
        what: String,
        /// The limit in bytes.
        limit: u64,
    },
    /// The operating system refused (path or reader, and its message).
    #[error("{0}")]
    Io(String),
}

// ------------------------------------------------------------------ reading input files

/// Default size limit of one input file (a trace, a baseline, an archive member): 256 MiB.
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 256 << 20;

/// What the user set for reading input files: the size limit of one file
/// (`SAGE_MAX_INPUT_MB`) and the folders outside a case its files may point into
/// (`SAGE_CASE_ROOTS`). A value the CLI builds once and passes down; no library reads the
/// environment or keeps it in a global.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The size limit of one input file, in bytes (at least 1).
    pub max_input_bytes: u64,
    roots: Vec<PathBuf>,
}

impl Default for Limits {
    /// [`DEFAULT_MAX_INPUT_BYTES`], no folder outside a case.
    fn default() -> Self {
        Limits {
            max_input_bytes: DEFAULT_MAX_INPUT_BYTES,
            roots: Vec::new(),
        }
    }
}

impl Limits {
    /// These limits with case files allowed to point into `roots` (each canonicalized; one
    /// that does not exist is left out).
    pub fn with_roots(mut self, roots: impl IntoIterator<Item = PathBuf>) -> Limits {
        self.roots = roots
            .into_iter()
            .filter(|p| !p.as_os_str().is_empty())
            .filter_map(|p| p.canonicalize().ok())
            .collect();
        self
    }

    /// The folders outside a case folder that its files may point into.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }
}

/// Read at most `limit` bytes from a reader; more is an error (the reader may be a
/// decompressor whose declared size lies).
pub(crate) fn read_capped(mut r: impl Read, limit: u64, what: &str) -> Result<Vec<u8>, InputError> {
    let mut out = Vec::new();
    r.by_ref()
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| InputError::Io(format!("{what}: {e}")))?;
    if out.len() as u64 > limit {
        return Err(InputError::TooLarge {
            what: format!("{what}: "),
            limit,
        });
    }
    Ok(out)
}

/// Read a regular file of at most `limit` bytes. Devices, FIFOs, sockets and folders are
/// refused before anything is read (`/dev/zero` never ends, a FIFO blocks).
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    let f = open_limited(path, limit)?;
    read_capped(f, limit, "read")
}

/// Open a regular file of at most `limit` bytes for reading (see [`read_limited`]).
pub(crate) fn open_limited(path: &Path, limit: u64) -> Result<std::fs::File, InputError> {
    let f = open_nonblocking(path).map_err(|e| InputError::Io(e.to_string()))?;
    let meta = f.metadata().map_err(|e| InputError::Io(e.to_string()))?;
    if !meta.is_file() {
        return Err(InputError::NotRegular);
    }
    if meta.len() > limit {
        return Err(InputError::TooLarge {
            what: format!("{} bytes, ", meta.len()),
            limit,
        });
    }
    Ok(f)
}

/// Open for reading without blocking: opening a FIFO for reading waits for a writer, and an
/// input file named by a trace must never hang sage. (Regular files ignore the flag.)
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NONBLOCK);
    o.open(path)
}

/// `base/rel` when `rel` is a plain relative path that cannot leave `base`: not absolute,
/// no `..`, no drive prefix. For paths sage *writes* from names a trace or a manifest gives
/// (an artefact's baseline in a new case folder, a test file in a scratch copy); reading goes
/// through [`resolve_case_path`], which also resolves symbolic links.
pub fn safe_join(base: &Path, rel: &str) -> Option<PathBuf> {
    let p = Path::new(rel);
    if rel.is_empty()
        || p.is_absolute()
        || p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return None;
    }
    Some(base.join(p))
}

/// Where `rel` (a path a case manifest names) points, when it stays inside the case folder
/// `dir` (or one of the `limits`' [`Limits::roots`]) after every `..` and symbolic link is
/// resolved. Absolute paths are refused outright.
pub(crate) fn resolve_case_path(
    dir: &Path,
    rel: &str,
    limits: &Limits,
) -> Result<PathBuf, InputError> {
    if rel.is_empty() {
        return Err(InputError::EmptyPath);
    }
    let p = Path::new(rel);
    if p.is_absolute() || p.components().any(|c| matches!(c, Component::Prefix(_))) {
        return Err(InputError::Absolute(rel.to_string()));
    }
    let base = dir
        .canonicalize()
        .map_err(|e| InputError::Io(format!("{}: {e}", dir.display())))?;
    let joined = base.join(p);
    let real = joined
        .canonicalize()
        .map_err(|e| InputError::Io(format!("{}: {e}", joined.display())))?;
    if real.starts_with(&base) || limits.roots.iter().any(|r| real.starts_with(r)) {
        Ok(real)
    } else {
        Err(InputError::Outside {
            rel: rel.to_string(),
            real: real.display().to_string(),
        })
    }
}

/// Read a file a case names: inside the case folder ([`resolve_case_path`]), a regular
/// file, at most [`Limits::max_input_bytes`].
pub fn read_case_file(dir: &Path, rel: &str, limits: &Limits) -> Result<Vec<u8>, InputError> {
    let real = resolve_case_path(dir, rel, limits)?;
    read_limited(&real, limits.max_input_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stems_are_injective_and_capped() {
        assert_eq!(file_stem("ag2-fig1a-aes-ecb"), "ag2-fig1a-aes-ecb");
        assert_eq!(file_stem("CWE-327_codeql_1.py"), "CWE-327_codeql_1.py");
        assert_ne!(file_stem("dup/x"), file_stem("dup_x"));
        assert_eq!(file_stem("dup/x"), "dup~2Fx");
        assert_eq!(file_stem(".."), "~2E.");
        assert_eq!(file_stem("a~b"), "a~7Eb");
        assert_eq!(file_stem(""), "~~empty");
        let long = "x".repeat(300);
        let s = file_stem(&long);
        assert!(s.len() <= MAX_STEM_BYTES, "{}", s.len());
        assert_ne!(s, file_stem(&"x".repeat(301)));
        // a shortened name cannot equal a plain one: `~~` appears only in the former
        assert!(s.contains("~~") && !file_stem("x~~y").contains("~~"));
        let multi = "é/".repeat(100);
        let m = file_stem(&multi);
        assert!(m.len() <= MAX_STEM_BYTES);
        // the cut never splits an escape: every `~` is followed by two hex digits or `~`
        let b = m.as_bytes();
        for (i, c) in b.iter().enumerate() {
            if *c == b'~' && !(b.get(i + 1) == Some(&b'~') || i > 0 && b[i - 1] == b'~') {
                assert!(b.len() >= i + 3, "{m}");
            }
        }
        for id in ["dup/x", "R/1", "a~b", "..", "", "é", "plain-id_1.x"] {
            assert_eq!(file_stem_id(&file_stem(id)).as_deref(), Some(id), "{id}");
        }
        assert_eq!(file_stem_id(&s), None);
        assert_eq!(stem_collisions(["Case", "case", "other"]).len(), 1);
        assert!(stem_collisions(["dup/x", "dup_x"]).is_empty());
    }

    #[test]
    fn ids_are_checked() {
        assert!(check_id("case-1").is_ok());
        assert!(check_id("").is_err());
        assert!(check_id("a\nb").is_err());
        assert!(check_id(" a").is_err());
        assert!(check_id(&"a".repeat(600)).is_err());
    }

    #[test]
    fn case_paths_stay_inside_the_case_folder() {
        let d = tempfile::tempdir().unwrap();
        let case = d.path().join("case");
        std::fs::create_dir_all(case.join("sub")).unwrap();
        std::fs::write(case.join("sub/a.txt"), "a").unwrap();
        std::fs::write(d.path().join("outside.txt"), "o").unwrap();
        let read_case_file = |dir: &Path, rel: &str| read_case_file(dir, rel, &Limits::default());
        assert_eq!(read_case_file(&case, "sub/a.txt").unwrap(), b"a");
        assert_eq!(read_case_file(&case, "sub/../sub/a.txt").unwrap(), b"a");
        assert!(read_case_file(&case, "../outside.txt").is_err());
        assert!(read_case_file(&case, "/etc/hostname").is_err());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(d.path().join("outside.txt"), case.join("link")).unwrap();
            assert!(read_case_file(&case, "link")
                .unwrap_err()
                .to_string()
                .contains("outside"));
            std::os::unix::fs::symlink(case.join("sub/a.txt"), case.join("inside")).unwrap();
            assert_eq!(read_case_file(&case, "inside").unwrap(), b"a");
        }
        assert!(read_case_file(&case, "sub")
            .unwrap_err()
            .to_string()
            .contains("regular"));
        // a FIFO is refused without blocking (opening it for reading would wait for a writer)
        if std::process::Command::new("mkfifo")
            .arg(case.join("pipe"))
            .status()
            .is_ok_and(|s| s.success())
        {
            assert!(read_case_file(&case, "pipe")
                .unwrap_err()
                .to_string()
                .contains("regular"));
        } else {
            eprintln!("mkfifo not available: FIFO refusal not exercised");
        }
        // a folder the limits allow is readable from the case; the default allows none
        let allowed = Limits::default().with_roots([d.path().to_path_buf()]);
        assert_eq!(
            super::read_case_file(&case, "../outside.txt", &allowed).unwrap(),
            b"o"
        );
        let small = Limits {
            max_input_bytes: 10,
            ..Limits::default()
        };
        std::fs::write(case.join("big"), vec![b'x'; 100]).unwrap();
        assert!(super::read_case_file(&case, "big", &small)
            .unwrap_err()
            .to_string()
            .contains("SAGE_MAX_INPUT_MB"));
        assert!(read_case_file(&case, "big").is_ok());
        assert!(read_limited(&case.join("big"), 10).is_err());
        assert!(read_capped(&b"0123456789x"[..], 10, "m").is_err());
        assert_eq!(read_capped(&b"0123456789"[..], 10, "m").unwrap().len(), 10);
    }
}
