//! What the catalogs say about roles, functions, relations and types, for
//! the hooks and the path guard: who is privileged, who owns an object,
//! what kind of function an oid is. Answers are memoized per generation:
//! syscache invalidation callbacks only bump the generation (they can run in
//! the middle of a catalog lookup of ours), and the next lookup recomputes.

use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_int, CStr};

/// What a function is, for the frames and the helpers' guard.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum FunctionKind {
    Untrusted,
    /// engram's API (callable by PUBLIC).
    EngramApi,
    /// engram's helper: not executable by `engram_agent`, trusts its caller.
    EngramHelper,
    Other,
}

thread_local! {
    /// role -> privileged and function -> kind, valid for one generation
    /// of the catalogs.
    static ROLES: RefCell<(u64, HashMap<pg_sys::Oid, bool>)> = RefCell::new((0, HashMap::new()));
    static FUNCTIONS: RefCell<(u64, HashMap<pg_sys::Oid, FunctionKind>)> = RefCell::new((0, HashMap::new()));
    /// Bumped by every catalog invalidation that can change an answer of
    /// this module or of the path guard.
    static GENERATION: Cell<u64> = const { Cell::new(1) };
}

/// The catalogs' generation in this backend: it changes after any
/// invalidation of the caches [`register`] watches.
pub(super) fn generation() -> u64 {
    GENERATION.get()
}

/// The first minor release of this major whose server has pg_extension's
/// syscache: it was back-patched at the end of the cache list (to keep the
/// ABI), so a server older than the headers engram was built against lacks
/// it, and registering a callback on it there is a FATAL "invalid cache ID"
/// in every backend. 15.17, 16.13 and 17.9 have it (read from their
/// headers); an earlier minor that may also have it just goes without it.
const FIRST_WITH_EXTENSION_CACHE: i32 = if cfg!(feature = "pg15") {
    150017
} else if cfg!(feature = "pg16") {
    160013
} else {
    170009
};

/// The running server's version (server_version_num), which may be an older
/// minor release than the headers this library was built against.
fn running_server_version() -> i32 {
    // SAFETY: reads a built-in GUC's value; the returned string is static.
    let value = unsafe { pg_sys::GetConfigOption(c"server_version_num".as_ptr(), false, false) };
    if value.is_null() {
        return 0;
    }
    // SAFETY: GetConfigOption returns a NUL-terminated string.
    let text = unsafe { std::ffi::CStr::from_ptr(value) };
    text.to_str().ok().and_then(|t| t.parse().ok()).unwrap_or(0)
}

/// The caches whose invalidation starts a new generation: those the
/// memo's answers come from (roles, memberships, parameter grants,
/// functions) and those the path guard reads (operators, schemas,
/// databases, extensions).
pub(super) fn watched_caches() -> Vec<c_int> {
    use pg_sys::SysCacheIdentifier as Cache;
    let mut caches = vec![
        Cache::AUTHOID,
        Cache::AUTHMEMROLEMEM,
        Cache::PARAMETERACLNAME,
        Cache::PARAMETERACLOID,
        Cache::PROCOID,
        Cache::OPEROID,
        Cache::NAMESPACEOID,
        Cache::DATABASEOID,
    ];
    // pg_extension's cache (17 names it with a Z so that it sorts last).
    // Without it, moving pgvector to another schema still changes its
    // functions' and operators' rows, which the caches above watch.
    if running_server_version() >= FIRST_WITH_EXTENSION_CACHE {
        #[cfg(any(feature = "pg15", feature = "pg16"))]
        caches.push(Cache::EXTENSIONOID);
        #[cfg(feature = "pg17")]
        caches.push(Cache::ZEXTENSIONOID);
    }
    caches.into_iter().map(|c| c as c_int).collect()
}

/// Watches `caches`: an invalidation of any of them starts a new
/// generation. Called from `_PG_init`.
///
/// # Safety
/// Only from `_PG_init`, with cache ids this server has.
pub(super) unsafe fn register(caches: &[c_int]) {
    for cache in caches {
        // SAFETY: as the caller promises.
        unsafe { pg_sys::CacheRegisterSyscacheCallback(*cache, Some(catalog_changed), pg_sys::Datum::from(0)) };
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
pub(super) fn role_privileged(role: pg_sys::Oid) -> bool {
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
pub(super) fn owner_of(cache: pg_sys::SysCacheIdentifier::Type, oid: pg_sys::Oid) -> Option<pg_sys::Oid> {
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
pub(super) fn untrusted(cache: pg_sys::SysCacheIdentifier::Type, oid: pg_sys::Oid) -> bool {
    owner_of(cache, oid).is_some_and(|owner| !role_privileged(owner))
}

/// Whether the hooks have anything to do: inside a transaction (catalog
/// access), in a database where engram can be called.
pub(super) fn watching() -> bool {
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
pub(super) fn function_kind(oid: pg_sys::Oid) -> FunctionKind {
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
    let (namespace, name, language, volatility, returns, definer) = unsafe {
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
            (*proc).prosecdef,
        );
        pg_sys::ReleaseSysCache(tuple);
        found
    };
    let engram = unsafe { pg_sys::get_namespace_oid(c"engram".as_ptr(), true) };
    // Internal functions (pg_language's fixed oid 12), and C functions (13)
    // that are pure or that engram_agent may call (they check the caller
    // themselves), are not engram's to guard. A C helper that reads data
    // and that agents may not call (the k-nearest search, who a call acts
    // for) is a helper like the plpgsql ones: below. A C function of the
    // API that runs as the extension's owner (engram.search) is engram's
    // own frame, as a plpgsql one is: the helpers it calls run inside it.
    if namespace != engram || u32::from(language) == 12 {
        return FunctionKind::Other;
    }
    if u32::from(language) == 13 && definer && name != Some(b'_') {
        return FunctionKind::EngramApi;
    }
    if u32::from(language) == 13 {
        if volatility == pg_sys::PROVOLATILE_IMMUTABLE || name != Some(b'_') {
            return FunctionKind::Other;
        }
        // SAFETY: catalog lookups of a role and of a function's ACL.
        let agent_may = unsafe {
            let agent = pg_sys::get_role_oid(c"engram_agent".as_ptr(), true);
            agent != pg_sys::InvalidOid && function_executable_by(oid, agent)
        };
        return if agent_may {
            FunctionKind::Other
        } else {
            FunctionKind::EngramHelper
        };
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

/// The first of `relid` and its inheritance children (partitions) that an
/// unprivileged role owns: tuple routing and ALTER TABLE reach partitions
/// that no range table names.
pub(super) fn untrusted_in_tree(relid: pg_sys::Oid) -> Option<pg_sys::Oid> {
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

pub(super) fn cstring(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        "?".to_string()
    } else {
        // SAFETY: a NUL-terminated string from Postgres.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

pub(super) fn role_name(role: Option<pg_sys::Oid>) -> String {
    // SAFETY: a role name lookup; a missing role prints "?".
    role.map_or_else(
        || "?".to_string(),
        |r| cstring(unsafe { pg_sys::GetUserNameFromId(r, true) }),
    )
}
