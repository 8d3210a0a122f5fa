//! How a k-nearest search of one scope runs: which plan, how wide a walk,
//! how many candidates, and when a list scan may stop.
//!
//! pgvector applies a `WHERE` clause after its HNSW walk, so a walk over a
//! narrow scope returns too few rows or misses near ones. The plan therefore
//! follows the scope's size:
//! * **list**: an owner's scope is covered by scope lists (the owner's
//!   whole list and one per tag, with int8 vectors). Its smallest list is
//!   scanned exactly when it is small or narrow; the nearest candidates by
//!   int8 distance are reranked in full precision under the whole scope
//!   filter (recall 1);
//! * **exact**: a scope the lists do not cover, small or narrow by the
//!   planner's estimate, is scanned exactly through the table's indexes;
//! * **walk**: a broad scope walks the HNSW index with an iterative scan,
//!   `ef_search` widened by the scope's selectivity.
//!
//! The extension reads the sizes and runs the statements; the decisions are
//! here.

/// Rows a walk fetches for `n` results: a few beyond n, re-sorted by exact
/// distance. With one pass of the graph the walk returns its candidates in
/// distance order, so fetching 2n buys no recall, and at 50% selectivity
/// it often forces a second pass.
pub fn walk_fetch(n: i32) -> i32 {
    n.saturating_add((n / 5).max(2))
}

/// The first number of list candidates reranked for `n` results.
pub fn first_candidates(n: i32) -> i32 {
    n.saturating_mul(2).saturating_add(20)
}

/// The next, wider number of list candidates after `cand` fell short.
pub fn next_candidates(cand: i32) -> i32 {
    cand.saturating_mul(4)
}

/// The largest error of an int8 distance against the exact cosine distance
/// (engram-core `quant`): a candidate's exact distance is within this of
/// its int8 one.
pub const INT8_DISTANCE_ERROR: f64 = 0.01;

/// Whether a list scan that reranked `cand` of the list's `size` entries
/// has the exact `n` nearest: the whole list was reranked, or the n-th
/// reranked row (`nth`, when `found` ≥ n rows passed the filter) is nearer
/// than any entry outside the candidates can be (they are at least `edge`
/// away in int8 distance).
pub fn list_complete(size: i64, cand: i32, n: i32, found: usize, nth: Option<f64>, edge: Option<f64>) -> bool {
    if size <= i64::from(cand) {
        return true;
    }
    match (nth, edge) {
        (Some(nth), Some(edge)) => found >= usize::try_from(n).unwrap_or(0) && nth <= edge - INT8_DISTANCE_ERROR,
        _ => false,
    }
}

/// The sizes that choose a plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// `engram.list_search_rows`: a list this small is always scanned.
    pub list_search_rows: i64,
    /// `engram.exact_search_rows`: an estimated scope this small is scanned.
    pub exact_search_rows: f64,
    /// `engram.hnsw_min_selectivity`: a scope narrower than this share of
    /// the table is scanned.
    pub min_selectivity: f64,
    /// `engram.hnsw_ef_search`: the ef at which an unfiltered walk reaches
    /// the target recall.
    pub ef_floor: i32,
}

/// The widest ef a walk uses.
pub const MAX_EF: i32 = 1000;

/// Whether the scope's smallest list (`size` entries, of a table of `total`
/// rows) is scanned rather than walked.
pub fn scan_list(size: i64, total: f64, settings: &Settings) -> bool {
    let size_f = size as f64;
    size <= settings.list_search_rows || size_f / total.max(size_f) < settings.min_selectivity
}

/// Whether a scope of `rows` (the planner's estimate, or a list that is the
/// scope) of `total` is scanned exactly rather than walked.
pub fn scan_exactly(rows: f64, total: f64, settings: &Settings) -> bool {
    rows <= settings.exact_search_rows || rows / total.max(rows) < settings.min_selectivity
}

/// The ef of a walk over a scope of `rows` of `total` for `fetch` rows.
/// The walk's candidate list holds about selectivity × ef rows of the
/// scope, so the scope needs floor / selectivity for the recall an
/// unfiltered walk gets at the floor, and at least 1.5 × fetch /
/// selectivity to hold `fetch` matching rows in one pass (1.5× for the
/// filter's variance; later iterations cost far more than a wider first
/// pass). At most [`MAX_EF`].
pub fn walk_ef(fetch: i32, rows: f64, total: f64, settings: &Settings) -> i32 {
    let total = total.max(rows);
    let base = (1.5 * f64::from(fetch)).max(f64::from(settings.ef_floor));
    let ef = (base * total / rows.max(1.0)).ceil();
    if ef.is_nan() {
        return MAX_EF;
    }
    ef.min(f64::from(MAX_EF)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Settings = Settings {
        list_search_rows: 2000,
        exact_search_rows: 300.0,
        min_selectivity: 0.2,
        ef_floor: 40,
    };

    #[test]
    fn fetch_and_candidates_grow_with_n() {
        assert_eq!(walk_fetch(10), 12);
        assert_eq!(walk_fetch(5), 7);
        assert_eq!(walk_fetch(100), 120);
        assert_eq!(first_candidates(10), 40);
        assert_eq!(next_candidates(40), 160);
        assert_eq!(next_candidates(i32::MAX), i32::MAX);
    }

    #[test]
    fn a_list_is_scanned_when_small_or_narrow() {
        assert!(scan_list(2000, 100_000.0, &S));
        // 5% of the table: narrow
        assert!(scan_list(5000, 100_000.0, &S));
        // half of the table: walked
        assert!(!scan_list(50_000, 100_000.0, &S));
        // stale statistics saying the table is smaller than the list
        assert!(!scan_list(50_000, 1.0, &S));
    }

    #[test]
    fn an_estimate_is_scanned_when_small_or_narrow() {
        assert!(scan_exactly(300.0, 1e6, &S));
        assert!(scan_exactly(1000.0, 1e6, &S));
        assert!(!scan_exactly(500_000.0, 1e6, &S));
    }

    #[test]
    fn the_walk_widens_by_selectivity() {
        // half the table: twice the floor
        assert_eq!(walk_ef(12, 50_000.0, 100_000.0, &S), 80);
        // the whole table: the floor
        assert_eq!(walk_ef(12, 100_000.0, 100_000.0, &S), 40);
        // many rows wanted: 1.5 × fetch
        assert_eq!(walk_ef(120, 100_000.0, 100_000.0, &S), 180);
        // narrow: capped
        assert_eq!(walk_ef(12, 10.0, 100_000.0, &S), MAX_EF);
        assert_eq!(walk_ef(12, 0.0, 100_000.0, &S), MAX_EF);
    }

    #[test]
    fn a_list_scan_stops_when_nothing_outside_can_be_nearer() {
        // the whole list reranked
        assert!(list_complete(30, 40, 10, 3, None, None));
        // enough rows, the 10th clearly nearer than the edge
        assert!(list_complete(5000, 40, 10, 10, Some(0.2), Some(0.3)));
        // within the int8 error of the edge: widen
        assert!(!list_complete(5000, 40, 10, 10, Some(0.295), Some(0.3)));
        // too few rows passed the filter: widen
        assert!(!list_complete(5000, 40, 10, 9, Some(0.2), Some(0.3)));
        assert!(!list_complete(5000, 40, 10, 0, None, None));
    }
}
