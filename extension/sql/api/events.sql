---------------------------------------------------------------------------
-- continuity: events, sessions, summaries (docs/CONTINUITY.md)
---------------------------------------------------------------------------

-- Whether `engram.summary_every` events (summaries not counted) have been
-- captured in the session since its last summary.
CREATE FUNCTION engram._summary_due(p_owner text, p_session text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_last  timestamptz;
    v_every integer := engram._setting_summary_every();  -- (a value: this session's setting)
BEGIN
    SELECT max(s.created_at) INTO v_last FROM engram.events s
    WHERE s.owner = p_owner AND s.session_id = p_session AND s.event_type = 'summary';
    RETURN (SELECT count(*) >= v_every
            FROM engram.events e
            WHERE e.owner = p_owner AND e.session_id = p_session AND e.event_type <> 'summary'
              AND e.created_at > coalesce(v_last, '-infinity'));
END
$fn$;

-- Records an event as an episodic memory, when the mode policy lets it
-- (engram.can_write / should_capture_tool, through _capture_skip_reason):
-- 'captured' with its id, or 'skipped' with the reason and nothing
-- written. Without an embedding the event joins the embedding backlog
-- (engram.embedding_backlog). summary_due tells the caller that the
-- session is due a summary (engram.summarize).
CREATE FUNCTION engram.capture(
    owner text DEFAULT NULL,
    event_type text DEFAULT NULL,
    content text DEFAULT NULL,
    session_id text DEFAULT NULL,
    mode text DEFAULT 'dual',
    role text DEFAULT 'owner',
    workspace text DEFAULT NULL,
    tool_name text DEFAULT NULL,
    tool_input jsonb DEFAULT NULL,
    tool_output jsonb DEFAULT NULL,
    success boolean DEFAULT NULL,
    duration_ms integer DEFAULT NULL,
    file_path text DEFAULT NULL,
    parent_event_id uuid DEFAULT NULL,
    importance real DEFAULT 0.5,
    embedding vector DEFAULT NULL,
    error text DEFAULT NULL,
    occurred_at timestamptz DEFAULT NULL)
RETURNS TABLE (status text, id uuid, reason text, summary_due boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner   text := engram._caller(capture.owner, NULL, NULL, true);
    v_mode    text := coalesce(capture.mode, 'dual');
    v_reason  text;
    v_content text := nullif(btrim(coalesce(capture.content, '')), '');
    v_ws      uuid;
    v_id      uuid := gen_random_uuid();
    v_importance real := coalesce(capture.importance, 0.5);
BEGIN
    PERFORM engram._lock_owner(v_owner);
    IF capture.event_type IS NULL THEN
        RAISE EXCEPTION 'event_type is required: conversation, tool_invocation, file_read, file_write, code_approval, code_rejection, observation or summary'
            USING ERRCODE = '22004';
    END IF;
    -- The policy, once: it also rejects an unknown mode, role or event type.
    PERFORM engram.context_depth(v_mode, coalesce(capture.role, 'owner'));
    v_reason := engram._capture_skip_reason(v_mode, capture.event_type, capture.tool_name);
    PERFORM engram._check_name('session_id', capture.session_id, '2026-11-23-a');
    IF capture.event_type = 'tool_invocation' AND (capture.tool_name IS NULL OR btrim(capture.tool_name) = '') THEN
        RAISE EXCEPTION 'tool_name is required for a tool_invocation event'
            USING ERRCODE = '22004';
    END IF;
    PERFORM engram._check_text('tool_name', capture.tool_name, 200);
    PERFORM engram._check_text('tool_input', capture.tool_input::text, 65536);
    PERFORM engram._check_text('tool_output', capture.tool_output::text, 65536);
    PERFORM engram._check_doc('tool_input', capture.tool_input);
    PERFORM engram._check_doc('tool_output', capture.tool_output);
    PERFORM engram._check_text('error', capture.error, 8192);
    PERFORM engram._check_text('file_path', capture.file_path, 4096);
    PERFORM engram._check_moment('occurred_at', capture.occurred_at);
    IF capture.duration_ms IS NOT NULL AND capture.duration_ms < 0 THEN
        RAISE EXCEPTION 'duration_ms % is negative; pass the call''s duration in milliseconds', capture.duration_ms
            USING ERRCODE = '22023';
    END IF;
    -- Tool and file events describe themselves when the caller gives no text.
    v_content := coalesce(v_content, CASE
        WHEN capture.event_type = 'tool_invocation' THEN
            format('%s %s', capture.tool_name, CASE capture.success WHEN true THEN 'succeeded' WHEN false THEN 'failed' ELSE 'called' END)
            || coalesce(': ' || left(capture.error, 500), '')
        WHEN capture.event_type IN ('file_read', 'file_write') AND capture.file_path IS NOT NULL THEN
            format('%s %s', replace(capture.event_type, '_', ' '), capture.file_path)
        END);
    PERFORM engram._check_memory(v_content, 'episodic', '{}', 'object', 2, v_importance, 'agent', NULL);
    PERFORM engram._check_vector(capture.embedding, 'embedding');
    IF capture.workspace IS NOT NULL THEN
        v_ws := (engram._workspace(v_owner, capture.workspace, true)).id;
    END IF;
    IF capture.parent_event_id IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM engram.events e WHERE e.memory_id = capture.parent_event_id AND e.owner = v_owner) THEN
        RAISE EXCEPTION 'parent_event_id % is not one of your events; pass the id a previous capture returned', capture.parent_event_id
            USING ERRCODE = 'P0002';
    END IF;
    IF v_reason IS NOT NULL THEN
        RETURN QUERY SELECT 'skipped'::text, NULL::uuid, v_reason, false;
        RETURN;
    END IF;

    -- Events are never duplicates of each other (the same call twice is two
    -- events): the dedup key is the new row's own id.
    INSERT INTO engram.memories AS m
        (id, owner, kind, content, content_sha256, dedup_key, embedding, author_type, importance,
         trust_score, session_id, occurred_at, valid_from)
    VALUES
        (v_id, v_owner, 'episodic', v_content, sha256(convert_to(v_content, 'UTF8'::name)), sha256(uuid_send(v_id)),
         capture.embedding, 'agent', v_importance, engram._trust_at(now(), engram._setting_trust_half_life_days(), 'agent', now(), 0), capture.session_id,
         -- an event of a past conversation keeps its own time
         coalesce(capture.occurred_at, now()), coalesce(capture.occurred_at, now()));
    INSERT INTO engram.events AS e
        (memory_id, owner, event_type, mode, session_id, workspace_id, tool_name, tool_input, tool_output,
         success, error, duration_ms, file_path, parent_event_id)
    VALUES
        (v_id, v_owner, capture.event_type, v_mode, capture.session_id, v_ws, capture.tool_name,
         capture.tool_input, capture.tool_output, capture.success, capture.error, capture.duration_ms,
         capture.file_path, capture.parent_event_id);
    PERFORM engram._audit(v_owner, 'capture', v_id, jsonb_build_object('event_type', capture.event_type, 'mode', v_mode));
    RETURN QUERY SELECT 'captured'::text, v_id, NULL::text,
        capture.event_type <> 'summary' AND engram._summary_due(v_owner, capture.session_id);
END
$fn$;

-- The oldest of the owner's normal memories stored without an embedding:
-- the work engram-mcp's background embedder does next. Ghost and agent
-- memories are not in it (an internal context never reads them through
-- this function); they are written with their embeddings.
-- Each with `previous`: for an episodic memory of a session, the turn
-- before it (engram._previous_turn), which engram-mcp's --turn-context
-- embeds with it. (The turns before are read one statement each: on Citus
-- a function that reads a distributed table cannot run inside a query of
-- another.)
CREATE FUNCTION engram.embedding_backlog(owner text DEFAULT NULL, lim integer DEFAULT 64)
RETURNS TABLE (id uuid, content text, previous text)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_owner text := engram._caller(embedding_backlog.owner, NULL, NULL, false);
    r record;
BEGIN
    FOR r IN
        SELECT m.id, m.content, m.kind, m.session_id, m.occurred_at, m.created_at FROM engram.memories m
        WHERE m.owner = v_owner AND m.embedding IS NULL AND m.status = 'active' AND m.internal_type IS NULL
          AND m.source <> 'resource'  -- people write resources' embeddings (resource_update)
        ORDER BY m.created_at, m.id
        LIMIT least(greatest(coalesce(embedding_backlog.lim, 64), 1), 1000)
    LOOP
        id := r.id;
        content := r.content;
        previous := CASE WHEN r.kind = 'episodic' AND r.session_id IS NOT NULL
                         THEN engram._previous_turn(v_owner, r.session_id, r.occurred_at, r.created_at, r.id) END;
        RETURN NEXT;
    END LOOP;
END
$fn$;

-- The content of the turn before a moment in one of the owner's
-- conversations: its active, unexpired, normal episodic memory of session
-- p_session that comes last before (p_at, p_created, p_id) in time order
-- (occurred_at, then created_at, then id: turns written at one moment
-- keep their order). NULL when there is none.
CREATE FUNCTION engram._previous_turn(p_owner text, p_session text, p_at timestamptz, p_created timestamptz,
                                      p_id uuid)
RETURNS text
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v text;
BEGIN
    SELECT m.content INTO v FROM engram.memories m
    WHERE m.owner = p_owner AND m.session_id = p_session AND m.kind = 'episodic' AND m.status = 'active'
      AND (m.expires_at IS NULL OR m.expires_at > now()) AND m.internal_type IS NULL
      AND m.occurred_at <= p_at
      AND (m.occurred_at, m.created_at, m.id) < (p_at, p_created, p_id)
    ORDER BY m.occurred_at DESC, m.created_at DESC, m.id DESC
    LIMIT 1;
    RETURN v;
END
$fn$;

-- The turn a new turn of conversation session_id follows: the content of
-- the caller's latest episodic memory of that session that happened at or
-- before `at` (default now); NULL when the session has none. engram-mcp
-- embeds a new turn with it (engram-core's conversation::contextual_text).
CREATE FUNCTION engram.previous_turn(owner text DEFAULT NULL, session_id text DEFAULT NULL, "at" timestamptz DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_owner text := engram._caller(previous_turn.owner, NULL, NULL, false);
BEGIN
    PERFORM engram._check_short('session_id', previous_turn.session_id, 256);
    PERFORM engram._check_moment('at', previous_turn."at");
    IF previous_turn.session_id IS NULL THEN
        RETURN NULL;
    END IF;
    -- (after every turn written up to that moment)
    RETURN engram._previous_turn(v_owner, previous_turn.session_id, coalesce(previous_turn."at", now()), 'infinity',
                                 'ffffffff-ffff-ffff-ffff-ffffffffffff');
END
$fn$;

-- Stores the embeddings of backlog rows (ids[i] gets embeddings[i]). Only
-- rows still in the backlog change (active, normal, without an embedding),
-- so a repeated or racing batch is harmless; returns how many rows were
-- set, audited as one 'embed' row with that count.
CREATE FUNCTION engram.set_embeddings(owner text DEFAULT NULL, ids uuid[] DEFAULT NULL, embeddings vector[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(set_embeddings.owner, NULL, NULL, true);
    v_vec   vector;
    v_count integer;
BEGIN
    PERFORM engram._lock_owner(v_owner);
    IF set_embeddings.ids IS NULL OR set_embeddings.embeddings IS NULL
       OR cardinality(set_embeddings.ids) <> cardinality(set_embeddings.embeddings) THEN
        RAISE EXCEPTION 'ids and embeddings are required and must have the same length'
            USING ERRCODE = '22023';
    END IF;
    FOREACH v_vec IN ARRAY set_embeddings.embeddings LOOP
        PERFORM engram._check_vector(v_vec, 'embeddings');
        IF v_vec IS NULL THEN
            RAISE EXCEPTION 'embeddings holds a NULL; pass one vector per id'
                USING ERRCODE = '22004';
        END IF;
    END LOOP;
    UPDATE engram.memories AS m SET embedding = x.e
    FROM unnest(set_embeddings.ids, set_embeddings.embeddings) AS x(i, e)
    WHERE m.id = x.i AND m.owner = v_owner AND m.embedding IS NULL AND m.status = 'active'
      AND m.internal_type IS NULL AND m.source <> 'resource';
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count > 0 THEN
        PERFORM engram._audit(v_owner, 'embed', NULL, jsonb_build_object('count', v_count));
    END IF;
    RETURN v_count;
END
$fn$;

CREATE TYPE engram.session_item AS (session_id text, workspace text, first_event_at timestamptz,
                                    last_event_at timestamptz, events bigint, has_summary boolean);

-- The owner's sessions (of one workspace, when given), latest first.
CREATE FUNCTION engram.sessions(owner text DEFAULT NULL, workspace text DEFAULT NULL, lim integer DEFAULT 20)
RETURNS SETOF engram.session_item
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_owner text := engram._caller(sessions.owner, NULL, NULL, false);
    v_ws    uuid;
BEGIN
    IF sessions.workspace IS NOT NULL THEN
        v_ws := (engram._workspace(v_owner, sessions.workspace, false)).id;
    END IF;
    RETURN QUERY
    SELECT x.session_id, x.workspace, x.first_event_at, x.last_event_at, x.events, x.summaries > 0
    FROM engram._sessions(v_owner, v_ws, least(greatest(coalesce(sessions.lim, 20), 1), 500)) x
    ORDER BY x.last_event_at DESC;
END
$fn$;

CREATE FUNCTION engram.summary_due(owner text DEFAULT NULL, session_id text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_owner text := engram._caller(summary_due.owner, NULL, NULL, false);
BEGIN
    PERFORM engram._check_name('session_id', summary_due.session_id, '2026-11-23-a');
    RETURN engram._summary_due(v_owner, summary_due.session_id);
END
$fn$;

CREATE TYPE engram.session_event AS (id uuid, event_type text, content text, tool_name text, success boolean,
                                     created_at timestamptz);

-- A session's latest events (since its last summary, by default), oldest
-- first: what a summarizer reads.
CREATE FUNCTION engram.session_events(owner text DEFAULT NULL, session_id text DEFAULT NULL,
                                      since_last_summary boolean DEFAULT true, lim integer DEFAULT 200)
RETURNS SETOF engram.session_event
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_owner text := engram._caller(session_events.owner, NULL, NULL, false);
    v_since timestamptz := '-infinity';
BEGIN
    PERFORM engram._check_name('session_id', session_events.session_id, '2026-11-23-a');
    IF coalesce(session_events.since_last_summary, true) THEN
        SELECT coalesce(max(e.created_at), '-infinity') INTO v_since FROM engram.events e
        WHERE e.owner = v_owner AND e.session_id = session_events.session_id AND e.event_type = 'summary';
    END IF;
    -- The latest `lim` events, oldest first.
    RETURN QUERY
    SELECT x.* FROM (
        SELECT e.memory_id, e.event_type, m.content, e.tool_name, e.success, e.created_at
        FROM engram.events e JOIN engram.memories m ON m.owner = e.owner AND m.id = e.memory_id
        WHERE e.owner = v_owner AND e.session_id = session_events.session_id AND e.created_at > v_since
          AND m.status = 'active'
        ORDER BY e.created_at DESC, e.memory_id DESC
        LIMIT least(greatest(coalesce(session_events.lim, 200), 1), 1000)
    ) x
    ORDER BY x.created_at, x.memory_id;
END
$fn$;

-- Stores a session summary: a summary event in the session's workspace.
CREATE FUNCTION engram.summarize(owner text DEFAULT NULL, session_id text DEFAULT NULL, content text DEFAULT NULL,
                                 embedding vector DEFAULT NULL, mode text DEFAULT 'dual')
RETURNS uuid
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(summarize.owner, NULL, NULL, true);
    v_ws    text;
    r       record;
BEGIN
    PERFORM engram._lock_owner(v_owner);
    PERFORM engram._check_name('session_id', summarize.session_id, '2026-11-23-a');
    IF summarize.content IS NULL OR btrim(summarize.content) = '' THEN
        RAISE EXCEPTION 'content is required: the summary of the session''s events since its last summary (engram.session_events)'
            USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM engram.events e WHERE e.owner = v_owner AND e.session_id = summarize.session_id) THEN
        RAISE EXCEPTION 'session % has no events to summarize; capture its events first (memory_capture), or check the id with memory_sessions', summarize.session_id
            USING ERRCODE = 'P0002';
    END IF;
    SELECT w.name INTO v_ws FROM engram.events e JOIN engram.workspaces w ON w.owner = e.owner AND w.id = e.workspace_id
    WHERE e.owner = v_owner AND e.session_id = summarize.session_id AND w.status = 'active'
    ORDER BY e.created_at DESC LIMIT 1;
    SELECT * INTO r FROM engram.capture(owner => v_owner, event_type => 'summary', content => summarize.content,
        session_id => summarize.session_id, mode => summarize.mode, workspace => v_ws,
        importance => 0.7::real, embedding => summarize.embedding);
    IF r.status = 'skipped' THEN
        RAISE EXCEPTION 'summary not stored: %', r.reason USING ERRCODE = '55000';
    END IF;
    RETURN r.id;
END
$fn$;
