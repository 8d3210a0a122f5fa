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
//! callbacks on functions, operators, roles, memberships, schemas and
//! databases bump a per-backend generation, and a clean result is
//! remembered for the generation it saw. Postgres delivers those
//! invalidations to every backend (and to the same backend after each of its
//! own commands), so a function planted anywhere is seen by the next call.

use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bumped by every relevant catalog invalidation in this backend.
static GENERATION: AtomicU64 = AtomicU64::new(1);
/// The generation the last clean check saw (0: never checked).
static CHECKED: AtomicU64 = AtomicU64::new(0);

unsafe extern "C-unwind" fn catalog_changed(_arg: pg_sys::Datum, _cacheid: std::ffi::c_int, _hash: u32) {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

pub fn init() {
    use pg_sys::SysCacheIdentifier as Cache;
    for cache in [
        Cache::PROCOID,
        Cache::OPEROID,
        Cache::AUTHOID,
        Cache::AUTHMEMROLEMEM,
        Cache::NAMESPACEOID,
        Cache::DATABASEOID,
        Cache::EXTENSIONOID,
    ] {
        // SAFETY: called once from _PG_init; the callback only touches an atomic.
        unsafe {
            pg_sys::CacheRegisterSyscacheCallback(
                cache as std::ffi::c_int,
                Some(catalog_changed),
                pg_sys::Datum::from(0),
            )
        };
    }
}

/// The first problem, as a message, or NULL. Fully qualified: a direct
/// caller may have any search_path.
const PROBLEM: &str = r"
WITH ns AS (
    SELECT n.oid, n.nspname FROM pg_catalog.pg_extension e
    JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
    WHERE e.extname OPERATOR(pg_catalog.=) ANY (ARRAY['engram', 'vector']::pg_catalog.name[])
), weak AS (
    SELECT r.oid FROM pg_catalog.pg_roles r WHERE NOT r.rolsuper
)
SELECT coalesce(
    (SELECT pg_catalog.format('role %s can create objects in schema %s, which engram''s elevated functions search (a planted function would run with superuser rights); REVOKE CREATE ON SCHEMA %s FROM %s, or ALTER SCHEMA %s OWNER TO a superuser if %s owns the schema or the database', r.rolname, ns.nspname, ns.nspname, r.rolname, ns.nspname, r.rolname)
     FROM ns JOIN pg_catalog.pg_roles r ON NOT r.rolsuper
          AND r.rolname OPERATOR(pg_catalog.!~~) 'pg\_%'
          AND pg_catalog.has_schema_privilege(r.oid, ns.oid, 'CREATE')
     LIMIT 1),
    (SELECT pg_catalog.format('function %s is owned by a non-superuser and sits in schema %s, which engram''s elevated functions search; a superuser must drop it', p.oid::pg_catalog.regprocedure, ns.nspname)
     FROM pg_catalog.pg_proc p JOIN ns ON ns.oid OPERATOR(pg_catalog.=) p.pronamespace
     WHERE p.proowner OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT weak.oid FROM weak))
     LIMIT 1),
    (SELECT pg_catalog.format('operator %s is owned by a non-superuser and sits in schema %s, which engram''s elevated functions search; a superuser must drop it', o.oid::pg_catalog.regoperator, ns.nspname)
     FROM pg_catalog.pg_operator o JOIN ns ON ns.oid OPERATOR(pg_catalog.=) o.oprnamespace
     WHERE o.oprowner OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT weak.oid FROM weak))
     LIMIT 1))";

/// Refuses (42501) while engram's or pgvector's schema is writable by, or
/// holds functions or operators of, a non-superuser.
#[pg_extern(volatile)]
fn _check_planted() {
    let generation = GENERATION.load(Ordering::Relaxed);
    if CHECKED.load(Ordering::Relaxed) == generation {
        return;
    }
    let problem =
        Spi::get_one::<String>(PROBLEM).unwrap_or_else(|e| error!("engram: checking the search path failed: {e}"));
    if let Some(problem) = problem {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("engram refuses to run: {problem}")
        );
    }
    // An invalidation that arrived during the scan bumped GENERATION past
    // the value stored here, so the next call checks again.
    CHECKED.store(generation, Ordering::Relaxed);
}
