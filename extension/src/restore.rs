//! Restores (docs/BACKUP.md). A COPY ... FROM into one of engram's tables
//! of an empty engram database is a restore's load: the utility hook
//! (security/hooks.rs) calls `before_copy` ahead of each COPY and `after_copy`
//! once it has loaded its rows. What they decide is SQL
//! (`engram._restore_begin`, `engram._restore_end`, sql/api/backup.sql).

use crate::security;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// The engram table this COPY loads as a restore's, or InvalidOid: only a
/// superuser's COPY ... FROM (nobody else may write engram's tables), with
/// no code of another role running, into a table of schema engram that
/// `_restore_begin` takes (and prepares) as a restore's.
#[pg_guard]
pub unsafe extern "C-unwind" fn before_copy(stmt: *mut pg_sys::Node) -> pg_sys::Oid {
    // SAFETY: Postgres passes a valid parse tree; the relation is resolved
    // without a lock (COPY takes its own) and a missing one is no restore.
    let relid = unsafe {
        if stmt.is_null() || (*stmt).type_ != pg_sys::NodeTag::T_CopyStmt {
            return pg_sys::InvalidOid;
        }
        let copy = stmt as *mut pg_sys::CopyStmt;
        if !(*copy).is_from || (*copy).relation.is_null() || !pg_sys::superuser() {
            return pg_sys::InvalidOid;
        }
        let relid = pg_sys::RangeVarGetRelidExtended(
            (*copy).relation,
            pg_sys::NoLock as pg_sys::LOCKMODE,
            pg_sys::RVROption::RVR_MISSING_OK,
            None,
            std::ptr::null_mut(),
        );
        let engram = pg_sys::get_namespace_oid(c"engram".as_ptr(), true);
        if relid == pg_sys::InvalidOid || engram == pg_sys::InvalidOid || pg_sys::get_rel_namespace(relid) != engram {
            return pg_sys::InvalidOid;
        }
        relid
    };
    if security::withheld_now().is_some() {
        return pg_sys::InvalidOid;
    }
    // A database still on an earlier engram (not yet updated) has no
    // restore functions: its COPY is a plain one.
    let loaded =
        Spi::get_one::<bool>("SELECT pg_catalog.to_regprocedure('engram._restore_begin(regclass)') IS NOT NULL")
            .ok()
            .flatten()
            .unwrap_or(false);
    if !loaded {
        return pg_sys::InvalidOid;
    }
    let restoring = Spi::get_one_with_args::<bool>("SELECT engram._restore_begin($1::oid::regclass)", &[relid.into()])
        .unwrap_or_else(|e| error!("engram: preparing the restore of a table failed: {e}"))
        .unwrap_or(false);
    if restoring {
        relid
    } else {
        pg_sys::InvalidOid
    }
}

/// After a restore's COPY loaded `rows` rows into `relid`.
#[pg_guard]
pub unsafe extern "C-unwind" fn after_copy(relid: pg_sys::Oid, rows: u64) {
    let rows = i64::try_from(rows).unwrap_or(i64::MAX);
    Spi::run_with_args(
        "SELECT engram._restore_end($1::oid::regclass, $2)",
        &[relid.into(), rows.into()],
    )
    .unwrap_or_else(|e| error!("engram: recording the restore of a table failed: {e}"));
}
