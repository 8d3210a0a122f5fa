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
