//! The stacks the hooks keep: function-manager frames, statements being
//! planned, and running statements with a mark (why privilege is withheld
//! while they run); and the (sub)transaction callbacks that drop what an
//! error left behind. Backends are single-threaded: the state is
//! thread-local.

use pgrx::pg_sys;
use std::cell::{Cell, RefCell};

/// Why a running statement is marked: it uses a relation or domain of an
/// unprivileged role, or it was started while privilege was withheld.
#[derive(Clone)]
pub(super) enum Mark {
    Relation(pg_sys::Oid),
    Domain(pg_sys::Oid),
    Started(String),
}

/// One function-manager frame that passed through the hook.
#[derive(Clone, Copy, PartialEq)]
#[repr(C)]
pub(super) enum Frame {
    /// A function owned by an unprivileged role.
    Untrusted(pg_sys::Oid),
    /// A plpgsql or SQL function of engram (its API or a helper).
    Engram,
    /// Anything else (a trusted role's function).
    Other,
}

/// A marked statement: its QueryDesc address (0 for a utility statement),
/// the subtransaction that started it, and why.
pub(super) type Marked = (usize, pg_sys::SubTransactionId, Mark);

thread_local! {
    /// Whether the library was loaded before any statement of this backend.
    pub(super) static PRELOADED: Cell<bool> = const { Cell::new(false) };
    /// One entry per function-manager frame that passed through the hook:
    /// the function's oid when an unprivileged role owns it.
    pub(super) static FRAMES: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
    /// One entry per statement being planned: the subtransaction that
    /// started planning it (an error drops it with its subtransaction).
    pub(super) static PLANNING: RefCell<Vec<pg_sys::SubTransactionId>> = const { RefCell::new(Vec::new()) };
    /// Statements running with a mark.
    pub(super) static MARKED: RefCell<Vec<Marked>> = const { RefCell::new(Vec::new()) };
}

pub(super) unsafe extern "C-unwind" fn xact_callback(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
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
        unsafe { super::hooks::engram_update_finished() };
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

pub(super) unsafe extern "C-unwind" fn subxact_callback(
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

/// Whether the library was loaded before any code of this backend ran.
pub(crate) fn preloaded() -> bool {
    PRELOADED.get()
}
