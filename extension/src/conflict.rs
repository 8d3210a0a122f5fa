//! SQL bindings of engram-core's conflict rules (`conflict`): remember's
//! conflict check (`engram._conflicts`, the nearest stored memories and
//! their reasons), and the newer-fact check of search.

use pgrx::prelude::*;

/// The reasons `new_text` conflicts with a stored `old_text` (engram-core's
/// `conflict`): empty when it does not.
fn reason_names(new_text: &str, old_text: &str, similarity: f32, threshold: f32) -> Vec<String> {
    engram_core::conflict::reasons(new_text, old_text, similarity, threshold)
        .into_iter()
        .map(|r| r.name().to_string())
        .collect()
}

/// [`reason_names`] from SQL. The API calls `_conflicts` instead; the
/// library keeps it because the SQL of earlier releases binds it (an update
/// starts from their install).
#[pg_extern(immutable, parallel_safe, strict)]
fn _conflict_reasons(new_text: &str, old_text: &str, similarity: f32, threshold: f32) -> Vec<String> {
    reason_names(new_text, old_text, similarity, threshold)
}

/// The conflict reasons by which a memory stored anyway superseded the one
/// it conflicted with, before `supersedes` named what to close. The current
/// API calls it no more; the library keeps it because the SQL of earlier
/// releases binds it (an update starts from their install).
#[pg_extern(immutable, parallel_safe)]
fn _superseding_reasons() -> Vec<String> {
    engram_core::conflict::Reason::ALL
        .iter()
        .filter(|r| r.supersedes())
        .map(|r| r.name().to_string())
        .collect()
}

/// For each of a search's facts, the 1-based position of the newer fact
/// that contradicts it, 0 for none (engram-core's `contradicted_by`):
/// `times` are when each holds from (epoch seconds), `cosines` the
/// row-major matrix of their pairwise similarities.
#[pg_extern(immutable, parallel_safe, strict)]
fn _contradicted_by(texts: Vec<String>, times: Vec<f64>, cosines: Vec<f32>, threshold: f32) -> Vec<i32> {
    if times.len() != texts.len() || cosines.len() != texts.len() * texts.len() {
        error!("engram._contradicted_by: one time per text and one cosine per pair");
    }
    // search passes its first 20 hits; the pairs are quadratic in their number
    if texts.len() > 20 {
        error!("engram._contradicted_by: at most 20 texts, not {}", texts.len());
    }
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    engram_core::conflict::contradicted_by(&texts, &times, &cosines, threshold)
        .into_iter()
        .map(|j| j.map_or(0, |j| j as i32 + 1))
        .collect()
}

/// How many of the nearest memories `remember` compares a new one with.
const NEAREST: i32 = 5;

thread_local! {
    /// The kept statement that reads the nearest memories' contents.
    static CONTENTS: std::cell::RefCell<Option<pgrx::spi::OwnedPreparedStatement>> =
        const { std::cell::RefCell::new(None) };
}

/// engram._conflicts: the stored memories a new one (`p_content`,
/// `p_embedding`) conflicts with, nearest first, with engram-core's
/// reasons. The memories compared are the owner's five nearest active
/// semantic or procedural ones of its context (`p_internal_type`) and
/// scope (`p_scope`), as valid at `p_valid_at` (now when NULL). The
/// k-nearest search runs in this process (`knn`), and one kept statement
/// reads the contents: remember runs no plpgsql helper for it. VOLATILE, as
/// `_knn`: it takes an owner and reads it back, and the planner must never
/// evaluate it while it plans a statement.
#[pg_extern]
#[allow(clippy::type_complexity)]
fn _conflicts(
    p_owner: String,
    p_content: String,
    p_embedding: Option<crate::raw::RawVector>,
    p_internal_type: Option<String>,
    p_scope: Option<Vec<Option<String>>>,
    p_valid_at: Option<pgrx::datum::TimestampWithTimeZone>,
    p_threshold: f32,
) -> TableIterator<
    'static,
    (
        name!(id, pgrx::datum::Uuid),
        name!(content, String),
        name!(similarity, f32),
        name!(reasons, Vec<String>),
    ),
> {
    let Some(query) = p_embedding else {
        return TableIterator::new(Vec::new());
    };
    if query.oid() == pg_sys::InvalidOid {
        error!("engram._conflicts needs its embedding's type: call it from SQL");
    }
    let text = |s: &str| Some(s.to_string());
    let scope = crate::knn::Scope {
        owner: Some(p_owner.clone()),
        statuses: Some(vec![text("active")]),
        internal_type: p_internal_type,
        kinds: Some(vec![text("semantic"), text("procedural")]),
        tags_all: p_scope.filter(|s| !s.is_empty()),
        valid_at: p_valid_at,
        ..Default::default()
    };
    let near = crate::knn::knn(&scope, query, NEAREST);
    if near.is_empty() {
        return TableIterator::new(Vec::new());
    }
    let ids: Vec<pgrx::datum::Uuid> = near.iter().map(|(id, _)| *id).collect();
    // (owner by a plain equality: on Citus the read runs on its one shard)
    let mut contents: std::collections::HashMap<[u8; 16], String> = Spi::connect(|client| {
        CONTENTS.with_borrow_mut(|slot| {
            let plan = crate::kept::kept(slot, client, || {
                (
                    "SELECT m.id, m.content FROM engram.memories m WHERE m.owner = $1 AND m.id = ANY ($2)".into(),
                    vec![
                        pgrx::PgOid::BuiltIn(pg_sys::BuiltinOid::TEXTOID),
                        pgrx::PgOid::BuiltIn(pg_sys::BuiltinOid::UUIDARRAYOID),
                    ],
                )
            });
            client
                .select(plan, None, &[p_owner.into(), ids.into()])
                .unwrap_or_else(|e| error!("engram: reading the nearest memories failed: {e}"))
                .filter_map(|row| {
                    // (a misread row must not quietly drop a conflict)
                    let id = row.get::<pgrx::datum::Uuid>(1).unwrap_or_else(misread)?;
                    let content = row.get::<String>(2).unwrap_or_else(misread)?;
                    Some((*id.as_bytes(), content))
                })
                .collect()
        })
    });
    let found = near
        .into_iter()
        .filter_map(|(id, distance)| {
            let content = contents.remove(id.as_bytes())?;
            // (as SQL's (1 - distance)::real: the distance is float8)
            let similarity = (1.0 - distance) as f32;
            let reasons = reason_names(&p_content, &content, similarity, p_threshold);
            (!reasons.is_empty()).then_some((id, content, similarity, reasons))
        })
        .collect::<Vec<_>>();
    TableIterator::new(found)
}

fn misread<T>(e: pgrx::spi::SpiError) -> T {
    error!("engram: reading the nearest memories failed: {e}")
}
