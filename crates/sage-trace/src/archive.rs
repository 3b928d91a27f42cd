//! Raw records inside archives: an Inspect AI `.eval` log is a zip file, and a raw pointer
//! into one of its samples names the member (`log.eval!/samples/1_epoch_1.json`).

use std::io::Read;
use std::path::Path;

/// The error of [`read_zip_member`]: which archive or member, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArchiveError(pub String);

/// Read member `member` of the zip archive at `path`.
pub fn read_zip_member(path: &Path, member: &str) -> Result<Vec<u8>, ArchiveError> {
    let f = std::fs::File::open(path).map_err(|e| ArchiveError(e.to_string()))?;
    let mut z =
        zip::ZipArchive::new(f).map_err(|e| ArchiveError(format!("not a zip archive: {e}")))?;
    let mut m = z
        .by_name(member)
        .map_err(|e| ArchiveError(format!("{member}: {e}")))?;
    let mut out = Vec::new();
    m.read_to_end(&mut out)
        .map_err(|e| ArchiveError(format!("{member}: {e}")))?;
    Ok(out)
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
