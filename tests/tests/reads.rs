//! search / recall / list / revisions / stats against a real cluster.

use engram_tests::*;
use tokio_postgres::Client;

async fn ids(c: &Client, sql: &str) -> Vec<Uuid> {
    c.query(sql, &[]).await.expect(sql).iter().map(|r| r.get(0)).collect()
}

#[tokio::test]
async fn vector_search_ranks_by_similarity_and_reports_scores() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let near = create(c, "alice", "near", &[1.0, 0.1, 0.0, 0.0], "").await;
    let mid = create(c, "alice", "mid", &[1.0, 1.0, 0.0, 0.0], "").await;
    let far = create(c, "alice", "far", &[0.0, 0.0, 1.0, 0.0], "").await;
    let rows = c
        .query(
            "SELECT id, similarity, score, trust_score FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]')",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<Uuid> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(got, vec![near, mid, far]);
    let sim: f32 = rows[0].get(1);
    let score: f32 = rows[0].get(2);
    let trust: f32 = rows[0].get(3);
    assert!((sim - 0.995).abs() < 0.01, "{sim}");
    // relevance × trust × (1 − 0.3 × 0): an agent memory has trust 0.7
    assert!((score - sim * trust).abs() < 1e-4, "{score} vs {sim} × {trust}");
    // min_similarity drops the unrelated one
    let got = ids(
        c,
        "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]', min_similarity => 0.5)",
    )
    .await;
    assert_eq!(got, vec![near, mid]);
}

#[tokio::test]
async fn search_reports_each_hits_source_in_both_legs() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let note = create(c, "alice", "ferry timetable note", &[1.0, 0.0, 0.0, 0.0], "").await;
    let resource: String = c
        .query_one(
            "SELECT engram.resource_create(owner => 'alice', name => 'ferry runbook',
                 content => 'ferry timetable runbook', embedding => '[0.9,0.1,0,0]') ->> 'id'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let resource: Uuid = resource.parse().unwrap();
    // Vector only, then hybrid (the fused leg builds its hits apart).
    for sql in [
        "SELECT id, source FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]')",
        "SELECT id, source FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]', query_text => 'ferry timetable')",
    ] {
        let mut got: Vec<(Uuid, String)> = c
            .query(sql, &[])
            .await
            .expect(sql)
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        got.sort();
        let mut want = vec![(note, "memory".to_string()), (resource, "resource".to_string())];
        want.sort();
        assert_eq!(got, want, "{sql}");
    }
}

/// The text leg (0.14.0): the share of the query's IDF a row holds times
/// BM25's length factor. Rare words count more than common ones, a long row
/// does not win by holding more words, and how much better one row matches
/// survives into the hybrid relevance.
#[tokio::test]
async fn text_scores_weigh_rare_words_and_length() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let e = "kind => 'episodic'";
    for i in 0..12 {
        create(
            c,
            "alice",
            &format!("weekly team meeting number {i} went fine"),
            &[1.0, 0.0, 0.0, 0.0],
            e,
        )
        .await;
    }
    let kiwi = create(c, "alice", "the kiwi budget was approved", &[0.0, 1.0, 0.0, 0.0], e).await;
    let long = create(
        c,
        "alice",
        &format!(
            "kiwi budget {}",
            "and then we talked at length about many other things ".repeat(40)
        ),
        &[0.0, 0.0, 1.0, 0.0],
        e,
    )
    .await;
    // "meeting" is in 12 rows, "kiwi" and "budget" in two: the rare words win
    let text = ids(
        c,
        "SELECT id FROM engram.search(owner => 'alice', query_text => 'what did the team meeting say about the kiwi budget?', k => 3)",
    )
    .await;
    assert_eq!(
        text[..2],
        [kiwi, long],
        "rare words first, the short row before the long one"
    );
    // the same holds fused with vectors that favour the meetings
    let hybrid = c
        .query(
            "SELECT id, score FROM engram.search(owner => 'alice', query_embedding => '[1,0.2,0,0]',
                 query_text => 'kiwi budget', k => 3)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(hybrid[0].get::<_, Uuid>(0), kiwi);
    // a score gap, not a rank step: the second row scores well below the first
    let (first, second): (f32, f32) = (hybrid[0].get(1), hybrid[1].get(1));
    assert!(second < first * 0.9, "{first} vs {second}");
    // a long query's words past the 63 it weighs still find their rows
    let long_query: String = (0..70).map(|i| format!("zq{i} ")).collect::<String>() + "kiwi";
    let found = c
        .query(
            "SELECT id FROM engram.search(owner => 'alice', query_text => $1, k => 5)",
            &[&long_query],
        )
        .await
        .unwrap();
    assert!(
        found.iter().any(|r| r.get::<_, Uuid>(0) == kiwi),
        "the 71st word finds its row"
    );
    // a query of stop words only finds nothing by text
    assert!(ids(
        c,
        "SELECT id FROM engram.search(owner => 'alice', query_text => 'what is the')"
    )
    .await
    .is_empty());
}

#[tokio::test]
async fn hybrid_search_finds_rare_token_the_embedding_misses() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    for i in 0..20 {
        create(
            c,
            "alice",
            &format!("deployment note {i}: all green"),
            &[1.0, 0.05 * i as f32, 0.0, 0.0],
            // events: notes that differ by a number would otherwise supersede each other
            "kind => 'episodic'",
        )
        .await;
    }
    // the error-code memory points elsewhere in embedding space
    let code = create(
        c,
        "alice",
        "deploy failed with ERR-4521 on node 7",
        &[0.0, 0.0, 1.0, 0.0],
        "",
    )
    .await;
    let vector_only = ids(
        c,
        "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]', k => 5)",
    )
    .await;
    assert!(!vector_only.contains(&code));
    let hybrid = ids(
        c,
        "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]', query_text => 'what caused ERR-4521?', k => 5)",
    )
    .await;
    assert_eq!(hybrid[0], code, "the exact-token hit ranks first");
    let ticket = create(c, "alice", "ticket OPS-99172 reopened", &[0.0, 0.0, 0.0, 1.0], "").await;
    let hybrid = ids(
        c,
        "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]', query_text => 'status of OPS-99172', k => 3)",
    )
    .await;
    assert_eq!(
        hybrid[0], ticket,
        "an exact token wins even when the embeddings disagree"
    );
    let lexical = ids(
        c,
        "SELECT id FROM engram.search(owner => 'alice', query_text => 'ERR-4521')",
    )
    .await;
    assert_eq!(lexical, vec![code]);
    // stored and query text share one configuration: inflections match
    let drinks = create(c, "alice", "Alice drinks green tea", &[0.0, 1.0, 0.0, 0.0], "").await;
    let got = ids(
        c,
        "SELECT id FROM engram.search(owner => 'alice', query_text => 'what does she drink?')",
    )
    .await;
    assert_eq!(got, vec![drinks]);
    let (state, _) = sqlstate(c.query("SELECT * FROM engram.search(owner => 'alice')", &[]).await);
    assert_eq!(state, "22004");
}

#[tokio::test]
async fn search_filters_and_k_clamp() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let q = "query_embedding => '[1,0,0,0]'";
    let sem = create(c, "alice", "semantic a", &[1.0, 0.0, 0.0, 0.0], "tags => '{x,y}'").await;
    let epi = create(
        c,
        "alice",
        "episodic b",
        &[1.0, 0.2, 0.0, 0.0],
        "kind => 'episodic', tags => '{x}', session_id => 's1'",
    )
    .await;
    let pro = create(
        c,
        "alice",
        "procedural c",
        &[0.0, 1.0, 0.0, 0.0],
        "kind => 'procedural', tags => '{z}'",
    )
    .await;

    let got = ids(
        c,
        &format!("SELECT id FROM engram.search(owner => 'alice', {q}, kinds => '{{episodic,procedural}}')"),
    )
    .await;
    assert_eq!(got, vec![epi, pro]);
    let got = ids(
        c,
        &format!("SELECT id FROM engram.search(owner => 'alice', {q}, tags_all => '{{x,y}}')"),
    )
    .await;
    assert_eq!(got, vec![sem]);
    let got = ids(
        c,
        &format!("SELECT id FROM engram.search(owner => 'alice', {q}, tags_any => '{{y,z}}')"),
    )
    .await;
    assert_eq!(got, vec![sem, pro]);
    let got = ids(
        c,
        &format!("SELECT id FROM engram.search(owner => 'alice', {q}, session_id => 's1')"),
    )
    .await;
    assert_eq!(got, vec![epi]);
    let got = ids(
        c,
        &format!("SELECT id FROM engram.search(owner => 'alice', {q}, created_after => now() + interval '1 minute')"),
    )
    .await;
    assert!(got.is_empty());
    let got = ids(
        c,
        &format!("SELECT id FROM engram.search(owner => 'alice', {q}, created_before => now() + interval '1 minute')"),
    )
    .await;
    assert_eq!(got.len(), 3);

    // k is clamped to 1..100: huge k is no error and 0 still returns one row
    assert_eq!(
        ids(
            c,
            &format!("SELECT id FROM engram.search(owner => 'alice', {q}, k => 0)")
        )
        .await
        .len(),
        1
    );
    assert_eq!(
        ids(
            c,
            &format!("SELECT id FROM engram.search(owner => 'alice', {q}, k => 2147483647)")
        )
        .await
        .len(),
        3
    );
    // archived memories only on request
    c.query_one("SELECT engram.forget(owner => 'alice', id => $1)", &[&sem])
        .await
        .unwrap();
    assert_eq!(
        ids(c, &format!("SELECT id FROM engram.search(owner => 'alice', {q})"))
            .await
            .len(),
        2
    );
    assert_eq!(
        ids(
            c,
            &format!("SELECT id FROM engram.search(owner => 'alice', {q}, include_archived => true)")
        )
        .await
        .len(),
        3
    );
}

#[tokio::test]
async fn k_above_100_returns_100() {
    let db = TestDb::new(4).await;
    db.admin
        .batch_execute(
            "SELECT engram.remember(owner => 'alice', content => 'fact ' || i, embedding => ARRAY[1, i, 0.5, 0.25]::real[]::vector, force => true)
             FROM generate_series(1, 150) i",
        )
        .await
        .unwrap();
    let n = db
        .admin
        .query(
            "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,1,0,0]', k => 500)",
            &[],
        )
        .await
        .unwrap()
        .len();
    assert_eq!(n, 100);
}

#[tokio::test]
async fn search_records_access_without_rewriting_memory_rows() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let id = create(c, "alice", "a fact", &[1.0, 0.0, 0.0, 0.0], "").await;
    let before: String = c
        .query_one(
            "SELECT ctid::text || xmin::text FROM engram.memories WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    for _ in 0..3 {
        c.query(
            "SELECT * FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]')",
            &[],
        )
        .await
        .unwrap();
    }
    c.query("SELECT * FROM engram.recall(owner => 'alice', id => $1)", &[&id])
        .await
        .unwrap();
    let after: String = c
        .query_one(
            "SELECT ctid::text || xmin::text FROM engram.memories WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(before, after, "a read must not rewrite the memory row");
    let row = c
        .query_one(
            "SELECT access_count, last_accessed_at IS NOT NULL FROM engram.recall(owner => 'alice', id => $1)",
            &[&id],
        )
        .await
        .unwrap();
    // three searches, one recall, and this recall
    assert_eq!(row.get::<_, i64>(0), 5);
    assert!(row.get::<_, bool>(1));
    // a read-only transaction can still search
    c.batch_execute("BEGIN READ ONLY").await.unwrap();
    let n = c
        .query(
            "SELECT * FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]')",
            &[],
        )
        .await
        .unwrap()
        .len();
    c.batch_execute("COMMIT").await.unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn recall_returns_the_full_memory() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let id = create(
        c,
        "alice",
        "Alice's locker code is 4411",
        &[1.0, 0.0, 0.0, 0.0],
        "tags => '{locker}', metadata => '{\"src\": \"chat\"}', importance => 0.9, author_type => 'human', session_id => 'conv-1'",
    )
    .await;
    let r = c
        .query_one(
            "SELECT content, tags, metadata, importance, author_type, trust_score, session_id, revision_count, embedding::text, status
             FROM engram.recall(owner => 'alice', id => $1)",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, String>(0), "Alice's locker code is 4411");
    assert_eq!(r.get::<_, Vec<String>>(1), vec!["locker"]);
    assert_eq!(r.get::<_, serde_json::Value>(2), serde_json::json!({"src": "chat"}));
    assert!((r.get::<_, f32>(3) - 0.9).abs() < 1e-6);
    assert_eq!(r.get::<_, String>(4), "human");
    assert!((r.get::<_, f32>(5) - 1.0).abs() < 1e-6);
    assert_eq!(r.get::<_, String>(6), "conv-1");
    assert_eq!(r.get::<_, i64>(7), 0);
    assert_eq!(r.get::<_, String>(8), "[1,0,0,0]");
    assert_eq!(r.get::<_, String>(9), "active");
    let missing = Uuid::new_v4();
    let (code, msg) = sqlstate(
        c.query("SELECT * FROM engram.recall(owner => 'alice', id => $1)", &[&missing])
            .await,
    );
    assert_eq!(code, "P0002");
    assert_eq!(
        msg,
        format!("memory {missing} not found; use engram.search or engram.list to find memory ids")
    );
}

#[tokio::test]
async fn list_paginates_every_row_exactly_once_in_every_order() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    // equal sort keys (same importance/trust) exercise the id tie-breaker
    c.batch_execute(
        "SELECT engram.remember(owner => 'alice', content => 'item ' || i, embedding => ARRAY[1, i, 0, 0]::real[]::vector,
                                importance => (i % 3) / 2.0, force => true)
         FROM generate_series(1, 23) i",
    )
    .await
    .unwrap();
    let all: Vec<Uuid> = ids(c, "SELECT id FROM engram.memories ORDER BY id").await;
    for order_by in ["created_at", "updated_at", "trust_score", "importance", "access_count"] {
        for descending in [true, false] {
            let mut seen: Vec<Uuid> = Vec::new();
            let mut cursor: Option<String> = None;
            let mut pages = 0;
            loop {
                let rows = c
                    .query(
                        "SELECT id, next_cursor FROM engram.list(owner => 'alice', order_by => $1, descending => $2, \"limit\" => 5, after => $3)",
                        &[&order_by, &descending, &cursor],
                    )
                    .await
                    .unwrap();
                pages += 1;
                seen.extend(rows.iter().map(|r| r.get::<_, Uuid>(0)));
                cursor = rows.last().and_then(|r| r.get::<_, Option<String>>(1));
                if cursor.is_none() {
                    break;
                }
                assert!(pages < 10, "pagination does not terminate");
            }
            assert_eq!(pages, 5, "{order_by} {descending}");
            let mut sorted = seen.clone();
            sorted.sort();
            assert_eq!(sorted, all, "{order_by} desc={descending}: every row exactly once");
        }
    }
    // importance ordering is really by importance
    let imps: Vec<f32> = c
        .query(
            "SELECT importance FROM engram.list(owner => 'alice', order_by => 'importance')",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(imps.windows(2).all(|w| w[0] >= w[1]));
    // a cursor from another order is refused; so is an unknown order
    let cursor: String = c
        .query(
            "SELECT next_cursor FROM engram.list(owner => 'alice', \"limit\" => 1)",
            &[],
        )
        .await
        .unwrap()[0]
        .get(0);
    let (code, _) = sqlstate(
        c.query(
            "SELECT * FROM engram.list(owner => 'alice', order_by => 'importance', after => $1)",
            &[&cursor],
        )
        .await,
    );
    assert_eq!(code, "22023");
    let (code, _) = sqlstate(
        c.query(
            "SELECT * FROM engram.list(owner => 'alice', order_by => 'id; drop table x')",
            &[],
        )
        .await,
    );
    assert_eq!(code, "22023");
}

#[tokio::test]
async fn stats_counts_by_kind_status_source_and_type() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    create(c, "alice", "one", &[1.0, 0.0, 0.0, 0.0], "").await;
    create(c, "alice", "two", &[0.0, 1.0, 0.0, 0.0], "kind => 'episodic'").await;
    c.query(
        "SELECT * FROM engram.remember(owner => 'alice', content => 'no embedding', internal_type => 'agent', tags => engram.internal_tags('agent'))",
        &[],
    )
    .await
    .unwrap();
    create(c, "bob", "bob's", &[0.0, 0.0, 1.0, 0.0], "").await;
    let s: serde_json::Value = c
        .query_one("SELECT engram.stats(owner => 'alice')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(s["total"], 3);
    assert_eq!(s["by_kind"]["semantic"], 2);
    assert_eq!(s["by_kind"]["episodic"], 1);
    assert_eq!(s["by_status"]["active"], 3);
    assert_eq!(s["by_source"]["memory"], 3);
    assert_eq!(s["by_internal_type"]["agent"], 1);
    assert_eq!(s["by_internal_type"]["none"], 2);
    assert!((s["embedded_share"].as_f64().unwrap() - 0.6667).abs() < 1e-3);
    assert!(s["last_write_at"].is_string());
    let all: serde_json::Value = c.query_one("SELECT engram.stats()", &[]).await.unwrap().get(0);
    assert_eq!(all["total"], 4);
}

#[tokio::test]
async fn a_hybrid_search_keeps_a_lexical_hit_whose_embedding_disagrees() {
    // The exact token matches, but the stored embedding points the other way
    // (negative cosine): fusion must keep it, whatever min_similarity says.
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let rare = create(c, "alice", "deploy failed with OPS-99172", &[-1.0, 0.0, 0.0, 0.0], "").await;
    for i in 0..5 {
        create(
            c,
            "alice",
            &format!("routine note {i}"),
            &axis(4, 0, 0.1 * i as f32),
            "kind => 'episodic'",
        )
        .await;
    }
    for min in ["0", "0.5"] {
        let got = ids(
            c,
            &format!(
                "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]',
                     query_text => 'OPS-99172', k => 3, min_similarity => {min})"
            ),
        )
        .await;
        assert!(got.contains(&rare), "min_similarity {min}: {got:?}");
    }
    // min_similarity still filters vector-only rows
    let got = ids(
        c,
        "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]', min_similarity => 0.5, k => 10)",
    )
    .await;
    assert!(!got.contains(&rare));
}

#[tokio::test]
async fn a_memory_past_its_expiry_is_gone_from_reads_before_expire_runs() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let brief = create(
        c,
        "alice",
        "the door code is 1234 today",
        &[1.0, 0.0, 0.0, 0.0],
        "ttl => '1 hour'",
    )
    .await;
    let kept = create(c, "alice", "the office is on floor 3", &[0.0, 1.0, 0.0, 0.0], "").await;
    c.execute(
        "UPDATE engram.memories SET expires_at = now() - interval '1 second' WHERE id = $1",
        &[&brief],
    )
    .await
    .unwrap();
    for sql in [
        "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]')",
        "SELECT id FROM engram.list(owner => 'alice')",
    ] {
        assert_eq!(ids(c, sql).await, vec![kept], "{sql}");
    }
    let lexical = ids(
        c,
        "SELECT id FROM engram.search(owner => 'alice', query_text => 'door code')",
    )
    .await;
    assert!(lexical.is_empty(), "{lexical:?}");
    assert_eq!(
        ids(c, "SELECT id FROM engram.list(owner => 'alice', status => 'expired')").await,
        vec![brief]
    );
    let status: String = c
        .query_one(
            "SELECT status FROM engram.recall(owner => 'alice', id => $1)",
            &[&brief],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "expired");
    let (code, _) = sqlstate(
        c.query(
            "SELECT engram.update(owner => 'alice', id => $1, tags => '{x}')",
            &[&brief],
        )
        .await,
    );
    assert_eq!(code, "55000");
    // the same content again is a new memory, not a duplicate of the expired one
    let (status, id, _) = remember(c, "alice", "the door code is 1234 today", &[1.0, 0.0, 0.0, 0.0], "").await;
    assert_eq!(status, "created");
    assert_ne!(id, Some(brief));
}

#[tokio::test]
async fn an_exact_token_is_not_buried_under_filler_sharing_common_words() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    // 20 memories share every plain word of the question and sit near its
    // embedding; the one holding the error code shares few words and points
    // elsewhere
    for i in 0..20 {
        create(
            c,
            "alice",
            &format!("deploy to staging failed with an error, attempt {i}"),
            &[1.0, 0.05 * i as f32, 0.0, 0.0],
            "kind => 'episodic'",
        )
        .await;
    }
    let code = create(c, "alice", "E1203 on checkout", &[0.0, 0.0, 1.0, 0.0], "").await;
    for query in [
        "deploy to staging failed with error E1203",
        "which deploy failed with E1203?",
    ] {
        let hybrid = ids(
            c,
            &format!(
                "SELECT id FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]', query_text => '{query}', k => 5)"
            ),
        )
        .await;
        assert_eq!(hybrid[0], code, "{query}: the exact-token hit ranks first");
        let text = ids(
            c,
            &format!("SELECT id FROM engram.search(owner => 'alice', query_text => '{query}', k => 5)"),
        )
        .await;
        assert_eq!(text[0], code, "{query}: text-only search ranks it first too");
    }
}
