//! Backups restore everything (docs/BACKUP.md): a database with memories,
//! revisions, events, workspaces and states, slots, sharing, images and
//! tokens is dumped with the real pg_dump and restored with pg_restore (custom
//! format; directory format with --jobs 2) or psql (plain format) into a new
//! database, at embedding dimensions 3, 384 and 1536, with image embeddings
//! and non-default HNSW options and a tuned ef_search. The restore gives
//! back every row of every table engram dumps, the configuration, tokens
//! that bind, scope lists, entities and usage equal to a recomputation, and
//! the same search answers. A dump of the previous release restores and
//! finishes by hand; a restore that lost a table, or came from a newer
//! engram, is refused by engram until it is done again.

use engram_tests::ScratchCluster;
use engram_tests::*;
use std::process::Command;
use tokio_postgres::Client;

/// pg_dump / pg_restore / psql against the suite's cluster.
fn pg_tool(program: &str, args: &[&str]) -> (bool, String) {
    tool_at(
        &std::env::var("ENGRAM_TEST_HOST").unwrap(),
        &std::env::var("ENGRAM_TEST_PORT").unwrap(),
        program,
        args,
    )
}

/// A client program against the server at socket directory `host`, `port`.
fn tool_at(host: &str, port: &str, program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(pg_bin(program))
        .args(["-h", host, "-p", port, "-U", "postgres"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// A vector of `dims` dimensions pointing mostly along axis `i`.
fn unit(dims: usize, i: usize, t: f32) -> String {
    vec_text(&axis(dims, i % dims, t))
}

/// Bytes that pass as a PNG.
fn png(tag: &str) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    b.extend_from_slice(tag.as_bytes());
    b
}

/// Fills a database the way a deployment does: two owners, memories with
/// tags, entities, revisions and a supersession, an archived one, captured
/// events, a workspace and a state, slots, a grant and a publication, an
/// image held by a memory and embedded, tokens; then configures the HNSW
/// index and tunes ef_search. Returns alice's token.
async fn populate(c: &Client, dims: usize, image_dims: i32) -> String {
    c.batch_execute(&format!(
        "SELECT engram.configure(image_dims => {image_dims});
         SELECT engram.configure(hnsw_m => 12, hnsw_ef_construction => 48);"
    ))
    .await
    .unwrap();
    for (owner, n) in [("alice", 24), ("bob", 9)] {
        for i in 0..n {
            c.execute(
                "SELECT engram.remember(owner => $1, content => $2, embedding => $3::text::vector, tags => $4,
                                        force => true)",
                &[
                    &owner,
                    &format!("{owner} note {i}: Marta Keller works on Project Atlas in Lyon, ticket OPS-{i}"),
                    &unit(dims, i, 0.1 * i as f32),
                    &vec![format!("t{}", i % 3)],
                ],
            )
            .await
            .unwrap();
        }
    }
    let token: String = c
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'laptop')", &[])
        .await
        .unwrap()
        .get(0);
    let sha: String = c
        .query_one(
            "SELECT engram.image_put(owner => 'alice', data => $1, mime => 'image/png', session_id => 's1')",
            &[&png("whiteboard")],
        )
        .await
        .unwrap()
        .get(0);
    c.batch_execute(&format!(
        "SET engram.owner = 'alice';
         SELECT engram.vision_embed(sha256 => '{sha}', embedding => '{}', model => 'clip-test');
         SELECT engram.update(id => (SELECT id FROM engram.list(\"limit\" => 1)), content => 'Alice drinks oolong tea',
                              embedding => '{}', reason => 'she switched');
         SELECT engram.remember(content => 'The whiteboard photo from the Atlas kickoff', embedding => '{}',
                                metadata => '{{\"images\": [\"{sha}\"]}}', force => true,
                                supersedes => ARRAY(SELECT id FROM engram.list(\"limit\" => 2) OFFSET 1));
         SELECT engram.forget(id => (SELECT id FROM engram.list(\"limit\" => 3) OFFSET 2));
         SELECT engram.capture(event_type => 'tool_invocation', content => 'ran the deploy script', session_id => 's1',
                               tool_name => 'bash', tool_input => '{{\"cmd\": \"deploy\"}}', success => true);
         SELECT engram.workspace_create(name => 'atlas', description => 'Project Atlas');
         SELECT engram.state_save(workspace => 'atlas', name => 'kickoff', conversation_context => 'we planned the launch',
                                  next_steps => ARRAY['ship it']);
         SELECT engram.slot_set(label => 'plan', content => 'launch in May', pinned => true);
         SELECT engram.ghost_settings(enabled => true, default_trust => 2);
         SELECT engram.grant(accessor => 'bob', trust => 4);
         SELECT engram.publish(id => (SELECT id FROM engram.list(\"limit\" => 1)), space => 'lobby');
         SELECT engram.search(query_text => 'nothing matches zzyzx');
         RESET engram.owner;",
        vec_text(&axis(image_dims as usize, 1, 0.0)),
        unit(dims, 0, 0.05),
        unit(dims, 5, 0.0),
    ))
    .await
    .unwrap_or_else(|e| panic!("populate: {e:?}"));
    c.query_one("SELECT engram.tune_search(samples => 5)", &[])
        .await
        .unwrap();
    token
}

/// One line per dumped table: its name and a digest of its rows (the
/// configuration without its timestamp).
async fn table_digests(c: &Client) -> Vec<String> {
    // (in the target list: engram's helpers refuse to be evaluated by the
    // planner outside engram's functions)
    let tables: Vec<String> = c
        .query_one("SELECT engram._dumped_tables()::text[]", &[])
        .await
        .unwrap()
        .get(0);
    let mut out = Vec::new();
    for t in tables {
        let sql = if t.ends_with("configuration") {
            "SELECT md5(string_agg(x::text, '|')) FROM (SELECT embedding_dims, image_dims, hnsw_m, hnsw_ef_construction,
                 hnsw_ef_search FROM engram.configuration) x"
                .to_string()
        } else {
            format!("SELECT md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) || ' ' || count(*) FROM {t} x")
        };
        let digest: Option<String> = c.query_one(&sql, &[]).await.unwrap().get(0);
        out.push(format!("{t}: {}", digest.unwrap_or_default()));
    }
    out
}

/// What is derived from the rows and the configuration in the catalog.
async fn derived(c: &Client) -> Vec<String> {
    column(
        c,
        "SELECT 'entities ' || md5(string_agg(e::text, '|' ORDER BY e::text)) FROM engram.memory_entities e
         UNION ALL SELECT 'usage ' || md5(string_agg(l::text, '|' ORDER BY l.owner))
             FROM (SELECT owner, memories, events, image_bytes, slots, workspaces, states FROM engram.owner_locks) l
         UNION ALL SELECT 'holds ' || md5(string_agg(h::text, '|' ORDER BY h::text)) FROM engram.image_holds h
         UNION ALL SELECT 'dims ' || engram._dims() || ' ' || engram._image_dims() || ' ' || engram._hnsw_build()::text
         UNION ALL SELECT 'ef_search ' || current_setting('engram.hnsw_ef_search')",
    )
    .await
}

/// A hybrid search and a vector search of alice's, ids and scores.
async fn answers(c: &Client, dims: usize) -> Vec<String> {
    let q = unit(dims, 2, 0.05);
    column(
        c,
        &format!(
            "SELECT id || ' ' || round(score::numeric, 4) FROM engram.search(owner => 'alice', query_text => 'Atlas Lyon',
                 query_embedding => '{q}', k => 8)
             UNION ALL SELECT '-- vectors' UNION ALL
             (SELECT id || ' ' || round(score::numeric, 4) FROM engram.search(owner => 'alice', query_embedding => '{q}', k => 5))"
        ),
    )
    .await
}

/// Dumps `source` in `format` and restores it into a new database; returns
/// the new database's name, whether the restore tool succeeded, and what
/// it printed.
fn dump_and_restore(source: &str, format: &str) -> (String, bool, String) {
    let dir = std::env::temp_dir().join(format!("engram-backup-{}-{source}-{format}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let target = format!("{source}_{format}");
    assert!(
        pg_tool(
            "psql",
            &["-X", "-d", "postgres", "-c", &format!("CREATE DATABASE {target}")]
        )
        .0
    );
    let path = dir.display().to_string();
    let (ok, out) = match format {
        "custom" => {
            let (ok, out) = pg_tool("pg_dump", &["-Fc", "-f", &path, "-d", source]);
            assert!(ok, "pg_dump: {out}");
            pg_tool("pg_restore", &["-d", &target, &path])
        }
        "directory" => {
            let (ok, out) = pg_tool("pg_dump", &["-Fd", "-f", &path, "-d", source]);
            assert!(ok, "pg_dump: {out}");
            pg_tool("pg_restore", &["--jobs", "2", "-d", &target, &path])
        }
        _ => {
            let (ok, out) = pg_tool("pg_dump", &["-Fp", "-f", &path, "-d", source]);
            assert!(ok, "pg_dump: {out}");
            pg_tool(
                "psql",
                &["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &target, "-f", &path],
            )
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&dir);
    (target, ok, out)
}

#[tokio::test]
async fn a_logical_backup_restores_everything_at_every_dimension() {
    for (dims, image_dims) in [(3usize, 8), (384, 512), (1536, 16)] {
        let db = TestDb::new(dims as i32).await;
        let token = populate(&db.admin, dims, image_dims).await;
        let want = (
            table_digests(&db.admin).await,
            derived(&db.admin).await,
            answers(&db.admin, dims).await,
        );
        assert!(
            want.0
                .iter()
                .any(|t| t.starts_with("engram.memories") && !t.ends_with(" 0")),
            "{:?}",
            want.0
        );
        for format in ["custom", "directory", "plain"] {
            let (target, ok, out) = dump_and_restore(&db.name, format);
            assert!(ok, "{dims} dims, {format}: the restore failed:\n{out}");
            let r = connect_as(&target, "postgres").await;
            // finished by its last load: nothing left to do, served again
            let loading: i64 = r
                .query_one("SELECT count(*) FROM engram.restore_loads", &[])
                .await
                .unwrap()
                .get(0);
            assert_eq!(loading, 0, "{dims} dims, {format}: the restore did not finish");
            assert_eq!(table_digests(&r).await, want.0, "{dims} dims, {format}: rows differ");
            assert_eq!(derived(&r).await, want.1, "{dims} dims, {format}: derived data differs");
            let drift: i64 = r.query_one(LIST_DRIFT, &[]).await.unwrap().get(0);
            assert_eq!(
                drift, 0,
                "{dims} dims, {format}: the scope lists differ from a recomputation"
            );
            assert_eq!(
                answers(&r, dims).await,
                want.2,
                "{dims} dims, {format}: search answers differ"
            );
            // the token binds, the restricted role reads alice's rows only
            let app = connect_as(&target, "engram_app").await;
            app.batch_execute("BEGIN").await.unwrap();
            app.query_one("SELECT engram.bind($1)", &[&token]).await.unwrap();
            let owners: Vec<String> = column(&app, "SELECT DISTINCT owner FROM engram.memories").await;
            assert_eq!(owners, vec!["alice".to_string()]);
            app.batch_execute("COMMIT").await.unwrap();
            // usage equals a recount; and the database takes writes
            let before = derived(&r).await;
            r.query_one("SELECT engram.recount_usage()", &[]).await.unwrap();
            assert_eq!(derived(&r).await, before);
            r.batch_execute(&format!(
                "SELECT engram.remember(owner => 'alice', content => 'written after the restore', embedding => '{}')",
                unit(dims, 7, 0.3)
            ))
            .await
            .unwrap_or_else(|e| panic!("{dims} dims, {format}: a write after the restore: {e:?}"));
            drop(r);
            let _ = pg_tool(
                "psql",
                &[
                    "-X",
                    "-d",
                    "postgres",
                    "-c",
                    &format!("DROP DATABASE {target} WITH (FORCE)"),
                ],
            );
        }
    }
}

/// A dump of 0.14.0 restores into this library (its configuration table
/// did not exist, so a DBA finishes the restore) and
/// keeps every row; ALTER EXTENSION engram UPDATE then has nothing to do.
#[tokio::test]
async fn a_dump_of_the_previous_release_restores_and_finishes_by_hand() {
    let (source, old) = empty_database().await;
    old.batch_execute(
        "CREATE EXTENSION engram VERSION '0.14.0' CASCADE;
         SELECT engram.configure(embedding_dims => 3);
         SET engram.owner = 'alice';
         SELECT engram.remember(content => 'Alice drinks green tea', embedding => '[0.9, 0.1, 0.1]');
         SELECT engram.update(id => (SELECT id FROM engram.list()), content => 'Alice drinks oolong tea',
                              embedding => '[0.8, 0.2, 0.1]');
         SELECT engram.remember(content => 'The deploy failed with ERR-4521', embedding => '[0.1, 0.9, 0.2]',
                                kind => 'episodic');
         SELECT engram.slot_set(label => 'plan', content => 'ship it');",
    )
    .await
    .unwrap();
    let want = table_digests_without_configuration(&old).await;
    let (target, ok, out) = dump_and_restore(&source, "custom");
    assert!(ok, "{out}");
    let r = connect_as(&target, "postgres").await;
    let (code, msg) = sqlstate(r.query("SELECT * FROM engram.list(owner => 'alice')", &[]).await);
    assert_eq!(code, "55000", "{msg}");
    assert!(msg.contains("being restored"), "{msg}");
    let done: serde_json::Value = r.query_one("SELECT engram.finish_restore()", &[]).await.unwrap().get(0);
    assert_eq!(done["embedding_dims"], 3, "{done}");
    r.batch_execute("ALTER EXTENSION engram UPDATE").await.unwrap();
    assert_eq!(extversion(&r).await, env!("CARGO_PKG_VERSION"));
    assert_eq!(table_digests_without_configuration(&r).await, want);
    let hits: Vec<String> = column(
        &r,
        "SELECT content FROM engram.search(owner => 'alice', query_text => 'tea', query_embedding => '[0.8, 0.2, 0.1]')",
    )
    .await;
    assert_eq!(hits[0], "Alice drinks oolong tea");
}

/// The columns tables gained since 0.14.0, NULL in every row restored from
/// a 0.14.0 dump: left out of the digests, so that the dump compares with
/// its restore into this release.
const NEW_COLUMNS: &str = "'{namespace,key,value,ttl,minted_by}'::text[]";

async fn table_digests_without_configuration(c: &Client) -> Vec<String> {
    let mut out = Vec::new();
    for t in [
        "memories",
        "revisions",
        "audit_log",
        "tokens",
        "slots",
        "events",
        "workspaces",
        "states",
    ] {
        let digest: String = c
            .query_one(
                // (the restore's own audit row aside)
                &format!(
                    "SELECT md5(coalesce(string_agg(y::text, '|' ORDER BY y::text), ''))
                     FROM engram.{t} x, LATERAL (SELECT to_jsonb(x) - {NEW_COLUMNS}) z(y)
                     WHERE to_jsonb(x) ->> 'action' IS DISTINCT FROM 'restore'"
                ),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        out.push(format!("{t}: {digest}"));
    }
    out
}

/// A restore that lost a table's data, or that comes from a newer engram,
/// never looks healthy: engram refuses to serve it, and finish_restore
/// says what is missing.
#[tokio::test]
async fn an_incomplete_restore_is_refused_until_it_is_done_again() {
    let db = TestDb::new(3).await;
    populate(&db.admin, 3, 8).await;
    let dir = std::env::temp_dir().join(format!("engram-partial-{}", std::process::id()));
    let path = dir.display().to_string();
    assert!(pg_tool("pg_dump", &["-Fc", "-f", &path, "-d", &db.name]).0);
    // Without the slots' data (as if its COPY had failed).
    let (ok, list) = pg_tool("pg_restore", &["-l", &path]);
    assert!(ok);
    let kept: String = list
        .lines()
        .filter(|l| !l.contains("TABLE DATA engram slots"))
        .map(|l| format!("{l}\n"))
        .collect();
    let list_file = format!("{path}.list");
    std::fs::write(&list_file, kept).unwrap();
    let target = format!("{}_partial", db.name);
    assert!(
        pg_tool(
            "psql",
            &["-X", "-d", "postgres", "-c", &format!("CREATE DATABASE {target}")]
        )
        .0
    );
    let (ok, out) = pg_tool("pg_restore", &["-d", &target, "-L", &list_file, &path]);
    assert!(ok, "{out}");
    let r = connect_as(&target, "postgres").await;
    for sql in [
        "SELECT * FROM engram.list(owner => 'alice')",
        "SELECT engram.stats(owner => 'alice')",
        "SELECT engram.recount_usage()",
    ] {
        let (code, msg) = sqlstate(r.query(sql, &[]).await);
        assert_eq!(code, "55000", "{sql}: {msg}");
        assert!(msg.contains("being restored"), "{sql}: {msg}");
    }
    let (code, msg) = sqlstate(r.query("SELECT engram.finish_restore()", &[]).await);
    assert_eq!(code, "55000");
    assert!(msg.contains("no data was loaded into slots"), "{msg}");

    // A dump from a newer engram: its last load fails, nothing is served.
    db.admin
        .batch_execute("UPDATE engram.configuration SET version = '99.0.0'")
        .await
        .unwrap();
    let (target, ok, out) = dump_and_restore(&db.name, "custom");
    assert!(!ok, "a dump of engram 99.0.0 was accepted:\n{out}");
    assert!(out.contains("newer than this library"), "{out}");
    let r = connect_as(&target, "postgres").await;
    let (code, _) = sqlstate(r.query("SELECT * FROM engram.list(owner => 'alice')", &[]).await);
    assert_eq!(code, "55000");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&list_file);
}

/// Runs a client program against a scratch cluster.
fn scratch_tool(cluster: &ScratchCluster, program: &str, args: &[&str]) -> (bool, String) {
    tool_at(
        &cluster.dir.display().to_string(),
        &cluster.port.to_string(),
        program,
        args,
    )
}

/// A physical backup: pg_basebackup, then WAL archived with archive_command,
/// brings a new cluster back to a named restore point: what was written
/// before it is there (memories, scope lists, tokens that bind), what was
/// written after it is not.
#[tokio::test]
async fn a_base_backup_and_archived_wal_restore_to_a_point_in_time() {
    let primary = ScratchCluster::new("pitr", 66, true);
    let archive = primary.dir.join("archive");
    std::fs::create_dir_all(&archive).unwrap();
    assert!(Command::new("chown")
        .args(["postgres:postgres", &archive.display().to_string()])
        .status()
        .unwrap()
        .success());
    let options = format!(
        "-c shared_preload_libraries=engram -c wal_level=replica -c archive_mode=on -c archive_command='cp %p {}/%f'",
        archive.display()
    );
    assert!(primary.try_start(&options), "the primary did not start");
    let c = primary.connect("postgres").await;
    c.batch_execute(
        "CREATE EXTENSION engram CASCADE;
         SELECT engram.configure(embedding_dims => 3);
         CREATE ROLE pitr_app LOGIN IN ROLE engram_agent;
         SELECT engram.remember(owner => 'alice', content => 'written before the base backup', embedding => '[1, 0, 0]',
                                tags => '{kept}');",
    )
    .await
    .unwrap();
    let token: String = c
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'pitr')", &[])
        .await
        .unwrap()
        .get(0);
    let base = primary.dir.join("base").display().to_string();
    let (ok, out) = scratch_tool(&primary, "pg_basebackup", &["-D", &base, "-c", "fast"]);
    assert!(ok, "pg_basebackup: {out}");
    // (each its own transaction: one batch would commit after the point)
    for sql in [
        "SELECT engram.remember(owner => 'alice', content => 'written after the backup, before the point',
                                embedding => '[0, 1, 0]', tags => '{kept}')",
        "SELECT pg_create_restore_point('engram-before-the-mistake')",
        "SELECT engram.remember(owner => 'alice', content => 'written after the restore point', embedding => '[0, 0, 1]',
                                tags => '{kept}')",
    ] {
        c.batch_execute(sql).await.unwrap();
    }
    let segment: String = c
        .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
        .await
        .unwrap()
        .get(0);
    let mut archived = false;
    for _ in 0..100 {
        archived = archive.join(&segment).exists();
        if archived {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(archived, "{segment} was not archived");
    drop(c);
    primary.stop();

    // The base backup (taken as root's pg_basebackup wrote it: owned by the
    // postgres user), recovering to the named point from the archive.
    let restored = ScratchCluster::new("pitr-restored", 67, false);
    let copied = Command::new("cp")
        .args(["-a", &base, &restored.data()])
        .status()
        .unwrap();
    assert!(copied.success());
    assert!(Command::new("chown")
        .args(["-R", "postgres:postgres", &restored.data()])
        .status()
        .unwrap()
        .success());
    std::fs::write(format!("{}/recovery.signal", restored.data()), "").unwrap();
    let conf = format!(
        "\nrestore_command = 'cp {}/%f %p'\nrecovery_target_name = 'engram-before-the-mistake'\nrecovery_target_action = 'promote'\n",
        archive.display()
    );
    let auto = format!("{}/postgresql.auto.conf", restored.data());
    let mut text = std::fs::read_to_string(&auto).unwrap_or_default();
    text.push_str(&conf);
    std::fs::write(&auto, text).unwrap();
    assert!(
        restored.try_start("-c shared_preload_libraries=engram -c archive_mode=off"),
        "the restored cluster did not start: {}",
        std::fs::read_to_string(restored.dir.join("log")).unwrap_or_default()
    );
    let r = restored.connect("postgres").await;
    let mut promoted = false;
    for _ in 0..200 {
        promoted = !r
            .query_one("SELECT pg_is_in_recovery()", &[])
            .await
            .unwrap()
            .get::<_, bool>(0);
        if promoted {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(promoted, "recovery did not reach the restore point");
    let contents: Vec<String> = column(&r, "SELECT content FROM engram.list(owner => 'alice') ORDER BY content").await;
    assert_eq!(
        contents,
        vec![
            "written after the backup, before the point".to_string(),
            "written before the base backup".to_string()
        ]
    );
    let drift: i64 = r.query_one(LIST_DRIFT, &[]).await.unwrap().get(0);
    assert_eq!(drift, 0);
    let hits: Vec<String> = column(
        &r,
        "SELECT content FROM engram.search(owner => 'alice', query_embedding => '[0, 1, 0]', tags_all => '{kept}', k => 1)",
    )
    .await;
    assert_eq!(hits, vec!["written after the backup, before the point".to_string()]);
    let app = connect_path(
        &restored.dir.display().to_string(),
        &restored.port.to_string(),
        "postgres",
        "pitr_app",
    )
    .await;
    app.batch_execute("BEGIN").await.unwrap();
    app.query_one("SELECT engram.bind($1)", &[&token]).await.unwrap();
    let n: i64 = app
        .query_one("SELECT count(*) FROM engram.memories", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2);
}

/// Restored into a server where engram is not preloaded, nothing wraps
/// the loads: the dumped configuration's row marks the database, and
/// engram refuses to serve it, saying what to do.
#[tokio::test]
async fn a_restore_where_engram_is_not_preloaded_is_refused() {
    let db = TestDb::new(3).await;
    populate(&db.admin, 3, 8).await;
    let file = std::env::temp_dir().join(format!("engram-unloaded-{}", std::process::id()));
    let path = file.display().to_string();
    assert!(pg_tool("pg_dump", &["-Fc", "-f", &path, "-d", &db.name]).0);
    let server = ScratchCluster::new("unloaded", 68, true);
    assert!(server.try_start(""), "the server did not start");
    let (ok, out) = scratch_tool(
        &server,
        "psql",
        &["-X", "-d", "postgres", "-c", "CREATE DATABASE restored"],
    );
    assert!(ok, "{out}");
    let (ok, out) = scratch_tool(&server, "pg_restore", &["-d", "restored", &path]);
    assert!(!ok, "the 3-dimension memories loaded without engram's hook:\n{out}");
    let r = server.connect("restored").await;
    let (code, msg) = sqlstate(r.query("SELECT * FROM engram.list(owner => 'alice')", &[]).await);
    assert_eq!(code, "55000", "{msg}");
    assert!(msg.contains("not preloaded"), "{msg}");
    // pg_restore --jobs: its loads run in sessions that never created the
    // extension (the dumped configuration's row marks the database there)
    let dir = format!("{path}.dir");
    assert!(pg_tool("pg_dump", &["-Fd", "-f", &dir, "-d", &db.name]).0);
    let (ok, out) = scratch_tool(
        &server,
        "psql",
        &["-X", "-d", "postgres", "-c", "CREATE DATABASE restored_jobs"],
    );
    assert!(ok, "{out}");
    let (ok, out) = scratch_tool(&server, "pg_restore", &["--jobs", "2", "-d", "restored_jobs", &dir]);
    assert!(!ok, "{out}");
    let r = server.connect("restored_jobs").await;
    let (code, msg) = sqlstate(r.query("SELECT * FROM engram.list(owner => 'alice')", &[]).await);
    assert_eq!(code, "55000", "{msg}");
    assert!(msg.contains("not preloaded"), "{msg}");
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A superuser's COPY into a new engram database is taken for a restore's
/// first load: engram waits for the rest, and a DBA who filled the database
/// by hand says so (finish_restore(missing_ok => true)).
#[tokio::test]
async fn a_database_filled_by_hand_is_finished_by_the_dba() {
    let (name, admin) = empty_database().await;
    admin.batch_execute("CREATE EXTENSION engram CASCADE").await.unwrap();
    let (ok, out) = pg_tool(
        "psql",
        &[
            "-X",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            &name,
            "-c",
            "COPY engram.slots (owner, label, content) FROM STDIN",
        ],
    );
    assert!(ok, "{out}");
    let (code, _) = sqlstate(admin.query("SELECT * FROM engram.list(owner => 'alice')", &[]).await);
    assert_eq!(code, "55000");
    let (code, msg) = sqlstate(admin.query("SELECT engram.finish_restore()", &[]).await);
    assert_eq!(code, "55000");
    assert!(msg.contains("no data was loaded into audit_log"), "{msg}");
    admin
        .query_one("SELECT engram.finish_restore(missing_ok => true)", &[])
        .await
        .unwrap();
    let n = admin
        .query("SELECT * FROM engram.list(owner => 'alice')", &[])
        .await
        .unwrap();
    assert!(n.is_empty());
}
