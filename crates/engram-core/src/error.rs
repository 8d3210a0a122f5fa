//! One error type for every validation in the crate. Each error carries the
//! SQLSTATE it maps to in Postgres, so the extension can `ereport` it verbatim
//! and the adapter can turn it into a tool error without string matching.

use std::fmt;

/// The SQLSTATE classes engram raises. Kept small on purpose: callers branch
/// on these codes, so each must mean one thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sqlstate {
    /// 22023: a value is out of its allowed set or range.
    InvalidParameterValue,
    /// 22004: a required argument is NULL.
    NullValueNotAllowed,
    /// 54000: a value exceeds a documented size limit.
    ProgramLimitExceeded,
    /// 22000: malformed data, e.g. a vector of the wrong dimension.
    DataException,
}

impl Sqlstate {
    pub fn code(self) -> &'static str {
        match self {
            Sqlstate::InvalidParameterValue => "22023",
            Sqlstate::NullValueNotAllowed => "22004",
            Sqlstate::ProgramLimitExceeded => "54000",
            Sqlstate::DataException => "22000",
        }
    }
}

/// A refused input: what was wrong (`message`) and what to do (`hint`).
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    pub sqlstate: Sqlstate,
    pub message: String,
    pub hint: String,
}

impl Error {
    pub fn new(sqlstate: Sqlstate, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Error {
            sqlstate,
            message: message.into(),
            hint: hint.into(),
        }
    }

    pub fn invalid(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::new(Sqlstate::InvalidParameterValue, message, hint)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (SQLSTATE {}); {}", self.message, self.sqlstate.code(), self.hint)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Longest echo of a caller's value in a message, in characters.
pub const MAX_ECHO_CHARS: usize = 80;

/// A caller's value as a message shows it: at most [`MAX_ECHO_CHARS`]
/// characters, escaped (no control characters reach a log), then "…" when
/// cut, so that a megabyte id never comes back whole.
pub fn echo(value: &str) -> String {
    let mut shown: String = value
        .chars()
        .take(MAX_ECHO_CHARS)
        .flat_map(char::escape_default)
        .collect();
    if value.chars().nth(MAX_ECHO_CHARS).is_some() {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    #[test]
    fn echo_is_bounded_and_escaped() {
        assert_eq!(super::echo("tea"), "tea");
        let long = "x".repeat(3_000_000);
        let shown = super::echo(&long);
        assert_eq!(shown, format!("{}…", "x".repeat(80)));
        assert_eq!(super::echo("a\nb"), "a\\nb");
    }
}
