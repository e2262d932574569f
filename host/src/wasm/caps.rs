//! Caps on the text and array defaults a plugin's description carries, checked when it is loaded (names
//! and counts: [`crate::udf::rules`]). Text the host prints or writes into
//! `results.json` must not be able to grow them without bound; control characters in it
//! are escaped (`crate::log::escape_control`).

/// The longest version string, in bytes.
pub const MAX_VERSION: usize = 64;
/// The longest one-line summary, in bytes.
pub const MAX_SUMMARY: usize = 1024;
/// The longest documentation of a parameter, in bytes.
pub const MAX_DOC: usize = 4096;
/// The longest default of a text parameter, in bytes.
pub const MAX_TEXT_DEFAULT: usize = 64 << 10;
/// The largest default of an array parameter, in bytes (what its shape claims, checked
/// before its data): a default is a small table, a mask or a kernel; larger arrays are
/// given with `--param name=@file.npy`.
pub const MAX_ARRAY_DEFAULT: usize = 16 << 20;

/// Check that `text` (the `what` of a description) is at most `max` bytes.
///
/// # Errors
/// A message naming `what` and both lengths.
pub(crate) fn check_len(what: &str, text: &str, max: usize) -> Result<(), String> {
    if text.len() > max {
        return Err(format!("{what} is {} bytes long; at most {max}", text.len()));
    }
    Ok(())
}
