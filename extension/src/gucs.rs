//! engram's settings (`engram.*` GUCs). Each has a typed accessor exposed to
//! SQL as `engram._setting_*()` so plpgsql never parses setting strings.

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::prelude::*;
use std::ffi::CString;

/// Cosine similarity at or above which a new memory conflicts with an old one.
static CONFLICT_THRESHOLD: GucSetting<f64> = GucSetting::<f64>::new(0.85);
/// Cosine similarity under which a hybrid search leaves out a hit that no
/// query word matched (docs/BENCHMARKS.md: derived from the similarities of
/// unrelated queries with the local model).
static SIMILARITY_FLOOR: GucSetting<f64> = GucSetting::<f64>::new(engram_core::search::DEFAULT_SIMILARITY_FLOOR);
/// Weight `w` of staleness in `score = relevance × trust × (1 − w × staleness)`.
static STALENESS_WEIGHT: GucSetting<f64> = GucSetting::<f64>::new(engram_core::scoring::DEFAULT_STALENESS_WEIGHT);
/// Days over which trust halves.
static TRUST_HALF_LIFE_DAYS: GucSetting<f64> =
    GucSetting::<f64>::new(engram_core::scoring::DEFAULT_TRUST_HALF_LIFE_DAYS);
/// Days without access after which a memory is fully stale.
static STALE_AFTER_DAYS: GucSetting<f64> = GucSetting::<f64>::new(engram_core::scoring::DEFAULT_STALE_AFTER_DAYS);
/// Smallest hnsw.ef_search of engram's index scans.
static HNSW_EF_SEARCH: GucSetting<i32> = GucSetting::<i32>::new(40);
/// Scopes narrower than this share of the table are searched exactly:
/// pgvector's filtered HNSW scans lose recall on them.
static HNSW_MIN_SELECTIVITY: GucSetting<f64> = GucSetting::<f64>::new(0.2);
/// Scopes estimated at no more rows than this are searched exactly. An
/// exact scan costs about one heap page per row; 300 rows cost about as
/// much as one HNSW pass at ef_search 40 (see docs/BENCHMARKS.md).
static EXACT_SEARCH_ROWS: GucSetting<i32> = GucSetting::<i32>::new(300);
/// Scope lists (engram.scope_entries) of at most this many entries are
/// scanned exactly, int8 first and reranked in full precision; larger ones
/// walk the HNSW index. Chosen where the list scan costs about as much as
/// an HNSW pass on the bench machine (docs/BENCHMARKS.md).
static LIST_SEARCH_ROWS: GucSetting<i32> = GucSetting::<i32>::new(LIST_SEARCH_ROWS_DEFAULT);
const LIST_SEARCH_ROWS_DEFAULT: i32 = 20_000;
/// The largest image engram.image_put stores.
static IMAGE_MAX_BYTES: GucSetting<i32> = GucSetting::<i32>::new(engram_core::images::DEFAULT_MAX_BYTES);
/// Per-owner quotas: SUSET, so a restricted role cannot raise
/// its own. Counted in engram.owner_locks by triggers (sql/api/quotas.sql).
static MAX_MEMORIES_PER_OWNER: GucSetting<i32> = GucSetting::<i32>::new(1_000_000);
static MAX_EVENTS_PER_OWNER: GucSetting<i32> = GucSetting::<i32>::new(1_000_000);
/// In kB (a size setting: '1GB', '500MB'); read in bytes.
static MAX_IMAGE_KB_PER_OWNER: GucSetting<i32> = GucSetting::<i32>::new(1024 * 1024);
static MAX_SLOTS_PER_OWNER: GucSetting<i32> = GucSetting::<i32>::new(10_000);
static MAX_WORKSPACES_PER_OWNER: GucSetting<i32> = GucSetting::<i32>::new(1_000);
static MAX_STATES_PER_OWNER: GucSetting<i32> = GucSetting::<i32>::new(100_000);
/// Events of a session after which a summary is due.
static SUMMARY_EVERY: GucSetting<i32> = GucSetting::<i32>::new(20);
/// The collection (owner) this session acts for; RLS binds engram_agent to it.
/// SUSET: only superusers (and roles granted SET on it) set it directly;
/// everyone else binds through engram.bind(token), which sets it too.
static OWNER: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
/// Who bound the transaction (token id and label, act_as, internal context),
/// as JSON written by engram.bind; read into every audit row.
static BINDING: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
/// A binding's proof sent by the coordinator to the other nodes of a Citus
/// cluster (remote.rs). USERSET: it proves itself, whoever sets it.
static REMOTE_BINDING: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
/// The owner engram.bind(NULL) binds while no token exists at all.
static ANONYMOUS_OWNER: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"local"));

pub fn init() {
    GucRegistry::define_float_guc(
        c"engram.conflict_threshold",
        c"Cosine similarity at or above which engram.remember reports a conflict.",
        c"Checked for semantic and procedural memories in the same owner and scope. Default 0.85.",
        &CONFLICT_THRESHOLD,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"engram.similarity_floor",
        c"Cosine similarity under which a hybrid search leaves out a hit that shares no word with the query.",
        c"Applies when a search passes both query_text and query_embedding and no min_similarity. Default 0.15 (measured for all-MiniLM-L6-v2; see docs/BENCHMARKS.md).",
        &SIMILARITY_FLOOR,
        -1.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"engram.staleness_weight",
        c"Weight of staleness in search scores.",
        c"score = relevance * trust * (1 - weight * staleness). Default 0.3.",
        &STALENESS_WEIGHT,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"engram.trust_half_life_days",
        c"Days over which a memory's trust halves.",
        c"Used by engram.rescore and on writes. Default 180.",
        &TRUST_HALF_LIFE_DAYS,
        0.0,
        36500.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"engram.stale_after_days",
        c"Days without access after which a memory counts as fully stale.",
        c"Used by engram.rescore. Default 90.",
        &STALE_AFTER_DAYS,
        0.0,
        36500.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"engram.hnsw_ef_search",
        c"hnsw.ef_search of engram's unfiltered index walks (engram.tune_search measures it).",
        c"A scope of selectivity s walks max(this, 1.5 x fetch) / s wide, at most 1000. Default 40.",
        &HNSW_EF_SEARCH,
        10,
        1000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"engram.hnsw_min_selectivity",
        c"Scopes narrower than this share of all memories are searched exactly.",
        c"Filtered HNSW scans lose recall on narrow scopes (0.88 at 5% in docs/BENCHMARKS.md). Default 0.2.",
        &HNSW_MIN_SELECTIVITY,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"engram.exact_search_rows",
        c"Scopes estimated at no more rows than this are searched exactly.",
        c"Above it, search walks the HNSW index with a pgvector iterative scan. Default 300.",
        &EXACT_SEARCH_ROWS,
        0,
        100_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"engram.list_search_rows",
        c"Scopes whose smallest scope list holds no more entries than this are searched exactly through the list.",
        c"The list's int8 vectors are scanned and the best reranked in full precision (recall 1); above it, search walks the HNSW index. Default 20000.",
        &LIST_SEARCH_ROWS,
        0,
        100_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"engram.summary_every",
        c"Events of a session after which engram.summary_due says a summary is due.",
        c"Counted since the session's last summary. Default 20.",
        &SUMMARY_EVERY,
        1,
        100_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    // SUSET: a restricted role must not raise its own limit.
    GucRegistry::define_int_guc(
        c"engram.image_max_bytes",
        c"Largest image engram.image_put stores, in bytes.",
        c"Larger images are refused (SQLSTATE 54000) and change nothing. Default 10 MiB; only superusers change it.",
        &IMAGE_MAX_BYTES,
        1,
        engram_core::images::MAX_MAX_BYTES,
        GucContext::Suset,
        GucFlags::default(),
    );
    quota(
        c"engram.max_memories_per_owner",
        c"Most memories one owner may store (every status, captured events included).",
        &MAX_MEMORIES_PER_OWNER,
    );
    quota(
        c"engram.max_events_per_owner",
        c"Most captured events one owner may store.",
        &MAX_EVENTS_PER_OWNER,
    );
    GucRegistry::define_int_guc(
        c"engram.max_image_bytes_per_owner",
        c"Most bytes of images one owner may store, e.g. '1GB'.",
        c"A write past it fails with SQLSTATE 54000 and changes nothing. Default 1GB; only superusers change it.",
        &MAX_IMAGE_KB_PER_OWNER,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_KB,
    );
    quota(
        c"engram.max_slots_per_owner",
        c"Most slots one owner may keep (global and per workspace).",
        &MAX_SLOTS_PER_OWNER,
    );
    quota(
        c"engram.max_workspaces_per_owner",
        c"Most workspaces one owner may keep (archived included).",
        &MAX_WORKSPACES_PER_OWNER,
    );
    quota(
        c"engram.max_states_per_owner",
        c"Most saved states one owner may keep (archived included).",
        &MAX_STATES_PER_OWNER,
    );
    GucRegistry::define_string_guc(
        c"engram.owner",
        c"The owner (collection) this session acts for.",
        c"Functions default their owner argument to it; under the engram_agent role RLS shows only this owner's rows.",
        &OWNER,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"engram.binding",
        c"Who bound this transaction to engram.owner (set by engram.bind).",
        c"JSON with token_id, token_label, act_as and the internal context; copied into audit rows.",
        &BINDING,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"engram.remote_binding",
        c"The proof of a binding made on the Citus coordinator (set by engram.bind, sent by Citus).",
        c"Row-level security on a worker shows the proven owner's rows; see docs/SCALING.md.",
        &REMOTE_BINDING,
        GucContext::Userset,
        GucFlags::NO_SHOW_ALL,
    );
    GucRegistry::define_string_guc(
        c"engram.anonymous_owner",
        c"The owner that engram.bind(token => NULL) binds while no token exists.",
        c"Only used before the first engram.create_token; default 'local'.",
        &ANONYMOUS_OWNER,
        GucContext::Suset,
        GucFlags::default(),
    );
    // SAFETY: called from _PG_init, in the backend's main thread, with a
    // static NUL-terminated prefix; Postgres copies the string.
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"engram".as_ptr()) };
}

/// A per-owner count limit: SUSET, 1 to 2^31 - 1.
fn quota(name: &'static std::ffi::CStr, short: &'static std::ffi::CStr, setting: &'static GucSetting<i32>) {
    GucRegistry::define_int_guc(
        name,
        short,
        c"A write past it fails with SQLSTATE 54000 and changes nothing; only superusers change it (ALTER SYSTEM, ALTER DATABASE ... SET).",
        setting,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
}

/// The per-owner quotas as {name: limit} (image bytes in bytes), for the
/// counting triggers and engram.stats.
#[pg_extern(stable, parallel_safe)]
fn _setting_quotas() -> pgrx::JsonB {
    pgrx::JsonB(serde_json::json!({
        "memories": MAX_MEMORIES_PER_OWNER.get(),
        "events": MAX_EVENTS_PER_OWNER.get(),
        "image_bytes": i64::from(MAX_IMAGE_KB_PER_OWNER.get()) * 1024,
        "slots": MAX_SLOTS_PER_OWNER.get(),
        "workspaces": MAX_WORKSPACES_PER_OWNER.get(),
        "states": MAX_STATES_PER_OWNER.get(),
    }))
}

#[pg_extern(stable, parallel_safe)]
pub(crate) fn _setting_conflict_threshold() -> f32 {
    CONFLICT_THRESHOLD.get() as f32
}

#[pg_extern(stable, parallel_safe)]
pub(crate) fn _setting_similarity_floor() -> f32 {
    SIMILARITY_FLOOR.get() as f32
}

#[pg_extern(stable, parallel_safe)]
pub(crate) fn _setting_staleness_weight() -> f32 {
    STALENESS_WEIGHT.get() as f32
}

#[pg_extern(stable, parallel_safe)]
fn _setting_trust_half_life_days() -> f64 {
    TRUST_HALF_LIFE_DAYS.get()
}

#[pg_extern(stable, parallel_safe)]
fn _setting_stale_after_days() -> f64 {
    STALE_AFTER_DAYS.get()
}

#[pg_extern(stable, parallel_safe)]
fn _setting_hnsw_ef_search() -> i32 {
    HNSW_EF_SEARCH.get()
}

#[pg_extern(stable, parallel_safe)]
fn _setting_hnsw_min_selectivity() -> f64 {
    HNSW_MIN_SELECTIVITY.get()
}

#[pg_extern(stable, parallel_safe)]
fn _setting_exact_search_rows() -> i32 {
    EXACT_SEARCH_ROWS.get()
}

#[pg_extern(stable, parallel_safe)]
fn _setting_list_search_rows() -> i32 {
    LIST_SEARCH_ROWS.get()
}

#[pg_extern(stable, parallel_safe)]
fn _setting_summary_every() -> i32 {
    SUMMARY_EVERY.get()
}

fn text(setting: &GucSetting<Option<CString>>) -> Option<String> {
    setting
        .get()
        .and_then(|s| s.to_str().ok().map(str::to_string))
        .filter(|s| !s.is_empty())
}

/// engram.owner, NULL when unset or empty.
pub fn owner() -> Option<String> {
    text(&OWNER)
}

/// engram.binding, NULL when unset or empty.
pub fn binding() -> Option<String> {
    text(&BINDING)
}

/// engram.remote_binding, NULL when unset or empty.
pub fn remote_binding() -> Option<String> {
    text(&REMOTE_BINDING)
}

#[pg_extern(stable, parallel_safe)]
fn _setting_anonymous_owner() -> Option<String> {
    text(&ANONYMOUS_OWNER)
}

/// `engram.image_max_bytes`, for the image checks.
pub fn image_max_bytes() -> usize {
    IMAGE_MAX_BYTES.get().max(1) as usize
}

#[pg_extern(stable, parallel_safe)]
fn _setting_image_max_bytes() -> i32 {
    IMAGE_MAX_BYTES.get()
}

/// The settings that choose a k-nearest search's plan (engram._knn).
pub fn search_plan_settings() -> engram_core::search_plan::Settings {
    engram_core::search_plan::Settings {
        list_search_rows: i64::from(LIST_SEARCH_ROWS.get()),
        exact_search_rows: f64::from(EXACT_SEARCH_ROWS.get()),
        min_selectivity: HNSW_MIN_SELECTIVITY.get(),
        ef_floor: HNSW_EF_SEARCH.get(),
    }
}
