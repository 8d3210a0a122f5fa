//! Entities (docs/TIME_AND_ENTITIES.md): engram-core's rules measured on
//! labelled sets, the per-owner index the memories' triggers keep,
//! engram.entities, engram.about and search(entity => ...), under RLS and
//! erase.

use engram_core::entities::key;
use engram_tests::*;
use serde_json::Value;

async fn entity_names(c: &impl Sql, sql: &str) -> Vec<(String, String, i64)> {
    c.query(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

#[tokio::test]
async fn the_index_follows_every_write() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let tea = create(a, "alice", "José Díaz drinks gyokuro with Vera", &axis(4, 0, 0.0), "").await;
    create(
        a,
        "alice",
        "Jose Diaz moved the Apollo project review",
        &axis(4, 1, 0.0),
        "",
    )
    .await;
    create(
        a,
        "alice",
        "The kettle broke again",
        &axis(4, 2, 0.0),
        "tags => '{entity:product:Kettle Pro}'",
    )
    .await;
    let all = entity_names(a, "SELECT name, kind, memories FROM engram.entities(owner => 'alice')").await;
    // case and accents fold into one entity, named as most often written
    assert_eq!(all[0].2, 2, "{all:?}");
    assert_eq!(key(&all[0].0), "jose diaz");
    assert!(all.iter().any(|e| e.0 == "Vera" && e.1 == "person"), "{all:?}");
    assert!(all.iter().any(|e| e.0 == "Apollo" && e.1 == "project"), "{all:?}");
    assert!(all.iter().any(|e| e.0 == "Kettle Pro" && e.1 == "product"), "{all:?}");
    let prefixed = entity_names(
        a,
        "SELECT name, kind, memories FROM engram.entities(owner => 'alice', prefix => 'jos')",
    )
    .await;
    assert_eq!(prefixed.len(), 1);
    // an update re-indexes, a hard forget removes
    a.execute(
        "SELECT engram.update(owner => 'alice', id => $1, content => 'Marta drinks gyokuro', embedding => '[1,0,0,0]')",
        &[&tea],
    )
    .await
    .unwrap();
    let all = entity_names(a, "SELECT name, kind, memories FROM engram.entities(owner => 'alice')").await;
    assert!(
        all.iter().any(|e| e.0 == "Marta") && !all.iter().any(|e| e.0 == "Vera"),
        "{all:?}"
    );
    a.execute(
        "SELECT engram.forget(owner => 'alice', id => $1, hard => true)",
        &[&tea],
    )
    .await
    .unwrap();
    assert_eq!(
        count(
            &db,
            &format!("SELECT count(*) FROM engram.memory_entities WHERE memory_id = '{tea}'")
        )
        .await,
        0
    );
    // a DBA's bulk insert is indexed too, and the index equals a recomputation
    a.batch_execute(
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key)
         SELECT 'alice', 'Ticket OPS-' || n || ' is for Priya', sha256(n::text::bytea), sha256(n::text::bytea)
         FROM generate_series(1, 20) n",
    )
    .await
    .unwrap();
    let drift = count(
        &db,
        "SELECT count(*) FROM (
             (SELECT m.owner, m.id, x.key FROM engram.memories m, engram._memory_entities(m.content, m.tags) x
              EXCEPT SELECT e.owner, e.memory_id, coalesce(e.alias, e.key) FROM engram.memory_entities e)
             UNION ALL
             (SELECT e.owner, e.memory_id, coalesce(e.alias, e.key) FROM engram.memory_entities e
              EXCEPT SELECT m.owner, m.id, x.key FROM engram.memories m, engram._memory_entities(m.content, m.tags) x)) d",
    )
    .await;
    assert_eq!(drift, 0);
    let priya: i64 = a
        .query_one(
            "SELECT memories FROM engram.entities(owner => 'alice') WHERE name = 'Priya'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(priya, 20);
}

#[tokio::test]
async fn about_tells_current_facts_history_and_related_entities() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let old = create(
        a,
        "alice",
        "Vera's badge number is 4411",
        &axis(4, 0, 0.0),
        "valid_from => '2026-01-01'",
    )
    .await;
    let (status, new, _) = remember(
        a,
        "alice",
        "Vera's badge number is 5521",
        &axis(4, 0, 0.01),
        &format!("valid_from => '2026-06-01', supersedes => ARRAY['{old}']::uuid[]"),
    )
    .await;
    assert_eq!(status, "created");
    let new = new.unwrap();
    create(
        a,
        "alice",
        "Vera rides a blue bicycle to work in Lyon",
        &axis(4, 1, 0.0),
        "",
    )
    .await;
    create(a, "alice", "Tom lives in Lyon", &axis(4, 2, 0.0), "").await;
    let about: Value = a
        .query_one("SELECT engram.about(owner => 'alice', entity => 'VERA')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(about["entity"]["name"], "Vera");
    assert_eq!(about["entity"]["kind"], "person");
    assert_eq!(about["entity"]["memories"], 3);
    let facts: Vec<&str> = about["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["content"].as_str().unwrap())
        .collect();
    assert!(facts.contains(&"Vera's badge number is 5521") && !facts.contains(&"Vera's badge number is 4411"));
    assert_eq!(about["history"][0]["id"], old.to_string());
    assert_eq!(about["history"][0]["superseded_by"], new.to_string());
    assert_eq!(about["related"][0]["name"], "Lyon");
    let unknown: Value = a
        .query_one("SELECT engram.about(owner => 'alice', entity => 'Nobody')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(unknown["entity"]["memories"], 0);
    assert_eq!(unknown["facts"], serde_json::json!([]));
    let (state, _) = sqlstate(
        a.query("SELECT engram.about(owner => 'alice', entity => ' ')", &[])
            .await,
    );
    assert_eq!(state, "22004");
    // search about an entity keeps the memories naming it
    let found: Vec<String> = column(
        a,
        "SELECT content FROM engram.search(owner => 'alice', query_text => 'Lyon', entity => 'vera')",
    )
    .await;
    assert_eq!(found, vec!["Vera rides a blue bicycle to work in Lyon"]);
    let none: Vec<String> = column(
        a,
        "SELECT content FROM engram.search(owner => 'alice', query_text => 'Lyon', entity => 'Nobody')",
    )
    .await;
    assert!(none.is_empty());
}

#[tokio::test]
async fn entities_stay_within_their_owner_and_go_with_an_erase() {
    let db = TestDb::new(4).await;
    create(
        &db.admin,
        "bob",
        "Bob's secret contact is Mallory at Initech Corp",
        &axis(4, 0, 0.0),
        "",
    )
    .await;
    let alice = db.agent("alice").await;
    create(&alice, "alice", "Alice met Vera in Lyon", &axis(4, 1, 0.0), "").await;
    let mine = entity_names(&alice, "SELECT name, kind, memories FROM engram.entities()").await;
    assert!(mine.iter().all(|e| e.0 != "Mallory"), "{mine:?}");
    // raw reads of the index are the owner's only (RLS)
    let raw: Vec<String> = alice
        .query("SELECT name FROM engram.memory_entities", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(!raw.is_empty() && !raw.contains(&"Mallory".to_string()), "{raw:?}");
    for sql in [
        "SELECT * FROM engram.entities(owner => 'bob')",
        "SELECT engram.about(owner => 'bob', entity => 'Mallory')",
        "SELECT * FROM engram.search(owner => 'bob', query_text => 'contact', entity => 'Mallory')",
    ] {
        let (state, _) = sqlstate(alice.query(sql, &[]).await);
        assert_eq!(state, "42501", "{sql}");
    }
    let about: Value = alice
        .query_one("SELECT engram.about(entity => 'Mallory')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(about["entity"]["memories"], 0, "bob's entity is not alice's");
    for sql in [
        "INSERT INTO engram.memory_entities VALUES ('alice', gen_random_uuid(), 'x', 'x', 'thing')",
        "DELETE FROM engram.memory_entities",
    ] {
        let (state, _) = sqlstate(alice.query(sql, &[]).await);
        assert_eq!(state, "42501", "{sql}");
    }
    db.admin
        .batch_execute("SELECT engram.erase_owner(owner => 'bob')")
        .await
        .unwrap();
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.memory_entities WHERE owner = 'bob'").await,
        0
    );
}

/// A person's first name merges into the owner's one full name that starts
/// with it, in either order of writing; a second full name undoes it; each
/// step is audited; an entity: tag keeps a memory's name apart; service
/// names in any case and separator are one entity.
#[tokio::test]
async fn first_names_merge_into_the_one_full_name() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let first = create(a, "alice", "Marta said the demo slipped", &axis(4, 0, 0.0), "").await;
    create(a, "alice", "Marta Keller owns the Orion rollout", &axis(4, 1, 0.0), "").await;
    create(a, "alice", "Ask Marta about the budget", &axis(4, 2, 0.0), "").await;
    let people = entity_names(a, "SELECT name, kind, memories FROM engram.entities(owner => 'alice')").await;
    assert!(
        people.contains(&("Marta Keller".to_string(), "person".to_string(), 3)),
        "{people:?}"
    );
    assert!(!people.iter().any(|p| p.0 == "Marta"), "{people:?}");
    assert!(people.iter().any(|p| p.0 == "Orion" && p.1 == "project"), "{people:?}");
    // about and search by the first name read the merged entity
    let about: serde_json::Value = a
        .query_one("SELECT engram.about(owner => 'alice', entity => 'marta')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(about["entity"]["name"], "Marta Keller", "{about}");
    assert_eq!(about["facts"].as_array().unwrap().len(), 3, "{about}");
    let merges = count(
        &db,
        "SELECT count(*) FROM engram.audit_log WHERE action = 'entity_merge'
           AND details ->> 'alias' = 'marta' AND details ->> 'into' = 'marta keller'",
    )
    .await;
    assert!(merges >= 1, "{merges}");

    // An entity: tag keeps this memory's Marta apart (the merge reversed for it).
    a.execute(
        "SELECT engram.update(owner => 'alice', id => $1, tags => '{entity:person:Marta}')",
        &[&first],
    )
    .await
    .unwrap();
    let people = entity_names(a, "SELECT name, kind, memories FROM engram.entities(owner => 'alice')").await;
    assert!(
        people.contains(&("Marta".to_string(), "person".to_string(), 1)),
        "{people:?}"
    );
    assert!(
        people.contains(&("Marta Keller".to_string(), "person".to_string(), 2)),
        "{people:?}"
    );

    // A second Marta: "Marta" alone is ambiguous, the merge is undone.
    create(a, "alice", "Marta Ruiz joined the design team", &axis(4, 3, 0.0), "").await;
    let people = entity_names(a, "SELECT name, kind, memories FROM engram.entities(owner => 'alice')").await;
    assert!(
        people.contains(&("Marta".to_string(), "person".to_string(), 2)),
        "{people:?}"
    );
    assert!(
        people.contains(&("Marta Keller".to_string(), "person".to_string(), 1)),
        "{people:?}"
    );
    let undone = count(
        &db,
        "SELECT count(*) FROM engram.audit_log WHERE action = 'entity_unmerge' AND details ->> 'why' = 'ambiguous'",
    )
    .await;
    assert_eq!(undone, 1);

    // Another owner's full names never merge this owner's first names.
    create(a, "bob", "Priya Nair approved the budget", &axis(4, 0, 0.0), "").await;
    create(
        a,
        "alice",
        "Priya reviews the Billing-API change",
        &axis(4, 1, 0.1),
        "kind => 'episodic'",
    )
    .await;
    create(
        a,
        "alice",
        "billing_api returns 502 since the deploy",
        &axis(4, 2, 0.1),
        "kind => 'episodic'",
    )
    .await;
    let people = entity_names(a, "SELECT name, kind, memories FROM engram.entities(owner => 'alice')").await;
    assert!(people.iter().any(|p| p.0 == "Priya" && p.1 == "person"), "{people:?}");
    // "Billing-API" and "billing_api": one service
    assert!(
        people
            .iter()
            .any(|p| key(&p.0) == "billing api" && p.1 == "service" && p.2 == 2),
        "{people:?}"
    );
}

/// The merge follows what the memories still say: a pinned first name is
/// looked up as itself, deleting the only full name undoes the merge, and
/// a memory naming both keeps its first-name row.
#[tokio::test]
async fn merges_follow_deletes_and_pins() {
    let db = TestDb::new(4).await;
    let a = &db.admin;
    let event = "kind => 'episodic'";
    let full = create(a, "alice", "Marta Keller leads billing", &axis(4, 0, 0.0), event).await;
    create(a, "alice", "Lunch with Marta on Friday", &axis(4, 1, 0.0), event).await;
    create(
        a,
        "alice",
        "Marta Keller told Marta about the offsite",
        &axis(4, 2, 0.0),
        event,
    )
    .await;
    let about = |entity: &str| {
        let entity = entity.to_string();
        async move {
            a.query_one("SELECT engram.about(owner => 'alice', entity => $1)", &[&entity])
                .await
                .unwrap()
                .get::<_, serde_json::Value>(0)
        }
    };
    assert_eq!(about("marta").await["entity"]["name"], "Marta Keller");
    // a pinned note: "Marta" is looked up as itself
    create(
        a,
        "alice",
        "Marta from the bakery called",
        &axis(4, 3, 0.0),
        "kind => 'episodic', tags => '{entity:person:Marta}'",
    )
    .await;
    let pinned = about("Marta").await;
    assert_eq!(pinned["entity"]["name"], "Marta", "{pinned}");
    assert!(pinned["facts"].to_string().contains("bakery"), "{pinned}");
    // the full name's memories deleted: the merge is undone ("gone")
    a.execute(
        "SELECT engram.forget(owner => 'alice', id => $1, hard => true)",
        &[&full],
    )
    .await
    .unwrap();
    let third: Uuid = a
        .query_one(
            "SELECT id FROM engram.memories WHERE content LIKE 'Marta Keller told%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    a.execute(
        "SELECT engram.forget(owner => 'alice', id => $1, hard => true)",
        &[&third],
    )
    .await
    .unwrap();
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM engram.memory_entities WHERE owner = 'alice' AND key = 'marta keller'"
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM engram.audit_log WHERE action = 'entity_unmerge' AND details ->> 'why' = 'gone'"
        )
        .await,
        1
    );
}
