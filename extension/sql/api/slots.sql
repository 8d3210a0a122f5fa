---------------------------------------------------------------------------
-- slots: named, size-limited text blocks (docs/CONTINUITY.md)
---------------------------------------------------------------------------

-- A required name (a slot label, a workspace or state name, a session
-- id): 1 to 200 bytes, not blank; the message shows an example value.
CREATE FUNCTION engram._check_name(p_what text, p_name text, p_example text DEFAULT 'my-project') RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_name IS NULL OR btrim(p_name) = '' OR octet_length(p_name) > 200 THEN
        RAISE EXCEPTION '% is required (1 to 200 bytes), e.g. % => ''%''', p_what, p_what, p_example
            USING ERRCODE = '22023';
    END IF;
END
$fn$;

CREATE FUNCTION engram._check_slot(p_label text, p_workspace text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    PERFORM engram._check_name('label', p_label, 'persona');
    IF p_workspace IS NOT NULL AND (btrim(p_workspace) = '' OR octet_length(p_workspace) > 200) THEN
        RAISE EXCEPTION 'workspace must be 1 to 200 bytes, or NULL for a global slot'
            USING ERRCODE = '22023';
    END IF;
END
$fn$;

-- The slots visible in a workspace: its own, and the global ones
-- (workspace '') it does not shadow; NULL: the global ones (slot_get,
-- slot_list). The pinned ones of the context package and workspace_load
-- are read by the same rule in Rust (context.rs, pinned_slots).
CREATE FUNCTION engram._visible_slots(p_owner text, p_workspace text) RETURNS SETOF engram.slots
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN QUERY
    SELECT DISTINCT ON (s.label) s.*
    FROM engram.slots s
    WHERE s.owner = p_owner AND s.workspace IN (coalesce(p_workspace, ''), '')
    ORDER BY s.label, s.workspace DESC;   -- the workspace's ('' sorts first) shadows the global one
END
$fn$;

-- A slot's content must fit its limit; the message says by how much.
CREATE FUNCTION engram._check_slot_size(p_label text, p_content text, p_limit integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF char_length(p_content) > p_limit THEN
        RAISE EXCEPTION 'slot % would hold % characters; its limit is % (shorten the content, or raise size_limit with engram.slot_set)', p_label, char_length(p_content), p_limit
            USING ERRCODE = '54000';
    END IF;
END
$fn$;

CREATE TYPE engram.slot AS (label text, workspace text, content text, chars integer, size_limit integer,
                            pinned boolean, updated_at timestamptz);

-- Sets a slot's content (and its limit and pin); creates it if missing.
CREATE FUNCTION engram.slot_set(
    owner text DEFAULT NULL, label text DEFAULT NULL, content text DEFAULT NULL, workspace text DEFAULT NULL,
    size_limit integer DEFAULT 2000, pinned boolean DEFAULT false)
RETURNS engram.slot
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(slot_set.owner, NULL, NULL, true);
    r       engram.slots;
BEGIN
    PERFORM engram._lock_owner(v_owner);
    PERFORM engram._check_slot(slot_set.label, slot_set.workspace);
    IF slot_set.size_limit IS NULL OR slot_set.size_limit NOT BETWEEN 1 AND 262144 THEN
        RAISE EXCEPTION 'size_limit % is out of range; pass 1 to 262144 characters', coalesce(slot_set.size_limit::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    PERFORM engram._check_slot_size(slot_set.label, coalesce(slot_set.content, ''), slot_set.size_limit);
    INSERT INTO engram.slots AS s (owner, workspace, label, content, size_limit, pinned, updated_at)
    VALUES (v_owner, coalesce(slot_set.workspace, ''), slot_set.label, coalesce(slot_set.content, ''),
            slot_set.size_limit, coalesce(slot_set.pinned, false), now())
    ON CONFLICT ON CONSTRAINT slots_pkey DO UPDATE
        SET content = excluded.content, size_limit = excluded.size_limit, pinned = excluded.pinned,
            updated_at = excluded.updated_at
    RETURNING s.* INTO r;
    PERFORM engram._audit(v_owner, 'slot_set', NULL, jsonb_build_object('label', r.label, 'workspace', nullif(r.workspace, '')));
    RETURN ROW(r.label, nullif(r.workspace, ''), r.content, char_length(r.content), r.size_limit, r.pinned, r.updated_at);
END
$fn$;

-- Appends a line to a slot (created with the default limit if missing);
-- refused, changing nothing, when the result would pass the limit.
CREATE FUNCTION engram.slot_append(owner text DEFAULT NULL, label text DEFAULT NULL, content text DEFAULT NULL, workspace text DEFAULT NULL)
RETURNS engram.slot
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(slot_append.owner, NULL, NULL, true);
    r       engram.slots;
    v_new   text;
BEGIN
    PERFORM engram._lock_owner(v_owner);
    PERFORM engram._check_slot(slot_append.label, slot_append.workspace);
    IF slot_append.content IS NULL OR slot_append.content = '' THEN
        RAISE EXCEPTION 'content is required; pass the text to append'
            USING ERRCODE = '22004';
    END IF;
    INSERT INTO engram.slots AS s (owner, workspace, label) VALUES (v_owner, coalesce(slot_append.workspace, ''), slot_append.label)
    ON CONFLICT DO NOTHING;
    SELECT s.* INTO r FROM engram.slots s
    WHERE s.owner = v_owner AND s.workspace = coalesce(slot_append.workspace, '') AND s.label = slot_append.label
    FOR UPDATE;
    v_new := CASE WHEN r.content = '' THEN slot_append.content ELSE r.content || E'\n' || slot_append.content END;
    PERFORM engram._check_slot_size(r.label, v_new, r.size_limit);
    UPDATE engram.slots AS s SET content = v_new, updated_at = now()
    WHERE s.owner = r.owner AND s.workspace = r.workspace AND s.label = r.label
    RETURNING s.* INTO r;
    PERFORM engram._audit(v_owner, 'slot_append', NULL, jsonb_build_object('label', r.label, 'workspace', nullif(r.workspace, '')));
    RETURN ROW(r.label, nullif(r.workspace, ''), r.content, char_length(r.content), r.size_limit, r.pinned, r.updated_at);
END
$fn$;

-- A slot's content: the workspace's slot, else the global one of that label.
CREATE FUNCTION engram.slot_get(owner text DEFAULT NULL, label text DEFAULT NULL, workspace text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_owner   text := engram._caller(slot_get.owner, NULL, NULL, false);
    v_content text;
BEGIN
    PERFORM engram._check_slot(slot_get.label, slot_get.workspace);
    SELECT v.content INTO v_content FROM engram._visible_slots(v_owner, slot_get.workspace) v
    WHERE v.label = slot_get.label;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'slot % not found; use engram.slot_list to see your slots, or engram.slot_set to create it', engram._echo(slot_get.label)
            USING ERRCODE = 'P0002';
    END IF;
    RETURN v_content;
END
$fn$;

-- The slots visible in a workspace (its own, and the global ones it does
-- not shadow), or the global ones; by label.
CREATE FUNCTION engram.slot_list(owner text DEFAULT NULL, workspace text DEFAULT NULL)
RETURNS SETOF engram.slot
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_owner text := engram._caller(slot_list.owner, NULL, NULL, false);
BEGIN
    IF slot_list.workspace IS NOT NULL THEN
        PERFORM engram._check_slot('x', slot_list.workspace);
    END IF;
    RETURN QUERY
    SELECT v.label, nullif(v.workspace, ''), v.content, char_length(v.content), v.size_limit, v.pinned, v.updated_at
    FROM engram._visible_slots(v_owner, slot_list.workspace) v
    ORDER BY v.label;
END
$fn$;

CREATE FUNCTION engram.slot_delete(owner text DEFAULT NULL, label text DEFAULT NULL, workspace text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(slot_delete.owner, NULL, NULL, true);
BEGIN
    PERFORM engram._lock_owner(v_owner);
    PERFORM engram._check_slot(slot_delete.label, slot_delete.workspace);
    DELETE FROM engram.slots s
    WHERE s.owner = v_owner AND s.workspace = coalesce(slot_delete.workspace, '') AND s.label = slot_delete.label;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM engram._audit(v_owner, 'slot_delete', NULL, jsonb_build_object('label', slot_delete.label, 'workspace', slot_delete.workspace));
    RETURN true;
END
$fn$;
