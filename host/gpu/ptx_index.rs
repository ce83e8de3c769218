//! Where each kernel entry lies in the PTX text, and what every module
//! shares: found once, by build.rs when it embeds the PTX (this file is
//! also its module), so that loading a kernel at run time copies its
//! module's pieces instead of scanning the whole PTX for it.
//!
//! A module for entry `e` is the PTX's header and every top-level item that
//! is not an entry (function definitions and declarations, global and
//! shared-memory declarations), in their order, followed by `e` itself.
//! ptxas drops what `e` does not use. Only `std`: build.rs compiles it too.

use std::ops::Range;

/// The byte ranges of a PTX text: the items every module shares, in order,
/// and each entry's own text.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PtxIndex {
    pub shared: Vec<Range<usize>>,
    pub entries: Vec<(String, Range<usize>)>,
}

impl PtxIndex {
    /// The index of `ptx`: one pass over its lines, braces counted to find
    /// where each entry's body ends.
    pub fn of(ptx: &str) -> PtxIndex {
        let mut index = PtxIndex::default();
        let mut entry: Option<(String, usize)> = None;
        let mut depth = 0usize;
        let mut at = 0;
        for line in ptx.split_inclusive('\n') {
            let start = at;
            at += line.len();
            if entry.is_none() && depth == 0 {
                if let Some(name) = entry_name(line) {
                    entry = Some((name.to_string(), start));
                }
            }
            if entry.is_none() {
                match index.shared.last_mut() {
                    Some(range) if range.end == start => range.end = at,
                    _ => index.shared.push(start..at),
                }
            }
            for byte in line.bytes() {
                match byte {
                    b'{' => depth += 1,
                    b'}' => depth = depth.saturating_sub(1),
                    _ => {}
                }
            }
            // An entry ends with the brace that closes its body.
            if depth == 0 && line.trim_start().starts_with('}') {
                if let Some((name, begin)) = entry.take() {
                    index.entries.push((name, begin..at));
                }
            }
        }
        index
    }
}

/// The module text for `entry` from `ptx` and its index's ranges, or `None`
/// if there is no such entry.
pub fn module_text(
    ptx: &str,
    shared: &[(usize, usize)],
    entries: &[(&str, usize, usize)],
    entry: &str,
) -> Option<String> {
    let &(_, start, end) = entries.iter().find(|(name, ..)| *name == entry)?;
    let length = shared.iter().map(|(s, e)| e - s).sum::<usize>() + end - start;
    let mut text = String::with_capacity(length);
    for &(s, e) in shared {
        text.push_str(&ptx[s..e]);
    }
    text.push_str(&ptx[start..end]);
    Some(text)
}

/// The name declared by a line that opens an entry point
/// (`.visible .entry name(` or `.entry name(`).
pub fn entry_name(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix(".visible .entry ")
        .or_else(|| line.strip_prefix(".entry "))?;
    let end = rest.find(|c: char| c == '(' || c.is_whitespace())?;
    Some(&rest[..end])
}
