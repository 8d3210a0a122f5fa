//! Privilege that code of other roles cannot borrow (docs/SECURITY.md).
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
//!   view, foreign table, or any partition of a partitioned table it names)
//!   owned by an unprivileged role is executing: a view's query or a table's
//!   defaults, rules and constraints are that role's code even when no
//!   function of it runs (`ExecutorStart` to `ExecutorEnd`); so is a
//!   statement started while any of these held (a cursor that such code
//!   opened keeps the mark until it is closed); `COPY ... FROM` and
//!   `ALTER TABLE` on such a relation (or its children), and `ALTER DOMAIN`
//!   of such a role's domain, evaluate defaults and constraints outside the
//!   executor and are marked for their duration;
//! * the planner is at work: while it plans a statement it evaluates
//!   STABLE functions whose arguments are constants (to estimate a `WHERE`
//!   clause of a view, a row-level security policy, a rule or a prepared
//!   statement that another role wrote), before `ExecutorStart` could mark
//!   the statement; nothing evaluated while planning acts with privilege
//!   (`planner_hook`);
//! * the library was not preloaded: code that started before it was loaded
//!   went unseen, so nothing can be vouched for.
//!
//! engram's helpers (functions named `_…`, not executable by PUBLIC) trust
//! their callers, since only engram's own functions and superusers can call
//! them. A superuser's statement can still reach one through another role's
//! view or function; so while privilege is withheld, a helper called by
//! anything but an engram function is refused (`fmgr_hook`: every engram
//! SQL function pins its search_path, so Postgres routes each call through
//! the hook).
//!
//! The hooks see every frame only when the library is loaded before any
//! code runs in the backend: `shared_preload_libraries` (what `scripts/setup`
//! configures) or `session_preload_libraries`. Without that, privileged calls
//! fail with a message that says so; token-bound calls work either way.
//!
//! All of it is skipped in databases without an `engram` schema (no engram
//! call can run there), so other databases of the cluster keep inlining
//! their SQL functions.
//!
//! The hooks themselves are not `#[pg_guard]`ed: Postgres' errors raised
//! below them (a COPY's, a DDL's) must reach the client unchanged, with
//! their context and fields, so the previous hooks and the standard
//! functions are called directly, and errors longjmp through these frames,
//! which own nothing that needs dropping. The engram state they leave
//! behind is cleaned up by the (sub)transaction callbacks. Everything that
//! reads the catalogs runs in small guarded helpers.
//!
//! Backends are single-threaded: the state is thread-local. Invalidation
//! callbacks only bump a generation (they can run in the middle of a
//! catalog lookup of ours).

use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_int, CStr};

/// Why a running statement is marked: it uses a relation or domain of an
/// unprivileged role, or it was started while privilege was withheld.
#[derive(Clone)]
enum Mark {
    Relation(pg_sys::Oid),
    Domain(pg_sys::Oid),
    Started(String),
}

/// One function-manager frame that passed through the hook.
#[derive(Clone, Copy, PartialEq)]
#[repr(C)]
enum Frame {
    /// A function owned by an unprivileged role.
    Untrusted(pg_sys::Oid),
    /// A plpgsql or SQL function of engram (its API or a helper).
    Engram,
    /// Anything else (a trusted role's function).
    Other,
}

/// What a function is, for the frames and the helpers' guard.
#[derive(Clone, Copy, PartialEq)]
enum FunctionKind {
    Untrusted,
    /// engram's API (callable by PUBLIC).
    EngramApi,
    /// engram's helper: not executable by `engram_agent`, trusts its caller.
    EngramHelper,
    Other,
}

/// A marked statement: its QueryDesc address (0 for a utility statement),
/// the subtransaction that started it, and why.
type Marked = (usize, pg_sys::SubTransactionId, Mark);

thread_local! {
    /// Whether the library was loaded before any statement of this backend.
    static PRELOADED: Cell<bool> = const { Cell::new(false) };
    /// One entry per function-manager frame that passed through the hook:
    /// the function's oid when an unprivileged role owns it.
    static FRAMES: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
    /// One entry per statement being planned: the subtransaction that
    /// started planning it (an error drops it with its subtransaction).
    static PLANNING: RefCell<Vec<pg_sys::SubTransactionId>> = const { RefCell::new(Vec::new()) };
    /// Statements running with a mark.
    static MARKED: RefCell<Vec<Marked>> = const { RefCell::new(Vec::new()) };
    /// role -> privileged and function -> owned by an unprivileged role,
    /// valid for one generation of the role and function catalogs.
    static ROLES: RefCell<(u64, HashMap<pg_sys::Oid, bool>)> = RefCell::new((0, HashMap::new()));
    static FUNCTIONS: RefCell<(u64, HashMap<pg_sys::Oid, FunctionKind>)> = RefCell::new((0, HashMap::new()));
    static GENERATION: Cell<u64> = const { Cell::new(1) };
}

static mut PREV_NEEDS_FMGR: pg_sys::needs_fmgr_hook_type = None;
static mut PREV_FMGR: pg_sys::fmgr_hook_type = None;
static mut PREV_EXECUTOR_START: pg_sys::ExecutorStart_hook_type = None;
static mut PREV_EXECUTOR_END: pg_sys::ExecutorEnd_hook_type = None;
static mut PREV_UTILITY: pg_sys::ProcessUtility_hook_type = None;
static mut PREV_PLANNER: pg_sys::planner_hook_type = None;

// The standard functions, called without pgrx's error guard (see above).
unsafe extern "C-unwind" {
    #[link_name = "standard_ExecutorStart"]
    fn raw_standard_executor_start(query: *mut pg_sys::QueryDesc, eflags: c_int);
    #[link_name = "standard_ExecutorEnd"]
    fn raw_standard_executor_end(query: *mut pg_sys::QueryDesc);
    #[link_name = "standard_ProcessUtility"]
    fn raw_standard_process_utility(
        pstmt: *mut pg_sys::PlannedStmt,
        query_string: *const std::ffi::c_char,
        read_only_tree: bool,
        context: pg_sys::ProcessUtilityContext::Type,
        params: pg_sys::ParamListInfo,
        query_env: *mut pg_sys::QueryEnvironment,
        dest: *mut pg_sys::DestReceiver,
        qc: *mut pg_sys::QueryCompletion,
    );
    #[link_name = "standard_planner"]
    fn raw_standard_planner(
        parse: *mut pg_sys::Query,
        query_string: *const std::ffi::c_char,
        cursor_options: c_int,
        bound_params: pg_sys::ParamListInfo,
    ) -> *mut pg_sys::PlannedStmt;
}

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
        PREV_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(planner);
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_callback), std::ptr::null_mut());
        use pg_sys::SysCacheIdentifier as Cache;
        for cache in [
            Cache::AUTHOID,
            Cache::AUTHMEMROLEMEM,
            Cache::PARAMETERACLNAME,
            Cache::PARAMETERACLOID,
            Cache::PROCOID,
        ] {
            pg_sys::CacheRegisterSyscacheCallback(cache as c_int, Some(catalog_changed), pg_sys::Datum::from(0));
        }
    }
}

unsafe extern "C-unwind" fn catalog_changed(_arg: pg_sys::Datum, _cacheid: c_int, _hash: u32) {
    GENERATION.set(GENERATION.get() + 1);
}

/// A per-generation memo: `compute` runs again after roles, their
/// memberships, parameter grants or functions changed.
fn memo<T: Copy>(
    cache: &'static std::thread::LocalKey<RefCell<(u64, HashMap<pg_sys::Oid, T>)>>,
    key: pg_sys::Oid,
    compute: impl FnOnce() -> T,
) -> T {
    let generation = GENERATION.get();
    let hit = cache.with_borrow(|(seen, map)| {
        if *seen == generation {
            map.get(&key).copied()
        } else {
            None
        }
    });
    if let Some(value) = hit {
        return value;
    }
    let value = compute();
    cache.with_borrow_mut(|(seen, map)| {
        if *seen != generation {
            *seen = generation;
            map.clear();
        }
        map.insert(key, value);
    });
    value
}

/// Whether `role` may act for any owner: a superuser, or granted SET on
/// `engram.owner`.
pub fn role_privileged(role: pg_sys::Oid) -> bool {
    memo(&ROLES, role, || {
        // SAFETY: catalog lookups on a role oid, inside a transaction
        // (callers check).
        unsafe {
            pg_sys::superuser_arg(role)
                || pg_sys::pg_parameter_aclcheck(c"engram.owner".as_ptr(), role, pg_sys::ACL_SET as pg_sys::AclMode)
                    == pg_sys::AclResult::ACLCHECK_OK
        }
    })
}

/// The owner of a function, relation or type, from the syscache.
fn owner_of(cache: pg_sys::SysCacheIdentifier::Type, oid: pg_sys::Oid) -> Option<pg_sys::Oid> {
    // SAFETY: a syscache lookup inside a transaction; the tuple is released
    // before returning.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(cache as c_int, pg_sys::Datum::from(oid));
        if tuple.is_null() {
            return None;
        }
        let owner = match cache {
            pg_sys::SysCacheIdentifier::PROCOID => {
                (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tuple)).proowner
            }
            pg_sys::SysCacheIdentifier::TYPEOID => {
                (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_type>(tuple)).typowner
            }
            _ => (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_class>(tuple)).relowner,
        };
        pg_sys::ReleaseSysCache(tuple);
        Some(owner)
    }
}

/// Whether an unprivileged role owns this object.
fn untrusted(cache: pg_sys::SysCacheIdentifier::Type, oid: pg_sys::Oid) -> bool {
    owner_of(cache, oid).is_some_and(|owner| !role_privileged(owner))
}

/// Whether the hooks have anything to do: inside a transaction (catalog
/// access), in a database where engram can be called.
fn watching() -> bool {
    // SAFETY: a syscache probe inside a transaction.
    unsafe {
        pg_sys::IsTransactionState()
            && pg_sys::SearchSysCacheExists(
                pg_sys::SysCacheIdentifier::NAMESPACENAME as c_int,
                pg_sys::Datum::from(c"engram".as_ptr()),
                pg_sys::Datum::from(0),
                pg_sys::Datum::from(0),
                pg_sys::Datum::from(0),
            )
    }
}

/// What kind of function `oid` is (Other outside databases with engram).
fn function_kind(oid: pg_sys::Oid) -> FunctionKind {
    if !watching() {
        return FunctionKind::Other;
    }
    memo(&FUNCTIONS, oid, || classify_function(oid))
}

fn classify_function(oid: pg_sys::Oid) -> FunctionKind {
    if untrusted(pg_sys::SysCacheIdentifier::PROCOID, oid) {
        return FunctionKind::Untrusted;
    }
    // SAFETY: a syscache lookup inside a transaction (watching() checked);
    // the tuple is released before returning.
    let (namespace, name, language, volatility, returns) = unsafe {
        let tuple = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::PROCOID as c_int, pg_sys::Datum::from(oid));
        if tuple.is_null() {
            return FunctionKind::Other;
        }
        let proc = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tuple);
        let found = (
            (*proc).pronamespace,
            CStr::from_ptr((*proc).proname.data.as_ptr())
                .to_bytes()
                .first()
                .copied(),
            (*proc).prolang,
            (*proc).provolatile as u8,
            u32::from((*proc).prorettype),
        );
        pg_sys::ReleaseSysCache(tuple);
        found
    };
    let engram = unsafe { pg_sys::get_namespace_oid(c"engram".as_ptr(), true) };
    // C and internal functions (pg_language's fixed oids 13 and 12): the
    // Rust ones are pure or check the caller themselves.
    if namespace != engram || matches!(u32::from(language), 12 | 13) {
        return FunctionKind::Other;
    }
    // Pure helpers (IMMUTABLE) read no data, and trigger functions (types
    // trigger and event_trigger: 2279, 3838) run only where engram attached
    // them (attaching one needs EXECUTE): nothing to guard.
    if name != Some(b'_') || volatility == pg_sys::PROVOLATILE_IMMUTABLE || matches!(returns, 2279 | 3838) {
        return FunctionKind::EngramApi;
    }
    // SAFETY: catalog lookups of a role and of a function's ACL.
    let agent_may = unsafe {
        let agent = pg_sys::get_role_oid(c"engram_agent".as_ptr(), true);
        agent != pg_sys::InvalidOid && function_executable_by(oid, agent)
    };
    if agent_may {
        FunctionKind::EngramApi
    } else {
        FunctionKind::EngramHelper
    }
}

/// Whether `role` has EXECUTE on function `oid`.
unsafe fn function_executable_by(oid: pg_sys::Oid, role: pg_sys::Oid) -> bool {
    // SAFETY: the caller is inside a transaction.
    unsafe {
        #[cfg(feature = "pg15")]
        let result = pg_sys::pg_proc_aclcheck(oid, role, pg_sys::ACL_EXECUTE as pg_sys::AclMode);
        #[cfg(not(feature = "pg15"))]
        let result = pg_sys::object_aclcheck(
            pg_sys::ProcedureRelationId,
            oid,
            role,
            pg_sys::ACL_EXECUTE as pg_sys::AclMode,
        );
        result == pg_sys::AclResult::ACLCHECK_OK
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn needs_fmgr_hook(fn_oid: pg_sys::Oid) -> bool {
    // SAFETY: the previous hook, as Postgres would call it.
    let prev = unsafe { PREV_NEEDS_FMGR }.is_some_and(|prev| unsafe { prev(fn_oid) });
    prev || function_kind(fn_oid) != FunctionKind::Other
}

/// The frame an FHET_START pushes. A helper of engram called while
/// privilege is withheld by anything but an engram function is refused
/// here, before it runs (and before the frame is pushed: Postgres sends no
/// FHET_ABORT for a START that failed).
#[pg_guard]
unsafe extern "C-unwind" fn frame_of(flinfo: *mut pg_sys::FmgrInfo) -> Frame {
    // SAFETY: Postgres passes the function's valid FmgrInfo.
    let oid = unsafe { (*flinfo).fn_oid };
    match function_kind(oid) {
        FunctionKind::Untrusted => Frame::Untrusted(oid),
        FunctionKind::EngramApi => Frame::Engram,
        FunctionKind::EngramHelper => {
            let called_by_engram = FRAMES.with_borrow(|f| f.last() == Some(&Frame::Engram));
            if !called_by_engram {
                if let Some(reason) = withheld_now() {
                    let message = format!(
                        "engram's internal function {} runs only inside engram's own functions while {reason}",
                        // SAFETY: formats a function oid.
                        cstring(unsafe { pg_sys::format_procedure_qualified(oid) })
                    );
                    ErrorReport::new(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, message, "engram")
                        .set_hint(
                            "call engram's public functions (docs/SQL.md) bound with a token, or see \"Privilege that \
                             cannot be borrowed\" in docs/SECURITY.md",
                        )
                        .report(PgLogLevel::ERROR);
                }
            }
            Frame::Engram
        }
        FunctionKind::Other => Frame::Other,
    }
}

unsafe extern "C-unwind" fn fmgr_hook(
    event: pg_sys::FmgrHookEventType::Type,
    flinfo: *mut pg_sys::FmgrInfo,
    arg: *mut pg_sys::Datum,
) {
    // SAFETY: called by Postgres with valid pointers; the previous hook is
    // chained as Postgres would call it.
    unsafe {
        // A START that frame_of refuses must not reach the previous hook:
        // Postgres sends no FHET_ABORT for it.
        let frame = (event == pg_sys::FmgrHookEventType::FHET_START).then(|| frame_of(flinfo));
        if let Some(prev) = PREV_FMGR {
            prev(event, flinfo, arg);
        }
        if let Some(frame) = frame {
            FRAMES.with_borrow_mut(|frames| frames.push(frame));
        } else {
            // FHET_END or FHET_ABORT: Postgres pairs one with every START,
            // and the frames nest strictly.
            FRAMES.with_borrow_mut(|frames| frames.pop());
        }
    }
}

/// The first of `relid` and its inheritance children (partitions) that an
/// unprivileged role owns: tuple routing and ALTER TABLE reach partitions
/// that no range table names.
fn untrusted_in_tree(relid: pg_sys::Oid) -> Option<pg_sys::Oid> {
    if untrusted(pg_sys::SysCacheIdentifier::RELOID, relid) {
        return Some(relid);
    }
    Spi::get_one_with_args::<pg_sys::Oid>(
        "WITH RECURSIVE tree(oid) AS (
             SELECT $1
             UNION SELECT i.inhrelid FROM pg_catalog.pg_inherits i JOIN tree ON i.inhparent OPERATOR(pg_catalog.=) tree.oid)
         SELECT c.oid FROM tree JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) tree.oid
         JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) c.relowner
         WHERE NOT r.rolsuper AND NOT pg_catalog.has_parameter_privilege(c.relowner, 'engram.owner', 'SET')
         LIMIT 1",
        &[relid.into()],
    )
    .ok()
    .flatten()
}

/// Why privilege is withheld right now, leaving out the preload condition.
pub fn withheld_now() -> Option<String> {
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
fn innermost_reason() -> Option<(String, bool)> {
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

/// The mark a statement about to start gets, if any.
#[pg_guard]
unsafe extern "C-unwind" fn mark_statement(query: *mut pg_sys::QueryDesc) {
    // A parallel worker never acts with privilege (binding.rs), and may not
    // read the catalogs through SPI.
    // SAFETY: reads a backend global.
    if !watching() || unsafe { pg_sys::ParallelWorkerNumber } >= 0 {
        return;
    }
    let mark = innermost_reason().map(|(reason, _)| Mark::Started(reason));
    // SAFETY: Postgres passes a valid QueryDesc with its plan.
    let rtable = unsafe { (*(*query).plannedstmt).rtable };
    let mark = mark.or_else(|| {
        // SAFETY: the plan's range table, a List of RangeTblEntry.
        unsafe {
            if rtable.is_null() {
                return None;
            }
            (0..(*rtable).length as usize).find_map(|i| {
                let rte = (*(*rtable).elements.add(i)).ptr_value as *mut pg_sys::RangeTblEntry;
                let relid = (*rte).relid;
                // A view stays in the plan's range table for its permission
                // check: as RTE_RELATION up to 15, as the RTE_SUBQUERY it
                // was expanded into (still naming the view) from 16 on.
                let kind = (*rte).rtekind;
                let view = kind == pg_sys::RTEKind::RTE_SUBQUERY && (*rte).relkind as u8 == pg_sys::RELKIND_VIEW;
                if !(kind == pg_sys::RTEKind::RTE_RELATION || view) || relid == pg_sys::InvalidOid {
                    return None;
                }
                let found = if (*rte).relkind as u8 == pg_sys::RELKIND_PARTITIONED_TABLE {
                    untrusted_in_tree(relid)
                } else {
                    untrusted(pg_sys::SysCacheIdentifier::RELOID, relid).then_some(relid)
                };
                found.map(Mark::Relation)
            })
        }
    });
    if let Some(mark) = mark {
        // SAFETY: reads the current subtransaction id.
        let sub = unsafe { pg_sys::GetCurrentSubTransactionId() };
        MARKED.with_borrow_mut(|m| m.push((query as usize, sub, mark)));
    }
}

/// Plans a statement with privilege withheld: nothing the planner
/// evaluates (STABLE functions of constants, to estimate a clause) acts
/// with the session role's privilege. An error leaves the entry behind for
/// the (sub)transaction callbacks to drop.
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: called by Postgres with valid arguments, passed on unchanged;
    // the current subtransaction id is a backend global.
    unsafe {
        let sub = pg_sys::GetCurrentSubTransactionId();
        PLANNING.with_borrow_mut(|p| p.push(sub));
        let planned = match PREV_PLANNER {
            Some(prev) => prev(parse, query_string, cursor_options, bound_params),
            None => raw_standard_planner(parse, query_string, cursor_options, bound_params),
        };
        PLANNING.with_borrow_mut(|p| p.pop());
        planned
    }
}

unsafe extern "C-unwind" fn executor_start(query: *mut pg_sys::QueryDesc, eflags: c_int) {
    // SAFETY: called by Postgres with a valid QueryDesc; the previous hook
    // or the standard function is called as Postgres would.
    unsafe {
        // Marked before the executor starts: initial partition pruning may
        // already evaluate expressions.
        mark_statement(query);
        match PREV_EXECUTOR_START {
            Some(prev) => prev(query, eflags),
            None => raw_standard_executor_start(query, eflags),
        }
    }
}

unsafe extern "C-unwind" fn executor_end(query: *mut pg_sys::QueryDesc) {
    MARKED.with_borrow_mut(|m| m.retain(|e| e.0 != query as usize));
    // SAFETY: as Postgres would call them.
    unsafe {
        match PREV_EXECUTOR_END {
            Some(prev) => prev(query),
            None => raw_standard_executor_end(query),
        }
    }
}

/// The mark of a utility statement that evaluates another role's
/// expressions outside the executor: COPY ... FROM and ALTER TABLE on its
/// relation (or a child), ALTER DOMAIN of its domain.
#[pg_guard]
unsafe extern "C-unwind" fn utility_mark(stmt: *mut pg_sys::Node) -> bool {
    if stmt.is_null() || !watching() {
        return false;
    }
    // SAFETY: Postgres passes a valid parse tree; names are resolved without
    // locks (a missing object means nothing to mark).
    let mark = unsafe {
        let relation = match (*stmt).type_ {
            pg_sys::NodeTag::T_CopyStmt if (*(stmt as *mut pg_sys::CopyStmt)).is_from => {
                (*(stmt as *mut pg_sys::CopyStmt)).relation
            }
            pg_sys::NodeTag::T_AlterTableStmt => (*(stmt as *mut pg_sys::AlterTableStmt)).relation,
            _ => std::ptr::null_mut(),
        };
        if !relation.is_null() {
            let relid = pg_sys::RangeVarGetRelidExtended(
                relation,
                pg_sys::NoLock as pg_sys::LOCKMODE,
                pg_sys::RVROption::RVR_MISSING_OK,
                None,
                std::ptr::null_mut(),
            );
            (relid != pg_sys::InvalidOid)
                .then(|| untrusted_in_tree(relid))
                .flatten()
                .map(Mark::Relation)
        } else if (*stmt).type_ == pg_sys::NodeTag::T_AlterDomainStmt {
            let names = (*(stmt as *mut pg_sys::AlterDomainStmt)).typeName;
            let typid = pg_sys::LookupTypeNameOid(std::ptr::null_mut(), pg_sys::makeTypeNameFromNameList(names), true);
            (typid != pg_sys::InvalidOid && untrusted(pg_sys::SysCacheIdentifier::TYPEOID, typid))
                .then_some(Mark::Domain(typid))
        } else {
            None
        }
    };
    let Some(mark) = mark else { return false };
    // SAFETY: reads the current subtransaction id.
    let sub = unsafe { pg_sys::GetCurrentSubTransactionId() };
    MARKED.with_borrow_mut(|m| m.push((0, sub, mark)));
    true
}

/// For `ALTER EXTENSION engram UPDATE [TO ...]`: refuses a target other
/// than this library's version before the update runs (upgrade.rs), and
/// says whether this is such a statement (checked again when it ends).
#[pg_guard]
unsafe extern "C-unwind" fn engram_update(stmt: *mut pg_sys::Node) -> bool {
    // SAFETY: Postgres passes a valid parse tree; an AlterExtensionStmt's
    // options are DefElems.
    unsafe {
        if stmt.is_null() || (*stmt).type_ != pg_sys::NodeTag::T_AlterExtensionStmt {
            return false;
        }
        let alter = stmt as *mut pg_sys::AlterExtensionStmt;
        let name = cstring((*alter).extname);
        if name != "engram" {
            return false;
        }
        let options = (*alter).options;
        let mut target = None;
        if !options.is_null() {
            for i in 0..(*options).length as usize {
                let def = (*(*options).elements.add(i)).ptr_value as *mut pg_sys::DefElem;
                if cstring((*def).defname) == "new_version" {
                    target = Some(cstring(pg_sys::defGetString(def)));
                }
            }
        }
        crate::upgrade::check_target(&name, target.as_deref());
        true
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn engram_update_finished() {
    crate::upgrade::check_finished();
}

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
    // SAFETY: called by Postgres with valid arguments, passed on unchanged.
    // An error longjmps past this frame; the (sub)transaction abort then
    // drops the mark.
    unsafe {
        let marked = utility_mark((*pstmt).utilityStmt);
        let update = engram_update((*pstmt).utilityStmt);
        let restoring = crate::restore::before_copy((*pstmt).utilityStmt);
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
            None => raw_standard_process_utility(
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
        if update {
            engram_update_finished();
        }
        if restoring != pg_sys::InvalidOid {
            let rows = if qc.is_null() { 0 } else { (*qc).nprocessed };
            crate::restore::after_copy(restoring, rows);
        }
        if marked {
            MARKED.with_borrow_mut(|m| {
                if let Some(at) = m.iter().rposition(|e| e.0 == 0) {
                    m.remove(at);
                }
            });
        }
    }
}

unsafe extern "C-unwind" fn xact_callback(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    // Statements a failed transaction abandoned never reach ExecutorEnd.
    // Committed transactions have ended theirs (holdable cursors were
    // materialised before the commit callbacks). The frame stack is not
    // touched: a procedure's frame spans its own COMMITs, and ABORT events
    // keep it balanced.
    // An ALTER EXTENSION that stopped at a hop without an API (in a
    // session where the library was not preloaded, so no utility hook saw
    // the statement end) fails before its transaction commits.
    if matches!(event, XACT_EVENT_PRE_COMMIT | XACT_EVENT_PRE_PREPARE) {
        // SAFETY: a guarded call; its error aborts the commit.
        unsafe { engram_update_finished() };
    }
    if matches!(
        event,
        XACT_EVENT_COMMIT
            | XACT_EVENT_ABORT
            | XACT_EVENT_PARALLEL_COMMIT
            | XACT_EVENT_PARALLEL_ABORT
            | XACT_EVENT_PREPARE
    ) {
        MARKED.with_borrow_mut(|m| m.clear());
        PLANNING.with_borrow_mut(|p| p.clear());
        crate::upgrade::forget_pending(None);
    }
}

unsafe extern "C-unwind" fn subxact_callback(
    event: pg_sys::SubXactEvent::Type,
    sub: pg_sys::SubTransactionId,
    parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    match event {
        pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB => {
            MARKED.with_borrow_mut(|m| m.retain(|e| e.1 != sub));
            PLANNING.with_borrow_mut(|p| p.retain(|s| *s != sub));
            crate::upgrade::forget_pending(Some(sub));
        }
        pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB => {
            MARKED.with_borrow_mut(|m| {
                m.iter_mut().filter(|e| e.1 == sub).for_each(|e| e.1 = parent);
            });
            PLANNING.with_borrow_mut(|p| p.iter_mut().filter(|s| **s == sub).for_each(|s| *s = parent));
        }
        _ => {}
    }
}

fn cstring(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        "?".to_string()
    } else {
        // SAFETY: a NUL-terminated string from Postgres.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

fn role_name(role: Option<pg_sys::Oid>) -> String {
    // SAFETY: a role name lookup; a missing role prints "?".
    role.map_or_else(
        || "?".to_string(),
        |r| cstring(unsafe { pg_sys::GetUserNameFromId(r, true) }),
    )
}

/// Whether the library was loaded before any code of this backend ran.
pub fn preloaded() -> bool {
    PRELOADED.get()
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
    withheld_now()
}
