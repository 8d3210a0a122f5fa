-- engram 0.9.0 -> 0.10.0 (ALTER EXTENSION engram UPDATE TO '0.10.0')
--
-- 0.10.0 packs the scope lists into blocks: a list's entries
-- (memory id and int8 vector) live in rows of engram.scope_blocks, ~18 per
-- row at 384 dimensions, folded into a search's top-n by one Rust call per
-- row (the engram._nearest aggregate) instead of one index tuple and one
-- function call per entry. engram.scope_entries keeps only which block
-- holds each entry; its vectors and covering index go. The list triggers
-- are renamed to fire after the usage triggers (no deadlock between a raw
-- DELETE and a remember of the same owner). engram.rebuild_lists() is new.
-- The lists are derived data: this script empties them and, on the hop
-- that loads the 0.10.0 API, builds them again from the memories (a
-- database already distributed with Citus is not supported yet; see
-- docs/SCALING.md, "Upgrades"). Memories are untouched.
--
-- Built as sql/README.md says: 1. drop the previous API; 2. table changes;
-- 3. new Rust functions; 4. load the new api.sql from the library.
\echo Use "ALTER EXTENSION engram UPDATE TO '0.10.0'" to load this file. \quit

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

-- 1. The 0.9.0 API: its triggers, functions, result types and policies.
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

-- 2. The packed lists. Their rows are rebuilt below from the memories.
-- (scope_entries is made anew, as a fresh install has it; on Citus
-- engram.distribute() distributes it again.)
TRUNCATE engram.scope_sizes;
DROP TABLE engram.scope_entries;
CREATE TABLE engram.scope_entries (
    owner     text NOT NULL,
    list      bigint NOT NULL,
    memory_id uuid NOT NULL,
    block     bigint NOT NULL,
    PRIMARY KEY (owner, memory_id, list)
);
ALTER TABLE engram.scope_entries ENABLE ROW LEVEL SECURITY;
CREATE TABLE engram.scope_blocks (
    owner   text NOT NULL,
    list    bigint NOT NULL,
    block   bigint NOT NULL,
    n       integer NOT NULL,
    entries bytea NOT NULL,
    PRIMARY KEY (owner, list, block)
) WITH (toast_tuple_target = 8160);
ALTER TABLE engram.scope_blocks ALTER COLUMN entries SET STORAGE MAIN;
ALTER TABLE engram.scope_blocks ENABLE ROW LEVEL SECURITY;

-- 3. Rust functions new in 0.10.0.
CREATE FUNCTION engram."_block_capacity"(
	"qvec_len" INT /* i32 */
) RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_block_capacity_wrapper';
CREATE FUNCTION engram."_block_without"(
	"entries" bytea, /* & [u8] */
	"n" INT, /* i32 */
	"id" uuid /* pgrx :: datum :: Uuid */
) RETURNS bytea /* Vec < u8 > */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_block_without_wrapper';
CREATE FUNCTION engram."_candidates"(
	"candidates" bytea /* & [u8] */
) RETURNS TABLE (
	"memory_id" uuid,  /* pgrx :: datum :: Uuid */
	"d8" real  /* f32 */
)
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_candidates_wrapper';
CREATE FUNCTION engram."_nearest_step"(
	"state" bytea, /* & [u8] */
	"entries" bytea, /* & [u8] */
	"n" INT, /* i32 */
	"query" bytea, /* & [u8] */
	"k" INT /* i32 */
) RETURNS bytea /* Vec < u8 > */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_nearest_step_wrapper';

-- 4. The 0.10.0 API, from the library (engram._install_api loads it only
-- when the library is 0.10.0; a later hop loads a later API).
SELECT engram._install_api('0.10.0');

-- The lists again, from the memories, on the hop that loaded the API (a
-- later hop's rebuild_lists may differ). Not on a distributed database
-- (Citus), whose update is not supported yet (docs/SCALING.md,
-- "Upgrades"): there engram.distribute() and then engram.rebuild_lists()
-- on the coordinator must follow, and until they do scoped searches can
-- miss memories (the first write recreates a list with one entry). Usage
-- is counted again as on earlier hops.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
               WHERE p.pronamespace = 'engram'::regnamespace AND p.proname = 'rebuild_lists'
                 AND pg_catalog.pg_get_function_identity_arguments(p.oid) = 'owner text') THEN
        -- (nested: plpgsql plans _is_distributed only where the API exists)
        IF NOT engram._is_distributed() THEN
            PERFORM engram.rebuild_lists();
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
               WHERE p.pronamespace = 'engram'::regnamespace AND p.proname = 'recount_usage') THEN
        PERFORM engram.recount_usage();
    END IF;
END
$$;
