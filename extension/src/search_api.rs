//! `engram.search`, the API function: who the call acts for, the checks of
//! the arguments passed, the time the query names, then
//! [`crate::search::hits`] in the same process. No plpgsql frame runs on
//! the common path; each argument check runs only when its argument is
//! passed (the checks are engram's plpgsql helpers, called through SPI).

use pgrx::datum::{DatumWithOid, Range, TimestampWithTimeZone, Uuid};
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::checks::run_check as check;
use crate::knn::Scope;
use crate::raw::{RawJsonb, RawTexts, RawVector};
use crate::search::{hits, Finishing, Query};

type Tstz = TimestampWithTimeZone;
type Texts = Vec<Option<String>>;

/// The k memories that best answer a query, best first (docs/SQL.md):
/// by embedding, by text or both, in the caller's scope and filters, each
/// with the time window the query names.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
#[pg_extern(security_definer, name = "search")]
fn search(
    owner: default!(Option<String>, "NULL"),
    query_embedding: default!(Option<RawVector>, "NULL"),
    query_text: default!(Option<String>, "NULL"),
    k: default!(Option<i32>, 10),
    kinds: default!(Option<RawTexts>, "NULL"),
    tags_all: default!(Option<RawTexts>, "NULL"),
    tags_any: default!(Option<RawTexts>, "NULL"),
    internal_type: default!(Option<String>, "NULL"),
    scope_tags: default!(Option<RawTexts>, "NULL"),
    session_id: default!(Option<String>, "NULL"),
    created_after: default!(Option<Tstz>, "NULL"),
    created_before: default!(Option<Tstz>, "NULL"),
    min_similarity: default!(Option<f32>, "NULL"),
    include_archived: default!(Option<bool>, false),
    valid_at: default!(Option<Tstz>, "NULL"),
    known_at: default!(Option<Tstz>, "NULL"),
    reference_time: default!(Option<Tstz>, "NULL"),
    entity: default!(Option<String>, "NULL"),
    namespace_prefix: default!(Option<RawTexts>, "NULL"),
    filter: default!(Option<RawJsonb>, "NULL"),
    refresh_ttl: default!(Option<bool>, false),
    group_by: default!(Option<String>, "NULL"),
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
        name!(time_window, Option<Range<Tstz>>),
        name!(namespace, Option<Texts>),
        name!(key, Option<String>),
        name!(value, Option<RawJsonb>),
        name!(session, Option<String>),
    ),
> {
    if query_embedding.is_some_and(|e| e.oid() == pg_sys::InvalidOid) {
        error!("engram.search needs its query's type: call it from SQL");
    }
    let texts = |a: &Option<RawTexts>| a.as_ref().map(RawTexts::texts);
    let scope_list = texts(&scope_tags);
    let owner = crate::security::caller(owner, internal_type.clone(), scope_list.clone(), Some(false));
    // (the arrays as passed: a check sees their dimensions)
    if kinds.is_some() || tags_all.is_some() || tags_any.is_some() || internal_type.is_some() || scope_tags.is_some() {
        check(
            "SELECT engram._check_flat_filters($1, $2, $3, $4, $5)",
            vec![
                RawTexts::arg(kinds),
                RawTexts::arg(tags_all),
                RawTexts::arg(tags_any),
                internal_type.clone().into(),
                RawTexts::arg(scope_tags),
            ],
        );
    }
    if valid_at.is_some() || known_at.is_some() || reference_time.is_some() {
        check(
            "SELECT engram._check_moment('valid_at', $1), engram._check_moment('known_at', $2),
                    engram._check_moment('reference_time', $3)",
            vec![valid_at.into(), known_at.into(), reference_time.into()],
        );
    }
    if namespace_prefix.is_some() || filter.is_some() {
        check(
            "SELECT engram._check_item_filters($1, $2)",
            vec![RawTexts::arg(namespace_prefix), RawJsonb::arg(filter)],
        );
    }
    if let Some(g) = group_by.as_deref().filter(|g| *g != "session") {
        refuse(format!(
            "group_by '{}' is not known; pass 'session' (the best sessions, each with its best turns) or leave it out",
            crate::security::echo(g)
        ));
    }
    let now = crate::time::now();
    let words = crate::search::query_words(query_text.as_deref());
    // The time the query names, read against reference_time (default: now,
    // or known_at when answering as the store stood then).
    let earlier = |a: Tstz, b: Tstz| if us(a) <= us(b) { a } else { b };
    let window = match words {
        Some(_) => {
            let reference = reference_time.unwrap_or_else(|| known_at.map_or(now, |at| earlier(at, now)));
            crate::time::query_window(query_text.as_deref().unwrap_or_default(), reference)
        }
        None => None,
    };
    // k sessions: their turns come from the widest candidate list
    let pool_k = if group_by.is_some() { Some(100) } else { k };
    let ids = entity.map(|entity| {
        check("SELECT engram._check_entity('entity', $1)", vec![entity.clone().into()]);
        // (none when the entity is unknown: nothing is about it)
        Spi::connect(|client| {
            client
                .select(
                    "SELECT engram._entity_memories($1, $2)",
                    None,
                    &[owner.clone().into(), entity.into()],
                )
                .and_then(|t| t.first().get::<Vec<Option<Uuid>>>(1))
                .unwrap_or_else(|e| error!("engram: reading the entity's memories failed: {e}"))
                .unwrap_or_default()
        })
    });
    let archived = include_archived.unwrap_or(false);
    let mut as_of = None;
    if known_at.is_some_and(|at| us(at) < us(now)) || ids.is_some() {
        if archived {
            refuse("known_at and entity read what is (or was) active; pass include_archived => false with them".into());
        }
        if query_text.is_none() && query_embedding.is_none() {
            crate::search::sql_error(
                PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
                "search needs query_embedding, query_text or both".into(),
            );
        }
        if let Some(e) = query_embedding {
            // SAFETY: the caller's vector, with its own type's oid.
            check(
                "SELECT engram._check_vector($1, 'query_embedding')",
                vec![unsafe { DatumWithOid::new(e, e.oid()) }],
            );
        }
        as_of = Some(known_at.map_or(now, |at| earlier(at, now)));
    }
    // The similarity below which a hit that no query word matched is left
    // out: min_similarity when the caller passes one; otherwise, for a
    // hybrid query, engram.similarity_floor (a hit that shares no word with
    // the query and is not near it in meaning is noise: "Lyon" finding a
    // note about matcha); 0 for a vector-only query, which returns its k
    // nearest whatever they are.
    let hybrid = query_embedding.is_some() && words.is_some();
    let floor = min_similarity.unwrap_or_else(|| {
        if hybrid {
            crate::gucs::_setting_similarity_floor()
        } else {
            0.0
        }
    });
    // The scope is ANDed with the caller's own tag filters (scope tags can
    // only narrow). The text index's statistics serve a caller who sees
    // every memory they count: no scope tags.
    let indexed = scope_list.as_ref().is_none_or(Vec::is_empty);
    let mut all_tags: Texts = texts(&tags_all).unwrap_or_default();
    all_tags.extend(scope_list.unwrap_or_default());
    let statuses = if archived {
        vec!["active", "archived", "expired"]
    } else {
        vec!["active"]
    };
    let scope = Scope {
        owner: Some(owner),
        statuses: Some(statuses.into_iter().map(|s| Some(s.to_string())).collect()),
        internal_type,
        kinds: texts(&kinds),
        tags_all: (!all_tags.is_empty()).then_some(all_tags),
        tags_any: texts(&tags_any),
        session_id,
        created_after,
        created_before,
        max_level: None,
        space: None,
        group_id: None,
        valid_at,
        namespace_prefix: texts(&namespace_prefix),
        filter,
    };
    let query = Query {
        embedding: query_embedding,
        text: query_text,
        k: pool_k,
        min_similarity: Some(floor),
        window: window.clone(),
        indexed,
        known_at: as_of,
        ids,
    };
    let finishing = Finishing {
        search_k: k,
        group_sessions: group_by.is_some(),
        refresh_ttl: refresh_ttl.unwrap_or(false),
    };
    TableIterator::new(hits(scope, query, Some(finishing)).into_iter().map(move |h| {
        let r = h.row();
        (
            r.0,
            r.1,
            r.2,
            r.3,
            r.4,
            r.5,
            r.6,
            r.7,
            r.8,
            r.9,
            r.10,
            r.11,
            r.12,
            r.13,
            window.clone(),
            r.14,
            r.15,
            r.16,
            r.17,
        )
    }))
}

fn refuse(message: String) -> ! {
    crate::search::sql_error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, message)
}

/// A timestamp's microseconds, for comparisons.
fn us(t: Tstz) -> i64 {
    pg_sys::TimestampTz::from(t)
}
