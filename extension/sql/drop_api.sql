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
    v_ext oid := (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'engram');
    r record;
BEGIN
    FOR r IN
        SELECT e.evtname FROM pg_catalog.pg_event_trigger e
        JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_event_trigger'::regclass AND d.objid = e.oid
        WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = v_ext AND d.deptype = 'e'
    LOOP
        EXECUTE format('DROP EVENT TRIGGER IF EXISTS %I', r.evtname);
    END LOOP;
    FOR r IN
        SELECT t.tgname, t.tgrelid::regclass AS tbl FROM pg_catalog.pg_trigger t
        JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = t.tgrelid
        JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
        WHERE NOT t.tgisinternal AND p.pronamespace = 'engram'::regnamespace
          AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = v_ext AND d.deptype = 'e'
    LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', r.tgname, r.tbl);
    END LOOP;
    FOR r IN
        SELECT p.oid::regprocedure AS f, p.prokind = 'a' AS aggregate FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_language l ON l.oid = p.prolang
        JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid
        WHERE (p.prokind = 'a' OR l.lanname IN ('plpgsql', 'sql'))
          AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = v_ext AND d.deptype = 'e'
        ORDER BY p.prokind = 'a' DESC
    LOOP
        EXECUTE format(CASE WHEN r.aggregate THEN 'DROP AGGREGATE %s' ELSE 'DROP FUNCTION %s' END, r.f);
    END LOOP;
    FOR r IN
        -- (a composite type's membership is recorded on its pg_class row)
        SELECT t.oid::regtype AS typ FROM pg_catalog.pg_type t
        JOIN pg_catalog.pg_class c ON c.oid = t.typrelid
        WHERE c.relkind = 'c'
          AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                      WHERE ((d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = c.oid)
                             OR (d.classid = 'pg_catalog.pg_type'::regclass AND d.objid = t.oid))
                        AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = v_ext
                        AND d.deptype = 'e')
    LOOP
        EXECUTE format('DROP TYPE %s', r.typ);
    END LOOP;
    FOR r IN
        SELECT p.polname, p.polrelid::regclass AS tbl FROM pg_catalog.pg_policy p
        JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = p.polrelid
        WHERE p.polname = 'owner_isolation'
          AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = v_ext AND d.deptype = 'e'
    LOOP
        EXECUTE format('DROP POLICY IF EXISTS %I ON %s', r.polname, r.tbl);
    END LOOP;
END
$drop_api$;
