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

/// A bound connection of the restricted role with `token` (and `act_as`).
async fn bound_with(db: &TestDb, token: &str, act_as: Option<&str>) -> Agent {
    let mut args = vec![token.to_string()];
    let bind = match act_as {
        Some(user) => {
            args.push(user.to_string());
            "SELECT engram.bind($1, act_as => $2)"
        }
        None => "SELECT engram.bind($1)",
    };
    Agent {
        client: connect_as(&db.name, "engram_app").await,
        bind: bind.into(),
        args,
    }
}

async fn binds(db: &TestDb, token: &str) -> Result<String, (String, String)> {
    let c = connect_as(&db.name, "engram_app").await;
    c.query_one("SELECT engram.bind($1)", &[&token])
        .await
        .map(|r| r.get(0))
        .map_err(|e| sqlstate::<()>(Err(e)))
}

/// An application's platform token mints a user token for the user it acts
/// for, without a DBA; the user token is a user's (it mints nothing, acts
/// for nobody else); only the minting platform token revokes it, and any
/// token revokes itself.
#[tokio::test]
async fn a_platform_token_mints_and_revokes_user_tokens() {
    let db = TestDb::new(4).await;
    let platform = db.token("app", true).await;
    let other_platform = db.token("other-app", true).await;
    let as_alice = bound_with(&db, &platform, Some("alice")).await;
    let minted: serde_json::Value = as_alice
        .query_one(
            "SELECT engram.mint_token(label => 'web session', expires => '30 days')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(minted["owner"], "alice", "{minted}");
    assert!(minted["expires_at"].is_string(), "{minted}");
    let token = minted["token"].as_str().unwrap().to_string();
    let id: uuid::Uuid = minted["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(binds(&db, &token).await, Ok("alice".to_string()));
    let (platform_flag, minted_by): (bool, Option<uuid::Uuid>) = db
        .admin
        .query_one("SELECT platform, minted_by FROM engram.tokens WHERE id = $1", &[&id])
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert!(!platform_flag && minted_by.is_some());

    // The user token mints nothing and acts for nobody else.
    let user = bound_with(&db, &token, None).await;
    let (code, msg) = sqlstate(user.query_one("SELECT engram.mint_token(label => 'more')", &[]).await);
    assert_eq!(code, "42501", "{msg}");
    let (code, _) = sqlstate(bound_with(&db, &token, Some("bob")).await.query("SELECT 1", &[]).await);
    assert_eq!(code, "42501");
    // Neither does an agent context of the platform token, nor a DBA's
    // unbound session (the DBA has create_token).
    let agent = Agent {
        client: connect_as(&db.name, "engram_app").await,
        bind: "SELECT engram.bind($1, act_as => 'alice', internal_type => 'agent')".into(),
        args: vec![platform.clone()],
    };
    let (code, msg) = sqlstate(agent.query_one("SELECT engram.mint_token(label => 'x')", &[]).await);
    assert_eq!(code, "42501", "{msg}");
    let (code, _) = sqlstate(db.admin.query_one("SELECT engram.mint_token(label => 'x')", &[]).await);
    assert_eq!(code, "42501");
    // Bad input changes nothing.
    for (args, want) in [("label => ''", "22004"), ("label => 'x', expires => '-1 day'", "22023")] {
        let (code, msg) = sqlstate(
            as_alice
                .query_one(&format!("SELECT engram.mint_token({args})"), &[])
                .await,
        );
        assert_eq!(code, want, "{args}: {msg}");
    }
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.tokens WHERE owner = 'alice'").await,
        1
    );

    // Another platform token cannot revoke it (nor learn that it exists);
    // the user token cannot revoke the platform's.
    let other = bound_with(&db, &other_platform, Some("alice")).await;
    let (code, _) = sqlstate(other.query_one("SELECT engram.revoke_minted_token($1)", &[&id]).await);
    assert_eq!(code, "P0002");
    let platform_id: uuid::Uuid = db
        .admin
        .query_one("SELECT id FROM engram.tokens WHERE owner = 'app'", &[])
        .await
        .unwrap()
        .get(0);
    let (code, _) = sqlstate(
        user.query_one("SELECT engram.revoke_minted_token($1)", &[&platform_id])
            .await,
    );
    assert_eq!(code, "P0002");
    assert_eq!(binds(&db, &platform).await, Ok("app".to_string()));
    // The minting platform token revokes it, once.
    let revoked: bool = as_alice
        .query_one("SELECT engram.revoke_minted_token($1)", &[&id])
        .await
        .unwrap()
        .get(0);
    assert!(revoked);
    assert_eq!(binds(&db, &token).await.unwrap_err().0, "28000");
    let (code, _) = sqlstate(
        as_alice
            .query_one("SELECT engram.revoke_minted_token($1)", &[&id])
            .await,
    );
    assert_eq!(code, "P0002");
    // A user token revokes itself (signing out).
    let second: serde_json::Value = as_alice
        .query_one("SELECT engram.mint_token(label => 'phone')", &[])
        .await
        .unwrap()
        .get(0);
    let second_token = second["token"].as_str().unwrap();
    let second_id: uuid::Uuid = second["id"].as_str().unwrap().parse().unwrap();
    let phone = bound_with(&db, second_token, None).await;
    phone
        .query_one("SELECT engram.revoke_minted_token($1)", &[&second_id])
        .await
        .unwrap();
    assert_eq!(binds(&db, second_token).await.unwrap_err().0, "28000");
    let audited = count(
        &db,
        "SELECT count(*) FROM engram.audit_log WHERE owner = 'alice' AND action IN ('mint_token', 'revoke_token')",
    )
    .await;
    assert_eq!(audited, 4);
}

/// A minted token works only while the platform token that minted it does;
/// each platform token's tokens per owner are capped on their own, so that
/// another application cannot use up its allowance.
#[tokio::test]
async fn minted_tokens_die_with_their_minter_and_are_capped_per_minter() {
    let db = TestDb::new(4).await;
    let platform = db.token("app", true).await;
    let other = db.token("other-app", true).await;
    let mint = |token: String| {
        let db = &db;
        async move {
            let v: serde_json::Value = bound_with(db, &token, Some("alice"))
                .await
                .query_one("SELECT engram.mint_token(label => 'web')", &[])
                .await
                .unwrap()
                .get(0);
            v["token"].as_str().unwrap().to_string()
        }
    };
    let minted = mint(platform.clone()).await;
    let from_other = mint(other.clone()).await;
    assert_eq!(binds(&db, &minted).await, Ok("alice".to_string()));
    // The other application fills its own allowance for alice...
    db.admin
        .batch_execute(
            "INSERT INTO engram.tokens (owner, label, token_sha256, minted_by)
             SELECT 'alice', 'filler', sha256(convert_to('filler' || n, 'UTF8')),
                    (SELECT id FROM engram.tokens WHERE owner = 'other-app')
             FROM generate_series(1, 1000) n",
        )
        .await
        .unwrap();
    let other_as_alice = bound_with(&db, &other, Some("alice")).await;
    let (code, msg) = sqlstate(
        other_as_alice
            .query_one("SELECT engram.mint_token(label => 'x')", &[])
            .await,
    );
    assert_eq!(code, "54000", "{msg}");
    // ...which leaves this one's alone.
    mint(platform.clone()).await;
    // Revoking the platform token stops what it minted, and nothing else.
    db.admin
        .batch_execute("SELECT engram.revoke_token(owner => 'app', label => 'test')")
        .await
        .unwrap();
    assert_eq!(binds(&db, &minted).await.unwrap_err().0, "28000");
    assert_eq!(binds(&db, &from_other).await, Ok("alice".to_string()));
}

/// A platform token lists the owners with what each holds (a dashboard's
/// owner list), by prefix and in pages; a user token, an agent or ghost
/// context of the platform token, and bad arguments are refused.
#[tokio::test]
async fn a_platform_token_lists_the_owners() {
    let db = TestDb::new(4).await;
    for (owner, n) in [("acme:alice", 2), ("acme:bob", 1), ("zeta:carol", 1)] {
        for i in 0..n {
            remember(
                &db.admin,
                owner,
                &format!("{owner} note {i}"),
                &axis(4, i, 1.0),
                "force => true",
            )
            .await;
        }
    }
    db.admin
        .batch_execute("SELECT engram.slot_set(owner => 'zeta:dan', label => 'plan', content => 'ship it')")
        .await
        .unwrap();
    let platform = db.token("app", true).await;
    let app = bound_with(&db, &platform, None).await;
    let list = |sql: &'static str| {
        let app = &app;
        async move {
            app.query(sql, &[])
                .await
                .unwrap()
                .iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1), r.get::<_, i64>(2)))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        list("SELECT owner, memories, slots FROM engram.owners()").await,
        vec![
            ("acme:alice".into(), 2, 0),
            ("acme:bob".into(), 1, 0),
            ("zeta:carol".into(), 1, 0),
            ("zeta:dan".into(), 0, 1)
        ]
    );
    assert_eq!(
        list("SELECT owner, memories, slots FROM engram.owners(prefix => 'acme:')").await,
        vec![("acme:alice".into(), 2, 0), ("acme:bob".into(), 1, 0)]
    );
    assert_eq!(
        list("SELECT owner, memories, slots FROM engram.owners(after => 'acme:bob', \"limit\" => 1)").await,
        vec![("zeta:carol".into(), 1, 0)]
    );
    // an erased owner holds nothing and is not listed; written to again,
    // it is
    db.admin
        .batch_execute("SELECT engram.erase_owner('zeta:carol')")
        .await
        .unwrap();
    assert_eq!(
        list("SELECT owner, memories, slots FROM engram.owners(prefix => 'zeta:')").await,
        vec![("zeta:dan".into(), 0, 1)]
    );
    remember(
        &db.admin,
        "zeta:carol",
        "carol is back",
        &axis(4, 0, 1.0),
        "force => true",
    )
    .await;
    assert_eq!(
        list("SELECT owner, memories, slots FROM engram.owners(prefix => 'zeta:')").await,
        vec![("zeta:carol".into(), 1, 0), ("zeta:dan".into(), 0, 1)]
    );
    // a DBA lists them too
    let n: i64 = db
        .admin
        .query_one("SELECT count(*) FROM engram.owners()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 4);
    let (code, msg) = sqlstate(app.query("SELECT * FROM engram.owners(\"limit\" => 0)", &[]).await);
    assert_eq!(code, "22023", "{msg}");
    // a user token, and the platform token in an agent context, may not
    let user = db.token("acme:alice", false).await;
    let (code, msg) = sqlstate(
        bound_with(&db, &user, None)
            .await
            .query("SELECT * FROM engram.owners()", &[])
            .await,
    );
    assert_eq!(code, "42501", "{msg}");
    assert!(msg.contains("platform token"), "{msg}");
    let agent = Agent {
        client: connect_as(&db.name, "engram_app").await,
        bind: "SELECT engram.bind($1, act_as => 'acme:alice', internal_type => 'agent')".into(),
        args: vec![platform.clone()],
    };
    let (code, msg) = sqlstate(agent.query("SELECT * FROM engram.owners()", &[]).await);
    assert_eq!(code, "42501", "{msg}");
}
