-- engram 0.10.0 -> 0.11.0 (ALTER EXTENSION engram UPDATE TO '0.11.0')
--
-- 0.11.0 adds engram.tune_search(), which measures the HNSW index's recall
-- on the stored memories and sets engram.hnsw_ef_search (the floor of
-- engram's walks) for the database (for recall at 1M rows). The API
-- is now written in topic files (extension/sql/api/*.sql); the functions
-- it creates are 0.10.0's plus tune_search. No table or row changes.
--
-- Built as sql/README.md says: 1. drop the previous API; 2. table changes
-- (none); 3. new Rust functions (none); 4. load the API from the library.
\echo Use "ALTER EXTENSION engram UPDATE TO '0.11.0'" to load this file. \quit

-- On a distributed database (Citus) this script drops and creates
-- triggers on distributed tables, which Citus refuses unless told, as
-- engram.distribute() tells it (the triggers keep rows of the same owner,
-- on the same shard group).
DO $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    END IF;
END
$$;

-- Whether the previous API is loaded: not in a chain of hops from 0.9.0
-- or older, whose intermediate APIs never load (see the end).
SELECT pg_catalog.set_config('engram_upgrade.chain', (NOT EXISTS (
    SELECT 1 FROM pg_catalog.pg_proc p
    WHERE p.pronamespace = 'engram'::regnamespace AND p.proname = 'rebuild_lists'))::text, true);

-- 1. The 0.10.0 API: its triggers, functions, result types and policies.
-- The scope lists' and image holds' triggers are dropped and created again
-- within this one transaction; DROP TRIGGER locks engram.memories against
-- writes until the update commits.
DROP EVENT TRIGGER IF EXISTS engram_borrowed_functions;
DROP TRIGGER IF EXISTS states_immutable ON engram.states;
DROP TRIGGER IF EXISTS zz_scope_lists_insert ON engram.memories;
DROP TRIGGER IF EXISTS zz_scope_lists_update ON engram.memories;
DROP TRIGGER IF EXISTS zz_scope_lists_delete ON engram.memories;
DROP TRIGGER IF EXISTS zz_scope_lists_truncate ON engram.memories;
DROP AGGREGATE IF EXISTS engram._nearest(bytea, integer, bytea, integer);
DROP TRIGGER IF EXISTS image_refs_insert ON engram.memories;
DROP TRIGGER IF EXISTS image_refs_update ON engram.memories;
DROP TRIGGER IF EXISTS image_refs_delete ON engram.memories;
DROP TRIGGER IF EXISTS image_refs_truncate ON engram.memories;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'events', 'images', 'slots', 'workspaces', 'states'] LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS usage_insert ON engram.%I', t);
        EXECUTE format('DROP TRIGGER IF EXISTS usage_delete ON engram.%I', t);
        EXECUTE format('DROP TRIGGER IF EXISTS usage_truncate ON engram.%I', t);
    END LOOP;
END
$$;
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_language l ON l.oid = p.prolang
        WHERE p.pronamespace = 'engram'::regnamespace AND l.lanname IN ('plpgsql', 'sql')
    LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END
$$;
DROP TYPE IF EXISTS engram.read_scope, engram.search_hit, engram.recalled_memory, engram.listed_memory,
    engram.slot, engram.workspace_item, engram.state_item, engram.session_item, engram.session_event,
    engram.list_entry, engram.vision_hit;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'revisions', 'memory_access', 'audit_log', 'ghost_settings', 'grants',
                             'publications', 'slots', 'workspaces', 'states', 'events', 'misses',
                             'images', 'image_data', 'image_embeddings'] LOOP
        EXECUTE format('DROP POLICY IF EXISTS owner_isolation ON engram.%I', t);
    END LOOP;
END
$$;

-- 2. No table changes. 3. No new Rust functions.

-- 4. The 0.11.0 API, from the library (only when it is 0.11.0).
SELECT engram._install_api('0.11.0');

-- In a chain of hops (from 0.9.0 or older) the API of the hops before was
-- never loaded, so their rebuilds did not run: the scope lists were emptied
-- by the 0.10.0 hop and usage was never counted again. This hop does both
-- then (the lists on a single node; a distributed database: see
-- docs/SCALING.md, "Upgrades"). A direct update from 0.10.0 keeps both.
-- (rebuild_lists runs in READ COMMITTED only: run ALTER EXTENSION outside
-- a REPEATABLE READ or SERIALIZABLE transaction.)
DO $$
BEGIN
    IF current_setting('engram_upgrade.chain') = 'true'
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
                   WHERE p.pronamespace = 'engram'::regnamespace AND p.proname = 'rebuild_lists') THEN
        IF NOT engram._is_distributed() THEN
            PERFORM engram.rebuild_lists();
        END IF;
        PERFORM engram.recount_usage();
    END IF;
END
$$;
