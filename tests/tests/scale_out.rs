//! The preconditions of running engram on Citus (docs/SCALING.md), checked on
//! the catalog of a fresh single-node install (tests/tests/citus.rs runs
//! engram on a real Citus cluster):
//!
//! * every public function is routable by owner (its first argument is
//!   `owner`) or is listed in docs/SCALING.md under one of the other kinds
//!   (ghost reads, database-wide jobs, reference-table functions, pure
//!   functions): a new function fails here until someone decides how it
//!   runs on a cluster;
//! * every table is either owner-scoped (an `owner` column) or one of the
//!   reference tables the document names;
//! * Citus requires every primary key, unique index and foreign key of a
//!   distributed table to include the distribution column: every one of
//!   engram's does (since 0.8.0), and a new table that breaks the rule
//!   fails here before it fails in `engram.distribute()`.

use engram_tests::*;
use std::collections::BTreeSet;

/// docs/SCALING.md, read at run time from this checkout.
fn scaling_md() -> String {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("run under cargo test");
    std::fs::read_to_string(format!("{dir}/../docs/SCALING.md")).expect("docs/SCALING.md")
}

/// The backquoted names in the rows of the markdown table under `heading`
/// whose first cell is `kind` (a row: `| kind | `a`, `b` | why |`).
fn listed(doc: &str, heading: &str, kind: &str) -> BTreeSet<String> {
    let section = doc
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("docs/SCALING.md has a '{heading}' section"));
    let section = section.split("\n## ").next().unwrap();
    let mut names = BTreeSet::new();
    for line in section.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() > 3 && cells[1] == kind {
            for part in cells[2].split('`').skip(1).step_by(2) {
                names.insert(part.trim_end_matches("()").to_string());
            }
        }
    }
    assert!(!names.is_empty(), "'{heading}' lists nothing under '{kind}'");
    names
}

async fn set(c: &tokio_postgres::Client, sql: &str) -> BTreeSet<String> {
    column::<String>(c, sql).await.into_iter().collect()
}

#[tokio::test]
async fn every_public_function_is_owner_first_or_classified() {
    let db = TestDb::new(4).await;
    let doc = scaling_md();
    let not_owner_first = set(
        &db.admin,
        "SELECT DISTINCT p.proname::text FROM pg_proc p
             WHERE p.pronamespace = 'engram'::regnamespace AND p.proname !~ '^_'
               AND coalesce(p.proargnames[1], '') <> 'owner'",
    )
    .await;
    let heading = "## Functions";
    let mut classified = BTreeSet::new();
    for kind in [
        "ghost read",
        "database-wide job",
        "reference tables",
        "coordinator configuration",
        "pure",
    ] {
        classified.extend(listed(&doc, heading, kind));
    }
    let unclassified: Vec<_> = not_owner_first.difference(&classified).collect();
    assert!(
        unclassified.is_empty(),
        "public functions that neither take owner first nor are classified in docs/SCALING.md: {unclassified:?}"
    );
    let stale: Vec<_> = classified.difference(&not_owner_first).collect();
    assert!(
        stale.is_empty(),
        "docs/SCALING.md classifies functions that take owner first or do not exist: {stale:?}"
    );
    // The owner-first functions really take it first (not merely a
    // parameter called owner somewhere): a text first argument.
    let bad: Vec<String> = column(
        &db.admin,
        "SELECT p.oid::regprocedure::text FROM pg_proc p
             WHERE p.pronamespace = 'engram'::regnamespace AND p.proname !~ '^_'
               AND p.proargnames[1] = 'owner' AND p.proargtypes[0] <> 'text'::regtype",
    )
    .await;
    assert!(bad.is_empty(), "owner must be text: {bad:?}");
}

#[tokio::test]
async fn tables_are_distributed_or_reference_and_every_key_starts_with_owner() {
    let db = TestDb::new(4).await;
    let doc = scaling_md();
    let tables = set(
        &db.admin,
        "SELECT c.relname::text FROM pg_class c WHERE c.relnamespace = 'engram'::regnamespace AND c.relkind = 'r'",
    )
    .await;
    let owner_scoped = set(
        &db.admin,
        "SELECT c.relname::text FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
             WHERE c.relnamespace = 'engram'::regnamespace AND c.relkind = 'r'
               AND a.attname = 'owner' AND NOT a.attisdropped",
    )
    .await;
    // What engram.distribute() distributes and replicates, and what the
    // document says, are the schema's tables.
    let distributed = set(&db.admin, "SELECT unnest(engram._distributed_tables())").await;
    let reference = set(&db.admin, "SELECT unnest(engram._reference_tables())").await;
    assert_eq!(
        listed(&doc, "## Tables", "distributed"),
        distributed,
        "docs/SCALING.md vs engram._distributed_tables()"
    );
    assert_eq!(
        listed(&doc, "## Tables", "reference"),
        reference,
        "docs/SCALING.md vs engram._reference_tables()"
    );
    let local = set(&db.admin, "SELECT unnest(engram._local_tables())").await;
    assert_eq!(
        listed(&doc, "## Tables", "local"),
        local,
        "docs/SCALING.md vs engram._local_tables()"
    );
    let mut all = reference.clone();
    all.extend(distributed.iter().cloned());
    all.extend(local.iter().cloned());
    assert_eq!(
        all, tables,
        "engram._distributed_tables(), _reference_tables() and _local_tables() must name every table"
    );
    let not_owner_scoped: BTreeSet<_> = distributed.difference(&owner_scoped).cloned().collect();
    assert!(
        not_owner_scoped.is_empty(),
        "distributed tables without an owner column: {not_owner_scoped:?}"
    );

    // Citus: every primary key and unique index of a distributed table
    // includes the distribution column, and so does every foreign key
    // between distributed tables.
    let narrow_keys = set(
        &db.admin,
        "SELECT DISTINCT c.relname::text || ' ' || i.indexrelid::regclass::text FROM pg_index i
             JOIN pg_class c ON c.oid = i.indrelid
             WHERE c.relnamespace = 'engram'::regnamespace AND i.indisunique
               AND c.relname <> ALL (engram._reference_tables() || engram._local_tables())
               AND NOT EXISTS (SELECT 1 FROM pg_attribute a
                               WHERE a.attrelid = c.oid AND a.attname = 'owner' AND a.attnum = ANY (i.indkey))",
    )
    .await;
    assert!(narrow_keys.is_empty(), "unique keys without owner: {narrow_keys:?}");
    let narrow_fks = set(
        &db.admin,
        "SELECT x.conname::text FROM pg_constraint x
             WHERE x.connamespace = 'engram'::regnamespace AND x.contype = 'f'
               AND NOT EXISTS (SELECT 1 FROM pg_attribute a
                               WHERE a.attrelid = x.conrelid AND a.attname = 'owner' AND a.attnum = ANY (x.conkey))",
    )
    .await;
    assert!(narrow_fks.is_empty(), "foreign keys without owner: {narrow_fks:?}");
}

/// engram.distribute() refuses, changing nothing, where Citus is not
/// installed and for anyone but a superuser (tests/tests/citus.rs runs it
/// on a real cluster).
#[tokio::test]
async fn distribute_refuses_without_citus_and_for_the_restricted_role() {
    let db = TestDb::new(4).await;
    let (code, msg) = sqlstate(db.admin.query_one("SELECT engram.distribute()", &[]).await);
    assert_eq!(code, "55000", "{msg}");
    assert!(msg.contains("CREATE EXTENSION citus"), "{msg}");
    let (code, msg) = sqlstate(
        db.admin
            .query_one("SELECT engram.distribute(shard_count => 0)", &[])
            .await,
    );
    assert_eq!(code, "55000", "citus is checked first: {msg}");
    let app = db.agent("alice").await;
    let (code, msg) = sqlstate(app.client.query_one("SELECT engram.distribute()", &[]).await);
    assert_eq!(code, "42501", "{msg}");
    let audited: i64 = count(&db, "SELECT count(*) FROM engram.audit_log WHERE action = 'distribute'").await;
    assert_eq!(audited, 0);
}
