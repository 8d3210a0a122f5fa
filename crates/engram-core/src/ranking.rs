//! The one score of a search hit, and the choice of the best k among a
//! search's candidates.
//!
//! A candidate comes from the vector leg (its cosine similarity), the text
//! leg (its text score, [`crate::text_rank::scores`]) or both. Its score is
//! `rank_score(window_boosted(relevance), trust, staleness, weight)`:
//! relevance is the similarity for a vector-only query, the text score for
//! a text-only query and [`hybrid_relevance`] for both. A row only the
//! vector leg found is left out under `min_similarity`; a row the text leg
//! found is kept whatever its similarity, so a rare exact token is found
//! even when the embeddings disagree.
//!
//! The arithmetic is in `f32` at the same points as the SQL it replaced
//! (`real` similarities, relevances and scores), so the order of equal
//! scores, and every score a caller sees, stay what they were.

use crate::scoring::rank_score;
use crate::search::{hybrid_relevance, window_boosted};

/// What a search knows of one candidate.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Candidate {
    /// Cosine similarity to the query embedding; `None` without a query
    /// embedding or without a stored one.
    pub similarity: Option<f64>,
    /// Text score; `None` when the text leg did not return the row.
    pub text: Option<f32>,
    /// Whether the memory happened in the time the query names.
    pub in_window: bool,
    pub trust: f32,
    pub staleness: f32,
}

/// The query's shape and the tunables the score uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Query {
    /// The query has text (a text leg ran).
    pub text: bool,
    /// The query has an embedding (a vector leg ran).
    pub embedding: bool,
    /// Rows found by the vector leg alone below this similarity are left out.
    pub min_similarity: f64,
    pub staleness_weight: f32,
}

/// `a >= b` as Postgres compares floats: NaN equals NaN and is above
/// every other value (a zero-length embedding's similarity, a NaN
/// `min_similarity`).
fn pg_ge(a: f64, b: f64) -> bool {
    a.is_nan() || (!b.is_nan() && a >= b)
}

/// The candidate's relevance before trust, staleness and the window boost;
/// `None` when it is left out.
fn relevance(c: &Candidate, q: &Query) -> Option<f32> {
    if !q.text {
        // vector only: a row without a similarity cannot rank
        let sim = c.similarity?;
        return pg_ge(sim, q.min_similarity).then(|| sim.max(0.0) as f32);
    }
    let sim = c.similarity.map(|s| s as f32);
    if c.text.is_none() && sim.is_some_and(|s| !pg_ge(f64::from(s), q.min_similarity)) {
        return None;
    }
    if !q.embedding {
        return Some(c.text.unwrap_or(0.0));
    }
    Some(hybrid_relevance(sim.map(f64::from), c.text.map_or(0.0, f64::from)) as f32)
}

/// The rank score of a candidate; `None` when the query leaves it out.
pub fn score(c: &Candidate, q: &Query) -> Option<f32> {
    let relevance = relevance(c, q)?;
    let boosted = window_boosted(f64::from(relevance), c.in_window) as f32;
    Some(rank_score(
        f64::from(boosted),
        f64::from(c.trust),
        f64::from(c.staleness),
        f64::from(q.staleness_weight),
    ) as f32)
}

/// The best `k` candidates as (index, score), best first; equal scores in
/// the order of `keys` (the ids: the order of ties is the same in every
/// search).
pub fn best<K: Ord>(candidates: &[Candidate], keys: &[K], q: &Query, k: usize) -> Vec<(usize, f32)> {
    let mut scored: Vec<(usize, f32)> = candidates
        .iter()
        .enumerate()
        .filter_map(|(i, c)| score(c, q).map(|s| (i, s)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| keys[a.0].cmp(&keys[b.0])));
    scored.truncate(k);
    scored
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: Query = Query {
        text: true,
        embedding: true,
        min_similarity: 0.3,
        staleness_weight: 0.3,
    };

    fn cand(similarity: Option<f64>, text: Option<f32>) -> Candidate {
        Candidate {
            similarity,
            text,
            in_window: false,
            trust: 1.0,
            staleness: 0.0,
        }
    }

    #[test]
    fn a_vector_only_query_ranks_by_similarity_under_its_floor() {
        let q = Query { text: false, ..HYBRID };
        assert_eq!(score(&cand(Some(0.8), None), &q), Some(0.8));
        assert_eq!(score(&cand(Some(0.29), None), &q), None);
        assert_eq!(score(&cand(None, None), &q), None);
        // anti-correlated vectors count as zero, never below a match
        let q0 = Query {
            min_similarity: -1.0,
            ..q
        };
        assert_eq!(score(&cand(Some(-0.4), None), &q0), Some(0.0));
    }

    #[test]
    fn a_text_match_is_kept_whatever_its_similarity() {
        assert_eq!(score(&cand(Some(0.1), None), &HYBRID), None);
        let s = score(&cand(Some(0.1), Some(0.9)), &HYBRID).unwrap();
        assert!((s - 0.5).abs() < 1e-6, "{s}");
        // a stored memory without an embedding, found by its words
        assert_eq!(score(&cand(None, Some(0.6)), &HYBRID), Some(0.3));
    }

    #[test]
    fn nan_compares_as_postgres_compares_it() {
        // a NaN floor keeps text matches only, as `sim >= 'NaN'` does in SQL
        let q = Query {
            min_similarity: f64::NAN,
            ..HYBRID
        };
        assert_eq!(score(&cand(Some(0.9), None), &q), None);
        assert!(score(&cand(Some(0.9), Some(0.5)), &q).is_some());
        // a NaN similarity passes any floor and counts as no relevance
        let v = Query { text: false, ..HYBRID };
        assert_eq!(score(&cand(Some(f64::NAN), None), &v), Some(0.0));
    }

    #[test]
    fn a_text_only_query_ranks_by_text_score() {
        let q = Query {
            embedding: false,
            ..HYBRID
        };
        assert_eq!(score(&cand(None, Some(0.7)), &q), Some(0.7));
    }

    #[test]
    fn trust_staleness_and_the_window_multiply_the_relevance() {
        let q = Query {
            text: false,
            min_similarity: 0.0,
            ..HYBRID
        };
        let c = Candidate {
            similarity: Some(0.5),
            text: None,
            in_window: true,
            trust: 0.8,
            staleness: 0.5,
        };
        let expected = 0.5 * 1.5 * 0.8 * (1.0 - 0.3 * 0.5);
        assert!((score(&c, &q).unwrap() - expected).abs() < 1e-6);
    }

    #[test]
    fn the_best_come_first_and_ties_follow_the_keys() {
        let q = Query {
            text: false,
            min_similarity: 0.0,
            ..HYBRID
        };
        let cands = [
            cand(Some(0.5), None),
            cand(Some(0.9), None),
            cand(Some(0.5), None),
            cand(Some(0.7), None),
        ];
        let keys = [4, 1, 2, 3];
        let best = best(&cands, &keys, &q, 3);
        assert_eq!(best.iter().map(|b| b.0).collect::<Vec<_>>(), vec![1, 3, 2]);
        assert!(super::best(&cands, &keys, &q, 0).is_empty());
    }
}
