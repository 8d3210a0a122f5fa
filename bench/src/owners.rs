//! The multi-tenant shape on one node (`--owners`): `--rows` memories
//! spread evenly over the owners (row n belongs to owner n mod owners,
//! named `owner-42` in engram and 42 in `bench_raw.owner`), and each query
//! searches one owner's memories, alone and with one tag. The baseline is
//! raw pgvector's unfiltered HNSW over all rows at the ef that reaches
//! recall 0.95 (what the multi-tenant latency goal compares with): what a
//! user pays for a k-NN when every tenant's rows share one table and one
//! graph. Raw pgvector with the owner as a WHERE clause (a b-tree on it) is
//! shown beside it.

use crate::stats::{recall, Samples};
use crate::{
    connect, engram_ids, hnsw_label, print_search_table, progress, raw_sessions, Args, RawSessions, Row, RAW_ALL,
};
use pgvector::Vector;
use std::time::Instant;
use tokio_postgres::Client;

/// The scopes inside one owner: all its memories, then with one tag (about
/// half of them, and about 5%).
const SCOPES: [(Option<&str>, &str); 3] = [
    (None, "one owner"),
    (Some("s50"), "one owner + tag s50"),
    (Some("s5"), "one owner + tag s5"),
];

/// The owner query `i` searches: consecutive queries land on owners far
/// apart, so that no two share cached pages by construction.
fn owner_of(i: usize, owners: u32) -> i32 {
    ((i as u64 * 7919) % u64::from(owners)) as i32
}

/// The exact 10 nearest of one owner (and tag): the owner's rows come
/// through its b-tree, and the distance sort runs over all of them (a
/// MATERIALIZED CTE cannot feed the HNSW index).
async fn exact(c: &Client, q: &Vector, owner: i32, tag: Option<&str>) -> (Vec<i64>, std::time::Duration) {
    let t = Instant::now();
    let rows = c
        .query(
            "WITH o AS MATERIALIZED (
                 SELECT id, embedding FROM bench_raw WHERE owner = $2 AND ($3::text IS NULL OR tags @> ARRAY[$3]))
             SELECT id FROM o ORDER BY embedding <=> $1, id LIMIT 10",
            &[q, &owner, &tag],
        )
        .await
        .expect("exact scan of one owner");
    (rows.iter().map(|r| r.get(0)).collect(), t.elapsed())
}

pub async fn run(a: &Args, queries: &[Vector], truth_all: &[Vec<i64>], exact_all: Samples, owners: u32) {
    let c = connect(&a.dsn).await;
    progress(&format!(
        "ground truth: exact scans of one owner's rows ({owners} owners)"
    ));
    let mut truth: Vec<Vec<Vec<i64>>> = Vec::new();
    let mut exact_scoped: Vec<Samples> = Vec::new();
    for (tag, _) in SCOPES {
        let mut truths = Vec::new();
        let mut s = Samples::default();
        for (i, q) in queries.iter().enumerate() {
            let (ids, t) = exact(&c, q, owner_of(i, owners), tag).await;
            s.push(t, 1.0, ids.len());
            truths.push(ids);
        }
        truth.push(truths);
        exact_scoped.push(s);
    }
    let RawSessions {
        relaxed, all, ef, off, ..
    } = raw_sessions(&a.dsn, queries, truth_all).await;
    // What a user writes by hand for one tenant: the owner as a WHERE
    // clause; pgvector's iterative scan is on in case the planner walks the
    // graph (with a b-tree on the owner it reads the owner's rows instead).
    let raw_owner = relaxed
        .prepare(
            "SELECT id FROM bench_raw WHERE owner = $2 AND ($3::text IS NULL OR tags @> ARRAY[$3])
             ORDER BY embedding <=> $1 LIMIT 10",
        )
        .await
        .unwrap();
    // For context: raw unfiltered HNSW at pgvector's default ef_search 40,
    // which costs far less than the anchor at this size and misses more.
    let default_ef = connect(&a.dsn).await;
    default_ef.batch_execute("SET hnsw.ef_search = 40").await.unwrap();
    let all_40 = default_ef.prepare(RAW_ALL).await.unwrap();
    // engram on its own session with Postgres' defaults, as a client would.
    let e = connect(&a.dsn).await;
    let engram = e
        .prepare(
            "SELECT content FROM engram.search(owner => 'owner-' || $2::integer::text, query_embedding => $1,
                                               k => 10, tags_all => CASE WHEN $3::text IS NULL THEN NULL ELSE ARRAY[$3] END)",
        )
        .await
        .unwrap();

    progress("warming caches");
    for (i, q) in queries.iter().enumerate().take(50) {
        off.query(&all, &[q]).await.unwrap();
        default_ef.query(&all_40, &[q]).await.unwrap();
        for (tag, _) in SCOPES {
            let o = owner_of(i, owners);
            relaxed.query(&raw_owner, &[q, &o, &tag]).await.unwrap();
            e.query(&engram, &[q, &o, &tag]).await.unwrap();
        }
    }

    // Two rounds, every measurement of a query back to back, the order
    // rotating from query to query (as the one-owner measurement does).
    progress("measuring search (two rounds, raw and engram interleaved)");
    #[derive(Clone, Copy)]
    enum Task {
        RawAll,
        RawAll40,
        RawOwner(usize),
        Engram(usize),
    }
    let mut tasks = vec![Task::RawAll, Task::RawAll40];
    for s in 0..SCOPES.len() {
        tasks.extend([Task::RawOwner(s), Task::Engram(s)]);
    }
    let mut raw = Samples::default();
    let mut raw_40 = Samples::default();
    let mut scoped: Vec<[Samples; 2]> = SCOPES.iter().map(|_| Default::default()).collect();
    for round in 0..2 {
        for (i, (q, truth_all)) in queries.iter().zip(truth_all).enumerate() {
            let o = owner_of(i, owners);
            let mut order = tasks.clone();
            order.rotate_left((i + round) % tasks.len());
            for task in order {
                let t = Instant::now();
                let (ids, samples, truth): (Vec<i64>, &mut Samples, &[i64]) = match task {
                    Task::RawAll => {
                        let rows = off.query(&all, &[q]).await.unwrap();
                        (rows.iter().map(|r| r.get(0)).collect(), &mut raw, truth_all)
                    }
                    Task::RawAll40 => {
                        let rows = default_ef.query(&all_40, &[q]).await.unwrap();
                        (rows.iter().map(|r| r.get(0)).collect(), &mut raw_40, truth_all)
                    }
                    Task::RawOwner(s) => {
                        let rows = relaxed.query(&raw_owner, &[q, &o, &SCOPES[s].0]).await.unwrap();
                        (rows.iter().map(|r| r.get(0)).collect(), &mut scoped[s][0], &truth[s][i])
                    }
                    Task::Engram(s) => {
                        let rows = e.query(&engram, &[q, &o, &SCOPES[s].0]).await.unwrap();
                        (engram_ids(rows), &mut scoped[s][1], &truth[s][i])
                    }
                };
                let el = t.elapsed();
                samples.push(el, recall(&ids, truth), ids.len());
            }
        }
    }

    let baseline = raw.p50();
    let mut table = vec![
        Row {
            name: format!("raw pgvector HNSW, all owners, no filter (ef_search {})", ef.0),
            samples: raw,
        },
        Row {
            name: "raw pgvector HNSW, all owners, no filter, pgvector's default ef_search 40 (for context)".into(),
            samples: raw_40,
        },
        Row {
            name: "exact scan, all owners, no filter".into(),
            samples: exact_all,
        },
    ];
    for ((_, label), ([by_hand, engram], exact)) in SCOPES.iter().zip(scoped.into_iter().zip(exact_scoped)) {
        table.extend([
            Row {
                name: format!("raw pgvector, {label} as WHERE (b-tree on owner)"),
                samples: by_hand,
            },
            Row {
                name: format!("exact scan, {label}"),
                samples: exact,
            },
            Row {
                name: format!("**engram.search, {label}**"),
                samples: engram,
            },
        ]);
    }
    println!();
    println!(
        "## engram-bench, multi-tenant: {} × {} over {owners} owners (about {} each; Gaussian mixture, {} centroids, σ={}), {} queries, each on one owner, k=10",
        a.rows,
        a.dims,
        a.rows / owners as usize,
        a.centroids,
        a.sigma,
        a.queries
    );
    println!();
    println!(
        "raw baseline: unfiltered HNSW over all {} rows at ef_search {} (recall@10 {:.3}; the smallest reaching 0.95); both HNSW indexes built with {}",
        a.rows,
        ef.0,
        ef.1,
        hnsw_label(a)
    );
    println!();
    print_search_table(&table, baseline);
}
