---------------------------------------------------------------------------
-- scale-out on Citus (docs/SCALING.md)
---------------------------------------------------------------------------

-- The tables engram.distribute() distributes by owner, co-located with
-- engram.memories, in an order where every referenced table comes before
-- the tables that reference it; and the small global tables it replicates
-- to every node. tests/tests/scale_out.rs keeps them equal to the schema.
CREATE FUNCTION engram._distributed_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT ARRAY['memories', 'workspaces', 'images', 'revisions', 'memory_access', 'audit_log',
                 'ghost_settings', 'grants', 'publications', 'owner_locks', 'slots', 'states', 'events',
                 'misses', 'scope_entries', 'scope_blocks', 'scope_sizes', 'image_data', 'image_embeddings', 'image_holds',
                 'memory_entities', 'text_postings', 'text_terms', 'text_sizes']
$fn$;

CREATE FUNCTION engram._reference_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT ARRAY['tokens', 'group_members', 'node_secret']
$fn$;

-- Tables that stay on the coordinator: the database's configuration and
-- restore state, which only the coordinator's functions read (a Citus
-- cluster is restored per node: docs/BACKUP.md).
CREATE FUNCTION engram._local_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT ARRAY['configuration', 'restore_loads']
$fn$;

-- Whether engram's tables are distributed (engram.distribute ran): Citus
-- is installed here and knows engram.memories.
CREATE FUNCTION engram._is_distributed() RETURNS boolean
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v boolean;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = ''engram.memories''::regclass)'
        INTO v;
    RETURN v;
END
$fn$;

-- Sets p_name to p_value for the rest of the transaction here and on the
-- workers it reaches: a SET LOCAL that Citus propagates (to the connections
-- open now, and at the start of every later one) while
-- citus.propagate_set_commands is 'local'. Carries bindings' proofs
-- (engram.bind).
CREATE FUNCTION engram._propagate_setting(p_name text, p_value text) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_prev text := current_setting('citus.propagate_set_commands', true);
BEGIN
    PERFORM pg_catalog.set_config('citus.propagate_set_commands', 'local', true);
    EXECUTE format('SET LOCAL %s = %L', p_name, p_value);
    PERFORM pg_catalog.set_config('citus.propagate_set_commands', coalesce(nullif(v_prev, ''), 'none'), true);
END
$fn$;

-- The owner a binding's proof (engram.remote_binding) proves, for
-- row-level security on a node where engram.bind did not run (a Citus
-- worker): NULL unless the claimed token is usable, the MAC is its hash's,
-- the proof has not expired (nor expires more than 11 minutes out), and a
-- user token claims its own owner. NULL too for an internal context, and
-- where track_activities is on. Runs as the extension's owner (it reads
-- tokens and the node secret) and never returns either.
CREATE FUNCTION engram._remote_owner(p_proof text) RETURNS text
LANGUAGE plpgsql STABLE
-- It runs inside the shard queries whose rows it filters, and reads the
-- tokens (a reference table, on this node): Citus would refuse that nested
-- read otherwise.
SET citus.allow_nested_distributed_execution = on
AS $fn$
DECLARE
    v_claim jsonb := engram._binding_claim(p_proof);
    v_now   float8 := extract(epoch FROM clock_timestamp());
    r       engram.tokens;
BEGIN
    PERFORM engram._check_planted();
    -- Only where no session shows another's statements (a proof travels as
    -- statement text): engram.distribute() turns that off on the workers.
    IF v_claim IS NULL OR current_setting('track_activities') <> 'off'
       OR (v_claim ->> 'x')::bigint NOT BETWEEN v_now AND v_now + 660 THEN
        RETURN NULL;
    END IF;
    SELECT * INTO r FROM engram.tokens t
    WHERE t.id = (v_claim ->> 't')::uuid AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now());
    IF r.id IS NULL
       OR NOT engram._binding_proof_valid(p_proof, engram._binding_key((SELECT k.secret FROM engram.node_secret k),
                                                                       r.token_sha256))
       OR (v_claim ->> 'o' <> r.owner AND NOT r.platform) THEN
        RETURN NULL;
    END IF;
    RETURN CASE WHEN (v_claim ->> 'i')::boolean THEN NULL ELSE v_claim ->> 'o' END;
END
$fn$;

-- Distributes engram on a Citus coordinator: every owner-scoped
-- table by owner, all co-located, so that one owner's rows live on one
-- worker; tokens and group members as reference tables (read on every
-- call, on every node). engram's functions stay on the coordinator (see
-- docs/SCALING.md, "What is not delegated yet"). Run once by
-- a superuser after CREATE EXTENSION citus, adding the workers, and CREATE
-- EXTENSION engram; a second run does only what is missing. Returns what
-- it did.
CREATE FUNCTION engram.distribute(shard_count integer DEFAULT 32) RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
    t        text;
    v_tables integer := 0;
    v_refs   integer := 0;
    v_known  boolean;
    v_failed bigint;
BEGIN
    PERFORM engram._require_privileged('distribute');
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = engram._caller_role()) THEN
        RAISE EXCEPTION 'distribute is for superusers (it creates distributed tables); connect as one'
            USING ERRCODE = '42501';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension e WHERE e.extname = 'citus') THEN
        RAISE EXCEPTION 'Citus is not installed in database %; run CREATE EXTENSION citus on the coordinator and add the workers (SELECT citus_add_node(...)) first', current_database()
            USING ERRCODE = '55000';
    END IF;
    IF distribute.shard_count IS NULL OR distribute.shard_count NOT BETWEEN 1 AND 64000 THEN
        RAISE EXCEPTION 'shard_count % is out of range; pass 1 to 64000 (32 by default; a few per worker core)', coalesce(distribute.shard_count::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    -- engram's triggers keep derived rows (scope lists, quotas, image
    -- holds) of the same owner, which live on the same shard group: safe
    -- despite Citus's name for the setting.
    PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    FOREACH t IN ARRAY engram._distributed_tables() LOOP
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1::regclass)'
            INTO v_known USING format('engram.%I', t);
        CONTINUE WHEN v_known;
        IF t = 'memories' THEN
            EXECUTE 'SELECT pg_catalog.create_distributed_table(''engram.memories'', ''owner'', colocate_with => ''none'', shard_count => $1)'
                USING distribute.shard_count;
        ELSE
            EXECUTE format('SELECT pg_catalog.create_distributed_table(%L, ''owner'', colocate_with => ''engram.memories'')',
                           format('engram.%I', t));
        END IF;
        v_tables := v_tables + 1;
    END LOOP;
    FOREACH t IN ARRAY engram._reference_tables() LOOP
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1::regclass)'
            INTO v_known USING format('engram.%I', t);
        CONTINUE WHEN v_known;
        EXECUTE format('SELECT pg_catalog.create_reference_table(%L)', format('engram.%I', t));
        v_refs := v_refs + 1;
    END LOOP;
    -- The rows now live in the shards: the coordinator's own copies go,
    -- once every table that references them is distributed too.
    IF v_tables + v_refs > 0 THEN
        FOREACH t IN ARRAY engram._distributed_tables() || engram._reference_tables() LOOP
            EXECUTE 'SELECT pg_catalog.truncate_local_data_after_distributing_table($1::regclass)'
                USING format('engram.%I', t);
        END LOOP;
    END IF;
    -- The statements Citus sends the workers carry bindings' proofs
    -- (engram._propagate_setting): no session there shows another's query
    -- text (pg_stat_activity), whatever role it shares. Every run applies it
    -- to every worker, so run distribute() again after adding one.
    -- The same for the iterative HNSW scans of _knn, which run there.
    EXECUTE format('SELECT count(*) FROM pg_catalog.run_command_on_workers(%L) WHERE NOT success',
                   format('SET citus.enable_ddl_propagation TO off; ALTER DATABASE %I SET track_activities = off; ALTER DATABASE %I SET hnsw.iterative_scan = relaxed_order',
                          current_database(), current_database()))
        INTO v_failed;
    IF v_failed > 0 THEN
        RAISE EXCEPTION 'could not turn track_activities off on % worker(s); check that every worker is up, then run engram.distribute() again', v_failed
            USING ERRCODE = '08006';
    END IF;
    -- Citus plans a distributed statement with its parameters' values; a
    -- cached generic plan of one fails ("could not create distributed
    -- plan"). engram's functions run here, on the coordinator.
    PERFORM pg_catalog.set_config('citus.enable_ddl_propagation', 'off', true);
    EXECUTE format('ALTER DATABASE %I SET plan_cache_mode = force_custom_plan', current_database());
    PERFORM engram._audit(NULL, 'distribute', NULL,
        jsonb_build_object('tables', v_tables, 'reference_tables', v_refs, 'shard_count', distribute.shard_count));
    RETURN CASE WHEN v_tables + v_refs = 0
                THEN 'engram is already distributed; nothing to do'
                ELSE format('distributed %s tables by owner (co-located with engram.memories, %s shards) and made %s reference tables; engram''s functions run on the coordinator and each of their statements on the shard of the owner it names',
                            v_tables, distribute.shard_count, v_refs) END;
END
$fn$;
