//! Why privilege is withheld now, in words a DBA can act on.

use super::catalog::{cstring, owner_of, role_name};
use super::frames::{Frame, Mark, FRAMES, MARKED, PLANNING, PRELOADED};
use pgrx::pg_sys;

/// Why privilege is withheld right now, leaving out the preload condition.
pub(crate) fn withheld_now() -> Option<String> {
    innermost_reason().map(|(reason, started)| {
        if started {
            format!("this statement (or cursor) was started while {reason}")
        } else {
            reason
        }
    })
}

/// The innermost reason privilege is withheld now, and whether it is the
/// reason a running statement was marked with when it started (a statement
/// started now carries the same reason on, not a chain of "started while").
pub(super) fn innermost_reason() -> Option<(String, bool)> {
    // SAFETY: reads backend globals and the catalogs, inside a transaction.
    unsafe {
        if pg_sys::InSecurityRestrictedOperation() {
            return Some((
                "a security-restricted operation (ANALYZE, VACUUM, CLUSTER, REINDEX, CREATE INDEX, REFRESH \
                 MATERIALIZED VIEW, autovacuum) is evaluating a table owner's code"
                    .to_string(),
                false,
            ));
        }
    }
    let untrusted_frame = FRAMES.with_borrow(|f| {
        f.iter().rev().find_map(|f| match f {
            Frame::Untrusted(oid) => Some(*oid),
            _ => None,
        })
    });
    if let Some(function) = untrusted_frame {
        let reason = format!(
            "function {} owned by role {} is running",
            // SAFETY: formats an oid; a missing function prints its oid.
            cstring(unsafe { pg_sys::format_procedure_qualified(function) }),
            role_name(owner_of(pg_sys::SysCacheIdentifier::PROCOID, function))
        );
        return Some((reason, false));
    }
    if let Some(mark) = MARKED.with_borrow(|m| m.last().map(|e| e.2.clone())) {
        return Some(marked_reason(mark));
    }
    PLANNING.with_borrow(|p| !p.is_empty()).then(|| {
        (
            "the planner is evaluating expressions of a statement (a view, row-level security policy, rule or \
             prepared statement it plans may hold another role's code)"
                .to_string(),
            false,
        )
    })
}

/// The reason a statement's mark gives.
fn marked_reason(mark: Mark) -> (String, bool) {
    match mark {
        Mark::Started(reason) => (reason, true),
        Mark::Relation(relid) => {
            // SAFETY: name lookups of a relation the statement uses.
            let (schema, name) = unsafe {
                (
                    cstring(pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid))),
                    cstring(pg_sys::get_rel_name(relid)),
                )
            };
            let reason = format!(
                "this statement uses relation {schema}.{name} owned by role {}",
                role_name(owner_of(pg_sys::SysCacheIdentifier::RELOID, relid))
            );
            (reason, false)
        }
        Mark::Domain(typid) => {
            let reason = format!(
                "this statement alters domain {} owned by role {}",
                // SAFETY: formats a type oid.
                cstring(unsafe { pg_sys::format_type_be_qualified(typid) }),
                role_name(owner_of(pg_sys::SysCacheIdentifier::TYPEOID, typid))
            );
            (reason, false)
        }
    }
}

/// Why the privileged path is closed right now, or None when it is open to
/// a privileged session role.
pub(crate) fn withheld() -> Option<String> {
    if !PRELOADED.get() {
        return Some(
            "engram was not preloaded in this server process, so code that another role owns could be running \
             unseen; add engram to shared_preload_libraries (e.g. shared_preload_libraries = 'pg_cron,engram') \
             and restart PostgreSQL, or to session_preload_libraries (ALTER DATABASE ... SET \
             session_preload_libraries = 'engram', for new sessions)"
                .to_string(),
        );
    }
    withheld_now()
}
