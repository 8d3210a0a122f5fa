-- engram 0.6.0 -> 0.7.0 (ALTER EXTENSION engram UPDATE TO '0.7.0')
--
-- 0.7.0 hardens 0.6.0 (issue 18):
-- * privilege that code of other roles cannot borrow: the privileged path
--   (superuser, or SET on engram.owner) is withheld while a
--   security-restricted operation, a function or a relation of an
--   unprivileged role is running (extension/src/privilege.rs, which needs
--   engram in shared_preload_libraries); administrative functions require
--   it (engram._require_privileged);
-- * see docs/SECURITY.md for the rest.
--
-- Built as sql/README.md says: 1. drop the previous API; 2. change the
-- tables; 3. create the new Rust functions; 4. load the new api.sql from
-- the library.
\echo Use "ALTER EXTENSION engram UPDATE TO '0.7.0'" to load this file. \quit

-- 1. The 0.6.0 API: its triggers, functions, result types and policies.
-- The scope lists' and image holds' triggers are dropped and created again
-- within this one transaction; DROP TRIGGER locks engram.memories against
-- writes until the update commits.
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

-- 2. Tables.

-- 3. Rust functions new in 0.7.0.
CREATE FUNCTION engram."_withheld_privilege"() RETURNS TEXT /* Option < String > */
VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_withheld_privilege_wrapper';

-- 4. The 0.7.0 API, from the library (engram._install_api loads it only when
-- the library is 0.7.0; a later hop loads a later API).
SELECT engram._install_api('0.7.0');
