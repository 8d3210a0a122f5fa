//! What time and entities (docs/TIME_AND_ENTITIES.md) cost: the entity
//! index on `remember` (the same remember with the entity trigger on and
//! off) and the time window on `search` (the same hybrid search with and
//! without a time in its text).

use crate::progress;
use pgvector::Vector;
use std::time::Instant;
use tokio_postgres::Client;

/// Four entities per memory (two people, a ticket, a place): more than a
/// typical memory names, so the figure is an upper bound.
fn named(i: usize) -> String {
    format!("bench entity {i}: Vera Lind asked Tom Baker about OPS-{i} in Lyon")
}

/// p50 in milliseconds.
fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Prints the two measurements; `admin` may switch the trigger, `e` is the
/// engram session; `vectors` are fresh embeddings (at least 2 `n`: each
/// remember writes a vector of its own, so none conflicts), `queries`
/// the search queries.
pub async fn run(admin: &Client, e: &Client, n: usize, vectors: &[Vector], queries: &[Vector]) {
    progress("measuring the entity index on remember and the time window on search");
    admin
        .batch_execute("DELETE FROM engram.memories WHERE content LIKE 'bench entity %'")
        .await
        .unwrap();
    let rem = e
        .prepare("SELECT status FROM engram.remember(owner => 'bench', content => $1, embedding => $2, force => true)")
        .await
        .unwrap();
    e.batch_execute("SET synchronous_commit = off").await.unwrap();
    // Blocks of 50 alternating on and off, so that both see the same table
    // and cache; the commit's flush is left out (synchronous_commit off):
    // the difference is the trigger's CPU and its index rows.
    let mut ms = [Vec::new(), Vec::new()];
    for b in 0..n.div_ceil(50) {
        for pass in [b % 2, 1 - b % 2] {
            let sql = if pass == 0 { "ENABLE" } else { "DISABLE" };
            admin
                .batch_execute(&format!("ALTER TABLE engram.memories {sql} TRIGGER entities_insert"))
                .await
                .unwrap();
            for i in b * 50..((b + 1) * 50).min(n) {
                let (content, v) = (named(2 * i + pass), &vectors[2 * i + pass]);
                let t = Instant::now();
                e.query_one(&rem, &[&content, v]).await.unwrap();
                ms[pass].push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    admin
        .batch_execute("ALTER TABLE engram.memories ENABLE TRIGGER entities_insert")
        .await
        .unwrap();
    e.batch_execute("RESET synchronous_commit").await.unwrap();
    let indexed: i64 = admin
        .query_one(
            "SELECT count(*) FROM engram.memory_entities e JOIN engram.memories m ON m.owner = e.owner AND m.id = e.memory_id
             WHERE m.owner = 'bench' AND m.content LIKE 'bench entity %'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let search = |text: &'static str| async move {
        let st = e
            .prepare("SELECT count(*) FROM engram.search(owner => 'bench', query_embedding => $1, query_text => $2)")
            .await
            .unwrap();
        let mut v = Vec::new();
        for q in queries {
            let t = Instant::now();
            e.query_one(&st, &[q, &text]).await.unwrap();
            v.push(t.elapsed().as_secs_f64() * 1e3);
        }
        v
    };
    // interleaved: plain, timed, plain, timed
    let (mut plain, mut timed) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        plain.extend(search("notes about the deployment").await);
        timed.extend(search("notes about the deployment last week").await);
    }
    let window_only = {
        let st = e.prepare("SELECT engram.time_window($1)").await.unwrap();
        let mut v = Vec::new();
        for _ in 0..queries.len() {
            let t = Instant::now();
            e.query_one(&st, &[&"notes about the deployment last week"])
                .await
                .unwrap();
            v.push(t.elapsed().as_secs_f64() * 1e3);
        }
        v
    };
    admin
        .batch_execute("DELETE FROM engram.memories WHERE content LIKE 'bench entity %'")
        .await
        .unwrap();
    let (on, off) = (p50(std::mem::take(&mut ms[0])), p50(std::mem::take(&mut ms[1])));
    let (plain, timed) = (p50(plain), p50(timed));
    println!("| time and entities | p50 ms | ratio |");
    println!("|---|---:|---:|");
    println!("| engram.remember, entity trigger off (synchronous_commit off) | {off:.2} | 1.00x |");
    println!(
        "| **engram.remember, entity index on** (4 entities per memory; {:.1} rows each) | {on:.2} | {:.2}x |",
        indexed as f64 / n.max(1) as f64,
        on / off
    );
    println!("| engram.search, hybrid, no time in the query | {plain:.2} | 1.00x |");
    println!(
        "| **engram.search, hybrid, \"… last week\"** (window read, boost, legs widened to 50) | {timed:.2} | {:.2}x |",
        timed / plain
    );
    println!(
        "| engram.time_window alone (a round trip) | {:.3} | |",
        p50(window_only)
    );
}
