//! Log lines from plugins (and the host) on their way to the user.

use std::sync::Arc;

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// One log line of a plugin.
#[derive(Debug, Clone)]
pub struct LogRecord {
    /// The plugin's name.
    pub plugin: String,
    /// The partition, if the line came from a worker instance.
    pub partition: Option<usize>,
    pub level: LogLevel,
    pub message: String,
}

/// Where log lines go. Called from worker threads.
pub type Logger = Arc<dyn Fn(&LogRecord) + Send + Sync>;

/// A logger that drops everything.
pub fn discard() -> Logger {
    Arc::new(|_| {})
}

/// A logger that prints lines at `min` or above to stderr.
pub fn stderr(min: LogLevel) -> Logger {
    Arc::new(move |r: &LogRecord| {
        if r.level >= min {
            match r.partition {
                Some(p) => eprintln!("[{} {} p{p}] {}", r.level.name(), r.plugin, r.message),
                None => eprintln!("[{} {}] {}", r.level.name(), r.plugin, r.message),
            }
        }
    })
}
