---------------------------------------------------------------------------
-- keyed memories: put, get_key, delete_key, namespaces (docs/SQL.md)
---------------------------------------------------------------------------

-- A keyed memory is an ordinary memory (searched, listed, flagged, erased,
-- exported like the rest) that also has an address: (owner, namespace,
-- key), unique among the owner's active memories of one context (the
-- normal one, an agent's, each ghost scope: a context neither sees nor
-- blocks another's keys). put() writes it whole:
-- the first put creates it, each later one makes a new revision of the
-- same memory (the earlier content, tags, metadata and value stay in
-- engram.revisions). A put is never refused as a duplicate of another
-- memory or as a conflict with one: the caller named what it replaces.

-- The dedup key of a keyed memory: its address within its context, so
-- that the same content under two keys is two memories, and never equal to
-- a content-based key (engram._dedup_key hashes a 4-element array).
CREATE FUNCTION engram._item_dedup_key(p_namespace text[], p_key text, p_internal_type text, p_scope text[])
RETURNS bytea LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
    RETURN sha256(convert_to(jsonb_build_array('item', p_internal_type, p_scope, p_namespace, p_key)::text,
                             'UTF8'::name));
END
$fn$;

-- A namespace argument (p_what): a one-dimensional array from index 1
-- (what = and the dedup key compare alike), of labels engram-core's items
-- accepts. p_allow_empty: a prefix or suffix may be empty.
CREATE FUNCTION engram._check_path(p_what text, p_labels text[], p_allow_empty boolean) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF array_ndims(p_labels) > 1 OR array_lower(p_labels, 1) <> 1 THEN
        RAISE EXCEPTION '% must be a one-dimensional array of labels', p_what
            USING ERRCODE = '22023', HINT = 'pass it as ARRAY[''users'', ''u42''] or ''{users,u42}''';
    END IF;
    PERFORM engram._check_namespace(p_what, p_labels, p_allow_empty);
END
$fn$;

-- The namespace prefix and filter of list and search, checked before any
-- row is read. A filter is a query: at most 16 KiB.
CREATE FUNCTION engram._check_item_filters(p_namespace_prefix text[], p_filter jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_namespace_prefix IS NOT NULL THEN
        PERFORM engram._check_path('namespace_prefix', p_namespace_prefix, true);
    END IF;
    IF p_filter IS NOT NULL THEN
        IF octet_length(p_filter::text) > 16384 THEN
            RAISE EXCEPTION 'filter is % bytes; the limit is 16384', octet_length(p_filter::text)
                USING ERRCODE = '54000', HINT = 'narrow the filter, or filter the rest in the application';
        END IF;
        PERFORM engram._check_doc('filter', p_filter);
        PERFORM engram._check_filter(p_filter);
    END IF;
END
$fn$;

-- Renews the lifetime of memories p_ids that were written with a ttl: they
-- expire ttl from now (a read that asked for it: refresh_ttl). Skipped in
-- read-only transactions, as access counts are. One row per statement
-- (on Citus an UPDATE computes nothing from the row's columns).
CREATE FUNCTION engram._refresh_ttl(p_owner text, p_ids uuid[]) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    r record;
BEGIN
    IF current_setting('transaction_read_only')::boolean OR p_ids IS NULL OR cardinality(p_ids) = 0 THEN
        RETURN;
    END IF;
    FOR r IN
        SELECT m.id, m.ttl FROM engram.memories m
        WHERE m.owner = p_owner AND m.id = ANY (p_ids) AND m.ttl IS NOT NULL
          AND m.status = 'active' AND m.expires_at > now()
        ORDER BY m.id  -- a fixed lock order
    LOOP
        -- (the ttl read above, still: a put that changed it meanwhile set
        -- the lifetime it wanted)
        UPDATE engram.memories AS m SET expires_at = now() + r.ttl
        WHERE m.owner = p_owner AND m.id = r.id AND m.ttl = r.ttl AND m.status = 'active';
    END LOOP;
END
$fn$;

-- The owner's active memory at (p_namespace, p_key) in the context
-- (p_internal_type, ghost scope p_scope), found by its dedup key; an active
-- one past its expiry is marked expired (it frees the key) when p_lock
-- (locked for a write), and not returned.
CREATE FUNCTION engram._item(p_owner text, p_namespace text[], p_key text, p_internal_type text, p_scope text[],
                             p_lock boolean)
RETURNS engram.memories LANGUAGE plpgsql AS $fn$
DECLARE
    v_key bytea := engram._item_dedup_key(p_namespace, p_key, p_internal_type, p_scope);
    r engram.memories;
BEGIN
    IF p_lock THEN
        SELECT m.* INTO r FROM engram.memories m
        WHERE m.owner = p_owner AND m.dedup_key = v_key AND m.status = 'active'
        FOR UPDATE;
    ELSE
        SELECT m.* INTO r FROM engram.memories m
        WHERE m.owner = p_owner AND m.dedup_key = v_key AND m.status = 'active';
    END IF;
    IF FOUND AND r.expires_at <= now() THEN
        IF p_lock THEN
            UPDATE engram.memories AS m SET status = 'expired', archived_at = now(), updated_at = now()
            WHERE m.owner = p_owner AND m.id = r.id;
            PERFORM engram._audit(p_owner, 'expire', r.id, jsonb_build_object('count', 1));
        END IF;
        RETURN NULL;
    END IF;
    RETURN r;
END
$fn$;

-- Stores or revises the owner's memory at (namespace, key). content is
-- what search reads (default: the value's JSON text); embedding its vector
-- (NULL: found by words and filters only). Everything else is the item's
-- whole new state: tags, metadata, value and ttl replace the old ones
-- (ttl NULL: it never expires), and it holds from now on (a revision of
-- a memory that a correction closed is valid again; the supersession's
-- flag is lifted). Returns 'created' (a new memory), 'revised' (a new
-- revision of the memory at that key) or 'unchanged' (the same state
-- again: no revision; the lifetime starts again).
CREATE FUNCTION engram.put(
    owner text DEFAULT NULL,
    namespace text[] DEFAULT NULL,
    key text DEFAULT NULL,
    content text DEFAULT NULL,
    embedding vector DEFAULT NULL,
    value jsonb DEFAULT NULL,
    ttl interval DEFAULT NULL,
    kind text DEFAULT 'semantic',
    tags text[] DEFAULT '{}',
    metadata jsonb DEFAULT '{}',
    importance real DEFAULT 0.5,
    author_type text DEFAULT 'agent',
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL,
    reason text DEFAULT NULL)
RETURNS TABLE (status text, id uuid, revision integer)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_tags     text[] := coalesce(engram._tag_set(put.tags), '{}');
    v_owner    text := engram._caller(put.owner, put.internal_type, engram._scope_of(v_tags), true);
    v_kind     text := coalesce(put.kind, 'semantic');
    v_metadata jsonb := coalesce(put.metadata, '{}');
    v_content  text := coalesce(put.content, put.value::text);
    v_key      bytea;
    r          engram.memories;
    v_id       uuid;
    v_superseded boolean;
    v_flags    integer;
BEGIN
    PERFORM engram._check_path('namespace', put.namespace, false);
    PERFORM engram._check_key(put.key);
    IF put.value IS NOT NULL THEN
        IF jsonb_typeof(put.value) <> 'object' THEN
            RAISE EXCEPTION 'value must be a JSON object, not %', jsonb_typeof(put.value)
                USING ERRCODE = '22023', HINT = 'pass value => ''{"field": "..."}''::jsonb';
        END IF;
        PERFORM engram._check_metadata('object', octet_length(put.value::text));
        PERFORM engram._check_doc('value', put.value);
    END IF;
    IF v_content IS NULL THEN
        RAISE EXCEPTION 'put needs content or a value'
            USING ERRCODE = '22004', HINT = 'pass content => the text search reads, value => a JSON object, or both';
    END IF;
    PERFORM engram._check_memory(v_content, v_kind, v_tags, jsonb_typeof(v_metadata),
        octet_length(v_metadata::text), put.importance, put.author_type, put.internal_type);
    PERFORM engram._check_doc('metadata', v_metadata);
    PERFORM engram._check_author(put.author_type);
    PERFORM engram._check_vector(put.embedding, 'embedding');
    PERFORM engram._check_ttl(put.ttl);
    PERFORM engram._check_short('reason', put.reason, 1000);
    IF v_kind = 'episodic' THEN
        RAISE EXCEPTION 'a keyed memory is semantic or procedural: an episode is an event, not a state one revises'
            USING ERRCODE = '22023', HINT = 'use engram.remember for events';
    END IF;

    PERFORM engram._lock_owner(v_owner);
    IF v_metadata ? 'images' THEN
        PERFORM engram._check_image_refs(v_owner, v_metadata);
    END IF;
    v_key := engram._item_dedup_key(put.namespace, put.key, put.internal_type, engram._scope_of(v_tags));
    r := engram._item(v_owner, put.namespace, put.key, put.internal_type, engram._scope_of(v_tags), true);

    IF r.id IS NULL THEN
        INSERT INTO engram.memories AS m
            (owner, kind, internal_type, content, content_sha256, dedup_key, tags, metadata, embedding,
             author_type, importance, trust_score, expires_at, namespace, key, value, ttl)
        VALUES
            (v_owner, v_kind, put.internal_type, v_content, sha256(convert_to(v_content, 'UTF8'::name)), v_key,
             v_tags, v_metadata, put.embedding, put.author_type, put.importance,
             engram._trust_at(now(), engram._setting_trust_half_life_days(), put.author_type, now(), 0),
             now() + put.ttl, put.namespace, put.key, put.value, put.ttl)
        RETURNING m.id INTO v_id;
        PERFORM engram._audit(v_owner, 'put', v_id, jsonb_build_object('kind', v_kind, 'revision', 1));
        RETURN QUERY SELECT 'created'::text, v_id, 1;
        RETURN;
    END IF;

    PERFORM engram._require_writable(r, 'put');
    v_superseded := coalesce(r.flag_reason ~ '^superseded by [0-9a-f-]{36}$', false);
    IF r.content = v_content AND r.tags = v_tags AND r.metadata = v_metadata
       AND r.value IS NOT DISTINCT FROM put.value AND r.kind = v_kind
       AND r.embedding IS NOT DISTINCT FROM put.embedding AND r.importance = put.importance
       AND r.author_type = put.author_type AND r.valid_to IS NULL AND NOT v_superseded THEN
        UPDATE engram.memories AS m SET expires_at = now() + put.ttl, ttl = put.ttl
        WHERE m.owner = v_owner AND m.id = r.id;
        PERFORM engram._audit(v_owner, 'put', r.id,
            jsonb_build_object('kind', v_kind, 'revision', r.revision, 'unchanged', true));
        RETURN QUERY SELECT 'unchanged'::text, r.id, r.revision;
        RETURN;
    END IF;
    v_flags := CASE WHEN v_superseded THEN greatest(r.flag_count - 1, 0) ELSE r.flag_count END;
    INSERT INTO engram.revisions AS v
        (memory_id, revision, owner, content, tags, metadata, written_at, reason, is_correction, changed_by, value)
    VALUES (r.id, r.revision, r.owner, r.content, r.tags, r.metadata, r.updated_at,
            put.reason, false, engram._caller_role(), r.value);
    UPDATE engram.memories AS m SET
        kind = v_kind,
        content = v_content,
        content_sha256 = sha256(convert_to(v_content, 'UTF8'::name)),
        embedding = put.embedding,
        tags = v_tags,
        metadata = v_metadata,
        value = put.value,
        ttl = put.ttl,
        expires_at = now() + put.ttl,
        importance = put.importance,
        author_type = put.author_type,
        revision = r.revision + 1,
        updated_at = now(),
        -- what a put states holds now
        valid_to = NULL,
        invalidated_at = NULL,
        flag_count = v_flags,
        flagged_at = CASE WHEN v_flags = 0 THEN NULL ELSE r.flagged_at END,
        flag_reason = CASE WHEN v_superseded THEN NULL ELSE r.flag_reason END,
        trust_score = engram._trust_at(now(), engram._setting_trust_half_life_days(), put.author_type,
                                       r.created_at, v_flags)
    WHERE m.owner = v_owner AND m.id = r.id;
    PERFORM engram._audit(v_owner, 'put', r.id,
        jsonb_build_object('kind', v_kind, 'revision', r.revision + 1, 'content_changed', v_content <> r.content)
        || CASE WHEN r.valid_to IS NOT NULL OR v_superseded
                THEN jsonb_build_object('reopened', true, 'previous_valid_to', r.valid_to,
                                        'previous_invalidated_at', r.invalidated_at,
                                        'superseded_by', CASE WHEN v_superseded THEN substr(r.flag_reason, 15) END)
                ELSE '{}' END);
    RETURN QUERY SELECT 'revised'::text, r.id, r.revision + 1;
END
$fn$;

CREATE TYPE engram.keyed_memory AS (id uuid, namespace text[], key text, content text, value jsonb, kind text,
               tags text[], metadata jsonb, revision integer, created_at timestamptz, updated_at timestamptz,
               expires_at timestamptz, trust_score real);

-- The owner's memory at (namespace, key) in the caller's context; no row
-- when there is none (or it expired). refresh_ttl: its lifetime starts
-- again (a memory written with a ttl).
CREATE FUNCTION engram.get_key(
    owner text DEFAULT NULL,
    namespace text[] DEFAULT NULL,
    key text DEFAULT NULL,
    refresh_ttl boolean DEFAULT false,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL)
RETURNS SETOF engram.keyed_memory
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(get_key.owner, get_key.internal_type, get_key.scope_tags, false);
    r       engram.memories;
BEGIN
    PERFORM engram._check_path('namespace', get_key.namespace, false);
    PERFORM engram._check_key(get_key.key);
    r := engram._item(v_owner, get_key.namespace, get_key.key, get_key.internal_type,
                      engram._scope_of(coalesce(get_key.scope_tags, '{}')), false);
    IF r.id IS NULL OR NOT r.tags @> coalesce(get_key.scope_tags, '{}') THEN
        RETURN;
    END IF;
    PERFORM engram._touch(v_owner, ARRAY[r.id]);
    IF get_key.refresh_ttl AND r.ttl IS NOT NULL AND NOT current_setting('transaction_read_only')::boolean THEN
        PERFORM engram._refresh_ttl(v_owner, ARRAY[r.id]);
        r.expires_at := now() + r.ttl;
    END IF;
    RETURN QUERY SELECT r.id, r.namespace, r.key, r.content, r.value, r.kind, r.tags, r.metadata, r.revision,
                        r.created_at, r.updated_at, r.expires_at, r.trust_score;
END
$fn$;

-- Forgets the owner's memory at (namespace, key), as engram.forget does
-- (hard: erased with its revisions). Returns false when there is none.
CREATE FUNCTION engram.delete_key(
    owner text DEFAULT NULL,
    namespace text[] DEFAULT NULL,
    key text DEFAULT NULL,
    hard boolean DEFAULT false,
    reason text DEFAULT NULL,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(delete_key.owner, delete_key.internal_type, delete_key.scope_tags, true);
    r       engram.memories;
BEGIN
    PERFORM engram._check_path('namespace', delete_key.namespace, false);
    PERFORM engram._check_key(delete_key.key);
    PERFORM engram._lock_owner(v_owner);
    r := engram._item(v_owner, delete_key.namespace, delete_key.key, delete_key.internal_type,
                      engram._scope_of(coalesce(delete_key.scope_tags, '{}')), true);
    IF r.id IS NULL OR NOT r.tags @> coalesce(delete_key.scope_tags, '{}') THEN
        RETURN false;
    END IF;
    RETURN engram.forget(owner => v_owner, id => r.id, reason => coalesce(delete_key.reason, 'deleted by key'),
                         hard => coalesce(delete_key.hard, false), internal_type => delete_key.internal_type,
                         scope_tags => delete_key.scope_tags);
END
$fn$;

-- The namespaces that hold the owner's active keyed memories in the
-- caller's context, sorted: those under prefix and ending with suffix,
-- cut to max_depth labels (then distinct), one page of "limit" from
-- "offset".
CREATE FUNCTION engram.namespaces(
    owner text DEFAULT NULL,
    prefix text[] DEFAULT NULL,
    suffix text[] DEFAULT NULL,
    max_depth integer DEFAULT NULL,
    "limit" integer DEFAULT 100,
    "offset" integer DEFAULT 0,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL)
RETURNS SETOF text[]
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(namespaces.owner, namespaces.internal_type, namespaces.scope_tags, false);
BEGIN
    IF namespaces.prefix IS NOT NULL THEN
        PERFORM engram._check_path('prefix', namespaces.prefix, true);
    END IF;
    IF namespaces.suffix IS NOT NULL THEN
        PERFORM engram._check_path('suffix', namespaces.suffix, true);
    END IF;
    IF namespaces.max_depth IS NOT NULL AND namespaces.max_depth < 1 THEN
        RAISE EXCEPTION 'max_depth % is below 1; pass the number of labels to keep, or NULL for all', namespaces.max_depth
            USING ERRCODE = '22023';
    END IF;
    IF coalesce(namespaces."limit", 100) NOT BETWEEN 1 AND 1000 OR coalesce(namespaces."offset", 0) < 0 THEN
        RAISE EXCEPTION 'limit % and offset % are out of range; pass a limit of 1 to 1000 and an offset of 0 or more',
            namespaces."limit", namespaces."offset"
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT DISTINCT m.namespace[1:coalesce(namespaces.max_depth, cardinality(m.namespace))]::text[] AS ns
    FROM engram.memories m
    WHERE m.owner = v_owner AND m.key IS NOT NULL AND m.status = 'active'
      AND (m.expires_at IS NULL OR m.expires_at > now())
      AND m.internal_type IS NOT DISTINCT FROM namespaces.internal_type
      AND m.tags @> coalesce(namespaces.scope_tags, '{}')
      AND (namespaces.prefix IS NULL OR (m.namespace >= namespaces.prefix
           AND (cardinality(namespaces.prefix) = 0 OR m.namespace < engram._namespace_bound(namespaces.prefix))
           AND m.namespace[1:cardinality(namespaces.prefix)] = namespaces.prefix))
      AND (namespaces.suffix IS NULL OR cardinality(namespaces.suffix) = 0
           OR m.namespace[cardinality(m.namespace) - cardinality(namespaces.suffix) + 1:] = namespaces.suffix)
    ORDER BY 1
    LIMIT coalesce(namespaces."limit", 100) OFFSET coalesce(namespaces."offset", 0);
END
$fn$;

-- The embedding model the stored vectors come from, as configure recorded
-- it (NULL: not recorded). engram-mcp refuses to serve with another.
CREATE FUNCTION engram.embedding_model() RETURNS text
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN (SELECT c.embedding_model FROM engram.configuration c);
END
$fn$;
