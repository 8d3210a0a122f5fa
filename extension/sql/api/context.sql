---------------------------------------------------------------------------
-- the context package (docs/CONTINUITY.md)
---------------------------------------------------------------------------

-- What an agent needs to resume, in one call and within budget_chars: the
-- workspace's latest state, pinned slots, the latest summary, recent tool
-- events, and the top memories for the query (context_depth(mode, role) of
-- them). engram._render_context (engram-core's context) decides what fits,
-- cutting in that order from the end, and writes `text`.
-- The workspace is the one given, else the one of the session's latest
-- event; summaries and tool events come from that workspace, else from the
-- session, else from all of the owner's.
CREATE FUNCTION engram.context(
    owner text DEFAULT NULL,
    query_embedding vector DEFAULT NULL,
    query_text text DEFAULT NULL,
    session_id text DEFAULT NULL,
    workspace text DEFAULT NULL,
    mode text DEFAULT 'dual',
    role text DEFAULT 'owner',
    budget_chars integer DEFAULT 4000)
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner   text := engram._caller(context.owner, NULL, NULL, false);
    v_depth   integer;
    w         engram.workspaces;
    v_state   jsonb;
    v_summary jsonb;
    v_tools   jsonb;
    v_memories jsonb := '[]';
    v_shown   uuid[];
    v_text    text := nullif(btrim(context.query_text), '');
    v_result  jsonb;
    v_latest engram.states;
BEGIN
    PERFORM engram._check_budget(context.budget_chars);
    v_depth := engram.context_depth(coalesce(context.mode, 'dual'), coalesce(context.role, 'owner'));
    IF context.session_id IS NOT NULL THEN
        PERFORM engram._check_name('session_id', context.session_id, '2026-11-23-a');
    END IF;
    IF context.workspace IS NOT NULL THEN
        w := engram._workspace(v_owner, context.workspace, false);
    ELSIF context.session_id IS NOT NULL THEN
        SELECT x.* INTO w FROM engram.events e JOIN engram.workspaces x ON x.owner = e.owner AND x.id = e.workspace_id
        WHERE e.owner = v_owner AND e.session_id = context.session_id
        ORDER BY e.created_at DESC LIMIT 1;
    END IF;

    IF w.id IS NOT NULL THEN
        -- The row first, then its JSON (a whole-row value of a Citus shard
        -- has the shard's type, which engram's functions do not take).
        SELECT s.* INTO v_latest FROM engram.states s
        WHERE s.owner = w.owner AND s.workspace_id = w.id AND s.archived_at IS NULL
        ORDER BY s.created_at DESC LIMIT 1;
        IF v_latest.id IS NOT NULL THEN
            v_state := engram._state_json(v_latest, w.name);
        END IF;
    END IF;

    SELECT jsonb_build_object('id', m.id, 'session_id', e.session_id, 'content', m.content,
                              'age_s', round(extract(epoch FROM now() - e.created_at)))
    INTO v_summary
    FROM engram.events e JOIN engram.memories m ON m.owner = e.owner AND m.id = e.memory_id
    WHERE e.owner = v_owner AND e.event_type = 'summary' AND m.status = 'active'
      AND CASE WHEN w.id IS NOT NULL THEN e.owner = w.owner AND e.workspace_id = w.id
               WHEN context.session_id IS NOT NULL THEN e.session_id = context.session_id
               ELSE true END
    ORDER BY e.created_at DESC LIMIT 1;

    SELECT coalesce(jsonb_agg(t.j ORDER BY t.at DESC), '[]') INTO v_tools
    FROM (
        SELECT e.created_at AS at, jsonb_build_object('id', m.id, 'tool_name', e.tool_name, 'success', e.success,
                   'error', left(e.error, 300), 'duration_ms', e.duration_ms, 'session_id', e.session_id,
                   'output_summary', left(CASE jsonb_typeof(e.tool_output) WHEN 'string' THEN e.tool_output #>> '{}'
                                               ELSE e.tool_output::text END, 200),
                   'content', m.content, 'age_s', round(extract(epoch FROM now() - e.created_at))) AS j
        FROM engram.events e JOIN engram.memories m ON m.owner = e.owner AND m.id = e.memory_id
        WHERE e.owner = v_owner AND e.event_type = 'tool_invocation' AND m.status = 'active'
          AND CASE WHEN w.id IS NOT NULL THEN e.owner = w.owner AND e.workspace_id = w.id
                   WHEN context.session_id IS NOT NULL THEN e.session_id = context.session_id
                   ELSE true END
        ORDER BY e.created_at DESC LIMIT 5
    ) t;

    -- The top memories for the query, past what the other sections show
    -- (engram._search_hits, as engram._search runs it).
    IF context.query_embedding IS NOT NULL OR v_text IS NOT NULL THEN
        v_shown := array_remove(ARRAY(SELECT (x ->> 'id')::uuid FROM jsonb_array_elements(v_tools) x)
                                || (v_summary ->> 'id')::uuid, NULL);
        SELECT coalesce(jsonb_agg(jsonb_build_object('id', h.id, 'kind', h.kind, 'content', h.content,
                                                     'score', round(h.score::numeric, 4),
                                                     'age_s', round(extract(epoch FROM now() - h.created_at)))
                                  ORDER BY h.n), '[]')
        INTO v_memories
        FROM (SELECT x.* FROM engram._search_hits(
                  v_owner, '{active}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                  context.query_embedding, context.query_text, v_depth + cardinality(v_shown),
                  CASE WHEN context.query_embedding IS NOT NULL AND v_text IS NOT NULL
                       THEN engram._setting_similarity_floor() ELSE 0 END,
                  CASE WHEN v_text IS NOT NULL THEN engram.time_window(context.query_text) END,
                  true, NULL, NULL, false, NULL, false, false)
                  WITH ORDINALITY AS x(id, content, kind, tags, metadata, similarity, score, trust_score,
                                       staleness_score, created_at, source, occurred_at, valid_from, valid_to,
                                       namespace, key, value, session, n)
              WHERE x.id <> ALL (coalesce(v_shown, '{}')) ORDER BY x.n LIMIT v_depth) h;
    END IF;

    v_result := engram._render_context(jsonb_build_object(
        'state', v_state,
        'slots', engram._pinned_slots(v_owner, w.name),
        'summary', v_summary,
        'tool_events', v_tools,
        'memories', v_memories),
        context.budget_chars);
    PERFORM engram._touch(v_owner, ARRAY(SELECT (x ->> 'id')::uuid FROM jsonb_array_elements(v_result -> 'memories') x));
    RETURN v_result || jsonb_build_object('workspace', w.name, 'depth', v_depth);
END
$fn$;
