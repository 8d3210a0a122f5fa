-- engram 0.2.0 -> 0.3.0 (ALTER EXTENSION engram UPDATE TO '0.3.0')
--
-- 0.3.0 adds continuity (docs/CONTINUITY.md): workspaces, immutable
-- states, captured events with the embedding backlog, sessions and
-- summaries, the context package, and search misses in stats; and conflict
-- detection that gives its reasons (similar, correction, changed_value,
-- negation), with a memory stored anyway over a correction superseding
-- (flagging) the old one. Data is kept: every table of 0.2.0 stays as it
-- is; the new tables start empty.
--
-- Built as sql/README.md says: 1. drop the previous API; 2. change the
-- tables as the new schema.sql declares them; 3. create the new Rust
-- functions; 4. load the new api.sql from the library.
\echo Use "ALTER EXTENSION engram UPDATE TO '0.3.0'" to load this file. \quit

-- 1. The 0.2.0 API. IF EXISTS throughout: in a chain of hops (0.1.0 ->
-- 0.2.0 -> 0.3.0) the 0.2.0 API was never loaded.
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
DROP TYPE IF EXISTS engram.read_scope, engram.search_hit, engram.recalled_memory, engram.listed_memory, engram.slot;
DROP POLICY IF EXISTS owner_isolation ON engram.memories;
DROP POLICY IF EXISTS owner_isolation ON engram.revisions;
DROP POLICY IF EXISTS owner_isolation ON engram.memory_access;
DROP POLICY IF EXISTS owner_isolation ON engram.audit_log;
DROP POLICY IF EXISTS owner_isolation ON engram.ghost_settings;
DROP POLICY IF EXISTS owner_isolation ON engram.grants;
DROP POLICY IF EXISTS owner_isolation ON engram.publications;
DROP POLICY IF EXISTS owner_isolation ON engram.slots;

-- 2. Tables (as in extension/sql/schema.sql).
-- Continuity (docs/CONTINUITY.md), since 0.3.0.

-- A workspace: a project the agent comes back to. Archived, never deleted
-- (only erasing an owner removes it); a name is unique per owner.
CREATE TABLE engram.workspaces (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner       text NOT NULL CHECK (owner <> ''),
    name        text NOT NULL CHECK (name <> '' AND octet_length(name) <= 200),
    description text NOT NULL DEFAULT '',
    root_folder text,
    purpose     text,
    workflows   text[] NOT NULL DEFAULT '{}',
    key_files   text[] NOT NULL DEFAULT '{}',
    preferences jsonb NOT NULL DEFAULT '{}',
    status      text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    archived_at timestamptz,
    UNIQUE (owner, name)
);

-- A state: an immutable, named save point of a workspace. The name is
-- unique in its workspace forever (archived states keep theirs), and the
-- trigger engram._state_immutable refuses every UPDATE but archiving.
CREATE TABLE engram.states (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner                text NOT NULL CHECK (owner <> ''),
    workspace_id         uuid NOT NULL REFERENCES engram.workspaces (id) ON DELETE CASCADE,
    name                 text NOT NULL CHECK (name <> '' AND octet_length(name) <= 200),
    description          text NOT NULL DEFAULT '',
    conversation_context text NOT NULL DEFAULT '',
    active_task          text NOT NULL DEFAULT '',
    active_files         text[] NOT NULL DEFAULT '{}',
    next_steps           text[] NOT NULL DEFAULT '{}',
    tags                 text[] NOT NULL DEFAULT '{}',
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    archived_at          timestamptz,
    UNIQUE (workspace_id, name)
);
CREATE INDEX states_latest ON engram.states (workspace_id, created_at DESC);

-- A captured event: an episodic memory (the row in engram.memories holds
-- its content, session, importance and embedding) with the event's type,
-- mode, tool call and file beside it. A memory erased erases its event.
CREATE TABLE engram.events (
    memory_id       uuid PRIMARY KEY REFERENCES engram.memories (id) ON DELETE CASCADE,
    owner           text NOT NULL,
    event_type      text NOT NULL CHECK (event_type IN ('conversation', 'tool_invocation', 'file_read',
                        'file_write', 'code_approval', 'code_rejection', 'observation', 'summary')),
    mode            text NOT NULL,
    session_id      text NOT NULL,
    workspace_id    uuid REFERENCES engram.workspaces (id) ON DELETE SET NULL,
    tool_name       text,
    tool_input      jsonb,
    tool_output     jsonb,
    success         boolean,
    error           text,
    duration_ms     integer,
    file_path       text,
    parent_event_id uuid,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX events_session ON engram.events (owner, session_id, created_at);
CREATE INDEX events_workspace ON engram.events (owner, workspace_id, event_type, created_at);
CREATE INDEX events_type ON engram.events (owner, event_type, created_at);

-- The embedding backlog: active memories stored without an embedding
-- (captured events, and anything a SQL client wrote without one), which
-- engram-mcp embeds in the background. The rows are the queue, so a crash
-- loses nothing.
CREATE INDEX memories_backlog ON engram.memories (owner, created_at)
    WHERE embedding IS NULL AND status = 'active';

-- Searches that found nothing (for the metrics): what agents looked for in
-- vain. Holds the query text, so erasing an owner erases these too.
CREATE TABLE engram.misses (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner         text NOT NULL,
    at            timestamptz NOT NULL DEFAULT now(),
    query_text    text,
    had_embedding boolean NOT NULL
);
CREATE INDEX misses_owner_at ON engram.misses (owner, at);

SELECT pg_catalog.pg_extension_config_dump('engram.workspaces', '');
SELECT pg_catalog.pg_extension_config_dump('engram.states', '');
SELECT pg_catalog.pg_extension_config_dump('engram.events', '');
SELECT pg_catalog.pg_extension_config_dump('engram.misses', '');
-- Identity sequences of dumped tables are dumped too, or a restored
-- database would hand out ids that exist already.
SELECT pg_catalog.pg_extension_config_dump('engram.misses_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('engram.audit_log_id_seq', '');

ALTER TABLE engram.workspaces ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.states ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.events ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.misses ENABLE ROW LEVEL SECURITY;

-- 3. Rust functions new in 0.3.0.
CREATE FUNCTION engram."_setting_summary_every"() RETURNS INT /* i32 */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_setting_summary_every_wrapper';

CREATE FUNCTION engram."_render_context"(
	"package" jsonb, /* pgrx::datum::json::JsonB */
	"budget_chars" bigint /* i64 */
) RETURNS jsonb /* pgrx::datum::json::JsonB */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_render_context_wrapper';

CREATE FUNCTION engram."_check_budget"(
	"budget_chars" bigint /* core::option::Option<i64> */
) RETURNS void
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_check_budget_wrapper';

CREATE FUNCTION engram."_conflict_reasons"(
	"new_text" TEXT, /* & str */
	"old_text" TEXT, /* & str */
	"similarity" real, /* f32 */
	"threshold" real /* f32 */
) RETURNS TEXT[] /* Vec < String > */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_conflict_reasons_wrapper';

CREATE FUNCTION engram."_superseding_reasons"() RETURNS TEXT[] /* Vec < String > */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_superseding_reasons_wrapper';

-- 4. The 0.3.0 API, from the library (engram._install_api loads it only when
-- the library is 0.3.0; a later hop loads a later API).
SELECT engram._install_api('0.3.0');
