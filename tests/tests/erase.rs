//! engram.erase_owner: the right to erasure for a whole owner. Every table
//! with an `owner` column is checked from the catalog, so a table added later
//! that erase_owner forgets fails here.

use engram_tests::*;

/// Rows naming `owner` in every engram table with an owner column, by table.
async fn rows_of(db: &TestDb, owner: &str) -> Vec<(String, i64)> {
    let tables: Vec<String> = column(
        &db.admin,
        "SELECT c.relname::text FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
             WHERE c.relnamespace = 'engram'::regnamespace AND c.relkind = 'r' AND a.attname = 'owner'
             ORDER BY 1",
    )
    .await;
    let mut out = Vec::new();
    for t in tables {
        let n: i64 = db
            .admin
            .query_one(&format!("SELECT count(*) FROM engram.{t} WHERE owner = $1"), &[&owner])
            .await
            .unwrap()
            .get(0);
        out.push((t, n));
    }
    out
}

/// Everything an owner can leave behind: memories with tags and revisions,
/// access counts, an event, a publication, a slot, a workspace with a state,
/// ghost settings, grants both ways, a group membership, a token, a miss,
/// entities (Vera, Lyon).
async fn populate(db: &TestDb, owner: &str, other: &str) {
    let id = create(
        &db.admin,
        owner,
        &format!("{owner} likes tea"),
        &[1.0, 0.0, 0.0, 0.0],
        "tags => '{drinks}'",
    )
    .await;
    create(
        &db.admin,
        owner,
        &format!("{owner} plays chess with Vera in Lyon"),
        &[0.0, 1.0, 0.0, 0.0],
        "",
    )
    .await;
    db.admin
        .batch_execute(&format!(
            "SELECT engram.update(owner => '{owner}', id => '{id}', content => '{owner} likes green tea', embedding => '[1,0.1,0,0]');
             SELECT count(*) FROM engram.search(owner => '{owner}', query_embedding => '[1,0,0,0]');
             SELECT count(*) FROM engram.search(owner => '{owner}', query_text => 'zebra');
             SELECT engram.capture(owner => '{owner}', event_type => 'observation', content => 'ran tests',
                                   session_id => 's1');
             SELECT engram.publish(owner => '{owner}', id => '{id}', space => 'team');
             SELECT engram.slot_set(owner => '{owner}', label => 'persona', content => 'terse');
             SELECT engram.workspace_create(owner => '{owner}', name => 'api');
             SELECT engram.state_save(owner => '{owner}', workspace => 'api', name => 'v1', active_task => 'ship');
             SELECT engram.ghost_settings(owner => '{owner}', enabled => true, default_trust => 2);
             SELECT engram.grant(owner => '{owner}', accessor => '{other}', trust => 3);
             SELECT engram.grant(owner => '{other}', accessor => '{owner}', trust => 3);
             SELECT engram.add_member(group_id => 'crew', member => '{owner}');
             SELECT engram.create_token(owner => '{owner}', label => 'laptop');
             SELECT engram.remember(owner => '{owner}', content => '{owner}''s screenshot', metadata => jsonb_build_object(
                 'images', jsonb_build_array(engram.image_put(owner => '{owner}', data => '\\x89504e470d0a1a0a00'::bytea,
                                                              mime => 'image/png'))));
             SELECT engram.vision_embed(owner => '{owner}', sha256 => encode(sha256('\\x89504e470d0a1a0a00'::bytea), 'hex'),
                                        embedding => array_fill(0.1::real, ARRAY[512])::vector, model => 'test');"
        ))
        .await
        .unwrap_or_else(|e| panic!("populate {owner}: {e:?}"));
}

#[tokio::test]
async fn erase_owner_leaves_nothing_of_the_owner_and_everything_of_others() {
    let db = TestDb::new(4).await;
    populate(&db, "alice", "bob").await;
    populate(&db, "bob", "carol").await;
    let alice_before = rows_of(&db, "alice").await;
    // Every kind of row is there to erase (except misses' only one, which
    // a search that found nothing wrote).
    for (t, n) in &alice_before {
        assert!(*n > 0, "populate left no {t} row for alice");
    }
    let bob_before = rows_of(&db, "bob").await;
    let bob_scope: i64 = count(&db, "SELECT count(*) FROM engram.scope_entries WHERE owner = 'bob'").await;

    let counts: serde_json::Value = db
        .admin
        .query_one("SELECT engram.erase_owner(owner => 'alice')", &[])
        .await
        .expect("erase_owner")
        .get(0);
    assert_eq!(counts["memories"], 4, "three memories and the captured event: {counts}");
    assert_eq!(counts["tokens"], 1, "{counts}");
    assert_eq!(counts["grants"], 2, "given and received: {counts}");
    assert_eq!(
        counts["images"], 1,
        "its put reference kept it past the memory: {counts}"
    );

    for (t, n) in rows_of(&db, "alice").await {
        // the audit row of the erasure, and the lock row left as a
        // tombstone (name, time of erasure, zero usage)
        let left = if t == "audit_log" || t == "owner_locks" { 1 } else { 0 };
        assert_eq!(n, left, "engram.{t} still holds {n} rows of alice");
    }
    let tombstone: bool = db
        .admin
        .query_one(
            "SELECT erased_at IS NOT NULL AND memories + events + image_bytes + slots + workspaces + states = 0
             FROM engram.owner_locks WHERE owner = 'alice'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(tombstone, "the lock row of alice is a tombstone with no usage");
    let erasure: String = db
        .admin
        .query_one("SELECT action FROM engram.audit_log WHERE owner = 'alice'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(erasure, "erase_owner");
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.grants WHERE accessor = 'alice'").await,
        0
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.group_members WHERE member = 'alice'").await,
        0
    );

    // bob keeps everything except the grant he gave alice.
    let mut bob_after = rows_of(&db, "bob").await;
    for (t, n) in bob_after.iter_mut() {
        if t == "grants" {
            *n += 1;
        }
        if t == "audit_log" {
            continue;
        }
        let before = bob_before.iter().find(|(b, _)| b == t).unwrap().1;
        assert_eq!(*n, before, "bob's {t} changed");
    }
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.scope_entries WHERE owner = 'bob'").await,
        bob_scope
    );
    // alice's old token no longer authenticates; a new alice starts empty.
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.tokens WHERE owner = 'alice'").await,
        0
    );
}

#[tokio::test]
async fn erase_owner_is_for_dbas_and_refuses_a_missing_owner() {
    let db = TestDb::new(4).await;
    create(&db.admin, "alice", "alice likes tea", &[1.0, 0.0, 0.0, 0.0], "").await;
    let agent = db.agent("alice").await;
    let (code, _) = sqlstate(agent.query("SELECT engram.erase_owner(owner => 'alice')", &[]).await);
    assert_eq!(code, "42501", "a restricted role cannot erase, even its own owner");
    let (code, message) = sqlstate(db.admin.query("SELECT engram.erase_owner(owner => '  ')", &[]).await);
    assert_eq!(code, "22004");
    assert!(message.contains("erase_owner(owner =>"), "{message}");
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memories").await, 1);
}
