//! The `engram` Postgres extension.
//!
//! Tables, roles, row-level security and the orchestrating SQL functions live
//! in `extension/sql/*.sql` (loaded below), where the planner can see every
//! query. The decisions those functions delegate — validation, tag scopes,
//! scoring formulas, fusion, cursors — live in the pure `engram-core` crate;
//! the modules here only bind them to SQL.

use pgrx::prelude::*;

mod binding;
mod checks;
mod conflict;
mod context;
mod errors;
mod gucs;
mod images;
mod lists;
mod path_guard;
mod policy;
mod privilege;
mod remote;
mod scope;
mod scoring;
mod upgrade;

::pgrx::pg_module_magic!(name, version);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    gucs::init();
    path_guard::init();
    privilege::init();
}

// Tables, indexes and the engram_agent role come first; the plpgsql API,
// policies and privileges last, once every Rust function they call exists.
extension_sql_file!("../sql/schema.sql", name = "schema", bootstrap);
extension_sql_file!("../sql/api.sql", name = "api", finalize);
