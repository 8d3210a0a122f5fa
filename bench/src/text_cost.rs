//! What the text leg costs hybrid search, against vector-only search on the
//! same owner: one owner with 10,000 and one with 100,000 memories whose
//! contents are built so that each query class has a known share of
//! matching rows: a word every memory holds ("item"), a word in 1% of them
//! ("quarterly"), rare words (one memory's "code<n>", a sixth's topic). Each
//! search runs `engram.search(query_embedding, query_text, k => 10)`, the
//! default path of `memory_search`; "every match" is the same search with
//! the text leg that scores every matching row (how search read it before
//! the text index, and how a scoped caller's search still does).
//!
//! Also the engram functions one search calls (`pg_stat_xact_user_functions`
//! with `track_functions = all`): the plpgsql and SQL frames and Rust calls
//! a search crosses.

use crate::data::Mixture;
use crate::progress;
use crate::stats::Samples;
use pgvector::Vector;
use std::time::Instant;
use tokio_postgres::Client;

const SIZES: [usize; 2] = [10_000, 100_000];
const TOPICS: [&str; 6] = [
    "the launch",
    "a meeting",
    "the budget",
    "travel plans",
    "the garden",
    "a bug",
];
const QUERIES: [(&str, &str); 4] = [
    ("rare words", "what about code777 and the garden"),
    ("a 1% word", "quarterly launch report"),
    ("a word every memory holds", "item"),
    ("`item 1234`", "item 1234"),
];

fn owner(n: usize) -> String {
    format!("bench-text-{n}")
}

fn content(i: usize) -> String {
    let mut s = format!("item {i} note about {} code{i}", TOPICS[i % TOPICS.len()]);
    if i.is_multiple_of(100) {
        s.push_str(" quarterly");
    }
    for _ in 0..i % 4 {
        s.push_str(" and more words here");
    }
    s
}

/// Loads an owner's memories through plain INSERTs (every trigger on, as a
/// DBA's load or engram's own writes keep the lists and the text index).
async fn load(c: &Client, dims: usize) {
    let mut mix = Mixture::new(23, dims, 200, 0.05);
    for n in SIZES {
        let o = owner(n);
        let have: i64 = c
            .query_one("SELECT count(*) FROM engram.memories WHERE owner = $1", &[&o])
            .await
            .unwrap()
            .get(0);
        if have == n as i64 {
            continue;
        }
        c.execute("DELETE FROM engram.memories WHERE owner = $1", &[&o])
            .await
            .unwrap();
        let st = c
            .prepare(
                "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key, kind, embedding)
                 SELECT $1, t, sha256(convert_to(t, 'UTF8')), sha256(convert_to(t, 'UTF8')), 'episodic', e
                 FROM unnest($2::text[], $3::vector[]) AS x(t, e)",
            )
            .await
            .unwrap();
        for start in (0..n).step_by(1000) {
            let texts: Vec<String> = (start..(start + 1000).min(n)).map(content).collect();
            let vecs: Vec<Vector> = texts.iter().map(|_| Vector::from(mix.sample())).collect();
            c.execute(&st, &[&o, &texts, &vecs]).await.unwrap();
            if (start + 1000).is_multiple_of(20_000) {
                progress(&format!("text cost: {} of {n} memories of {o}", start + 1000));
            }
        }
        c.batch_execute("ANALYZE engram.memories").await.unwrap();
    }
}

/// p50 of each round of `runs` calls of `sql` with the query embedding and text.
async fn p50s(c: &Client, sql: &str, o: &str, q: &Vector, text: &str, runs: usize) -> (f64, f64) {
    let st = c.prepare(sql).await.unwrap();
    let mut s = Samples::default();
    for _ in 0..5 {
        c.query(&st, &[&o, q, &text]).await.unwrap();
    }
    for _ in 0..2 * runs {
        let t = Instant::now();
        let rows = c.query(&st, &[&o, q, &text]).await.unwrap();
        s.push(t.elapsed(), 1.0, rows.len());
    }
    s.rounds_p50()
}

/// Calls of engram functions (and how many distinct ones) in one `sql`.
async fn functions_per_call(c: &mut Client, sql: &str, o: &str, q: &Vector, text: &str) -> (i64, i64) {
    let tx = c.transaction().await.unwrap();
    tx.batch_execute("SET LOCAL track_functions = 'all'").await.unwrap();
    let count = "SELECT coalesce(sum(calls), 0)::bigint, count(*) FROM pg_stat_xact_user_functions
                 WHERE schemaname = 'engram'";
    // a first call plans and caches; the second is the one counted
    tx.query(sql, &[&o, q, &text]).await.unwrap();
    let calls0: i64 = tx.query_one(count, &[]).await.unwrap().get(0);
    tx.query(sql, &[&o, q, &text]).await.unwrap();
    let after = tx.query_one(count, &[]).await.unwrap();
    let calls: i64 = after.get(0);
    let distinct: i64 = after.get(1);
    tx.rollback().await.unwrap();
    (calls - calls0, distinct)
}

/// The text owners live in a database of their own, `<the bench's>_text`
/// (created with the extension when missing, at the bench's dimension):
/// their 110,000 memories would otherwise share the bench's table and graph
/// and change what every scoped search of the other measurements walks.
pub async fn database(c: &Client, dsn: &str, dims: i32) -> Client {
    let name: String = c
        .query_one("SELECT current_database() || '_text'", &[])
        .await
        .unwrap()
        .get(0);
    let exists: bool = c
        .query_one("SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", &[&name])
        .await
        .unwrap()
        .get(0);
    if !exists {
        progress(&format!("text cost: creating database {name}"));
        c.batch_execute(&format!("CREATE DATABASE \"{}\"", name.replace('"', "\"\"")))
            .await
            .unwrap_or_else(|e| panic!("cannot create database {name}: {e}"));
    }
    let mut own: tokio_postgres::Config = dsn.parse().expect("--dsn");
    own.dbname(&name);
    let (t, conn) = own
        .connect(tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {name}: {e}"));
    tokio::spawn(async move {
        let _ = conn.await;
    });
    t.batch_execute("CREATE EXTENSION IF NOT EXISTS engram CASCADE")
        .await
        .unwrap_or_else(|e| panic!("cannot create the extension in {name}: {e}"));
    let have: i32 = t.query_one("SELECT engram._dims()", &[]).await.unwrap().get(0);
    if have != dims {
        t.execute("SELECT engram.configure(embedding_dims => $1)", &[&dims])
            .await
            .unwrap_or_else(|e| panic!("cannot set {name}'s dimension to {dims}: {e}"));
    }
    t
}

pub async fn run(c: &mut Client, dims: usize, runs: usize) {
    progress("text cost: loading the owners (skipped when loaded)");
    load(c, dims).await;
    let mut mix = Mixture::new(23, dims, 200, 0.05).reseed(99);
    let q = Vector::from(mix.sample());
    const VECTOR: &str =
        "SELECT id FROM engram.search(owner => $1, query_embedding => $2, k => 10) WHERE $3::text IS NOT NULL";
    const HYBRID: &str = "SELECT id FROM engram.search(owner => $1, query_embedding => $2, query_text => $3, k => 10)";
    // the text leg that scores every matching row: engram._search without
    // the text index (superuser: an internal function)
    const EVERY: &str = "SELECT cardinality(engram._search(
            ROW($1, '{active}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::engram.read_scope,
            $2, $3, 10, engram._setting_similarity_floor(), NULL, false))";
    println!("\n## Text leg cost (hybrid search against vector-only, one owner)\n");
    println!(
        "p50 in ms of each of two rounds of {runs} searches, k = 10, {dims} dimensions; ratio: hybrid / vector only.\n"
    );
    println!("| memories | query | vector only | hybrid, every match | hybrid, text index | ratio |");
    println!("|---:|---|---:|---:|---:|---:|");
    for n in SIZES {
        let o = owner(n);
        let vector = p50s(c, VECTOR, &o, &q, "", runs).await;
        for (name, text) in QUERIES {
            progress(&format!("text cost: {n}, {name}"));
            let every = p50s(c, EVERY, &o, &q, text, runs.min(40)).await;
            let hybrid = p50s(c, HYBRID, &o, &q, text, runs).await;
            println!(
                "| {n} | {name} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2}× / {:.2}× |",
                vector.0,
                vector.1,
                every.0,
                every.1,
                hybrid.0,
                hybrid.1,
                hybrid.0 / vector.0,
                hybrid.1 / vector.1
            );
        }
    }
    let o = owner(SIZES[1]);
    let (v_calls, v_distinct) = functions_per_call(c, VECTOR, &o, &q, "").await;
    let (h_calls, h_distinct) = functions_per_call(c, HYBRID, &o, &q, "item").await;
    println!("\nengram functions called per search (pg_stat_xact_user_functions, track_functions = all; calls / distinct functions): vector only {v_calls} / {v_distinct}, hybrid (`item`) {h_calls} / {h_distinct}");
}
