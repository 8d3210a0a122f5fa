//! engram's security in the backend: privilege that code of other roles
//! cannot borrow, the search_path guard, and who a call acts for
//! (docs/SECURITY.md).
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
//! The module's parts, by job:
//!
//! * `hooks`: the hooks that see every frame and statement;
//! * `frames`: the stacks they keep (frames, statements being planned,
//!   marked statements) and the (sub)transaction callbacks;
//! * `reasons`: why privilege is withheld now, in words;
//! * `catalog`: what the catalogs say (privileged roles, owners, kinds of
//!   function), memoized per generation of the catalogs;
//! * `path_guard`: the check that nothing a non-superuser planted sits on
//!   the elevated functions' search_path, run again only in a new
//!   generation of the catalogs;
//! * `binding`: who a call acts for, as SQL reads it.

mod binding;
mod catalog;
mod frames;
mod hooks;
mod path_guard;
mod reasons;

pub(crate) use binding::{_caller as caller, echo};
pub(crate) use reasons::withheld_now;

/// Installs the hooks and the catalog watch; called from `_PG_init`.
pub(crate) fn init() {
    hooks::init();
    // SAFETY: from _PG_init, once, with the caches this server has.
    unsafe { catalog::register(&catalog::watched_caches()) };
}
