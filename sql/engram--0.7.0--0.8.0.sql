-- engram 0.7.0 -> 0.8.0 (ALTER EXTENSION engram UPDATE TO '0.8.0')
--
-- 0.8.0 makes engram distributable by owner (docs/SCALING.md):
-- * every primary key, unique key and foreign key of an owner's data
--   starts with the owner: memories (owner, id), revisions (owner,
--   memory_id, revision), memory_access (owner, memory_id), events
--   (owner, memory_id), publications (owner, id), workspaces (owner, id),
--   states (owner, id) and (owner, workspace_id, name), audit_log (owner,
--   id), misses (owner, id); a plain index on memories (id) keeps lookups
--   by id alone fast;
-- * engram.node_secret, the key of the bindings' proofs that engram.bind
--   sends to Citus workers;
-- * database-wide audit rows have the owner '' instead of NULL;
-- * the scope lists' and the quotas' triggers run per row instead of per
--   statement with transition tables (Citus runs triggers on the shards);
-- * engram.distribute() distributes the tables on a Citus coordinator.
--
-- Rewrites the keys of those tables (one pass over each, under an ACCESS
-- EXCLUSIVE lock: plan the update for a quiet moment on a large database).
--
-- Built as sql/README.md says: 1. drop the previous API; 2. change the
-- tables; 3. create the new Rust functions; 4. load the new api.sql from
-- the library.
\echo Use "ALTER EXTENSION engram UPDATE TO '0.8.0'" to load this file. \quit

-- 1. The 0.7.0 API: its triggers, functions, result types and policies.
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
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'events', 'images', 'slots', 'workspaces', 'states'] LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS usage_insert ON engram.%I', t);
        EXECUTE format('DROP TRIGGER IF EXISTS usage_delete ON engram.%I', t);
        EXECUTE format('DROP TRIGGER IF EXISTS usage_truncate ON engram.%I', t);
    END LOOP;
END
$$;
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

-- 2. Tables: keys that start with the owner.

-- Foreign keys first (they depend on the keys they reference).
ALTER TABLE engram.revisions DROP CONSTRAINT revisions_memory_id_fkey;
ALTER TABLE engram.publications DROP CONSTRAINT publications_memory_id_fkey;
ALTER TABLE engram.events DROP CONSTRAINT events_memory_id_fkey, DROP CONSTRAINT events_workspace_id_fkey;
ALTER TABLE engram.states DROP CONSTRAINT states_workspace_id_fkey;

ALTER TABLE engram.memories DROP CONSTRAINT memories_pkey, ADD CONSTRAINT memories_pkey PRIMARY KEY (owner, id);
CREATE INDEX memories_id ON engram.memories (id);
ALTER TABLE engram.revisions DROP CONSTRAINT revisions_pkey,
    ADD CONSTRAINT revisions_pkey PRIMARY KEY (owner, memory_id, revision);
ALTER TABLE engram.memory_access DROP CONSTRAINT memory_access_pkey,
    ADD CONSTRAINT memory_access_pkey PRIMARY KEY (owner, memory_id);
ALTER TABLE engram.publications DROP CONSTRAINT publications_pkey,
    ADD CONSTRAINT publications_pkey PRIMARY KEY (owner, id);
DROP INDEX engram.publications_target;
CREATE UNIQUE INDEX publications_target ON engram.publications (owner, memory_id, coalesce(space, ''), coalesce(group_id, ''));
ALTER TABLE engram.workspaces DROP CONSTRAINT workspaces_pkey,
    ADD CONSTRAINT workspaces_pkey PRIMARY KEY (owner, id);
ALTER TABLE engram.states DROP CONSTRAINT states_pkey, DROP CONSTRAINT states_workspace_id_name_key,
    ADD CONSTRAINT states_pkey PRIMARY KEY (owner, id),
    ADD CONSTRAINT states_workspace_id_name_key UNIQUE (owner, workspace_id, name);
DROP INDEX engram.states_latest;
CREATE INDEX states_latest ON engram.states (owner, workspace_id, created_at DESC);
ALTER TABLE engram.events DROP CONSTRAINT events_pkey,
    ADD CONSTRAINT events_pkey PRIMARY KEY (owner, memory_id);
UPDATE engram.audit_log SET owner = '' WHERE owner IS NULL;
ALTER TABLE engram.audit_log ALTER COLUMN owner SET DEFAULT '', ALTER COLUMN owner SET NOT NULL,
    DROP CONSTRAINT audit_log_pkey, ADD CONSTRAINT audit_log_pkey PRIMARY KEY (owner, id);
ALTER TABLE engram.misses DROP CONSTRAINT misses_pkey, ADD CONSTRAINT misses_pkey PRIMARY KEY (owner, id);

-- The key of bindings' proofs on Citus (see schema.sql).
CREATE TABLE engram.node_secret (
    id     boolean PRIMARY KEY DEFAULT true CHECK (id),
    secret bytea NOT NULL
);
INSERT INTO engram.node_secret (secret)
VALUES (uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));

-- The foreign keys again, with the owner (every child row has its parent's
-- owner: the API has always written them so).
ALTER TABLE engram.revisions ADD CONSTRAINT revisions_memory_id_fkey FOREIGN KEY (owner, memory_id)
    REFERENCES engram.memories (owner, id) ON DELETE CASCADE;
ALTER TABLE engram.publications ADD CONSTRAINT publications_memory_id_fkey FOREIGN KEY (owner, memory_id)
    REFERENCES engram.memories (owner, id) ON DELETE CASCADE;
ALTER TABLE engram.events ADD CONSTRAINT events_memory_id_fkey FOREIGN KEY (owner, memory_id)
        REFERENCES engram.memories (owner, id) ON DELETE CASCADE,
    ADD CONSTRAINT events_workspace_id_fkey FOREIGN KEY (owner, workspace_id)
        REFERENCES engram.workspaces (owner, id) ON DELETE NO ACTION;
ALTER TABLE engram.states ADD CONSTRAINT states_workspace_id_fkey FOREIGN KEY (owner, workspace_id)
    REFERENCES engram.workspaces (owner, id) ON DELETE CASCADE;

-- 3. Rust functions new in 0.8.0: a binding's proof for Citus workers.
CREATE FUNCTION engram."_sign_binding"(
	"token_id" TEXT, /* & str */
	"owner" TEXT, /* & str */
	"internal" bool, /* bool */
	"expires" bigint, /* i64 */
	"key" bytea /* & [u8] */
) RETURNS TEXT /* String */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_sign_binding_wrapper';
CREATE FUNCTION engram."_binding_key"(
	"secret" bytea, /* & [u8] */
	"token_hash" bytea /* & [u8] */
) RETURNS bytea /* Vec < u8 > */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_binding_key_wrapper';
CREATE FUNCTION engram."_binding_claim"(
	"text" TEXT /* & str */
) RETURNS jsonb /* Option < pgrx :: JsonB > */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_binding_claim_wrapper';
CREATE FUNCTION engram."_binding_proof_valid"(
	"text" TEXT, /* & str */
	"key" bytea /* & [u8] */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_binding_proof_valid_wrapper';

-- 4. The 0.8.0 API, from the library (engram._install_api loads it only when
-- the library is 0.8.0; a later hop loads a later API).
SELECT engram._install_api('0.8.0');

-- Usage counted again from the rows: a database that came from 0.6.0 in
-- this same ALTER EXTENSION skipped the 0.7.0 hop's count (that hop did not
-- load its own API). Only on the hop that loaded the 0.8.0 API.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
               WHERE p.pronamespace = 'engram'::regnamespace AND p.proname = 'recount_usage') THEN
        PERFORM engram.recount_usage();
    END IF;
END
$$;
