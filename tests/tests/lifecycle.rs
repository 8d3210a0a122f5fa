//! Lifecycle jobs for DBAs: expire (see writes.rs), rescore, purge,
//! schedule_maintenance with pg_cron, configure.

use engram_tests::*;

#[tokio::test]
async fn rescore_decays_trust_and_raises_staleness() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let old = create(
        c,
        "alice",
        "an old fact",
        &[1.0, 0.0, 0.0, 0.0],
        "author_type => 'human'",
    )
    .await;
    let fresh = create(
        c,
        "alice",
        "a fresh fact",
        &[0.0, 1.0, 0.0, 0.0],
        "author_type => 'human'",
    )
    .await;
    // pretend the old one was written (and last used) 180 days ago
    c.execute(
        "UPDATE engram.memories SET created_at = now() - interval '180 days', updated_at = now() - interval '180 days' WHERE id = $1",
        &[&old],
    )
    .await
    .unwrap();
    let changed: i64 = c.query_one("SELECT engram.rescore()", &[]).await.unwrap().get(0);
    assert_eq!(changed, 1, "only the aged row moves");
    let r = c
        .query_one(
            "SELECT trust_score, staleness_score FROM engram.memories WHERE id = $1",
            &[&old],
        )
        .await
        .unwrap();
    // one half-life: 1.0 → 0.5; 180 days unused: fully stale
    assert!((r.get::<_, f32>(0) - 0.5).abs() < 0.001);
    assert!((r.get::<_, f32>(1) - 1.0).abs() < 0.001);
    let r = c
        .query_one(
            "SELECT trust_score, staleness_score FROM engram.memories WHERE id = $1",
            &[&fresh],
        )
        .await
        .unwrap();
    assert!((r.get::<_, f32>(0) - 1.0).abs() < 0.001);
    assert!(r.get::<_, f32>(1) < 0.001);
    // tunable by GUC
    c.batch_execute("SET engram.trust_half_life_days = 90").await.unwrap();
    c.query_one("SELECT engram.rescore()", &[]).await.unwrap();
    let t: f32 = c
        .query_one("SELECT trust_score FROM engram.memories WHERE id = $1", &[&old])
        .await
        .unwrap()
        .get(0);
    assert!((t - 0.25).abs() < 0.001, "{t}");
    // a second run with nothing to change rewrites nothing
    let changed: i64 = c.query_one("SELECT engram.rescore()", &[]).await.unwrap().get(0);
    assert_eq!(changed, 0);
}

#[tokio::test]
async fn scoring_functions_follow_the_documented_formulas() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let f = |sql: &'static str| async move { c.query_one(sql, &[]).await.unwrap().get::<_, f32>(0) };
    assert!((f("SELECT engram.trust_score('human', 0, 0, false)").await - 1.0).abs() < 1e-6);
    assert!((f("SELECT engram.trust_score('system', 0, 0, false)").await - 0.9).abs() < 1e-6);
    assert!((f("SELECT engram.trust_score('agent', 180, 0, false)").await - 0.35).abs() < 1e-6);
    assert!((f("SELECT engram.trust_score('human', 0, 10, true)").await - 0.35).abs() < 1e-6);
    assert!((f("SELECT engram.staleness_score(45, 0, false)").await - 0.5).abs() < 1e-6);
    assert!((f("SELECT engram.staleness_score(0, 1, true)").await - 0.4).abs() < 1e-6);
    assert!((f("SELECT engram.staleness_score(500, 5, true)").await - 1.0).abs() < 1e-6);
    assert!((f("SELECT engram.rank_score(0.8, 0.5, 1.0)").await - 0.28).abs() < 1e-6);
    let volatility: String = c
        .query_one("SELECT string_agg(DISTINCT provolatile::text, '') FROM pg_proc WHERE proname IN ('trust_score','staleness_score','rank_score','internal_tags','scope_tags') AND pronamespace = 'engram'::regnamespace", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(volatility, "i", "scoring and scoping functions are IMMUTABLE");
    let (code, _) = sqlstate(c.query("SELECT engram.trust_score('robot', 0, 0, false)", &[]).await);
    assert_eq!(code, "22023");
}

#[tokio::test]
async fn purge_erases_only_old_retired_rows() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let keep = create(c, "alice", "active", &[1.0, 0.0, 0.0, 0.0], "").await;
    let recent = create(c, "alice", "recently forgotten", &[0.0, 1.0, 0.0, 0.0], "").await;
    let old = create(c, "alice", "long forgotten", &[0.0, 0.0, 1.0, 0.0], "").await;
    for id in [recent, old] {
        c.query_one("SELECT engram.forget(owner => 'alice', id => $1)", &[&id])
            .await
            .unwrap();
    }
    c.execute(
        "UPDATE engram.memories SET archived_at = now() - interval '100 days' WHERE id = $1",
        &[&old],
    )
    .await
    .unwrap();
    let n: i64 = c
        .query_one("SELECT engram.purge(older_than => '90 days')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
    let left: Vec<Uuid> = c
        .query("SELECT id FROM engram.memories ORDER BY created_at", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(left, vec![keep, recent]);
}

#[tokio::test]
async fn schedule_maintenance_is_idempotent_with_pg_cron() {
    let c = cron_db().await;
    for _ in 0..2 {
        c.execute("SELECT engram.schedule_maintenance()", &[]).await.unwrap();
    }
    let jobs: Vec<(String, String, String)> = c
        .query(
            "SELECT jobname, schedule, command FROM cron.job WHERE jobname LIKE 'engram-%' ORDER BY jobname",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        jobs,
        vec![
            (
                "engram-expire".into(),
                "*/5 * * * *".into(),
                "SELECT engram.expire()".into()
            ),
            (
                "engram-rescore".into(),
                "17 3 * * *".into(),
                "SELECT engram.rescore()".into()
            ),
        ]
    );
    // rescheduling replaces, never duplicates
    for _ in 0..2 {
        c.execute(
            "SELECT engram.schedule_maintenance(expire_cron => '* * * * *', purge_cron => '0 4 * * 0', purge_older_than => '30 days')",
            &[],
        )
        .await
        .unwrap();
    }
    let jobs: Vec<(String, String)> = c
        .query(
            "SELECT jobname, schedule FROM cron.job WHERE jobname LIKE 'engram-%' ORDER BY jobname",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        jobs,
        vec![
            ("engram-expire".into(), "* * * * *".into()),
            ("engram-purge".into(), "0 4 * * 0".into()),
            ("engram-rescore".into(), "17 3 * * *".into()),
        ]
    );
    // every (re)scheduling is audited, with what was asked for
    let audited: i64 = c
        .query_one(
            "SELECT count(*) FROM engram.audit_log WHERE action = 'schedule_maintenance'
               AND details ->> 'purge_cron' = '0 4 * * 0' AND actor = 'postgres'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(audited >= 2, "{audited}");
    let (code, _) = sqlstate(
        c.query(
            "SELECT engram.schedule_maintenance(expire_cron => 'every tuesday')",
            &[],
        )
        .await,
    );
    assert!(!code.is_empty());
}

#[tokio::test]
async fn schedule_maintenance_without_pg_cron_says_how_to_install_it() {
    let db = TestDb::new(4).await;
    let (code, msg) = sqlstate(db.admin.query("SELECT engram.schedule_maintenance()", &[]).await);
    assert_eq!(code, "55000");
    assert!(msg.contains("CREATE EXTENSION pg_cron"), "{msg}");
    assert!(msg.contains("shared_preload_libraries"), "{msg}");
}

#[tokio::test]
async fn configure_changes_the_dimension_while_empty() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let cfg: serde_json::Value = c.query_one("SELECT engram.configure()", &[]).await.unwrap().get(0);
    assert_eq!(cfg["embedding_dims"], 4);
    let cfg: serde_json::Value = c
        .query_one("SELECT engram.configure(embedding_dims => 8)", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(cfg["embedding_dims"], 8);
    let (code, msg) = sqlstate(try_remember(c, "alice", "x", &[1.0, 0.0, 0.0, 0.0], "").await);
    assert_eq!(code, "22000");
    assert!(msg.contains("this database stores 8"), "{msg}");
    create(c, "alice", "x", &[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], "").await;
    // the HNSW index exists for the new dimension
    let n = count(
        &db,
        "SELECT count(*) FROM pg_indexes WHERE indexname = 'memories_embedding_hnsw'",
    )
    .await;
    assert_eq!(n, 1);
}
