-- Drops every object the API files (sql/api/*.sql) create, found in the
-- catalog, so that engram._install_api can load this version's API over
-- any earlier one: an upgrade hop no longer lists the previous API's
-- objects by hand (sql/README.md, "Writing the next upgrade"). Not run at
-- CREATE EXTENSION. What it drops, dependents first:
-- 1. event triggers and table triggers whose function is engram's;
-- 2. engram's aggregates and its plpgsql and SQL functions (the Rust
--    functions are not the API's: the install script creates them);
-- 3. engram's standalone composite types (the API's result types);
-- 4. the owner_isolation policies on engram's tables.
DO $drop_api$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT e.evtname FROM pg_catalog.pg_event_trigger e
        JOIN pg_catalog.pg_proc p ON p.oid = e.evtfoid
        WHERE p.pronamespace = 'engram'::regnamespace
    LOOP
        EXECUTE format('DROP EVENT TRIGGER %I', r.evtname);
    END LOOP;
    FOR r IN
        SELECT t.tgname, t.tgrelid::regclass AS tbl FROM pg_catalog.pg_trigger t
        JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
        JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
        WHERE NOT t.tgisinternal AND c.relnamespace = 'engram'::regnamespace
          AND p.pronamespace = 'engram'::regnamespace
    LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', r.tgname, r.tbl);
    END LOOP;
    FOR r IN
        SELECT p.oid::regprocedure AS f, p.prokind = 'a' AS aggregate FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_language l ON l.oid = p.prolang
        WHERE p.pronamespace = 'engram'::regnamespace AND (p.prokind = 'a' OR l.lanname IN ('plpgsql', 'sql'))
        ORDER BY p.prokind = 'a' DESC
    LOOP
        EXECUTE format(CASE WHEN r.aggregate THEN 'DROP AGGREGATE %s' ELSE 'DROP FUNCTION %s' END, r.f);
    END LOOP;
    FOR r IN
        SELECT t.oid::regtype AS typ FROM pg_catalog.pg_type t
        JOIN pg_catalog.pg_class c ON c.oid = t.typrelid
        WHERE t.typnamespace = 'engram'::regnamespace AND c.relkind = 'c'
    LOOP
        EXECUTE format('DROP TYPE %s', r.typ);
    END LOOP;
    FOR r IN
        SELECT p.polname, p.polrelid::regclass AS tbl FROM pg_catalog.pg_policy p
        JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
        WHERE c.relnamespace = 'engram'::regnamespace AND p.polname = 'owner_isolation'
    LOOP
        EXECUTE format('DROP POLICY %I ON %s', r.polname, r.tbl);
    END LOOP;
END
$drop_api$;
