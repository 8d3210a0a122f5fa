---------------------------------------------------------------------------
-- continuity: workspaces and states (docs/CONTINUITY.md)
---------------------------------------------------------------------------

-- One of the owner's workspaces by name; for a write it must be active.
-- The error names the tool (and the SQL function) to use instead.
CREATE FUNCTION engram._workspace(p_owner text, p_name text, p_write boolean, p_argument text DEFAULT 'workspace')
RETURNS engram.workspaces
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    w engram.workspaces;
BEGIN
    PERFORM engram._check_name(p_argument, p_name);
    SELECT * INTO w FROM engram.workspaces x WHERE x.owner = p_owner AND x.name = p_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'Workspace "%" not found. Use memory_workspace_list (SQL: engram.workspace_list) to see your workspaces, or memory_workspace_create to start one', engram._echo(p_name)
            USING ERRCODE = 'P0002';
    END IF;
    IF p_write AND w.status = 'archived' THEN
        RAISE EXCEPTION 'Workspace "%" is archived. Restore it with memory_workspace_archive (SQL: engram.workspace_archive) and restore => true first', engram._echo(p_name)
            USING ERRCODE = '55000';
    END IF;
    RETURN w;
END
$fn$;

CREATE FUNCTION engram._workspace_json(w engram.workspaces) RETURNS jsonb
LANGUAGE sql STABLE AS $fn$
    SELECT jsonb_build_object('name', w.name, 'description', w.description, 'root_folder', w.root_folder,
        'purpose', w.purpose, 'workflows', to_jsonb(w.workflows), 'key_files', to_jsonb(w.key_files),
        'preferences', w.preferences, 'status', w.status, 'created_at', w.created_at,
        'updated_at', w.updated_at, 'archived_at', w.archived_at)
$fn$;

-- A text list (workflows, key files, active files, next steps, tags): at
-- most 1000 entries, no NULLs, and p_limit bytes with a separator counted
-- per entry.
CREATE FUNCTION engram._check_list(p_what text, p_list text[], p_limit integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_list IS NULL THEN
        RETURN;
    END IF;
    PERFORM engram._check_1d(p_what, p_list);
    IF cardinality(p_list) > 1000 THEN
        RAISE EXCEPTION '% has % entries; the limit is 1000', p_what, cardinality(p_list)
            USING ERRCODE = '54000';
    END IF;
    IF array_position(p_list, NULL) IS NOT NULL THEN
        RAISE EXCEPTION '% holds a NULL; pass text entries only', p_what
            USING ERRCODE = '22004';
    END IF;
    PERFORM engram._check_text(p_what, array_to_string(p_list, ' ') || ' ', p_limit);
END
$fn$;

-- Size limits of the free-text fields of workspaces and states.
CREATE FUNCTION engram._check_text(p_what text, p_value text, p_limit integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_value IS NOT NULL AND octet_length(p_value) > p_limit THEN
        RAISE EXCEPTION '% is % bytes; the limit is % (shorten it, or keep the details in a memory)', p_what, octet_length(p_value), p_limit
            USING ERRCODE = '54000';
    END IF;
END
$fn$;

CREATE FUNCTION engram._check_workspace_fields(
    p_description text, p_root_folder text, p_purpose text, p_workflows text[], p_key_files text[], p_preferences jsonb)
RETURNS void LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    PERFORM engram._check_text('description', p_description, 8192);
    PERFORM engram._check_text('root_folder', p_root_folder, 4096);
    PERFORM engram._check_text('purpose', p_purpose, 8192);
    PERFORM engram._check_list('workflows', p_workflows, 32768);
    PERFORM engram._check_list('key_files', p_key_files, 32768);
    IF p_preferences IS NOT NULL AND jsonb_typeof(p_preferences) <> 'object' THEN
        RAISE EXCEPTION 'preferences must be a JSON object, e.g. ''{"style": "terse"}'''
            USING ERRCODE = '22023';
    END IF;
    PERFORM engram._check_text('preferences', p_preferences::text, 32768);
    PERFORM engram._check_doc('preferences', p_preferences);
END
$fn$;

CREATE FUNCTION engram.workspace_create(
    owner text DEFAULT NULL, name text DEFAULT NULL, description text DEFAULT '', root_folder text DEFAULT NULL,
    purpose text DEFAULT NULL, workflows text[] DEFAULT '{}', key_files text[] DEFAULT '{}',
    preferences jsonb DEFAULT '{}')
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(workspace_create.owner, NULL, NULL, true);
    w       engram.workspaces;
BEGIN
    PERFORM engram._lock_owner(v_owner);
    PERFORM engram._check_name('name', workspace_create.name);
    PERFORM engram._check_workspace_fields(workspace_create.description, workspace_create.root_folder,
        workspace_create.purpose, workspace_create.workflows, workspace_create.key_files, workspace_create.preferences);
    INSERT INTO engram.workspaces AS x (owner, name, description, root_folder, purpose, workflows, key_files, preferences)
    VALUES (v_owner, workspace_create.name, coalesce(workspace_create.description, ''), workspace_create.root_folder,
            workspace_create.purpose, coalesce(workspace_create.workflows, '{}'),
            coalesce(workspace_create.key_files, '{}'), coalesce(workspace_create.preferences, '{}'))
    ON CONFLICT ON CONSTRAINT workspaces_owner_name_key DO NOTHING
    RETURNING x.* INTO w;
    IF w.id IS NULL THEN
        RAISE EXCEPTION 'Workspace "%" already exists. Use memory_workspace_load to open it, memory_workspace_update to change it, or memory_workspace_archive with restore => true if it is archived', workspace_create.name
            USING ERRCODE = '23505';
    END IF;
    PERFORM engram._audit(v_owner, 'workspace_create', NULL, jsonb_build_object('workspace', w.name));
    RETURN engram._workspace_json(w);
END
$fn$;

CREATE TYPE engram.workspace_item AS (name text, description text, status text, states bigint,
                                      last_state_at timestamptz, updated_at timestamptz);

-- Lean: names, first lines of descriptions, counts.
CREATE FUNCTION engram.workspace_list(owner text DEFAULT NULL, include_archived boolean DEFAULT false)
RETURNS SETOF engram.workspace_item
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_owner text := engram._caller(workspace_list.owner, NULL, NULL, false);
BEGIN
    RETURN QUERY
    SELECT w.name, left(split_part(w.description, E'\n', 1), 120), w.status,
           (SELECT count(*) FROM engram.states s WHERE s.owner = w.owner AND s.workspace_id = w.id AND s.archived_at IS NULL),
           (SELECT max(s.created_at) FROM engram.states s WHERE s.owner = w.owner AND s.workspace_id = w.id),
           w.updated_at
    FROM engram.workspaces w
    WHERE w.owner = v_owner AND (w.status = 'active' OR coalesce(workspace_list.include_archived, false))
    ORDER BY w.updated_at DESC, w.name;
END
$fn$;

-- The lean sessions of an owner (of one workspace, when given), latest first.
CREATE FUNCTION engram._sessions(p_owner text, p_workspace uuid, p_limit integer)
RETURNS TABLE (session_id text, workspace text, first_event_at timestamptz, last_event_at timestamptz,
               events bigint, summaries bigint, last_summary_at timestamptz)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN QUERY
    SELECT e.session_id, max(w.name), min(e.created_at), max(e.created_at), count(*),
           count(*) FILTER (WHERE e.event_type = 'summary'),
           max(e.created_at) FILTER (WHERE e.event_type = 'summary')
    FROM engram.events e
    LEFT JOIN engram.workspaces w ON w.owner = e.owner AND w.id = e.workspace_id
    WHERE e.owner = p_owner AND (p_workspace IS NULL OR e.workspace_id = p_workspace)
    GROUP BY e.session_id
    ORDER BY max(e.created_at) DESC
    LIMIT p_limit;
END
$fn$;

-- The workspace with its latest states, recent sessions and pinned slots,
-- in one call: what an agent reads when it comes back.
CREATE FUNCTION engram.workspace_load(owner text DEFAULT NULL, name text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_owner text := engram._caller(workspace_load.owner, NULL, NULL, false);
    w       engram.workspaces := engram._workspace(v_owner, workspace_load.name, false, 'name');
    v_states   jsonb;
    v_sessions jsonb;
BEGIN
    -- One statement per table (on Citus a statement over a table runs on
    -- the owner's shard, where another function's reads cannot nest).
    SELECT coalesce(jsonb_agg(jsonb_build_object('name', s.name, 'description', s.description,
               'active_task', s.active_task, 'next_steps', to_jsonb(s.next_steps), 'created_at', s.created_at)
               ORDER BY s.created_at DESC), '[]')
    INTO v_states
    FROM (SELECT * FROM engram.states x WHERE x.owner = w.owner AND x.workspace_id = w.id AND x.archived_at IS NULL
          ORDER BY x.created_at DESC LIMIT 5) s;
    SELECT coalesce(jsonb_agg(to_jsonb(x) ORDER BY x.last_event_at DESC), '[]') INTO v_sessions
    FROM engram._sessions(v_owner, w.id, 5) x;
    RETURN jsonb_build_object(
        'workspace', engram._workspace_json(w),
        'states', v_states,
        'sessions', v_sessions,
        'slots', engram._pinned_slots(v_owner, w.name));
END
$fn$;

-- Changes the fields given (NULL keeps a field); new_name renames.
CREATE FUNCTION engram.workspace_update(
    owner text DEFAULT NULL, name text DEFAULT NULL, description text DEFAULT NULL, root_folder text DEFAULT NULL,
    purpose text DEFAULT NULL, workflows text[] DEFAULT NULL, key_files text[] DEFAULT NULL,
    preferences jsonb DEFAULT NULL, new_name text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(workspace_update.owner, NULL, NULL, true);
    w       engram.workspaces := engram._workspace(v_owner, workspace_update.name, true, 'name');
BEGIN
    PERFORM engram._lock_owner(v_owner);
    IF workspace_update.new_name IS NOT NULL THEN
        PERFORM engram._check_name('new_name', workspace_update.new_name);
        IF workspace_update.new_name <> w.name AND EXISTS (
            SELECT 1 FROM engram.workspaces x WHERE x.owner = v_owner AND x.name = workspace_update.new_name) THEN
            RAISE EXCEPTION 'Workspace "%" already exists; pick another new_name', workspace_update.new_name
                USING ERRCODE = '23505';
        END IF;
        -- Slots name their workspace and move with a rename: slots already
        -- filed under the new name would be adopted or collide.
        IF workspace_update.new_name <> w.name AND EXISTS (
            SELECT 1 FROM engram.slots sl WHERE sl.owner = v_owner AND sl.workspace = workspace_update.new_name) THEN
            RAISE EXCEPTION 'slots are filed under workspace name "%"; delete them (memory_slot_list, memory_slot_delete with workspace => ''%'') or pick another new_name', workspace_update.new_name, workspace_update.new_name
                USING ERRCODE = '23505';
        END IF;
    END IF;
    PERFORM engram._check_workspace_fields(workspace_update.description, workspace_update.root_folder,
        workspace_update.purpose, workspace_update.workflows, workspace_update.key_files, workspace_update.preferences);
    UPDATE engram.workspaces AS x SET
        name = coalesce(workspace_update.new_name, x.name),
        description = coalesce(workspace_update.description, x.description),
        root_folder = coalesce(workspace_update.root_folder, x.root_folder),
        purpose = coalesce(workspace_update.purpose, x.purpose),
        workflows = coalesce(workspace_update.workflows, x.workflows),
        key_files = coalesce(workspace_update.key_files, x.key_files),
        preferences = coalesce(workspace_update.preferences, x.preferences),
        updated_at = now()
    WHERE x.owner = w.owner AND x.id = w.id
    RETURNING x.* INTO w;
    -- Slots name their workspace: a rename takes them along.
    IF workspace_update.new_name IS NOT NULL AND workspace_update.new_name <> workspace_update.name THEN
        UPDATE engram.slots AS sl SET workspace = w.name
        WHERE sl.owner = v_owner AND sl.workspace = workspace_update.name;
    END IF;
    PERFORM engram._audit(v_owner, 'workspace_update', NULL, jsonb_build_object('workspace', w.name));
    RETURN engram._workspace_json(w);
END
$fn$;

-- Archives a workspace (it leaves workspace_list; its states, events and
-- slots stay), or restores it. Nothing is deleted.
CREATE FUNCTION engram.workspace_archive(owner text DEFAULT NULL, name text DEFAULT NULL, restore boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(workspace_archive.owner, NULL, NULL, true);
    w       engram.workspaces := engram._workspace(v_owner, workspace_archive.name, false, 'name');
    v_to    text := CASE WHEN coalesce(workspace_archive.restore, false) THEN 'active' ELSE 'archived' END;
    v_now   timestamptz := now();  -- (a value: Citus takes no function in an UPDATE's CASE)
BEGIN
    PERFORM engram._lock_owner(v_owner);
    IF w.status <> v_to THEN
        UPDATE engram.workspaces AS x
        SET status = v_to, archived_at = CASE WHEN v_to = 'archived' THEN v_now END, updated_at = now()
        WHERE x.owner = w.owner AND x.id = w.id
        RETURNING x.* INTO w;
        PERFORM engram._audit(v_owner, CASE WHEN v_to = 'archived' THEN 'workspace_archive' ELSE 'workspace_restore' END,
            NULL, jsonb_build_object('workspace', w.name));
    END IF;
    RETURN jsonb_build_object('name', w.name, 'status', w.status, 'archived_at', w.archived_at);
END
$fn$;

-- States are immutable: only archived_at may change (state_archive), for
-- every role, the table's owner included; raw SQL as the restricted role
-- has no UPDATE privilege at all.
CREATE FUNCTION engram._state_immutable() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF (NEW.id, NEW.owner, NEW.workspace_id, NEW.name, NEW.description, NEW.conversation_context, NEW.active_task,
        NEW.active_files, NEW.next_steps, NEW.tags, NEW.created_at)
       IS DISTINCT FROM
       (OLD.id, OLD.owner, OLD.workspace_id, OLD.name, OLD.description, OLD.conversation_context, OLD.active_task,
        OLD.active_files, OLD.next_steps, OLD.tags, OLD.created_at) THEN
        RAISE EXCEPTION 'state "%" is immutable: a save point never changes. Save a new state with memory_state_save (SQL: engram.state_save) under a new name', OLD.name
            USING ERRCODE = '55000';
    END IF;
    RETURN NEW;
END
$fn$;
CREATE TRIGGER states_immutable BEFORE UPDATE ON engram.states
    FOR EACH ROW EXECUTE FUNCTION engram._state_immutable();

CREATE FUNCTION engram.state_save(
    owner text DEFAULT NULL, workspace text DEFAULT NULL, name text DEFAULT NULL, description text DEFAULT '',
    conversation_context text DEFAULT '', active_task text DEFAULT '', active_files text[] DEFAULT '{}',
    next_steps text[] DEFAULT '{}', tags text[] DEFAULT '{}')
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(state_save.owner, NULL, NULL, true);
    w       engram.workspaces := engram._workspace(v_owner, state_save.workspace, true);
    s       engram.states;
BEGIN
    PERFORM engram._lock_owner(v_owner);
    PERFORM engram._check_name('name', state_save.name);
    PERFORM engram._check_text('description', state_save.description, 8192);
    PERFORM engram._check_text('conversation_context', state_save.conversation_context, 65536);
    PERFORM engram._check_text('active_task', state_save.active_task, 8192);
    PERFORM engram._check_list('active_files', state_save.active_files, 32768);
    PERFORM engram._check_list('next_steps', state_save.next_steps, 32768);
    PERFORM engram._check_list('tags', state_save.tags, 8192);
    INSERT INTO engram.states AS x (owner, workspace_id, name, description, conversation_context, active_task,
                                    active_files, next_steps, tags)
    VALUES (v_owner, w.id, state_save.name, coalesce(state_save.description, ''),
            coalesce(state_save.conversation_context, ''), coalesce(state_save.active_task, ''),
            coalesce(state_save.active_files, '{}'), coalesce(state_save.next_steps, '{}'),
            coalesce(state_save.tags, '{}'))
    ON CONFLICT ON CONSTRAINT states_workspace_id_name_key DO NOTHING
    RETURNING x.* INTO s;
    IF s.id IS NULL THEN
        RAISE EXCEPTION 'State "%" already exists in workspace "%". States are immutable and their names are never reused (archived ones included); save under a new name, e.g. "%-2"', state_save.name, w.name, state_save.name
            USING ERRCODE = '23505';
    END IF;
    PERFORM engram._audit(v_owner, 'state_save', NULL,
        jsonb_build_object('workspace', w.name, 'state', s.name, 'state_id', s.id));
    RETURN jsonb_build_object('id', s.id, 'workspace', w.name, 'name', s.name, 'created_at', s.created_at);
END
$fn$;

-- (next_steps: the list, as state_load returns it; a count before 0.17.0)
CREATE TYPE engram.state_item AS (name text, description text, active_task text, next_steps text[], tags text[],
                                  created_at timestamptz, archived boolean);

CREATE FUNCTION engram.state_list(owner text DEFAULT NULL, workspace text DEFAULT NULL, include_archived boolean DEFAULT false)
RETURNS SETOF engram.state_item
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_owner text := engram._caller(state_list.owner, NULL, NULL, false);
    w       engram.workspaces := engram._workspace(v_owner, state_list.workspace, false);
BEGIN
    RETURN QUERY
    SELECT s.name, left(split_part(s.description, E'\n', 1), 120), left(s.active_task, 120),
           s.next_steps, s.tags, s.created_at, s.archived_at IS NOT NULL
    FROM engram.states s
    WHERE s.owner = w.owner AND s.workspace_id = w.id AND (s.archived_at IS NULL OR coalesce(state_list.include_archived, false))
    ORDER BY s.created_at DESC;
END
$fn$;

-- A state in full; without a name, the workspace's latest.
CREATE FUNCTION engram.state_load(owner text DEFAULT NULL, workspace text DEFAULT NULL, name text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_owner text := engram._caller(state_load.owner, NULL, NULL, false);
    w       engram.workspaces := engram._workspace(v_owner, state_load.workspace, false);
    v_state jsonb;
BEGIN
    IF state_load.name IS NOT NULL THEN
        PERFORM engram._check_name('name', state_load.name);
    END IF;
    v_state := engram._state_of(w.owner, w.id, w.name, state_load.name);
    IF v_state IS NULL THEN
        RAISE EXCEPTION 'State "%" not found in workspace "%". Use memory_state_list (SQL: engram.state_list) to see its states', engram._echo(coalesce(state_load.name, '(latest)')), w.name
            USING ERRCODE = 'P0002';
    END IF;
    RETURN v_state;
END
$fn$;

CREATE FUNCTION engram.state_archive(owner text DEFAULT NULL, workspace text DEFAULT NULL, name text DEFAULT NULL,
                                     restore boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(state_archive.owner, NULL, NULL, true);
    w       engram.workspaces := engram._workspace(v_owner, state_archive.workspace, false);
    s       engram.states;
    v_now   timestamptz := now();  -- (a value: Citus takes no function in an UPDATE's CASE)
BEGIN
    PERFORM engram._lock_owner(v_owner);
    PERFORM engram._check_name('name', state_archive.name);
    UPDATE engram.states AS x
    SET archived_at = CASE WHEN coalesce(state_archive.restore, false) THEN NULL ELSE coalesce(x.archived_at, v_now) END
    WHERE x.owner = w.owner AND x.workspace_id = w.id AND x.name = state_archive.name
    RETURNING x.* INTO s;
    IF s.id IS NULL THEN
        RAISE EXCEPTION 'State "%" not found in workspace "%". Use memory_state_list (SQL: engram.state_list) with include_archived => true to see its states', engram._echo(state_archive.name), w.name
            USING ERRCODE = 'P0002';
    END IF;
    PERFORM engram._audit(v_owner, CASE WHEN s.archived_at IS NULL THEN 'state_restore' ELSE 'state_archive' END, NULL,
        jsonb_build_object('workspace', w.name, 'state', s.name));
    RETURN jsonb_build_object('workspace', w.name, 'name', s.name, 'archived', s.archived_at IS NOT NULL);
END
$fn$;
