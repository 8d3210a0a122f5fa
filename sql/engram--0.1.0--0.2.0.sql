-- engram 0.1.0 -> 0.2.0 (ALTER EXTENSION engram UPDATE TO '0.2.0')
--
-- 0.2.0 binds the restricted role only through engram.bind(token), takes
-- away its direct writes, audits who acted, and adds trust-gated sharing
-- (docs/SECURITY.md). Data is kept: memories, revisions, access
-- statistics, the audit log and tokens stay as they are; new columns get
-- their defaults.
--
-- How an upgrade script is built (sql/README.md): 1. drop the previous
-- version's API (functions, result types, policies, the agent's grants);
-- 2. change the tables exactly as the new schema.sql declares them; 3.
-- create the new Rust functions; 4. load the new api.sql from the library.
-- tests/tests/upgrade.rs checks that the result equals a fresh install.
\echo Use "ALTER EXTENSION engram UPDATE TO '0.2.0'" to load this file. \quit

-- 1. The 0.1.0 API.
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
DROP TYPE engram.search_hit, engram.recalled_memory, engram.listed_memory;
DROP POLICY owner_isolation ON engram.memories;
DROP POLICY owner_isolation ON engram.revisions;
DROP POLICY owner_isolation ON engram.memory_access;
DROP POLICY owner_isolation ON engram.audit_log;
-- 0.1.0 let engram_agent write the tables directly; 0.2.0 grants SELECT only.
REVOKE ALL ON engram.memories, engram.revisions, engram.memory_access, engram.audit_log FROM engram_agent;

-- 2. Tables.
ALTER TABLE engram.memories
    ADD COLUMN access_level smallint NOT NULL DEFAULT 5 CHECK (access_level BETWEEN 1 AND 5);
ALTER TABLE engram.audit_log
    ADD COLUMN token_id uuid,
    ADD COLUMN token_label text,
    ADD COLUMN act_as text,
    ADD COLUMN internal_context jsonb;
ALTER TABLE engram.tokens ADD COLUMN expires_at timestamptz;

-- Sharing. Whether an owner's ghost talks to others at all,
-- and the trust it gives accessors without a grant of their own.
CREATE TABLE engram.ghost_settings (
    owner         text PRIMARY KEY CHECK (owner <> ''),
    enabled       boolean NOT NULL DEFAULT true,
    default_trust smallint NOT NULL DEFAULT 1 CHECK (default_trust BETWEEN 0 AND 5),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- The trust an owner gives one accessor: 0 blocks, 1-5 shows memories of
-- access_level up to it.
CREATE TABLE engram.grants (
    owner      text NOT NULL CHECK (owner <> ''),
    accessor   text NOT NULL CHECK (accessor <> ''),
    trust      smallint NOT NULL CHECK (trust BETWEEN 0 AND 5),
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, accessor)
);

-- A memory published to a space (every space ghost conversation of it reads
-- it) or to a group (group ghost conversations of its members read it).
CREATE TABLE engram.publications (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    memory_id    uuid NOT NULL REFERENCES engram.memories (id) ON DELETE CASCADE,
    owner        text NOT NULL,
    space        text CHECK (space <> ''),
    group_id     text CHECK (group_id <> ''),
    published_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((space IS NULL) <> (group_id IS NULL))
);
CREATE UNIQUE INDEX publications_target ON engram.publications (memory_id, coalesce(space, ''), coalesce(group_id, ''));
CREATE INDEX publications_space ON engram.publications (space) WHERE space IS NOT NULL;
CREATE INDEX publications_group ON engram.publications (group_id) WHERE group_id IS NOT NULL;

CREATE TABLE engram.group_members (
    group_id text NOT NULL CHECK (group_id <> ''),
    member   text NOT NULL CHECK (member <> ''),
    added_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, member)
);
-- One row per owner that has written: engram._lock_owner row-locks it to
-- serialise that owner's writes (duplicate and conflict checks see every
-- committed or concurrent write). A table, not an advisory lock, so that no
-- other role can take the lock.
CREATE TABLE engram.owner_locks (
    owner text PRIMARY KEY
);

-- Slots: named, size-limited text blocks an agent
-- keeps at hand, global (workspace '') or per workspace, where a
-- workspace's slot shadows the global one of the same label.
CREATE TABLE engram.slots (
    owner      text NOT NULL CHECK (owner <> ''),
    workspace  text NOT NULL DEFAULT '',
    label      text NOT NULL CHECK (label <> '' AND octet_length(label) <= 200),
    content    text NOT NULL DEFAULT '',
    size_limit integer NOT NULL DEFAULT 2000 CHECK (size_limit BETWEEN 1 AND 262144),
    pinned     boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, workspace, label)
);

SELECT pg_catalog.pg_extension_config_dump('engram.slots', '');
SELECT pg_catalog.pg_extension_config_dump('engram.ghost_settings', '');
SELECT pg_catalog.pg_extension_config_dump('engram.grants', '');
SELECT pg_catalog.pg_extension_config_dump('engram.publications', '');
SELECT pg_catalog.pg_extension_config_dump('engram.group_members', '');

ALTER TABLE engram.ghost_settings ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.grants ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.publications ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.slots ENABLE ROW LEVEL SECURITY;

-- 3. Rust functions new in 0.2.0 (as cargo pgrx schema writes them).
CREATE FUNCTION engram."_bound_owner"() RETURNS TEXT /* Option < String > */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_bound_owner_wrapper';

CREATE FUNCTION engram."can_write"(
	"mode" TEXT, /* & str */
	"event_type" TEXT /* & str */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'can_write_wrapper';

CREATE FUNCTION engram."should_capture_tool"(
	"mode" TEXT, /* & str */
	"tool_name" TEXT /* & str */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'should_capture_tool_wrapper';

CREATE FUNCTION engram."context_depth"(
	"mode" TEXT, /* & str */
	"role" TEXT DEFAULT 'owner' /* & str */
) RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'context_depth_wrapper';

CREATE FUNCTION engram."_capture_skip_reason"(
	"mode" TEXT, /* & str */
	"event_type" TEXT, /* & str */
	"tool_name" TEXT /* Option < & str > */
) RETURNS TEXT /* Option < String > */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_capture_skip_reason_wrapper';

CREATE FUNCTION engram."_check_planted"() RETURNS void
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_check_planted_wrapper';

CREATE FUNCTION engram."_rls_owner"() RETURNS TEXT /* Option < String > */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_rls_owner_wrapper';

CREATE FUNCTION engram."_binding"() RETURNS jsonb /* Option < pgrx :: JsonB > */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_binding_wrapper';

CREATE FUNCTION engram."_caller_privileged"() RETURNS bool /* bool */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_caller_privileged_wrapper';

CREATE FUNCTION engram."_caller_role"() RETURNS TEXT /* String */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_caller_role_wrapper';

CREATE FUNCTION engram."_setting_anonymous_owner"() RETURNS TEXT /* Option < String > */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_setting_anonymous_owner_wrapper';

CREATE FUNCTION engram."_install_api"(
	"version" TEXT /* & str */
) RETURNS bool /* bool */
STRICT VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_install_api_wrapper';
-- 4. The 0.2.0 API, from the library (engram._install_api loads it only when
-- the library is 0.2.0; a later hop loads a later API).
SELECT engram._install_api('0.2.0');
