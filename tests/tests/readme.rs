//! The README's 30-second SQL session works exactly as printed: this test
//! runs that block through psql, in a fresh database, and checks its output.

use std::process::Command;

fn readme_session() -> String {
    // The checkout's path at run time (cargo test sets it): a path fixed at
    // compile time names whichever clone built the shared target directory.
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("run under cargo test");
    let readme = std::fs::read_to_string(format!("{dir}/../README.md")).expect("README.md");
    let section = readme
        .split("## A 30-second SQL session")
        .nth(1)
        .expect("README has the SQL session section");
    let start = section.find("```sql\n").expect("sql block") + "```sql\n".len();
    let end = section[start..].find("```").expect("end of sql block");
    section[start..start + end].to_string()
}

/// Runs psql on `db` with `input` on standard input (so that meta-commands
/// such as \gset work), stopping at the first error.
fn psql(db: &str, input: &str) -> (bool, String) {
    use std::io::Write;
    let host = std::env::var("ENGRAM_TEST_HOST").expect("run through scripts/test");
    let port = std::env::var("ENGRAM_TEST_PORT").expect("run through scripts/test");
    let mut child = Command::new("psql")
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

#[test]
fn readme_sql_session_runs_as_printed() {
    let db = format!("readme_{}", std::process::id());
    assert!(psql("postgres", &format!("DROP DATABASE IF EXISTS {db}")).0);
    assert!(psql("postgres", &format!("CREATE DATABASE {db}")).0);
    let (ok, text) = psql(&db, &readme_session());
    assert!(ok, "the README session failed:\n{text}");
    for expected in [
        " created ",
        " duplicate ",
        " conflict ",
        "Alice drinks green tea every morning",
        "The deploy failed with ERR-4521",
        "she switched",
        "Alice drinks oolong tea every morning",
    ] {
        assert!(
            text.contains(expected),
            "README session output lacks {expected:?}:\n{text}"
        );
    }
    // the hybrid search ranks the exact-token event first
    let hybrid = text.split("similarity | score").nth(1).expect("search output");
    let first = hybrid.lines().nth(2).unwrap_or_default();
    assert!(first.contains("ERR-4521"), "first hit: {first}\n{text}");
    let _ = psql("postgres", &format!("DROP DATABASE {db}"));
}
