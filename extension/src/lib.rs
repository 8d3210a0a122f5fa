//! The `engram` Postgres extension.
//!
//! Tables, roles, row-level security and the orchestrating SQL functions live
//! in `extension/sql/*.sql` (loaded below), where the planner can see every
//! query. The decisions those functions delegate — validation, tag scopes,
//! scoring formulas, fusion, cursors — live in the pure `engram-core` crate;
//! the modules here only bind them to SQL.

use pgrx::prelude::*;

mod checks;
mod conflict;
mod context;
mod entities;
mod errors;
mod filter;
mod gucs;
mod images;
mod kept;
mod knn;
mod lists;
mod policy;
mod raw;
mod remote;
mod restore;
mod scope;
mod scoring;
mod search;
mod search_api;
mod security;
mod text_leg;
mod time;
mod upgrade;

::pgrx::pg_module_magic!(name, version);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    gucs::init();
    security::init();
}

// Tables, indexes and the engram_agent role come first. The SQL API follows
// in topic files (extension/sql/api/), each after the one before; their
// plpgsql bodies are resolved when they run, so only statements that need a
// Rust function at creation (a SQL-language body, an aggregate) name it in
// `requires`. privileges.sql comes last (finalize), once every function it
// pins, grants or revokes exists. upgrade.rs loads the same files in the
// same order: keep API_FILES there equal to this list.
extension_sql_file!("../sql/schema.sql", name = "schema", bootstrap);
extension_sql_file!(
    "../sql/api/helpers.sql",
    name = "api_helpers",
    requires = ["schema", scoring::staleness_score]
);
extension_sql_file!(
    "../sql/api/search_plans.sql",
    name = "api_search_plans",
    requires = ["api_helpers"]
);
extension_sql_file!(
    "../sql/api/scope_lists.sql",
    name = "api_scope_lists",
    requires = ["api_search_plans", lists::_nearest_step]
);
extension_sql_file!(
    "../sql/api/text_index.sql",
    name = "api_text_index",
    requires = ["api_scope_lists", scoring::_max_query_terms]
);
extension_sql_file!(
    "../sql/api/memories.sql",
    name = "api_memories",
    requires = ["api_text_index"]
);
extension_sql_file!(
    "../sql/api/search.sql",
    name = "api_search",
    requires = ["api_memories"]
);
extension_sql_file!("../sql/api/items.sql", name = "api_items", requires = ["api_search"]);
extension_sql_file!(
    "../sql/api/entities.sql",
    name = "api_entities",
    requires = ["api_items"]
);
extension_sql_file!(
    "../sql/api/quotas.sql",
    name = "api_quotas",
    requires = ["api_entities"]
);
extension_sql_file!(
    "../sql/api/lifecycle.sql",
    name = "api_lifecycle",
    requires = ["api_quotas"]
);
extension_sql_file!(
    "../sql/api/resources.sql",
    name = "api_resources",
    requires = ["api_lifecycle"]
);
extension_sql_file!(
    "../sql/api/identity.sql",
    name = "api_identity",
    requires = ["api_resources"]
);
extension_sql_file!(
    "../sql/api/sharing.sql",
    name = "api_sharing",
    requires = ["api_identity"]
);
extension_sql_file!("../sql/api/slots.sql", name = "api_slots", requires = ["api_sharing"]);
extension_sql_file!(
    "../sql/api/workspaces.sql",
    name = "api_workspaces",
    requires = ["api_slots"]
);
extension_sql_file!(
    "../sql/api/events.sql",
    name = "api_events",
    requires = ["api_workspaces"]
);
extension_sql_file!("../sql/api/vision.sql", name = "api_vision", requires = ["api_events"]);
extension_sql_file!("../sql/api/citus.sql", name = "api_citus", requires = ["api_vision"]);
extension_sql_file!("../sql/api/backup.sql", name = "api_backup", requires = ["api_citus"]);
extension_sql_file!("../sql/api/privileges.sql", name = "api_privileges", finalize);
