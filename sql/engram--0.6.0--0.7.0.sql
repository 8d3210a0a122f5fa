-- engram 0.6.0 -> 0.7.0 (ALTER EXTENSION engram UPDATE TO '0.7.0')
--
-- 0.7.0 hardens 0.6.0 (docs/SECURITY.md):
-- * privilege that code of other roles cannot borrow: the privileged path
--   (superuser, or SET on engram.owner) is withheld while a
--   security-restricted operation, a function or a relation of an
--   unprivileged role is running (extension/src/privilege.rs, which needs
--   engram in shared_preload_libraries); administrative functions require
--   it (engram._require_privileged); a restricted call needs a binding
--   that engram.bind made (engram.binding), not just engram.owner;
-- * closed groups: only members, platform tokens and DBAs publish to one;
-- * every writer takes the owner lock; erase_owner leaves a tombstone
--   (owner_locks.erased_at) so that writes queued behind it fail;
-- * import takes no provenance from the file unless keep_provenance;
-- * per-owner quotas (engram.max_*_per_owner), counted in owner_locks by
--   statement triggers and recounted here from the stored rows;
-- * bounded input (1-D tags, JSON depth and numbers, lengths, ttl range,
--   cursors, echoes); see docs/SECURITY.md.
--
-- Built as sql/README.md says: 1. drop the previous API; 2. change the
-- tables; 3. create the new Rust functions; 4. load the new api.sql from
-- the library.
\echo Use "ALTER EXTENSION engram UPDATE TO '0.7.0'" to load this file. \quit

-- 1. The 0.6.0 API: its triggers, functions, result types and policies.
-- The scope lists' and image holds' triggers are dropped and created again
-- within this one transaction; DROP TRIGGER locks engram.memories against
-- writes until the update commits.
DROP EVENT TRIGGER IF EXISTS engram_borrowed_functions;
DROP TRIGGER IF EXISTS states_immutable ON engram.states;
DROP TRIGGER IF EXISTS scope_lists_insert ON engram.memories;
DROP TRIGGER IF EXISTS scope_lists_update ON engram.memories;
DROP TRIGGER IF EXISTS scope_lists_delete ON engram.memories;
DROP TRIGGER IF EXISTS scope_lists_truncate ON engram.memories;
DROP TRIGGER IF EXISTS image_refs_insert ON engram.memories;
DROP TRIGGER IF EXISTS image_refs_update ON engram.memories;
DROP TRIGGER IF EXISTS image_refs_delete ON engram.memories;
DROP TRIGGER IF EXISTS image_refs_truncate ON engram.memories;
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_language l ON l.oid = p.prolang
        WHERE p.pronamespace = 'engram'::regnamespace AND l.lanname IN ('plpgsql', 'sql')
    LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END
$$;
DROP TYPE IF EXISTS engram.read_scope, engram.search_hit, engram.recalled_memory, engram.listed_memory,
    engram.slot, engram.workspace_item, engram.state_item, engram.session_item, engram.session_event,
    engram.list_entry, engram.vision_hit;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'revisions', 'memory_access', 'audit_log', 'ghost_settings', 'grants',
                             'publications', 'slots', 'workspaces', 'states', 'events', 'misses',
                             'images', 'image_data', 'image_embeddings'] LOOP
        EXECUTE format('DROP POLICY IF EXISTS owner_isolation ON engram.%I', t);
    END LOOP;
END
$$;

-- 2. Tables.

-- engram.owner_locks also counts each owner's usage against the per-owner
-- quotas (filled in after the API is loaded, below) and keeps the
-- tombstone of an erased owner (erased_at).
ALTER TABLE engram.owner_locks
    ADD COLUMN erased_at timestamptz,
    ADD COLUMN memories bigint NOT NULL DEFAULT 0,
    ADD COLUMN events bigint NOT NULL DEFAULT 0,
    ADD COLUMN image_bytes bigint NOT NULL DEFAULT 0,
    ADD COLUMN slots bigint NOT NULL DEFAULT 0,
    ADD COLUMN workspaces bigint NOT NULL DEFAULT 0,
    ADD COLUMN states bigint NOT NULL DEFAULT 0;

-- 3. Rust functions new in 0.7.0.
CREATE FUNCTION engram."_withheld_privilege"() RETURNS TEXT /* Option < String > */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_withheld_privilege_wrapper';
CREATE FUNCTION engram."_check_json"(
	"what" TEXT, /* & str */
	"json" TEXT /* & str */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_check_json_wrapper';
CREATE FUNCTION engram."_setting_quotas"() RETURNS jsonb /* pgrx :: JsonB */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_setting_quotas_wrapper';

-- 4. The 0.7.0 API, from the library (engram._install_api loads it only when
-- the library is 0.7.0; a later hop loads a later API).
SELECT engram._install_api('0.7.0');

-- The usage of every owner so far, counted once from the rows (the
-- counting triggers keep it from here on). Only on the hop that loaded
-- the 0.7.0 API (a later hop's API counts in its own way).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
               WHERE p.pronamespace = 'engram'::regnamespace AND p.proname = 'recount_usage') THEN
        PERFORM engram.recount_usage();
    END IF;
END
$$;

-- Operators, aggregates and casts that an unprivileged role built on
-- engram's functions under 0.6.0 (0.7.0 refuses new ones): named, for a
-- DBA to drop, since each lends engram the privileges of whoever
-- evaluates it.
DO $$
DECLARE
    o record;
BEGIN
    FOR o IN
        SELECT format('operator %s', x.oid::regoperator) AS what FROM pg_catalog.pg_operator x
        JOIN pg_catalog.pg_roles r ON r.oid = x.oprowner
        WHERE x.oprcode::oid IN (SELECT p.oid FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'engram'::regnamespace)
          AND NOT r.rolsuper AND NOT pg_catalog.has_parameter_privilege(r.oid, 'engram.owner', 'SET')
        UNION ALL
        SELECT format('aggregate %s', a.aggfnoid::regprocedure) FROM pg_catalog.pg_aggregate a
        JOIN pg_catalog.pg_proc ap ON ap.oid = a.aggfnoid JOIN pg_catalog.pg_roles r ON r.oid = ap.proowner
        WHERE ARRAY[a.aggtransfn::oid, a.aggfinalfn::oid, a.aggmtransfn::oid, a.aggmfinalfn::oid]
              && ARRAY(SELECT p.oid FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'engram'::regnamespace)
          AND NOT r.rolsuper AND NOT pg_catalog.has_parameter_privilege(r.oid, 'engram.owner', 'SET')
    LOOP
        RAISE WARNING 'engram 0.7.0: % is built on an engram function by an unprivileged role; drop it (it would run engram with the privileges of whoever evaluates it)', o.what;
    END LOOP;
END
$$;

-- 0.6.0 let anyone publish to any group; 0.7.0 lets members (and platform
-- tokens and DBAs) only. Publications to a group by owners who are not its
-- members are kept (a platform may have made them) and named here.
DO $$
DECLARE
    n bigint;
BEGIN
    SELECT count(*) INTO n FROM engram.publications p
    WHERE p.group_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM engram.group_members g WHERE g.group_id = p.group_id AND g.member = p.owner);
    IF n > 0 THEN
        RAISE WARNING 'engram 0.7.0: % publication(s) to groups by owners who are not members of them; review them with SELECT * FROM engram.publications p WHERE p.group_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM engram.group_members g WHERE g.group_id = p.group_id AND g.member = p.owner)', n;
    END IF;
END
$$;
