//! The MCP round trip of memory_recall against the same SQL call, and the
//! local embedder's throughput. engram-mcp is started here in stateless JSON
//! mode on loopback, logged in as the restricted role engram_mcp, and called
//! with a user token of the bench owner (revoked afterwards).

use crate::stats::Samples;
use engram_embed::cosine;
use engram_embed::local::LocalEmbedder;
use engram_embed::onnx::OnnxEmbedder;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio_postgres::Client;

const SENTENCE: &str = "The quarterly deployment of the payment service failed because the database migration \
                        timed out after ten minutes";

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `tools/call` as a stateless JSON client sends it to engram-mcp.
fn call_tool(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    name: &str,
    arguments: serde_json::Value,
) -> impl std::future::Future<Output = reqwest::Result<reqwest::Response>> {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}});
    http.post(format!("{base}/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-06-18")
        .bearer_auth(token)
        .json(&body)
        .send()
}

/// Prints the MCP vs SQL recall table.
pub async fn recall_round_trip(
    c: &Client,
    dsn: &str,
    bin: &Path,
    model_dir: &Path,
    onnx_runtime: &Path,
    owner: &str,
    n: usize,
) {
    c.batch_execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'engram_mcp') THEN
             CREATE ROLE engram_mcp LOGIN IN ROLE engram_agent; END IF; END $$",
    )
    .await
    .unwrap();
    let token: String = c
        .query_one(
            "SELECT engram.create_token(owner => $1, label => 'engram-bench')",
            &[&owner],
        )
        .await
        .unwrap()
        .get(0);
    let port = free_port();
    let child = Command::new(bin)
        .args(["serve", "--stateless", "--listen", &format!("127.0.0.1:{port}")])
        // the last `user` wins: engram-mcp refuses to log in as a superuser
        .env("ENGRAM_DATABASE_URL", format!("{dsn} user=engram_mcp"))
        .env("ENGRAM_MODEL_DIR", model_dir)
        .env("ENGRAM_ONNX_RUNTIME", onnx_runtime)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {} ({e}); build it with cargo build --release -p engram-mcp",
                bin.display()
            )
        });
    let _server = Server(child);
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let mut healthy = false;
    for _ in 0..240 {
        if http
            .get(format!("{base}/health"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            healthy = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(healthy, "engram-mcp did not become healthy");
    let id: uuid::Uuid = c
        .query_one("SELECT id FROM engram.memories WHERE owner = $1 LIMIT 1", &[&owner])
        .await
        .unwrap()
        .get(0);
    let sql = c
        .prepare("SELECT * FROM engram.recall(owner => $1, id => $2)")
        .await
        .unwrap();
    let post = || {
        call_tool(
            &http,
            &base,
            &token,
            "memory_recall",
            serde_json::json!({"id": id.to_string()}),
        )
    };
    for _ in 0..50 {
        c.query(&sql, &[&owner, &id]).await.unwrap();
        let r = post().await.unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        assert!(status.is_success(), "memory_recall over MCP failed: {status}: {text}");
    }
    let (mut direct, mut mcp) = (Samples::default(), Samples::default());
    for _ in 0..n {
        let t = Instant::now();
        c.query(&sql, &[&owner, &id]).await.unwrap();
        direct.push(t.elapsed(), 1.0, 1);
        let t = Instant::now();
        let text = post().await.unwrap().text().await.unwrap();
        mcp.push(t.elapsed(), 1.0, 1);
        assert!(text.contains("\"memory\""), "unexpected reply: {text}");
    }
    println!("| recall path | p50 ms | p95 ms |");
    println!("|---|---:|---:|");
    println!(
        "| SQL `engram.recall` (prepared, Unix socket) | {:.3} | {:.3} |",
        direct.p50(),
        direct.p95()
    );
    println!(
        "| **MCP `memory_recall`** (HTTP, stateless JSON, token check + bind) | {:.3} | {:.3} |",
        mcp.p50(),
        mcp.p95()
    );
    println!("| difference | {:+.3} | |", mcp.p50() - direct.p50());

    // The write paths over MCP: memory_capture stores without an embedding
    // (the background embedder does it later), memory_remember embeds first.
    let tool = |name: &str, arguments: serde_json::Value| call_tool(&http, &base, &token, name, arguments);
    let (mut capture, mut remember) = (Samples::default(), Samples::default());
    for i in 0..n {
        let calls = [
            (
                &mut capture,
                "memory_capture",
                serde_json::json!({"event_type": "tool_invocation", "tool_name": "bench", "success": true,
                                   "session_id": "bench-mcp", "content": format!("bench mcp capture {i}: the build passed")}),
                "captured",
            ),
            (
                &mut remember,
                "memory_remember",
                serde_json::json!({"kind": "episodic", "content": format!("bench mcp remember {i}: the build passed")}),
                "created",
            ),
        ];
        for (samples, name, arguments, expect) in calls {
            let t = Instant::now();
            let text = tool(name, arguments).await.unwrap().text().await.unwrap();
            samples.push(t.elapsed(), 1.0, 1);
            assert!(text.contains(expect), "unexpected reply to {name}: {text}");
        }
    }
    println!();
    println!("| MCP write path, local model | p50 ms | p95 ms |");
    println!("|---|---:|---:|");
    println!(
        "| **`memory_capture`** (stored, embedded in the background) | {:.3} | {:.3} |",
        capture.p50(),
        capture.p95()
    );
    println!(
        "| `memory_remember` (embedded before the write) | {:.3} | {:.3} |",
        remember.p50(),
        remember.p95()
    );
    println!();
    concurrent_load(&http, &base, &token, id, Duration::from_secs(10)).await;
    c.batch_execute("DELETE FROM engram.memories WHERE content LIKE 'bench mcp %'")
        .await
        .unwrap();
    c.query_one(
        "SELECT engram.revoke_token(label => 'engram-bench', owner => $1)",
        &[&owner],
    )
    .await
    .unwrap();
}

/// 16 concurrent clients (what tests/mcp/test_load.py runs for a minute),
/// each calling memory_search, memory_remember and memory_recall in turn for
/// `duration`: latency per tool and calls per second, all on this machine's
/// two cores (the embedder, engram-mcp and Postgres share them).
async fn concurrent_load(http: &reqwest::Client, base: &str, token: &str, id: uuid::Uuid, duration: Duration) {
    const CLIENTS: usize = 16;
    const TOOLS: [&str; 3] = ["memory_search", "memory_remember", "memory_recall"];
    let stop = Instant::now() + duration;
    let started = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let (http, base, token) = (http.clone(), base.to_string(), token.to_string());
            tokio::spawn(async move {
                let mut samples: Vec<Samples> = TOOLS.iter().map(|_| Samples::default()).collect();
                let mut errors = 0usize;
                let mut i = 0usize;
                while Instant::now() < stop {
                    let k = i % TOOLS.len();
                    let arguments = match k {
                        0 => serde_json::json!({"query": format!("what failed in deploy {}?", i % 50)}),
                        1 => serde_json::json!({"kind": "episodic",
                                                "content": format!("bench mcp load {n}-{i}: deploy {} passed", i % 50)}),
                        _ => serde_json::json!({"id": id.to_string()}),
                    };
                    let t = Instant::now();
                    let reply = call_tool(&http, &base, &token, TOOLS[k], arguments).await;
                    let ok = match reply {
                        Ok(r) if r.status().is_success() => {
                            !r.text().await.unwrap_or_default().contains("\"isError\":true")
                        }
                        _ => false,
                    };
                    samples[k].push(t.elapsed(), 1.0, 1);
                    errors += usize::from(!ok);
                    i += 1;
                }
                (samples, errors)
            })
        })
        .collect();
    let mut all: Vec<Samples> = TOOLS.iter().map(|_| Samples::default()).collect();
    let mut errors = 0;
    for t in tasks {
        let (samples, e) = t.await.unwrap();
        errors += e;
        for (into, from) in all.iter_mut().zip(samples) {
            into.latencies.extend(from.latencies);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let calls: usize = all.iter().map(|s| s.latencies.len()).sum();
    println!(
        "| {CLIENTS} concurrent MCP clients, {:.0} s | calls | calls/s | p50 ms | p99 ms |",
        duration.as_secs_f64()
    );
    println!("|---|---:|---:|---:|---:|");
    for (name, s) in TOOLS.iter().zip(&all) {
        println!(
            "| `{name}` | {} | {:.0} | {:.2} | {:.2} |",
            s.latencies.len(),
            s.latencies.len() as f64 / elapsed,
            s.p50(),
            s.p99()
        );
    }
    println!(
        "| **all** ({errors} errors) | {calls} | {:.0} | | |",
        calls as f64 / elapsed
    );
}

/// Latency and throughput of one embedding function.
struct EmbedTiming {
    p50_ms: f64,
    single_rate: f64,
    batch_rate: f64,
}

fn time_embedder(embed: &dyn Fn(&[String]) -> Vec<Vec<f32>>) -> EmbedTiming {
    let one = vec![SENTENCE.to_string()];
    for _ in 0..5 {
        embed(&one);
    }
    let mut single = Samples::default();
    for _ in 0..100 {
        let t = Instant::now();
        embed(&one);
        single.push(t.elapsed(), 1.0, 1);
    }
    let batch: Vec<String> = (0..32).map(|i| format!("{SENTENCE} (case {i})")).collect();
    embed(&batch);
    let rounds = 10;
    let t = Instant::now();
    for _ in 0..rounds {
        embed(&batch);
    }
    EmbedTiming {
        p50_ms: single.p50(),
        single_rate: single.latencies.len() as f64 / single.latencies.iter().map(|d| d.as_secs_f64()).sum::<f64>(),
        batch_rate: (rounds * batch.len()) as f64 / t.elapsed().as_secs_f64(),
    }
}

/// Prints the local embedders' latency and throughput (int8 ONNX, the
/// default, and the f32 reference), and how far the int8 vectors are from
/// the reference on the retrieval set's sentences.
pub fn embedder_throughput(int8: &OnnxEmbedder, model_dir: &Path, texts: &[String]) {
    let f32 = LocalEmbedder::load(model_dir).expect("local f32 model (run scripts/setup)");
    let fast = time_embedder(&|t| int8.embed_blocking(t).unwrap());
    let reference = time_embedder(&|t| f32.embed_blocking(t).unwrap());
    println!("| local embedder (all-MiniLM-L6-v2, CPU) | int8, ONNX Runtime (default) | f32, candle (reference) |");
    println!("|---|---:|---:|");
    println!(
        "| p50 latency, one 20-word sentence | {:.2} ms | {:.2} ms |",
        fast.p50_ms, reference.p50_ms
    );
    println!(
        "| throughput, one sentence per call | {:.0} sentences/s | {:.0} sentences/s |",
        fast.single_rate, reference.single_rate
    );
    println!(
        "| throughput, batches of 32 | {:.0} sentences/s | {:.0} sentences/s |",
        fast.batch_rate, reference.batch_rate
    );
    let a = int8.embed_blocking(texts).unwrap();
    let b = f32.embed_blocking(texts).unwrap();
    let same: Vec<f32> = a.iter().zip(&b).map(|(x, y)| cosine(x, y)).collect();
    let mut worst_pair = 0f32;
    for i in 0..texts.len() {
        for j in i + 1..texts.len() {
            worst_pair = worst_pair.max((cosine(&a[i], &a[j]) - cosine(&b[i], &b[j])).abs());
        }
    }
    println!();
    println!(
        "| int8 against f32, {} sentences of the retrieval set | value |",
        texts.len()
    );
    println!("|---|---:|");
    println!(
        "| lowest cosine between a sentence's int8 and f32 vectors | {:.4} |",
        same.iter().cloned().fold(1.0, f32::min)
    );
    println!("| largest change of a pair's cosine (int8 vs f32) | {worst_pair:.4} |");
}
