//! Bad input gets an ERROR with a meaningful SQLSTATE and a message that says
//! what to do, and changes nothing.

use engram_tests::*;

/// Row counts of every engram table, to show a refused call changed nothing.
async fn snapshot(db: &TestDb) -> Vec<i64> {
    let mut out = Vec::new();
    for t in [
        "engram.memories",
        "engram.revisions",
        "engram.audit_log",
        "engram.memory_access",
    ] {
        out.push(count(db, &format!("SELECT count(*) FROM {t}")).await);
    }
    out.push(
        count(
            db,
            "SELECT count(*) FROM engram.memories WHERE revision > 1 OR flag_count > 0 OR status <> 'active'",
        )
        .await,
    );
    out
}

#[tokio::test]
async fn refused_writes_change_nothing() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let id = create(c, "alice", "seed memory", &[1.0, 0.0, 0.0, 0.0], "").await;
    let before = snapshot(&db).await;
    let eight_mib = "x".repeat(8 * 1024 * 1024);

    let cases: Vec<(&str, String, &str, &str)> = vec![
        // (what, sql, expected sqlstate, a word the message must contain)
        ("wrong dimension", "SELECT * FROM engram.remember(owner => 'alice', content => 'c', embedding => '[1,2,3]')".into(), "22000", "dimensions"),
        ("zero vector", "SELECT * FROM engram.remember(owner => 'alice', content => 'c', embedding => '[0,0,0,0]')".into(), "22000", "zero"),
        ("empty content", "SELECT * FROM engram.remember(owner => 'alice', content => '   ', embedding => '[0,1,0,0]')".into(), "22023", "empty"),
        ("no content", "SELECT * FROM engram.remember(owner => 'alice', embedding => '[0,1,0,0]')".into(), "22004", "content"),
        ("unknown kind", "SELECT * FROM engram.remember(owner => 'alice', content => 'c', kind => 'poem')".into(), "22023", "semantic"),
        ("unknown author", "SELECT * FROM engram.remember(owner => 'alice', content => 'c', author_type => 'robot')".into(), "22023", "human"),
        ("unknown internal type", "SELECT * FROM engram.remember(owner => 'alice', content => 'c', internal_type => 'spirit')".into(), "22023", "ghost"),
        ("importance out of range", "SELECT * FROM engram.remember(owner => 'alice', content => 'c', importance => 7)".into(), "22023", "importance"),
        ("metadata not an object", "SELECT * FROM engram.remember(owner => 'alice', content => 'c', metadata => '[1,2]')".into(), "22023", "object"),
        ("blank tag", "SELECT * FROM engram.remember(owner => 'alice', content => 'c', tags => '{\"\"}')".into(), "22023", "tag"),
        ("no owner", "SELECT * FROM engram.remember(content => 'c')".into(), "22004", "engram.owner"),
        ("threshold out of range", "SELECT * FROM engram.remember(owner => 'alice', content => 'c', conflict_threshold => 2)".into(), "22023", "between"),
        ("update wrong dims", format!("SELECT engram.update(owner => 'alice', id => '{id}', content => 'n', embedding => '[1,2]')"), "22000", "dimensions"),
        ("update not found", format!("SELECT engram.update(owner => 'alice', id => '{}', tags => '{{a}}')", Uuid::new_v4()), "P0002", "engram.search"),
        ("flag without reason", format!("SELECT engram.flag(owner => 'alice', id => '{id}')"), "22004", "reason"),
        ("consolidate empty ids", "SELECT engram.consolidate(owner => 'alice', ids => '{}', content => 'c', embedding => '[1,0,0,0]')".into(), "22023", "ids"),
        ("consolidate duplicate ids", format!("SELECT engram.consolidate(owner => 'alice', ids => ARRAY['{id}','{id}']::uuid[], content => 'c', embedding => '[1,0,0,0]')"), "22023", "once"),
        ("crystallize without name", format!("SELECT engram.crystallize(owner => 'alice', ids => ARRAY['{id}']::uuid[], content => 'c', embedding => '[1,0,0,0]')"), "22023", "name"),
        ("search wrong dims", "SELECT * FROM engram.search(owner => 'alice', query_embedding => '[1,2]')".into(), "22000", "dimensions"),
        ("search unknown kind", "SELECT * FROM engram.search(owner => 'alice', query_text => 'x', kinds => '{poem}')".into(), "22023", "kind"),
        ("list unknown status", "SELECT * FROM engram.list(owner => 'alice', status => 'deleted')".into(), "22023", "status"),
        ("list bad cursor", "SELECT * FROM engram.list(owner => 'alice', after => 'v1.created_at.zz.nope')".into(), "22023", "cursor"),
        ("purge without interval", "SELECT engram.purge()".into(), "22023", "older_than"),
        ("configure bad dims", "SELECT engram.configure(embedding_dims => 0)".into(), "22023", "embedding_dims"),
        ("configure with embeddings stored", "SELECT engram.configure(embedding_dims => 8)".into(), "55000", "dimension"),
    ];
    for (what, sql, code, word) in cases {
        let (got, msg) = sqlstate(c.query(sql.as_str(), &[]).await);
        assert_eq!(got, code, "{what}: {msg}");
        assert!(msg.contains(word), "{what}: message {msg:?} should mention {word:?}");
        assert_eq!(snapshot(&db).await, before, "{what} changed something");
    }

    // 8 MiB of content: refused with the documented limit
    let (code, msg) = sqlstate(try_remember(c, "alice", &eight_mib, &[0.0, 1.0, 0.0, 0.0], "").await);
    assert_eq!(code, "54000");
    assert!(msg.contains("262144"), "{msg}");
    // NaN and infinity never become vectors
    for v in ["[NaN,1,0,0]", "[Infinity,1,0,0]"] {
        let (code, _) = sqlstate(
            c.query(
                "SELECT * FROM engram.remember(owner => 'alice', content => 'c', embedding => $1::text::vector)",
                &[&v],
            )
            .await,
        );
        assert!(code.starts_with("22"), "{v}: {code}");
    }
    let (code, _) = sqlstate(
        c.query(
            "SELECT * FROM engram.remember(owner => 'alice', content => 'c', embedding => ARRAY[1, 'NaN', 0, 0]::real[]::vector)",
            &[],
        )
        .await,
    );
    assert!(code.starts_with("22"), "{code}");
    assert_eq!(snapshot(&db).await, before);
}

#[tokio::test]
async fn sql_metacharacters_and_unicode_are_stored_literally() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let tags = vec![
        "it's".to_string(),
        "a; DROP TABLE engram.memories; --".to_string(),
        "\"quoted\"".to_string(),
        "日本語 🧠".to_string(),
        "%_wild\\card".to_string(),
    ];
    let content = "Robert'); DROP TABLE students;-- likes 'tea'";
    let row = c
        .query_one(
            "SELECT status, id FROM engram.remember(owner => $1, content => $2, embedding => '[1,0,0,0]', tags => $3)",
            &[&"o'hara; --", &content, &tags],
        )
        .await
        .unwrap();
    let id: Uuid = row.get(1);
    let back = c
        .query_one("SELECT content, tags, owner FROM engram.memories WHERE id = $1", &[&id])
        .await
        .unwrap();
    assert_eq!(back.get::<_, String>(0), content);
    assert_eq!(back.get::<_, Vec<String>>(1), tags);
    assert_eq!(back.get::<_, String>(2), "o'hara; --");
    // filters with the same values match exactly those tags
    for t in &tags {
        let n = c
            .query(
                "SELECT id FROM engram.search(owner => $1, query_text => 'tea', tags_all => ARRAY[$2])",
                &[&"o'hara; --", t],
            )
            .await
            .unwrap()
            .len();
        assert_eq!(n, 1, "{t}");
    }
    let n = c
        .query(
            "SELECT id FROM engram.list(owner => $1, tags_all => ARRAY['%'])",
            &[&"o'hara; --"],
        )
        .await
        .unwrap()
        .len();
    assert_eq!(n, 0, "tag filters are exact, not patterns");
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memories").await, 1);
}

#[tokio::test]
async fn content_at_the_limit_is_accepted() {
    let db = TestDb::new(4).await;
    let content = "y".repeat(256 * 1024);
    let (status, _, _) = remember(&db.admin, "alice", &content, &[1.0, 0.0, 0.0, 0.0], "").await;
    assert_eq!(status, "created");
}
