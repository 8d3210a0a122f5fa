//! Scoped search returns min(k, matching) rows and agrees with an exact scan
//! (recall@10 >= 0.95) at 50%, 5% and 0.5% scope selectivity, on clustered
//! data shaped like real embeddings (a Gaussian mixture), through each of
//! engram._knn's plans: the scope lists, the HNSW walk sized from the list
//! sizes, and the planner-estimated path taken when other filters are set.

use engram_tests::*;

const DIMS: usize = 32;
const ROWS: usize = 20_000;
const CENTROIDS: usize = 200;

/// xorshift64* with Box-Muller: deterministic data without a rand dependency.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn gauss(&mut self) -> f32 {
        let (u1, u2) = (self.next_f64().max(1e-12), self.next_f64());
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
    }
    fn unit(&mut self, dims: usize) -> Vec<f32> {
        let v: Vec<f32> = (0..dims).map(|_| self.gauss()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }
    fn near(&mut self, c: &[f32], sigma: f32) -> Vec<f32> {
        let v: Vec<f32> = c.iter().map(|x| x + sigma * self.gauss()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }
}

#[tokio::test]
async fn scoped_search_matches_exact_scan_at_every_selectivity() {
    let db = TestDb::new(DIMS as i32).await;
    let c = &db.admin;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let centroids: Vec<Vec<f32>> = (0..CENTROIDS).map(|_| rng.unit(DIMS)).collect();
    let mut vectors = Vec::with_capacity(ROWS);
    let mut tags = Vec::with_capacity(ROWS);
    for i in 0..ROWS {
        vectors.push(vec_text(&rng.near(&centroids[i % CENTROIDS], 0.15)));
        // scopes independent of the clusters: 50%, 5%, 0.5% of the rows
        let r = rng.next_f64();
        let mut t = vec![format!("n{i}")];
        if r < 0.5 {
            t.push("p50".into());
        }
        if r < 0.05 {
            t.push("p5".into());
        }
        if r < 0.005 {
            t.push("p05".into());
        }
        tags.push(format!("{{{}}}", t.join(",")));
    }
    // Bulk load as the table owner (the API path is covered elsewhere), then
    // build the HNSW index once, as a DBA would for a bulk import; the dedup
    // key only has to be unique here.
    c.batch_execute("DROP INDEX engram.memories_embedding_hnsw")
        .await
        .unwrap();
    c.execute(
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, embedding)
         SELECT 'o', 'memory ' || n, sha256(n::text::bytea), sha256(n::text::bytea), t::text[], v::vector
         FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(v, t, n)",
        &[&vectors, &tags],
    )
    .await
    .unwrap();
    // a second owner's rows must never leak into 'o's results
    c.execute(
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, embedding)
         SELECT 'other', content, content_sha256, dedup_key, tags, embedding FROM engram.memories WHERE owner = 'o' LIMIT 2000",
        &[],
    )
    .await
    .unwrap();
    c.batch_execute(
        "CREATE INDEX memories_embedding_hnsw ON engram.memories USING hnsw (embedding vector_cosine_ops);
         ANALYZE engram.memories",
    )
    .await
    .unwrap();

    // (plan, session setting, extra search argument). With the default
    // engram.list_search_rows (20000) every scope here is scanned through
    // its list; at 0 the 50% scope walks the HNSW index and the narrower
    // ones still use their lists (under engram.hnsw_min_selectivity); a
    // kinds filter sends the broad scope to the planner-estimated path.
    let plans = [
        ("lists", "RESET engram.list_search_rows", ""),
        ("hnsw", "SET engram.list_search_rows = 0", ""),
        (
            "estimated",
            "SET engram.list_search_rows = 0",
            ", kinds => '{semantic}'",
        ),
    ];
    for (plan, setting, extra) in plans {
        c.batch_execute(setting).await.unwrap();
        for (tag, share) in [("p50", 0.5), ("p5", 0.05), ("p05", 0.005)] {
            let matching: i64 = c
                .query_one(
                    "SELECT count(*) FROM engram.memories WHERE owner = 'o' AND tags @> ARRAY[$1]",
                    &[&tag],
                )
                .await
                .unwrap()
                .get(0);
            let mut recall_sum = 0.0;
            let queries = 25;
            for _ in 0..queries {
                let centre = (rng.next_f64() * CENTROIDS as f64) as usize;
                let q = vec_text(&rng.near(&centroids[centre], 0.15));
                let got: Vec<Uuid> = c
                    .query(
                        &format!(
                            "SELECT id FROM engram.search(owner => 'o', query_embedding => $1::text::vector, k => 10,
                                                      tags_all => ARRAY[$2]{extra})"
                        ),
                        &[&q, &tag],
                    )
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                assert_eq!(
                    got.len() as i64,
                    matching.min(10),
                    "{plan}, {tag}: min(k, matching) rows"
                );
                c.batch_execute("BEGIN; SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off")
                    .await
                    .unwrap();
                let exact: Vec<Uuid> = c
                    .query(
                        "SELECT id FROM engram.memories WHERE owner = 'o' AND status = 'active' AND tags @> ARRAY[$2]
                     ORDER BY embedding <=> $1::text::vector LIMIT 10",
                        &[&q, &tag],
                    )
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                c.batch_execute("COMMIT").await.unwrap();
                let hits = got.iter().filter(|id| exact.contains(id)).count();
                recall_sum += hits as f64 / exact.len() as f64;
            }
            let recall = recall_sum / queries as f64;
            eprintln!("{plan}: scope {tag} ({share}): {matching} rows, recall@10 {recall:.3}");
            assert!(recall >= 0.95, "{plan}, {tag}: recall@10 {recall:.3} < 0.95");
        }
    }

    // The list rerank runs a cached generic plan (engram._list_rerank): it
    // must read the list through its index range, never by a sequential
    // scan of every entry (what a generic estimate picks for a large list).
    // More calls than the plan cache's five custom plans, in one
    // transaction, whose own scan counters Postgres keeps.
    c.batch_execute("RESET engram.list_search_rows; BEGIN").await.unwrap();
    for centre in centroids.iter().take(8) {
        let q = vec_text(&rng.near(centre, 0.15));
        c.query(
            "SELECT id FROM engram.search(owner => 'o', query_embedding => $1::text::vector, k => 10,
                                          tags_all => '{p5}')",
            &[&q],
        )
        .await
        .unwrap();
    }
    let row = c
        .query_one(
            // for a table: its sequential scans; for an index: its scans
            "SELECT pg_stat_get_xact_numscans('engram.scope_blocks'::regclass),
                    pg_stat_get_xact_numscans('engram.scope_blocks_pkey'::regclass)",
            &[],
        )
        .await
        .unwrap();
    c.batch_execute("COMMIT").await.unwrap();
    let (seq_scans, list_index_scans): (i64, i64) = (row.get(0), row.get(1));
    assert!(
        list_index_scans >= 8,
        "list searches use the list index: {list_index_scans}"
    );
    assert_eq!(seq_scans, 0, "no sequential scan of engram.scope_blocks");
}

/// A scope the lists do not cover (a kinds filter) is sized by the
/// planner's estimate, which a session keeps: it must follow the table.
/// No procedural memory yet: the estimate is tiny, the scope scanned
/// exactly (no HNSW scan). After 2,000 of them and an ANALYZE, the same
/// session's same search walks the HNSW index; a kept estimate that
/// ignored the table would scan exactly again.
#[tokio::test]
async fn a_kept_scope_estimate_follows_the_table() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let load = |kind: &'static str| async move {
        c.execute(
            "INSERT INTO engram.memories (owner, kind, content, content_sha256, dedup_key, embedding)
             SELECT 'o', $1, $1 || ' memory ' || n, sha256(($1 || n)::bytea), sha256(($1 || n)::bytea),
                    ARRAY[sin(n), cos(n), sin(3 * n), 1]::vector
             FROM generate_series(1, 2000) n",
            &[&kind],
        )
        .await
        .unwrap();
        c.batch_execute("ANALYZE engram.memories").await.unwrap();
    };
    load("semantic").await;
    c.batch_execute("SET engram.list_search_rows = 0").await.unwrap();
    // (rows found, HNSW scans) of one search, in its own transaction
    let search = || async {
        c.batch_execute("BEGIN").await.unwrap();
        let rows: i64 = c
            .query_one(
                "SELECT count(*) FROM engram.search(owner => 'o', query_embedding => '[0.5, 0.5, 0.2, 1]', k => 10,
                                                    kinds => '{procedural}')",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let scans: i64 = c
            .query_one(
                "SELECT pg_stat_get_xact_numscans('engram.memories_embedding_hnsw'::regclass)",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        c.batch_execute("COMMIT").await.unwrap();
        (rows, scans)
    };
    assert_eq!(search().await, (0, 0));
    assert_eq!(search().await, (0, 0), "the kept estimate");
    load("procedural").await;
    let (rows, scans) = search().await;
    assert_eq!(rows, 10);
    assert!(scans > 0, "a scope of half the table still scanned exactly: {scans}");
}
