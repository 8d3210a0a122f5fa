//! API tokens for engram-mcp: created once in plaintext, stored hashed,
//! resolved by the restricted role only through engram.authenticate.

use engram_tests::*;

#[tokio::test]
async fn tokens_are_returned_once_and_stored_hashed() {
    let db = TestDb::new(4).await;
    let c = &db.admin;
    let has: bool = c.query_one("SELECT engram.has_tokens()", &[]).await.unwrap().get(0);
    assert!(!has);
    let user: String = c
        .query_one("SELECT engram.create_token(owner => 'alice', label => 'laptop')", &[])
        .await
        .unwrap()
        .get(0);
    let platform: String = c
        .query_one(
            "SELECT engram.create_token(owner => 'agentbase', label => 'platform', platform => true)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(user.starts_with("eg_") && user.len() == 67, "{user}");
    assert_ne!(user, platform);
    let leaked = count(
        &db,
        &format!(
            "SELECT count(*) FROM engram.tokens t WHERE t::text LIKE '%{}%'",
            &user[3..]
        ),
    )
    .await;
    assert_eq!(leaked, 0, "the plaintext token is stored");
    let has: bool = c.query_one("SELECT engram.has_tokens()", &[]).await.unwrap().get(0);
    assert!(has);

    // the restricted role resolves tokens but cannot read or mint them
    let agent = db.agent_without_owner().await;
    let row = agent
        .query_one("SELECT owner, platform FROM engram.authenticate($1)", &[&user])
        .await
        .unwrap();
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, bool>(1)),
        ("alice".into(), false)
    );
    let row = agent
        .query_one("SELECT owner, platform FROM engram.authenticate($1)", &[&platform])
        .await
        .unwrap();
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, bool>(1)),
        ("agentbase".into(), true)
    );
    for bad in ["", "eg_nope", &user[..20]] {
        let n = agent
            .query("SELECT * FROM engram.authenticate($1)", &[&bad])
            .await
            .unwrap()
            .len();
        assert_eq!(n, 0, "{bad:?} authenticated");
    }
    let (code, _) = sqlstate(agent.query("SELECT * FROM engram.tokens", &[]).await);
    assert_eq!(code, "42501");
    let (code, _) = sqlstate(
        agent
            .query("SELECT engram.create_token(owner => 'alice', label => 'x')", &[])
            .await,
    );
    assert_eq!(code, "42501");

    // revoked tokens stop working
    let n: i64 = c
        .query_one("SELECT engram.revoke_token(label => 'laptop', owner => 'alice')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
    let n = agent
        .query("SELECT * FROM engram.authenticate($1)", &[&user])
        .await
        .unwrap()
        .len();
    assert_eq!(n, 0);
    // missing owner or label
    let (code, _) = sqlstate(c.query("SELECT engram.create_token(label => 'x')", &[]).await);
    assert_eq!(code, "22004");
    let (code, _) = sqlstate(c.query("SELECT engram.create_token(owner => 'x')", &[]).await);
    assert_eq!(code, "22004");
}
