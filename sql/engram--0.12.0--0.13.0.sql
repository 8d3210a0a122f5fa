-- engram 0.12.0 -> 0.13.0 (ALTER EXTENSION engram UPDATE TO '0.13.0')
--
-- 0.13.0 gives memories time and an entity index (docs/TIME_AND_ENTITIES.md):
-- when what they tell happened (occurred_at) and the period their fact
-- held (valid_from,
-- valid_to; invalidated_at records when valid_to was set). Reads return
-- what is valid now by default, or at valid_at, or as the store stood at
-- known_at; a forced correction closes the validity of what it
-- supersedes; search boosts the memories that happened in the time its
-- query names (engram.time_window). The named things memories are about
-- are indexed per owner (engram.memory_entities, kept by triggers; filled
-- here for the existing memories) for engram.entities, engram.about and
-- search(entity => ...).
--
-- Existing memories happened and began to hold when they were written
-- (occurred_at = valid_from = created_at), and those a forced correction
-- superseded stopped holding when it was written (from the audit log's
-- 'flag' rows naming superseded_by, or the flag_reason a supersession
-- leaves). The two copied columns are filled by a table rewrite (ALTER
-- COLUMN ... TYPE ... USING), not an UPDATE: one pass over the heap
-- with no triggers and no dead row versions, then every index is built
-- again (the HNSW index included, with its build options: minutes at a
-- million rows; seconds for tens of thousands).
--
-- Built as sql/README.md says: 1. table changes; 2. new Rust functions;
-- 3. _install_api drops the previous API and loads this one from the
-- library. (The UPDATEs below run on Citus as they are: each joins rows
-- of one owner.)
\echo Use "ALTER EXTENSION engram UPDATE TO '0.13.0'" to load this file. \quit

-- 1. Table changes: the time columns, filled from created_at by a rewrite.
ALTER TABLE engram.memories
    ADD COLUMN occurred_at timestamptz,
    ADD COLUMN valid_from timestamptz,
    ADD COLUMN valid_to timestamptz,
    ADD COLUMN invalidated_at timestamptz;
ALTER TABLE engram.memories
    ALTER COLUMN occurred_at TYPE timestamptz USING created_at,
    ALTER COLUMN valid_from TYPE timestamptz USING created_at;
ALTER TABLE engram.memories
    ALTER COLUMN occurred_at SET DEFAULT now(),
    ALTER COLUMN occurred_at SET NOT NULL,
    ALTER COLUMN valid_from SET DEFAULT now(),
    ALTER COLUMN valid_from SET NOT NULL;

-- Superseded memories stop holding when the memory that superseded them
-- was written: the earliest supersession the audit log records, else the
-- one the memory's flag_reason names (an audit log trimmed by retention).
-- (Still under the 0.12.0 triggers, which keep the scope lists: validity
-- is not in them.)
UPDATE engram.memories AS m SET valid_to = greatest(m.valid_from, x.at), invalidated_at = x.at
FROM (SELECT a.owner, a.memory_id, min(a.at) AS at FROM engram.audit_log a
      WHERE a.action = 'flag' AND a.details ? 'superseded_by' AND a.memory_id IS NOT NULL
      GROUP BY a.owner, a.memory_id) x
WHERE m.owner = x.owner AND m.id = x.memory_id;
UPDATE engram.memories AS m SET valid_to = greatest(m.valid_from, n.created_at), invalidated_at = n.created_at
FROM engram.memories n
WHERE m.valid_to IS NULL
  AND m.flag_reason ~ '^superseded by [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
  -- (compared as text: a reason a caller wrote is never cast)
  AND n.owner = m.owner AND n.id::text = substr(m.flag_reason, 15);

ALTER TABLE engram.memories
    ADD CONSTRAINT memories_valid_period CHECK (valid_to IS NULL OR valid_to >= valid_from);

-- The entity index (derived from the memories by triggers; filled below).
CREATE TABLE engram.memory_entities (
    owner     text NOT NULL,
    memory_id uuid NOT NULL,
    key       text NOT NULL,
    name      text NOT NULL,
    kind      text NOT NULL,
    CONSTRAINT memory_entities_pkey PRIMARY KEY (owner, memory_id, key)
);
CREATE INDEX memory_entities_key ON engram.memory_entities (owner, key);
ALTER TABLE engram.memory_entities ENABLE ROW LEVEL SECURITY;

-- 2. Rust functions new in 0.13.0.
CREATE FUNCTION engram."_time_window_bounds"(
	"query_text" TEXT, /* &str */
	"reference_epoch" double precision, /* f64 */
	"utc_offset_s" INT /* i32 */
) RETURNS double precision[] /* core::option::Option<alloc::vec::Vec<core::option::Option<f64>>> */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_time_window_bounds_wrapper';
CREATE FUNCTION engram."_window_boosted"(
	"relevance" real, /* f32 */
	"in_window" bool /* bool */
) RETURNS real /* f32 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_window_boosted_wrapper';

CREATE FUNCTION engram."_entities"(
	"content" TEXT, /* core::option::Option<&str> */
	"tags" TEXT[] /* core::option::Option<alloc::vec::Vec<core::option::Option<alloc::string::String>>> */
) RETURNS TABLE (
	"key" TEXT,  /* alloc::string::String */
	"name" TEXT,  /* alloc::string::String */
	"kind" TEXT  /* alloc::string::String */
)
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_entities_wrapper';
CREATE FUNCTION engram."_entity_key"(
	"name" TEXT /* &str */
) RETURNS TEXT /* alloc::string::String */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_entity_key_wrapper';

-- Existing memories' entities (their triggers come with the API below).
-- On Citus the table is the coordinator's until engram.distribute() runs
-- after the update (docs/SCALING.md, "Upgrades"), which moves these rows.
INSERT INTO engram.memory_entities (owner, memory_id, key, name, kind)
SELECT m.owner, m.id, x.key, x.name, x.kind FROM engram.memories m, engram._entities(m.content, m.tags) x;

-- 3. The 0.13.0 API, from the library (only when it is 0.13.0), in place of
-- the loaded 0.12.0 one (extension/sql/drop_api.sql finds it in the catalog).
-- Since 0.13.0 _install_api also lets Citus take the API's triggers on
-- distributed tables, and at the end of a chain of hops from 0.9.0 or
-- older rebuilds the scope lists and recounts usage (the hops before said
-- and did both themselves).
SELECT engram._install_api('0.13.0');
