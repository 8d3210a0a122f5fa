//! Scope lists (engram.scope_blocks, engram.scope_entries,
//! engram.scope_sizes) and the text index (engram.text_postings,
//! engram.text_terms, engram.text_sizes): every write path keeps them equal
//! to what the memories say they should be, search reads them, and the
//! restricted role cannot.

use engram_tests::*;

async fn assert_exact(db: &TestDb, after: &str) {
    assert_eq!(count(db, LIST_DRIFT).await, 0, "scope lists drifted after {after}");
}

async fn run(db: &TestDb, sql: &str) {
    db.admin
        .batch_execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
}

#[tokio::test]
async fn every_write_path_keeps_the_lists_exact() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let tea = create(
        a,
        "alice",
        "alice drinks green tea",
        &axis(4, 0, 0.0),
        "tags => '{drinks,home}'",
    )
    .await;
    let chess = create(
        a,
        "alice",
        "alice plays chess on sundays",
        &axis(4, 1, 0.0),
        "tags => '{games}'",
    )
    .await;
    let lyon = create(a, "alice", "alice lived in Lyon", &axis(4, 2, 0.0), "tags => '{home}'").await;
    create(a, "bob", "bob drinks coffee", &axis(4, 0, 0.1), "tags => '{drinks}'").await;
    create(
        a,
        "bob",
        "bob told alice's ghost a secret",
        &axis(4, 3, 0.0),
        "internal_type => 'ghost', tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'alice')",
    )
    .await;
    // tags repeated within one memory count once per list
    create(a, "alice", "alice has a cat", &axis(4, 3, 0.2), "tags => '{pets,pets}'").await;
    assert_exact(&db, "remember").await;
    // one entry per memory in its owner's list, one per distinct tag:
    // 3 + 2 + 2 + 2 + (1 + 3 internal tags of the ghost memory) + 2
    assert_eq!(count(&db, "SELECT count(*) FROM engram.scope_entries").await, 15);

    run(
        &db,
        &format!("SELECT engram.update(owner => 'alice', id => '{tea}', tags => '{{drinks}}')"),
    )
    .await;
    assert_exact(&db, "update of tags").await;
    run(
        &db,
        &format!(
            "SELECT engram.update(owner => 'alice', id => '{chess}', content => 'alice plays go on sundays',
                                  embedding => '[0.2,1,0.3,0]')"
        ),
    )
    .await;
    assert_exact(&db, "update of content and embedding").await;
    run(
        &db,
        &format!("SELECT engram.flag(owner => 'alice', id => '{chess}', reason => 'unsure')"),
    )
    .await;
    assert_exact(&db, "flag").await;
    run(&db, &format!("SELECT engram.forget(owner => 'alice', id => '{lyon}')")).await;
    assert_exact(&db, "soft forget").await;
    run(
        &db,
        &format!("SELECT engram.forget(owner => 'alice', id => '{tea}', hard => true)"),
    )
    .await;
    assert_exact(&db, "hard forget").await;

    let merged: Vec<Uuid> = vec![
        create(a, "carol", "carol likes jazz", &axis(4, 0, 0.0), "tags => '{music}'").await,
        create(a, "carol", "carol likes blues", &axis(4, 1, 0.0), "tags => '{music}'").await,
    ];
    a.execute(
        "SELECT engram.consolidate(owner => 'carol', ids => $1, content => 'carol likes jazz and blues',
                                   embedding => '[1,1,0,0]', tags => '{music,taste}')",
        &[&merged],
    )
    .await
    .unwrap();
    assert_exact(&db, "consolidate").await;

    // captured events have no embedding (no entries) until the backlog fills it
    let event: Uuid = a
        .query_one(
            "SELECT id FROM engram.capture(owner => 'carol', event_type => 'observation', content => 'the build passed',
                                           session_id => 's1')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_exact(&db, "capture").await;
    a.execute(
        "SELECT engram.set_embeddings(owner => 'carol', ids => ARRAY[$1::uuid], embeddings => ARRAY['[0,0,1,0]'::vector])",
        &[&event],
    )
    .await
    .unwrap();
    assert_exact(&db, "set_embeddings").await;

    create(
        a,
        "carol",
        "carol's parking spot is 12",
        &axis(4, 2, 0.0),
        "ttl => '1 hour'",
    )
    .await;
    run(
        &db,
        "UPDATE engram.memories SET expires_at = now() - interval '1 minute' WHERE content LIKE '%parking%'",
    )
    .await;
    run(&db, "SELECT engram.expire()").await;
    assert_exact(&db, "expire").await;
    run(&db, "SELECT engram.purge(older_than => interval '0')").await;
    assert_exact(&db, "purge").await;
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.memories WHERE status <> 'active'").await,
        0
    );

    // a DBA's bulk writes go through the same triggers
    run(
        &db,
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, embedding)
         SELECT 'dave', 'note ' || n, sha256(n::text::bytea), sha256(n::text::bytea),
                ARRAY['t' || (n % 3)], ('[' || n || ',1,0,0]')::vector
         FROM generate_series(1, 50) n",
    )
    .await;
    assert_exact(&db, "bulk INSERT").await;
    run(
        &db,
        "DELETE FROM engram.memories WHERE owner = 'dave' AND content LIKE 'note 1%'",
    )
    .await;
    assert_exact(&db, "bulk DELETE").await;

    // the text index follows contents (a DBA's own UPDATE), internal types,
    // imports, keyed writes and erasures
    run(
        &db,
        "UPDATE engram.memories SET content = content || ' revised by the DBA' WHERE owner = 'dave' AND content LIKE 'note 2%'",
    )
    .await;
    assert_exact(&db, "a DBA's UPDATE of contents").await;
    run(
        &db,
        "UPDATE engram.memories SET internal_type = 'agent' WHERE owner = 'dave' AND content LIKE 'note 3%'",
    )
    .await;
    assert_exact(&db, "a DBA's UPDATE of internal types").await;
    run(
        &db,
        "SELECT engram.import_memory(owner => 'frank', memory => jsonb_set(e.memory, '{id}', to_jsonb(gen_random_uuid())))
         FROM engram.export_memories(owner => 'dave', lim => 10) e WHERE e.memory ->> 'internal_type' IS NULL",
    )
    .await;
    assert_exact(&db, "import_memory").await;
    run(
        &db,
        "SELECT engram.put(owner => 'frank', namespace => '{prefs}', key => 'theme', content => 'dark theme please');
         SELECT engram.put(owner => 'frank', namespace => '{prefs}', key => 'theme', content => 'light theme now')",
    )
    .await;
    assert_exact(&db, "put over a key").await;
    run(&db, "SELECT engram.erase_memories(owner => 'frank')").await;
    assert_exact(&db, "erase_memories").await;
    run(&db, "SELECT engram.erase_owner(owner => 'carol')").await;
    assert_exact(&db, "erase_owner").await;
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM engram.text_sizes WHERE owner IN ('carol', 'frank')"
        )
        .await,
        0
    );

    run(&db, "TRUNCATE engram.memories CASCADE").await;
    for table in [
        "scope_entries",
        "scope_sizes",
        "text_postings",
        "text_terms",
        "text_sizes",
    ] {
        assert_eq!(
            count(&db, &format!("SELECT count(*) FROM engram.{table}")).await,
            0,
            "{table}"
        );
    }
}

/// Lists longer than one block (90 entries at 64 dimensions): blocks fill
/// and a new one starts, removals leave holes and drop emptied blocks,
/// appends after removals, and engram.rebuild_lists packs them full again.
#[tokio::test]
async fn long_lists_fill_split_and_empty_their_blocks() {
    let db = TestDb::new(64).await;
    const BLOCKS: &str = "SELECT count(*) FROM engram.scope_blocks WHERE list = engram._list_key(NULL, '')";
    run(
        &db,
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, embedding)
         SELECT 'erin', 'note ' || n, sha256(n::text::bytea), sha256(n::text::bytea), ARRAY['t' || (n % 4)],
                (SELECT array_agg(sin(n * d)) FROM generate_series(1, 64) d)::vector
         FROM generate_series(1, 400) n",
    )
    .await;
    assert_exact(&db, "a bulk INSERT over several blocks").await;
    assert_eq!(count(&db, BLOCKS).await, 5, "400 entries in blocks of 90");
    run(
        &db,
        "DELETE FROM engram.memories WHERE content ~ '^note [0-9]*[13579]$'",
    )
    .await;
    assert_exact(&db, "deleting every odd row").await;
    run(
        &db,
        "DELETE FROM engram.memories WHERE content ~ '^note (1[0-7][0-9]|[0-9]?[0-9])$'",
    )
    .await;
    assert_exact(&db, "emptying the first blocks").await;
    assert!(count(&db, BLOCKS).await < 5, "emptied blocks go");
    run(
        &db,
        "UPDATE engram.memories SET tags = ARRAY['moved'] WHERE content ~ '^note 2[0-9]0$';
         UPDATE engram.memories SET status = 'archived' WHERE content ~ '^note 3[0-9]2$';
         INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, embedding)
         SELECT 'erin', 'late ' || n, sha256(('late' || n)::bytea), sha256(('late' || n)::bytea), '{t1}',
                (SELECT array_agg(cos(n * d)) FROM generate_series(1, 64) d)::vector
         FROM generate_series(1, 150) n",
    )
    .await;
    assert_exact(&db, "retagging, archiving and appending after removals").await;
    // (a literal id: Citus refuses volatile functions in an UPDATE's SET)
    run(
        &db,
        "UPDATE engram.memories SET id = 'a0000000-0000-4000-8000-000000000003' WHERE content = 'late 3'",
    )
    .await;
    assert_exact(&db, "a DBA giving a memory a new id").await;
    // Its snapshot must follow its lock: refused in REPEATABLE READ.
    let refused = db
        .admin
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT engram.rebuild_lists();")
        .await;
    let (state, _) = sqlstate(refused);
    assert_eq!(state, "25001");
    run(&db, "ROLLBACK").await;
    let sparse = count(&db, BLOCKS).await;
    let listed: i64 = count(&db, "SELECT engram.rebuild_lists()").await;
    assert_eq!(listed, count(&db, "SELECT count(*) FROM engram.scope_entries").await);
    assert_exact(&db, "engram.rebuild_lists()").await;
    let packed = count(&db, BLOCKS).await;
    let whole = count(
        &db,
        "SELECT n FROM engram.scope_sizes WHERE list = engram._list_key(NULL, '')",
    )
    .await;
    assert_eq!(packed, (whole + 89) / 90, "rebuilt blocks are full ({sparse} before)");
    // search through the rebuilt lists finds each stored vector first
    let top: String = db
        .admin
        .query_one(
            "SELECT content FROM engram.search(owner => 'erin', k => 1, tags_all => '{t1}',
                 query_embedding => (SELECT array_agg(cos(7 * d)) FROM generate_series(1, 64) d)::vector)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(top, "late 7");
}

#[tokio::test]
async fn search_reads_the_smallest_list_of_its_scope() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let near = create(
        a,
        "alice",
        "alice drinks green tea",
        &axis(4, 0, 0.0),
        "tags => '{drinks,home}'",
    )
    .await;
    let other = create(a, "alice", "alice plays chess", &axis(4, 1, 0.0), "tags => '{drinks}'").await;
    let search =
        "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]', tags_all => '{drinks,home}')";
    let ids = |rows: Vec<tokio_postgres::Row>| rows.iter().map(|r| r.get::<_, Uuid>(0)).collect::<Vec<_>>();
    assert_eq!(ids(a.query(search, &[]).await.unwrap()), vec![near]);
    // A tag no memory carries has no list: nothing matches.
    let none = a
        .query(
            "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]', tags_all => '{drinks,nowhere}')",
            &[],
        )
        .await
        .unwrap();
    assert!(none.is_empty());
    // Hide the memory's entry in the 'home' list (the smaller one): the
    // search reads that list, so it no longer sees the memory, while the
    // planner-estimated path (archived rows included) still does. This is
    // white-box on purpose: it fails if search stops using the lists.
    run(
        &db,
        &format!(
            "DELETE FROM engram.scope_entries WHERE memory_id = '{near}'
               AND list = engram._list_key(NULL, 'home');
             DELETE FROM engram.scope_blocks WHERE list = engram._list_key(NULL, 'home') AND n = 1;
             UPDATE engram.scope_blocks SET entries = engram._block_without(entries, n, '{near}'), n = n - 1
             WHERE list = engram._list_key(NULL, 'home')"
        ),
    )
    .await;
    assert!(a.query(search, &[]).await.unwrap().is_empty());
    let all = a
        .query(
            "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]', tags_all => '{drinks,home}',
                                          include_archived => true)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(ids(all), vec![near]);
    // The owner's whole list still ranks both.
    let whole = a
        .query(
            "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]', tags_all => '{drinks}')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(ids(whole), vec![near, other]);
}

#[tokio::test]
async fn the_restricted_role_cannot_read_the_lists() {
    let db = TestDb::new(4).await;
    create(
        &db.admin,
        "alice",
        "alice drinks green tea",
        &axis(4, 0, 0.0),
        "tags => '{drinks}'",
    )
    .await;
    let agent = db.agent("alice").await;
    for table in [
        "engram.scope_blocks",
        "engram.scope_entries",
        "engram.scope_sizes",
        "engram.text_postings",
        "engram.text_terms",
        "engram.text_sizes",
    ] {
        let (state, _) = sqlstate(agent.query(&format!("SELECT * FROM {table}"), &[]).await);
        assert_eq!(state, "42501", "{table} must not be readable by engram_agent");
        let (state, _) = sqlstate(agent.execute(&format!("DELETE FROM {table}"), &[]).await);
        assert_eq!(state, "42501", "{table} must not be writable by engram_agent");
    }
    // and its searches still work through them
    let found = agent
        .query(
            "SELECT id FROM engram.search(query_embedding => '[1,0,0,0]', tags_all => '{drinks}')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
}

/// A search runs from its arguments to its hits in one Rust call: no
/// plpgsql frame is on a vector or hybrid search's path (engram.search
/// finds who it acts for, the time its query names and its hits in the
/// same process); the list rerank reads its blocks through
/// engram._candidates, and a filter passed gets its checks. A helper that
/// came back onto the path would show here.
#[tokio::test]
async fn a_search_or_a_context_runs_no_plpgsql_function() {
    if on_citus() {
        // (a coordinator plans the legs for its workers: other calls)
        return;
    }
    let db = TestDb::new(4).await;
    let c = &db.admin;
    c.batch_execute(
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, embedding)
         SELECT 'o', 'note ' || n, sha256(n::text::bytea), sha256(n::text::bytea), ARRAY['t' || (n % 4)],
                ARRAY[sin(n), cos(n), sin(2 * n), 1]::vector
         FROM generate_series(1, 600) n;
         ANALYZE engram.memories;",
    )
    .await
    .unwrap();
    // (the counts of the search's own calls: pg_stat_xact_user_functions
    // may still hold an earlier transaction's, not yet flushed)
    let calls_now = || async move {
        let rows = c
            .query(
                "SELECT s.funcname::text, l.lanname::text, s.calls FROM pg_stat_xact_user_functions s
                 JOIN pg_catalog.pg_proc p ON p.oid = s.funcid JOIN pg_catalog.pg_language l ON l.oid = p.prolang
                 WHERE s.schemaname = 'engram' ORDER BY 1",
                &[],
            )
            .await
            .unwrap();
        rows.iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1), r.get::<_, i64>(2)))
            .collect::<Vec<_>>()
    };
    let called = |search: &'static str| async move {
        c.batch_execute("BEGIN; SET LOCAL track_functions = 'all'")
            .await
            .unwrap();
        let before = calls_now().await;
        let hits = c.query(search, &[]).await.unwrap_or_else(|e| panic!("{search}: {e:?}"));
        let after = calls_now().await;
        c.batch_execute("ROLLBACK").await.unwrap();
        let calls: Vec<(String, String, i64)> = after
            .into_iter()
            .map(|(f, lang, n)| {
                let earlier = before.iter().find(|(g, _, _)| *g == f).map_or(0, |(_, _, m)| *m);
                (f, lang, n - earlier)
            })
            .filter(|(_, _, n)| *n > 0)
            .collect();
        (hits.len(), calls)
    };
    for search in [
        "SELECT * FROM engram.search(owner => 'o', query_embedding => '[0.3, 0.8, 0.2, 1]', k => 10)",
        "SELECT * FROM engram.search(owner => 'o', query_embedding => '[0.3, 0.8, 0.2, 1]', k => 5,
                                     tags_all => ARRAY['t1'])",
        // hybrid: the text leg reads the text index in the same call
        "SELECT * FROM engram.search(owner => 'o', query_embedding => '[0.3, 0.8, 0.2, 1]',
                                     query_text => 'note 17', k => 10)",
    ] {
        let (hits, calls) = called(search).await;
        assert!(hits >= 5, "{search}: {hits} hits");
        let plpgsql: Vec<&str> = calls
            .iter()
            .filter(|(_, lang, _)| lang != "c")
            .map(|(f, _, _)| f.as_str())
            .collect();
        let filters = search.contains("tags_all");
        // (the checks of a filter passed)
        let expected: &[&str] = if filters {
            &["_check_1d", "_check_flat_filters"]
        } else {
            &[]
        };
        assert_eq!(plpgsql, expected, "{search}: {calls:?}");
        for (f, _, n) in calls.iter().filter(|(_, lang, _)| lang == "c") {
            let allowed = ["search", "_candidates"].contains(&f.as_str()) || (filters && f == "_check_filters");
            assert!(allowed, "{search}: engram.{f} ({n} calls) on the path: {calls:?}");
        }
        let once = |f: &str| calls.iter().find(|(g, _, _)| g == f).map(|(_, _, n)| *n);
        assert_eq!(once("search"), Some(1), "{calls:?}");
    }
    // The context package: its sections by kept statements, its memories
    // by the search's steps, in the one call.
    c.batch_execute(
        "SELECT engram.workspace_create(owner => 'o', name => 'w');
         SELECT engram.state_save(owner => 'o', workspace => 'w', name => 'today', active_task => 'notes');
         SELECT engram.slot_set(owner => 'o', label => 'persona', content => 'terse', pinned => true);
         SELECT engram.capture(owner => 'o', event_type => 'tool_invocation', content => 'ran ls', session_id => 's',
                               workspace => 'w', tool_name => 'ls', success => true);
         SELECT engram.summarize(owner => 'o', session_id => 's', content => 'listed the notes');",
    )
    .await
    .unwrap();
    for context in [
        "SELECT engram.context(owner => 'o', query_embedding => '[0.3, 0.8, 0.2, 1]', workspace => 'w')::text",
        // (the workspace of the session's latest event)
        "SELECT engram.context(owner => 'o', query_text => 'note 17', session_id => 's')::text",
    ] {
        let (_, calls) = called(context).await;
        let plpgsql: Vec<&str> = calls
            .iter()
            .filter(|(_, lang, _)| lang != "c")
            .map(|(f, _, _)| f.as_str())
            .collect();
        assert!(plpgsql.is_empty(), "{context}: {calls:?}");
        // every section is there
        let package: String = c.query_one(context, &[]).await.unwrap().get(0);
        for part in ["\"today\"", "persona", "listed the notes", "ran ls", "note "] {
            assert!(package.contains(part), "{context}: no {part} in {package}");
        }
        for (f, _, n) in calls.iter().filter(|(_, lang, _)| lang == "c") {
            assert!(
                ["context", "_candidates"].contains(&f.as_str()),
                "{context}: engram.{f} ({n} calls) on the path: {calls:?}"
            );
        }
    }
}
