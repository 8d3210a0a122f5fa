//! Trust-gated ghost reads, spaces and groups (docs/SECURITY.md), through the
//! restricted role: what each accessor sees, in both directions.

use engram_tests::*;

struct Alice {
    db: TestDb,
    level1: Uuid,
    level3: Uuid,
    level4: Uuid,
    /// bob's own normal memory, which must never show through alice's ghost
    bobs: Uuid,
}

async fn alice() -> Alice {
    let db = TestDb::new(4).await;
    let a = db.agent("alice").await;
    a.query_one("SELECT engram.ghost_settings(enabled => true, default_trust => 1)", &[])
        .await
        .unwrap();
    let level1 = create(
        &a,
        "alice",
        "alice works at the harbour office",
        &[1.0, 0.0, 0.0, 0.0],
        "access_level => 1",
    )
    .await;
    let level3 = create(
        &a,
        "alice",
        "alice is planning a harbour trip in May",
        &[0.0, 1.0, 0.0, 0.0],
        "access_level => 3",
    )
    .await;
    let level4 = create(
        &a,
        "alice",
        "alice's harbour door code is 4471",
        &[0.0, 0.0, 1.0, 0.0],
        "access_level => 4",
    )
    .await;
    a.query_one("SELECT engram.grant(accessor => 'bob', trust => 3)", &[])
        .await
        .unwrap();
    a.query_one("SELECT engram.grant(accessor => 'dave', trust => 0)", &[])
        .await
        .unwrap();
    let bobs = create(&db.admin, "bob", "bob's harbour notes", &[1.0, 0.0, 0.0, 0.0], "").await;
    Alice {
        db,
        level1,
        level3,
        level4,
        bobs,
    }
}

async fn ids(c: &impl Sql, sql: &str) -> Vec<Uuid> {
    let mut v: Vec<Uuid> = c.query(sql, &[]).await.expect(sql).iter().map(|r| r.get(0)).collect();
    v.sort();
    v
}

fn sorted(mut v: Vec<Uuid>) -> Vec<Uuid> {
    v.sort();
    v
}

/// What `accessor` sees through alice's user ghost: by search (both legs),
/// by list, and by recall of each of alice's memories.
async fn through_alices_ghost(a: &Alice, accessor: &Agent) -> Vec<Uuid> {
    let g = "ghost_type => 'user', ghost_id => 'alice'";
    let searched = ids(
        accessor,
        &format!(
            "SELECT id FROM engram.ghost_search({g}, query_embedding => '[1,0,0,0]', query_text => 'harbour', k => 50)"
        ),
    )
    .await;
    let listed = ids(accessor, &format!("SELECT id FROM engram.ghost_list({g})")).await;
    assert_eq!(searched, listed, "search and list disagree");
    let mut recalled = vec![];
    for id in [a.level1, a.level3, a.level4, a.bobs] {
        let rows = accessor
            .query(&format!("SELECT id FROM engram.ghost_recall({g}, id => $1)"), &[&id])
            .await
            .unwrap();
        recalled.extend(rows.iter().map(|r| r.get::<_, Uuid>(0)));
    }
    assert_eq!(sorted(recalled), listed, "recall and list disagree");
    listed
}

#[tokio::test]
async fn trust_gates_what_a_user_ghost_shows() {
    let a = alice().await;
    let bob = a.db.agent("bob").await;
    // trust 3: levels 1 and 3, not 4; never bob's own memory
    assert_eq!(through_alices_ghost(&a, &bob).await, sorted(vec![a.level1, a.level3]));
    // no grant: the default trust (1)
    let carol = a.db.agent("carol").await;
    assert_eq!(through_alices_ghost(&a, &carol).await, vec![a.level1]);
    // trust 0 blocks
    let dave = a.db.agent("dave").await;
    assert!(through_alices_ghost(&a, &dave).await.is_empty());
    // the other direction: raising bob's trust shows level 4, lowering hides
    let alice = a.db.agent("alice").await;
    alice
        .query_one("SELECT engram.grant(accessor => 'bob', trust => 4)", &[])
        .await
        .unwrap();
    assert_eq!(
        through_alices_ghost(&a, &bob).await,
        sorted(vec![a.level1, a.level3, a.level4])
    );
    alice
        .query_one("SELECT engram.update(id => $1, access_level => 5)", &[&a.level4])
        .await
        .unwrap();
    assert_eq!(through_alices_ghost(&a, &bob).await, sorted(vec![a.level1, a.level3]));
    assert!(alice
        .query_one("SELECT engram.revoke_grant(accessor => 'bob')", &[])
        .await
        .unwrap()
        .get::<_, bool>(0));
    assert_eq!(through_alices_ghost(&a, &bob).await, vec![a.level1]);
    // a disabled ghost shows nothing to anyone
    alice
        .query_one("SELECT engram.ghost_settings(enabled => false)", &[])
        .await
        .unwrap();
    for accessor in [&bob, &carol] {
        assert!(through_alices_ghost(&a, accessor).await.is_empty());
    }
    // grants are the owner's: alice sees hers, bob sees none of them
    let n = alice.query("SELECT * FROM engram.grants()", &[]).await.unwrap().len();
    assert_eq!(n, 1, "dave's grant remains");
    assert!(bob
        .query("SELECT * FROM engram.grants()", &[])
        .await
        .unwrap()
        .is_empty());
    // denials are audited in alice's log, never in the accessor's
    let denied = count(
        &a.db,
        "SELECT count(*) FROM engram.audit_log WHERE action = 'ghost_denied' AND owner = 'alice'",
    )
    .await;
    assert!(denied > 0);
    // a recall of an id that does not exist is audited too, so the audit
    // write never tells the accessor whether an id exists
    let ghost_id = Uuid::new_v4();
    carol
        .query(
            "SELECT * FROM engram.ghost_recall(ghost_type => 'user', ghost_id => 'alice', id => $1)",
            &[&ghost_id],
        )
        .await
        .unwrap();
    assert_eq!(
        count(
            &a.db,
            &format!("SELECT count(*) FROM engram.audit_log WHERE action = 'ghost_denied' AND owner = 'alice' AND memory_id = '{ghost_id}'"),
        )
        .await,
        1
    );
    let seen_by_bob: i64 = bob
        .query_one(
            "SELECT count(*) FROM engram.audit_log WHERE action = 'ghost_denied'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(seen_by_bob, 0);
}

#[tokio::test]
async fn an_owner_without_ghost_settings_has_no_ghost() {
    let db = TestDb::new(4).await;
    create(
        &db.admin,
        "erin",
        "erin's fact",
        &[1.0, 0.0, 0.0, 0.0],
        "access_level => 1",
    )
    .await;
    let bob = db.agent("bob").await;
    let n = bob
        .query(
            "SELECT * FROM engram.ghost_list(ghost_type => 'user', ghost_id => 'erin')",
            &[],
        )
        .await
        .unwrap()
        .len();
    assert_eq!(n, 0);
}

#[tokio::test]
async fn spaces_and_groups_show_what_was_published_there() {
    let a = alice().await;
    let alice = a.db.agent("alice").await;
    let bob = a.db.agent("bob").await;
    let space = |accessor: &'static str| {
        format!("SELECT id FROM engram.ghost_search(ghost_type => 'space', ghost_id => '{accessor}', query_text => 'harbour', k => 50)")
    };
    assert!(ids(&bob, &space("lobby")).await.is_empty());
    // level 4 published to a space: every space conversation reads it, and
    // nothing else of alice's shows there
    alice
        .query_one("SELECT engram.publish(id => $1, space => 'lobby')", &[&a.level4])
        .await
        .unwrap();
    let again: Uuid = alice
        .query_one("SELECT engram.publish(id => $1, space => 'lobby')", &[&a.level4])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count(&a.db, "SELECT count(*) FROM engram.publications").await, 1);
    let _ = again;
    assert_eq!(ids(&bob, &space("lobby")).await, vec![a.level4]);
    assert!(ids(&bob, &space("other")).await.is_empty());
    // the vector leg over a space's publications (no owner) finds it too,
    // and only it, whether its plan is an exact scan or the HNSW walk
    for walk in [false, true] {
        let settings = if walk {
            "SELECT set_config('engram.exact_search_rows', '0', false), set_config('engram.hnsw_min_selectivity', '0', false)"
        } else {
            "SELECT set_config('engram.exact_search_rows', '300', false)"
        };
        bob.query_one(settings, &[]).await.unwrap();
        let by_vector = ids(
            &bob,
            "SELECT id FROM engram.ghost_search(ghost_type => 'space', ghost_id => 'lobby', query_embedding => '[1,0,0,0]', k => 50)",
        )
        .await;
        assert_eq!(by_vector, vec![a.level4], "walk: {walk}");
    }
    bob.query_one("SELECT set_config('engram.exact_search_rows', '300', false), set_config('engram.hnsw_min_selectivity', '0.2', false)", &[])
        .await
        .unwrap();
    let listed = ids(
        &bob,
        "SELECT id FROM engram.ghost_list(ghost_type => 'space', ghost_id => 'lobby')",
    )
    .await;
    assert_eq!(listed, vec![a.level4]);
    // unpublish removes it
    assert!(alice
        .query_one("SELECT engram.unpublish(id => $1, space => 'lobby')", &[&a.level4])
        .await
        .unwrap()
        .get::<_, bool>(0));
    assert!(ids(&bob, &space("lobby")).await.is_empty());

    // a group: only its members publish there (hardening.rs), and only
    // members' group conversations read it
    a.db.admin
        .batch_execute("SELECT engram.add_member(group_id => 'crew', member => 'alice')")
        .await
        .unwrap();
    alice
        .query_one("SELECT engram.publish(id => $1, group_id => 'crew')", &[&a.level3])
        .await
        .unwrap();
    let group = "SELECT id FROM engram.ghost_list(ghost_type => 'group', ghost_id => 'crew')";
    assert!(ids(&bob, group).await.is_empty());
    let (code, _) = sqlstate(
        bob.query("SELECT engram.add_member(group_id => 'crew', member => 'bob')", &[])
            .await,
    );
    assert_eq!(code, "42501", "a user token cannot join a group");
    let admin = a.db.platform_agent("platform", "act_as => $2", &["bob"]).await;
    assert!(admin
        .query_one("SELECT engram.add_member(group_id => 'crew', member => 'bob')", &[])
        .await
        .unwrap()
        .get::<_, bool>(0));
    assert_eq!(ids(&bob, group).await, vec![a.level3]);
    let carol = a.db.agent("carol").await;
    assert!(ids(&carol, group).await.is_empty());
    a.db.admin
        .query_one("SELECT engram.remove_member(group_id => 'crew', member => 'bob')", &[])
        .await
        .unwrap();
    assert!(ids(&bob, group).await.is_empty());
    // hard forget removes the publication everywhere
    a.db.admin
        .query_one("SELECT engram.add_member(group_id => 'crew', member => 'bob')", &[])
        .await
        .unwrap();
    alice
        .query_one("SELECT engram.forget(id => $1, hard => true)", &[&a.level3])
        .await
        .unwrap();
    assert!(ids(&bob, group).await.is_empty());
    assert_eq!(count(&a.db, "SELECT count(*) FROM engram.publications").await, 0);
    // another owner's memory cannot be published
    let (code, _) = sqlstate(
        bob.query("SELECT engram.publish(id => $1, space => 'lobby')", &[&a.level1])
            .await,
    );
    assert_eq!(code, "P0002");
}

#[tokio::test]
async fn access_levels_and_trust_are_validated() {
    let db = TestDb::new(4).await;
    let alice = db.agent("alice").await;
    for (sql, code) in [
        (
            "SELECT * FROM engram.remember(content => 'x', embedding => '[1,0,0,0]', access_level => 0)",
            "22023",
        ),
        (
            "SELECT * FROM engram.remember(content => 'x', embedding => '[1,0,0,0]', access_level => 6)",
            "22023",
        ),
        ("SELECT engram.grant(accessor => 'bob', trust => 6)", "22023"),
        ("SELECT engram.grant(accessor => 'alice', trust => 3)", "22023"),
        ("SELECT engram.grant(trust => 3)", "22004"),
        ("SELECT engram.ghost_settings(default_trust => 9)", "22023"),
        (
            "SELECT * FROM engram.ghost_list(ghost_type => 'planet', ghost_id => 'x')",
            "22023",
        ),
        (
            "SELECT * FROM engram.ghost_list(ghost_type => 'user', ghost_id => 'alice')",
            "22023",
        ),
        ("SELECT * FROM engram.ghost_list(ghost_type => 'user')", "22004"),
        (
            "SELECT engram.publish(id => gen_random_uuid(), space => 'a', group_id => 'b')",
            "22023",
        ),
    ] {
        let (got, msg) = sqlstate(alice.query(sql, &[]).await);
        assert_eq!(got, code, "{sql}: {msg}");
    }
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memories").await, 0);
    assert_eq!(count(&db, "SELECT count(*) FROM engram.grants").await, 0);
}
