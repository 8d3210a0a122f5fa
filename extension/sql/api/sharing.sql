---------------------------------------------------------------------------
-- sharing: trust-gated ghost reads, spaces and groups (docs/SECURITY.md)
---------------------------------------------------------------------------

-- Whether an owner's ghost talks to others (enabled) and the trust it
-- gives accessors without a grant. An owner without settings has no ghost:
-- sharing is opt-in. Returns the settings.
CREATE FUNCTION engram.ghost_settings(owner text DEFAULT NULL, enabled boolean DEFAULT true, default_trust integer DEFAULT 1)
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(ghost_settings.owner, NULL, NULL, true);
BEGIN
    PERFORM engram._lock_owner(v_owner);
    IF ghost_settings.default_trust IS NULL OR ghost_settings.default_trust NOT BETWEEN 0 AND 5 THEN
        RAISE EXCEPTION 'default_trust % is out of range; pass 0 (talk to nobody without a grant) to 5', coalesce(ghost_settings.default_trust::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    -- (now() in VALUES, not in DO UPDATE: Citus takes only immutable
    -- expressions there; the same in the upserts below.)
    INSERT INTO engram.ghost_settings AS g (owner, enabled, default_trust, updated_at)
    VALUES (v_owner, coalesce(ghost_settings.enabled, true), ghost_settings.default_trust, now())
    ON CONFLICT ON CONSTRAINT ghost_settings_pkey DO UPDATE SET enabled = excluded.enabled, default_trust = excluded.default_trust,
                                      updated_at = excluded.updated_at;
    PERFORM engram._audit(v_owner, 'ghost_settings', NULL,
        jsonb_build_object('enabled', coalesce(ghost_settings.enabled, true), 'default_trust', ghost_settings.default_trust));
    RETURN jsonb_build_object('owner', v_owner, 'enabled', coalesce(ghost_settings.enabled, true),
                              'default_trust', ghost_settings.default_trust);
END
$fn$;

-- The trust `owner` gives `accessor` (upsert): 0 blocks the accessor, 1-5
-- shows memories whose access_level is at most the trust. Returns it.
-- Levels and trusts are stored as smallint but taken as integer, so that
-- `trust => 3` resolves without a cast.
CREATE FUNCTION engram.grant(owner text DEFAULT NULL, accessor text DEFAULT NULL, trust integer DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller("grant".owner, NULL, NULL, true);
BEGIN
    PERFORM engram._lock_owner(v_owner);
    IF "grant".accessor IS NULL OR btrim("grant".accessor) = '' THEN
        RAISE EXCEPTION 'accessor is required; name the owner whose conversations with your ghost get this trust'
            USING ERRCODE = '22004';
    END IF;
    PERFORM engram._check_short('accessor', "grant".accessor, 256);
    IF "grant".accessor = v_owner THEN
        RAISE EXCEPTION 'an owner always sees its own memories; grant trust to someone else'
            USING ERRCODE = '22023';
    END IF;
    IF "grant".trust IS NULL OR "grant".trust NOT BETWEEN 0 AND 5 THEN
        RAISE EXCEPTION 'trust % is out of range; pass 0 (blocked) to 5 (sees every access level)', coalesce("grant".trust::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    INSERT INTO engram.grants AS g (owner, accessor, trust, granted_at)
    VALUES (v_owner, "grant".accessor, "grant".trust, now())
    ON CONFLICT ON CONSTRAINT grants_pkey DO UPDATE SET trust = excluded.trust, granted_at = excluded.granted_at;
    PERFORM engram._audit(v_owner, 'grant', NULL, jsonb_build_object('accessor', "grant".accessor, 'trust', "grant".trust));
    RETURN "grant".trust;
END
$fn$;

CREATE FUNCTION engram.revoke_grant(owner text DEFAULT NULL, accessor text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(revoke_grant.owner, NULL, NULL, true);
BEGIN
    PERFORM engram._lock_owner(v_owner);
    DELETE FROM engram.grants g WHERE g.owner = v_owner AND g.accessor = revoke_grant.accessor;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM engram._audit(v_owner, 'revoke_grant', NULL, jsonb_build_object('accessor', revoke_grant.accessor));
    RETURN true;
END
$fn$;

CREATE FUNCTION engram.grants(owner text DEFAULT NULL)
RETURNS TABLE (accessor text, trust smallint, granted_at timestamptz)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_owner text := engram._caller(grants.owner, NULL, NULL, false);
BEGIN
    RETURN QUERY SELECT g.accessor, g.trust, g.granted_at FROM engram.grants g
                 WHERE g.owner = v_owner ORDER BY g.accessor;
END
$fn$;

-- What the ghost (p_ghost_type, p_ghost_id) shows the accessor, as a read
-- scope over active normal memories; NULL when it shows nothing (then
-- p_denied says why). The accessor is the bound owner; a transaction bound
-- with a ghost context reads only that ghost.
CREATE FUNCTION engram._ghost_scope(p_accessor text, p_ghost_type text, p_ghost_id text, OUT s engram.read_scope, OUT p_denied text)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_ctx   jsonb := engram._binding() -> 'internal';
    v_trust smallint;
BEGIN
    IF p_ghost_id IS NULL OR btrim(p_ghost_id) = '' THEN
        RAISE EXCEPTION 'ghost_id is required: the owner (user ghost), space or group whose ghost the accessor talks to'
            USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(v_ctx) = 'object' AND (v_ctx ->> 'internal_type' <> 'ghost'
       OR v_ctx ->> 'ghost_type' IS DISTINCT FROM p_ghost_type OR v_ctx ->> 'ghost_id' IS DISTINCT FROM p_ghost_id) THEN
        RAISE EXCEPTION 'this transaction is bound to another internal context; read the ghost it was bound for'
            USING ERRCODE = '42501';
    END IF;
    CASE p_ghost_type
    WHEN 'user' THEN
        IF p_ghost_id = p_accessor THEN
            RAISE EXCEPTION 'that is the accessor''s own ghost; read your own memories with engram.search, engram.recall and engram.list'
                USING ERRCODE = '22023';
        END IF;
        SELECT CASE WHEN NOT g.enabled THEN NULL ELSE coalesce(x.trust, g.default_trust) END
        INTO v_trust
        FROM engram.ghost_settings g
        LEFT JOIN engram.grants x ON x.owner = g.owner AND x.accessor = p_accessor
        WHERE g.owner = p_ghost_id;
        IF v_trust IS NULL THEN
            p_denied := 'ghost disabled';
        ELSIF v_trust = 0 THEN
            p_denied := 'accessor blocked';
        ELSE
            s := ROW(p_ghost_id, '{active}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_trust, NULL, NULL, NULL, NULL, NULL);
        END IF;
    WHEN 'space' THEN
        s := ROW(NULL, '{active}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, p_ghost_id, NULL, NULL, NULL, NULL);
    WHEN 'group' THEN
        IF EXISTS (SELECT 1 FROM engram.group_members g WHERE g.group_id = p_ghost_id AND g.member = p_accessor) THEN
            s := ROW(NULL, '{active}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, p_ghost_id, NULL, NULL, NULL);
        ELSE
            p_denied := 'not a member of the group';
        END IF;
    ELSE
        RAISE EXCEPTION 'ghost_type % is unknown; use user, space or group', engram._echo(p_ghost_type)
            USING ERRCODE = '22023';
    END CASE;
END
$fn$;

-- A ghost read that showed nothing because of a setting, a grant or a
-- membership: audited where the ghost's owner (user ghosts) or the DBA
-- (spaces, groups) sees it, never in the accessor's own log.
CREATE FUNCTION engram._ghost_denied(p_accessor text, p_ghost_type text, p_ghost_id text, p_why text, p_memory uuid, p_memory_owner text)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM engram._audit_read(CASE WHEN p_ghost_type = 'user' THEN p_ghost_id ELSE p_memory_owner END,
        'ghost_denied', p_memory,
        jsonb_build_object('accessor', p_accessor, 'ghost_type', p_ghost_type, 'ghost_id', p_ghost_id, 'why', p_why));
END
$fn$;

CREATE FUNCTION engram.ghost_search(
    accessor text DEFAULT NULL,
    ghost_type text DEFAULT NULL,
    ghost_id text DEFAULT NULL,
    query_embedding vector DEFAULT NULL,
    query_text text DEFAULT NULL,
    k integer DEFAULT 10,
    kinds text[] DEFAULT NULL,
    tags_all text[] DEFAULT NULL,
    tags_any text[] DEFAULT NULL,
    min_similarity real DEFAULT 0)
RETURNS TABLE (id uuid, content text, kind text, tags text[], metadata jsonb, similarity real,
               score real, trust_score real, staleness_score real, created_at timestamptz, source text,
               occurred_at timestamptz, valid_from timestamptz, valid_to timestamptz,
               namespace text[], key text, value jsonb)
LANGUAGE plpgsql ROWS 10 AS $fn$
DECLARE
    v_accessor text := engram._owner(ghost_search.accessor);
    v_view     record;
    s          engram.read_scope;
BEGIN
    PERFORM engram._check_flat_filters(ghost_search.kinds, ghost_search.tags_all, ghost_search.tags_any, NULL, NULL);
    v_view := engram._ghost_scope(v_accessor, ghost_search.ghost_type, ghost_search.ghost_id);
    IF v_view.p_denied IS NOT NULL THEN
        PERFORM engram._ghost_denied(v_accessor, ghost_search.ghost_type, ghost_search.ghost_id, v_view.p_denied, NULL, NULL);
        RETURN;
    END IF;
    s := v_view.s;
    s.kinds := ghost_search.kinds;
    s.tags_all := ghost_search.tags_all;
    s.tags_any := ghost_search.tags_any;
    RETURN QUERY SELECT h.* FROM unnest(engram._search(s, ghost_search.query_embedding, ghost_search.query_text,
                                                       ghost_search.k, ghost_search.min_similarity,
                                                       engram.time_window(ghost_search.query_text))) h;
END
$fn$;

-- One memory through a ghost; no row when the ghost does not show it
-- (missing and denied look the same to the accessor; a denial is audited).
CREATE FUNCTION engram.ghost_recall(
    accessor text DEFAULT NULL,
    ghost_type text DEFAULT NULL,
    ghost_id text DEFAULT NULL,
    id uuid DEFAULT NULL)
RETURNS SETOF engram.recalled_memory
LANGUAGE plpgsql AS $fn$
DECLARE
    v_accessor text := engram._owner(ghost_recall.accessor);
    v_view     record;
    s          engram.read_scope;
    r          engram.memories;
BEGIN
    IF ghost_recall.id IS NULL THEN
        RAISE EXCEPTION 'id is required; pass id => ''<memory id>'' (see engram.ghost_search or engram.ghost_list)'
            USING ERRCODE = '22004';
    END IF;
    v_view := engram._ghost_scope(v_accessor, ghost_recall.ghost_type, ghost_recall.ghost_id);
    s := v_view.s;
    SELECT m.* INTO r FROM engram.memories m
    WHERE m.id = ghost_recall.id AND v_view.p_denied IS NULL
      AND (s.owner IS NULL OR m.owner = s.owner)
      AND m.status = 'active' AND (m.expires_at IS NULL OR m.expires_at > now())
      AND m.internal_type IS NULL
      AND (s.max_level IS NULL OR m.access_level <= s.max_level)
      AND (s.space IS NULL OR EXISTS (SELECT 1 FROM engram.publications p WHERE p.owner = m.owner AND p.memory_id = m.id AND p.space = s.space))
      AND (s.group_id IS NULL OR EXISTS (SELECT 1 FROM engram.publications p WHERE p.owner = m.owner AND p.memory_id = m.id AND p.group_id = s.group_id));
    IF r.id IS NULL THEN
        -- Audited whether or not the id exists: the write (and the audit
        -- sequence it advances) must not tell the accessor which it was.
        SELECT m.* INTO r FROM engram.memories m WHERE m.id = ghost_recall.id;
        PERFORM engram._ghost_denied(v_accessor, ghost_recall.ghost_type, ghost_recall.ghost_id,
            coalesce(v_view.p_denied, 'not shown by this ghost'), ghost_recall.id, r.owner);
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM engram._recalled(r);
END
$fn$;

CREATE FUNCTION engram.ghost_list(
    accessor text DEFAULT NULL,
    ghost_type text DEFAULT NULL,
    ghost_id text DEFAULT NULL,
    kinds text[] DEFAULT NULL,
    tags_all text[] DEFAULT NULL,
    order_by text DEFAULT 'created_at',
    descending boolean DEFAULT true,
    "limit" integer DEFAULT 50,
    after text DEFAULT NULL)
RETURNS SETOF engram.listed_memory
LANGUAGE plpgsql AS $fn$
DECLARE
    v_accessor text := engram._owner(ghost_list.accessor);
    v_view     record;
    s          engram.read_scope;
BEGIN
    PERFORM engram._check_flat_filters(ghost_list.kinds, ghost_list.tags_all, NULL, NULL, NULL);
    v_view := engram._ghost_scope(v_accessor, ghost_list.ghost_type, ghost_list.ghost_id);
    IF v_view.p_denied IS NOT NULL THEN
        PERFORM engram._ghost_denied(v_accessor, ghost_list.ghost_type, ghost_list.ghost_id, v_view.p_denied, NULL, NULL);
        RETURN;
    END IF;
    s := v_view.s;
    s.kinds := ghost_list.kinds;
    s.tags_all := ghost_list.tags_all;
    RETURN QUERY SELECT * FROM engram._list(s, 'active', ghost_list.order_by, ghost_list.descending,
                                            ghost_list."limit", ghost_list.after);
END
$fn$;

-- Publishes one of the owner's normal memories to a space or a group
-- (exactly one of the two); idempotent. Returns the publication id.
CREATE FUNCTION engram.publish(owner text DEFAULT NULL, id uuid DEFAULT NULL, space text DEFAULT NULL, group_id text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(publish.owner, NULL, NULL, true);
    r       engram.memories;
    v_pub   uuid;
BEGIN
    IF (publish.space IS NULL) = (publish.group_id IS NULL) OR btrim(coalesce(publish.space, publish.group_id)) = '' THEN
        RAISE EXCEPTION 'publish to exactly one target: space => ''<space id>'' or group_id => ''<group id>'''
            USING ERRCODE = '22023';
    END IF;
    PERFORM engram._check_short('space', publish.space, 200);
    PERFORM engram._check_short('group_id', publish.group_id, 200);
    -- A group is closed (docs/SECURITY.md): what is published there reaches its
    -- members' prompts, so only members, platform tokens and DBAs publish.
    IF publish.group_id IS NOT NULL AND NOT engram._privileged_or_platform()
       AND NOT EXISTS (SELECT 1 FROM engram.group_members g
                       WHERE g.group_id = publish.group_id AND g.member = v_owner) THEN
        RAISE EXCEPTION 'owner % is not a member of group %; only members publish to a group (a DBA or a platform token adds members with engram.add_member)', engram._echo(v_owner), engram._echo(publish.group_id)
            USING ERRCODE = '42501';
    END IF;
    PERFORM engram._lock_owner(v_owner);
    r := engram._locate(v_owner, publish.id, NULL, NULL, true);
    PERFORM engram._require_writable(r, 'publish');
    INSERT INTO engram.publications AS p (memory_id, owner, space, group_id)
    VALUES (r.id, v_owner, publish.space, publish.group_id)
    ON CONFLICT DO NOTHING
    RETURNING p.id INTO v_pub;
    IF v_pub IS NULL THEN
        SELECT p.id INTO v_pub FROM engram.publications p
        WHERE p.owner = r.owner AND p.memory_id = r.id AND p.space IS NOT DISTINCT FROM publish.space
          AND p.group_id IS NOT DISTINCT FROM publish.group_id;
        RETURN v_pub;
    END IF;
    PERFORM engram._audit(v_owner, 'publish', r.id, jsonb_build_object('space', publish.space, 'group_id', publish.group_id));
    RETURN v_pub;
END
$fn$;

-- Withdraws a memory from a space or a group, or from everywhere when both
-- are NULL. Returns whether anything was withdrawn.
CREATE FUNCTION engram.unpublish(owner text DEFAULT NULL, id uuid DEFAULT NULL, space text DEFAULT NULL, group_id text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(unpublish.owner, NULL, NULL, true);
    r       engram.memories;
    v_count bigint;
BEGIN
    PERFORM engram._lock_owner(v_owner);
    r := engram._locate(v_owner, unpublish.id, NULL, NULL, true);
    DELETE FROM engram.publications p
    WHERE p.owner = r.owner AND p.memory_id = r.id
      AND (unpublish.space IS NULL OR p.space = unpublish.space)
      AND (unpublish.group_id IS NULL OR p.group_id = unpublish.group_id);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count > 0 THEN
        PERFORM engram._audit(v_owner, 'unpublish', r.id,
            jsonb_build_object('space', unpublish.space, 'group_id', unpublish.group_id, 'count', v_count));
    END IF;
    RETURN v_count > 0;
END
$fn$;

-- An operator, aggregate or cast names its function directly: evaluating
-- it runs that function with no code of its creator in between, so one
-- that an unprivileged role built on engram's functions would lend engram
-- the privileges of whoever evaluates it (extension/src/security/hooks.rs sees
-- no function or relation of that role). Refused when defined.
--
-- So would an expression that Postgres evaluates in the caller's
-- statement before any function of its creator starts: a function's or
-- procedure's parameter defaults, a domain's default and its checks. Such
-- an expression of an unprivileged role may call only functions that
-- cannot reach engram with the caller's rights: IMMUTABLE ones, its own
-- roles' (their frames withhold privilege), and a few that read the clock
-- or a sequence; anything else (engram's functions, or query_to_xml,
-- which runs any SQL text) is refused when defined. The functions are read
-- from the stored node trees (funcid and opfuncid).
CREATE FUNCTION engram._refuse_borrowed_functions() RETURNS event_trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    v_object text;
    v_called text;
BEGIN
    IF coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user), false)
       OR pg_catalog.has_parameter_privilege(current_user, 'engram.owner', 'SET') THEN
        RETURN;
    END IF;
    SELECT d.object_identity INTO v_object
    FROM pg_catalog.pg_event_trigger_ddl_commands() d
    WHERE EXISTS (
        SELECT 1 FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'engram'::regnamespace
          AND p.oid = ANY (ARRAY(
              SELECT unnest(ARRAY[o.oprcode::oid, o.oprrest::oid, o.oprjoin::oid])
              FROM pg_catalog.pg_operator o
              WHERE d.classid = 'pg_catalog.pg_operator'::regclass AND o.oid = d.objid
              UNION ALL
              SELECT unnest(ARRAY[a.aggtransfn::oid, a.aggfinalfn::oid, a.aggcombinefn::oid, a.aggserialfn::oid,
                                  a.aggdeserialfn::oid, a.aggmtransfn::oid, a.aggminvtransfn::oid, a.aggmfinalfn::oid])
              FROM pg_catalog.pg_aggregate a
              WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND a.aggfnoid = d.objid
              UNION ALL
              SELECT c.castfunc FROM pg_catalog.pg_cast c
              WHERE d.classid = 'pg_catalog.pg_cast'::regclass AND c.oid = d.objid)))
    LIMIT 1;
    IF v_object IS NOT NULL THEN
        RAISE EXCEPTION '% would call a function of engram for whoever evaluates it; only a superuser or a role granted SET ON PARAMETER engram.owner may build operators, aggregates or casts on engram''s functions', v_object
            USING ERRCODE = '42501';
    END IF;
    SELECT d.object_identity, p.oid::regprocedure::text INTO v_object, v_called
    FROM pg_catalog.pg_event_trigger_ddl_commands() d,
         LATERAL (SELECT f.proargdefaults::text AS expr FROM pg_catalog.pg_proc f
                  WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND f.oid = d.objid
                  UNION ALL
                  SELECT t.typdefaultbin::text FROM pg_catalog.pg_type t
                  WHERE d.classid = 'pg_catalog.pg_type'::regclass AND t.oid = d.objid
                  UNION ALL
                  SELECT k.conbin::text FROM pg_catalog.pg_constraint k
                  WHERE (d.classid = 'pg_catalog.pg_type'::regclass AND k.contypid = d.objid)
                     OR (d.classid = 'pg_catalog.pg_constraint'::regclass AND k.oid = d.objid)) e,
         regexp_matches(e.expr, ':(?:funcid|opfuncid) ([0-9]+)', 'g') x
         JOIN pg_catalog.pg_proc p ON p.oid = x[1]::oid
         JOIN pg_catalog.pg_roles o ON o.oid = p.proowner
    WHERE p.provolatile <> 'i'
      AND (o.rolsuper OR pg_catalog.has_parameter_privilege(p.proowner, 'engram.owner', 'SET'))
      AND NOT (p.pronamespace = 'pg_catalog'::regnamespace
               AND p.proname IN ('now', 'clock_timestamp', 'statement_timestamp', 'transaction_timestamp', 'timeofday',
                                 'gen_random_uuid', 'random', 'nextval', 'currval', 'lastval', 'current_setting',
                                 'current_database', 'current_schema', 'current_schemas', 'current_user', 'session_user',
                                 'pg_backend_pid', 'txid_current', 'pg_current_xact_id'))
    LIMIT 1;
    IF v_object IS NOT NULL THEN
        RAISE EXCEPTION '% would call % with the privileges of whoever uses it (a parameter default, or a domain''s default or check, runs in the caller''s statement); only a superuser or a role granted SET ON PARAMETER engram.owner may make one', v_object, v_called
            USING ERRCODE = '42501',
                  HINT = 'Call it inside the function''s body instead (it then runs as your code), or use an IMMUTABLE expression.';
    END IF;
END
$fn$;
CREATE EVENT TRIGGER engram_borrowed_functions ON ddl_command_end
    WHEN TAG IN ('CREATE OPERATOR', 'ALTER OPERATOR', 'CREATE AGGREGATE', 'CREATE CAST', 'CREATE FUNCTION',
                 'CREATE PROCEDURE', 'CREATE DOMAIN', 'ALTER DOMAIN')
    EXECUTE FUNCTION engram._refuse_borrowed_functions();

-- Administrative functions (tokens, erasure, export/import, maintenance,
-- configuration) run only for a privileged caller whose privilege is not
-- withheld (extension/src/security/hooks.rs): an EXECUTE grant alone does not
-- let code of another role that a DBA's statement runs (a trigger, a view,
-- a column default) reach them.
CREATE FUNCTION engram._require_privileged(p_action text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    PERFORM engram._check_planted();
    PERFORM engram._check_restored();
    IF NOT engram._caller_privileged() THEN
        RAISE EXCEPTION '% is for DBAs (a superuser, or a role granted SET ON PARAMETER engram.owner)%', p_action,
            engram._withheld_note()
            USING ERRCODE = '42501';
    END IF;
END
$fn$;

-- '' or, when the session's role is privileged but its privilege is
-- withheld from this call, why (for the refusal's message).
CREATE FUNCTION engram._withheld_note() RETURNS text
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_withheld text := engram._withheld_privilege();
BEGIN
    RETURN CASE WHEN v_withheld IS NULL THEN ''
                ELSE format('; engram does not lend the privileges of role %s to this call: %s',
                            engram._caller_role(), v_withheld) END;
END
$fn$;

-- Group membership is administered by DBAs and platform tokens.
CREATE FUNCTION engram._require_admin(p_action text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    PERFORM engram._check_planted();
    IF NOT engram._privileged_or_platform() THEN
        RAISE EXCEPTION '% is for DBAs and platform tokens; bind with a platform token (engram.bind)%', p_action,
            engram._withheld_note()
            USING ERRCODE = '42501';
    END IF;
END
$fn$;

CREATE FUNCTION engram.add_member(group_id text DEFAULT NULL, member text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM engram._require_admin('add_member');
    PERFORM engram._check_short('group_id', add_member.group_id, 200);
    PERFORM engram._check_short('member', add_member.member, 256);
    IF add_member.member IS NOT NULL THEN
        PERFORM engram._lock_owner(add_member.member);
    END IF;
    IF btrim(coalesce(add_member.group_id, '')) = '' OR btrim(coalesce(add_member.member, '')) = '' THEN
        RAISE EXCEPTION 'group_id and member are required, e.g. add_member(group_id => ''team-a'', member => ''alice'')'
            USING ERRCODE = '22004';
    END IF;
    INSERT INTO engram.group_members AS g (group_id, member) VALUES (add_member.group_id, add_member.member)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM engram._audit(NULL, 'add_member', NULL, jsonb_build_object('group_id', add_member.group_id, 'member', add_member.member));
    RETURN true;
END
$fn$;

CREATE FUNCTION engram.remove_member(group_id text DEFAULT NULL, member text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_withdrawn bigint;
BEGIN
    PERFORM engram._require_admin('remove_member');
    PERFORM engram._check_short('group_id', remove_member.group_id, 200);
    PERFORM engram._check_short('member', remove_member.member, 256);
    IF remove_member.member IS NOT NULL THEN
        PERFORM engram._lock_owner(remove_member.member);
    END IF;
    DELETE FROM engram.group_members g WHERE g.group_id = remove_member.group_id AND g.member = remove_member.member;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- What the member published to the group leaves with it: a former
    -- member keeps no channel into the group's conversations.
    WITH gone AS (
        DELETE FROM engram.publications p
        WHERE p.owner = remove_member.member AND p.group_id = remove_member.group_id
        RETURNING p.memory_id)
    SELECT count(*) INTO v_withdrawn FROM gone;
    PERFORM engram._audit(NULL, 'remove_member', NULL, jsonb_build_object('group_id', remove_member.group_id,
        'member', remove_member.member, 'withdrawn_publications', v_withdrawn));
    RETURN true;
END
$fn$;
