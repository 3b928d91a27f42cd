//! Raw records inside archives: an Inspect AI `.eval` log is a zip file, and a raw pointer
//! into one of its samples names the member (`log.eval!/samples/1_epoch_1.json`).

use std::path::Path;

/// The error of [`read_zip_member`]: which archive or member, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArchiveError(pub String);

/// Read member `member` of the zip archive at `path` (itself at most `limit` bytes),
/// inflating at most `limit` bytes (the input size limit,
/// [`crate::safe::Limits::max_input_bytes`]). The limit applies to the bytes actually
/// inflated, not to the size the archive declares (a zip bomb declares what it likes): a
/// member that inflates past it is an error, and reading stops there.
pub fn read_zip_member(path: &Path, member: &str, limit: u64) -> Result<Vec<u8>, ArchiveError> {
    let f = crate::safe::open_limited(path, limit).map_err(|e| ArchiveError(e.to_string()))?;
    let mut z =
        zip::ZipArchive::new(f).map_err(|e| ArchiveError(format!("not a zip archive: {e}")))?;
    let m = z
        .by_name(member)
        .map_err(|e| ArchiveError(format!("{member}: {e}")))?;
    if m.size() > limit {
        return Err(ArchiveError(format!(
            "{member}: inflates to {} bytes, larger than the input limit of {limit} bytes (set SAGE_MAX_INPUT_MB to raise it)",
            m.size()
        )));
    }
    crate::safe::read_capped(m, limit, member).map_err(|e| ArchiveError(e.to_string()))
}

/// The names of every member of the zip archive at `path`, in archive order.
pub fn member_names(path: &Path) -> Result<Vec<String>, ArchiveError> {
    let f = std::fs::File::open(path).map_err(|e| ArchiveError(format!("cannot read: {e}")))?;
    let z = zip::ZipArchive::new(f).map_err(|e| ArchiveError(format!("not a zip archive: {e}")))?;
    Ok(z.file_names()
        .filter_map(Result::ok)
        .map(|n| n.to_string())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    /// A `.eval` whose sample member inflates to `n` bytes of blanks (valid JSON padding
    /// around `{}`), compressed to a few kilobytes.
    fn bomb(dir: &std::path::Path, n: usize) -> std::path::PathBuf {
        let p = dir.join("bomb.eval");
        let mut z = zip::ZipWriter::new(std::fs::File::create(&p).unwrap());
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        z.start_file("header.json", opts).unwrap();
        z.write_all(br#"{"version":2,"eval":{"eval_id":"x","run_id":"y"}}"#)
            .unwrap();
        z.start_file("samples/1_epoch_1.json", opts).unwrap();
        z.write_all(b"{}").unwrap();
        let chunk = vec![b' '; 1 << 16];
        let mut left = n;
        while left > 0 {
            let k = left.min(chunk.len());
            z.write_all(&chunk[..k]).unwrap();
            left -= k;
        }
        z.finish().unwrap();
        p
    }

    #[test]
    fn attack_inspect_member_inflates_past_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let p = bomb(d.path(), 8 << 20);
        // the archive is tiny; the member is 8 MiB once inflated
        assert!(std::fs::metadata(&p).unwrap().len() < 200 << 10);
        let e = read_zip_member(&p, "samples/1_epoch_1.json", 1 << 20).unwrap_err();
        assert!(e.0.contains("larger than the input limit"), "{e}");
        // under the limit it reads whole
        let ok = read_zip_member(&p, "samples/1_epoch_1.json", 16 << 20).unwrap();
        assert_eq!(ok.len(), 2 + (8 << 20));
    }
}
