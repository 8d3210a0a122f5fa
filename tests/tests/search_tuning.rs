//! engram.tune_search(): the HNSW index's recall, measured on the stored
//! memories, sets the floor of engram's walks (engram.hnsw_ef_search) for
//! the database, and nothing else; only DBAs run it, and bad arguments
//! change nothing.

use engram_tests::*;
use serde_json::Value;
use tokio_postgres::Client;

/// 4,000 memories of uniformly random 384-dimension vectors: no clusters,
/// all distances alike, the hardest data for an HNSW graph, where ef_search
/// 40 misses some of the 10 nearest.
async fn hard_memories(c: &Client) {
    c.batch_execute(
        "SELECT setseed(0.42);
         INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, embedding)
         SELECT 'o', 'memory ' || n, sha256(n::text::bytea), sha256(n::text::bytea),
                (SELECT array_agg(random() - 0.5) FROM generate_series(1, 384) WHERE n > 0)::vector
         FROM generate_series(1, 4000) n;
         ANALYZE engram.memories;",
    )
    .await
    .unwrap();
}

async fn tune(c: &Client, args: &str) -> Value {
    c.query_one(&format!("SELECT engram.tune_search({args})"), &[])
        .await
        .unwrap_or_else(|e| panic!("tune_search({args}): {e:?}"))
        .get(0)
}

#[tokio::test]
async fn tune_search_measures_the_index_and_sets_the_databases_ef_search() {
    let db = TestDb::new(384).await;
    let c = &db.admin;
    if on_citus() {
        let (state, _) = sqlstate(c.query_one("SELECT engram.tune_search()", &[]).await);
        assert_eq!(state, "0A000", "refused on a Citus coordinator");
        return;
    }
    // Nothing to measure yet: a clear refusal, and no setting written.
    let (state, msg) = sqlstate(c.query_one("SELECT engram.tune_search()", &[]).await);
    assert_eq!(state, "55000", "{msg}");
    // One memory has no neighbour to find: refused, not "recall 0, ef 1000".
    create(c, "o", "a lone memory", &vec![0.5; 384], "").await;
    let (state, msg) = sqlstate(c.query_one("SELECT engram.tune_search()", &[]).await);
    assert_eq!(state, "55000", "{msg}");
    c.batch_execute("DELETE FROM engram.memories").await.unwrap();
    hard_memories(c).await;
    // Without the index there is nothing to measure (an exact scan would
    // read as recall 1 at ef 40); a read-only transaction cannot write the
    // setting.
    c.batch_execute("BEGIN; DROP INDEX engram.memories_embedding_hnsw")
        .await
        .unwrap();
    let (state, msg) = sqlstate(c.query_one("SELECT engram.tune_search()", &[]).await);
    assert_eq!(state, "55000", "{msg}");
    c.batch_execute("ROLLBACK; BEGIN READ ONLY").await.unwrap();
    let (state, msg) = sqlstate(c.query_one("SELECT engram.tune_search()", &[]).await);
    assert_eq!(state, "25006", "{msg}");
    c.batch_execute("ROLLBACK").await.unwrap();

    // Out-of-range arguments are refused before any work.
    for args in [
        "target_recall => 0",
        "target_recall => 1.5",
        "samples => 0",
        "samples => 1001",
        "target_recall => NULL",
    ] {
        let (state, msg) = sqlstate(c.query_one(&format!("SELECT engram.tune_search({args})"), &[]).await);
        assert_eq!(state, "22023", "{args}: {msg}");
    }
    let settings = "SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
                    WHERE d.datname = current_database() AND s.setrole = 0
                      AND array_to_string(s.setconfig, ',') LIKE '%engram.hnsw_ef_search%'";
    assert_eq!(count(&db, settings).await, 0, "refused calls wrote no setting");

    // A recall every index reaches is met at the default 40.
    let easy = tune(c, "target_recall => 0.3, samples => 20").await;
    assert_eq!(easy["ef_search"], 40, "{easy}");

    // Recall 1.0 on this data needs more than 40: the steps tried are
    // recorded, each below the target but the last (or the last is 1000).
    let hard = tune(c, "target_recall => 1.0, samples => 30").await;
    let tried = hard["tried"].as_array().expect("tried").clone();
    let ef = hard["ef_search"].as_i64().unwrap();
    assert!(ef > 40, "ef 40 misses neighbours of random 384-d vectors: {hard}");
    assert_eq!(tried.last().unwrap()["ef_search"].as_i64(), Some(ef), "{hard}");
    for step in &tried[..tried.len() - 1] {
        assert!(step["recall"].as_f64().unwrap() < 1.0, "{hard}");
    }
    assert!(
        ef == 1000 || hard["recall"].as_f64() == Some(1.0),
        "the chosen ef reached the target: {hard}"
    );
    assert_eq!(
        hard["reached"].as_bool(),
        Some(hard["recall"].as_f64() == Some(1.0)),
        "{hard}"
    );
    let efs: Vec<i64> = tried.iter().map(|s| s["ef_search"].as_i64().unwrap()).collect();
    assert!(efs.windows(2).all(|w| w[0] < w[1]), "ef grows: {efs:?}");

    // This session uses it now, new sessions of the database by default;
    // the settings tune_search changed for its measurement are the
    // caller's again.
    let here: String = c.query_one("SHOW engram.hnsw_ef_search", &[]).await.unwrap().get(0);
    assert_eq!(here, ef.to_string());
    for (name, want) in [
        ("hnsw.ef_search", "40"),
        ("hnsw.iterative_scan", "off"),
        ("enable_seqscan", "on"),
    ] {
        let got: String = c.query_one(&format!("SHOW {name}"), &[]).await.unwrap().get(0);
        assert_eq!(got, want, "{name} is the caller's again");
    }
    let fresh = connect_as(&db.name, "postgres").await;
    let there: String = fresh.query_one("SHOW engram.hnsw_ef_search", &[]).await.unwrap().get(0);
    assert_eq!(there, ef.to_string(), "new sessions get the measured floor");
    assert_eq!(count(&db, settings).await, 1);
    let found = count(
        &db,
        "SELECT count(*) FROM engram.search(owner => 'o', k => 10,
                query_embedding => (SELECT embedding FROM engram.memories WHERE content = 'memory 7'))",
    )
    .await;
    assert_eq!(found, 10, "search works with the tuned floor");

    // Token holders and the restricted role cannot run it.
    let app = connect_as(&db.name, "engram_app").await;
    let (state, msg) = sqlstate(app.query_one("SELECT engram.tune_search()", &[]).await);
    assert_eq!(state, "42501", "{msg}");
}

async fn configure(c: &Client, args: &str) -> Value {
    c.query_one(&format!("SELECT engram.configure({args})"), &[])
        .await
        .unwrap_or_else(|e| panic!("configure({args}): {e:?}"))
        .get(0)
}

/// The HNSW index's build options as stored (NULL: pgvector's defaults).
async fn build_options(c: &Client) -> Option<String> {
    c.query_one(
        "SELECT array_to_string(c.reloptions, ',') FROM pg_catalog.pg_class c
         WHERE c.oid = 'engram.memories_embedding_hnsw'::regclass",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

/// Recall@10 of the index at ef_search 40, as tune_search measures it.
async fn recall_at_40(c: &Client) -> f64 {
    let tuned = tune(c, "target_recall => 0.01, samples => 100").await;
    assert_eq!(tuned["tried"][0]["ef_search"], 40, "{tuned}");
    tuned["tried"][0]["recall"].as_f64().unwrap()
}

#[tokio::test]
async fn configure_rebuilds_the_hnsw_index_with_the_build_options_given() {
    let db = TestDb::new(384).await;
    let c = &db.admin;
    let cfg = configure(c, "").await;
    assert_eq!(
        (cfg["hnsw_m"].as_i64(), cfg["hnsw_ef_construction"].as_i64()),
        (Some(16), Some(64)),
        "{cfg}"
    );
    if on_citus() {
        let (state, msg) = sqlstate(c.query_one("SELECT engram.configure(hnsw_m => 24)", &[]).await);
        assert_eq!(state, "0A000", "refused on a Citus coordinator: {msg}");
        return;
    }
    // Out of pgvector's ranges, or ef_construction below twice m: refused
    // with the argument named, and the index untouched.
    for args in [
        "hnsw_m => 1",
        "hnsw_m => 101",
        "hnsw_ef_construction => 3",
        "hnsw_ef_construction => 1001",
        "hnsw_m => 48",
        "hnsw_m => 8, hnsw_ef_construction => 15",
    ] {
        let (state, msg) = sqlstate(c.query_one(&format!("SELECT engram.configure({args})"), &[]).await);
        assert_eq!(state, "22023", "{args}: {msg}");
        assert!(msg.contains("hnsw_"), "{args}: {msg}");
    }
    assert_eq!(build_options(c).await, None);

    // A sparse graph and a dense one over the same hard data: the dense one
    // finds more of the true neighbours at the same ef_search.
    hard_memories(c).await;
    let cfg = configure(c, "hnsw_m => 4, hnsw_ef_construction => 8").await;
    assert_eq!(
        (cfg["hnsw_m"].as_i64(), cfg["hnsw_ef_construction"].as_i64()),
        (Some(4), Some(8)),
        "{cfg}"
    );
    assert_eq!(build_options(c).await.as_deref(), Some("m=4,ef_construction=8"));
    let sparse = recall_at_40(c).await;
    // ef_construction alone keeps m.
    configure(c, "hnsw_ef_construction => 128").await;
    assert_eq!(build_options(c).await.as_deref(), Some("m=4,ef_construction=128"));
    configure(c, "hnsw_m => 32").await;
    assert_eq!(build_options(c).await.as_deref(), Some("m=32,ef_construction=128"));
    let dense = recall_at_40(c).await;
    assert!(
        dense > sparse,
        "recall@10 at ef 40: m 32 / ef_construction 128 {dense}, m 4 / 8 {sparse}"
    );
    // The same options again rebuild nothing; every rebuild is audited.
    let oid = "SELECT 'engram.memories_embedding_hnsw'::regclass::oid::bigint";
    let before = count(&db, oid).await;
    configure(c, "hnsw_m => 32, hnsw_ef_construction => 128").await;
    assert_eq!(count(&db, oid).await, before, "unchanged options rebuild nothing");
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM engram.audit_log WHERE action = 'configure' AND details ? 'hnsw_m'"
        )
        .await,
        3
    );

    // A missing index (a bulk load dropped it) is built with the options.
    c.batch_execute("DROP INDEX engram.memories_embedding_hnsw")
        .await
        .unwrap();
    let cfg = configure(c, "").await;
    assert!(cfg["hnsw_m"].is_null(), "no index, no options: {cfg}");
    configure(c, "hnsw_m => 32, hnsw_ef_construction => 128").await;
    assert_eq!(build_options(c).await.as_deref(), Some("m=32,ef_construction=128"));
    // Changing the dimension rebuilds the index with the options it had.
    c.batch_execute("DELETE FROM engram.memories").await.unwrap();
    configure(c, "embedding_dims => 8").await;
    assert_eq!(build_options(c).await.as_deref(), Some("m=32,ef_construction=128"));
    // Only DBAs rebuild indexes, through configure or its helpers.
    let agent = db.agent("o").await;
    for sql in [
        "SELECT engram.configure(hnsw_m => 16)",
        "SELECT engram._build_hnsw(NULL)",
        "SELECT engram._hnsw_build()",
    ] {
        let (state, msg) = sqlstate(agent.execute(sql, &[]).await);
        assert_eq!(state, "42501", "{sql}: {msg}");
    }
    assert_eq!(build_options(c).await.as_deref(), Some("m=32,ef_construction=128"));
}

#[tokio::test]
async fn a_scope_walk_keeps_the_recall_the_floor_was_measured_for() {
    if on_citus() {
        return; // tune_search measures one node's index
    }
    let db = TestDb::new(384).await;
    let c = &db.admin;
    hard_memories(c).await;
    // A quarter of the memories in one tag, drawn apart from the vectors.
    c.batch_execute(
        "SELECT setseed(0.17);
         UPDATE engram.memories SET tags = '{quarter}' WHERE random() < 0.25;
         ANALYZE engram.memories;",
    )
    .await
    .unwrap();
    let tuned = tune(c, "target_recall => 0.95, samples => 100").await;
    let floor = tuned["ef_search"].as_i64().unwrap();
    assert!(floor > 40, "the data needs more than ef 40: {tuned}");
    // Queries from the same distribution, never stored; the truth is an
    // exact scan of the scope.
    c.batch_execute(
        "SELECT setseed(0.23);
         CREATE TEMP TABLE q AS
             SELECT n, (SELECT array_agg(random() - 0.5) FROM generate_series(1, 384) WHERE n > 0)::vector AS v
             FROM generate_series(1, 40) n;
         BEGIN; SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off;
         CREATE TEMP TABLE truth AS
             SELECT q.n, ARRAY(SELECT m.id FROM engram.memories m WHERE m.tags @> '{quarter}'
                               ORDER BY m.embedding <=> q.v LIMIT 10) AS ids
             FROM q;
         COMMIT;",
    )
    .await
    .unwrap();
    // The scope walks the graph (not its list): it keeps 1/4 of what the walk
    // visits, so the walk must be 4x wider than the floor for the recall the
    // floor gives an unfiltered walk. A floor of a quarter gives the walk
    // the width it had before 0.12.0 (the floor itself), for comparison.
    c.batch_execute("SET engram.list_search_rows = 0; SET engram.hnsw_min_selectivity = 0")
        .await
        .unwrap();
    let recall_at = |floor: i64| async move {
        c.batch_execute(&format!("SET engram.hnsw_ef_search = {floor}"))
            .await
            .unwrap();
        let r: f64 = c
            .query_one(
                "SELECT avg((SELECT count(*) FROM engram.search(owner => 'o', query_embedding => q.v, k => 10,
                                                               tags_all => '{quarter}') x
                             WHERE x.id = ANY (t.ids)) / 10.0)::float8
                 FROM q JOIN truth t USING (n)",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        r
    };
    let (scoped, as_before) = (recall_at(floor).await, recall_at((floor / 4).max(10)).await);
    assert!(
        scoped >= 0.95 && scoped > as_before,
        "a 25% scope's walk at floor {floor}: recall@10 {scoped:.3} (as wide as the floor: {as_before:.3})"
    );
}
