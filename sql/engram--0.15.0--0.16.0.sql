-- engram 0.15.0 -> 0.16.0 (ALTER EXTENSION engram UPDATE TO '0.16.0')
--
-- 0.16.0: memories for application code.
--   * Keyed memories: engram.put(owner, namespace, key, content, embedding,
--     value, ttl, ...) stores or revises the memory at (owner, namespace,
--     key); get_key, delete_key and namespaces read and remove them.
--   * list and search take namespace_prefix, a filter over a memory's
--     value (else metadata) with $eq $ne $gt $gte $lt $lte $in, and
--     refresh_ttl; their results, recall's and revisions' carry the
--     namespace, key and value.
--   * The model on record: configure(embedding_model => ...) records the
--     model the vectors come from, engram.embedding_model() returns it.
--
-- Built as sql/README.md says: 1. the new columns and indexes (the
-- existing rows keep NULL in them; the GIN index over the documents is
-- built in one pass); 2. new Rust functions; 3. _install_api drops the
-- previous API and loads this one from the library.

\echo Use "ALTER EXTENSION engram UPDATE TO '0.16.0'" to load this file. \quit

-- 1. Tables, as extension/sql/schema.sql declares them.
ALTER TABLE engram.memories
    ADD COLUMN namespace text[] COLLATE "C",
    ADD COLUMN key text,
    ADD COLUMN value jsonb,
    ADD COLUMN ttl interval,
    ADD CONSTRAINT memories_keyed CHECK ((namespace IS NULL) = (key IS NULL));
CREATE INDEX memories_namespace ON engram.memories (owner, namespace) WHERE namespace IS NOT NULL;
CREATE INDEX memories_document ON engram.memories USING gin ((coalesce(value, metadata)) jsonb_path_ops);
ALTER TABLE engram.revisions ADD COLUMN value jsonb;
ALTER TABLE engram.configuration ADD COLUMN embedding_model text;
-- (the release that wrote the recorded configuration: a dump says so)
UPDATE engram.configuration SET version = '0.16.0';

-- 2. Rust functions new in 0.16.0.
CREATE FUNCTION engram."_check_filter"(
	"filter" jsonb /* JsonB */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_check_filter_wrapper';
CREATE FUNCTION engram."_filter_matches"(
	"document" jsonb, /* JsonB */
	"filter" jsonb /* JsonB */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_filter_matches_wrapper';
CREATE FUNCTION engram."_filter_equalities"(
	"filter" jsonb /* JsonB */
) RETURNS jsonb /* Option < JsonB > */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_filter_equalities_wrapper';
CREATE FUNCTION engram."_check_namespace"(
	"what" TEXT, /* & str */
	"labels" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"allow_empty" bool /* bool */
) RETURNS bool /* bool */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_check_namespace_wrapper';
CREATE FUNCTION engram."_check_key"(
	"key" TEXT /* Option < & str > */
) RETURNS bool /* bool */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_check_key_wrapper';

-- 3. The 0.16.0 API, from the library (only when it is 0.16.0), in place of
-- the loaded 0.15.0 one.
SELECT engram._install_api('0.16.0');
