//! Who a call acts for (the owner binding, docs/SECURITY.md).
//!
//! The API functions run as the extension's owner (SECURITY DEFINER), so
//! `current_user` inside them is not the caller. The role that called is the
//! *outer* role: the login role, or the role a `SET ROLE` chose. Postgres
//! keeps it apart from the definer's, and these functions read it.
//!
//! A caller is *privileged* when it may set `engram.owner` itself (a
//! superuser, or a role granted `SET ON PARAMETER engram.owner`, i.e. a DBA).
//! Everyone else is *restricted*: bound only through `engram.bind(token)`,
//! acting only for the bound owner.

use super::{catalog, frames, reasons};
use crate::gucs;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::CStr;

/// The owner the transaction is bound to (`engram.owner`), or NULL.
/// Row-level security calls this instead of reading the setting in SQL, so
/// that the library (and with it the SUSET definition of the setting) is
/// always loaded first: a placeholder value that an unprivileged role set
/// before the library loaded is discarded by Postgres at that moment.
#[pg_extern(stable, parallel_safe)]
fn _bound_owner() -> Option<String> {
    gucs::owner()
}

/// The owner row-level security shows a restricted role: the bound owner,
/// but none in a ghost or agent conversation (bound with an internal
/// context), which reads only through engram's functions and their checks.
#[pg_extern(stable, parallel_safe)]
fn _rls_owner() -> Option<String> {
    let Some(owner) = gucs::owner() else {
        // No binding made here: on a Citus worker, the proof of the one the
        // coordinator made (remote.rs); elsewhere nothing.
        return crate::remote::owner();
    };
    let Some(binding) = gucs::binding() else {
        // engram.owner without engram.bind: a DBA's own setting (a non-
        // superuser DBA reads under RLS), never a restricted role's, even
        // when a superuser put it in a database or role default.
        return _caller_privileged().then_some(owner);
    };
    let internal = serde_json::from_str::<serde_json::Value>(&binding)
        .ok()
        .is_some_and(|b| b.get("internal").is_some_and(serde_json::Value::is_object));
    (!internal).then_some(owner)
}

/// The JSON that engram.bind left in `engram.binding` (token, act_as,
/// internal context), or NULL.
#[pg_extern(stable, parallel_safe)]
fn _binding() -> Option<pgrx::JsonB> {
    gucs::binding()
        .and_then(|s| serde_json::from_str(&s).ok())
        .map(pgrx::JsonB)
}

fn outer_role() -> pg_sys::Oid {
    // SAFETY: reads a backend-global set by login and SET ROLE.
    unsafe { pg_sys::GetOuterUserId() }
}

/// Whether the calling role may set `engram.owner` directly: the session's
/// role is privileged and no code of an unprivileged role is running under
/// it (see hooks.rs).
#[pg_extern(volatile, parallel_safe)]
fn _caller_privileged() -> bool {
    // A parallel worker does not see the leader's frames and marks.
    // SAFETY: reads a backend global.
    let worker = unsafe { pg_sys::ParallelWorkerNumber } >= 0;
    !worker && catalog::role_privileged(outer_role()) && reasons::withheld().is_none()
}

/// Why a privileged session role's call is treated as a restricted one right
/// now (for the error message), or NULL.
#[pg_extern(volatile, parallel_safe)]
fn _withheld_privilege() -> Option<String> {
    if catalog::role_privileged(outer_role()) {
        reasons::withheld()
    } else {
        None
    }
}

/// Name of the calling role, for audit rows and revisions.
#[pg_extern(volatile, parallel_safe)]
fn _caller_role() -> String {
    // SAFETY: a valid role oid; the name is palloc'd and copied out.
    unsafe {
        let name = pg_sys::GetUserNameFromId(outer_role(), true);
        if name.is_null() {
            return "unknown".to_string();
        }
        CStr::from_ptr(name).to_string_lossy().into_owned()
    }
}

/// Whether the library was loaded before any statement of this backend
/// (shared_preload_libraries or session_preload_libraries), so that its
/// hooks saw everything that ran (hooks.rs, restore.rs).
#[pg_extern(volatile, parallel_safe)]
fn _preloaded() -> bool {
    frames::preloaded()
}
