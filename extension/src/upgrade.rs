//! Loading the SQL API during `ALTER EXTENSION engram UPDATE`.
//!
//! The API (functions, result types, policies, privileges) is written once,
//! in the topic files of `sql/api/`; CREATE EXTENSION loads them from the
//! generated install script. An upgrade script in the top-level `sql/`
//! changes the tables and then calls `engram._install_api` with its target
//! version, which drops whatever API is loaded (found in the catalog,
//! `sql/drop_api.sql`; since 0.12.0, before which each hop dropped the
//! previous API by name) and runs the same files from this library. Only
//! the hop whose target is this library's version loads it, so a chain of
//! hops (0.1.0 -> 0.2.0 -> 0.3.0) loads the newest API once, on the newest
//! tables.
//!
//! A chain must therefore end at this library's version: a hop to an
//! earlier version leaves that version's tables without its API (the
//! library carries only its own), and one to a later version has no API
//! here at all. `ALTER EXTENSION engram UPDATE TO` another version is
//! refused before it runs (`check_target`, from the utility hook of a
//! preloaded library), and, wherever the library was loaded, an update
//! whose last hop did not load the API fails at the end of the statement
//! or at the latest before its transaction commits (`check_finished`), so
//! it is rolled back whole.

use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use std::cell::RefCell;

const LIBRARY_VERSION: &str = env!("CARGO_PKG_VERSION");

thread_local! {
    /// The version an intermediate hop reached without loading an API, and
    /// the subtransaction it ran in, until a later hop loads this library's.
    static PENDING: RefCell<Option<(String, pg_sys::SubTransactionId)>> = const { RefCell::new(None) };
}

/// A version's numbers, for ordering ("0.10.0" after "0.9.0").
fn numbers(version: &str) -> Vec<u64> {
    version.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// Raises `what` (55000) with what to run instead.
pub(crate) fn refuse(what: String) -> ! {
    let remedy = format!(
        "this library provides engram {LIBRARY_VERSION}, which loads only its own API; run ALTER EXTENSION engram \
         UPDATE (to {LIBRARY_VERSION}), or install the library of the version you want and restart PostgreSQL"
    );
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("{what}; {remedy}"),
        "engram",
    )
    .set_hint(remedy)
    .report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// Refuses `ALTER EXTENSION engram UPDATE TO '<version>'` for any version
/// but this library's, before anything changes.
pub fn check_target(extension: &str, target: Option<&str>) {
    if extension != "engram" {
        return;
    }
    if let Some(target) = target.filter(|t| *t != LIBRARY_VERSION) {
        refuse(format!(
            "engram cannot update to {target}: that would leave {target}'s tables without {target}'s functions"
        ));
    }
}

/// Fails when an update stopped at a hop that loaded no API.
pub fn check_finished() {
    if let Some((version, _)) = PENDING.with_borrow(|p| p.clone()) {
        PENDING.set(None);
        refuse(format!(
            "engram cannot stop an update at {version}: its tables would keep another version's functions"
        ));
    }
}

/// Forgets a pending hop at the end of its (sub)transaction.
pub fn forget_pending(aborted_sub: Option<pg_sys::SubTransactionId>) {
    PENDING.with_borrow_mut(|p| {
        if aborted_sub.is_none() || p.as_ref().map(|e| e.1) == aborted_sub {
            *p = None;
        }
    });
}

/// The API's topic files, in the order lib.rs loads them at CREATE EXTENSION
/// (a file may use types and functions of the files before it).
const API_FILES: [&str; 20] = [
    include_str!("../sql/api/helpers.sql"),
    include_str!("../sql/api/search_plans.sql"),
    include_str!("../sql/api/scope_lists.sql"),
    include_str!("../sql/api/text_index.sql"),
    include_str!("../sql/api/memories.sql"),
    include_str!("../sql/api/search.sql"),
    include_str!("../sql/api/items.sql"),
    include_str!("../sql/api/entities.sql"),
    include_str!("../sql/api/quotas.sql"),
    include_str!("../sql/api/lifecycle.sql"),
    include_str!("../sql/api/resources.sql"),
    include_str!("../sql/api/identity.sql"),
    include_str!("../sql/api/sharing.sql"),
    include_str!("../sql/api/slots.sql"),
    include_str!("../sql/api/workspaces.sql"),
    include_str!("../sql/api/events.sql"),
    include_str!("../sql/api/vision.sql"),
    include_str!("../sql/api/citus.sql"),
    include_str!("../sql/api/backup.sql"),
    include_str!("../sql/api/privileges.sql"),
];

/// Drops the loaded API's objects, found in the catalog.
const DROP_API: &str = include_str!("../sql/drop_api.sql");

/// Before the API loads: on a Citus coordinator its triggers go onto
/// distributed tables, which Citus refuses unless told, as
/// engram.distribute() tells it (the triggers keep rows of one owner, on
/// one shard group). (Hops up to 0.12.0 said so themselves.)
const BEFORE_API: &str = "DO $$ BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    END IF;
END $$";

/// After it, the rebuilds that the chain's earlier hops left to the last
/// (transaction-local settings, set by a hop whose API did not load, last
/// for the whole ALTER EXTENSION):
/// * `engram_upgrade.chain` (a chain from 0.9.0 or older; the 0.10.0 ->
///   0.11.0 hop found its previous API missing): the scope lists and the
///   text index are empty and usage uncounted; on a single node they are
///   rebuilt (a distributed database: docs/SCALING.md, "Upgrades");
/// * `engram_upgrade.text_index` (the chain passed 0.19.0 -> 0.20.0): the
///   text index is built from the stored memories, one statement per owner
///   (on Citus engram.rebuild_lists() builds it after engram.distribute());
/// * `engram_upgrade.reindex_entities` (the chain passed 0.18.0 -> 0.19.0):
///   every memory's entities are indexed anew.
///
/// (Hops up to 0.12.0 did the first in their own scripts; the 0.20.0 hop
/// did the other two when it was the last.)
const AFTER_API: &str = "DO $$
DECLARE
    v_owner text;
BEGIN
    IF coalesce(pg_catalog.current_setting('engram_upgrade.chain', true), '') = 'true' THEN
        IF NOT engram._is_distributed() THEN
            PERFORM engram.rebuild_lists();
        END IF;
        PERFORM engram.recount_usage();
    ELSIF coalesce(pg_catalog.current_setting('engram_upgrade.text_index', true), '') = 'true'
          AND NOT engram._is_distributed() THEN
        FOR v_owner IN SELECT DISTINCT m.owner FROM engram.memories m ORDER BY 1 LOOP
            PERFORM engram._rebuild_text_index(v_owner);
        END LOOP;
    END IF;
    IF coalesce(pg_catalog.current_setting('engram_upgrade.reindex_entities', true), '') = 'true' THEN
        PERFORM engram._reindex_entities();
    END IF;
END $$";

/// This library's version (what a configuration row records).
#[pg_extern(immutable, parallel_safe)]
fn _library_version() -> &'static str {
    LIBRARY_VERSION
}

/// Replaces the loaded API with the API files when `version` is this
/// library's version; returns whether it did.
#[pg_extern(volatile)]
fn _install_api(version: &str) -> bool {
    // Outside ALTER EXTENSION the objects it loads would not belong to the
    // extension (pg_dump would dump them, DROP EXTENSION leave them).
    // SAFETY: a backend-global flag, read on the backend's own thread.
    if !unsafe { pg_sys::creating_extension } {
        error!("engram._install_api runs only inside ALTER EXTENSION engram UPDATE");
    }
    if version != LIBRARY_VERSION {
        if numbers(version) > numbers(LIBRARY_VERSION) {
            refuse(format!("engram {version}'s functions are not in this library"));
        }
        // An intermediate hop: the chain's last hop must load this API.
        // SAFETY: reads the current subtransaction id.
        let sub = unsafe { pg_sys::GetCurrentSubTransactionId() };
        PENDING.set(Some((version.to_string(), sub)));
        return false;
    }
    PENDING.set(None);
    Spi::run(BEFORE_API).unwrap_or_else(|e| error!("engram: preparing the {version} API failed: {e}"));
    Spi::run(DROP_API).unwrap_or_else(|e| error!("engram: dropping the previous API failed: {e}"));
    for file in API_FILES {
        Spi::run(file).unwrap_or_else(|e| error!("engram: loading the {version} API failed: {e}"));
    }
    Spi::run(AFTER_API).unwrap_or_else(|e| error!("engram: rebuilding after the {version} API failed: {e}"));
    true
}
