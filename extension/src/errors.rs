//! Raising engram-core errors as Postgres ERRORs with their SQLSTATE.

use engram_core::{Error, Sqlstate};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

fn code(s: Sqlstate) -> PgSqlErrorCode {
    match s {
        Sqlstate::InvalidParameterValue => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        Sqlstate::NullValueNotAllowed => PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
        Sqlstate::ProgramLimitExceeded => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        Sqlstate::DataException => PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
    }
}

/// Raises `e` as an ERROR. The message carries the remedy as well as the
/// HINT field, because many clients print only the message.
pub fn raise(e: Error) -> ! {
    ErrorReport::new(code(e.sqlstate), format!("{}; {}", e.message, e.hint), "engram")
        .set_hint(e.hint)
        .report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// Unwraps a core result or raises its error.
pub trait OrRaise<T> {
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for engram_core::error::Result<T> {
    fn or_raise(self) -> T {
        self.unwrap_or_else(|e| raise(e))
    }
}
