-- engram 0.8.0 -> 0.9.0 (ALTER EXTENSION engram UPDATE TO '0.9.0')
--
-- 0.9.0 changes only the SQL API, so that the MCP suite runs on Citus:
-- engram.search() and engram.ghost_search() return each hit's source
-- (memory, skill, resource) as a last column, so that a caller needs no
-- direct read of engram.memories after the search (which Citus refuses in
-- the same transaction: the search recorded accesses as another role);
-- engram.resources() builds each resource's JSON from a row it fetched,
-- instead of passing the whole row of engram.memories to a function inside
-- the query (Citus sends such a query to the shards, where the row type is
-- the shard's and the function does not exist for it).
-- No table changes and no new Rust functions: every row is kept as it is.
--
-- Built as sql/README.md says: 1. drop the previous API; 2. (no table
-- changes); 3. (no new Rust functions); 4. load the new api.sql from the
-- library.
\echo Use "ALTER EXTENSION engram UPDATE TO '0.9.0'" to load this file. \quit

-- 1. The 0.8.0 API: its triggers, functions, result types and policies.
-- The scope lists' and image holds' triggers are dropped and created again
-- within this one transaction; DROP TRIGGER locks engram.memories against
-- writes until the update commits.
DROP EVENT TRIGGER IF EXISTS engram_borrowed_functions;
DROP TRIGGER IF EXISTS states_immutable ON engram.states;
DROP TRIGGER IF EXISTS scope_lists_insert ON engram.memories;
DROP TRIGGER IF EXISTS scope_lists_update ON engram.memories;
DROP TRIGGER IF EXISTS scope_lists_delete ON engram.memories;
DROP TRIGGER IF EXISTS scope_lists_truncate ON engram.memories;
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

-- 4. The 0.9.0 API, from the library (engram._install_api loads it only when
-- the library is 0.9.0; a later hop loads a later API).
SELECT engram._install_api('0.9.0');

-- Usage counted again from the rows, on the hop that loaded the API: a
-- database that came from 0.6.0 in this same ALTER EXTENSION skipped the
-- 0.7.0 and 0.8.0 hops' counts (neither loaded its own API).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
               WHERE p.pronamespace = 'engram'::regnamespace AND p.proname = 'recount_usage') THEN
        PERFORM engram.recount_usage();
    END IF;
END
$$;
