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
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use std::cell::RefCell;
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
    if gucs::binding().is_none() {
        // engram.owner without engram.bind: a DBA's own setting (a non-
        // superuser DBA reads under RLS), never a restricted role's, even
        // when a superuser put it in a database or role default.
        return _caller_privileged().then_some(owner);
    }
    // (a binding that is not JSON has no internal context)
    let internal = binding().is_some_and(|b| b.context().is_some());
    (!internal).then_some(owner)
}

/// What engram.bind left in `engram.binding`, parsed once per value.
#[derive(Clone, Debug)]
struct Binding {
    /// The whole JSON (token, act_as, platform, internal context).
    json: serde_json::Value,
}

impl Binding {
    /// The internal context (a ghost or agent conversation), when the
    /// binding has one.
    fn context(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.json.get("internal").and_then(serde_json::Value::as_object)
    }
}

thread_local! {
    /// The last `engram.binding` value read and its parse (None: not JSON).
    static PARSED: RefCell<Option<(String, Option<Binding>)>> = const { RefCell::new(None) };
}

/// The transaction's binding, or None (no engram.bind, or not JSON).
fn binding() -> Option<Binding> {
    let text = gucs::binding()?;
    PARSED.with_borrow_mut(|cache| {
        if let Some((seen, parsed)) = cache.as_ref() {
            if *seen == text {
                return parsed.clone();
            }
        }
        let parsed = serde_json::from_str(&text).ok().map(|json| Binding { json });
        *cache = Some((text, parsed.clone()));
        parsed
    })
}

/// The JSON that engram.bind left in `engram.binding` (token, act_as,
/// internal context), or NULL.
#[pg_extern(stable, parallel_safe)]
fn _binding() -> Option<pgrx::JsonB> {
    binding().map(|b| pgrx::JsonB(b.json))
}

/// Caller input echoed in an error message: at most 80 characters, then
/// "…" (engram._echo).
pub(crate) fn echo(value: &str) -> String {
    match value.char_indices().nth(engram_core::error::MAX_ECHO_CHARS) {
        None => value.to_string(),
        Some((cut, _)) => format!("{}…", &value[..cut]),
    }
}

fn refuse(code: PgSqlErrorCode, message: String, hint: Option<&str>) -> ! {
    let mut report = ErrorReport::new(code, message, "engram");
    if let Some(hint) = hint {
        report = report.set_hint(hint);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

thread_local! {
    /// Whether a restore is under way, prepared once per session.
    static RESTORED: RefCell<Option<pgrx::spi::OwnedPreparedStatement>> = const { RefCell::new(None) };
}

/// engram._check_restored() (plpgsql: it names what is still loading) when
/// a restore is under way: engram.restore_loads holds rows only then. The
/// common case is one read through a plan kept for the session.
fn check_restored() {
    Spi::connect(|client| {
        RESTORED.with_borrow_mut(|slot| {
            let plan = crate::kept::kept(slot, client, || {
                ("SELECT EXISTS (SELECT 1 FROM engram.restore_loads)".into(), vec![])
            });
            let loading = client
                .select(plan, None, &[])
                .unwrap_or_else(|e| error!("engram: the restore check failed: {e}"))
                .first()
                .get_one::<bool>()
                .unwrap_or_else(|e| error!("engram: the restore check failed: {e}"))
                .unwrap_or(false);
            if loading {
                client
                    .select("SELECT engram._check_restored()", None, &[])
                    .unwrap_or_else(|e| error!("engram: the restore check failed: {e}"));
            }
        });
    });
}

/// The owner a call acts for. A privileged caller (a superuser, or a role
/// granted SET on engram.owner: a DBA) names any owner or defaults to
/// engram.owner. Everyone else is restricted: bound by engram.bind(token)
/// in the same transaction, acting only for the bound owner.
#[pg_extern(volatile)]
fn _owner(p_owner: Option<String>) -> String {
    super::path_guard::check_planted();
    check_restored();
    let bound = gucs::owner();
    if _caller_privileged() {
        return match p_owner.or(bound) {
            Some(owner) if !owner.is_empty() => owner,
            _ => refuse(
                PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
                "owner is required; pass owner => '<owner>' or SET engram.owner = '<owner>'".to_string(),
                None,
            ),
        };
    }
    // Only a binding engram.bind made counts: an engram.owner that a DBA
    // set (SET, ALTER DATABASE/ROLE ... SET) is the DBA's default, never a
    // binding for a restricted call (nor for the DBA's withheld one).
    let Some(bound) = bound.filter(|_| binding().is_some()) else {
        // A privileged session role whose privilege is withheld: say why
        // (hooks.rs), not just "not bound".
        if let Some(withheld) = _withheld_privilege() {
            refuse(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("engram does not lend the privileges of role {} to this call: {withheld}", _caller_role()),
                Some("bind the transaction with a token (engram.bind), or see \"Privilege that cannot be borrowed\" in docs/SECURITY.md"),
            );
        }
        refuse(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "this transaction is not bound to an owner; call engram.bind(token => '<token>') first, in the same \
             transaction (a restricted role cannot set engram.owner)"
                .to_string(),
            None,
        );
    };
    if let Some(named) = p_owner.filter(|named| *named != bound) {
        refuse(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "owner '{}' differs from the bound owner; a restricted role acts only for the owner its token binds (engram.bind)",
                echo(&named)
            ),
            None,
        );
    }
    bound
}

/// What the internal context of the binding allows, for a call on memories
/// of p_internal_type carrying p_scope. A ghost conversation
/// (engram.bind(..., internal_type => 'ghost', ...)) writes and reads only
/// the accessor's ghost memories of that ghost, and sees the ghost owner's
/// memories only through engram.ghost_*: never the accessor's own normal
/// memories. An agent context never touches ghost memories.
#[pg_extern(volatile)]
fn _check_context(p_internal_type: Option<String>, p_scope: Option<Vec<Option<String>>>, p_write: Option<bool>) {
    let Some(binding) = binding() else { return };
    let Some(context) = binding.context() else { return };
    let ghost = context.get("internal_type").and_then(serde_json::Value::as_str) == Some("ghost");
    let write = p_write == Some(true);
    if ghost {
        let Some(internal_type) = p_internal_type else {
            if write {
                refuse(
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    "a ghost conversation writes only through memory_internal_create (engram.remember with \
                     internal_type => 'ghost' and the ghost's tags)"
                        .to_string(),
                    None,
                );
            }
            refuse(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                "a ghost conversation reads the ghost owner's memories only through engram.ghost_search, \
                 engram.ghost_recall and engram.ghost_list (over MCP: memory_search, memory_recall, memory_list)"
                    .to_string(),
                None,
            );
        };
        let scope = context.get("scope");
        let refuse_scope = || -> ! {
            refuse(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!(
                    "this transaction is bound to the ghost scope {}; pass internal_type => 'ghost' with those scope tags",
                    scope.map_or_else(|| "<NULL>".to_string(), jsonb_text)
                ),
                None,
            )
        };
        if internal_type != "ghost" {
            refuse_scope();
        }
        // The scope tags the binding requires, as jsonb_array_elements_text
        // reads them: a JSON null element never matches; a scope that is
        // not an array is an error, as Postgres raises it.
        let required: Vec<Option<String>> = match scope {
            None => Vec::new(),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) => Some(s.clone()),
                    other => Some(jsonb_text(other)),
                })
                .collect(),
            Some(serde_json::Value::Object(_)) => refuse(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                "cannot extract elements from an object".to_string(),
                None,
            ),
            Some(_) => refuse(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                "cannot extract elements from a scalar".to_string(),
                None,
            ),
        };
        let given: Vec<&str> = p_scope.iter().flatten().flatten().map(String::as_str).collect();
        if !required
            .iter()
            .all(|t| t.as_deref().is_some_and(|t| given.contains(&t)))
        {
            refuse_scope();
        }
    } else if p_internal_type.as_deref() == Some("ghost") {
        refuse(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "an agent context cannot touch ghost memories; bind with internal_type => 'ghost' for a ghost conversation"
                .to_string(),
            None,
        );
    }
}

/// A JSON value as Postgres prints a jsonb (", " between array items and
/// ": " after keys), for messages that show one.
fn jsonb_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Array(items) => {
            format!("[{}]", items.iter().map(jsonb_text).collect::<Vec<_>>().join(", "))
        }
        serde_json::Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", serde_json::Value::from(k.as_str()), jsonb_text(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// _owner and _check_context in one call: the owner a memory call acts for.
#[pg_extern(volatile)]
pub(crate) fn _caller(
    p_owner: Option<String>,
    p_internal_type: Option<String>,
    p_scope: Option<Vec<Option<String>>>,
    p_write: Option<bool>,
) -> String {
    let owner = _owner(p_owner);
    _check_context(p_internal_type, p_scope, p_write);
    owner
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
