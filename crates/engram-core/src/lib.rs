//! engram's pure logic, free of Postgres: scoring formulas, tag scopes,
//! input validation, search helpers, list cursors, the mode policy of
//! captured events, the int8 quantization of scope lists and the rules for
//! stored images.
//!
//! The `engram` pgrx extension binds these functions to SQL; the MCP adapter
//! uses the same code to validate arguments before a round trip. Everything
//! here is deterministic and unit-tested with plain `cargo test`.

pub mod binding_proof;
pub mod blocks;
pub mod conflict;
pub mod context;
pub mod conversation;
pub mod cursor;
pub mod entities;
pub mod error;
pub mod filter;
pub mod images;
pub mod items;
pub mod limits;
pub mod policy;
pub mod quant;
pub mod ranking;
pub mod scoring;
pub mod search;
pub mod search_plan;
pub mod tags;
pub mod text_rank;
pub mod time_window;
pub mod validate;

pub use error::{Error, Sqlstate};
