//! Keyed memories (engram.put, get_key, delete_key, namespaces), the
//! namespace prefix and value/metadata filters of list and search, TTLs
//! renewed on read, and the embedding model on record.

use engram_tests::*;
use serde_json::{json, Value};

/// put as `c`: (status, id, revision).
async fn put(c: &impl Sql, owner: &str, ns: &[&str], key: &str, value: Value, extra: &str) -> (String, Uuid, i32) {
    let ns: Vec<String> = ns.iter().map(|s| s.to_string()).collect();
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(", {extra}")
    };
    let row = c
        .query_one(
            &format!(
                "SELECT status, id, revision FROM engram.put(owner => $1, namespace => $2, key => $3, value => $4{extra})"
            ),
            &[&owner, &ns, &key, &value],
        )
        .await
        .unwrap_or_else(|e| panic!("put {key}: {e:?}"));
    (row.get(0), row.get(1), row.get(2))
}

/// get_key's value, None when there is no item.
async fn get(c: &impl Sql, owner: &str, ns: &[&str], key: &str) -> Option<Value> {
    let ns: Vec<String> = ns.iter().map(|s| s.to_string()).collect();
    c.query(
        "SELECT value FROM engram.get_key(owner => $1, namespace => $2, key => $3)",
        &[&owner, &ns, &key],
    )
    .await
    .expect("get_key")
    .first()
    .map(|r| r.get(0))
}

/// A put stores, revises or leaves alone the memory at its key; the same
/// value under two keys is two memories; a put is never refused as a
/// conflict; revisions keep every earlier value.
#[tokio::test]
async fn put_revises_the_memory_at_its_key() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let (s1, id, r1) = put(a, "alice", &["prefs"], "theme", json!({"theme": "dark"}), "").await;
    assert_eq!((s1.as_str(), r1), ("created", 1));
    let (s2, id2, r2) = put(a, "alice", &["prefs"], "theme", json!({"theme": "dark"}), "").await;
    assert_eq!(
        (s2.as_str(), id2, r2),
        ("unchanged", id, 1),
        "the same state again is no revision"
    );
    let (s3, id3, r3) = put(a, "alice", &["prefs"], "theme", json!({"theme": "light"}), "").await;
    assert_eq!((s3.as_str(), id3, r3), ("revised", id, 2));
    assert_eq!(
        get(a, "alice", &["prefs"], "theme").await,
        Some(json!({"theme": "light"}))
    );

    // The same value under another key, and an unkeyed memory with the
    // same content: three memories, none a duplicate of another.
    let (s4, other, _) = put(a, "alice", &["prefs"], "theme-copy", json!({"theme": "light"}), "").await;
    assert_eq!(s4, "created");
    assert_ne!(other, id);
    let (status, _, _) = remember(a, "alice", r#"{"theme": "light"}"#, &axis(4, 0, 0.0), "").await;
    assert_eq!(status, "created");

    // Near-identical embeddings that remember would call a conflict: a put
    // replaces what its key holds and stores.
    let e = vec_text(&axis(4, 1, 0.0));
    for (key, text) in [
        ("deadline", "The launch deadline is May 5"),
        ("deadline2", "The launch deadline is June 10"),
    ] {
        let row = a
            .query_one(
                "SELECT status FROM engram.put(owner => 'alice', namespace => '{facts}', key => $1, content => $2,
                                               embedding => $3::text::vector)",
                &[&key, &text, &e],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, String>(0), "created");
    }

    let history: Vec<(i32, Option<Value>)> = pairs(
        a,
        &format!("SELECT revision, value FROM engram.revisions(owner => 'alice', id => '{id}') ORDER BY revision"),
    )
    .await;
    assert_eq!(
        history,
        vec![
            (1, Some(json!({"theme": "dark"}))),
            (2, Some(json!({"theme": "light"})))
        ]
    );
    // The content search reads is the value's text unless given.
    let content: String = a
        .query_one("SELECT content FROM engram.memories WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        serde_json::from_str::<Value>(&content).unwrap(),
        json!({"theme": "light"})
    );
}

/// delete_key forgets the item (the key is free again), hard erases it
/// with its revisions; missing items read as nothing.
#[tokio::test]
async fn delete_key_frees_the_key() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let (_, id, _) = put(a, "alice", &["a", "b"], "k", json!({"n": 1}), "").await;
    put(a, "alice", &["a", "b"], "k", json!({"n": 2}), "").await;
    let deleted: bool = a
        .query_one(
            "SELECT engram.delete_key(owner => 'alice', namespace => '{a,b}', key => 'k')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(deleted);
    assert_eq!(get(a, "alice", &["a", "b"], "k").await, None);
    let again: bool = a
        .query_one(
            "SELECT engram.delete_key(owner => 'alice', namespace => '{a,b}', key => 'k')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!again, "nothing left to delete");
    // The soft-deleted memory stays (archived), a new put is a new memory.
    let (status, new_id, revision) = put(a, "alice", &["a", "b"], "k", json!({"n": 3}), "").await;
    assert_eq!((status.as_str(), revision), ("created", 1));
    assert_ne!(new_id, id);
    assert_eq!(
        count(
            &db,
            &format!("SELECT count(*) FROM engram.memories WHERE id = '{id}' AND status = 'archived'")
        )
        .await,
        1
    );
    a.query_one(
        "SELECT engram.delete_key(owner => 'alice', namespace => '{a,b}', key => 'k', hard => true)",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(
        count(
            &db,
            &format!("SELECT count(*) FROM engram.memories WHERE id = '{new_id}'")
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &db,
            &format!("SELECT count(*) FROM engram.revisions WHERE memory_id = '{new_id}'")
        )
        .await,
        0
    );
}

/// namespaces lists the paths that hold items: by prefix, suffix, cut to
/// a depth, paged.
#[tokio::test]
async fn namespaces_list_the_paths_in_use() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    for ns in [
        &["users", "u1", "prefs"][..],
        &["users", "u1", "notes"],
        &["users", "u2", "prefs"],
        &["teams", "t1"],
    ] {
        put(a, "alice", ns, "k", json!({"x": 1}), "").await;
    }
    put(a, "bob", &["users", "u9", "prefs"], "k", json!({"x": 1}), "").await;
    let list = |sql: &str| {
        let sql = format!("SELECT array_to_string(n, '.') FROM engram.namespaces(owner => 'alice'{sql}) n");
        async move { column::<String>(a, &sql).await }
    };
    assert_eq!(
        list("").await,
        vec!["teams.t1", "users.u1.notes", "users.u1.prefs", "users.u2.prefs"]
    );
    assert_eq!(
        list(", prefix => '{users}'").await,
        vec!["users.u1.notes", "users.u1.prefs", "users.u2.prefs"]
    );
    assert_eq!(
        list(", suffix => '{prefs}'").await,
        vec!["users.u1.prefs", "users.u2.prefs"]
    );
    assert_eq!(list(", max_depth => 2").await, vec!["teams.t1", "users.u1", "users.u2"]);
    assert_eq!(
        list(", \"limit\" => 2, \"offset\" => 1").await,
        vec!["users.u1.notes", "users.u1.prefs"]
    );
    // A label that sorts after the prefix's last one is not under it.
    put(a, "alice", &["usersx"], "k", json!({}), "").await;
    assert_eq!(list(", prefix => '{users}', max_depth => 1").await, vec!["users"]);
}

/// list and search take a namespace prefix and a filter over the value
/// (else the metadata), and return each memory's namespace, key and value.
#[tokio::test]
async fn list_and_search_filter_by_namespace_and_value() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    for (ns, key, value) in [
        (
            &["tasks", "apollo"][..],
            "t1",
            json!({"status": "open", "priority": 3, "title": "fuel check"}),
        ),
        (
            &["tasks", "apollo"],
            "t2",
            json!({"status": "done", "priority": 1, "title": "fuel order"}),
        ),
        (
            &["tasks", "gemini"],
            "t3",
            json!({"status": "open", "priority": 5, "title": "fuel audit"}),
        ),
    ] {
        put(a, "alice", ns, key, value, "").await;
    }
    // An unkeyed memory: its metadata is its document.
    create(
        a,
        "alice",
        "fuel budget approved",
        &axis(4, 0, 0.0),
        r#"metadata => '{"status": "open", "priority": 4}'"#,
    )
    .await;

    let keys = |sql: String| async move {
        let mut v = column::<Option<String>>(a, &sql).await;
        v.sort();
        v
    };
    let list = |args: &str| format!("SELECT key FROM engram.list(owner => 'alice'{args})");
    assert_eq!(
        keys(list(", namespace_prefix => '{tasks,apollo}'")).await,
        vec![Some("t1".into()), Some("t2".into())]
    );
    assert_eq!(
        keys(list(r#", filter => '{"status": "open"}'"#)).await,
        vec![None, Some("t1".into()), Some("t3".into())]
    );
    assert_eq!(
        keys(list(r#", filter => '{"priority": {"$gte": 3, "$lt": 5}}'"#)).await,
        vec![None, Some("t1".into())]
    );
    assert_eq!(
        keys(list(
            r#", namespace_prefix => '{tasks}', filter => '{"status": {"$ne": "done"}, "priority": {"$in": [5, 7]}}'"#
        ))
        .await,
        vec![Some("t3".into())]
    );
    let search = |args: &str| format!("SELECT key FROM engram.search(owner => 'alice', query_text => 'fuel'{args})");
    assert_eq!(
        keys(search(
            r#", filter => '{"status": "open"}', namespace_prefix => '{tasks}'"#
        ))
        .await,
        vec![Some("t1".into()), Some("t3".into())]
    );
    let hit: (Vec<String>, Value) = a
        .query_one(
            r#"SELECT namespace, value FROM engram.search(owner => 'alice', query_text => 'audit',
                                                          filter => '{"priority": 5}')"#,
            &[],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(hit.0, vec!["tasks", "gemini"]);
    assert_eq!(hit.1["title"], "fuel audit");

    // Bad filters and prefixes are refused before anything is read.
    for bad in [
        r#"filter => '[1]'"#,
        r#"filter => '{"a": {"$regex": "x"}}'"#,
        r#"filter => '{"a": {"$gt": [1]}}'"#,
        r#"namespace_prefix => '{"a.b"}'"#,
    ] {
        let (code, message) = sqlstate(a.query(&list(&format!(", {bad}")), &[]).await);
        assert_eq!(code, "22023", "{bad}: {message}");
    }
}

/// The filter's equalities are served by the index over the documents.
#[tokio::test]
async fn filter_equalities_use_the_document_index() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    for i in 0..50 {
        put(
            a,
            "alice",
            &["n"],
            &format!("k{i}"),
            json!({"group": i % 5, "i": i}),
            "",
        )
        .await;
    }
    a.batch_execute("ANALYZE engram.memories").await.unwrap();
    let plan: String = a
        .query(
            "EXPLAIN SELECT id FROM engram.memories WHERE coalesce(value, metadata) @> '{\"group\": 3}'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n");
    if !on_citus() {
        let mut c = db.admin_connection().await;
        let t = c.transaction().await.unwrap();
        t.batch_execute("SET LOCAL enable_seqscan = off").await.unwrap();
        let plan: String = t
            .query(
                "EXPLAIN SELECT id FROM engram.memories WHERE coalesce(value, metadata) @> '{\"group\": 3}'",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(plan.contains("memories_document"), "{plan}");
    } else {
        assert!(!plan.is_empty());
    }
    let n = column::<String>(
        a,
        r#"SELECT key FROM engram.list(owner => 'alice', filter => '{"group": 3}', "limit" => 100)"#,
    )
    .await;
    assert_eq!(n.len(), 10);
}

/// A read that asks renews the lifetime of what it returns; an expired
/// item reads as nothing and frees its key.
#[tokio::test]
async fn ttls_renew_on_reads_that_ask() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let (_, id, _) = put(a, "alice", &["s"], "k", json!({"v": 1}), "ttl => '1 hour'").await;
    // Most of the hour has passed.
    a.execute(
        "UPDATE engram.memories SET expires_at = now() + interval '1 minute' WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
    let left = |sql: &'static str| async move { a.query_one(sql, &[&id]).await.unwrap().get::<_, f64>(0) };
    a.query(
        "SELECT * FROM engram.get_key(owner => 'alice', namespace => '{s}', key => 'k')",
        &[],
    )
    .await
    .unwrap();
    let secs = left("SELECT extract(epoch FROM expires_at - now())::float8 FROM engram.memories WHERE id = $1").await;
    assert!(secs < 120.0, "a plain read renews nothing: {secs}");
    a.query(
        "SELECT * FROM engram.get_key(owner => 'alice', namespace => '{s}', key => 'k', refresh_ttl => true)",
        &[],
    )
    .await
    .unwrap();
    let secs = left("SELECT extract(epoch FROM expires_at - now())::float8 FROM engram.memories WHERE id = $1").await;
    assert!(secs > 3500.0, "renewed to an hour: {secs}");
    // list and search renew too.
    a.execute(
        "UPDATE engram.memories SET expires_at = now() + interval '1 minute' WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
    a.query("SELECT * FROM engram.list(owner => 'alice', refresh_ttl => true)", &[])
        .await
        .unwrap();
    let secs = left("SELECT extract(epoch FROM expires_at - now())::float8 FROM engram.memories WHERE id = $1").await;
    assert!(secs > 3500.0, "list renewed it: {secs}");

    // Expired: gone for reads, the key is free.
    a.execute(
        "UPDATE engram.memories SET expires_at = now() - interval '1 second' WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
    assert_eq!(get(a, "alice", &["s"], "k").await, None);
    let (status, new_id, _) = put(a, "alice", &["s"], "k", json!({"v": 2}), "").await;
    assert_eq!(status, "created");
    assert_ne!(new_id, id);
}

/// Owners and contexts stay apart: a token reads and writes only its
/// owner's keys, and a key held in another context is not the caller's.
#[tokio::test]
async fn keys_belong_to_their_owner_and_context() {
    let db = TestDb::new(4).await;
    put(&db.admin, "alice", &["prefs"], "pin", json!({"pin": "4711"}), "").await;
    let bob = db.agent("bob").await;
    assert_eq!(get(&bob, "bob", &["prefs"], "pin").await, None);
    let (code, _) = sqlstate(
        bob.query(
            "SELECT * FROM engram.get_key(owner => 'alice', namespace => '{prefs}', key => 'pin')",
            &[],
        )
        .await,
    );
    assert_eq!(code, "42501");
    // bob's own item at the same address is his.
    put(&bob, "bob", &["prefs"], "pin", json!({"pin": "0000"}), "").await;
    assert_eq!(
        get(&db.admin, "alice", &["prefs"], "pin").await,
        Some(json!({"pin": "4711"}))
    );

    // Each context has its own keys: an agent-context item neither shows
    // in nor blocks the normal context's item at the same address.
    db.admin
        .query_one(
            "SELECT status FROM engram.put(owner => 'alice', namespace => '{work}', key => 'plan',
                 value => '{\"step\": 1}', internal_type => 'agent', tags => engram.internal_tags('agent'))",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        get(&db.admin, "alice", &["work"], "plan").await,
        None,
        "another context's item is not read"
    );
    let names = column::<Vec<String>>(&db.admin, "SELECT n FROM engram.namespaces(owner => 'alice') n").await;
    assert!(!names.contains(&vec!["work".to_string()]), "{names:?}");
    let (status, _, _) = put(&db.admin, "alice", &["work"], "plan", json!({"step": 2}), "").await;
    assert_eq!(status, "created");
    let agent_view: Value = db
        .admin
        .query_one(
            "SELECT value FROM engram.get_key(owner => 'alice', namespace => '{work}', key => 'plan',
                                              internal_type => 'agent')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(agent_view, json!({"step": 1}));
}

/// A put states what holds now: revising an item that a correction
/// superseded makes it valid again, and reads return it.
#[tokio::test]
async fn a_put_revives_a_superseded_item() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let (_, id, _) = put(a, "alice", &["cfg"], "v", json!({"v": 1}), "").await;
    let (status, _, _) = remember(
        a,
        "alice",
        "v is 2 now",
        &axis(4, 2, 0.0),
        &format!("supersedes => ARRAY['{id}']::uuid[]"),
    )
    .await;
    assert_eq!(status, "created");
    assert!(column::<String>(
        a,
        "SELECT key FROM engram.list(owner => 'alice', namespace_prefix => '{cfg}')"
    )
    .await
    .is_empty());
    let (status, same, revision) = put(a, "alice", &["cfg"], "v", json!({"v": 3}), "").await;
    assert_eq!((status.as_str(), same, revision), ("revised", id, 2));
    let row = a
        .query_one(
            "SELECT valid_to IS NULL, flag_reason IS NULL FROM engram.memories WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0) && row.get::<_, bool>(1));
    assert_eq!(
        column::<String>(
            a,
            "SELECT key FROM engram.list(owner => 'alice', namespace_prefix => '{cfg}')"
        )
        .await,
        vec!["v"]
    );
}

/// A read that renews a lifetime never undoes a put that changed it
/// meanwhile.
#[tokio::test]
async fn a_renewal_never_overrides_a_concurrent_put() {
    let db = TestDb::new(4).await;
    let (_, id, _) = put(&db.admin, "alice", &["s"], "k", json!({"v": 1}), "ttl => '1 hour'").await;
    let writer = db.admin_connection().await;
    writer.batch_execute("BEGIN").await.unwrap();
    writer
        .query_one(
            "SELECT status FROM engram.put(owner => 'alice', namespace => '{s}', key => 'k', value => '{\"v\": 2}')",
            &[],
        )
        .await
        .unwrap();
    let reader = db.admin_connection().await;
    let read = tokio::spawn(async move {
        reader
            .query("SELECT * FROM engram.list(owner => 'alice', refresh_ttl => true)", &[])
            .await
            .map(|rows| rows.len())
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    writer.batch_execute("COMMIT").await.unwrap();
    read.await.unwrap().unwrap();
    let row = db
        .admin
        .query_one(
            "SELECT ttl IS NULL, expires_at IS NULL FROM engram.memories WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert!(
        row.get::<_, bool>(0) && row.get::<_, bool>(1),
        "the put made it permanent"
    );
}

/// Bad addresses and values are refused and change nothing.
#[tokio::test]
async fn bad_puts_are_refused() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    for (args, code) in [
        ("namespace => '{}', key => 'k', value => '{}'", "22023"),
        ("namespace => NULL, key => 'k', value => '{}'", "22004"),
        ("namespace => '{a}', key => '', value => '{}'", "22023"),
        ("namespace => '{a}', key => NULL, value => '{}'", "22004"),
        ("namespace => '{\"a.b\"}', key => 'k', value => '{}'", "22023"),
        ("namespace => '{a}', key => 'k', value => '[1]'", "22023"),
        ("namespace => '{a}', key => 'k'", "22004"),
        (
            "namespace => '{a}', key => 'k', value => '{}', ttl => '-1 day'",
            "22023",
        ),
        (
            "namespace => '{a}', key => 'k', value => '{}', kind => 'episodic'",
            "22023",
        ),
    ] {
        let (got, message) = sqlstate(
            a.query(&format!("SELECT * FROM engram.put(owner => 'alice', {args})"), &[])
                .await,
        );
        assert_eq!(got, code, "{args}: {message}");
    }
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memories").await, 0);
}

/// Export and import keep a keyed memory's address, value, lifetime and
/// the values of its revisions.
#[tokio::test]
async fn export_and_import_keep_keys() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    put(
        a,
        "alice",
        &["prefs"],
        "theme",
        json!({"theme": "dark"}),
        "ttl => '30 days'",
    )
    .await;
    put(
        a,
        "alice",
        &["prefs"],
        "theme",
        json!({"theme": "light"}),
        "ttl => '30 days'",
    )
    .await;
    let exported: Value = a
        .query_one("SELECT memory FROM engram.export_memories(owner => 'alice')", &[])
        .await
        .unwrap()
        .get(0);
    // Into another owner (new id: ids are unique across owners).
    let mut copy = exported.clone();
    copy["id"] = json!(Uuid::new_v4().to_string());
    let status: String = a
        .query_one("SELECT engram.import_memory(owner => 'carol', memory => $1)", &[&copy])
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "created");
    assert_eq!(
        get(a, "carol", &["prefs"], "theme").await,
        Some(json!({"theme": "light"}))
    );
    let (ttl, values): (String, Vec<Value>) = a
        .query_one(
            "SELECT m.ttl::text, (SELECT array_agg(r.value ORDER BY r.revision) FROM engram.revisions r
                                  WHERE r.owner = m.owner AND r.memory_id = m.id)
             FROM engram.memories m WHERE m.owner = 'carol'",
            &[],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(ttl, "30 days");
    assert_eq!(values, vec![json!({"theme": "dark"})]);
    // The key is held: a second import of the same item is a duplicate.
    copy["id"] = json!(Uuid::new_v4().to_string());
    let status: String = a
        .query_one("SELECT engram.import_memory(owner => 'carol', memory => $1)", &[&copy])
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "duplicate");
}

/// configure records the embedding model; changing it under stored
/// vectors is refused with the way to re-embed.
#[tokio::test]
async fn the_embedding_model_is_on_record() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let model = || async move {
        a.query_one("SELECT engram.embedding_model()", &[])
            .await
            .unwrap()
            .get::<_, Option<String>>(0)
    };
    assert_eq!(model().await, None);
    let shown: Value = a
        .query_one("SELECT engram.configure(embedding_model => 'test/model-a')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(shown["embedding_model"], "test/model-a");
    assert_eq!(model().await.as_deref(), Some("test/model-a"));
    // The dumped configuration row carries it.
    let saved: Option<String> = a
        .query_one("SELECT embedding_model FROM engram.configuration", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(saved.as_deref(), Some("test/model-a"));
    // Another model while no vector is stored: allowed.
    a.query_one("SELECT engram.configure(embedding_model => 'test/model-b')", &[])
        .await
        .unwrap();
    create(a, "alice", "a fact", &axis(4, 0, 0.0), "").await;
    let (code, message) = sqlstate(
        a.query("SELECT engram.configure(embedding_model => 'test/model-c')", &[])
            .await,
    );
    assert_eq!(code, "55000", "{message}");
    assert_eq!(model().await.as_deref(), Some("test/model-b"));
    a.query_one("SELECT engram.configure(embedding_model => 'test/model-b')", &[])
        .await
        .unwrap();
    let (code, _) = sqlstate(a.query("SELECT engram.configure(embedding_model => ' ')", &[]).await);
    assert_eq!(code, "22023");
    // An agent reads it (engram-mcp checks it at start) and cannot set it.
    let agent = db.agent_without_owner().await;
    let seen: Option<String> = agent
        .query_one("SELECT engram.embedding_model()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(seen.as_deref(), Some("test/model-b"));
    let (code, _) = sqlstate(
        agent
            .query("SELECT engram.configure(embedding_model => 'x')", &[])
            .await,
    );
    assert_eq!(code, "42501");
}

/// A user erases all of their own memories (self-service): every memory
/// of theirs goes, in every context, with its revisions; another owner's,
/// their tokens, slots and the resources published for them stay; an
/// agent context cannot do it.
#[tokio::test]
async fn a_user_erases_their_own_memories() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    put(a, "alice", &["prefs"], "theme", json!({"theme": "dark"}), "").await;
    put(a, "alice", &["prefs"], "theme", json!({"theme": "light"}), "").await;
    create(a, "alice", "alice likes tea", &axis(4, 0, 0.0), "").await;
    create(a, "bob", "bob likes coffee", &axis(4, 1, 0.0), "").await;
    a.batch_execute(
        "SELECT engram.slot_set(owner => 'alice', label => 'plan', content => 'ship');
         SELECT engram.resource_create(owner => 'alice', name => 'handbook', content => 'the team handbook',
                                       embedding => '[0, 0, 1, 0]')",
    )
    .await
    .unwrap();
    let agent_ctx = db
        .platform_agent("platform", "act_as => $2, internal_type => 'agent'", &["alice"])
        .await;
    let (code, _) = sqlstate(agent_ctx.query("SELECT engram.erase_memories()", &[]).await);
    assert_eq!(code, "42501");
    let alice = db.agent("alice").await;
    let counts: Value = alice
        .query_one("SELECT engram.erase_memories()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(counts["memories"], 2);
    // The resource a platform published for alice is the platform's to withdraw.
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM engram.memories WHERE owner = 'alice' AND source <> 'resource'"
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM engram.memories WHERE owner = 'alice' AND source = 'resource'"
        )
        .await,
        1
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.revisions r JOIN engram.memories m ON m.owner = r.owner AND m.id = r.memory_id WHERE r.owner = 'alice' AND m.source <> 'resource'").await,
        0
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.memories WHERE owner = 'bob'").await,
        1
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.slots WHERE owner = 'alice'").await,
        1
    );
    // The token still works: alice starts again.
    put(&alice, "alice", &["prefs"], "theme", json!({"theme": "dark"}), "").await;
    let (code, _) = sqlstate(alice.query("SELECT engram.erase_memories(owner => 'bob')", &[]).await);
    assert_eq!(code, "42501");
}

/// A narrow filter never cuts a vector search short: where the planner's
/// estimate picks the HNSW walk (settings that force it here), a walk that
/// finds fewer rows than asked is followed by an exact scan; a filter that
/// matches nothing returns nothing.
#[tokio::test]
async fn a_narrow_filter_finds_every_match_whatever_the_plan() {
    let db = TestDb::new(4).await;
    let a = db.admin_connection().await;
    a.batch_execute(
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, embedding, metadata)
         SELECT 'alice', 'note ' || n, sha256(convert_to('note ' || n, 'UTF8')), sha256(convert_to('k' || n, 'UTF8')),
                ARRAY[1, (n % 10) / 10.0, (n % 7) / 7.0, 0.1]::vector(4),
                CASE WHEN n % 100 = 0 THEN '{\"tag\": \"rare\"}' ELSE '{\"tag\": \"common\"}' END::jsonb
         FROM generate_series(1, 600) n;
         ANALYZE engram.memories;
         SET engram.exact_search_rows = 0;
         SET engram.hnsw_min_selectivity = 0;
         SET engram.list_search_rows = 0;",
    )
    .await
    .unwrap();
    let found = |filter: &'static str| {
        let a = &a;
        async move {
            column::<String>(
                a,
                &format!(
                    "SELECT content FROM engram.search(owner => 'alice', query_embedding => '[1, 0.5, 0.5, 0.1]',
                                                       k => 20, include_archived => true, filter => '{filter}')"
                ),
            )
            .await
        }
    };
    assert_eq!(found(r#"{"tag": "rare"}"#).await.len(), 6);
    assert!(found(r#"{"tag": "none"}"#).await.is_empty());
    assert!(found(r#"{"n": {"$gt": 5}}"#).await.is_empty());
    assert_eq!(found(r#"{"tag": {"$in": ["rare"]}}"#).await.len(), 6);
}
