//! `--restore-only`: how long the loaded memories take to come back from a
//! logical backup (docs/BACKUP.md). Dumps engram's tables with pg_dump
//! (directory format), restores them with pg_restore into a new database
//! on one job and on two, and checks that every memory came back and that
//! engram finished the restore (the checks, the HNSW build and the derived
//! data are part of the time). The bench's raw pgvector tables are left
//! out of the dump.

use std::process::Command;
use std::time::Instant;
use tokio_postgres::{Client, Config};

/// pg_dump, pg_restore and psql of the server the bench runs against.
fn tool(program: &str) -> String {
    match std::env::var("ENGRAM_PG_BIN") {
        Ok(bin) => format!("{bin}/{program}"),
        Err(_) => program.to_string(),
    }
}

/// -h, -p, -U of the bench's connection string.
fn connection_args(dsn: &str) -> Vec<String> {
    let cfg: Config = dsn.parse().expect("the bench's connection string");
    let mut args = Vec::new();
    if let Some(host) = cfg.get_hosts().first() {
        args.push("-h".to_string());
        args.push(match host {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        });
    }
    if let Some(port) = cfg.get_ports().first() {
        args.extend(["-p".to_string(), port.to_string()]);
    }
    if let Some(user) = cfg.get_user() {
        args.extend(["-U".to_string(), user.to_string()]);
    }
    args
}

fn run(program: &str, dsn: &str, args: &[&str]) -> f64 {
    let started = Instant::now();
    let out = Command::new(tool(program))
        .args(connection_args(dsn))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    started.elapsed().as_secs_f64()
}

pub async fn run_restore(c: &Client, dsn: &str, rows: usize) {
    let source: String = c.query_one("SELECT current_database()", &[]).await.unwrap().get(0);
    let memories: i64 = c
        .query_one("SELECT count(*) FROM engram.memories", &[])
        .await
        .unwrap()
        .get(0);
    let dir = std::env::temp_dir().join(format!("engram-bench-dump-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.display().to_string();
    crate::progress(&format!("pg_dump -Fd of {memories} memories"));
    let dumped = run("pg_dump", dsn, &["-Fd", "-T", "public.*", "-f", &path, "-d", &source]);
    let size: u64 = std::fs::read_dir(&dir)
        .map(|d| d.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0);
    println!(
        "\n### Restore of {memories} memories ({rows} rows loaded; dump {:.0} MB)\n",
        size as f64 / 1e6
    );
    println!("| step | seconds |");
    println!("|---|---:|");
    println!("| `pg_dump -Fd` | {dumped:.1} |");
    let target = format!("{source}_restored");
    let psql = |sql: String| run("psql", dsn, &["-X", "-q", "-d", "postgres", "-c", &sql]);
    for jobs in ["1", "2"] {
        psql(format!("DROP DATABASE IF EXISTS {target}"));
        psql(format!("CREATE DATABASE {target}"));
        crate::progress(&format!("pg_restore --jobs {jobs}"));
        let took = run("pg_restore", dsn, &["--jobs", jobs, "-d", &target, &path]);
        let mut cfg: Config = dsn.parse().unwrap();
        cfg.dbname(&target);
        let (restored, conn) = cfg
            .connect(tokio_postgres::NoTls)
            .await
            .expect("connect to the restored database");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let row = restored
            .query_one(
                "SELECT (SELECT count(*) FROM engram.memories), (SELECT count(*) FROM engram.restore_loads)",
                &[],
            )
            .await
            .unwrap();
        let (back, loading): (i64, i64) = (row.get(0), row.get(1));
        assert_eq!(back, memories, "memories lost in the restore");
        assert_eq!(loading, 0, "the restore did not finish");
        println!("| `pg_restore --jobs {jobs}` (loads, checks, HNSW build, derived data) | {took:.1} |");
        drop(restored);
    }
    psql(format!("DROP DATABASE IF EXISTS {target}"));
    let _ = std::fs::remove_dir_all(&dir);
}
