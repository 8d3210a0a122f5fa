//! The guard of the elevated functions' search_path.
//!
//! engram's public functions run as the extension's owner and resolve names
//! through `pg_catalog, engram, <pgvector's schema>, pg_temp`. Postgres picks
//! the best-matching function or operator across every schema on that path,
//! so an object a non-superuser planted in engram's or pgvector's schema (a
//! `convert_to(text, text)` beside pg_catalog's `convert_to(text, name)`, or
//! a `jsonb_build_object(text, bigint)` beside the variadic one) would run
//! with the owner's rights — for an agent's call, a DBA's or pg_cron's alike.
//! Every public function therefore calls `engram._check_planted()` first,
//! which refuses to run while a non-superuser can create objects in those
//! schemas, or owns a function or operator there.
//!
//! The check reads the catalogs (about 70 ms for a naive scan of pg_proc,
//! under 1 ms written carefully), far too slow for every call. It runs again
//! only after the catalogs it reads have changed: syscache invalidation
//! callbacks on functions, operators, roles, memberships, schemas,
//! databases and extensions start a new generation of the catalogs
//! (catalog.rs, shared with the privilege hooks' memo), and a clean result is
//! remembered for the generation it saw. Postgres delivers those
//! invalidations to every backend (and to the same backend after each of its
//! own commands), so a function planted anywhere is seen by the next call.

use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

use super::catalog;

/// The generation of the catalogs (catalog.rs) the last clean check saw
/// (0: never checked).
static CHECKED: AtomicU64 = AtomicU64::new(0);

/// The first problem, as a message, or NULL. Fully qualified: a direct
/// caller may have any search_path. "Can create" is read from ownership and
/// the schema ACL, not from has_schema_privilege(): a schema's owner can
/// always grant itself CREATE back, and a NOINHERIT member of
/// pg_database_owner can SET ROLE to it. pg_database_owner counts as the
/// database's owner.
const PROBLEM: &std::ffi::CStr = cr"
WITH ns AS (
    SELECT n.oid, n.nspname, n.nspowner, n.nspacl FROM pg_catalog.pg_extension e
    JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
    WHERE e.extname OPERATOR(pg_catalog.=) ANY (ARRAY['engram', 'vector']::pg_catalog.name[])
), weak AS (
    SELECT r.oid FROM pg_catalog.pg_roles r
    WHERE NOT r.rolsuper
      AND (r.rolname OPERATOR(pg_catalog.<>) 'pg_database_owner'
           OR NOT (SELECT o.rolsuper FROM pg_catalog.pg_database d
                   JOIN pg_catalog.pg_roles o ON o.oid OPERATOR(pg_catalog.=) d.datdba
                   WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()))
), creators AS (
    SELECT ns.nspname, ns.nspowner AS who FROM ns
    UNION ALL
    SELECT ns.nspname, a.grantee FROM ns, pg_catalog.aclexplode(ns.nspacl) a
    WHERE a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
)
SELECT coalesce(
    (SELECT pg_catalog.format('%s can create objects in schema %s (as its owner or by a CREATE grant), and engram''s elevated functions search it: a function planted there would run with superuser rights. REVOKE CREATE ON SCHEMA %s FROM %s; if it owns the schema (or, for pg_database_owner, the database), ALTER SCHEMA %s OWNER TO a superuser; or install pgvector in a schema only superusers can write',
                              w.who_name, c.nspname, c.nspname, w.who_name, c.nspname)
     FROM creators c
     CROSS JOIN LATERAL (SELECT CASE WHEN c.who OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'
                                     ELSE c.who::pg_catalog.regrole::pg_catalog.text END AS who_name) w
     WHERE c.who OPERATOR(pg_catalog.=) 0::pg_catalog.oid
        OR c.who OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT weak.oid FROM weak))
     LIMIT 1),
    (SELECT pg_catalog.format('function %s is owned by a non-superuser and sits in schema %s, which engram''s elevated functions search; a superuser must drop it', p.oid::pg_catalog.regprocedure, ns.nspname)
     FROM pg_catalog.pg_proc p JOIN ns ON ns.oid OPERATOR(pg_catalog.=) p.pronamespace
     WHERE p.proowner OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT weak.oid FROM weak))
     LIMIT 1),
    (SELECT pg_catalog.format('operator %s is owned by a non-superuser and sits in schema %s, which engram''s elevated functions search; a superuser must drop it', o.oid::pg_catalog.regoperator, ns.nspname)
     FROM pg_catalog.pg_operator o JOIN ns ON ns.oid OPERATOR(pg_catalog.=) o.oprnamespace
     WHERE o.oprowner OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT weak.oid FROM weak))
     LIMIT 1))";

/// Runs PROBLEM against the latest catalog state. Name resolution reads the
/// catalogs as they are now, so the check must too: under REPEATABLE READ
/// an SPI query would see the transaction's older snapshot and miss a
/// function created since.
fn first_problem() -> Option<String> {
    Spi::connect(|_client| {
        // SAFETY: inside SPI_connect (Spi::connect); the plan, snapshot and
        // tuple table are SPI's and live until the closure returns.
        unsafe {
            let plan = pg_sys::SPI_prepare(PROBLEM.as_ptr(), 0, std::ptr::null_mut());
            if plan.is_null() {
                error!("engram: preparing the search-path check failed");
            }
            let rc = pg_sys::SPI_execute_snapshot(
                plan,
                std::ptr::null_mut(),
                std::ptr::null(),
                pg_sys::GetLatestSnapshot(),
                std::ptr::null_mut(),
                true,
                false,
                1,
            );
            if rc != pg_sys::SPI_OK_SELECT as i32 {
                error!("engram: the search-path check failed (SPI code {rc})");
            }
            let table = pg_sys::SPI_tuptable;
            if table.is_null() || (*table).numvals == 0 {
                return None;
            }
            let value = pg_sys::SPI_getvalue(*(*table).vals, (*table).tupdesc, 1);
            (!value.is_null()).then(|| std::ffi::CStr::from_ptr(value).to_string_lossy().into_owned())
        }
    })
}

/// Refuses (42501) while engram's or pgvector's schema is writable by, or
/// holds functions or operators of, a non-superuser.
#[pg_extern(volatile)]
fn _check_planted() {
    check_planted();
}

/// engram._check_planted, for the Rust callers (binding.rs).
pub(super) fn check_planted() {
    // Invalidations other backends queued (a function created elsewhere)
    // are applied here, before the generation is compared.
    // SAFETY: a plain call into Postgres within a transaction.
    unsafe { pg_sys::AcceptInvalidationMessages() };
    let generation = catalog::generation();
    if CHECKED.load(Ordering::Relaxed) == generation {
        return;
    }
    if let Some(problem) = first_problem() {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("engram refuses to run: {problem}")
        );
    }
    // An invalidation that arrived during the scan started a generation past
    // the value stored here, so the next call checks again.
    CHECKED.store(generation, Ordering::Relaxed);
}
