//! engram on a real Citus cluster (docs/SCALING.md): a coordinator and two
//! workers that `scripts/test` starts with scripts/citus-lib.sh and engram
//! distributed in the database `ENGRAM_CITUS_DB`. The tests are `#[ignore]`d
//! in the single-node run and run by the test command's Citus stage
//! (`cargo test --test citus -- --ignored`), which says so when Citus is not
//! available rather than passing silently.
//!
//! Environment (set by scripts/test): ENGRAM_CITUS_HOST / ENGRAM_CITUS_PORT
//! (the coordinator's socket directory and port), ENGRAM_CITUS_WORKERS
//! (`dir:port,dir:port`), ENGRAM_CITUS_DB.

use engram_tests::*;
use tokio_postgres::Client;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: the Citus stage of scripts/test sets it"))
}

async fn connect_node(host: &str, port: &str, user: &str) -> Client {
    connect_path(host, port, &env("ENGRAM_CITUS_DB"), user).await
}

async fn coordinator(user: &str) -> Client {
    connect_node(&env("ENGRAM_CITUS_HOST"), &env("ENGRAM_CITUS_PORT"), user).await
}

/// (socket directory, port) of each worker.
fn workers() -> Vec<(String, String)> {
    env("ENGRAM_CITUS_WORKERS")
        .split(',')
        .map(|w| {
            let (host, port) = w.rsplit_once(':').expect("dir:port");
            (host.to_string(), port.to_string())
        })
        .collect()
}

/// The port of the worker that holds `owner`'s shard of engram.memories.
async fn worker_of(c: &Client, owner: &str) -> i32 {
    c.query_one(
        "SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
         WHERE p.shardid = get_shard_id_for_distribution_column('engram.memories', $1::text)",
        &[&owner],
    )
    .await
    .expect("worker of owner")
    .get(0)
}

/// Two owner names, unique to this test run and `tag`, that live on
/// different workers.
async fn owners_on_both_workers(c: &Client, tag: &str) -> (String, String) {
    let first = format!("{tag}-{}-0", std::process::id());
    let home = worker_of(c, &first).await;
    for i in 1..200 {
        let other = format!("{tag}-{}-{i}", std::process::id());
        if worker_of(c, &other).await != home {
            return (first, other);
        }
    }
    panic!("200 owners hashed to one worker: is the second worker in pg_dist_node?");
}

/// A memory written as a DBA writes by hand (raw DML, no API), so that the
/// derived rows come from the triggers alone.
async fn insert_raw(c: &Client, owner: &str, content: &str, tags: &[&str], emb: &str) {
    let tags: Vec<String> = tags.iter().map(|t| t.to_string()).collect();
    c.execute(
        &format!(
            "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, embedding)
             VALUES ($1, $2, sha256(convert_to($2, 'UTF8')), sha256(convert_to($1 || $2, 'UTF8')), $3, '{emb}')"
        ),
        &[&owner, &content, &tags],
    )
    .await
    .unwrap_or_else(|e| panic!("insert for {owner}: {:?}", e.as_db_error()));
}

#[tokio::test]
#[ignore = "needs the Citus cluster of scripts/test's Citus stage"]
async fn citus_distribute_placed_every_table_by_owner_and_is_idempotent() {
    let c = coordinator("postgres").await;
    let distributed: Vec<String> = column(&c, "SELECT unnest(engram._distributed_tables())").await;
    let reference: Vec<String> = column(&c, "SELECT unnest(engram._reference_tables())").await;
    // Every owner-scoped table is hash-distributed by owner in the
    // co-location group of engram.memories; the global ones are reference
    // tables.
    let placed: Vec<(String, String)> = pairs(
        &c,
        "SELECT p.logicalrelid::regclass::text,
                p.partmethod::text || '/' || coalesce(column_to_column_name(p.logicalrelid, p.partkey), '') || '/'
                || (p.colocationid = (SELECT colocationid FROM pg_dist_partition
                                      WHERE logicalrelid = 'engram.memories'::regclass))::text
         FROM pg_dist_partition p WHERE p.logicalrelid::regclass::text LIKE 'engram.%' ORDER BY 1",
    )
    .await;
    for t in &distributed {
        let want = (format!("engram.{t}"), "h/owner/true".to_string());
        assert!(
            placed.contains(&want),
            "{t} is not distributed by owner with memories: {placed:?}"
        );
    }
    for t in &reference {
        assert!(
            placed
                .iter()
                .any(|(n, how)| n == &format!("engram.{t}") && how.starts_with("n/")),
            "{t} is not a reference table: {placed:?}"
        );
    }
    assert_eq!(placed.len(), distributed.len() + reference.len(), "{placed:?}");
    // A second run does nothing and says so.
    let again: String = c.query_one("SELECT engram.distribute()", &[]).await.unwrap().get(0);
    assert!(again.contains("already distributed"), "{again}");
    // The workers have engram (Citus created it there) at the coordinator's version.
    let version = extversion(&c).await;
    for (host, port) in workers() {
        let w = connect_node(&host, &port, "postgres").await;
        assert_eq!(extversion(&w).await, version, "engram on worker {port}");
    }
}

/// Each owner's rows live on one worker, and the row triggers keep the
/// derived rows (scope lists, usage counters) on the shards, equal to a
/// recomputation, for writes and deletes made by hand on the coordinator.
#[tokio::test]
#[ignore = "needs the Citus cluster of scripts/test's Citus stage"]
async fn citus_owners_live_on_one_worker_each_and_triggers_keep_their_derived_rows() {
    let c = coordinator("postgres").await;
    let (a, b) = owners_on_both_workers(&c, "place").await;
    assert_ne!(worker_of(&c, &a).await, worker_of(&c, &b).await);
    let dims: i32 = c.query_one("SELECT engram._dims()", &[]).await.unwrap().get(0);
    let emb = |i: usize| {
        let mut v = vec!["0".to_string(); dims as usize];
        v[i % dims as usize] = "1".into();
        format!("[{}]", v.join(","))
    };
    for (i, owner) in [&a, &b].into_iter().enumerate() {
        insert_raw(&c, owner, "tea at home", &["drinks", "home"], &emb(i)).await;
        insert_raw(&c, owner, "chess on sunday", &["games"], &emb(i + 1)).await;
        insert_raw(&c, owner, "old flat", &["home"], &emb(i + 2)).await;
    }
    c.execute(
        "UPDATE engram.memories SET tags = '{games,home}' WHERE owner = $1 AND content = 'chess on sunday'",
        &[&a],
    )
    .await
    .unwrap();
    c.execute(
        "DELETE FROM engram.memories WHERE owner = $1 AND content = 'old flat'",
        &[&b],
    )
    .await
    .unwrap();
    for (owner, memories) in [(&a, 3i64), (&b, 2i64)] {
        // Every row of the owner, in every co-located table, on one worker.
        let nodes: Vec<i32> = c
            .query(
                "SELECT DISTINCT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
                 WHERE p.shardid IN (SELECT get_shard_id_for_distribution_column(t, $1::text)
                                     FROM unnest(ARRAY['engram.memories', 'engram.scope_entries',
                                                       'engram.scope_sizes', 'engram.owner_locks']::regclass[]) t)",
                &[owner],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(nodes.len(), 1, "{owner}: {nodes:?}");
        let stored: i64 = c
            .query_one("SELECT memories FROM engram.owner_locks WHERE owner = $1", &[owner])
            .await
            .unwrap()
            .get(0);
        assert_eq!(stored, memories, "usage counter of {owner}");
        let (kept, recomputed): (i64, i64) = {
            let r = c
                .query_one(
                    "SELECT (SELECT count(*) FROM engram.scope_entries e WHERE e.owner = $1),
                            (SELECT sum(cardinality(engram._list_keys(m.internal_type, m.tags)))::bigint
                             FROM engram.memories m
                             WHERE m.owner = $1 AND m.status = 'active' AND m.embedding IS NOT NULL)",
                    &[owner],
                )
                .await
                .unwrap();
            (r.get(0), r.get(1))
        };
        assert_eq!(kept, recomputed, "scope entries of {owner}");
        assert!(kept > 0);
        let sizes_ok: bool = c
            .query_one(
                "SELECT coalesce(bool_and(z.n = (SELECT count(*) FROM engram.scope_entries e
                                                 WHERE e.owner = z.owner AND e.list = z.list)), false)
                 FROM engram.scope_sizes z WHERE z.owner = $1",
                &[owner],
            )
            .await
            .unwrap()
            .get(0);
        assert!(sizes_ok, "scope sizes of {owner}");
    }
}

/// The restricted role connecting to a worker directly reads and writes
/// nothing: no binding there, engram.owner cannot be set, writes are
/// refused, and the shards it could name are under the same policies.
#[tokio::test]
#[ignore = "needs the Citus cluster of scripts/test's Citus stage"]
async fn citus_a_restricted_role_on_a_worker_reads_and_writes_nothing() {
    let c = coordinator("postgres").await;
    let (a, b) = owners_on_both_workers(&c, "direct").await;
    let dims: i32 = c.query_one("SELECT engram._dims()", &[]).await.unwrap().get(0);
    let emb = format!("[1{}]", ",0".repeat(dims as usize - 1));
    insert_raw(&c, &a, "a secret of a", &["x"], &emb).await;
    insert_raw(&c, &b, "a secret of b", &["x"], &emb).await;
    for (host, port) in workers() {
        let w = connect_node(&host, &port, "engram_app").await;
        for t in ["memories", "scope_entries", "audit_log", "owner_locks", "tokens"] {
            let r = w
                .query_one(
                    &format!("SELECT count(*) FROM engram.{t} WHERE owner IN ($1, $2)"),
                    &[&a, &b],
                )
                .await;
            match r {
                Ok(row) => assert_eq!(row.get::<_, i64>(0), 0, "engram_app read {t} on worker {port}"),
                Err(e) => assert_eq!(e.code().map(|s| s.code()), Some("42501"), "{t} on {port}: {e}"),
            }
        }
        // The shards themselves (engram.memories_<shardid>) are as closed.
        // (Citus hides shards from pg_class unless told otherwise.)
        let admin = connect_node(&host, &port, "postgres").await;
        admin
            .batch_execute("SET citus.override_table_visibility = off")
            .await
            .unwrap();
        let shards: Vec<String> = column(
            &admin,
            "SELECT c.oid::regclass::text FROM pg_class c
             WHERE c.relnamespace = 'engram'::regnamespace AND c.relname ~ '^memories_[0-9]+$'",
        )
        .await;
        assert!(!shards.is_empty(), "worker {port} holds shards of memories");
        for s in &shards {
            match w.query_one(&format!("SELECT count(*) FROM {s}"), &[]).await {
                Ok(row) => assert_eq!(row.get::<_, i64>(0), 0, "engram_app read shard {s} on {port}"),
                Err(e) => assert_eq!(e.code().map(|s| s.code()), Some("42501"), "{s} on {port}: {e}"),
            }
        }
        let (code, msg) = sqlstate(w.batch_execute(&format!("SET engram.owner = '{a}'")).await);
        assert_eq!(code, "42501", "{msg}");
        let (code, msg) = sqlstate(
            w.execute(
                "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key) VALUES ($1, 'x', '\\x00', '\\x00')",
                &[&a],
            )
            .await,
        );
        assert_eq!(code, "42501", "{msg}");
        for s in &shards {
            let (code, msg) = sqlstate(w.execute(&format!("DELETE FROM {s}"), &[]).await);
            assert_eq!(code, "42501", "{s}: {msg}");
        }
    }
    let left: i64 = c
        .query_one(
            "SELECT count(*) FROM engram.memories WHERE owner IN ($1, $2)",
            &[&a, &b],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 2);
}

/// A restricted role bound with its token on the coordinator reads its own
/// rows through row-level security on the workers (the binding's signed
/// proof travels with the transaction), never another owner's; on a worker,
/// a proof it signs itself, with everything a token holder knows, is worth
/// nothing.
#[tokio::test]
#[ignore = "needs the Citus cluster of scripts/test's Citus stage"]
async fn citus_a_bound_role_reads_its_rows_on_every_worker_and_cannot_forge_a_binding() {
    let c = coordinator("postgres").await;
    let (a, b) = owners_on_both_workers(&c, "bound").await;
    let dims: i32 = c.query_one("SELECT engram._dims()", &[]).await.unwrap().get(0);
    let emb = format!("[1{}]", ",0".repeat(dims as usize - 1));
    insert_raw(&c, &a, "first of a", &["x"], &emb).await;
    insert_raw(&c, &a, "second of a", &["y"], &emb).await;
    insert_raw(&c, &b, "secret of b", &["x"], &emb).await;
    let token: String = c
        .query_one("SELECT engram.create_token(owner => $1, label => 'citus test')", &[&a])
        .await
        .unwrap()
        .get(0);
    let app = coordinator("engram_app").await;
    let count = |sql: &'static str| {
        let app = &app;
        async move { app.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    // Unbound: nothing.
    assert_eq!(count("SELECT count(*) FROM engram.memories").await, 0);
    app.batch_execute("BEGIN").await.unwrap();
    app.query_one("SELECT engram.bind($1)", &[&token]).await.unwrap();
    let mine: i64 = app
        .query_one("SELECT count(*) FROM engram.memories WHERE owner = $1", &[&a])
        .await
        .unwrap()
        .get(0);
    let theirs: i64 = app
        .query_one("SELECT count(*) FROM engram.memories WHERE owner = $1", &[&b])
        .await
        .unwrap()
        .get(0);
    let all = count("SELECT count(*) FROM engram.memories").await;
    app.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        (mine, theirs, all),
        (2, 0, 2),
        "bound to {a}: its own rows, on its worker, and no one else's"
    );
    // The next transaction is unbound again.
    assert_eq!(count("SELECT count(*) FROM engram.memories").await, 0);

    // On a worker: a proof signed with the token's hash (all a token holder
    // can compute) for the owner on the other worker, and for its own.
    let id: String = c
        .query_one(
            "SELECT id::text FROM engram.tokens WHERE label = 'citus test' AND owner = $1",
            &[&a],
        )
        .await
        .unwrap()
        .get(0);
    for (host, port) in workers() {
        let w = connect_node(&host, &port, "engram_app").await;
        let (code, msg) = sqlstate(
            w.query_one("SELECT engram._sign_binding('x', 'y', false, 0, '\\x00')", &[])
                .await,
        );
        assert_eq!(code, "42501", "the signing function is the extension's own: {msg}");
        for claimed in [&a, &b] {
            let forged = forge(&id, claimed, &token);
            w.batch_execute("BEGIN").await.unwrap();
            w.execute("SELECT set_config('engram.remote_binding', $1, true)", &[&forged])
                .await
                .unwrap();
            let seen: i64 = w
                .query_one(
                    "SELECT count(*) FROM engram.memories WHERE owner IN ($1, $2)",
                    &[&a, &b],
                )
                .await
                .unwrap()
                .get(0);
            w.batch_execute("ROLLBACK").await.unwrap();
            assert_eq!(seen, 0, "a self-signed proof for {claimed} on worker {port}");
        }
    }
}

/// A proof as engram.bind writes it, signed with the key a token holder can
/// compute (the token's sha256), not the database's secret.
fn forge(token_id: &str, owner: &str, token: &str) -> String {
    use sha2::Digest;
    let key = sha2::Sha256::digest(token.as_bytes());
    let claim = engram_core::binding_proof::Claim {
        token_id: token_id.to_string(),
        owner: owner.to_string(),
        internal: false,
        expires: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            + 300,
    };
    engram_core::binding_proof::sign(&claim, &key)
}

/// A worker stopped: calls for the owners it holds fail with a
/// connection-class error (08xxx, retryable) and write nothing, while the
/// owners on the other worker keep working, token-bound; once the worker is
/// back, its owners' data is as it was. (Stops a node: scripts/test runs
/// this binary's tests one at a time.)
#[tokio::test]
#[ignore = "needs the Citus cluster of scripts/test's Citus stage"]
async fn citus_a_stopped_worker_fails_its_owners_retryably_and_spares_the_others() {
    let c = coordinator("postgres").await;
    let (down, up) = owners_on_both_workers(&c, "failover").await;
    let dims: i32 = c.query_one("SELECT engram._dims()", &[]).await.unwrap().get(0);
    let emb = |i: usize| {
        let mut v = vec!["0".to_string(); dims as usize];
        v[i % dims as usize] = "1".into();
        format!("[{}]", v.join(","))
    };
    for owner in [&down, &up] {
        c.query(
            &format!(
                "SELECT * FROM engram.remember(owner => $1, content => 'kept before', embedding => '{}')",
                emb(0)
            ),
            &[owner],
        )
        .await
        .unwrap();
    }
    let token: String = c
        .query_one("SELECT engram.create_token(owner => $1, label => 'failover')", &[&up])
        .await
        .unwrap()
        .get(0);
    let port = worker_of(&c, &down).await;
    let (host, _) = workers()
        .into_iter()
        .find(|(_, p)| p.parse::<i32>().ok() == Some(port))
        .expect("the worker of the owner");
    let data = std::path::Path::new(&host).parent().unwrap().join("pgdata");
    let data = data.to_str().unwrap();
    pg_ctl(&["-D", data, "-w", "-m", "fast", "stop"]);
    // Started again however the checks below end.
    let _restart = Restart(data.to_string());
    {
        // The stopped worker's owner: a retryable, connection-class error.
        let r = c
            .query(
                &format!(
                    "SELECT * FROM engram.remember(owner => $1, content => 'while down', embedding => '{}')",
                    emb(1)
                ),
                &[&down],
            )
            .await;
        let e = r.expect_err("a write for an owner on a stopped worker must fail");
        let code = e.code().map(|s| s.code().to_string()).unwrap_or_default();
        assert!(
            code.starts_with("08"),
            "want a connection-class SQLSTATE, got {code}: {e:?}"
        );
        // The other worker's owner, through a token binding: unaffected.
        let app = coordinator("engram_app").await;
        app.batch_execute("BEGIN").await.unwrap();
        app.query_one("SELECT engram.bind($1)", &[&token]).await.unwrap();
        app.query(
            &format!(
                "SELECT * FROM engram.remember(content => 'while the other is down', embedding => '{}')",
                emb(2)
            ),
            &[],
        )
        .await
        .unwrap();
        let found: i64 = app
            .query_one(
                &format!(
                    "SELECT count(*) FROM engram.search(query_embedding => '{}', k => 10)",
                    emb(2)
                ),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        app.batch_execute("COMMIT").await.unwrap();
        assert_eq!(found, 2, "the live worker's owner searches its two memories");
    }
    drop(_restart);
    // Back: the failed write left nothing, the kept memory is there.
    let contents: Vec<String> = c
        .query(
            "SELECT content FROM engram.memories WHERE owner = $1 ORDER BY content",
            &[&down],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(contents, vec!["kept before".to_string()]);
}

fn pg_ctl(args: &[&str]) {
    let out = std::process::Command::new("runuser")
        .args(["-u", "postgres", "--", &engram_tests::pg_bin("pg_ctl")])
        .args(args)
        .output()
        .expect("runuser pg_ctl");
    assert!(
        out.status.success(),
        "pg_ctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts the stopped node (its data directory) again when dropped.
struct Restart(String);

impl Drop for Restart {
    fn drop(&mut self) {
        let log = std::path::Path::new(&self.0).parent().unwrap().join("postgres.log");
        pg_ctl(&["-D", &self.0, "-w", "-l", log.to_str().unwrap(), "start"]);
    }
}

/// `name`, new and empty (CREATE DATABASE cannot share a transaction with
/// the DROP).
async fn recreate_database(root: &Client, name: &str) {
    for sql in [
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        format!("CREATE DATABASE {name}"),
    ] {
        root.batch_execute(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {:?}", e.as_db_error()));
    }
}

/// `name` on the node at `host:port`, new and empty but for citus: what a
/// DBA prepares on each node.
async fn database_with_citus(host: &str, port: &str, name: &str) {
    let root = connect_path(host, port, "postgres", "postgres").await;
    recreate_database(&root, name).await;
    connect_path(host, port, name, "postgres")
        .await
        .batch_execute("CREATE EXTENSION citus")
        .await
        .unwrap();
}

/// A new database on every node with citus, the coordinator's host set and
/// `workers` added: what a DBA has before `CREATE EXTENSION engram`.
async fn citus_database(tag: &str, workers: &[(String, String)]) -> (String, Client) {
    let name = format!("{tag}_{}", std::process::id());
    let coordinator = (env("ENGRAM_CITUS_HOST"), env("ENGRAM_CITUS_PORT"));
    for (host, port) in workers.iter().chain([&coordinator]) {
        database_with_citus(host, port, &name).await;
    }
    let c = connect_path(&coordinator.0, &coordinator.1, &name, "postgres").await;
    let port = |p: &str| p.parse::<i32>().expect("port");
    c.execute(
        "SELECT citus_set_coordinator_host($1, $2)",
        &[&coordinator.0, &port(&coordinator.1)],
    )
    .await
    .unwrap();
    for (host, p) in workers {
        c.execute("SELECT citus_add_node($1, $2)", &[host, &port(p)])
            .await
            .unwrap_or_else(|e| panic!("citus_add_node {host}:{p}: {e:?}"));
    }
    (name, c)
}

/// The release before this one: the source version of the upgrade script
/// to CARGO_PKG_VERSION in sql/.
fn previous_version() -> String {
    let want = format!("--{}.sql", env!("CARGO_PKG_VERSION"));
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../sql");
    std::fs::read_dir(dir)
        .expect("sql/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find_map(|f| f.strip_suffix(&want)?.strip_prefix("engram--").map(str::to_string))
        .unwrap_or_else(|| panic!("no sql/engram--<previous>{want}"))
}

/// What owners' memories look like: each owner's search results in rank
/// order, then its revisions, audit rows and scope list entries, one line
/// per owner. (The search is a statement of its own: on Citus, engram's
/// functions are called at the top of a statement, docs/SCALING.md.)
async fn owners_view(c: &Client, owners: &[&str], probe: &str) -> Vec<String> {
    let mut out = Vec::new();
    for owner in owners {
        let found: Vec<String> = c
            .query(
                &format!(
                    "SELECT id || '/' || content FROM engram.search(owner => $1, query_embedding => '{probe}', k => 20)"
                ),
                &[owner],
            )
            .await
            .unwrap_or_else(|e| panic!("search of {owner}: {:?}", e.as_db_error()))
            .iter()
            .map(|r| r.get(0))
            .collect();
        let row = c
            .query_one(
                "SELECT (SELECT count(*) FROM engram.revisions r WHERE r.owner = $1),
                        (SELECT count(*) FROM engram.audit_log a WHERE a.owner = $1),
                        (SELECT count(*) FROM engram.scope_entries e WHERE e.owner = $1)",
                &[owner],
            )
            .await
            .unwrap_or_else(|e| panic!("rows of {owner}: {:?}", e.as_db_error()));
        out.push(format!(
            "{owner}: {} | revisions {} | audit {} | list entries {}",
            found.join(","),
            row.get::<_, i64>(0),
            row.get::<_, i64>(1),
            row.get::<_, i64>(2)
        ));
    }
    out
}

/// Memories, an update (a revision) and a forget for each owner, written
/// through engram's functions on the coordinator.
async fn populate(c: &Client, owners: &[&str], dims: usize) {
    let emb = |i: usize| {
        let mut v = vec!["0".to_string(); dims];
        v[i % dims] = "1".into();
        v[(i + 1) % dims] = "0.5".into();
        format!("[{}]", v.join(","))
    };
    for (n, owner) in owners.iter().enumerate() {
        let mut ids = Vec::new();
        for i in 0..6 {
            let id: uuid::Uuid = c
                .query_one(
                    &format!(
                        "SELECT id FROM engram.remember(owner => $1, content => $2, tags => '{{t{}}}',
                                                        embedding => '{}', force => true)",
                        i % 3,
                        emb(n + i)
                    ),
                    &[owner, &format!("fact {i} of {owner}")],
                )
                .await
                .unwrap_or_else(|e| panic!("remember for {owner}: {e:?}"))
                .get(0);
            ids.push(id);
        }
        c.execute(
            &format!(
                "SELECT engram.update(owner => $1, id => $2, content => 'fact 0, corrected',
                                      embedding => '{}', reason => 'test')",
                emb(n + 7)
            ),
            &[owner, &ids[0]],
        )
        .await
        .unwrap();
        c.execute("SELECT engram.forget(owner => $1, id => $2)", &[owner, &ids[5]])
            .await
            .unwrap();
    }
}

/// `ALTER EXTENSION engram UPDATE` on the coordinator updates the workers
/// too (Citus propagates it), and a database populated under the previous
/// release then distributes with nothing lost: the path of a user who
/// upgrades engram and then scales out.
#[tokio::test]
#[ignore = "needs the Citus cluster of scripts/test's Citus stage"]
async fn citus_alter_extension_update_on_the_coordinator_updates_the_workers() {
    let previous = previous_version();
    let (name, c) = citus_database("upd", &workers()).await;
    c.batch_execute(&format!("CREATE EXTENSION engram VERSION '{previous}' CASCADE"))
        .await
        .unwrap_or_else(|e| panic!("install {previous}: {e:?}"));
    for (host, port) in workers() {
        let w = connect_path(&host, &port, &name, "postgres").await;
        assert_eq!(
            extversion(&w).await,
            previous,
            "Citus created engram {previous} on {port}"
        );
    }
    let dims: i32 = c.query_one("SELECT engram._dims()", &[]).await.unwrap().get(0);
    let owners = ["upd-alice", "upd-bob", "upd-carol"];
    populate(&c, &owners, dims as usize).await;
    let probe = format!("[1{}]", ",0".repeat(dims as usize - 1));
    let before = owners_view(&c, &owners, &probe).await;

    c.batch_execute("ALTER EXTENSION engram UPDATE")
        .await
        .expect("ALTER EXTENSION engram UPDATE on the coordinator");
    assert_eq!(extversion(&c).await, env!("CARGO_PKG_VERSION"));
    let want = catalog(&c).await;
    for (host, port) in workers() {
        let w = connect_path(&host, &port, &name, "postgres").await;
        assert_eq!(
            extversion(&w).await,
            env!("CARGO_PKG_VERSION"),
            "engram on worker {port}"
        );
        assert!(
            catalog(&w).await == want,
            "worker {port}'s engram differs from the coordinator's"
        );
    }
    assert_eq!(
        owners_view(&c, &owners, &probe).await,
        before,
        "the update changed data"
    );

    let said: String = c
        .query_one("SELECT engram.distribute(shard_count => 4)", &[])
        .await
        .expect("distribute after the update")
        .get(0);
    assert!(said.contains("distributed"), "{said}");
    assert_eq!(
        owners_view(&c, &owners, &probe).await,
        before,
        "distributing changed what the owners see"
    );
    // A hybrid search there reads the text leg over the scope's matching
    // rows (the text index's statistics are not read on a distributed store).
    for owner in &owners {
        let found: Vec<String> = c
            .query(
                &format!(
                    "SELECT content FROM engram.search(owner => $1, query_embedding => '{probe}',
                                                       query_text => 'fact', k => 5)"
                ),
                &[owner],
            )
            .await
            .unwrap_or_else(|e| panic!("hybrid search of {owner}: {:?}", e.as_db_error()))
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert!(
            !found.is_empty() && found.iter().all(|f| f.contains("fact")),
            "{owner}: {found:?}"
        );
    }
    // Writes go on as before, on the owner's worker.
    populate(&c, &["upd-dave"], dims as usize).await;
    assert_eq!(owners_view(&c, &["upd-dave"], &probe).await.len(), 1);
}

/// A third worker added and `citus_rebalance_start()` run: shards move to
/// it, and each owner's memories, revisions, audit and search results are
/// what they were; the owners it now holds keep working, token-bound too
/// (engram.distribute() run again gives the new worker the settings bindings
/// need). Uses the spare node scripts/test starts (ENGRAM_CITUS_SPARE), in a
/// database of its own, so the other tests' cluster keeps its two workers.
#[tokio::test]
#[ignore = "needs the Citus cluster of scripts/test's Citus stage"]
async fn citus_a_third_worker_and_rebalancing_lose_nothing() {
    let spare = env("ENGRAM_CITUS_SPARE");
    let (spare_host, spare_port) = spare.rsplit_once(':').expect("dir:port");
    let (spare_host, spare_port) = (spare_host.to_string(), spare_port.to_string());
    let (name, c) = citus_database("rebal", &workers()).await;
    // The spare gets the database and citus, as a DBA prepares a new node.
    database_with_citus(&spare_host, &spare_port, &name).await;
    c.batch_execute("CREATE EXTENSION engram CASCADE").await.unwrap();
    c.query_one("SELECT engram.distribute(shard_count => 6)", &[])
        .await
        .expect("distribute");
    let dims: i32 = c.query_one("SELECT engram._dims()", &[]).await.unwrap().get(0);
    let owners: Vec<String> = (0..12).map(|i| format!("rebal-{i}")).collect();
    let owners: Vec<&str> = owners.iter().map(String::as_str).collect();
    populate(&c, &owners, dims as usize).await;
    let probe = format!("[1{}]", ",0".repeat(dims as usize - 1));
    let before = owners_view(&c, &owners, &probe).await;

    // The application's login role, created through this database's
    // coordinator as a DBA does: Citus records it and creates it on the new
    // node too. (engram_app of the other tests was made in another
    // database of the test cluster, so citus_add_node here would not copy it.)
    let role = format!("rebal_app_{}", std::process::id());
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN IN ROLE engram_agent"
    ))
    .await
    .expect("the application's role");
    let spare_port_i: i32 = spare_port.parse().unwrap();
    c.execute("SELECT citus_add_node($1, $2)", &[&spare_host, &spare_port_i])
        .await
        .expect("citus_add_node of the third worker");
    c.query_one("SELECT engram.distribute()", &[])
        .await
        .expect("distribute again for the new worker's settings");
    // Two statements: one query string is one transaction, and the job
    // citus_rebalance_start() queues is invisible to the background
    // executor (and the wait endless) until that transaction commits.
    c.batch_execute("SELECT citus_rebalance_start(shard_transfer_mode => 'block_writes')")
        .await
        .expect("rebalance start");
    c.batch_execute("SELECT citus_rebalance_wait()")
        .await
        .expect("rebalance wait");
    let moved: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
             JOIN pg_dist_shard s ON s.shardid = p.shardid
             WHERE n.nodeport = $1 AND s.logicalrelid = 'engram.memories'::regclass",
            &[&spare_port_i],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        moved > 0,
        "the rebalance moved no shard of memories to the third worker"
    );
    assert_eq!(
        owners_view(&c, &owners, &probe).await,
        before,
        "the rebalance changed data"
    );

    // An owner now on the third worker, bound with its token as the
    // restricted role: its memories, and a new one.
    let mut on_spare = None;
    for owner in &owners {
        if worker_of(&c, owner).await == spare_port_i {
            on_spare = Some(owner.to_string());
            break;
        }
    }
    let owner = on_spare.expect("one of 12 owners on the third worker");
    let token: String = c
        .query_one(
            "SELECT engram.create_token(owner => $1, label => 'rebalanced')",
            &[&owner],
        )
        .await
        .unwrap()
        .get(0);
    let app = connect_path(&env("ENGRAM_CITUS_HOST"), &env("ENGRAM_CITUS_PORT"), &name, &role).await;
    app.batch_execute("BEGIN").await.unwrap();
    app.query_one("SELECT engram.bind($1)", &[&token]).await.unwrap();
    app.query(
        &format!("SELECT * FROM engram.remember(content => 'after the move', embedding => '{probe}')"),
        &[],
    )
    .await
    .expect("remember on the third worker");
    // A new transaction: a direct read after a definer's write in the same
    // one is Citus's 25001 (docs/SCALING.md, "Limits").
    app.batch_execute("COMMIT").await.unwrap();
    app.batch_execute("BEGIN").await.unwrap();
    app.query_one("SELECT engram.bind($1)", &[&token]).await.unwrap();
    let seen: i64 = app
        .query_one("SELECT count(*) FROM engram.memories", &[])
        .await
        .unwrap()
        .get(0);
    let found: i64 = app
        .query_one(
            &format!("SELECT count(*) FROM engram.search(query_embedding => '{probe}', k => 20)"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    app.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        (seen, found),
        (7, 6),
        "{owner}: 6 memories (one forgotten) plus the new one"
    );
}
