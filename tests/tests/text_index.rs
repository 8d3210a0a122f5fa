//! The text leg's bounded read over the text index: it returns what scoring
//! every matching row returns, reads a bounded number of rows when a query
//! word is in every memory, and a caller limited to scope tags is scored
//! with the statistics of its own scope, never the owner's.

use engram_tests::*;

/// 3,000 memories of one owner: "item" in every one, "batch<n % 10>" in a
/// tenth each, "rare<n>" in one each, lengths varied by filler, an error
/// code in a few, tags and kinds in turn.
async fn load(db: &TestDb) {
    db.admin
        .batch_execute(
            "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, kind)
             SELECT 'alice',
                    'item ' || n || ' batch' || (n % 10) || ' rare' || n
                        || CASE WHEN n % 7 = 0 THEN ' deploy ERR-' || (4500 + n % 3) ELSE '' END
                        || CASE WHEN n % 500 = 0 THEN ' ADMIN42 login locked' ELSE '' END
                        || repeat(' filler words about the weather', n % 5),
                    sha256(n::text::bytea), sha256(n::text::bytea),
                    ARRAY['t' || (n % 4)], CASE WHEN n % 3 = 0 THEN 'episodic' ELSE 'semantic' END
             FROM generate_series(1, 3000) n",
        )
        .await
        .unwrap();
}

/// (id, score) of the text leg over alice's scope with the kinds given,
/// read bounded (engram._text_index_read, Rust) or by scoring every match
/// (engram._lexical_indexed).
async fn read(db: &TestDb, query: &str, n: i32, kinds: &str, exhaustive: bool) -> Vec<(Uuid, f32)> {
    let sql = if exhaustive {
        format!(
            "SELECT l.id, l.rank FROM engram._lexical_indexed(
                 ROW('alice', '{{active}}', NULL, {kinds}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::engram.read_scope,
                 $1, $2, engram._exact_query($1)) l"
        )
    } else {
        format!(
            "SELECT l.id, l.rank FROM engram._text_index_read(
                 'alice', '{{active}}', NULL, {kinds}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                 $1, $2) l"
        )
    };
    db.admin
        .query(&sql, &[&query, &n])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// Rows of engram.memories this transaction fetched so far.
async fn fetched(c: &tokio_postgres::Transaction<'_>) -> i64 {
    c.query_one(
        "SELECT (coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0))::bigint FROM pg_stat_xact_user_tables
         WHERE relid = 'engram.memories'::regclass",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test]
async fn the_bounded_read_equals_scoring_every_match() {
    let db = TestDb::new(4).await;
    load(&db).await;
    assert_eq!(count(&db, LIST_DRIFT).await, 0);
    let many_words: String = (0..70).map(|i| format!("zq{i} ")).collect::<String>() + "rare77";
    let queries = [
        "item",
        "item 1234",
        "batch3",
        "batch3 batch4 weather",
        "what was the rare17 item about",
        "deploy failed with ERR-4501",
        "rare17 login for ADMIN42@corp.io",
        "item batch1 batch2 batch3 batch4 batch5 filler weather",
        many_words.as_str(),
        "nothing here matches",
    ];
    let scopes = [
        "NULL",                 // every kind
        "'{episodic}'::text[]", // a third of the rows
    ];
    for scope in scopes {
        for q in queries {
            for n in [10, 100] {
                let bounded = read(&db, q, n, scope, false).await;
                let every = read(&db, q, n, scope, true).await;
                assert_eq!(bounded.len(), every.len(), "{q} / {scope} / {n}");
                for (b, e) in bounded.iter().zip(&every) {
                    assert!((b.1 - e.1).abs() < 1e-6, "{q} / {scope}: {bounded:?} vs {every:?}");
                }
                // the same memories, up to ties at the last score
                if let Some(last) = every.last().map(|x| x.1) {
                    let above = |v: &[(Uuid, f32)]| {
                        let mut ids: Vec<Uuid> = v.iter().filter(|x| x.1 > last + 1e-6).map(|x| x.0).collect();
                        ids.sort();
                        ids
                    };
                    assert_eq!(above(&bounded), above(&every), "{q} / {scope} / {n}");
                }
            }
        }
    }
    // the rare word and the exact token come first
    assert!(read(&db, "what was the rare17 item about", 10, "NULL", false).await[0].1 > 0.5);
    let code = read(&db, "deploy failed with ERR-4501", 10, "NULL", false).await;
    assert!(code[0].1 > 1.0, "the exact-token bonus: {code:?}");
}

#[tokio::test]
async fn a_word_in_every_memory_reads_a_bounded_number_of_rows() {
    let mut db = TestDb::new(4).await;
    load(&db).await;
    let tx = db.admin.transaction().await.unwrap();
    let fields = "'alice', '{active}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL";
    let mut reads = Vec::new();
    for read in [
        format!("SELECT * FROM engram._text_index_read({fields}, 'item', 100)"),
        format!("SELECT * FROM engram._lexical_indexed(ROW({fields})::engram.read_scope, 'item', 100, NULL)"),
    ] {
        let before = fetched(&tx).await;
        let hits = tx.query(&read, &[]).await.unwrap();
        assert_eq!(hits.len(), 100);
        reads.push(fetched(&tx).await - before);
    }
    assert!(reads[1] >= 3000, "scoring every match reads every row: {reads:?}");
    assert!(reads[0] <= 400, "the bounded read stops early: {reads:?}");
    // and search reads through it (with the table's statistics: search
    // fetches its hits' rows by key, which a planner that believes the
    // owner has a handful of rows reads by owner instead)
    tx.batch_execute("ANALYZE engram.memories").await.unwrap();
    let before = fetched(&tx).await;
    let found = tx
        .query(
            "SELECT id FROM engram.search(owner => 'alice', query_text => 'item', k => 10)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 10);
    let searched = fetched(&tx).await - before;
    assert!(searched <= 400, "engram.search read {searched} rows");
    tx.rollback().await.unwrap();
    db.admin.batch_execute("SELECT 1").await.unwrap();
}

/// A caller limited to scope tags (a ghost conversation) sees only its
/// scope's memories, and the text scores it gets must not tell it anything
/// of the others: adding memories outside its scope that hold the query's
/// words changes none of its scores (with the owner's statistics they
/// would).
#[tokio::test]
async fn scoped_callers_are_scored_within_their_scope() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    const ALICE: &str = "engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'alice')";
    const CAROL: &str = "engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'carol')";
    const ALICE_SCOPE: &str = "engram.scope_tags('ghost', ghost_type => 'user', ghost_owner => 'alice')";
    for i in 0..5 {
        create(
            a,
            "bob",
            &format!("project kiwi note {i} with salary details"),
            &axis(4, 0, 0.1 * i as f32),
            &format!("internal_type => 'ghost', tags => {ALICE}, kind => 'episodic'"),
        )
        .await;
    }
    let scores = |sql: String| async move {
        a.query(&sql, &[])
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
            .iter()
            .map(|r| (r.get::<_, Uuid>(0), r.get::<_, f32>(1)))
            .collect::<Vec<_>>()
    };
    let scoped = format!(
        "SELECT id, score FROM engram.search(owner => 'bob', query_text => 'kiwi salary', internal_type => 'ghost',
                                             scope_tags => {ALICE_SCOPE}) ORDER BY id"
    );
    let before = scores(scoped.clone()).await;
    assert_eq!(before.len(), 5);
    for i in 0..40 {
        create(
            a,
            "bob",
            &format!("hidden salary review {i}"),
            &axis(4, 1, 0.0),
            &format!("internal_type => 'ghost', tags => {CAROL}, kind => 'episodic'"),
        )
        .await;
    }
    assert_eq!(
        scores(scoped).await,
        before,
        "a scoped caller's scores moved with rows it cannot see"
    );
    // The owner's own memories (no scope tags: the owner sees them all) are
    // scored with the owner's statistics: once "salary" is common, the
    // same memory scores lower.
    let mine = create(a, "bob", "kiwi salary talk", &axis(4, 2, 0.0), "kind => 'episodic'").await;
    let own =
        format!("SELECT id, score FROM engram.search(owner => 'bob', query_text => 'kiwi salary') WHERE id = '{mine}'");
    let owner_before = scores(own.clone()).await;
    for i in 0..40 {
        create(
            a,
            "bob",
            &format!("salary review {i}"),
            &axis(4, 1, 0.0),
            "kind => 'episodic'",
        )
        .await;
    }
    let owner_after = scores(own).await;
    assert_eq!(owner_before.len(), 1);
    assert_eq!(owner_after.len(), 1);
    assert!(
        owner_after[0].1 < owner_before[0].1,
        "{owner_before:?} -> {owner_after:?}"
    );
}
