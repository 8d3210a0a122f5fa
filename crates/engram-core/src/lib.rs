//! engram's pure logic, free of Postgres: scoring formulas, tag scopes,
//! input validation, search helpers and list cursors.
//!
//! The `engram` pgrx extension binds these functions to SQL; the MCP adapter
//! uses the same code to validate arguments before a round trip. Everything
//! here is deterministic and unit-tested with plain `cargo test`.

pub mod cursor;
pub mod error;
pub mod scoring;
pub mod search;
pub mod tags;
pub mod validate;

pub use error::{Error, Sqlstate};
