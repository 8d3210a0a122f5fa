//! The DBA examples in sql/examples run as printed (psql, stopping at the
//! first error) and do what their comments say.

use engram_tests::*;

fn example(name: &str) -> String {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("run under cargo test");
    std::fs::read_to_string(format!("{dir}/../sql/examples/{name}")).unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

fn run(db: &str, name: &str) -> String {
    let (ok, out) = psql(db, &example(name));
    assert!(ok, "sql/examples/{name} failed:\n{out}");
    out
}

#[tokio::test]
async fn maintenance_schedules_the_three_jobs() {
    // pg_cron lives in the database cron.database_name names.
    let c = cron_db().await;
    let out = run(&cron_db_name(), "maintenance.sql");
    assert!(out.contains("engram-purge"), "{out}");
    let jobs: Vec<(String, String)> = pairs(
        &c,
        "SELECT jobname, schedule FROM cron.job WHERE jobname LIKE 'engram-%' ORDER BY jobname",
    )
    .await;
    assert_eq!(
        jobs,
        [
            ("engram-expire", "*/5 * * * *"),
            ("engram-purge", "0 4 * * 0"),
            ("engram-rescore", "17 3 * * *")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
}

#[tokio::test]
async fn stats_tokens_erase_and_app_role_examples() {
    let db = TestDb::new(4).await;
    create(&db.admin, "alice", "alice likes tea", &[1.0, 0.0, 0.0, 0.0], "").await;
    create(&db.admin, "bob", "bob likes chess", &[0.0, 1.0, 0.0, 0.0], "").await;
    db.admin
        .batch_execute("SELECT count(*) FROM engram.search(owner => 'alice', query_text => 'zebra')")
        .await
        .unwrap();

    let out = run(&db.name, "stats.sql");
    assert!(
        out.contains("zebra"),
        "the misses query shows the failed search:\n{out}"
    );

    run(&db.name, "tokens.sql");
    let tokens: Vec<(String, bool)> = pairs(
        &db.admin,
        "SELECT label, revoked_at IS NOT NULL FROM engram.tokens WHERE owner = 'alice' ORDER BY label",
    )
    .await;
    assert_eq!(
        tokens,
        [("alice-ci", true), ("alice-laptop", true), ("alice-laptop-2", false)].map(|(l, r)| (l.to_string(), r))
    );

    let out = run(&db.name, "erase_owner.sql");
    assert!(out.contains("erase_owner"), "{out}");
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.memories WHERE owner = 'alice'").await,
        0
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.tokens WHERE owner = 'alice'").await,
        0
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.memories WHERE owner = 'bob'").await,
        1
    );

    // The application role: a member of engram_agent only, confined by the binding.
    run(&db.name, "app_role.sql");
    run(&db.name, "app_role.sql"); // idempotent
    let bob = db.token("bob", false).await;
    let app = connect_as(&db.name, "my_app").await;
    app.batch_execute("BEGIN").await.unwrap();
    app.query_one("SELECT engram.bind($1)", &[&bob])
        .await
        .expect("my_app binds a token");
    let seen: i64 = app
        .query_one("SELECT count(*) FROM engram.memories", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(seen, 1, "my_app sees only the bound owner's rows");
    let (code, _) = sqlstate(app.query("DELETE FROM engram.memories", &[]).await);
    assert_eq!(code, "42501", "my_app cannot write the tables directly");
    app.batch_execute("ROLLBACK").await.unwrap();
}
