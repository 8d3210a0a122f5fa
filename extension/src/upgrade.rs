//! Loading the SQL API during `ALTER EXTENSION engram UPDATE`.
//!
//! The API (functions, result types, policies, privileges) is written once,
//! in `sql/api.sql`; CREATE EXTENSION loads it from the generated install
//! script. An upgrade script in the top-level `sql/` changes the tables,
//! drops the previous version's API and then calls `engram._install_api`
//! with its target version, which runs the same file from this library. Only
//! the hop whose target is this library's version loads it, so a chain of
//! hops (0.1.0 -> 0.2.0 -> 0.3.0) loads the newest API once, on the newest
//! tables.

use pgrx::prelude::*;

const API: &str = include_str!("../sql/api.sql");

/// Runs `sql/api.sql` when `version` is this library's version; returns
/// whether it did.
#[pg_extern(volatile)]
fn _install_api(version: &str) -> bool {
    if version != env!("CARGO_PKG_VERSION") {
        return false;
    }
    Spi::run(API).unwrap_or_else(|e| error!("engram: loading the {version} API failed: {e}"));
    true
}
