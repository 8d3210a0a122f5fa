-- engram SQL API: functions, result types, row-level security policies and
-- privileges. Loaded last by CREATE EXTENSION (extension_sql_file!,
-- finalize), after the Rust functions it calls (engram._check_*, scoring,
-- scopes); an upgrade script drops the previous version's API and loads
-- this file again through engram._install_api (see sql/README.md).
-- Conventions:
--   * every function takes named arguments; `owner` may be omitted when the
--     session sets engram.owner (engram._owner resolves and enforces it);
--   * columns are always qualified with a table alias, so plpgsql never
--     confuses them with the parameters of the same name;
--   * values are bound, never spliced into SQL text;
--   * errors carry a SQLSTATE and say what to do next.

---------------------------------------------------------------------------
-- helpers
---------------------------------------------------------------------------

-- The owner a call acts for. A privileged caller (a superuser, or a role
-- granted SET on engram.owner: a DBA) names any owner or defaults to
-- engram.owner. Everyone else is restricted: bound by engram.bind(token) in
-- the same transaction, acting only for the bound owner.
CREATE FUNCTION engram._owner(p_owner text) RETURNS text
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_bound text := engram._bound_owner();
    v_withheld text;
BEGIN
    PERFORM engram._check_planted();
    IF engram._caller_privileged() THEN
        p_owner := coalesce(p_owner, v_bound);
        IF p_owner IS NULL OR p_owner = '' THEN
            RAISE EXCEPTION 'owner is required; pass owner => ''<owner>'' or SET engram.owner = ''<owner>'''
                USING ERRCODE = '22004';
        END IF;
        RETURN p_owner;
    END IF;
    -- Only a binding engram.bind made counts: an engram.owner that a DBA set
    -- (SET, ALTER DATABASE/ROLE ... SET) is the DBA's default, never a
    -- binding for a restricted call (nor for the DBA's withheld one).
    IF v_bound IS NOT NULL AND engram._binding() IS NULL THEN
        v_bound := NULL;
    END IF;
    IF v_bound IS NULL THEN
        -- A privileged session role whose privilege is withheld: say why
        -- (extension/src/privilege.rs), not just "not bound".
        v_withheld := engram._withheld_privilege();
        IF v_withheld IS NOT NULL THEN
            RAISE EXCEPTION 'engram does not lend the privileges of role % to this call: %', engram._caller_role(), v_withheld
                USING ERRCODE = '42501',
                      HINT = 'bind the transaction with a token (engram.bind), or see "Privilege that cannot be borrowed" in docs/SECURITY.md';
        END IF;
        RAISE EXCEPTION 'this transaction is not bound to an owner; call engram.bind(token => ''<token>'') first, in the same transaction (a restricted role cannot set engram.owner)'
            USING ERRCODE = '42501';
    END IF;
    IF p_owner IS NOT NULL AND p_owner <> v_bound THEN
        RAISE EXCEPTION 'owner ''%'' differs from the bound owner; a restricted role acts only for the owner its token binds (engram.bind)', engram._echo(p_owner)
            USING ERRCODE = '42501';
    END IF;
    RETURN v_bound;
END
$fn$;

-- engram._check_planted() (Rust, extension/src/path_guard.rs) refuses to
-- run while a non-superuser can plant functions or operators in a schema
-- on the elevated functions' search_path; every public function calls it
-- first.

-- What the internal context of the binding allows (SPEC 8.2), for a call on
-- memories of p_internal_type carrying p_scope. A ghost conversation
-- (engram.bind(..., internal_type => 'ghost', ...)) writes and reads only
-- the accessor's ghost memories of that ghost, and sees the ghost owner's
-- memories only through engram.ghost_*: never the accessor's own normal
-- memories. An agent context never touches ghost memories.
CREATE FUNCTION engram._check_context(p_internal_type text, p_scope text[], p_write boolean) RETURNS void
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_ctx jsonb := engram._binding() -> 'internal';
BEGIN
    IF v_ctx IS NULL OR jsonb_typeof(v_ctx) <> 'object' THEN
        RETURN;
    END IF;
    IF v_ctx ->> 'internal_type' = 'ghost' THEN
        IF p_internal_type IS NULL AND p_write THEN
            RAISE EXCEPTION 'a ghost conversation writes only through memory_internal_create (engram.remember with internal_type => ''ghost'' and the ghost''s tags)'
                USING ERRCODE = '42501';
        ELSIF p_internal_type IS NULL THEN
            RAISE EXCEPTION 'a ghost conversation reads the ghost owner''s memories only through engram.ghost_search, engram.ghost_recall and engram.ghost_list (over MCP: memory_search, memory_recall, memory_list)'
                USING ERRCODE = '42501';
        ELSIF p_internal_type <> 'ghost'
              OR NOT coalesce(p_scope, '{}') @> ARRAY(SELECT jsonb_array_elements_text(v_ctx -> 'scope')) THEN
            RAISE EXCEPTION 'this transaction is bound to the ghost scope %; pass internal_type => ''ghost'' with those scope tags', v_ctx -> 'scope'
                USING ERRCODE = '42501';
        END IF;
    ELSIF p_internal_type = 'ghost' THEN
        RAISE EXCEPTION 'an agent context cannot touch ghost memories; bind with internal_type => ''ghost'' for a ghost conversation'
            USING ERRCODE = '42501';
    END IF;
END
$fn$;

-- _owner and _check_context in one call: the owner a memory call acts for.
CREATE FUNCTION engram._caller(p_owner text, p_internal_type text, p_scope text[], p_write boolean) RETURNS text
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_owner text := engram._owner(p_owner);
BEGIN
    PERFORM engram._check_context(p_internal_type, p_scope, p_write);
    RETURN v_owner;
END
$fn$;

-- The database's embedding dimension: the typmod of memories.embedding.
--
-- The small helpers on the search and write paths are plpgsql rather than
-- SQL functions: the search_path pin (below) keeps SQL functions from being
-- inlined, and a SQL function called from plpgsql is parsed and planned
-- again in every transaction, while plpgsql keeps its plans for the
-- session (about 0.03 ms a call on the bench machine).
CREATE FUNCTION engram._dims() RETURNS integer
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN (SELECT a.atttypmod FROM pg_catalog.pg_attribute a
            WHERE a.attrelid = 'engram.memories'::regclass AND a.attname = 'embedding');
END
$fn$;

-- pgvector already refuses NaN and infinity in every vector it builds; the
-- dimension (the memories', or p_dims) and the zero vector are checked here
-- with its C functions, and the Rust validator runs only to raise the
-- precise error.
CREATE FUNCTION engram._check_vector(p_vec vector, p_argument text, p_dims integer DEFAULT NULL) RETURNS void
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_dims integer;
BEGIN
    IF p_vec IS NOT NULL THEN
        v_dims := coalesce(p_dims, engram._dims());
        IF vector_dims(p_vec) <> v_dims OR vector_norm(p_vec) = 0 THEN
            PERFORM engram._check_embedding(p_vec::real[], v_dims, p_argument);
        END IF;
    END IF;
END
$fn$;

-- Identity of a memory for duplicate detection: content, internal type,
-- ghost scope and, for episodic memories (events), the session.
CREATE FUNCTION engram._dedup_key(p_content text, p_internal_type text, p_scope text[], p_kind text, p_session text)
RETURNS bytea LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
    RETURN sha256(convert_to(jsonb_build_array(
        p_content, p_internal_type, p_scope,
        CASE WHEN p_kind = 'episodic' THEN p_session END)::text, 'UTF8'::name));
END
$fn$;

-- Immutable, with the time and the setting as arguments (callers pass
-- now() and engram._setting_*()): Citus runs an UPDATE's functions of its
-- columns on the shards, and takes only immutable ones there.
CREATE FUNCTION engram._trust_at(p_now timestamptz, p_half_life float8, p_author text, p_created timestamptz,
                                 p_corrections integer, p_flags integer)
RETURNS real LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    RETURN engram.trust_score(p_author, extract(epoch FROM p_now - p_created)::float8 / 86400,
                              p_corrections, p_flags > 0, p_half_life);
END
$fn$;

CREATE FUNCTION engram._staleness_at(p_now timestamptz, p_stale_after float8, p_last_use timestamptz,
                                     p_corrections integer, p_flags integer)
RETURNS real LANGUAGE sql IMMUTABLE AS $fn$
    SELECT engram.staleness_score(extract(epoch FROM p_now - p_last_use)::float8 / 86400,
                                  p_corrections, p_flags > 0, p_stale_after)
$fn$;

-- Serialises writes of one owner, so that the duplicate and conflict checks
-- see every committed or concurrent write of that owner.
-- A row lock in engram.owner_locks rather than an advisory lock: advisory
-- locks are open to every role, so any session could hold an owner's key
-- and stall its writes; this table is reachable only through engram.
-- Every public function that writes an owner's rows takes it first.
-- engram.erase_owner takes it too and leaves the row behind with erased_at
-- set (a tombstone): a writer that waited for the lock while the erasure
-- ran sees the row change under it, and one whose transaction began before
-- the erasure sees erased_at after its start; both fail (55000) and write
-- nothing. A transaction that begins after the erasure committed writes
-- for the owner anew (a DBA re-creating it; the owner's tokens are gone).
CREATE FUNCTION engram._lock_owner(p_owner text) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_seen   boolean;
    v_before timestamptz;
    v_after  timestamptz;
    v_token  uuid;
BEGIN
    SELECT true, l.erased_at INTO v_seen, v_before FROM engram.owner_locks l WHERE l.owner = p_owner;
    IF v_seen IS NULL THEN
        INSERT INTO engram.owner_locks AS l (owner) VALUES (p_owner) ON CONFLICT DO NOTHING;
    END IF;
    SELECT l.erased_at INTO v_after FROM engram.owner_locks l WHERE l.owner = p_owner FOR UPDATE;
    IF v_after IS DISTINCT FROM v_before OR v_after >= transaction_timestamp() THEN
        RAISE EXCEPTION 'owner % was erased (engram.erase_owner) at % while this transaction was under way; nothing was written. Start a new transaction to write for this owner anew', engram._echo(p_owner), v_after
            USING ERRCODE = '55000';
    END IF;
    -- A transaction that bound while an erasure was still open saw the
    -- token that the erasure deleted: with the lock held, this statement's
    -- snapshot shows what committed since (READ COMMITTED), so a token
    -- gone by now means its owner was erased or it was revoked.
    v_token := (engram._binding() ->> 'token_id')::uuid;
    IF v_token IS NOT NULL AND NOT EXISTS (SELECT 1 FROM engram.tokens t WHERE t.id = v_token AND t.revoked_at IS NULL) THEN
        RAISE EXCEPTION 'the token this transaction was bound with was revoked, or its owner erased, while the transaction was under way; nothing was written'
            USING ERRCODE = '55000';
    END IF;
END
$fn$;

-- Caller input echoed in an error message: at most 80 characters, then
-- "…", so that a megabyte of id or name never comes back whole.
CREATE FUNCTION engram._echo(p_value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_value IS NULL THEN
        RETURN 'NULL';
    ELSIF char_length(p_value) <= 80 THEN
        RETURN p_value;
    END IF;
    RETURN left(p_value, 80) || '…';
END
$fn$;

-- A short identifying argument (session_id, reason, accessor, act_as, a
-- label): at most p_limit bytes, so that no megabyte lands in a row or in
-- the audit log.
CREATE FUNCTION engram._check_short(p_what text, p_value text, p_limit integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_value IS NOT NULL AND octet_length(p_value) > p_limit THEN
        RAISE EXCEPTION '% is % bytes; the limit is % bytes: pass a shorter %', p_what, octet_length(p_value), p_limit, p_what
            USING ERRCODE = '54000';
    END IF;
END
$fn$;

-- A text[] argument (tags, filters) is a flat list: a 2-D array would be
-- stored as such and break every reader that expects a list.
CREATE FUNCTION engram._check_1d(p_what text, p_list text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF array_ndims(p_list) > 1 THEN
        RAISE EXCEPTION '% must be a one-dimensional text array, not % dimensions; pass a flat list, e.g. % => ''{a,b}''', p_what, array_ndims(p_list), p_what
            USING ERRCODE = '22023';
    END IF;
END
$fn$;

-- A memory's tags as stored: a flat list, each tag once, in the order
-- first given (NULL elements stay, for engram._check_memory to refuse).
CREATE FUNCTION engram._tag_set(p_tags text[]) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    PERFORM engram._check_1d('tags', p_tags);
    IF p_tags IS NULL OR cardinality(p_tags) < 2 THEN
        RETURN p_tags;
    END IF;
    RETURN ARRAY(SELECT t.tag FROM unnest(p_tags) WITH ORDINALITY AS t(tag, i) GROUP BY t.tag ORDER BY min(t.i));
END
$fn$;

-- A JSON argument (metadata, tool input and output, preferences): nesting
-- and numbers bounded (engram._check_json, engram-core), so that every
-- reader can decode what is stored.
CREATE FUNCTION engram._check_doc(p_what text, p_doc jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_doc IS NOT NULL AND p_doc <> '{}' THEN
        PERFORM engram._check_json(p_what, p_doc::text);
    END IF;
END
$fn$;

-- One audit row, naming the actor: the calling role and, when the
-- transaction was bound by engram.bind, the token (id and label), the owner
-- it acted for and the internal context.
-- An audit event on the read side (a binding for another owner, a ghost
-- denial): a row when the transaction can write, and always a line in the
-- server log, which neither ROLLBACK nor a read-only transaction undoes.
CREATE FUNCTION engram._audit_read(p_owner text, p_action text, p_memory uuid, p_details jsonb)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    RAISE LOG 'engram audit: action=% owner=% memory=% role=% binding=% details=%',
        p_action, p_owner, p_memory, engram._caller_role(), engram._binding(), p_details;
    IF NOT current_setting('transaction_read_only')::boolean THEN
        PERFORM engram._audit(p_owner, p_action, p_memory, p_details);
    END IF;
END
$fn$;

CREATE FUNCTION engram._audit(p_owner text, p_action text, p_memory uuid, p_details jsonb DEFAULT '{}')
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO engram.audit_log (owner, actor, action, memory_id, details, token_id, token_label, act_as, internal_context)
    SELECT coalesce(p_owner, ''), engram._caller_role(), p_action, p_memory, coalesce(p_details, '{}'),
           (b ->> 'token_id')::uuid, b ->> 'token_label', b ->> 'act_as', nullif(b -> 'internal', 'null')
    FROM (SELECT engram._binding() AS b) binding;
END
$fn$;

-- The owner a database-wide job (expire, rescore) is confined to: NULL
-- (every owner) for a privileged caller, the bound owner otherwise.
CREATE FUNCTION engram._job_owner() RETURNS text
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    PERFORM engram._check_planted();
    RETURN CASE WHEN engram._caller_privileged() THEN NULL ELSE engram._owner(NULL) END;
END
$fn$;

-- The filters of a read (engram._check_filters, Rust), after checking
-- that each list is flat.
CREATE FUNCTION engram._check_flat_filters(p_kinds text[], p_tags_all text[], p_tags_any text[],
                                           p_internal_type text, p_scope text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    PERFORM engram._check_1d('kinds', p_kinds);
    PERFORM engram._check_1d('tags_all', p_tags_all);
    PERFORM engram._check_1d('tags_any', p_tags_any);
    PERFORM engram._check_1d('scope_tags', p_scope);
    PERFORM engram._check_filters(p_kinds, p_tags_all, p_tags_any, p_internal_type, p_scope);
END
$fn$;

-- A memory by id, visible to the caller: same owner, same internal type
-- (NULL = normal memories only) and carrying the scope tags. Anything else,
-- another owner's memory included, is "not found": never reveal existence.
CREATE FUNCTION engram._locate(p_owner text, p_id uuid, p_internal_type text, p_scope text[], p_lock boolean)
RETURNS engram.memories LANGUAGE plpgsql AS $fn$
DECLARE
    r engram.memories;
BEGIN
    IF p_id IS NULL THEN
        RAISE EXCEPTION 'id is required; pass id => ''<memory id>'' (see engram.search or engram.list)'
            USING ERRCODE = '22004';
    END IF;
    PERFORM engram._check_flat_filters(NULL, NULL, NULL, p_internal_type, p_scope);
    IF p_lock THEN
        SELECT m.* INTO r FROM engram.memories m
        WHERE m.id = p_id AND m.owner = p_owner
          AND m.internal_type IS NOT DISTINCT FROM p_internal_type
          AND m.tags @> coalesce(p_scope, '{}')
        FOR UPDATE;
    ELSE
        SELECT m.* INTO r FROM engram.memories m
        WHERE m.id = p_id AND m.owner = p_owner
          AND m.internal_type IS NOT DISTINCT FROM p_internal_type
          AND m.tags @> coalesce(p_scope, '{}');
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'memory % not found; use engram.search or engram.list to find memory ids', p_id
            USING ERRCODE = 'P0002';
    END IF;
    RETURN r;
END
$fn$;

CREATE FUNCTION engram._require_writable(r engram.memories, p_action text) RETURNS void
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    IF r.source = 'resource' THEN
        RAISE EXCEPTION 'memory % is a resource and is read-only to %: people curate resources (engram.resource_update, PUT /api/resources/{id}); remember a new memory instead', r.id, p_action
            USING ERRCODE = '42501';
    ELSIF r.source <> 'memory' THEN
        RAISE EXCEPTION 'memory % is a % and is read-only to %; remember a new memory instead (hard forget erases it)', r.id, r.source, p_action
            USING ERRCODE = '42501';
    END IF;
    IF r.status <> 'active' OR r.expires_at <= now() THEN
        RAISE EXCEPTION 'memory % is % and cannot be changed; remember a new memory instead', r.id,
            CASE WHEN r.status = 'active' THEN 'expired' ELSE r.status END
            USING ERRCODE = '55000';
    END IF;
END
$fn$;

CREATE FUNCTION engram._check_access_level(p_level integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_level IS NULL OR p_level NOT BETWEEN 1 AND 5 THEN
        RAISE EXCEPTION 'access_level % is out of range; pass 1 (anyone the ghost talks to) to 5 (only accessors trusted fully, the default)', coalesce(p_level::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
END
$fn$;

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
    group_id       text);        -- ghost reads: published to this group

-- The WHERE clause every scoped read applies, as constant SQL text over
-- numbered parameters: the fields of engram.read_scope as $2..$10 and
-- $13..$15 ($1 is the query, $11 and $12 the row counts). One text for the
-- vector leg, the text leg and the planner estimate, so the scope can never
-- differ between them. Values are always bound, never spliced in. An active
-- memory past its expires_at is expired already, before engram.expire()
-- marks it.
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
                                            WHERE p.owner = m.owner AND p.memory_id = m.id AND p.group_id = $15))'::text;
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

-- The list path's rerank (see _knn): the p_cand entries of list $16 nearest
-- to the int8 query $17, reranked by exact distance to $1 under the scope
-- filter, and the largest int8 distance among them. Its parameters are the
-- filter's positional ones ($2..$15 as in _scope_filter, $11 the rows
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
        FROM engram._candidates((SELECT engram._nearest(b.entries, b.n, $17, $12) FROM engram.scope_blocks b
                                 WHERE b.owner = $2 AND b.list = $16)) x)
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
    integer, integer, smallint, text, text, bigint, bytea,
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
    integer, integer, smallint, text, text)
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
--     ef_search sized to 1.5 x fetch / selectivity (at least
--     engram.hnsw_ef_search, at most 1000) so that one pass usually finds
--     enough matching rows, over-fetching 2x and re-sorting for recall;
--   * scopes the lists do not cover (archived rows, a space or group), and
--     those whose other filters (kinds, session, dates, ...) rejected too
--     many list candidates, take the plan chosen from the planner's
--     estimate of the scope: an exact scan through the owner/tag indexes
--     when small or narrow (engram.exact_search_rows,
--     engram.hnsw_min_selectivity), else the HNSW walk.
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
                              v_cand, s.max_level, s.space, s.group_id, v_list, v_q;
                ELSE
                    SELECT r.ids, r.dists, r.edge INTO v_ids, v_dists, v_edge
                    FROM engram._list_rerank(p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all,
                                             s.tags_any, s.session_id, s.created_after, s.created_before, p_n,
                                             v_cand, s.max_level, s.space, s.group_id, v_list, v_q) r;
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
              AND s.created_before IS NULL AND s.max_level IS NULL THEN
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
                INTO v_plan
                USING p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all, s.tags_any,
                      s.session_id, s.created_after, s.created_before, NULL::integer, NULL::integer,
                      s.max_level, s.space, s.group_id;
            v_rows := (v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
        END IF;
        v_total := greatest(v_total, v_rows);
        IF v_rows <= engram._setting_exact_search_rows()
           OR v_rows / v_total < engram._setting_hnsw_min_selectivity() THEN
            -- MATERIALIZED keeps the filter ahead of the distance sort, so the
            -- HNSW index (which would drop rows) cannot be used.
            RETURN QUERY EXECUTE
                'WITH c AS MATERIALIZED (SELECT m.id, m.embedding <=> $1 AS d FROM engram.memories m' || c_where || ')
                 SELECT c.id, c.d FROM c ORDER BY c.d, c.id LIMIT $11'
                USING p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all, s.tags_any,
                      s.session_id, s.created_after, s.created_before, p_n, NULL::integer,
                      s.max_level, s.space, s.group_id;
            RETURN;
        END IF;
    END IF;
    v_total := greatest(v_total, v_rows);
    -- One pass of ef_search candidates holds about `fetch` matching rows
    -- when ef_search = fetch / selectivity (1.5x for the variance of the
    -- filter); later iterations cost far more than a wider first pass.
    -- The walk's plan is cached (engram._hnsw_walk): always the index.
    PERFORM set_config('hnsw.ef_search',
        least(greatest(ceil(1.5 * v_fetch * v_total / v_rows), engram._setting_hnsw_ef_search()), 1000)::text,
        true);
    IF v_citus THEN
        -- The walk runs on a worker, with that database's iterative scan
        -- (engram.distribute sets it) and ef_search there.
        RETURN QUERY EXECUTE engram._hnsw_walk_query(s.owner IS NOT NULL)
            USING p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all, s.tags_any,
                  s.session_id, s.created_after, s.created_before, p_n, v_fetch,
                  s.max_level, s.space, s.group_id;
        RETURN;
    END IF;
    IF s.owner IS NULL THEN
        RETURN QUERY
            SELECT w.id, w.distance
            FROM engram._hnsw_walk_shared(p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all,
                                          s.tags_any, s.session_id, s.created_after, s.created_before, p_n,
                                          v_fetch, s.max_level, s.space, s.group_id) w;
        RETURN;
    END IF;
    RETURN QUERY
        SELECT w.id, w.distance
        FROM engram._hnsw_walk(p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all, s.tags_any,
                               s.session_id, s.created_after, s.created_before, p_n, v_fetch,
                               s.max_level, s.space, s.group_id) w;
END
$fn$;

---------------------------------------------------------------------------
-- scope lists (engram.scope_blocks, engram.scope_entries, engram.scope_sizes;
-- since 0.4.0, packed in blocks since 0.10.0; see schema.sql)
---------------------------------------------------------------------------
-- Kept by triggers on engram.memories in the writing transaction, so every
-- write path (remember, update, forget, expire, purge, set_embeddings, a
-- DBA's own INSERT or DELETE) keeps them exact. Only active memories with an
-- embedding have entries.

-- The nearest entries of a list: folds its block rows into the k nearest
-- to a quantized query (engram-core blocks::fold_block), as
-- engram._candidates unpacks them. An aggregate, so that the block rows
-- stream from the index scan into Rust without being collected first, and
-- so that on Citus the whole scan runs on the owner's shard.
CREATE OR REPLACE AGGREGATE engram._nearest(entries bytea, n integer, query bytea, k integer) (
    SFUNC = engram._nearest_step,
    STYPE = bytea,
    INITCOND = ''
);

-- The sorted, distinct keys of the lists of a memory of internal type
-- p_internal_type with tags p_tags: its owner's whole list and one per tag.
-- (plpgsql, not SQL: a SQL function called from plpgsql is planned on
-- every call, 0.1 ms per write; plpgsql caches the plan.)
CREATE FUNCTION engram._list_keys(p_internal_type text, p_tags text[]) RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
    RETURN ARRAY(SELECT DISTINCT engram._list_key(p_internal_type, t)
                 FROM unnest(array_prepend('', p_tags)) t WHERE t IS NOT NULL ORDER BY 1);
END
$fn$;

-- Adds deltas to list sizes, in key order: concurrent writers lock the
-- size rows in the same order and never deadlock. Every change to a list's
-- blocks happens after this, under the lock of the list's size row, so
-- two writers never fill or empty the same block at once.
-- A list that became empty loses its size row: erasing an owner leaves
-- nothing of it here.
CREATE FUNCTION engram._resize_lists(p_owner text, p_lists bigint[], p_deltas bigint[]) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    IF p_lists IS NULL OR cardinality(p_lists) = 0 THEN
        RETURN;
    END IF;
    -- One owner, named by a plain equality: on Citus each statement runs on
    -- the owner's shard (a trigger on a shard may not fan out).
    INSERT INTO engram.scope_sizes AS z (owner, list, n)
    SELECT p_owner, d.list, sum(d.delta) FROM unnest(p_lists, p_deltas) AS d(list, delta)
    GROUP BY d.list ORDER BY d.list
    ON CONFLICT (owner, list) DO UPDATE SET n = z.n + excluded.n;
    DELETE FROM engram.scope_sizes z WHERE z.owner = p_owner AND z.list = ANY (p_lists) AND z.n = 0;
END
$fn$;

-- The scope lists follow every memory row (since 0.8.0 per row, not per
-- statement with transition tables: Citus runs a distributed table's
-- triggers on the shard, where a statement's transition table does not
-- reach the other tables' shards). Each row touches only its own owner's
-- entries and sizes, which live on the same node.

-- Lists one memory: appends its entry (id and int8 vector) to the last
-- block of each of its lists, or starts a new block where that one is full
-- (or holds vectors of another width, after engram.configure). Plain
-- statements on one table each, every one naming the owner by equality:
-- on Citus each runs on the owner's shard (a statement joining CTEs or
-- functions to a distributed table is planned through intermediate
-- results sent to every worker, and fails while any worker is down).
-- (p_resized: the caller locked and counted the lists already.)
CREATE FUNCTION engram._list_add(p_owner text, p_internal_type text, p_tags text[], p_id uuid, p_embedding vector,
                                 p_resized boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_lists  bigint[] := engram._list_keys(p_internal_type, p_tags);
    v_entry  bytea := pg_catalog.uuid_send(p_id) || engram._quantize(p_embedding::real[]);
    v_width  integer := octet_length(v_entry);
    v_cap    integer := engram._block_capacity(octet_length(v_entry) - 16);
    v_blocks bigint[] := '{}';
    v_list   bigint;
    v_block  bigint;
    v_n      integer;
    v_bytes  integer;
BEGIN
    IF NOT p_resized THEN
        PERFORM engram._resize_lists(p_owner, v_lists, array_fill(1::bigint, ARRAY[cardinality(v_lists)]));
    END IF;
    FOREACH v_list IN ARRAY v_lists LOOP
        v_block := NULL;
        SELECT b.block, b.n, octet_length(b.entries) INTO v_block, v_n, v_bytes FROM engram.scope_blocks b
        WHERE b.owner = p_owner AND b.list = v_list ORDER BY b.block DESC LIMIT 1;
        IF v_block IS NOT NULL AND v_n < v_cap AND v_bytes = v_n * v_width THEN
            UPDATE engram.scope_blocks AS b SET entries = b.entries || v_entry, n = b.n + 1
            WHERE b.owner = p_owner AND b.list = v_list AND b.block = v_block;
        ELSE
            v_block := coalesce(v_block, 0) + 1;
            INSERT INTO engram.scope_blocks (owner, list, block, n, entries)
            VALUES (p_owner, v_list, v_block, 1, v_entry);
        END IF;
        v_blocks := v_blocks || v_block;
    END LOOP;
    INSERT INTO engram.scope_entries (owner, list, memory_id, block)
    SELECT p_owner, x.list, p_id, x.block FROM unnest(v_lists, v_blocks) AS x(list, block);
END
$fn$;

-- Unlists one memory: its entry leaves each block that held it; a block
-- left empty goes. (Blocks are named by "list/block" text keys: a plain
-- condition, as above.) p_then_add: the lists the caller lists the memory
-- in next (_lists_updated), whose sizes are counted and locked here in the
-- same pass.
CREATE FUNCTION engram._list_drop(p_owner text, p_id uuid, p_then_add bigint[] DEFAULT '{}') RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_lists bigint[];
    v_keys  text[];
BEGIN
    WITH d AS (
        DELETE FROM engram.scope_entries e WHERE e.owner = p_owner AND e.memory_id = p_id
        RETURNING e.list, e.block)
    SELECT array_agg(d.list ORDER BY d.list), array_agg(d.list || '/' || d.block) INTO v_lists, v_keys FROM d;
    v_lists := coalesce(v_lists, '{}');
    PERFORM engram._resize_lists(p_owner, v_lists || p_then_add,
                                 array_fill(-1::bigint, ARRAY[cardinality(v_lists)])
                                 || array_fill(1::bigint, ARRAY[cardinality(p_then_add)]));
    IF cardinality(v_lists) = 0 THEN
        RETURN;
    END IF;
    DELETE FROM engram.scope_blocks b
    WHERE b.owner = p_owner AND b.list = ANY (v_lists) AND b.list || '/' || b.block = ANY (v_keys) AND b.n <= 1;
    UPDATE engram.scope_blocks AS b SET entries = engram._block_without(b.entries, b.n, p_id), n = b.n - 1
    WHERE b.owner = p_owner AND b.list = ANY (v_lists) AND b.list || '/' || b.block = ANY (v_keys) AND b.n > 1;
END
$fn$;

-- The entries of owner p_owner's lists as they are packed from scratch:
-- each list's entries in id order, numbered into full blocks (of the
-- capacity _list_add gives an entry of that width).
CREATE FUNCTION engram._packed_entries(p_owner text)
RETURNS TABLE (owner text, list bigint, memory_id uuid, block bigint, entry bytea)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN QUERY
    SELECT e.owner, e.list, e.id,
           (row_number() OVER (PARTITION BY e.owner, e.list ORDER BY e.id) - 1)
               / engram._block_capacity(octet_length(e.entry) - 16) + 1,
           e.entry
    FROM (SELECT m.owner, l.list, m.id, pg_catalog.uuid_send(m.id) || engram._quantize(m.embedding::real[]) AS entry
          FROM engram.memories m CROSS JOIN LATERAL unnest(engram._list_keys(m.internal_type, m.tags)) AS l(list)
          WHERE m.owner = p_owner AND m.status = 'active' AND m.embedding IS NOT NULL) e;
END
$fn$;

-- The lists of owner p_owner (of every owner when NULL) built again from
-- the memories, packed full: after a load with triggers disabled, a
-- TRUNCATE on Citus, or to compact blocks that removals left sparse. It
-- locks the lists against writers while it runs (they wait), one owner
-- per statement (on Citus each runs on that owner's shard).
CREATE FUNCTION engram.rebuild_lists(owner text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text;
    v_total bigint := 0;
    n       bigint;
BEGIN
    PERFORM engram._require_privileged('rebuild_lists');
    -- Its snapshot must come after the lock (below): in READ COMMITTED each
    -- statement takes a new one.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'rebuild_lists runs in READ COMMITTED only (this transaction is %); run it on its own', current_setting('transaction_isolation')
            USING ERRCODE = '25001';
    END IF;
    LOCK TABLE engram.scope_sizes, engram.scope_blocks, engram.scope_entries IN SHARE ROW EXCLUSIVE MODE;
    FOR v_owner IN
        SELECT o.owner FROM (SELECT DISTINCT m.owner FROM engram.memories m
                             UNION SELECT z.owner FROM engram.scope_sizes z) o
        WHERE rebuild_lists.owner IS NULL OR o.owner = rebuild_lists.owner ORDER BY 1
    LOOP
        DELETE FROM engram.scope_entries e WHERE e.owner = v_owner;
        DELETE FROM engram.scope_blocks b WHERE b.owner = v_owner;
        DELETE FROM engram.scope_sizes z WHERE z.owner = v_owner;
        -- One statement per table (on Citus each runs on the owner's
        -- shard). The blocks first, each embedding quantized once; the
        -- entry rows are read back out of them (the id at the front of
        -- each entry).
        INSERT INTO engram.scope_blocks (owner, list, block, n, entries)
        SELECT x.owner, x.list, x.block, count(*), string_agg(x.entry, ''::bytea ORDER BY x.memory_id)
        FROM engram._packed_entries(v_owner) x GROUP BY x.owner, x.list, x.block;
        INSERT INTO engram.scope_entries (owner, list, memory_id, block)
        SELECT b.owner, b.list, encode(substring(b.entries FROM i * (octet_length(b.entries) / b.n) + 1 FOR 16), 'hex')::uuid,
               b.block
        FROM engram.scope_blocks b CROSS JOIN LATERAL generate_series(0, b.n - 1) AS i
        WHERE b.owner = v_owner;
        GET DIAGNOSTICS n = ROW_COUNT;
        v_total := v_total + n;
        INSERT INTO engram.scope_sizes (owner, list, n)
        SELECT e.owner, e.list, count(*) FROM engram.scope_entries e WHERE e.owner = v_owner GROUP BY e.owner, e.list;
    END LOOP;
    RETURN v_total;
END
$fn$;

-- AFTER INSERT, per row. (The triggers pass columns, not the row: on a
-- Citus shard the row has the shard's type.)
CREATE FUNCTION engram._lists_inserted() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF NEW.status = 'active' AND NEW.embedding IS NOT NULL THEN
        PERFORM engram._list_add(NEW.owner, NEW.internal_type, NEW.tags, NEW.id, NEW.embedding);
    END IF;
    RETURN NULL;
END
$fn$;

-- AFTER UPDATE, per row: a row whose owner, internal type, tags, status or
-- embedding changed loses its entries and gets new ones (if still active
-- with an embedding). No column list on the trigger: one naming the
-- embedding column would block engram.configure's ALTER COLUMN TYPE.
CREATE FUNCTION engram._lists_updated() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF (OLD.id, OLD.owner, OLD.internal_type, OLD.tags, OLD.status) IS NOT DISTINCT FROM (NEW.id, NEW.owner, NEW.internal_type, NEW.tags, NEW.status)
       AND OLD.embedding IS NOT DISTINCT FROM NEW.embedding THEN
        RETURN NULL;  -- rescore, flag and the like: nothing listed changed
    END IF;
    IF NEW.status <> 'active' OR NEW.embedding IS NULL THEN
        PERFORM engram._list_drop(OLD.owner, OLD.id);
    ELSIF OLD.owner = NEW.owner THEN
        -- The old lists' and the new lists' size rows locked in one pass,
        -- in key order: a DBA's multi-row UPDATE beside a remember of the
        -- same owner cannot deadlock on them.
        PERFORM engram._list_drop(OLD.owner, OLD.id, engram._list_keys(NEW.internal_type, NEW.tags));
        PERFORM engram._list_add(NEW.owner, NEW.internal_type, NEW.tags, NEW.id, NEW.embedding, true);
    ELSE
        PERFORM engram._list_drop(OLD.owner, OLD.id);
        PERFORM engram._list_add(NEW.owner, NEW.internal_type, NEW.tags, NEW.id, NEW.embedding);
    END IF;
    RETURN NULL;
END
$fn$;

-- AFTER DELETE, per row (hard forget, purge, erasing an owner).
CREATE FUNCTION engram._lists_deleted() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM engram._list_drop(OLD.owner, OLD.id);
    RETURN NULL;
END
$fn$;

-- AFTER TRUNCATE (TRUNCATE engram.memories CASCADE).
CREATE FUNCTION engram._lists_truncated() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    -- On a Citus shard (memories_102008...) the derived tables are other
    -- shards, which a trigger there cannot reach: the DBA rebuilds them
    -- after a TRUNCATE (docs/SCALING.md).
    IF TG_TABLE_NAME ~ '_[0-9]+$' THEN
        RETURN NULL;
    END IF;
    TRUNCATE engram.scope_entries, engram.scope_blocks, engram.scope_sizes;
    RETURN NULL;
END
$fn$;

-- Named to fire after usage_insert/usage_delete (triggers fire in name
-- order, since 0.10.0): a DBA's raw INSERT or DELETE then locks the owner's
-- usage row (engram.owner_locks) before the list sizes, the order of
-- remember and forget (whose owner lock comes first). Before, a raw DELETE
-- beside a remember of the same owner could deadlock, and Postgres took a
-- second (deadlock_timeout) to break it.
CREATE TRIGGER zz_scope_lists_insert AFTER INSERT ON engram.memories
    FOR EACH ROW EXECUTE FUNCTION engram._lists_inserted();
CREATE TRIGGER zz_scope_lists_update AFTER UPDATE ON engram.memories
    FOR EACH ROW EXECUTE FUNCTION engram._lists_updated();
CREATE TRIGGER zz_scope_lists_delete AFTER DELETE ON engram.memories
    FOR EACH ROW EXECUTE FUNCTION engram._lists_deleted();
CREATE TRIGGER zz_scope_lists_truncate AFTER TRUNCATE ON engram.memories
    FOR EACH STATEMENT EXECUTE FUNCTION engram._lists_truncated();

-- Full-text leg of search: matches of any query term, best ts_rank_cd first.
-- A row matching an exact token of the query (p_exact: codes, ids,
-- numbers) ranks above every row matching plain words only: its rank is
-- ts_rank_cd + 1 (ts_rank_cd(..., 32) is below 1), so a ticket id is never
-- buried under filler that shares many common words with a long question.
CREATE FUNCTION engram._lexical(s engram.read_scope, p_text text, p_n integer, p_exact tsquery DEFAULT NULL)
RETURNS TABLE (id uuid, rank real)
LANGUAGE plpgsql
ROWS 30
AS $fn$
DECLARE
    -- any term may match (OR): a long question still finds the one memory
    -- holding its rare token; ts_rank_cd rewards rows matching more terms.
    v_query tsquery := replace(plainto_tsquery('english', p_text)::text, ' & ', ' | ')::tsquery;
BEGIN
    IF v_query IS NULL OR numnode(v_query) = 0 THEN
        RETURN;
    END IF;
    PERFORM engram._check_scope(s);
    RETURN QUERY EXECUTE
        'SELECT m.id, (ts_rank_cd(m.content_tsv, $1, 32) + CASE WHEN m.content_tsv @@ $12 THEN 1 ELSE 0 END)::real
         FROM engram.memories m'
        || engram._scope_filter(s.owner IS NOT NULL) || ' AND m.content_tsv @@ $1 ORDER BY 2 DESC, m.id LIMIT $11'
        USING v_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all, s.tags_any,
              s.session_id, s.created_after, s.created_before, p_n, p_exact,
              s.max_level, s.space, s.group_id;
END
$fn$;

---------------------------------------------------------------------------
-- configuration
---------------------------------------------------------------------------

-- Sets the embedding dimension of this database (default 384), allowed
-- while no memory holds an embedding, and the dimension of image
-- embeddings (default 512, at most 1536), allowed while no image holds one.
-- Rebuilds what depends on the column (the memories' HNSW index).
CREATE FUNCTION engram.configure(embedding_dims integer DEFAULT NULL, image_dims integer DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_current integer;
    v_stored bigint;
BEGIN
    PERFORM engram._require_privileged('configure');
    v_current := engram._dims();
    IF configure.embedding_dims IS NOT NULL AND configure.embedding_dims <> v_current THEN
        PERFORM engram._check_dims(configure.embedding_dims);
        SELECT count(*) INTO v_stored FROM engram.memories m WHERE m.embedding IS NOT NULL;
        IF v_stored > 0 THEN
            RAISE EXCEPTION '% memories hold % -dimension embeddings; the dimension can change only while none do (re-embed into a new database, or engram.purge/forget them first)', v_stored, v_current
                USING ERRCODE = '55000';
        END IF;
        DROP INDEX engram.memories_embedding_hnsw;
        EXECUTE format('ALTER TABLE engram.memories ALTER COLUMN embedding TYPE vector(%s)', configure.embedding_dims);
        CREATE INDEX memories_embedding_hnsw ON engram.memories USING hnsw (embedding vector_cosine_ops);
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
    RETURN jsonb_build_object(
        'embedding_dims', engram._dims(),
        'image_dims', engram._image_dims(),
        'image_max_bytes', engram._setting_image_max_bytes(),
        'conflict_threshold', engram._setting_conflict_threshold(),
        'staleness_weight', engram._setting_staleness_weight(),
        'trust_half_life_days', engram._setting_trust_half_life_days(),
        'stale_after_days', engram._setting_stale_after_days(),
        'hnsw_ef_search', engram._setting_hnsw_ef_search(),
        'exact_search_rows', engram._setting_exact_search_rows(),
        'list_search_rows', engram._setting_list_search_rows(),
        'hnsw_min_selectivity', engram._setting_hnsw_min_selectivity());
END
$fn$;

---------------------------------------------------------------------------
-- writes
---------------------------------------------------------------------------

-- A memory's time to live: positive and at most 100 years (NULL: kept
-- until forgotten), so that now() + ttl is always a timestamp.
CREATE FUNCTION engram._check_ttl(p_ttl interval) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_ttl IS NOT NULL AND (p_ttl <= interval '0' OR p_ttl > interval '100 years') THEN
        RAISE EXCEPTION 'ttl % is out of range; pass a positive interval of at most 100 years (36500 days), such as ''30 days'', or NULL to keep the memory', engram._echo(p_ttl::text)
            USING ERRCODE = '22023';
    END IF;
END
$fn$;

-- Whether the call comes from a DBA (privileged, not withheld) or a
-- platform token's binding: who may administer groups, publish to any
-- group, and say a person wrote a memory.
CREATE FUNCTION engram._privileged_or_platform() RETURNS boolean
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN engram._caller_privileged() OR coalesce((engram._binding() ->> 'platform')::boolean, false);
END
$fn$;

-- Who may say a person wrote a memory (author_type 'human', the highest
-- trust weight): DBAs and platform tokens. A user token is an agent's
-- credential; its writes are the agent's (author_type 'agent' or 'system').
CREATE FUNCTION engram._check_author(p_author_type text) RETURNS void
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    IF p_author_type = 'human' AND NOT engram._privileged_or_platform() THEN
        RAISE EXCEPTION 'author_type ''human'' is for DBAs and platform tokens; a user token writes as an agent: pass author_type => ''agent'' (the default) or ''system'''
            USING ERRCODE = '42501';
    END IF;
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
    access_level integer DEFAULT 5)
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
    v_superseded uuid[];
BEGIN
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

    -- Episodic memories are events: two similar events never contradict.
    -- Each of the five nearest memories is a conflict when engram-core's
    -- conflict rules give a reason (similar, correction, changed_value,
    -- negation); the reasons are returned with it.
    IF v_kind <> 'episodic' AND remember.embedding IS NOT NULL THEN
        SELECT jsonb_agg(jsonb_build_object('id', c.id, 'content', left(c.content, 2000),
                                            'similarity', round(c.sim::numeric, 4), 'reasons', to_jsonb(c.reasons))
                         || CASE WHEN char_length(c.content) > 2000 THEN '{"truncated": true}'::jsonb ELSE '{}' END
                         ORDER BY c.sim DESC)
        INTO v_conflicts
        FROM (
            SELECT m.id, m.content, (1 - k.distance)::real AS sim,
                   engram._conflict_reasons(remember.content, m.content, (1 - k.distance)::real, v_threshold) AS reasons
            FROM (SELECT array_agg(n.id) AS ids, array_agg(n.distance) AS dists
                  FROM engram._knn(ROW(v_owner, '{active}', remember.internal_type, '{semantic,procedural}',
                                       nullif(v_scope, '{}'), NULL, NULL, NULL, NULL, NULL, NULL, NULL)::engram.read_scope,
                                   remember.embedding, 5) n) near,
                 unnest(near.ids, near.dists) AS k(id, distance),
                 engram._rows(v_owner, near.ids) m
            WHERE m.id = k.id
        ) c
        WHERE cardinality(c.reasons) > 0;
        IF v_conflicts IS NOT NULL AND NOT coalesce(remember.force, false) THEN
            RETURN QUERY SELECT 'conflict'::text, NULL::uuid, v_conflicts;
            RETURN;
        END IF;
        IF v_conflicts IS NOT NULL THEN
            v_metadata := v_metadata || jsonb_build_object('engram_forced_over',
                (SELECT jsonb_agg(c -> 'id') FROM jsonb_array_elements(v_conflicts) c));
            -- Stored anyway over a correction, a changed value or a
            -- negation, the new memory supersedes those: they are flagged
            -- below, so the newer fact ranks above the stale one.
            v_superseded := ARRAY(SELECT (c ->> 'id')::uuid FROM jsonb_array_elements(v_conflicts) c
                                  WHERE (c -> 'reasons') ?| engram._superseding_reasons());
        END IF;
    END IF;

    INSERT INTO engram.memories AS m
        (owner, kind, internal_type, content, content_sha256, dedup_key, tags, metadata, embedding,
         author_type, importance, trust_score, session_id, expires_at, access_level)
    VALUES
        (v_owner, v_kind, remember.internal_type, remember.content,
         sha256(convert_to(remember.content, 'UTF8'::name)), v_key, v_tags, v_metadata, remember.embedding,
         remember.author_type, remember.importance,
         engram._trust_at(now(), engram._setting_trust_half_life_days(), remember.author_type, now(), 0, 0), remember.session_id,
         now() + remember.ttl, remember.access_level)
    RETURNING m.id INTO v_id;
    PERFORM engram._audit(v_owner, 'remember', v_id,
        jsonb_build_object('kind', v_kind, 'forced', v_conflicts IS NOT NULL));
    IF cardinality(v_superseded) > 0 THEN
        PERFORM engram._flag_rows(v_owner, v_superseded, 'superseded by ' || v_id,
                                  jsonb_build_object('superseded_by', v_id));
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
    access_level integer DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner   text := engram._caller(update.owner, update.internal_type, update.scope_tags, true);
    v_tags    text[] := engram._tag_set(update.tags);
    r         engram.memories;
BEGIN
    PERFORM engram._check_short('reason', update.reason, 1000);
    PERFORM engram._lock_owner(v_owner);
    r := engram._locate(v_owner, update.id, update.internal_type, update.scope_tags, true);
    PERFORM engram._require_writable(r, 'update');
    IF update.content IS NULL AND update.embedding IS NULL AND update.tags IS NULL AND update.metadata IS NULL
       AND update.access_level IS NULL THEN
        RAISE EXCEPTION 'nothing to update; pass content (with embedding), tags, metadata or access_level'
            USING ERRCODE = '22023';
    END IF;
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

    RETURN engram._rewrite(r, v_owner, update.content, update.embedding, v_tags, update.metadata,
                           update.access_level, update.reason, coalesce(update.is_correction, true), 'update');
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
    v_key     bytea := engram._dedup_key(v_content, r.internal_type, engram._scope_of(v_tags), r.kind, r.session_id);
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
        (memory_id, revision, owner, content, tags, metadata, written_at, reason, is_correction, changed_by)
    VALUES (r.id, r.revision, r.owner, r.content, r.tags, r.metadata, r.updated_at,
            p_reason, p_is_correction, engram._caller_role());

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
        trust_score = engram._trust_at(now(), engram._setting_trust_half_life_days(), m.author_type, m.created_at, v_correct, m.flag_count),
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
            trust_score = engram._trust_at(now(), engram._setting_trust_half_life_days(), m.author_type, m.created_at, m.correction_count, m.flag_count + 1),
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
         author_type, importance, trust_score)
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
           v_author, max(s.importance), engram._trust_at(now(), engram._setting_trust_half_life_days(), v_author, now(), 0, 0)
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
            crystallize.embedding, 'agent', 0.5, engram._trust_at(now(), engram._setting_trust_half_life_days(), 'agent', now(), 0, 0));
    PERFORM engram._audit(v_owner, 'crystallize', v_id, jsonb_build_object('from', to_jsonb(crystallize.ids)));
    RETURN v_id;
EXCEPTION WHEN unique_violation THEN
    RAISE EXCEPTION 'an active memory already holds this skill content; recall it instead of crystallizing again'
        USING ERRCODE = '23505';
END
$fn$;

---------------------------------------------------------------------------
-- reads
---------------------------------------------------------------------------

CREATE TYPE engram.search_hit AS (
    id uuid, content text, kind text, tags text[], metadata jsonb,
    similarity real, score real, trust_score real, staleness_score real, created_at timestamptz,
    source text);

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

-- The k best memories of scope s for a query, best score first: the body of
-- engram.search and engram.ghost_search. Hybrid queries fuse the vector and
-- text legs by rank; a row that the text leg found is kept whatever its
-- cosine (min_similarity applies to vector-only rows), so a rare exact token
-- is found even when the embeddings disagree.
CREATE FUNCTION engram._search(
    s engram.read_scope, p_embedding vector, p_text text, p_k integer, p_min_similarity real)
RETURNS engram.search_hit[]
LANGUAGE plpgsql AS $fn$
DECLARE
    v_k      integer := engram._clamp_k(p_k);
    v_pool   integer;
    v_weight real := engram._setting_staleness_weight();
    v_text   text := nullif(btrim(p_text), '');
    v_hits   engram.search_hit[];
    -- The query's exact tokens (codes, ids, numbers): a text match on one
    -- of them is a full vote in the fusion, a match on plain words a weak one.
    v_exact  tsquery;
    v_vids   uuid[];
    v_vdists float8[];
    v_lids   uuid[];
    v_lranks real[];
BEGIN
    IF p_embedding IS NULL AND v_text IS NULL THEN
        RAISE EXCEPTION 'search needs query_embedding, query_text or both'
            USING ERRCODE = '22004';
    END IF;
    PERFORM engram._check_vector(p_embedding, 'query_embedding');
    IF p_text IS NOT NULL AND octet_length(p_text) > 65536 THEN
        RAISE EXCEPTION 'query_text is % bytes; the limit is 65536', octet_length(p_text)
            USING ERRCODE = '54000';
    END IF;
    -- Candidates per leg. Vector search ranks the k nearest by composite
    -- score (trust and staleness reorder them, they do not pull in rows
    -- outside the k nearest). Hybrid queries widen the vector pool so that
    -- a lexical hit with a weak (but not absent) vector rank gets credit
    -- for both lists instead of tying with vector-only rows.
    v_pool := v_k;
    IF p_embedding IS NOT NULL AND v_text IS NOT NULL THEN
        v_pool := greatest(v_pool, 100);
    END IF;
    IF v_text IS NOT NULL THEN
        SELECT string_agg('(' || q::text || ')', ' | ')::tsquery INTO v_exact
        FROM unnest(engram._exact_tokens(v_text)) t, plainto_tsquery('english', t) q
        WHERE numnode(q) > 0;
    END IF;

    -- Each leg's candidates first, then their rows (engram._rows): a
    -- statement never joins a candidate function to the table (Citus).
    IF p_embedding IS NOT NULL THEN
        SELECT array_agg(c.id), array_agg(c.distance) INTO v_vids, v_vdists
        FROM engram._knn(s, p_embedding, v_pool) c;
    END IF;
    IF v_text IS NULL THEN
        -- Vector only: the k nearest, ranked by composite score.
        SELECT array_agg(ROW(m.id, m.content, m.kind, m.tags, m.metadata, (1 - k.distance)::real,
                             engram.rank_score(greatest(1 - k.distance, 0)::real, m.trust_score,
                                               m.staleness_score, v_weight),
                             m.trust_score, m.staleness_score, m.created_at, m.source)::engram.search_hit
                         ORDER BY engram.rank_score(greatest(1 - k.distance, 0)::real, m.trust_score,
                                                    m.staleness_score, v_weight) DESC, m.id)
        INTO v_hits
        FROM unnest(v_vids, v_vdists) AS k(id, distance)
        JOIN engram._rows(s.owner, v_vids) m ON m.id = k.id
        WHERE 1 - k.distance >= coalesce(p_min_similarity, 0);
    ELSE
    SELECT array_agg(l.id), array_agg(l.rank) INTO v_lids, v_lranks
    FROM engram._lexical(s, v_text, v_pool, v_exact) l;
    WITH vec AS (
        SELECT c.id, c.distance, row_number() OVER (ORDER BY c.distance, c.id) AS r
        FROM unnest(v_vids, v_vdists) AS c(id, distance)
    ), lex AS (
        SELECT l.id, l.rank, row_number() OVER (ORDER BY l.rank DESC, l.id) AS r
        FROM unnest(v_lids, v_lranks) AS l(id, rank)
    ), fused AS (
        SELECT coalesce(vec.id, lex.id) AS id, vec.r AS vr, lex.r AS lr, vec.distance, lex.rank
        FROM vec FULL JOIN lex ON lex.id = vec.id
    ), scored AS (
        SELECT m.id, m.content, m.kind, m.tags, m.metadata, f.lr,
               CASE WHEN p_embedding IS NOT NULL
                    THEN (1 - coalesce(f.distance, m.embedding <=> p_embedding))::real END AS sim,
               CASE WHEN p_embedding IS NULL THEN engram._text_relevance(f.rank)
                    -- the text leg ranks exact-token matches at 1 and above
                    ELSE engram._weighted_fusion(f.vr, f.lr, f.rank >= 1) END AS relevance,
               m.trust_score, m.staleness_score, m.created_at, m.source
        FROM fused f JOIN engram._rows(s.owner, v_vids || v_lids) m ON m.id = f.id
    )
    SELECT array_agg(ROW(x.id, x.content, x.kind, x.tags, x.metadata, x.sim,
                         engram.rank_score(x.relevance, x.trust_score, x.staleness_score, v_weight),
                         x.trust_score, x.staleness_score, x.created_at, x.source)::engram.search_hit
                     ORDER BY engram.rank_score(x.relevance, x.trust_score, x.staleness_score, v_weight) DESC, x.id)
    INTO v_hits
    FROM scored x
    WHERE x.lr IS NOT NULL OR x.sim IS NULL OR x.sim >= coalesce(p_min_similarity, 0);
    END IF;
    RETURN coalesce(v_hits[1:v_k], '{}');
END
$fn$;

CREATE FUNCTION engram.search(
    owner text DEFAULT NULL,
    query_embedding vector DEFAULT NULL,
    query_text text DEFAULT NULL,
    k integer DEFAULT 10,
    kinds text[] DEFAULT NULL,
    tags_all text[] DEFAULT NULL,
    tags_any text[] DEFAULT NULL,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL,
    session_id text DEFAULT NULL,
    created_after timestamptz DEFAULT NULL,
    created_before timestamptz DEFAULT NULL,
    min_similarity real DEFAULT 0,
    include_archived boolean DEFAULT false)
RETURNS TABLE (id uuid, content text, kind text, tags text[], metadata jsonb, similarity real,
               score real, trust_score real, staleness_score real, created_at timestamptz, source text)
LANGUAGE plpgsql ROWS 10 AS $fn$
DECLARE
    v_owner text := engram._caller(search.owner, search.internal_type, search.scope_tags, false);
    v_hits  engram.search_hit[];
BEGIN
    PERFORM engram._check_flat_filters(search.kinds, search.tags_all, search.tags_any,
                                  search.internal_type, search.scope_tags);
    -- The scope is ANDed with the caller's own tag filters; it can only narrow.
    v_hits := engram._search(
        ROW(v_owner,
            CASE WHEN search.include_archived THEN '{active,archived,expired}'::text[] ELSE '{active}'::text[] END,
            search.internal_type, search.kinds,
            nullif(coalesce(search.tags_all, '{}') || coalesce(search.scope_tags, '{}'), '{}'),
            search.tags_any, search.session_id, search.created_after, search.created_before,
            NULL, NULL, NULL)::engram.read_scope,
        search.query_embedding, search.query_text, search.k, search.min_similarity);
    PERFORM engram._touch(v_owner, ARRAY(SELECT h.id FROM unnest(v_hits) h));
    IF cardinality(v_hits) = 0 THEN
        PERFORM engram._miss(v_owner, search.query_text, search.query_embedding IS NOT NULL);
    END IF;
    RETURN QUERY SELECT h.* FROM unnest(v_hits) h;
END
$fn$;

-- plpgsql forbids an OUT column named like an argument (id, owner), hence
-- a composite result type; callers see the same columns.
CREATE TYPE engram.recalled_memory AS (id uuid, owner text, kind text, source text, internal_type text, content text,
               tags text[], metadata jsonb, embedding vector, author_type text, importance real,
               status text, archive_reason text, merged_into uuid, flag_count integer,
               flagged_at timestamptz, correction_count integer, trust_score real,
               staleness_score real, session_id text, created_at timestamptz,
               updated_at timestamptz, expires_at timestamptz, revision integer,
               revision_count bigint, access_count bigint, last_accessed_at timestamptz);

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
           v_revisions, coalesce(v_count, 0), v_last;
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
               next_cursor text);

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
          AND (s.space IS NULL OR EXISTS (SELECT 1 FROM engram.publications p
                                          WHERE p.owner = m.owner AND p.memory_id = m.id AND p.space = s.space))
          AND (s.group_id IS NULL OR EXISTS (SELECT 1 FROM engram.publications p
                                             WHERE p.owner = m.owner AND p.memory_id = m.id AND p.group_id = s.group_id))
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
                THEN engram._cursor_encode(v_order, p.key_text, p.id) END
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
    after text DEFAULT NULL)
RETURNS SETOF engram.listed_memory
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(list.owner, list.internal_type, list.scope_tags, false);
BEGIN
    PERFORM engram._check_flat_filters(list.kinds, list.tags_all, NULL, list.internal_type, list.scope_tags);
    RETURN QUERY SELECT * FROM engram._list(
        ROW(v_owner, NULL, list.internal_type, list.kinds,
            nullif(coalesce(list.tags_all, '{}') || coalesce(list.scope_tags, '{}'), '{}'),
            NULL, NULL, list.created_after, list.created_before, NULL, NULL, NULL)::engram.read_scope,
        list.status, list.order_by, list.descending, list."limit", list.after);
END
$fn$;

CREATE FUNCTION engram.revisions(
    owner text DEFAULT NULL,
    id uuid DEFAULT NULL,
    internal_type text DEFAULT NULL,
    scope_tags text[] DEFAULT NULL)
RETURNS TABLE (revision integer, content text, tags text[], metadata jsonb, written_at timestamptz,
               replaced_at timestamptz, reason text, is_correction boolean, changed_by text,
               is_current boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(revisions.owner, revisions.internal_type, revisions.scope_tags, false);
    r       engram.memories;
BEGIN
    r := engram._locate(v_owner, revisions.id, revisions.internal_type, revisions.scope_tags, false);
    RETURN QUERY
    SELECT v.revision, v.content, v.tags, v.metadata, v.written_at, v.replaced_at, v.reason,
           v.is_correction, v.changed_by, false
    FROM engram.revisions v WHERE v.owner = r.owner AND v.memory_id = r.id
    UNION ALL
    SELECT r.revision, r.content, r.tags, r.metadata, r.updated_at, NULL, NULL, NULL, NULL, true
    ORDER BY 1;
END
$fn$;

CREATE FUNCTION engram.stats(owner text DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $fn$
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

---------------------------------------------------------------------------
-- quotas (SPEC 8.5): what each owner stores, counted in engram.owner_locks
---------------------------------------------------------------------------

-- Adds p_delta to counter p_counter of owner p_owner; a growth that takes
-- the owner past its quota (engram.max_<counter>_per_owner) fails with
-- 54000, and the statement that grew it, with everything else in the
-- transaction, is undone. The writers hold the owner's lock row already,
-- so counting costs one row update, never a count over the owner's rows.
-- One owner by a plain equality: on Citus it runs on the owner's shard.
CREATE FUNCTION engram._add_usage(p_counter text, p_owner text, p_delta bigint) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_limit bigint;
    v_used  bigint;
    v_all   bigint[];
    v_d     bigint[] := ARRAY[CASE WHEN p_counter = 'memories' THEN p_delta ELSE 0 END,
                              CASE WHEN p_counter = 'events' THEN p_delta ELSE 0 END,
                              CASE WHEN p_counter = 'image_bytes' THEN p_delta ELSE 0 END,
                              CASE WHEN p_counter = 'slots' THEN p_delta ELSE 0 END,
                              CASE WHEN p_counter = 'workspaces' THEN p_delta ELSE 0 END,
                              CASE WHEN p_counter = 'states' THEN p_delta ELSE 0 END];
BEGIN
    IF p_owner IS NULL OR coalesce(p_delta, 0) = 0 THEN
        RETURN;
    END IF;
    IF p_delta < 0 THEN
        UPDATE engram.owner_locks AS l SET
            memories = greatest(l.memories + v_d[1], 0), events = greatest(l.events + v_d[2], 0),
            image_bytes = greatest(l.image_bytes + v_d[3], 0), slots = greatest(l.slots + v_d[4], 0),
            workspaces = greatest(l.workspaces + v_d[5], 0), states = greatest(l.states + v_d[6], 0)
        WHERE l.owner = p_owner;
        RETURN;
    END IF;
    v_limit := (engram._setting_quotas() ->> p_counter)::bigint;
    INSERT INTO engram.owner_locks AS l (owner, memories, events, image_bytes, slots, workspaces, states)
    VALUES (p_owner, v_d[1], v_d[2], v_d[3], v_d[4], v_d[5], v_d[6])
    ON CONFLICT (owner) DO UPDATE SET
        memories = l.memories + excluded.memories, events = l.events + excluded.events,
        image_bytes = l.image_bytes + excluded.image_bytes, slots = l.slots + excluded.slots,
        workspaces = l.workspaces + excluded.workspaces, states = l.states + excluded.states
    RETURNING ARRAY[l.memories, l.events, l.image_bytes, l.slots, l.workspaces, l.states] INTO v_all;
    -- (picked here, not in RETURNING: Citus mis-deparses a simple CASE over a parameter)
    v_used := v_all[array_position(ARRAY['memories', 'events', 'image_bytes', 'slots', 'workspaces', 'states'], p_counter)];
    IF v_used > v_limit THEN
        RAISE EXCEPTION 'owner % would store % % (quota engram.max_%_per_owner = %); nothing was written. Free room (hard forget, purge, release images, delete slots) or ask a superuser to raise it: ALTER DATABASE % SET engram.max_%_per_owner = ... (or ALTER SYSTEM SET ..., then SELECT pg_reload_conf())',
            engram._echo(p_owner), v_used, replace(p_counter, '_', ' '), p_counter, v_limit,
            quote_ident(current_database()), p_counter
            USING ERRCODE = '54000';
    END IF;
END
$fn$;

-- AFTER INSERT and AFTER DELETE, per row, on each counted table;
-- TG_ARGV[0] names the counter. Rows of memories, events, slots,
-- workspaces and states count one each; images count their bytes. Per row
-- since 0.8.0 (see the scope lists' triggers): the counter row is the
-- row's own owner's, on the same node.
CREATE FUNCTION engram._count_usage() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text;
    v_delta bigint := 1;
BEGIN
    IF TG_OP = 'INSERT' THEN
        v_owner := NEW.owner;
        IF TG_TABLE_NAME = 'images' THEN v_delta := NEW.bytes; END IF;
    ELSE
        v_owner := OLD.owner;
        IF TG_TABLE_NAME = 'images' THEN v_delta := -OLD.bytes; ELSE v_delta := -1; END IF;
    END IF;
    PERFORM engram._add_usage(TG_ARGV[0], v_owner, v_delta);
    RETURN NULL;
END
$fn$;

-- TRUNCATE of a counted table (a DBA's): count again.
CREATE FUNCTION engram._usage_truncated() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    -- On a Citus shard (memories_102008...) the derived tables are other
    -- shards, which a trigger there cannot reach: the DBA rebuilds them
    -- after a TRUNCATE (docs/SCALING.md).
    IF TG_TABLE_NAME ~ '_[0-9]+$' THEN
        RETURN NULL;
    END IF;
    PERFORM engram.recount_usage();
    RETURN NULL;
END
$fn$;

CREATE TRIGGER usage_insert AFTER INSERT ON engram.memories
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('memories');
CREATE TRIGGER usage_delete AFTER DELETE ON engram.memories
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('memories');
CREATE TRIGGER usage_insert AFTER INSERT ON engram.events
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('events');
CREATE TRIGGER usage_delete AFTER DELETE ON engram.events
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('events');
CREATE TRIGGER usage_insert AFTER INSERT ON engram.images
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('image_bytes');
CREATE TRIGGER usage_delete AFTER DELETE ON engram.images
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('image_bytes');
CREATE TRIGGER usage_insert AFTER INSERT ON engram.slots
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('slots');
CREATE TRIGGER usage_delete AFTER DELETE ON engram.slots
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('slots');
CREATE TRIGGER usage_insert AFTER INSERT ON engram.workspaces
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('workspaces');
CREATE TRIGGER usage_delete AFTER DELETE ON engram.workspaces
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('workspaces');
CREATE TRIGGER usage_insert AFTER INSERT ON engram.states
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('states');
CREATE TRIGGER usage_delete AFTER DELETE ON engram.states
    FOR EACH ROW EXECUTE FUNCTION engram._count_usage('states');
CREATE TRIGGER usage_truncate AFTER TRUNCATE ON engram.memories
    FOR EACH STATEMENT EXECUTE FUNCTION engram._usage_truncated();
CREATE TRIGGER usage_truncate AFTER TRUNCATE ON engram.events
    FOR EACH STATEMENT EXECUTE FUNCTION engram._usage_truncated();
CREATE TRIGGER usage_truncate AFTER TRUNCATE ON engram.images
    FOR EACH STATEMENT EXECUTE FUNCTION engram._usage_truncated();
CREATE TRIGGER usage_truncate AFTER TRUNCATE ON engram.slots
    FOR EACH STATEMENT EXECUTE FUNCTION engram._usage_truncated();
CREATE TRIGGER usage_truncate AFTER TRUNCATE ON engram.workspaces
    FOR EACH STATEMENT EXECUTE FUNCTION engram._usage_truncated();
CREATE TRIGGER usage_truncate AFTER TRUNCATE ON engram.states
    FOR EACH STATEMENT EXECUTE FUNCTION engram._usage_truncated();

-- Counts every owner's usage again from the rows, for DBAs: after a
-- restore with triggers disabled (pg_restore --disable-triggers), or any
-- doubt; the upgrade to 0.7.0 and the TRUNCATE triggers run it. Counts
-- only, never refuses (an owner may be over a quota lowered since).
-- Returns the number of owners counted.
CREATE FUNCTION engram.recount_usage() RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    v_count bigint;
BEGIN
    PERFORM engram._require_privileged('recount_usage');
    INSERT INTO engram.owner_locks AS l (owner)
    SELECT o.owner FROM (
        SELECT m.owner FROM engram.memories m UNION SELECT e.owner FROM engram.events e
        UNION SELECT i.owner FROM engram.images i UNION SELECT s.owner FROM engram.slots s
        UNION SELECT w.owner FROM engram.workspaces w UNION SELECT x.owner FROM engram.states x) o
    ORDER BY o.owner
    ON CONFLICT DO NOTHING;
    -- Every writer waits (it row-locks its owner's row): a table lock, not
    -- FOR UPDATE over every row, which Citus cannot take across shards.
    LOCK TABLE engram.owner_locks IN EXCLUSIVE MODE;
    UPDATE engram.owner_locks AS l SET
        memories = coalesce((SELECT count(*) FROM engram.memories m WHERE m.owner = l.owner), 0),
        events = coalesce((SELECT count(*) FROM engram.events e WHERE e.owner = l.owner), 0),
        image_bytes = coalesce((SELECT sum(i.bytes) FROM engram.images i WHERE i.owner = l.owner), 0),
        slots = coalesce((SELECT count(*) FROM engram.slots s WHERE s.owner = l.owner), 0),
        workspaces = coalesce((SELECT count(*) FROM engram.workspaces w WHERE w.owner = l.owner), 0),
        states = coalesce((SELECT count(*) FROM engram.states x WHERE x.owner = l.owner), 0);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$fn$;

-- Usage against each quota, for engram.stats: {counter: {used, limit}};
-- for the whole database (p_owner NULL), `used` is the busiest owner's.
CREATE FUNCTION engram._quotas(p_owner text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_limits jsonb := engram._setting_quotas();
    v_used   jsonb;
BEGIN
    SELECT jsonb_build_object('memories', coalesce(max(l.memories), 0), 'events', coalesce(max(l.events), 0),
                              'image_bytes', coalesce(max(l.image_bytes), 0), 'slots', coalesce(max(l.slots), 0),
                              'workspaces', coalesce(max(l.workspaces), 0), 'states', coalesce(max(l.states), 0))
    INTO v_used FROM engram.owner_locks l WHERE p_owner IS NULL OR l.owner = p_owner;
    RETURN (SELECT jsonb_object_agg(k.key, jsonb_build_object('used', v_used -> k.key, 'limit', k.value,
                                                              'setting', 'engram.max_' || k.key || '_per_owner'))
            FROM jsonb_each(v_limits) k);
END
$fn$;

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
               engram._trust_at(v_now, v_half_life, m.author_type, m.created_at, m.correction_count, m.flag_count) AS trust,
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
-- publications by foreign key, their scope-list entries by trigger), access
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

-- Export and import (engram-mcp export / import; docs/OPERATIONS.md): one
-- JSON object per memory, with its embedding (pgvector's text form, exact),
-- tags, metadata, status and lifecycle columns, and its revisions. For
-- DBAs: both are not executable by PUBLIC.

-- A page of `owner`'s memories (every status), in id order after `after`.
CREATE FUNCTION engram.export_memories(owner text DEFAULT NULL, after uuid DEFAULT NULL, lim integer DEFAULT 500)
RETURNS TABLE (id uuid, memory jsonb)
LANGUAGE plpgsql STABLE AS $fn$
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
    r.dedup_key := engram._dedup_key(r.content, r.internal_type, engram._scope_of(r.tags), r.kind, r.session_id);
    IF coalesce(r.status, 'active') = 'active' AND EXISTS (
        SELECT 1 FROM engram.memories m WHERE m.owner = v_owner AND m.status = 'active' AND m.dedup_key = r.dedup_key) THEN
        RETURN 'duplicate';
    END IF;
    INSERT INTO engram.memories
        (id, owner, kind, source, internal_type, content, content_sha256, dedup_key, tags, metadata, embedding,
         author_type, importance, status, archive_reason, archive_note, merged_into, flagged_at, flag_count,
         flag_reason, correction_count, revision, trust_score, staleness_score, session_id, created_at,
         updated_at, expires_at, archived_at, access_level)
    VALUES
        (r.id, v_owner, r.kind, r.source, r.internal_type, r.content,
         sha256(convert_to(r.content, 'UTF8'::name)), r.dedup_key, r.tags,
         r.metadata, v_vec, r.author_type, r.importance,
         coalesce(r.status, 'active'), r.archive_reason, r.archive_note, r.merged_into, r.flagged_at,
         coalesce(r.flag_count, 0), r.flag_reason, coalesce(r.correction_count, 0), coalesce(r.revision, 1),
         coalesce(r.trust_score, engram._trust_at(now(), engram._setting_trust_half_life_days(), r.author_type, coalesce(r.created_at, now()), coalesce(r.correction_count, 0), coalesce(r.flag_count, 0))),
         coalesce(r.staleness_score, 0), r.session_id, coalesce(r.created_at, now()),
         coalesce(r.updated_at, now()), r.expires_at, r.archived_at, coalesce(r.access_level, 5));
    INSERT INTO engram.revisions (memory_id, revision, owner, content, tags, metadata, written_at, replaced_at,
                                  reason, is_correction, changed_by)
    SELECT r.id, v.revision, v_owner, v.content, coalesce(v.tags, '{}'), coalesce(v.metadata, '{}'),
           coalesce(v.written_at, now()), coalesce(v.replaced_at, now()), left(v.reason, 1000),
           coalesce(v.is_correction, false),
           CASE WHEN coalesce(import_memory.keep_provenance, false) THEN coalesce(v.changed_by, engram._caller_role())
                ELSE engram._caller_role() END
    FROM jsonb_populate_recordset(NULL::engram.revisions,
             CASE WHEN jsonb_typeof(import_memory.memory -> 'revisions') = 'array'
                  THEN import_memory.memory -> 'revisions' ELSE '[]' END) v;
    PERFORM engram._audit(v_owner, 'import', r.id,
        jsonb_build_object('reembedded', import_memory.embedding IS NOT NULL,
                           'kept_provenance', coalesce(import_memory.keep_provenance, false)));
    RETURN 'created';
END
$fn$;

---------------------------------------------------------------------------
-- resources (ToolHive): human-curated entries that agents read but never
-- change. Stored as memories with source = 'resource' (so search finds
-- them, with the owner's isolation), the name in metadata.name. Every
-- other write path refuses them (_require_writable, forget); only these
-- functions, for DBAs and platform tokens, write them.
---------------------------------------------------------------------------

CREATE FUNCTION engram._resource_json(m engram.memories) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT jsonb_build_object('id', m.id, 'name', m.metadata ->> 'name', 'content', m.content, 'tags', to_jsonb(m.tags),
                              'revision', m.revision, 'created_at', m.created_at, 'updated_at', m.updated_at)
$fn$;

CREATE FUNCTION engram._check_resource_name(p_name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_name IS NULL OR btrim(p_name) = '' OR length(p_name) > 200 THEN
        RAISE EXCEPTION 'a resource needs a name of 1 to 200 characters, e.g. name => ''Deploy checklist'''
            USING ERRCODE = '22023';
    END IF;
END
$fn$;

CREATE FUNCTION engram.resource_create(
    owner text DEFAULT NULL, name text DEFAULT NULL, content text DEFAULT NULL, tags text[] DEFAULT '{}',
    embedding vector DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text;
    v_tags  text[] := coalesce(engram._tag_set(resource_create.tags), '{}');
    v_key   bytea;
    v_id    uuid;
    r       engram.memories;
BEGIN
    PERFORM engram._require_admin('resource_create');
    v_owner := engram._caller(resource_create.owner, NULL, NULL, true);
    PERFORM engram._check_resource_name(resource_create.name);
    PERFORM engram._check_memory(resource_create.content, 'semantic', v_tags, 'object', 2, 0.5, 'human', NULL);
    PERFORM engram._check_vector(resource_create.embedding, 'embedding');
    PERFORM engram._lock_owner(v_owner);
    v_key := engram._dedup_key(resource_create.content, NULL, engram._scope_of(v_tags), 'semantic', NULL);
    SELECT m.id INTO v_id FROM engram.memories m
    WHERE m.owner = v_owner AND m.status = 'active' AND m.dedup_key = v_key;
    IF FOUND THEN
        RAISE EXCEPTION 'memory % already holds this content; update that resource instead', v_id
            USING ERRCODE = '23505';
    END IF;
    INSERT INTO engram.memories AS m
        (owner, kind, source, content, content_sha256, dedup_key, tags, metadata, embedding, author_type,
         trust_score, access_level)
    VALUES (v_owner, 'semantic', 'resource', resource_create.content,
            sha256(convert_to(resource_create.content, 'UTF8'::name)), v_key, v_tags,
            jsonb_build_object('name', btrim(resource_create.name)), resource_create.embedding, 'human',
            engram._trust_at(now(), engram._setting_trust_half_life_days(), 'human', now(), 0, 0), 5)
    RETURNING m.* INTO r;
    PERFORM engram._audit(v_owner, 'resource_create', r.id, jsonb_build_object('name', btrim(resource_create.name)));
    RETURN engram._resource_json(r);
END
$fn$;

-- The resource of this owner with this id, locked when p_lock; P0002 when
-- there is none (another owner's id included).
CREATE FUNCTION engram._locate_resource(p_owner text, p_id uuid, p_lock boolean) RETURNS engram.memories
LANGUAGE plpgsql AS $fn$
DECLARE
    r engram.memories;
BEGIN
    IF p_lock THEN
        SELECT m.* INTO r FROM engram.memories m
        WHERE m.id = p_id AND m.owner = p_owner AND m.source = 'resource' AND m.status = 'active' FOR UPDATE;
    ELSE
        SELECT m.* INTO r FROM engram.memories m
        WHERE m.id = p_id AND m.owner = p_owner AND m.source = 'resource' AND m.status = 'active';
    END IF;
    IF r.id IS NULL THEN
        RAISE EXCEPTION 'resource % not found; list them with engram.resources() (GET /api/resources)', p_id
            USING ERRCODE = 'P0002';
    END IF;
    RETURN r;
END
$fn$;

CREATE FUNCTION engram.resource_update(
    owner text DEFAULT NULL, id uuid DEFAULT NULL, name text DEFAULT NULL, content text DEFAULT NULL,
    tags text[] DEFAULT NULL, embedding vector DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text;
    r       engram.memories;
BEGIN
    PERFORM engram._require_admin('resource_update');
    v_owner := engram._caller(resource_update.owner, NULL, NULL, true);
    PERFORM engram._lock_owner(v_owner);
    r := engram._locate_resource(v_owner, resource_update.id, true);
    IF resource_update.name IS NOT NULL THEN
        PERFORM engram._check_resource_name(resource_update.name);
    END IF;
    PERFORM engram._check_new_content(r, resource_update.content, resource_update.embedding);
    PERFORM engram._check_1d('tags', resource_update.tags);
    IF resource_update.tags IS NOT NULL THEN
        PERFORM engram._check_tags(resource_update.tags, NULL, r.tags);
    END IF;
    PERFORM engram._rewrite(r, v_owner, resource_update.content, resource_update.embedding, resource_update.tags,
        CASE WHEN resource_update.name IS NOT NULL
             THEN r.metadata || jsonb_build_object('name', btrim(resource_update.name)) END,
        NULL, NULL, false, 'resource_update');
    SELECT m.* INTO r FROM engram.memories m WHERE m.id = r.id;
    RETURN engram._resource_json(r);
END
$fn$;

CREATE FUNCTION engram.resource_delete(owner text DEFAULT NULL, id uuid DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text;
    r       engram.memories;
BEGIN
    PERFORM engram._require_admin('resource_delete');
    v_owner := engram._caller(resource_delete.owner, NULL, NULL, true);
    PERFORM engram._lock_owner(v_owner);
    r := engram._locate_resource(v_owner, resource_delete.id, true);
    DELETE FROM engram.memory_access a WHERE a.owner = r.owner AND a.memory_id = r.id;
    DELETE FROM engram.memories m WHERE m.owner = r.owner AND m.id = r.id;
    PERFORM engram._audit(v_owner, 'resource_delete', r.id, jsonb_build_object('name', r.metadata ->> 'name'));
    RETURN true;
END
$fn$;

-- An owner's resources (every token holder of the owner reads them: MCP
-- resources/list), newest first. Each row is fetched and then made JSON
-- here: a whole-row argument inside the query would, on Citus, go to the
-- shard, whose row type _resource_json does not take.
CREATE FUNCTION engram.resources(owner text DEFAULT NULL) RETURNS SETOF jsonb
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_owner text := engram._caller(resources.owner, NULL, NULL, false);
    r       engram.memories;
BEGIN
    FOR r IN SELECT * FROM engram.memories m
             WHERE m.owner = v_owner AND m.source = 'resource' AND m.status = 'active'
             ORDER BY m.updated_at DESC, m.id
    LOOP
        RETURN NEXT engram._resource_json(r);
    END LOOP;
END
$fn$;

CREATE FUNCTION engram.resource_get(owner text DEFAULT NULL, id uuid DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN engram._resource_json(engram._locate_resource(engram._caller(resource_get.owner, NULL, NULL, false),
                                                         resource_get.id, false));
END
$fn$;

-- The audit rows of one of the owner's memories, oldest first (the memory
-- browser's trail). Audit rows never hold content.
CREATE FUNCTION engram.audit_trail(owner text DEFAULT NULL, id uuid DEFAULT NULL)
RETURNS TABLE (at timestamptz, actor text, action text, details jsonb, token_label text)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_owner text := engram._caller(audit_trail.owner, NULL, NULL, false);
BEGIN
    RETURN QUERY SELECT l.at, l.actor, l.action, l.details, l.token_label FROM engram.audit_log l
    WHERE l.owner = v_owner AND l.memory_id = audit_trail.id
    ORDER BY l.at, l.id;
END
$fn$;

-- Idempotent pg_cron jobs (by name): engram-expire and engram-rescore, and
-- engram-purge when purge_cron is given (removed when it is not). The same
-- call twice leaves the same jobs.
CREATE FUNCTION engram.schedule_maintenance(
    expire_cron text DEFAULT '*/5 * * * *',
    rescore_cron text DEFAULT '17 3 * * *',
    purge_cron text DEFAULT NULL,
    purge_older_than interval DEFAULT '90 days')
RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM engram._require_privileged('schedule_maintenance');
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension e WHERE e.extname = 'pg_cron') THEN
        RAISE EXCEPTION 'pg_cron is not installed in this database; install postgresql-15-cron, set shared_preload_libraries = ''pg_cron'' and cron.database_name = ''%'', restart, then CREATE EXTENSION pg_cron', current_database()
            USING ERRCODE = '55000';
    END IF;
    IF schedule_maintenance.expire_cron IS NULL OR schedule_maintenance.rescore_cron IS NULL THEN
        RAISE EXCEPTION 'expire_cron and rescore_cron are required cron schedules, e.g. ''*/5 * * * *'''
            USING ERRCODE = '22004';
    END IF;
    PERFORM cron.schedule('engram-expire', schedule_maintenance.expire_cron, 'SELECT engram.expire()');
    PERFORM cron.schedule('engram-rescore', schedule_maintenance.rescore_cron, 'SELECT engram.rescore()');
    IF schedule_maintenance.purge_cron IS NOT NULL THEN
        PERFORM cron.schedule('engram-purge', schedule_maintenance.purge_cron,
            format('SELECT engram.purge(older_than => %L)', schedule_maintenance.purge_older_than::text));
    ELSIF EXISTS (SELECT 1 FROM cron.job j WHERE j.jobname = 'engram-purge' AND j.username = current_user) THEN
        -- The call states the whole schedule: no purge_cron, no purge job.
        PERFORM cron.unschedule('engram-purge');
    END IF;
    PERFORM engram._audit(NULL, 'schedule_maintenance', NULL,
        jsonb_build_object('expire_cron', schedule_maintenance.expire_cron,
                           'rescore_cron', schedule_maintenance.rescore_cron,
                           'purge_cron', schedule_maintenance.purge_cron,
                           'purge_older_than', schedule_maintenance.purge_older_than::text));
END
$fn$;

---------------------------------------------------------------------------
-- identity: tokens and the owner binding (SPEC 8.1)
---------------------------------------------------------------------------

-- A usable token: not revoked, not expired.
-- (plpgsql, like every function that reads engram's tables: Citus cannot
-- plan a SQL function's parameterised statements.)
CREATE FUNCTION engram._token(p_token text) RETURNS engram.tokens
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    r engram.tokens;
BEGIN
    SELECT t.* INTO r FROM engram.tokens t
    WHERE t.token_sha256 = sha256(convert_to(coalesce(p_token, ''), 'UTF8'::name))
      AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now());
    RETURN r;
END
$fn$;

-- A new token for `owner`; the plaintext is returned once and stored hashed.
-- Platform tokens may act for any owner (engram.bind's act_as, MCP's
-- X-User-Id) and set an internal context; user tokens act only for their
-- owner. `expires`: the token stops working after this interval.
CREATE FUNCTION engram.create_token(
    owner text DEFAULT NULL, label text DEFAULT NULL, platform boolean DEFAULT false,
    expires interval DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
    v_token text;
    v_id    uuid;
BEGIN
    PERFORM engram._require_privileged('create_token');
    -- two v4 UUIDs from pg_strong_random: 244 random bits
    v_token := 'eg_' || replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');
    IF create_token.owner IS NULL OR btrim(create_token.owner) = '' THEN
        RAISE EXCEPTION 'owner is required; pass owner => ''<owner>'' (the collection the token acts for)'
            USING ERRCODE = '22004';
    END IF;
    PERFORM engram._check_short('label', create_token.label, 200);
    IF create_token.label IS NULL OR btrim(create_token.label) = '' THEN
        RAISE EXCEPTION 'label is required; name the token, e.g. label => ''laptop agent'''
            USING ERRCODE = '22004';
    END IF;
    IF create_token.expires IS NOT NULL AND create_token.expires <= interval '0' THEN
        RAISE EXCEPTION 'expires % is not positive; pass an interval such as ''90 days'', or NULL for a token that does not expire', create_token.expires
            USING ERRCODE = '22023';
    END IF;
    INSERT INTO engram.tokens AS t (owner, label, platform, token_sha256, expires_at)
    VALUES (create_token.owner, create_token.label, coalesce(create_token.platform, false),
            sha256(convert_to(v_token, 'UTF8'::name)), now() + create_token.expires)
    RETURNING t.id INTO v_id;
    PERFORM engram._audit(create_token.owner, 'create_token', NULL,
        jsonb_build_object('token_id', v_id, 'platform', coalesce(create_token.platform, false),
                           'expires_at', now() + create_token.expires));
    RETURN v_token;
END
$fn$;

-- Binds this transaction to an owner, for a restricted role the only way
-- to act at all (SPEC 8.1). A user token binds its own owner; a platform
-- token may act_as any owner and set an internal context (the MCP headers
-- X-Internal-Type and X-Ghost-*), which engram._check_context enforces.
-- token => NULL binds engram.anonymous_owner, and only in a database that
-- has never had a token. Returns the bound owner. Transaction-local: call it
-- after BEGIN, in the transaction that does the work.
CREATE FUNCTION engram.bind(
    token text DEFAULT NULL,
    act_as text DEFAULT NULL,
    internal_type text DEFAULT NULL,
    ghost_type text DEFAULT NULL,
    ghost_owner text DEFAULT NULL,
    ghost_space text DEFAULT NULL,
    ghost_group text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
    r          engram.tokens;
    v_owner    text;
    v_platform boolean := false;
    v_internal jsonb;
BEGIN
    PERFORM engram._check_planted();
    IF bind.token IS NULL THEN
        -- Anonymous binding ends for good with the first token: revoking or
        -- expiring every token never reopens it.
        IF NOT engram.anonymous_allowed() THEN
            RAISE EXCEPTION 'a token is required; pass token => ''eg_...'' (a DBA creates one with engram.create_token)'
                USING ERRCODE = '28000';
        END IF;
        v_owner := engram._setting_anonymous_owner();
        IF v_owner IS NULL THEN
            RAISE EXCEPTION 'anonymous binding is off (engram.anonymous_owner is empty); create a token with engram.create_token'
                USING ERRCODE = '28000';
        END IF;
    ELSE
        r := engram._token(bind.token);
        IF r.id IS NULL THEN
            RAISE EXCEPTION 'unknown, revoked or expired token; ask the DBA for a new one (engram.create_token)'
                USING ERRCODE = '28000';
        END IF;
        v_owner := r.owner;
        v_platform := r.platform;
    END IF;
    PERFORM engram._check_short('act_as', bind.act_as, 256);
    IF bind.act_as IS NOT NULL AND bind.act_as IS DISTINCT FROM v_owner THEN
        IF NOT v_platform THEN
            RAISE EXCEPTION 'act_as needs a platform token; a user token acts only for its own owner'
                USING ERRCODE = '42501';
        END IF;
        IF btrim(bind.act_as) = '' THEN
            RAISE EXCEPTION 'act_as is empty; name the owner to act for, or pass NULL'
                USING ERRCODE = '22023';
        END IF;
        v_owner := bind.act_as;
    END IF;
    IF bind.internal_type IS NOT NULL THEN
        IF NOT v_platform THEN
            RAISE EXCEPTION 'an internal context (internal_type => ''ghost'' or ''agent'') needs a platform token'
                USING ERRCODE = '42501';
        END IF;
        v_internal := jsonb_build_object(
            'internal_type', bind.internal_type,
            'scope', to_jsonb(engram.scope_tags(bind.internal_type, bind.ghost_type, bind.ghost_owner,
                                                bind.ghost_space, bind.ghost_group)),
            'ghost_type', bind.ghost_type,
            'ghost_id', coalesce(bind.ghost_owner, bind.ghost_space, bind.ghost_group));
    ELSIF coalesce(bind.ghost_type, bind.ghost_owner, bind.ghost_space, bind.ghost_group) IS NOT NULL THEN
        RAISE EXCEPTION 'ghost_type/ghost_owner/ghost_space/ghost_group need internal_type => ''ghost'''
            USING ERRCODE = '22023';
    END IF;
    PERFORM set_config('engram.owner', v_owner, true);
    -- On Citus, the workers' row-level security learns the binding from a
    -- signed proof (docs/SCALING.md, "Bindings across nodes").
    IF r.id IS NOT NULL AND engram._is_distributed() THEN
        PERFORM engram._propagate_setting('engram.remote_binding', engram._sign_binding(r.id::text, v_owner, v_internal IS NOT NULL,
            extract(epoch FROM clock_timestamp() + interval '10 minutes')::bigint,
            engram._binding_key((SELECT k.secret FROM engram.node_secret k), r.token_sha256)));
    END IF;
    PERFORM set_config('engram.binding', jsonb_build_object(
        'token_id', r.id, 'token_label', r.label, 'platform', v_platform,
        'act_as', CASE WHEN v_owner IS DISTINCT FROM r.owner AND r.id IS NOT NULL THEN v_owner END,
        'internal', v_internal)::text, true);
    -- (Not on Citus: tokens are a reference table there, and a write to it
    -- needs every node up, which would tie every owner's calls to the
    -- health of every worker.)
    IF NOT current_setting('transaction_read_only')::boolean
       AND r.id IS NOT NULL AND (r.last_used_at IS NULL OR r.last_used_at < now() - interval '1 minute')
       AND NOT engram._is_distributed() THEN
        UPDATE engram.tokens AS t SET last_used_at = now() WHERE t.id = r.id;
    END IF;
    -- A platform token acting for another owner leaves a trace in that
    -- owner's audit log (and the server log, even if the transaction is
    -- read-only or rolled back).
    IF r.id IS NOT NULL AND v_owner <> r.owner THEN
        PERFORM engram._audit_read(v_owner, 'bind', NULL, '{}');
    END IF;
    RETURN v_owner;
END
$fn$;

-- The owner and platform flag of a usable token; no row otherwise. Lets
-- engram-mcp answer 401 before it binds. last_used_at is refreshed at most
-- once a minute, so authentication does not turn every request into a write.
CREATE FUNCTION engram.authenticate(token text)
RETURNS TABLE (owner text, platform boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
    r engram.tokens;
BEGIN
    PERFORM engram._check_planted();
    r := engram._token(authenticate.token);
    IF r.id IS NULL THEN
        RETURN;
    END IF;
    IF (r.last_used_at IS NULL OR r.last_used_at < now() - interval '1 minute')
       AND NOT current_setting('transaction_read_only')::boolean AND NOT engram._is_distributed() THEN
        UPDATE engram.tokens AS t SET last_used_at = now() WHERE t.id = r.id;
    END IF;
    RETURN QUERY SELECT r.owner, r.platform;
END
$fn$;

-- Whether any usable token exists: while none does, engram.bind(NULL) binds
-- the anonymous owner, and engram-mcp serves loopback clients without one.
CREATE FUNCTION engram.has_tokens() RETURNS boolean
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    PERFORM engram._check_planted();
    RETURN EXISTS (SELECT 1 FROM engram.tokens t
                   WHERE t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now()));
END
$fn$;

-- Whether engram.bind(NULL) binds the anonymous owner: only in a database
-- that has never had a token. engram-mcp asks before serving a request
-- without one.
CREATE FUNCTION engram.anonymous_allowed() RETURNS boolean
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    PERFORM engram._check_planted();
    RETURN NOT EXISTS (SELECT 1 FROM engram.tokens t);
END
$fn$;

-- Revokes a token by id, or the tokens with a label (of one owner, or of
-- every owner when owner is NULL). Returns how many were revoked; audited.
CREATE FUNCTION engram.revoke_token(label text DEFAULT NULL, owner text DEFAULT NULL, token_id uuid DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    v_ids uuid[];
    r     record;
BEGIN
    PERFORM engram._require_privileged('revoke_token');
    IF revoke_token.token_id IS NULL AND revoke_token.label IS NULL THEN
        RAISE EXCEPTION 'name the token: token_id => ''<uuid>'' or label => ''<label>'' (with owner => ''<owner>'')'
            USING ERRCODE = '22004';
    END IF;
    WITH gone AS (
        UPDATE engram.tokens AS t SET revoked_at = now()
        WHERE t.revoked_at IS NULL
          AND (revoke_token.token_id IS NULL OR t.id = revoke_token.token_id)
          AND (revoke_token.label IS NULL OR t.label = revoke_token.label)
          AND (revoke_token.owner IS NULL OR t.owner = revoke_token.owner)
        RETURNING t.id, t.owner
    )
    SELECT array_agg(g.id) INTO v_ids FROM gone g;
    -- one audit row per token, in its owner's log
    FOR r IN SELECT t.id, t.owner FROM engram.tokens t WHERE t.id = ANY (coalesce(v_ids, '{}')) LOOP
        PERFORM engram._audit(r.owner, 'revoke_token', NULL, jsonb_build_object('token_id', r.id));
    END LOOP;
    RETURN coalesce(cardinality(v_ids), 0);
END
$fn$;

---------------------------------------------------------------------------
-- sharing: trust-gated ghost reads, spaces and groups (SPEC 8.3, 8.4)
---------------------------------------------------------------------------

-- Whether an owner's ghost talks to others (enabled) and the trust it
-- gives accessors without a grant. An owner without settings has no ghost:
-- sharing is opt-in. Returns the settings.
CREATE FUNCTION engram.ghost_settings(owner text DEFAULT NULL, enabled boolean DEFAULT true, default_trust integer DEFAULT 1)
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(ghost_settings.owner, NULL, NULL, true);
BEGIN
    PERFORM engram._lock_owner(v_owner);
    IF ghost_settings.default_trust IS NULL OR ghost_settings.default_trust NOT BETWEEN 0 AND 5 THEN
        RAISE EXCEPTION 'default_trust % is out of range; pass 0 (talk to nobody without a grant) to 5', coalesce(ghost_settings.default_trust::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    -- (now() in VALUES, not in DO UPDATE: Citus takes only immutable
    -- expressions there; the same in the upserts below.)
    INSERT INTO engram.ghost_settings AS g (owner, enabled, default_trust, updated_at)
    VALUES (v_owner, coalesce(ghost_settings.enabled, true), ghost_settings.default_trust, now())
    ON CONFLICT ON CONSTRAINT ghost_settings_pkey DO UPDATE SET enabled = excluded.enabled, default_trust = excluded.default_trust,
                                      updated_at = excluded.updated_at;
    PERFORM engram._audit(v_owner, 'ghost_settings', NULL,
        jsonb_build_object('enabled', coalesce(ghost_settings.enabled, true), 'default_trust', ghost_settings.default_trust));
    RETURN jsonb_build_object('owner', v_owner, 'enabled', coalesce(ghost_settings.enabled, true),
                              'default_trust', ghost_settings.default_trust);
END
$fn$;

-- The trust `owner` gives `accessor` (upsert): 0 blocks the accessor, 1-5
-- shows memories whose access_level is at most the trust. Returns it.
-- Levels and trusts are stored as smallint but taken as integer, so that
-- `trust => 3` resolves without a cast.
CREATE FUNCTION engram.grant(owner text DEFAULT NULL, accessor text DEFAULT NULL, trust integer DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller("grant".owner, NULL, NULL, true);
BEGIN
    PERFORM engram._lock_owner(v_owner);
    IF "grant".accessor IS NULL OR btrim("grant".accessor) = '' THEN
        RAISE EXCEPTION 'accessor is required; name the owner whose conversations with your ghost get this trust'
            USING ERRCODE = '22004';
    END IF;
    PERFORM engram._check_short('accessor', "grant".accessor, 256);
    IF "grant".accessor = v_owner THEN
        RAISE EXCEPTION 'an owner always sees its own memories; grant trust to someone else'
            USING ERRCODE = '22023';
    END IF;
    IF "grant".trust IS NULL OR "grant".trust NOT BETWEEN 0 AND 5 THEN
        RAISE EXCEPTION 'trust % is out of range; pass 0 (blocked) to 5 (sees every access level)', coalesce("grant".trust::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    INSERT INTO engram.grants AS g (owner, accessor, trust, granted_at)
    VALUES (v_owner, "grant".accessor, "grant".trust, now())
    ON CONFLICT ON CONSTRAINT grants_pkey DO UPDATE SET trust = excluded.trust, granted_at = excluded.granted_at;
    PERFORM engram._audit(v_owner, 'grant', NULL, jsonb_build_object('accessor', "grant".accessor, 'trust', "grant".trust));
    RETURN "grant".trust;
END
$fn$;

CREATE FUNCTION engram.revoke_grant(owner text DEFAULT NULL, accessor text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(revoke_grant.owner, NULL, NULL, true);
BEGIN
    PERFORM engram._lock_owner(v_owner);
    DELETE FROM engram.grants g WHERE g.owner = v_owner AND g.accessor = revoke_grant.accessor;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM engram._audit(v_owner, 'revoke_grant', NULL, jsonb_build_object('accessor', revoke_grant.accessor));
    RETURN true;
END
$fn$;

CREATE FUNCTION engram.grants(owner text DEFAULT NULL)
RETURNS TABLE (accessor text, trust smallint, granted_at timestamptz)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_owner text := engram._caller(grants.owner, NULL, NULL, false);
BEGIN
    RETURN QUERY SELECT g.accessor, g.trust, g.granted_at FROM engram.grants g
                 WHERE g.owner = v_owner ORDER BY g.accessor;
END
$fn$;

-- What the ghost (p_ghost_type, p_ghost_id) shows the accessor, as a read
-- scope over active normal memories; NULL when it shows nothing (then
-- p_denied says why). The accessor is the bound owner; a transaction bound
-- with a ghost context reads only that ghost.
CREATE FUNCTION engram._ghost_scope(p_accessor text, p_ghost_type text, p_ghost_id text, OUT s engram.read_scope, OUT p_denied text)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_ctx   jsonb := engram._binding() -> 'internal';
    v_trust smallint;
BEGIN
    IF p_ghost_id IS NULL OR btrim(p_ghost_id) = '' THEN
        RAISE EXCEPTION 'ghost_id is required: the owner (user ghost), space or group whose ghost the accessor talks to'
            USING ERRCODE = '22004';
    END IF;
    IF jsonb_typeof(v_ctx) = 'object' AND (v_ctx ->> 'internal_type' <> 'ghost'
       OR v_ctx ->> 'ghost_type' IS DISTINCT FROM p_ghost_type OR v_ctx ->> 'ghost_id' IS DISTINCT FROM p_ghost_id) THEN
        RAISE EXCEPTION 'this transaction is bound to another internal context; read the ghost it was bound for'
            USING ERRCODE = '42501';
    END IF;
    CASE p_ghost_type
    WHEN 'user' THEN
        IF p_ghost_id = p_accessor THEN
            RAISE EXCEPTION 'that is the accessor''s own ghost; read your own memories with engram.search, engram.recall and engram.list'
                USING ERRCODE = '22023';
        END IF;
        SELECT CASE WHEN NOT g.enabled THEN NULL ELSE coalesce(x.trust, g.default_trust) END
        INTO v_trust
        FROM engram.ghost_settings g
        LEFT JOIN engram.grants x ON x.owner = g.owner AND x.accessor = p_accessor
        WHERE g.owner = p_ghost_id;
        IF v_trust IS NULL THEN
            p_denied := 'ghost disabled';
        ELSIF v_trust = 0 THEN
            p_denied := 'accessor blocked';
        ELSE
            s := ROW(p_ghost_id, '{active}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_trust, NULL, NULL);
        END IF;
    WHEN 'space' THEN
        s := ROW(NULL, '{active}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, p_ghost_id, NULL);
    WHEN 'group' THEN
        IF EXISTS (SELECT 1 FROM engram.group_members g WHERE g.group_id = p_ghost_id AND g.member = p_accessor) THEN
            s := ROW(NULL, '{active}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, p_ghost_id);
        ELSE
            p_denied := 'not a member of the group';
        END IF;
    ELSE
        RAISE EXCEPTION 'ghost_type % is unknown; use user, space or group', engram._echo(p_ghost_type)
            USING ERRCODE = '22023';
    END CASE;
END
$fn$;

-- A ghost read that showed nothing because of a setting, a grant or a
-- membership: audited where the ghost's owner (user ghosts) or the DBA
-- (spaces, groups) sees it, never in the accessor's own log.
CREATE FUNCTION engram._ghost_denied(p_accessor text, p_ghost_type text, p_ghost_id text, p_why text, p_memory uuid, p_memory_owner text)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM engram._audit_read(CASE WHEN p_ghost_type = 'user' THEN p_ghost_id ELSE p_memory_owner END,
        'ghost_denied', p_memory,
        jsonb_build_object('accessor', p_accessor, 'ghost_type', p_ghost_type, 'ghost_id', p_ghost_id, 'why', p_why));
END
$fn$;

CREATE FUNCTION engram.ghost_search(
    accessor text DEFAULT NULL,
    ghost_type text DEFAULT NULL,
    ghost_id text DEFAULT NULL,
    query_embedding vector DEFAULT NULL,
    query_text text DEFAULT NULL,
    k integer DEFAULT 10,
    kinds text[] DEFAULT NULL,
    tags_all text[] DEFAULT NULL,
    tags_any text[] DEFAULT NULL,
    min_similarity real DEFAULT 0)
RETURNS TABLE (id uuid, content text, kind text, tags text[], metadata jsonb, similarity real,
               score real, trust_score real, staleness_score real, created_at timestamptz, source text)
LANGUAGE plpgsql ROWS 10 AS $fn$
DECLARE
    v_accessor text := engram._owner(ghost_search.accessor);
    v_view     record;
    s          engram.read_scope;
BEGIN
    PERFORM engram._check_flat_filters(ghost_search.kinds, ghost_search.tags_all, ghost_search.tags_any, NULL, NULL);
    v_view := engram._ghost_scope(v_accessor, ghost_search.ghost_type, ghost_search.ghost_id);
    IF v_view.p_denied IS NOT NULL THEN
        PERFORM engram._ghost_denied(v_accessor, ghost_search.ghost_type, ghost_search.ghost_id, v_view.p_denied, NULL, NULL);
        RETURN;
    END IF;
    s := v_view.s;
    s.kinds := ghost_search.kinds;
    s.tags_all := ghost_search.tags_all;
    s.tags_any := ghost_search.tags_any;
    RETURN QUERY SELECT h.* FROM unnest(engram._search(s, ghost_search.query_embedding, ghost_search.query_text,
                                                       ghost_search.k, ghost_search.min_similarity)) h;
END
$fn$;

-- One memory through a ghost; no row when the ghost does not show it
-- (missing and denied look the same to the accessor; a denial is audited).
CREATE FUNCTION engram.ghost_recall(
    accessor text DEFAULT NULL,
    ghost_type text DEFAULT NULL,
    ghost_id text DEFAULT NULL,
    id uuid DEFAULT NULL)
RETURNS SETOF engram.recalled_memory
LANGUAGE plpgsql AS $fn$
DECLARE
    v_accessor text := engram._owner(ghost_recall.accessor);
    v_view     record;
    s          engram.read_scope;
    r          engram.memories;
BEGIN
    IF ghost_recall.id IS NULL THEN
        RAISE EXCEPTION 'id is required; pass id => ''<memory id>'' (see engram.ghost_search or engram.ghost_list)'
            USING ERRCODE = '22004';
    END IF;
    v_view := engram._ghost_scope(v_accessor, ghost_recall.ghost_type, ghost_recall.ghost_id);
    s := v_view.s;
    SELECT m.* INTO r FROM engram.memories m
    WHERE m.id = ghost_recall.id AND v_view.p_denied IS NULL
      AND (s.owner IS NULL OR m.owner = s.owner)
      AND m.status = 'active' AND (m.expires_at IS NULL OR m.expires_at > now())
      AND m.internal_type IS NULL
      AND (s.max_level IS NULL OR m.access_level <= s.max_level)
      AND (s.space IS NULL OR EXISTS (SELECT 1 FROM engram.publications p WHERE p.owner = m.owner AND p.memory_id = m.id AND p.space = s.space))
      AND (s.group_id IS NULL OR EXISTS (SELECT 1 FROM engram.publications p WHERE p.owner = m.owner AND p.memory_id = m.id AND p.group_id = s.group_id));
    IF r.id IS NULL THEN
        -- Audited whether or not the id exists: the write (and the audit
        -- sequence it advances) must not tell the accessor which it was.
        SELECT m.* INTO r FROM engram.memories m WHERE m.id = ghost_recall.id;
        PERFORM engram._ghost_denied(v_accessor, ghost_recall.ghost_type, ghost_recall.ghost_id,
            coalesce(v_view.p_denied, 'not shown by this ghost'), ghost_recall.id, r.owner);
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM engram._recalled(r);
END
$fn$;

CREATE FUNCTION engram.ghost_list(
    accessor text DEFAULT NULL,
    ghost_type text DEFAULT NULL,
    ghost_id text DEFAULT NULL,
    kinds text[] DEFAULT NULL,
    tags_all text[] DEFAULT NULL,
    order_by text DEFAULT 'created_at',
    descending boolean DEFAULT true,
    "limit" integer DEFAULT 50,
    after text DEFAULT NULL)
RETURNS SETOF engram.listed_memory
LANGUAGE plpgsql AS $fn$
DECLARE
    v_accessor text := engram._owner(ghost_list.accessor);
    v_view     record;
    s          engram.read_scope;
BEGIN
    PERFORM engram._check_flat_filters(ghost_list.kinds, ghost_list.tags_all, NULL, NULL, NULL);
    v_view := engram._ghost_scope(v_accessor, ghost_list.ghost_type, ghost_list.ghost_id);
    IF v_view.p_denied IS NOT NULL THEN
        PERFORM engram._ghost_denied(v_accessor, ghost_list.ghost_type, ghost_list.ghost_id, v_view.p_denied, NULL, NULL);
        RETURN;
    END IF;
    s := v_view.s;
    s.kinds := ghost_list.kinds;
    s.tags_all := ghost_list.tags_all;
    RETURN QUERY SELECT * FROM engram._list(s, 'active', ghost_list.order_by, ghost_list.descending,
                                            ghost_list."limit", ghost_list.after);
END
$fn$;

-- Publishes one of the owner's normal memories to a space or a group
-- (exactly one of the two); idempotent. Returns the publication id.
CREATE FUNCTION engram.publish(owner text DEFAULT NULL, id uuid DEFAULT NULL, space text DEFAULT NULL, group_id text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(publish.owner, NULL, NULL, true);
    r       engram.memories;
    v_pub   uuid;
BEGIN
    IF (publish.space IS NULL) = (publish.group_id IS NULL) OR btrim(coalesce(publish.space, publish.group_id)) = '' THEN
        RAISE EXCEPTION 'publish to exactly one target: space => ''<space id>'' or group_id => ''<group id>'''
            USING ERRCODE = '22023';
    END IF;
    PERFORM engram._check_short('space', publish.space, 200);
    PERFORM engram._check_short('group_id', publish.group_id, 200);
    -- A group is closed (SPEC 8.5): what is published there reaches its
    -- members' prompts, so only members, platform tokens and DBAs publish.
    IF publish.group_id IS NOT NULL AND NOT engram._privileged_or_platform()
       AND NOT EXISTS (SELECT 1 FROM engram.group_members g
                       WHERE g.group_id = publish.group_id AND g.member = v_owner) THEN
        RAISE EXCEPTION 'owner % is not a member of group %; only members publish to a group (a DBA or a platform token adds members with engram.add_member)', engram._echo(v_owner), engram._echo(publish.group_id)
            USING ERRCODE = '42501';
    END IF;
    PERFORM engram._lock_owner(v_owner);
    r := engram._locate(v_owner, publish.id, NULL, NULL, true);
    PERFORM engram._require_writable(r, 'publish');
    INSERT INTO engram.publications AS p (memory_id, owner, space, group_id)
    VALUES (r.id, v_owner, publish.space, publish.group_id)
    ON CONFLICT DO NOTHING
    RETURNING p.id INTO v_pub;
    IF v_pub IS NULL THEN
        SELECT p.id INTO v_pub FROM engram.publications p
        WHERE p.owner = r.owner AND p.memory_id = r.id AND p.space IS NOT DISTINCT FROM publish.space
          AND p.group_id IS NOT DISTINCT FROM publish.group_id;
        RETURN v_pub;
    END IF;
    PERFORM engram._audit(v_owner, 'publish', r.id, jsonb_build_object('space', publish.space, 'group_id', publish.group_id));
    RETURN v_pub;
END
$fn$;

-- Withdraws a memory from a space or a group, or from everywhere when both
-- are NULL. Returns whether anything was withdrawn.
CREATE FUNCTION engram.unpublish(owner text DEFAULT NULL, id uuid DEFAULT NULL, space text DEFAULT NULL, group_id text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(unpublish.owner, NULL, NULL, true);
    r       engram.memories;
    v_count bigint;
BEGIN
    PERFORM engram._lock_owner(v_owner);
    r := engram._locate(v_owner, unpublish.id, NULL, NULL, true);
    DELETE FROM engram.publications p
    WHERE p.owner = r.owner AND p.memory_id = r.id
      AND (unpublish.space IS NULL OR p.space = unpublish.space)
      AND (unpublish.group_id IS NULL OR p.group_id = unpublish.group_id);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count > 0 THEN
        PERFORM engram._audit(v_owner, 'unpublish', r.id,
            jsonb_build_object('space', unpublish.space, 'group_id', unpublish.group_id, 'count', v_count));
    END IF;
    RETURN v_count > 0;
END
$fn$;

-- An operator, aggregate or cast names its function directly: evaluating
-- it runs that function with no code of its creator in between, so one
-- that an unprivileged role built on engram's functions would lend engram
-- the privileges of whoever evaluates it (extension/src/privilege.rs sees
-- no function or relation of that role). Such definitions are refused when
-- they are made.
CREATE FUNCTION engram._refuse_borrowed_functions() RETURNS event_trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    v_object text;
BEGIN
    IF coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user), false)
       OR pg_catalog.has_parameter_privilege(current_user, 'engram.owner', 'SET') THEN
        RETURN;
    END IF;
    SELECT d.object_identity INTO v_object
    FROM pg_catalog.pg_event_trigger_ddl_commands() d
    WHERE EXISTS (
        SELECT 1 FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'engram'::regnamespace
          AND p.oid = ANY (ARRAY(
              SELECT unnest(ARRAY[o.oprcode::oid, o.oprrest::oid, o.oprjoin::oid])
              FROM pg_catalog.pg_operator o
              WHERE d.classid = 'pg_catalog.pg_operator'::regclass AND o.oid = d.objid
              UNION ALL
              SELECT unnest(ARRAY[a.aggtransfn::oid, a.aggfinalfn::oid, a.aggcombinefn::oid, a.aggserialfn::oid,
                                  a.aggdeserialfn::oid, a.aggmtransfn::oid, a.aggminvtransfn::oid, a.aggmfinalfn::oid])
              FROM pg_catalog.pg_aggregate a
              WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND a.aggfnoid = d.objid
              UNION ALL
              SELECT c.castfunc FROM pg_catalog.pg_cast c
              WHERE d.classid = 'pg_catalog.pg_cast'::regclass AND c.oid = d.objid)))
    LIMIT 1;
    IF v_object IS NOT NULL THEN
        RAISE EXCEPTION '% would call a function of engram for whoever evaluates it; only a superuser or a role granted SET ON PARAMETER engram.owner may build operators, aggregates or casts on engram''s functions', v_object
            USING ERRCODE = '42501';
    END IF;
END
$fn$;
CREATE EVENT TRIGGER engram_borrowed_functions ON ddl_command_end
    WHEN TAG IN ('CREATE OPERATOR', 'ALTER OPERATOR', 'CREATE AGGREGATE', 'CREATE CAST')
    EXECUTE FUNCTION engram._refuse_borrowed_functions();

-- Administrative functions (tokens, erasure, export/import, maintenance,
-- configuration) run only for a privileged caller whose privilege is not
-- withheld (extension/src/privilege.rs): an EXECUTE grant alone does not
-- let code of another role that a DBA's statement runs (a trigger, a view,
-- a column default) reach them.
CREATE FUNCTION engram._require_privileged(p_action text) RETURNS void
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    PERFORM engram._check_planted();
    IF NOT engram._caller_privileged() THEN
        RAISE EXCEPTION '% is for DBAs (a superuser, or a role granted SET ON PARAMETER engram.owner)%', p_action,
            engram._withheld_note()
            USING ERRCODE = '42501';
    END IF;
END
$fn$;

-- '' or, when the session's role is privileged but its privilege is
-- withheld from this call, why (for the refusal's message).
CREATE FUNCTION engram._withheld_note() RETURNS text
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_withheld text := engram._withheld_privilege();
BEGIN
    RETURN CASE WHEN v_withheld IS NULL THEN ''
                ELSE format('; engram does not lend the privileges of role %s to this call: %s',
                            engram._caller_role(), v_withheld) END;
END
$fn$;

-- Group membership is administered by DBAs and platform tokens.
CREATE FUNCTION engram._require_admin(p_action text) RETURNS void
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    PERFORM engram._check_planted();
    IF NOT engram._privileged_or_platform() THEN
        RAISE EXCEPTION '% is for DBAs and platform tokens; bind with a platform token (engram.bind)%', p_action,
            engram._withheld_note()
            USING ERRCODE = '42501';
    END IF;
END
$fn$;

CREATE FUNCTION engram.add_member(group_id text DEFAULT NULL, member text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM engram._require_admin('add_member');
    PERFORM engram._check_short('group_id', add_member.group_id, 200);
    PERFORM engram._check_short('member', add_member.member, 256);
    IF add_member.member IS NOT NULL THEN
        PERFORM engram._lock_owner(add_member.member);
    END IF;
    IF btrim(coalesce(add_member.group_id, '')) = '' OR btrim(coalesce(add_member.member, '')) = '' THEN
        RAISE EXCEPTION 'group_id and member are required, e.g. add_member(group_id => ''team-a'', member => ''alice'')'
            USING ERRCODE = '22004';
    END IF;
    INSERT INTO engram.group_members AS g (group_id, member) VALUES (add_member.group_id, add_member.member)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM engram._audit(NULL, 'add_member', NULL, jsonb_build_object('group_id', add_member.group_id, 'member', add_member.member));
    RETURN true;
END
$fn$;

CREATE FUNCTION engram.remove_member(group_id text DEFAULT NULL, member text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_withdrawn bigint;
BEGIN
    PERFORM engram._require_admin('remove_member');
    PERFORM engram._check_short('group_id', remove_member.group_id, 200);
    PERFORM engram._check_short('member', remove_member.member, 256);
    IF remove_member.member IS NOT NULL THEN
        PERFORM engram._lock_owner(remove_member.member);
    END IF;
    DELETE FROM engram.group_members g WHERE g.group_id = remove_member.group_id AND g.member = remove_member.member;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- What the member published to the group leaves with it: a former
    -- member keeps no channel into the group's conversations.
    WITH gone AS (
        DELETE FROM engram.publications p
        WHERE p.owner = remove_member.member AND p.group_id = remove_member.group_id
        RETURNING p.memory_id)
    SELECT count(*) INTO v_withdrawn FROM gone;
    PERFORM engram._audit(NULL, 'remove_member', NULL, jsonb_build_object('group_id', remove_member.group_id,
        'member', remove_member.member, 'withdrawn_publications', v_withdrawn));
    RETURN true;
END
$fn$;

---------------------------------------------------------------------------
-- slots (agentmemory, SPEC 9)
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
-- (workspace '') it does not shadow; NULL: the global ones. The one place
-- the shadowing rule lives (slot_get, slot_list, the context package).
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
LANGUAGE plpgsql STABLE AS $fn$
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
LANGUAGE plpgsql STABLE AS $fn$
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

---------------------------------------------------------------------------
-- continuity: workspaces and states (Nexus, SPEC 9)
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
LANGUAGE plpgsql STABLE AS $fn$
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

-- The pinned slots visible in a workspace ('' for the global ones only).
CREATE FUNCTION engram._pinned_slots(p_owner text, p_workspace text) RETURNS jsonb
LANGUAGE sql STABLE AS $fn$
    SELECT coalesce(jsonb_agg(jsonb_build_object('label', v.label, 'workspace', nullif(v.workspace, ''),
               'content', v.content, 'chars', char_length(v.content), 'size_limit', v.size_limit,
               'pinned', true, 'age_s', round(extract(epoch FROM now() - v.updated_at)))
               ORDER BY v.label), '[]')
    FROM engram._visible_slots(p_owner, p_workspace) v
    WHERE v.pinned
$fn$;

CREATE FUNCTION engram._state_json(s engram.states, p_workspace text) RETURNS jsonb
LANGUAGE sql STABLE AS $fn$
    SELECT jsonb_build_object('id', s.id, 'workspace', p_workspace, 'name', s.name, 'description', s.description,
        'conversation_context', s.conversation_context, 'active_task', s.active_task,
        'active_files', to_jsonb(s.active_files), 'next_steps', to_jsonb(s.next_steps), 'tags', to_jsonb(s.tags),
        'created_at', s.created_at, 'archived', s.archived_at IS NOT NULL,
        'age_s', round(extract(epoch FROM now() - s.created_at)))
$fn$;

-- The workspace with its latest states, recent sessions and pinned slots,
-- in one call: what an agent reads when it comes back.
CREATE FUNCTION engram.workspace_load(owner text DEFAULT NULL, name text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $fn$
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

CREATE TYPE engram.state_item AS (name text, description text, active_task text, next_steps integer, tags text[],
                                  created_at timestamptz, archived boolean);

CREATE FUNCTION engram.state_list(owner text DEFAULT NULL, workspace text DEFAULT NULL, include_archived boolean DEFAULT false)
RETURNS SETOF engram.state_item
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_owner text := engram._caller(state_list.owner, NULL, NULL, false);
    w       engram.workspaces := engram._workspace(v_owner, state_list.workspace, false);
BEGIN
    RETURN QUERY
    SELECT s.name, left(split_part(s.description, E'\n', 1), 120), left(s.active_task, 120),
           cardinality(s.next_steps), s.tags, s.created_at, s.archived_at IS NOT NULL
    FROM engram.states s
    WHERE s.owner = w.owner AND s.workspace_id = w.id AND (s.archived_at IS NULL OR coalesce(state_list.include_archived, false))
    ORDER BY s.created_at DESC;
END
$fn$;

-- A state in full; without a name, the workspace's latest.
CREATE FUNCTION engram.state_load(owner text DEFAULT NULL, workspace text DEFAULT NULL, name text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_owner text := engram._caller(state_load.owner, NULL, NULL, false);
    w       engram.workspaces := engram._workspace(v_owner, state_load.workspace, false);
    s       engram.states;
BEGIN
    IF state_load.name IS NULL THEN
        SELECT * INTO s FROM engram.states x WHERE x.owner = w.owner AND x.workspace_id = w.id AND x.archived_at IS NULL
        ORDER BY x.created_at DESC LIMIT 1;
    ELSE
        PERFORM engram._check_name('name', state_load.name);
        SELECT * INTO s FROM engram.states x WHERE x.owner = w.owner AND x.workspace_id = w.id AND x.name = state_load.name;
    END IF;
    IF s.id IS NULL THEN
        RAISE EXCEPTION 'State "%" not found in workspace "%". Use memory_state_list (SQL: engram.state_list) to see its states', engram._echo(coalesce(state_load.name, '(latest)')), w.name
            USING ERRCODE = 'P0002';
    END IF;
    RETURN engram._state_json(s, w.name);
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

---------------------------------------------------------------------------
-- continuity: events, sessions, summaries (MetaHuman, SPEC 9)
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
    error text DEFAULT NULL)
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
         trust_score, session_id)
    VALUES
        (v_id, v_owner, 'episodic', v_content, sha256(convert_to(v_content, 'UTF8'::name)), sha256(uuid_send(v_id)),
         capture.embedding, 'agent', v_importance, engram._trust_at(now(), engram._setting_trust_half_life_days(), 'agent', now(), 0, 0), capture.session_id);
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
CREATE FUNCTION engram.embedding_backlog(owner text DEFAULT NULL, lim integer DEFAULT 64)
RETURNS TABLE (id uuid, content text)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_owner text := engram._caller(embedding_backlog.owner, NULL, NULL, false);
BEGIN
    RETURN QUERY
    SELECT m.id, m.content FROM engram.memories m
    WHERE m.owner = v_owner AND m.embedding IS NULL AND m.status = 'active' AND m.internal_type IS NULL
      AND m.source <> 'resource'  -- people write resources' embeddings (resource_update)
    ORDER BY m.created_at, m.id
    LIMIT least(greatest(coalesce(embedding_backlog.lim, 64), 1), 1000);
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
LANGUAGE plpgsql STABLE AS $fn$
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
LANGUAGE plpgsql STABLE AS $fn$
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
LANGUAGE plpgsql STABLE AS $fn$
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

---------------------------------------------------------------------------
-- the context package (MetaHuman, SPEC 9)
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
    v_hits    engram.search_hit[] := '{}';
    v_shown   uuid[];
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

    -- The top memories for the query, past what the other sections show.
    IF context.query_embedding IS NOT NULL OR nullif(btrim(context.query_text), '') IS NOT NULL THEN
        v_shown := array_remove(ARRAY(SELECT (x ->> 'id')::uuid FROM jsonb_array_elements(v_tools) x)
                                || (v_summary ->> 'id')::uuid, NULL);
        v_hits := engram._search(
            ROW(v_owner, '{active}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::engram.read_scope,
            context.query_embedding, context.query_text, v_depth + cardinality(v_shown), 0);
    END IF;

    v_result := engram._render_context(jsonb_build_object(
        'state', v_state,
        'slots', engram._pinned_slots(v_owner, w.name),
        'summary', v_summary,
        'tool_events', v_tools,
        'memories', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', h.id, 'kind', h.kind, 'content', h.content,
                         'score', round(h.score::numeric, 4), 'age_s', round(extract(epoch FROM now() - h.created_at)))
                         ORDER BY h.n), '[]')
                     FROM (SELECT x.* FROM unnest(v_hits) WITH ORDINALITY AS x(id, content, kind, tags, metadata,
                               similarity, score, trust_score, staleness_score, created_at, source, n)
                           WHERE x.id <> ALL (coalesce(v_shown, '{}')) ORDER BY x.n LIMIT v_depth) h)),
        context.budget_chars);
    PERFORM engram._touch(v_owner, ARRAY(SELECT (x ->> 'id')::uuid FROM jsonb_array_elements(v_result -> 'memories') x));
    RETURN v_result || jsonb_build_object('workspace', w.name, 'depth', v_depth);
END
$fn$;

---------------------------------------------------------------------------
-- vision memories: images by content hash, CLIP embeddings (SPEC 11)
---------------------------------------------------------------------------

-- The dimension of image embeddings: the typmod of image_embeddings.embedding
-- (engram.configure(image_dims => ...)).
CREATE FUNCTION engram._image_dims() RETURNS integer
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN (SELECT a.atttypmod FROM pg_catalog.pg_attribute a
            WHERE a.attrelid = 'engram.image_embeddings'::regclass AND a.attname = 'embedding');
END
$fn$;

-- An image embedding (stored or a query) against the configured dimension.
CREATE FUNCTION engram._check_image_vector(p_vec vector, p_argument text) RETURNS void
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_dims integer := engram._image_dims();
BEGIN
    IF p_vec IS NULL THEN
        RAISE EXCEPTION '% is required: the image embedding (% dimensions)', p_argument, v_dims
            USING ERRCODE = '22004';
    END IF;
    PERFORM engram._check_vector(p_vec, p_argument, v_dims);
END
$fn$;

-- The owner's image `p_sha`, locked for a change when p_lock; raises
-- P0002 when the owner holds no such image.
CREATE FUNCTION engram._locate_image(p_owner text, p_sha text, p_lock boolean) RETURNS engram.images
LANGUAGE plpgsql AS $fn$
DECLARE
    r engram.images;
BEGIN
    IF p_lock THEN
        SELECT i.* INTO r FROM engram.images i WHERE i.owner = p_owner AND i.sha256 = p_sha FOR UPDATE;
    ELSE
        SELECT i.* INTO r FROM engram.images i WHERE i.owner = p_owner AND i.sha256 = p_sha;
    END IF;
    IF r.sha256 IS NULL THEN
        RAISE EXCEPTION 'image % not found; image ids are what engram.image_put returned (memory_image_put over MCP), and an image is erased at its last release', p_sha
            USING ERRCODE = 'P0002';
    END IF;
    RETURN r;
END
$fn$;

-- Refuses metadata whose "images" names anything but images the owner
-- holds (22023, changing nothing). remember and update call it under the
-- owner's lock, before they write; the triggers below are lenient, so that a restore or an import
-- never fails on an image that is not there (it is simply not held).
CREATE FUNCTION engram._check_image_refs(p_owner text, p_metadata jsonb) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_shas    text[];
    v_missing text;
BEGIN
    IF p_metadata IS NULL OR NOT p_metadata ? 'images' THEN
        RETURN;
    END IF;
    v_shas := engram._image_refs(p_metadata, true);
    -- KEY SHARE locks until commit: an erase (engram._image_settle) waits,
    -- then sees this transaction's hold; one that went first leaves no row.
    PERFORM 1 FROM engram.images i
    WHERE i.owner = p_owner AND i.sha256 = ANY (v_shas)
    ORDER BY i.sha256 FOR KEY SHARE;
    SELECT x.sha INTO v_missing FROM unnest(v_shas) AS x(sha)
    WHERE NOT EXISTS (SELECT 1 FROM engram.images i WHERE i.owner = p_owner AND i.sha256 = x.sha)
    LIMIT 1;
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'metadata.images names image %, which owner % does not hold; store it first with engram.image_put (memory_image_put) and name the id it returns', v_missing, p_owner
            USING ERRCODE = '22023';
    END IF;
END
$fn$;

-- An update's metadata: a new object without "images" keeps the memory's
-- images (an update of other keys must not let go of a screenshot); to
-- drop them, pass "images": [].
CREATE FUNCTION engram._keep_images(p_new jsonb, p_old jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    IF p_new IS NULL THEN
        RETURN p_old;
    ELSIF p_new ? 'images' OR NOT coalesce(p_old ? 'images', false) THEN
        RETURN p_new;
    END IF;
    RETURN p_new || jsonb_build_object('images', p_old -> 'images');
END
$fn$;

-- Erases the owner's image `p_sha` when nothing keeps it: no put
-- reference left and no memory holding it. The bytes and the embedding
-- go with the row (foreign keys). Returns the references left
-- (puts plus holding memories); NULL when the owner has no such image.
CREATE FUNCTION engram._image_settle(p_owner text, p_sha text) RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    v_refs  integer;
    v_holds integer;
BEGIN
    SELECT i.refs INTO v_refs FROM engram.images i WHERE i.owner = p_owner AND i.sha256 = p_sha FOR UPDATE;
    IF v_refs IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT count(*) INTO v_holds FROM engram.image_holds h WHERE h.owner = p_owner AND h.sha256 = p_sha;
    IF v_refs + v_holds > 0 THEN
        RETURN v_refs + v_holds;
    END IF;
    DELETE FROM engram.images i WHERE i.owner = p_owner AND i.sha256 = p_sha;
    PERFORM engram._audit(p_owner, 'image_erase', NULL, jsonb_build_object('sha256', p_sha));
    RETURN 0;
END
$fn$;

-- A memory naming images in metadata.images holds each of them while it
-- exists (engram.image_holds): the hold is taken when it is written, moved
-- when an update changes the list, and given back when the row is deleted
-- (hard forget, purge, erase_owner), so forgetting the last memory of a
-- screenshot erases it. Derived data, kept leniently: ids of images the
-- owner does not hold are skipped (engram._check_image_refs refuses them
-- in remember and update, before anything is written). Ids are handled in
-- sorted order, so two transactions lock images in the same order (up to
-- the order in which a statement deletes several memories).
-- Row triggers whose WHEN clause is checked without calling a function:
-- memories that name no images pay nothing.
-- Memory `p_memory` of `p_owner` holds the owner's images its metadata
-- names (ids of images the owner does not have are skipped).
CREATE FUNCTION engram._image_holds_take(p_owner text, p_memory uuid, p_metadata jsonb) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO engram.image_holds AS h (owner, memory_id, sha256)
    SELECT p_owner, p_memory, i.sha256
    FROM unnest(engram._image_refs(p_metadata, false)) AS x(sha)
    JOIN engram.images i ON i.owner = p_owner AND i.sha256 = x.sha
    ON CONFLICT DO NOTHING;
END
$fn$;

-- Memory `p_memory` lets go of every image it holds but `p_keep`, and each
-- is erased if nothing else keeps it (in id order).
CREATE FUNCTION engram._image_holds_give_back(p_owner text, p_memory uuid, p_keep text[]) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_sha text;
BEGIN
    FOR v_sha IN
        WITH gone AS (
            DELETE FROM engram.image_holds h
            WHERE h.owner = p_owner AND h.memory_id = p_memory AND h.sha256 <> ALL (p_keep)
            RETURNING h.sha256)
        SELECT g.sha256 FROM gone g ORDER BY g.sha256
    LOOP
        PERFORM engram._image_settle(p_owner, v_sha);
    END LOOP;
END
$fn$;

CREATE FUNCTION engram._image_refs_inserted() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM engram._image_holds_take(NEW.owner, NEW.id, NEW.metadata);
    RETURN NULL;
END
$fn$;

CREATE FUNCTION engram._image_refs_updated() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM engram._image_holds_take(NEW.owner, NEW.id, NEW.metadata);
    PERFORM engram._image_holds_give_back(OLD.owner, OLD.id, engram._image_refs(NEW.metadata, false));
    RETURN NULL;
END
$fn$;

CREATE FUNCTION engram._image_refs_deleted() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM engram._image_holds_give_back(OLD.owner, OLD.id, '{}');
    RETURN NULL;
END
$fn$;

-- TRUNCATE of the memories (a DBA's): no memory holds anything any more.
CREATE FUNCTION engram._image_refs_truncated() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    -- On a Citus shard (memories_102008...) the derived tables are other
    -- shards, which a trigger there cannot reach: the DBA rebuilds them
    -- after a TRUNCATE (docs/SCALING.md).
    IF TG_TABLE_NAME ~ '_[0-9]+$' THEN
        RETURN NULL;
    END IF;
    PERFORM engram.rebuild_image_holds();
    RETURN NULL;
END
$fn$;

-- Rebuilds engram.image_holds from the memories' metadata and erases the
-- images nothing keeps any more (no put reference, no memory). For DBAs:
-- after a restore that loaded memories before images (pg_restore -j, or
-- --disable-triggers), or any doubt; the TRUNCATE trigger runs it too.
-- Returns the holds and the images erased.
CREATE FUNCTION engram.rebuild_image_holds() RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_holds  bigint;
    v_erased bigint;
BEGIN
    PERFORM engram._require_privileged('rebuild_image_holds');
    LOCK TABLE engram.images IN EXCLUSIVE MODE;  -- (not FOR UPDATE: see recount_usage)
    DELETE FROM engram.image_holds;
    INSERT INTO engram.image_holds (owner, memory_id, sha256)
    SELECT DISTINCT m.owner, m.id, i.sha256
    FROM engram.memories m, unnest(engram._image_refs(m.metadata, false)) AS x(sha)
    JOIN engram.images i ON i.sha256 = x.sha
    WHERE m.metadata ? 'images' AND i.owner = m.owner;
    GET DIAGNOSTICS v_holds = ROW_COUNT;
    WITH gone AS (
        DELETE FROM engram.images i
        WHERE i.refs = 0 AND NOT EXISTS (SELECT 1 FROM engram.image_holds h
                                         WHERE h.owner = i.owner AND h.sha256 = i.sha256)
        RETURNING i.owner, i.sha256)
    SELECT count(*) INTO v_erased FROM gone;
    PERFORM engram._audit(NULL, 'rebuild_image_holds', NULL,
        jsonb_build_object('holds', v_holds, 'images_erased', v_erased));
    RETURN jsonb_build_object('holds', v_holds, 'images_erased', v_erased);
END
$fn$;

CREATE TRIGGER image_refs_truncate AFTER TRUNCATE ON engram.memories
    FOR EACH STATEMENT EXECUTE FUNCTION engram._image_refs_truncated();
CREATE TRIGGER image_refs_insert AFTER INSERT ON engram.memories
    FOR EACH ROW WHEN (NEW.metadata ? 'images') EXECUTE FUNCTION engram._image_refs_inserted();
CREATE TRIGGER image_refs_update AFTER UPDATE OF metadata ON engram.memories
    FOR EACH ROW WHEN (OLD.metadata -> 'images' IS DISTINCT FROM NEW.metadata -> 'images')
    EXECUTE FUNCTION engram._image_refs_updated();
CREATE TRIGGER image_refs_delete AFTER DELETE ON engram.memories
    FOR EACH ROW WHEN (OLD.metadata ? 'images') EXECUTE FUNCTION engram._image_refs_deleted();

-- Stores an image for `owner` once, by the sha256 of its bytes, and adds a
-- reference; returns the sha256 (hex), the image's id. A second put of the
-- same bytes adds a reference and keeps the first put's session. Refused,
-- changing nothing: a type engram does not store, bytes that are not of the
-- declared type, more than engram.image_max_bytes.
CREATE FUNCTION engram.image_put(
    owner text DEFAULT NULL,
    data bytea DEFAULT NULL,
    mime text DEFAULT NULL,
    session_id text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner    text := engram._caller(image_put.owner, NULL, NULL, true);
    v_bytes    integer := coalesce(octet_length(image_put.data), 0);
    v_mime     text := engram._check_image(image_put.mime, substring(image_put.data FROM 1 FOR 12), v_bytes);
    v_sha      text := encode(sha256(image_put.data), 'hex');
    v_refs     integer;
    v_inserted boolean;
BEGIN
    IF image_put.session_id IS NOT NULL AND (btrim(image_put.session_id) = '' OR octet_length(image_put.session_id) > 200) THEN
        RAISE EXCEPTION 'session_id must be 1 to 200 bytes, or NULL for none'
            USING ERRCODE = '22023';
    END IF;
    PERFORM engram._lock_owner(v_owner);
    INSERT INTO engram.images AS i (owner, sha256, mime, bytes, refs, session_id, updated_at)
    VALUES (v_owner, v_sha, v_mime, v_bytes, 1, image_put.session_id, now())
    ON CONFLICT ON CONSTRAINT images_pkey DO UPDATE SET refs = i.refs + 1, updated_at = excluded.updated_at
    RETURNING i.refs, (i.xmax = 0) INTO v_refs, v_inserted;
    IF v_inserted THEN
        INSERT INTO engram.image_data (owner, sha256, data) VALUES (v_owner, v_sha, image_put.data);
    END IF;
    PERFORM engram._audit(v_owner, 'image_put', NULL,
        jsonb_build_object('sha256', v_sha, 'bytes', v_bytes, 'mime', v_mime, 'refs', v_refs));
    RETURN v_sha;
END
$fn$;

-- Gives back one reference that image_put took; returns the references
-- left (puts plus memories holding the image). At 0 the bytes and the
-- embedding are erased in this transaction. A memory's hold is not the
-- caller's to give back: with no put reference left, it is refused.
CREATE FUNCTION engram.image_release(owner text DEFAULT NULL, sha256 text DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(image_release.owner, NULL, NULL, true);
    v_sha   text := engram._image_id(image_release.sha256);
    r       engram.images;
    v_left  integer;
BEGIN
    PERFORM engram._lock_owner(v_owner);
    r := engram._locate_image(v_owner, v_sha, true);
    IF r.refs = 0 THEN
        RAISE EXCEPTION 'image % has no reference from engram.image_put left to release; memories that name it in metadata.images hold it until they are forgotten for good (engram.forget(..., hard => true))', v_sha
            USING ERRCODE = '55000';
    END IF;
    UPDATE engram.images AS i SET refs = i.refs - 1, updated_at = now()
    WHERE i.owner = v_owner AND i.sha256 = v_sha;
    v_left := engram._image_settle(v_owner, v_sha);
    PERFORM engram._audit(v_owner, 'image_release', NULL, jsonb_build_object('sha256', v_sha, 'refs', v_left));
    RETURN v_left;
END
$fn$;

-- The bytes of one of the owner's images.
CREATE FUNCTION engram.image_get(owner text DEFAULT NULL, sha256 text DEFAULT NULL) RETURNS bytea
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_owner text := engram._caller(image_get.owner, NULL, NULL, false);
    v_sha   text := engram._image_id(image_get.sha256);
BEGIN
    PERFORM engram._locate_image(v_owner, v_sha, false);
    RETURN (SELECT d.data FROM engram.image_data d WHERE d.owner = v_owner AND d.sha256 = v_sha);
END
$fn$;

-- Stores (or replaces) the embedding of one of the owner's images, with
-- the model that computed it.
CREATE FUNCTION engram.vision_embed(
    owner text DEFAULT NULL,
    sha256 text DEFAULT NULL,
    embedding vector DEFAULT NULL,
    model text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_owner text := engram._caller(vision_embed.owner, NULL, NULL, true);
    v_sha   text := engram._image_id(vision_embed.sha256);
    r       engram.images;
BEGIN
    PERFORM engram._lock_owner(v_owner);
    PERFORM engram._check_image_vector(vision_embed.embedding, 'embedding');
    IF vision_embed.model IS NULL OR btrim(vision_embed.model) = '' OR octet_length(vision_embed.model) > 200 THEN
        RAISE EXCEPTION 'model is required: the name of the image model that computed the embedding (1 to 200 bytes)'
            USING ERRCODE = '22004';
    END IF;
    r := engram._locate_image(v_owner, v_sha, true);
    INSERT INTO engram.image_embeddings AS e (owner, sha256, session_id, created_at, model, embedding)
    VALUES (v_owner, v_sha, r.session_id, r.created_at, vision_embed.model, vision_embed.embedding)
    ON CONFLICT ON CONSTRAINT image_embeddings_pkey
    DO UPDATE SET model = EXCLUDED.model, embedding = EXCLUDED.embedding;
    UPDATE engram.images AS i SET embedded_at = now() WHERE i.owner = v_owner AND i.sha256 = v_sha;
    PERFORM engram._audit(v_owner, 'vision_embed', NULL, jsonb_build_object('sha256', v_sha, 'model', vision_embed.model));
    RETURN true;
END
$fn$;

-- The owner's embedded images nearest to `query_embedding` (an image's or
-- a text's, from the same model): exact cosine over the owner's images (or
-- one session's), k clamped to 1..50. No index: a few thousand images per
-- owner scan in milliseconds (docs/VISION.md says when one would pay off).
-- A result type because session_id is both an argument and a column.
CREATE TYPE engram.vision_hit AS (sha256 text, similarity real, session_id text, created_at timestamptz);

CREATE FUNCTION engram.vision_search(
    owner text DEFAULT NULL,
    query_embedding vector DEFAULT NULL,
    k integer DEFAULT 10,
    session_id text DEFAULT NULL)
RETURNS SETOF engram.vision_hit
LANGUAGE plpgsql STABLE ROWS 10 AS $fn$
DECLARE
    v_owner text := engram._caller(vision_search.owner, NULL, NULL, false);
BEGIN
    PERFORM engram._check_image_vector(vision_search.query_embedding, 'query_embedding');
    RETURN QUERY
    SELECT e.sha256, (1 - (e.embedding <=> vision_search.query_embedding))::real, e.session_id, e.created_at
    FROM engram.image_embeddings e
    WHERE e.owner = v_owner
      AND (vision_search.session_id IS NULL OR e.session_id = vision_search.session_id)
    ORDER BY e.embedding <=> vision_search.query_embedding, e.sha256
    LIMIT engram._vision_k(vision_search.k);
END
$fn$;

-- The oldest of the owner's images without an embedding, with their bytes:
-- what engram-mcp's background embedder does next. `skip`: images the
-- embedder refused already, which must not hold up the rest.
CREATE FUNCTION engram.image_backlog(owner text DEFAULT NULL, lim integer DEFAULT 8, skip text[] DEFAULT NULL)
RETURNS TABLE (sha256 text, mime text, data bytea)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_owner text := engram._caller(image_backlog.owner, NULL, NULL, false);
BEGIN
    RETURN QUERY
    SELECT i.sha256, i.mime, d.data
    FROM engram.images i JOIN engram.image_data d ON d.owner = i.owner AND d.sha256 = i.sha256
    WHERE i.owner = v_owner AND i.embedded_at IS NULL AND i.sha256 <> ALL (coalesce(image_backlog.skip, '{}'))
    ORDER BY i.created_at, i.sha256
    LIMIT least(greatest(coalesce(image_backlog.lim, 8), 1), 32);
END
$fn$;

---------------------------------------------------------------------------
-- scale-out on Citus (SPEC 12, docs/SCALING.md)
---------------------------------------------------------------------------

-- The tables engram.distribute() distributes by owner, co-located with
-- engram.memories, in an order where every referenced table comes before
-- the tables that reference it; and the small global tables it replicates
-- to every node. tests/tests/scale_out.rs keeps them equal to the schema.
CREATE FUNCTION engram._distributed_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT ARRAY['memories', 'workspaces', 'images', 'revisions', 'memory_access', 'audit_log',
                 'ghost_settings', 'grants', 'publications', 'owner_locks', 'slots', 'states', 'events',
                 'misses', 'scope_entries', 'scope_blocks', 'scope_sizes', 'image_data', 'image_embeddings', 'image_holds']
$fn$;

CREATE FUNCTION engram._reference_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT ARRAY['tokens', 'group_members', 'node_secret']
$fn$;

-- Whether engram's tables are distributed (engram.distribute ran): Citus
-- is installed here and knows engram.memories.
CREATE FUNCTION engram._is_distributed() RETURNS boolean
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v boolean;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = ''engram.memories''::regclass)'
        INTO v;
    RETURN v;
END
$fn$;

-- Sets p_name to p_value for the rest of the transaction here and on the
-- workers it reaches: a SET LOCAL that Citus propagates (to the connections
-- open now, and at the start of every later one) while
-- citus.propagate_set_commands is 'local'. Carries bindings' proofs
-- (engram.bind).
CREATE FUNCTION engram._propagate_setting(p_name text, p_value text) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_prev text := current_setting('citus.propagate_set_commands', true);
BEGIN
    PERFORM pg_catalog.set_config('citus.propagate_set_commands', 'local', true);
    EXECUTE format('SET LOCAL %s = %L', p_name, p_value);
    PERFORM pg_catalog.set_config('citus.propagate_set_commands', coalesce(nullif(v_prev, ''), 'none'), true);
END
$fn$;

-- The owner a binding's proof (engram.remote_binding) proves, for
-- row-level security on a node where engram.bind did not run (a Citus
-- worker): NULL unless the claimed token is usable, the MAC is its hash's,
-- the proof has not expired (nor expires more than 11 minutes out), and a
-- user token claims its own owner. NULL too for an internal context, and
-- where track_activities is on. Runs as the extension's owner (it reads
-- tokens and the node secret) and never returns either.
CREATE FUNCTION engram._remote_owner(p_proof text) RETURNS text
LANGUAGE plpgsql STABLE
-- It runs inside the shard queries whose rows it filters, and reads the
-- tokens (a reference table, on this node): Citus would refuse that nested
-- read otherwise.
SET citus.allow_nested_distributed_execution = on
AS $fn$
DECLARE
    v_claim jsonb := engram._binding_claim(p_proof);
    v_now   float8 := extract(epoch FROM clock_timestamp());
    r       engram.tokens;
BEGIN
    PERFORM engram._check_planted();
    -- Only where no session shows another's statements (a proof travels as
    -- statement text): engram.distribute() turns that off on the workers.
    IF v_claim IS NULL OR current_setting('track_activities') <> 'off'
       OR (v_claim ->> 'x')::bigint NOT BETWEEN v_now AND v_now + 660 THEN
        RETURN NULL;
    END IF;
    SELECT * INTO r FROM engram.tokens t
    WHERE t.id = (v_claim ->> 't')::uuid AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now());
    IF r.id IS NULL
       OR NOT engram._binding_proof_valid(p_proof, engram._binding_key((SELECT k.secret FROM engram.node_secret k),
                                                                       r.token_sha256))
       OR (v_claim ->> 'o' <> r.owner AND NOT r.platform) THEN
        RETURN NULL;
    END IF;
    RETURN CASE WHEN (v_claim ->> 'i')::boolean THEN NULL ELSE v_claim ->> 'o' END;
END
$fn$;

-- Distributes engram on a Citus coordinator (SPEC 12): every owner-scoped
-- table by owner, all co-located, so that one owner's rows live on one
-- worker; tokens and group members as reference tables (read on every
-- call, on every node). engram's functions stay on the coordinator (see
-- docs/SCALING.md, "What is not delegated yet"). Run once by
-- a superuser after CREATE EXTENSION citus, adding the workers, and CREATE
-- EXTENSION engram; a second run does only what is missing. Returns what
-- it did.
CREATE FUNCTION engram.distribute(shard_count integer DEFAULT 32) RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
    t        text;
    v_tables integer := 0;
    v_refs   integer := 0;
    v_known  boolean;
    v_failed bigint;
BEGIN
    PERFORM engram._require_privileged('distribute');
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = engram._caller_role()) THEN
        RAISE EXCEPTION 'distribute is for superusers (it creates distributed tables); connect as one'
            USING ERRCODE = '42501';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension e WHERE e.extname = 'citus') THEN
        RAISE EXCEPTION 'Citus is not installed in database %; run CREATE EXTENSION citus on the coordinator and add the workers (SELECT citus_add_node(...)) first', current_database()
            USING ERRCODE = '55000';
    END IF;
    IF distribute.shard_count IS NULL OR distribute.shard_count NOT BETWEEN 1 AND 64000 THEN
        RAISE EXCEPTION 'shard_count % is out of range; pass 1 to 64000 (32 by default; a few per worker core)', coalesce(distribute.shard_count::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    -- engram's triggers keep derived rows (scope lists, quotas, image
    -- holds) of the same owner, which live on the same shard group: safe
    -- despite Citus's name for the setting.
    PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    FOREACH t IN ARRAY engram._distributed_tables() LOOP
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1::regclass)'
            INTO v_known USING format('engram.%I', t);
        CONTINUE WHEN v_known;
        IF t = 'memories' THEN
            EXECUTE 'SELECT pg_catalog.create_distributed_table(''engram.memories'', ''owner'', colocate_with => ''none'', shard_count => $1)'
                USING distribute.shard_count;
        ELSE
            EXECUTE format('SELECT pg_catalog.create_distributed_table(%L, ''owner'', colocate_with => ''engram.memories'')',
                           format('engram.%I', t));
        END IF;
        v_tables := v_tables + 1;
    END LOOP;
    FOREACH t IN ARRAY engram._reference_tables() LOOP
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1::regclass)'
            INTO v_known USING format('engram.%I', t);
        CONTINUE WHEN v_known;
        EXECUTE format('SELECT pg_catalog.create_reference_table(%L)', format('engram.%I', t));
        v_refs := v_refs + 1;
    END LOOP;
    -- The rows now live in the shards: the coordinator's own copies go,
    -- once every table that references them is distributed too.
    IF v_tables + v_refs > 0 THEN
        FOREACH t IN ARRAY engram._distributed_tables() || engram._reference_tables() LOOP
            EXECUTE 'SELECT pg_catalog.truncate_local_data_after_distributing_table($1::regclass)'
                USING format('engram.%I', t);
        END LOOP;
    END IF;
    -- The statements Citus sends the workers carry bindings' proofs
    -- (engram._propagate_setting): no session there shows another's query
    -- text (pg_stat_activity), whatever role it shares. Every run applies it
    -- to every worker, so run distribute() again after adding one.
    -- The same for the iterative HNSW scans of _knn, which run there.
    EXECUTE format('SELECT count(*) FROM pg_catalog.run_command_on_workers(%L) WHERE NOT success',
                   format('SET citus.enable_ddl_propagation TO off; ALTER DATABASE %I SET track_activities = off; ALTER DATABASE %I SET hnsw.iterative_scan = relaxed_order',
                          current_database(), current_database()))
        INTO v_failed;
    IF v_failed > 0 THEN
        RAISE EXCEPTION 'could not turn track_activities off on % worker(s); check that every worker is up, then run engram.distribute() again', v_failed
            USING ERRCODE = '08006';
    END IF;
    -- Citus plans a distributed statement with its parameters' values; a
    -- cached generic plan of one fails ("could not create distributed
    -- plan"). engram's functions run here, on the coordinator.
    PERFORM pg_catalog.set_config('citus.enable_ddl_propagation', 'off', true);
    EXECUTE format('ALTER DATABASE %I SET plan_cache_mode = force_custom_plan', current_database());
    PERFORM engram._audit(NULL, 'distribute', NULL,
        jsonb_build_object('tables', v_tables, 'reference_tables', v_refs, 'shard_count', distribute.shard_count));
    RETURN CASE WHEN v_tables + v_refs = 0
                THEN 'engram is already distributed; nothing to do'
                ELSE format('distributed %s tables by owner (co-located with engram.memories, %s shards) and made %s reference tables; engram''s functions run on the coordinator and each of their statements on the shard of the owner it names',
                            v_tables, distribute.shard_count, v_refs) END;
END
$fn$;

---------------------------------------------------------------------------
-- privileges, row-level security and search_path
---------------------------------------------------------------------------

-- The restricted role reads its own rows (RLS: the bound owner) and writes
-- only through the functions above, which run as the extension's owner
-- (SECURITY DEFINER, below), check the binding, and audit every change.
-- engram._rls_owner() is a C function: calling it loads the library, whose
-- SUSET definition of engram.owner discards a placeholder value an
-- unprivileged role may have set before. It is NULL (no rows) in a ghost or
-- agent conversation, which reads only through engram's functions.
GRANT USAGE ON SCHEMA engram TO engram_agent;
GRANT SELECT ON engram.memories, engram.revisions, engram.memory_access, engram.audit_log,
               engram.ghost_settings, engram.grants, engram.publications, engram.slots,
               engram.workspaces, engram.states, engram.events, engram.misses,
               engram.images, engram.image_data, engram.image_embeddings TO engram_agent;
CREATE POLICY owner_isolation ON engram.memories FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.revisions FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.memory_access FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.audit_log FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.ghost_settings FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.grants FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.publications FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.slots FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.workspaces FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.states FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.events FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.misses FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.images FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.image_data FOR SELECT TO engram_agent USING (owner = engram._rls_owner());
CREATE POLICY owner_isolation ON engram.image_embeddings FOR SELECT TO engram_agent USING (owner = engram._rls_owner());

-- Administrative functions are for DBAs, not for agents.
REVOKE EXECUTE ON FUNCTION engram.configure(integer, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.purge(interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.erase_owner(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.rebuild_image_holds() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.export_memories(text, uuid, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.import_memory(text, jsonb, vector, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.recount_usage() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.rebuild_lists(text) FROM PUBLIC;
-- The scope lists' Rust helpers read nothing but their arguments; only
-- engram's own functions need them.
REVOKE EXECUTE ON FUNCTION engram._nearest_step(bytea, bytea, integer, bytea, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._nearest(bytea, integer, bytea, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._candidates(bytea) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._block_without(bytea, integer, uuid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._block_capacity(integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.distribute(integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.schedule_maintenance(text, text, text, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.create_token(text, text, boolean, interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.revoke_token(text, text, uuid) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._install_api(text) FROM PUBLIC;

-- Every plpgsql/SQL function pins its search_path: pg_catalog first, then
-- engram and pgvector's schema (wherever CASCADE put it), pg_temp last, so
-- no object a caller can create shadows what engram calls. The public API
-- (names without a leading underscore) runs as the extension's owner
-- (SECURITY DEFINER): it is the only way to write. The helpers run as their
-- caller and are not executable by PUBLIC.
DO $$
DECLARE
    v_vector_schema text;
    f record;
BEGIN
    SELECT n.nspname INTO v_vector_schema
    FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector';
    FOR f IN
        SELECT p.oid::regprocedure AS sig, p.proname LIKE '\_%' AS helper FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_language l ON l.oid = p.prolang
        WHERE p.pronamespace = 'engram'::regnamespace AND l.lanname IN ('plpgsql', 'sql')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, engram, %I, pg_temp', f.sig, v_vector_schema);
        IF f.helper THEN
            EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f.sig);
        ELSE
            EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER', f.sig);
        END IF;
    END LOOP;
END
$$;
-- engram-mcp checks the embedding dimension at start, before any binding.
GRANT EXECUTE ON FUNCTION engram._dims() TO engram_agent;
-- Row-level security on a Citus worker checks a binding's proof. The
-- proof's Rust helpers are the extension's own.
ALTER FUNCTION engram._remote_owner(text) SECURITY DEFINER;
GRANT EXECUTE ON FUNCTION engram._remote_owner(text) TO engram_agent;
REVOKE EXECUTE ON FUNCTION engram._sign_binding(text, text, boolean, bigint, bytea) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._binding_key(bytea, bytea) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._binding_claim(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._binding_proof_valid(text, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION engram._image_dims() TO engram_agent;
