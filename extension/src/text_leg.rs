//! The text leg of a search over the text index, for an owner's active
//! memories read with the owner's statistics: the k best by text score,
//! read in rounds, MaxScore-style (engram-core `text_rank` decides which
//! terms' postings to read next and scores the rows). Each round is two
//! statements kept for the session: the next postings of the terms to
//! read, then the rows of the memories first seen (under the scope filter).
//! See docs/ARCHITECTURE.md, "Text index".
//!
//! A query whose postings outgrow a round's bound, or whose exact token no
//! posting spells, scores the scope's matching rows at once with the
//! owner's statistics (`engram._lexical_indexed`). Any other scope (scope
//! tags, archived memories, publications, an access level) and a
//! distributed store are read by `engram._lexical` over the scope's
//! matching rows, with their statistics.

use std::cell::RefCell;
use std::collections::HashSet;

use engram_core::text_rank;
use pgrx::datum::{DatumWithOid, Uuid};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::{OwnedPreparedStatement, SpiClient};
use pgrx::PgOid;

use crate::knn::{Scope, SCOPE_TYPES};
use crate::raw::{RawJsonb, RawTsquery};

type Tstz = pgrx::datum::TimestampWithTimeZone;
type Texts = Vec<Option<String>>;

/// Past this many postings of one term in a round, the scope's matching
/// rows are scored at once (a filter the index does not narrow).
const MAX_ROUND_POSTINGS: i32 = 16_384;

/// The most terms read from a query (each finds memories; the first
/// `MAX_QUERY_TERMS` are weighed).
const MAX_READ_TERMS: i64 = 256;

#[derive(Default)]
struct Kept {
    citus: Option<OwnedPreparedStatement>,
    start: Option<OwnedPreparedStatement>,
    postings: Option<OwnedPreparedStatement>,
    rows: Option<OwnedPreparedStatement>,
}

thread_local! {
    static KEPT: RefCell<Kept> = RefCell::new(Kept::default());
}

/// Whether [`indexed`] serves this scope: an owner's active memories, no
/// publications or access level (the owner's statistics tell such a
/// caller nothing it may not see).
pub(crate) fn serves(scope: &Scope) -> bool {
    scope.owner.is_some()
        && matches!(scope.statuses.as_deref(), Some([Some(s)]) if s == "active")
        && scope.space.is_none()
        && scope.group_id.is_none()
        && scope.max_level.is_none()
}

/// What a query reads: its terms, their document frequencies, the owner's
/// size, the exact tokens' lexemes and tsquery.
struct Start {
    docs: Option<i64>,
    total_len: Option<i64>,
    terms: Vec<String>,
    dfs: Vec<f64>,
    keys: Vec<String>,
    exact: Option<RawTsquery>,
}

/// Whether Citus is installed (the store may be distributed).
fn citus_installed(client: &SpiClient<'_>) -> bool {
    KEPT.with_borrow_mut(|kept| {
        let plan = crate::kept::kept(&mut kept.citus, client, || {
            (
                "SELECT pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL".into(),
                vec![],
            )
        });
        let table = client
            .select(plan, None, &[])
            .unwrap_or_else(|e| error!("engram: reading the catalog failed: {e}"));
        got(table.first().get::<bool>(1), "the catalog").unwrap_or(false)
    })
}

/// The text leg's bounded read for the read scope of the arguments
/// (engram.read_scope's fields): the `p_n` best memories by text score for
/// `p_text`, best first. engram._lexical calls it for the scopes it serves.
#[allow(clippy::too_many_arguments)]
#[pg_extern]
fn _text_index_read(
    owner: Option<String>,
    statuses: Option<Texts>,
    internal_type: Option<String>,
    kinds: Option<Texts>,
    tags_all: Option<Texts>,
    tags_any: Option<Texts>,
    session_id: Option<String>,
    created_after: Option<Tstz>,
    created_before: Option<Tstz>,
    max_level: Option<i16>,
    space: Option<String>,
    group_id: Option<String>,
    valid_at: Option<Tstz>,
    namespace_prefix: Option<Texts>,
    filter: Option<RawJsonb>,
    p_text: Option<String>,
    p_n: Option<i32>,
) -> TableIterator<'static, (name!(id, Uuid), name!(rank, f32))> {
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
    let words = crate::search::query_words(p_text.as_deref());
    let n = p_n.unwrap_or(0);
    let (Some(words), true, true) = (words, n > 0, serves(&scope)) else {
        return TableIterator::new(Vec::new());
    };
    // SAFETY: a plain read (the call's context, as in _search_hits).
    let memory = unsafe { pg_sys::CurrentMemoryContext };
    let hits = Spi::connect(|client| indexed(client, &scope, words, n, memory)).unwrap_or_else(|| {
        ereport!(
            PgLogLevel::ERROR,
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            "internal error: the text index is not read on a distributed store"
        );
        unreachable!()
    });
    TableIterator::new(hits)
}

/// The `n` best memories of `scope` by text score for `words`, best first
/// (equal scores by id); None on a distributed store (engram._lexical
/// scores the scope's matching rows there).
pub(crate) fn indexed(
    client: &SpiClient<'_>,
    scope: &Scope,
    words: &str,
    n: i32,
    memory: pg_sys::MemoryContext,
) -> Option<Vec<(Uuid, f32)>> {
    let owner = scope.owner.clone()?;
    if citus_installed(client) && crate::knn::distributed(client) {
        return None;
    }
    let exact_tokens = engram_core::search::exact_tokens(words);
    let start = read_start(client, scope, words, &exact_tokens, memory);
    let (Some(docs), Some(total_len)) = (start.docs, start.total_len) else {
        return Some(Vec::new());
    };
    if start.terms.is_empty() {
        return Some(Vec::new());
    }
    let mean = (total_len as f64 / docs.max(1) as f64).max(1.0);
    // (the frequencies as whole numbers, as engram._term_weights reads them)
    let dfs_whole: Vec<f64> = start.dfs.iter().map(|d| d.round()).collect();
    let weights = text_rank::term_weights(docs as f64, &dfs_whole);
    let exactly: Vec<bool> = start.terms.iter().map(|t| start.keys.contains(t)).collect();
    let weighed: Vec<&str> = start
        .terms
        .iter()
        .take(engram_core::search::MAX_QUERY_TERMS)
        .map(String::as_str)
        .collect();
    // An exact token the query's own terms do not spell (the query parses
    // "ADMIN42@corp.io" as one email, the token is "admin42"): the
    // memories earning its bonus are found by no posting read.
    if start.keys.iter().any(|k| !start.terms.contains(k)) {
        return Some(every_match(client, scope, words, n));
    }
    let mut front: Vec<Option<f64>> = start.dfs.iter().map(|&d| (d > 0.0).then_some(0.0)).collect();
    let mut limits: Vec<i32> = vec![0; start.terms.len()];
    let mut first = true;
    let mut theta: Option<f32> = None;
    let mut seen: HashSet<[u8; 16]> = HashSet::new();
    let (mut ids, mut masks, mut lens, mut exact) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut scores: Vec<f32> = Vec::new();
    loop {
        let terms = text_rank::Terms {
            weights: &weights,
            dfs: &start.dfs,
            frontiers: &front,
            exact: &exactly,
        };
        let read = text_rank::next_reads(
            &terms,
            theta.map(f64::from),
            first,
            usize::try_from(n).unwrap_or(1),
            mean,
        );
        if !read.iter().any(|r| *r) {
            break;
        }
        for (l, r) in limits.iter_mut().zip(&read) {
            if *r {
                *l = if *l == 0 { n.max(32) } else { l.saturating_mul(4) };
            }
        }
        first = false;
        if limits.iter().any(|l| *l > MAX_ROUND_POSTINGS) {
            return Some(every_match(client, scope, words, n));
        }
        // the first limits[i] postings of each term read, shortest first
        let postings = read_postings(
            client,
            &owner,
            scope.internal_type.clone(),
            &start.terms,
            &read,
            &limits,
        );
        let mut counts = vec![0i32; start.terms.len()];
        let mut last = vec![None::<f64>; start.terms.len()];
        let mut new: Vec<Uuid> = Vec::new();
        for (i, id, len) in postings {
            counts[i] += 1;
            last[i] = Some(last[i].map_or(len, |l: f64| l.max(len)));
            if seen.insert(*id.as_bytes()) {
                new.push(id);
            }
        }
        for i in 0..front.len() {
            if read[i] {
                front[i] = if counts[i] >= limits[i] { last[i] } else { None };
            }
        }
        if !new.is_empty() {
            for (id, send, len, is_exact) in read_rows(client, scope, start.exact, &new, memory) {
                ids.push(id);
                masks.push(send.map_or(0, |s| engram_core::search::term_mask(&s, &weighed)));
                lens.push(len);
                exact.push(is_exact);
            }
        }
        scores = text_rank::scores(&masks, &lens, &exact, &weights, mean)
            .into_iter()
            .map(|s| s as f32)
            .collect();
        let mut sorted = scores.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        theta = sorted.get(usize::try_from(n - 1).unwrap_or(0)).copied();
    }
    let mut best: Vec<(Uuid, f32)> = ids.into_iter().zip(scores).collect();
    best.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.as_bytes().cmp(b.0.as_bytes())));
    best.truncate(usize::try_from(n).unwrap_or(0));
    Some(best)
}

/// The `n` best of every matching row of the scope, scored with the
/// owner's statistics (engram._lexical_indexed).
fn every_match(client: &SpiClient<'_>, scope: &Scope, words: &str, n: i32) -> Vec<(Uuid, f32)> {
    let sql = format!(
        "SELECT l.id, l.rank FROM engram._lexical_indexed(ROW({SCOPE_TYPES})::engram.read_scope, $16, $17,
                                                         engram._exact_query($16)) l"
    );
    let mut args = scope.values();
    args.extend([words.into(), n.into()]);
    client
        .select(sql.as_str(), None, &args)
        .unwrap_or_else(|e| error!("engram: the text leg failed: {e}"))
        .filter_map(|row| {
            Some((
                got(row.get::<Uuid>(1), "the text leg")?,
                got(row.get::<f32>(2), "the text leg")?,
            ))
        })
        .collect()
}

/// The key of an owner's whole list of internal type $2 (engram._list_key
/// with tag ''): hashtextextended of "<internal type>/".
fn list_key_sql() -> &'static str {
    "pg_catalog.hashtextextended(coalesce($2, '') || '/', 0)"
}

fn read_start(
    client: &SpiClient<'_>,
    scope: &Scope,
    words: &str,
    exact_tokens: &[String],
    memory: pg_sys::MemoryContext,
) -> Start {
    KEPT.with_borrow_mut(|kept| {
        let plan = crate::kept::kept(&mut kept.start, client, || {
            use pg_sys::BuiltinOid::*;
            let list = list_key_sql();
            (
                format!(
                    "WITH t AS (
                         SELECT coalesce(array_agg(t.lexeme ORDER BY t.first, t.lexeme), '{{}}') AS terms
                         FROM (SELECT u.lexeme, u.positions[1] AS first
                               FROM unnest(pg_catalog.to_tsvector('english', $3)) u
                               ORDER BY 2, 1 LIMIT $5) t)
                     SELECT z.docs, z.total_len, t.terms,
                            ARRAY(SELECT coalesce(x.df, 0)::float8
                                  FROM unnest(t.terms) WITH ORDINALITY AS u(lexeme, i)
                                  LEFT JOIN engram.text_terms x
                                         ON x.owner = $1 AND x.list = {list} AND x.lexeme = u.lexeme
                                  ORDER BY u.i),
                            ARRAY(SELECT DISTINCT x.lexeme FROM unnest($4::text[]) e,
                                         unnest(pg_catalog.to_tsvector('english', e)) x),
                            (SELECT string_agg('(' || q::text || ')', ' | ')::tsquery
                             FROM unnest($4::text[]) e, pg_catalog.plainto_tsquery('english', e) q
                             WHERE pg_catalog.numnode(q) > 0)
                     FROM t LEFT JOIN engram.text_sizes z ON z.owner = $1 AND z.list = {list}"
                ),
                vec![
                    PgOid::BuiltIn(TEXTOID),
                    PgOid::BuiltIn(TEXTOID),
                    PgOid::BuiltIn(TEXTOID),
                    PgOid::BuiltIn(TEXTARRAYOID),
                    PgOid::BuiltIn(INT8OID),
                ],
            )
        });
        let table = client
            .select(
                plan,
                None,
                &[
                    scope.owner.clone().into(),
                    scope.internal_type.clone().into(),
                    words.into(),
                    exact_tokens.to_vec().into(),
                    MAX_READ_TERMS.into(),
                ],
            )
            .unwrap_or_else(|e| error!("engram: reading the text index's statistics failed: {e}"));
        crate::search::reading_into(memory, || {
            let row = table.first();
            let what = "the text index's statistics";
            Start {
                docs: got(row.get::<i64>(1), what),
                total_len: got(row.get::<i64>(2), what),
                terms: flat(got(row.get(3), what)),
                dfs: got::<Vec<Option<f64>>>(row.get(4), what)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|d| d.unwrap_or(0.0))
                    .collect(),
                keys: flat(got(row.get(5), what)),
                exact: got(row.get::<RawTsquery>(6), what),
            }
        })
    })
}

fn got<T>(r: pgrx::spi::SpiResult<Option<T>>, what: &str) -> Option<T> {
    r.unwrap_or_else(|e| error!("engram: reading {what} failed: {e}"))
}

fn flat(v: Option<Vec<Option<String>>>) -> Vec<String> {
    v.unwrap_or_default().into_iter().flatten().collect()
}

/// The first `limits[i]` postings (shortest first) of each term `i` to
/// read, as (term, memory, length).
fn read_postings(
    client: &SpiClient<'_>,
    owner: &str,
    internal_type: Option<String>,
    terms: &[String],
    read: &[bool],
    limits: &[i32],
) -> Vec<(usize, Uuid, f64)> {
    KEPT.with_borrow_mut(|kept| {
        let plan = crate::kept::kept(&mut kept.postings, client, || {
            use pg_sys::BuiltinOid::*;
            let list = list_key_sql();
            (
                format!(
                    "SELECT u.i::int4, p.memory_id, p.len::float8
                     FROM unnest($3::text[], $4::bool[], $5::int4[]) WITH ORDINALITY AS u(lexeme, r, lim, i)
                     CROSS JOIN LATERAL (
                         SELECT x.memory_id, x.len FROM engram.text_postings x
                         WHERE x.owner = $1 AND x.list = {list} AND x.lexeme = u.lexeme
                         ORDER BY x.len, x.memory_id LIMIT u.lim) p
                     WHERE u.r"
                ),
                vec![
                    PgOid::BuiltIn(TEXTOID),
                    PgOid::BuiltIn(TEXTOID),
                    PgOid::BuiltIn(TEXTARRAYOID),
                    PgOid::BuiltIn(BOOLARRAYOID),
                    PgOid::BuiltIn(INT4ARRAYOID),
                ],
            )
        });
        let postings = client
            .select(
                plan,
                None,
                &[
                    owner.into(),
                    internal_type.into(),
                    terms.to_vec().into(),
                    read.to_vec().into(),
                    limits.to_vec().into(),
                ],
            )
            .unwrap_or_else(|e| error!("engram: reading the text index failed: {e}"))
            .filter_map(|row| {
                let what = "the text index";
                let i = got(row.get::<i32>(1), what)?;
                let id = got(row.get::<Uuid>(2), what)?;
                let len = got(row.get::<f64>(3), what)?;
                Some((usize::try_from(i - 1).ok()?, id, len))
            })
            .collect::<Vec<_>>();
        free_last_result();
        postings
    })
}

/// The rows of memories `ids` in the scope, each read by its key whatever
/// the planner's estimates (the LATERAL with OFFSET 0 is never flattened
/// into a join): id, `tsvectorsend(content_tsv)`, length (octet_length: a
/// long content's size, read without fetching it) and whether it holds an
/// exact token of the query.
fn read_rows(
    client: &SpiClient<'_>,
    scope: &Scope,
    exact: Option<RawTsquery>,
    ids: &[Uuid],
    memory: pg_sys::MemoryContext,
) -> Vec<(Uuid, Option<Vec<u8>>, f64, bool)> {
    KEPT.with_borrow_mut(|kept| {
        let plan = crate::kept::kept(&mut kept.rows, client, || {
            use pg_sys::BuiltinOid::*;
            // the scope filter's numbering ($2..$10, $13..$16, $19, $20);
            // $17 the exact tokens' query, $18 the ids; $1, $11 and $12
            // unused
            let types = [
                TSQUERYOID,
                TEXTOID,
                TEXTARRAYOID,
                TEXTOID,
                TEXTARRAYOID,
                TEXTARRAYOID,
                TEXTARRAYOID,
                TEXTOID,
                TIMESTAMPTZOID,
                TIMESTAMPTZOID,
                INT4OID,
                TEXTARRAYOID,
                INT2OID,
                TEXTOID,
                TEXTOID,
                TIMESTAMPTZOID,
                TSQUERYOID,
                UUIDARRAYOID,
                TEXTARRAYOID,
                JSONBOID,
            ];
            (
                format!(
                    "SELECT m.id, pg_catalog.tsvectorsend(m.content_tsv), octet_length(m.content)::float8,
                            coalesce(m.content_tsv @@ $17, false)
                     FROM unnest($18) AS c(id) CROSS JOIN LATERAL (
                         SELECT x.* FROM engram.memories x WHERE x.owner = $2 AND x.id = c.id OFFSET 0) m{}",
                    crate::knn::scope_filter(true)
                ),
                types.into_iter().map(PgOid::BuiltIn).collect(),
            )
        });
        let v = scope.values();
        let exact = match exact {
            // SAFETY: a tsquery read from this query's own statement.
            Some(q) => unsafe { DatumWithOid::new(q, q.oid()) },
            None => DatumWithOid::null_oid(pg_sys::TSQUERYOID),
        };
        // $1..$20 from the scope's fields ($1..$15 of Scope::values)
        let mut it = v.into_iter();
        let mut next = || it.next().expect("a scope has 15 fields");
        let args: Vec<DatumWithOid<'_>> = vec![
            DatumWithOid::null_oid(pg_sys::TSQUERYOID),
            next(), // owner
            next(), // statuses
            next(), // internal type
            next(), // kinds
            next(), // tags_all
            next(), // tags_any
            next(), // session
            next(), // created_after
            next(), // created_before
            DatumWithOid::null_oid(pg_sys::INT4OID),
            DatumWithOid::null_oid(pg_sys::TEXTARRAYOID),
            next(), // max_level
            next(), // space
            next(), // group
            next(), // valid_at
            exact,
            ids.to_vec().into(),
            next(), // namespace prefix
            next(), // filter
        ];
        let table = client
            .select(plan, None, &args)
            .unwrap_or_else(|e| error!("engram: reading the text leg's rows failed: {e}"));
        let rows = crate::search::reading_into(memory, || {
            table
                .filter_map(|row| {
                    let what = "the text leg's rows";
                    let id = got(row.get::<Uuid>(1), what)?;
                    let send = got(row.get::<Vec<u8>>(2), what);
                    let len = got(row.get::<f64>(3), what).unwrap_or(0.0);
                    let is_exact = got(row.get::<bool>(4), what).unwrap_or(false);
                    Some((id, send, len, is_exact))
                })
                .collect()
        });
        free_last_result();
        rows
    })
}

/// Frees the result just read (its rows are copied out): a query read in
/// many rounds would otherwise hold every round's rows, each with its
/// tsvector, until the connection ends.
fn free_last_result() {
    // SAFETY: SPI_tuptable is the result of the connection's last
    // statement, consumed above; nothing reads it after.
    unsafe { pg_sys::SPI_freetuptable(pg_sys::SPI_tuptable) };
}
