//! `engram._search_hits`: the k best memories of a read scope for a query,
//! best first, in one call from SQL. It runs the legs (the vector leg in
//! this process, [`crate::knn`]; the text leg over the text index in this
//! process too, [`crate::text_leg`], or through `engram._lexical` for the
//! scopes that one does not serve), reads what the candidates' scores
//! need, scores them with engram-core's `ranking`, reads the best whole,
//! and, for `engram.search`, finishes the hits: newer facts before the
//! facts they contradict, hits grouped by conversation, access counts,
//! lifetimes renewed, a miss recorded. The statements are SPI plans kept
//! for the session.

use std::cell::RefCell;
use std::collections::HashMap;

use engram_core::ranking::{self, Candidate};
use pgrx::datum::{DatumWithOid, Range, TimestampWithTimeZone, Uuid};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiHeapTupleData};
use pgrx::{JsonB, PgMemoryContexts, PgOid};

use crate::knn::{knn, Scope, SCOPE_TYPES};
use crate::raw::{RawJsonb, RawVector};

type Tstz = TimestampWithTimeZone;
type Texts = Vec<Option<String>>;

/// One hit, as engram.search_hit holds it, with its conversation and what
/// the conflict ranking reads.
pub(crate) struct Hit {
    id: Uuid,
    content: Option<String>,
    kind: Option<String>,
    tags: Option<Texts>,
    metadata: Option<RawJsonb>,
    similarity: Option<f32>,
    score: f32,
    trust: Option<f32>,
    staleness: Option<f32>,
    created_at: Option<Tstz>,
    source: Option<String>,
    occurred_at: Option<Tstz>,
    valid_from: Option<Tstz>,
    valid_to: Option<Tstz>,
    namespace: Option<Texts>,
    key: Option<String>,
    value: Option<RawJsonb>,
    session: Option<String>,
    /// metadata's engram_forced_over (the memories it was stored over), if
    /// the key is there
    forced_over: Option<serde_json::Value>,
    /// the memory's embedding, for the conflict ranking's cosines: read
    /// only when the search finishes its hits; empty when the memory has
    /// none
    embedding: Vec<f32>,
}

/// The columns every statement that reads hits returns first, in this order.
const HIT_COLUMNS: &str = "id, content, kind, tags, metadata, trust_score, staleness_score, created_at, source, \
occurred_at, valid_from, valid_to, namespace, key, value";

/// A hit's columns from a row that starts with [`HIT_COLUMNS`].
fn hit(row: &SpiHeapTupleData<'_>) -> Hit {
    Hit {
        id: col(row, 1).unwrap_or_else(|| error!("engram: a search row without an id")),
        content: col(row, 2),
        kind: col(row, 3),
        tags: col(row, 4),
        metadata: col(row, 5),
        similarity: None,
        score: 0.0,
        trust: col(row, 6),
        staleness: col(row, 7),
        created_at: col(row, 8),
        source: col(row, 9),
        occurred_at: col(row, 10),
        valid_from: col(row, 11),
        valid_to: col(row, 12),
        namespace: col(row, 13),
        key: col(row, 14),
        value: col(row, 15),
        session: None,
        forced_over: None,
        embedding: Vec::new(),
    }
}

/// The columns a hit's statement reads after [`HIT_COLUMNS`] (16-18): its
/// conversation, the memories it was stored over, and its embedding when
/// parameter `embeddings` is true (only finishing compares the hits; a
/// large vector is a TOAST read).
fn hit_extras(embeddings: usize) -> String {
    format!("m.session_id, m.metadata -> 'engram_forced_over', CASE WHEN ${embeddings} THEN m.embedding END")
}

/// A whole hit from a row of [`HIT_COLUMNS`] (as `m.` columns) and
/// [`hit_extras`].
fn whole_hit(row: &SpiHeapTupleData<'_>) -> Hit {
    let mut h = hit(row);
    h.session = col(row, 16);
    h.forced_over = col::<JsonB>(row, 17).map(|j| j.0);
    h.embedding = embedding(row, 18);
    h
}

/// A row's embedding column's values; empty when it is null.
fn embedding(row: &SpiHeapTupleData<'_>, i: usize) -> Vec<f32> {
    // SAFETY: the column is engram.memories.embedding, a vector, detoasted
    // and copied into the parent of the current context (the call's, under
    // reading_into), where it stays until the call ends.
    col::<RawVector>(row, i).map_or_else(Vec::new, |v| unsafe { v.values() })
}

/// [`HIT_COLUMNS`] as columns of `engram.memories m`.
fn hit_columns() -> String {
    HIT_COLUMNS
        .split(", ")
        .map(|c| format!("m.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads rows with what pgrx copies out of them (detoasted text, arrays,
/// the jsonb kept for the result) landing in `target`, the call's own
/// context: pgrx copies into the parent of the current context, which
/// inside an SPI connection is the transaction's, freed only at commit (a
/// statement that searched many times would hold every search's rows).
pub(crate) fn reading_into<R>(target: pg_sys::MemoryContext, f: impl FnOnce() -> R) -> R {
    // SAFETY: a child of a live context, current only while `f` reads; an
    // error deletes it with its parent.
    unsafe {
        let scratch = pg_sys::AllocSetContextCreateExtended(
            target,
            c"engram search rows".as_ptr(),
            pg_sys::ALLOCSET_SMALL_MINSIZE as usize,
            pg_sys::ALLOCSET_SMALL_INITSIZE as usize,
            pg_sys::ALLOCSET_SMALL_MAXSIZE as usize,
        );
        let out = PgMemoryContexts::For(scratch).switch_to(|_| f());
        pg_sys::MemoryContextDelete(scratch);
        out
    }
}

fn col<T: FromDatum + IntoDatum>(row: &SpiHeapTupleData<'_>, i: usize) -> Option<T> {
    row.get::<T>(i)
        .unwrap_or_else(|e| error!("engram: reading a search row failed: {e}"))
}

/// Statements kept for the session, each with the vector type it was
/// prepared for.
#[derive(Default)]
struct Kept {
    vector: Option<pg_sys::Oid>,
    /// what the candidates' scores need: [the score's columns, whole
    /// rows][owner's, any owner's][without, with a query vector]
    scores: [[[Option<OwnedPreparedStatement>; 2]; 2]; 2],
    /// the hits' rows: [owner's, any owner's]
    hits: [Option<OwnedPreparedStatement>; 2],
    lexical: Option<OwnedPreparedStatement>,
    touch: Option<OwnedPreparedStatement>,
}

thread_local! {
    static KEPT: RefCell<Kept> = RefCell::new(Kept::default());
}

fn with_kept<R>(vector: Option<pg_sys::Oid>, f: impl FnOnce(&mut Kept) -> R) -> R {
    KEPT.with_borrow_mut(|k| {
        if vector.is_some() && k.vector != vector {
            k.scores = Default::default();
            k.vector = vector;
        }
        f(k)
    })
}

/// The k best memories of a read scope (its fields, engram.read_scope's)
/// for a query: the body of engram.search, engram.ghost_search and
/// engram.context. Hybrid queries fuse the vector and text legs by score
/// (engram-core's ranking); a memory whose occurred_at falls in p_window
/// (the time the query names) ranks higher. With p_known_at, the store as
/// it stood then (engram._search_as_of), over memories p_ids when given.
///
/// With p_finish (engram.search), the hits are finished: of two facts
/// among the first p_search_k (search's own k) that contradict each other,
/// the newer first; with p_group_sessions, the p_search_k best
/// conversations, each with its best turns; their accesses counted; with
/// p_refresh_ttl, their lifetimes renewed; a search that found nothing is
/// recorded (engram.misses).
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
#[pg_extern]
fn _search_hits(
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
    p_embedding: Option<RawVector>,
    p_text: Option<String>,
    p_k: Option<i32>,
    p_min_similarity: Option<f32>,
    p_window: Option<Range<Tstz>>,
    p_indexed: Option<bool>,
    p_known_at: Option<Tstz>,
    p_ids: Option<Vec<Option<Uuid>>>,
    p_finish: Option<bool>,
    p_search_k: Option<i32>,
    p_group_sessions: Option<bool>,
    p_refresh_ttl: Option<bool>,
) -> TableIterator<
    'static,
    (
        name!(id, Uuid),
        name!(content, Option<String>),
        name!(kind, Option<String>),
        name!(tags, Option<Texts>),
        name!(metadata, Option<RawJsonb>),
        name!(similarity, Option<f32>),
        name!(score, f32),
        name!(trust_score, Option<f32>),
        name!(staleness_score, Option<f32>),
        name!(created_at, Option<Tstz>),
        name!(source, Option<String>),
        name!(occurred_at, Option<Tstz>),
        name!(valid_from, Option<Tstz>),
        name!(valid_to, Option<Tstz>),
        name!(namespace, Option<Texts>),
        name!(key, Option<String>),
        name!(value, Option<RawJsonb>),
        name!(session, Option<String>),
    ),
> {
    if let Some(q) = p_embedding {
        if q.oid() == pg_sys::InvalidOid {
            error!("engram._search_hits needs its query's type: call it from SQL");
        }
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
    let finishing = p_finish.unwrap_or(false).then(|| Finishing {
        search_k: p_search_k,
        group_sessions: p_group_sessions.unwrap_or(false),
        refresh_ttl: p_refresh_ttl.unwrap_or(false),
    });
    let query = Query {
        embedding: p_embedding,
        text: p_text,
        k: p_k,
        min_similarity: p_min_similarity,
        window: p_window,
        indexed: p_indexed.unwrap_or(false),
        known_at: p_known_at,
        ids: p_ids,
    };
    TableIterator::new(hits(scope, query, finishing).into_iter().map(Hit::row))
}

/// The row `_search_hits` returns for a hit.
pub(crate) type HitRow = (
    Uuid,
    Option<String>,
    Option<String>,
    Option<Texts>,
    Option<RawJsonb>,
    Option<f32>,
    f32,
    Option<f32>,
    Option<f32>,
    Option<Tstz>,
    Option<String>,
    Option<Tstz>,
    Option<Tstz>,
    Option<Tstz>,
    Option<Texts>,
    Option<String>,
    Option<RawJsonb>,
    Option<String>,
);

impl Hit {
    pub(crate) fn row(self) -> HitRow {
        (
            self.id,
            self.content,
            self.kind,
            self.tags,
            self.metadata,
            self.similarity,
            self.score,
            self.trust,
            self.staleness,
            self.created_at,
            self.source,
            self.occurred_at,
            self.valid_from,
            self.valid_to,
            self.namespace,
            self.key,
            self.value,
            self.session,
        )
    }
}

/// A search's query, as `_search_hits` takes it (see there).
pub(crate) struct Query {
    pub(crate) embedding: Option<RawVector>,
    pub(crate) text: Option<String>,
    pub(crate) k: Option<i32>,
    pub(crate) min_similarity: Option<f32>,
    pub(crate) window: Option<Range<Tstz>>,
    /// the text index's statistics serve the caller (no scope tags)
    pub(crate) indexed: bool,
    pub(crate) known_at: Option<Tstz>,
    pub(crate) ids: Option<Vec<Option<Uuid>>>,
}

/// engram.search's steps after the ranking (see `_search_hits`).
pub(crate) struct Finishing {
    /// search's own k
    pub(crate) search_k: Option<i32>,
    pub(crate) group_sessions: bool,
    pub(crate) refresh_ttl: bool,
}

/// The hits of a read scope for a query, best first, finished when
/// `finishing` is given: `_search_hits`'s body, which engram.search calls
/// in the same process.
pub(crate) fn hits(scope: Scope, query: Query, finishing: Option<Finishing>) -> Vec<Hit> {
    // (a scope of every owner's memories is never one: the statements
    // below read the owner's, or a space's or group's publications)
    if (scope.owner.is_none() && scope.space.is_none() && scope.group_id.is_none())
        || (finishing.is_some() && scope.owner.is_none())
    {
        ereport!(
            PgLogLevel::ERROR,
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            "internal error: a read scope without an owner"
        );
    }
    let search = Search {
        // SAFETY: a plain read; pgrx runs a set-returning function's first
        // call in the context that lives until its last row is returned.
        memory: unsafe { pg_sys::CurrentMemoryContext },
        finishing: finishing.is_some(),
        embedding: query.embedding,
        text: query.text,
        k: query.k,
        min_similarity: query.min_similarity,
        window: query.window,
    };
    let hits = match query.known_at {
        Some(at) => as_of(&scope, &search, at, query.ids),
        None => ranked(&scope, &search, query.indexed),
    };
    match finishing {
        Some(f) => finish(&scope, &search, hits, f.search_k, f.group_sessions, f.refresh_ttl),
        None => hits,
    }
}

/// What a search asks for.
struct Search {
    /// where the rows read are kept (the call's context)
    memory: pg_sys::MemoryContext,
    /// whether the hits are finished (engram.search's steps), which
    /// compares their embeddings
    finishing: bool,
    embedding: Option<RawVector>,
    text: Option<String>,
    k: Option<i32>,
    min_similarity: Option<f32>,
    window: Option<Range<Tstz>>,
}

/// A query text without its outer spaces (as SQL's btrim); None when that
/// is empty: whether a search, a package or a time window has words to
/// read.
pub(crate) fn query_words(text: Option<&str>) -> Option<&str> {
    text.map(|t| t.trim_matches(' ')).filter(|t| !t.is_empty())
}

impl Search {
    /// The query text without its outer spaces; None when that is empty.
    fn words(&self) -> Option<&str> {
        query_words(self.text.as_deref())
    }

    fn window_value(&self) -> DatumWithOid<'static> {
        self.window.clone().into()
    }
}

pub(crate) fn sql_error(code: PgSqlErrorCode, message: String) -> ! {
    ereport!(PgLogLevel::ERROR, code, message);
    unreachable!()
}

/// The hits of the live store: each leg's candidates, then their rows,
/// scored together.
fn ranked(scope: &Scope, q: &Search, indexed: bool) -> Vec<Hit> {
    let words = q.words();
    if q.embedding.is_none() && words.is_none() {
        sql_error(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            "search needs query_embedding, query_text or both".into(),
        );
    }
    if let Some(text) = &q.text {
        let limit = engram_core::limits::MAX_QUERY_BYTES;
        if text.len() > limit {
            sql_error(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "query_text is {} bytes; the limit is {limit}: pass a shorter query",
                    text.len()
                ),
            );
        }
    }
    let vector = q.embedding.map(|e| e.oid());
    if let Some(e) = q.embedding {
        check_query_vector(e);
    }
    let k = engram_core::search::clamp_k(q.k);
    let hybrid = q.embedding.is_some() && words.is_some();
    // Candidates per leg: k; a hybrid query widens both pools, so that a
    // memory near the query in meaning and in words is in both and gets
    // both scores; a query that names a time widens them so that in-window
    // memories a little further down are there to boost.
    let pool = k
        .max(if hybrid { 100 } else { 0 })
        .max(if q.window.is_some() { 50 } else { 0 });

    let near: Vec<(Uuid, f64)> = q.embedding.map_or_else(Vec::new, |e| knn(scope, e, pool));
    let lexical: Vec<(Uuid, f32)> = match words {
        Some(w) => Spi::connect(|client| text_leg(client, scope, w, pool, indexed, q.memory)),
        None => Vec::new(),
    };
    let mut legs: HashMap<[u8; 16], (Option<f64>, Option<f32>)> = HashMap::new();
    for (id, d) in &near {
        legs.entry(*id.as_bytes()).or_default().0 = Some(*d);
    }
    for (id, r) in &lexical {
        legs.entry(*id.as_bytes()).or_default().1 = Some(*r);
    }
    if legs.is_empty() {
        return Vec::new();
    }
    let ids: Vec<Uuid> = near.iter().map(|x| x.0).chain(lexical.iter().map(|x| x.0)).collect();

    // What every candidate's score needs, from its row; a row outside the
    // text pool counts as no text match. Only the k best are read whole: in
    // the same statement when there are no more candidates than that (a
    // vector-only search's pool), after the ranking otherwise.
    let owned = scope.owner.is_some();
    let at_once = ids.len() <= usize::try_from(k).unwrap_or(0);
    let mut whole: HashMap<[u8; 16], Hit> = HashMap::new();
    let rows: Vec<Scored> = Spi::connect(|client| {
        with_kept(vector, |kept| {
            let slot = &mut kept.scores[usize::from(at_once)][usize::from(!owned)][usize::from(vector.is_some())];
            let plan = crate::kept::kept(slot, client, || scores_statement(at_once, owned, vector));
            let mut args: Vec<DatumWithOid<'_>> = vec![scope.owner.clone().into(), ids.clone().into()];
            if let Some(e) = q.embedding {
                // SAFETY: the caller's vector, with its own type's oid.
                args.push(unsafe { DatumWithOid::new(e, e.oid()) });
            }
            args.push(q.window_value());
            if at_once {
                args.push(q.finishing.into());
            }
            let table = client
                .select(plan, None, &args)
                .unwrap_or_else(|e| error!("engram: reading the search candidates failed: {e}"));
            if !at_once {
                return table
                    .filter_map(|row| {
                        Some(Scored {
                            id: col(&row, 1)?,
                            trust: col(&row, 2),
                            staleness: col(&row, 3),
                            distance: col(&row, 4),
                            in_window: col(&row, 5).unwrap_or(false),
                        })
                    })
                    .collect();
            }
            reading_into(q.memory, || {
                table
                    .map(|row| {
                        let h = whole_hit(&row);
                        let scored = Scored {
                            id: h.id,
                            trust: h.trust,
                            staleness: h.staleness,
                            distance: col(&row, 19),
                            in_window: col(&row, 20).unwrap_or(false),
                        };
                        whole.insert(*h.id.as_bytes(), h);
                        scored
                    })
                    .collect()
            })
        })
    });

    let mut candidates = Vec::with_capacity(rows.len());
    let mut keys = Vec::with_capacity(rows.len());
    let mut sims = Vec::with_capacity(rows.len());
    for r in &rows {
        let (leg_distance, text) = legs.get(r.id.as_bytes()).copied().unwrap_or_default();
        let sim = leg_distance.or(r.distance).map(|d| 1.0 - d);
        candidates.push(Candidate {
            similarity: sim,
            text,
            in_window: r.in_window,
            trust: r.trust.unwrap_or(0.0),
            staleness: r.staleness.unwrap_or(0.0),
        });
        keys.push(*r.id.as_bytes());
        sims.push(sim);
    }
    let query = ranking::Query {
        text: words.is_some(),
        embedding: q.embedding.is_some(),
        min_similarity: f64::from(q.min_similarity.unwrap_or(0.0)),
        staleness_weight: crate::gucs::_setting_staleness_weight(),
    };
    let best = ranking::best(&candidates, &keys, &query, usize::try_from(k).unwrap_or(0));
    let winners: Vec<Uuid> = best.iter().map(|(i, _)| rows[*i].id).collect();
    // (the statements are read-only: both read the call's snapshot)
    if !at_once {
        whole = read_hits(scope, &winners, q)
            .into_iter()
            .map(|h| (*h.id.as_bytes(), h))
            .collect();
    }
    best.into_iter()
        .filter_map(|(i, score)| {
            let mut h = whole.remove(rows[i].id.as_bytes())?;
            h.similarity = sims[i].map(|s| s as f32);
            h.score = score;
            Some(h)
        })
        .collect()
}

/// A candidate's row as its score reads it.
struct Scored {
    id: Uuid,
    trust: Option<f32>,
    staleness: Option<f32>,
    /// cosine distance to the query vector, if there is one
    distance: Option<f64>,
    in_window: bool,
}

/// What the score of candidates $2 (of owner $1, or any owner's) needs:
/// trust, staleness, cosine distance to the query ($3, when there is one),
/// whether they fall in the time window (the next parameter); `whole`, the
/// rows as hits before those two (columns 19 and 20), with their
/// embeddings when the last parameter is true. A statement
/// of its own, never a join of a candidate function to the table: on
/// Citus a statement over engram.memories runs on the shard, and a plain
/// equality on the owner keeps it to the owner's one.
fn scores_statement(whole: bool, owned: bool, vector: Option<pg_sys::Oid>) -> (String, Vec<PgOid>) {
    use pg_sys::BuiltinOid::*;
    let mut types = vec![PgOid::BuiltIn(TEXTOID), PgOid::BuiltIn(UUIDARRAYOID)];
    let (distance, window) = match vector {
        Some(v) => {
            types.push(PgOid::from(v));
            ("m.embedding <=> $3", "$4")
        }
        None => ("NULL::float8", "$3"),
    };
    types.push(PgOid::BuiltIn(TSTZRANGEOID));
    let columns = if whole {
        types.push(PgOid::BuiltIn(BOOLOID));
        format!("{}, {}", hit_columns(), hit_extras(types.len()))
    } else {
        "m.id, m.trust_score, m.staleness_score".into()
    };
    (
        format!(
            "SELECT {columns}, {distance}, coalesce({window} @> m.occurred_at, false)
             FROM engram.memories m WHERE {} AND m.id = ANY ($2)",
            owner_clause(owned)
        ),
        types,
    )
}

fn owner_clause(owned: bool) -> &'static str {
    if owned {
        "m.owner = $1"
    } else {
        "$1::text IS NULL"
    }
}

/// The rows of memories `ids` (of the scope's owner, or any owner's) as
/// hits, with their conversation, the memories they were stored over and,
/// when the search finishes its hits, their embeddings.
fn read_hits(scope: &Scope, ids: &[Uuid], q: &Search) -> Vec<Hit> {
    if ids.is_empty() {
        return Vec::new();
    }
    let owned = scope.owner.is_some();
    Spi::connect(|client| {
        KEPT.with_borrow_mut(|kept| {
            let plan = crate::kept::kept(&mut kept.hits[usize::from(!owned)], client, || {
                use pg_sys::BuiltinOid::*;
                (
                    format!(
                        "SELECT {}, {} FROM engram.memories m WHERE {} AND m.id = ANY ($2)",
                        hit_columns(),
                        hit_extras(3),
                        owner_clause(owned)
                    ),
                    vec![
                        PgOid::BuiltIn(TEXTOID),
                        PgOid::BuiltIn(UUIDARRAYOID),
                        PgOid::BuiltIn(BOOLOID),
                    ],
                )
            });
            let table = client
                .select(
                    plan,
                    None,
                    &[scope.owner.clone().into(), ids.to_vec().into(), q.finishing.into()],
                )
                .unwrap_or_else(|e| error!("engram: reading the search hits failed: {e}"));
            reading_into(q.memory, || table.map(|row| whole_hit(&row)).collect())
        })
    })
}

/// The text leg's candidates: id and text score. Over the text index in
/// this process when it serves the scope ([`crate::text_leg`]); otherwise
/// engram._lexical's.
fn text_leg(
    client: &SpiClient<'_>,
    scope: &Scope,
    words: &str,
    pool: i32,
    indexed: bool,
    memory: pg_sys::MemoryContext,
) -> Vec<(Uuid, f32)> {
    if indexed && crate::text_leg::serves(scope) {
        if let Some(hits) = crate::text_leg::indexed(client, scope, words, pool, memory) {
            return hits;
        }
    }
    // (engram._lexical: another scope, or a distributed store)
    KEPT.with_borrow_mut(|kept| {
        let plan = crate::kept::kept(&mut kept.lexical, client, || {
            use pg_sys::BuiltinOid::*;
            let mut types = crate::knn::scope_types();
            types.extend([
                PgOid::BuiltIn(TEXTOID),
                PgOid::BuiltIn(INT4OID),
                PgOid::BuiltIn(BOOLOID),
            ]);
            (
                format!(
                    "SELECT l.id, l.rank FROM engram._lexical(ROW({SCOPE_TYPES})::engram.read_scope, $16, $17,
                                                             engram._exact_query($16), $18) l"
                ),
                types,
            )
        });
        let mut args = scope.values();
        args.extend([words.into(), pool.into(), indexed.into()]);
        client
            .select(plan, None, &args)
            .unwrap_or_else(|e| error!("engram: the text leg failed: {e}"))
            .filter_map(|row| Some((col::<Uuid>(&row, 1)?, col::<f32>(&row, 2)?)))
            .collect()
    })
}

/// The query vector against the memories' dimension: a vector of another
/// dimension, or the zero vector (which has no direction), gets
/// engram-core's precise error.
fn check_query_vector(e: RawVector) {
    // SAFETY: the caller's vector argument, live for the call.
    let values = unsafe { e.values() };
    let dims = embedding_dimension();
    if usize::try_from(dims).ok() != Some(values.len()) || values.iter().all(|v| *v == 0.0) {
        use crate::errors::OrRaise;
        engram_core::validate::check_embedding(&values, dims, "query_embedding").or_raise();
    }
}

/// The dimension of engram.memories.embedding (its type modifier; -1 when
/// it has none), from the catalog caches: no statement per search.
fn embedding_dimension() -> i32 {
    // SAFETY: catalog cache lookups by name and oid, in a transaction.
    unsafe {
        let engram = pg_sys::get_namespace_oid(c"engram".as_ptr(), false);
        let memories = pg_sys::get_relname_relid(c"memories".as_ptr(), engram);
        let column = pg_sys::get_attnum(memories, c"embedding".as_ptr());
        if memories == pg_sys::InvalidOid || column == pg_sys::InvalidAttrNumber as i16 {
            error!("engram: engram.memories has no embedding column");
        }
        let (mut typid, mut typmod, mut collation) = (pg_sys::InvalidOid, -1, pg_sys::InvalidOid);
        pg_sys::get_atttypetypmodcoll(memories, column, &mut typid, &mut typmod, &mut collation);
        typmod
    }
}

/// The hits of the store as it stood at `at` (engram._search_as_of), with
/// each hit's conversation and, when finishing, embedding (the memory's
/// now).
fn as_of(scope: &Scope, q: &Search, at: Tstz, ids: Option<Vec<Option<Uuid>>>) -> Vec<Hit> {
    let vector = match q.embedding {
        Some(_) => "$17",
        None => "NULL::vector",
    };
    let sql = format!(
        "SELECT {HIT_COLUMNS}, NULL::text, h.similarity, h.score, h.metadata -> 'engram_forced_over'
         FROM unnest(engram._search_as_of(ROW({SCOPE_TYPES})::engram.read_scope, $16, {vector}, $18, $19, $20,
                                          $21, $22)) h"
    );
    let mut args = scope.values();
    args.push(at.into());
    args.push(match q.embedding {
        // SAFETY: the caller's vector, with its own type's oid.
        Some(e) => unsafe { DatumWithOid::new(e, e.oid()) },
        None => DatumWithOid::null_oid(pg_sys::TEXTOID),
    });
    args.extend([
        q.text.clone().into(),
        q.k.into(),
        q.min_similarity.into(),
        q.window_value(),
        ids.into(),
    ]);
    Spi::connect(|client| {
        let table = client
            .select(sql.as_str(), None, &args)
            .unwrap_or_else(|e| error!("engram: the search of the past failed: {e}"));
        let mut hits: Vec<Hit> = reading_into(q.memory, || {
            table
                .map(|row| {
                    let mut h = hit(&row);
                    h.similarity = col(&row, 17);
                    h.score = col(&row, 18).unwrap_or(0.0);
                    h.forced_over = col::<JsonB>(&row, 19).map(|j| j.0);
                    h
                })
                .collect()
        });
        if let Some(owner) = &scope.owner {
            let ids: Vec<Uuid> = hits.iter().map(|h| h.id).collect();
            let table = client
                .select(
                    "SELECT m.id, m.session_id, CASE WHEN $3 THEN m.embedding END FROM engram.memories m
                     WHERE m.owner = $1 AND m.id = ANY ($2)",
                    None,
                    &[owner.clone().into(), ids.into(), q.finishing.into()],
                )
                .unwrap_or_else(|e| error!("engram: reading the hits' conversations failed: {e}"));
            let mut rows: HashMap<[u8; 16], (Option<String>, Vec<f32>)> = reading_into(q.memory, || {
                table
                    .filter_map(|row| {
                        let id = col::<Uuid>(&row, 1)?;
                        Some((*id.as_bytes(), (col::<String>(&row, 2), embedding(&row, 3))))
                    })
                    .collect()
            });
            for h in &mut hits {
                let (session, embedding) = rows.remove(h.id.as_bytes()).unwrap_or_default();
                h.session = session;
                h.embedding = embedding;
            }
        }
        hits
    })
}

/// engram.search's last steps over its hits (see [`_search_hits`]).
fn finish(
    scope: &Scope,
    q: &Search,
    hits: Vec<Hit>,
    search_k: Option<i32>,
    group: bool,
    refresh_ttl: bool,
) -> Vec<Hit> {
    let k = engram_core::search::clamp_k(search_k);
    let owner = scope.owner.clone();
    let mut hits = newer_first(hits, k);
    if group {
        hits = by_session(hits, k);
    }
    // SAFETY: a plain read of a backend global.
    let read_only = unsafe { pg_sys::XactReadOnly };
    if !read_only {
        let ids: Vec<Uuid> = hits.iter().map(|h| h.id).collect();
        Spi::connect_mut(|client| {
            if !ids.is_empty() {
                touch(client, owner.clone(), ids.clone());
            }
            if refresh_ttl {
                client
                    .update(
                        "SELECT engram._refresh_ttl($1, $2)",
                        None,
                        &[owner.clone().into(), ids.into()],
                    )
                    .unwrap_or_else(|e| error!("engram: renewing the hits' lifetimes failed: {e}"));
            }
            if hits.is_empty() {
                client
                    .update(
                        "SELECT engram._miss($1, $2, $3)",
                        None,
                        &[
                            owner.clone().into(),
                            q.text.clone().into(),
                            q.embedding.is_some().into(),
                        ],
                    )
                    .unwrap_or_else(|e| error!("engram: recording the miss failed: {e}"));
            }
        });
    }
    hits
}

/// Counts an access for each of an owner's memories `ids` (none in a
/// read-only transaction): what engram.context does with the memories it
/// shows.
pub(crate) fn touch_hits(owner: String, ids: Vec<Uuid>) {
    // SAFETY: a plain read of a backend global.
    if ids.is_empty() || unsafe { pg_sys::XactReadOnly } {
        return;
    }
    Spi::connect_mut(|client| touch(client, Some(owner), ids));
}

/// Counts an access for each hit, in the stats table beside the memories
/// (never in the rows the HNSW index points at), in a fixed lock order so
/// that concurrent searches never deadlock. Not in a read-only transaction
/// (a hot standby cannot even plan a statement over the unlogged table).
fn touch(client: &mut SpiClient<'_>, owner: Option<String>, ids: Vec<Uuid>) {
    KEPT.with_borrow_mut(|kept| {
        let plan = crate::kept::kept(&mut kept.touch, client, || {
            use pg_sys::BuiltinOid::*;
            (
                "INSERT INTO engram.memory_access AS a (memory_id, owner, access_count, last_accessed_at)
                 SELECT DISTINCT i, $1, 1, now() FROM unnest($2::uuid[]) i
                 ORDER BY 1
                 ON CONFLICT (owner, memory_id) DO UPDATE
                     SET access_count = a.access_count + 1, last_accessed_at = excluded.last_accessed_at"
                    .into(),
                vec![PgOid::BuiltIn(TEXTOID), PgOid::BuiltIn(UUIDARRAYOID)],
            )
        });
        client
            .update(plan, None, &[owner.into(), ids.into()])
            .unwrap_or_else(|e| error!("engram: counting the hits' accesses failed: {e}"));
    });
}

/// Of two facts found together that contradict each other, the newer
/// first: each memory stored over a conflict (its metadata's
/// engram_forced_over names them) and each of the first `k` (at most 20)
/// facts (not events, keyed items, resources or skills: each of those is
/// its own document) that engram-core's conflict rules find contradicted
/// by a newer one among them ("newer" by valid_from) gets a score just
/// under the newer one's.
fn newer_first(mut hits: Vec<Hit>, k: i32) -> Vec<Hit> {
    if hits.len() < 2 {
        return hits;
    }
    let first = usize::try_from(k.min(20)).unwrap_or(0).min(hits.len());
    let facts: Vec<usize> = (0..first)
        .filter(|&i| {
            let h = &hits[i];
            h.kind.as_deref().is_some_and(|k| k != "episodic")
                && h.key.is_none()
                && h.source.as_deref() == Some("memory")
        })
        .collect();
    // the newer hit (its position) that contradicts each
    let mut newer: HashMap<usize, usize> = HashMap::new();
    if facts.len() >= 2 {
        let vectors: Vec<&[f32]> = facts.iter().map(|&i| hits[i].embedding.as_slice()).collect();
        let cosines = engram_core::conflict::pairwise_cosines(&vectors);
        let texts: Vec<&str> = facts
            .iter()
            .map(|&i| hits[i].content.as_deref().unwrap_or(""))
            .collect();
        let times: Vec<f64> = facts.iter().map(|&i| epoch(hits[i].valid_from)).collect();
        let threshold = crate::gucs::_setting_conflict_threshold();
        for (r, by) in engram_core::conflict::contradicted_by(&texts, &times, &cosines, threshold)
            .into_iter()
            .enumerate()
        {
            if let Some(j) = by {
                newer.insert(facts[r], facts[j]);
            }
        }
    }
    if newer.is_empty() && hits.iter().all(|h| h.forced_over.is_none()) {
        return hits;
    }
    let scores: Vec<f32> = hits.iter().map(|h| h.score).collect();
    let new_scores: Vec<f32> = hits
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let id = h.id.to_string();
            let mut s = h.score;
            let over = hits
                .iter()
                .filter(|n| n.forced_over.as_ref().is_some_and(|f| json_has(f, &id)))
                .map(|n| n.score)
                .reduce(f32::min);
            if let Some(o) = over {
                s = s.min(o * 0.999);
            }
            if let Some(&j) = newer.get(&i) {
                s = s.min(scores[j] * 0.999);
            }
            s
        })
        .collect();
    for (h, s) in hits.iter_mut().zip(new_scores) {
        h.score = s;
    }
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.id.as_bytes().cmp(b.id.as_bytes()))
    });
    hits
}

/// jsonb's `?`: the string is a top-level key, array element or the
/// scalar itself.
fn json_has(v: &serde_json::Value, s: &str) -> bool {
    match v {
        serde_json::Value::Object(o) => o.contains_key(s),
        serde_json::Value::Array(a) => a.iter().any(|e| e.as_str() == Some(s)),
        serde_json::Value::String(x) => x == s,
        _ => false,
    }
}

/// Seconds since 1970 (extract(epoch ...)); 0 for none.
fn epoch(t: Option<Tstz>) -> f64 {
    // Postgres counts microseconds from 2000-01-01
    const PG_EPOCH_US: i64 = 946_684_800_000_000;
    t.map_or(0.0, |t| (pg_sys::TimestampTz::from(t) + PG_EPOCH_US) as f64 / 1e6)
}

/// Hits grouped by conversation: the `k` conversations whose best turn
/// scores highest, each with its best turns (at most 3), best conversation
/// first, best turn first within it. A memory without a conversation is a
/// group of its own.
fn by_session(hits: Vec<Hit>, k: i32) -> Vec<Hit> {
    let group = |h: &Hit| h.session.clone().unwrap_or_else(|| h.id.to_string());
    // each group's turns, best first
    let mut groups: HashMap<String, Vec<Hit>> = HashMap::new();
    for h in hits {
        groups.entry(group(&h)).or_default().push(h);
    }
    let mut groups: Vec<(String, Vec<Hit>)> = groups.into_iter().collect();
    for (_, turns) in &mut groups {
        turns.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.id.as_bytes().cmp(b.id.as_bytes()))
        });
        turns.truncate(3);
    }
    groups.sort_by(|a, b| b.1[0].score.total_cmp(&a.1[0].score).then_with(|| a.0.cmp(&b.0)));
    groups.truncate(usize::try_from(k).unwrap_or(0));
    groups.into_iter().flat_map(|(_, turns)| turns).collect()
}
