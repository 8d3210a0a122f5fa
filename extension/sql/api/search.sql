---------------------------------------------------------------------------
-- reads
---------------------------------------------------------------------------

CREATE TYPE engram.search_hit AS (
    id uuid, content text, kind text, tags text[], metadata jsonb,
    similarity real, score real, trust_score real, staleness_score real, created_at timestamptz,
    source text, occurred_at timestamptz, valid_from timestamptz, valid_to timestamptz,
    namespace text[], key text, value jsonb);

-- Counts an access for each id, in the stats table beside the memories
-- (never in the rows the HNSW index points at). Skipped in read-only
-- transactions (hot standby, SET TRANSACTION READ ONLY).
CREATE FUNCTION engram._touch(p_owner text, p_ids uuid[]) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    IF current_setting('transaction_read_only')::boolean OR p_ids IS NULL OR cardinality(p_ids) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO engram.memory_access AS a (memory_id, owner, access_count, last_accessed_at)
    SELECT DISTINCT i, p_owner, 1, now() FROM unnest(p_ids) i
    ORDER BY 1  -- a fixed lock order: concurrent searches never deadlock
    ON CONFLICT (owner, memory_id) DO UPDATE
        SET access_count = a.access_count + 1, last_accessed_at = excluded.last_accessed_at;
END
$fn$;

-- The access statistics of an owner's memories (of p_ids only, when
-- given), for readers that show them. Empty on a hot standby: memory_access
-- is UNLOGGED (see schema.sql), and Postgres refuses to even plan a query
-- that names an unlogged table during recovery, so the readers (recall,
-- list) name this function instead and work on a standby, with zero
-- counts. plpgsql plans the SELECT only when it runs.
CREATE FUNCTION engram._accesses(p_owner text, p_ids uuid[] DEFAULT NULL)
RETURNS TABLE (memory_id uuid, access_count bigint, last_accessed_at timestamptz)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    IF pg_catalog.pg_is_in_recovery() THEN
        RETURN;
    END IF;
    IF p_owner IS NULL THEN
        RETURN QUERY
        SELECT a.memory_id, a.access_count, a.last_accessed_at FROM engram.memory_access a
        WHERE p_ids IS NULL OR a.memory_id = ANY (p_ids);
        RETURN;
    END IF;
    -- An owner's by a plain equality: one shard on Citus.
    RETURN QUERY
    SELECT a.memory_id, a.access_count, a.last_accessed_at FROM engram.memory_access a
    WHERE a.owner = p_owner AND (p_ids IS NULL OR a.memory_id = ANY (p_ids));
END
$fn$;

-- Records a search that found nothing (engram.misses, shown by stats), like
-- _touch skipped in read-only transactions. The query text is cut at 1000
-- characters.
-- Bounded per owner without counting: every 100th miss of the database
-- (by id) trims its owner's to the newest 1000. Not recorded for an owner
-- erased while the search's transaction ran.
CREATE FUNCTION engram._miss(p_owner text, p_text text, p_had_embedding boolean) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_id bigint;
BEGIN
    IF NOT current_setting('transaction_read_only')::boolean THEN
        -- A metric: a failure to record it must never fail the search.
        BEGIN
            INSERT INTO engram.misses (owner, query_text, had_embedding)
            SELECT p_owner, left(nullif(btrim(p_text), ''), 1000), p_had_embedding
            WHERE NOT EXISTS (SELECT 1 FROM engram.owner_locks l
                              WHERE l.owner = p_owner AND l.erased_at >= transaction_timestamp())
            RETURNING id INTO v_id;
            IF v_id % 100 = 0 THEN
                DELETE FROM engram.misses x
                WHERE x.owner = p_owner AND x.id < (SELECT y.id FROM engram.misses y WHERE y.owner = p_owner
                                                    ORDER BY y.id DESC OFFSET 999 LIMIT 1);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'engram: search miss not recorded: %', SQLERRM;
        END;
    END IF;
END
$fn$;

-- Candidates per search leg for k results: k; at least 100 for a hybrid
-- query, so that a memory near the query in meaning and in words is in
-- both legs' pools and gets both its cosine and its text score; at
-- least 50 when the query names a time, so that in-window memories a
-- little further down are there to boost.
CREATE FUNCTION engram._pool(p_k integer, p_hybrid boolean, p_windowed boolean) RETURNS integer
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    RETURN greatest(p_k, CASE WHEN p_hybrid THEN 100 ELSE 0 END, CASE WHEN p_windowed THEN 50 ELSE 0 END);
END
$fn$;

-- The query's exact tokens (codes, ids, numbers) as a tsquery of
-- alternatives; NULL when it has none: a row holding one of them gets
-- engram-core's EXACT_MATCH_BONUS on its text score.
CREATE FUNCTION engram._exact_query(p_text text) RETURNS tsquery
LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
    v tsquery;
BEGIN
    IF nullif(btrim(p_text), '') IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT string_agg('(' || q::text || ')', ' | ')::tsquery INTO v
    FROM unnest(engram._exact_tokens(p_text)) t, plainto_tsquery('english', t) q
    WHERE numnode(q) > 0;
    RETURN v;
END
$fn$;

-- The k best memories of scope s for a query, best score first: the body of
-- engram.ghost_search and engram.context (engram._search_hits, Rust, which
-- engram.search calls itself). Hybrid queries fuse the vector and text legs
-- by score (engram-core's ranking: the mean of cosine similarity and text
-- score); a row that the text leg found is kept whatever its cosine
-- (min_similarity applies to vector-only rows), so a rare exact token is
-- found even when the embeddings disagree. A memory whose occurred_at falls
-- in p_window (the time the query names, engram.time_window) ranks higher:
-- its relevance is multiplied by engram-core's window boost. A boost, not a
-- filter: the legs' candidate pools are widened to at least 50 so that
-- in-window memories a little further down are in them.
CREATE FUNCTION engram._search(
    s engram.read_scope, p_embedding vector, p_text text, p_k integer, p_min_similarity real,
    p_window tstzrange DEFAULT NULL, p_indexed boolean DEFAULT false)
RETURNS engram.search_hit[]
LANGUAGE plpgsql AS $fn$
BEGIN
    RETURN coalesce((
        SELECT array_agg(ROW(h.id, h.content, h.kind, h.tags, h.metadata, h.similarity, h.score, h.trust_score,
                             h.staleness_score, h.created_at, h.source, h.occurred_at, h.valid_from, h.valid_to,
                             h.namespace, h.key, h.value)::engram.search_hit ORDER BY h.n)
        FROM engram._search_hits(s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all, s.tags_any, s.session_id,
                                 s.created_after, s.created_before, s.max_level, s.space, s.group_id, s.valid_at,
                                 s.namespace_prefix, s.filter, p_embedding, p_text, p_k, p_min_similarity, p_window,
                                 p_indexed, NULL, NULL, false, NULL, false, false)
             WITH ORDINALITY AS h(id, content, kind, tags, metadata, similarity, score, trust_score, staleness_score,
                                  created_at, source, occurred_at, valid_from, valid_to, namespace, key, value,
                                  session, n)), '{}');
END
$fn$;

-- The k best memories of owner scope s as the store stood at p_known_at:
-- the memories written by then, each with the content, tags and
-- metadata of its revision current then, active then (archived or expired
-- later counts as active), valid at s.valid_at (default p_known_at) as the
-- store knew it then (a valid_to set later is not known yet). No index
-- holds the past, so this is an exact pass over the owner's memories;
-- ranking is _search's (score fusion of a vector and a text leg, trust,
-- staleness, the window boost). The vector leg compares each memory's
-- current embedding (revisions keep none); the text leg reads the content
-- of then. p_ids (when not NULL) keeps those memories only: a search about
-- an entity is this pass over the memories that name it, as of now.
CREATE FUNCTION engram._search_as_of(
    s engram.read_scope, p_known_at timestamptz, p_embedding vector, p_text text, p_k integer,
    p_min_similarity real, p_window tstzrange, p_ids uuid[] DEFAULT NULL)
RETURNS engram.search_hit[]
LANGUAGE plpgsql AS $fn$
DECLARE
    v_k      integer := engram._clamp_k(p_k);
    v_pool   integer;
    v_weight real := engram._setting_staleness_weight();
    v_text   text := nullif(btrim(p_text), '');
    v_valid  timestamptz := coalesce(s.valid_at, p_known_at);
    v_terms  text[] := engram._query_terms(v_text);
    v_query  tsquery := engram._any_term_query(v_text);
    v_exact  tsquery := engram._exact_query(v_text);
    v_hits   engram.search_hit[];
BEGIN
    PERFORM engram._check_scope(s);
    v_pool := engram._pool(v_k, p_embedding IS NOT NULL AND v_text IS NOT NULL, p_window IS NOT NULL);
    WITH past AS (
        SELECT m.id, coalesce(v.content, m.content) AS content, coalesce(v.tags, m.tags) AS tags,
               coalesce(v.metadata, m.metadata) AS metadata, m.kind, m.embedding, m.trust_score,
               m.staleness_score, m.created_at, m.source, m.occurred_at, m.valid_from,
               CASE WHEN m.invalidated_at <= p_known_at THEN m.valid_to END AS valid_to,
               m.namespace, m.key, CASE WHEN v.past THEN v.value ELSE m.value END AS value
        FROM engram.memories m
        LEFT JOIN LATERAL (
            SELECT r.content, r.tags, r.metadata, r.value, true AS past FROM engram.revisions r
            WHERE r.owner = m.owner AND r.memory_id = m.id AND r.written_at <= p_known_at AND r.replaced_at > p_known_at
            ORDER BY r.revision LIMIT 1) v ON true
        WHERE m.owner = s.owner AND m.created_at <= p_known_at
          AND (p_ids IS NULL OR m.id = ANY (p_ids))
          AND (m.status = 'active' OR m.archived_at > p_known_at)
          AND (m.expires_at IS NULL OR m.expires_at > p_known_at)
          AND (CASE WHEN s.internal_type IS NULL THEN m.internal_type IS NULL ELSE m.internal_type = s.internal_type END)
          AND (s.kinds IS NULL OR m.kind = ANY (s.kinds))
          AND (s.session_id IS NULL OR m.session_id = s.session_id)
          AND (s.created_after IS NULL OR m.created_at >= s.created_after)
          AND (s.created_before IS NULL OR m.created_at < s.created_before)
          AND (s.namespace_prefix IS NULL OR m.namespace[1:cardinality(s.namespace_prefix)] = s.namespace_prefix)
    ), legs AS (
        SELECT p.*,
               CASE WHEN p_embedding IS NOT NULL AND p.embedding IS NOT NULL
                    THEN (1 - (p.embedding <=> p_embedding))::real END AS sim,
               CASE WHEN p.tsv @@ v_query THEN engram._term_mask(tsvectorsend(p.tsv), v_terms) END AS mask,
               coalesce(p.tsv @@ v_exact, false) AS exact
        FROM (SELECT q.*, to_tsvector('english', q.content) AS tsv FROM past q) p
        WHERE (s.tags_all IS NULL OR p.tags @> s.tags_all) AND (s.tags_any IS NULL OR p.tags && s.tags_any)
          AND p.valid_from <= v_valid AND (p.valid_to IS NULL OR p.valid_to > v_valid)
          AND (s.filter IS NULL OR engram._filter_matches(coalesce(p.value, p.metadata), s.filter))
    ), lexed AS (
        -- the text leg's statistics are those of the matching rows, as _lexical's
        SELECT array_agg(l.id) AS ids, array_agg(l.mask) AS masks, array_agg(octet_length(l.content)::float8) AS lens,
               array_agg(l.exact) AS exact
        FROM legs l WHERE l.mask IS NOT NULL
    ), tscore AS (
        SELECT t.id, t.score
        FROM lexed, unnest(lexed.ids, engram._text_scores(lexed.masks, lexed.lens, lexed.exact, cardinality(v_terms))) AS t(id, score)
    ), ranked AS (
        SELECT l.*, t.score AS lrank,
               CASE WHEN l.sim IS NOT NULL THEN row_number() OVER (ORDER BY l.sim IS NULL, l.sim DESC, l.id) END AS vr,
               CASE WHEN t.score IS NOT NULL THEN row_number() OVER (ORDER BY t.score IS NULL, t.score DESC, l.id) END AS lr
        FROM legs l LEFT JOIN tscore t ON t.id = l.id
    ), c AS MATERIALIZED (
        -- the legs' pools, as _search's: the v_pool best of each
        SELECT r.*, row_number() OVER () AS ord, CASE WHEN r.lr <= v_pool THEN r.lrank END AS text_score
        FROM ranked r
        WHERE r.vr <= v_pool OR (v_text IS NOT NULL AND r.lr <= v_pool)
    ), a AS (
        SELECT array_agg(c.id ORDER BY c.ord) AS ids, array_agg(c.sim::float8 ORDER BY c.ord) AS sims,
               array_agg(c.text_score ORDER BY c.ord) AS texts,
               array_agg(coalesce(p_window @> c.occurred_at, false) ORDER BY c.ord) AS inwin,
               array_agg(c.trust_score ORDER BY c.ord) AS trusts, array_agg(c.staleness_score ORDER BY c.ord) AS stales
        FROM c
    )
    SELECT array_agg(ROW(c.id, c.content, c.kind, c.tags, c.metadata, c.sim, b.score, c.trust_score,
                         c.staleness_score, c.created_at, c.source, c.occurred_at, c.valid_from, c.valid_to,
                         c.namespace, c.key, c.value)::engram.search_hit ORDER BY b.n)
    INTO v_hits
    FROM a, engram._best_hits(a.ids, a.sims, a.texts, a.inwin, a.trusts, a.stales, v_text IS NOT NULL,
                              p_embedding IS NOT NULL, p_min_similarity, v_weight, v_k) WITH ORDINALITY AS b(pos, score, n)
    JOIN c ON c.ord = b.pos;
    RETURN coalesce(v_hits[1:v_k], '{}');
END
$fn$;

-- engram.search is Rust (extension/src/search_api.rs): who the call acts
-- for, the argument checks, the time the query names and the hits, in one
-- call; privileges.sql pins its search_path and row estimate.

-- plpgsql forbids an OUT column named like an argument (id, owner), hence
-- a composite result type; callers see the same columns.
CREATE TYPE engram.recalled_memory AS (id uuid, owner text, kind text, source text, internal_type text, content text,
               tags text[], metadata jsonb, embedding vector, author_type text, importance real,
               status text, archive_reason text, merged_into uuid, flag_count integer,
               flagged_at timestamptz, correction_count integer, trust_score real,
               staleness_score real, session_id text, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz, revision integer,
               revision_count bigint, access_count bigint, last_accessed_at timestamptz,
               occurred_at timestamptz, valid_from timestamptz, valid_to timestamptz,
               namespace text[], key text, value jsonb);

-- A memory as recall shows it: an active memory past its expiry shows as
-- expired (engram.expire() marks it later).
CREATE FUNCTION engram._recalled(r engram.memories) RETURNS SETOF engram.recalled_memory
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_revisions bigint;
    v_count     bigint;
    v_last      timestamptz;
BEGIN
    -- One statement per table (on Citus each runs on the owner's shard).
    SELECT count(*) INTO v_revisions FROM engram.revisions v WHERE v.owner = r.owner AND v.memory_id = r.id;
    SELECT a.access_count, a.last_accessed_at INTO v_count, v_last FROM engram._accesses(r.owner, ARRAY[r.id]) a;
    RETURN QUERY SELECT r.id, r.owner, r.kind, r.source, r.internal_type, r.content, r.tags, r.metadata,
           r.embedding, r.author_type, r.importance,
           CASE WHEN r.status = 'active' AND r.expires_at <= now() THEN 'expired' ELSE r.status END,
           r.archive_reason, r.merged_into,
           r.flag_count, r.flagged_at, r.correction_count, r.trust_score, r.staleness_score,
           r.session_id, r.created_at, r.updated_at, r.expires_at, r.revision,
           v_revisions, coalesce(v_count, 0), v_last, r.occurred_at, r.valid_from, r.valid_to,
           r.namespace, r.key, r.value;
END
$fn$;

CREATE FUNCTION engram.recall(
    owner text DEFAULT NULL,
    id uuid DEFAULT NULL,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL)
RETURNS SETOF engram.recalled_memory
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(recall.owner, recall.internal_type, recall.scope_tags, false);
    r       engram.memories;
BEGIN
    r := engram._locate(v_owner, recall.id, recall.internal_type, recall.scope_tags, false);
    PERFORM engram._touch(v_owner, ARRAY[r.id]);
    RETURN QUERY SELECT * FROM engram._recalled(r);
END
$fn$;

CREATE TYPE engram.listed_memory AS (id uuid, content text, kind text, source text, tags text[], metadata jsonb,
               status text, importance real, trust_score real, staleness_score real,
               access_count bigint, created_at timestamptz, updated_at timestamptz,
               next_cursor text, occurred_at timestamptz, valid_from timestamptz, valid_to timestamptz,
               namespace text[], key text, value jsonb, expires_at timestamptz);

-- One page of scope s in a given order, with keyset pagination: the body
-- of engram.list and engram.ghost_list.
CREATE FUNCTION engram._list(
    s engram.read_scope, p_status text, p_order_by text, p_descending boolean, p_limit integer, p_after text)
RETURNS SETOF engram.listed_memory
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
AS $fn$
DECLARE
    v_order  text := coalesce(p_order_by, 'created_at');
    v_status text := coalesce(p_status, 'active');
    v_limit  integer := least(greatest(coalesce(p_limit, 50), 1), 1000);
    v_desc   boolean := coalesce(p_descending, true);
    v_after  text[];
    v_cur_num numeric;
    v_cur_id  uuid;
    v_acc_ids uuid[];
    v_acc_n   bigint[];
    v_pub_ids uuid[];
    -- a filter's equalities, served by the memories_document index
    v_equal   jsonb := coalesce(engram._filter_equalities(s.filter), '{}');
BEGIN
    PERFORM engram._check_list(v_status, v_order);
    PERFORM engram._check_scope(s);
    -- The access counts first (a space's or group's list, no owner, reads
    -- those of its publications only): a statement over engram.memories
    -- never calls a function that reads another table (Citus runs it on the
    -- shards).
    IF s.owner IS NULL THEN
        v_pub_ids := ARRAY(SELECT p.memory_id FROM engram.publications p
                           WHERE p.space = s.space OR p.group_id = s.group_id);
    END IF;
    SELECT array_agg(a.memory_id), array_agg(a.access_count) INTO v_acc_ids, v_acc_n
    FROM engram._accesses(s.owner, v_pub_ids) a;
    IF p_after IS NOT NULL THEN
        BEGIN
            v_after := engram._cursor_decode(p_after, v_order);
            v_cur_id := v_after[2]::uuid;
            v_cur_num := CASE WHEN v_order IN ('created_at', 'updated_at')
                              THEN extract(epoch FROM v_after[1]::timestamptz)
                              ELSE v_after[1]::numeric END;
        EXCEPTION WHEN data_exception THEN
            RAISE EXCEPTION 'invalid cursor %; pass the next_cursor of the previous page, with the same order_by, or no cursor for the first page', engram._echo(p_after)
                USING ERRCODE = '22023';
        END;
    END IF;
    -- The sort key of each row as text (the cursor's currency) and as a
    -- sortable value; order_by is one of five known columns (checked above).
    RETURN QUERY
    WITH cand AS (
        SELECT m.*, coalesce(a.access_count, 0) AS accesses,
               CASE v_order
                   WHEN 'created_at' THEN to_char(m.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
                   WHEN 'updated_at' THEN to_char(m.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
                   WHEN 'trust_score' THEN m.trust_score::text
                   WHEN 'importance' THEN m.importance::text
                   ELSE coalesce(a.access_count, 0)::text END AS key_text,
               CASE v_order
                   WHEN 'created_at' THEN extract(epoch FROM m.created_at)
                   WHEN 'updated_at' THEN extract(epoch FROM m.updated_at)
                   WHEN 'trust_score' THEN m.trust_score::text::numeric
                   WHEN 'importance' THEN m.importance::text::numeric
                   ELSE coalesce(a.access_count, 0)::numeric END AS key_num
        FROM engram.memories m
        LEFT JOIN unnest(v_acc_ids, v_acc_n) AS a(memory_id, access_count) ON a.memory_id = m.id
        WHERE (s.owner IS NULL OR m.owner = s.owner)
          -- an active memory past its expiry lists as expired
          AND CASE WHEN m.status = 'active' AND m.expires_at <= now() THEN v_status = 'expired'
                   ELSE m.status = v_status END
          AND (CASE WHEN s.internal_type IS NULL THEN m.internal_type IS NULL
                    ELSE m.internal_type = s.internal_type END)
          AND (s.kinds IS NULL OR m.kind = ANY (s.kinds))
          AND (s.tags_all IS NULL OR m.tags @> s.tags_all)
          AND (s.created_after IS NULL OR m.created_at >= s.created_after)
          AND (s.created_before IS NULL OR m.created_at < s.created_before)
          AND (s.max_level IS NULL OR m.access_level <= s.max_level)
          AND m.valid_from <= coalesce(s.valid_at, now())
          AND (m.valid_to IS NULL OR m.valid_to > coalesce(s.valid_at, now()))
          AND (s.space IS NULL OR EXISTS (SELECT 1 FROM engram.publications p
                                          WHERE p.owner = m.owner AND p.memory_id = m.id AND p.space = s.space))
          AND (s.group_id IS NULL OR EXISTS (SELECT 1 FROM engram.publications p
                                             WHERE p.owner = m.owner AND p.memory_id = m.id AND p.group_id = s.group_id))
          AND (s.namespace_prefix IS NULL OR (m.namespace >= s.namespace_prefix
               AND (cardinality(s.namespace_prefix) = 0 OR m.namespace < engram._namespace_bound(s.namespace_prefix))
               AND m.namespace[1:cardinality(s.namespace_prefix)] = s.namespace_prefix))
          AND (s.filter IS NULL OR (coalesce(m.value, m.metadata) @> v_equal
                                    AND engram._filter_matches(coalesce(m.value, m.metadata), s.filter)))
    ), page AS (
        SELECT r.*, row_number() OVER (
                   ORDER BY CASE WHEN v_desc THEN r.key_num END DESC, CASE WHEN v_desc THEN r.id END DESC,
                            CASE WHEN NOT v_desc THEN r.key_num END ASC, CASE WHEN NOT v_desc THEN r.id END ASC) AS n
        FROM cand r
        WHERE v_cur_id IS NULL
           OR (v_desc AND (r.key_num, r.id) < (v_cur_num, v_cur_id))
           OR (NOT v_desc AND (r.key_num, r.id) > (v_cur_num, v_cur_id))
    )
    SELECT p.id, p.content, p.kind, p.source, p.tags, p.metadata,
           CASE WHEN p.status = 'active' AND p.expires_at <= now() THEN 'expired' ELSE p.status END,
           p.importance, p.trust_score, p.staleness_score, p.accesses, p.created_at, p.updated_at,
           CASE WHEN p.n = v_limit AND EXISTS (SELECT 1 FROM page q WHERE q.n = v_limit + 1)
                THEN engram._cursor_encode(v_order, p.key_text, p.id) END,
           p.occurred_at, p.valid_from, p.valid_to, p.namespace, p.key, p.value, p.expires_at
    FROM page p
    WHERE p.n <= v_limit
    ORDER BY p.n;
END
$fn$;

CREATE FUNCTION engram.list(
    owner text DEFAULT NULL,
    kinds text[] DEFAULT NULL,
    tags_all text[] DEFAULT NULL,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL,
    status text DEFAULT 'active',
    created_after timestamptz DEFAULT NULL,
    created_before timestamptz DEFAULT NULL,
    order_by text DEFAULT 'created_at',
    descending boolean DEFAULT true,
    "limit" integer DEFAULT 50,
    after text DEFAULT NULL,
    valid_at timestamptz DEFAULT NULL,
    namespace_prefix text[] DEFAULT NULL,
    filter jsonb DEFAULT NULL,
    refresh_ttl boolean DEFAULT false)
RETURNS SETOF engram.listed_memory
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(list.owner, list.internal_type, list.scope_tags, false);
    v_page  engram.listed_memory[];
BEGIN
    PERFORM engram._check_flat_filters(list.kinds, list.tags_all, NULL, list.internal_type, list.scope_tags);
    PERFORM engram._check_moment('valid_at', list.valid_at);
    PERFORM engram._check_item_filters(list.namespace_prefix, list.filter);
    v_page := ARRAY(SELECT l FROM engram._list(
        ROW(v_owner, NULL, list.internal_type, list.kinds,
            nullif(coalesce(list.tags_all, '{}') || coalesce(list.scope_tags, '{}'), '{}'),
            NULL, NULL, list.created_after, list.created_before, NULL, NULL, NULL, list.valid_at,
            list.namespace_prefix, list.filter)::engram.read_scope,
        list.status, list.order_by, list.descending, list."limit", list.after) l);
    IF list.refresh_ttl THEN
        PERFORM engram._refresh_ttl(v_owner, ARRAY(SELECT p.id FROM unnest(v_page) p));
    END IF;
    RETURN QUERY SELECT * FROM unnest(v_page);
END
$fn$;

CREATE FUNCTION engram.revisions(
    owner text DEFAULT NULL,
    id uuid DEFAULT NULL,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL)
RETURNS TABLE (revision integer, content text, tags text[], metadata jsonb, written_at timestamptz,
               replaced_at timestamptz, reason text, is_correction boolean, changed_by text,
               is_current boolean, value jsonb)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(revisions.owner, revisions.internal_type, revisions.scope_tags, false);
    r       engram.memories;
BEGIN
    r := engram._locate(v_owner, revisions.id, revisions.internal_type, revisions.scope_tags, false);
    RETURN QUERY
    SELECT v.revision, v.content, v.tags, v.metadata, v.written_at, v.replaced_at, v.reason,
           v.is_correction, v.changed_by, false, v.value
    FROM engram.revisions v WHERE v.owner = r.owner AND v.memory_id = r.id
    UNION ALL
    SELECT r.revision, r.content, r.tags, r.metadata, r.updated_at, NULL, NULL, NULL, NULL, true, r.value
    ORDER BY 1;
END
$fn$;

CREATE FUNCTION engram.stats(owner text DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_owner         text;
    v_result        jsonb;
    v_quotas        jsonb;
    v_groups        jsonb;
    v_event_groups  jsonb;
    v_sessions      bigint;
    v_misses        bigint;
    v_misses_7d     bigint;
    v_recent_misses jsonb;
    v_writes        jsonb;
BEGIN
    -- A privileged caller may ask for the whole database (owner NULL); a
    -- restricted role always gets its own owner.
    IF stats.owner IS NULL AND engram._caller_privileged() THEN
        PERFORM engram._check_planted();
    ELSE
        v_owner := engram._caller(stats.owner, NULL, NULL, false);
    END IF;
    v_quotas := engram._quotas(v_owner);
    -- One grouped pass per table, then the figures from the groups: plain
    -- aggregates that Citus computes per shard and merges (it cannot run a
    -- query with subqueries over a distributed table in its target list).
    SELECT coalesce(jsonb_agg(to_jsonb(g)), '[]') INTO v_groups
    FROM (SELECT m.kind, m.status, m.source, coalesce(m.internal_type, 'none') AS internal_type, count(*) AS n,
                 count(m.embedding) AS embedded,
                 count(*) FILTER (WHERE m.flag_count > 0 AND m.status = 'active') AS flagged,
                 count(*) FILTER (WHERE m.embedding IS NULL AND m.status = 'active') AS backlog,
                 count(*) FILTER (WHERE m.created_at >= now() - interval '7 days') AS growth,
                 max(greatest(m.created_at, m.updated_at)) AS last_write
          FROM engram.memories m WHERE v_owner IS NULL OR m.owner = v_owner
          GROUP BY 1, 2, 3, 4) g;
    SELECT coalesce(jsonb_agg(to_jsonb(g)), '[]') INTO v_event_groups
    FROM (SELECT e.event_type, count(*) AS n, max(e.created_at) AS last_at,
                 count(*) FILTER (WHERE e.created_at >= now() - interval '24 hours') AS last_24h,
                 count(*) FILTER (WHERE NOT e.success AND e.created_at >= now() - interval '24 hours') AS failed_24h
          FROM engram.events e WHERE v_owner IS NULL OR e.owner = v_owner
          GROUP BY 1) g;
    SELECT count(*) INTO v_sessions
    FROM (SELECT DISTINCT e.owner, e.session_id FROM engram.events e WHERE v_owner IS NULL OR e.owner = v_owner) x;
    SELECT count(*), count(*) FILTER (WHERE x.at >= now() - interval '7 days') INTO v_misses, v_misses_7d
    FROM engram.misses x WHERE v_owner IS NULL OR x.owner = v_owner;
    SELECT coalesce(jsonb_agg(jsonb_build_object('query_text', r.query_text, 'at', r.at) ORDER BY r.at DESC), '[]')
    INTO v_recent_misses
    FROM (SELECT y.query_text, y.at FROM engram.misses y
          WHERE v_owner IS NULL OR y.owner = v_owner ORDER BY y.at DESC LIMIT 5) r;
    SELECT jsonb_object_agg(w.day, w.n) INTO v_writes
    FROM (SELECT a.at::date AS day, count(*) AS n FROM engram.audit_log a
          WHERE a.at >= current_date - 6 AND (v_owner IS NULL OR a.owner = v_owner)
            AND a.action IN ('remember', 'update', 'forget', 'flag', 'consolidate', 'crystallize', 'capture',
                             'state_save', 'workspace_create', 'workspace_update')
          GROUP BY 1) w;
    WITH g AS (
        SELECT x.kind, x.status, x.source, x.internal_type, x.n, x.embedded, x.flagged, x.backlog, x.growth, x.last_write
        FROM jsonb_to_recordset(v_groups) AS x(kind text, status text, source text, internal_type text, n bigint,
                                               embedded bigint, flagged bigint, backlog bigint, growth bigint,
                                               last_write timestamptz)
    ), ev AS (
        SELECT x.event_type, x.n, x.last_at, x.last_24h, x.failed_24h
        FROM jsonb_to_recordset(v_event_groups) AS x(event_type text, n bigint, last_at timestamptz,
                                                     last_24h bigint, failed_24h bigint)
    )
    SELECT jsonb_build_object(
        'owner', v_owner,
        'total', (SELECT coalesce(sum(g.n), 0)::bigint FROM g),
        'by_kind', (SELECT coalesce(jsonb_object_agg(k.kind, k.n), '{}') FROM (SELECT g.kind, sum(g.n)::bigint AS n FROM g GROUP BY 1) k),
        'by_status', (SELECT coalesce(jsonb_object_agg(k.status, k.n), '{}') FROM (SELECT g.status, sum(g.n)::bigint AS n FROM g GROUP BY 1) k),
        'by_source', (SELECT coalesce(jsonb_object_agg(k.source, k.n), '{}') FROM (SELECT g.source, sum(g.n)::bigint AS n FROM g GROUP BY 1) k),
        'by_internal_type', (SELECT coalesce(jsonb_object_agg(k.internal_type, k.n), '{}')
                             FROM (SELECT g.internal_type, sum(g.n)::bigint AS n FROM g GROUP BY 1) k),
        'embedded_share', (SELECT coalesce(round(sum(g.embedded)::numeric / nullif(sum(g.n), 0), 4), 0) FROM g),
        'flagged_active', (SELECT coalesce(sum(g.flagged), 0)::bigint FROM g),
        'last_write_at', (SELECT max(g.last_write) FROM g),
        'writes_per_day', (SELECT jsonb_agg(jsonb_build_object('day', d::date, 'writes', coalesce((v_writes ->> d::date::text)::bigint, 0)) ORDER BY d)
                           FROM generate_series(current_date - 6, current_date, interval '1 day') d),
        'embedding_dims', engram._dims(),
        'embedding_backlog', (SELECT coalesce(sum(g.backlog), 0)::bigint FROM g),
        'growth_7d', (SELECT coalesce(sum(g.growth), 0)::bigint FROM g),
        'events', jsonb_build_object(
            'by_type', (SELECT coalesce(jsonb_object_agg(ev.event_type, ev.n), '{}') FROM ev),
            'last_capture_at', (SELECT max(ev.last_at) FROM ev),
            'summaries', (SELECT coalesce(sum(ev.n) FILTER (WHERE ev.event_type = 'summary'), 0)::bigint FROM ev),
            'tool_invocations_24h', (SELECT coalesce(sum(ev.last_24h) FILTER (WHERE ev.event_type = 'tool_invocation'), 0)::bigint FROM ev),
            'tool_failures_24h', (SELECT coalesce(sum(ev.failed_24h) FILTER (WHERE ev.event_type = 'tool_invocation'), 0)::bigint FROM ev),
            'sessions', v_sessions),
        'misses', jsonb_build_object('total', v_misses, 'last_7d', v_misses_7d, 'recent', v_recent_misses),
        'quotas', v_quotas)
    INTO v_result;
    RETURN v_result;
END
$fn$;
