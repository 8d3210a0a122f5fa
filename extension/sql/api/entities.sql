---------------------------------------------------------------------------
-- entities: the named things memories are about
---------------------------------------------------------------------------

-- Keeps engram.memory_entities equal to what the memories name (engram-core's
-- rules over the content, and entity:NAME tags): a new memory's entities
-- are indexed, a changed content, tag set or id re-indexes them, a deleted
-- memory's go with it. Every write path goes through these triggers: the
-- API, a DBA's INSERT, a restore, an import.
CREATE FUNCTION engram._entities_indexed() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    v_first text;
    v_gone  text[];
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        -- (the first names of the full names it named: their merges are
        -- settled anew once its rows are gone)
        v_gone := ARRAY(SELECT DISTINCT split_part(e.key, ' ', 1) FROM engram.memory_entities e
                        WHERE e.owner = OLD.owner AND e.memory_id = OLD.id AND e.kind = 'person'
                          AND e.key LIKE '% %' AND e.alias IS NULL);
        DELETE FROM engram.memory_entities e WHERE e.owner = OLD.owner AND e.memory_id = OLD.id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO engram.memory_entities (owner, memory_id, key, name, kind, pinned)
        SELECT NEW.owner, NEW.id, x.key, x.name, x.kind, x.pinned FROM engram._memory_entities(NEW.content, NEW.tags) x;
        -- the people it names: their first names' merges, settled anew
        FOR v_first IN
            SELECT DISTINCT split_part(e.key, ' ', 1) FROM engram.memory_entities e
            WHERE e.owner = NEW.owner AND e.memory_id = NEW.id AND e.kind IN ('person', 'thing') AND NOT e.pinned
        LOOP
            PERFORM engram._merge_first_name(NEW.owner, v_first);
        END LOOP;
    END IF;
    FOREACH v_first IN ARRAY coalesce(v_gone, '{}') LOOP
        PERFORM engram._merge_first_name(OLD.owner, v_first);
    END LOOP;
    RETURN NULL;
END
$fn$;

-- Alias merging: a person's first name written alone ("Marta") is the
-- owner's one full name that starts with it ("Marta Keller"), when there
-- is exactly one; the rows of the first name (kind person or thing, not
-- named by an entity: tag, of memories that do not name the full name
-- too) are indexed under the full name, keeping the key as written in
-- `alias`. When a second full name with that first word appears ("Marta
-- Ruiz"), or the full name is gone, the merge is undone. Every merge and
-- undo leaves an audit row (entity_merge: alias, into, memories;
-- entity_unmerge: alias, memories, why). A memory that must keep the first name apart carries
-- the tag entity:person:NAME (pinned). Cost: two index probes for the
-- full names, and updates of the first name's rows only.
CREATE FUNCTION engram._merge_first_name(p_owner text, p_first text) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_full  text;
    v_other text;
    v_moved bigint;
BEGIN
    IF p_first IS NULL OR p_first = '' OR p_first LIKE '% %' THEN
        RETURN;
    END IF;
    -- the first two full names with that first word (index probes)
    SELECT min(e.key) INTO v_full FROM engram.memory_entities e
    WHERE e.owner = p_owner AND split_part(e.key, ' ', 1) = p_first AND e.key > p_first || ' '
      AND e.kind = 'person' AND e.alias IS NULL;
    IF v_full IS NOT NULL THEN
        SELECT min(e.key) INTO v_other FROM engram.memory_entities e
        WHERE e.owner = p_owner AND split_part(e.key, ' ', 1) = p_first AND e.key > v_full
          AND e.kind = 'person' AND e.alias IS NULL;
    END IF;
    -- undo merges into a full name that is no longer the only one (or gone)
    FOR v_moved IN
        WITH undone AS (
            UPDATE engram.memory_entities e SET key = e.alias, alias = NULL
            WHERE e.owner = p_owner AND e.alias = p_first
              AND (v_full IS NULL OR v_other IS NOT NULL OR e.key <> v_full)
            RETURNING e.key AS restored
        )
        SELECT count(*) FROM undone HAVING count(*) > 0
    LOOP
        PERFORM engram._audit(p_owner, 'entity_unmerge', NULL,
                              jsonb_build_object('alias', p_first, 'memories', v_moved,
                                                 'why', CASE WHEN v_other IS NOT NULL THEN 'ambiguous' ELSE 'gone' END));
    END LOOP;
    IF v_full IS NULL OR v_other IS NOT NULL THEN
        RETURN;
    END IF;
    UPDATE engram.memory_entities e SET key = v_full, alias = p_first
    WHERE e.owner = p_owner AND e.key = p_first AND e.kind IN ('person', 'thing') AND NOT e.pinned
      AND NOT EXISTS (SELECT 1 FROM engram.memory_entities f
                      WHERE f.owner = e.owner AND f.memory_id = e.memory_id AND f.key = v_full);
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    IF v_moved > 0 THEN
        PERFORM engram._audit(p_owner, 'entity_merge', NULL,
                              jsonb_build_object('alias', p_first, 'into', v_full, 'memories', v_moved));
    END IF;
END
$fn$;

-- The key a name is looked up by: its own while a memory names it by an
-- entity: tag (kept apart), else the full name its first name was merged
-- into, else its own.
CREATE FUNCTION engram._entity_resolve(p_owner text, p_key text) RETURNS text
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v text;
BEGIN
    IF EXISTS (SELECT 1 FROM engram.memory_entities e WHERE e.owner = p_owner AND e.key = p_key AND e.pinned) THEN
        RETURN p_key;
    END IF;
    SELECT e.key INTO v FROM engram.memory_entities e WHERE e.owner = p_owner AND e.alias = p_key LIMIT 1;
    RETURN coalesce(v, p_key);
END
$fn$;

-- Every memory's entities by the current rules, then each owner's first
-- names merged (the update to 0.19.0 and a restore run it).
CREATE FUNCTION engram._reindex_entities() RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    r record;
BEGIN
    DELETE FROM engram.memory_entities;
    INSERT INTO engram.memory_entities (owner, memory_id, key, name, kind, pinned)
    SELECT m.owner, m.id, x.key, x.name, x.kind, x.pinned
    FROM engram.memories m, engram._memory_entities(m.content, m.tags) x;
    -- (one statement per first name: on Citus a function that reads a
    -- distributed table cannot run inside a query of another)
    FOR r IN SELECT DISTINCT e.owner, split_part(e.key, ' ', 1) AS first FROM engram.memory_entities e
             WHERE e.kind = 'person' AND e.key LIKE '% %'
    LOOP
        PERFORM engram._merge_first_name(r.owner, r.first);
    END LOOP;
END
$fn$;

CREATE FUNCTION engram._entities_truncated() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    TRUNCATE engram.memory_entities;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER entities_insert AFTER INSERT ON engram.memories
    FOR EACH ROW EXECUTE FUNCTION engram._entities_indexed();
CREATE TRIGGER entities_update AFTER UPDATE OF owner, id, content, tags ON engram.memories
    FOR EACH ROW WHEN (OLD.content IS DISTINCT FROM NEW.content OR OLD.tags IS DISTINCT FROM NEW.tags
                       OR OLD.id <> NEW.id OR OLD.owner <> NEW.owner)
    EXECUTE FUNCTION engram._entities_indexed();
CREATE TRIGGER entities_delete AFTER DELETE ON engram.memories
    FOR EACH ROW EXECUTE FUNCTION engram._entities_indexed();
CREATE TRIGGER entities_truncate AFTER TRUNCATE ON engram.memories
    FOR EACH STATEMENT EXECUTE FUNCTION engram._entities_truncated();

-- An entity name a caller gives (entity, prefix): at most 200 characters.
CREATE FUNCTION engram._check_entity(p_name text, p_value text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_value IS NOT NULL AND char_length(p_value) > 200 THEN
        RAISE EXCEPTION '% is % characters; an entity name is at most 200', p_name, char_length(p_value)
            USING ERRCODE = '22001';
    END IF;
END
$fn$;

-- The ids of the owner's memories that name entity p_entity (matched by
-- its key: case and accents folded).
CREATE FUNCTION engram._entity_memories(p_owner text, p_entity text) RETURNS uuid[]
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_key text;
BEGIN
    -- (the key first, in a statement of its own: on Citus a function that
    -- reads a distributed table cannot run inside a query of another)
    v_key := engram._entity_resolve(p_owner, engram._entity_key(p_entity));
    RETURN ARRAY(SELECT e.memory_id FROM engram.memory_entities e WHERE e.owner = p_owner AND e.key = v_key);
END
$fn$;

-- The entities of the owner's active normal memories (those whose key
-- starts with p_prefix, is one of p_keys, or is named by memories p_ids;
-- NULL: no such condition): each with the name it is most often written
-- as (on a tie, the latest written), its most frequent kind other than
-- `thing` (a name that is a project in one memory and a bare name in two
-- is a project), how many memories name it, and when the first and last
-- of those happened.
CREATE FUNCTION engram._entity_summary(p_owner text, p_prefix text, p_keys text[], p_ids uuid[])
RETURNS TABLE (key text, name text, kind text, memories bigint, first_seen timestamptz, last_seen timestamptz)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN QUERY
    WITH x AS (
        SELECT e.key, e.name, e.kind, e.alias, m.occurred_at, m.created_at
        FROM engram.memory_entities e
        JOIN engram.memories m ON m.owner = e.owner AND m.id = e.memory_id
        WHERE e.owner = p_owner
          AND (p_prefix IS NULL OR starts_with(e.key, p_prefix))
          AND (p_keys IS NULL OR e.key = ANY (p_keys))
          AND (p_ids IS NULL OR e.memory_id = ANY (p_ids))
          AND m.status = 'active' AND (m.expires_at IS NULL OR m.expires_at > now()) AND m.internal_type IS NULL
    ), names AS (
        SELECT DISTINCT ON (y.key) y.key, y.name
        FROM (SELECT x.key, x.name, bool_and(x.alias IS NOT NULL) AS merged, count(*) AS n, max(x.created_at) AS latest
              FROM x GROUP BY x.key, x.name) y
        ORDER BY y.key, y.merged, y.n DESC, y.latest DESC, y.name
    ), kinds AS (
        SELECT DISTINCT ON (y.key) y.key, y.kind
        FROM (SELECT x.key, x.kind, count(*) AS n FROM x GROUP BY x.key, x.kind) y
        ORDER BY y.key, y.kind = 'thing', y.n DESC, y.kind
    ), totals AS (
        SELECT x.key, count(*) AS n, min(x.occurred_at) AS first_at, max(x.occurred_at) AS last_at
        FROM x GROUP BY x.key
    )
    SELECT t.key, n.name, k.kind, t.n, t.first_at, t.last_at
    FROM totals t JOIN names n ON n.key = t.key JOIN kinds k ON k.key = t.key;
END
$fn$;

-- The named things the owner's memories are about, most mentioned first:
-- each entity's usual name and kind, how many of the owner's active
-- memories name it, and when the first and last of them happened.
-- `prefix` keeps the names that start with it (case and accents folded).
CREATE FUNCTION engram.entities(owner text DEFAULT NULL, prefix text DEFAULT NULL, "limit" integer DEFAULT 50)
RETURNS TABLE (name text, kind text, memories bigint, first_seen timestamptz, last_seen timestamptz)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner  text := engram._caller(entities.owner, NULL, NULL, false);
    v_prefix text;
    v_limit  integer := least(greatest(coalesce(entities."limit", 50), 1), 1000);
BEGIN
    PERFORM engram._check_entity('prefix', entities.prefix);
    v_prefix := engram._entity_key(nullif(btrim(entities.prefix), ''));
    RETURN QUERY
    SELECT x.name, x.kind, x.memories, x.first_seen, x.last_seen
    FROM engram._entity_summary(v_owner, v_prefix, NULL, NULL) x
    ORDER BY x.memories DESC, x.last_seen DESC, x.key
    LIMIT v_limit;
END
$fn$;

-- What the owner's memories say about one entity, as jsonb:
--   entity:  {name, kind, memories} (the usual name and kind; memories 0
--            when none names it);
--   facts:   [{id, content, occurred_at, valid_from, valid_to}], the active
--            memories naming it that are valid now, newest first (at most
--            `limit`);
--   related: [{name, kind, memories}], the entities named in the same
--            memories, most shared first (at most 10);
--   history: [{id, content, valid_from, valid_to, superseded_by}], the
--            memories naming it that no longer hold, latest end first:
--            what replaced what, and when.
CREATE FUNCTION engram.about(owner text DEFAULT NULL, entity text DEFAULT NULL, "limit" integer DEFAULT 20)
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner   text := engram._caller(about.owner, NULL, NULL, false);
    v_limit   integer := least(greatest(coalesce(about."limit", 20), 1), 100);
    v_key     text;
    v_ids     uuid[];
    v_entity  jsonb;
    v_facts   jsonb;
    v_related jsonb;
    v_history jsonb;
BEGIN
    IF nullif(btrim(about.entity), '') IS NULL THEN
        RAISE EXCEPTION 'entity is required: the name of a person, project, place or thing (engram.entities lists the names your memories hold)'
            USING ERRCODE = '22004';
    END IF;
    PERFORM engram._check_entity('entity', about.entity);
    v_key := engram._entity_resolve(v_owner, engram._entity_key(about.entity));
    -- One statement per table (on Citus each runs on the owner's shard).
    v_ids := engram._entity_memories(v_owner, about.entity);
    SELECT jsonb_build_object('name', x.name, 'kind', x.kind, 'memories', x.memories)
    INTO v_entity
    FROM engram._entity_summary(v_owner, NULL, ARRAY[v_key], NULL) x;
    SELECT jsonb_agg(jsonb_build_object('id', f.id, 'content', f.content, 'occurred_at', f.occurred_at,
                                        'valid_from', f.valid_from, 'valid_to', f.valid_to)
                     ORDER BY f.occurred_at DESC, f.id)
    INTO v_facts
    FROM (SELECT m.id, m.content, m.occurred_at, m.valid_from, m.valid_to FROM engram.memories m
          WHERE m.owner = v_owner AND m.id = ANY (v_ids)
            AND m.status = 'active' AND (m.expires_at IS NULL OR m.expires_at > now()) AND m.internal_type IS NULL
            AND m.valid_from <= now() AND (m.valid_to IS NULL OR m.valid_to > now())
          ORDER BY m.occurred_at DESC, m.id LIMIT v_limit) f;
    SELECT jsonb_agg(jsonb_build_object('id', h.id, 'content', h.content, 'valid_from', h.valid_from,
                                        'valid_to', h.valid_to, 'superseded_by', h.superseded_by)
                     ORDER BY h.valid_to DESC, h.id)
    INTO v_history
    FROM (SELECT m.id, m.content, m.valid_from, m.valid_to,
                 CASE WHEN m.flag_reason ~ '^superseded by [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                      THEN substr(m.flag_reason, 15) END AS superseded_by
          FROM engram.memories m
          WHERE m.owner = v_owner AND m.id = ANY (v_ids)
            AND m.status = 'active' AND m.internal_type IS NULL AND m.valid_to <= now()
          ORDER BY m.valid_to DESC, m.id LIMIT v_limit) h;
    SELECT jsonb_agg(jsonb_build_object('name', r.name, 'kind', r.kind, 'memories', r.memories)
                     ORDER BY r.memories DESC, r.key)
    INTO v_related
    FROM (SELECT x.* FROM engram._entity_summary(v_owner, NULL, NULL, v_ids) x
          WHERE x.key <> v_key ORDER BY x.memories DESC, x.key LIMIT 10) r;
    RETURN jsonb_build_object(
        'entity', coalesce(v_entity, jsonb_build_object('name', about.entity, 'kind', NULL, 'memories', 0)),
        'facts', coalesce(v_facts, '[]'),
        'related', coalesce(v_related, '[]'),
        'history', coalesce(v_history, '[]'));
END
$fn$;
