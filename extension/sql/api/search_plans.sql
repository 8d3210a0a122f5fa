---------------------------------------------------------------------------
-- search plans: read scopes, the scope filter, and the k-NN plans of
-- engram._knn (scope lists, HNSW walk, exact scan)
---------------------------------------------------------------------------

-- What a scoped read may return: one owner's memories (or, for the ghost
-- of a space or group, the memories published there, of any owner), of
-- some statuses and internal type, narrowed by the caller's filters.
-- Built once per call (engram._read_scope) and passed to both search legs.
CREATE TYPE engram.read_scope AS (
    owner          text,         -- NULL only together with space or group_id
    statuses       text[],
    internal_type  text,         -- NULL: normal memories only
    kinds          text[],
    tags_all       text[],       -- the internal scope tags included
    tags_any       text[],
    session_id     text,
    created_after  timestamptz,
    created_before timestamptz,
    max_level      smallint,     -- ghost reads: access_level at most this
    space          text,         -- ghost reads: published to this space
    group_id       text,         -- ghost reads: published to this group
    valid_at       timestamptz,  -- memories valid at this moment (NULL: now)
    namespace_prefix text[],     -- keyed memories under this namespace
    filter         jsonb);       -- engram-core's filter over value/metadata

-- The WHERE clause every scoped read applies, as constant SQL text over
-- numbered parameters: the fields of engram.read_scope as $2..$10,
-- $13..$16 and $19..$20 ($1 is the query, $11 and $12 the row counts,
-- $17 and $18 the list path's list and quantized query). One text for the
-- vector leg, the text leg and the planner estimate, so the scope can never
-- differ between them. Values are always bound, never spliced in. An active
-- memory past its expires_at is expired already, before engram.expire()
-- marks it. A memory is valid from valid_from until valid_to: a
-- read sees what is valid now, or at $16.
-- Two texts: an owner's scope names the owner by a plain equality (on Citus
-- the statement then runs on that owner's shard alone), a scope of
-- publications (space or group ghosts, no owner) reads every owner's.
CREATE FUNCTION engram._scope_filter(p_owned boolean DEFAULT true) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
    RETURN CASE WHEN p_owned THEN '
        WHERE m.owner = $2' ELSE '
        WHERE $2::text IS NULL' END || '
          AND m.status = ANY ($3)
          AND (m.status <> ''active'' OR m.expires_at IS NULL OR m.expires_at > now() OR ''expired'' = ANY ($3))
          AND (CASE WHEN $4::text IS NULL THEN m.internal_type IS NULL ELSE m.internal_type = $4 END)
          AND ($5::text[] IS NULL OR m.kind = ANY ($5))
          AND ($6::text[] IS NULL OR m.tags @> $6)
          AND ($7::text[] IS NULL OR m.tags && $7)
          AND ($8::text IS NULL OR m.session_id = $8)
          AND ($9::timestamptz IS NULL OR m.created_at >= $9)
          AND ($10::timestamptz IS NULL OR m.created_at < $10)
          AND ($13::smallint IS NULL OR m.access_level <= $13)
          AND ($14::text IS NULL OR EXISTS (SELECT 1 FROM engram.publications p
                                            WHERE p.owner = m.owner AND p.memory_id = m.id AND p.space = $14))
          AND ($15::text IS NULL OR EXISTS (SELECT 1 FROM engram.publications p
                                            WHERE p.owner = m.owner AND p.memory_id = m.id AND p.group_id = $15))
          AND m.valid_from <= coalesce($16::timestamptz, now())
          AND (m.valid_to IS NULL OR m.valid_to > coalesce($16::timestamptz, now()))
          AND ($19::text[] IS NULL OR (m.namespace >= $19
               AND (cardinality($19) = 0 OR m.namespace < engram._namespace_bound($19))
               AND m.namespace[1:cardinality($19)] = $19))
          AND ($20::jsonb IS NULL OR (coalesce(m.value, m.metadata) @> coalesce(engram._filter_equalities($20), ''{}'')
               AND engram._filter_matches(coalesce(m.value, m.metadata), $20)))'::text;
END
$fn$;

-- Every namespace under prefix p_prefix (not empty) sorts below this one
-- (COLLATE "C": by code point): the prefix with U+10FFFF after its last
-- label. With `namespace >= prefix` it bounds an index range.
CREATE FUNCTION engram._namespace_bound(p_prefix text[]) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
    RETURN p_prefix[1:cardinality(p_prefix) - 1] || (p_prefix[cardinality(p_prefix)] || U&'\+10FFFF');
END
$fn$;

-- A read scope must name an owner or a publication target: never all owners.
CREATE FUNCTION engram._check_scope(s engram.read_scope) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF s.owner IS NULL AND s.space IS NULL AND s.group_id IS NULL THEN
        RAISE EXCEPTION 'internal error: a read scope without an owner' USING ERRCODE = 'XX000';
    END IF;
END
$fn$;

-- The scope list of internal type p_internal_type and tag p_tag ('' for all
-- of an owner's memories of that internal type): the key of its entries in
-- engram.scope_entries and engram.scope_sizes. Internal types never hold
-- '/', so the text hashed is unambiguous.
CREATE FUNCTION engram._list_key(p_internal_type text, p_tag text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
    RETURN pg_catalog.hashtextextended(coalesce(p_internal_type, '') || '/' || p_tag, 0);
END
$fn$;

-- The list path's rerank (see _knn): the p_cand entries of list $17 nearest
-- to the int8 query $18, reranked by exact distance to $1 under the scope
-- filter, and the largest int8 distance among them. Its parameters are the
-- filter's positional ones ($2..$16 as in _scope_filter, $11 the rows
-- wanted, $12 the candidates), so the filter text is pasted in unchanged
-- and the statement is static: plpgsql caches its plan. Dynamic SQL
-- re-planned it on every search (0.25-0.4 ms of planning against ~0.15 ms
-- of execution for a small list). The one right plan is forced, since a
-- generic plan cannot see the values: an index scan of the list's block
-- rows (with scan types off, not a sequential scan that a large list's
-- estimate would pick) folded into the top-n by engram._nearest (one Rust
-- call per block of ~18 entries), then one primary-key lookup per candidate
-- (the LATERAL with OFFSET 0 is never flattened into a join); no JIT, which
-- the generic plan's cost estimate would otherwise buy for ~13 ms per call,
-- and no parallel workers.
-- The statements of _list_rerank and _hnsw_walk, as text: pasted into
-- those static functions here, and run as dynamic SQL by _knn on a Citus
-- coordinator, where a cached generic plan of a distributed statement
-- cannot be built (Citus plans each with its parameters' values).
CREATE FUNCTION engram._list_rerank_query() RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
    RETURN format($q$
    WITH c AS MATERIALIZED (
        SELECT x.memory_id, x.d8
        FROM engram._candidates((SELECT engram._nearest(b.entries, b.n, $18, $12) FROM engram.scope_blocks b
                                 WHERE b.owner = $2 AND b.list = $17)) x)
    SELECT array_agg(m.id ORDER BY m.d, m.id), array_agg(m.d ORDER BY m.d, m.id), (SELECT max(c2.d8) FROM c c2)
    FROM c CROSS JOIN LATERAL (
        SELECT m.id, m.embedding <=> $1 AS d FROM engram.memories m %s
           AND m.embedding IS NOT NULL AND m.id = c.memory_id
        OFFSET 0) m$q$, engram._scope_filter());
END
$fn$;

CREATE FUNCTION engram._hnsw_walk_query(p_owned boolean) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
    RETURN format($q$
    WITH c AS MATERIALIZED (
        SELECT m.id, m.embedding <=> $1 AS d FROM engram.memories m %s AND m.embedding IS NOT NULL
        ORDER BY m.embedding <=> $1 LIMIT $12)
    SELECT c.id, c.d FROM c ORDER BY c.d, c.id LIMIT $11$q$, engram._scope_filter(p_owned));
END
$fn$;

DO $gen$
DECLARE
    v_name  text;
    v_owned boolean;
BEGIN
    EXECUTE format($f$
CREATE FUNCTION engram._list_rerank(
    vector, text, text[], text, text[], text[], text[], text, timestamptz, timestamptz,
    integer, integer, smallint, text, text, timestamptz, bigint, bytea, text[], jsonb,
    OUT ids uuid[], OUT dists float8[], OUT edge float8)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
SET max_parallel_workers_per_gather = 0
SET jit = off
AS $body$
BEGIN
    SELECT q.* INTO ids, dists, edge FROM (%s) q;
END
$body$$f$, engram._list_rerank_query());
    -- The HNSW walk of _knn's broad scopes: the p_n nearest of the $12
    -- nearest that pass the filter. Static with a cached generic plan for
    -- the same reason as above (planning cost 0.4-0.5 ms per search). A
    -- generic plan cannot see the scope's size and estimates one matching
    -- row, which makes sorting the whole table look cheaper than walking
    -- the index; enable_sort = off leaves the index's distance order as
    -- the only plan (the final sort of $12 rows remains, with nothing to
    -- replace it). hnsw.ef_search and hnsw.iterative_scan are the caller's
    -- (_knn sizes ef_search per search).
    -- _hnsw_walk over an owner's scope, _hnsw_walk_shared over a scope of
    -- publications (no owner).
    FOR v_name, v_owned IN VALUES ('_hnsw_walk', true), ('_hnsw_walk_shared', false) LOOP
        EXECUTE format($f$
CREATE FUNCTION engram.%I(
    vector, text, text[], text, text[], text[], text[], text, timestamptz, timestamptz,
    integer, integer, smallint, text, text, timestamptz, bigint, bytea, text[], jsonb)
RETURNS TABLE (id uuid, distance float8)
LANGUAGE plpgsql STABLE
ROWS 30
SET plan_cache_mode = force_generic_plan
SET enable_sort = off
SET enable_seqscan = off
SET enable_bitmapscan = off
SET max_parallel_workers_per_gather = 0
SET jit = off
AS $body$
BEGIN
    RETURN QUERY %s;
END
$body$$f$, v_name, engram._hnsw_walk_query(v_owned));
    END LOOP;
END
$gen$;

-- The rows of memories p_ids (of owner p_owner; of any owner when NULL).
-- Search and the conflict check join candidates to their rows through it,
-- never a candidate function to the table: on Citus a statement joining
-- engram.memories runs on the shard, and an owner named by a plain
-- equality keeps it to the owner's one shard.
CREATE FUNCTION engram._rows(p_owner text, p_ids uuid[]) RETURNS SETOF engram.memories
LANGUAGE plpgsql STABLE ROWS 30 AS $fn$
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) = 0 THEN
        RETURN;
    ELSIF p_owner IS NULL THEN
        RETURN QUERY SELECT * FROM engram.memories m WHERE m.id = ANY (p_ids);
    ELSE
        RETURN QUERY SELECT * FROM engram.memories m WHERE m.owner = p_owner AND m.id = ANY (p_ids);
    END IF;
END
$fn$;

-- The p_n nearest memories to p_query (cosine distance) in scope s, in
-- exact distance order. pgvector applies filters after the HNSW walk, so the
-- plan depends on how many rows the scope holds:
--   * an owner's scope is covered by scope lists (engram.scope_entries): the
--     owner's whole list and one per tag, with int8 vectors, counted in
--     engram.scope_sizes. The smallest list of the scope (the owner's, or
--     that of its rarest tags_all tag) is scanned exactly when it holds at
--     most engram.list_search_rows entries or is narrower than
--     engram.hnsw_min_selectivity of the table: its 2n+20 nearest by int8
--     distance are reranked in full precision under the whole scope filter
--     (recall 1; measured, iterative HNSW scans reach only 0.88-0.93
--     recall@10 at 5% selectivity whatever their ef_search);
--   * a broad scope walks the HNSW index with a pgvector 0.8 iterative scan,
--     ef_search sized to max(1.5 x fetch, engram.hnsw_ef_search) /
--     selectivity (at most 1000) so that one pass keeps the recall the
--     floor gives an unfiltered walk and usually finds enough matching
--     rows, then re-sorting by exact distance;
--   * scopes the lists do not cover (archived rows, a space or group), and
--     those whose other filters (kinds, session, dates, ...) rejected too
--     many list candidates, take the plan chosen from the planner's
--     estimate of the scope: an exact scan through the owner/tag indexes
--     when small or narrow (engram.exact_search_rows,
--     engram.hnsw_min_selectivity), else the HNSW walk;
--   * a scope with a value/metadata filter or a namespace prefix (which
--     the planner cannot estimate) whose walk returns fewer than n rows is
--     scanned exactly: a narrow filter never cuts a search short.
-- See docs/ARCHITECTURE.md, "Search plans".
CREATE FUNCTION engram._knn(s engram.read_scope, p_query vector, p_n integer)
RETURNS TABLE (id uuid, distance float8)
LANGUAGE plpgsql
-- A realistic row estimate: with the default 1000 the planner joins the
-- result to memories by a sequential scan instead of primary-key lookups.
ROWS 30
SET hnsw.iterative_scan = relaxed_order
SET hnsw.ef_search = 40
AS $fn$
DECLARE
    c_where CONSTANT text := engram._scope_filter(s.owner IS NOT NULL) || ' AND m.embedding IS NOT NULL';
    -- The exact scan: MATERIALIZED keeps the filter ahead of the distance
    -- sort, so the HNSW index (which would drop rows) cannot be used.
    c_exact CONSTANT text := 'WITH c AS MATERIALIZED (SELECT m.id, m.embedding <=> $1 AS d FROM engram.memories m'
                             || c_where || ') SELECT c.id, c.d FROM c ORDER BY c.d, c.id LIMIT $11';
    -- A filter or a namespace prefix: the planner cannot estimate them
    -- (an opaque function, a range), so a walk may return fewer rows than
    -- the scope holds; the exact scan then answers.
    v_items boolean := s.filter IS NOT NULL OR s.namespace_prefix IS NOT NULL;
    v_plan  json;
    v_rows  float8;
    v_total float8;
    -- A few rows beyond n, re-sorted by exact distance: with one pass of
    -- the graph (ef_search sized below) the walk returns its candidates in
    -- distance order, so fetching 2n bought no recall, and at 50%
    -- selectivity it often forced a second pass (+0.2 ms at ef 40).
    v_fetch integer := p_n + greatest(p_n / 5, 2);
    v_cand  integer := p_n * 2 + 20;
    v_keys  bigint[];
    v_list  bigint;
    v_size  bigint;
    v_lists bigint;
    v_ids   uuid[];
    v_dists float8[];
    v_q     bytea;
    v_edge  float8;
    v_citus boolean := engram._is_distributed();
BEGIN
    IF p_query IS NULL THEN
        RETURN;
    END IF;
    PERFORM engram._check_scope(s);
    SELECT greatest(c.reltuples, 1) INTO v_total FROM pg_catalog.pg_class c
    WHERE c.oid = 'engram.memories'::regclass;
    IF s.owner IS NOT NULL AND s.space IS NULL AND s.group_id IS NULL AND s.statuses = '{active}' THEN
        v_keys := ARRAY(SELECT DISTINCT engram._list_key(s.internal_type, t)
                        FROM unnest(array_prepend('', coalesce(s.tags_all, '{}'))) t WHERE t IS NOT NULL);
        SELECT z.list, z.n, count(*) OVER () INTO v_list, v_size, v_lists
        FROM engram.scope_sizes z WHERE z.owner = s.owner AND z.list = ANY (v_keys)
        ORDER BY z.n, z.list LIMIT 1;
        -- A list without a size row is empty, or was never built (a load
        -- with triggers disabled): the planner-estimated path below is
        -- right either way.
        IF coalesce(v_lists, 0) = cardinality(v_keys)
           AND (v_size <= engram._setting_list_search_rows()
                OR v_size / greatest(v_total, v_size) < engram._setting_hnsw_min_selectivity()) THEN
            v_q := engram._quantize(p_query::real[]);
            LOOP
                -- The v_cand nearest entries by int8 distance, reranked by
                -- exact distance under the whole scope filter.
                IF v_citus THEN
                    EXECUTE engram._list_rerank_query() INTO v_ids, v_dists, v_edge
                        USING p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all,
                              s.tags_any, s.session_id, s.created_after, s.created_before, p_n,
                              v_cand, s.max_level, s.space, s.group_id, s.valid_at, v_list, v_q,
                              s.namespace_prefix, s.filter;
                ELSE
                    SELECT r.ids, r.dists, r.edge INTO v_ids, v_dists, v_edge
                    FROM engram._list_rerank(p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all,
                                             s.tags_any, s.session_id, s.created_after, s.created_before, p_n,
                                             v_cand, s.max_level, s.space, s.group_id, s.valid_at, v_list, v_q,
                                             s.namespace_prefix, s.filter) r;
                END IF;
                -- Complete when the whole list was reranked, or when the
                -- n-th row is nearer than any entry outside the candidates
                -- can be: those are at least v_edge away in int8 distance,
                -- which is within 0.01 of the exact one.
                EXIT WHEN v_size <= v_cand;
                EXIT WHEN coalesce(cardinality(v_ids), 0) >= p_n AND v_dists[p_n] <= v_edge - 0.01;
                v_cand := v_cand * 4;
            END LOOP;
            RETURN QUERY SELECT u.i, u.d FROM unnest(v_ids[1:p_n], v_dists[1:p_n]) AS u(i, d);
            RETURN;
        ELSIF coalesce(v_lists, 0) = cardinality(v_keys) AND cardinality(v_keys) <= 2
              AND s.kinds IS NULL AND s.tags_any IS NULL AND s.session_id IS NULL AND s.created_after IS NULL
              AND s.created_before IS NULL AND s.max_level IS NULL AND s.namespace_prefix IS NULL
              AND s.filter IS NULL THEN
            -- The list is the scope (one tag at most, no other filter): no
            -- estimate needed. The intersection of several tags is smaller
            -- than any one list, so those scopes take the estimate.
            v_rows := v_size;
        END IF;
    END IF;
    IF v_rows IS NULL THEN
        IF v_citus AND s.owner IS NULL THEN
            -- A space's or group's publications (many owners) on Citus:
            -- their count bounds the scope. (EXPLAIN of this multi-shard
            -- query fails on the shards with NULL parameters: "could not
            -- determine data type of parameter $1".)
            SELECT count(*) INTO v_rows FROM engram.publications p
            WHERE (s.space IS NULL OR p.space = s.space) AND (s.group_id IS NULL OR p.group_id = s.group_id);
        ELSE
            -- EXPLAIN plans with the actual values, so the estimate sees the
            -- tags' and owner's frequencies from the column statistics.
            -- (Every parameter appears in the text: Citus sends a shard's
            -- EXPLAIN only the types of those that do.)
            EXECUTE 'EXPLAIN (FORMAT JSON) SELECT 1 FROM engram.memories m' || c_where
                    || ' AND $1 IS NOT NULL AND $11::integer IS NULL AND $12::integer IS NULL'
                    || ' AND $17::bigint IS NULL AND $18::bytea IS NULL'
                INTO v_plan
                USING p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all, s.tags_any,
                      s.session_id, s.created_after, s.created_before, NULL::integer, NULL::integer,
                      s.max_level, s.space, s.group_id, s.valid_at, NULL::bigint, NULL::bytea,
                      s.namespace_prefix, s.filter;
            v_rows := (v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
        END IF;
        v_total := greatest(v_total, v_rows);
        IF v_rows <= engram._setting_exact_search_rows()
           OR v_rows / v_total < engram._setting_hnsw_min_selectivity() THEN
            RETURN QUERY EXECUTE c_exact
                USING p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all, s.tags_any,
                      s.session_id, s.created_after, s.created_before, p_n, NULL::integer,
                      s.max_level, s.space, s.group_id, s.valid_at, NULL::bigint, NULL::bytea,
                      s.namespace_prefix, s.filter;
            RETURN;
        END IF;
    END IF;
    v_total := greatest(v_total, v_rows);
    -- The walk's candidate list (ef_search) holds about selectivity x ef
    -- rows of the scope. The floor (engram.hnsw_ef_search, which
    -- tune_search measures) is the ef at which an unfiltered walk reaches
    -- the target recall, so a scope needs floor / selectivity for the same
    -- recall (before 0.12.0 the floor was not divided: a 50% scope of a 1M
    -- index at floor 64 returned recall 0.93), and at least 1.5 x fetch /
    -- selectivity to hold `fetch` matching rows in one pass (1.5x for the
    -- variance of the filter; later iterations cost far more than a wider
    -- first pass). At most 1000.
    -- The walk's plan is cached (engram._hnsw_walk): always the index.
    PERFORM set_config('hnsw.ef_search',
        least(ceil(greatest(1.5 * v_fetch, engram._setting_hnsw_ef_search()) * v_total / greatest(v_rows, 1)), 1000)::text,
        true);
    IF v_citus THEN
        -- The walk runs on a worker, with that database's iterative scan
        -- (engram.distribute sets it) and ef_search there.
        EXECUTE 'SELECT array_agg(w.id ORDER BY w.d, w.id), array_agg(w.d ORDER BY w.d, w.id) FROM ('
                || engram._hnsw_walk_query(s.owner IS NOT NULL) || ') w(id, d)'
            INTO v_ids, v_dists
            USING p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all, s.tags_any,
                  s.session_id, s.created_after, s.created_before, p_n, v_fetch,
                  s.max_level, s.space, s.group_id, s.valid_at, NULL::bigint, NULL::bytea,
                  s.namespace_prefix, s.filter;
    ELSIF s.owner IS NULL THEN
        SELECT array_agg(w.id ORDER BY w.distance, w.id), array_agg(w.distance ORDER BY w.distance, w.id)
        INTO v_ids, v_dists
        FROM engram._hnsw_walk_shared(p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all,
                                      s.tags_any, s.session_id, s.created_after, s.created_before, p_n,
                                      v_fetch, s.max_level, s.space, s.group_id, s.valid_at, NULL::bigint, NULL::bytea,
                                      s.namespace_prefix, s.filter) w;
    ELSE
        SELECT array_agg(w.id ORDER BY w.distance, w.id), array_agg(w.distance ORDER BY w.distance, w.id)
        INTO v_ids, v_dists
        FROM engram._hnsw_walk(p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all, s.tags_any,
                               s.session_id, s.created_after, s.created_before, p_n, v_fetch,
                               s.max_level, s.space, s.group_id, s.valid_at, NULL::bigint, NULL::bytea,
                               s.namespace_prefix, s.filter) w;
    END IF;
    IF v_items AND coalesce(cardinality(v_ids), 0) < p_n THEN
        RETURN QUERY EXECUTE c_exact
            USING p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all, s.tags_any,
                  s.session_id, s.created_after, s.created_before, p_n, NULL::integer,
                  s.max_level, s.space, s.group_id, s.valid_at, NULL::bigint, NULL::bytea,
                  s.namespace_prefix, s.filter;
        RETURN;
    END IF;
    RETURN QUERY SELECT u.i, u.d FROM unnest(v_ids, v_dists) AS u(i, d);
END
$fn$;
