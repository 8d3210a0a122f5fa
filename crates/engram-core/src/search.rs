//! Search helpers: result-count clamping and hybrid (vector + full-text)
//! relevance fusion.

pub use crate::limits::{DEFAULT_K, MAX_K};

/// The default relevance floor of a hybrid search: a hit that shares no
/// word with the query is kept only at this cosine similarity or above.
/// Derived from the local model's similarities of unrelated queries (the
/// best match of a question among another conversation's turns, on each
/// evaluation set) and checked against recall@10 on every set:
/// docs/BENCHMARKS.md ("relevance floor") has the distribution.
pub const DEFAULT_SIMILARITY_FLOOR: f64 = 0.15;

/// `k` clamped to 1..=100; NULL means 10.
pub fn clamp_k(k: Option<i32>) -> i32 {
    k.unwrap_or(DEFAULT_K).clamp(1, MAX_K)
}

/// The tokens of a query that identify rather than describe: ticket ids,
/// error codes, version and product codes, numbers and acronyms
/// (`OPS-4521`, `ERR_CONN_RESET`, `E1203`, `v2.3`, `500`, `SLA`). A token
/// is a run of letters, digits and `-_./:#`, trimmed of those marks at its
/// ends; it is exact when it has at least two characters and holds a
/// digit, an underscore, a capital after a lower-case letter (`camelCase`,
/// `NullPointerException`), or two or more capitals and no lower-case
/// letter. Rare plain words (`pgbouncer`) are not told apart by their
/// shape.
pub fn exact_tokens(text: &str) -> Vec<String> {
    let marks = |c: char| "-_./:#".contains(c);
    let mut out: Vec<String> = Vec::new();
    for raw in text.split(|c: char| !(c.is_alphanumeric() || marks(c))) {
        let token = raw.trim_matches(marks);
        if token.chars().count() < 2 {
            continue;
        }
        let digit = token.chars().any(|c| c.is_ascii_digit());
        let underscore = token.contains('_');
        let capitals = token.chars().filter(|c| c.is_uppercase()).count();
        let lower = token.chars().any(|c| c.is_lowercase());
        let camel = token
            .chars()
            .zip(token.chars().skip(1))
            .any(|(a, b)| a.is_lowercase() && b.is_uppercase());
        if (digit || underscore || camel || (capitals >= 2 && !lower)) && !out.iter().any(|t| t == token) {
            out.push(token.to_string());
        }
    }
    out
}

/// BM25's constants (Robertson & Zaragoza, "The Probabilistic Relevance
/// Framework: BM25 and Beyond", 2009): the textbook defaults, not fitted to
/// any data set here.
pub const BM25_K1: f64 = 1.2;
pub const BM25_B: f64 = 0.75;

/// What a row holding an exact token of the query ([`exact_tokens`]: a
/// code, an id, a number) adds to its text score. Such a match is one of
/// identity, which embeddings cannot see (OPS-4521 and OPS-4522 embed
/// alike): the bonus lifts it above every row that only shares words or
/// meaning with the query, so a ticket id is found even when the embeddings
/// disagree. As the text leg did since 0.4.0 (`ts_rank_cd` + 1).
pub const EXACT_MATCH_BONUS: f64 = 1.0;

/// Distinct query terms the text leg weighs: a row's matched terms are a
/// bit mask (`bigint`). Later terms of a longer query still find rows (the
/// text leg's OR query holds every term) but add nothing to the score.
pub const MAX_QUERY_TERMS: usize = 63;

/// Which of `terms` (at most [`MAX_QUERY_TERMS`]; term i is bit i) a
/// tsvector holds, read from its binary send format (`tsvectorsend`:
/// a big-endian i32 count, then per lexeme its bytes, a NUL, a big-endian
/// u16 position count and that many u16 positions). One pass over the
/// value, however many terms: matching each term with `@@` would
/// decompress a long memory's tsvector once per term. Malformed input
/// yields the bits found before the fault.
pub fn term_mask(send: &[u8], terms: &[&str]) -> i64 {
    let terms = &terms[..terms.len().min(MAX_QUERY_TERMS)];
    let mut sorted: Vec<(&[u8], usize)> = terms.iter().enumerate().map(|(i, t)| (t.as_bytes(), i)).collect();
    sorted.sort_unstable();
    let mut mask = 0i64;
    let Some(count) = send.get(..4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]])) else {
        return 0;
    };
    let mut at = 4usize;
    for _ in 0..count.max(0) {
        let Some(len) = send.get(at..).and_then(|rest| rest.iter().position(|b| *b == 0)) else {
            break;
        };
        let lexeme = &send[at..at + len];
        at += len + 1;
        let Some(npos) = send.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
            break;
        };
        at += 2 + 2 * usize::from(npos);
        if let Ok(found) = sorted.binary_search_by(|(t, _)| (*t).cmp(lexeme)) {
            // equal terms sit together; set every index that holds this lexeme
            let mut k = found;
            while k > 0 && sorted[k - 1].0 == lexeme {
                k -= 1;
            }
            while k < sorted.len() && sorted[k].0 == lexeme {
                mask |= 1 << sorted[k].1;
                k += 1;
            }
        }
    }
    mask
}

/// BM25's inverse document frequency of a term found in `df` of `n` rows;
/// never negative (the "+1" form).
pub fn idf(n: f64, df: f64) -> f64 {
    let (n, df) = (n.max(0.0), df.clamp(0.0, n.max(0.0)));
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// Text scores of the rows that match a query of `terms` distinct terms:
/// row i holds the terms whose bits are set in `masks[i]` and is
/// `lens[i]` long (bytes of its content: BM25 reads a length only against
/// the mean). Score = the share of the query's IDF the row matches ×
/// BM25's length factor (k1 + 1) / (1 + k1 × (1 − b + b × len / mean len)),
/// so 1 for an average-length row holding every term, more for a short one;
/// plus [`EXACT_MATCH_BONUS`] where `exact[i]` (the row holds an exact token).
///
/// The statistics (row count, document frequencies, mean length) are those
/// of the matching rows, which every row holding a query term is: exact
/// document frequencies, with no per-owner term table to keep.
/// A term no row holds still counts in the query's IDF (at df 0): a row
/// matching only the query's common words is a weak match.
/// Term frequency is binary: memories are short statements, and a long
/// one repeating a word is no more about it (on LongMemEval's chats, full
/// BM25 term frequency ranked long assistant answers above the user's
/// turns: recall@5 0.64 against 0.72 binary).
/// Compared with `ts_rank_cd`, which the text leg used before 0.14.0, rare
/// words count more than common ones and long rows no longer win by
/// matching more words.
pub fn text_scores(masks: &[i64], lens: &[f64], exact: &[bool], terms: usize) -> Vec<f64> {
    let terms = terms.min(MAX_QUERY_TERMS);
    let rows = masks.len();
    if rows == 0 || terms == 0 {
        return vec![0.0; rows];
    }
    let mut df = vec![0usize; terms];
    for m in masks {
        for (t, d) in df.iter_mut().enumerate() {
            if m & (1 << t) != 0 {
                *d += 1;
            }
        }
    }
    // (the matching rows are these rows: their count is the IDF's)
    let weights: Vec<f64> = df.iter().map(|d| idf(rows as f64, *d as f64)).collect();
    if weights.iter().sum::<f64>() <= 0.0 {
        return vec![0.0; rows];
    }
    let len = |i: usize| {
        lens.get(i)
            .copied()
            .filter(|l| l.is_finite() && *l > 0.0)
            .unwrap_or(1.0)
    };
    let mean = (0..rows).map(len).sum::<f64>() / rows as f64;
    let lens: Vec<f64> = (0..rows).map(len).collect();
    crate::text_rank::scores(masks, &lens, exact, &weights, mean)
}

/// Relevance of a hybrid match: the mean of its cosine similarity (0 when
/// anti-correlated) and its text score ([`text_scores`], 0 when it matched
/// no term). Scores, not ranks, are fused, so how much better one memory
/// matches than the next survives into the rank score, where trust and
/// staleness multiply it: with rank fusion (0.1.0 to 0.13.0) ranks 1 and 2
/// differed by 1.6% and a small trust gap reordered them. Equal weights: no
/// leg is preferred (LongMemEval recall@5 0.49 -> 0.73, the project's
/// chat 0.76 -> 0.76).
pub fn hybrid_relevance(similarity: Option<f64>, text: f64) -> f64 {
    let sim = similarity.filter(|s| s.is_finite()).map_or(0.0, |s| s.max(0.0));
    let text = if text.is_finite() { text.max(0.0) } else { 0.0 };
    0.5 * sim + 0.5 * text
}

/// How much more a memory counts when it happened in the time the query
/// names ("last week", "in May 2023"; [`crate::time_window`]): its relevance
/// times this. A boost, not a filter: an in-window memory passes an
/// out-of-window one up to half again as relevant, and never one that is
/// clearly the better match. Not fitted to any data set.
pub const WINDOW_BOOST: f64 = 1.5;

/// `relevance` with the window boost when the memory is in the window.
pub fn window_boosted(relevance: f64, in_window: bool) -> f64 {
    if in_window {
        relevance * WINDOW_BOOST
    } else {
        relevance
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_boost_lifts_near_matches_only() {
        assert_eq!(window_boosted(0.4, false), 0.4);
        // an in-window memory passes a slightly better match outside it...
        assert!(window_boosted(0.4, true) > 0.5);
        // ...but not one twice as relevant
        assert!(window_boosted(0.4, true) < 0.8);
        assert_eq!(window_boosted(0.0, true), 0.0);
    }

    #[test]
    fn idf_favours_rare_terms_and_stays_positive() {
        assert!(idf(100.0, 1.0) > idf(100.0, 50.0));
        assert!(idf(100.0, 100.0) > 0.0);
        assert!(idf(100.0, 0.0) > idf(100.0, 1.0));
        assert!(idf(10.0, 50.0).is_finite());
    }

    #[test]
    fn text_scores_weigh_rare_terms_and_length() {
        // terms: bit 0 common (in every row), bit 1 rare (in one row)
        let masks = [1, 1, 1, 3];
        let lens = [100.0, 100.0, 100.0, 100.0];
        let s = text_scores(&masks, &lens, &[], 2);
        assert!(s[3] > s[0] * 3.0, "{s:?}");
        assert!((s[0] - s[1]).abs() < 1e-12);
        // all terms matched at the mean length: exactly 1
        assert!((text_scores(&[3, 3], &[50.0, 50.0], &[], 2)[0] - 1.0).abs() < 1e-12);
        // of two rows matching the same term, the shorter scores higher
        let s = text_scores(&[1, 1], &[20.0, 2000.0], &[], 1);
        assert!(s[0] > s[1], "{s:?}");
        // an exact token lifts a partial match above full word matches
        let s = text_scores(&[1, 3, 3], &[50.0, 50.0, 50.0], &[true, false, false], 2);
        assert!(s[0] > s[1] && s[0] > 1.0, "{s:?}");
        // a term no row holds lowers every score (a partial match)
        assert!(text_scores(&[1, 1], &[50.0, 50.0], &[], 2)[0] < 1.0);
    }

    /// tsvector_send's format for the lexemes given (positions 1..n each).
    fn send(lexemes: &[(&str, u16)]) -> Vec<u8> {
        let mut out = (lexemes.len() as i32).to_be_bytes().to_vec();
        for (l, npos) in lexemes {
            out.extend_from_slice(l.as_bytes());
            out.push(0);
            out.extend_from_slice(&npos.to_be_bytes());
            for p in 1..=*npos {
                out.extend_from_slice(&p.to_be_bytes());
            }
        }
        out
    }

    #[test]
    fn term_mask_reads_the_send_format() {
        let v = send(&[("budget", 2), ("kiwi", 1), ("meet", 0), ("zürich", 1)]);
        assert_eq!(term_mask(&v, &["kiwi", "team", "budget"]), 0b101);
        assert_eq!(term_mask(&v, &["zürich"]), 1);
        assert_eq!(term_mask(&v, &["meet", "meet"]), 0b11);
        assert_eq!(term_mask(&v, &[]), 0);
        // terms past the 63rd are not weighed
        let many: Vec<String> = (0..70).map(|i| format!("t{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(term_mask(&send(&[("t69", 1)]), &refs), 0);
        assert_eq!(term_mask(&send(&[("t62", 1)]), &refs), 1 << 62);
        // malformed: truncated anywhere, a wrong count, garbage
        for cut in 0..v.len() {
            let _ = term_mask(&v[..cut], &["kiwi", "budget"]);
        }
        assert_eq!(term_mask(&v[..9], &["budget"]), 0);
        let mut wrong = v.clone();
        wrong[..4].copy_from_slice(&1000i32.to_be_bytes());
        assert_eq!(term_mask(&wrong, &["zürich"]), 1);
        assert_eq!(term_mask(&[0xff; 32], &["x"]), 0);
    }

    #[test]
    fn text_scores_survive_odd_input() {
        assert!(text_scores(&[], &[], &[], 3).is_empty());
        assert_eq!(text_scores(&[1], &[10.0], &[true], 0), vec![0.0]);
        // missing, zero or NaN lengths count as 1; masks past the terms are ignored
        let s = text_scores(&[1, i64::MIN | 1, 1], &[f64::NAN, 0.0], &[false], 1);
        assert!(s.iter().all(|x| x.is_finite() && *x > 0.0), "{s:?}");
        assert_eq!(text_scores(&[-1], &[5.0], &[], 100).len(), 1);
    }

    #[test]
    fn hybrid_relevance_keeps_the_spread() {
        assert!((hybrid_relevance(Some(1.0), 1.0) - 1.0).abs() < 1e-12);
        assert_eq!(hybrid_relevance(Some(-0.3), 0.0), 0.0);
        assert_eq!(hybrid_relevance(None, 0.6), 0.3);
        assert_eq!(hybrid_relevance(Some(f64::NAN), f64::NAN), 0.0);
        // a memory matching the query's words and meaning is well ahead of
        // one sharing a name only: a 0.7 vs 0.665 trust gap cannot reorder them
        let own = hybrid_relevance(Some(0.80), 0.9);
        let other = hybrid_relevance(Some(0.45), 0.2);
        assert!(own * 0.665 > other * 0.7);
        // an exact rare token with a weak vector match beats the best
        // vector-only neighbour
        assert!(hybrid_relevance(Some(0.2), 1.0) > hybrid_relevance(Some(0.7), 0.0));
    }

    #[test]
    fn k_is_clamped() {
        assert_eq!(clamp_k(None), 10);
        assert_eq!(clamp_k(Some(0)), 1);
        assert_eq!(clamp_k(Some(-5)), 1);
        assert_eq!(clamp_k(Some(1_000_000)), 100);
        assert_eq!(clamp_k(Some(25)), 25);
    }

    #[test]
    fn exact_tokens_are_codes_numbers_and_acronyms() {
        assert_eq!(
            exact_tokens("Why did OPS-4521 fail with ERR_CONN_RESET (E1203) on v2.3, per the SLA?"),
            vec!["OPS-4521", "ERR_CONN_RESET", "E1203", "v2.3", "SLA"]
        );
        assert_eq!(exact_tokens("What breed is my dog? I asked Sam."), Vec::<String>::new());
        assert_eq!(
            exact_tokens("a NullPointerException in getUser"),
            vec!["NullPointerException", "getUser"]
        );
        assert_eq!(exact_tokens("rows: 500, 500 again; x1"), vec!["500", "x1"]);
        assert_eq!(exact_tokens("--- __ .. A"), Vec::<String>::new());
        assert_eq!(exact_tokens("Ünïcode ÄÖ 2026-11-25"), vec!["ÄÖ", "2026-11-25"]);
    }
}
