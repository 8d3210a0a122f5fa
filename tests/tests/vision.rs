//! Vision memories in SQL (docs/VISION.md): images by content hash with
//! reference counts, refusals that change nothing, owner isolation under the
//! restricted role, exact vision search against a brute-force check, the
//! session filter and the k clamp, and memories holding references.

use engram_tests::*;

/// Image embeddings of these tests: 8 dimensions (configure(image_dims => 8)).
const DIMS: usize = 8;

async fn vision_db() -> TestDb {
    let db = TestDb::new(4).await;
    db.admin
        .execute("SELECT engram.configure(image_dims => 8)", &[])
        .await
        .expect("configure image_dims");
    db
}

/// Bytes that pass as a PNG (the signature, then `tag`): distinct tags are
/// distinct images.
fn png(tag: &str) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    b.extend_from_slice(tag.as_bytes());
    b
}

fn sha_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(data))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn put(c: &impl Sql, owner: &str, data: &[u8], session: Option<&str>) -> String {
    c.query_one(
        "SELECT engram.image_put(owner => $1, data => $2, mime => 'image/png', session_id => $3)",
        &[&owner, &data, &session],
    )
    .await
    .expect("image_put")
    .get(0)
}

async fn embed(c: &impl Sql, owner: &str, sha: &str, v: &[f32]) {
    c.query_one(
        "SELECT engram.vision_embed(owner => $1, sha256 => $2, embedding => $3::text::vector, model => 'test')",
        &[&owner, &sha, &vec_text(v)],
    )
    .await
    .expect("vision_embed");
}

async fn search(c: &impl Sql, owner: &str, q: &[f32], k: i32, session: Option<&str>) -> Vec<(String, f32)> {
    c.query(
        "SELECT sha256, similarity FROM engram.vision_search(owner => $1, query_embedding => $2::text::vector,
                                                             k => $3, session_id => $4)",
        &[&owner, &vec_text(q), &k, &session],
    )
    .await
    .expect("vision_search")
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// Gives back one put reference; the references left.
async fn release(c: &impl Sql, owner: &str, sha: &str) -> Result<i32, tokio_postgres::Error> {
    c.query_one(
        "SELECT engram.image_release(owner => $1, sha256 => $2)",
        &[&owner, &sha],
    )
    .await
    .map(|r| r.get(0))
}

/// Row counts of both image tables (as the admin: RLS hides nothing).
async fn stored(db: &TestDb) -> (i64, i64) {
    (
        count(db, "SELECT count(*) FROM engram.images").await,
        count(db, "SELECT count(*) FROM engram.image_data").await,
    )
}

#[tokio::test]
async fn references_are_counted_and_the_last_release_erases_bytes_and_embedding() {
    let db = vision_db().await;
    let data = png("red square");
    let sha = put(&db.admin, "alice", &data, Some("s1")).await;
    assert_eq!(sha, sha_hex(&data), "the id is the sha256 of the bytes");
    let again = put(&db.admin, "alice", &data, Some("s2")).await;
    assert_eq!(again, sha, "the same bytes are stored once");
    let (refs, session): (i32, Option<String>) = {
        let r = db
            .admin
            .query_one("SELECT refs, session_id FROM engram.images WHERE sha256 = $1", &[&sha])
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(
        (refs, session.as_deref()),
        (2, Some("s1")),
        "two references, the first put's session"
    );
    embed(&db.admin, "alice", &sha, &axis(DIMS, 0, 0.0)).await;

    let got: Vec<u8> = db
        .admin
        .query_one(
            "SELECT engram.image_get(owner => 'alice', sha256 => $1)",
            &[&sha.to_uppercase()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(got, data, "image_get returns the bytes (ids in any case)");

    let left = release(&db.admin, "alice", &sha).await.unwrap();
    assert_eq!(left, 1);
    assert_eq!(stored(&db).await, (1, 1), "one release keeps the image");
    assert_eq!(search(&db.admin, "alice", &axis(DIMS, 0, 0.0), 10, None).await.len(), 1);

    let left = release(&db.admin, "alice", &sha).await.unwrap();
    assert_eq!(left, 0);
    assert_eq!(stored(&db).await, (0, 0), "the last release erases the bytes");
    assert_eq!(count(&db, "SELECT count(*) FROM engram.image_embeddings").await, 0);
    assert!(
        search(&db.admin, "alice", &axis(DIMS, 0, 0.0), 10, None)
            .await
            .is_empty(),
        "and the embedding"
    );
    let (code, msg) = sqlstate(
        db.admin
            .query_one("SELECT engram.image_get(owner => 'alice', sha256 => $1)", &[&sha])
            .await,
    );
    assert_eq!(code, "P0002", "{msg}");
    let (code, _) = sqlstate(release(&db.admin, "alice", &sha).await);
    assert_eq!(code, "P0002");
    // Every change is audited, by id and never with the bytes.
    let actions: Vec<String> = column(
        &db.admin,
        "SELECT action FROM engram.audit_log WHERE owner = 'alice' ORDER BY id",
    )
    .await;
    assert_eq!(
        actions,
        [
            "image_put",
            "image_put",
            "vision_embed",
            "image_release",
            "image_erase",
            "image_release"
        ]
    );
}

#[tokio::test]
async fn refusals_change_nothing() {
    let db = vision_db().await;
    let before = count(&db, "SELECT count(*) FROM engram.audit_log").await;
    let cases: Vec<(&str, Vec<u8>, Option<&str>, &str)> = vec![
        ("a type engram does not store", png("x"), Some("text/html"), "22023"),
        (
            "SVG, a document that can carry scripts",
            b"<svg onload=alert(1)>".to_vec(),
            Some("image/svg+xml"),
            "22023",
        ),
        ("bytes of another type", png("x"), Some("image/jpeg"), "22023"),
        (
            "no image signature at all",
            b"#!/bin/sh\nrm -rf /".to_vec(),
            Some("image/png"),
            "22023",
        ),
        ("no mime", png("x"), None, "22004"),
        ("no bytes", Vec::new(), Some("image/png"), "22004"),
    ];
    for (what, data, mime, want) in cases {
        let (code, msg) = sqlstate(
            db.admin
                .query_one(
                    "SELECT engram.image_put(owner => 'alice', data => $1, mime => $2)",
                    &[&data, &mime],
                )
                .await,
        );
        assert_eq!(code, want, "{what}: {msg}");
        assert!(msg.contains(';'), "{what}: the message says what to do: {msg}");
    }
    // The size limit, in a session that lowered it (a superuser's setting).
    let big = png(&"x".repeat(100));
    db.admin.batch_execute("SET engram.image_max_bytes = 64").await.unwrap();
    let (code, msg) = sqlstate(
        db.admin
            .query_one(
                "SELECT engram.image_put(owner => 'alice', data => $1, mime => 'image/png')",
                &[&big],
            )
            .await,
    );
    assert_eq!(code, "54000", "{msg}");
    assert!(msg.contains("engram.image_max_bytes"), "{msg}");
    db.admin.batch_execute("RESET engram.image_max_bytes").await.unwrap();
    // Bad ids, embeddings and models.
    let sha = put(&db.admin, "alice", &png("kept"), None).await;
    let after_put = count(&db, "SELECT count(*) FROM engram.audit_log").await;
    for (sql, want) in [
        ("SELECT engram.image_release(owner => 'alice', sha256 => 'not-a-hash')", "22023"),
        ("SELECT engram.image_get(owner => 'alice', sha256 => NULL)", "22004"),
        (
            "SELECT engram.vision_embed(owner => 'alice', sha256 => $1, embedding => '[1,2,3]', model => 'm')",
            "22000",
        ),
        (
            "SELECT engram.vision_embed(owner => 'alice', sha256 => $1, embedding => '[0,0,0,0,0,0,0,0]', model => 'm')",
            "22000",
        ),
        (
            "SELECT engram.vision_embed(owner => 'alice', sha256 => $1, embedding => '[1,0,0,0,0,0,0,0]', model => '')",
            "22004",
        ),
        ("SELECT * FROM engram.vision_search(owner => 'alice', query_embedding => '[1,0]')", "22000"),
        ("SELECT * FROM engram.vision_search(owner => 'alice', query_embedding => NULL)", "22004"),
    ] {
        let r = if sql.contains("$1") {
            db.admin.query(sql, &[&sha]).await
        } else {
            db.admin.query(sql, &[]).await
        };
        let (code, msg) = sqlstate(r);
        assert_eq!(code, want, "{sql}: {msg}");
    }
    let (code, _) = sqlstate(
        db.admin
            .query_one("SELECT engram.configure(image_dims => 4000)", &[])
            .await,
    );
    assert_eq!(code, "22023");
    assert_eq!(stored(&db).await, (1, 1), "only the one good put stored anything");
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.audit_log").await,
        after_put,
        "refusals write no audit rows"
    );
    assert_eq!(after_put, before + 1);
    let embedded = count(&db, "SELECT count(*) FROM engram.image_embeddings").await;
    assert_eq!(embedded, 0);
    // The dimension changes only while no image holds an embedding.
    embed(&db.admin, "alice", &sha, &axis(DIMS, 1, 0.0)).await;
    let (code, msg) = sqlstate(
        db.admin
            .query_one("SELECT engram.configure(image_dims => 16)", &[])
            .await,
    );
    assert_eq!(code, "55000", "{msg}");
}

#[tokio::test]
async fn restricted_role_sees_and_touches_only_its_own_images() {
    let db = vision_db().await;
    let bobs = png("bob's diagram");
    let bob_sha = put(&db.admin, "bob", &bobs, None).await;
    embed(&db.admin, "bob", &bob_sha, &axis(DIMS, 2, 0.0)).await;

    let alice = db.agent("alice").await;
    // Raw reads: RLS hides bob's rows, bytes included.
    for table in ["engram.images", "engram.image_data", "engram.image_embeddings"] {
        let n: i64 = alice
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "{table} leaks another owner's rows");
    }
    // Foreign ids through the functions: not found, as if absent.
    for sql in [
        "SELECT engram.image_get(sha256 => $1)::text",
        "SELECT engram.image_release(sha256 => $1)::text",
        "SELECT engram.vision_embed(sha256 => $1, embedding => '[1,0,0,0,0,0,0,0]', model => 'm')::text",
    ] {
        let (code, _) = sqlstate(alice.query(sql, &[&bob_sha]).await);
        assert_eq!(code, "P0002", "{sql}");
    }
    // Naming bob's owner is refused outright.
    for sql in [
        "SELECT engram.image_get(owner => 'bob', sha256 => $1)::text",
        "SELECT sha256 FROM engram.vision_search(owner => 'bob', query_embedding => '[0,0,1,0,0,0,0,0]') WHERE $1 <> ''",
    ] {
        let (code, _) = sqlstate(alice.query(sql, &[&bob_sha]).await);
        assert_eq!(code, "42501", "{sql}");
    }
    // No direct writes, and the size limit is not the agent's to raise.
    for sql in [
        "DELETE FROM engram.images",
        "UPDATE engram.images SET refs = 100",
        "DELETE FROM engram.image_data",
        "DELETE FROM engram.image_embeddings",
        "SELECT * FROM engram.image_holds",
        "SET engram.image_max_bytes = 1000000000",
    ] {
        let (code, msg) = sqlstate(alice.execute(sql, &[]).await);
        assert_eq!(code, "42501", "{sql}: {msg}");
    }
    // The same bytes put by alice are alice's own image: search finds only it.
    let mine = put(&alice, "alice", &bobs, None).await;
    assert_eq!(mine, bob_sha, "same bytes, same id, separate owners");
    embed(&alice, "alice", &mine, &axis(DIMS, 2, 0.1)).await;
    let hits = search(&alice, "alice", &axis(DIMS, 2, 0.0), 10, None).await;
    assert_eq!(hits.len(), 1);
    let owners: Vec<(String, i32)> = pairs(&db.admin, "SELECT owner, refs FROM engram.images ORDER BY owner").await;
    assert_eq!(owners, vec![("alice".into(), 1), ("bob".into(), 1)]);
    // A ghost conversation does not touch the owner's images.
    let ghost = db
        .platform_agent(
            "platform",
            "act_as => $2, internal_type => 'ghost', ghost_type => 'user', ghost_owner => 'bob'",
            &["alice"],
        )
        .await;
    let (code, _) = sqlstate(
        ghost
            .query(
                "SELECT * FROM engram.vision_search(query_embedding => '[0,0,1,0,0,0,0,0]')",
                &[],
            )
            .await,
    );
    assert_eq!(code, "42501");
}

/// A small deterministic generator, so the brute-force check needs no crate.
fn lcg(seed: &mut u64) -> f32 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    ((*seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

#[tokio::test]
async fn search_is_exact_cosine_with_session_filter_and_k_clamp() {
    let db = vision_db().await;
    let mut seed = 7u64;
    let mut all: Vec<(String, Vec<f32>, &str)> = Vec::new();
    for i in 0..120 {
        let v: Vec<f32> = (0..DIMS).map(|_| lcg(&mut seed)).collect();
        let session = if i % 3 == 0 { "s-a" } else { "s-b" };
        let sha = put(&db.admin, "alice", &png(&format!("image {i}")), Some(session)).await;
        embed(&db.admin, "alice", &sha, &v).await;
        all.push((sha, v, session));
    }
    // An image without an embedding yet, and another owner's nearer one: neither is a hit.
    put(&db.admin, "alice", &png("not embedded"), Some("s-a")).await;
    let q: Vec<f32> = (0..DIMS).map(|_| lcg(&mut seed)).collect();
    let bob = put(&db.admin, "bob", &png("bob"), None).await;
    embed(&db.admin, "bob", &bob, &q).await;

    let brute = |session: Option<&str>| -> Vec<String> {
        let mut scored: Vec<(f32, &String)> = all
            .iter()
            .filter(|(_, _, s)| session.is_none_or(|want| *s == want))
            .map(|(sha, v, _)| (cosine(v, &q), sha))
            .collect();
        scored.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
        scored.into_iter().map(|(_, s)| s.clone()).collect()
    };
    let hits = search(&db.admin, "alice", &q, 10, None).await;
    let want = brute(None);
    assert_eq!(
        hits.iter().map(|h| h.0.clone()).collect::<Vec<_>>(),
        want[..10].to_vec()
    );
    for (sha, sim) in &hits {
        let v = &all.iter().find(|x| &x.0 == sha).unwrap().1;
        assert!((sim - cosine(v, &q)).abs() < 1e-4, "similarity is the cosine");
    }
    // Session filter.
    let hits = search(&db.admin, "alice", &q, 5, Some("s-a")).await;
    assert_eq!(
        hits.iter().map(|h| h.0.clone()).collect::<Vec<_>>(),
        brute(Some("s-a"))[..5].to_vec()
    );
    let sessions: Vec<String> = db
        .admin
        .query(
            "SELECT session_id FROM engram.vision_search(owner => 'alice', query_embedding => $1::text::vector, session_id => 's-a')",
            &[&vec_text(&q)],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(sessions.iter().all(|s| s == "s-a") && !sessions.is_empty());
    // k is clamped to 1..50.
    assert_eq!(search(&db.admin, "alice", &q, 500, None).await.len(), 50);
    assert_eq!(search(&db.admin, "alice", &q, 0, None).await.len(), 1);
    assert_eq!(search(&db.admin, "alice", &q, -3, None).await.len(), 1);
    assert_eq!(
        search(&db.admin, "alice", &q, 50, None)
            .await
            .iter()
            .map(|h| h.0.clone())
            .collect::<Vec<_>>(),
        want[..50].to_vec()
    );
}

/// What keeps an image: (put references, memories holding it); None once erased.
async fn kept(db: &TestDb, sha: &str) -> Option<(i32, i64)> {
    db.admin
        .query_opt(
            "SELECT i.refs, (SELECT count(*) FROM engram.image_holds h WHERE h.owner = i.owner AND h.sha256 = i.sha256)
             FROM engram.images i WHERE i.sha256 = $1",
            &[&sha],
        )
        .await
        .unwrap()
        .map(|r| (r.get(0), r.get(1)))
}

async fn forget(db: &TestDb, id: Uuid, hard: bool) {
    db.admin
        .execute(
            "SELECT engram.forget(owner => 'alice', id => $1, hard => $2)",
            &[&id, &hard],
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn memories_hold_their_images_and_hard_forget_gives_them_back() {
    let db = vision_db().await;
    let shot = put(&db.admin, "alice", &png("error banner"), None).await;
    let other = put(&db.admin, "alice", &png("login page"), None).await;
    embed(&db.admin, "alice", &shot, &axis(DIMS, 0, 0.0)).await;
    // Two memories name the screenshot (one twice, in two cases), one also the login page.
    let one = create(
        &db.admin,
        "alice",
        "the deploy failed with a red error banner",
        &[1.0, 0.0, 0.0, 0.0],
        &format!(
            "metadata => '{{\"images\": [\"{shot}\", \"{}\"]}}'",
            shot.to_uppercase()
        ),
    )
    .await;
    let two = create(
        &db.admin,
        "alice",
        "login page and banner after the fix",
        &[0.0, 1.0, 0.0, 0.0],
        &format!("metadata => '{{\"images\": [\"{other}\", \"{shot}\"]}}'"),
    )
    .await;
    assert_eq!(
        kept(&db, &shot).await,
        Some((1, 2)),
        "one put, two memories (one counted once)"
    );
    // The agent gives back its puts: the memories keep the images, and a
    // memory's hold is not the caller's to release.
    for (sha, left) in [(&shot, 2), (&other, 1)] {
        let n = release(&db.admin, "alice", sha).await.unwrap();
        assert_eq!(n, left, "references left: the holding memories");
    }
    let (code, msg) = sqlstate(release(&db.admin, "alice", &shot).await);
    assert_eq!(code, "55000", "{msg}");
    assert!(msg.contains("hard => true"), "{msg}");
    assert_eq!(kept(&db, &shot).await, Some((0, 2)));
    // An update of other metadata keys keeps the images; one that drops an image gives it back.
    db.admin
        .execute(
            "SELECT engram.update(owner => 'alice', id => $1, metadata => '{\"note\": \"after the fix\"}')",
            &[&two],
        )
        .await
        .unwrap();
    assert_eq!(
        kept(&db, &other).await,
        Some((0, 1)),
        "metadata without \"images\" keeps them"
    );
    db.admin
        .execute(
            &format!("SELECT engram.update(owner => 'alice', id => $1, metadata => '{{\"images\": [\"{shot}\"]}}')"),
            &[&two],
        )
        .await
        .unwrap();
    assert_eq!(
        kept(&db, &other).await,
        None,
        "the login page's last holder let go: erased"
    );
    // A soft forget keeps the hold (the memory can come back); a hard one gives it back.
    forget(&db, one, false).await;
    assert_eq!(kept(&db, &shot).await, Some((0, 2)));
    forget(&db, one, true).await;
    assert_eq!(kept(&db, &shot).await, Some((0, 1)));
    forget(&db, two, true).await;
    assert_eq!(kept(&db, &shot).await, None);
    assert_eq!(
        stored(&db).await,
        (0, 0),
        "bytes and embedding erased with the last memory"
    );
    assert_eq!(count(&db, "SELECT count(*) FROM engram.image_holds").await, 0);
    // remember and update refuse an image the owner does not hold, writing nothing.
    let (code, msg) = sqlstate(
        db.admin
            .query(
                &format!(
                    "SELECT * FROM engram.remember(owner => 'alice', content => 'ghost image', metadata => '{{\"images\": [\"{shot}\"]}}')"
                ),
                &[],
            )
            .await,
    );
    assert_eq!(code, "22023", "{msg}");
    assert!(msg.contains("image_put"), "{msg}");
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM engram.memories WHERE content = 'ghost image'"
        )
        .await,
        0
    );
    // An import (a DBA restoring an export, which carries no images) is not
    // refused: the memory keeps its metadata and holds nothing.
    let imported: String = db
        .admin
        .query_one(
            "SELECT engram.import_memory(owner => 'alice', memory => jsonb_build_object(
                 'id', gen_random_uuid(), 'content', 'imported with its screenshot gone',
                 'metadata', jsonb_build_object('images', jsonb_build_array($1::text))))",
            &[&shot],
        )
        .await
        .expect("import_memory with an image that is not there")
        .get(0);
    assert_eq!(imported, "created");
    assert_eq!(count(&db, "SELECT count(*) FROM engram.image_holds").await, 0);
    // consolidate moves the sources' images to the merged memory.
    let diagram = put(&db.admin, "alice", &png("architecture diagram"), None).await;
    let a = create(
        &db.admin,
        "alice",
        "the diagram shows three services",
        &[0.0, 0.0, 0.0, 1.0],
        &format!("metadata => '{{\"images\": [\"{diagram}\"]}}'"),
    )
    .await;
    let b = create(
        &db.admin,
        "alice",
        "the services talk over gRPC",
        &[0.0, 0.0, 0.7, 0.7],
        "",
    )
    .await;
    let merged: Uuid = db
        .admin
        .query_one(
            "SELECT engram.consolidate(owner => 'alice', ids => ARRAY[$1, $2]::uuid[],
                                       content => 'three services, talking over gRPC (see the diagram)')",
            &[&a, &b],
        )
        .await
        .unwrap()
        .get(0);
    let images: serde_json::Value = db
        .admin
        .query_one(
            "SELECT metadata -> 'images' FROM engram.memories WHERE id = $1",
            &[&merged],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(images, serde_json::json!([diagram]));
    release(&db.admin, "alice", &diagram).await.unwrap();
    forget(&db, a, true).await;
    assert_eq!(
        kept(&db, &diagram).await,
        Some((0, 1)),
        "the merged memory holds it now"
    );
    // erase_owner takes the rest.
    let last = put(&db.admin, "alice", &png("left over"), None).await;
    create(
        &db.admin,
        "alice",
        "the left-over screenshot",
        &[0.0, 0.0, 1.0, 0.0],
        &format!("metadata => '{{\"images\": [\"{last}\"]}}'"),
    )
    .await;
    let erased: serde_json::Value = db
        .admin
        .query_one("SELECT engram.erase_owner(owner => 'alice')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        erased["images"], 1,
        "the left-over, which a put kept past its memory: {erased}"
    );
    assert_eq!(stored(&db).await, (0, 0));
    assert_eq!(count(&db, "SELECT count(*) FROM engram.image_holds").await, 0);
}

#[tokio::test]
async fn holds_are_rebuilt_after_a_restore_and_truncate_lets_go() {
    let db = vision_db().await;
    let kept_by_put = put(&db.admin, "alice", &png("kept by its put"), None).await;
    let only_held = put(&db.admin, "bob", &png("held by a memory only"), None).await;
    for (owner, sha) in [("alice", &kept_by_put), ("bob", &only_held)] {
        create(
            &db.admin,
            owner,
            &format!("{owner}'s screenshot"),
            &[1.0, 0.0, 0.0, 0.0],
            &format!("metadata => '{{\"images\": [\"{sha}\"]}}'"),
        )
        .await;
    }
    release(&db.admin, "bob", &only_held).await.unwrap();
    // What a restore that loaded the memories before the images leaves: no holds.
    db.admin.batch_execute("DELETE FROM engram.image_holds").await.unwrap();
    let rebuilt: serde_json::Value = db
        .admin
        .query_one("SELECT engram.rebuild_image_holds()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rebuilt, serde_json::json!({"holds": 2, "images_erased": 0}));
    assert_eq!(kept(&db, &only_held).await, Some((0, 1)));
    // Not for agents.
    let alice = db.agent("alice").await;
    let (code, _) = sqlstate(alice.query("SELECT engram.rebuild_image_holds()", &[]).await);
    assert_eq!(code, "42501");
    // TRUNCATE of the memories: what only memories kept is erased, put images stay.
    db.admin
        .batch_execute("TRUNCATE engram.memories CASCADE")
        .await
        .unwrap();
    assert_eq!(kept(&db, &only_held).await, None);
    assert_eq!(kept(&db, &kept_by_put).await, Some((1, 0)));
    assert_eq!(count(&db, "SELECT count(*) FROM engram.image_data").await, 1);
}

#[test]
fn the_docs_sql_walkthrough_runs_as_printed() {
    let db = format!("vision_doc_{}", std::process::id());
    assert!(psql("postgres", &format!("DROP DATABASE IF EXISTS {db}")).0);
    assert!(psql("postgres", &format!("CREATE DATABASE {db}")).0);
    let script = format!(
        "CREATE EXTENSION engram CASCADE;\n{}",
        sql_block("docs/VISION.md", "## Walkthrough: SQL")
    );
    let (ok, text) = psql(&db, &script);
    assert!(ok, "the VISION.md walkthrough failed:\n{text}");
    for expected in ["chat-1", " created ", "\\x89504e470d0a1a0a00000001"] {
        assert!(
            text.contains(expected),
            "walkthrough output lacks {expected:?}:\n{text}"
        );
    }
    let released = text.lines().skip_while(|l| !l.contains("image_release")).nth(2);
    assert_eq!(released.map(str::trim), Some("1"), "{text}");
}
