//! Privilege that cannot be borrowed (docs/SECURITY.md): a privileged
//! session's rights are never lent to code that an unprivileged role owns.
//! The attacker is a role that is a member of `engram_agent` only and owns
//! its own schema `app` (a common layout). Its code tries, each time, to
//! read bob's memories into `app.loot`, raise bob's ghost `default_trust`
//! and add `mallory` to the group `team` — run by a real ANALYZE, a real
//! autovacuum, a DBA's call of its SECURITY DEFINER function, a trigger, a
//! view, a column default, COPY and an event trigger. Every path worked on
//! 0.6.0 (the privilege came from the session role); now each is refused
//! with a message that names the reason, and bob's data is untouched. The
//! DBA's own calls keep working.

use engram_tests::*;
use tokio_postgres::Client;

const SECRET: &str = "bob's secret ERR-7";

/// The attacker's role, schema and loot table; bob's memory, ghost settings
/// (default_trust 0) and the group `team` (alice only).
async fn setup(db: &TestDb) -> (String, Client) {
    let role = format!("sr_{}", db.name);
    create(&db.admin, "bob", SECRET, &[1.0, 0.0, 0.0, 0.0], "").await;
    db.admin
        .batch_execute(&format!(
            "SELECT engram.ghost_settings(owner => 'bob', default_trust => 0);
             SELECT engram.add_member('team', 'alice');
             DROP ROLE IF EXISTS {role};
             CREATE ROLE {role} LOGIN IN ROLE engram_agent;
             CREATE SCHEMA app AUTHORIZATION {role};"
        ))
        .await
        .unwrap();
    let c = connect_as(&db.name, &role).await;
    // Each attempt on its own, so that one refusal does not hide the others;
    // refusals are recorded too, to check the message.
    c.batch_execute(
        "CREATE TABLE app.loot (what text);
         CREATE FUNCTION app.steal() RETURNS integer LANGUAGE plpgsql AS $$
         BEGIN
             BEGIN
                 INSERT INTO app.loot SELECT 'stolen: ' || l.content FROM engram.list(owner => 'bob') l;
             EXCEPTION WHEN others THEN INSERT INTO app.loot VALUES ('refused: ' || SQLERRM);
             END;
             BEGIN
                 PERFORM engram.ghost_settings(owner => 'bob', default_trust => 5);
             EXCEPTION WHEN others THEN INSERT INTO app.loot VALUES ('refused: ' || SQLERRM);
             END;
             BEGIN
                 PERFORM engram.add_member('team', 'mallory');
             EXCEPTION WHEN others THEN INSERT INTO app.loot VALUES ('refused: ' || SQLERRM);
             END;
             BEGIN
                 PERFORM engram.create_token(owner => 'bob', label => 'stolen');
             EXCEPTION WHEN others THEN INSERT INTO app.loot VALUES ('refused: ' || SQLERRM);
             END;
             RETURN 1;
         END $$;
         CREATE FUNCTION app.steal_v() RETURNS integer LANGUAGE sql SECURITY DEFINER AS 'SELECT app.steal()';",
    )
    .await
    .unwrap();
    (role, c)
}

/// What the attack left: bob's default trust, whether mallory is in team,
/// bob's token count, and the loot.
async fn outcome(db: &TestDb) -> (i16, bool, i64, Vec<String>) {
    let row = db
        .admin
        .query_one(
            "SELECT (SELECT default_trust FROM engram.ghost_settings WHERE owner = 'bob'),
                    EXISTS (SELECT 1 FROM engram.group_members WHERE group_id = 'team' AND member = 'mallory'),
                    (SELECT count(*) FROM engram.tokens WHERE owner = 'bob')",
            &[],
        )
        .await
        .unwrap();
    let loot = column::<String>(&db.admin, "SELECT what FROM app.loot ORDER BY what").await;
    (row.get(0), row.get(1), row.get(2), loot)
}

/// Nothing of bob's reached the attacker and nothing changed; every attempt
/// was refused (four per run) with a message containing `reason`.
async fn assert_refused(db: &TestDb, reason: &str) {
    let (trust, mallory, tokens, loot) = outcome(db).await;
    assert_eq!(trust, 0, "bob's default_trust changed; loot: {loot:?}");
    assert!(!mallory, "mallory was added to team; loot: {loot:?}");
    assert_eq!(tokens, 0, "a token was minted for bob; loot: {loot:?}");
    assert!(loot.iter().all(|l| l.starts_with("refused: ")), "{loot:?}");
    assert!(!loot.is_empty() && loot.len() % 4 == 0, "{loot:?}");
    assert!(
        loot.iter().any(|l| l.contains(reason)),
        "no refusal names {reason:?}: {loot:?}"
    );
}

#[tokio::test]
async fn analyze_and_autovacuum_do_not_lend_the_dbas_privilege_to_index_expressions() {
    let db = TestDb::new(4).await;
    let (_role, c) = setup(&db).await;
    // An IMMUTABLE wrapper in an expression index: ANALYZE evaluates it.
    c.batch_execute(
        "CREATE FUNCTION app.f(integer) RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT app.steal_v() + $1';
         CREATE TABLE app.t (x integer) WITH (autovacuum_analyze_threshold = 1, autovacuum_analyze_scale_factor = 0);
         CREATE INDEX ON app.t (app.f(x));
         INSERT INTO app.t SELECT generate_series(1, 3);
         TRUNCATE app.loot;",
    )
    .await
    .unwrap();
    // Called by the attacker itself: never privileged (control).
    let (code, _) = sqlstate(c.query("SELECT engram.list(owner => 'bob')", &[]).await);
    assert_eq!(code, "42501");

    // A DBA's manual ANALYZE.
    db.admin.batch_execute("ANALYZE app.t").await.unwrap();
    assert_refused(&db, "security-restricted operation").await;

    // A real autovacuum run: the launcher visits this database within about
    // a second while the naptime is 1 s.
    db.admin.batch_execute("TRUNCATE app.loot").await.unwrap();
    c.batch_execute("INSERT INTO app.t SELECT generate_series(4, 40)")
        .await
        .unwrap();
    let root = connect_as("postgres", "postgres").await;
    // (ALTER SYSTEM refuses to run in the implicit transaction of a
    // multi-statement query: one statement per call.)
    root.batch_execute("ALTER SYSTEM SET autovacuum_naptime = 1")
        .await
        .unwrap();
    root.batch_execute("SELECT pg_reload_conf()").await.unwrap();
    let mut analyzed = false;
    for _ in 0..120 {
        let n: i64 = db
            .admin
            .query_one(
                "SELECT coalesce(autoanalyze_count, 0) FROM pg_stat_user_tables WHERE relid = 'app.t'::regclass",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if n > 0 {
            analyzed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    root.batch_execute("ALTER SYSTEM RESET autovacuum_naptime")
        .await
        .unwrap();
    root.batch_execute("SELECT pg_reload_conf()").await.unwrap();
    assert!(analyzed, "autovacuum did not analyze app.t within 60 s");
    assert_refused(&db, "security-restricted operation").await;
}

#[tokio::test]
async fn a_dba_calling_code_of_an_unprivileged_role_lends_it_nothing() {
    let db = TestDb::new(4).await;
    let (role, c) = setup(&db).await;

    // Its SECURITY DEFINER function, called by the DBA.
    db.admin.batch_execute("SELECT app.steal_v()").await.unwrap();
    assert_refused(&db, "owned by role").await;

    // Its plain (invoker) function, called by the DBA: runs as the DBA, but
    // the code is the attacker's.
    db.admin
        .batch_execute("TRUNCATE app.loot; SELECT app.steal()")
        .await
        .unwrap();
    assert_refused(&db, "function app.steal() owned by role").await;

    // A trigger on its table, fired by the DBA's INSERT.
    c.batch_execute(
        "CREATE TABLE app.t2 (x integer);
         CREATE FUNCTION app.trig() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN PERFORM app.steal(); RETURN NEW; END $$;
         CREATE TRIGGER t2_steal BEFORE INSERT ON app.t2 FOR EACH ROW EXECUTE FUNCTION app.trig();",
    )
    .await
    .unwrap();
    db.admin
        .batch_execute("TRUNCATE app.loot; INSERT INTO app.t2 VALUES (1)")
        .await
        .unwrap();
    assert_refused(&db, "owned by role").await;

    // An event trigger whose function the attacker owns (a superuser made
    // the event trigger), fired by the DBA's DDL.
    c.batch_execute(
        "CREATE FUNCTION app.on_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$
         BEGIN PERFORM app.steal(); END $$;",
    )
    .await
    .unwrap();
    db.admin
        .batch_execute(
            "TRUNCATE app.loot;
             CREATE EVENT TRIGGER steal_on_ddl ON ddl_command_end EXECUTE FUNCTION app.on_ddl();
             CREATE TABLE public.innocent (x integer);
             DROP EVENT TRIGGER steal_on_ddl;",
        )
        .await
        .unwrap();
    assert_refused(&db, "owned by role").await;

    // The SQL function inlined into the DBA's query would hide the owner
    // from the function manager; the hook keeps it from being inlined.
    c.batch_execute(
        "CREATE FUNCTION app.inline_me() RETURNS SETOF text LANGUAGE sql STABLE
         AS $$ SELECT l.content FROM engram.list(owner => 'bob') l $$;",
    )
    .await
    .unwrap();
    let (code, msg) = sqlstate(db.admin.query("SELECT * FROM app.inline_me()", &[]).await);
    assert_eq!(code, "42501", "{msg}");
    assert!(msg.contains(&format!("owned by role {role}")), "{msg}");
}

#[tokio::test]
async fn views_defaults_and_copy_of_an_unprivileged_role_lend_it_nothing() {
    let db = TestDb::new(4).await;
    let (_role, c) = setup(&db).await;
    // A view calling engram directly: no function of the attacker runs.
    // The attacker's view in every shape a plan can hold it (a view is an
    // RTE_RELATION in 15's plans and an RTE_SUBQUERY naming it from 16 on):
    // plain, inside a materialized CTE, a security_barrier view, one the
    // planner cannot flatten (LIMIT, an aggregate), a view over the view,
    // and inside a scalar subquery.
    c.batch_execute(
        "CREATE VIEW app.v AS SELECT l.content FROM engram.list(owner => 'bob') l;
         CREATE VIEW app.w AS SELECT engram.add_member('team', 'mallory') AS added;
         CREATE TABLE app.t3 (x integer, trust jsonb DEFAULT engram.ghost_settings(owner => 'bob', default_trust => 5));
         CREATE VIEW app.sb WITH (security_barrier) AS SELECT l.content FROM engram.list(owner => 'bob') l;
         CREATE VIEW app.lim AS SELECT l.content FROM engram.list(owner => 'bob') l LIMIT 5;
         CREATE VIEW app.agg AS SELECT count(*) AS n FROM engram.list(owner => 'bob') l;
         CREATE VIEW app.vv AS SELECT * FROM app.v;",
    )
    .await
    .unwrap();
    for sql in [
        "SELECT * FROM app.v",
        "SELECT * FROM app.w",
        "INSERT INTO app.t3 (x) VALUES (1)",
        "WITH c AS MATERIALIZED (SELECT * FROM app.v) SELECT * FROM c",
        "SELECT * FROM app.sb",
        "SELECT * FROM app.lim",
        "SELECT * FROM app.agg",
        "SELECT * FROM app.vv",
        "SELECT (SELECT count(*) FROM app.v) AS n",
    ] {
        let (code, msg) = sqlstate(db.admin.query(sql, &[]).await);
        assert_eq!(code, "42501", "{sql}: {msg}");
        assert!(msg.contains("owned by role sr_"), "{sql}: {msg}");
    }
    // A view the planner proves empty calls nothing, so it lends nothing.
    let rows = db.admin.query("SELECT * FROM app.v WHERE false", &[]).await.unwrap();
    assert!(rows.is_empty());
    // COPY FROM evaluates the default outside the executor.
    let (ok, out) = psql(&db.name, "COPY app.t3 (x) FROM STDIN;\n2\n\\.\n");
    assert!(!ok, "COPY was accepted: {out}");
    assert!(out.contains("owned by role sr_"), "COPY: {out}");
    let (trust, mallory, _, _) = outcome(&db).await;
    assert_eq!((trust, mallory), (0, false));
    let rows: i64 = db
        .admin
        .query_one("SELECT count(*) FROM app.t3", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn the_dbas_own_calls_keep_their_privilege() {
    let db = TestDb::new(4).await;
    let (_role, _c) = setup(&db).await;
    // Top level, inside the DBA's own definer function, beside a table the
    // DBA owns, and inside a trigger of the DBA's table: all privileged.
    db.admin
        .batch_execute(
            "CREATE TABLE public.mine (x integer);
             INSERT INTO public.mine VALUES (1);
             CREATE FUNCTION public.dba_list() RETURNS SETOF text LANGUAGE sql SECURITY DEFINER
                 AS $$ SELECT l.content FROM engram.list(owner => 'bob') l $$;
             CREATE FUNCTION public.dba_trig() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN PERFORM engram.ghost_settings(owner => 'bob', default_trust => 2); RETURN NEW; END $$;
             CREATE TRIGGER mine_trust AFTER INSERT ON public.mine FOR EACH ROW EXECUTE FUNCTION public.dba_trig();",
        )
        .await
        .unwrap();
    for sql in [
        "SELECT l.content FROM engram.list(owner => 'bob') l",
        "SELECT * FROM public.dba_list()",
        "SELECT l.content FROM public.mine m, engram.list(owner => 'bob') l",
    ] {
        let got = column::<String>(&db.admin, sql).await;
        assert_eq!(got, vec![SECRET.to_string()], "{sql}");
    }
    db.admin
        .batch_execute("INSERT INTO public.mine VALUES (2)")
        .await
        .unwrap();
    let (trust, _, _, _) = outcome(&db).await;
    assert_eq!(trust, 2);
    // After a refused call in a subtransaction, the session is privileged
    // again: nothing of the refusal lingers.
    db.admin
        .batch_execute(
            "DO $$ BEGIN
                 BEGIN PERFORM app.steal(); EXCEPTION WHEN others THEN NULL; END;
             END $$",
        )
        .await
        .unwrap();
    let got = column::<String>(&db.admin, "SELECT l.content FROM engram.list(owner => 'bob') l").await;
    assert_eq!(got, vec![SECRET.to_string()]);
    // A non-superuser DBA (SET on engram.owner) runs the same checks.
    let dba = format!("dba_{}", db.name);
    db.admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {dba}; CREATE ROLE {dba} LOGIN IN ROLE engram_agent;
             GRANT SET ON PARAMETER engram.owner TO {dba};
             GRANT USAGE ON SCHEMA app TO {dba};
             GRANT SELECT ON app.loot TO {dba};"
        ))
        .await
        .unwrap();
    let d = connect_as(&db.name, &dba).await;
    let got = column::<String>(&d, "SELECT l.content FROM engram.list(owner => 'bob') l").await;
    assert_eq!(got, vec![SECRET.to_string()]);
    let (code, msg) = sqlstate(
        d.query("SELECT l.content FROM app.loot, engram.list(owner => 'bob') l", &[])
            .await,
    );
    assert_eq!(code, "42501", "{msg}");
    assert!(msg.contains("relation app.loot owned by role sr_"), "{msg}");
}

/// The second review's attacks: a DBA's own `engram.owner` setting, cursors
/// the attacker's code opened, a partition reached by tuple routing, and
/// DDL that evaluates the attacker's constraints outside the executor.
#[tokio::test]
async fn settings_cursors_partitions_and_ddl_lend_nothing() {
    let db = TestDb::new(4).await;
    let (role, c) = setup(&db).await;
    c.batch_execute(
        "CREATE FUNCTION app.f(integer) RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT app.steal_v() + $1';
         CREATE TABLE app.t (x integer);
         CREATE INDEX ON app.t (app.f(x));
         INSERT INTO app.t VALUES (1);
         TRUNCATE app.loot;",
    )
    .await
    .unwrap();
    // engram.owner set by the DBA is no binding for the code it runs.
    db.admin
        .batch_execute("SET engram.owner = 'bob'; ANALYZE app.t; RESET engram.owner")
        .await
        .unwrap();
    assert_refused(&db, "security-restricted operation").await;
    // Nor for a restricted role when a database default sets it.
    db.admin
        .batch_execute(&format!("ALTER DATABASE {} SET engram.owner = 'bob'", db.name))
        .await
        .unwrap();
    let unbound = db.agent_without_owner().await;
    let seen: i64 = unbound
        .query_one("SELECT count(*) FROM engram.memories", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(seen, 0, "a database default of engram.owner bound a restricted role");
    let (code, _) = sqlstate(unbound.query("SELECT * FROM engram.list()", &[]).await);
    assert_eq!(code, "42501");
    db.admin
        .batch_execute(&format!("ALTER DATABASE {} RESET engram.owner", db.name))
        .await
        .unwrap();

    // A holdable cursor the attacker's definer function declares runs at
    // the DBA's commit; a refcursor it opens runs at the DBA's FETCH.
    c.batch_execute(
        "CREATE FUNCTION app.sched() RETURNS integer LANGUAGE plpgsql SECURITY DEFINER AS $$
         BEGIN
             EXECUTE 'DECLARE app_c CURSOR WITH HOLD FOR SELECT engram.ghost_settings(owner => ''bob'', default_trust => 5)';
             RETURN 1;
         END $$;
         CREATE FUNCTION app.report() RETURNS refcursor LANGUAGE plpgsql AS $$
         DECLARE c refcursor := 'report';
         BEGIN OPEN c FOR SELECT engram.ghost_settings(owner => 'bob', default_trust => 5); RETURN c; END $$;",
    )
    .await
    .unwrap();
    let (code, msg) = sqlstate(db.admin.batch_execute("SELECT app.sched()").await);
    assert_eq!(code, "42501", "{msg}");
    assert!(msg.contains("started while function app.sched()"), "{msg}");
    let (code, msg) = sqlstate(
        db.admin
            .batch_execute("BEGIN; SELECT app.report(); FETCH ALL FROM report; COMMIT;")
            .await,
    );
    db.admin.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(code, "42501", "{msg}");
    assert!(msg.contains("started while function app.report()"), "{msg}");

    // A partition the attacker owns, reached by tuple routing (INSERT and
    // COPY into the DBA's partitioned table).
    db.admin
        .batch_execute("CREATE TABLE public.events (tenant text, x integer) PARTITION BY LIST (tenant)")
        .await
        .unwrap();
    c.batch_execute(&format!(
        "CREATE TABLE app.events_app (tenant text, x integer);
         ALTER TABLE app.events_app ADD CONSTRAINT steal CHECK (current_user = '{role}'
             OR engram.ghost_settings(owner => 'bob', default_trust => 5) IS NOT NULL);"
    ))
    .await
    .unwrap();
    db.admin
        .batch_execute("ALTER TABLE public.events ATTACH PARTITION app.events_app FOR VALUES IN ('app')")
        .await
        .unwrap();
    let (code, msg) = sqlstate(
        db.admin
            .batch_execute("INSERT INTO public.events VALUES ('app', 1)")
            .await,
    );
    assert_eq!(code, "42501", "{msg}");
    assert!(msg.contains("relation app.events_app owned by role"), "{msg}");
    let (ok, out) = psql(&db.name, "COPY public.events FROM STDIN;\napp\t2\n\\.\n");
    assert!(
        !ok && out.contains("relation app.events_app owned by role"),
        "COPY: {out}"
    );

    // ALTER TABLE and ALTER DOMAIN validate the attacker's constraints
    // outside the executor.
    c.batch_execute(&format!(
        "CREATE TABLE app.t2 (x integer);
         INSERT INTO app.t2 VALUES (1);
         ALTER TABLE app.t2 ADD CONSTRAINT steal CHECK (current_user = '{role}'
             OR engram.ghost_settings(owner => 'bob', default_trust => 5) IS NOT NULL) NOT VALID;
         CREATE DOMAIN app.dom AS integer;
         CREATE TABLE app.t3 (x app.dom);
         INSERT INTO app.t3 VALUES (1);"
    ))
    .await
    .unwrap();
    // (a check of the attacker's domain that calls engram: refused when the
    // attacker adds it, defaults_and_domains_of_an_unprivileged_role_cannot_call_engram;
    // one an earlier release let it add is still checked when validated)
    db.admin
        .batch_execute(&format!(
            "ALTER DOMAIN app.dom ADD CONSTRAINT steal CHECK (current_user = '{role}'
                 OR engram.ghost_settings(owner => 'bob', default_trust => 5) IS NOT NULL) NOT VALID;"
        ))
        .await
        .unwrap();
    let (code, msg) = sqlstate(
        db.admin
            .batch_execute("ALTER TABLE app.t2 VALIDATE CONSTRAINT steal")
            .await,
    );
    assert_eq!(code, "42501", "{msg}");
    assert!(msg.contains("relation app.t2 owned by role"), "{msg}");
    let (code, msg) = sqlstate(
        db.admin
            .batch_execute("ALTER DOMAIN app.dom VALIDATE CONSTRAINT steal")
            .await,
    );
    assert_eq!(code, "42501", "{msg}");
    assert!(msg.contains("domain app.dom owned by role"), "{msg}");

    let (trust, mallory, tokens, _) = outcome(&db).await;
    assert_eq!((trust, mallory, tokens), (0, false, 0));
}

/// An operator or aggregate names its function directly: one the attacker
/// built on engram's functions would run them with the privileges of
/// whoever evaluates it, with no code of the attacker in between. Refused
/// when defined; a DBA may still build them.
#[tokio::test]
async fn operators_and_aggregates_on_engrams_functions_are_refused_to_unprivileged_roles() {
    let db = TestDb::new(4).await;
    let (_role, c) = setup(&db).await;
    for sql in [
        "CREATE AGGREGATE app.peek(text) (sfunc = textcat, stype = text, initcond = '', finalfunc = engram.stats)",
        "CREATE OPERATOR app.%%% (leftarg = text, rightarg = text, function = engram.add_member)",
    ] {
        let (code, msg) = sqlstate(c.batch_execute(sql).await);
        assert_eq!(code, "42501", "{sql}: {msg}");
        assert!(msg.contains("would call a function of engram"), "{sql}: {msg}");
    }
    let built: i64 = db
        .admin
        .query_one(
            "SELECT (SELECT count(*) FROM pg_operator WHERE oprname = '%%%')
                  + (SELECT count(*) FROM pg_proc WHERE proname = 'peek')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(built, 0);
    // Ordinary operators and aggregates of the role are untouched.
    c.batch_execute(
        "CREATE AGGREGATE app.cat(text) (sfunc = textcat, stype = text, initcond = '');
         CREATE OPERATOR app.@@@ (leftarg = text, rightarg = text, function = textcat);",
    )
    .await
    .unwrap();
    db.admin
        .batch_execute("CREATE OPERATOR public.%%% (leftarg = text, rightarg = text, function = engram.add_member)")
        .await
        .unwrap();
    let (trust, mallory, _, _) = outcome(&db).await;
    assert_eq!((trust, mallory), (0, false));
}

/// The planner's turn: while it plans a statement, Postgres evaluates
/// STABLE functions whose arguments are constants to estimate a clause,
/// before the executor starts. On 0.14.0 a DBA's `EXPLAIN` of the
/// attacker's view (or `SELECT`, or `count(*)` of a table its policy
/// guards) sent bob's slot and saved state to the attacker's channel. Now
/// the owner-taking readers are VOLATILE (never evaluated while planning),
/// nothing the planner evaluates acts with privilege, and engram's helpers
/// refuse calls from anything but engram while privilege is withheld.
#[tokio::test]
async fn planning_a_dbas_statement_lends_it_nothing() {
    let db = TestDb::new(4).await;
    let (role, c) = setup(&db).await;
    let dba = format!("dbp_{}", db.name);
    db.admin
        .batch_execute(&format!(
            "SELECT engram.slot_set(owner => 'bob', label => 'secrets', content => 'bob PIN is 4711', pinned => true);
             SELECT engram.workspace_create(owner => 'bob', name => 'bank');
             SELECT engram.state_save(owner => 'bob', workspace => 'bank', name => 'saved',
                                      conversation_context => 'bob state secret 9044');
             DROP ROLE IF EXISTS {dba}; CREATE ROLE {dba} LOGIN IN ROLE engram_agent;
             GRANT SET ON PARAMETER engram.owner TO {dba};"
        ))
        .await
        .unwrap();
    // bob's memory, whose id the k-nearest helper (Rust) would give away
    let bobs = create(
        &db.admin,
        "bob",
        "bob planning note",
        &[0.1, 0.2, 0.9, 0.3],
        "force => true",
    )
    .await;
    let bank: uuid::Uuid = db
        .admin
        .query_one(
            "SELECT id FROM engram.workspaces WHERE owner = 'bob' AND name = 'bank'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    // The attacker's STABLE leak (a notification on a channel it listens
    // to), views and a policy whose clauses call engram with constants, a
    // rule, and a one-row table so that execution reaches the calls too.
    c.batch_execute(&format!(
        "CREATE FUNCTION app.leak(t text) RETURNS text LANGUAGE plpgsql STABLE
             AS $$ BEGIN PERFORM pg_notify('loot', coalesce(t, '<null>')); RETURN t; END $$;
         CREATE TABLE app.empty (x text);
         CREATE TABLE app.one (x text); INSERT INTO app.one VALUES ('row');
         CREATE VIEW app.report AS SELECT * FROM app.empty
             WHERE x = app.leak(engram.slot_get(owner => 'bob', label => 'secrets'));
         CREATE VIEW app.report_one AS SELECT * FROM app.one
             WHERE x = app.leak(engram.slot_get(owner => 'bob', label => 'secrets'));
         CREATE VIEW app.state AS SELECT * FROM app.empty
             WHERE x = app.leak(engram.state_load(owner => 'bob', workspace => 'bank', name => 'saved')::text);
         CREATE VIEW app.pinned AS SELECT * FROM app.one WHERE x = app.leak(engram._pinned_slots('bob', '')::text);
         CREATE VIEW app.state_of AS SELECT * FROM app.one
             WHERE x = app.leak(engram._state_of('bob', '{bank}'::uuid, 'bank', 'saved')::text);
         CREATE VIEW app.context AS SELECT * FROM app.one
             WHERE x = app.leak(engram.context(owner => 'bob', workspace => 'bank')::text);
         CREATE VIEW app.near AS SELECT * FROM app.one WHERE x = app.leak((SELECT string_agg(k.id::text, ',')
             FROM engram._knn('[1,0,0,0]'::vector, 5, 'bob', '{{active}}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                              NULL, NULL, NULL, NULL, NULL) k));
         CREATE VIEW app.conflicts AS SELECT * FROM app.one WHERE x = app.leak((SELECT string_agg(c.id || c.content, ',')
             FROM engram._conflicts('bob', 'planning', '[1,0,0,0]'::vector, NULL, NULL, NULL, 0) c));
         CREATE VIEW app.hits AS SELECT * FROM app.one WHERE x = app.leak((SELECT string_agg(h.id::text, ',')
             FROM engram._search_hits('bob', '{{active}}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                      NULL, NULL, NULL, '[1,0,0,0]'::vector, 'planning', 5, NULL, NULL, false, NULL,
                                      NULL, false, NULL, false, false) h));
         CREATE VIEW app.stats AS SELECT * FROM app.empty WHERE x = app.leak(engram.stats(owner => 'bob')::text);
         CREATE TABLE app.guarded (x text); INSERT INTO app.guarded VALUES ('row');
         ALTER TABLE app.guarded ENABLE ROW LEVEL SECURITY;
         CREATE POLICY p ON app.guarded
             USING (x = app.leak(engram.state_load(owner => 'bob', workspace => 'bank', name => 'saved')::text));
         CREATE TABLE app.inbox (x text);
         CREATE RULE r AS ON INSERT TO app.inbox DO INSTEAD
             SELECT * FROM app.one WHERE x = app.leak(engram.slot_get(owner => 'bob', label => 'secrets'));
         GRANT USAGE ON SCHEMA app TO {dba};
         GRANT SELECT ON ALL TABLES IN SCHEMA app TO {dba};
         GRANT INSERT ON app.inbox TO {dba};"
    ))
    .await
    .unwrap();
    let statements = "EXPLAIN SELECT * FROM app.report;
         SELECT * FROM app.report;
         SELECT count(*) FROM app.report;
         EXPLAIN SELECT * FROM app.report_one;
         SELECT count(*) FROM app.report_one;
         EXPLAIN SELECT * FROM app.state;
         SELECT count(*) FROM app.state;
         EXPLAIN SELECT * FROM app.pinned;
         SELECT count(*) FROM app.pinned;
         SELECT count(*) FROM app.state_of;
         SELECT count(*) FROM app.context;
         SELECT count(*) FROM app.near;
         SELECT count(*) FROM app.conflicts;
         SELECT count(*) FROM app.hits;
         EXPLAIN SELECT * FROM app.stats;
         SELECT count(*) FROM app.guarded;
         EXPLAIN SELECT * FROM app.guarded;
         PREPARE q AS SELECT count(*) FROM app.report_one; EXECUTE q; EXECUTE q;
         EXPLAIN INSERT INTO app.inbox VALUES ('x');
         INSERT INTO app.inbox VALUES ('x');";
    // Each statement on its own (a refusal must not hide the next), by a
    // superuser and by a non-superuser DBA (row-level security applies to
    // it, so the policy runs), with the attacker's channel listened to.
    for who in ["", &format!("SET ROLE {dba};")] {
        let mut script = String::from("\\set ON_ERROR_STOP 0\nLISTEN loot;\n");
        for s in statements.split(";\n") {
            script.push_str(&format!("{who} {};\n", s.trim()));
        }
        script.push_str("SELECT 1 AS done;\n");
        let (_, out) = psql(&db.name, &script);
        assert!(out.contains("done"), "{out}");
        for secret in ["4711", "9044", &bobs.to_string()] {
            assert!(
                !out.contains(secret),
                "bob's secret reached the channel ({who}):\n{out}"
            );
        }
        // the k-nearest and search helpers refused the superuser's
        // statements themselves (the non-superuser DBA has no EXECUTE on
        // them)
        if who.is_empty() {
            for helper in [
                "engram._knn",
                "engram._conflicts",
                "engram._search_hits",
                "engram._pinned_slots",
                "engram._state_of",
            ] {
                assert!(
                    out.lines()
                        .any(|l| l.contains(helper) && l.contains("runs only inside engram")),
                    "{helper}: {out}"
                );
            }
        }
        // what was refused says why
        for line in out.lines().filter(|l| l.contains("ERROR")) {
            assert!(
                [
                    "engram does not lend",
                    "runs only inside engram",
                    "permission denied for function"
                ]
                .iter()
                .any(|why| line.contains(why)),
                "{line}\n{out}"
            );
        }
    }
    // The DBA's own statements keep their privilege, planned or not.
    let got: Vec<String> = column(&db.admin, "SELECT engram.slot_get(owner => 'bob', label => 'secrets')").await;
    assert_eq!(got, vec!["bob PIN is 4711".to_string()]);
    let n: i64 = db
        .admin
        .query_one(
            "SELECT count(*) FROM engram.slots s
             WHERE s.content = engram.slot_get(owner => 'bob', label => 'secrets')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
    let _ = role;
}

/// Expressions Postgres evaluates in the caller's statement before any
/// function of their author starts: a function's or procedure's parameter
/// defaults, a domain's default and checks. One that calls engram would
/// run with the DBA's privilege when a DBA calls the function or casts to
/// the domain, so an unprivileged role cannot make one; calling engram in
/// a function's body (its own frame) stays allowed. The DBA's own
/// statements that touch the attacker's tables still fire engram's
/// triggers.
#[tokio::test]
async fn defaults_and_domains_of_an_unprivileged_role_cannot_call_engram() {
    let db = TestDb::new(4).await;
    let (_role, c) = setup(&db).await;
    for ddl in [
        "CREATE FUNCTION app.report(x text DEFAULT engram.slot_get(owner => 'bob', label => 'secrets'))
             RETURNS text LANGUAGE sql AS 'SELECT x'",
        "CREATE PROCEDURE app.maint(x jsonb DEFAULT engram.ghost_settings(owner => 'bob', default_trust => 5))
             LANGUAGE sql AS 'SELECT 1'",
        "CREATE FUNCTION app.pinned(x jsonb DEFAULT engram._pinned_slots('bob', '')) RETURNS jsonb
             LANGUAGE sql AS 'SELECT x'",
        "CREATE DOMAIN app.label AS text CHECK (length(engram.slot_get(owner => 'bob', label => 'secrets')) > 0)",
        "CREATE DOMAIN app.trusted AS jsonb DEFAULT engram.stats(owner => 'bob')",
    ] {
        let (code, msg) = sqlstate(c.batch_execute(ddl).await);
        assert_eq!(code, "42501", "{ddl}: {msg}");
        assert!(msg.contains("with the privileges of whoever uses it"), "{ddl}: {msg}");
    }
    // ...nor through a function of the server that runs SQL text
    for ddl in [
        "CREATE FUNCTION app.xml(x xml DEFAULT query_to_xml('SELECT engram.create_token(owner => ''bob'', label => ''x'')',
             false, false, '')) RETURNS xml LANGUAGE sql AS 'SELECT x'",
        "CREATE DOMAIN app.q AS text CHECK (query_to_xml('SELECT 1', false, false, '') IS NOT NULL)",
    ] {
        let (code, msg) = sqlstate(c.batch_execute(ddl).await);
        assert_eq!(code, "42501", "{ddl}: {msg}");
        assert!(msg.contains("query_to_xml"), "{ddl}: {msg}");
    }
    // what ordinary schemas use stays allowed: IMMUTABLE expressions, the
    // clock, a sequence, the attacker's own functions
    c.batch_execute(
        "CREATE SEQUENCE app.n;
         CREATE FUNCTION app.own() RETURNS text LANGUAGE sql AS 'SELECT ''x''';
         CREATE FUNCTION app.stamp(at timestamptz DEFAULT now(), n bigint DEFAULT nextval('app.n'),
                                   id uuid DEFAULT gen_random_uuid(), who text DEFAULT app.own(),
                                   label text DEFAULT lower('X')) RETURNS text LANGUAGE sql AS 'SELECT who';
         CREATE DOMAIN app.plain AS text CHECK (VALUE <> '' AND length(VALUE) < 100);",
    )
    .await
    .unwrap();
    let (code, msg) = sqlstate(
        c.batch_execute(
            "ALTER DOMAIN app.plain ADD CONSTRAINT leak CHECK (length(engram.slot_get(owner => 'bob', label => 'x')) > 0)",
        )
        .await,
    );
    assert_eq!(code, "42501", "{msg}");
    // engram called in the body runs as the attacker's code: allowed, and
    // refused for bob's rows when a DBA calls it
    c.batch_execute(
        "CREATE FUNCTION app.body() RETURNS text LANGUAGE plpgsql AS
             $$ BEGIN RETURN (SELECT string_agg(l.content, ',') FROM engram.list(owner => 'bob') l); END $$",
    )
    .await
    .unwrap();
    let (code, _) = sqlstate(db.admin.query("SELECT app.body()", &[]).await);
    assert_eq!(code, "42501");
    // A DBA's own write that reads the attacker's table fires engram's
    // triggers (entities, lists) as usual.
    c.batch_execute("INSERT INTO app.loot VALUES ('bob')").await.unwrap();
    let n = db
        .admin
        .execute(
            "UPDATE engram.memories SET tags = '{x}' WHERE owner IN (SELECT what FROM app.loot)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
}
