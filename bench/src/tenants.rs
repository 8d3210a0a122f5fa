//! The multi-tenant shape on one node and on Citus (docs/SCALING.md):
//! `--rows` memories spread over `--owners` owners, loaded into the same
//! data in two databases: the single-node one (`--dsn`) and a distributed
//! one on a Citus coordinator (`--citus-dsn`). Measured, interleaved so that
//! both see the same machine state: per-owner `engram.search` latency and
//! recall@10 against an exact scan of the owner, `engram.remember`
//! throughput with `--clients` concurrent connections, and where the rows
//! and bytes live.

use crate::data::{scope_tags, vec_text, Mixture};
use crate::stats::{recall, Samples};
use crate::{connect, progress};
use pgvector::Vector;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

pub struct Shape {
    pub rows: usize,
    pub owners: usize,
    pub dims: usize,
    pub centroids: usize,
    pub sigma: f32,
    pub queries: usize,
    pub clients: usize,
    pub seconds: u64,
}

impl Shape {
    fn fingerprint(&self) -> String {
        format!(
            "tenants rows={} owners={} dims={} centroids={} sigma={}",
            self.rows, self.owners, self.dims, self.centroids, self.sigma
        )
    }
}

fn owner(i: usize) -> String {
    format!("tenant-{i:05}")
}

/// Whether `c` holds this shape already (a marker row written after a load;
/// the remember measurement adds rows to the same owners).
async fn loaded(c: &Client, s: &Shape) -> bool {
    matches!(
        c.query_opt(
            "SELECT 1 FROM engram.memories WHERE owner = 'bench-marker' AND content = $1",
            &[&s.fingerprint()],
        )
        .await,
        Ok(Some(_))
    )
}

/// Loads the shape through raw INSERTs of the owners' rows (the triggers
/// build the scope lists and usage counters as they would for any write),
/// with the HNSW index built after the load, as a DBA bulk-loads.
async fn load(c: &Client, s: &Shape, what: &str) {
    progress(&format!("{what}: loading {} ({})", s.rows, s.fingerprint()));
    // One statement at a time: on Citus a multi-shard DELETE with row
    // triggers fails inside a multi-statement query string.
    for sql in [
        "DELETE FROM engram.memories WHERE owner LIKE 'tenant-%' OR owner = 'bench-marker'".to_string(),
        "DROP INDEX IF EXISTS engram.memories_embedding_hnsw".to_string(),
        format!("SELECT engram.configure(embedding_dims => {})", s.dims),
    ] {
        c.batch_execute(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
    let insert = c
        .prepare(
            "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, embedding, trust_score)
             SELECT o, 'memory ' || n, sha256(convert_to('memory ' || n, 'UTF8')),
                    sha256(convert_to(o || '/memory ' || n, 'UTF8')), t::text[], v::vector,
                    engram.trust_score('agent', 0, 0, false)
             FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[]) AS u(o, n, t, v)",
        )
        .await
        .expect("prepare insert");
    // Same data in both databases: one seed.
    let mut mix = Mixture::new(42, s.dims, s.centroids, s.sigma);
    let started = Instant::now();
    let batch = 2000;
    for start in (0..s.rows).step_by(batch) {
        let end = (start + batch).min(s.rows);
        let mut owners = Vec::new();
        let mut ids = Vec::new();
        let mut tags = Vec::new();
        let mut vecs = Vec::new();
        for n in start..end {
            owners.push(owner(n % s.owners));
            ids.push(n as i64);
            tags.push(format!("{{{}}}", scope_tags(mix.uniform()).join(",")));
            vecs.push(vec_text(&mix.sample()));
        }
        c.execute(&insert, &[&owners, &ids, &tags, &vecs])
            .await
            .expect("insert batch");
        if end % 100_000 == 0 || end == s.rows {
            progress(&format!("  {end}/{} rows ({:.0?})", s.rows, started.elapsed()));
        }
    }
    c.batch_execute("SET maintenance_work_mem = '2GB'; SET max_parallel_maintenance_workers = 2")
        .await
        .unwrap();
    for sql in [
        "CREATE INDEX memories_embedding_hnsw ON engram.memories USING hnsw (embedding vector_cosine_ops)",
        "VACUUM ANALYZE engram.memories",
        "VACUUM ANALYZE engram.scope_blocks, engram.scope_entries",
    ] {
        let t = Instant::now();
        c.batch_execute(sql).await.expect(sql);
        progress(&format!("  {sql}: {:.1?}", t.elapsed()));
    }
    c.execute(
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key)
         VALUES ('bench-marker', $1, '\\x00', '\\x00')",
        &[&s.fingerprint()],
    )
    .await
    .unwrap();
    progress(&format!("{what}: loaded in {:.0?}", started.elapsed()));
}

/// The owner's 10 nearest by an exact scan, by content: the two databases
/// hold the same rows under different ids.
async fn exact(c: &Client, owner: &str, q: &Vector) -> Vec<String> {
    // On Citus the scan runs on a worker: SET LOCAL reaches it only with
    // propagation on (a placeholder setting on a single node).
    c.batch_execute(
        "BEGIN; SET LOCAL citus.propagate_set_commands = 'local';
         SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off",
    )
    .await
    .unwrap();
    let rows = c
        .query(
            "SELECT content FROM engram.memories WHERE owner = $1 AND status = 'active'
             ORDER BY embedding <=> $2 LIMIT 10",
            &[&owner, q],
        )
        .await
        .expect("exact scan");
    c.batch_execute("COMMIT").await.unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

async fn search(c: &Client, owner: &str, q: &Vector) -> (Vec<String>, Duration) {
    let t = Instant::now();
    let rows = c
        .query(
            "SELECT content FROM engram.search(owner => $1, query_embedding => $2, k => 10)",
            &[&owner, q],
        )
        .await
        .expect("engram.search");
    (rows.iter().map(|r| r.get(0)).collect(), t.elapsed())
}

/// `remember` calls per second with `clients` connections writing to
/// random owners for `seconds`.
async fn remember_rate(dsn: &str, s: &Shape, seed: u64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(s.seconds);
    let mut tasks = Vec::new();
    for k in 0..s.clients {
        let dsn = dsn.to_string();
        let (owners, dims, centroids, sigma) = (s.owners, s.dims, s.centroids, s.sigma);
        tasks.push(tokio::spawn(async move {
            let c = connect(&dsn).await;
            let st = c
                .prepare("SELECT status FROM engram.remember(owner => $1, content => $2, embedding => $3)")
                .await
                .unwrap();
            let mut mix = Mixture::new(42, dims, centroids, sigma).reseed(seed * 100 + k as u64);
            let mut n = 0u64;
            while Instant::now() < deadline {
                let o = owner((mix.uniform() * owners as f64) as usize % owners);
                let v = Vector::from(mix.sample());
                let content = format!("written by client {k}, call {n}, seed {seed}");
                c.query(&st, &[&o, &content, &v]).await.expect("remember");
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total as f64 / s.seconds as f64
}

/// Rows, owners and database size on each node of the Citus cluster.
async fn placement(c: &Client) -> Vec<String> {
    let rows = c
        .query(
            "WITH per_owner AS (SELECT owner, count(*) AS n FROM engram.memories
                                WHERE owner LIKE 'tenant-%' GROUP BY owner)
             SELECT nd.nodeport, count(*)::bigint, sum(o.n)::bigint
             FROM per_owner o
             JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('engram.memories', o.owner)
             JOIN pg_dist_node nd ON nd.groupid = p.groupid
             GROUP BY 1 ORDER BY 1",
            &[],
        )
        .await
        .expect("placement");
    let sizes = c
        .query(
            "SELECT n.nodeport, r.result FROM run_command_on_all_nodes(
                 'SELECT pg_database_size(current_database())') r
             JOIN pg_dist_node n ON n.nodeid = r.nodeid ORDER BY 1",
            &[],
        )
        .await
        .expect("sizes");
    let mut out = Vec::new();
    for s in &sizes {
        let port: i32 = s.get(0);
        let bytes: i64 = s.get::<_, String>(1).parse().unwrap_or(0);
        let held = rows.iter().find(|r| r.get::<_, i32>(0) == port);
        out.push(format!(
            "| Citus node :{port} | {} | {} | {:.0} |",
            held.map(|r| r.get::<_, i64>(1)).unwrap_or(0),
            held.map(|r| r.get::<_, i64>(2)).unwrap_or(0),
            bytes as f64 / (1 << 20) as f64
        ));
    }
    out
}

pub async fn run(single_dsn: &str, citus_dsn: &str, s: &Shape, reuse: bool) {
    let single = connect(single_dsn).await;
    let citus = connect(citus_dsn).await;
    let distributed: bool = citus
        .query_one("SELECT engram._is_distributed()", &[])
        .await
        .expect("engram on the Citus coordinator")
        .get(0);
    assert!(
        distributed,
        "--citus-dsn must name a coordinator where engram.distribute() ran"
    );
    for (c, what) in [(&single, "single node"), (&citus, "Citus")] {
        if reuse && loaded(c, s).await {
            progress(&format!("{what}: reusing loaded data ({})", s.fingerprint()));
        } else {
            load(c, s, what).await;
        }
    }

    progress(&format!("per-owner search: {} queries, interleaved", s.queries));
    let mut qmix = Mixture::new(42, s.dims, s.centroids, s.sigma).reseed(7);
    let (mut one, mut many) = (Samples::default(), Samples::default());
    for i in 0..s.queries {
        let o = owner((qmix.uniform() * s.owners as f64) as usize % s.owners);
        let q = Vector::from(qmix.sample());
        // Alternate which goes first: neither always meets a warmer cache.
        // Each is checked against an exact scan of its own rows (the
        // remember runs add different rows to each).
        let order: [(&Client, &mut Samples); 2] = if i % 2 == 0 {
            [(&single, &mut one), (&citus, &mut many)]
        } else {
            [(&citus, &mut many), (&single, &mut one)]
        };
        for (c, samples) in order {
            let truth = exact(c, &o, &q).await;
            let (hits, t) = search(c, &o, &q).await;
            samples.push(t, recall(&hits, &truth), hits.len());
        }
    }

    progress(&format!(
        "remember: {} clients for {} s on each, twice, alternating",
        s.clients, s.seconds
    ));
    let mut rates = [Vec::new(), Vec::new()];
    for round in 0..2u64 {
        rates[0].push(remember_rate(single_dsn, s, round * 2 + 1).await);
        rates[1].push(remember_rate(citus_dsn, s, round * 2 + 2).await);
    }
    let mean = |v: &Vec<f64>| v.iter().sum::<f64>() / v.len() as f64;

    println!(
        "\n### Multi-tenant: {} memories over {} owners ({} dims), one node vs Citus (coordinator + workers on this machine)\n",
        s.rows, s.owners, s.dims
    );
    println!("| measure | single node | Citus | Citus / single |");
    println!("|---|---:|---:|---:|");
    for (name, a, b) in [
        ("per-owner search p50 (ms)", one.p50(), many.p50()),
        ("per-owner search p95 (ms)", one.p95(), many.p95()),
        ("per-owner search recall@10", one.recall(), many.recall()),
    ] {
        println!("| {name} | {a:.3} | {b:.3} | {:.2}x |", b / a);
    }
    let (ra, rb) = (mean(&rates[0]), mean(&rates[1]));
    println!(
        "| remember/s, {} clients (runs: {:.0?} / {:.0?}) | {ra:.0} | {rb:.0} | {:.2}x |",
        s.clients,
        rates[0],
        rates[1],
        rb / ra
    );
    let single_mb: i64 = single
        .query_one("SELECT pg_database_size(current_database())", &[])
        .await
        .unwrap()
        .get(0);
    println!("\n| node | owners | memories | database MB |");
    println!("|---|---:|---:|---:|");
    println!(
        "| single node | {} | {} | {:.0} |",
        s.owners,
        s.rows,
        single_mb as f64 / (1 << 20) as f64
    );
    for line in placement(&citus).await {
        println!("{line}");
    }
}
