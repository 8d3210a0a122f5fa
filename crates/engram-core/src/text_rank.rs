//! The text leg's ranking over the text index: term weights from an
//! owner's statistics, each candidate's score, and the bound that tells the
//! search when no memory it has not read yet can enter its top k.
//!
//! The score is [`crate::search::text_scores`]'s (the share of the query's
//! IDF a memory holds times BM25's length factor, plus the exact-token
//! bonus), with the statistics of the owner's memories (document count,
//! document frequencies, mean length) instead of those of the rows that
//! match. Term frequency is binary, so for one term a shorter memory always
//! scores at least as high as a longer one: reading a term's postings
//! shortest first reads them in falling score order. That is what bounds
//! the search: a memory not read yet holds only terms whose postings were
//! not read to the end, and is at least as long as the last posting read
//! of each of them ([`next_reads`]).

use crate::search::{idf, BM25_B, BM25_K1, EXACT_MATCH_BONUS, MAX_QUERY_TERMS};

/// The weight of each query term: BM25's IDF among the memories that hold
/// any of the query's terms, for the first [`MAX_QUERY_TERMS`]; 0 for the
/// later ones (they still find memories, as the text leg's OR query does,
/// but add nothing to a score). `dfs` are the terms' document frequencies
/// among `docs` memories.
///
/// The IDF is taken among the matching memories, not all of them, so that a
/// word most of the matches hold weighs little against the word that
/// singles one out (the statistics the text leg used when it read every
/// match). Their count is estimated from the frequencies, as if the terms
/// fell on memories independently: docs × (1 − Π (1 − df / docs)), within
/// [the largest df, docs].
pub fn term_weights(docs: f64, dfs: &[f64]) -> Vec<f64> {
    let docs = if docs.is_finite() { docs.max(0.0) } else { 0.0 };
    let valid = |df: &f64| df.is_finite() && *df > 0.0;
    let largest = dfs.iter().filter(|d| valid(d)).fold(0.0f64, |a, d| a.max(d.min(docs)));
    let none_hold: f64 = if docs > 0.0 {
        dfs.iter()
            .filter(|d| valid(d))
            .map(|d| 1.0 - d.min(docs) / docs)
            .product()
    } else {
        1.0
    };
    let matching = (docs * (1.0 - none_hold)).clamp(largest, docs.max(largest));
    dfs.iter()
        .enumerate()
        .map(|(i, df)| {
            if i < MAX_QUERY_TERMS && df.is_finite() {
                idf(matching, *df)
            } else {
                0.0
            }
        })
        .collect()
}

/// BM25's length factor for a memory `len` bytes long among memories of
/// mean length `mean`: (k1 + 1) / (1 + k1 × (1 − b + b × len / mean)).
/// Falls as `len` grows; missing or odd lengths count as 1.
pub fn length_factor(len: f64, mean: f64) -> f64 {
    let len = if len.is_finite() && len > 0.0 { len } else { 1.0 };
    let mean = if mean.is_finite() && mean > 0.0 { mean } else { 1.0 };
    (BM25_K1 + 1.0) / (1.0 + BM25_K1 * (1.0 - BM25_B + BM25_B * len / mean))
}

fn share(mask: i64, weights: &[f64], total: f64) -> f64 {
    if total <= 0.0 {
        return 0.0;
    }
    let matched: f64 = weights
        .iter()
        .take(MAX_QUERY_TERMS)
        .enumerate()
        .filter(|(t, _)| mask & (1 << t) != 0)
        .map(|(_, w)| w)
        .sum();
    matched / total
}

/// The text score of one memory: it holds the terms whose bits are set in
/// `mask` (term i = bit i), is `len` bytes long, and `exact` when it holds
/// an exact token of the query.
pub fn score(mask: i64, len: f64, exact: bool, weights: &[f64], mean: f64) -> f64 {
    scored(mask, len, exact, weights, weighed_total(weights), mean)
}

fn weighed_total(weights: &[f64]) -> f64 {
    weights.iter().take(MAX_QUERY_TERMS).sum()
}

fn scored(mask: i64, len: f64, exact: bool, weights: &[f64], total: f64, mean: f64) -> f64 {
    let bonus = if exact { EXACT_MATCH_BONUS } else { 0.0 };
    share(mask, weights, total) * length_factor(len, mean) + bonus
}

/// [`score`] of many memories at once (one call from SQL).
pub fn scores(masks: &[i64], lens: &[f64], exact: &[bool], weights: &[f64], mean: f64) -> Vec<f64> {
    let total = weighed_total(weights);
    masks
        .iter()
        .enumerate()
        .map(|(i, m)| {
            scored(
                *m,
                lens.get(i).copied().unwrap_or(1.0),
                exact.get(i).copied().unwrap_or(false),
                weights,
                total,
                mean,
            )
        })
        .collect()
}

/// A query's terms as the text leg's reads stand: each one's weight,
/// document frequency, frontier (see [`next_reads`]) and whether it is an
/// exact token's.
#[derive(Clone, Copy)]
pub struct Terms<'a> {
    pub weights: &'a [f64],
    pub dfs: &'a [f64],
    pub frontiers: &'a [Option<f64>],
    pub exact: &'a [bool],
}

/// Which terms' postings the search reads next (MaxScore, read shortest
/// memory first): `frontiers[i]` is `None` when term i's postings were read
/// to the end (or it has none: `dfs[i]` 0), else the length of the last
/// posting read (0 before any: a memory of any length may hold it).
/// `exact[i]`: the term is an exact token's, whose memories may earn the
/// exact-token bonus. `theta`: the `wanted`-th best score among the
/// memories read, `None` while fewer were read.
///
/// While fewer than `wanted` memories were read: on the first round the
/// rarest terms (highest weight first) until their postings can hold
/// `wanted` memories, afterwards every open term. Then: a memory not read
/// yet that holds a term with open postings is at least as long as that
/// term's frontier, so the term contributes at most weight × length
/// factor(frontier) to it. The open terms whose contributions, smallest
/// first, sum to at most `theta` are non-essential: a memory holding only
/// those cannot pass `theta`, and the others are found through the
/// essential terms' postings, which are read on while a memory holding one
/// of them could still score above `theta` (every open term's weight at
/// that term's frontier, plus the bonus while an exact token's postings
/// are open). Nothing to read: the top `wanted` are final.
pub fn next_reads(terms: &Terms, theta: Option<f64>, first: bool, wanted: usize, mean: f64) -> Vec<bool> {
    let Terms {
        weights,
        dfs,
        frontiers,
        exact,
    } = *terms;
    let total = weighed_total(weights);
    let n = frontiers.len();
    let weight = |i: usize| weights.get(i).copied().unwrap_or(0.0);
    let open: Vec<usize> = (0..n)
        .filter(|&i| frontiers[i].is_some() && dfs.get(i).copied().unwrap_or(0.0) > 0.0)
        .collect();
    let mut read = vec![false; n];
    let Some(theta) = theta else {
        if !first {
            for &i in &open {
                read[i] = true;
            }
            return read;
        }
        let mut by_weight = open.clone();
        by_weight.sort_by(|a, b| weight(*b).total_cmp(&weight(*a)).then(a.cmp(b)));
        let mut holds = 0.0;
        for i in by_weight {
            read[i] = true;
            holds += dfs.get(i).copied().unwrap_or(0.0);
            if holds >= wanted as f64 {
                break;
            }
        }
        return read;
    };
    let bonus = |i: usize| {
        if exact.get(i).copied().unwrap_or(false) {
            EXACT_MATCH_BONUS
        } else {
            0.0
        }
    };
    let front = |i: usize| frontiers[i].unwrap_or(0.0);
    let part = |i: usize| {
        let w = if total > 0.0 { weight(i) / total } else { 0.0 };
        w * length_factor(front(i), mean) + bonus(i)
    };
    let mut by_part = open.clone();
    by_part.sort_by(|a, b| part(*a).total_cmp(&part(*b)).then(a.cmp(b)));
    // (compared as the scores are: f32)
    let above = |x: f64| (x as f32) > (theta as f32);
    let mut sum = 0.0;
    let mut essential = Vec::new();
    for i in by_part {
        sum += part(i);
        if above(sum) || !essential.is_empty() {
            essential.push(i);
        }
    }
    let open_weight: f64 = open.iter().map(|&i| weight(i)).sum();
    let open_bonus = if open.iter().any(|&i| bonus(i) > 0.0) {
        EXACT_MATCH_BONUS
    } else {
        0.0
    };
    for i in essential {
        let share = if total > 0.0 { open_weight / total } else { 0.0 };
        if above(share * length_factor(front(i), mean) + open_bonus) {
            read[i] = true;
        }
    }
    read
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{idf, text_scores};

    #[test]
    fn weights_are_taken_among_the_estimated_matches() {
        // a word every memory holds: every memory matches
        let w = term_weights(1000.0, &[1000.0, 2.0]);
        assert!((w[1] - idf(1000.0, 2.0)).abs() < 1e-12);
        // two rare words: about the memories holding either (2 + 3 - 0.006)
        let w = term_weights(1000.0, &[2.0, 3.0]);
        let matching = 1000.0 * (1.0 - (1.0 - 0.002) * (1.0 - 0.003));
        assert!((w[0] - idf(matching, 2.0)).abs() < 1e-12);
        // so a word most of the matches hold weighs little beside a rare one
        let w = term_weights(1000.0, &[40.0, 1.0]);
        assert!(w[1] > 4.0 * w[0], "{w:?}");
        // nothing held, or no memories: finite
        assert!(term_weights(0.0, &[0.0, 3.0]).iter().all(|x| x.is_finite()));
    }

    #[test]
    fn weights_are_idf_and_stop_after_the_weighed_terms() {
        let w = term_weights(1000.0, &[1.0, 999.0, 0.0]);
        assert!(w[0] > w[1] && w[2] > w[0], "{w:?}");
        assert!(w[1] > 0.0);
        let many = term_weights(10.0, &vec![1.0; 70]);
        assert!(many[62] > 0.0);
        assert_eq!(many[63], 0.0);
        assert_eq!(term_weights(10.0, &[f64::NAN]), vec![0.0]);
    }

    #[test]
    fn the_score_is_text_scores_with_given_statistics() {
        // With statistics equal to those of the matching rows, the indexed
        // score is the exhaustive one.
        let masks = [1, 3, 2, 1];
        let lens = [40.0, 80.0, 10.0, 200.0];
        let exact = [false, true, false, false];
        let want = text_scores(&masks, &lens, &exact, 2);
        let mean = lens.iter().sum::<f64>() / 4.0;
        let weights = [idf(4.0, 3.0), idf(4.0, 2.0)];
        let got = scores(&masks, &lens, &exact, &weights, mean);
        for (a, b) in want.iter().zip(&got) {
            assert!((a - b).abs() < 1e-12, "{want:?} vs {got:?}");
        }
        // nothing weighed: no score but the bonus
        assert_eq!(score(1, 10.0, false, &[0.0], 10.0), 0.0);
        assert_eq!(score(0, 10.0, true, &[], 10.0), EXACT_MATCH_BONUS);
    }

    #[test]
    fn shorter_memories_score_higher_for_the_same_terms() {
        let w = [1.0, 2.0];
        assert!(score(3, 10.0, false, &w, 50.0) > score(3, 11.0, false, &w, 50.0));
        assert!(length_factor(0.0, 0.0).is_finite());
    }

    /// Every memory not read is bounded by theta once next_reads reads
    /// nothing: brute force over small term sets, frontiers and memories.
    #[test]
    fn nothing_unread_can_pass_theta_when_reading_stops() {
        let weights = [0.4, 2.0, 0.1];
        let dfs = [50.0, 3.0, 80.0];
        let exact = [false, true, false];
        let mean = 60.0;
        let fronts = [None, Some(0.0), Some(10.0), Some(30.0), Some(90.0), Some(400.0)];
        for f0 in fronts {
            for f1 in fronts {
                for f2 in fronts {
                    let frontiers = [f0, f1, f2];
                    for theta in [0.05, 0.3, 0.8, 1.2, 2.5] {
                        let read = next_reads(
                            &Terms {
                                weights: &weights,
                                dfs: &dfs,
                                frontiers: &frontiers,
                                exact: &exact,
                            },
                            Some(theta),
                            false,
                            10,
                            mean,
                        );
                        if read.iter().any(|r| *r) {
                            continue;
                        }
                        // an unread memory holds open terms only, each at or past its frontier
                        for mask in 1..8i64 {
                            let holds: Vec<usize> = (0..3).filter(|t| mask & (1 << t) != 0).collect();
                            if holds.iter().any(|&t| frontiers[t].is_none()) {
                                continue;
                            }
                            let len = holds.iter().map(|&t| frontiers[t].unwrap()).fold(0.0, f64::max);
                            for extra in [0.0, 1.0, 50.0, 1000.0] {
                                for ex in [false, true] {
                                    if ex && !holds.contains(&1) {
                                        continue; // the bonus needs the exact token's term
                                    }
                                    let s = score(mask, len + extra, ex, &weights, mean);
                                    assert!(
                                        (s as f32) <= (theta as f32),
                                        "{frontiers:?} theta {theta}: mask {mask} len {} scores {s}",
                                        len + extra
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_first_round_reads_the_rarest_terms_until_they_fill_the_top() {
        let weights = [0.1, 3.0, 1.0];
        let dfs = [5000.0, 4.0, 300.0];
        let open = [Some(0.0); 3];
        let read = next_reads(
            &Terms {
                weights: &weights,
                dfs: &dfs,
                frontiers: &open,
                exact: &[false; 3],
            },
            None,
            true,
            100,
            50.0,
        );
        assert_eq!(read, vec![false, true, true]);
        // later rounds without enough memories read every open term
        let read = next_reads(
            &Terms {
                weights: &weights,
                dfs: &dfs,
                frontiers: &[Some(0.0), None, Some(20.0)],
                exact: &[false; 3],
            },
            None,
            false,
            100,
            50.0,
        );
        assert_eq!(read, vec![true, false, true]);
        // a common word's postings are not read once the rare ones decide
        let read = next_reads(
            &Terms {
                weights: &weights,
                dfs: &dfs,
                frontiers: &[Some(0.0), None, Some(20.0)],
                exact: &[false; 3],
            },
            Some(0.9),
            false,
            100,
            50.0,
        );
        assert!(!read[0], "{read:?}");
    }
}
