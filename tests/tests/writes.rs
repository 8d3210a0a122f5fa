//! remember / update / forget / flag / consolidate / crystallize against a
//! real cluster.

use engram_tests::*;

#[tokio::test]
async fn remember_creates_then_dedups_then_conflicts_then_forces() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let tea = [0.9, 0.1, 0.1, 0.0];
    let id = create(c, "alice", "Alice drinks green tea", &tea, "tags => '{drinks}'").await;

    // a retried call returns the same id and writes nothing
    let (status, dup, _) = remember(c, "alice", "Alice drinks green tea", &tea, "tags => '{drinks}'").await;
    assert_eq!((status.as_str(), dup), ("duplicate", Some(id)));
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memories").await, 1);

    // a near-identical embedding conflicts: nothing written, candidates returned
    let close = [0.88, 0.12, 0.1, 0.0];
    let (status, none, conflicts) = remember(c, "alice", "Alice prefers coffee", &close, "").await;
    assert_eq!(status, "conflict");
    assert_eq!(none, None);
    let conflicts = conflicts.unwrap();
    assert_eq!(conflicts[0]["id"], id.to_string());
    assert_eq!(conflicts[0]["content"], "Alice drinks green tea");
    assert!(conflicts[0]["similarity"].as_f64().unwrap() > 0.99);
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memories").await, 1);

    // a custom threshold above the similarity lets it through
    let (status, _, _) = remember(
        c,
        "alice",
        "Alice prefers coffee",
        &close,
        "conflict_threshold => 0.99999",
    )
    .await;
    assert_eq!(status, "created");

    // force overrides and records what it overrode
    let (status, forced, _) = remember(c, "alice", "Alice likes oolong", &tea, "force => true").await;
    assert_eq!(status, "created");
    let meta: serde_json::Value = c
        .query_one(
            "SELECT metadata FROM engram.memories WHERE id = $1",
            &[&forced.unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    let over = meta["engram_forced_over"].as_array().expect("forced_over recorded");
    assert!(over.iter().any(|v| v == &serde_json::json!(id.to_string())));

    // another owner never conflicts with alice
    let (status, _, _) = remember(c, "bob", "Bob drinks green tea", &tea, "").await;
    assert_eq!(status, "created");
}

#[tokio::test]
async fn episodic_memories_never_conflict_but_dedup_per_session() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let v = [0.5, 0.5, 0.1, 0.0];
    create(c, "alice", "user: hello", &v, "kind => 'episodic', session_id => 's1'").await;
    // similar event: stored, not a conflict
    create(
        c,
        "alice",
        "user: hello there",
        &v,
        "kind => 'episodic', session_id => 's1'",
    )
    .await;
    // same event text in another session: a new event
    create(c, "alice", "user: hello", &v, "kind => 'episodic', session_id => 's2'").await;
    // identical event in the same session: a retry
    let (status, _, _) = remember(c, "alice", "user: hello", &v, "kind => 'episodic', session_id => 's1'").await;
    assert_eq!(status, "duplicate");
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memories").await, 3);
}

#[tokio::test]
async fn concurrent_identical_writes_create_one_row() {
    let db = TestDb::new(4).await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let c = db.admin_connection().await;
        tasks.push(tokio::spawn(async move {
            remember(&c, "alice", "the same fact", &[0.1, 0.2, 0.3, 0.4], "")
                .await
                .0
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    assert_eq!(statuses.iter().filter(|s| *s == "created").count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| *s == "duplicate").count(), 7, "{statuses:?}");
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memories").await, 1);
}

#[tokio::test]
async fn ttl_memories_expire() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let short = create(c, "alice", "parking spot B12", &[1.0, 0.0, 0.0, 0.0], "ttl => '1 hour'").await;
    create(c, "alice", "birthday is in May", &[0.0, 1.0, 0.0, 0.0], "").await;
    assert_eq!(
        c.query_one("SELECT engram.expire()", &[])
            .await
            .unwrap()
            .get::<_, i64>(0),
        0
    );
    c.execute(
        "UPDATE engram.memories SET expires_at = now() - interval '1 second' WHERE id = $1",
        &[&short],
    )
    .await
    .unwrap();
    assert_eq!(
        c.query_one("SELECT engram.expire()", &[])
            .await
            .unwrap()
            .get::<_, i64>(0),
        1
    );
    let status: String = c
        .query_one("SELECT status FROM engram.memories WHERE id = $1", &[&short])
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "expired");
    // excluded from search and list by default
    let hits = c
        .query(
            "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]')",
            &[],
        )
        .await
        .unwrap();
    assert!(hits.iter().all(|r| r.get::<_, Uuid>(0) != short));
    let listed = c
        .query("SELECT id FROM engram.list(owner => 'alice')", &[])
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    let expired = c
        .query("SELECT id FROM engram.list(owner => 'alice', status => 'expired')", &[])
        .await
        .unwrap();
    assert_eq!(expired[0].get::<_, Uuid>(0), short);
    // a non-positive ttl is refused
    let (code, _) = sqlstate(try_remember(c, "alice", "x", &[0.0, 0.0, 1.0, 0.0], "ttl => '-1 day'").await);
    assert_eq!(code, "22023");
}

#[tokio::test]
async fn update_keeps_revisions_and_counts_corrections() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let id = create(
        c,
        "alice",
        "Alice lives in Paris",
        &[1.0, 0.0, 0.0, 0.0],
        "tags => '{home}', author_type => 'human'",
    )
    .await;

    // content changes need a new embedding
    let (code, msg) = sqlstate(
        c.query_one(
            "SELECT engram.update(owner => 'alice', id => $1, content => 'Alice lives in Lyon')",
            &[&id],
        )
        .await,
    );
    assert_eq!(code, "22004");
    assert!(msg.contains("embedding"), "{msg}");

    let rev: i32 = c
        .query_one(
            "SELECT engram.update(owner => 'alice', id => $1, content => 'Alice lives in Lyon', embedding => '[0.9,0.1,0,0]', reason => 'moved')",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rev, 2);
    let rev: i32 = c
        .query_one(
            "SELECT engram.update(owner => 'alice', id => $1, tags => '{home,france}', is_correction => false)",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rev, 3);

    let history = c
        .query(
            "SELECT revision, content, reason, is_current FROM engram.revisions(owner => 'alice', id => $1)",
            &[&id],
        )
        .await
        .unwrap();
    let got: Vec<(i32, String, Option<String>, bool)> = history
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, "Alice lives in Paris".into(), Some("moved".into()), false),
            (2, "Alice lives in Lyon".into(), None, false),
            (3, "Alice lives in Lyon".into(), None, true),
        ]
    );
    let row = c
        .query_one(
            "SELECT correction_count, trust_score, revision_count FROM engram.recall(owner => 'alice', id => $1)",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>(0), 1);
    // A correction by the owner re-checks the content: the corrected memory
    // is as trusted as one never checked (human author, age ~0: 1.0), and
    // the nightly rescore agrees.
    assert!((row.get::<_, f32>(1) - 1.0).abs() < 0.001, "{}", row.get::<_, f32>(1));
    assert_eq!(row.get::<_, i64>(2), 2);
    c.execute("SELECT engram.rescore()", &[]).await.unwrap();
    let trust: f32 = c
        .query_one(
            "SELECT trust_score FROM engram.recall(owner => 'alice', id => $1)",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert!((trust - 1.0).abs() < 0.001, "{trust}");

    // nothing to update
    let (code, _) = sqlstate(
        c.query_one("SELECT engram.update(owner => 'alice', id => $1)", &[&id])
            .await,
    );
    assert_eq!(code, "22023");
    // updating into another memory's content is refused
    let other = create(c, "alice", "Alice has a cat", &[0.0, 1.0, 0.0, 0.0], "").await;
    let (code, _) = sqlstate(
        c.query_one(
            "SELECT engram.update(owner => 'alice', id => $1, content => 'Alice lives in Lyon', embedding => '[0,1,0,0]')",
            &[&other],
        )
        .await,
    );
    assert_eq!(code, "23505");
}

#[tokio::test]
async fn forget_soft_archives_and_hard_erases_everything() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let soft = create(c, "alice", "old phone number 555-0100", &[1.0, 0.0, 0.0, 0.0], "").await;
    let ok: bool = c
        .query_one(
            "SELECT engram.forget(owner => 'alice', id => $1, reason => 'changed')",
            &[&soft],
        )
        .await
        .unwrap()
        .get(0);
    assert!(ok);
    let row = c
        .query_one(
            "SELECT status, archive_reason FROM engram.memories WHERE id = $1",
            &[&soft],
        )
        .await
        .unwrap();
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, String>(1)),
        ("archived".into(), "forgotten".into())
    );
    // forgetting again changes nothing
    let again: bool = c
        .query_one("SELECT engram.forget(owner => 'alice', id => $1)", &[&soft])
        .await
        .unwrap()
        .get(0);
    assert!(!again);

    let secret = "SSN 078-05-1120 belongs to Alice";
    let hard = create(c, "alice", secret, &[0.0, 1.0, 0.0, 0.0], "tags => '{pii-tag-xyz}'").await;
    c.query_one(
        "SELECT engram.update(owner => 'alice', id => $1, content => 'SSN 078-05-1120 (verified)', embedding => '[0,1,0.1,0]', reason => 'verified SSN 078-05-1120')",
        &[&hard],
    )
    .await
    .unwrap();
    c.query(
        "SELECT * FROM engram.search(owner => 'alice', query_embedding => '[0,1,0,0]')",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memory_access").await, 1);
    let ok: bool = c
        .query_one(
            "SELECT engram.forget(owner => 'alice', id => $1, hard => true)",
            &[&hard],
        )
        .await
        .unwrap()
        .get(0);
    assert!(ok);
    for table in [
        "engram.memories",
        "engram.revisions",
        "engram.memory_access",
        "engram.audit_log",
    ] {
        let n = count(
            &db,
            &format!(
                "SELECT count(*) FROM {table} t WHERE t::text LIKE '%078-05-1120%' OR t::text LIKE '%pii-tag-xyz%'"
            ),
        )
        .await;
        assert_eq!(n, 0, "{table} still holds erased data");
    }
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memory_access").await, 0);
    assert_eq!(
        count(
            &db,
            &format!("SELECT count(*) FROM engram.revisions WHERE memory_id = '{hard}'")
        )
        .await,
        0
    );
    // the audit log records that an erase happened, without content
    assert_eq!(
        count(&db, &format!("SELECT count(*) FROM engram.audit_log WHERE memory_id = '{hard}' AND action = 'forget' AND details @> '{{\"hard\": true}}'")).await,
        1
    );
}

#[tokio::test]
async fn flag_lowers_trust_and_ranks_below() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let a = create(c, "alice", "The API key rotates monthly", &[1.0, 0.0, 0.0, 0.0], "").await;
    let b = create(c, "alice", "The API key rotates weekly", &[0.0, 1.0, 0.0, 0.0], "").await;
    let trust: f32 = c
        .query_one(
            "SELECT engram.flag(owner => 'alice', id => $1, reason => 'contradicted by ops')",
            &[&a],
        )
        .await
        .unwrap()
        .get(0);
    // agent 0.7 × flagged 0.5
    assert!((trust - 0.35).abs() < 0.001, "{trust}");
    let (code, _) = sqlstate(
        c.query_one("SELECT engram.flag(owner => 'alice', id => $1, reason => '')", &[&a])
            .await,
    );
    assert_eq!(code, "22004");
    // equal relevance to both: the flagged one ranks second
    let hits = c
        .query(
            "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,1,0,0]')",
            &[],
        )
        .await
        .unwrap();
    let ids: Vec<Uuid> = hits.iter().map(|r| r.get(0)).collect();
    assert_eq!(ids, vec![b, a]);
}

#[tokio::test]
async fn consolidate_is_all_or_nothing() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let a = create(
        c,
        "alice",
        "Alice likes jazz",
        &[1.0, 0.0, 0.0, 0.0],
        "tags => '{music}'",
    )
    .await;
    let b = create(
        c,
        "alice",
        "Alice goes to jazz clubs",
        &[0.0, 1.0, 0.0, 0.0],
        "tags => '{music,nightlife}'",
    )
    .await;
    let foreign = create(c, "bob", "Bob likes jazz", &[0.0, 0.0, 1.0, 0.0], "").await;

    // one id alice cannot see: error, and nothing archived or created
    let (code, msg) = sqlstate(
        c.query_one(
            "SELECT engram.consolidate(owner => 'alice', ids => ARRAY[$1, $2, $3]::uuid[], content => 'Alice loves jazz', embedding => '[1,1,0,0]')",
            &[&a, &b, &foreign],
        )
        .await,
    );
    assert_eq!(code, "P0002");
    assert!(msg.contains(&foreign.to_string()), "{msg}");
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.memories WHERE status = 'active'").await,
        3
    );

    let merged: Uuid = c
        .query_one(
            "SELECT engram.consolidate(owner => 'alice', ids => ARRAY[$1, $2]::uuid[], content => 'Alice loves jazz and jazz clubs', embedding => '[1,1,0,0]')",
            &[&a, &b],
        )
        .await
        .unwrap()
        .get(0);
    let rows = c
        .query(
            "SELECT status, archive_reason, merged_into FROM engram.memories WHERE id = ANY($1)",
            &[&vec![a, b]],
        )
        .await
        .unwrap();
    for r in rows {
        assert_eq!(r.get::<_, String>(0), "archived");
        assert_eq!(r.get::<_, String>(1), "consolidated");
        assert_eq!(r.get::<_, Uuid>(2), merged);
    }
    let tags: Vec<String> = c
        .query_one("SELECT tags FROM engram.memories WHERE id = $1", &[&merged])
        .await
        .unwrap()
        .get(0);
    assert_eq!(tags, vec!["music", "nightlife"]);
    // archived originals cannot be merged again
    let (code, _) = sqlstate(
        c.query_one(
            "SELECT engram.consolidate(owner => 'alice', ids => ARRAY[$1]::uuid[], content => 'again', embedding => '[1,0,0,0]')",
            &[&a],
        )
        .await,
    );
    assert_eq!(code, "55000");
}

#[tokio::test]
async fn crystallize_makes_a_read_only_skill() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let a = create(
        c,
        "alice",
        "ran cargo build",
        &[1.0, 0.0, 0.0, 0.0],
        "kind => 'episodic'",
    )
    .await;
    let b = create(
        c,
        "alice",
        "ran cargo pgrx install",
        &[0.0, 1.0, 0.0, 0.0],
        "kind => 'episodic'",
    )
    .await;
    let skill: Uuid = c
        .query_one(
            "SELECT engram.crystallize(owner => 'alice', ids => ARRAY[$1, $2]::uuid[], name => 'install-engram', content => 'Build with cargo, then cargo pgrx install', embedding => '[1,1,0,0]')",
            &[&a, &b],
        )
        .await
        .unwrap()
        .get(0);
    let row = c
        .query_one(
            "SELECT source, kind, metadata->>'name' FROM engram.memories WHERE id = $1",
            &[&skill],
        )
        .await
        .unwrap();
    assert_eq!(
        (
            row.get::<_, String>(0),
            row.get::<_, String>(1),
            row.get::<_, String>(2)
        ),
        ("skill".into(), "procedural".into(), "install-engram".into())
    );
    let pointers = count(
        &db,
        &format!("SELECT count(*) FROM engram.memories WHERE merged_into = '{skill}'"),
    )
    .await;
    assert_eq!(pointers, 2);

    // skills are read-only to update, flag and soft forget
    for sql in [
        "SELECT engram.update(owner => 'alice', id => $1, tags => '{x}')",
        "SELECT engram.flag(owner => 'alice', id => $1, reason => 'bad')",
        "SELECT engram.forget(owner => 'alice', id => $1)",
    ] {
        let (code, msg) = sqlstate(c.query_one(sql, &[&skill]).await);
        assert_eq!(code, "42501", "{sql}");
        assert!(msg.contains("read-only"), "{msg}");
    }
    // hard forget (erasure) still works
    let gone: bool = c
        .query_one(
            "SELECT engram.forget(owner => 'alice', id => $1, hard => true)",
            &[&skill],
        )
        .await
        .unwrap()
        .get(0);
    assert!(gone);
}

#[tokio::test]
async fn every_write_is_audited() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let id = create(c, "alice", "fact one", &[1.0, 0.0, 0.0, 0.0], "").await;
    c.query_one(
        "SELECT engram.update(owner => 'alice', id => $1, tags => '{t}')",
        &[&id],
    )
    .await
    .unwrap();
    c.query_one("SELECT engram.flag(owner => 'alice', id => $1, reason => 'r')", &[&id])
        .await
        .unwrap();
    c.query_one("SELECT engram.forget(owner => 'alice', id => $1)", &[&id])
        .await
        .unwrap();
    let actions: Vec<String> = c
        .query(
            "SELECT action FROM engram.audit_log WHERE memory_id = $1 ORDER BY id",
            &[&id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(actions, vec!["remember", "update", "flag", "forget"]);
    let stats: serde_json::Value = c
        .query_one("SELECT engram.stats(owner => 'alice')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stats["total"], 1);
    assert_eq!(stats["by_status"]["archived"], 1);
    let today = stats["writes_per_day"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(today["writes"], 4);
    assert_eq!(stats["writes_per_day"].as_array().unwrap().len(), 7);
}
