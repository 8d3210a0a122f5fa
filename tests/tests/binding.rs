//! The owner binding (docs/SECURITY.md), tried the way an attacker holding a
//! restricted SQL session would: settings, role defaults, direct DML, the
//! internal helpers, foreign ids, planted objects on the search_path. Every
//! attempt must see 0 foreign rows and change nothing.

use engram_tests::*;
use tokio_postgres::Client;

/// A login role of its own (granted engram_agent only), so that role-level
/// settings it plants cannot reach other tests' sessions.
async fn attacker(db: &TestDb) -> (String, Client) {
    let role = format!("attacker_{}", db.name);
    db.admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN IN ROLE engram_agent"
        ))
        .await
        .unwrap();
    let c = connect_as(&db.name, &role).await;
    (role, c)
}

/// Every row of bob's, as text: compared before and after an attack.
async fn bobs_rows(db: &TestDb) -> String {
    db.admin
        .query_one(
            "SELECT concat_ws('|',
                (SELECT string_agg(m::text, ',' ORDER BY m.id) FROM engram.memories m WHERE m.owner = 'bob'),
                (SELECT string_agg(v::text, ',' ORDER BY v.memory_id, v.revision) FROM engram.revisions v WHERE v.owner = 'bob'),
                (SELECT string_agg(p::text, ',' ORDER BY p.id) FROM engram.publications p WHERE p.owner = 'bob'),
                (SELECT string_agg(g::text, ',' ORDER BY g.accessor) FROM engram.grants g WHERE g.owner = 'bob'),
                (SELECT count(*)::text FROM engram.audit_log a WHERE a.owner = 'bob' AND a.action <> 'ghost_denied'))",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

async fn visible(c: &Client, table: &str) -> i64 {
    c.query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .unwrap_or_else(|e| panic!("{table}: {e:?}"))
        .get(0)
}

const TABLES: [&str; 7] = [
    "engram.memories",
    "engram.revisions",
    "engram.memory_access",
    "engram.audit_log",
    "engram.ghost_settings",
    "engram.grants",
    "engram.publications",
];

#[tokio::test]
async fn the_owner_setting_cannot_be_forged() {
    let db = TestDb::new(4).await;
    let bob = create(&db.admin, "bob", "bob's secret", &[1.0, 0.0, 0.0, 0.0], "").await;
    db.admin
        .batch_execute("SELECT engram.ghost_settings(owner => 'bob'); SELECT engram.grant(owner => 'bob', accessor => 'x', trust => 2)")
        .await
        .unwrap();
    db.admin
        .query(
            "SELECT engram.publish(owner => 'bob', id => $1, space => 'lobby')",
            &[&bob],
        )
        .await
        .unwrap();
    let before = bobs_rows(&db).await;
    let (role, c) = attacker(&db).await;

    // 1. A placeholder set before the library is loaded is discarded when
    //    row-level security loads it.
    let _ = c.batch_execute("SET engram.owner = 'bob'").await;
    for table in TABLES {
        assert_eq!(visible(&c, table).await, 0, "{table} after SET before load");
    }
    // 2. Once loaded, the setting is SUSET: SET, set_config and RESET fail.
    for sql in [
        "SET engram.owner = 'bob'",
        "SET LOCAL engram.owner = 'bob'",
        "SELECT set_config('engram.owner', 'bob', false)",
        "SELECT set_config('engram.binding', '{\"token_id\": null}', false)",
        "SET engram.anonymous_owner = 'bob'",
    ] {
        let e = c.batch_execute(sql).await.expect_err(sql);
        assert_eq!(e.as_db_error().unwrap().code().code(), "42501", "{sql}");
    }
    // 3. A default on its own role, read at the next login, is refused too.
    let _ = c
        .batch_execute(&format!("ALTER ROLE {role} SET engram.owner = 'bob'"))
        .await;
    let c2 = connect_as(&db.name, &role).await;
    for table in TABLES {
        assert_eq!(visible(&c2, table).await, 0, "{table} after ALTER ROLE SET");
    }
    db.admin
        .batch_execute(&format!("ALTER ROLE {role} RESET ALL"))
        .await
        .unwrap();
    // 4. Other roles and the definer's rights are out of reach.
    for sql in [
        "SET ROLE postgres",
        "SET SESSION AUTHORIZATION postgres",
        "SELECT * FROM engram.tokens",
        "SELECT * FROM engram.group_members",
    ] {
        assert!(c.batch_execute(sql).await.is_err(), "{sql} succeeded");
    }
    // 5. No direct writes, bound or not.
    for sql in [
        "INSERT INTO engram.memories (owner, content, content_sha256, dedup_key) VALUES ('bob', 'x', '\\x00', '\\x00')",
        "UPDATE engram.memories SET trust_score = 1",
        "DELETE FROM engram.memories",
        "UPDATE engram.revisions SET content = 'rewritten'",
        "INSERT INTO engram.grants (owner, accessor, trust) VALUES ('bob', 'eve', 5)",
        "INSERT INTO engram.publications (memory_id, owner, space) SELECT id, owner, 'x' FROM engram.memories",
        "INSERT INTO engram.tokens (owner, label, token_sha256) VALUES ('bob', 'x', '\\x00')",
        "INSERT INTO engram.group_members (group_id, member) VALUES ('g', 'eve')",
        "DELETE FROM engram.audit_log",
    ] {
        let e = c.batch_execute(sql).await.expect_err(sql);
        assert_eq!(e.as_db_error().unwrap().code().code(), "42501", "{sql}");
    }
    // 6. The internal helpers take an owner argument; they are not callable.
    for sql in [
        "SELECT engram._locate('bob', gen_random_uuid(), NULL, NULL, false)",
        "SELECT * FROM engram._list(ROW('bob', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::engram.read_scope, 'active', NULL, NULL, NULL, NULL)",
        "SELECT engram._search(ROW('bob', '{active}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::engram.read_scope, NULL, 'secret', 10, 0)",
        "SELECT engram._search_as_of(ROW('bob', '{active}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::engram.read_scope, now(), NULL, 'secret', 10, 0, NULL)",
        "SELECT engram._close_validity('bob', ARRAY(SELECT gen_random_uuid()), now(), '{}')",
        "SELECT engram._audit('bob', 'forged', NULL, '{}')",
        "SELECT engram._install_api('0.2.0')",
        "SELECT engram._ghost_scope('eve', 'space', 'lobby')",
    ] {
        let e = c.batch_execute(sql).await.expect_err(sql);
        assert_eq!(e.as_db_error().unwrap().code().code(), "42501", "{sql}");
    }
    // 7. Functions without a binding refuse, and naming bob changes nothing.
    for sql in [
        "SELECT * FROM engram.search(owner => 'bob', query_text => 'secret')",
        "SELECT * FROM engram.list(owner => 'bob')",
        "SELECT engram.forget(owner => 'bob', id => gen_random_uuid(), hard => true)",
        "SELECT engram.stats(owner => 'bob')",
        "SELECT engram.grant(owner => 'bob', accessor => 'eve', trust => 5)",
        "SELECT engram.ghost_settings(owner => 'bob', default_trust => 5)",
        "SELECT * FROM engram.ghost_search(accessor => 'bob', ghost_type => 'space', ghost_id => 'lobby', query_text => 'secret')",
        "SELECT engram.expire()",
        "SELECT engram.rescore()",
        "SELECT engram.add_member(group_id => 'g', member => 'eve')",
    ] {
        let e = c.batch_execute(sql).await.expect_err(sql);
        assert_eq!(e.as_db_error().unwrap().code().code(), "42501", "{sql}");
    }
    assert_eq!(bobs_rows(&db).await, before, "bob's rows changed");
    db.admin.batch_execute(&format!("DROP ROLE {role}")).await.unwrap();
}

#[tokio::test]
async fn a_bound_attacker_cannot_reach_another_owner() {
    let db = TestDb::new(4).await;
    let bob = create(
        &db.admin,
        "bob",
        "bob's secret ERR-7",
        &[1.0, 0.0, 0.0, 0.0],
        "tags => '{private}'",
    )
    .await;
    db.admin
        .query(
            "SELECT engram.update(owner => 'bob', id => $1, tags => '{private,x}', reason => 'r')",
            &[&bob],
        )
        .await
        .unwrap();
    let before = bobs_rows(&db).await;
    let eve = db.agent("eve").await;
    let mine = create(&eve, "eve", "eve's note", &[1.0, 0.0, 0.0, 0.0], "").await;
    for table in TABLES {
        let n: i64 = eve
            .query_one(&format!("SELECT count(*) FROM {table} t WHERE t.owner <> 'eve'"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "{table}");
    }
    // bob's id through every id-taking function: "not found", nothing changed
    for sql in [
        "SELECT * FROM engram.recall(id => $1)",
        "SELECT engram.update(id => $1, tags => '{mine}')",
        "SELECT engram.update(id => $1, access_level => 1)",
        "SELECT engram.forget(id => $1, hard => true)",
        "SELECT engram.flag(id => $1, reason => 'x')",
        "SELECT * FROM engram.revisions(id => $1)",
        "SELECT engram.publish(id => $1, space => 'lobby')",
        "SELECT engram.unpublish(id => $1)",
        "SELECT engram.consolidate(ids => ARRAY[$1]::uuid[], content => 'stolen', embedding => '[1,0,0,0]')",
        "SELECT engram.crystallize(ids => ARRAY[$1]::uuid[], name => 'n', content => 'stolen', embedding => '[1,0,0,0]')",
    ] {
        let (code, msg) = sqlstate(eve.query(sql, &[&bob]).await);
        assert_eq!(code, "P0002", "{sql}: {msg}");
    }
    let (code, _) = sqlstate(
        eve.query(
            "SELECT engram.consolidate(ids => ARRAY[$1, $2]::uuid[], content => 'mix', embedding => '[1,0,0,0]')",
            &[&mine, &bob],
        )
        .await,
    );
    assert_eq!(code, "P0002");
    // searches and filters only ever narrow to eve's rows
    for sql in [
        "SELECT id FROM engram.search(query_text => 'ERR-7 secret', tags_any => '{private}')",
        "SELECT id FROM engram.search(query_embedding => '[1,0,0,0]', include_archived => true, k => 100)",
        "SELECT id FROM engram.list(tags_all => '{private}')",
        "SELECT id FROM engram.ghost_search(ghost_type => 'user', ghost_id => 'bob', query_text => 'secret')",
        "SELECT id FROM engram.ghost_recall(ghost_type => 'user', ghost_id => 'bob', id => (SELECT gen_random_uuid()))",
    ] {
        let got: Vec<Uuid> = eve.query(sql, &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
        assert!(!got.contains(&bob), "{sql}");
    }
    // a planted search_path does not change what engram's functions call
    eve.execute("SET search_path = pg_temp, public", &[]).await.unwrap();
    let n: i64 = eve
        .query_one("SELECT count(*) FROM engram.search(query_text => 'note')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
    assert_eq!(bobs_rows(&db).await, before, "bob's rows changed");
}

#[tokio::test]
async fn elevated_functions_ignore_objects_planted_in_public() {
    // 0.1.0 put pgvector's schema (public) before pg_catalog in the
    // search_path of its SECURITY DEFINER functions: a role that can create
    // in public shadowed sha256() and ran code as the superuser.
    let db = TestDb::new(4).await;
    let token = db.token("alice", false).await;
    let (role, c) = attacker(&db).await;
    db.admin
        .batch_execute(&format!("GRANT CREATE ON SCHEMA public TO {role}"))
        .await
        .unwrap();
    c.batch_execute(
        "CREATE FUNCTION public.sha256(bytea) RETURNS bytea LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'hijacked: running as %', current_user; END $$;
         CREATE FUNCTION public.convert_to(text, text) RETURNS bytea LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'hijacked: running as %', current_user; END $$;
         CREATE FUNCTION public.btrim(text) RETURNS text LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'hijacked: running as %', current_user; END $$;",
    )
    .await
    .unwrap();
    c.batch_execute(&format!(
        "CREATE FUNCTION public.jsonb_build_object(text, bigint) RETURNS jsonb LANGUAGE plpgsql AS $$
             BEGIN
                 IF current_setting('is_superuser') = 'on' THEN EXECUTE 'ALTER ROLE {role} SUPERUSER'; END IF;
                 RETURN pg_catalog.jsonb_build_object($1, $2);
             END $$"
    ))
    .await
    .unwrap();
    // A DBA's or pg_cron's call would run the planted variadic match with
    // superuser rights: engram refuses to run for anyone instead.
    for sql in [
        "SELECT engram.rescore()",
        "SELECT engram.expire()",
        "SELECT * FROM engram.search(owner => 'alice', query_text => 'x')",
        "SELECT engram.stats()",
        "SELECT engram.create_token(owner => 'x', label => 'y')",
    ] {
        let e = db.admin.batch_execute(sql).await.expect_err(sql);
        assert_eq!(e.as_db_error().unwrap().code().code(), "42501", "{sql}: {e}");
    }
    let escalated: bool = db
        .admin
        .query_one("SELECT rolsuper FROM pg_roles WHERE rolname = $1", &[&role])
        .await
        .unwrap()
        .get(0);
    assert!(!escalated, "the planted function ran as a superuser");
    c.batch_execute("SET search_path = public, pg_catalog").await.unwrap();
    // While a non-superuser can write a schema on the elevated functions'
    // path, they refuse to act for restricted roles instead of running the
    // planted code (0.1.0 raised "hijacked: running as postgres" here).
    for sql in [
        format!("SELECT * FROM engram.authenticate('{token}')"),
        "SELECT engram.has_tokens()".to_string(),
        format!("SELECT engram.bind('{token}')"),
        "SELECT * FROM engram.list()".to_string(),
    ] {
        let e = c.batch_execute(&sql).await.expect_err(&sql);
        let db_error = e.as_db_error().unwrap();
        assert_eq!(db_error.code().code(), "42501", "{sql}: {}", db_error.message());
        assert!(
            db_error
                .message()
                .contains(&format!("REVOKE CREATE ON SCHEMA public FROM {role}")),
            "{}",
            db_error.message()
        );
    }
    // Once the grant is gone, what was planted still blocks them, until a
    // superuser drops it.
    db.admin
        .batch_execute(&format!("REVOKE CREATE ON SCHEMA public FROM {role}"))
        .await
        .unwrap();
    let e = c
        .batch_execute(&format!("SELECT engram.bind('{token}')"))
        .await
        .unwrap_err();
    let db_error = e.as_db_error().unwrap();
    assert_eq!(db_error.code().code(), "42501");
    assert!(
        db_error.message().contains("a superuser must drop it"),
        "{}",
        db_error.message()
    );
    db.admin
        .batch_execute(
            "DROP FUNCTION public.sha256(bytea), public.convert_to(text, text), public.btrim(text),
                           public.jsonb_build_object(text, bigint)",
        )
        .await
        .unwrap();
    let row = c
        .query_one("SELECT owner FROM engram.authenticate($1)", &[&token])
        .await
        .expect("authenticate works again");
    assert_eq!(row.get::<_, String>(0), "alice");
    c.batch_execute("BEGIN").await.unwrap();
    let owner: String = c
        .query_one("SELECT engram.bind($1)", &[&token])
        .await
        .expect("bind works again")
        .get(0);
    assert_eq!(owner, "alice");
    c.query_one(
        "SELECT status FROM engram.remember(content => 'safe', embedding => '[1,0,0,0]', tags => '{t}')",
        &[],
    )
    .await
    .expect("remember works again");
    c.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        count(&db, "SELECT count(*) FROM engram.memories WHERE owner = 'alice'").await,
        1
    );
    db.admin.batch_execute(&format!("DROP ROLE {role}")).await.unwrap();
}

#[tokio::test]
async fn bind_checks_the_token_and_binds_one_transaction() {
    let db = TestDb::new(4).await;
    create(&db.admin, "alice", "alice's memory", &[1.0, 0.0, 0.0, 0.0], "").await;
    create(&db.admin, "bob", "bob's memory", &[1.0, 0.0, 0.0, 0.0], "").await;
    let user = db.token("alice", false).await;
    let platform = db.token("platform", true).await;
    let c = db.agent_without_owner().await;
    let bind = |sql: &'static str, args: Vec<String>| {
        let c = &c;
        async move {
            c.batch_execute("BEGIN").await.unwrap();
            let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = args
                .iter()
                .map(|a| a as &(dyn tokio_postgres::types::ToSql + Sync))
                .collect();
            let r = c.query_one(sql, &params).await;
            let seen: Option<i64> = match &r {
                Ok(_) => Some(
                    c.query_one("SELECT count(*) FROM engram.memories", &[])
                        .await
                        .unwrap()
                        .get(0),
                ),
                Err(_) => None,
            };
            c.batch_execute("ROLLBACK").await.unwrap();
            (r.map(|row| row.get::<_, String>(0)), seen)
        }
    };
    let (owner, seen) = bind("SELECT engram.bind($1)", vec![user.clone()]).await;
    assert_eq!((owner.unwrap(), seen), ("alice".to_string(), Some(1)));
    // the binding ends with the transaction
    assert_eq!(visible(&c, "engram.memories").await, 0);

    for (sql, args, code) in [
        ("SELECT engram.bind($1)", vec!["eg_unknown".to_string()], "28000"),
        ("SELECT engram.bind(NULL)", vec![], "28000"),
        ("SELECT engram.bind($1, act_as => 'bob')", vec![user.clone()], "42501"),
        (
            "SELECT engram.bind($1, internal_type => 'agent')",
            vec![user.clone()],
            "42501",
        ),
        (
            "SELECT engram.bind($1, act_as => 'bob', internal_type => 'ghost', ghost_type => 'user')",
            vec![platform.clone()],
            "22004",
        ),
        (
            "SELECT engram.bind($1, ghost_owner => 'x')",
            vec![platform.clone()],
            "22023",
        ),
    ] {
        let (r, _) = bind(sql, args).await;
        let e = r.expect_err(sql);
        assert_eq!(e.as_db_error().unwrap().code().code(), code, "{sql}: {e}");
    }
    // a platform token acts for any owner, and that is audited in the owner's log
    let (owner, seen) = bind("SELECT engram.bind($1, act_as => 'bob')", vec![platform.clone()]).await;
    assert_eq!((owner.unwrap(), seen), ("bob".to_string(), Some(1)));
    c.batch_execute("BEGIN").await.unwrap();
    c.query_one("SELECT engram.bind($1, act_as => 'bob')", &[&platform])
        .await
        .unwrap();
    c.batch_execute("COMMIT").await.unwrap();
    let audited = count(
        &db,
        "SELECT count(*) FROM engram.audit_log WHERE owner = 'bob' AND action = 'bind' AND act_as = 'bob' AND token_label = 'test' AND token_id IS NOT NULL",
    )
    .await;
    assert_eq!(audited, 1);

    // revoked and expired tokens bind nothing
    db.admin
        .execute(
            "UPDATE engram.tokens SET expires_at = now() - interval '1 second' WHERE platform",
            &[],
        )
        .await
        .unwrap();
    let (r, _) = bind("SELECT engram.bind($1)", vec![platform.clone()]).await;
    assert_eq!(r.unwrap_err().as_db_error().unwrap().code().code(), "28000");
    let n: i64 = db
        .admin
        .query_one("SELECT engram.revoke_token(label => 'test', owner => 'alice')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
    let (r, _) = bind("SELECT engram.bind($1)", vec![user.clone()]).await;
    assert_eq!(r.unwrap_err().as_db_error().unwrap().code().code(), "28000");
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM engram.audit_log WHERE action = 'revoke_token' AND owner = 'alice'"
        )
        .await,
        1
    );
    // revoking or expiring every token never reopens anonymous binding
    assert!(!db
        .admin
        .query_one("SELECT engram.has_tokens()", &[])
        .await
        .unwrap()
        .get::<_, bool>(0));
    let (r, _) = bind("SELECT engram.bind(NULL)", vec![]).await;
    assert_eq!(r.unwrap_err().as_db_error().unwrap().code().code(), "28000");

    // a database that never had a token binds the anonymous owner, with user rights only
    let open = TestDb::new(4).await;
    let c = open.agent_without_owner().await;
    c.batch_execute("BEGIN").await.unwrap();
    let owner: String = c.query_one("SELECT engram.bind(NULL)", &[]).await.unwrap().get(0);
    assert_eq!(owner, "local");
    c.batch_execute("ROLLBACK").await.unwrap();
    c.batch_execute("BEGIN").await.unwrap();
    let e = c
        .query_one("SELECT engram.bind(NULL, act_as => 'alice')", &[])
        .await
        .unwrap_err();
    assert_eq!(e.as_db_error().unwrap().code().code(), "42501");
    c.batch_execute("ROLLBACK").await.unwrap();
}

#[tokio::test]
async fn no_role_can_take_an_owners_write_lock() {
    // 0.1.0 serialised an owner's writes with an advisory lock whose key any
    // role could compute and hold, stalling that owner's writes.
    let db = TestDb::new(4).await;
    let (role, c) = attacker(&db).await;
    c.batch_execute(
        "SELECT pg_advisory_lock(hashtextextended('engram.owner:bob', 0));
         SELECT pg_advisory_lock(hashtextextended('engram.owner:bob', 1))",
    )
    .await
    .unwrap();
    let e = c
        .batch_execute("SELECT 1 FROM engram.owner_locks FOR UPDATE")
        .await
        .unwrap_err();
    // On Citus the planner refuses the statement (0A000: FOR UPDATE across
    // shards) before the privilege check would.
    let refused: &[&str] = if on_citus() { &["42501", "0A000"] } else { &["42501"] };
    assert!(refused.contains(&e.as_db_error().unwrap().code().code()), "{e:?}");
    db.admin.batch_execute("SET statement_timeout = '5s'").await.unwrap();
    create(
        &db.admin,
        "bob",
        "bob writes while someone holds locks",
        &[1.0, 0.0, 0.0, 0.0],
        "",
    )
    .await;
    drop(c);
    db.admin.batch_execute(&format!("DROP ROLE {role}")).await.unwrap();
}

#[tokio::test]
async fn a_ghost_context_touches_only_its_ghost() {
    let db = TestDb::new(4).await;
    create(&db.admin, "bob", "bob's own note", &[1.0, 0.0, 0.0, 0.0], "").await;
    let ghost_of_alice = db
        .platform_agent(
            "platform",
            "act_as => $2, internal_type => 'ghost', ghost_type => 'user', ghost_owner => $3",
            &["bob", "alice"],
        )
        .await;
    let scope = "engram.scope_tags('ghost', ghost_type => 'user', ghost_owner => 'alice')";
    let tags = "engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'alice')";
    for sql in [
        "SELECT * FROM engram.remember(content => 'x', embedding => '[0,1,0,0]')".to_string(),
        "SELECT * FROM engram.search(query_text => 'note')".to_string(),
        "SELECT * FROM engram.list()".to_string(),
        "SELECT * FROM engram.remember(content => 'x', embedding => '[0,1,0,0]', internal_type => 'ghost', tags => engram.internal_tags('ghost', ghost_type => 'user', ghost_owner => 'carol'))".to_string(),
        "SELECT * FROM engram.list(internal_type => 'agent')".to_string(),
    ] {
        let (code, msg) = sqlstate(ghost_of_alice.query(&sql, &[]).await);
        assert_eq!(code, "42501", "{sql}: {msg}");
    }
    let (status, _, _) = remember(
        &ghost_of_alice,
        "bob",
        "bob told alice's ghost about his trip",
        &[0.0, 1.0, 0.0, 0.0],
        &format!("internal_type => 'ghost', tags => {tags}"),
    )
    .await;
    assert_eq!(status, "created");
    let n = ghost_of_alice
        .query(
            &format!("SELECT id FROM engram.search(query_text => 'trip note', internal_type => 'ghost', scope_tags => {scope})"),
            &[],
        )
        .await
        .unwrap()
        .len();
    assert_eq!(n, 1);
    // raw reads show nothing in a ghost conversation: it reads only through
    // engram's functions
    for table in TABLES {
        let n: i64 = ghost_of_alice
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "{table}");
    }
    // the write is audited with its internal context
    let ctx = count(
        &db,
        "SELECT count(*) FROM engram.audit_log WHERE action = 'remember' AND owner = 'bob'
           AND internal_context ->> 'ghost_id' = 'alice' AND act_as = 'bob'",
    )
    .await;
    assert_eq!(ctx, 1);
}

#[tokio::test]
async fn the_guard_reads_ownership_and_the_latest_catalog() {
    let db = TestDb::new(4).await;
    let (role, c) = attacker(&db).await;
    // An owner can always grant itself CREATE again: owning a searched
    // schema is enough to be refused, whatever the ACL says.
    db.admin
        .batch_execute(&format!("ALTER SCHEMA public OWNER TO {role}"))
        .await
        .unwrap();
    c.batch_execute(&format!("REVOKE CREATE ON SCHEMA public FROM {role}"))
        .await
        .unwrap();
    let e = db.admin.batch_execute("SELECT engram.stats()").await.unwrap_err();
    let msg = e.as_db_error().unwrap().message().to_string();
    assert!(msg.contains("ALTER SCHEMA public OWNER TO"), "{msg}");
    db.admin
        .batch_execute("ALTER SCHEMA public OWNER TO pg_database_owner")
        .await
        .unwrap();
    db.admin.batch_execute("SELECT engram.stats()").await.unwrap();

    // A REPEATABLE READ transaction that started before a function was
    // planted still sees it: name resolution reads the latest catalog, and
    // so does the guard.
    let victim = db.admin_connection().await;
    victim
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT engram.stats()")
        .await
        .unwrap();
    db.admin
        .batch_execute(&format!("GRANT CREATE ON SCHEMA public TO {role}"))
        .await
        .unwrap();
    c.batch_execute(
        "CREATE FUNCTION public.jsonb_build_object(text, bigint) RETURNS jsonb LANGUAGE sql
             AS 'SELECT pg_catalog.jsonb_build_object($1, $2)'",
    )
    .await
    .unwrap();
    db.admin
        .batch_execute(&format!("REVOKE CREATE ON SCHEMA public FROM {role}"))
        .await
        .unwrap();
    let e = victim.batch_execute("SELECT engram.stats()").await.unwrap_err();
    let msg = e.as_db_error().unwrap().message().to_string();
    assert!(
        msg.contains("jsonb_build_object") && msg.contains("must drop it"),
        "{msg}"
    );
    victim.batch_execute("ROLLBACK").await.unwrap();
    db.admin
        .batch_execute(&format!(
            "DROP FUNCTION public.jsonb_build_object(text, bigint); DROP ROLE {role}"
        ))
        .await
        .unwrap();
}
