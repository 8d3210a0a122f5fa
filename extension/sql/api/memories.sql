---------------------------------------------------------------------------
-- configuration
---------------------------------------------------------------------------

-- The build options of the memories' HNSW index, pgvector's defaults
-- where the index sets none ({"m": 16, "ef_construction": 64}); NULL while
-- the index is missing (a bulk load drops it) or not valid (a failed
-- concurrent build), so that configure builds it again.
CREATE FUNCTION engram._hnsw_build() RETURNS jsonb
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_options text[];
BEGIN
    SELECT c.reloptions INTO v_options FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid
    WHERE c.oid = pg_catalog.to_regclass('engram.memories_embedding_hnsw') AND i.indisvalid;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object(
        'm', coalesce((SELECT split_part(o, '=', 2)::integer FROM unnest(v_options) o
                       WHERE split_part(o, '=', 1) = 'm'), 16),
        'ef_construction', coalesce((SELECT split_part(o, '=', 2)::integer FROM unnest(v_options) o
                                     WHERE split_part(o, '=', 1) = 'ef_construction'), 64));
END
$fn$;

-- (Re)creates the memories' HNSW index with build options p_options (the
-- reloptions text, e.g. 'm=24, ef_construction=128'; NULL: pgvector's
-- defaults). A plain build under an ACCESS EXCLUSIVE lock, as a restore
-- builds it; docs/OPERATIONS.md shows the concurrent way for a live table.
-- (In the database's default tablespace, whatever the caller's
-- default_tablespace says.)
CREATE FUNCTION engram._build_hnsw(p_options text) RETURNS void
LANGUAGE plpgsql SET default_tablespace = '' AS $fn$
BEGIN
    DROP INDEX IF EXISTS engram.memories_embedding_hnsw;
    EXECUTE 'CREATE INDEX memories_embedding_hnsw ON engram.memories USING hnsw (embedding vector_cosine_ops)'
            || coalesce(' WITH (' || p_options || ')', '');
END
$fn$;

-- Sets the embedding dimension of this database (default 384), allowed
-- while no memory holds an embedding, and the dimension of image
-- embeddings (default 512, at most 1536), allowed while no image holds one.
-- Rebuilds what depends on the column (the memories' HNSW index, keeping
-- its build options).
-- hnsw_m and hnsw_ef_construction rebuild the memories' HNSW index with
-- those build options (pgvector's m and ef_construction; defaults 16 and
-- 64): a denser graph reaches a higher recall on a large table (at 1M rows
-- the default graph's recall@10 stays near 0.93 at any ef_search on the
-- bench's data; docs/OPERATIONS.md) and costs build time and insert time.
-- embedding_model records the model the vectors come from (engram-mcp
-- refuses to serve with another): set while none is recorded or no memory
-- holds an embedding; changing it under stored vectors would mix two
-- vector spaces, so that takes a re-embedding (docs/OPERATIONS.md).
CREATE FUNCTION engram.configure(embedding_dims integer DEFAULT NULL, image_dims integer DEFAULT NULL,
                                 hnsw_m integer DEFAULT NULL, hnsw_ef_construction integer DEFAULT NULL,
                                 embedding_model text DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_current integer;
    v_stored bigint;
    v_build jsonb;
    v_m integer;
    v_efc integer;
    v_options text;
    v_model text := engram.embedding_model();
BEGIN
    PERFORM engram._require_privileged('configure');
    IF configure.embedding_model IS NOT NULL THEN
        IF btrim(configure.embedding_model) = '' OR char_length(configure.embedding_model) > 200
           OR configure.embedding_model ~ '[[:cntrl:]]' THEN
            RAISE EXCEPTION 'embedding_model % is not a model name', engram._echo(configure.embedding_model)
                USING ERRCODE = '22023', HINT = 'Pass the name engram-mcp is started with, such as BAAI/bge-small-en-v1.5.';
        END IF;
        IF v_model IS DISTINCT FROM configure.embedding_model AND v_model IS NOT NULL
           AND EXISTS (SELECT 1 FROM engram.memories m WHERE m.embedding IS NOT NULL) THEN
            RAISE EXCEPTION 'the stored embeddings come from model %; recording % would mix two vector spaces', v_model,
                configure.embedding_model
                USING ERRCODE = '55000',
                      HINT = 'Re-embed: engram-mcp export --all-owners from this database, then engram-mcp import --all-owners --reembed with the new model into a new database (docs/OPERATIONS.md).';
        END IF;
    END IF;
    -- The graph's options are checked before anything changes.
    v_build := engram._hnsw_build();
    IF configure.hnsw_m IS NOT NULL OR configure.hnsw_ef_construction IS NOT NULL THEN
        v_m := coalesce(configure.hnsw_m, (v_build ->> 'm')::integer, 16);
        v_efc := coalesce(configure.hnsw_ef_construction, (v_build ->> 'ef_construction')::integer, 64);
        IF v_m NOT BETWEEN 2 AND 100 THEN
            RAISE EXCEPTION 'hnsw_m % is out of range; pass 2 to 100 (pgvector''s default is 16; denser graphs, such as 24 or 32, reach a higher recall on tables of millions of rows)', v_m
                USING ERRCODE = '22023';
        END IF;
        IF v_efc NOT BETWEEN 4 AND 1000 THEN
            RAISE EXCEPTION 'hnsw_ef_construction % is out of range; pass 4 to 1000 (pgvector''s default is 64)', v_efc
                USING ERRCODE = '22023';
        END IF;
        IF v_efc < 2 * v_m THEN
            RAISE EXCEPTION 'hnsw_ef_construction % is below twice hnsw_m (%); pgvector needs at least %', v_efc, v_m, 2 * v_m
                USING ERRCODE = '22023';
        END IF;
        IF engram._is_distributed() THEN
            RAISE EXCEPTION 'hnsw_m and hnsw_ef_construction rebuild one node''s index; on Citus each worker''s shards hold their own'
                USING ERRCODE = '0A000',
                      HINT = 'Rebuild the shard indexes on the workers (ALTER INDEX ... SET (m = ..., ef_construction = ...); REINDEX) instead.';
        END IF;
    END IF;
    v_current := engram._dims();
    IF configure.embedding_dims IS NOT NULL AND configure.embedding_dims <> v_current THEN
        PERFORM engram._check_dims(configure.embedding_dims);
        SELECT count(*) INTO v_stored FROM engram.memories m WHERE m.embedding IS NOT NULL;
        IF v_stored > 0 THEN
            RAISE EXCEPTION '% memories hold % -dimension embeddings; the dimension can change only while none do (re-embed into a new database, or engram.purge/forget them first)', v_stored, v_current
                USING ERRCODE = '55000';
        END IF;
        -- The index comes back with the build options it had.
        v_options := (SELECT array_to_string(c.reloptions, ', ') FROM pg_catalog.pg_class c
                      WHERE c.oid = pg_catalog.to_regclass('engram.memories_embedding_hnsw'));
        DROP INDEX IF EXISTS engram.memories_embedding_hnsw;
        EXECUTE format('ALTER TABLE engram.memories ALTER COLUMN embedding TYPE vector(%s)', configure.embedding_dims);
        PERFORM engram._build_hnsw(v_options);
        PERFORM engram._audit(NULL, 'configure', NULL,
            jsonb_build_object('embedding_dims', configure.embedding_dims, 'previous', v_current));
    END IF;
    v_current := engram._image_dims();
    IF configure.image_dims IS NOT NULL AND configure.image_dims <> v_current THEN
        PERFORM engram._check_dims(configure.image_dims);
        IF configure.image_dims > 1536 THEN
            RAISE EXCEPTION 'image_dims % is above 1536; image embeddings are stored uncompressed in the row, which leaves room for 1536 dimensions (CLIP models use 512 to 1024)', configure.image_dims
                USING ERRCODE = '22023';
        END IF;
        SELECT count(*) INTO v_stored FROM engram.image_embeddings e;
        IF v_stored > 0 THEN
            RAISE EXCEPTION '% images hold % -dimension embeddings; the image dimension can change only while none do (release those images first)', v_stored, v_current
                USING ERRCODE = '55000';
        END IF;
        EXECUTE format('ALTER TABLE engram.image_embeddings ALTER COLUMN embedding TYPE vector(%s)', configure.image_dims);
        -- ALTER COLUMN TYPE takes the type's storage; keep the rows compact.
        -- (Not on Citus, which cannot set a column's storage on its shards.)
        IF NOT engram._is_distributed() THEN
            ALTER TABLE engram.image_embeddings ALTER COLUMN embedding SET STORAGE PLAIN;
        END IF;
        PERFORM engram._audit(NULL, 'configure', NULL,
            jsonb_build_object('image_dims', configure.image_dims, 'previous', v_current));
    END IF;
    IF v_m IS NOT NULL AND (v_build IS NULL OR v_build <> jsonb_build_object('m', v_m, 'ef_construction', v_efc)) THEN
        PERFORM engram._build_hnsw(format('m = %s, ef_construction = %s', v_m, v_efc));
        PERFORM engram._audit(NULL, 'configure', NULL,
            jsonb_build_object('hnsw_m', v_m, 'hnsw_ef_construction', v_efc, 'previous', v_build));
        -- The floor tune_search measured was for the old graph.
        RAISE NOTICE 'engram: the HNSW index was rebuilt with m = %, ef_construction = %; run engram.tune_search() to size engram.hnsw_ef_search to it', v_m, v_efc;
    END IF;
    -- What pg_dump does not keep of the above, kept for a restore.
    PERFORM engram._save_configuration();
    IF configure.embedding_model IS DISTINCT FROM v_model AND configure.embedding_model IS NOT NULL THEN
        UPDATE engram.configuration AS c SET embedding_model = configure.embedding_model;
        PERFORM engram._audit(NULL, 'configure', NULL,
            jsonb_build_object('embedding_model', configure.embedding_model, 'previous', v_model));
    END IF;
    v_build := engram._hnsw_build();
    RETURN jsonb_build_object(
        'embedding_dims', engram._dims(),
        'hnsw_m', v_build -> 'm',
        'hnsw_ef_construction', v_build -> 'ef_construction',
        'image_dims', engram._image_dims(),
        'image_max_bytes', engram._setting_image_max_bytes(),
        'conflict_threshold', engram._setting_conflict_threshold(),
        'staleness_weight', engram._setting_staleness_weight(),
        'trust_half_life_days', engram._setting_trust_half_life_days(),
        'stale_after_days', engram._setting_stale_after_days(),
        'hnsw_ef_search', engram._setting_hnsw_ef_search(),
        'exact_search_rows', engram._setting_exact_search_rows(),
        'list_search_rows', engram._setting_list_search_rows(),
        'hnsw_min_selectivity', engram._setting_hnsw_min_selectivity(),
        'embedding_model', engram.embedding_model());
END
$fn$;

---------------------------------------------------------------------------
-- writes
---------------------------------------------------------------------------

-- A memory's time to live: positive and at most engram-core's limit of
-- 36,500 days (NULL: kept until forgotten), so that now() + ttl is always
-- a timestamp. '100 years' is within it: Postgres compares a month as 30
-- days.
CREATE FUNCTION engram._check_ttl(p_ttl interval) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_ttl IS NOT NULL AND (p_ttl <= interval '0' OR p_ttl > make_interval(days => engram._limit('ttl_days')::integer)) THEN
        RAISE EXCEPTION 'ttl % is out of range; pass a positive interval of at most % days, such as ''30 days'', or NULL to keep the memory',
                        engram._echo(p_ttl::text), engram._limit('ttl_days')
            USING ERRCODE = '22023';
    END IF;
END
$fn$;

-- Whether the call comes from a DBA (privileged, not withheld) or a
-- platform token's binding: who may administer groups, publish to any
-- group, and say a person wrote a memory.
CREATE FUNCTION engram._privileged_or_platform() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    RETURN engram._caller_privileged() OR coalesce((engram._binding() ->> 'platform')::boolean, false);
END
$fn$;

-- Who may say a person wrote a memory (author_type 'human', the highest
-- trust weight): DBAs and platform tokens. A user token is an agent's
-- credential; its writes are the agent's (author_type 'agent' or 'system').
CREATE FUNCTION engram._check_author(p_author_type text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    IF p_author_type = 'human' AND NOT engram._privileged_or_platform() THEN
        RAISE EXCEPTION 'author_type ''human'' is for DBAs and platform tokens; a user token writes as an agent: pass author_type => ''agent'' (the default) or ''system'''
            USING ERRCODE = '42501';
    END IF;
END
$fn$;

-- A moment a caller names (occurred_at, valid_from, valid_to, valid_at,
-- known_at, reference_time): a finite timestamp (NULL: the default).
CREATE FUNCTION engram._check_moment(p_name text, p_at timestamptz) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_at IS NOT NULL AND NOT isfinite(p_at) THEN
        RAISE EXCEPTION '% % is not a moment; pass a finite timestamp such as ''2026-05-01'' or ''2026-05-01T09:30:00Z'' (NULL for the default)', p_name, p_at
            USING ERRCODE = '22023';
    END IF;
END
$fn$;

-- A validity period: valid_to (NULL: open) not before valid_from.
CREATE FUNCTION engram._check_period(p_valid_from timestamptz, p_valid_to timestamptz) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    PERFORM engram._check_moment('valid_from', p_valid_from);
    PERFORM engram._check_moment('valid_to', p_valid_to);
    IF p_valid_to < p_valid_from THEN
        RAISE EXCEPTION 'valid_to % is before valid_from %; a fact stops being true after it starts (pass valid_to NULL while it still holds)', p_valid_to, p_valid_from
            USING ERRCODE = '22023';
    END IF;
END
$fn$;

-- Closes the validity of the owner's memories p_ids at p_at (a newer fact
-- superseded them): valid_to becomes p_at (never before a memory's own
-- valid_from), one 'invalidate' audit row each, which keeps the valid_to it
-- had (engram.reopen puts it back). A memory already closed at or before
-- p_at keeps its end. Memories only: resources and skills, which agents
-- cannot change, are never closed (as _flag_rows never flags them).
CREATE FUNCTION engram._close_validity(p_owner text, p_ids uuid[], p_at timestamptz, p_details jsonb) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    f    record;
    v_to timestamptz;
BEGIN
    -- (one memory at a time, each statement within the owner: what a
    -- distributed table runs on the owner's shard)
    FOR f IN
        SELECT m.id, m.valid_to, m.invalidated_at FROM engram.memories m
        WHERE m.owner = p_owner AND m.id = ANY (p_ids) AND m.source = 'memory'
          AND (m.valid_to IS NULL OR m.valid_to > p_at)
        ORDER BY m.id
        FOR UPDATE
    LOOP
        UPDATE engram.memories AS m SET valid_to = greatest(m.valid_from, p_at), invalidated_at = now()
        WHERE m.owner = p_owner AND m.id = f.id
        RETURNING m.valid_to INTO v_to;
        PERFORM engram._audit(p_owner, 'invalidate', f.id,
            jsonb_build_object('valid_to', v_to, 'previous_valid_to', f.valid_to,
                               'previous_invalidated_at', f.invalidated_at) || p_details);
    END LOOP;
END
$fn$;

-- A memory a new one (valid from p_from) may supersede: writable (an
-- active memory, not a resource or skill), and holding before p_from, so
-- that closing it at p_from leaves it the period it had.
CREATE FUNCTION engram._check_supersedable(r engram.memories, p_from timestamptz) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM engram._require_writable(r, 'supersede');
    IF r.valid_from > p_from THEN
        RAISE EXCEPTION 'memory % holds from %, after the new memory''s valid_from %; a memory supersedes only facts that held before it (pass a later valid_from, or leave it out for now)', r.id, r.valid_from, p_from
            USING ERRCODE = '22023';
    END IF;
END
$fn$;

-- Undoes a supersession or an invalidation: the memory's period is what
-- it was before its last closing (the valid_to it had, NULL while it
-- held, kept by that closing's 'invalidate' audit row, and when that end
-- was known), and the flag a supersession set is lifted (its trust comes
-- back). A superseded memory that its supersession did not close (it had
-- ended before) keeps its end. The reason, when given, is kept on the
-- memory (metadata engram_reopened); the audit row records the act.
-- Returns false when there is nothing to undo.
CREATE FUNCTION engram.reopen(
    owner text DEFAULT NULL,
    id uuid DEFAULT NULL,
    reason text DEFAULT NULL,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(reopen.owner, reopen.internal_type, reopen.scope_tags, true);
    r       engram.memories;
    v_superseded boolean;
    v_closed jsonb;
    v_to     timestamptz;
    v_at     timestamptz;
    v_note   jsonb;
    v_trust  real;
BEGIN
    PERFORM engram._check_short('reason', reopen.reason, 1000);
    PERFORM engram._lock_owner(v_owner);
    r := engram._locate(v_owner, reopen.id, reopen.internal_type, reopen.scope_tags, true);
    PERFORM engram._require_writable(r, 'reopen');
    v_superseded := coalesce(r.flag_reason LIKE 'superseded by %', false);
    -- The closing that set the current end: the supersession's own (by the
    -- memory the flag names), else the last one; only if the end is still
    -- the one it set.
    SELECT a.details INTO v_closed FROM engram.audit_log a
    WHERE a.owner = v_owner AND a.memory_id = r.id AND a.action = 'invalidate'
      AND (NOT v_superseded OR a.details ->> 'superseded_by' = substr(r.flag_reason, 15))
    ORDER BY a.id DESC LIMIT 1;
    IF (v_closed ->> 'valid_to')::timestamptz IS DISTINCT FROM r.valid_to THEN
        v_closed := NULL;
    END IF;
    IF NOT v_superseded AND (r.valid_to IS NULL OR v_closed IS NULL) THEN
        RETURN false;
    END IF;
    v_note := jsonb_build_object('engram_reopened',
                  jsonb_strip_nulls(jsonb_build_object('at', now(), 'valid_to', r.valid_to,
                                                       'superseded', v_superseded, 'reason', reopen.reason)));
    IF v_closed IS NOT NULL THEN
        v_to := (v_closed ->> 'previous_valid_to')::timestamptz;
        v_at := (v_closed ->> 'previous_invalidated_at')::timestamptz;
    ELSE
        v_to := r.valid_to;
        v_at := r.invalidated_at;
    END IF;
    IF v_superseded THEN
        v_trust := engram._trust_at(now(), engram._setting_trust_half_life_days(), r.author_type,
                                    r.created_at, greatest(r.flag_count - 1, 0));
    END IF;
    -- The trust and the note are computed beforehand: on Citus an UPDATE
    -- calls no STABLE function with the row's columns, nor any in a CASE.
    UPDATE engram.memories AS m SET
        valid_to = v_to,
        invalidated_at = CASE WHEN v_to IS NULL THEN NULL ELSE v_at END,
        flag_count = CASE WHEN v_superseded THEN greatest(m.flag_count - 1, 0) ELSE m.flag_count END,
        flagged_at = CASE WHEN v_superseded AND m.flag_count <= 1 THEN NULL ELSE m.flagged_at END,
        flag_reason = CASE WHEN v_superseded THEN NULL ELSE m.flag_reason END,
        trust_score = CASE WHEN v_superseded THEN v_trust ELSE m.trust_score END,
        metadata = m.metadata || v_note
    WHERE m.owner = v_owner AND m.id = r.id;
    PERFORM engram._audit(v_owner, 'reopen', r.id,
        jsonb_build_object('valid_to', r.valid_to, 'restored_valid_to', v_to, 'superseded', v_superseded));
    RETURN true;
END
$fn$;

CREATE FUNCTION engram.remember(
    owner text DEFAULT NULL,
    content text DEFAULT NULL,
    embedding vector DEFAULT NULL,
    kind text DEFAULT 'semantic',
    tags text[] DEFAULT '{}',
    metadata jsonb DEFAULT '{}',
    ttl interval DEFAULT NULL,
    importance real DEFAULT 0.5,
    author_type text DEFAULT 'agent',
    internal_type text DEFAULT NULL,
    session_id text DEFAULT NULL,
    force boolean DEFAULT false,
    conflict_threshold real DEFAULT NULL,
    access_level integer DEFAULT 5,
    occurred_at timestamptz DEFAULT NULL,
    valid_from timestamptz DEFAULT NULL,
    valid_to timestamptz DEFAULT NULL,
    supersedes uuid[] DEFAULT NULL)
RETURNS TABLE (status text, id uuid, conflicts jsonb)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner     text := engram._caller(remember.owner, remember.internal_type,
                                       engram._scope_of(coalesce(engram._tag_set(remember.tags), '{}')), true);
    v_kind      text := coalesce(remember.kind, 'semantic');
    v_tags      text[] := coalesce(engram._tag_set(remember.tags), '{}');
    v_metadata  jsonb := coalesce(remember.metadata, '{}');
    v_threshold real := coalesce(remember.conflict_threshold, engram._setting_conflict_threshold());
    v_scope     text[];
    v_key       bytea;
    v_id        uuid;
    v_stale     boolean;
    v_conflicts jsonb;
    v_superseded uuid[] := ARRAY(SELECT DISTINCT s FROM unnest(remember.supersedes) s WHERE s IS NOT NULL);
    v_unnamed   jsonb;
    v_occurred  timestamptz := coalesce(remember.occurred_at, now());
    v_valid     timestamptz := coalesce(remember.valid_from, remember.occurred_at, now());
BEGIN
    PERFORM engram._check_moment('occurred_at', remember.occurred_at);
    PERFORM engram._check_period(v_valid, remember.valid_to);
    PERFORM engram._check_memory(remember.content, v_kind, v_tags, jsonb_typeof(v_metadata),
        octet_length(v_metadata::text), remember.importance, remember.author_type, remember.internal_type);
    PERFORM engram._check_doc('metadata', v_metadata);
    PERFORM engram._check_author(remember.author_type);
    PERFORM engram._check_short('session_id', remember.session_id, 256);
    PERFORM engram._check_vector(remember.embedding, 'embedding');
    PERFORM engram._check_ttl(remember.ttl);
    IF NOT (v_threshold BETWEEN 0 AND 1) THEN
        RAISE EXCEPTION 'conflict_threshold % is out of range; pass a cosine similarity between 0 and 1', v_threshold
            USING ERRCODE = '22023';
    END IF;
    PERFORM engram._check_access_level(remember.access_level);

    PERFORM engram._lock_owner(v_owner);
    -- Under the owner's lock, and locking the images named: a release or a
    -- forget cannot erase them between this check and the write.
    IF v_metadata ? 'images' THEN
        PERFORM engram._check_image_refs(v_owner, v_metadata);
    END IF;
    v_scope := engram._scope_of(v_tags);
    v_key := engram._dedup_key(remember.content, remember.internal_type, v_scope, v_kind, remember.session_id);
    IF cardinality(v_superseded) > 100 THEN
        RAISE EXCEPTION 'supersedes names % memories; a memory supersedes at most 100', cardinality(v_superseded)
            USING ERRCODE = '54000';
    END IF;

    -- A retried call finds its own earlier write and creates nothing. An
    -- identical memory past its expiry is expired already: mark it, so that
    -- it neither counts as a duplicate nor blocks the new row.
    SELECT m.id, m.expires_at <= now() INTO v_id, v_stale FROM engram.memories m
    WHERE m.owner = v_owner AND m.status = 'active' AND m.dedup_key = v_key;
    IF v_stale THEN
        UPDATE engram.memories AS m SET status = 'expired', archived_at = now(), updated_at = now()
        WHERE m.id = v_id;
        PERFORM engram._audit(v_owner, 'expire', v_id, jsonb_build_object('count', 1));
        v_id := NULL;
    ELSIF v_id IS NOT NULL THEN
        RETURN QUERY SELECT 'duplicate'::text, v_id, NULL::jsonb;
        RETURN;
    END IF;

    -- The memories the caller says this one supersedes: each an active
    -- memory of the owner in the same context and scope that the caller
    -- may write, or nothing is written (locked until the end, so that none
    -- changes before it is closed).
    PERFORM engram._check_supersedable(
                engram._locate(v_owner, s, remember.internal_type, nullif(v_scope, '{}'), true), v_valid)
    FROM unnest(v_superseded) s;

    -- Episodic memories are events: two similar events never contradict.
    -- Each of the five nearest memories is a conflict when engram-core's
    -- conflict rules give a reason (similar, correction, changed_value,
    -- negation); the reasons are returned with it. The memories compared
    -- are those valid when the new one starts to hold (now, by default): a
    -- fact about 2020 is checked against what held in 2020.
    IF v_kind <> 'episodic' AND remember.embedding IS NOT NULL THEN
        -- (NULL, what holds now, unless the caller named a time: now() is
        -- new in every transaction, and a value would make each call's
        -- scope a new one, planned anew)
        SELECT jsonb_agg(jsonb_build_object('id', c.id, 'content', left(c.content, 2000),
                                            'similarity', round(c.similarity::numeric, 4), 'reasons', to_jsonb(c.reasons))
                         || CASE WHEN char_length(c.content) > 2000 THEN '{"truncated": true}'::jsonb ELSE '{}' END
                         ORDER BY c.similarity DESC)
        INTO v_conflicts
        FROM engram._conflicts(v_owner, remember.content, remember.embedding, remember.internal_type, v_scope,
                               coalesce(remember.valid_from, remember.occurred_at),
                               v_threshold) c;
        -- A conflict the caller named in supersedes is settled; any other
        -- refuses the write unless force says to store it alongside.
        SELECT jsonb_agg(c -> 'id') INTO v_unnamed FROM jsonb_array_elements(v_conflicts) c
        WHERE (c ->> 'id')::uuid <> ALL (v_superseded);
        IF v_unnamed IS NOT NULL AND NOT coalesce(remember.force, false) THEN
            RETURN QUERY SELECT 'conflict'::text, NULL::uuid, v_conflicts;
            RETURN;
        END IF;
        IF v_unnamed IS NOT NULL THEN
            v_metadata := v_metadata || jsonb_build_object('engram_forced_over', v_unnamed);
        END IF;
    END IF;

    INSERT INTO engram.memories AS m
        (owner, kind, internal_type, content, content_sha256, dedup_key, tags, metadata, embedding,
         author_type, importance, trust_score, session_id, expires_at, access_level,
         occurred_at, valid_from, valid_to, invalidated_at, ttl)
    VALUES
        (v_owner, v_kind, remember.internal_type, remember.content,
         sha256(convert_to(remember.content, 'UTF8'::name)), v_key, v_tags, v_metadata, remember.embedding,
         remember.author_type, remember.importance,
         engram._trust_at(now(), engram._setting_trust_half_life_days(), remember.author_type, now(), 0), remember.session_id,
         now() + remember.ttl, remember.access_level,
         v_occurred, v_valid, remember.valid_to, CASE WHEN remember.valid_to IS NOT NULL THEN now() END, remember.ttl)
    RETURNING m.id INTO v_id;
    PERFORM engram._audit(v_owner, 'remember', v_id,
        jsonb_build_object('kind', v_kind, 'forced', v_unnamed IS NOT NULL, 'supersedes', cardinality(v_superseded)));
    -- Exactly the memories named: flagged (the newer fact ranks above them)
    -- and valid until this one starts (default reads no longer return
    -- them; valid_at and known_at still do; engram.reopen undoes it).
    IF cardinality(v_superseded) > 0 THEN
        PERFORM engram._flag_rows(v_owner, v_superseded, 'superseded by ' || v_id,
                                  jsonb_build_object('superseded_by', v_id));
        PERFORM engram._close_validity(v_owner, v_superseded, v_valid, jsonb_build_object('superseded_by', v_id));
    END IF;
    RETURN QUERY SELECT 'created'::text, v_id, v_conflicts;
END
$fn$;

CREATE FUNCTION engram.update(
    owner text DEFAULT NULL,
    id uuid DEFAULT NULL,
    content text DEFAULT NULL,
    embedding vector DEFAULT NULL,
    tags text[] DEFAULT NULL,
    metadata jsonb DEFAULT NULL,
    reason text DEFAULT NULL,
    is_correction boolean DEFAULT true,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL,
    access_level integer DEFAULT NULL,
    valid_to timestamptz DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner   text := engram._caller(update.owner, update.internal_type, update.scope_tags, true);
    v_tags    text[] := engram._tag_set(update.tags);
    r         engram.memories;
    v_revision integer;
BEGIN
    PERFORM engram._check_short('reason', update.reason, 1000);
    PERFORM engram._lock_owner(v_owner);
    r := engram._locate(v_owner, update.id, update.internal_type, update.scope_tags, true);
    PERFORM engram._require_writable(r, 'update');
    IF update.content IS NULL AND update.embedding IS NULL AND update.tags IS NULL AND update.metadata IS NULL
       AND update.access_level IS NULL AND update.valid_to IS NULL THEN
        RAISE EXCEPTION 'nothing to update; pass content (with embedding), tags, metadata, access_level or valid_to'
            USING ERRCODE = '22023';
    END IF;
    PERFORM engram._check_period(r.valid_from, update.valid_to);
    IF update.access_level IS NOT NULL THEN
        PERFORM engram._check_access_level(update.access_level);
    END IF;
    PERFORM engram._check_new_content(r, update.content, update.embedding);
    IF v_tags IS NOT NULL THEN
        PERFORM engram._check_tags(v_tags, r.internal_type, r.tags);
    END IF;
    IF update.metadata IS NOT NULL THEN
        PERFORM engram._check_metadata(jsonb_typeof(update.metadata), octet_length(update.metadata::text));
        PERFORM engram._check_doc('metadata', update.metadata);
        PERFORM engram._check_image_refs(v_owner, update.metadata);
    END IF;

    -- valid_to alone says when the fact stopped holding: no new revision
    -- (the content is unchanged), one 'invalidate' audit row.
    IF update.content IS NOT NULL OR update.embedding IS NOT NULL OR update.tags IS NOT NULL
       OR update.metadata IS NOT NULL OR update.access_level IS NOT NULL THEN
        v_revision := engram._rewrite(r, v_owner, update.content, update.embedding, v_tags, update.metadata,
                                      update.access_level, update.reason, coalesce(update.is_correction, true), 'update');
    END IF;
    IF update.valid_to IS NOT NULL THEN
        UPDATE engram.memories AS m SET valid_to = update.valid_to, invalidated_at = now()
        WHERE m.owner = r.owner AND m.id = r.id;
        PERFORM engram._audit(v_owner, 'invalidate', r.id,
            jsonb_build_object('valid_to', update.valid_to, 'previous_valid_to', r.valid_to,
                               'previous_invalidated_at', r.invalidated_at));
    END IF;
    RETURN coalesce(v_revision, r.revision);
END
$fn$;

-- A new content and embedding for row r (update, resource_update): the
-- content within limits, a changed content with its new embedding, the
-- embedding of the database's dimension.
CREATE FUNCTION engram._check_new_content(r engram.memories, p_content text, p_embedding vector) RETURNS void
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    IF p_content IS NOT NULL THEN
        PERFORM engram._check_content(p_content);
        IF p_content <> r.content AND p_embedding IS NULL AND r.embedding IS NOT NULL THEN
            RAISE EXCEPTION 'a content change needs a new embedding; pass embedding => the embedding of the new content'
                USING ERRCODE = '22004';
        END IF;
    END IF;
    PERFORM engram._check_vector(p_embedding, 'embedding');
END
$fn$;

-- The write of update and resource_update, after their checks: the old
-- version becomes a revision, the row takes the new values (NULL keeps a
-- field), trust and staleness follow the correction count, one audit row
-- of p_action. Refuses content another active memory of the owner holds.
-- Returns the new revision number.
CREATE FUNCTION engram._rewrite(
    r engram.memories, p_owner text, p_content text, p_embedding vector, p_tags text[], p_metadata jsonb,
    p_access_level integer, p_reason text, p_is_correction boolean, p_action text)
RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    v_content text := coalesce(p_content, r.content);
    v_tags    text[] := coalesce(p_tags, r.tags);
    -- (a keyed memory's key is its address, whatever its content)
    v_key     bytea := CASE WHEN r.key IS NOT NULL
                            THEN engram._item_dedup_key(r.namespace, r.key, r.internal_type, engram._scope_of(v_tags))
                            ELSE engram._dedup_key(v_content, r.internal_type, engram._scope_of(v_tags), r.kind, r.session_id) END;
    v_other   uuid;
    v_correct integer := r.correction_count + CASE WHEN p_is_correction THEN 1 ELSE 0 END;
BEGIN
    SELECT m.id INTO v_other FROM engram.memories m
    WHERE m.owner = p_owner AND m.status = 'active' AND m.dedup_key = v_key AND m.id <> r.id;
    IF FOUND THEN
        RAISE EXCEPTION 'memory % already holds this content; forget one of the two or consolidate them', v_other
            USING ERRCODE = '23505';
    END IF;

    INSERT INTO engram.revisions AS v
        (memory_id, revision, owner, content, tags, metadata, written_at, reason, is_correction, changed_by, value)
    VALUES (r.id, r.revision, r.owner, r.content, r.tags, r.metadata, r.updated_at,
            p_reason, p_is_correction, engram._caller_role(), r.value);

    UPDATE engram.memories AS m SET
        content = v_content,
        content_sha256 = sha256(convert_to(v_content, 'UTF8'::name)),
        dedup_key = v_key,
        embedding = coalesce(p_embedding, m.embedding),
        tags = v_tags,
        metadata = engram._keep_images(p_metadata, m.metadata),
        access_level = coalesce(p_access_level, m.access_level),
        revision = m.revision + 1,
        correction_count = v_correct,
        trust_score = engram._trust_at(now(), engram._setting_trust_half_life_days(), m.author_type, m.created_at, m.flag_count),
        staleness_score = engram._staleness_at(now(), engram._setting_stale_after_days(), now(), v_correct, m.flag_count),
        updated_at = now()
    WHERE m.id = r.id;
    PERFORM engram._audit(p_owner, p_action, r.id,
        jsonb_build_object('revision', r.revision + 1, 'is_correction', p_is_correction,
                           'content_changed', v_content <> r.content));
    RETURN r.revision + 1;
END
$fn$;

CREATE FUNCTION engram.forget(
    owner text DEFAULT NULL,
    id uuid DEFAULT NULL,
    reason text DEFAULT NULL,
    hard boolean DEFAULT false,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(forget.owner, forget.internal_type, forget.scope_tags, true);
    r       engram.memories;
BEGIN
    PERFORM engram._check_short('reason', forget.reason, 1000);
    PERFORM engram._lock_owner(v_owner);
    r := engram._locate(v_owner, forget.id, forget.internal_type, forget.scope_tags, true);
    IF r.source = 'resource' THEN
        RAISE EXCEPTION 'memory % is a resource: people curate resources, agents only read them; delete it with engram.resource_delete (DELETE /api/resources/{id}, platform tokens)', r.id
            USING ERRCODE = '42501';
    END IF;
    IF coalesce(forget.hard, false) THEN
        -- Right to erasure: the row, its revisions (FK cascade) and its
        -- access stats go; the audit log never held its content.
        DELETE FROM engram.memory_access a WHERE a.owner = r.owner AND a.memory_id = r.id;
        DELETE FROM engram.memories m WHERE m.owner = r.owner AND m.id = r.id;
        PERFORM engram._audit(v_owner, 'forget', r.id, jsonb_build_object('hard', true));
        RETURN true;
    END IF;
    IF r.source <> 'memory' THEN
        PERFORM engram._require_writable(r, 'soft forget');
    END IF;
    IF r.status <> 'active' THEN
        RETURN false;
    END IF;
    UPDATE engram.memories AS m SET
        status = 'archived', archive_reason = 'forgotten', archive_note = forget.reason,
        archived_at = now(), updated_at = now()
    WHERE m.id = r.id;
    PERFORM engram._audit(v_owner, 'forget', r.id, jsonb_build_object('hard', false));
    RETURN true;
END
$fn$;

-- Flags the owner's writable memories `p_ids` as wrong or doubtful: trust
-- halves and staleness rises (engram-core's scoring), one audit row each.
-- The body of engram.flag, and of remember's superseding.
CREATE FUNCTION engram._flag_rows(p_owner text, p_ids uuid[], p_reason text, p_details jsonb) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    f record;
BEGIN
    FOR f IN
        UPDATE engram.memories AS m SET
            flag_count = m.flag_count + 1,
            flagged_at = now(),
            flag_reason = p_reason,
            trust_score = engram._trust_at(now(), engram._setting_trust_half_life_days(), m.author_type, m.created_at, m.flag_count + 1),
            staleness_score = greatest(m.staleness_score,
                engram._staleness_at(now(), engram._setting_stale_after_days(), m.updated_at, m.correction_count, m.flag_count + 1))
        WHERE m.id = ANY (p_ids) AND m.owner = p_owner AND m.source = 'memory'
        RETURNING m.id, m.flag_count
    LOOP
        PERFORM engram._audit(p_owner, 'flag', f.id, jsonb_build_object('flag_count', f.flag_count) || p_details);
    END LOOP;
END
$fn$;

CREATE FUNCTION engram.flag(
    owner text DEFAULT NULL,
    id uuid DEFAULT NULL,
    reason text DEFAULT NULL,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL)
RETURNS real
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(flag.owner, flag.internal_type, flag.scope_tags, true);
    r       engram.memories;
    v_trust real;
BEGIN
    IF flag.reason IS NULL OR btrim(flag.reason) = '' THEN
        RAISE EXCEPTION 'reason is required; say why the memory is wrong or doubtful (reason => ''...'')'
            USING ERRCODE = '22004';
    END IF;
    PERFORM engram._check_short('reason', flag.reason, 1000);
    PERFORM engram._lock_owner(v_owner);
    r := engram._locate(v_owner, flag.id, flag.internal_type, flag.scope_tags, true);
    PERFORM engram._require_writable(r, 'flag');
    PERFORM engram._flag_rows(v_owner, ARRAY[r.id], flag.reason, '{}');
    SELECT m.trust_score INTO v_trust FROM engram.memories m WHERE m.id = r.id;
    RETURN v_trust;
END
$fn$;

-- The active, writable memories `ids` of one owner, locked, all of one
-- internal type and scope; raises on any id the caller cannot see.
CREATE FUNCTION engram._merge_sources(p_owner text, p_ids uuid[], p_internal_type text, p_scope text[])
RETURNS SETOF engram.memories
LANGUAGE plpgsql AS $fn$
DECLARE
    r engram.memories;
    v_id uuid;
BEGIN
    PERFORM engram._check_merge(p_ids);
    FOREACH v_id IN ARRAY p_ids LOOP
        r := engram._locate(p_owner, v_id, p_internal_type, p_scope, true);
        PERFORM engram._require_writable(r, 'merge');
        RETURN NEXT r;
    END LOOP;
END
$fn$;

CREATE FUNCTION engram.consolidate(
    owner text DEFAULT NULL,
    ids uuid[] DEFAULT NULL,
    content text DEFAULT NULL,
    embedding vector DEFAULT NULL,
    tags text[] DEFAULT NULL,
    kind text DEFAULT NULL,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner  text := engram._caller(consolidate.owner, consolidate.internal_type, consolidate.scope_tags, true);
    v_id     uuid := gen_random_uuid();
    v_src    engram.memories[];
    v_tags   text[];
    v_kind   text;
    v_author text;
    v_key    bytea;
BEGIN
    PERFORM engram._lock_owner(v_owner);
    SELECT array_agg(s) INTO v_src
    FROM engram._merge_sources(v_owner, consolidate.ids, consolidate.internal_type, consolidate.scope_tags) s;
    -- Defaults: the union of the originals' tags, their common kind, and the
    -- least trusted author among them (a merge cannot launder trust).
    SELECT coalesce(engram._tag_set(consolidate.tags), array_agg(DISTINCT t ORDER BY t) FILTER (WHERE t IS NOT NULL), '{}')
    INTO v_tags FROM unnest(v_src) s LEFT JOIN LATERAL unnest(s.tags) t ON true;
    SELECT coalesce(consolidate.kind, CASE WHEN count(DISTINCT s.kind) = 1 THEN min(s.kind) ELSE 'semantic' END),
           CASE WHEN bool_or(s.author_type = 'agent') THEN 'agent'
                WHEN bool_or(s.author_type = 'system') THEN 'system' ELSE 'human' END
    INTO v_kind, v_author FROM unnest(v_src) s;
    PERFORM engram._check_memory(consolidate.content, v_kind, v_tags, 'object', 2, 0.5, v_author,
                                 consolidate.internal_type);
    PERFORM engram._check_vector(consolidate.embedding, 'embedding');

    UPDATE engram.memories AS m SET
        status = 'archived', archive_reason = 'consolidated', merged_into = v_id,
        archived_at = now(), updated_at = now()
    WHERE m.id = ANY (consolidate.ids);

    v_key := engram._dedup_key(consolidate.content, consolidate.internal_type, engram._scope_of(v_tags), v_kind, NULL);
    INSERT INTO engram.memories AS m
        (id, owner, kind, internal_type, content, content_sha256, dedup_key, tags, metadata, embedding,
         author_type, importance, trust_score, occurred_at)
    SELECT v_id, v_owner, v_kind, consolidate.internal_type, consolidate.content,
           sha256(convert_to(consolidate.content, 'UTF8'::name)), v_key, v_tags,
           -- The sources' images move to the merged memory, which holds
           -- them once the archived sources are purged.
           jsonb_build_object('consolidated_from', to_jsonb(consolidate.ids))
           -- (at most 32, the limit of one memory).
           || coalesce((SELECT jsonb_build_object('images', jsonb_agg(y.sha ORDER BY y.sha))
                        FROM (SELECT DISTINCT x.sha
                              FROM unnest(v_src) src, unnest(engram._image_refs(src.metadata, false)) AS x(sha)
                              ORDER BY x.sha LIMIT 32) y
                        HAVING count(*) > 0), '{}'),
           consolidate.embedding,
           v_author, max(s.importance), engram._trust_at(now(), engram._setting_trust_half_life_days(), v_author, now(), 0),
           -- what the merged memory tells happened when its latest source did
           max(s.occurred_at)
    FROM unnest(v_src) s;
    PERFORM engram._audit(v_owner, 'consolidate', v_id, jsonb_build_object('from', to_jsonb(consolidate.ids)));
    RETURN v_id;
EXCEPTION WHEN unique_violation THEN
    RAISE EXCEPTION 'another active memory already holds this content; consolidate it too, or change the content'
        USING ERRCODE = '23505';
END
$fn$;

CREATE FUNCTION engram.crystallize(
    owner text DEFAULT NULL,
    ids uuid[] DEFAULT NULL,
    name text DEFAULT NULL,
    content text DEFAULT NULL,
    embedding vector DEFAULT NULL,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(crystallize.owner, crystallize.internal_type, crystallize.scope_tags, true);
    v_id    uuid := gen_random_uuid();
    v_tags  text[];
    v_src   engram.memories[];
BEGIN
    IF crystallize.name IS NULL OR btrim(crystallize.name) = '' OR length(crystallize.name) > 200 THEN
        RAISE EXCEPTION 'name is required (1 to 200 characters); name the skill, e.g. name => ''deploy-to-staging'''
            USING ERRCODE = '22023';
    END IF;
    PERFORM engram._lock_owner(v_owner);
    SELECT array_agg(s) INTO v_src
    FROM engram._merge_sources(v_owner, crystallize.ids, crystallize.internal_type, crystallize.scope_tags) s;
    -- A skill keeps the originals' internal marker and scope, so it stays
    -- visible exactly where they were.
    v_tags := CASE crystallize.internal_type WHEN 'ghost' THEN '{ghost}'::text[]
                                             WHEN 'agent' THEN '{agent}'::text[] ELSE '{}'::text[] END
              || engram._scope_of(v_src[1].tags) || ARRAY['skill'];
    PERFORM engram._check_memory(crystallize.content, 'procedural', v_tags, 'object', 2, 0.5, 'agent',
                                 crystallize.internal_type);
    PERFORM engram._check_vector(crystallize.embedding, 'embedding');

    UPDATE engram.memories AS m SET merged_into = v_id WHERE m.id = ANY (crystallize.ids);
    INSERT INTO engram.memories AS m
        (id, owner, kind, source, internal_type, content, content_sha256, dedup_key, tags, metadata,
         embedding, author_type, importance, trust_score)
    VALUES (v_id, v_owner, 'procedural', 'skill', crystallize.internal_type, crystallize.content,
            sha256(convert_to(crystallize.content, 'UTF8'::name)),
            engram._dedup_key(crystallize.content, crystallize.internal_type, engram._scope_of(v_tags), 'procedural', NULL),
            v_tags, jsonb_build_object('name', crystallize.name, 'crystallized_from', to_jsonb(crystallize.ids)),
            crystallize.embedding, 'agent', 0.5, engram._trust_at(now(), engram._setting_trust_half_life_days(), 'agent', now(), 0));
    PERFORM engram._audit(v_owner, 'crystallize', v_id, jsonb_build_object('from', to_jsonb(crystallize.ids)));
    RETURN v_id;
EXCEPTION WHEN unique_violation THEN
    RAISE EXCEPTION 'an active memory already holds this skill content; recall it instead of crystallizing again'
        USING ERRCODE = '23505';
END
$fn$;
