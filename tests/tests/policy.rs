//! The mode policy of captured events, as SQL sees it (docs/CONTINUITY.md):
//! the same rules as engram-core's unit tests, through the extension's
//! bindings.

use engram_tests::*;

#[tokio::test]
async fn the_mode_policy_in_sql() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let written: Vec<String> = c
        .query(
            "SELECT e FROM unnest(ARRAY['conversation', 'tool_invocation', 'file_read', 'file_write',
                                        'code_approval', 'code_rejection', 'observation', 'summary']) e
             WHERE engram.can_write(mode => 'agent', event_type => e) ORDER BY e",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        written,
        [
            "code_approval",
            "code_rejection",
            "file_write",
            "summary",
            "tool_invocation"
        ]
    );
    let row = c
        .query_one(
            "SELECT engram.can_write('dual', 'file_read'), engram.can_write('emulation', 'summary'),
                    engram.should_capture_tool('agent', 'conversational_response'),
                    engram.should_capture_tool('agent', 'run_tests'),
                    engram.context_depth('dual'), engram.context_depth('agent', 'owner'),
                    engram.context_depth('emulation'), engram.context_depth('dual', role => 'guest')",
            &[],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0) && !row.get::<_, bool>(1));
    assert!(!row.get::<_, bool>(2) && row.get::<_, bool>(3));
    let depths: Vec<i32> = (4..8).map(|i| row.get(i)).collect();
    assert_eq!(depths, [12, 6, 3, 2]);
    for sql in [
        "SELECT engram.can_write('turbo', 'summary')",
        "SELECT engram.can_write('dual', 'dream')",
        "SELECT engram.context_depth('dual', 'admin')",
    ] {
        let (code, msg) = sqlstate(c.query(sql, &[]).await);
        assert_eq!(code, "22023", "{sql}: {msg}");
        assert!(msg.contains("use one of"), "{msg}");
    }
}
