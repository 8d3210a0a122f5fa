//! Owner isolation (RLS under the restricted role) and ghost/agent scope
//! isolation, enforced in SQL.

use engram_tests::*;

async fn ids(c: &impl Sql, sql: &str) -> Vec<Uuid> {
    c.query(sql, &[]).await.expect(sql).iter().map(|r| r.get(0)).collect()
}

#[tokio::test]
async fn restricted_role_sees_only_its_owner_even_with_raw_select() {
    let db = TestDb::new(4).await;
    let alice_id = create(&db.admin, "alice", "alice's secret", &[1.0, 0.0, 0.0, 0.0], "").await;
    let bob_id = create(&db.admin, "bob", "bob's secret", &[1.0, 0.0, 0.0, 0.0], "").await;
    db.admin
        .query_one(
            "SELECT engram.update(owner => 'bob', id => $1, tags => '{x}')",
            &[&bob_id],
        )
        .await
        .unwrap();

    let alice = db.agent("alice").await;
    for table in [
        "engram.memories",
        "engram.revisions",
        "engram.audit_log",
        "engram.memory_access",
    ] {
        let sql = format!("SELECT count(*) FROM {table} t WHERE t.owner <> 'alice'");
        let n: i64 = alice.query_one(&sql, &[]).await.unwrap().get(0);
        assert_eq!(n, 0, "{table} leaks other owners' rows");
    }
    let visible = ids(&alice, "SELECT id FROM engram.memories").await;
    assert_eq!(visible, vec![alice_id]);
    // no direct writes at all, not even to its own rows: every change goes
    // through engram's functions, which audit it
    for sql in [
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key) VALUES ('alice', 'x', '\\x00', '\\x00')",
        "UPDATE engram.memories SET importance = 0.1",
        "UPDATE engram.memories SET trust_score = 1",
        "DELETE FROM engram.memories",
        "DELETE FROM engram.revisions",
        "DELETE FROM engram.audit_log",
        "INSERT INTO engram.audit_log (owner, action) VALUES ('alice', 'forged')",
    ] {
        let (code, _) = sqlstate(alice.execute(sql, &[]).await);
        assert_eq!(code, "42501", "{sql}");
    }

    // functions default to the bound owner and refuse another explicit owner
    let hits = ids(&alice, "SELECT id FROM engram.search(query_embedding => '[1,0,0,0]')").await;
    assert_eq!(hits, vec![alice_id]);
    let (code, msg) = sqlstate(
        alice
            .query(
                "SELECT * FROM engram.search(owner => 'bob', query_embedding => '[1,0,0,0]')",
                &[],
            )
            .await,
    );
    assert_eq!(code, "42501");
    assert!(msg.contains("bound owner"), "{msg}");
    let (code, _) = sqlstate(try_remember(&alice, "bob", "planted", &[0.0, 1.0, 0.0, 0.0], "").await);
    assert_eq!(code, "42501");
    // without a binding nothing is visible and functions refuse
    let anon = db.agent_without_owner().await;
    assert!(ids(&anon, "SELECT id FROM engram.memories").await.is_empty());
    let (code, msg) = sqlstate(anon.query("SELECT * FROM engram.list()", &[]).await);
    assert_eq!(code, "42501");
    assert!(msg.contains("engram.bind"), "{msg}");
    // administrative functions are not for agents
    let (code, _) = sqlstate(alice.query("SELECT engram.configure(embedding_dims => 8)", &[]).await);
    assert_eq!(code, "42501");
    let (code, _) = sqlstate(alice.query("SELECT engram.purge(older_than => '0 days')", &[]).await);
    assert_eq!(code, "42501");
    // stats are bound to the owner
    let s: serde_json::Value = alice.query_one("SELECT engram.stats()", &[]).await.unwrap().get(0);
    assert_eq!(s["total"], 1);
    assert_eq!(s["owner"], "alice");
}

#[tokio::test]
async fn a_foreign_id_looks_exactly_like_a_missing_one() {
    let db = TestDb::new(4).await;
    let bob_id = create(&db.admin, "bob", "bob's memory", &[1.0, 0.0, 0.0, 0.0], "").await;
    foreign_ids_look_missing(&db.admin, bob_id).await;
    foreign_ids_look_missing(&db.agent("alice").await, bob_id).await;
    // bob's memory is untouched
    let n = count(
        &db,
        &format!("SELECT count(*) FROM engram.memories WHERE id = '{bob_id}' AND status = 'active' AND tags = '{{}}'"),
    )
    .await;
    assert_eq!(n, 1);
}

async fn foreign_ids_look_missing(client: &impl Sql, bob_id: Uuid) {
    let missing = Uuid::new_v4();
    {
        for (fmt, extra) in [
            ("SELECT * FROM engram.recall(owner => 'alice', id => $1)", ""),
            ("SELECT engram.update(owner => 'alice', id => $1, tags => '{x}')", ""),
            ("SELECT engram.forget(owner => 'alice', id => $1, hard => true)", ""),
            ("SELECT engram.flag(owner => 'alice', id => $1, reason => 'r')", ""),
            ("SELECT * FROM engram.revisions(owner => 'alice', id => $1)", ""),
        ] {
            let _ = extra;
            let (code_f, msg_f) = sqlstate(client.query(fmt, &[&bob_id]).await);
            let (code_m, msg_m) = sqlstate(client.query(fmt, &[&missing]).await);
            assert_eq!(code_f, "P0002", "{fmt}");
            assert_eq!(code_f, code_m);
            assert_eq!(
                msg_f.replace(&bob_id.to_string(), "ID"),
                msg_m.replace(&missing.to_string(), "ID")
            );
        }
    }
}

/// bob's collection holds memories of two ghost conversations (alice's and
/// carol's user ghosts), an agent memory and a normal one.
struct Ghosts {
    db: TestDb,
    normal: Uuid,
    alice_ghost: Uuid,
    carol_ghost: Uuid,
    agent: Uuid,
}

const ALICE_SCOPE: &str = "engram.scope_tags('ghost', ghost_type => 'user', ghost_owner => 'alice')";
const CAROL_SCOPE: &str = "engram.scope_tags('ghost', ghost_type => 'user', ghost_owner => 'carol')";

async fn ghosts() -> Ghosts {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let v = [1.0, 0.0, 0.0, 0.0];
    let normal = create(c, "bob", "bob likes chess", &v, "").await;
    let alice_ghost = create(
        c,
        "bob",
        "bob asked alice's ghost about chess",
        &v,
        "internal_type => 'ghost', tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'alice')",
    )
    .await;
    let carol_ghost = create(
        c,
        "bob",
        "bob told carol's ghost a chess secret",
        &[0.99, 0.05, 0.0, 0.0],
        "internal_type => 'ghost', tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'carol')",
    )
    .await;
    let agent = create(
        c,
        "bob",
        "agent note: bob plays chess on Sundays",
        &[0.98, 0.1, 0.0, 0.0],
        "internal_type => 'agent', tags => engram.internal_tags('agent')",
    )
    .await;
    Ghosts {
        db,
        normal,
        alice_ghost,
        carol_ghost,
        agent,
    }
}

#[tokio::test]
async fn default_search_and_list_never_show_internal_memories() {
    let g = ghosts().await;
    let c = &g.db.admin;
    let q = "query_embedding => '[1,0,0,0]'";
    assert_eq!(
        ids(c, &format!("SELECT id FROM engram.search(owner => 'bob', {q})")).await,
        vec![g.normal]
    );
    assert_eq!(
        ids(c, "SELECT id FROM engram.list(owner => 'bob')").await,
        vec![g.normal]
    );
    assert_eq!(
        ids(c, "SELECT id FROM engram.search(owner => 'bob', query_text => 'chess')").await,
        vec![g.normal]
    );
    // id-based calls without the scope cannot reach an internal memory either
    let (code, _) = sqlstate(
        c.query(
            "SELECT * FROM engram.recall(owner => 'bob', id => $1)",
            &[&g.alice_ghost],
        )
        .await,
    );
    assert_eq!(code, "P0002");
    let (code, _) = sqlstate(
        c.query(
            "SELECT engram.update(owner => 'bob', id => $1, tags => '{x}')",
            &[&g.agent],
        )
        .await,
    );
    assert_eq!(code, "P0002");
}

#[tokio::test]
async fn a_ghost_scope_sees_only_its_own_memories() {
    let g = ghosts().await;
    let c = &g.db.admin;
    let q = "query_embedding => '[1,0,0,0]'";
    let got = ids(
        c,
        &format!(
            "SELECT id FROM engram.search(owner => 'bob', {q}, internal_type => 'ghost', scope_tags => {ALICE_SCOPE})"
        ),
    )
    .await;
    assert_eq!(got, vec![g.alice_ghost]);
    // passing carol's tags as filters only narrows: never widens the scope
    for filter in ["tags_any", "tags_all"] {
        let got = ids(
            c,
            &format!(
                "SELECT id FROM engram.search(owner => 'bob', {q}, internal_type => 'ghost', scope_tags => {ALICE_SCOPE}, {filter} => {CAROL_SCOPE})"
            ),
        )
        .await;
        assert!(!got.contains(&g.carol_ghost), "{filter}: {got:?}");
        assert!(got.iter().all(|id| *id == g.alice_ghost), "{filter}: {got:?}");
        if filter == "tags_all" {
            assert!(got.is_empty());
        }
    }
    let got = ids(
        c,
        &format!("SELECT id FROM engram.list(owner => 'bob', internal_type => 'ghost', scope_tags => {ALICE_SCOPE})"),
    )
    .await;
    assert_eq!(got, vec![g.alice_ghost]);
    let got = ids(
        c,
        &format!("SELECT id FROM engram.search(owner => 'bob', {q}, internal_type => 'agent')"),
    )
    .await;
    assert_eq!(got, vec![g.agent]);
    // alice's ghost cannot recall or change carol's ghost memory
    let (code, _) = sqlstate(
        c.query(
            &format!("SELECT * FROM engram.recall(owner => 'bob', id => $1, internal_type => 'ghost', scope_tags => {ALICE_SCOPE})"),
            &[&g.carol_ghost],
        )
        .await,
    );
    assert_eq!(code, "P0002");
    let row = c
        .query_one(
            &format!("SELECT content FROM engram.recall(owner => 'bob', id => $1, internal_type => 'ghost', scope_tags => {ALICE_SCOPE})"),
            &[&g.alice_ghost],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "bob asked alice's ghost about chess");
    // a ghost search without a scope is refused, never an empty scope
    let (code, _) = sqlstate(
        c.query(
            &format!("SELECT * FROM engram.search(owner => 'bob', {q}, internal_type => 'ghost')"),
            &[],
        )
        .await,
    );
    assert_eq!(code, "22004");
}

#[tokio::test]
async fn conflicts_never_cross_scopes() {
    let g = ghosts().await;
    let c = &g.db.admin;
    // nearly the same vector as every memory above, written in alice's ghost scope
    let (status, _, conflicts) = remember(
        c,
        "bob",
        "bob likes chess a lot",
        &[1.0, 0.01, 0.0, 0.0],
        "internal_type => 'ghost', tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'alice')",
    )
    .await;
    assert_eq!(status, "conflict");
    let ids: Vec<String> = conflicts
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        ids,
        vec![g.alice_ghost.to_string()],
        "only alice's ghost memory may conflict"
    );
    // in a fresh ghost scope nothing conflicts, although bob has near-identical memories
    let (status, _, _) = remember(
        c,
        "bob",
        "bob likes chess a lot",
        &[1.0, 0.01, 0.0, 0.0],
        "internal_type => 'ghost', tags => engram.internal_tags('ghost', ghost_type => 'space', ghost_space => 'chess-club')",
    )
    .await;
    assert_eq!(status, "created");
    // another owner's memories never conflict
    let (status, _, _) = remember(c, "dave", "bob likes chess", &[1.0, 0.0, 0.0, 0.0], "").await;
    assert_eq!(status, "created");
}

#[tokio::test]
async fn ghost_writes_must_carry_exactly_one_complete_scope() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let v = [1.0, 0.0, 0.0, 0.0];
    for extra in [
        // no scope at all: every ghost reader would see it
        "internal_type => 'ghost', tags => '{ghost}'",
        // two scopes at once: planted into carol's scope
        "internal_type => 'ghost', tags => '{ghost,ghost_type:user,ghost_owner:user:alice,ghost_owner:user:carol}'",
        // ghost tags on a normal memory
        "tags => '{ghost_owner:user:alice}'",
        // agent memory without its marker
        "internal_type => 'agent'",
        "internal_type => 'spirit'",
    ] {
        let (code, _) = sqlstate(try_remember(c, "bob", "x", &v, extra).await);
        assert_eq!(code, "22023", "{extra}");
    }
    assert_eq!(count(&db, "SELECT count(*) FROM engram.memories").await, 0);
    // updates cannot move a ghost memory to another scope
    let id = create(
        c,
        "bob",
        "x",
        &v,
        "internal_type => 'ghost', tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'alice')",
    )
    .await;
    let (code, _) = sqlstate(
        c.query(
            &format!("SELECT engram.update(owner => 'bob', id => $1, tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'carol'), internal_type => 'ghost', scope_tags => {ALICE_SCOPE})"),
            &[&id],
        )
        .await,
    );
    assert_eq!(code, "22023");
}

#[tokio::test]
async fn internal_tags_match_the_seed_table() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let tags = |sql: &'static str| async move { c.query_one(sql, &[]).await.map(|r| r.get::<_, Vec<String>>(0)) };
    assert_eq!(
        tags("SELECT engram.internal_tags('agent')").await.unwrap(),
        vec!["agent"]
    );
    assert_eq!(
        tags("SELECT engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'alice')")
            .await
            .unwrap(),
        vec!["ghost", "ghost_type:user", "ghost_owner:user:alice"]
    );
    assert_eq!(
        tags("SELECT engram.internal_tags('ghost', ghost_type => 'space', ghost_space => 'music-lovers')")
            .await
            .unwrap(),
        vec!["ghost", "ghost_type:space", "ghost_owner:space:music-lovers"]
    );
    assert_eq!(
        tags("SELECT engram.internal_tags('ghost', ghost_type => 'group', ghost_group => 'band-mates')")
            .await
            .unwrap(),
        vec!["ghost", "ghost_type:group", "ghost_owner:group:band-mates"]
    );
    assert_eq!(
        tags("SELECT engram.scope_tags('ghost', ghost_type => 'user', ghost_owner => 'alice')")
            .await
            .unwrap(),
        vec!["ghost_type:user", "ghost_owner:user:alice"]
    );
    for bad in [
        "SELECT engram.internal_tags('ghost')",
        "SELECT engram.internal_tags('ghost', ghost_type => 'user')",
        "SELECT engram.internal_tags('ghost', ghost_type => 'space', ghost_owner => 'alice')",
        "SELECT engram.internal_tags('ghost', ghost_type => 'planet', ghost_owner => 'x')",
        "SELECT engram.internal_tags('agent', ghost_type => 'user')",
        "SELECT engram.internal_tags(NULL)",
        "SELECT engram.scope_tags('ghost', ghost_type => 'group')",
    ] {
        let e = tags(bad).await.expect_err(bad);
        let code = e.as_db_error().unwrap().code().code().to_string();
        assert!(code == "22023" || code == "22004", "{bad}: {code}");
    }
}

#[tokio::test]
async fn the_whole_api_works_under_the_restricted_role() {
    let db = TestDb::new(4).await;
    let alice = db.agent("alice").await;
    let a = create(&alice, "alice", "alice likes tea", &[1.0, 0.0, 0.0, 0.0], "").await;
    let b = create(&alice, "alice", "alice likes jazz", &[0.0, 1.0, 0.0, 0.0], "").await;
    let rev: i32 = alice
        .query_one(
            "SELECT engram.update(id => $1, tags => '{taste}', reason => 'tagged')",
            &[&a],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rev, 2);
    alice
        .query_one("SELECT engram.flag(id => $1, reason => 'unsure')", &[&b])
        .await
        .unwrap();
    assert_eq!(
        ids(
            &alice,
            "SELECT id FROM engram.search(query_embedding => '[1,0,0,0]', k => 1)"
        )
        .await,
        vec![a]
    );
    assert_eq!(
        ids(&alice, "SELECT id FROM engram.search(query_text => 'jazz')").await,
        vec![b]
    );
    assert_eq!(ids(&alice, "SELECT id FROM engram.list()").await.len(), 2);
    let n = alice
        .query("SELECT * FROM engram.revisions(id => $1)", &[&a])
        .await
        .unwrap()
        .len();
    assert_eq!(n, 2);
    let merged: Uuid = alice
        .query_one(
            "SELECT engram.consolidate(ids => ARRAY[$1, $2]::uuid[], content => 'alice likes tea and jazz', embedding => '[1,1,0,0]')",
            &[&a, &b],
        )
        .await
        .unwrap()
        .get(0);
    let row = alice
        .query_one("SELECT content, access_count FROM engram.recall(id => $1)", &[&merged])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "alice likes tea and jazz");
    assert!(alice
        .query_one("SELECT engram.forget(id => $1, hard => true)", &[&merged])
        .await
        .unwrap()
        .get::<_, bool>(0));
    assert_eq!(
        alice
            .query_one("SELECT engram.expire()", &[])
            .await
            .unwrap()
            .get::<_, i64>(0),
        0
    );
    alice.query_one("SELECT engram.rescore()", &[]).await.unwrap();
    let s: serde_json::Value = alice.query_one("SELECT engram.stats()", &[]).await.unwrap().get(0);
    assert_eq!(s["by_status"]["archived"], 2);
    // every audit row this role wrote is alice's, names its token, and
    // there is one per write
    let unnamed = count(
        &db,
        "SELECT count(*) FROM engram.audit_log WHERE actor = 'engram_app' AND (token_id IS NULL OR token_label <> 'test')",
    )
    .await;
    assert_eq!(unnamed, 0);
    let foreign = count(
        &db,
        "SELECT count(*) FROM engram.audit_log WHERE actor = 'engram_app' AND owner IS DISTINCT FROM 'alice'",
    )
    .await;
    assert_eq!(foreign, 0);
    let mine = count(&db, "SELECT count(*) FROM engram.audit_log WHERE actor = 'engram_app'").await;
    assert_eq!(mine, 7, "remember ×2, update, flag, consolidate, forget, rescore");
}
