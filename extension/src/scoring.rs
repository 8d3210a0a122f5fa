//! SQL bindings of the scoring formulas (IMMUTABLE: tunables are arguments;
//! engram's own callers fill them from the engram.* GUCs).

use crate::errors::raise;
use engram_core::ranking::{self, Candidate, Query};
use engram_core::scoring::{self, AuthorType};
use engram_core::{search, text_rank, Error};
use pgrx::prelude::*;

fn author(author_type: &str) -> AuthorType {
    AuthorType::parse(author_type).unwrap_or_else(|| {
        raise(Error::invalid(
            format!("unknown author_type '{author_type}'"),
            "use one of: human, agent, system",
        ))
    })
}

/// weight(author) × 2^(−age_days/half_life_days) × (1 − min(0.05 × corrections, 0.3)) × (0.5 if flagged)
#[pg_extern(immutable, parallel_safe)]
fn trust_score(
    author_type: &str,
    age_days: f64,
    corrections: i32,
    flagged: bool,
    half_life_days: default!(f64, 180.0),
) -> f32 {
    scoring::trust_score(author(author_type), age_days, corrections, flagged, half_life_days) as f32
}

/// min(1, min(days/stale_after_days, 1) + 0.3 if flagged + min(0.1 × corrections, 0.3))
#[pg_extern(immutable, parallel_safe)]
fn staleness_score(
    days_since_access: f64,
    corrections: i32,
    flagged: bool,
    stale_after_days: default!(f64, 90.0),
) -> f32 {
    scoring::staleness_score(days_since_access, corrections, flagged, stale_after_days) as f32
}

/// relevance × trust × (1 − staleness_weight × staleness)
#[pg_extern(immutable, parallel_safe)]
fn rank_score(relevance: f32, trust: f32, staleness: f32, staleness_weight: default!(f32, 0.3)) -> f32 {
    scoring::rank_score(
        f64::from(relevance),
        f64::from(trust),
        f64::from(staleness),
        f64::from(staleness_weight),
    ) as f32
}

/// The best `k` of a search's candidates, best first (engram-core
/// `ranking::best`): per candidate its id (the order of equal scores),
/// cosine similarity (NULL without one), text score (NULL when the text leg
/// did not return it), whether it is in the query's time window, trust and
/// staleness; `pos` is its 1-based position in those arrays. One call
/// scores every candidate, where a per-row expression called three
/// functions a row.
#[allow(clippy::too_many_arguments)]
#[pg_extern(immutable, parallel_safe)]
fn _best_hits(
    ids: Option<Vec<Option<pgrx::Uuid>>>,
    sims: Option<Vec<Option<f64>>>,
    texts: Option<Vec<Option<f32>>>,
    in_window: Option<Vec<Option<bool>>>,
    trusts: Option<Vec<Option<f32>>>,
    stales: Option<Vec<Option<f32>>>,
    has_text: bool,
    has_embedding: bool,
    min_similarity: Option<f32>,
    staleness_weight: f32,
    k: i32,
) -> TableIterator<'static, (name!(pos, i32), name!(score, f32))> {
    let ids = ids.unwrap_or_default();
    let n = ids.len();
    let (sims, texts) = (column(sims, n), column(texts, n));
    let (in_window, trusts, stales) = (column(in_window, n), column(trusts, n), column(stales, n));
    let candidates: Vec<Candidate> = (0..n)
        .map(|i| Candidate {
            similarity: sims[i],
            text: texts[i],
            in_window: in_window[i].unwrap_or(false),
            trust: trusts[i].unwrap_or(0.0),
            staleness: stales[i].unwrap_or(0.0),
        })
        .collect();
    let keys: Vec<[u8; 16]> = ids.iter().map(|id| id.map_or([0; 16], |u| *u.as_bytes())).collect();
    let query = Query {
        text: has_text,
        embedding: has_embedding,
        min_similarity: f64::from(min_similarity.unwrap_or(0.0)),
        staleness_weight,
    };
    let best = ranking::best(&candidates, &keys, &query, usize::try_from(k).unwrap_or(0));
    TableIterator::new(best.into_iter().map(|(i, s)| (i as i32 + 1, s)))
}

/// One of `_best_hits`'s per-candidate arrays, checked to hold `n` elements.
fn column<T>(v: Option<Vec<Option<T>>>, n: usize) -> Vec<Option<T>> {
    let v = v.unwrap_or_default();
    if v.len() != n {
        raise(Error::invalid(
            "the candidate arrays of _best_hits differ in length",
            "pass one element per candidate in each array",
        ));
    }
    v
}

// The rank fusion that ranked search from 0.1.0 to 0.13.0 is gone; the
// install scripts of those releases still create these functions from this
// library, so each answers with what to run instead of a score.

#[pg_extern(sql = false)]
fn _fused_relevance(_vector_rank: Option<i64>, _text_rank: Option<i64>) -> f32 {
    gone("_fused_relevance")
}

#[pg_extern(sql = false)]
fn _weighted_fusion(_vector_rank: Option<i64>, _text_rank: Option<i64>, _exact_match: Option<bool>) -> f32 {
    gone("_weighted_fusion")
}

#[pg_extern(sql = false)]
fn _text_relevance(_ts_rank: f32) -> f32 {
    gone("_text_relevance")
}

fn gone(function: &str) -> ! {
    crate::upgrade::refuse(format!(
        "engram.{function} ranked the search of engram 0.13.0 and earlier, and this library no longer has it"
    ))
}

/// The exact tokens of a query (ticket ids, codes, numbers, acronyms).
#[pg_extern(immutable, parallel_safe, strict)]
fn _exact_tokens(query: &str) -> Vec<String> {
    search::exact_tokens(query)
}

/// Text scores of the rows matching a query (engram-core
/// `search::text_scores`): bit masks of the query terms each row holds, the
/// rows' lengths and whether each holds an exact token of the query, in; a
/// score per row, in the same order, out.
#[pg_extern(immutable, parallel_safe)]
fn _text_scores(
    masks: Option<Vec<Option<i64>>>,
    lens: Option<Vec<Option<f64>>>,
    exact: Option<Vec<Option<bool>>>,
    terms: Option<i32>,
) -> Vec<f32> {
    let masks: Vec<i64> = masks.unwrap_or_default().into_iter().map(|m| m.unwrap_or(0)).collect();
    let lens: Vec<f64> = lens.unwrap_or_default().into_iter().map(|l| l.unwrap_or(0.0)).collect();
    let exact: Vec<bool> = exact
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.unwrap_or(false))
        .collect();
    let terms = usize::try_from(terms.unwrap_or(0)).unwrap_or(0);
    search::text_scores(&masks, &lens, &exact, terms)
        .into_iter()
        .map(|s| s as f32)
        .collect()
}

/// The weight (BM25 IDF among `docs` memories) of each query term found in
/// `dfs` of them (engram-core `text_rank::term_weights`).
#[pg_extern(immutable, parallel_safe)]
fn _term_weights(docs: Option<i64>, dfs: Option<Vec<Option<i64>>>) -> Vec<f64> {
    let dfs: Vec<f64> = dfs
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.unwrap_or(0) as f64)
        .collect();
    text_rank::term_weights(docs.unwrap_or(0) as f64, &dfs)
}

/// Text scores over the text index (engram-core `text_rank::scores`): each
/// row's term mask, length and exact-token match, the terms' weights and
/// the owner's mean length in; a score per row out.
#[pg_extern(immutable, parallel_safe)]
fn _text_rank(
    masks: Option<Vec<Option<i64>>>,
    lens: Option<Vec<Option<f64>>>,
    exact: Option<Vec<Option<bool>>>,
    weights: Option<Vec<Option<f64>>>,
    mean: Option<f64>,
) -> Vec<f32> {
    let masks: Vec<i64> = masks.unwrap_or_default().into_iter().map(|m| m.unwrap_or(0)).collect();
    let lens: Vec<f64> = lens.unwrap_or_default().into_iter().map(|l| l.unwrap_or(0.0)).collect();
    let exact: Vec<bool> = exact
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.unwrap_or(false))
        .collect();
    let weights: Vec<f64> = weights
        .unwrap_or_default()
        .into_iter()
        .map(|w| w.unwrap_or(0.0))
        .collect();
    text_rank::scores(&masks, &lens, &exact, &weights, mean.unwrap_or(1.0))
        .into_iter()
        .map(|s| s as f32)
        .collect()
}

/// Which terms' postings the text leg reads next (engram-core
/// `text_rank::next_reads`): `frontiers[i]` NULL when term i's postings were
/// read to the end, else the length of the last posting read (0: none yet);
/// `theta` the `wanted`-th best score so far, NULL while fewer were read.
/// All false: the text leg's top `wanted` are final.
#[allow(clippy::too_many_arguments)]
#[pg_extern(immutable, parallel_safe)]
fn _text_reads(
    weights: Option<Vec<Option<f64>>>,
    dfs: Option<Vec<Option<f64>>>,
    frontiers: Option<Vec<Option<f64>>>,
    exact: Option<Vec<Option<bool>>>,
    theta: Option<f32>,
    first: Option<bool>,
    wanted: Option<i32>,
    mean: Option<f64>,
) -> Vec<bool> {
    let flat = |v: Option<Vec<Option<f64>>>| -> Vec<f64> {
        v.unwrap_or_default().into_iter().map(|x| x.unwrap_or(0.0)).collect()
    };
    let exact: Vec<bool> = exact
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.unwrap_or(false))
        .collect();
    let (weights, dfs, frontiers) = (flat(weights), flat(dfs), frontiers.unwrap_or_default());
    let terms = text_rank::Terms {
        weights: &weights,
        dfs: &dfs,
        frontiers: &frontiers,
        exact: &exact,
    };
    text_rank::next_reads(
        &terms,
        theta.map(f64::from),
        first.unwrap_or(true),
        usize::try_from(wanted.unwrap_or(1)).unwrap_or(1),
        mean.unwrap_or(1.0),
    )
}

/// Which query terms (term i = bit i) a row's tsvector holds, from
/// `tsvectorsend(content_tsv)`: one pass over the value (engram-core
/// `search::term_mask`).
#[pg_extern(immutable, parallel_safe, strict)]
fn _term_mask(send: &[u8], terms: Vec<Option<String>>) -> i64 {
    let terms: Vec<&str> = terms.iter().map(|t| t.as_deref().unwrap_or("")).collect();
    search::term_mask(send, &terms)
}

/// Relevance of a hybrid match: mean of cosine similarity and text score.
/// The search of 0.14.0 to 0.19.0 calls it; engram-core `ranking` scores
/// this release's.
#[pg_extern(sql = false)]
fn _hybrid_relevance(similarity: Option<f32>, text: Option<f32>) -> f32 {
    search::hybrid_relevance(similarity.map(f64::from), text.map_or(0.0, f64::from)) as f32
}

/// Most distinct query terms the text leg weighs.
#[pg_extern(immutable, parallel_safe)]
fn _max_query_terms() -> i32 {
    search::MAX_QUERY_TERMS as i32
}

/// The limit `name` of engram-core `limits` (an unknown name is an
/// error). IMMUTABLE: a plan folds it into a constant.
#[pg_extern(immutable, parallel_safe, strict)]
fn _limit(name: &str) -> i64 {
    engram_core::limits::by_name(name).unwrap_or_else(|| {
        raise(Error::invalid(
            format!("engram has no limit named '{name}'"),
            "name one of engram-core's limits (docs/SQL.md, Limits)",
        ))
    })
}

#[pg_extern(immutable, parallel_safe)]
fn _clamp_k(k: Option<i32>) -> i32 {
    search::clamp_k(k)
}
