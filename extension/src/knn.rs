//! `engram._knn`: the nearest memories of one read scope, in exact distance
//! order. engram-core `search_plan` chooses the plan (a scope list scanned
//! exactly, an exact scan, or an HNSW walk); this module reads the sizes the
//! choice needs and runs the statements, as SPI plans prepared once per
//! session. Search and the conflict check of `remember` call it.
//!
//! Every statement filters by the same WHERE clause ([`scope_filter`]) over
//! the same numbered parameters, so the scope cannot differ between the
//! plans, the planner's estimate and the text leg (`engram._text_rows`
//! pastes the same text, read through `engram._scope_filter`).

use engram_core::{quant, search_plan};
use pgrx::datum::{DatumWithOid, TimestampWithTimeZone, Uuid};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::{OwnedPreparedStatement, SpiClient};
use pgrx::PgOid;
use std::cell::RefCell;
use std::ffi::CStr;

use crate::raw::{RawJsonb, RawVector};

/// The WHERE clause of every scoped read, over numbered parameters: the
/// read scope's fields as $2..$10, $13..$16 and $19..$20 ($1 is the query
/// vector, $11 and $12 row counts, $17 and $18 the list path's list and
/// quantized query). Values are always bound, never spliced in. An active
/// memory past its expires_at is expired already, before engram.expire()
/// marks it. A memory is valid from valid_from until valid_to: a read sees
/// what is valid now, or at $16. An owner's scope names the owner by a
/// plain equality (on Citus the statement then runs on that owner's shard
/// alone); a scope of publications (a space's or group's, no owner) reads
/// every owner's.
pub(crate) fn scope_filter(owned: bool) -> String {
    let owner = if owned {
        "\n        WHERE m.owner = $2"
    } else {
        "\n        WHERE $2::text IS NULL"
    };
    format!("{owner}{SCOPE_FILTER_REST}")
}

const SCOPE_FILTER_REST: &str = "
          AND m.status = ANY ($3)
          AND (m.status <> 'active' OR m.expires_at IS NULL OR m.expires_at > now() OR 'expired' = ANY ($3))
          AND (CASE WHEN $4::text IS NULL THEN m.internal_type IS NULL ELSE m.internal_type = $4 END)
          AND ($5::text[] IS NULL OR m.kind = ANY ($5))
          AND ($6::text[] IS NULL OR m.tags @> $6)
          AND ($7::text[] IS NULL OR m.tags && $7)
          AND ($8::text IS NULL OR m.session_id = $8)
          AND ($9::timestamptz IS NULL OR m.created_at >= $9)
          AND ($10::timestamptz IS NULL OR m.created_at < $10)
          AND ($13::smallint IS NULL OR m.access_level <= $13)
          AND ($14::text IS NULL OR EXISTS (SELECT 1 FROM engram.publications p
                                            WHERE p.owner = m.owner AND p.memory_id = m.id AND p.space = $14))
          AND ($15::text IS NULL OR EXISTS (SELECT 1 FROM engram.publications p
                                            WHERE p.owner = m.owner AND p.memory_id = m.id AND p.group_id = $15))
          AND m.valid_from <= coalesce($16::timestamptz, now())
          AND (m.valid_to IS NULL OR m.valid_to > coalesce($16::timestamptz, now()))
          AND ($19::text[] IS NULL OR (m.namespace >= $19
               AND (cardinality($19) = 0 OR m.namespace < engram._namespace_bound($19))
               AND m.namespace[1:cardinality($19)] = $19))
          AND ($20::jsonb IS NULL OR (coalesce(m.value, m.metadata) @> coalesce(engram._filter_equalities($20), '{}')
               AND engram._filter_matches(coalesce(m.value, m.metadata), $20)))";

/// The scope filter as SQL text, for the text leg's dynamic statements.
#[pg_extern(immutable, parallel_safe)]
fn _scope_filter(p_owned: default!(bool, true)) -> String {
    scope_filter(p_owned)
}

/// The list path: the $12 entries of list $17 nearest to the int8 query
/// $18 (engram._nearest folds one block of ~18 entries per call), reranked
/// by exact distance to $1 under the scope filter, and the largest int8
/// distance among them. One primary-key lookup per candidate: the LATERAL
/// with OFFSET 0 is never flattened into a join.
fn list_rerank_sql() -> String {
    format!(
        "
    WITH c AS MATERIALIZED (
        SELECT x.memory_id, x.d8
        FROM engram._candidates((SELECT engram._nearest(b.entries, b.n, $18, $12) FROM engram.scope_blocks b
                                 WHERE b.owner = $2 AND b.list = $17)) x)
    SELECT array_agg(m.id ORDER BY m.d, m.id), array_agg(m.d ORDER BY m.d, m.id), (SELECT max(c2.d8) FROM c c2)::float8
    FROM c CROSS JOIN LATERAL (
        SELECT m.id, m.embedding <=> $1 AS d FROM engram.memories m {}
           AND m.embedding IS NOT NULL AND m.id = c.memory_id
        OFFSET 0) m",
        scope_filter(true)
    )
}

/// The walk of a broad scope: the $11 nearest of the $12 nearest that pass
/// the filter, in the index's distance order, re-sorted by exact distance.
fn walk_sql(owned: bool) -> String {
    format!(
        "
    WITH c AS MATERIALIZED (
        SELECT m.id, m.embedding <=> $1 AS d FROM engram.memories m {} AND m.embedding IS NOT NULL
        ORDER BY m.embedding <=> $1 LIMIT $12)
    SELECT c.id, c.d FROM c ORDER BY c.d, c.id LIMIT $11",
        scope_filter(owned)
    )
}

/// The exact scan: MATERIALIZED keeps the filter ahead of the distance
/// sort, so the HNSW index (which would drop rows) cannot be used.
fn exact_sql(owned: bool) -> String {
    format!(
        "WITH c AS MATERIALIZED (SELECT m.id, m.embedding <=> $1 AS d FROM engram.memories m{} AND m.embedding IS NOT NULL)
         SELECT c.id, c.d FROM c ORDER BY c.d, c.id LIMIT $11",
        scope_filter(owned)
    )
}

/// The planner's estimate of the scope's rows. EXPLAIN plans with the
/// values, so the estimate sees the tags' and owner's frequencies. Every
/// parameter appears in the text: Citus sends a shard's EXPLAIN only the
/// types of those that do.
fn estimate_sql(owned: bool) -> String {
    format!(
        "EXPLAIN (FORMAT JSON) SELECT 1 FROM engram.memories m{} AND m.embedding IS NOT NULL
         AND $1 IS NOT NULL AND $11::integer IS NULL AND $12::integer IS NULL AND $17::bigint IS NULL AND $18::bytea IS NULL",
        scope_filter(owned)
    )
}

/// The table's size (planner statistics), whether Citus is installed, and
/// the table's bytes now (the planner scales its statistics by its pages).
const TABLE_SQL: &str =
    "SELECT greatest(c.reltuples, 1)::float8, pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL,
        pg_catalog.pg_relation_size(c.oid)::float8
FROM pg_catalog.pg_class c WHERE c.oid = 'engram.memories'::pg_catalog.regclass";

/// What the table's statistics are: its file (a TRUNCATE gives a new one)
/// and its last ANALYZEs, by hand and by autovacuum. Read only where an
/// estimate is needed: the activity statistics it reads may be a snapshot
/// of every table's (`stats_fetch_consistency = snapshot`).
const STATISTICS_SQL: &str =
    "SELECT c.relfilenode::text || '/' || coalesce(pg_catalog.pg_stat_get_last_analyze_time(c.oid)::text, '') || '/'
        || coalesce(pg_catalog.pg_stat_get_last_autoanalyze_time(c.oid)::text, '')
FROM pg_catalog.pg_class c WHERE c.oid = 'engram.memories'::pg_catalog.regclass";

/// The scope's smallest list, the number of lists the scope needs (the
/// owner's, and one per tags_all tag) and how many of them have a size
/// row. The key is engram._list_key's: hashtextextended of
/// "<internal type>/<tag>" ('' for the owner's list).
const SIZES_SQL: &str = "WITH k AS (
    SELECT DISTINCT pg_catalog.hashtextextended(coalesce($2, '') || '/' || t, 0) AS list
    FROM unnest(array_prepend('', coalesce($3, '{}'::text[]))) t WHERE t IS NOT NULL)
SELECT (SELECT count(*) FROM k), z.list, z.n, z.lists
FROM (SELECT 1) one LEFT JOIN LATERAL (
    SELECT s.list, s.n, count(*) OVER () AS lists FROM engram.scope_sizes s
    WHERE s.owner = $1 AND s.list IN (SELECT k.list FROM k)
    ORDER BY s.n, s.list LIMIT 1) z ON true";

/// A space's or group's publications (many owners) on Citus: their count
/// bounds the scope (EXPLAIN of this multi-shard query fails on the shards
/// with NULL parameters).
const PUBLICATIONS_SQL: &str = "SELECT count(*)::float8 FROM engram.publications p
WHERE ($1::text IS NULL OR p.space = $1) AND ($2::text IS NULL OR p.group_id = $2)";

/// The read scope, as engram.read_scope's fields.
#[derive(Default)]
pub(crate) struct Scope {
    pub owner: Option<String>,
    pub statuses: Option<Vec<Option<String>>>,
    pub internal_type: Option<String>,
    pub kinds: Option<Vec<Option<String>>>,
    pub tags_all: Option<Vec<Option<String>>>,
    pub tags_any: Option<Vec<Option<String>>>,
    pub session_id: Option<String>,
    pub created_after: Option<TimestampWithTimeZone>,
    pub created_before: Option<TimestampWithTimeZone>,
    pub max_level: Option<i16>,
    pub space: Option<String>,
    pub group_id: Option<String>,
    pub valid_at: Option<TimestampWithTimeZone>,
    pub namespace_prefix: Option<Vec<Option<String>>>,
    pub filter: Option<RawJsonb>,
}

impl Scope {
    /// The fields as SQL values, in engram.read_scope's order ($1..$15 of
    /// a statement that builds the composite).
    pub(crate) fn values(&self) -> Vec<DatumWithOid<'_>> {
        vec![
            self.owner.clone().into(),
            self.statuses.clone().into(),
            self.internal_type.clone().into(),
            self.kinds.clone().into(),
            self.tags_all.clone().into(),
            self.tags_any.clone().into(),
            self.session_id.clone().into(),
            self.created_after.into(),
            self.created_before.into(),
            self.max_level.into(),
            self.space.clone().into(),
            self.group_id.clone().into(),
            self.valid_at.into(),
            self.namespace_prefix.clone().into(),
            self.filter_value(),
        ]
    }
}

/// The SQL types of [`Scope::values`].
pub(crate) const SCOPE_TYPES: &str = "$1::text, $2::text[], $3::text, $4::text[], $5::text[], $6::text[], $7::text, \
$8::timestamptz, $9::timestamptz, $10::smallint, $11::text, $12::text, $13::timestamptz, $14::text[], $15::jsonb";

/// The types of [`Scope::values`], as parameter types.
pub(crate) fn scope_types() -> Vec<PgOid> {
    use pg_sys::BuiltinOid::*;
    [
        TEXTOID,
        TEXTARRAYOID,
        TEXTOID,
        TEXTARRAYOID,
        TEXTARRAYOID,
        TEXTARRAYOID,
        TEXTOID,
        TIMESTAMPTZOID,
        TIMESTAMPTZOID,
        INT2OID,
        TEXTOID,
        TEXTOID,
        TIMESTAMPTZOID,
        TEXTARRAYOID,
        JSONBOID,
    ]
    .into_iter()
    .map(PgOid::BuiltIn)
    .collect()
}

/// The values of the numbered parameters that are not the scope's.
struct Slots {
    query: RawVector,
    n: Option<i32>,
    cand: Option<i32>,
    list: Option<i64>,
    quantized: Option<Vec<u8>>,
}

/// The 20 parameter types, $1..$20.
fn types(vector: pg_sys::Oid) -> [PgOid; 20] {
    use pg_sys::BuiltinOid::*;
    let b = PgOid::BuiltIn;
    [
        PgOid::from(vector),
        b(TEXTOID),
        b(TEXTARRAYOID),
        b(TEXTOID),
        b(TEXTARRAYOID),
        b(TEXTARRAYOID),
        b(TEXTARRAYOID),
        b(TEXTOID),
        b(TIMESTAMPTZOID),
        b(TIMESTAMPTZOID),
        b(INT4OID),
        b(INT4OID),
        b(INT2OID),
        b(TEXTOID),
        b(TEXTOID),
        b(TIMESTAMPTZOID),
        b(INT8OID),
        b(BYTEAOID),
        b(TEXTARRAYOID),
        b(JSONBOID),
    ]
}

impl Scope {
    /// The 20 parameters of a statement over this scope.
    fn args<'a>(&'a self, slots: &'a Slots) -> Vec<DatumWithOid<'a>> {
        // SAFETY: each datum is passed with its own type's oid; the query
        // vector's oid is the one the caller passed it as.
        let query = unsafe { DatumWithOid::new(slots.query, slots.query.oid()) };
        vec![
            query,
            self.owner.clone().into(),
            self.statuses.clone().into(),
            self.internal_type.clone().into(),
            self.kinds.clone().into(),
            self.tags_all.clone().into(),
            self.tags_any.clone().into(),
            self.session_id.clone().into(),
            self.created_after.into(),
            self.created_before.into(),
            slots.n.into(),
            slots.cand.into(),
            self.max_level.into(),
            self.space.clone().into(),
            self.group_id.clone().into(),
            self.valid_at.into(),
            slots.list.into(),
            slots.quantized.clone().into(),
            self.namespace_prefix.clone().into(),
            self.filter_value(),
        ]
    }

    fn filter_value(&self) -> DatumWithOid<'_> {
        RawJsonb::arg(self.filter)
    }

    /// Whether the scope lists cover this scope: an owner's active
    /// memories, not a space's or group's publications.
    fn listed(&self) -> bool {
        self.owner.is_some()
            && self.space.is_none()
            && self.group_id.is_none()
            && matches!(self.statuses.as_deref(), Some([Some(s)]) if s == "active")
    }

    /// Whether a list is the whole scope: no filter but one tag at most.
    fn list_is_scope(&self, keys: i64) -> bool {
        keys <= 2
            && self.kinds.is_none()
            && self.tags_any.is_none()
            && self.session_id.is_none()
            && self.created_after.is_none()
            && self.created_before.is_none()
            && self.max_level.is_none()
            && self.namespace_prefix.is_none()
            && self.filter.is_none()
    }
}

/// Statements prepared once per session, with the vector type they were
/// prepared for (a new pgvector installation has a new type).
#[derive(Default)]
struct Prepared {
    vector: Option<pg_sys::Oid>,
    table: Option<OwnedPreparedStatement>,
    statistics: Option<OwnedPreparedStatement>,
    sizes: Option<OwnedPreparedStatement>,
    publications: Option<OwnedPreparedStatement>,
    list: Option<OwnedPreparedStatement>,
    walk: Option<OwnedPreparedStatement>,
    walk_shared: Option<OwnedPreparedStatement>,
}

thread_local! {
    static PREPARED: RefCell<Prepared> = RefCell::new(Prepared::default());
}

/// Which prepared statement.
#[derive(Clone, Copy)]
enum Statement {
    Table,
    Statistics,
    Sizes,
    Publications,
    List,
    Walk,
    WalkShared,
}

/// Runs `f` with prepared statement `which` (prepared now if this session
/// has not, or prepared for another vector type).
fn with_prepared<R>(
    client: &SpiClient<'_>,
    vector: pg_sys::Oid,
    which: Statement,
    f: impl FnOnce(&OwnedPreparedStatement) -> R,
) -> R {
    PREPARED.with(|cell| {
        let mut p = cell.borrow_mut();
        if p.vector != Some(vector) {
            *p = Prepared {
                vector: Some(vector),
                ..Prepared::default()
            };
        }
        let slot = match which {
            Statement::Table => &mut p.table,
            Statement::Statistics => &mut p.statistics,
            Statement::Sizes => &mut p.sizes,
            Statement::Publications => &mut p.publications,
            Statement::List => &mut p.list,
            Statement::Walk => &mut p.walk,
            Statement::WalkShared => &mut p.walk_shared,
        };
        let statement = || -> (String, Vec<PgOid>) {
            use pg_sys::BuiltinOid::*;
            match which {
                Statement::Table => (TABLE_SQL.into(), vec![]),
                Statement::Statistics => (STATISTICS_SQL.into(), vec![]),
                Statement::Sizes => (
                    SIZES_SQL.into(),
                    vec![
                        PgOid::BuiltIn(TEXTOID),
                        PgOid::BuiltIn(TEXTOID),
                        PgOid::BuiltIn(TEXTARRAYOID),
                    ],
                ),
                Statement::Publications => (
                    PUBLICATIONS_SQL.into(),
                    vec![PgOid::BuiltIn(TEXTOID), PgOid::BuiltIn(TEXTOID)],
                ),
                Statement::List => (list_rerank_sql(), types(vector).to_vec()),
                Statement::Walk => (walk_sql(true), types(vector).to_vec()),
                Statement::WalkShared => (walk_sql(false), types(vector).to_vec()),
            }
        };
        f(crate::kept::kept(slot, client, statement))
    })
}

/// Settings changed until [`Gucs::restore`] (or the end of the
/// (sub)transaction, if an error comes first), as a function's SET
/// clauses are.
struct Gucs(i32);

impl Gucs {
    fn new() -> Self {
        // SAFETY: a plain call; the level is popped by restore() or by the
        // (sub)transaction's abort.
        Gucs(unsafe { pg_sys::NewGUCNestLevel() })
    }

    fn set(&self, name: &CStr, value: &str) {
        let value = std::ffi::CString::new(value).expect("setting values hold no NUL");
        // SAFETY: NUL-terminated strings; Postgres copies them.
        unsafe {
            pg_sys::set_config_option(
                name.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                0,
                false,
            );
        }
    }

    fn restore(self) {
        // SAFETY: this level was pushed by new() and nothing above it is
        // left (each nested Gucs is restored first).
        unsafe { pg_sys::AtEOXact_GUC(true, self.0) }
    }
}

/// The settings of the prepared list and walk statements: one cached
/// generic plan (a generic plan cannot see the scope's size; without them
/// it sorts the whole table rather than walking the index, or scans a
/// large list sequentially), no JIT (which the generic plan's estimate
/// would buy for ~13 ms a call), no parallel workers.
fn plan_settings(walk: bool) -> Gucs {
    let g = Gucs::new();
    g.set(c"plan_cache_mode", "force_generic_plan");
    g.set(c"enable_seqscan", "off");
    g.set(c"enable_bitmapscan", "off");
    g.set(c"max_parallel_workers_per_gather", "0");
    g.set(c"jit", "off");
    if walk {
        g.set(c"enable_sort", "off");
    }
    g
}

/// Column `i` of the current row of `table`; an SPI or type error raises
/// (a misread size must not quietly choose another plan).
fn col<T: pgrx::IntoDatum + pgrx::FromDatum>(table: &pgrx::spi::SpiTupleTable<'_>, i: usize) -> Option<T> {
    table
        .get::<T>(i)
        .unwrap_or_else(|e| error!("engram: reading a search statement's result failed: {e}"))
}

fn ids_and_distances(table: pgrx::spi::SpiTupleTable<'_>) -> Vec<(Uuid, f64)> {
    table
        .filter_map(|row| {
            let id = row
                .get::<Uuid>(1)
                .unwrap_or_else(|e| error!("engram: reading a search row failed: {e}"))?;
            let d = row
                .get::<f64>(2)
                .unwrap_or_else(|e| error!("engram: reading a search row failed: {e}"))?;
            Some((id, d))
        })
        .collect()
}

/// The p_n nearest memories to p_query (cosine distance) in the read scope
/// of the other arguments (engram.read_scope's fields), nearest first. See
/// docs/ARCHITECTURE.md, "Search plans".
#[allow(clippy::too_many_arguments)]
#[pg_extern]
fn _knn(
    p_query: Option<RawVector>,
    p_n: i32,
    owner: Option<String>,
    statuses: Option<Vec<Option<String>>>,
    internal_type: Option<String>,
    kinds: Option<Vec<Option<String>>>,
    tags_all: Option<Vec<Option<String>>>,
    tags_any: Option<Vec<Option<String>>>,
    session_id: Option<String>,
    created_after: Option<TimestampWithTimeZone>,
    created_before: Option<TimestampWithTimeZone>,
    max_level: Option<i16>,
    space: Option<String>,
    group_id: Option<String>,
    valid_at: Option<TimestampWithTimeZone>,
    namespace_prefix: Option<Vec<Option<String>>>,
    filter: Option<RawJsonb>,
) -> TableIterator<'static, (name!(id, Uuid), name!(distance, f64))> {
    let Some(query) = p_query.filter(|_| p_n > 0) else {
        return TableIterator::new(Vec::new());
    };
    if query.oid() == pg_sys::InvalidOid {
        error!("engram._knn needs its query's type: call it from SQL");
    }
    if owner.is_none() && space.is_none() && group_id.is_none() {
        ereport!(
            PgLogLevel::ERROR,
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            "internal error: a read scope without an owner"
        );
    }
    let scope = Scope {
        owner,
        statuses,
        internal_type,
        kinds,
        tags_all,
        tags_any,
        session_id,
        created_after,
        created_before,
        max_level,
        space,
        group_id,
        valid_at,
        namespace_prefix,
        filter,
    };
    TableIterator::new(knn(&scope, query, p_n))
}

/// The `n` nearest memories to `query` in `scope`, nearest first, as
/// (id, cosine distance).
pub(crate) fn knn(scope: &Scope, query: RawVector, n: i32) -> Vec<(Uuid, f64)> {
    let outer = Gucs::new();
    outer.set(c"hnsw.iterative_scan", "relaxed_order");
    outer.set(c"hnsw.ef_search", "40");
    let rows = Spi::connect(|client| nearest(client, scope, query, n, &outer));
    outer.restore();
    rows
}

fn nearest(client: &SpiClient<'_>, s: &Scope, query: RawVector, n: i32, gucs: &Gucs) -> Vec<(Uuid, f64)> {
    let vector = query.oid();
    let settings = crate::gucs::search_plan_settings();
    let (mut total, citus_installed, table) = with_prepared(client, vector, Statement::Table, |st| {
        let row = client
            .select(st, None, &[])
            .unwrap_or_else(|e| error!("engram: reading the table's size failed: {e}"))
            .first();
        let total = col::<f64>(&row, 1).unwrap_or(1.0);
        let table = Table {
            rows: total,
            bytes: col::<f64>(&row, 3).unwrap_or(0.0),
        };
        (total, col::<bool>(&row, 2).unwrap_or(false), table)
    });
    let citus = citus_installed && distributed(client);
    let owned = s.owner.is_some();
    let mut slots = Slots {
        query,
        n: Some(n),
        cand: None,
        list: None,
        quantized: None,
    };
    let mut rows: Option<f64> = None;

    if s.listed() {
        let (keys, list, size, lists) = with_prepared(client, vector, Statement::Sizes, |st| {
            let row = client
                .select(
                    st,
                    None,
                    &[
                        s.owner.clone().into(),
                        s.internal_type.clone().into(),
                        s.tags_all.clone().into(),
                    ],
                )
                .unwrap_or_else(|e| error!("engram: reading the scope lists' sizes failed: {e}"))
                .first();
            (
                col::<i64>(&row, 1).unwrap_or(0),
                col::<i64>(&row, 2),
                col::<i64>(&row, 3),
                col::<i64>(&row, 4).unwrap_or(0),
            )
        });
        // A list without a size row is empty, or was never built (a load
        // with triggers disabled): the estimated path below is right
        // either way.
        if let (true, Some(list), Some(size)) = (lists == keys, list, size) {
            if search_plan::scan_list(size, total, &settings) {
                return list_scan(client, s, &mut slots, list, size, citus);
            }
            if s.list_is_scope(keys) {
                rows = Some(size as f64);
            }
        }
    }
    let rows = match rows {
        Some(r) => r,
        None => {
            let r = if citus && !owned {
                with_prepared(client, vector, Statement::Publications, |st| {
                    let row = client
                        .select(st, None, &[s.space.clone().into(), s.group_id.clone().into()])
                        .unwrap_or_else(|e| error!("engram: counting publications failed: {e}"))
                        .first();
                    col::<f64>(&row, 1).unwrap_or(0.0)
                })
            } else if citus {
                // (the coordinator's statistics are of its empty shell table)
                estimate(client, s, &slots)
            } else {
                estimate_kept(client, s, &slots, table)
            };
            total = total.max(r);
            if search_plan::scan_exactly(r, total, &settings) {
                return exact(client, s, &slots);
            }
            r
        }
    };
    let fetch = search_plan::walk_fetch(n);
    // (on _knn's own level: no inner level is open here)
    gucs.set(
        c"hnsw.ef_search",
        &search_plan::walk_ef(fetch, rows, total, &settings).to_string(),
    );
    slots.cand = Some(fetch);
    let found = if citus {
        // The walk runs on a worker, with that database's iterative scan
        // (engram.distribute sets it) and ef_search there; Citus plans a
        // distributed statement with its parameters' values.
        let table = client
            .select(walk_sql(owned).as_str(), None, &s.args(&slots))
            .unwrap_or_else(|e| error!("engram: the search walk failed: {e}"));
        ids_and_distances(table)
    } else {
        let which = if owned { Statement::Walk } else { Statement::WalkShared };
        with_prepared(client, vector, which, |st| {
            let plan = plan_settings(true);
            let table = client
                .select(st, None, &s.args(&slots))
                .unwrap_or_else(|e| error!("engram: the search walk failed: {e}"));
            let found = ids_and_distances(table);
            plan.restore();
            found
        })
    };
    // A filter or a namespace prefix: the planner cannot estimate them (an
    // opaque function, a range), so a walk may return fewer rows than the
    // scope holds; the exact scan then answers.
    if (s.filter.is_some() || s.namespace_prefix.is_some()) && found.len() < usize::try_from(n).unwrap_or(0) {
        slots.cand = None;
        return exact(client, s, &slots);
    }
    found
}

/// Whether engram's tables are distributed (Citus knows engram.memories).
pub(crate) fn distributed(client: &SpiClient<'_>) -> bool {
    client
        .select(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = 'engram.memories'::pg_catalog.regclass)",
            None,
            &[],
        )
        .map(|t| col::<bool>(&t.first(), 1).unwrap_or(false))
        .unwrap_or_else(|e| error!("engram: reading whether engram's tables are distributed failed: {e}"))
}

/// The table's size, as the planner's estimate of a scope depends on it:
/// its row count and its bytes now.
struct Table {
    rows: f64,
    bytes: f64,
}

/// A scope's estimate as a key: every field but the filter (a scope with a
/// filter is not kept), with the table, the role the estimate was planned
/// as, and the minute (the scope's expiry and
/// validity are read at now()).
#[derive(PartialEq, Eq, Hash)]
struct EstimateKey {
    role: u32,
    minute: i64,
    rows: u64,
    growth: i64,
    statistics: String,
    texts: [Option<String>; 5],
    arrays: [Option<Vec<Option<String>>>; 5],
    times: [Option<i64>; 3],
    max_level: Option<i16>,
}

impl EstimateKey {
    fn of(s: &Scope, table: Table, statistics: String) -> Self {
        let time = |t: Option<TimestampWithTimeZone>| t.map(TimestampWithTimeZone::into_inner);
        EstimateKey {
            // SAFETY: a plain read of the current role.
            role: u32::from(unsafe { pg_sys::GetUserId() }),
            // SAFETY: a plain read of the transaction's start.
            minute: unsafe { pg_sys::GetCurrentTransactionStartTimestamp() } / 60_000_000,
            rows: table.rows.to_bits(),
            // (a step each time the table grows by a tenth)
            growth: table.bytes.max(1.0).log(1.1) as i64,
            statistics,
            texts: [
                s.owner.clone(),
                s.internal_type.clone(),
                s.session_id.clone(),
                s.space.clone(),
                s.group_id.clone(),
            ],
            arrays: [
                s.statuses.clone(),
                s.kinds.clone(),
                s.tags_all.clone(),
                s.tags_any.clone(),
                s.namespace_prefix.clone(),
            ],
            times: [time(s.created_after), time(s.created_before), time(s.valid_at)],
            max_level: s.max_level,
        }
    }
}

/// Estimates this session has planned, and how many it keeps at most.
const ESTIMATES_KEPT: usize = 256;
thread_local! {
    static ESTIMATES: RefCell<std::collections::HashMap<EstimateKey, f64>> = RefCell::default();
}

/// [`estimate`], planned once per scope, table and minute in a session:
/// the planner's estimate follows the scope's values, the table's
/// statistics and its size. An ANALYZE (by hand or autovacuum) or a
/// TRUNCATE, the table's growth by a tenth, and each new minute plan it
/// again. Planning the EXPLAIN costs 0.2-0.3 ms, as much as a scope list's
/// scan: remember's conflict check and every search with a kind, session,
/// time or level filter paid it on each call.
fn estimate_kept(client: &SpiClient<'_>, s: &Scope, slots: &Slots, table: Table) -> f64 {
    if s.filter.is_some() {
        return estimate(client, s, slots);
    }
    let statistics = with_prepared(client, slots.query.oid(), Statement::Statistics, |st| {
        let row = client
            .select(st, None, &[])
            .unwrap_or_else(|e| error!("engram: reading the table's statistics failed: {e}"))
            .first();
        col::<String>(&row, 1).unwrap_or_default()
    });
    let key = EstimateKey::of(s, table, statistics);
    if let Some(rows) = ESTIMATES.with_borrow(|e| e.get(&key).copied()) {
        return rows;
    }
    let rows = estimate(client, s, slots);
    ESTIMATES.with_borrow_mut(|e| {
        if e.len() >= ESTIMATES_KEPT {
            e.clear();
        }
        e.insert(key, rows);
    });
    rows
}

/// The planner's estimate of the scope's rows. EXPLAIN runs as a volatile
/// function's statement would: SPI refuses EXPLAIN in read-only mode, which
/// pgrx's `select` picks for a transaction that has written nothing (and
/// its writing mode would assign a transaction id, which a hot standby
/// cannot).
fn estimate(_client: &SpiClient<'_>, s: &Scope, slots: &Slots) -> f64 {
    let none = Slots {
        query: slots.query,
        n: None,
        cand: None,
        list: None,
        quantized: None,
    };
    let args = s.args(&none);
    let mut types: Vec<pg_sys::Oid> = args.iter().map(DatumWithOid::oid).collect();
    let (mut values, nulls): (Vec<pg_sys::Datum>, Vec<std::os::raw::c_char>) = args
        .iter()
        .map(|a| match a.datum() {
            Some(d) => (d.sans_lifetime(), b' ' as std::os::raw::c_char),
            None => (pg_sys::Datum::from(0usize), b'n' as std::os::raw::c_char),
        })
        .unzip();
    let sql = std::ffi::CString::new(estimate_sql(s.owner.is_some())).expect("no NUL in the statement");
    // SAFETY: inside SPI_connect (the caller's Spi::connect); the arrays
    // hold one entry per parameter and outlive the call; the result is read
    // before the next SPI call.
    let plan = unsafe {
        let rc = pg_sys::SPI_execute_with_args(
            sql.as_ptr(),
            i32::try_from(types.len()).expect("20 parameters"),
            types.as_mut_ptr(),
            values.as_mut_ptr(),
            nulls.as_ptr(),
            false,
            1,
        );
        let table = pg_sys::SPI_tuptable;
        if rc < 0 || table.is_null() || pg_sys::SPI_processed == 0 {
            error!("engram: estimating the search scope failed (SPI code {rc})");
        }
        let text = pg_sys::SPI_getvalue(*(*table).vals, (*table).tupdesc, 1);
        if text.is_null() {
            error!("engram: estimating the search scope returned no plan");
        }
        std::ffi::CStr::from_ptr(text).to_string_lossy().into_owned()
    };
    // (a misread estimate must not quietly choose the exact scan)
    serde_json::from_str::<serde_json::Value>(&plan)
        .ok()
        .and_then(|p| p.get(0)?.get("Plan")?.get("Plan Rows")?.as_f64())
        .unwrap_or_else(|| error!("engram: the search scope's estimate has no row count: {plan}"))
}

fn exact(client: &SpiClient<'_>, s: &Scope, slots: &Slots) -> Vec<(Uuid, f64)> {
    let exact = Slots {
        query: slots.query,
        n: slots.n,
        cand: None,
        list: None,
        quantized: None,
    };
    let table = client
        .select(exact_sql(s.owner.is_some()).as_str(), None, &s.args(&exact))
        .unwrap_or_else(|e| error!("engram: the exact search scan failed: {e}"));
    ids_and_distances(table)
}

/// The list path: the nearest candidates of list `list` (of `size`
/// entries) by int8 distance, reranked by exact distance under the whole
/// scope filter, widened until nothing outside the candidates can be
/// nearer (recall 1; iterative HNSW scans reach only 0.88-0.93 recall@10 at
/// 5% selectivity whatever their ef_search).
fn list_scan(
    client: &SpiClient<'_>,
    s: &Scope,
    slots: &mut Slots,
    list: i64,
    size: i64,
    citus: bool,
) -> Vec<(Uuid, f64)> {
    let n = slots.n.unwrap_or(0);
    // SAFETY: the caller's vector argument, valid for this call.
    slots.quantized = Some(quant::quantize(&unsafe { slots.query.values() }));
    slots.list = Some(list);
    let mut cand = search_plan::first_candidates(n);
    loop {
        slots.cand = Some(cand);
        let (ids, dists, edge) = if citus {
            let row = client
                .select(list_rerank_sql().as_str(), None, &s.args(slots))
                .unwrap_or_else(|e| error!("engram: the scope list scan failed: {e}"))
                .first();
            rerank_row(&row)
        } else {
            with_prepared(client, slots.query.oid(), Statement::List, |st| {
                let plan = plan_settings(false);
                let row = client
                    .select(st, None, &s.args(slots))
                    .unwrap_or_else(|e| error!("engram: the scope list scan failed: {e}"))
                    .first();
                let r = rerank_row(&row);
                plan.restore();
                r
            })
        };
        let nth = usize::try_from(n)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| dists.get(i).copied());
        if search_plan::list_complete(size, cand, n, ids.len(), nth, edge) || cand == i32::MAX {
            return ids
                .into_iter()
                .zip(dists)
                .take(usize::try_from(n).unwrap_or(0))
                .collect();
        }
        cand = search_plan::next_candidates(cand);
    }
}

fn rerank_row(row: &pgrx::spi::SpiTupleTable<'_>) -> (Vec<Uuid>, Vec<f64>, Option<f64>) {
    let ids = col::<Vec<Option<Uuid>>>(row, 1).unwrap_or_default();
    let dists = col::<Vec<Option<f64>>>(row, 2).unwrap_or_default();
    // (neither holds a NULL: ids are keys, distances of non-NULL embeddings)
    let (ids, dists) = ids.into_iter().zip(dists).filter_map(|(i, d)| Some((i?, d?))).unzip();
    (ids, dists, col::<f64>(row, 3))
}
