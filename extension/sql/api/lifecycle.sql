---------------------------------------------------------------------------
-- lifecycle (for DBAs; pg_cron runs these)
---------------------------------------------------------------------------

CREATE FUNCTION engram.expire() RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    v_job   text := engram._job_owner();
    v_count bigint;
BEGIN
    UPDATE engram.memories AS m SET status = 'expired', archived_at = now(), updated_at = now()
    WHERE m.status = 'active' AND m.expires_at IS NOT NULL AND m.expires_at <= now()
      AND (v_job IS NULL OR m.owner = v_job);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count > 0 THEN
        PERFORM engram._audit(v_job, 'expire', NULL, jsonb_build_object('count', v_count));
    END IF;
    RETURN v_count;
END
$fn$;

-- Recomputes trust (age decay) and staleness (time since last access) of
-- active memories; rows whose scores move by less than 0.001 are left alone
-- so a daily rescore does not rewrite the whole table.
CREATE FUNCTION engram.rescore() RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    v_job   text := engram._job_owner();
    v_count bigint;
    -- Values, not calls: on Citus the statement runs on the shards, where
    -- this session's settings are unknown.
    v_now        timestamptz := now();
    v_half_life  float8 := engram._setting_trust_half_life_days();
    v_stale_days float8 := engram._setting_stale_after_days();
BEGIN
    WITH s AS (
        SELECT m.owner, m.id,
               engram._trust_at(v_now, v_half_life, m.author_type, m.created_at, m.flag_count) AS trust,
               engram._staleness_at(v_now, v_stale_days, greatest(coalesce(a.last_accessed_at, m.updated_at), m.updated_at),
                                    m.correction_count, m.flag_count) AS stale
        FROM engram.memories m
        LEFT JOIN engram.memory_access a ON a.owner = m.owner AND a.memory_id = m.id
        WHERE m.status = 'active' AND (v_job IS NULL OR m.owner = v_job)
    )
    UPDATE engram.memories AS m SET trust_score = s.trust, staleness_score = s.stale
    FROM s
    WHERE m.owner = s.owner AND m.id = s.id
      AND (abs(m.trust_score - s.trust) >= 0.001 OR abs(m.staleness_score - s.stale) >= 0.001);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    PERFORM engram._audit(v_job, 'rescore', NULL, jsonb_build_object('count', v_count));
    RETURN v_count;
END
$fn$;

CREATE FUNCTION engram.purge(older_than interval DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    v_count bigint;
BEGIN
    PERFORM engram._require_privileged('purge');
    IF purge.older_than IS NULL OR purge.older_than < interval '0' THEN
        RAISE EXCEPTION 'older_than must be a non-negative interval, e.g. purge(older_than => ''90 days'')'
            USING ERRCODE = '22023';
    END IF;
    WITH gone AS (
        DELETE FROM engram.memories m
        WHERE m.status <> 'active' AND coalesce(m.archived_at, m.updated_at) < now() - purge.older_than
        RETURNING m.owner, m.id
    ), stats AS (
        DELETE FROM engram.memory_access a USING gone WHERE a.owner = gone.owner AND a.memory_id = gone.id
    )
    SELECT count(*) INTO v_count FROM gone;
    -- Search misses are kept as long as retired memories.
    DELETE FROM engram.misses x WHERE x.at < now() - purge.older_than;
    IF v_count > 0 THEN
        PERFORM engram._audit(NULL, 'purge', NULL,
            jsonb_build_object('count', v_count, 'older_than', purge.older_than::text));
    END IF;
    RETURN v_count;
END
$fn$;

-- Right to erasure for a whole owner, for DBAs: every row that belongs to
-- `owner` goes in one transaction: memories (their revisions, events and
-- publications by foreign key, their scope-list entries and entities by
-- trigger), access
-- statistics, misses, slots, workspaces and states, ghost settings, grants
-- given by or to the owner, group memberships, tokens, and the owner's
-- audit rows. What stays is one audit row recording the erasure (who, when,
-- how many rows of each kind), and what other owners hold that names it:
-- their own audit rows (a grant to it, a group membership change), their
-- ghost memories of a conversation with it (tagged ghost_owner:<name>).
-- Those are the other owners' records; docs/OPERATIONS.md says so.
CREATE FUNCTION engram.erase_owner(owner text DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner     text := nullif(btrim(erase_owner.owner), '');
    v_counts    jsonb := '{}';
    n           bigint;
    v_erased_at timestamptz;
BEGIN
    PERFORM engram._require_privileged('erase_owner');
    IF v_owner IS NULL THEN
        RAISE EXCEPTION 'erase_owner needs the owner to erase, e.g. SELECT engram.erase_owner(owner => ''alice'')'
            USING ERRCODE = '22004';
    END IF;
    -- Waits for the owner's writes in flight; later ones wait for this one
    -- and then fail (engram._lock_owner sees the tombstone left below).
    INSERT INTO engram.owner_locks AS l (owner) VALUES (v_owner) ON CONFLICT DO NOTHING;
    PERFORM 1 FROM engram.owner_locks l WHERE l.owner = v_owner FOR UPDATE;
    DELETE FROM engram.memory_access a WHERE a.owner = v_owner;
    GET DIAGNOSTICS n = ROW_COUNT;
    v_counts := v_counts || jsonb_build_object('access_rows', n);
    -- The text index first: the memories' triggers then find nothing of
    -- it to count down, row after row (_text_drop).
    DELETE FROM engram.text_postings p WHERE p.owner = v_owner;
    DELETE FROM engram.text_terms t WHERE t.owner = v_owner;
    DELETE FROM engram.text_sizes z WHERE z.owner = v_owner;
    DELETE FROM engram.memories m WHERE m.owner = v_owner;
    GET DIAGNOSTICS n = ROW_COUNT;
    v_counts := v_counts || jsonb_build_object('memories', n);
    -- Rows of other tables that name the owner (revisions, events and
    -- publications of its memories went with them).
    DELETE FROM engram.revisions r WHERE r.owner = v_owner;
    DELETE FROM engram.events e WHERE e.owner = v_owner;
    DELETE FROM engram.publications p WHERE p.owner = v_owner;
    DELETE FROM engram.slots x WHERE x.owner = v_owner;
    GET DIAGNOSTICS n = ROW_COUNT;
    v_counts := v_counts || jsonb_build_object('slots', n);
    DELETE FROM engram.workspaces w WHERE w.owner = v_owner;  -- states by foreign key
    GET DIAGNOSTICS n = ROW_COUNT;
    v_counts := v_counts || jsonb_build_object('workspaces', n);
    DELETE FROM engram.states x WHERE x.owner = v_owner;
    DELETE FROM engram.ghost_settings g WHERE g.owner = v_owner;
    DELETE FROM engram.grants g WHERE g.owner = v_owner OR g.accessor = v_owner;
    GET DIAGNOSTICS n = ROW_COUNT;
    v_counts := v_counts || jsonb_build_object('grants', n);
    DELETE FROM engram.group_members g WHERE g.member = v_owner;
    DELETE FROM engram.tokens t WHERE t.owner = v_owner;
    GET DIAGNOSTICS n = ROW_COUNT;
    v_counts := v_counts || jsonb_build_object('tokens', n);
    DELETE FROM engram.misses x WHERE x.owner = v_owner;
    -- Images only the erased memories held went with them
    -- (image_refs_delete); these are the rest, bytes and embeddings included.
    DELETE FROM engram.image_holds h WHERE h.owner = v_owner;
    DELETE FROM engram.image_embeddings e WHERE e.owner = v_owner;
    DELETE FROM engram.image_data d WHERE d.owner = v_owner;
    DELETE FROM engram.images i WHERE i.owner = v_owner;
    GET DIAGNOSTICS n = ROW_COUNT;
    v_counts := v_counts || jsonb_build_object('images', n);
    DELETE FROM engram.memory_entities e WHERE e.owner = v_owner;  -- (their memories' triggers took them)
    DELETE FROM engram.scope_entries e WHERE e.owner = v_owner;
    DELETE FROM engram.scope_blocks b WHERE b.owner = v_owner;
    DELETE FROM engram.scope_sizes z WHERE z.owner = v_owner;
    DELETE FROM engram.audit_log l WHERE l.owner = v_owner;
    GET DIAGNOSTICS n = ROW_COUNT;
    v_counts := v_counts || jsonb_build_object('audit_rows', n);
    -- The lock row stays as a tombstone: the owner's name, when it was
    -- erased, and zero usage (like the audit row of the erasure).
    v_erased_at := clock_timestamp();  -- (a variable: Citus refuses volatile functions in UPDATE)
    UPDATE engram.owner_locks AS l SET erased_at = v_erased_at, memories = 0, events = 0, image_bytes = 0,
                                       slots = 0, workspaces = 0, states = 0
    WHERE l.owner = v_owner;
    PERFORM engram._audit(v_owner, 'erase_owner', NULL, v_counts);
    RETURN v_counts;
END
$fn$;

-- A user's erasure of their own memories (self-service; erase_owner is the
-- DBA's erasure of everything of an owner): every memory of the caller's
-- owner, in every context, with its revisions, access statistics,
-- entities, scope-list entries and the images only it held (by foreign
-- key and trigger), and the owner's recorded search misses. Tokens,
-- slots, workspaces, states, grants, the audit log and the resources a
-- platform published for the owner stay: they are not the user's
-- memories (a platform withdraws its resources with resource_delete). One audit row records how many went. Returns the counts.
CREATE FUNCTION engram.erase_memories(owner text DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(erase_memories.owner, NULL, NULL, true);
    v_memories bigint;
    v_misses bigint;
BEGIN
    IF jsonb_typeof(engram._binding() -> 'internal') = 'object' THEN
        RAISE EXCEPTION 'an agent or ghost conversation cannot erase its owner''s memories; the user does, bound without an internal context'
            USING ERRCODE = '42501';
    END IF;
    PERFORM engram._lock_owner(v_owner);
    DELETE FROM engram.memory_access a WHERE a.owner = v_owner;
    DELETE FROM engram.memories m WHERE m.owner = v_owner AND m.source <> 'resource';
    GET DIAGNOSTICS v_memories = ROW_COUNT;
    DELETE FROM engram.misses x WHERE x.owner = v_owner;
    GET DIAGNOSTICS v_misses = ROW_COUNT;
    PERFORM engram._audit(v_owner, 'erase_memories', NULL,
        jsonb_build_object('memories', v_memories, 'misses', v_misses));
    RETURN jsonb_build_object('memories', v_memories, 'misses', v_misses);
END
$fn$;

-- Export and import (engram-mcp export / import; docs/OPERATIONS.md): one
-- JSON object per memory, with its embedding (pgvector's text form, exact),
-- tags, metadata, status and lifecycle columns, and its revisions. For
-- DBAs: both are not executable by PUBLIC.

-- A page of `owner`'s memories (every status), in id order after `after`.
CREATE FUNCTION engram.export_memories(owner text DEFAULT NULL, after uuid DEFAULT NULL, lim integer DEFAULT 500)
RETURNS TABLE (id uuid, memory jsonb)
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    PERFORM engram._require_privileged('export_memories');
    IF export_memories.owner IS NULL OR btrim(export_memories.owner) = '' THEN
        RAISE EXCEPTION 'export_memories needs the owner to export, e.g. export_memories(owner => ''alice'')'
            USING ERRCODE = '22004';
    END IF;
    RETURN QUERY
    SELECT m.id,
           to_jsonb(m) - 'content_tsv' - 'content_sha256' - 'dedup_key'
           || jsonb_build_object('revisions', coalesce(
                  (SELECT jsonb_agg(to_jsonb(r) - 'owner' - 'memory_id' ORDER BY r.revision)
                   FROM engram.revisions r WHERE r.owner = m.owner AND r.memory_id = m.id), '[]'::jsonb))
    FROM engram.memories m
    WHERE m.owner = export_memories.owner AND (export_memories.after IS NULL OR m.id > export_memories.after)
    ORDER BY m.id
    LIMIT least(greatest(coalesce(export_memories.lim, 500), 1), 10000);
END
$fn$;

-- Writes one exported memory for `owner` (or the owner it names), keeping
-- its id, timestamps, status and revisions; `embedding` replaces the
-- exported one (a re-embedding with another model). Idempotent: 'exists'
-- when the id is already this owner's, 'duplicate' when an active memory
-- with the same content and scope is, else 'created'. An id that belongs
-- to another owner is refused.
CREATE FUNCTION engram.import_memory(owner text DEFAULT NULL, memory jsonb DEFAULT NULL, embedding vector DEFAULT NULL,
                                     keep_provenance boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := nullif(btrim(import_memory.owner), '');
    r       engram.memories;
    v_other text;
    v_vec   vector;
BEGIN
    PERFORM engram._require_privileged('import_memory');
    IF import_memory.memory IS NULL OR jsonb_typeof(import_memory.memory) <> 'object'
       OR NOT (import_memory.memory ? 'id') OR NOT (import_memory.memory ? 'content') THEN
        RAISE EXCEPTION 'import_memory needs one exported memory: a JSON object with at least id and content (engram.export_memories writes them)'
            USING ERRCODE = '22023';
    END IF;
    -- The owner is the importer's to name, never the file's: a file cannot
    -- pick whose memories it joins (the owner a line names is ignored;
    -- engram-mcp import checks that a file names one owner, or takes --owner).
    IF v_owner IS NULL THEN
        RAISE EXCEPTION 'import_memory needs the owner to import into: pass owner => ''alice'' (engram-mcp import --owner)'
            USING ERRCODE = '22004';
    END IF;
    -- The embedding is read apart: the row type's column has the database's
    -- dimension, and an export from another model must reach the check
    -- below (a clear error), not a cast error.
    r := jsonb_populate_record(NULL::engram.memories, import_memory.memory - 'content_tsv' - 'embedding');
    -- Provenance (source, author, trust, revision authors) comes from the
    -- file only when the DBA says so (keep_provenance => true): by default
    -- an imported memory is a plain memory written by an agent, its trust
    -- computed anew from its age, corrections and flags, and its revisions
    -- changed by the importing role.
    IF NOT coalesce(import_memory.keep_provenance, false) THEN
        r.source := 'memory';
        r.author_type := 'agent';
        r.trust_score := NULL;
    END IF;
    -- What a hand-written or older file leaves out takes remember's defaults.
    r.kind := coalesce(r.kind, 'semantic');
    r.source := coalesce(r.source, 'memory');
    r.tags := coalesce(engram._tag_set(r.tags), '{}');
    r.metadata := coalesce(r.metadata, '{}');
    r.importance := coalesce(r.importance, 0.5);
    r.author_type := coalesce(r.author_type, 'agent');
    PERFORM engram._check_memory(r.content, r.kind, r.tags, jsonb_typeof(r.metadata),
        octet_length(r.metadata::text), r.importance, r.author_type, r.internal_type);
    PERFORM engram._check_doc('metadata', r.metadata);
    -- An export older than 0.13.0 has no time columns: a memory happened
    -- and began to hold when it was written.
    r.occurred_at := coalesce(r.occurred_at, r.created_at, now());
    r.valid_from := coalesce(r.valid_from, r.occurred_at);
    PERFORM engram._check_moment('occurred_at', r.occurred_at);
    PERFORM engram._check_period(r.valid_from, r.valid_to);
    PERFORM engram._check_moment('invalidated_at', r.invalidated_at);
    r.invalidated_at := CASE WHEN r.valid_to IS NOT NULL THEN coalesce(r.invalidated_at, r.updated_at, now()) END;
    -- A keyed memory keeps its address (an export older than 0.16.0 has none).
    IF r.key IS NOT NULL OR r.namespace IS NOT NULL THEN
        PERFORM engram._check_path('namespace', r.namespace, false);
        PERFORM engram._check_key(r.key);
    END IF;
    IF r.value IS NOT NULL THEN
        PERFORM engram._check_metadata(jsonb_typeof(r.value), octet_length(r.value::text));
        PERFORM engram._check_doc('value', r.value);
    END IF;
    PERFORM engram._check_ttl(r.ttl);
    v_vec := coalesce(import_memory.embedding, (import_memory.memory ->> 'embedding')::vector);
    PERFORM engram._check_vector(v_vec, 'embedding');
    PERFORM engram._lock_owner(v_owner);
    SELECT m.owner INTO v_other FROM engram.memories m WHERE m.id = r.id;
    IF v_other = v_owner THEN
        RETURN 'exists';
    ELSIF v_other IS NOT NULL THEN
        RAISE EXCEPTION 'memory % belongs to another owner; import into that owner, or export again with new ids', r.id
            USING ERRCODE = '23505';
    END IF;
    r.dedup_key := CASE WHEN r.key IS NOT NULL
                        THEN engram._item_dedup_key(r.namespace, r.key, r.internal_type, engram._scope_of(r.tags))
                        ELSE engram._dedup_key(r.content, r.internal_type, engram._scope_of(r.tags), r.kind, r.session_id) END;
    IF coalesce(r.status, 'active') = 'active' AND EXISTS (
        SELECT 1 FROM engram.memories m WHERE m.owner = v_owner AND m.status = 'active' AND m.dedup_key = r.dedup_key) THEN
        RETURN 'duplicate';
    END IF;
    INSERT INTO engram.memories
        (id, owner, kind, source, internal_type, content, content_sha256, dedup_key, tags, metadata, embedding,
         author_type, importance, status, archive_reason, archive_note, merged_into, flagged_at, flag_count,
         flag_reason, correction_count, revision, trust_score, staleness_score, session_id, created_at,
         updated_at, expires_at, archived_at, access_level, occurred_at, valid_from, valid_to, invalidated_at,
         namespace, key, value, ttl)
    VALUES
        (r.id, v_owner, r.kind, r.source, r.internal_type, r.content,
         sha256(convert_to(r.content, 'UTF8'::name)), r.dedup_key, r.tags,
         r.metadata, v_vec, r.author_type, r.importance,
         coalesce(r.status, 'active'), r.archive_reason, r.archive_note, r.merged_into, r.flagged_at,
         coalesce(r.flag_count, 0), r.flag_reason, coalesce(r.correction_count, 0), coalesce(r.revision, 1),
         coalesce(r.trust_score, engram._trust_at(now(), engram._setting_trust_half_life_days(), r.author_type, coalesce(r.created_at, now()), coalesce(r.flag_count, 0))),
         coalesce(r.staleness_score, 0), r.session_id, coalesce(r.created_at, now()),
         coalesce(r.updated_at, now()), r.expires_at, r.archived_at, coalesce(r.access_level, 5),
         r.occurred_at, r.valid_from, r.valid_to, r.invalidated_at, r.namespace, r.key, r.value, r.ttl);
    INSERT INTO engram.revisions (memory_id, revision, owner, content, tags, metadata, written_at, replaced_at,
                                  reason, is_correction, changed_by, value)
    SELECT r.id, v.revision, v_owner, v.content, coalesce(v.tags, '{}'), coalesce(v.metadata, '{}'),
           coalesce(v.written_at, now()), coalesce(v.replaced_at, now()), left(v.reason, 1000),
           coalesce(v.is_correction, false),
           CASE WHEN coalesce(import_memory.keep_provenance, false) THEN coalesce(v.changed_by, engram._caller_role())
                ELSE engram._caller_role() END,
           v.value
    FROM jsonb_populate_recordset(NULL::engram.revisions,
             CASE WHEN jsonb_typeof(import_memory.memory -> 'revisions') = 'array'
                  THEN import_memory.memory -> 'revisions' ELSE '[]' END) v;
    PERFORM engram._audit(v_owner, 'import', r.id,
        jsonb_build_object('reembedded', import_memory.embedding IS NOT NULL,
                           'kept_provenance', coalesce(import_memory.keep_provenance, false)));
    RETURN 'created';
END
$fn$;

-- The HNSW index's own recall, measured, sets the smallest ef_search of
-- engram's walks (engram.hnsw_ef_search) for this database. pgvector's
-- default 40 reaches recall@10 ~0.98 at 100k rows of the bench's data and
-- ~0.7 at 1M: what an index needs depends on its size and its data, so it
-- is measured on the data, not guessed. `samples` stored memories (random,
-- with an embedding) serve as queries; each one's 10 nearest other
-- memories by exact scan are compared with the index's at ef_search 40,
-- 64, 100, 160, 250, 400, 640 and 1000 (unfiltered, iterative scan off, as
-- the bench calibrates raw pgvector); the smallest ef whose mean recall
-- reaches target_recall (1000 when none does) becomes the database's
-- default (ALTER DATABASE ... SET, for new sessions) and this session's.
-- A hit counts when it is no farther than the exact 10th (ties are equal).
-- Filtered walks size their ef from this floor (engram._knn). For DBAs,
-- after a bulk load and now and then as the index grows (pg_cron); an
-- exact scan per sample: ~1 s per sample at 1M rows.
CREATE FUNCTION engram.tune_search(target_recall real DEFAULT 0.95, samples integer DEFAULT 50)
RETURNS jsonb
LANGUAGE plpgsql
-- Restored when the function returns (the set_config calls below are
-- local to it): the caller's session keeps its own.
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
SET enable_seqscan = on
SET enable_indexscan = on
AS $fn$
DECLARE
    c_efs    CONSTANT integer[] := '{40,64,100,160,250,400,640,1000}';
    v_ids    uuid[];
    v_vecs   vector[];
    v_edge   float8[];
    v_need   integer[];
    v_ef     integer;
    v_hits   bigint;
    v_sum    float8;
    v_recall float8;
    v_tried  jsonb := '[]';
    i        integer;
BEGIN
    PERFORM engram._require_privileged('tune_search');
    IF tune_search.target_recall IS NULL OR NOT (tune_search.target_recall > 0 AND tune_search.target_recall <= 1) THEN
        RAISE EXCEPTION 'target_recall % is out of range; pass a recall@10 above 0 and at most 1, e.g. 0.95',
            coalesce(tune_search.target_recall::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    IF tune_search.samples IS NULL OR tune_search.samples NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'samples % is out of range; pass 1 to 1000 (50 measures recall within about 0.03)',
            coalesce(tune_search.samples::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    IF current_setting('transaction_read_only')::boolean THEN
        RAISE EXCEPTION 'tune_search writes the database''s setting; this transaction is read-only'
            USING ERRCODE = '25006', HINT = 'Run it on the primary, outside a read-only transaction.';
    END IF;
    IF engram._hnsw_build() IS NULL THEN
        RAISE EXCEPTION 'the HNSW index engram.memories_embedding_hnsw is missing or not valid: there is no index to measure'
            USING ERRCODE = '55000',
                  HINT = 'CREATE INDEX memories_embedding_hnsw ON engram.memories USING hnsw (embedding vector_cosine_ops); then run it again.';
    END IF;
    IF engram._is_distributed() THEN
        RAISE EXCEPTION 'tune_search measures one node''s index; on Citus the walks run on the workers'
            USING ERRCODE = '0A000',
                  HINT = 'Set engram.hnsw_ef_search in the workers'' databases (ALTER DATABASE ... SET).';
    END IF;
    SELECT array_agg(s.id), array_agg(s.embedding) INTO v_ids, v_vecs
    FROM (SELECT m.id, m.embedding FROM engram.memories m WHERE m.embedding IS NOT NULL
          ORDER BY random() LIMIT tune_search.samples) s;
    IF v_ids IS NULL THEN
        RAISE EXCEPTION 'no memory has an embedding yet: there is no index to measure'
            USING ERRCODE = '55000', HINT = 'Load memories first, then run SELECT engram.tune_search();';
    END IF;
    -- Ground truth: each sample's 10 nearest other memories by an exact
    -- scan (MATERIALIZED keeps the index out): how many there are, and the
    -- 10th's distance.
    FOR i IN 1 .. cardinality(v_ids) LOOP
        SELECT count(*), max(x.d) INTO v_hits, v_sum
        FROM (WITH c AS MATERIALIZED (SELECT m.embedding <=> v_vecs[i] AS d FROM engram.memories m
                                      WHERE m.embedding IS NOT NULL AND m.id <> v_ids[i])
              SELECT c.d FROM c ORDER BY c.d LIMIT 10) x;
        v_need[i] := v_hits;
        v_edge[i] := v_sum;
    END LOOP;
    IF NOT (0 < ANY (v_need)) THEN
        RAISE EXCEPTION 'too few memories with an embedding to measure recall (a sample needs other memories near it)'
            USING ERRCODE = '55000', HINT = 'Run it once the table holds a few thousand memories.';
    END IF;
    -- The index, unfiltered, at growing ef_search (no sequential scan: on a
    -- small table the planner would sort instead and measure nothing).
    PERFORM set_config('enable_seqscan', 'off', true);
    FOREACH v_ef IN ARRAY c_efs LOOP
        PERFORM set_config('hnsw.ef_search', v_ef::text, true);
        v_sum := 0;
        FOR i IN 1 .. cardinality(v_ids) LOOP
            CONTINUE WHEN v_need[i] = 0;
            SELECT count(*) FILTER (WHERE y.d <= v_edge[i] + 1e-9) INTO v_hits
            FROM (SELECT x.d FROM (SELECT m.id, m.embedding <=> v_vecs[i] AS d FROM engram.memories m
                                   ORDER BY m.embedding <=> v_vecs[i] LIMIT 11) x
                  WHERE x.id <> v_ids[i] LIMIT 10) y;
            v_sum := v_sum + v_hits::float8 / v_need[i];
        END LOOP;
        v_recall := v_sum / greatest((SELECT count(*) FROM unnest(v_need) n WHERE n > 0), 1);
        v_tried := v_tried || jsonb_build_object('ef_search', v_ef, 'recall', round(v_recall::numeric, 3));
        EXIT WHEN v_recall >= tune_search.target_recall;
    END LOOP;
    IF v_recall < tune_search.target_recall THEN
        RAISE WARNING 'no ef_search up to 1000 reaches recall@10 % on this index (% at 1000); the index itself limits recall',
            tune_search.target_recall, round(v_recall::numeric, 3)
            USING HINT = 'Rebuild the HNSW index with a larger m and ef_construction (see docs/OPERATIONS.md).';
    END IF;
    EXECUTE format('ALTER DATABASE %I SET engram.hnsw_ef_search = %s', current_database(), v_ef);
    PERFORM set_config('engram.hnsw_ef_search', v_ef::text, false);
    PERFORM engram._save_configuration();
    RETURN jsonb_build_object('ef_search', v_ef, 'recall', round(v_recall::numeric, 3),
                              'reached', v_recall >= tune_search.target_recall,
                              'target_recall', tune_search.target_recall, 'samples', cardinality(v_ids),
                              'tried', v_tried);
END
$fn$;
