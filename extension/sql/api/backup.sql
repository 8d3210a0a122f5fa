---------------------------------------------------------------------------
-- backups: configuration that travels with the data, and restores that
-- finish or say why not (docs/BACKUP.md)
---------------------------------------------------------------------------

-- pg_dump keeps the rows of engram's tables (pg_extension_config_dump) but
-- no ALTER made to them after CREATE EXTENSION: not the embedding column's
-- dimension, not the HNSW index's options, not a database setting. So
-- engram.configure() and engram.tune_search() also write what they set
-- into engram.configuration (one row, dumped), and a restore applies it.
--
-- A restore is a COPY into the tables of an engram database that is empty.
-- In a server where engram is preloaded, its utility hook
-- (extension/src/restore.rs) wraps each such COPY:
--   * _restore_begin, before it: the table's triggers are off for the load
--     (its references are checked once every table is in: pg_restore
--     --jobs loads tables in any order, and a memory's derived rows are
--     rebuilt in bulk), and the embedding columns take vectors of any
--     dimension until the restore knows which;
--   * _restore_end, after it: the table is recorded in restore_loads; the
--     load that completes the set runs _finish_restore.
-- Until then engram's functions refuse to serve (_check_restored): a
-- restore that lost a table, or was never finished, never looks healthy.

-- The tables pg_dump dumps: the extension's configuration tables.
CREATE FUNCTION engram._dumped_tables() RETURNS regclass[]
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN ARRAY(SELECT c.oid::regclass FROM pg_catalog.pg_extension e, unnest(e.extconfig) x(oid)
                 JOIN pg_catalog.pg_class c ON c.oid = x.oid
                 WHERE e.extname = 'engram' AND c.relkind = 'r' ORDER BY c.relname);
END
$fn$;

-- The configuration in force: the embedding and image dimensions, the HNSW
-- index's build options and the database's tuned ef_search floor, read
-- from the catalog.
CREATE FUNCTION engram._current_configuration() RETURNS engram.configuration
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_build jsonb := engram._hnsw_build();
    c engram.configuration;
BEGIN
    c.id := true;
    c.embedding_dims := engram._dims();
    c.image_dims := engram._image_dims();
    c.hnsw_m := nullif((v_build ->> 'm')::integer, 16);
    c.hnsw_ef_construction := nullif((v_build ->> 'ef_construction')::integer, 64);
    SELECT split_part(s, '=', 2)::integer INTO c.hnsw_ef_search
    FROM pg_catalog.pg_db_role_setting d, unnest(d.setconfig) s
    WHERE d.setdatabase = (SELECT o.oid FROM pg_catalog.pg_database o WHERE o.datname = current_database())
      AND d.setrole = 0 AND s LIKE 'engram.hnsw\_ef\_search=%';
    c.version := engram._library_version();
    c.updated_at := now();
    -- (not in the catalog: what configure recorded)
    SELECT x.embedding_model INTO c.embedding_model FROM engram.configuration x;
    RETURN c;
END
$fn$;

-- Records the configuration in force (configure, tune_search).
CREATE FUNCTION engram._save_configuration() RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    c engram.configuration := engram._current_configuration();
BEGIN
    -- (the trigger below tells this write from a restore's)
    PERFORM set_config('engram_restore.configuring', 'on', true);
    INSERT INTO engram.configuration AS x VALUES (c.*)
    ON CONFLICT (id) DO UPDATE SET embedding_dims = excluded.embedding_dims, image_dims = excluded.image_dims,
        hnsw_m = excluded.hnsw_m, hnsw_ef_construction = excluded.hnsw_ef_construction,
        hnsw_ef_search = excluded.hnsw_ef_search, version = excluded.version, updated_at = excluded.updated_at,
        embedding_model = excluded.embedding_model;
    PERFORM set_config('engram_restore.configuring', 'off', true);
END
$fn$;

-- The dumped configuration row, loaded in a session where engram was not
-- preloaded (pg_restore --jobs runs its loads in sessions of their own,
-- which load the library only when something calls it): nothing wrapped
-- the restore's loads. Marked, so that engram refuses to serve the
-- database until a DBA finishes the restore (docs/BACKUP.md). A preloaded
-- restore turns this trigger off for its load; configure() says it is its
-- own write.
CREATE FUNCTION engram._configuration_loaded() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF coalesce(current_setting('engram_restore.configuring', true), '') <> 'on' AND NOT engram._preloaded() THEN
        INSERT INTO engram.restore_loads (table_name, rows) VALUES ('(engram not preloaded)', -1)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER configuration_loaded AFTER INSERT ON engram.configuration
    FOR EACH ROW EXECUTE FUNCTION engram._configuration_loaded();

-- Refuses to serve a database whose restore has not finished.
CREATE FUNCTION engram._check_restored() RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_loaded text;
BEGIN
    -- (a distributed database is never restored this way: docs/BACKUP.md)
    IF engram._is_distributed() OR NOT EXISTS (SELECT 1 FROM engram.restore_loads) THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM engram.restore_loads l WHERE l.rows < 0) THEN
        RAISE EXCEPTION 'this database was restored into a server where engram is not preloaded, so nothing checked that every table loaded; engram serves it once a DBA finishes the restore'
            USING ERRCODE = '55000',
                  HINT = 'Add engram to shared_preload_libraries (e.g. ''pg_cron,engram'') and restart PostgreSQL; then, if pg_restore reported no error, run SELECT engram.finish_restore(); otherwise restore the dump again into a new database (docs/BACKUP.md).';
    END IF;
    SELECT string_agg(l.table_name, ', ' ORDER BY l.table_name) INTO v_loaded FROM engram.restore_loads l;
    RAISE EXCEPTION 'this database is being restored and engram serves it once every table is loaded (loaded so far: %)', v_loaded
        USING ERRCODE = '55000',
              HINT = 'Wait for pg_restore to finish; if it has, run SELECT engram.finish_restore(); as a superuser, which says what is missing (docs/BACKUP.md).';
END
$fn$;

-- Before a COPY into one of engram's tables (restore.rs): whether it is a
-- restore's load (the database is being restored, or every dumped table is
-- empty), and if so, prepares the table for it.
CREATE FUNCTION engram._restore_begin(p_table regclass) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_tables regclass[] := engram._dumped_tables();
    v_rows   boolean;
    t        regclass;
BEGIN
    IF p_table <> ALL (v_tables) THEN
        RETURN false;
    END IF;
    -- The loads that change an embedding column's type take their tables
    -- first, in one order (the others only read them, below): two of them
    -- never wait for each other's read.
    IF p_table IN ('engram.memories'::regclass, 'engram.image_embeddings'::regclass) THEN
        LOCK TABLE engram.image_embeddings, engram.memories IN SHARE ROW EXCLUSIVE MODE;
    END IF;
    -- A COPY into a database that holds data is a bulk load, checked row by
    -- row as usual, unless the data is a restore's: a table loaded by one
    -- commits with its restore_loads row. (Each statement reads what was
    -- committed when it started: under pg_restore --jobs, the read of a
    -- table another load is preparing waits for that load to commit.)
    FOREACH t IN ARRAY v_tables LOOP
        EXIT WHEN EXISTS (SELECT 1 FROM engram.restore_loads);
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', t) INTO v_rows;
        IF v_rows AND NOT EXISTS (SELECT 1 FROM engram.restore_loads) THEN
            RETURN false;
        END IF;
    END LOOP;
    -- Loaded after the session began (not preloaded), the hooks may have
    -- missed earlier loads, and the restore cannot finish (its rebuilds
    -- need a DBA's privilege): the load goes on unchecked, and the mark
    -- makes engram refuse the database, saying why.
    IF NOT engram._preloaded() THEN
        INSERT INTO engram.restore_loads (table_name, rows) VALUES ('(engram not preloaded)', -1)
        ON CONFLICT DO NOTHING;
        RETURN false;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', p_table) INTO v_rows;
    IF v_rows OR EXISTS (SELECT 1 FROM engram.restore_loads l WHERE l.table_name = p_table::text) THEN
        RAISE EXCEPTION '% was loaded already in this restore; a restore loads each table of engram once, into a new database', p_table
            USING ERRCODE = '55000', HINT = 'Create a new database, CREATE EXTENSION nothing in it, and restore the dump into it (docs/BACKUP.md).';
    END IF;
    -- Its triggers (derived rows, usage counts, references) are off for the
    -- load, within this COPY's transaction: _finish_restore rebuilds and
    -- checks it all once.
    EXECUTE format('ALTER TABLE %s DISABLE TRIGGER ALL', p_table);
    -- Vectors of any dimension until the restore knows the dumped one.
    IF p_table = 'engram.memories'::regclass THEN
        DROP INDEX IF EXISTS engram.memories_embedding_hnsw;
        ALTER TABLE engram.memories ALTER COLUMN embedding TYPE vector;
    ELSIF p_table = 'engram.image_embeddings'::regclass THEN
        ALTER TABLE engram.image_embeddings ALTER COLUMN embedding TYPE vector;
        ALTER TABLE engram.image_embeddings ALTER COLUMN embedding SET STORAGE PLAIN;
    END IF;
    RETURN true;
END
$fn$;

-- After a restore's COPY: records it, and finishes the restore when every
-- dumped table is in (one load at a time, so that the last one sees all
-- the others committed).
CREATE FUNCTION engram._restore_end(p_table regclass, p_rows bigint) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format('ALTER TABLE %s ENABLE TRIGGER ALL', p_table);
    LOCK TABLE engram.restore_loads IN EXCLUSIVE MODE;
    INSERT INTO engram.restore_loads (table_name, rows) VALUES (p_table::text, p_rows);
    IF EXISTS (SELECT 1 FROM unnest(engram._dumped_tables()) t
               WHERE t::text NOT IN (SELECT l.table_name FROM engram.restore_loads l)) THEN
        RETURN;
    END IF;
    PERFORM engram._finish_restore(false);
END
$fn$;

-- The rows of dumped tables whose references are missing: 'table: n rows
-- name a missing parent' per foreign key that some row breaks.
CREATE FUNCTION engram._broken_references() RETURNS text[]
LANGUAGE plpgsql AS $fn$
DECLARE
    r       record;
    n       bigint;
    v_found text[] := '{}';
BEGIN
    FOR r IN
        SELECT c.conrelid::regclass AS child, c.confrelid::regclass AS parent,
               (SELECT string_agg(format('c.%I', a.attname), ', ' ORDER BY k.n)
                FROM unnest(c.conkey) WITH ORDINALITY k(attnum, n)
                JOIN pg_catalog.pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum) AS ccols,
               (SELECT string_agg(format('p.%I', a.attname), ', ' ORDER BY k.n)
                FROM unnest(c.confkey) WITH ORDINALITY k(attnum, n)
                JOIN pg_catalog.pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum) AS pcols
        FROM pg_catalog.pg_constraint c
        WHERE c.contype = 'f' AND c.conrelid = ANY (engram._dumped_tables())
        ORDER BY 1, 2
    LOOP
        EXECUTE format('SELECT count(*) FROM %s c WHERE ROW(%s) IS NOT NULL
                            AND NOT EXISTS (SELECT 1 FROM %s p WHERE ROW(%s) = ROW(%s))',
                       r.child, r.ccols, r.parent, r.pcols, r.ccols) INTO n;
        IF n > 0 THEN
            v_found := v_found || format('%s: %s rows name a missing %s row', r.child, n, r.parent);
        END IF;
    END LOOP;
    RETURN v_found;
END
$fn$;

-- Gives the embedding column of p_table (what p_what holds) the dimension
-- of its rows, which must agree with the configured one (p_configured;
-- without rows, that one, else the column's, else p_default).
CREATE FUNCTION engram._settle_dims(p_table regclass, p_what text, p_configured integer, p_default integer)
RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_dims integer[];
    v_have integer := (SELECT nullif(a.atttypmod, -1) FROM pg_catalog.pg_attribute a
                       WHERE a.attrelid = p_table AND a.attname = 'embedding');
    v_want integer;
BEGIN
    EXECUTE format('SELECT ARRAY(SELECT DISTINCT vector_dims(t.embedding) FROM %s t WHERE t.embedding IS NOT NULL)', p_table)
        INTO v_dims;
    IF cardinality(v_dims) > 1 OR (cardinality(v_dims) = 1 AND v_dims[1] <> coalesce(p_configured, v_dims[1])) THEN
        RAISE EXCEPTION 'the restored % hold embeddings of % dimensions (configured: %); a database holds one dimension of each',
            p_what, array_to_string(v_dims, ', '), coalesce(p_configured::text, 'nothing')
            USING ERRCODE = '22000', HINT = 'Restore the dump again from its source; the data differs from what it was dumped from.';
    END IF;
    v_want := coalesce(v_dims[1], p_configured, v_have, p_default);
    IF v_have IS DISTINCT FROM v_want THEN
        IF p_table = 'engram.memories'::regclass THEN
            DROP INDEX IF EXISTS engram.memories_embedding_hnsw;
        END IF;
        EXECUTE format('ALTER TABLE %s ALTER COLUMN embedding TYPE vector(%s)', p_table, v_want);
        -- (ALTER COLUMN TYPE takes the type's storage: image embeddings stay
        -- in the row, except on Citus, which cannot set it on its shards)
        IF p_table = 'engram.image_embeddings'::regclass AND NOT engram._is_distributed() THEN
            ALTER TABLE engram.image_embeddings ALTER COLUMN embedding SET STORAGE PLAIN;
        END IF;
    END IF;
END
$fn$;

-- Completes a restore: checks that every dumped table loaded and every
-- reference holds, gives the embedding columns the dumped dimension,
-- builds the HNSW index with the dumped options, sets the tuned
-- ef_search, and rebuilds what is derived from the rows (scope lists,
-- entities, usage counts, image holds). Refuses, changing nothing, when
-- the restore is incomplete. p_manual: called by a DBA (finish_restore),
-- which also accepts a restore that no preloaded hook recorded; and with
-- p_missing_ok, tables that received no data (a database a DBA filled by
-- hand, not from a dump).
CREATE FUNCTION engram._finish_restore(p_manual boolean, p_missing_ok boolean DEFAULT false) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    c          engram.configuration;
    v_recorded boolean := EXISTS (SELECT 1 FROM engram.restore_loads l WHERE l.rows >= 0);
    v_missing  text[];
    v_broken   text[];
    v_options  text;
    v_loaded   jsonb;
BEGIN
    -- Every dumped table, the configuration excepted (engram 0.14.0 and
    -- older dump none; the data then says the dimension).
    IF v_recorded THEN
        v_missing := ARRAY(SELECT t::text FROM unnest(engram._dumped_tables()) t
                           WHERE t::text NOT IN (SELECT l.table_name FROM engram.restore_loads l)
                             AND t <> 'engram.configuration'::regclass ORDER BY 1);
        IF cardinality(v_missing) > 0 AND NOT p_missing_ok THEN
            RAISE EXCEPTION 'the restore is incomplete: no data was loaded into %', array_to_string(v_missing, ', ')
                USING ERRCODE = '55000',
                      HINT = 'pg_restore printed why those tables failed to load; restore the dump again, into a new database (docs/BACKUP.md). If this database was filled by hand, not from a dump, SELECT engram.finish_restore(missing_ok => true);';
        END IF;
    ELSIF NOT p_manual THEN
        RETURN NULL;
    END IF;
    v_broken := engram._broken_references();
    IF cardinality(v_broken) > 0 THEN
        RAISE EXCEPTION 'the restore is incomplete: %', array_to_string(v_broken, '; ')
            USING ERRCODE = '55000',
                  HINT = 'A table the others refer to did not load completely (see pg_restore''s errors); restore the dump again, into a new database (docs/BACKUP.md).';
    END IF;
    SELECT * INTO c FROM engram.configuration;
    IF string_to_array(c.version, '.')::integer[] > string_to_array(engram._library_version(), '.')::integer[] THEN
        RAISE EXCEPTION 'the dump comes from engram %, newer than this library (engram %)', c.version, engram._library_version()
            USING ERRCODE = '55000',
                  HINT = format('Install engram %s (or newer) on this server, restart PostgreSQL, and restore the dump again into a new database.', c.version);
    END IF;

    -- The embedding dimensions: the rows', which must agree with the dumped
    -- configuration's; without rows, the configuration's.
    PERFORM engram._settle_dims('engram.memories', 'memories', c.embedding_dims, 384);
    PERFORM engram._settle_dims('engram.image_embeddings', 'images', c.image_dims, 512);

    -- The HNSW index, with the dumped build options (after the load: one
    -- bulk build instead of an insert per row).
    v_options := CASE WHEN c.hnsw_m IS NOT NULL OR c.hnsw_ef_construction IS NOT NULL
                      THEN format('m = %s, ef_construction = %s', coalesce(c.hnsw_m, 16), coalesce(c.hnsw_ef_construction, 64)) END;
    IF engram._hnsw_build() IS DISTINCT FROM jsonb_build_object('m', coalesce(c.hnsw_m, 16),
                                                                'ef_construction', coalesce(c.hnsw_ef_construction, 64)) THEN
        PERFORM engram._build_hnsw(v_options);
    END IF;
    IF c.hnsw_ef_search IS NOT NULL THEN
        EXECUTE format('ALTER DATABASE %I SET engram.hnsw_ef_search = %s', current_database(), c.hnsw_ef_search);
    END IF;

    -- Served again from here on; then what derives from the rows.
    SELECT jsonb_object_agg(l.table_name, l.rows) INTO v_loaded FROM engram.restore_loads l;
    DELETE FROM engram.restore_loads;
    PERFORM engram.rebuild_lists();
    PERFORM engram._reindex_entities();
    PERFORM engram.recount_usage();
    -- (rebuild_image_holds without its erasure: a restore erases nothing)
    PERFORM engram._hold_images();
    PERFORM engram._save_configuration();
    -- Audited when a DBA finishes it: during pg_restore the identity
    -- sequences are set after the tables load, so an audit row written by
    -- the last load would take an id the restored sequence hands out again.
    IF p_manual THEN
        PERFORM engram._audit(NULL, 'restore', NULL, jsonb_build_object('loaded', v_loaded));
    END IF;
    RETURN jsonb_build_object('restored', true, 'loaded', v_loaded, 'embedding_dims', engram._dims(),
                              'image_dims', engram._image_dims(), 'hnsw', engram._hnsw_build(),
                              'hnsw_ef_search', c.hnsw_ef_search);
END
$fn$;

-- For DBAs: finishes a restore that pg_restore has completed but that did
-- not finish by itself (a dump from engram 0.14.0 or older has no
-- configuration table to load), or says what is missing. missing_ok: the
-- database was filled by hand (a superuser's COPY into a new database is
-- taken for a restore's first load), not every table has data to load.
CREATE FUNCTION engram.finish_restore(missing_ok boolean DEFAULT false) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_result jsonb;
BEGIN
    PERFORM engram._check_planted();
    IF NOT engram._caller_privileged() THEN
        RAISE EXCEPTION 'finish_restore is for DBAs (a superuser, or a role granted SET ON PARAMETER engram.owner)%',
            engram._withheld_note()
            USING ERRCODE = '42501';
    END IF;
    LOCK TABLE engram.restore_loads IN EXCLUSIVE MODE;
    v_result := engram._finish_restore(true, coalesce(finish_restore.missing_ok, false));
    RETURN v_result;
END
$fn$;
