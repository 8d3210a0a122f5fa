//! Reads on a streaming hot standby (the one scripts/test starts with
//! pg_basebackup -R): search, recall, list and context answer there with
//! the primary's rows under the same token binding and row-level security,
//! write nothing (access statistics and misses are skipped in read-only
//! transactions), and writes are refused with Postgres' read-only error.

use engram_tests::*;

#[tokio::test]
async fn standby_serves_bound_reads_and_refuses_writes() {
    let db = TestDb::new(4).await;
    let tea = create(
        &db.admin,
        "alice",
        "alice drinks green tea",
        &[1.0, 0.0, 0.0, 0.0],
        "tags => '{drinks}'",
    )
    .await;
    create(
        &db.admin,
        "alice",
        "alice plays chess on sundays",
        &[0.0, 1.0, 0.0, 0.0],
        "",
    )
    .await;
    let secret = create(&db.admin, "bob", "bob's locker code is 4411", &[1.0, 0.0, 0.0, 0.0], "").await;
    let alice = db.token("alice", false).await;
    let bob = db.token("bob", false).await;
    db.admin
        .batch_execute(
            "SELECT engram.workspace_create(owner => 'alice', name => 'api');
             SELECT engram.state_save(owner => 'alice', workspace => 'api', name => 'v1', active_task => 'ship');",
        )
        .await
        .unwrap();
    let standby_root = connect_replica("postgres", "postgres").await;
    wait_for_replay(&db.admin, &standby_root).await;
    let before = count(&db, "SELECT count(*) FROM engram.memory_access").await;

    let app = connect_replica(&db.name, "engram_app").await;
    let recovery: bool = app.query_one("SELECT pg_is_in_recovery()", &[]).await.unwrap().get(0);
    assert!(recovery, "the test must talk to the standby");
    app.batch_execute("BEGIN").await.unwrap();
    app.query_one("SELECT engram.bind($1)", &[&alice])
        .await
        .expect("bind on the standby");
    let found: Vec<Uuid> = app
        .query(
            "SELECT id FROM engram.search(query_embedding => '[1,0,0,0]', k => 5)",
            &[],
        )
        .await
        .expect("search on the standby")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(found.first(), Some(&tea));
    assert!(!found.contains(&secret), "bob's memory stays bob's on the standby");
    // archived rows included: no scope list covers them, so the plan comes
    // from the planner's estimate (an EXPLAIN, which a standby allows)
    let estimated: Vec<Uuid> = app
        .query(
            "SELECT id FROM engram.search(query_embedding => '[1,0,0,0]', k => 5, include_archived => true)",
            &[],
        )
        .await
        .expect("search of archived rows on the standby")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(estimated.first(), Some(&tea));
    assert!(!estimated.contains(&secret));
    // every argument check a search runs is a read (a standby gives no
    // transaction an id)
    let filtered: Vec<Uuid> = app
        .query(
            "SELECT id FROM engram.search(query_embedding => '[1,0,0,0]', query_text => 'tea yesterday', k => 5,
                                          tags_all => '{drinks}', tags_any => '{drinks,chess}', valid_at => now(),
                                          reference_time => now(), filter => '{}')",
            &[],
        )
        .await
        .expect("filtered search on the standby")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(filtered, vec![tea]);
    let about = app
        .query(
            "SELECT id FROM engram.search(query_text => 'tea', entity => 'nobody', known_at => now())",
            &[],
        )
        .await
        .expect("entity search on the standby");
    assert!(about.is_empty(), "nothing is about an unknown entity");
    let text: Vec<Uuid> = app
        .query("SELECT id FROM engram.search(query_text => 'green tea')", &[])
        .await
        .expect("text search on the standby")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(text, vec![tea]);
    let content: String = app
        .query_one("SELECT content FROM engram.recall(id => $1)", &[&tea])
        .await
        .expect("recall on the standby")
        .get(0);
    assert_eq!(content, "alice drinks green tea");
    let listed = app
        .query("SELECT id FROM engram.list()", &[])
        .await
        .expect("list on the standby")
        .len();
    assert_eq!(listed, 2);
    let context: serde_json::Value = app
        .query_one(
            "SELECT engram.context(query_embedding => '[1,0,0,0]', query_text => 'tea', workspace => 'api')",
            &[],
        )
        .await
        .expect("context on the standby")
        .get(0);
    assert_eq!(context["state"]["active_task"], "ship", "{context}");
    assert!(context["text"].as_str().unwrap().contains("green tea"), "{context}");
    // A search that finds nothing would record a miss on a primary.
    let none = app
        .query("SELECT id FROM engram.search(query_text => 'zebra')", &[])
        .await
        .expect("empty search on the standby");
    assert!(none.is_empty());
    app.batch_execute("COMMIT").await.unwrap();

    // Writes: refused by Postgres, nothing half-done.
    app.batch_execute("BEGIN").await.unwrap();
    app.query_one("SELECT engram.bind($1)", &[&alice]).await.unwrap();
    let (code, message) = sqlstate(
        app.query(
            "SELECT * FROM engram.remember(content => 'on the standby', embedding => '[0,0,1,0]')",
            &[],
        )
        .await,
    );
    assert_eq!(code, "25006", "{message}");
    app.batch_execute("ROLLBACK").await.unwrap();

    // Another owner's token on the standby sees only its own.
    app.batch_execute("BEGIN").await.unwrap();
    app.query_one("SELECT engram.bind($1)", &[&bob]).await.unwrap();
    let r = app.query("SELECT content FROM engram.recall(id => $1)", &[&tea]).await;
    let (code, _) = sqlstate(r);
    assert_eq!(code, "P0002", "alice's memory is not found for bob");
    app.batch_execute("ROLLBACK").await.unwrap();

    // The standby's reads recorded no access on the primary (they cannot).
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memory_access").await, before);
    // Writes on the primary reach the standby's readers.
    let porto = create(&db.admin, "alice", "alice moved to Porto", &[0.0, 0.0, 1.0, 0.0], "").await;
    wait_for_replay(&db.admin, &standby_root).await;
    app.batch_execute("BEGIN").await.unwrap();
    app.query_one("SELECT engram.bind($1)", &[&alice]).await.unwrap();
    let first: Uuid = app
        .query_one(
            "SELECT id FROM engram.search(query_embedding => '[0,0,1,0]', k => 1)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(first, porto);
    app.batch_execute("COMMIT").await.unwrap();
}
