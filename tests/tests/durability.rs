//! Every acknowledged write survives a crash of Postgres: remember in a burst,
//! SIGKILL the postmaster in the middle of it, restart, and find every write
//! that was acknowledged, and the packed scope lists still equal to a
//! recomputation from the memories (another session deletes rows while the
//! burst fills and splits their blocks). Runs its own throwaway cluster (initdb as the
//! postgres OS user) so that killing it disturbs no other test.

use engram_tests::ScratchCluster;
use std::process::Command;
use std::time::Duration;

/// engram preloaded, as scripts/lib.sh configures every cluster: the
/// superuser's own calls need it (docs/SECURITY.md).
const PRELOADED: &str = "-c shared_preload_libraries=engram";

#[tokio::test]
async fn acknowledged_writes_survive_kill_9_of_postgres() {
    // 65 above the suite's cluster (5499 on 15, 5699 on 17): each
    // version's run has its own range of ports.
    let cluster = ScratchCluster::new("crash", 65, true);
    assert!(cluster.try_start(PRELOADED), "postgres did not start");
    let c = cluster.connect("postgres").await;
    c.batch_execute("CREATE EXTENSION engram CASCADE; SELECT engram.configure(embedding_dims => 384)")
        .await
        .unwrap();
    let deleter_session = cluster.connect("postgres").await;

    // A writer records each acknowledged remember; the postmaster dies mid-burst.
    let writer = tokio::spawn(async move {
        let mut acknowledged = Vec::new();
        for i in 0..100_000 {
            let r = c
                .query_one(
                    "SELECT id FROM engram.remember(owner => 'alice', content => $1, kind => 'episodic',
                                                    embedding => (array_fill(1::real, ARRAY[382]) || ARRAY[$2::real, 3])::vector,
                                                    tags => ARRAY['t' || ($2::integer % 3)])",
                    &[&format!("event {i}"), &(i as f32)],
                )
                .await;
            match r {
                // the deleter below takes every fifth; the others must all survive
                Ok(row) if i % 5 != 0 => acknowledged.push(row.get::<_, uuid::Uuid>(0)),
                Ok(_) => {}
                // a raw DELETE and remember lock the owner's usage row and
                // list sizes in different orders: Postgres may break a
                // deadlock by failing one of them, which acknowledged nothing
                Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED) => {}
                Err(e) => {
                    eprintln!("the burst stopped at write {i}: {e}");
                    break;
                }
            }
        }
        acknowledged
    });
    // Deletes every fifth memory as it goes (a DBA's raw DELETE): entries
    // leave blocks, blocks left empty go, while the writer appends.
    let deleter = tokio::spawn(async move {
        loop {
            let deleted = deleter_session
                .execute(
                    "DELETE FROM engram.memories WHERE id IN (SELECT id FROM engram.memories
                      WHERE content LIKE 'event %' AND split_part(content, ' ', 2)::integer % 5 = 0 LIMIT 3)",
                    &[],
                )
                .await;
            match deleted {
                Err(e) if e.code() != Some(&tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED) => break,
                _ => {}
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let killed = Command::new("kill")
        .args(["-9", &cluster.postmaster_pid()])
        .status()
        .unwrap();
    assert!(killed.success());
    let acknowledged = tokio::time::timeout(Duration::from_secs(30), writer)
        .await
        .unwrap()
        .unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(30), deleter).await;
    assert!(
        acknowledged.len() > 10,
        "the burst was under way ({} writes)",
        acknowledged.len()
    );

    // Orphaned backends exit once they notice the postmaster is gone; until
    // then a new postmaster refuses to start (shared memory still in use).
    // postmaster.pid stays: its stale PID is how Postgres knows to recover.
    let mut started = false;
    for _ in 0..100 {
        if cluster.try_start(PRELOADED) {
            started = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(started, "postgres did not restart after the crash");
    let c = cluster.connect("postgres").await;
    // 18 entries per block at 384 dimensions: the burst filled many
    let blocks: i64 = c
        .query_one("SELECT count(*) FROM engram.scope_blocks", &[])
        .await
        .unwrap()
        .get(0);
    assert!(blocks > 3, "the burst filled several blocks ({blocks})");
    let drift: i64 = c.query_one(engram_tests::LIST_DRIFT, &[]).await.unwrap().get(0);
    assert_eq!(drift, 0, "the scope lists drifted from the memories in the crash");
    let stored: i64 = c
        .query_one(
            "SELECT count(*) FROM engram.memories WHERE id = ANY($1)",
            &[&acknowledged],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        stored as usize,
        acknowledged.len(),
        "acknowledged writes were lost in the crash"
    );
    let audited: i64 = c
        .query_one(
            "SELECT count(*) FROM engram.audit_log WHERE action = 'remember' AND memory_id = ANY($1)",
            &[&acknowledged],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        audited as usize,
        acknowledged.len(),
        "the audit log lost acknowledged writes"
    );
}
