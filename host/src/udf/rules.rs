//! What a UDF may declare: names usable as files and command-line keys, and counts the
//! host handles in bounded time. Checked when a plugin is loaded (its name and
//! parameters) and when it declares its buffers (`exec`'s planning), so that a run never
//! fails — or overwrites one file with another — when its results are written.
//!
//! ## Names
//!
//! Names become directories, files and command-line keys: `OUT/<udf>/<buffer>.npy`,
//! `<buffer>.valid.npy`, `<buffer>.png`, `<buffer>.<i>.png`, `--param <udf>.<name>=`.
//!
//! | name | characters | other rules |
//! |------|-----------|-------------|
//! | UDF | `A-Z a-z 0-9 _ - .`, at most [`MAX_NAME`] bytes | not starting with `.` or `-`; not `partial`, `results.json`, `index.html` (the output directory's own entries) |
//! | buffer | the same | not starting with `.` or `-`; not ending in `.valid` or `.<digits>` (a valid mask's and a preview's file names); unique, also ignoring case |
//! | parameter | `A-Z a-z 0-9 _ -`, at most [`MAX_NAME`] bytes | unique |
//!
//! ## Counts
//!
//! At most [`MAX_PARAMS`] parameters, [`MAX_BUFFERS`] buffers, [`MAX_DIMS`] axes of an
//! extra shape. LiberTEM's UDFs have a handful of each; the caps keep a plugin from
//! making the host spend minutes on its declarations.

use super::{BufferDecl, BufferKind, BufferUse, CallError, Description};
use crate::log::escape_control;
use std::collections::HashSet;

/// The longest name, in bytes.
pub const MAX_NAME: usize = 128;
/// The most parameters a UDF may declare.
pub const MAX_PARAMS: usize = 256;
/// The most buffers a UDF may declare.
pub const MAX_BUFFERS: usize = 1024;
/// The most axes of a buffer's extra shape (NumPy's limit is 64).
pub const MAX_DIMS: usize = 32;

/// Entries of an output directory that are not a UDF's (`results.json`, the report page,
/// the live snapshot).
pub const RESERVED_UDF_NAMES: [&str; 3] = ["results.json", "index.html", "partial"];

/// Check the characters and length of a name; `dots`: whether `.` is allowed.
fn check_chars(name: &str, dots: bool) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.len() > MAX_NAME {
        return Err(format!("it is {} bytes long; at most {MAX_NAME}", name.len()));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-' || (dots && c == '.');
    if let Some(bad) = name.chars().find(|&c| !allowed(c)) {
        return Err(format!(
            "it contains {:?}; only letters, digits, '_', '-'{} are allowed",
            bad,
            if dots { " and '.'" } else { "" }
        ));
    }
    if name.starts_with(['.', '-']) {
        return Err("it starts with '.' or '-'".into());
    }
    Ok(())
}

/// A UDF's name: usable as a directory of the output beside the run's own files.
///
/// # Errors
/// Why not, in words (to follow "name ... is not usable: ").
pub fn check_udf_name(name: &str) -> Result<(), String> {
    check_chars(name, true)?;
    if RESERVED_UDF_NAMES.iter().any(|r| r.eq_ignore_ascii_case(name)) {
        return Err(format!("'{name}' is an entry of the output directory itself"));
    }
    Ok(())
}

/// A parameter's name: usable as `--param NAME=` and `--param UDF.NAME=`.
///
/// # Errors
/// Why not, in words.
pub fn check_param_name(name: &str) -> Result<(), String> {
    check_chars(name, false)
}

/// A buffer's name on its own: usable as a file name beside the others.
///
/// # Errors
/// Why not, in words.
pub fn check_buffer_name(name: &str) -> Result<(), String> {
    check_chars(name, true)?;
    if let Some((_, last)) = name.rsplit_once('.')
        && (last == "valid" || last.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!(
            "it ends in '.{last}', which is how the files of another buffer are named \
             (<buffer>.valid.npy, <buffer>.<i>.png)"
        ));
    }
    Ok(())
}

/// Names that must be unique (also ignoring ASCII case: one file on macOS and Windows),
/// in one pass: the first name that repeats one before it, and that one.
pub fn first_clash<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<(&'a str, &'a str)> {
    let mut seen: std::collections::HashMap<String, &'a str> = std::collections::HashMap::new();
    for name in names {
        if let Some(before) = seen.insert(name.to_ascii_lowercase(), name) {
            return Some((before, name));
        }
    }
    None
}

/// Names that must be unique (exactly): the first that repeats.
pub fn first_duplicate<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = HashSet::new();
    names.into_iter().find(|&n| !seen.insert(n))
}

/// A unique name per UDF of a run, `NAME`, `NAME-2`, ... for repeats (unique also
/// ignoring case: they are directories). The names the output and `--param NAME.x=` use.
pub fn unique_names<'a>(bases: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut taken = std::collections::HashSet::new();
    let mut names = Vec::new();
    for base in bases {
        let mut name = base.to_owned();
        let mut k = 2;
        while taken.contains(&name.to_ascii_lowercase()) {
            name = format!("{base}-{k}");
            k += 1;
        }
        taken.insert(name.to_ascii_lowercase());
        names.push(name);
    }
    names
}

/// Check a UDF's buffer declarations against the rules of API.md §5 and this module: at most
/// [`MAX_BUFFERS`], names usable as files and unique (also ignoring case), sizes
/// that can be allocated. One pass over the declarations.
pub fn check_declarations(
    desc: &Description,
    decls: &[BufferDecl],
    frames: usize,
    sig: &[usize],
) -> Result<(), CallError> {
    let contract = |m: String| Err(CallError::Contract(m));
    if decls.len() > MAX_BUFFERS {
        return contract(format!("it declares {} buffers; at most {}", decls.len(), MAX_BUFFERS));
    }
    for d in decls {
        if let Err(e) = check_buffer_name(&d.name) {
            return contract(format!("buffer name {:?} is not usable: {e}", escape_control(&d.name)));
        }
        if d.extra_shape.len() > MAX_DIMS {
            return contract(format!(
                "buffer '{}' has an extra shape of {} axes; at most {}",
                d.name,
                d.extra_shape.len(),
                MAX_DIMS
            ));
        }
        let shape = d.storage_shape(frames, sig);
        if shape.iter().try_fold(d.dtype.size(), |acc, &n| acc.checked_mul(n)).is_none_or(|b| b > isize::MAX as usize) {
            return contract(format!("buffer '{}' of shape {shape:?} ({}) is too large to allocate", d.name, d.dtype));
        }
        if d.usage == BufferUse::ResultOnly && !desc.custom_results {
            return contract(format!(
                "result-only buffer '{}' is declared, but there is no get_results to produce it",
                d.name
            ));
        }
        if d.usage != BufferUse::ResultOnly && d.kind != BufferKind::Nav && !desc.custom_merge {
            return contract(format!(
                "{} buffer '{}' is declared, but there is no custom merge; only nav buffers can be merged by default",
                if d.kind == BufferKind::Sig { "sig" } else { "single" },
                d.name
            ));
        }
    }
    match first_clash(decls.iter().map(|d| d.name.as_str())) {
        Some((a, b)) if a == b => contract(format!("buffer '{a}' is declared twice")),
        Some((a, b)) => contract(format!("buffers '{a}' and '{b}' differ only in case: one file on some file systems")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udf_names() {
        for ok in ["sum", "radial-fourier", "my_sum.v2", "A1"] {
            assert_eq!(check_udf_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            ".hidden",
            "-x",
            "a/b",
            "a\\b",
            "a b",
            "nul\0",
            "esc\x1b[2J",
            "résumé",
            "results.json",
            "Index.HTML",
            "partial",
        ] {
            assert!(check_udf_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_udf_name(&"x".repeat(MAX_NAME)).is_ok());
        assert!(check_udf_name(&"x".repeat(MAX_NAME + 1)).unwrap_err().contains("bytes long"));
    }

    #[test]
    fn buffer_names() {
        for ok in ["intensity", "field_y", "x.y", "x.valid2", "v1.0a"] {
            assert_eq!(check_buffer_name(ok), Ok(()), "{ok}");
        }
        for bad in ["x.valid", "x.0", "x.12", "a/b", "", "results.json\n", "\u{0}"] {
            assert!(check_buffer_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn param_names() {
        assert_eq!(check_param_name("mask_dtype"), Ok(()));
        assert!(check_param_name("a.b").is_err(), "'.' separates the UDF from the parameter");
        assert!(check_param_name("a=b").is_err());
    }

    #[test]
    fn clashes_ignore_case_and_are_found_in_one_pass() {
        assert_eq!(first_clash(["a", "b", "A"]), Some(("a", "A")));
        assert_eq!(first_clash(["a", "b"]), None);
        assert_eq!(first_duplicate(["a", "b", "b"]), Some("b"));
        let many: Vec<String> = (0..100_000).map(|i| format!("b{i}")).collect();
        assert_eq!(first_clash(many.iter().map(String::as_str)), None);
    }
}
