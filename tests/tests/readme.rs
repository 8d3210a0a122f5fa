//! The README's 30-second SQL session works exactly as printed: this test
//! runs that block through psql, in a fresh database, and checks its output.

use engram_tests::{psql, sql_block};

#[test]
fn readme_sql_session_runs_as_printed() {
    let db = format!("readme_{}", std::process::id());
    assert!(psql("postgres", &format!("DROP DATABASE IF EXISTS {db}")).0);
    assert!(psql("postgres", &format!("CREATE DATABASE {db}")).0);
    let (ok, text) = psql(&db, &sql_block("README.md", "## A 30-second SQL session"));
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
