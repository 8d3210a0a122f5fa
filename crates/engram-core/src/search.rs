//! Search helpers: result-count clamping and hybrid (vector + full-text)
//! relevance fusion.

/// Default and bounds for `k`.
pub const DEFAULT_K: i32 = 10;
pub const MAX_K: i32 = 100;

/// Constant of reciprocal rank fusion; 60 is the value from Cormack et al.
/// and what most hybrid search engines use.
pub const RRF_K: f64 = 60.0;

/// `k` clamped to 1..=100; NULL means 10.
pub fn clamp_k(k: Option<i32>) -> i32 {
    k.unwrap_or(DEFAULT_K).clamp(1, MAX_K)
}

/// Reciprocal rank fusion of a vector rank and a full-text rank (1-based;
/// `None` = not in that list), scaled so that rank 1 in both lists is 1.0.
///
/// Ranks, not raw scores, are fused because cosine similarity and ts_rank
/// live on unrelated scales. A row found only by one list scores at most 0.5,
/// so a rare exact token (an error code) that the embedding misses still
/// outranks vector-only neighbours when it is also a weak vector match.
pub fn fused_relevance(vector_rank: Option<i64>, text_rank: Option<i64>) -> f64 {
    let part = |r: Option<i64>| r.filter(|r| *r >= 1).map_or(0.0, |r| 1.0 / (RRF_K + r as f64));
    (part(vector_rank) + part(text_rank)) * (RRF_K + 1.0) / 2.0
}

/// Maps `ts_rank_cd(..., 32)` (in [0, 1)) to a relevance for text-only search.
/// Any match is worth at least 0.5 so that the composite score of a lexical
/// hit stays on the same footing as a vector match.
pub fn text_relevance(ts_rank: f64) -> f64 {
    if !ts_rank.is_finite() || ts_rank <= 0.0 {
        return 0.0;
    }
    0.5 + 0.5 * ts_rank.min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k_is_clamped() {
        assert_eq!(clamp_k(None), 10);
        assert_eq!(clamp_k(Some(0)), 1);
        assert_eq!(clamp_k(Some(-5)), 1);
        assert_eq!(clamp_k(Some(1_000_000)), 100);
        assert_eq!(clamp_k(Some(25)), 25);
    }

    #[test]
    fn fusion_prefers_rows_in_both_lists() {
        assert!((fused_relevance(Some(1), Some(1)) - 1.0).abs() < 1e-12);
        assert!((fused_relevance(Some(1), None) - 0.5).abs() < 1e-12);
        assert_eq!(fused_relevance(None, None), 0.0);
        // an exact-token hit that is a weak vector match beats the best
        // vector-only neighbour
        assert!(fused_relevance(Some(40), Some(1)) > fused_relevance(Some(1), None));
        // rank order is preserved within one list
        assert!(fused_relevance(Some(2), None) < fused_relevance(Some(1), None));
    }

    #[test]
    fn text_relevance_bounds() {
        assert_eq!(text_relevance(0.0), 0.0);
        assert!((text_relevance(0.2) - 0.6).abs() < 1e-12);
        assert!(text_relevance(5.0) <= 1.0);
    }
}
