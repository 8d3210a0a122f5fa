-- engram 0.12.0 -> 0.13.0 (ALTER EXTENSION engram UPDATE TO '0.13.0')
--
-- 0.13.0 gives memories time (SPEC 13, issue 21): when what they tell
-- happened (occurred_at) and the period their fact held (valid_from,
-- valid_to; invalidated_at records when valid_to was set). Reads return
-- what is valid now by default, or at valid_at, or as the store stood at
-- known_at; a forced correction closes the validity of what it
-- supersedes; search boosts the memories that happened in the time its
-- query names (engram.time_window).
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
-- library.
\echo Use "ALTER EXTENSION engram UPDATE TO '0.13.0'" to load this file. \quit

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

-- Whether this update ends a chain of hops that began at 0.9.0 or older
-- (see engram--0.11.0--0.12.0.sql): carried to the end of the chain.
SELECT pg_catalog.set_config('engram_upgrade.chain',
    coalesce(nullif(pg_catalog.current_setting('engram_upgrade.chain', true), ''), 'false'), true);

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
WHERE m.valid_to IS NULL AND m.flag_reason ~ '^superseded by [0-9a-f-]{36}$'
  AND n.owner = m.owner AND n.id = substr(m.flag_reason, 15)::uuid;

ALTER TABLE engram.memories
    ADD CONSTRAINT memories_valid_period CHECK (valid_to IS NULL OR valid_to >= valid_from);

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

-- 3. The 0.13.0 API, from the library (only when it is 0.13.0), in place of
-- the loaded 0.12.0 one (extension/sql/drop_api.sql finds it in the catalog).
SELECT engram._install_api('0.13.0');

-- At the end of a chain of hops from 0.9.0 or older: the lists and usage
-- counts the skipped hops never rebuilt (see engram--0.11.0--0.12.0.sql).
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
