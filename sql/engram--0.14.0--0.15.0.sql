-- engram 0.14.0 -> 0.15.0 (ALTER EXTENSION engram UPDATE TO '0.15.0')
--
-- 0.15.0: nothing lost, nothing borrowed.
--   * Privilege the planner cannot lend: the readers that take an owner
--     are VOLATILE (the planner never evaluates them), nothing the planner
--     evaluates acts with a DBA's privilege, and engram's helpers refuse
--     calls from anything but engram while privilege is withheld (the
--     library's hooks).
--   * Corrections close only what the caller names: remember(...,
--     supersedes => uuid[]) closes exactly those memories; force => true
--     stores alongside and closes nothing; engram.reopen() undoes a
--     supersession or an invalidation.
--   * Backups restore completely: engram.configuration (dumped) keeps what
--     configure() and tune_search() set, engram.restore_loads tracks a
--     restore until engram.finish_restore() (run by the last load, in a
--     server where engram is preloaded) has checked and completed it.
--   * An update stops only at this library's version.
--
-- Built as sql/README.md says: 1. the new tables; 2. new Rust functions;
-- 3. the configuration in force, recorded; 4. _install_api drops the
-- previous API and loads this one from the library.

\echo Use "ALTER EXTENSION engram UPDATE TO '0.15.0'" to load this file. \quit

-- 1. New tables, as extension/sql/schema.sql declares them.
CREATE TABLE engram.configuration (
    id                   boolean PRIMARY KEY DEFAULT true CHECK (id),
    embedding_dims       integer NOT NULL,
    image_dims           integer NOT NULL,
    hnsw_m               integer,
    hnsw_ef_construction integer,
    hnsw_ef_search       integer,
    version              text NOT NULL,
    updated_at           timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('engram.configuration', '');
ALTER TABLE engram.configuration ENABLE ROW LEVEL SECURITY;

CREATE TABLE engram.restore_loads (
    table_name text PRIMARY KEY,
    rows       bigint NOT NULL,
    loaded_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
ALTER TABLE engram.restore_loads ENABLE ROW LEVEL SECURITY;

-- 2. Rust functions new in 0.15.0.
CREATE FUNCTION engram."_library_version"() RETURNS TEXT /* &str */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_library_version_wrapper';
CREATE FUNCTION engram."_preloaded"() RETURNS bool /* bool */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_preloaded_wrapper';

-- 3. The configuration in force, from the catalog (what
-- engram._current_configuration reads; plain SQL, so that this step also
-- runs in a chain of hops that ends at a later version): a dump of the
-- updated database carries it.
INSERT INTO engram.configuration (embedding_dims, image_dims, hnsw_m, hnsw_ef_construction, hnsw_ef_search, version)
SELECT (SELECT a.atttypmod FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = 'engram.memories'::regclass AND a.attname = 'embedding'),
       (SELECT a.atttypmod FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = 'engram.image_embeddings'::regclass AND a.attname = 'embedding'),
       (SELECT nullif(split_part(o, '=', 2)::integer, 16) FROM pg_catalog.pg_class c, unnest(c.reloptions) o
        WHERE c.oid = pg_catalog.to_regclass('engram.memories_embedding_hnsw') AND split_part(o, '=', 1) = 'm'),
       (SELECT nullif(split_part(o, '=', 2)::integer, 64) FROM pg_catalog.pg_class c, unnest(c.reloptions) o
        WHERE c.oid = pg_catalog.to_regclass('engram.memories_embedding_hnsw') AND split_part(o, '=', 1) = 'ef_construction'),
       (SELECT split_part(s, '=', 2)::integer FROM pg_catalog.pg_db_role_setting d, unnest(d.setconfig) s
        WHERE d.setdatabase = (SELECT o.oid FROM pg_catalog.pg_database o WHERE o.datname = current_database())
          AND d.setrole = 0 AND s LIKE 'engram.hnsw\_ef\_search=%'),
       '0.15.0';

-- 4. The 0.15.0 API, from the library (only when it is 0.15.0), in place of
-- the loaded 0.14.0 one.
SELECT engram._install_api('0.15.0');

-- What 0.15.0 refuses to create from now on, but an earlier release let an
-- unprivileged role make: a function's or procedure's parameter defaults,
-- or a domain's default or checks, that call a privileged role's function
-- that is not IMMUTABLE (engram's, or one that runs SQL text, such as
-- query_to_xml): they would run with the privileges of whoever calls the
-- function or uses the domain. Named here, for the DBA to drop or
-- recreate (the clock and sequence functions are left out).
DO $upgrade$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT o.what
        FROM (SELECT format('function %s', f.oid::regprocedure) AS what, f.proowner AS owner,
                     f.proargdefaults::text AS expr
              FROM pg_catalog.pg_proc f WHERE f.proargdefaults IS NOT NULL
              UNION ALL
              SELECT format('domain %s', t.oid::regtype), t.typowner, t.typdefaultbin::text
              FROM pg_catalog.pg_type t WHERE t.typtype = 'd'
              UNION ALL
              SELECT format('domain %s', t.oid::regtype), t.typowner, k.conbin::text
              FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_type t ON t.oid = k.contypid) o
        JOIN pg_catalog.pg_roles ro ON ro.oid = o.owner,
             regexp_matches(o.expr, ':(?:funcid|opfuncid) ([0-9]+)', 'g') x
        JOIN pg_catalog.pg_proc p ON p.oid = x[1]::oid
        JOIN pg_catalog.pg_roles po ON po.oid = p.proowner
        WHERE NOT ro.rolsuper AND NOT pg_catalog.has_parameter_privilege(o.owner, 'engram.owner', 'SET')
          AND p.provolatile <> 'i'
          AND (po.rolsuper OR pg_catalog.has_parameter_privilege(p.proowner, 'engram.owner', 'SET'))
          AND NOT (p.pronamespace = 'pg_catalog'::regnamespace
                   AND p.proname IN ('now', 'clock_timestamp', 'statement_timestamp', 'transaction_timestamp',
                                     'timeofday', 'gen_random_uuid', 'random', 'nextval', 'currval', 'lastval',
                                     'current_setting', 'current_database', 'current_schema', 'current_schemas',
                                     'current_user', 'session_user', 'pg_backend_pid', 'txid_current',
                                     'pg_current_xact_id'))
    LOOP
        RAISE WARNING 'engram 0.15.0: % has a default or check that runs a privileged role''s function with its caller''s privileges; drop it or move the call into a function body', r.what;
    END LOOP;
END
$upgrade$;
