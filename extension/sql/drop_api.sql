-- Drops every object the API files (sql/api/*.sql) create, found in the
-- catalog, so that engram._install_api can load this version's API over
-- any earlier one: an upgrade hop no longer lists the previous API's
-- objects by hand (sql/README.md, "Writing the next upgrade"). Runs only
-- inside ALTER EXTENSION (engram._install_api refuses otherwise). Only the
-- extension's own objects and its own tables are touched: objects a user
-- created in schema engram, and Citus' shard tables (which are not
-- members of the extension), are left alone. What it drops, dependents
-- first:
-- 1. the extension's event triggers, and the triggers on its tables whose
--    function is one of its functions;
-- 2. its aggregates and its plpgsql and SQL functions (the Rust functions
--    are not the API's: the install script creates them);
-- 3. its standalone composite types (the API's result types);
-- 4. the owner_isolation policies on its tables.
DO $drop_api$
DECLARE
    v_tables oid[];   -- the extension's tables (and standalone composite types' rows)
    v_procs  oid[];   -- its functions and aggregates
    v_types  oid[];
    v_events oid[];   -- its event triggers
    r record;
BEGIN
    SELECT coalesce(array_agg(d.objid) FILTER (WHERE d.classid = 'pg_catalog.pg_class'::regclass), '{}'),
           coalesce(array_agg(d.objid) FILTER (WHERE d.classid = 'pg_catalog.pg_proc'::regclass), '{}'),
           coalesce(array_agg(d.objid) FILTER (WHERE d.classid = 'pg_catalog.pg_type'::regclass), '{}'),
           coalesce(array_agg(d.objid) FILTER (WHERE d.classid = 'pg_catalog.pg_event_trigger'::regclass), '{}')
    INTO v_tables, v_procs, v_types, v_events
    FROM pg_catalog.pg_depend d
    WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.deptype = 'e'
      AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'engram');
    FOR r IN SELECT e.evtname FROM pg_catalog.pg_event_trigger e WHERE e.oid = ANY (v_events) LOOP
        EXECUTE format('DROP EVENT TRIGGER IF EXISTS %I', r.evtname);
    END LOOP;
    FOR r IN
        SELECT t.tgname, t.tgrelid::regclass AS tbl FROM pg_catalog.pg_trigger t
        WHERE NOT t.tgisinternal AND t.tgrelid = ANY (v_tables) AND t.tgfoid = ANY (v_procs)
    LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', r.tgname, r.tbl);
    END LOOP;
    FOR r IN
        SELECT p.oid::regprocedure AS f, p.prokind = 'a' AS aggregate FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_language l ON l.oid = p.prolang
        WHERE p.oid = ANY (v_procs) AND (p.prokind = 'a' OR l.lanname IN ('plpgsql', 'sql'))
        ORDER BY p.prokind = 'a' DESC
    LOOP
        EXECUTE format(CASE WHEN r.aggregate THEN 'DROP AGGREGATE %s' ELSE 'DROP FUNCTION %s' END, r.f);
    END LOOP;
    -- (a composite type's membership is recorded on its pg_class row)
    FOR r IN
        SELECT t.oid::regtype AS typ FROM pg_catalog.pg_type t
        JOIN pg_catalog.pg_class c ON c.oid = t.typrelid
        WHERE c.relkind = 'c' AND (c.oid = ANY (v_tables) OR t.oid = ANY (v_types))
    LOOP
        EXECUTE format('DROP TYPE %s', r.typ);
    END LOOP;
    FOR r IN
        SELECT p.polname, p.polrelid::regclass AS tbl FROM pg_catalog.pg_policy p
        WHERE p.polname = 'owner_isolation' AND p.polrelid = ANY (v_tables)
    LOOP
        EXECUTE format('DROP POLICY IF EXISTS %I ON %s', r.polname, r.tbl);
    END LOOP;
END
$drop_api$;
