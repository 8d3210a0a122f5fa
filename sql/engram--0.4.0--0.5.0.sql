-- engram 0.4.0 -> 0.5.0 (ALTER EXTENSION engram UPDATE TO '0.5.0')
--
-- 0.5.0 changes only the SQL API: engram.erase_owner and recall and list
-- that work on a hot standby; for search and write speed the HNSW walk of
-- broad scopes runs as a static statement with a cached plan
-- (engram._hnsw_walk), it fetches n + max(n/5, 2) rows instead of 2n,
-- and the small helpers on the hot paths are plpgsql instead of SQL
-- functions.
-- No table changes and no new Rust functions: every row is kept as it is,
-- the scope lists included.
--
-- Built as sql/README.md says: 1. drop the previous API; 2. (no table
-- changes); 3. (no new Rust functions); 4. load the new api.sql from the
-- library.
\echo Use "ALTER EXTENSION engram UPDATE TO '0.5.0'" to load this file. \quit

-- 1. The 0.4.0 API: its triggers, functions, result types and policies. The
-- scope lists' triggers are dropped and created again within this one
-- transaction; DROP TRIGGER locks engram.memories against writes until the
-- update commits, so no write goes unlisted.
DROP TRIGGER IF EXISTS states_immutable ON engram.states;
DROP TRIGGER IF EXISTS scope_lists_insert ON engram.memories;
DROP TRIGGER IF EXISTS scope_lists_update ON engram.memories;
DROP TRIGGER IF EXISTS scope_lists_delete ON engram.memories;
DROP TRIGGER IF EXISTS scope_lists_truncate ON engram.memories;
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
    engram.list_entry;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'revisions', 'memory_access', 'audit_log', 'ghost_settings', 'grants',
                             'publications', 'slots', 'workspaces', 'states', 'events', 'misses'] LOOP
        EXECUTE format('DROP POLICY IF EXISTS owner_isolation ON engram.%I', t);
    END LOOP;
END
$$;

-- 4. The 0.5.0 API, from the library (engram._install_api loads it only when
-- the library is 0.5.0; a later hop loads a later API).
SELECT engram._install_api('0.5.0');
