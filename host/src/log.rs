//! Log lines from plugins (and the host) on their way to the user, and
//! [`escape_control`] for any text a plugin controls that reaches a terminal.

use std::borrow::Cow;
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

/// A logger that prints lines at `min` or above to stderr (control characters
/// escaped: a plugin cannot move the cursor, colour the terminal or start a line that
/// looks like the host's).
pub fn stderr(min: LogLevel) -> Logger {
    Arc::new(move |r: &LogRecord| {
        if r.level >= min {
            let (plugin, message) = (escape_control(&r.plugin), escape_control(&r.message));
            match r.partition {
                Some(p) => eprintln!("[{} {plugin} p{p}] {message}", r.level.name()),
                None => eprintln!("[{} {plugin}] {message}", r.level.name()),
            }
        }
    })
}

/// Whether `c` must not reach a terminal as it is: control characters (C0, DEL, C1:
/// newlines, escape sequences) and the Unicode marks that reorder text on screen.
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with control characters written as escapes (`\n`, `\t`, `\r`, `\u{1b}`),
/// so that text a plugin controls (log lines, error messages, names) prints as one line
/// of visible characters: no escape codes, no line that fakes the host's.
pub fn escape_control(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert!(matches!(escape_control("plain text, ünïcode"), Cow::Borrowed(_)));
        assert_eq!(escape_control("a\nerror: fake"), "a\\nerror: fake");
        assert_eq!(escape_control("\x1b[2J\x1b[31mred"), "\\u{1b}[2J\\u{1b}[31mred");
        assert_eq!(escape_control("tab\there\r"), "tab\\there\\r");
        assert_eq!(escape_control("\u{202e}txt.exe"), "\\u{202e}txt.exe");
        assert_eq!(escape_control("\u{9b}"), "\\u{9b}");
    }
}
