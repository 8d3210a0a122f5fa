---------------------------------------------------------------------------
-- quotas: what each owner stores, counted in engram.owner_locks
---------------------------------------------------------------------------

-- Adds p_delta to counter p_counter of owner p_owner; a growth that takes
-- the owner past its quota (engram.max_<counter>_per_owner) fails with
-- 54000, and the statement that grew it, with everything else in the
-- transaction, is undone. The writers hold the owner's lock row already,
-- so counting costs one row update, never a count over the owner's rows.
-- One owner by a plain equality: on Citus it runs on the owner's shard.
CREATE FUNCTION engram._add_usage(p_counter text, p_owner text, p_delta bigint) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_limit bigint;
    v_used  bigint;
    v_all   bigint[];
    v_d     bigint[] := ARRAY[CASE WHEN p_counter = 'memories' THEN p_delta ELSE 0 END,
                              CASE WHEN p_counter = 'events' THEN p_delta ELSE 0 END,
                              CASE WHEN p_counter = 'image_bytes' THEN p_delta ELSE 0 END,
                              CASE WHEN p_counter = 'slots' THEN p_delta ELSE 0 END,
                              CASE WHEN p_counter = 'workspaces' THEN p_delta ELSE 0 END,
                              CASE WHEN p_counter = 'states' THEN p_delta ELSE 0 END];
BEGIN
    IF p_owner IS NULL OR coalesce(p_delta, 0) = 0 THEN
        RETURN;
    END IF;
    IF p_delta < 0 THEN
        UPDATE engram.owner_locks AS l SET
            memories = greatest(l.memories + v_d[1], 0), events = greatest(l.events + v_d[2], 0),
            image_bytes = greatest(l.image_bytes + v_d[3], 0), slots = greatest(l.slots + v_d[4], 0),
            workspaces = greatest(l.workspaces + v_d[5], 0), states = greatest(l.states + v_d[6], 0)
        WHERE l.owner = p_owner;
        RETURN;
    END IF;
    v_limit := (engram._setting_quotas() ->> p_counter)::bigint;
    INSERT INTO engram.owner_locks AS l (owner, memories, events, image_bytes, slots, workspaces, states)
    VALUES (p_owner, v_d[1], v_d[2], v_d[3], v_d[4], v_d[5], v_d[6])
    ON CONFLICT (owner) DO UPDATE SET
        memories = l.memories + excluded.memories, events = l.events + excluded.events,
        image_bytes = l.image_bytes + excluded.image_bytes, slots = l.slots + excluded.slots,
        workspaces = l.workspaces + excluded.workspaces, states = l.states + excluded.states
    RETURNING ARRAY[l.memories, l.events, l.image_bytes, l.slots, l.workspaces, l.states] INTO v_all;
    -- (picked here, not in RETURNING: Citus mis-deparses a simple CASE over a parameter)
    v_used := v_all[array_position(ARRAY['memories', 'events', 'image_bytes', 'slots', 'workspaces', 'states'], p_counter)];
    IF v_used > v_limit THEN
        RAISE EXCEPTION 'owner % would store % % (quota engram.max_%_per_owner = %); nothing was written. Free room (hard forget, purge, release images, delete slots) or ask a superuser to raise it: ALTER DATABASE % SET engram.max_%_per_owner = ... (or ALTER SYSTEM SET ..., then SELECT pg_reload_conf())',
            engram._echo(p_owner), v_used, replace(p_counter, '_', ' '), p_counter, v_limit,
            quote_ident(current_database()), p_counter
            USING ERRCODE = '54000';
    END IF;
END
$fn$;

-- AFTER INSERT and AFTER DELETE, per row, on each counted table;
-- TG_ARGV[0] names the counter. Rows of memories, events, slots,
-- workspaces and states count one each; images count their bytes. Per row
-- since 0.8.0 (see the scope lists' triggers): the counter row is the
-- row's own owner's, on the same node.
CREATE FUNCTION engram._count_usage() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text;
    v_delta bigint := 1;
BEGIN
    IF TG_OP = 'INSERT' THEN
        v_owner := NEW.owner;
        IF TG_TABLE_NAME = 'images' THEN v_delta := NEW.bytes; END IF;
    ELSE
        v_owner := OLD.owner;
        IF TG_TABLE_NAME = 'images' THEN v_delta := -OLD.bytes; ELSE v_delta := -1; END IF;
    END IF;
    PERFORM engram._add_usage(TG_ARGV[0], v_owner, v_delta);
    RETURN NULL;
END
$fn$;

-- TRUNCATE of a counted table (a DBA's): count again.
CREATE FUNCTION engram._usage_truncated() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    -- On a Citus shard (memories_102008...) the derived tables are other
    -- shards, which a trigger there cannot reach: the DBA rebuilds them
    -- after a TRUNCATE (docs/SCALING.md).
    IF TG_TABLE_NAME ~ '_[0-9]+$' THEN
        RETURN NULL;
    END IF;
    PERFORM engram.recount_usage();
    RETURN NULL;
END
$fn$;

CREATE TRIGGER usage_insert AFTER INSERT ON engram.memories
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('memories');
CREATE TRIGGER usage_delete AFTER DELETE ON engram.memories
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('memories');
CREATE TRIGGER usage_insert AFTER INSERT ON engram.events
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('events');
CREATE TRIGGER usage_delete AFTER DELETE ON engram.events
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('events');
CREATE TRIGGER usage_insert AFTER INSERT ON engram.images
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('image_bytes');
CREATE TRIGGER usage_delete AFTER DELETE ON engram.images
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('image_bytes');
CREATE TRIGGER usage_insert AFTER INSERT ON engram.slots
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('slots');
CREATE TRIGGER usage_delete AFTER DELETE ON engram.slots
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('slots');
CREATE TRIGGER usage_insert AFTER INSERT ON engram.workspaces
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('workspaces');
CREATE TRIGGER usage_delete AFTER DELETE ON engram.workspaces
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('workspaces');
CREATE TRIGGER usage_insert AFTER INSERT ON engram.states
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('states');
CREATE TRIGGER usage_delete AFTER DELETE ON engram.states
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('states');
CREATE TRIGGER usage_truncate AFTER TRUNCATE ON engram.memories
    FOR EACH STATEMENT EXECUTE FUNCTION engram._usage_truncated();
CREATE TRIGGER usage_truncate AFTER TRUNCATE ON engram.events
    FOR EACH STATEMENT EXECUTE FUNCTION engram._usage_truncated();
CREATE TRIGGER usage_truncate AFTER TRUNCATE ON engram.images
    FOR EACH STATEMENT EXECUTE FUNCTION engram._usage_truncated();
CREATE TRIGGER usage_truncate AFTER TRUNCATE ON engram.slots
    FOR EACH STATEMENT EXECUTE FUNCTION engram._usage_truncated();
CREATE TRIGGER usage_truncate AFTER TRUNCATE ON engram.workspaces
    FOR EACH STATEMENT EXECUTE FUNCTION engram._usage_truncated();
CREATE TRIGGER usage_truncate AFTER TRUNCATE ON engram.states
    FOR EACH STATEMENT EXECUTE FUNCTION engram._usage_truncated();

-- Counts every owner's usage again from the rows, for DBAs: after a
-- restore with triggers disabled (pg_restore --disable-triggers), or any
-- doubt; the upgrade to 0.7.0 and the TRUNCATE triggers run it. Counts
-- only, never refuses (an owner may be over a quota lowered since).
-- Returns the number of owners counted.
CREATE FUNCTION engram.recount_usage() RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    v_count bigint;
BEGIN
    PERFORM engram._require_privileged('recount_usage');
    INSERT INTO engram.owner_locks AS l (owner)
    SELECT o.owner FROM (
        SELECT m.owner FROM engram.memories m UNION SELECT e.owner FROM engram.events e
        UNION SELECT i.owner FROM engram.images i UNION SELECT s.owner FROM engram.slots s
        UNION SELECT w.owner FROM engram.workspaces w UNION SELECT x.owner FROM engram.states x) o
    ORDER BY o.owner
    ON CONFLICT DO NOTHING;
    -- Every writer waits (it row-locks its owner's row): a table lock, not
    -- FOR UPDATE over every row, which Citus cannot take across shards.
    LOCK TABLE engram.owner_locks IN EXCLUSIVE MODE;
    UPDATE engram.owner_locks AS l SET
        memories = coalesce((SELECT count(*) FROM engram.memories m WHERE m.owner = l.owner), 0),
        events = coalesce((SELECT count(*) FROM engram.events e WHERE e.owner = l.owner), 0),
        image_bytes = coalesce((SELECT sum(i.bytes) FROM engram.images i WHERE i.owner = l.owner), 0),
        slots = coalesce((SELECT count(*) FROM engram.slots s WHERE s.owner = l.owner), 0),
        workspaces = coalesce((SELECT count(*) FROM engram.workspaces w WHERE w.owner = l.owner), 0),
        states = coalesce((SELECT count(*) FROM engram.states x WHERE x.owner = l.owner), 0);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$fn$;

-- Usage against each quota, for engram.stats: {counter: {used, limit}};
-- for the whole database (p_owner NULL), `used` is the busiest owner's.
CREATE FUNCTION engram._quotas(p_owner text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_limits jsonb := engram._setting_quotas();
    v_used   jsonb;
BEGIN
    SELECT jsonb_build_object('memories', coalesce(max(l.memories), 0), 'events', coalesce(max(l.events), 0),
                              'image_bytes', coalesce(max(l.image_bytes), 0), 'slots', coalesce(max(l.slots), 0),
                              'workspaces', coalesce(max(l.workspaces), 0), 'states', coalesce(max(l.states), 0))
    INTO v_used FROM engram.owner_locks l WHERE p_owner IS NULL OR l.owner = p_owner;
    RETURN (SELECT jsonb_object_agg(k.key, jsonb_build_object('used', v_used -> k.key, 'limit', k.value,
                                                              'setting', 'engram.max_' || k.key || '_per_owner'))
            FROM jsonb_each(v_limits) k);
END
$fn$;

-- Every owner the database holds something for, with what each holds: the
-- owner list of an application's dashboard, for a platform token (which
-- may act for any owner) or a DBA. Read from the counters the quotas keep
-- (engram.owner_locks): one row per owner, never a scan of the memories.
-- `prefix` narrows by name; `after` continues a page (owners sort by
-- name, byte order); an owner holding nothing (an erased one, say) is not
-- listed. Logged, as every read across owners is: a leaked platform token
-- that enumerates the owners shows in the server log.
CREATE FUNCTION engram.owners(prefix text DEFAULT NULL, after text DEFAULT NULL, "limit" integer DEFAULT 100)
RETURNS TABLE (owner text, memories bigint, events bigint, image_bytes bigint, slots bigint,
               workspaces bigint, states bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_binding jsonb := engram._binding();
BEGIN
    PERFORM engram._check_planted();
    PERFORM engram._check_restored();
    IF NOT engram._caller_privileged() THEN
        IF v_binding IS NULL OR (v_binding ->> 'platform') IS DISTINCT FROM 'true' THEN
            RAISE EXCEPTION 'owners lists every owner: it needs a transaction bound with a platform token (engram.bind) or a DBA'
                USING ERRCODE = '42501',
                      HINT = 'a user token sees its own owner: engram.stats()';
        END IF;
        IF jsonb_typeof(v_binding -> 'internal') = 'object' THEN
            RAISE EXCEPTION 'an agent or ghost conversation cannot list owners; bind without an internal context'
                USING ERRCODE = '42501';
        END IF;
    END IF;
    -- (capped only against abuse: longer than any owner a binding names)
    PERFORM engram._check_short('prefix', owners.prefix, 4096);
    PERFORM engram._check_short('after', owners.after, 4096);
    IF owners."limit" IS NULL OR owners."limit" NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'limit % is out of range; pass 1 to 1000', owners."limit"
            USING ERRCODE = '22023';
    END IF;
    RAISE LOG 'engram audit: owners listed (prefix %, after %) by %', owners.prefix, owners.after,
        coalesce(v_binding ->> 'token_label', current_user::text);
    RETURN QUERY
    SELECT l.owner, l.memories, l.events, l.image_bytes, l.slots, l.workspaces, l.states
    FROM engram.owner_locks l
    WHERE (owners.prefix IS NULL OR left(l.owner, length(owners.prefix)) = owners.prefix)
      AND (owners.after IS NULL OR l.owner COLLATE "C" > owners.after COLLATE "C")
      AND (l.memories + l.events + l.image_bytes + l.slots + l.workspaces + l.states) > 0
    ORDER BY l.owner COLLATE "C"
    LIMIT owners."limit";
END
$fn$;
