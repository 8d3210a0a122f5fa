-- engram 0.3.0 -> 0.4.0 (ALTER EXTENSION engram UPDATE TO '0.4.0')
--
-- 0.4.0 adds scope lists: for every active memory with an
-- embedding, int8-quantized entries in its owner's whole list and in one
-- list per tag (engram.scope_entries, sized in engram.scope_sizes), kept by
-- triggers on engram.memories. Scoped search scans the smallest list of a
-- scope exactly instead of the memories' heap, and decides between that and
-- the HNSW walk from the list sizes instead of a planner estimate. Hybrid
-- search counts a full-text match on plain words at a quarter of one on an
-- exact token of the query (a code, an id, a number). Data is
-- kept: no existing table changes; the lists are built here from the
-- memories.
--
-- Built as sql/README.md says: 1. drop the previous API; 2. change the
-- tables as the new schema.sql declares them; 3. create the new Rust
-- functions; 4. load the new api.sql from the library.
\echo Use "ALTER EXTENSION engram UPDATE TO '0.4.0'" to load this file. \quit

-- 1. The 0.3.0 API: its trigger, functions, result types and policies.
DROP TRIGGER IF EXISTS states_immutable ON engram.states;
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
    engram.slot, engram.workspace_item, engram.state_item, engram.session_item, engram.session_event;
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

-- 2. Tables (as in extension/sql/schema.sql). Writers wait until the end
-- of the update: a row written after the lists are built below and before
-- their triggers exist would never be listed.
LOCK TABLE engram.memories IN SHARE ROW EXCLUSIVE MODE;
CREATE TABLE engram.scope_entries (
    owner     text NOT NULL,
    list      bigint NOT NULL,
    memory_id uuid NOT NULL,
    qvec      bytea NOT NULL,
    PRIMARY KEY (owner, memory_id, list)
);
CREATE INDEX scope_entries_list ON engram.scope_entries (owner, list) INCLUDE (memory_id, qvec);

CREATE TABLE engram.scope_sizes (
    owner text NOT NULL,
    list  bigint NOT NULL,
    n     bigint NOT NULL,
    PRIMARY KEY (owner, list)
);
ALTER TABLE engram.scope_entries ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.scope_sizes ENABLE ROW LEVEL SECURITY;

-- 3. Rust functions new in 0.4.0.
CREATE FUNCTION engram."_qdist"(
	"a" bytea, /* & [u8] */
	"b" bytea /* & [u8] */
) RETURNS real /* f32 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_qdist_wrapper';

CREATE FUNCTION engram."_quantize"(
	"embedding" real[] /* Vec < Option < f32 > > */
) RETURNS bytea /* Vec < u8 > */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_quantize_wrapper';

-- Hybrid fusion weighs a full-text match by whether it matched an exact
-- token of the query (_weighted_fusion; _fused_relevance stays as it was).
CREATE FUNCTION engram."_weighted_fusion"(
	"vector_rank" bigint, /* Option < i64 > */
	"text_rank" bigint, /* Option < i64 > */
	"exact_match" bool /* Option < bool > */
) RETURNS real /* f32 */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_weighted_fusion_wrapper';

CREATE FUNCTION engram."_exact_tokens"(
	"query" TEXT /* & str */
) RETURNS TEXT[] /* Vec < String > */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_exact_tokens_wrapper';

CREATE FUNCTION engram."_setting_list_search_rows"() RETURNS INT /* i32 */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_setting_list_search_rows_wrapper';

-- The lists of the memories already stored, built before the triggers that
-- keep them exist. The key is engram._list_key's (api.sql), written out here
-- because a later hop's API may not have that function.
INSERT INTO engram.scope_entries (owner, list, memory_id, qvec)
SELECT m.owner, pg_catalog.hashtextextended(coalesce(m.internal_type, '') || '/' || l.tag, 0), m.id,
       engram._quantize(m.embedding::real[])
FROM engram.memories m,
     LATERAL (SELECT DISTINCT t FROM unnest(array_prepend('', m.tags)) t WHERE t IS NOT NULL) AS l(tag)
WHERE m.status = 'active' AND m.embedding IS NOT NULL;
INSERT INTO engram.scope_sizes (owner, list, n)
SELECT e.owner, e.list, count(*) FROM engram.scope_entries e GROUP BY e.owner, e.list;

-- 4. The 0.4.0 API, from the library (engram._install_api loads it only when
-- the library is 0.4.0; a later hop loads a later API).
SELECT engram._install_api('0.4.0');
