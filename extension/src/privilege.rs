//! Privilege that code of other roles cannot borrow (issue 18, finding 1).
//!
//! A privileged caller (a superuser, or a DBA granted `SET ON PARAMETER
//! engram.owner`) may act for any owner without a token. Postgres lets code
//! that an unprivileged role wrote run inside such a session: the index
//! expressions of a table that ANALYZE (or autovacuum) evaluates, a trigger a
//! DBA's statement fires, a view or a column default of someone else's
//! table, a SECURITY DEFINER function. The session's role (`GetOuterUserId`)
//! is the DBA's all along, so deciding from it alone lends the DBA's
//! privilege to that code.
//!
//! engram therefore withholds the privileged path while any of these is
//! true, and the call is then treated like any restricted role's (it needs a
//! token binding):
//!
//! * a security-restricted operation runs (ANALYZE, VACUUM, CLUSTER,
//!   REINDEX, CREATE INDEX, REFRESH MATERIALIZED VIEW; autovacuum): Postgres
//!   runs index and view expressions there as the table's owner;
//! * a function owned by an unprivileged role is executing, in any
//!   language, however it was reached (called, fired as a trigger, evaluated
//!   in an index, a default, a policy or a view): `needs_fmgr_hook` routes
//!   such functions through Postgres' function-manager hook, which tells us
//!   when each starts and ends (and keeps SQL functions from being inlined
//!   out of sight of the hook);
//! * a statement that reads or writes a relation (table, view, materialized
//!   view, foreign table) owned by an unprivileged role is executing: a
//!   view's query or a table's defaults, rules and constraints are that
//!   role's code even when no function of it runs (`ExecutorStart` to
//!   `ExecutorEnd`; `COPY ... FROM` too, which evaluates defaults outside the
//!   executor);
//! * the library was not preloaded: code that started before it was loaded
//!   went unseen, so nothing can be vouched for.
//!
//! The hooks see every frame only when the library is loaded before any
//! code runs in the backend: `shared_preload_libraries` (what `scripts/setup`
//! configures) or `session_preload_libraries`. Without that, privileged calls
//! fail with a message that says so; token-bound calls work either way.
//!
//! Backends are single-threaded: the state is thread-local. Invalidation
//! callbacks only bump a generation (they can run in the middle of a
//! catalog lookup of ours).

use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::CStr;

thread_local! {
    /// Whether the library was loaded before any transaction of this backend.
    static PRELOADED: Cell<bool> = const { Cell::new(false) };
    /// One entry per function-manager frame that passed through the hook:
    /// the function's oid when an unprivileged role owns it.
    static FRAMES: RefCell<Vec<Option<pg_sys::Oid>>> = const { RefCell::new(Vec::new()) };
    /// Executors (and COPY statements) running over a relation that an
    /// unprivileged role owns: (QueryDesc address or 0 for COPY, the
    /// subtransaction that started it, the relation).
    static RELATIONS: RefCell<Vec<(usize, pg_sys::SubTransactionId, pg_sys::Oid)>> = const { RefCell::new(Vec::new()) };
    /// role -> privileged, valid for one generation of the role catalogs.
    static ROLES: RefCell<(u64, HashMap<pg_sys::Oid, bool>)> = RefCell::new((0, HashMap::new()));
    static ROLE_GENERATION: Cell<u64> = const { Cell::new(1) };
}

static mut PREV_NEEDS_FMGR: pg_sys::needs_fmgr_hook_type = None;
static mut PREV_FMGR: pg_sys::fmgr_hook_type = None;
static mut PREV_EXECUTOR_START: pg_sys::ExecutorStart_hook_type = None;
static mut PREV_EXECUTOR_END: pg_sys::ExecutorEnd_hook_type = None;
static mut PREV_UTILITY: pg_sys::ProcessUtility_hook_type = None;

/// Installs the hooks; called from `_PG_init`.
pub fn init() {
    // SAFETY: _PG_init runs once per process, in its only thread, before any
    // of these hooks can be called; the previous values are chained.
    unsafe {
        // shared_preload_libraries: in the postmaster; session_preload_libraries:
        // during InitPostgres, before the backend's mode is normal (and so
        // before any statement). A later load runs inside some statement.
        PRELOADED.set(
            pg_sys::process_shared_preload_libraries_in_progress
                || pg_sys::Mode != pg_sys::ProcessingMode::NormalProcessing
                || !pg_sys::IsTransactionState(),
        );
        PREV_NEEDS_FMGR = pg_sys::needs_fmgr_hook;
        pg_sys::needs_fmgr_hook = Some(needs_fmgr_hook);
        PREV_FMGR = pg_sys::fmgr_hook;
        pg_sys::fmgr_hook = Some(fmgr_hook);
        PREV_EXECUTOR_START = pg_sys::ExecutorStart_hook;
        pg_sys::ExecutorStart_hook = Some(executor_start);
        PREV_EXECUTOR_END = pg_sys::ExecutorEnd_hook;
        pg_sys::ExecutorEnd_hook = Some(executor_end);
        PREV_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_callback), std::ptr::null_mut());
        use pg_sys::SysCacheIdentifier as Cache;
        for cache in [
            Cache::AUTHOID,
            Cache::AUTHMEMROLEMEM,
            Cache::PARAMETERACLNAME,
            Cache::PARAMETERACLOID,
        ] {
            pg_sys::CacheRegisterSyscacheCallback(
                cache as std::ffi::c_int,
                Some(roles_changed),
                pg_sys::Datum::from(0),
            );
        }
    }
}

unsafe extern "C-unwind" fn roles_changed(_arg: pg_sys::Datum, _cacheid: std::ffi::c_int, _hash: u32) {
    ROLE_GENERATION.set(ROLE_GENERATION.get() + 1);
}

/// Whether `role` may act for any owner: a superuser, or granted SET on
/// `engram.owner`.
pub fn role_privileged(role: pg_sys::Oid) -> bool {
    let generation = ROLE_GENERATION.get();
    let cached = ROLES.with_borrow(|(seen, roles)| {
        if *seen == generation {
            roles.get(&role).copied()
        } else {
            None
        }
    });
    if let Some(privileged) = cached {
        return privileged;
    }
    // SAFETY: catalog lookups on a role oid, inside a transaction (callers check).
    let privileged = unsafe {
        pg_sys::superuser_arg(role)
            || pg_sys::pg_parameter_aclcheck(c"engram.owner".as_ptr(), role, pg_sys::ACL_SET as pg_sys::AclMode)
                == pg_sys::AclResult::ACLCHECK_OK
    };
    ROLES.with_borrow_mut(|(seen, roles)| {
        if *seen != generation {
            *seen = generation;
            roles.clear();
        }
        roles.insert(role, privileged);
    });
    privileged
}

/// The owner of a function or relation, from the syscache.
unsafe fn owner_of(cache: pg_sys::SysCacheIdentifier::Type, oid: pg_sys::Oid) -> Option<pg_sys::Oid> {
    // SAFETY: called by Postgres (or by this module) in a backend, with
    // valid pointers; catalog lookups run inside a transaction.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(cache as std::ffi::c_int, pg_sys::Datum::from(oid));
        if tuple.is_null() {
            return None;
        }
        let owner = if cache == pg_sys::SysCacheIdentifier::PROCOID {
            (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tuple)).proowner
        } else {
            (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_class>(tuple)).relowner
        };
        pg_sys::ReleaseSysCache(tuple);
        Some(owner)
    }
}

/// Whether an unprivileged role owns this object. Outside a transaction
/// (no catalog access) nothing is judged: no engram call can run there.
fn untrusted(cache: pg_sys::SysCacheIdentifier::Type, oid: pg_sys::Oid) -> bool {
    // SAFETY: catalog lookups only inside a transaction.
    unsafe { pg_sys::IsTransactionState() && owner_of(cache, oid).is_some_and(|owner| !role_privileged(owner)) }
}

#[pg_guard]
unsafe extern "C-unwind" fn needs_fmgr_hook(fn_oid: pg_sys::Oid) -> bool {
    // SAFETY: called by Postgres (or by this module) in a backend, with
    // valid pointers; catalog lookups run inside a transaction.
    unsafe {
        let prev = PREV_NEEDS_FMGR.is_some_and(|prev| prev(fn_oid));
        prev || untrusted(pg_sys::SysCacheIdentifier::PROCOID, fn_oid)
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn fmgr_hook(
    event: pg_sys::FmgrHookEventType::Type,
    flinfo: *mut pg_sys::FmgrInfo,
    arg: *mut pg_sys::Datum,
) {
    // SAFETY: called by Postgres (or by this module) in a backend, with
    // valid pointers; catalog lookups run inside a transaction.
    unsafe {
        if let Some(prev) = PREV_FMGR {
            prev(event, flinfo, arg);
        }
        if event == pg_sys::FmgrHookEventType::FHET_START {
            let oid = (*flinfo).fn_oid;
            let frame = untrusted(pg_sys::SysCacheIdentifier::PROCOID, oid).then_some(oid);
            FRAMES.with_borrow_mut(|frames| frames.push(frame));
        } else {
            // FHET_END or FHET_ABORT: Postgres pairs one with every START, the
            // frames nest strictly.
            FRAMES.with_borrow_mut(|frames| frames.pop());
        }
    }
}

/// The first relation of a plan's range table that an unprivileged role owns.
unsafe fn untrusted_relation(rtable: *mut pg_sys::List) -> Option<pg_sys::Oid> {
    // SAFETY: called by Postgres (or by this module) in a backend, with
    // valid pointers; catalog lookups run inside a transaction.
    unsafe {
        if rtable.is_null() {
            return None;
        }
        (0..(*rtable).length as usize).find_map(|i| {
            let rte = (*(*rtable).elements.add(i)).ptr_value as *mut pg_sys::RangeTblEntry;
            let relid = (*rte).relid;
            ((*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                && relid != pg_sys::InvalidOid
                && untrusted(pg_sys::SysCacheIdentifier::RELOID, relid))
            .then_some(relid)
        })
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn executor_start(query: *mut pg_sys::QueryDesc, eflags: std::ffi::c_int) {
    // SAFETY: called by Postgres (or by this module) in a backend, with
    // valid pointers; catalog lookups run inside a transaction.
    unsafe {
        // Recorded before the executor starts: initial partition pruning may
        // already evaluate expressions.
        if let Some(relid) = untrusted_relation((*(*query).plannedstmt).rtable) {
            let sub = pg_sys::GetCurrentSubTransactionId();
            RELATIONS.with_borrow_mut(|r| r.push((query as usize, sub, relid)));
        }
        match PREV_EXECUTOR_START {
            Some(prev) => prev(query, eflags),
            None => pg_sys::standard_ExecutorStart(query, eflags),
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn executor_end(query: *mut pg_sys::QueryDesc) {
    // SAFETY: called by Postgres (or by this module) in a backend, with
    // valid pointers; catalog lookups run inside a transaction.
    unsafe {
        RELATIONS.with_borrow_mut(|r| r.retain(|(q, _, _)| *q != query as usize));
        match PREV_EXECUTOR_END {
            Some(prev) => prev(query),
            None => pg_sys::standard_ExecutorEnd(query),
        }
    }
}

/// Takes the COPY's entry out when the statement ends, errors included
/// (an error unwinds through here as a Rust panic under `#[pg_guard]`).
struct CopyEntry;

impl Drop for CopyEntry {
    fn drop(&mut self) {
        RELATIONS.with_borrow_mut(|r| {
            if let Some(at) = r.iter().rposition(|(q, _, _)| *q == 0) {
                r.remove(at);
            }
        });
    }
}

#[pg_guard]
#[allow(clippy::too_many_arguments)] // Postgres' hook signature
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: called by Postgres (or by this module) in a backend, with
    // valid pointers; catalog lookups run inside a transaction.
    unsafe {
        let stmt = (*pstmt).utilityStmt;
        let mut _entry = None;
        if !stmt.is_null() && (*stmt).type_ == pg_sys::NodeTag::T_CopyStmt {
            let copy = stmt as *mut pg_sys::CopyStmt;
            if (*copy).is_from && !(*copy).relation.is_null() && pg_sys::IsTransactionState() {
                let relid = pg_sys::RangeVarGetRelidExtended(
                    (*copy).relation,
                    pg_sys::NoLock as pg_sys::LOCKMODE,
                    pg_sys::RVROption::RVR_MISSING_OK,
                    None,
                    std::ptr::null_mut(),
                );
                if relid != pg_sys::InvalidOid && untrusted(pg_sys::SysCacheIdentifier::RELOID, relid) {
                    let sub = pg_sys::GetCurrentSubTransactionId();
                    RELATIONS.with_borrow_mut(|r| r.push((0, sub, relid)));
                    _entry = Some(CopyEntry);
                }
            }
        }
        match PREV_UTILITY {
            Some(prev) => prev(
                pstmt,
                query_string,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
            None => pg_sys::standard_ProcessUtility(
                pstmt,
                query_string,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn xact_callback(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    // Executors a failed transaction abandoned never reach ExecutorEnd.
    // Committed transactions have ended theirs (holdable cursors were
    // materialised before the commit callbacks). The frame stack is not
    // touched: a procedure's frame spans its own COMMITs, and ABORT events
    // keep it balanced.
    if matches!(
        event,
        XACT_EVENT_COMMIT
            | XACT_EVENT_ABORT
            | XACT_EVENT_PARALLEL_COMMIT
            | XACT_EVENT_PARALLEL_ABORT
            | XACT_EVENT_PREPARE
    ) {
        RELATIONS.with_borrow_mut(|r| r.clear());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn subxact_callback(
    event: pg_sys::SubXactEvent::Type,
    sub: pg_sys::SubTransactionId,
    parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    match event {
        pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB => RELATIONS.with_borrow_mut(|r| r.retain(|e| e.1 != sub)),
        pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB => RELATIONS.with_borrow_mut(|r| {
            r.iter_mut().filter(|e| e.1 == sub).for_each(|e| e.1 = parent);
        }),
        _ => {}
    }
}

unsafe fn cstring(p: *const std::ffi::c_char) -> String {
    // SAFETY: called by Postgres (or by this module) in a backend, with
    // valid pointers; catalog lookups run inside a transaction.
    unsafe {
        if p.is_null() {
            "?".to_string()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }
}

unsafe fn role_name(role: Option<pg_sys::Oid>) -> String {
    // SAFETY: called by Postgres (or by this module) in a backend, with
    // valid pointers; catalog lookups run inside a transaction.
    unsafe { role.map_or_else(|| "?".to_string(), |r| cstring(pg_sys::GetUserNameFromId(r, true))) }
}

/// Why the privileged path is closed right now, or None when it is open to
/// a privileged session role.
pub fn withheld() -> Option<String> {
    if !PRELOADED.get() {
        return Some(
            "engram was not preloaded in this server process, so code that another role owns could be running \
             unseen; add engram to shared_preload_libraries (e.g. shared_preload_libraries = 'pg_cron,engram') \
             and restart PostgreSQL, or to session_preload_libraries (ALTER DATABASE ... SET \
             session_preload_libraries = 'engram', for new sessions)"
                .to_string(),
        );
    }
    // SAFETY: reads backend globals and the catalogs, inside a transaction
    // (this runs in an engram function).
    unsafe {
        if pg_sys::InSecurityRestrictedOperation() {
            return Some(
                "a security-restricted operation (ANALYZE, VACUUM, CLUSTER, REINDEX, CREATE INDEX, REFRESH \
                 MATERIALIZED VIEW, autovacuum) is evaluating a table owner's code"
                    .to_string(),
            );
        }
        if let Some(function) = FRAMES.with_borrow(|f| f.iter().rev().find_map(|f| *f)) {
            return Some(format!(
                "function {} owned by role {} is running",
                cstring(pg_sys::format_procedure_qualified(function)),
                role_name(owner_of(pg_sys::SysCacheIdentifier::PROCOID, function))
            ));
        }
        if let Some(relid) = RELATIONS.with_borrow(|r| r.last().map(|e| e.2)) {
            let schema = cstring(pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid)));
            return Some(format!(
                "this statement uses relation {}.{} owned by role {}",
                schema,
                cstring(pg_sys::get_rel_name(relid)),
                role_name(owner_of(pg_sys::SysCacheIdentifier::RELOID, relid))
            ));
        }
    }
    None
}
