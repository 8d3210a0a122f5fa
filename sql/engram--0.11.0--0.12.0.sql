-- engram 0.11.0 -> 0.12.0 (ALTER EXTENSION engram UPDATE TO '0.12.0')
--
-- 0.12.0 lets engram.configure() rebuild the memories' HNSW index with
-- denser build options (hnsw_m, hnsw_ef_construction: at 1M rows
-- pgvector's default graph stays near recall 0.93 at any ef_search), keeps
-- the index's options when configure(embedding_dims => ...) rebuilds it,
-- and reports them. configure's signature grows two arguments. No table or
-- row changes; the index itself is kept as it is.
--
-- Built as sql/README.md says: 1. table changes (none); 2. new Rust
-- functions (none); 3. _install_api drops the previous API and loads this
-- one from the library.
\echo Use "ALTER EXTENSION engram UPDATE TO '0.12.0'" to load this file. \quit

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

-- Whether this update is the end of a chain of hops that began at 0.9.0 or
-- older: the 0.10.0 -> 0.11.0 hop of such a chain found its previous API
-- missing and said so in engram_upgrade.chain (a transaction-local setting,
-- so still set here, in the same ALTER EXTENSION). Those hops' rebuilds
-- never ran (see the end). A direct update from 0.11.0, or a chain from
-- 0.10.0, finds the lists and usage counts kept.
SELECT pg_catalog.set_config('engram_upgrade.chain',
    coalesce(nullif(pg_catalog.current_setting('engram_upgrade.chain', true), ''), 'false'), true);

-- 1. No table changes. 2. No new Rust functions.
-- 3. The 0.12.0 API, from the library (only when it is 0.12.0), in place of
-- the loaded 0.11.0 one: since 0.12.0 _install_api finds the loaded API's
-- objects in the catalog and drops them first (extension/sql/drop_api.sql).
SELECT engram._install_api('0.12.0');

-- At the end of a chain of hops from 0.9.0 or older the API of the hops
-- before was never loaded, so their rebuilds did not run: the scope lists
-- are empty and usage uncounted. The last hop does both (the lists on a
-- single node; a distributed database: see docs/SCALING.md, "Upgrades").
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
