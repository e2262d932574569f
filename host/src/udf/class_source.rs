//! A LiberTEM UDF class as data (DESIGN.md §8): the JSON document the Python runner's
//! `runner.load` takes, with its SHA-256. Run plans carry it as it is; nothing of it is
//! ever run outside the runner component.

use serde::{Deserialize, Serialize};

/// The most a class's source document may hold (its text and NumPy constants).
pub const MAX_CLASS_SOURCE_BYTES: usize = 256 << 20;

/// A UDF class for the Python runner: the JSON document (`text`, `file`, `first_line`,
/// `class_name`, `constants`, `kwargs`; written by `python/udf_host/udf_class.py` or by
/// `udf-host` for a `file.py:Class`) and its SHA-256, which a worker checks before the
/// runner sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassSource {
    /// The class's name, for messages before the runner has described it.
    pub class_name: String,
    /// Where the class came from (a file, a notebook cell), for messages.
    pub file: String,
    /// The document `runner.load` receives.
    pub json: String,
    /// SHA-256 of `json` (hex).
    pub sha256: String,
}

/// Why a class source cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ClassSourceError {
    #[error("the class source is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the class source has no {0:?} (expected a string)")]
    Missing(&'static str),
    #[error("the class source is {found} bytes; at most {MAX_CLASS_SOURCE_BYTES} travel")]
    TooLarge { found: usize },
    #[error("the class source of {class} has SHA-256 {found} here, but the plan was made with {expected}")]
    Hash { class: String, expected: String, found: String },
}

impl ClassSource {
    /// A class source from its JSON document (its `class_name` and `file` read from it).
    ///
    /// # Errors
    /// If the document is too large, not JSON, or lacks `class_name` or `text`.
    pub fn from_json(json: String) -> Result<Self, ClassSourceError> {
        if json.len() > MAX_CLASS_SOURCE_BYTES {
            return Err(ClassSourceError::TooLarge { found: json.len() });
        }
        let value: serde_json::Value = serde_json::from_str(&json)?;
        let text = |key: &'static str| value.get(key).and_then(|v| v.as_str()).ok_or(ClassSourceError::Missing(key));
        text("text")?;
        let class_name = text("class_name")?.to_owned();
        let file = value.get("file").and_then(|v| v.as_str()).unwrap_or("<unknown>").to_owned();
        let sha256 = sha256_hex(json.as_bytes());
        Ok(ClassSource { class_name, file, json, sha256 })
    }

    /// Check that the document is the one the plan recorded.
    ///
    /// # Errors
    /// [`ClassSourceError::Hash`] when the document's hash differs from `sha256`.
    pub fn check(&self) -> Result<(), ClassSourceError> {
        let found = sha256_hex(self.json.as_bytes());
        if found != self.sha256 {
            return Err(ClassSourceError::Hash {
                class: self.class_name.clone(),
                expected: self.sha256.clone(),
                found,
            });
        }
        Ok(())
    }
}

/// SHA-256 as lowercase hex (as `wasm::sha256_hex`, which this layer may not import).
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_name_and_file_and_checks_the_hash() {
        let json = r#"{"class_name": "SumUDF", "file": "my_udf.py", "text": "class SumUDF: pass"}"#;
        let mut source = ClassSource::from_json(json.into()).unwrap();
        assert_eq!((source.class_name.as_str(), source.file.as_str()), ("SumUDF", "my_udf.py"));
        source.check().unwrap();
        source.json.push(' ');
        assert!(matches!(source.check(), Err(ClassSourceError::Hash { .. })));
    }

    #[test]
    fn refuses_a_document_without_text() {
        let err = ClassSource::from_json(r#"{"class_name": "X"}"#.into()).unwrap_err();
        assert!(err.to_string().contains("\"text\""), "{err}");
    }
}
