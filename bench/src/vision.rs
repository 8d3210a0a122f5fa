//! vision_search against raw pgvector: one owner with 1,000 and
//! one with 10,000 images, each with a 512-dimension embedding from a
//! Gaussian mixture (CLIP's dimension), searched exactly by both: engram's
//! `vision_search` (binding, checks, the owner's rows) and a plain
//! `ORDER BY embedding <=> q LIMIT 10` over raw tables holding the same
//! vectors: one as a user would create it (pgvector's default storage, which
//! moves a 512-dimension vector, 2 KiB, out of line into TOAST) and one
//! with `SET STORAGE PLAIN`, as engram stores them. Images are stored through `image_put` and `vision_embed`, as
//! engram-mcp stores them; their bytes are small (a PNG signature and a
//! number), which does not matter to a search that never reads them.

use crate::data::Mixture;
use crate::progress;
use crate::stats::Samples;
use pgvector::Vector;
use std::time::Instant;
use tokio_postgres::Client;

const DIMS: usize = 512;
const SIZES: [usize; 2] = [1_000, 10_000];

fn owner(n: usize) -> String {
    format!("bench-vision-{n}")
}

/// Loads both owners' images (skipped when they are there already).
async fn load(c: &Client) {
    c.batch_execute(
        "CREATE TABLE IF NOT EXISTS bench_images_raw (owner text, id bigint, embedding vector(512));
         CREATE INDEX IF NOT EXISTS bench_images_raw_owner ON bench_images_raw (owner);
         CREATE TABLE IF NOT EXISTS bench_images_plain (owner text, id bigint, embedding vector(512));
         ALTER TABLE bench_images_plain ALTER COLUMN embedding SET STORAGE PLAIN;
         CREATE INDEX IF NOT EXISTS bench_images_plain_owner ON bench_images_plain (owner)",
    )
    .await
    .unwrap();
    let mut mix = Mixture::new(11, DIMS, 100, 0.05);
    for n in SIZES {
        let o = owner(n);
        let have: i64 = c
            .query_one(
                "SELECT least((SELECT count(*) FROM engram.image_embeddings WHERE owner = $1),
                              (SELECT count(*) FROM bench_images_plain WHERE owner = $1))",
                &[&o],
            )
            .await
            .unwrap()
            .get(0);
        if have == n as i64 {
            continue;
        }
        progress(&format!("loading {n} images for vision_search"));
        c.batch_execute(&format!(
            "SELECT engram.erase_owner(owner => '{o}'); DELETE FROM bench_images_raw WHERE owner = '{o}';
             DELETE FROM bench_images_plain WHERE owner = '{o}'"
        ))
        .await
        .unwrap();
        let put = c
            .prepare("SELECT engram.vision_embed(owner => $1, sha256 => engram.image_put(owner => $1, data => $2, mime => 'image/png'), embedding => $3, model => 'bench')")
            .await
            .unwrap();
        let raw = c
            .prepare("INSERT INTO bench_images_raw VALUES ($1, $2, $3)")
            .await
            .unwrap();
        let plain = c
            .prepare("INSERT INTO bench_images_plain VALUES ($1, $2, $3)")
            .await
            .unwrap();
        c.batch_execute("BEGIN").await.unwrap();
        for i in 0..n {
            let mut data = b"\x89PNG\r\n\x1a\n".to_vec();
            data.extend_from_slice(format!("bench image {n}-{i}").as_bytes());
            let v = Vector::from(mix.sample());
            c.execute(&put, &[&o, &data, &v]).await.unwrap();
            c.execute(&raw, &[&o, &(i as i64), &v]).await.unwrap();
            c.execute(&plain, &[&o, &(i as i64), &v]).await.unwrap();
        }
        c.batch_execute(
            "COMMIT; ANALYZE engram.image_embeddings; ANALYZE bench_images_raw; ANALYZE bench_images_plain",
        )
        .await
        .unwrap();
    }
}

/// Measures and prints the vision_search table.
pub async fn run(c: &Client, queries: usize) {
    load(c).await;
    progress("measuring vision_search");
    let engram = c
        .prepare("SELECT count(*) FROM engram.vision_search(owner => $1, query_embedding => $2, k => 10)")
        .await
        .unwrap();
    let top10 = |table: &str| {
        format!("SELECT count(*) FROM (SELECT id FROM {table} WHERE owner = $1 ORDER BY embedding <=> $2 LIMIT 10) top")
    };
    let raw = c.prepare(&top10("bench_images_raw")).await.unwrap();
    let plain = c.prepare(&top10("bench_images_plain")).await.unwrap();
    let mut qmix = Mixture::new(11, DIMS, 100, 0.05).reseed(5);
    let qs: Vec<Vector> = (0..queries).map(|_| Vector::from(qmix.sample())).collect();
    println!(
        "| vision search, exact, k=10 | images | raw pgvector p50 ms (default storage) | raw, STORAGE PLAIN | engram.vision_search | ratio to raw | ratio to raw PLAIN |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for n in SIZES {
        let o = owner(n);
        let (mut r, mut p, mut e) = (Samples::default(), Samples::default(), Samples::default());
        for q in &qs {
            for (st, samples) in [(&raw, &mut r), (&plain, &mut p), (&engram, &mut e)] {
                let t = Instant::now();
                let got: i64 = c.query_one(st, &[&o, q]).await.unwrap().get(0);
                samples.push(t.elapsed(), 1.0, got as usize);
                assert_eq!(got, 10);
            }
        }
        let (r, p, e) = (r.p50(), p.p50(), e.p50());
        println!(
            "| one owner's images | {n} | {r:.2} | {p:.2} | {e:.2} | {:.2}x | {:.2}x |",
            e / r,
            e / p
        );
    }
}
