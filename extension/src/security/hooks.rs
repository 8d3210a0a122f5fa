//! The hooks that see every frame and statement: the function manager's
//! (frames, and the helpers' guard), the planner's, the executor's start
//! and end (marks), and the utility hook (marks of COPY FROM, ALTER TABLE
//! and ALTER DOMAIN; `ALTER EXTENSION engram UPDATE`'s checks; a restore's
//! COPY).
//!
//! They are not `#[pg_guard]`ed: Postgres' errors raised below them (a
//! COPY's, a DDL's) must reach the client unchanged, with their context and
//! fields, so the previous hooks and the standard functions are called
//! directly, and errors longjmp through these frames, which own nothing
//! that needs dropping. The state they leave behind is cleaned up by the
//! (sub)transaction callbacks (frames.rs). Everything that reads the
//! catalogs runs in small guarded helpers.

use super::catalog::{cstring, function_kind, untrusted, untrusted_in_tree, watching, FunctionKind};
use super::frames::{subxact_callback, xact_callback, Frame, Mark, FRAMES, MARKED, PLANNING, PRELOADED};
use super::reasons::{innermost_reason, withheld_now};
use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use std::ffi::c_int;

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
pub(super) fn init() {
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
pub(super) unsafe extern "C-unwind" fn engram_update_finished() {
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
