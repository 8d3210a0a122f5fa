-- engram 0.18.0 -> 0.19.0 (ALTER EXTENSION engram UPDATE TO '0.19.0')
--
-- 0.19.0: retrieval and conflict quality.
--   * engram.memory_entities: `alias` (the first name a row was merged
--     from) and `pinned` (named by an entity: tag); two indexes; every
--     memory's entities indexed anew with the new rules (services, cloud
--     regions, products, first names; hyphen and underscore variants fold
--     into one key), then each owner's first names merged into the one
--     full name they start (audited);
--   * engram.memories: an index of each session's turns in time order
--     (engram.previous_turn: the turn a new one is embedded with);
--   * three Rust functions (_memory_entities, _setting_similarity_floor,
--     _contradicted_by);
--   * the API: search(group_by => 'session'), the relevance floor of
--     hybrid search (min_similarity DEFAULT NULL), the newer of two
--     conflicting memories first, alias-aware entity reads.
--
-- Built as sql/README.md says; _install_api drops the previous API and
-- loads this one from the library.

\echo Use "ALTER EXTENSION engram UPDATE TO '0.19.0'" to load this file. \quit

ALTER TABLE engram.memory_entities
    ADD COLUMN alias text,
    ADD COLUMN pinned boolean NOT NULL DEFAULT false;
CREATE INDEX memory_entities_first_word ON engram.memory_entities (owner, split_part(key, ' ', 1), key)
    WHERE kind = 'person' AND alias IS NULL;
CREATE INDEX memory_entities_alias ON engram.memory_entities (owner, alias) WHERE alias IS NOT NULL;
CREATE INDEX memories_session ON engram.memories (owner, session_id, occurred_at) WHERE session_id IS NOT NULL;
UPDATE engram.configuration SET version = '0.19.0';

CREATE FUNCTION engram."_contradicted_by"(
	"texts" TEXT[], /* Vec < String > */
	"times" double precision[], /* Vec < f64 > */
	"cosines" real[], /* Vec < f32 > */
	"threshold" real /* f32 */
) RETURNS INT[] /* Vec < i32 > */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_contradicted_by_wrapper';
CREATE FUNCTION engram."_memory_entities"(
	"content" TEXT, /* Option < & str > */
	"tags" TEXT[] /* :: std :: option :: Option < Vec < Option < String > > > */
) RETURNS TABLE (
	"key" TEXT,  /* String */
	"name" TEXT,  /* String */
	"kind" TEXT,  /* String */
	"pinned" bool  /* bool */
)
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_memory_entities_wrapper';
CREATE FUNCTION engram."_setting_similarity_floor"() RETURNS real /* f32 */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_setting_similarity_floor_wrapper';

SELECT engram._install_api('0.19.0');

-- Every memory's entities by the 0.19.0 rules, then each owner's first
-- names merged into their full names (engram._reindex_entities, which this
-- hop's API holds). A chain of hops past 0.19.0 runs it in its last hop
-- (sql/README.md).
DO $reindex$
BEGIN
    IF to_regprocedure('engram._reindex_entities()') IS NOT NULL THEN
        PERFORM engram._reindex_entities();
    ELSE
        -- an intermediate hop: the chain's last hop runs it (this
        -- transaction's setting tells it to)
        PERFORM pg_catalog.set_config('engram_upgrade.reindex_entities', 'true', true);
    END IF;
END
$reindex$;
