//! Time (docs/TIME_AND_ENTITIES.md): occurred_at, valid_from and valid_to on
//! memories; reads of what is valid now, at valid_at, or as the store stood
//! at known_at; a forced correction closing what it supersedes;
//! engram.time_window and the search boost of memories in the window a query
//! names.

use engram_tests::*;

type Ts = std::time::SystemTime;

/// The contents `sql` returns in its first column, in order.
async fn contents(c: &impl Sql, sql: &str) -> Vec<String> {
    c.query(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// A search of alice's memories for "deadline" with `extra` arguments.
fn deadline_search(extra: &str) -> String {
    format!(
        "SELECT content FROM engram.search(owner => 'alice', query_text => 'launch deadline',
             query_embedding => '{}'{extra})",
        vec_text(&axis(8, 0, 0.0))
    )
}

/// Three corrections of one fact, each stated valid from a date: the store
/// answers with the one valid at each of four moments, and a default read
/// returns only the newest.
#[tokio::test]
async fn a_chain_of_corrections_answers_for_each_moment() {
    let db = TestDb::new(8).await;
    let a = &db.admin;
    let first = create(
        a,
        "alice",
        "The launch deadline is May 5",
        &axis(8, 0, 0.0),
        "valid_from => '2026-01-10'",
    )
    .await;
    let mut ids = vec![first];
    for (content, from) in [
        ("The launch deadline is June 10", "2026-03-01"),
        ("The launch deadline is July 20", "2026-06-01"),
    ] {
        // Without force the correction is refused with the fact it contradicts...
        let (status, _, conflicts) = remember(
            a,
            "alice",
            content,
            &axis(8, 0, 0.01),
            &format!("valid_from => '{from}'"),
        )
        .await;
        assert_eq!(status, "conflict", "{content}: {conflicts:?}");
        // ...and, naming it in supersedes, closes that fact's validity
        // where it starts.
        let previous = *ids.last().unwrap();
        let (status, id, _) = remember(
            a,
            "alice",
            content,
            &axis(8, 0, 0.01),
            &format!("valid_from => '{from}', supersedes => ARRAY['{previous}']::uuid[]"),
        )
        .await;
        assert_eq!(status, "created");
        let closed: Option<Ts> = a
            .query_one("SELECT valid_to FROM engram.memories WHERE id = $1", &[&previous])
            .await
            .unwrap()
            .get(0);
        let expected: Ts = a
            .query_one(&format!("SELECT '{from}'::timestamptz"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(closed, Some(expected), "superseded at the correction's valid_from");
        let audited = count(
            &db,
            &format!(
                "SELECT count(*) FROM engram.audit_log WHERE action = 'invalidate' AND memory_id = '{previous}'
                   AND details ->> 'superseded_by' = '{}'",
                id.unwrap()
            ),
        )
        .await;
        assert_eq!(audited, 1, "the closing is audited");
        ids.push(id.unwrap());
    }
    // Four moments: before the fact was known to hold, and in each period.
    let at = |moment: &str| deadline_search(&format!(", valid_at => '{moment}'"));
    assert!(
        contents(a, &at("2025-12-01")).await.is_empty(),
        "nothing held before 2026-01-10"
    );
    assert_eq!(
        contents(a, &at("2026-02-01")).await,
        vec!["The launch deadline is May 5"]
    );
    assert_eq!(
        contents(a, &at("2026-04-15")).await,
        vec!["The launch deadline is June 10"]
    );
    assert_eq!(
        contents(a, &at("2026-08-01")).await,
        vec!["The launch deadline is July 20"]
    );
    // By default: what holds now, the superseded facts still stored.
    assert_eq!(
        contents(a, &deadline_search("")).await,
        vec!["The launch deadline is July 20"]
    );
    let listed = contents(a, "SELECT content FROM engram.list(owner => 'alice')").await;
    assert_eq!(listed, vec!["The launch deadline is July 20"]);
    let listed_then = contents(
        a,
        "SELECT content FROM engram.list(owner => 'alice', valid_at => '2026-04-15')",
    )
    .await;
    assert_eq!(listed_then, vec!["The launch deadline is June 10"]);
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.memories WHERE status = 'active'").await,
        3
    );
    // recall returns the period of each, by id, whatever it is
    let row = a
        .query_one(
            "SELECT valid_from::date::text, valid_to::date::text, occurred_at IS NOT NULL
             FROM engram.recall(owner => 'alice', id => $1)",
            &[&ids[1]],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "2026-03-01");
    assert_eq!(row.get::<_, Option<String>>(1).as_deref(), Some("2026-06-01"));
    assert!(row.get::<_, bool>(2));
}

/// known_at answers as the store stood then: a memory written later is
/// absent, an updated one shows the content it had, and a validity closed
/// later still held.
#[tokio::test]
async fn known_at_reads_the_store_as_it_stood() {
    let db = TestDb::new(8).await;
    let a = &db.admin;
    let id = create(a, "alice", "The launch deadline is May 5", &axis(8, 0, 0.0), "").await;
    let before_update: Ts = a.query_one("SELECT clock_timestamp()", &[]).await.unwrap().get(0);
    a.execute(
        "SELECT engram.update(owner => 'alice', id => $1, content => 'The launch deadline is May 12',
                              embedding => $2::text::vector, reason => 'slipped a week')",
        &[&id, &vec_text(&axis(8, 0, 0.02))],
    )
    .await
    .unwrap();
    let after_update: Ts = a.query_one("SELECT clock_timestamp()", &[]).await.unwrap().get(0);
    create(
        a,
        "alice",
        "The launch deadline checklist lives in the wiki",
        &axis(8, 1, 0.0),
        "",
    )
    .await;
    // closed by hand after the second moment
    a.execute(
        "SELECT engram.update(owner => 'alice', id => $1, valid_to => now())",
        &[&id],
    )
    .await
    .unwrap();
    let known = |at: Ts| async move {
        let rows = a
            .query(
                "SELECT content FROM engram.search(owner => 'alice', query_text => 'launch deadline',
                     query_embedding => $1::text::vector, known_at => $2)",
                &[&vec_text(&axis(8, 0, 0.0)), &at],
            )
            .await
            .unwrap();
        rows.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>()
    };
    assert_eq!(known(before_update).await, vec!["The launch deadline is May 5"]);
    assert_eq!(known(after_update).await, vec!["The launch deadline is May 12"]);
    // now: the deadline no longer holds; the checklist does
    assert_eq!(
        contents(a, &deadline_search("")).await,
        vec!["The launch deadline checklist lives in the wiki"]
    );
    // the update that closed it made no revision
    assert_eq!(
        count(
            &db,
            &format!("SELECT count(*) FROM engram.revisions WHERE memory_id = '{id}'")
        )
        .await,
        1
    );
    assert_eq!(
        count(
            &db,
            &format!("SELECT count(*) FROM engram.audit_log WHERE action = 'invalidate' AND memory_id = '{id}'")
        )
        .await,
        1
    );
}

#[tokio::test]
async fn times_are_stored_returned_and_checked() {
    let db = TestDb::new(8).await;
    let a = &db.admin;
    let id = create(
        a,
        "alice",
        "We met the Lyon team at the offsite",
        &axis(8, 2, 0.0),
        "kind => 'episodic', occurred_at => '2025-09-18 14:00+02'",
    )
    .await;
    let row = a
        .query_one(
            "SELECT occurred_at = '2025-09-18 12:00Z', valid_from = occurred_at, valid_to IS NULL
             FROM engram.memories WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0) && row.get::<_, bool>(1) && row.get::<_, bool>(2));
    // search and list return them
    let found: bool = a
        .query_one(
            "SELECT occurred_at = '2025-09-18 12:00Z' FROM engram.search(owner => 'alice', query_text => 'Lyon offsite')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(found);
    let listed: bool = a
        .query_one(
            "SELECT occurred_at = '2025-09-18 12:00Z' AND valid_to IS NULL FROM engram.list(owner => 'alice')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(listed);
    // capture keeps an event's own time
    let event: uuid::Uuid = a
        .query_one(
            "SELECT id FROM engram.capture(owner => 'alice', event_type => 'conversation',
                 content => 'Asked about the offsite budget', session_id => 'offsite',
                 occurred_at => '2025-09-18 15:00Z')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let kept: bool = a
        .query_one(
            "SELECT occurred_at = '2025-09-18 15:00Z' AND valid_from = occurred_at FROM engram.memories WHERE id = $1",
            &[&event],
        )
        .await
        .unwrap()
        .get(0);
    assert!(kept);
    // bad periods and moments are refused, and nothing is written
    let before = count(&db, "SELECT count(*) FROM engram.memories").await;
    for extra in [
        "valid_from => '2026-05-01', valid_to => '2026-04-01'",
        "occurred_at => 'infinity'",
        "valid_to => '-infinity'",
        "occurred_at => '2026-05-01', valid_to => '2026-04-01'",
    ] {
        let (state, message) =
            sqlstate(try_remember(a, "alice", "A fact with a bad period", &axis(8, 3, 0.0), extra).await);
        assert_eq!(state, "22023", "{extra}: {message}");
    }
    let (state, message) = sqlstate(
        a.query(
            "SELECT engram.update(owner => 'alice', id => $1, valid_to => '2020-01-01')",
            &[&id],
        )
        .await,
    );
    assert_eq!(state, "22023");
    assert!(message.contains("before valid_from"), "{message}");
    for call in [
        "SELECT * FROM engram.search(owner => 'alice', query_text => 'x', valid_at => 'infinity')",
        "SELECT * FROM engram.list(owner => 'alice', valid_at => '-infinity')",
    ] {
        let (state, _) = sqlstate(a.query(call, &[]).await);
        assert_eq!(state, "22023", "{call}");
    }
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memories").await, before);
    assert_eq!(
        count(
            &db,
            &format!("SELECT count(*) FROM engram.memories WHERE id = '{id}' AND valid_to IS NULL")
        )
        .await,
        1
    );
}

#[tokio::test]
async fn time_window_reads_the_query_in_the_sessions_time_zone() {
    let db = TestDb::new(8).await;
    let a = &db.admin;
    let window = |q: &str, zone: &str| {
        format!("SET TIME ZONE '{zone}'; SELECT coalesce(engram.time_window('{q}', '2026-05-14 10:00Z')::text, 'none')")
    };
    let read = |sql: String| async move {
        let (set, select) = sql.split_once("; ").unwrap();
        a.batch_execute(set).await.unwrap();
        let v: String = a.query_one(select, &[]).await.unwrap().get(0);
        v
    };
    assert_eq!(
        read(window("what did I decide yesterday", "UTC")).await,
        r#"["2026-05-13 00:00:00+00","2026-05-14 00:00:00+00")"#
    );
    assert_eq!(
        read(window("what happened in March 2024", "UTC")).await,
        r#"["2024-03-01 00:00:00+00","2024-04-01 00:00:00+00")"#
    );
    assert_eq!(
        read(window("anything since April", "UTC")).await,
        r#"["2026-04-01 00:00:00+00","2026-05-15 00:00:00+00")"#
    );
    assert_eq!(read(window("what tea does Vera like", "UTC")).await, "none");
    // A day is the session's calendar day: at 10:00Z it is 19:00 in Tokyo.
    assert_eq!(
        read(window("yesterday", "Asia/Tokyo")).await,
        r#"["2026-05-13 00:00:00+09","2026-05-14 00:00:00+09")"#
    );
    a.batch_execute("RESET TIME ZONE").await.unwrap();
    let none: Option<String> = a
        .query_one("SELECT engram.time_window(NULL)::text", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(none, None);
}

/// A query naming a time ranks the memories that happened in it higher, and
/// says which window it read; one naming none ranks by relevance alone.
#[tokio::test]
async fn search_boosts_memories_in_the_window_the_query_names() {
    let db = TestDb::new(8).await;
    let a = &db.admin;
    a.batch_execute("SET TIME ZONE 'UTC'").await.unwrap();
    // The older decision is the closer match; the other happened last week.
    create(
        a,
        "alice",
        "Decided to ship the billing export as CSV",
        &axis(8, 4, 0.0),
        "kind => 'episodic', occurred_at => '2026-04-02'",
    )
    .await;
    create(
        a,
        "alice",
        "Decided to ship the billing export as Parquet",
        &axis(8, 4, 0.25),
        "kind => 'episodic', occurred_at => '2026-05-06'",
    )
    .await;
    let search = |q: &str| {
        format!(
            "SELECT content, time_window::text FROM engram.search(owner => 'alice', query_text => '{q}',
                 query_embedding => '{}', reference_time => '2026-05-14 10:00Z', k => 2)",
            vec_text(&axis(8, 4, 0.0))
        )
    };
    let rows = a
        .query(&search("what did I decide about the billing export last week"), &[])
        .await
        .unwrap();
    assert_eq!(
        rows[0].get::<_, String>(0),
        "Decided to ship the billing export as Parquet"
    );
    assert_eq!(
        rows[0].get::<_, Option<String>>(1).as_deref(),
        Some(r#"["2026-05-04 00:00:00+00","2026-05-11 00:00:00+00")"#)
    );
    // a boost, not a filter: the other decision is still there
    assert_eq!(rows.len(), 2);
    let rows = a
        .query(&search("what did I decide about the billing export"), &[])
        .await
        .unwrap();
    assert_eq!(rows[0].get::<_, String>(0), "Decided to ship the billing export as CSV");
    assert_eq!(rows[0].get::<_, Option<String>>(1), None);
}

/// The restricted role reads the past of its own owner only: valid_at and
/// known_at never reach another owner's memories.
#[tokio::test]
async fn reads_of_the_past_stay_within_the_owner() {
    let db = TestDb::new(8).await;
    create(
        &db.admin,
        "bob",
        "Bob's launch deadline is May 5",
        &axis(8, 0, 0.0),
        "valid_from => '2026-01-01'",
    )
    .await;
    let alice = db.agent("alice").await;
    for extra in [
        ", valid_at => '2026-02-01'",
        ", known_at => now()",
        ", known_at => '2026-02-01'",
    ] {
        let found = contents(
            &alice,
            &format!(
                "SELECT content FROM engram.search(query_text => 'launch deadline', query_embedding => '{}'{extra})",
                vec_text(&axis(8, 0, 0.0))
            ),
        )
        .await;
        assert!(found.is_empty(), "{extra}: {found:?}");
        let (state, _) = sqlstate(
            alice
                .query(
                    &format!("SELECT * FROM engram.search(owner => 'bob', query_text => 'launch deadline'{extra})"),
                    &[],
                )
                .await,
        );
        assert_eq!(state, "42501", "{extra}");
    }
}

/// Export and import carry the times; a file written before 0.13.0 (no
/// time columns) imports with the times of its creation.
#[tokio::test]
async fn export_and_import_carry_the_times() {
    let db = TestDb::new(8).await;
    let a = &db.admin;
    create(
        a,
        "alice",
        "The office was in Lyon",
        &axis(8, 5, 0.0),
        "occurred_at => '2019-06-01', valid_from => '2019-06-01', valid_to => '2023-01-01'",
    )
    .await;
    a.batch_execute(
        "SELECT engram.import_memory(owner => 'zoe', memory => e.memory || jsonb_build_object('id', gen_random_uuid()))
         FROM engram.export_memories(owner => 'alice') e;
         SELECT engram.import_memory(owner => 'zoe', memory => e.memory - 'occurred_at' - 'valid_from' - 'valid_to'
                                     - 'invalidated_at' || jsonb_build_object('id', gen_random_uuid(),
                                     'content', 'An older export', 'created_at', '2020-02-02T00:00:00Z'))
         FROM engram.export_memories(owner => 'alice') e;",
    )
    .await
    .unwrap();
    let rows = a
        .query(
            "SELECT content, occurred_at::date::text, valid_from::date::text, valid_to::date::text,
                    invalidated_at IS NOT NULL
             FROM engram.memories WHERE owner = 'zoe' ORDER BY content",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(String, String, String, Option<String>, bool)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "An older export".into(),
                "2020-02-02".into(),
                "2020-02-02".into(),
                None,
                false
            ),
            (
                "The office was in Lyon".into(),
                "2019-06-01".into(),
                "2019-06-01".into(),
                Some("2023-01-01".into()),
                true
            ),
        ]
    );
    // a file whose period ends before it starts, or that was invalidated at
    // no moment, is refused, nothing written
    let (state, _) = sqlstate(
        a.query(
            "SELECT engram.import_memory(owner => 'zoe', memory => jsonb_build_object('id', gen_random_uuid(),
                 'content', 'bad', 'valid_from', '2020-01-01', 'valid_to', '2023-01-01', 'invalidated_at', 'infinity'))",
            &[],
        )
        .await,
    );
    assert_eq!(state, "22023");
    let (state, _) = sqlstate(
        a.query(
            "SELECT engram.import_memory(owner => 'zoe', memory => jsonb_build_object('id', gen_random_uuid(),
                 'content', 'bad', 'valid_from', '2024-01-01', 'valid_to', '2023-01-01'))",
            &[],
        )
        .await,
    );
    assert_eq!(state, "22023");
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.memories WHERE owner = 'zoe'").await,
        2
    );
}

#[test]
fn the_walkthrough_runs_as_printed() {
    let db = format!("time_doc_{}", std::process::id());
    assert!(psql("postgres", &format!("DROP DATABASE IF EXISTS {db}")).0);
    assert!(psql("postgres", &format!("CREATE DATABASE {db}")).0);
    let script = format!(
        "CREATE EXTENSION engram CASCADE;\nSET TIME ZONE 'UTC';\n{}",
        sql_block("docs/TIME_AND_ENTITIES.md", "## Walkthrough: SQL")
    );
    let (ok, text) = psql(&db, &script);
    assert!(ok, "the walkthrough failed:\n{text}");
    // (each search's result follows its header line and separator)
    let results: Vec<&str> = text.split("content").skip(1).collect();
    let now = results[0];
    assert!(now.contains("June 10") && !now.contains("May 5"), "{text}");
    let then = results[1];
    assert!(
        then.contains("May 5 ") && then.contains("2026-03-01") && !then.contains("June 10"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.contains("conflict") && l.contains("| t ")),
        "the conflict names the May 5 fact: {text}"
    );
    assert!(
        text.contains(r#"["2026-05-04 00:00:00+00","2026-05-11 00:00:00+00")"#),
        "{text}"
    );
    let ranked: Vec<&str> = results[2].lines().filter(|l| l.contains("Decided")).collect();
    assert_eq!(ranked.len(), 2, "{text}");
    assert!(ranked[0].contains("Parquet"), "{text}");
    let _ = psql("postgres", &format!("DROP DATABASE {db}"));
}

#[test]
fn the_entities_walkthrough_runs_as_printed() {
    let db = format!("entities_doc_{}", std::process::id());
    assert!(psql("postgres", &format!("DROP DATABASE IF EXISTS {db}")).0);
    assert!(psql("postgres", &format!("CREATE DATABASE {db}")).0);
    // the time walkthrough first: the entities one continues in its database
    let script = format!(
        "CREATE EXTENSION engram CASCADE;\nSET TIME ZONE 'UTC';\n{}\n{}",
        sql_block("docs/TIME_AND_ENTITIES.md", "## Walkthrough: SQL"),
        sql_block("docs/TIME_AND_ENTITIES.md", "## Walkthrough: entities")
    );
    let (ok, text) = psql(&db, &script);
    assert!(ok, "the walkthrough failed:\n{text}");
    let listed = text.split("name").nth(1).unwrap_or_default();
    for line in [
        "Apollo          | project |        4",
        "Jose Diaz       | person  |        3",
        "Porto           | place   |        1",
        "Rocket Espresso | product |        1",
        "billing-api     | service |        1",
    ] {
        assert!(listed.contains(line), "entities lack {line:?}:\n{text}");
    }
    assert!(
        text.contains(r#""content": "José Díaz leads the Apollo project""#),
        "{text}"
    );
    assert!(text.contains(r#""name": "Apollo""#), "related: {text}");
    let history = text.split("apollo_history").nth(1).unwrap_or_default();
    assert!(history.contains("May 5") && history.contains("2026-03-01"), "{text}");
    let searched = text.rsplit("content").next().unwrap_or_default();
    assert!(
        searched.contains("Jose Diaz moved to Porto in May") && searched.contains("(1 row)"),
        "{text}"
    );
    assert!(
        text.contains(r#"{"into": "jose diaz", "alias": "jose", "memories": 1}"#),
        "the merge is audited: {text}"
    );
    let _ = psql("postgres", &format!("DROP DATABASE {db}"));
}

/// A forced correction closes memories only: a resource people curate, or
/// a skill, stays valid whatever an agent stores over it.
#[tokio::test]
async fn a_correction_never_closes_a_resource() {
    let db = TestDb::new(8).await;
    let a = &db.admin;
    a.batch_execute(&format!(
        "SELECT engram.resource_create(owner => 'alice', name => 'Deploy window',
             content => 'The deploy window is Tuesday at 9am', embedding => '{}')",
        vec_text(&axis(8, 6, 0.0))
    ))
    .await
    .unwrap();
    let (status, _, conflicts) = remember(
        a,
        "alice",
        "The deploy window is Tuesday at 11am",
        &axis(8, 6, 0.01),
        "force => true",
    )
    .await;
    assert_eq!(status, "created");
    assert!(conflicts.is_some(), "the resource was among the conflicts");
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM engram.memories WHERE source = 'resource' AND valid_to IS NULL AND flag_count = 0"
        )
        .await,
        1
    );
    let found: Vec<String> = column(
        a,
        "SELECT content FROM engram.search(owner => 'alice', query_text => 'deploy window') ORDER BY 1",
    )
    .await;
    assert_eq!(found.len(), 2, "{found:?}");
}

/// Supersession names its targets: `force` alone closes nothing;
/// `supersedes` closes exactly the ids given; an id the caller cannot write
/// (another owner's, a ghost memory from a normal context, a resource, an
/// unknown one) fails the call and nothing is written; `reopen` undoes a
/// supersession or an invalidation, is audited, and obeys RLS and contexts.
#[tokio::test]
async fn corrections_close_only_what_the_caller_names_and_reopen_undoes_them() {
    let db = TestDb::new(8).await;
    let a = &db.admin;
    let berlin = create(a, "marta", "Marta Keller lives in Berlin", &axis(8, 0, 0.0), "").await;
    let lead = create(
        a,
        "marta",
        "Marta Keller is the tech lead of Atlas",
        &axis(8, 0, 0.2),
        "force => true",
    )
    .await;
    let valid = |id: uuid::Uuid| format!("SELECT count(*) FROM engram.memories WHERE id = '{id}' AND valid_to IS NULL");
    // force alone: stored beside both, neither closed nor flagged
    let (status, _, conflicts) = remember(
        a,
        "marta",
        "Marta Keller moved to Zurich",
        &axis(8, 0, 0.1),
        "force => true",
    )
    .await;
    assert_eq!(status, "created");
    assert!(conflicts.is_some());
    assert_eq!(count(&db, &valid(berlin)).await + count(&db, &valid(lead)).await, 2);
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.memories WHERE flag_count > 0").await,
        0
    );
    // supersedes: exactly the named one, even when the conflict check did
    // not name it (a far vector)
    let far = create(a, "marta", "Marta Keller's desk is on floor 3", &axis(8, 5, 0.0), "").await;
    let (status, zurich, _) = remember(
        a,
        "marta",
        "Marta Keller lives in Zurich",
        &axis(8, 0, 0.05),
        &format!("force => true, supersedes => ARRAY['{berlin}', '{berlin}', '{far}']::uuid[]"),
    )
    .await;
    assert_eq!(status, "created");
    let zurich = zurich.unwrap();
    assert_eq!(count(&db, &valid(berlin)).await + count(&db, &valid(far)).await, 0);
    assert_eq!(count(&db, &valid(lead)).await, 1);

    // ids the caller cannot write: nothing is written
    let other = create(a, "bob", "Bob lives in Oslo", &axis(8, 0, 0.0), "").await;
    let ghost = create(
        a,
        "marta",
        "Marta told the ghost about Oslo",
        &axis(8, 3, 0.0),
        "internal_type => 'ghost', tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'bob')",
    )
    .await;
    a.execute(
        "SELECT engram.resource_create(owner => 'marta', name => 'Desk plan', content => 'Desks are on floor 2')",
        &[],
    )
    .await
    .unwrap();
    let resource: uuid::Uuid = a
        .query_one("SELECT id FROM engram.memories WHERE source = 'resource'", &[])
        .await
        .unwrap()
        .get(0);
    let before = count(&db, "SELECT count(*) FROM engram.memories").await;
    for (ids, code) in [
        (format!("'{other}'"), "P0002"),
        (format!("'{ghost}'"), "P0002"),
        ("'00000000-0000-0000-0000-000000000000'".to_string(), "P0002"),
        (format!("'{lead}', '{other}'"), "P0002"),
        (format!("'{resource}'"), "42501"),
    ] {
        let (got, msg) = sqlstate(
            try_remember(
                a,
                "marta",
                "Marta Keller moved to Basel",
                &axis(8, 0, 0.3),
                &format!("force => true, supersedes => ARRAY[{ids}]::uuid[]"),
            )
            .await,
        );
        assert_eq!(got, code, "{ids}: {msg}");
    }
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memories").await, before);
    assert_eq!(count(&db, &valid(lead)).await, 1);

    // reopen: valid again, the supersession flag lifted, trust back, audited
    let reopened: bool = a
        .query_one(
            &format!("SELECT engram.reopen(owner => 'marta', id => '{berlin}', reason => 'both hold')"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(reopened);
    let row = a
        .query_one(
            &format!(
                "SELECT valid_to IS NULL, flag_count, flag_reason, trust_score, metadata -> 'engram_reopened' ->> 'reason'
                 FROM engram.memories WHERE id = '{berlin}'"
            ),
            &[],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0));
    assert_eq!(row.get::<_, i32>(1), 0);
    assert_eq!(row.get::<_, Option<String>>(2), None);
    assert!((row.get::<_, f32>(3) - 0.7).abs() < 1e-4);
    assert_eq!(row.get::<_, Option<String>>(4).as_deref(), Some("both hold"));
    assert_eq!(
        count(
            &db,
            &format!("SELECT count(*) FROM engram.audit_log WHERE action = 'reopen' AND memory_id = '{berlin}'")
        )
        .await,
        1
    );
    // nothing to undo: false, and no audit row
    let again: bool = a
        .query_one(
            &format!("SELECT engram.reopen(owner => 'marta', id => '{berlin}')"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!again);
    // an invalidation made with update(valid_to) is undone the same way
    a.execute(
        &format!("SELECT engram.update(owner => 'marta', id => '{zurich}', valid_to => now())"),
        &[],
    )
    .await
    .unwrap();
    assert_eq!(count(&db, &valid(zurich)).await, 0);
    // a restricted role: its own memories only (another owner's id is not
    // found), and a ghost conversation cannot reopen the owner's memories
    let marta = db.agent("marta").await;
    let (code, _) = sqlstate(
        marta
            .query(&format!("SELECT engram.reopen(id => '{other}')"), &[])
            .await,
    );
    assert_eq!(code, "P0002");
    let reopened: bool = marta
        .query_one(&format!("SELECT engram.reopen(id => '{zurich}')"), &[])
        .await
        .unwrap()
        .get(0);
    assert!(reopened);
    assert_eq!(count(&db, &valid(zurich)).await, 1);
    let ghost_talk = db
        .platform_agent(
            "platform",
            "act_as => $2, internal_type => 'ghost', ghost_type => 'user', ghost_owner => 'bob'",
            &["marta"],
        )
        .await;
    let (code, msg) = sqlstate(
        ghost_talk
            .query(&format!("SELECT engram.reopen(id => '{far}')"), &[])
            .await,
    );
    assert_eq!(code, "42501", "{msg}");
    assert_eq!(count(&db, &valid(far)).await, 0);
}

/// Closing and reopening lose no bound: a memory with a planned end
/// (valid_to 2040) superseded now, then reopened, holds until 2040 again;
/// a memory that starts after the one that would supersede it is refused
/// (its period would become empty), nothing written.
#[tokio::test]
async fn reopen_restores_the_end_a_memory_had_and_supersession_keeps_periods() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let lease = create(
        a,
        "lea",
        "Lea's office lease runs until 2040",
        &axis(4, 0, 0.0),
        "valid_to => '2040-01-01'",
    )
    .await;
    let (status, newer, _) = remember(
        a,
        "lea",
        "Lea moved out of the office",
        &axis(4, 1, 0.0),
        &format!("supersedes => ARRAY['{lease}']::uuid[]"),
    )
    .await;
    assert_eq!(status, "created");
    let newer = newer.unwrap();
    let end = |id: uuid::Uuid| format!("SELECT to_char(valid_to, 'YYYY') FROM engram.memories WHERE id = '{id}'");
    let closed: Option<String> = a.query_one(&end(lease), &[]).await.unwrap().get(0);
    assert_ne!(closed.as_deref(), Some("2040"));
    let reopened: bool = a
        .query_one(&format!("SELECT engram.reopen(owner => 'lea', id => '{lease}')"), &[])
        .await
        .unwrap()
        .get(0);
    assert!(reopened);
    let restored: Option<String> = a.query_one(&end(lease), &[]).await.unwrap().get(0);
    assert_eq!(restored.as_deref(), Some("2040"));
    // a planned end nothing closed: nothing to undo
    let again: bool = a
        .query_one(&format!("SELECT engram.reopen(owner => 'lea', id => '{lease}')"), &[])
        .await
        .unwrap()
        .get(0);
    assert!(!again);
    // a fact from 2030 cannot be superseded by one valid from 2026
    let later = create(
        a,
        "lea",
        "Lea plans to retire",
        &axis(4, 2, 0.0),
        "valid_from => '2030-01-01'",
    )
    .await;
    let before = count(&db, "SELECT count(*) FROM engram.memories WHERE owner = 'lea'").await;
    let (code, msg) = sqlstate(
        try_remember(
            a,
            "lea",
            "Lea works four days a week",
            &axis(4, 3, 0.0),
            &format!("valid_from => '2026-01-01', supersedes => ARRAY['{later}', '{newer}']::uuid[]"),
        )
        .await,
    );
    assert_eq!(code, "22023", "{msg}");
    assert!(msg.contains("supersedes only facts that held before it"), "{msg}");
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.memories WHERE owner = 'lea'").await,
        before
    );
}
