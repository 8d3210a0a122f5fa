-- engram SQL API, in topic files (extension/sql/api/*.sql): functions,
-- result types, triggers, row-level security policies and privileges.
-- CREATE EXTENSION loads them in the order extension/src/lib.rs gives
-- (extension_sql_file!, each after the one before, privileges.sql last);
-- an upgrade script drops the previous version's API and loads them again,
-- in the same order, through engram._install_api (extension/src/upgrade.rs;
-- see sql/README.md). This file: conventions and the small helpers every
-- other file uses.
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

-- The owner a call acts for: engram._owner(p_owner), engram._check_context
-- (p_internal_type, p_scope, p_write) and both in one, engram._caller(...),
-- are Rust (extension/src/security/binding.rs), reading the binding that
-- engram.bind made, parsed once. A privileged caller (a superuser, or a
-- role granted SET on engram.owner: a DBA) names any owner or defaults to
-- engram.owner; everyone else is restricted: bound by engram.bind(token) in
-- the same transaction, acting only for the bound owner, and within the
-- binding's internal context (a ghost conversation reads and writes only
-- its ghost memories; an agent context never touches ghost memories).

-- engram._check_planted() (Rust, extension/src/security/path_guard.rs) refuses to
-- run while a non-superuser can plant functions or operators in a schema
-- on the elevated functions' search_path; every public function calls it
-- first.

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

-- Trust of a memory's current content (scoring::trust_score): its author,
-- its age and whether it is flagged. Corrections do not lower it: every
-- update is made by the memory's owner (or an agent acting for it), and a
-- correction by the owner re-checks the content, so a corrected memory is
-- as trusted as one never checked (else an updated memory would rank
-- below an unrelated one for its own words). correction_count still counts
-- them, for the history and staleness (a fact corrected often changes
-- often); trust_score's correction penalty is there for callers scoring
-- corrections made by someone else.
-- Immutable, with the time and the setting as arguments (callers pass
-- now() and engram._setting_*()): Citus runs an UPDATE's functions of its
-- columns on the shards, and takes only immutable ones there.
CREATE FUNCTION engram._trust_at(p_now timestamptz, p_half_life float8, p_author text, p_created timestamptz,
                                 p_flags integer)
RETURNS real LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    RETURN engram.trust_score(p_author, extract(epoch FROM p_now - p_created)::float8 / 86400,
                              0, p_flags > 0, p_half_life);
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
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    PERFORM engram._check_planted();
    PERFORM engram._check_restored();
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
