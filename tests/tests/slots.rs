//! Slots (docs/CONTINUITY.md): named, size-limited text blocks, global or
//! per workspace, the workspace's shadowing the global one; through the
//! restricted role.

use engram_tests::*;

async fn text(c: &impl Sql, sql: &str) -> Result<String, tokio_postgres::Error> {
    c.query_one(sql, &[]).await.map(|r| r.get(0))
}

#[tokio::test]
async fn slots_shadow_append_and_respect_their_limit() {
    let db = TestDb::new(4).await;
    let alice = db.agent("alice").await;
    alice
        .query_one(
            "SELECT engram.slot_set(label => 'persona', content => 'terse, direct', pinned => true)",
            &[],
        )
        .await
        .unwrap();
    alice
        .query_one(
            "SELECT engram.slot_set(label => 'persona', content => 'explains every step', workspace => 'teaching')",
            &[],
        )
        .await
        .unwrap();
    // the workspace's slot shadows the global one, only in that workspace
    assert_eq!(
        text(&alice, "SELECT engram.slot_get(label => 'persona')")
            .await
            .unwrap(),
        "terse, direct"
    );
    assert_eq!(
        text(
            &alice,
            "SELECT engram.slot_get(label => 'persona', workspace => 'teaching')"
        )
        .await
        .unwrap(),
        "explains every step"
    );
    assert_eq!(
        text(
            &alice,
            "SELECT engram.slot_get(label => 'persona', workspace => 'other')"
        )
        .await
        .unwrap(),
        "terse, direct"
    );
    // append joins lines; past the limit it is refused and changes nothing
    alice
        .query_one(
            "SELECT engram.slot_set(label => 'todo', content => 'one', size_limit => 10)",
            &[],
        )
        .await
        .unwrap();
    let row = alice
        .query_one(
            "SELECT content, chars FROM engram.slot_append(label => 'todo', content => 'two')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, i32>(1)),
        ("one\ntwo".to_string(), 7)
    );
    let (code, msg) = sqlstate(
        alice
            .query("SELECT engram.slot_append(label => 'todo', content => 'three')", &[])
            .await,
    );
    assert_eq!(code, "54000");
    assert!(msg.contains("limit is 10") && msg.contains("13 characters"), "{msg}");
    let (code, _) = sqlstate(
        alice
            .query(
                "SELECT engram.slot_set(label => 'todo', content => repeat('x', 11), size_limit => 10)",
                &[],
            )
            .await,
    );
    assert_eq!(code, "54000");
    assert_eq!(
        text(&alice, "SELECT engram.slot_get(label => 'todo')").await.unwrap(),
        "one\ntwo"
    );
    // list: the workspace's view, pinned flag and shadowing applied
    let listed: Vec<(String, Option<String>)> = alice
        .query(
            "SELECT label, workspace FROM engram.slot_list(workspace => 'teaching')",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        listed,
        vec![
            ("persona".to_string(), Some("teaching".to_string())),
            ("todo".to_string(), None)
        ]
    );
    // delete the workspace's slot: the global one shows again
    assert!(alice
        .query_one(
            "SELECT engram.slot_delete(label => 'persona', workspace => 'teaching')",
            &[]
        )
        .await
        .unwrap()
        .get::<_, bool>(0));
    assert_eq!(
        text(
            &alice,
            "SELECT engram.slot_get(label => 'persona', workspace => 'teaching')"
        )
        .await
        .unwrap(),
        "terse, direct"
    );
    let (code, msg) = sqlstate(alice.query("SELECT engram.slot_get(label => 'missing')", &[]).await);
    assert_eq!(code, "P0002");
    assert!(msg.contains("engram.slot_list"), "{msg}");
    // other owners see none of it, through functions or raw SQL
    let bob = db.agent("bob").await;
    let (code, _) = sqlstate(bob.query("SELECT engram.slot_get(label => 'persona')", &[]).await);
    assert_eq!(code, "P0002");
    let n: i64 = bob
        .query_one("SELECT count(*) FROM engram.slots", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    let (code, _) = sqlstate(bob.execute("UPDATE engram.slots SET content = 'x'", &[]).await);
    assert_eq!(code, "42501");
    // every write is audited
    let audited = count(
        &db,
        "SELECT count(*) FROM engram.audit_log WHERE owner = 'alice' AND action LIKE 'slot_%'",
    )
    .await;
    assert_eq!(audited, 5, "set ×3, append, delete");
    for sql in [
        "SELECT engram.slot_set(label => '', content => 'x')",
        "SELECT engram.slot_set(label => 'x', content => 'x', size_limit => 0)",
        "SELECT engram.slot_set(label => 'x', content => 'x', workspace => '')",
    ] {
        let (code, _) = sqlstate(alice.query(sql, &[]).await);
        assert_eq!(code, "22023", "{sql}");
    }
}
