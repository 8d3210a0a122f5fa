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
//!   view, foreign table, or any partition of a partitioned table it names)
//!   owned by an unprivileged role is executing: a view's query or a table's
//!   defaults, rules and constraints are that role's code even when no
//!   function of it runs (`ExecutorStart` to `ExecutorEnd`); so is a
//!   statement started while any of these held (a cursor that such code
//!   opened keeps the mark until it is closed); `COPY ... FROM` and
//!   `ALTER TABLE` on such a relation (or its children), and `ALTER DOMAIN`
//!   of such a role's domain, evaluate defaults and constraints outside the
//!   executor and are marked for their duration;
//! * the library was not preloaded: code that started before it was loaded
//!   went unseen, so nothing can be vouched for.
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
use pgrx::prelude::*;
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

/// A marked statement: its QueryDesc address (0 for a utility statement),
/// the subtransaction that started it, and why.
type Marked = (usize, pg_sys::SubTransactionId, Mark);

thread_local! {
    /// Whether the library was loaded before any statement of this backend.
    static PRELOADED: Cell<bool> = const { Cell::new(false) };
    /// One entry per function-manager frame that passed through the hook:
    /// the function's oid when an unprivileged role owns it.
    static FRAMES: RefCell<Vec<Option<pg_sys::Oid>>> = const { RefCell::new(Vec::new()) };
    /// Statements running with a mark.
    static MARKED: RefCell<Vec<Marked>> = const { RefCell::new(Vec::new()) };
    /// role -> privileged and function -> owned by an unprivileged role,
    /// valid for one generation of the role and function catalogs.
    static ROLES: RefCell<(u64, HashMap<pg_sys::Oid, bool>)> = RefCell::new((0, HashMap::new()));
    static FUNCTIONS: RefCell<(u64, HashMap<pg_sys::Oid, bool>)> = RefCell::new((0, HashMap::new()));
    static GENERATION: Cell<u64> = const { Cell::new(1) };
}

static mut PREV_NEEDS_FMGR: pg_sys::needs_fmgr_hook_type = None;
static mut PREV_FMGR: pg_sys::fmgr_hook_type = None;
static mut PREV_EXECUTOR_START: pg_sys::ExecutorStart_hook_type = None;
static mut PREV_EXECUTOR_END: pg_sys::ExecutorEnd_hook_type = None;
static mut PREV_UTILITY: pg_sys::ProcessUtility_hook_type = None;

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
fn memo(
    cache: &'static std::thread::LocalKey<RefCell<(u64, HashMap<pg_sys::Oid, bool>)>>,
    key: pg_sys::Oid,
    compute: impl FnOnce() -> bool,
) -> bool {
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

fn untrusted_function(oid: pg_sys::Oid) -> bool {
    watching() && memo(&FUNCTIONS, oid, || untrusted(pg_sys::SysCacheIdentifier::PROCOID, oid))
}

#[pg_guard]
unsafe extern "C-unwind" fn needs_fmgr_hook(fn_oid: pg_sys::Oid) -> bool {
    // SAFETY: the previous hook, as Postgres would call it.
    let prev = unsafe { PREV_NEEDS_FMGR }.is_some_and(|prev| unsafe { prev(fn_oid) });
    prev || untrusted_function(fn_oid)
}

/// The frame an FHET_START pushes: the function's oid when it is untrusted.
#[pg_guard]
unsafe extern "C-unwind" fn frame_of(flinfo: *mut pg_sys::FmgrInfo) -> pg_sys::Oid {
    // SAFETY: Postgres passes the function's valid FmgrInfo.
    let oid = unsafe { (*flinfo).fn_oid };
    if untrusted_function(oid) {
        oid
    } else {
        pg_sys::InvalidOid
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
        if let Some(prev) = PREV_FMGR {
            prev(event, flinfo, arg);
        }
        if event == pg_sys::FmgrHookEventType::FHET_START {
            let oid = frame_of(flinfo);
            FRAMES.with_borrow_mut(|frames| frames.push((oid != pg_sys::InvalidOid).then_some(oid)));
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
fn withheld_now() -> Option<String> {
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
    if let Some(function) = FRAMES.with_borrow(|f| f.iter().rev().find_map(|f| *f)) {
        let reason = format!(
            "function {} owned by role {} is running",
            // SAFETY: formats an oid; a missing function prints its oid.
            cstring(unsafe { pg_sys::format_procedure_qualified(function) }),
            role_name(owner_of(pg_sys::SysCacheIdentifier::PROCOID, function))
        );
        return Some((reason, false));
    }
    let mark = MARKED.with_borrow(|m| m.last().map(|e| e.2.clone()))?;
    Some(match mark {
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
    })
}

/// The mark a statement about to start gets, if any.
#[pg_guard]
unsafe extern "C-unwind" fn mark_statement(query: *mut pg_sys::QueryDesc) {
    if !watching() {
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
    if matches!(
        event,
        XACT_EVENT_COMMIT
            | XACT_EVENT_ABORT
            | XACT_EVENT_PARALLEL_COMMIT
            | XACT_EVENT_PARALLEL_ABORT
            | XACT_EVENT_PREPARE
    ) {
        MARKED.with_borrow_mut(|m| m.clear());
    }
}

unsafe extern "C-unwind" fn subxact_callback(
    event: pg_sys::SubXactEvent::Type,
    sub: pg_sys::SubTransactionId,
    parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    match event {
        pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB => MARKED.with_borrow_mut(|m| m.retain(|e| e.1 != sub)),
        pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB => MARKED.with_borrow_mut(|m| {
            m.iter_mut().filter(|e| e.1 == sub).for_each(|e| e.1 = parent);
        }),
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
