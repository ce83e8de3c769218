//! Where each kernel entry lies in the PTX text, and what every module
//! shares: found once, by build.rs when it embeds the PTX (this file is
//! also its module), so that loading a kernel at run time copies its
//! module's pieces instead of scanning the whole PTX for it.
//!
//! A module for entry `e` is the PTX's header and every top-level item that
//! is not an entry (function definitions and declarations, global and
//! shared-memory declarations), in their order, followed by `e` itself.
//! ptxas drops what `e` does not use. Only `std`: build.rs compiles it too.
//!
//! build.rs also gives some entries a register cap ([`REGISTER_CAPS`]) before
//! it embeds the PTX, so that every way of loading them (alone, or the
//! whole PTX at once) compiles them under it.

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

/// Registers a thread of these kernels may use (PTX `.maxnreg`, which the
/// driver's compiler obeys). Uncapped, DTW's univariate 16-column warp
/// kernels take 114-118 registers, so 4 blocks of 4 warps fit an SM; at 96,
/// 5 do (20 warps), which hides more of each warp's chain of cells, and
/// ptxas spills only outside the steady loops (on an H100, 1 x 2^20 at
/// L = 511 went from 48.6 to 46.4 ms; caps of 88 and 80 gained less);
/// their multivariate twins, which would spill in their loops, stay
/// uncapped.
pub const REGISTER_CAPS: &[(&str, u32)] = &[("dtw_warp8x16_1d_f32", 96), ("dtw_warp16_1d_f32", 96)];

/// `ptx` with a `.maxnreg` directive before the body of each entry of
/// `caps`; an error names an entry that `ptx` lacks.
pub fn with_register_caps(ptx: &str, caps: &[(&str, u32)]) -> Result<String, String> {
    let mut text = ptx.to_string();
    for &(entry, registers) in caps {
        let body = text
            .match_indices(".entry ")
            .map(|(at, _)| at)
            .find(|&at| entry_name(&text[at..]) == Some(entry))
            .and_then(|at| text[at..].find("\n{").map(|brace| at + brace))
            .ok_or_else(|| {
                format!("the PTX has no entry {entry} to cap at {registers} registers")
            })?;
        text.insert_str(body, &format!("\n.maxnreg {registers}"));
    }
    Ok(text)
}
