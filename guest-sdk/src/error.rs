//! The typed error a plugin returns instead of trapping.

pub use crate::bindings::udf::plugin::types::{ErrorKind, UdfError};

/// Result type of every plugin hook.
pub type Result<T, E = UdfError> = std::result::Result<T, E>;

impl UdfError {
    /// A parameter is missing, malformed or out of range.
    pub fn bad_param(message: impl Into<String>) -> Self {
        UdfError { kind: ErrorKind::BadParam, message: message.into() }
    }

    /// The data cannot be processed (shape, dtype, values).
    pub fn invalid_data(message: impl Into<String>) -> Self {
        UdfError { kind: ErrorKind::InvalidData, message: message.into() }
    }

    /// A bug or unexpected state in the plugin.
    pub fn internal(message: impl Into<String>) -> Self {
        UdfError { kind: ErrorKind::Internal, message: message.into() }
    }
}

impl From<ndarray::ShapeError> for UdfError {
    fn from(err: ndarray::ShapeError) -> Self {
        UdfError::internal(format!("array shape: {err}"))
    }
}
