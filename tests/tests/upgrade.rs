//! ALTER EXTENSION engram UPDATE from each earlier release (0.1.0 to 0.22.0,
//! whose install scripts are kept as tests/sql/engram--<version>.sql): the
//! data written under it survives, and the catalog equals a fresh install's.

use engram_tests::*;
use tokio_postgres::Client;

/// A new database with engram `version` installed from sql/ (4-dimension embeddings).
async fn install(version: &str) -> (String, Client) {
    let (name, db) = empty_database().await;
    db.batch_execute(&format!(
        "CREATE EXTENSION engram VERSION '{version}' CASCADE;
         SELECT engram.configure(embedding_dims => 4);"
    ))
    .await
    .unwrap_or_else(|e| panic!("install {version}: {e:?}"));
    (name, db)
}

/// ALTER EXTENSION engram UPDATE to this version; fails unless the
/// `snapshot` query reads the same before and after and the catalog equals
/// a fresh install's.
async fn update_keeping(old: &Client, snapshot: &str) {
    let before: String = old.query_one(snapshot, &[]).await.unwrap().get(0);
    old.batch_execute("ALTER EXTENSION engram UPDATE")
        .await
        .expect("ALTER EXTENSION engram UPDATE");
    assert_eq!(extversion(old).await, env!("CARGO_PKG_VERSION"));
    let after: String = old.query_one(snapshot, &[]).await.unwrap().get(0);
    assert_eq!(after, before, "data changed in the upgrade");
    assert_same_catalog_as_a_fresh_install(old).await;
}

/// The restricted role in an open transaction bound with the token an
/// older `version` issued (it must still bind after the update).
async fn bound_app(db: &str, token: &str, version: &str) -> Client {
    let app = connect_as(db, "engram_app").await;
    app.batch_execute("BEGIN").await.unwrap();
    app.query_one("SELECT engram.bind($1)", &[&token])
        .await
        .unwrap_or_else(|e| panic!("the {version} token does not bind: {e:?}"));
    app
}

/// Fails, listing the lines that differ, when `upgraded`'s catalog is not a
/// fresh install's.
async fn assert_same_catalog_as_a_fresh_install(upgraded: &Client) {
    // A fresh single-node install (as the upgraded one is), also when the
    // suite runs against a Citus coordinator.
    let (_, fresh) = install(env!("CARGO_PKG_VERSION")).await;
    let (want, got) = (catalog(&fresh).await, catalog(upgraded).await);
    let missing: Vec<&String> = want.iter().filter(|l| !got.contains(l)).collect();
    let extra: Vec<&String> = got.iter().filter(|l| !want.contains(l)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "upgraded catalog differs from a fresh install\nonly in fresh:\n  {}\nonly in upgraded:\n  {}",
        missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  "),
        extra.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  ")
    );
}

#[tokio::test]
async fn upgrade_from_0_1_0_keeps_data_and_equals_a_fresh_install() {
    let (name, old) = install("0.1.0").await;
    // A populated 0.1.0 database: memories of two owners, a ghost memory,
    // revisions, access statistics, an archived memory and tokens.
    let tea = create(
        &old,
        "alice",
        "alice drinks green tea",
        &[1.0, 0.0, 0.0, 0.0],
        "tags => '{drinks}'",
    )
    .await;
    create(&old, "bob", "bob plays chess", &[0.0, 1.0, 0.0, 0.0], "").await;
    let ghost = create(
        &old,
        "bob",
        "bob told alice's ghost a secret",
        &[0.0, 0.0, 1.0, 0.0],
        "internal_type => 'ghost', tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'alice')",
    )
    .await;
    let gone = create(&old, "alice", "alice lived in Lyon", &[0.0, 0.0, 0.0, 1.0], "").await;
    old.batch_execute(&format!(
        "SELECT engram.update(owner => 'alice', id => '{tea}', content => 'alice drinks oolong tea',
                              embedding => '[1,0.1,0,0]', reason => 'switched');
         SELECT engram.forget(owner => 'alice', id => '{gone}');
         SELECT count(*) FROM engram.search(owner => 'alice', query_embedding => '[1,0,0,0]');"
    ))
    .await
    .unwrap();
    let token: String = old
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'laptop')", &[])
        .await
        .unwrap()
        .get(0);
    let snapshot = "SELECT string_agg(concat_ws('/', m.id, m.owner, m.content, m.tags, m.status, m.revision,
                                              m.embedding, m.internal_type), ',' ORDER BY m.id)
                    || (SELECT string_agg(concat_ws('/', v.memory_id, v.revision, v.content, v.reason), ',')
                        FROM engram.revisions v)
                    || (SELECT sum(a.access_count)::text FROM engram.memory_access a)
                    || (SELECT count(*)::text FROM engram.audit_log)
                    || (SELECT string_agg(t.token_sha256::text, ',') FROM engram.tokens t)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    let level: i16 = old
        .query_one("SELECT min(access_level) FROM engram.memories", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(level, 5, "existing memories are owner-only to ghosts");

    // And it works: the 0.1.0 token binds, the old rows are found, the
    // ghost memory stays in its scope.
    let app = bound_app(&name, &token, "0.1.0").await;
    let found: Vec<Uuid> = app
        .query("SELECT id FROM engram.search(query_text => 'oolong')", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(found, vec![tea]);
    let revisions = app
        .query("SELECT * FROM engram.revisions(id => $1)", &[&tea])
        .await
        .unwrap()
        .len();
    assert_eq!(revisions, 2);
    app.batch_execute("COMMIT").await.unwrap();
    let n = old
        .query(
            "SELECT id FROM engram.search(owner => 'bob', query_embedding => '[0,0,1,0]', internal_type => 'ghost',
                 scope_tags => engram.scope_tags('ghost', ghost_type => 'user', ghost_owner => 'alice'))",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(n.iter().map(|r| r.get::<_, Uuid>(0)).collect::<Vec<_>>(), vec![ghost]);
}

#[tokio::test]
async fn upgrade_from_0_2_0_keeps_data_and_equals_a_fresh_install() {
    let (name, old) = install("0.2.0").await;
    // A populated 0.2.0 database: memories, a revision, a slot, sharing
    // settings, a publication, a group and tokens.
    let tea = create(
        &old,
        "alice",
        "alice drinks green tea",
        &[1.0, 0.0, 0.0, 0.0],
        "access_level => 2",
    )
    .await;
    create(&old, "bob", "bob plays chess", &[0.0, 1.0, 0.0, 0.0], "").await;
    old.batch_execute(&format!(
        "SELECT engram.update(owner => 'alice', id => '{tea}', content => 'alice drinks oolong tea',
                              embedding => '[1,0.1,0,0]', reason => 'switched');
         SELECT engram.slot_set(owner => 'alice', label => 'persona', content => 'terse', pinned => true);
         SELECT engram.slot_set(owner => 'alice', label => 'persona', content => 'verbose', workspace => 'api');
         SELECT engram.ghost_settings(owner => 'alice', enabled => true, default_trust => 1);
         SELECT engram.grant(owner => 'alice', accessor => 'bob', trust => 3);
         SELECT engram.publish(owner => 'alice', id => '{tea}', space => 'lobby');
         SELECT engram.add_member(group_id => 'team', member => 'alice');"
    ))
    .await
    .unwrap();
    let token: String = old
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'laptop')", &[])
        .await
        .unwrap()
        .get(0);
    let snapshot = "SELECT string_agg(concat_ws('/', m.id, m.owner, m.content, m.status, m.revision, m.embedding,
                                              m.access_level), ',' ORDER BY m.id)
                    || (SELECT string_agg(concat_ws('/', v.memory_id, v.revision, v.content), ',') FROM engram.revisions v)
                    || (SELECT string_agg(concat_ws('/', s.owner, s.workspace, s.label, s.content, s.pinned), ','
                                          ORDER BY s.workspace) FROM engram.slots s)
                    || (SELECT string_agg(concat_ws('/', g.owner, g.accessor, g.trust), ',') FROM engram.grants g)
                    || (SELECT string_agg(concat_ws('/', p.memory_id, p.space), ',') FROM engram.publications p)
                    || (SELECT string_agg(concat_ws('/', x.group_id, x.member), ',') FROM engram.group_members x)
                    || (SELECT count(*)::text FROM engram.audit_log)
                    || (SELECT string_agg(t.token_sha256::text, ',') FROM engram.tokens t)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;

    // The 0.2.0 token binds and the new functions work on the old data.
    let app = bound_app(&name, &token, "0.2.0").await;
    app.query_one("SELECT engram.workspace_create(name => 'api')", &[])
        .await
        .unwrap();
    let captured: String = app
        .query_one(
            "SELECT status FROM engram.capture(event_type => 'observation', content => 'upgraded', session_id => 's1',
                                               workspace => 'api')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(captured, "captured");
    let slot: String = app
        .query_one("SELECT engram.slot_get(label => 'persona', workspace => 'api')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(slot, "verbose");
    app.batch_execute("COMMIT").await.unwrap();
}

/// Tagged memories of two owners (so that scope lists exist) and a ghost
/// memory: alice's tea (drinks, home), chess (games) and Lyon (home), bob's
/// coffee (drinks) and bob's secret told to alice's ghost. Returns the ids of
/// alice's three.
async fn tagged_memories(old: &Client) -> (Uuid, Uuid, Uuid) {
    let tea = create(
        old,
        "alice",
        "alice drinks green tea",
        &[1.0, 0.0, 0.0, 0.0],
        "tags => '{drinks,home}'",
    )
    .await;
    let chess = create(
        old,
        "alice",
        "alice plays chess",
        &[0.0, 1.0, 0.0, 0.0],
        "tags => '{games}'",
    )
    .await;
    let gone = create(
        old,
        "alice",
        "alice lived in Lyon",
        &[0.0, 0.0, 0.0, 1.0],
        "tags => '{home}'",
    )
    .await;
    create(
        old,
        "bob",
        "bob drinks coffee",
        &[0.9, 0.1, 0.0, 0.0],
        "tags => '{drinks}'",
    )
    .await;
    create(
        old,
        "bob",
        "bob told alice's ghost a secret",
        &[0.0, 0.0, 1.0, 0.0],
        "internal_type => 'ghost', tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'alice')",
    )
    .await;
    (tea, chess, gone)
}

#[tokio::test]
async fn upgrade_from_0_3_0_builds_the_scope_lists_and_equals_a_fresh_install() {
    let (name, old) = install("0.3.0").await;
    // A populated 0.3.0 database: tagged memories of two owners, a ghost
    // memory, an archived one, a captured event without an embedding, a
    // workspace with a state.
    let (tea, chess, gone) = tagged_memories(&old).await;
    old.batch_execute(&format!(
        "SELECT engram.forget(owner => 'alice', id => '{gone}');
         SELECT engram.workspace_create(owner => 'alice', name => 'api');
         SELECT engram.state_save(owner => 'alice', workspace => 'api', name => 'v1', active_task => 'ship');
         SELECT engram.capture(owner => 'alice', event_type => 'observation', content => 'tests pass',
                               session_id => 's1', workspace => 'api');"
    ))
    .await
    .unwrap();
    let token: String = old
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'laptop')", &[])
        .await
        .unwrap()
        .get(0);
    let snapshot = "SELECT string_agg(concat_ws('/', m.id, m.owner, m.content, m.tags, m.status, m.embedding,
                                              m.internal_type), ',' ORDER BY m.id)
                    || (SELECT string_agg(concat_ws('/', w.name, w.status), ',') FROM engram.workspaces w)
                    || (SELECT string_agg(concat_ws('/', s.name, s.active_task), ',') FROM engram.states s)
                    || (SELECT count(*)::text FROM engram.events)
                    || (SELECT count(*)::text FROM engram.audit_log)
                    || (SELECT string_agg(t.token_sha256::text, ',') FROM engram.tokens t)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;

    // The lists were built from the stored memories: 3 + 2 entries for
    // alice's active tagged memories, 2 for bob's, 4 for the ghost memory;
    // none for the archived memory or the event without an embedding.
    let entries: i64 = old
        .query_one("SELECT count(*) FROM engram.scope_entries", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(entries, 11);
    let sizes: i64 = old
        .query_one("SELECT sum(n)::bigint FROM engram.scope_sizes", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(sizes, entries);

    // Scoped searches of the 0.3.0 rows go through them, bound by the 0.3.0 token.
    let app = bound_app(&name, &token, "0.3.0").await;
    let found: Vec<Uuid> = column(
        &app,
        "SELECT id FROM engram.search(query_embedding => '[1,0,0,0]', tags_all => '{home}')",
    )
    .await;
    assert_eq!(found, vec![tea], "the archived memory stays out of the home list");
    let all: Vec<Uuid> = column(
        &app,
        "SELECT id FROM engram.search(query_embedding => '[0,1,0,0]', k => 2)",
    )
    .await;
    assert_eq!(all, vec![chess, tea]);
    app.batch_execute("COMMIT").await.unwrap();
    // New writes keep the lists from here on.
    create(
        &old,
        "alice",
        "alice moved to Porto",
        &[0.0, 0.0, 0.5, 0.5],
        "tags => '{home}'",
    )
    .await;
    let home: i64 = old
        .query_one(
            "SELECT n FROM engram.scope_sizes WHERE owner = 'alice' AND list = engram._list_key(NULL, 'home')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(home, 2);
}

#[tokio::test]
async fn upgrade_from_0_4_0_keeps_the_scope_lists_and_equals_a_fresh_install() {
    let (name, old) = install("0.4.0").await;
    // A populated 0.4.0 database: tagged memories of two owners (so scope
    // lists and sizes exist), a ghost memory, an archived one, an event, a
    // token.
    let (tea, chess, gone) = tagged_memories(&old).await;
    old.batch_execute(&format!(
        "SELECT engram.forget(owner => 'alice', id => '{gone}');
         SELECT engram.capture(owner => 'alice', event_type => 'observation', content => 'tests pass',
                               session_id => 's1');"
    ))
    .await
    .unwrap();
    let token: String = old
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'laptop')", &[])
        .await
        .unwrap()
        .get(0);
    // The lists and their sizes are data too: the update keeps them as they are.
    let snapshot = "SELECT string_agg(concat_ws('/', m.id, m.owner, m.content, m.tags, m.status, m.embedding,
                                              m.internal_type), ',' ORDER BY m.id)
                    || (SELECT string_agg(concat_ws('/', e.owner, e.list, e.memory_id), ','
                                          ORDER BY e.owner, e.list, e.memory_id) FROM engram.scope_entries e)
                    || (SELECT string_agg(concat_ws('/', z.owner, z.list, z.n), ',' ORDER BY z.owner, z.list)
                        FROM engram.scope_sizes z)
                    || (SELECT count(*)::text FROM engram.events)
                    || (SELECT count(*)::text FROM engram.audit_log)
                    || (SELECT string_agg(t.token_sha256::text, ',') FROM engram.tokens t)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;

    // Searches of the 0.4.0 rows, bound by the 0.4.0 token: through the
    // home list, and through the HNSW walk (the list path turned off).
    let app = bound_app(&name, &token, "0.4.0").await;
    let ids = |rows: Vec<tokio_postgres::Row>| rows.iter().map(|r| r.get(0)).collect::<Vec<Uuid>>();
    let home = app
        .query(
            "SELECT id FROM engram.search(query_embedding => '[1,0,0,0]', tags_all => '{home}')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(ids(home), vec![tea], "the archived memory stays out of the home list");
    app.batch_execute(
        "SET LOCAL engram.list_search_rows = 0; SET LOCAL engram.hnsw_min_selectivity = 0;
         SET LOCAL engram.exact_search_rows = 0",
    )
    .await
    .unwrap();
    let walked = app
        .query(
            "SELECT id FROM engram.search(query_embedding => '[0,1,0,0]', k => 2)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(ids(walked), vec![chess, tea]);
    app.batch_execute("COMMIT").await.unwrap();

    // The recreated triggers keep the lists: a new write is listed, a forget unlisted.
    let porto = create(
        &old,
        "alice",
        "alice moved to Porto",
        &[0.0, 0.0, 0.5, 0.5],
        "tags => '{home}'",
    )
    .await;
    old.batch_execute(&format!("SELECT engram.forget(owner => 'alice', id => '{tea}')"))
        .await
        .unwrap();
    let listed: Vec<Uuid> = column(
        &old,
        "SELECT memory_id FROM engram.scope_entries WHERE owner = 'alice' AND list = engram._list_key(NULL, 'home')",
    )
    .await;
    assert_eq!(listed, vec![porto]);
    let home_size: i64 = old
        .query_one(
            "SELECT n FROM engram.scope_sizes WHERE owner = 'alice' AND list = engram._list_key(NULL, 'home')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(home_size, 1);
}

#[tokio::test]
async fn upgrade_from_0_5_0_adds_vision_memories_and_equals_a_fresh_install() {
    let (name, old) = install("0.5.0").await;
    // A populated 0.5.0 database: tagged memories with their scope lists, a
    // token, and a memory whose metadata already has an "images" key (0.5.0
    // never checked it): it holds no reference and must stay forgettable.
    let (tea, _chess, gone) = tagged_memories(&old).await;
    old.execute("SELECT engram.forget(owner => 'alice', id => $1)", &[&gone])
        .await
        .unwrap();
    let named = "7".repeat(64);
    let legacy = create(
        &old,
        "alice",
        "alice's old screenshot note",
        &[0.0, 0.0, 0.6, 0.8],
        &format!("metadata => '{{\"images\": [\"{named}\", 42]}}'"),
    )
    .await;
    let token: String = old
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'laptop')", &[])
        .await
        .unwrap()
        .get(0);
    let snapshot = "SELECT string_agg(concat_ws('/', m.id, m.owner, m.content, m.tags, m.metadata, m.status,
                                              m.embedding), ',' ORDER BY m.id)
                    || (SELECT string_agg(concat_ws('/', e.owner, e.list, e.memory_id), ','
                                          ORDER BY e.owner, e.list, e.memory_id) FROM engram.scope_entries e)
                    || (SELECT count(*)::text FROM engram.audit_log)
                    || (SELECT string_agg(t.token_sha256::text, ',') FROM engram.tokens t)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;

    // Vision works on the upgraded database, for the 0.5.0 token's owner.
    let app = bound_app(&name, &token, "0.5.0").await;
    let png = b"\x89PNG\r\n\x1a\n upgraded".to_vec();
    let sha: String = app
        .query_one("SELECT engram.image_put(data => $1, mime => 'image/png')", &[&png])
        .await
        .expect("image_put after the upgrade")
        .get(0);
    let unit = format!("[{}]", vec!["0.1"; 512].join(","));
    app.execute(
        "SELECT engram.vision_embed(sha256 => $1, embedding => $2::text::vector, model => 'm')",
        &[&sha, &unit],
    )
    .await
    .unwrap();
    let found: Vec<String> = app
        .query(
            "SELECT sha256 FROM engram.vision_search(query_embedding => $1::text::vector)",
            &[&unit],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(found, vec![sha.clone()]);
    // The old memory, which names images it never held, is forgotten
    // without touching the new image's references; the search of 0.5.0
    // rows still works.
    app.execute("SELECT engram.forget(id => $1, hard => true)", &[&legacy])
        .await
        .expect("a 0.5.0 memory with an unchecked images key is forgettable");
    let refs: i32 = app
        .query_one("SELECT refs FROM engram.images WHERE sha256 = $1", &[&sha])
        .await
        .unwrap()
        .get(0);
    assert_eq!(refs, 1);
    let hits = app
        .query(
            "SELECT id FROM engram.search(query_embedding => '[1,0,0,0]', tags_all => '{home}')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(hits.iter().map(|r| r.get(0)).collect::<Vec<Uuid>>(), vec![tea]);
    app.batch_execute("COMMIT").await.unwrap();
}

#[tokio::test]
async fn upgrade_from_0_6_0_keeps_images_and_tokens_and_equals_a_fresh_install() {
    let (name, old) = install("0.6.0").await;
    // A populated 0.6.0 database: tagged memories, a token, an image held
    // by a put and by a memory naming it, a group.
    let (tea, _chess, gone) = tagged_memories(&old).await;
    old.execute("SELECT engram.forget(owner => 'alice', id => $1)", &[&gone])
        .await
        .unwrap();
    let token: String = old
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'laptop')", &[])
        .await
        .unwrap()
        .get(0);
    let png = b"\x89PNG\r\n\x1a\n from 0.6.0".to_vec();
    let sha: String = old
        .query_one(
            "SELECT engram.image_put(owner => 'alice', data => $1, mime => 'image/png')",
            &[&png],
        )
        .await
        .unwrap()
        .get(0);
    let holder = create(
        &old,
        "alice",
        "alice's screenshot",
        &[0.0, 0.0, 0.6, 0.8],
        &format!("metadata => '{{\"images\": [\"{sha}\"]}}'"),
    )
    .await;
    old.batch_execute("SELECT engram.add_member('team', 'alice')")
        .await
        .unwrap();
    let snapshot = "SELECT string_agg(concat_ws('/', m.id, m.owner, m.content, m.tags, m.metadata, m.status,
                                              m.embedding), ',' ORDER BY m.id)
                    || (SELECT string_agg(concat_ws('/', i.owner, i.sha256, i.refs, i.bytes), ',') FROM engram.images i)
                    || (SELECT string_agg(concat_ws('/', h.memory_id, h.sha256), ',') FROM engram.image_holds h)
                    || (SELECT string_agg(concat_ws('/', g.group_id, g.member), ',') FROM engram.group_members g)
                    || (SELECT count(*)::text FROM engram.audit_log)
                    || (SELECT string_agg(t.token_sha256::text, ',') FROM engram.tokens t)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;

    // The 0.6.0 token binds and its owner's data answers; the image is held
    // by the memory until it is hard-forgotten, then by the put.
    let app = bound_app(&name, &token, "0.6.0").await;
    let hits = app
        .query(
            "SELECT id FROM engram.search(query_embedding => '[1,0,0,0]', tags_all => '{home}')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(hits.iter().map(|r| r.get(0)).collect::<Vec<Uuid>>(), vec![tea]);
    app.execute("SELECT engram.forget(id => $1, hard => true)", &[&holder])
        .await
        .unwrap();
    let left: i32 = app
        .query_one("SELECT engram.image_release(sha256 => $1)", &[&sha])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    app.batch_execute("COMMIT").await.unwrap();
    // The DBA's own calls keep their privilege after the update.
    let n: i64 = old
        .query_one("SELECT count(*) FROM engram.list(owner => 'alice')", &[])
        .await
        .unwrap()
        .get(0);
    assert!(n >= 1);
}

#[tokio::test]
async fn upgrade_from_0_7_0_widens_every_key_to_the_owner_and_equals_a_fresh_install() {
    let (name, old) = install("0.7.0").await;
    // A populated 0.7.0 database: every table whose key 0.8.0 widens has
    // rows (memories with a revision, access counts, an event in a
    // workspace, a state, a publication, a miss, owner and database-wide
    // audit rows), plus a token and usage counters.
    let (tea, chess, _gone) = tagged_memories(&old).await;
    old.batch_execute(&format!(
        "SELECT engram.update(owner => 'alice', id => '{tea}', content => 'alice drinks oolong tea', embedding => '[0.9,0.1,0,0]', reason => 'taste');
         SELECT engram.workspace_create(owner => 'alice', name => 'api');
         SELECT engram.state_save(owner => 'alice', workspace => 'api', name => 'v1', active_task => 'ship');
         SELECT engram.capture(owner => 'alice', event_type => 'observation', content => 'tests pass',
                               session_id => 's1', workspace => 'api');
         SELECT engram.publish(owner => 'alice', id => '{chess}', space => 'lobby');
         SELECT count(*) FROM engram.search(owner => 'alice', query_embedding => '[0,0,1,0]', min_similarity => 0.99);
         SELECT count(*) FROM engram.recall(owner => 'alice', id => '{tea}');
         SELECT engram.purge(older_than => interval '1 day');"
    ))
    .await
    .unwrap();
    // 0.7.0's hybrid search fused ranks in functions this library no
    // longer has: it answers with what to run.
    let (code, msg) = sqlstate(
        old.query(
            "SELECT count(*) FROM engram.search(owner => 'alice', query_text => 'oolong', query_embedding => '[1,0,0,0]')",
            &[],
        )
        .await,
    );
    assert_eq!(code, "55000", "{msg}");
    assert!(
        msg.contains("_weighted_fusion") && msg.contains("ALTER EXTENSION engram UPDATE"),
        "{msg}"
    );
    let token: String = old
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'laptop')", &[])
        .await
        .unwrap()
        .get(0);
    let database_wide: i64 = old
        .query_one("SELECT count(*) FROM engram.audit_log WHERE owner IS NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        database_wide > 0,
        "0.7.0 wrote database-wide audit rows with a NULL owner"
    );
    let snapshot = "SELECT string_agg(concat_ws('/', m.id, m.owner, m.content, m.tags, m.status, m.revision,
                                              m.embedding), ',' ORDER BY m.id)
                    || (SELECT string_agg(concat_ws('/', r.memory_id, r.revision, r.content), ',' ORDER BY r.memory_id, r.revision) FROM engram.revisions r)
                    || (SELECT string_agg(concat_ws('/', a.memory_id, a.access_count), ',' ORDER BY a.memory_id) FROM engram.memory_access a)
                    || (SELECT string_agg(concat_ws('/', e.memory_id, e.event_type, w.name), ',' ORDER BY e.memory_id)
                        FROM engram.events e JOIN engram.workspaces w ON w.owner = e.owner AND w.id = e.workspace_id)
                    || (SELECT string_agg(concat_ws('/', s.name, s.active_task), ',') FROM engram.states s)
                    || (SELECT string_agg(concat_ws('/', p.memory_id, p.space), ',') FROM engram.publications p)
                    || (SELECT string_agg(concat_ws('/', x.owner, x.query_text), ',') FROM engram.misses x)
                    || (SELECT string_agg(concat_ws('/', coalesce(l.owner, ''), l.action), ',' ORDER BY l.id) FROM engram.audit_log l)
                    || (SELECT string_agg(concat_ws('/', u.owner, u.memories, u.events, u.workspaces, u.states), ',' ORDER BY u.owner) FROM engram.owner_locks u)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    let null_owners: i64 = old
        .query_one("SELECT count(*) FROM engram.audit_log WHERE owner IS NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(null_owners, 0, "database-wide audit rows get the owner ''");

    // The keys hold what they should: a child row needs its parent under
    // the same owner, and the 0.7.0 token binds and answers.
    let (code, msg) = sqlstate(
        old.execute(
            &format!(
                "INSERT INTO engram.revisions (memory_id, revision, owner, content, tags, metadata, written_at, is_correction)
                 VALUES ('{tea}', 99, 'bob', 'x', '{{}}', '{{}}', now(), false)"
            ),
            &[],
        )
        .await,
    );
    assert_eq!(code, "23503", "{msg}");
    let app = bound_app(&name, &token, "0.7.0").await;
    let history: i64 = app
        .query_one("SELECT count(*) FROM engram.revisions(id => $1)", &[&tea])
        .await
        .unwrap()
        .get(0);
    assert!(history >= 1, "the 0.7.0 revision is kept");
    let ids: Vec<Uuid> = app
        .query(
            "SELECT id FROM engram.search(query_embedding => '[0,1,0,0]', tags_all => '{games}')",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, vec![chess]);
    app.batch_execute("COMMIT").await.unwrap();
}

#[tokio::test]
async fn upgrade_from_0_8_0_keeps_every_row_and_equals_a_fresh_install() {
    let (name, old) = install("0.8.0").await;
    // A populated 0.8.0 database: memories with a revision and access
    // counts, a resource, a workspace with an event, audit rows, a token.
    let (tea, _chess, _gone) = tagged_memories(&old).await;
    old.batch_execute(&format!(
        "SELECT engram.update(owner => 'alice', id => '{tea}', content => 'alice drinks oolong tea', embedding => '[0.9,0.1,0,0]', reason => 'taste');
         SELECT engram.workspace_create(owner => 'alice', name => 'api');
         SELECT engram.resource_create(owner => 'alice', name => 'runbook', content => 'restart the ferry api', embedding => '[0,0,1,0]');
         SELECT engram.capture(owner => 'alice', event_type => 'observation', content => 'tests pass',
                               session_id => 's1', workspace => 'api');
         SELECT count(*) FROM engram.recall(owner => 'alice', id => '{tea}');"
    ))
    .await
    .unwrap();
    let token: String = old
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'laptop')", &[])
        .await
        .unwrap()
        .get(0);
    let snapshot = "SELECT string_agg(concat_ws('/', m.id, m.owner, m.source, m.content, m.tags, m.status, m.revision,
                                              m.embedding), ',' ORDER BY m.id)
                    || (SELECT string_agg(concat_ws('/', r.memory_id, r.revision, r.content), ',' ORDER BY r.memory_id, r.revision) FROM engram.revisions r)
                    || (SELECT string_agg(concat_ws('/', a.memory_id, a.access_count), ',' ORDER BY a.memory_id) FROM engram.memory_access a)
                    || (SELECT string_agg(concat_ws('/', l.owner, l.action), ',' ORDER BY l.id) FROM engram.audit_log l)
                    || (SELECT string_agg(concat_ws('/', u.owner, u.memories, u.events, u.workspaces), ',' ORDER BY u.owner) FROM engram.owner_locks u)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;

    // The 0.8.0 token binds, and the rewritten engram.resources() lists the
    // resource written under 0.8.0.
    let app = bound_app(&name, &token, "0.8.0").await;
    let names: Vec<String> = app
        .query("SELECT r ->> 'name' FROM engram.resources() r", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(names, vec!["runbook".to_string()]);
    app.batch_execute("COMMIT").await.unwrap();
}

#[tokio::test]
async fn upgrade_from_0_9_0_packs_the_scope_lists_and_equals_a_fresh_install() {
    let (name, old) = install("0.9.0").await;
    // A populated 0.9.0 database: tagged memories of two owners and a
    // ghost, an updated one, a forgotten one, and 300 bulk-loaded rows.
    let (tea, chess, gone) = tagged_memories(&old).await;
    old.batch_execute(&format!(
        "SELECT engram.update(owner => 'alice', id => '{tea}', content => 'alice drinks oolong tea', embedding => '[0.9,0.1,0,0]', reason => 'taste');
         SELECT engram.forget(owner => 'alice', id => '{gone}');
         INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, embedding)
         SELECT 'carol', 'note ' || n, sha256(n::text::bytea), sha256(n::text::bytea), ARRAY['t' || (n % 3)],
                ARRAY[sin(n), cos(n), sin(2 * n), 1]::vector
         FROM generate_series(1, 300) n;"
    ))
    .await
    .unwrap();
    let token: String = old
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'laptop')", &[])
        .await
        .unwrap()
        .get(0);
    // Which memories each list holds, and what scoped searches return, are
    // the same after the lists were packed.
    let snapshot = "SELECT string_agg(concat_ws('/', m.id, m.owner, m.content, m.tags, m.status, m.embedding), ',' ORDER BY m.id)
                    || (SELECT string_agg(concat_ws('/', e.owner, e.list, e.memory_id), ','
                                          ORDER BY e.owner, e.list, e.memory_id) FROM engram.scope_entries e)
                    || (SELECT string_agg(concat_ws('/', z.owner, z.list, z.n), ',' ORDER BY z.owner, z.list)
                        FROM engram.scope_sizes z)
                    || (SELECT string_agg(s.id::text, ',') FROM engram.search(owner => 'carol', k => 10, tags_all => '{t1}',
                                                                         query_embedding => '[0.5,0.5,0,1]') s)
                    || (SELECT string_agg(s.id::text, ',') FROM engram.search(owner => 'alice', k => 5,
                                                                         query_embedding => '[1,0,0,0]') s)
                    || (SELECT count(*)::text FROM engram.audit_log)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    assert_eq!(
        count_on(&old, LIST_DRIFT).await,
        0,
        "the packed lists equal a recomputation"
    );
    let blocks = count_on(&old, "SELECT count(*) FROM engram.scope_blocks WHERE owner = 'carol'").await;
    assert_eq!(blocks, 4, "carol's whole list and three tag lists, one block each");

    // The 0.9.0 token binds; its searches and new writes use the packed lists.
    let app = bound_app(&name, &token, "0.9.0").await;
    let found: Vec<Uuid> = column(
        &app,
        "SELECT id FROM engram.search(query_embedding => '[0,1,0,0]', k => 2)",
    )
    .await;
    assert_eq!(found, vec![chess, tea]);
    app.batch_execute("COMMIT").await.unwrap();
    create(
        &old,
        "alice",
        "alice moved to Porto",
        &[0.0, 0.0, 0.5, 0.5],
        "tags => '{home}'",
    )
    .await;
    old.batch_execute(&format!("SELECT engram.forget(owner => 'alice', id => '{chess}')"))
        .await
        .unwrap();
    assert_eq!(
        count_on(&old, LIST_DRIFT).await,
        0,
        "writes after the update keep the lists"
    );
}

/// What the packed-list releases (0.10.0 on) must keep byte for byte: the
/// memories, the list blocks, sizes and usage, a scoped search, the audit.
const PACKED_SNAPSHOT: &str =
    "SELECT string_agg(concat_ws('/', m.id, m.owner, m.content, m.tags, m.status, m.embedding), ',' ORDER BY m.id)
    || (SELECT string_agg(concat_ws('/', b.owner, b.list, b.block, b.n, md5(b.entries)), ','
                          ORDER BY b.owner, b.list, b.block) FROM engram.scope_blocks b)
    || (SELECT string_agg(concat_ws('/', z.owner, z.list, z.n), ',' ORDER BY z.owner, z.list)
        FROM engram.scope_sizes z)
    || (SELECT string_agg(concat_ws('/', u.owner, u.memories), ',' ORDER BY u.owner) FROM engram.owner_locks u)
    || (SELECT string_agg(s.id::text, ',') FROM engram.search(owner => 'carol', k => 10, tags_all => '{t1}',
                                                         query_embedding => '[0.5,0.5,0,1]') s)
    || (SELECT count(*)::text FROM engram.audit_log)
    FROM engram.memories m";

/// Updates a populated packed-list release (tagged memories of two owners
/// and a ghost, an update, a forget, 300 bulk-loaded rows) to this one,
/// keeping every list block, and checks that a token of `version` still
/// binds and searches afterwards.
async fn update_keeping_the_packed_lists(version: &str) -> Client {
    let (name, old) = install(version).await;
    let (tea, chess, gone) = tagged_memories(&old).await;
    old.batch_execute(&format!(
        "SELECT engram.update(owner => 'alice', id => '{tea}', content => 'alice drinks oolong tea', embedding => '[0.9,0.1,0,0]', reason => 'taste');
         SELECT engram.forget(owner => 'alice', id => '{gone}');
         INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, embedding)
         SELECT 'carol', 'note ' || n, sha256(n::text::bytea), sha256(n::text::bytea), ARRAY['t' || (n % 3)],
                ARRAY[sin(n), cos(n), sin(2 * n), 1]::vector
         FROM generate_series(1, 300) n;"
    ))
    .await
    .unwrap();
    let token: String = old
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'laptop')", &[])
        .await
        .unwrap()
        .get(0);
    // The blocks themselves are kept byte for byte (no rebuild on a direct
    // update or a chain of hops from 0.10.0).
    update_keeping(&old, PACKED_SNAPSHOT).await;
    assert_eq!(
        count_on(&old, LIST_DRIFT).await,
        0,
        "the packed lists equal a recomputation"
    );
    let app = bound_app(&name, &token, version).await;
    let found: Vec<Uuid> = column(
        &app,
        "SELECT id FROM engram.search(query_embedding => '[0,1,0,0]', k => 2)",
    )
    .await;
    assert_eq!(found, vec![chess, tea]);
    app.batch_execute("COMMIT").await.unwrap();
    old
}

#[tokio::test]
async fn upgrade_from_0_10_0_keeps_the_packed_lists_and_equals_a_fresh_install() {
    let old = update_keeping_the_packed_lists("0.10.0").await;
    // tune_search (0.11.0) runs.
    let tuned = count_on(
        &old,
        "SELECT (engram.tune_search(samples => 20) ->> 'ef_search')::bigint",
    )
    .await;
    assert!(tuned >= 40, "tune_search after the update: {tuned}");
}

#[tokio::test]
async fn upgrade_from_0_11_0_keeps_the_index_and_configure_rebuilds_it() {
    let old = update_keeping_the_packed_lists("0.11.0").await;
    // The index is kept as 0.11.0 built it (pgvector's defaults), and
    // configure (0.12.0) reports and rebuilds it.
    let build =
        "SELECT (c ->> 'hnsw_m')::bigint * 1000 + (c ->> 'hnsw_ef_construction')::bigint FROM engram.configure() c";
    assert_eq!(count_on(&old, build).await, 16_064);
    old.batch_execute("SELECT engram.configure(hnsw_m => 8, hnsw_ef_construction => 40)")
        .await
        .unwrap();
    assert_eq!(count_on(&old, build).await, 8_040);
    assert_eq!(
        count_on(&old, LIST_DRIFT).await,
        0,
        "a rebuilt index leaves the lists alone"
    );
}

async fn count_on(c: &Client, sql: &str) -> i64 {
    c.query_one(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
        .get(0)
}

#[tokio::test]
async fn the_api_loads_only_inside_alter_extension() {
    // Outside an update the objects it would load would not belong to the
    // extension; the loaded API stays as it is.
    let db = TestDb::new(4).await;
    let (_, msg) = sqlstate(
        db.admin
            .query_one(
                &format!("SELECT engram._install_api('{}')", env!("CARGO_PKG_VERSION")),
                &[],
            )
            .await,
    );
    assert!(msg.contains("only inside ALTER EXTENSION"), "{msg}");
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM pg_proc WHERE proname = 'search' AND pronamespace = 'engram'::regnamespace"
        )
        .await,
        1
    );
}

#[tokio::test]
async fn upgrade_from_0_12_0_gives_memories_their_time() {
    let (_, old) = install("0.12.0").await;
    // A fact, a forced correction that supersedes it, and a second pair
    // whose audit rows retention has trimmed (the flag_reason remains).
    let remember = |content: &str, embedding: &str, force: bool| {
        format!(
            "SELECT id FROM engram.remember(owner => 'alice', content => '{content}', embedding => '{embedding}',
                 force => {force})"
        )
    };
    let mut ids = Vec::new();
    for (content, embedding, force) in [
        ("The launch deadline is May 5", "[1,0,0,0]", false),
        ("The launch deadline is June 10", "[1,0.01,0,0]", true),
        ("The office rent is 2000 euros a month", "[0,0,1,0]", false),
        ("The office rent is 2400 euros a month", "[0,0,1,0.01]", true),
        ("Priya owns ticket OPS-4521", "[0,1,0,0]", false),
    ] {
        let id: Uuid = old
            .query_one(&remember(content, embedding, force), &[])
            .await
            .unwrap()
            .get(0);
        ids.push(id);
    }
    old.batch_execute(&format!(
        "DELETE FROM engram.audit_log WHERE memory_id = '{}' AND action = 'flag'",
        ids[2]
    ))
    .await
    .unwrap();
    // A reason any caller may write, shaped like a supersession's but not
    // naming a memory: the update must neither fail on it nor close anything.
    old.batch_execute(&format!(
        "SELECT engram.flag(owner => 'alice', id => '{}', reason => 'superseded by ' || repeat('a', 36))",
        ids[4]
    ))
    .await
    .unwrap();
    let snapshot = "SELECT string_agg(m.id || m.content || m.status || m.flag_count || m.created_at, ',' ORDER BY m.id)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    // Every memory happened and began to hold when it was written...
    assert_eq!(
        count_on(
            &old,
            "SELECT count(*) FROM engram.memories WHERE occurred_at = created_at AND valid_from = created_at"
        )
        .await,
        5
    );
    // ...and the superseded ones stopped holding when their successors were written.
    for (gone, successor) in [(ids[0], ids[1]), (ids[2], ids[3])] {
        let closed: bool = old
            .query_one(
                "SELECT o.valid_to BETWEEN n.created_at AND n.created_at + interval '1 minute'
                        AND o.invalidated_at IS NOT NULL
                 FROM engram.memories o, engram.memories n WHERE o.id = $1 AND n.id = $2",
                &[&gone, &successor],
            )
            .await
            .unwrap()
            .get(0);
        assert!(closed, "{gone} closed by {successor}");
    }
    assert_eq!(
        count_on(&old, "SELECT count(*) FROM engram.memories WHERE valid_to IS NULL").await,
        3
    );
    let now: Vec<String> = column(
        &old,
        "SELECT content FROM engram.search(owner => 'alice', query_text => 'launch deadline')",
    )
    .await;
    assert_eq!(now, vec!["The launch deadline is June 10"]);
    let then: Vec<String> = column(
        &old,
        &format!(
            "SELECT content FROM engram.search(owner => 'alice', query_text => 'launch deadline',
                 valid_at => (SELECT created_at FROM engram.memories WHERE id = '{}'))",
            ids[0]
        ),
    )
    .await;
    assert_eq!(then, vec!["The launch deadline is May 5"]);
    // The entities of the memories written before are indexed...
    let indexed: Vec<String> = column(
        &old,
        "SELECT kind || ':' || name FROM engram.memory_entities WHERE owner = 'alice' ORDER BY 1",
    )
    .await;
    assert_eq!(indexed, vec!["id:OPS-4521", "person:Priya"]);
    // ...and new ones by the 0.13.0 triggers.
    old.batch_execute(
        "SELECT engram.remember(owner => 'alice', content => 'Vera approved the office rent', embedding => '[0,0,0,1]')",
    )
    .await
    .unwrap();
    let about: serde_json::Value = old
        .query_one("SELECT engram.about(owner => 'alice', entity => 'vera')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(about["entity"]["memories"], 1);
}

#[tokio::test]
async fn upgrade_from_0_13_0_gives_corrected_memories_their_trust_back() {
    let (_, old) = install("0.13.0").await;
    // An agent's memory its owner corrected (0.13.0: trust 0.7 × 0.95) and
    // one never touched.
    let corrected: Uuid = old
        .query_one(
            "SELECT id FROM engram.remember(owner => 'alice', content => 'Vera''s favourite tea is sencha',
                 embedding => '[1,0,0,0]')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    old.batch_execute(&format!(
        "SELECT engram.update(owner => 'alice', id => '{corrected}', content => 'Vera''s favourite tea is gyokuro',
             embedding => '[1,0.1,0,0]')"
    ))
    .await
    .unwrap();
    old.batch_execute(
        "SELECT engram.remember(owner => 'alice', content => 'Vera rides a blue bicycle to work', embedding => '[0,1,0,0]')",
    )
    .await
    .unwrap();
    let before: f32 = old
        .query_one("SELECT trust_score FROM engram.memories WHERE id = $1", &[&corrected])
        .await
        .unwrap()
        .get(0);
    assert!((before - 0.665).abs() < 0.001, "{before}");
    let snapshot =
        "SELECT string_agg(m.id || m.content || m.status || m.correction_count || m.revision, ',' ORDER BY m.id)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    let after: Vec<f32> = column(&old, "SELECT trust_score FROM engram.memories ORDER BY trust_score").await;
    assert!(after.iter().all(|t| (t - 0.7).abs() < 0.001), "{after:?}");
    // The corrected memory ranks first for its own words.
    let hits: Vec<String> = column(
        &old,
        "SELECT content FROM engram.search(owner => 'alice', query_embedding => '[1,0.05,0,0]',
             query_text => 'Vera favourite tea gyokuro', k => 2)",
    )
    .await;
    assert_eq!(hits[0], "Vera's favourite tea is gyokuro");
}

/// An update cannot stop half-way: the library loads only its own API, so
/// `ALTER EXTENSION engram UPDATE TO` any other version (one or two
/// releases back, or one this library does not know) fails, naming the
/// library's version and what to run, and changes nothing; the update to
/// the library's version then works.
#[tokio::test]
async fn an_update_to_another_version_than_the_librarys_changes_nothing() {
    let library = env!("CARGO_PKG_VERSION");
    for (from, targets) in [
        ("0.12.0", vec!["0.13.0", "0.14.0"]),
        ("0.13.0", vec!["0.14.0", "0.99.0"]),
        ("0.14.0", vec!["0.15.0"]),
        ("0.15.0", vec!["0.16.0"]),
        ("0.16.0", vec!["0.17.0"]),
    ] {
        let (_, old) = install(from).await;
        old.batch_execute(
            "SELECT engram.remember(owner => 'alice', content => 'Vera rides a blue bicycle', embedding => '[0,1,0,0]');
             SELECT engram.slot_set(owner => 'alice', label => 'plan', content => 'ship it')",
        )
        .await
        .unwrap();
        let before = catalog(&old).await;
        for target in targets {
            let (code, msg) = sqlstate(
                old.batch_execute(&format!("ALTER EXTENSION engram UPDATE TO '{target}'"))
                    .await,
            );
            assert_eq!(code, "55000", "{from} -> {target}: {msg}");
            assert!(
                msg.contains(&format!("provides engram {library}")) && msg.contains("ALTER EXTENSION engram UPDATE"),
                "{from} -> {target}: {msg}"
            );
            assert_eq!(extversion(&old).await, from);
            assert!(catalog(&old).await == before, "{from} -> {target} changed the catalog");
        }
        update_keeping(
            &old,
            "SELECT string_agg(m.content, ',') || (SELECT string_agg(s.content, ',') FROM engram.slots s)
             FROM engram.memories m",
        )
        .await;
        let n = count_on(&old, "SELECT count(*) FROM engram.entities(owner => 'alice')").await;
        assert!(n >= 1, "the entities API of {library} answers on the updated tables");
    }
}

/// From a populated 0.14.0 database: every row kept, the catalog equal to a
/// fresh install's, the configuration in force recorded (so that a dump
/// carries it), a memory 0.14.0 superseded stays closed and reopens, and
/// `force` now closes nothing.
#[tokio::test]
async fn upgrade_from_0_14_0_records_the_configuration_and_keeps_every_row() {
    let (name, old) = install("0.14.0").await;
    // (what tune_search sets; configure(hnsw_m ...) would rebuild the index
    // with options a fresh install lacks, and the catalogs would differ)
    old.batch_execute(&format!("ALTER DATABASE {name} SET engram.hnsw_ef_search = 64"))
        .await
        .unwrap();
    old.batch_execute(
        "SET engram.owner = 'alice';
         SELECT engram.remember(content => 'The standup is at 9', embedding => '[1, 0, 0, 0]');
         SELECT engram.remember(content => 'The standup moved to 10', embedding => '[1, 0.05, 0, 0]', force => true);
         SELECT engram.slot_set(label => 'plan', content => 'ship it');
         RESET engram.owner;",
    )
    .await
    .unwrap();
    let superseded: Uuid = old
        .query_one(
            "SELECT id FROM engram.memories WHERE content = 'The standup is at 9' AND valid_to IS NOT NULL",
            &[],
        )
        .await
        .expect("0.14.0's force superseded the old fact")
        .get(0);
    let snapshot = "SELECT string_agg(m.id || m.content || m.status || coalesce(m.valid_to::text, '-') || m.flag_count,
                                      ',' ORDER BY m.id) FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    let row = old
        .query_one(
            "SELECT embedding_dims, image_dims, hnsw_m, hnsw_ef_construction, version FROM engram.configuration",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>(0), 4);
    assert_eq!(row.get::<_, i32>(1), 512);
    assert_eq!(row.get::<_, Option<i32>>(2), None, "pgvector's default m");
    assert_eq!(row.get::<_, Option<i32>>(3), None);
    assert_eq!(row.get::<_, String>(4), env!("CARGO_PKG_VERSION"));
    let ef: Option<i32> = old
        .query_one("SELECT hnsw_ef_search FROM engram.configuration", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(ef, Some(64));
    let reopened: bool = old
        .query_one(
            &format!("SELECT engram.reopen(owner => 'alice', id => '{superseded}', reason => 'both hold')"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(reopened);
    let (status, _, conflicts) = remember(
        &old,
        "alice",
        "The standup moved to 11",
        &[1.0, 0.06, 0.0, 0.0],
        "force => true",
    )
    .await;
    assert_eq!(status, "created");
    assert!(conflicts.is_some());
    assert_eq!(
        count_on(&old, "SELECT count(*) FROM engram.memories WHERE valid_to IS NOT NULL").await,
        0,
        "force closed a memory"
    );
}

/// From a populated 0.15.0 database: every row kept, the catalog equal to a
/// fresh install's; the stored memories are unkeyed (no namespace, key or
/// value), keyed memories and the model on record work on the updated
/// tables, and a revision written before the update reads without a value.
#[tokio::test]
async fn upgrade_from_0_15_0_adds_keyed_memories_and_keeps_every_row() {
    let (_, old) = install("0.15.0").await;
    old.batch_execute(
        "SET engram.owner = 'alice';
         SELECT engram.remember(content => 'The standup is at 9', embedding => '[1, 0, 0, 0]',
                                metadata => '{\"team\": \"core\"}', ttl => '30 days');
         SELECT engram.update(id => (SELECT id FROM engram.memories LIMIT 1), content => 'The standup is at 9:15',
                              embedding => '[1, 0.01, 0, 0]');
         SELECT engram.slot_set(label => 'plan', content => 'ship it');
         RESET engram.owner;",
    )
    .await
    .unwrap();
    let snapshot = "SELECT string_agg(m.id || m.content || m.status || m.revision || m.metadata::text
                                      || coalesce(m.expires_at::text, '-'), ',' ORDER BY m.id)
                           || (SELECT string_agg(r.content, ',') FROM engram.revisions r)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    assert_eq!(
        count_on(&old, "SELECT count(*) FROM engram.memories WHERE namespace IS NULL AND key IS NULL AND value IS NULL AND ttl IS NULL").await,
        1
    );
    // The 0.15.0 memory is found by a filter over its metadata.
    let found: Vec<String> = column(
        &old,
        r#"SELECT content FROM engram.list(owner => 'alice', filter => '{"team": "core"}')"#,
    )
    .await;
    assert_eq!(found, vec!["The standup is at 9:15"]);
    let revisions: Vec<(i32, Option<serde_json::Value>)> = pairs(
        &old,
        "SELECT r.revision, r.value FROM engram.revisions(owner => 'alice', id => (SELECT id FROM engram.memories)) r
         ORDER BY 1",
    )
    .await;
    assert_eq!(revisions, vec![(1, None), (2, None)]);
    let status: String = old
        .query_one(
            "SELECT status FROM engram.put(owner => 'alice', namespace => '{prefs}', key => 'theme',
                                           value => '{\"theme\": \"dark\"}')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "created");
    old.batch_execute("SELECT engram.configure(embedding_model => 'test/model')")
        .await
        .unwrap();
    let model: Option<String> = old
        .query_one("SELECT engram.embedding_model()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(model.as_deref(), Some("test/model"));
}

/// From a populated 0.16.0 database: every row kept (its tokens too, which
/// gain no minter), the catalog equal to a fresh install's; a 0.16.0
/// platform token mints a user token after the update.
#[tokio::test]
async fn upgrade_from_0_16_0_keeps_tokens_and_mints_new_ones() {
    let (name, old) = install("0.16.0").await;
    let platform: String = old
        .query_one(
            "SELECT engram.create_token(owner => 'app', label => 'backend', platform => true)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    old.batch_execute(
        "SET engram.owner = 'alice';
         SELECT engram.put(namespace => '{prefs}', key => 'theme', content => 'dark theme',
                           embedding => '[1, 0, 0, 0]', value => '{\"theme\": \"dark\"}');
         SELECT engram.remember(content => 'The standup is at 9', embedding => '[0, 1, 0, 0]');
         RESET engram.owner;",
    )
    .await
    .unwrap();
    let snapshot = "SELECT string_agg(m.id || m.content || m.status || coalesce(m.key, '-'), ',' ORDER BY m.id)
                           || (SELECT string_agg(t.owner || t.label || t.platform, ',' ORDER BY t.id) FROM engram.tokens t)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    assert_eq!(
        count_on(&old, "SELECT count(*) FROM engram.tokens WHERE minted_by IS NOT NULL").await,
        0
    );
    let app = bound_app(&name, &platform, "0.16.0").await;
    let minted: serde_json::Value = app
        .query_one("SELECT engram.mint_token(label => 'web')", &[])
        .await
        .unwrap()
        .get(0);
    app.batch_execute("COMMIT").await.unwrap();
    assert_eq!(minted["owner"], "app", "{minted}");
    assert_eq!(
        count_on(&old, "SELECT count(*) FROM engram.tokens WHERE minted_by IS NOT NULL").await,
        1
    );
}

/// From a populated 0.17.0 database: every row kept, the catalog equal to a
/// fresh install's; the 0.17.0 platform token lists the owners with what
/// each holds, and the user token it minted may not.
#[tokio::test]
async fn upgrade_from_0_17_0_lists_owners_to_a_platform_token() {
    let (name, old) = install("0.17.0").await;
    let platform: String = old
        .query_one(
            "SELECT engram.create_token(owner => 'app', label => 'backend', platform => true)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let user: String = old
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'laptop')", &[])
        .await
        .unwrap()
        .get(0);
    old.batch_execute(
        "SELECT engram.remember(owner => 'alice', content => 'The standup is at 9', embedding => '[0, 1, 0, 0]');
         SELECT engram.remember(owner => 'alice', content => 'Vera rides a blue bicycle', embedding => '[1, 0, 0, 0]');
         SELECT engram.remember(owner => 'bob', content => 'Bob takes the night train', embedding => '[0, 0, 1, 0]');",
    )
    .await
    .unwrap();
    let snapshot = "SELECT string_agg(m.owner || m.id || m.content || m.status, ',' ORDER BY m.id)
                           || (SELECT string_agg(l.owner || l.memories, ',' ORDER BY l.owner) FROM engram.owner_locks l)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    let app = bound_app(&name, &platform, "0.17.0").await;
    let owners: Vec<(String, i64)> = app
        .query("SELECT owner, memories FROM engram.owners()", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    app.batch_execute("COMMIT").await.unwrap();
    assert_eq!(owners, vec![("alice".to_string(), 2), ("bob".to_string(), 1)]);
    let alice = bound_app(&name, &user, "0.17.0").await;
    let (code, msg) = sqlstate(alice.query("SELECT * FROM engram.owners()", &[]).await.map(|_| ()));
    assert_eq!(code, "42501", "{msg}");
}

/// From a populated 0.18.0 database: every memory kept, the catalog equal
/// to a fresh install's; the entities indexed anew by the 0.19.0 rules (a
/// service name in two spellings is one entity, a first name merged into
/// the one full name, audited); search groups by session and applies the
/// relevance floor.
#[tokio::test]
async fn upgrade_from_0_18_0_indexes_entities_anew_and_groups_sessions() {
    let (_name, old) = install("0.18.0").await;
    old.batch_execute(
        "SELECT engram.remember(owner => 'alice', content => 'Marta said billing-api is flaky', embedding => '[1, 0, 0, 0]',
                                kind => 'episodic', session_id => 's1');
         SELECT engram.remember(owner => 'alice', content => 'Marta Keller restarted Billing-API', embedding => '[0.9, 0.1, 0, 0]',
                                kind => 'episodic', session_id => 's1');
         SELECT engram.remember(owner => 'alice', content => 'The garden needs water', embedding => '[0, 0, 1, 0]',
                                kind => 'episodic', session_id => 's2');
         SELECT engram.remember(owner => 'bob', content => 'Bob takes the night train', embedding => '[0, 1, 0, 0]');",
    )
    .await
    .unwrap();
    let snapshot =
        "SELECT string_agg(m.owner || m.id || m.content || m.status || coalesce(m.session_id, '-'), ',' ORDER BY m.id)
                    FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    let entities: Vec<(String, String, i64)> = old
        .query(
            "SELECT name, kind, memories FROM engram.entities(owner => 'alice') ORDER BY name",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert!(
        entities.contains(&("Marta Keller".to_string(), "person".to_string(), 2)),
        "{entities:?}"
    );
    assert!(entities.iter().any(|e| e.1 == "service" && e.2 == 2), "{entities:?}");
    assert_eq!(
        count_on(
            &old,
            "SELECT count(*) FROM engram.audit_log WHERE action = 'entity_merge'"
        )
        .await,
        1
    );
    // the index equals a recomputation (merged rows by the key they were written with)
    assert_eq!(
        count_on(
            &old,
            "SELECT count(*) FROM (
                 (SELECT m.owner, m.id, x.key FROM engram.memories m, engram._memory_entities(m.content, m.tags) x
                  EXCEPT SELECT e.owner, e.memory_id, coalesce(e.alias, e.key) FROM engram.memory_entities e)
                 UNION ALL
                 (SELECT e.owner, e.memory_id, coalesce(e.alias, e.key) FROM engram.memory_entities e
                  EXCEPT SELECT m.owner, m.id, x.key FROM engram.memories m, engram._memory_entities(m.content, m.tags) x)) d"
        )
        .await,
        0
    );
    let sessions: Vec<Option<String>> = old
        .query(
            "SELECT session FROM engram.search(owner => 'alice', query_embedding => '[1, 0, 0, 0]', k => 1,
                 group_by => 'session')",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(sessions, vec![Some("s1".to_string()), Some("s1".to_string())]);
    // "garden" is far in meaning and shares no word with the query: left out
    let hits: i64 = old
        .query_one(
            "SELECT count(*) FROM engram.search(owner => 'alice', query_embedding => '[1, 0, 0, 0]', query_text => 'flaky')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(hits, 2);
}

/// 0.19.0 -> 0.20.0: the text index is built from the stored memories
/// (equal to a recomputation; archived and forgotten memories left out,
/// each internal type on its own), and the text leg reads it.
#[tokio::test]
async fn upgrade_from_0_19_0_builds_the_text_index() {
    let (_name, old) = install("0.19.0").await;
    old.batch_execute(
        "SELECT engram.remember(owner => 'alice', content => 'the kiwi budget was approved', embedding => '[1, 0, 0, 0]');
         SELECT engram.remember(owner => 'alice', content => 'weekly team meeting about the budget', embedding => '[0, 1, 0, 0]',
                                kind => 'episodic');
         SELECT engram.remember(owner => 'alice', content => 'alice lived in Lyon', embedding => '[0, 0, 1, 0]');
         SELECT engram.forget(owner => 'alice', id => (SELECT id FROM engram.memories WHERE content LIKE '%Lyon'));
         SELECT engram.remember(owner => 'bob', content => 'bob told alice''s ghost about the budget', embedding => '[0, 0, 0, 1]',
                                internal_type => 'ghost',
                                tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'alice'));",
    )
    .await
    .unwrap();
    let snapshot =
        "SELECT string_agg(m.owner || m.id || m.content || m.status, ',' ORDER BY m.id) FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    assert_eq!(
        count_on(&old, LIST_DRIFT).await,
        0,
        "the text index equals a recomputation"
    );
    assert_eq!(count_on(&old, "SELECT count(*) FROM engram.text_sizes").await, 2);
    assert_eq!(
        count_on(&old, "SELECT docs FROM engram.text_sizes WHERE owner = 'alice'").await,
        2
    );
    let top: String = old
        .query_one(
            "SELECT content FROM engram.search(owner => 'alice', query_text => 'kiwi budget') LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(top, "the kiwi budget was approved");
    // and writes after the update keep it
    old.batch_execute(
        "SELECT engram.remember(owner => 'alice', content => 'the kiwi harvest', embedding => '[1, 1, 0, 0]')",
    )
    .await
    .unwrap();
    assert_eq!(count_on(&old, LIST_DRIFT).await, 0);
}

/// 0.20.0 -> 0.21.0: the k-nearest search moved from plpgsql to Rust. On
/// the same data, every plan (the scope lists, an exact scan of a
/// filtered scope, the HNSW walk) returns what
/// 0.20.0 returned, in the same order; the conflict check of remember
/// still finds its neighbours.
#[tokio::test]
async fn upgrade_from_0_20_0_searches_as_before() {
    let (_name, old) = install("0.20.0").await;
    old.batch_execute(
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, kind, embedding)
         SELECT 'carol', 'note ' || n, sha256(n::text::bytea), sha256(n::text::bytea), ARRAY['t' || (n % 3)],
                CASE WHEN n % 2 = 0 THEN 'semantic' ELSE 'episodic' END,
                ARRAY[sin(n), cos(n), sin(2 * n), 1]::vector
         FROM generate_series(1, 300) n;
         UPDATE engram.memories SET status = 'archived', archived_at = now() WHERE owner = 'carol' AND content LIKE '%7';
         SELECT engram.remember(owner => 'carol', content => 'carol prefers green tea', embedding => '[0.2, 0.9, 0.1, 0.4]');",
    )
    .await
    .unwrap();
    // (settings for the transaction, the search)
    let searches = [
        // the owner's list, then one tag's list
        (
            "",
            "SELECT string_agg(id::text, ',' ORDER BY n) FROM engram.search(owner => 'carol',
                 query_embedding => '[0.3, 0.8, 0.2, 1]', k => 7) WITH ORDINALITY AS s(id, n)",
        ),
        (
            "",
            "SELECT string_agg(id::text, ',' ORDER BY n) FROM engram.search(owner => 'carol',
                 query_embedding => '[0.3, 0.8, 0.2, 1]', k => 7, tags_all => ARRAY['t1']) WITH ORDINALITY AS s(id, n)",
        ),
        // lists never scanned: the planner's estimate, then an exact scan
        (
            "SET LOCAL engram.list_search_rows = 0; SET LOCAL engram.hnsw_min_selectivity = 0;",
            "SELECT string_agg(id::text, ',' ORDER BY n) FROM engram.search(owner => 'carol',
                 query_embedding => '[-0.5, 0.1, 0.7, 1]', k => 5, kinds => ARRAY['episodic'], tags_any => ARRAY['t2'])
                 WITH ORDINALITY AS s(id, n)",
        ),
        // archived rows included: no list covers them; an exact scan
        (
            "",
            "SELECT string_agg(id::text, ',' ORDER BY n) FROM engram.search(owner => 'carol',
                 query_embedding => '[0.1, 0.1, 0.9, 1]', k => 5, include_archived => true) WITH ORDINALITY AS s(id, n)",
        ),
        // lists never scanned, estimates never exact: the HNSW walk
        (
            "SET LOCAL engram.list_search_rows = 0; SET LOCAL engram.exact_search_rows = 0;
             SET LOCAL engram.hnsw_min_selectivity = 0;",
            "SELECT string_agg(id::text, ',' ORDER BY n) FROM engram.search(owner => 'carol',
                 query_embedding => '[0.9, -0.2, 0.3, 1]', k => 6) WITH ORDINALITY AS s(id, n)",
        ),
    ];
    let run = |settings: &'static str, q: &'static str| {
        let old = &old;
        async move {
            old.batch_execute(&format!("BEGIN; {settings}")).await.unwrap();
            let got: Option<String> = old.query_one(q, &[]).await.unwrap().get(0);
            old.batch_execute("ROLLBACK").await.unwrap();
            got
        }
    };
    let mut before = Vec::new();
    for (settings, q) in searches {
        before.push(run(settings, q).await);
    }
    let snapshot =
        "SELECT string_agg(m.owner || m.id || m.content || m.status, ',' ORDER BY m.id) FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    for ((settings, q), expected) in searches.iter().zip(&before) {
        let after = run(settings, q).await;
        assert!(
            expected.as_deref().is_some_and(|e| e.split(',').count() >= 5),
            "{q}: {expected:?}"
        );
        assert_eq!(&after, expected, "{q}");
    }
    // the conflict check reads the nearest memories through the new plan
    let outcome: String = old
        .query_one(
            "SELECT status FROM engram.remember(owner => 'carol', content => 'carol prefers black coffee',
                                                embedding => '[0.2, 0.9, 0.1, 0.41]')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(outcome, "conflict");
    // _knn is a helper: not for the agents' role
    let callable: bool = old
        .query_one(
            "SELECT has_function_privilege('engram_agent', 'engram._knn(vector, integer, text, text[], text, text[], text[], text[], text,
                 timestamptz, timestamptz, smallint, text, text, timestamptz, text[], jsonb)', 'EXECUTE')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!callable);
}

/// 0.21.0 -> 0.22.0: a search runs in Rust from its candidates to its
/// hits. On the same data, each kind of search (vector, hybrid, a time
/// named, grouped by conversation, as the store stood, about an entity,
/// newer facts first) returns what 0.21.0 returned: the same hits in the
/// same order, with the same scores, similarities and conversations; access
/// counts and misses are recorded as before.
#[tokio::test]
async fn upgrade_from_0_21_0_searches_as_before() {
    let (_name, old) = install("0.21.0").await;
    old.batch_execute(
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, kind, embedding, session_id,
                                      occurred_at, created_at, valid_from)
         SELECT 'dana', 'note ' || n || CASE WHEN n % 5 = 0 THEN ' about the budget' ELSE '' END,
                sha256(n::text::bytea), sha256(n::text::bytea), ARRAY['t' || (n % 3)],
                CASE WHEN n % 2 = 0 THEN 'semantic' ELSE 'episodic' END,
                ARRAY[sin(n), cos(n), sin(2 * n), 1]::vector, 's' || (n % 9),
                now() - make_interval(days => n % 20), now() - interval '2 days', now() - interval '2 days'
         FROM generate_series(1, 400) n;
         SELECT engram.remember(owner => 'dana', content => 'Dana lives in Lyon', embedding => '[0.2, 0.9, 0.1, 0.4]');
         SELECT engram.remember(owner => 'dana', content => 'Dana lives in Paris', embedding => '[0.2, 0.9, 0.1, 0.41]',
                                force => true);
         SELECT engram.remember(owner => 'dana', content => 'Dana met Sam about the budget',
                                embedding => '[-0.9, 0.1, -0.3, 0.2]', force => true);",
    )
    .await
    .unwrap();
    let searches = [
        "query_embedding => '[0.3, 0.8, 0.2, 1]', k => 7",
        "query_embedding => '[0.3, 0.8, 0.2, 1]', query_text => 'budget', k => 8",
        "query_text => 'the budget yesterday', k => 6",
        "query_embedding => '[0.2, 0.9, 0.1, 0.4]', query_text => 'where does Dana live', k => 5",
        "query_embedding => '[0.3, 0.8, 0.2, 1]', k => 3, group_by => 'session'",
        "query_embedding => '[-0.5, 0.1, 0.7, 1]', k => 5, tags_any => ARRAY['t2'], kinds => ARRAY['episodic']",
        "query_embedding => '[0.3, 0.8, 0.2, 1]', k => 5, known_at => now() - interval '1 hour'",
        "query_text => 'budget', k => 5, entity => 'Sam'",
        "query_embedding => '[0.9, 0.9, 0.9, 1]', k => 4, min_similarity => 0.99",
    ];
    // each search's hits, in order, with what they show (similarities as
    // text: a real's every digit)
    let run = |args: &'static str| {
        let old = &old;
        async move {
            old.batch_execute("BEGIN").await.unwrap();
            let got: Option<String> = old
                .query_one(
                    &format!(
                        "SELECT string_agg(concat_ws('|', id, score, similarity, session, lower(time_window)), ','
                                           ORDER BY n)
                         FROM engram.search(owner => 'dana', {args}) WITH ORDINALITY AS s(id, content, kind, tags,
                              metadata, similarity, score, trust_score, staleness_score, created_at, source,
                              occurred_at, valid_from, valid_to, time_window, namespace, key, value, session, n)"
                    ),
                    &[],
                )
                .await
                .unwrap_or_else(|e| panic!("{args}: {e:?}"))
                .get(0);
            let touched: i64 = old
                .query_one(
                    "SELECT coalesce(sum(access_count), 0)::int8 FROM engram.memory_access",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            let misses: i64 = old
                .query_one("SELECT count(*) FROM engram.misses", &[])
                .await
                .unwrap()
                .get(0);
            old.batch_execute("ROLLBACK").await.unwrap();
            (got, touched, misses)
        }
    };
    let mut before = Vec::new();
    for args in searches {
        before.push(run(args).await);
    }
    let snapshot =
        "SELECT string_agg(m.owner || m.id || m.content || m.status, ',' ORDER BY m.id) FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    for (args, expected) in searches.iter().zip(&before) {
        assert!(expected.0.is_some() || args.contains("0.99"), "{args}: {expected:?}");
        assert_eq!(&run(args).await, expected, "{args}");
    }
    // the newer of two contradicting facts first
    let first: String = old
        .query_one(
            "SELECT content FROM engram.search(owner => 'dana', query_embedding => '[0.2, 0.9, 0.1, 0.4]', k => 5)
             WHERE content LIKE 'Dana lives%' LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(first, "Dana lives in Paris");
    // _search_hits is a helper: not for the agents' role
    let callable: bool = old
        .query_one(
            "SELECT has_function_privilege('engram_agent', 'engram._search_hits(text, text[], text, text[], text[],
                 text[], text, timestamptz, timestamptz, smallint, text, text, timestamptz, text[], jsonb, vector,
                 text, integer, real, tstzrange, boolean, timestamptz, uuid[], boolean, integer, boolean, boolean)',
                 'EXECUTE')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!callable);
}

/// 0.22.0 -> 0.23.0: engram.context, state_load's and workspace_load's
/// sections and engram.time_window are Rust. The same packages, states,
/// workspaces and windows before and after (ages left out: they move with
/// the clock), and the same access counts.
#[tokio::test]
async fn upgrade_from_0_22_0_resumes_as_before() {
    let (_name, old) = install("0.22.0").await;
    old.batch_execute(
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, kind, embedding, occurred_at,
                                      created_at, valid_from)
         SELECT 'dana', 'deploy note ' || n || CASE WHEN n % 4 = 0 THEN ' about the budget' ELSE '' END,
                sha256(n::text::bytea), sha256(n::text::bytea), 'episodic',
                ARRAY[sin(n), cos(n), sin(2 * n), 1]::vector, now() - make_interval(days => n % 9),
                now() - interval '2 days', now() - interval '2 days'
         FROM generate_series(1, 60) n;
         SELECT engram.workspace_create(owner => 'dana', name => 'api');
         SELECT engram.workspace_create(owner => 'dana', name => 'web');
         SELECT engram.slot_set(owner => 'dana', label => 'persona', content => 'terse', pinned => true);
         SELECT engram.slot_set(owner => 'dana', label => 'persona', content => 'api voice', pinned => true,
                                workspace => 'api');
         SELECT engram.slot_set(owner => 'dana', label => 'rules', content => 'no force pushes', pinned => true);
         SELECT engram.slot_set(owner => 'dana', label => 'scratch', content => 'not pinned');
         SELECT engram.capture(owner => 'dana', event_type => 'tool_invocation', content => 'deploy ' || n,
                               session_id => 's' || (n % 2), workspace => CASE WHEN n % 3 = 0 THEN 'web' ELSE 'api' END,
                               tool_name => 'deploy', success => n % 2 = 0, error => 'DATABASE_URL unset',
                               duration_ms => n, tool_output => to_jsonb('output ' || n))
         FROM generate_series(1, 9) n;
         SELECT engram.capture(owner => 'dana', event_type => 'tool_invocation', content => 'loose',
                               session_id => 's9', tool_name => 'ls', success => true);
         SELECT engram.summarize(owner => 'dana', session_id => 's1', content => 'Deploy failed on a missing env var.');
         SELECT engram.state_save(owner => 'dana', workspace => 'api', name => 'first', active_task => 'deploy v1');
         SELECT engram.state_save(owner => 'dana', workspace => 'api', name => 'end-of-day', active_task => 'deploy v2',
                                  next_steps => '{\"set DATABASE_URL\", \"deploy again\"}', tags => '{ops}');",
    )
    .await
    .unwrap();
    let reads = [
        "engram.context(owner => 'dana', query_embedding => '[0.3, 0.8, 0.2, 1]', query_text => 'budget',
                        workspace => 'api')",
        "engram.context(owner => 'dana', session_id => 's0')",
        "engram.context(owner => 'dana', session_id => 's9', query_text => 'the budget yesterday')",
        "engram.context(owner => 'dana', query_embedding => '[0.3, 0.8, 0.2, 1]', workspace => 'web',
                        budget_chars => 700)",
        "engram.context(owner => 'dana', query_text => 'deploy', mode => 'agent', role => 'guest')",
        "engram.context(owner => 'dana', query_embedding => '[-0.5, 0.1, 0.7, 1]', budget_chars => 250)",
        "engram.state_load(owner => 'dana', workspace => 'api')",
        "engram.state_load(owner => 'dana', workspace => 'api', name => 'first')",
        "engram.workspace_load(owner => 'dana', name => 'api')",
        "to_jsonb(engram.time_window('yesterday', '2026-05-14 10:00Z'))",
        "to_jsonb(engram.time_window('in May 2023 and since March'))",
    ];
    // each read's JSON without its ages (the clock moves between runs), and
    // the access counts it left
    let run = |read: &'static str| {
        let old = &old;
        async move {
            old.batch_execute("BEGIN").await.unwrap();
            let got: String = old
                .query_one(
                    &format!(
                        "SELECT regexp_replace(regexp_replace(regexp_replace(r::text,
                                  '\"age_s\": [0-9]+', '\"age_s\": _', 'g'), '[0-9]+[smhd] ago', '_ ago', 'g'),
                                  '\"chars\": [0-9]+', '\"chars\": _', 'g')
                         FROM (SELECT {read} AS r) x"
                    ),
                    &[],
                )
                .await
                .unwrap_or_else(|e| panic!("{read}: {e:?}"))
                .get(0);
            let touched: i64 = old
                .query_one(
                    "SELECT coalesce(sum(access_count), 0)::int8 FROM engram.memory_access",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            old.batch_execute("ROLLBACK").await.unwrap();
            (got, touched)
        }
    };
    let mut before = Vec::new();
    for read in reads {
        before.push(run(read).await);
    }
    let snapshot =
        "SELECT string_agg(m.owner || m.id || m.content || m.status, ',' ORDER BY m.id) FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    for (read, expected) in reads.iter().zip(&before) {
        assert_eq!(&run(read).await, expected, "{read}");
    }
    // what was compared holds what it should: memories found and counted,
    // the latest state, the workspace's slot over the global one, a window
    assert!(
        before[0].0.contains("about the budget") && before[0].1 > 0,
        "{:?}",
        before[0]
    );
    assert!(before[6].0.contains("\"name\": \"end-of-day\""), "{:?}", before[6]);
    assert!(
        before[8].0.contains("api voice") && !before[8].0.contains("terse"),
        "{:?}",
        before[8]
    );
    assert!(before[9].0.contains("2026-05-13"), "{:?}", before[9]);
    // the helpers are not for the agents' role
    for helper in [
        "engram._pinned_slots(text, text)",
        "engram._state_of(text, uuid, text, text)",
    ] {
        let callable: bool = old
            .query_one(
                &format!("SELECT has_function_privilege('engram_agent', '{helper}', 'EXECUTE')"),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert!(!callable, "{helper}");
    }
}

/// 0.23.0 -> 0.24.0: remember's conflict check is one Rust call
/// (`_conflicts`). The same answers before and after: the conflicts found
/// (ids, contents, similarities, reasons) in a scope, in a context, at a
/// past validity time (valid_from, occurred_at), a duplicate, an episodic memory (never compared),
/// a refusal and a write stored anyway.
#[tokio::test]
async fn upgrade_from_0_23_0_remembers_as_before() {
    let (_name, old) = install("0.23.0").await;
    old.batch_execute(
        "SELECT engram.remember(owner => 'erin', content => 'The billing API listens on port 8080',
                                embedding => '[1, 0.1, 0, 0]');
         SELECT engram.remember(owner => 'erin', content => 'The billing API listens on port 8080 for carol',
                                embedding => '[1, 0.12, 0, 0]', internal_type => 'ghost',
                                tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'carol'));
         SELECT engram.remember(owner => 'erin', content => 'The billing API listens on port 8080 for dave',
                                embedding => '[1, 0.12, 0, 0]', internal_type => 'ghost',
                                tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'dave'));
         SELECT engram.remember(owner => 'erin', content => 'Alice does not drink coffee',
                                embedding => '[0, 1, 0.1, 0]');
         SELECT engram.remember(owner => 'erin', content => 'The office router listens on port 8080',
                                embedding => '[0, 0, 1, 0.1]', valid_from => '2020-01-01', valid_to => '2021-01-01');
         SELECT engram.remember(owner => 'erin', content => 'The billing API listens on port 8080 (agent notes)',
                                embedding => '[1, 0.1, 0, 0]', internal_type => 'agent', tags => engram.internal_tags('agent'));
         SELECT engram.remember(owner => 'erin', content => 'We moved the billing API to port 8080 on Monday',
                                embedding => '[1, 0.11, 0, 0]', kind => 'episodic');",
    )
    .await
    .unwrap();
    let writes = [
        "content => 'The billing API listens on port 9090', embedding => '[1, 0.1, 0.01, 0]'",
        "content => 'The billing API listens on port 9090', embedding => '[1, 0.1, 0.01, 0]', force => true",
        "content => 'The billing API listens on port 9090 for carol', embedding => '[1, 0.12, 0.01, 0]',
         internal_type => 'ghost', tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'carol')",
        "content => 'Alice drinks coffee every morning', embedding => '[0, 1, 0.12, 0]'",
        "content => 'The office router listens on port 9090', embedding => '[0, 0, 1, 0.12]', valid_from => '2020-06-01'",
        "content => 'The office router listens on port 9090', embedding => '[0, 0, 1, 0.12]'",
        "content => 'The billing API listens on port 9090 (agent notes)', embedding => '[1, 0.1, 0.01, 0]',
         internal_type => 'agent', tags => engram.internal_tags('agent')",
        "content => 'We moved the billing API to port 9090 on Tuesday', embedding => '[1, 0.1, 0.01, 0]', kind => 'episodic'",
        "content => 'The billing API listens on port 8080', embedding => '[1, 0.1, 0, 0]'",
        "content => 'The office router listens on port 9090', embedding => '[0, 0, 1, 0.12]',
         occurred_at => '2020-06-01'",
    ];
    // each write's status and conflicts, and what it stored, undone after
    let run = |write: &'static str| {
        let old = &old;
        async move {
            old.batch_execute("BEGIN").await.unwrap();
            let row = old
                .query_one(
                    &format!(
                        "SELECT r.status, r.conflicts::text, r.id FROM engram.remember(owner => 'erin', {write}) r"
                    ),
                    &[],
                )
                .await
                .unwrap_or_else(|e| panic!("{write}: {e:?}"));
            let stored: Option<String> = old
                .query_one(
                    "SELECT (SELECT m.metadata::text FROM engram.memories m WHERE m.id = $1 AND $2 = 'created')",
                    &[&row.get::<_, Option<Uuid>>(2), &row.get::<_, String>(0)],
                )
                .await
                .unwrap()
                .get(0);
            old.batch_execute("ROLLBACK").await.unwrap();
            (row.get::<_, String>(0), row.get::<_, Option<String>>(1), stored)
        }
    };
    let mut before = Vec::new();
    for write in writes {
        before.push(run(write).await);
    }
    let snapshot =
        "SELECT string_agg(m.owner || m.id || m.content || m.status, ',' ORDER BY m.id) FROM engram.memories m";
    update_keeping(&old, snapshot).await;
    for (write, expected) in writes.iter().zip(&before) {
        assert_eq!(&run(write).await, expected, "{write}");
    }
    // what was compared holds what it should
    let conflicts = |i: usize| before[i].1.clone().unwrap_or_default();
    assert_eq!(before[0].0, "conflict", "{:?}", before[0]);
    assert!(conflicts(0).contains("changed_value"), "{:?}", before[0]);
    assert_eq!(before[1].0, "created", "{:?}", before[1]);
    assert!(
        before[1].2.as_deref().unwrap_or("").contains("engram_forced_over"),
        "{:?}",
        before[1]
    );
    assert!(
        conflicts(2).contains("for carol") && !conflicts(2).contains("for dave"),
        "{:?}",
        before[2]
    );
    assert!(conflicts(4).contains("office router"), "{:?}", before[4]);
    assert!(!conflicts(5).contains("office router"), "{:?}", before[5]);
    assert!(conflicts(6).contains("agent notes"), "{:?}", before[6]);
    assert_eq!(
        (before[7].0.as_str(), &before[7].1),
        ("created", &None),
        "{:?}",
        before[7]
    );
    assert_eq!(before[8].0, "duplicate", "{:?}", before[8]);
    assert!(conflicts(9).contains("office router"), "{:?}", before[9]);
    let callable: bool = old
        .query_one(
            "SELECT has_function_privilege('engram_agent',
                 'engram._conflicts(text, text, vector, text, text[], timestamptz, real)', 'EXECUTE')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!callable);
}
