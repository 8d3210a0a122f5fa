//! Harness for engram's integration tests: every test gets its own database,
//! cloned from `engram_template` (engram + pgvector installed) in the
//! throwaway cluster that `scripts/test` starts, and talks SQL to it over a
//! real connection, as a superuser or as the restricted `engram_app` role.

use std::sync::atomic::{AtomicUsize, Ordering};
pub use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row};
pub use uuid::Uuid;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the integration tests through scripts/test, which starts the test cluster")
    })
}

async fn connect(db: &str, user: &str) -> Client {
    connect_at("ENGRAM_TEST", db, user).await
}

/// A connection to the cluster whose socket directory and port are in
/// `{prefix}_HOST` and `{prefix}_PORT`.
async fn connect_at(prefix: &str, db: &str, user: &str) -> Client {
    connect_path(
        &env(&format!("{prefix}_HOST")),
        &env(&format!("{prefix}_PORT")),
        db,
        user,
    )
    .await
}

/// A fresh database with the engram extension.
pub struct TestDb {
    pub name: String,
    /// Connected as the `postgres` superuser (RLS does not apply).
    pub admin: Client,
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

impl TestDb {
    /// A new database cloned from the template, with `dims`-dimension embeddings.
    pub async fn new(dims: i32) -> TestDb {
        let name = format!("t_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst));
        // Citus mode (the Citus stage of scripts/test): the template exists
        // on every node, distributed, and each node copies its own part of
        // it under the same name, so that the copy is a distributed database
        // whose coordinator reaches the workers' copies.
        for (host, port) in citus_workers() {
            let worker = connect_path(&host, &port, "postgres", "postgres").await;
            create_from_template(&worker, &name).await;
        }
        let root = connect("postgres", "postgres").await;
        create_from_template(&root, &name).await;
        let admin = connect(&name, "postgres").await;
        if on_citus() {
            // The copy has the distributed tables, but not the database's
            // settings (they belong to the template's oid): distribute()
            // applies them again, and new connections get them.
            admin
                .query_one("SELECT engram.distribute()", &[])
                .await
                .expect("distribute the copy");
        }
        let admin = connect(&name, "postgres").await;
        admin
            .execute("SELECT engram.configure(embedding_dims => $1)", &[&dims])
            .await
            .expect("configure");
        TestDb { name, admin }
    }

    /// A new token (plaintext) for `owner`, minted by the superuser.
    pub async fn token(&self, owner: &str, platform: bool) -> String {
        self.admin
            .query_one(
                "SELECT engram.create_token(owner => $1, label => 'test', platform => $2)",
                &[&owner, &platform],
            )
            .await
            .expect("create_token")
            .get(0)
    }

    /// The restricted login role `engram_app` (granted engram_agent) with a
    /// user token of `owner`: every statement runs in its own transaction,
    /// bound with engram.bind, as engram-mcp does.
    pub async fn agent(&self, owner: &str) -> Agent {
        let token = self.token(owner, false).await;
        Agent {
            client: connect(&self.name, "engram_app").await,
            bind: "SELECT engram.bind($1)".into(),
            args: vec![token],
        }
    }

    /// As `agent`, but with a platform token of `platform_owner` bound with
    /// extra engram.bind arguments, e.g. `act_as => $2, internal_type => $3`
    /// (`args` are $2...).
    pub async fn platform_agent(&self, platform_owner: &str, bind_extra: &str, args: &[&str]) -> Agent {
        let token = self.token(platform_owner, true).await;
        let mut all = vec![token];
        all.extend(args.iter().map(|a| a.to_string()));
        Agent {
            client: connect(&self.name, "engram_app").await,
            bind: format!("SELECT engram.bind($1, {bind_extra})"),
            args: all,
        }
    }

    /// A connection as `engram_app` with no engram.owner set.
    pub async fn agent_without_owner(&self) -> Client {
        connect(&self.name, "engram_app").await
    }

    /// Another superuser connection (e.g. for concurrency tests).
    pub async fn admin_connection(&self) -> Client {
        connect(&self.name, "postgres").await
    }
}

/// CREATE DATABASE `name` TEMPLATE engram_template. It fails while anyone
/// else is copying the same template; retry briefly instead of serialising
/// all tests.
async fn create_from_template(root: &Client, name: &str) {
    let mut tries = 0;
    loop {
        match root
            .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE engram_template"))
            .await
        {
            Ok(()) => return,
            Err(_) if tries < 100 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => panic!("create database {name}: {e:?}"),
        }
    }
}

/// The workers of the Citus cluster the tests run against
/// (ENGRAM_TEST_CITUS_WORKERS, `dir:port,dir:port`), none on one node.
pub fn citus_workers() -> Vec<(String, String)> {
    std::env::var("ENGRAM_TEST_CITUS_WORKERS")
        .map(|w| {
            w.split(',')
                .filter(|x| !x.is_empty())
                .map(|x| {
                    let (host, port) = x.rsplit_once(':').expect("dir:port");
                    (host.to_string(), port.to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the tests run against a Citus coordinator.
pub fn on_citus() -> bool {
    !citus_workers().is_empty()
}

/// A connection to `db` as `user` on the cluster at socket directory `host`.
pub async fn connect_path(host: &str, port: &str, db: &str, user: &str) -> Client {
    let mut config = tokio_postgres::Config::new();
    config
        .host_path(host)
        .port(port.parse().expect("a port number"))
        .user(user)
        .dbname(db);
    let (client, conn) = config
        .connect(NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to {db} as {user} at {host}:{port}: {e:?}"));
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// A database without engram, for installing a chosen version.
pub async fn empty_database() -> (String, Client) {
    let name = format!("e_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst));
    let root = connect("postgres", "postgres").await;
    root.batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap_or_else(|e| panic!("create database {name}: {e:?}"));
    let admin = connect(&name, "postgres").await;
    (name, admin)
}

/// The first column of every row `sql` returns.
pub async fn column<T: for<'a> tokio_postgres::types::FromSql<'a>>(client: &Client, sql: &str) -> Vec<T> {
    let rows = client.query(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    rows.iter().map(|r| r.get(0)).collect()
}

/// The first two columns of every row `sql` returns.
pub async fn pairs<A, B>(client: &Client, sql: &str) -> Vec<(A, B)>
where
    A: for<'a> tokio_postgres::types::FromSql<'a>,
    B: for<'a> tokio_postgres::types::FromSql<'a>,
{
    let rows = client.query(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

/// A connection to `db` as `user`.
pub async fn connect_as(db: &str, user: &str) -> Client {
    connect(db, user).await
}

/// A connection to `db` as `user` on the test cluster's streaming standby
/// (scripts/test starts it: ENGRAM_TEST_REPLICA_HOST, ENGRAM_TEST_REPLICA_PORT).
pub async fn connect_replica(db: &str, user: &str) -> Client {
    connect_at("ENGRAM_TEST_REPLICA", db, user).await
}

/// Waits until the standby has replayed everything the primary has written
/// so far (at most 30 s).
pub async fn wait_for_replay(primary: &Client, standby: &Client) {
    let lsn: String = primary
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .expect("primary LSN")
        .get(0);
    for _ in 0..300 {
        let done: bool = standby
            .query_one(
                "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::text::pg_lsn, false)",
                &[&lsn],
            )
            .await
            .expect("standby replay LSN")
            .get(0);
        if done {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the standby did not replay up to {lsn} within 30 s");
}

/// A restricted session whose every statement runs in its own transaction
/// after `engram.bind` (a binding is transaction-local).
pub struct Agent {
    pub client: Client,
    pub bind: String,
    pub args: Vec<String>,
}

/// What the helpers below need of a connection: a superuser `Client`, or an
/// `Agent` that binds each statement's transaction.
#[allow(async_fn_in_trait)]
pub trait Sql {
    async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, tokio_postgres::Error>;

    async fn query_one(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row, tokio_postgres::Error> {
        let mut rows = self.query(sql, params).await?;
        assert_eq!(rows.len(), 1, "expected one row from {sql}");
        Ok(rows.remove(0))
    }
}

impl Sql for Client {
    async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, tokio_postgres::Error> {
        Client::query(self, sql, params).await
    }
}

impl Sql for Agent {
    async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, tokio_postgres::Error> {
        self.bound(self.client.query(sql, params)).await
    }
}

impl Agent {
    pub async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, tokio_postgres::Error> {
        self.bound(self.client.execute(sql, params)).await
    }

    /// Runs `work` (a tokio-postgres future: nothing is sent before it is
    /// first polled) in a transaction that engram.bind binds first.
    async fn bound<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, tokio_postgres::Error> {
        self.client.batch_execute("BEGIN").await?;
        let args: Vec<&(dyn ToSql + Sync)> = self.args.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
        let result = match self.client.query(self.bind.as_str(), &args).await {
            Ok(_) => work.await,
            Err(e) => Err(e),
        };
        let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
        self.client.batch_execute(end).await?;
        result
    }
}

/// Connects to the database where pg_cron lives (cron.database_name).
pub async fn cron_db() -> Client {
    connect(&cron_db_name(), "postgres").await
}

/// The database where pg_cron lives: engram_test, or ENGRAM_TEST_CRON_DB
/// (the Citus stage's).
pub fn cron_db_name() -> String {
    std::env::var("ENGRAM_TEST_CRON_DB").unwrap_or_else(|_| "engram_test".into())
}

/// A program of the PostgreSQL under test (`pg_ctl`, `initdb`, `psql`):
/// scripts/test exports ENGRAM_TEST_PG_BIN, the bin directory of the major
/// version it runs (ENGRAM_PG_MAJOR); bookworm's 15 otherwise.
pub fn pg_bin(program: &str) -> String {
    let dir = std::env::var("ENGRAM_TEST_PG_BIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".into());
    format!("{dir}/{program}")
}

/// `[a,b,c]`, pgvector's text form.
pub fn vec_text(v: &[f32]) -> String {
    let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", parts.join(","))
}

/// Calls `engram.remember` as `client` with text, embedding and extra named
/// arguments (SQL fragments with no user values, e.g. `kind => 'episodic'`).
pub async fn remember(
    client: &impl Sql,
    owner: &str,
    content: &str,
    emb: &[f32],
    extra: &str,
) -> (String, Option<Uuid>, Option<serde_json::Value>) {
    let row = try_remember(client, owner, content, emb, extra)
        .await
        .expect("remember");
    (row.get(0), row.get(1), row.get(2))
}

pub async fn try_remember(
    client: &impl Sql,
    owner: &str,
    content: &str,
    emb: &[f32],
    extra: &str,
) -> Result<Row, tokio_postgres::Error> {
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(", {extra}")
    };
    client
        .query_one(
            &format!("SELECT status, id, conflicts FROM engram.remember(owner => $1, content => $2, embedding => $3::text::vector{extra})"),
            &[&owner, &content, &vec_text(emb)],
        )
        .await
}

/// Created id of a memory that must not conflict.
pub async fn create(client: &impl Sql, owner: &str, content: &str, emb: &[f32], extra: &str) -> Uuid {
    let (status, id, conflicts) = remember(client, owner, content, emb, extra).await;
    assert_eq!(
        status, "created",
        "expected created for {content:?}, conflicts: {conflicts:?}"
    );
    id.expect("created id")
}

/// The SQLSTATE of a failed call, panicking if it succeeded.
pub fn sqlstate<T: std::fmt::Debug>(r: Result<T, tokio_postgres::Error>) -> (String, String) {
    let e = r.expect_err("expected an error");
    let db = e.as_db_error().unwrap_or_else(|| panic!("not a database error: {e:?}"));
    (db.code().code().to_string(), db.message().to_string())
}

/// Row count of a table (as the admin, so RLS does not hide rows).
pub async fn count(db: &TestDb, sql: &str) -> i64 {
    db.admin.query_one(sql, &[]).await.expect(sql).get(0)
}

/// A unit vector pointing mostly along axis `i` (of `dims`), with a small
/// tilt `t` along the next axis: similar for equal `i`, unrelated otherwise.
pub fn axis(dims: usize, i: usize, t: f32) -> Vec<f32> {
    let mut v = vec![0.01f32; dims];
    v[i % dims] = 1.0;
    v[(i + 1) % dims] += t;
    v
}

/// Runs psql on `db` with `input` on standard input (so that meta-commands
/// such as \gset work), stopping at the first error.
pub fn psql(db: &str, input: &str) -> (bool, String) {
    use std::io::Write;
    let host = std::env::var("ENGRAM_TEST_HOST").expect("run through scripts/test");
    let port = std::env::var("ENGRAM_TEST_PORT").expect("run through scripts/test");
    let mut child = std::process::Command::new(pg_bin("psql"))
        .args([
            "-X",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            &host,
            "-p",
            &port,
            "-U",
            "postgres",
            "-d",
            db,
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("psql runs");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// The first ```sql block after `heading` in the checkout's `doc` (a path
/// from the repository root), for tests that run documentation as printed.
pub fn sql_block(doc: &str, heading: &str) -> String {
    // The checkout's path at run time (cargo test sets it): a path fixed at
    // compile time names whichever clone built the shared target directory.
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("run under cargo test");
    let text = std::fs::read_to_string(format!("{dir}/../{doc}")).unwrap_or_else(|e| panic!("{doc}: {e:?}"));
    let section = text
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("{doc} has no section {heading:?}"));
    let start = section.find("```sql\n").expect("sql block") + "```sql\n".len();
    let end = section[start..].find("```").expect("end of sql block");
    section[start..start + end].to_string()
}

/// Everything engram defines, one line per object, sorted: functions with
/// their signature, body hash, volatility, security and settings; columns,
/// defaults, constraints, indexes, policies, privileges, types, and the
/// extension's member list. Compared between an upgraded database and a
/// fresh install (upgrade.rs), and between Citus nodes (citus.rs).
pub const CATALOG: &str = r#"
WITH ns AS (SELECT 'engram'::regnamespace AS oid)
SELECT line FROM (
    SELECT 'function ' || p.oid::regprocedure::text || ' -> ' || pg_get_function_result(p.oid)
           || ' args(' || pg_get_function_arguments(p.oid) || ')'
           || ' lang=' || l.lanname || ' secdef=' || p.prosecdef || ' vol=' || p.provolatile::text
           || ' par=' || p.proparallel::text || ' strict=' || p.proisstrict || ' cost=' || p.procost
           || ' rows=' || p.prorows || ' config=' || coalesce(array_to_string(p.proconfig, ','), '')
           || ' acl=' || coalesce(p.proacl::text, '') || ' bin=' || coalesce(p.probin, '')
           || ' src=' || md5(p.prosrc) AS line
    FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang, ns WHERE p.pronamespace = ns.oid
    UNION ALL
    SELECT 'relation ' || c.relname || ' kind=' || c.relkind::text || ' rls=' || c.relrowsecurity
           || ' force=' || c.relforcerowsecurity || ' persistence=' || c.relpersistence::text
           || ' acl=' || coalesce(c.relacl::text, '')
    FROM pg_class c, ns WHERE c.relnamespace = ns.oid
    UNION ALL
    SELECT 'column ' || c.relname || '.' || a.attname || ' #' || a.attnum || ' '
           || format_type(a.atttypid, a.atttypmod) || ' notnull=' || a.attnotnull
           || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
           || ' generated=' || a.attgenerated::text || ' identity=' || a.attidentity::text
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum, ns
    WHERE c.relnamespace = ns.oid AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'index ' || pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid, ns WHERE c.relnamespace = ns.oid
    UNION ALL
    SELECT 'constraint ' || x.conrelid::regclass::text || ' ' || x.conname || ' ' || pg_get_constraintdef(x.oid)
    FROM pg_constraint x, ns WHERE x.connamespace = ns.oid
    UNION ALL
    SELECT 'policy ' || p.tablename || ' ' || p.policyname || ' ' || p.permissive || ' ' || p.roles::text
           || ' ' || p.cmd || ' ' || coalesce(p.qual, '') || ' ' || coalesce(p.with_check, '')
    FROM pg_policies p WHERE p.schemaname = 'engram'
    UNION ALL
    SELECT 'type ' || t.typname || ' ' || t.typtype::text FROM pg_type t, ns WHERE t.typnamespace = ns.oid
    UNION ALL
    SELECT 'trigger ' || pg_get_triggerdef(t.oid)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid, ns WHERE c.relnamespace = ns.oid AND NOT t.tgisinternal
    UNION ALL
    SELECT 'schema acl=' || coalesce(n.nspacl::text, '') FROM pg_namespace n, ns WHERE n.oid = ns.oid
    UNION ALL
    SELECT 'member ' || pg_describe_object(d.classid, d.objid, d.objsubid)
    FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
    WHERE d.refclassid = 'pg_extension'::regclass AND e.extname = 'engram' AND d.deptype = 'e'
    UNION ALL
    SELECT 'config ' || c.relname || ' ' || coalesce(e.extcondition[i], '')
    FROM pg_extension e, unnest(e.extconfig) WITH ORDINALITY AS u(oid, i) JOIN pg_class c ON c.oid = u.oid
    WHERE e.extname = 'engram'
) all_lines ORDER BY line
"#;

/// The installed version of engram in the database `c` is connected to.
pub async fn extversion(c: &Client) -> String {
    c.query_one("SELECT extversion FROM pg_extension WHERE extname = 'engram'", &[])
        .await
        .expect("engram's version")
        .get(0)
}

/// The CATALOG lines of the database `c` is connected to.
pub async fn catalog(c: &Client) -> Vec<String> {
    c.query(CATALOG, &[])
        .await
        .expect("catalog")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Differences between the derived search structures and a recomputation
/// from the memories: the scope lists' entries packed in the blocks (memory
/// ids and quantized vectors), the block each entry row points at, the list
/// sizes, malformed or empty blocks; the text index's postings, document
/// frequencies and sizes. 0 when exact.
pub const LIST_DRIFT: &str = "
WITH want AS (
    SELECT m.owner, l.list, m.id AS memory_id, engram._quantize(m.embedding::real[]) AS qvec
    FROM engram.memories m, unnest(engram._list_keys(m.internal_type, m.tags)) AS l(list)
    WHERE m.status = 'active' AND m.embedding IS NOT NULL),
packed AS (
    SELECT b.owner, b.list, b.block,
           encode(substring(b.entries FROM i * w.w + 1 FOR 16), 'hex')::uuid AS memory_id,
           substring(b.entries FROM i * w.w + 17 FOR w.w - 16) AS qvec
    FROM engram.scope_blocks b, LATERAL (SELECT octet_length(b.entries) / greatest(b.n, 1) AS w) w,
         generate_series(0, b.n - 1) AS i),
have AS (SELECT p.owner, p.list, p.memory_id, p.qvec FROM packed p),
sizes_want AS (SELECT w.owner, w.list, count(*) AS n FROM want w GROUP BY w.owner, w.list),
sizes_have AS (SELECT z.owner, z.list, z.n FROM engram.scope_sizes z WHERE z.n <> 0),
postings_want AS (
    SELECT m.owner, engram._list_key(m.internal_type, '') AS list, u.lexeme, octet_length(m.content) AS len,
           m.id AS memory_id
    FROM engram.memories m, unnest(m.content_tsv) u WHERE m.status = 'active'),
postings_have AS (SELECT p.owner, p.list, p.lexeme, p.len, p.memory_id FROM engram.text_postings p),
terms_want AS (SELECT p.owner, p.list, p.lexeme, count(*) AS df FROM postings_want p GROUP BY 1, 2, 3),
terms_have AS (SELECT t.owner, t.list, t.lexeme, t.df FROM engram.text_terms t),
docs_want AS (
    SELECT m.owner, engram._list_key(m.internal_type, '') AS list, count(*) AS docs,
           sum(octet_length(m.content)) AS total_len
    FROM engram.memories m WHERE m.status = 'active' GROUP BY 1, 2),
docs_have AS (SELECT z.owner, z.list, z.docs, z.total_len FROM engram.text_sizes z)
SELECT (SELECT count(*) FROM (SELECT * FROM postings_want EXCEPT ALL SELECT * FROM postings_have) t1)
     + (SELECT count(*) FROM (SELECT * FROM postings_have EXCEPT ALL SELECT * FROM postings_want) t2)
     + (SELECT count(*) FROM (SELECT * FROM terms_want EXCEPT ALL SELECT * FROM terms_have) t3)
     + (SELECT count(*) FROM (SELECT * FROM terms_have EXCEPT ALL SELECT * FROM terms_want) t4)
     + (SELECT count(*) FROM (SELECT * FROM docs_want EXCEPT ALL SELECT * FROM docs_have) t5)
     + (SELECT count(*) FROM (SELECT * FROM docs_have EXCEPT ALL SELECT * FROM docs_want) t6)
     + (SELECT count(*) FROM (SELECT * FROM want EXCEPT ALL SELECT * FROM have) a)
     + (SELECT count(*) FROM (SELECT * FROM have EXCEPT ALL SELECT * FROM want) b)
     + (SELECT count(*) FROM (SELECT * FROM sizes_want EXCEPT SELECT * FROM sizes_have) c)
     + (SELECT count(*) FROM (SELECT * FROM sizes_have EXCEPT SELECT * FROM sizes_want) d)
     + (SELECT count(*) FROM (SELECT p.owner, p.list, p.memory_id, p.block FROM packed p
                              EXCEPT ALL SELECT e.owner, e.list, e.memory_id, e.block FROM engram.scope_entries e) e)
     + (SELECT count(*) FROM (SELECT e.owner, e.list, e.memory_id, e.block FROM engram.scope_entries e
                              EXCEPT ALL SELECT p.owner, p.list, p.memory_id, p.block FROM packed p) f)
     + (SELECT count(*) FROM engram.scope_blocks b
        WHERE b.n < 1 OR octet_length(b.entries) % b.n <> 0
           OR b.n > engram._block_capacity(octet_length(b.entries) / b.n - 16))";

/// A throwaway cluster of its own (initdb as the postgres OS user) under
/// the suite's cluster directory, for tests that crash, archive or restart
/// a server: nothing they do disturbs the shared one. `offset` above the
/// suite's port keeps each such test (and each version's run) apart.
pub struct ScratchCluster {
    pub dir: std::path::PathBuf,
    pub port: u16,
}

/// Runs a program as the postgres OS user (initdb and postgres refuse root).
pub fn as_postgres(args: &[&str]) -> std::process::Output {
    std::process::Command::new("runuser")
        .args(["-u", "postgres", "--", "env", "-u", "RUST_BACKTRACE"])
        .args(args)
        .output()
        .expect("runuser")
}

impl ScratchCluster {
    /// A new cluster in `<suite dir>/<name>-<pid>` (initdb'd into
    /// `pgdata` unless `initdb` is false), on the suite's port + `offset`.
    pub fn new(name: &str, offset: u16, initdb: bool) -> ScratchCluster {
        let dir = std::path::PathBuf::from(env("ENGRAM_TEST_HOST"))
            .parent()
            .unwrap()
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let owned = std::process::Command::new("chown")
            .args(["-R", "postgres:postgres", &dir.display().to_string()])
            .status()
            .unwrap();
        assert!(owned.success());
        let base: u16 = env("ENGRAM_TEST_PORT").parse().unwrap_or(5434);
        let cluster = ScratchCluster {
            dir,
            port: base + offset,
        };
        if initdb {
            let out = as_postgres(&[
                &pg_bin("initdb"),
                "-D",
                &cluster.data(),
                "-U",
                "postgres",
                "--auth=trust",
            ]);
            assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        }
        cluster
    }

    pub fn data(&self) -> String {
        self.dir.join("pgdata").display().to_string()
    }

    /// Starts it with `options` (postgres -c flags); false if it did not start.
    pub fn try_start(&self, options: &str) -> bool {
        let opts = format!(
            "-p {} -k {} -c listen_addresses='' {options}",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("log").display().to_string();
        as_postgres(&[
            &pg_bin("pg_ctl"),
            "-D",
            &self.data(),
            "-w",
            "-t",
            "120",
            "-o",
            &opts,
            "-l",
            &log,
            "start",
        ])
        .status
        .success()
    }

    pub fn stop(&self) {
        let _ = as_postgres(&[&pg_bin("pg_ctl"), "-D", &self.data(), "-m", "fast", "-w", "stop"]);
    }

    pub fn postmaster_pid(&self) -> String {
        let pid = std::fs::read_to_string(self.dir.join("pgdata/postmaster.pid")).expect("postmaster.pid");
        pid.lines().next().unwrap().trim().to_string()
    }

    pub async fn connect(&self, db: &str) -> Client {
        connect_path(&self.dir.display().to_string(), &self.port.to_string(), db, "postgres").await
    }
}

impl Drop for ScratchCluster {
    fn drop(&mut self) {
        let _ = as_postgres(&[&pg_bin("pg_ctl"), "-D", &self.data(), "-m", "immediate", "stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
