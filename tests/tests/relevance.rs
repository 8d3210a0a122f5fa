//! What a search leaves out and how it groups what it finds: the relevance
//! floor of hybrid search (a hit that shares no word with the query and is
//! far from it in meaning is noise), conversations as answers
//! (`group_by => 'session'`), and the newer of two conflicting memories
//! first.

use engram_tests::*;

/// `(content, similarity)` of a search's hits, best first.
async fn hits(db: &TestDb, owner: &str, args: &str, query: &[f32], text: Option<&str>) -> Vec<(String, Option<f32>)> {
    db.admin
        .query(
            &format!(
                "SELECT content, similarity FROM engram.search(owner => $1, query_embedding => $2::text::vector,
                     query_text => $3{args})"
            ),
            &[&owner, &vec_text(query), &text],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// A unit vector at cosine `c` from axis 0, in the plane of axes 0 and 1.
fn at_cosine(c: f32) -> Vec<f32> {
    vec![c, (1.0 - c * c).sqrt(), 0.0, 0.0]
}

#[tokio::test]
async fn a_hybrid_search_leaves_out_what_matches_nothing() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    // Near the query in meaning, far from it, and far but sharing a word.
    // (as events: two notes far from the query are close to each other)
    let event = "kind => 'episodic'";
    create(a, "vera", "Vera prefers sencha green tea", &at_cosine(0.9), event).await;
    create(a, "vera", "The matcha whisk is in the drawer", &at_cosine(0.1), event).await;
    create(a, "vera", "Lyon has a good tea market", &at_cosine(0.05), event).await;
    let query = axis(4, 0, 0.0);

    // "Lyon": the word finds its memory whatever its cosine; the unrelated
    // matcha note (cosine 0.1, no shared word) is under the floor.
    let found = hits(&db, "vera", "", &query, Some("Lyon")).await;
    let names: Vec<&str> = found.iter().map(|h| h.0.as_str()).collect();
    assert!(names.contains(&"Lyon has a good tea market"), "{found:?}");
    assert!(names.contains(&"Vera prefers sencha green tea"), "{found:?}");
    assert!(!names.iter().any(|n| n.contains("matcha")), "{found:?}");

    // Nothing shares a word and nothing is close: an empty answer.
    assert!(hits(&db, "vera", "", &axis(4, 2, 0.0), Some("zeppelin"))
        .await
        .is_empty());

    // A caller's min_similarity replaces the floor (0 keeps everything),
    // and so does the setting.
    assert_eq!(
        hits(&db, "vera", ", min_similarity => 0", &query, Some("Lyon"))
            .await
            .len(),
        3
    );
    a.batch_execute("SET engram.similarity_floor = 0").await.unwrap();
    assert_eq!(hits(&db, "vera", "", &query, Some("Lyon")).await.len(), 3);
    a.batch_execute("RESET engram.similarity_floor").await.unwrap();

    // A search by meaning alone has no floor: its k nearest, whatever they are.
    assert_eq!(hits(&db, "vera", "", &query, None).await.len(), 3);
    // The context leaves the noise out too.
    let context: serde_json::Value = a
        .query_one(
            "SELECT engram.context(owner => 'vera', query_embedding => $1::text::vector, query_text => 'Lyon')",
            &[&vec_text(&query)],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!context.to_string().contains("matcha"), "{context}");
}

#[tokio::test]
async fn sessions_come_back_with_their_best_turns() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let turn = |session: &str, content: &str, cos: f32| {
        let (session, content) = (session.to_string(), content.to_string());
        async move {
            create(
                a,
                "nadia",
                &content,
                &at_cosine(cos),
                &format!("kind => 'episodic', session_id => '{session}'"),
            )
            .await
        }
    };
    turn("trip", "We talked about the Lisbon trip", 0.95).await;
    turn("trip", "The flight leaves at 7:40", 0.7).await;
    turn("trip", "Hotel near Alfama booked", 0.6).await;
    turn("trip", "Pack the rain jacket", 0.5).await;
    turn("ledger", "The ledger migration starts Monday", 0.9).await;
    turn("ledger", "Backfill runs overnight", 0.3).await;
    turn("garden", "Tomatoes need more sun", 0.2).await;
    create(a, "nadia", "Nadia likes window seats", &at_cosine(0.85), "").await;

    let rows = a
        .query(
            "SELECT session, content FROM engram.search(owner => 'nadia', query_embedding => $1::text::vector,
                 k => 2, group_by => 'session')",
            &[&vec_text(&axis(4, 0, 0.0))],
        )
        .await
        .unwrap();
    let got: Vec<(Option<String>, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    // two sessions, best first, each with at most 3 turns, best turn first
    assert_eq!(
        got,
        vec![
            (Some("trip".into()), "We talked about the Lisbon trip".into()),
            (Some("trip".into()), "The flight leaves at 7:40".into()),
            (Some("trip".into()), "Hotel near Alfama booked".into()),
            (Some("ledger".into()), "The ledger migration starts Monday".into()),
            (Some("ledger".into()), "Backfill runs overnight".into()),
        ]
    );
    // k = 3: the memory without a session is a group of its own
    let third: Vec<Option<String>> = column(
        a,
        &format!(
            "SELECT session FROM engram.search(owner => 'nadia', query_embedding => '{}', k => 3,
                 group_by => 'session')",
            vec_text(&axis(4, 0, 0.0))
        ),
    )
    .await;
    assert_eq!(third.iter().filter(|s| s.is_none()).count(), 1, "{third:?}");
    // every search names each hit's session
    let plain: Vec<Option<String>> = column(
        a,
        &format!(
            "SELECT session FROM engram.search(owner => 'nadia', query_embedding => '{}', k => 1)",
            vec_text(&axis(4, 0, 0.0))
        ),
    )
    .await;
    assert_eq!(plain, vec![Some("trip".to_string())]);
    // an unknown grouping is refused, naming the one there is
    let (code, msg) = sqlstate(
        a.query(
            "SELECT * FROM engram.search(owner => 'nadia', query_text => 'trip', group_by => 'day')",
            &[],
        )
        .await,
    );
    assert_eq!(code, "22023", "{msg}");
    assert!(msg.contains("'session'"), "{msg}");
}

#[tokio::test]
async fn the_newer_of_two_conflicting_facts_ranks_first() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    // The stale fact is closer to the question than its correction.
    let old = create(a, "ana", "The Q3 report is due on August 15th", &at_cosine(0.95), "").await;
    let (status, _, conflicts) = remember(
        a,
        "ana",
        "The Q3 report deadline was pushed back to September 1st",
        &at_cosine(0.85),
        "",
    )
    .await;
    assert_eq!(status, "conflict", "{conflicts:?}");
    // stored alongside (force): both stay active, the newer ranks first
    let (status, newer, _) = remember(
        a,
        "ana",
        "The Q3 report deadline was pushed back to September 1st",
        &at_cosine(0.85),
        "force => true",
    )
    .await;
    assert_eq!(status, "created");
    let ids: Vec<Uuid> = column(
        a,
        &format!(
            "SELECT id FROM engram.search(owner => 'ana', query_embedding => '{}', query_text => 'Q3 report due')",
            vec_text(&axis(4, 0, 0.0))
        ),
    )
    .await;
    assert_eq!(ids, vec![newer.unwrap(), old]);
}

/// The order comes from the rules too, not only from `force`'s note: two
/// facts stored apart (no memory notes the other) are read newer first
/// when the newer one contradicts the older or announces an update.
#[tokio::test]
async fn the_rules_order_facts_that_no_write_linked() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let old = create(a, "ana", "The Q3 report is due on August 15th", &at_cosine(0.95), "").await;
    let (_, newer, _) = remember(
        a,
        "ana",
        "The Q3 report deadline was pushed back to September 1st",
        &at_cosine(0.85),
        "force => true",
    )
    .await;
    // what force noted, taken away: only the rules can order them now
    a.batch_execute("UPDATE engram.memories SET metadata = metadata - 'engram_forced_over'")
        .await
        .unwrap();
    let ids: Vec<Uuid> = column(
        a,
        &format!(
            "SELECT id FROM engram.search(owner => 'ana', query_embedding => '{}', query_text => 'Q3 report due')",
            vec_text(&axis(4, 0, 0.0))
        ),
    )
    .await;
    assert_eq!(ids, vec![newer.unwrap(), old]);
    // events are never reordered: both kept in score order
    let e1 = create(
        a,
        "eve",
        "The Q3 report is due on August 15th",
        &at_cosine(0.95),
        "kind => 'episodic'",
    )
    .await;
    create(
        a,
        "eve",
        "The Q3 report deadline was pushed back to September 1st",
        &at_cosine(0.85),
        "kind => 'episodic'",
    )
    .await;
    let first: Vec<Uuid> = column(
        a,
        &format!(
            "SELECT id FROM engram.search(owner => 'eve', query_embedding => '{}', query_text => 'Q3 report due') LIMIT 1",
            vec_text(&axis(4, 0, 0.0))
        ),
    )
    .await;
    assert_eq!(first, vec![e1]);
}

/// engram.previous_turn: the turn before a moment in one session, in time
/// order (turns written at one moment keep their order), never an expired,
/// archived or other session's turn, nor another owner's.
#[tokio::test]
async fn the_previous_turn_is_the_one_before_in_its_session() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let turn = |owner: &str, content: &str, extra: &str| {
        let (owner, content, extra) = (owner.to_string(), content.to_string(), extra.to_string());
        async move {
            create(
                a,
                &owner,
                &content,
                &axis(4, content.len(), 0.0),
                &format!("kind => 'episodic', session_id => 's1'{extra}"),
            )
            .await
        }
    };
    let previous = |owner: &str, at: Option<&str>| {
        let (owner, at) = (owner.to_string(), at.map(str::to_string));
        async move {
            a.query_one(
                "SELECT engram.previous_turn(owner => $1, session_id => 's1', \"at\" => $2::text::timestamptz)",
                &[&owner, &at],
            )
            .await
            .unwrap()
            .get::<_, Option<String>>(0)
        }
    };
    assert_eq!(previous("ana", None).await, None);
    turn(
        "ana",
        "Shall I book the flight?",
        ", occurred_at => '2026-05-01 10:00+00'",
    )
    .await;
    turn("ana", "Yes please", ", occurred_at => '2026-05-01 10:01+00'").await;
    turn("ana", "Later turn", ", occurred_at => '2026-05-02 10:00+00'").await;
    turn(
        "ana",
        "Gone soon",
        ", occurred_at => '2026-05-02 11:00+00', ttl => '1 millisecond'",
    )
    .await;
    turn("bob", "Bob's turn", ", occurred_at => '2026-05-01 10:00:30+00'").await;
    assert_eq!(
        previous("ana", Some("2026-05-01 10:00:30+00")).await.as_deref(),
        Some("Shall I book the flight?")
    );
    assert_eq!(
        previous("ana", Some("2026-05-01 12:00+00")).await.as_deref(),
        Some("Yes please")
    );
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert_eq!(
        previous("ana", None).await.as_deref(),
        Some("Later turn"),
        "the expired turn is skipped"
    );
    // turns written at one moment: the backlog gives each the one written before it
    a.batch_execute(
        "BEGIN;
         SET LOCAL engram.owner = 'cy';
         INSERT INTO engram.memories (owner, kind, session_id, content, content_sha256, dedup_key)
         SELECT 'cy', 'episodic', 's1', 'turn ' || n, sha256(n::text::bytea), sha256(n::text::bytea)
         FROM generate_series(1, 3) n;
         COMMIT;",
    )
    .await
    .unwrap();
    let backlog: Vec<(String, Option<String>)> = a
        .query(
            "SELECT content, previous FROM engram.embedding_backlog(owner => 'cy') ORDER BY content",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let previous_of: Vec<Option<&str>> = backlog.iter().map(|b| b.1.as_deref()).collect();
    assert_eq!(previous_of.iter().filter(|p| p.is_none()).count(), 1, "{backlog:?}");
    for (content, previous) in &backlog {
        if let Some(p) = previous {
            assert_ne!(p, content, "{backlog:?}");
        }
    }
}
