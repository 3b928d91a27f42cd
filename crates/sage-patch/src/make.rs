//! Writing diffs and marking what a change wrote.

/// The unified diff of two states of a file (3 lines of context), for reports and views.
pub fn make(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string()
}

/// The line ranges of `new` (0-based, end exclusive) that a line diff from `old` inserts or
/// replaces, in order: what a change wrote, for anything that marks lines of the new version
/// (screening's proposals). Patience diff, so a moved block reads as the move it is rather
/// than as scattered one-line matches.
pub fn changed_lines(old: &str, new: &str) -> Vec<std::ops::Range<usize>> {
    use similar::{Algorithm, DiffTag, TextDiff};
    TextDiff::configure()
        .algorithm(Algorithm::Patience)
        .diff_lines(old, new)
        .ops()
        .iter()
        .filter(|op| matches!(op.tag(), DiffTag::Insert | DiffTag::Replace))
        .map(|op| op.new_range())
        .collect()
}
