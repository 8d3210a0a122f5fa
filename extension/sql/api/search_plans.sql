---------------------------------------------------------------------------
-- search plans: read scopes and the helpers of the k-NN plans (the plans
-- themselves run in Rust: engram._knn, extension/src/knn.rs)
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

-- The WHERE clause every scoped read applies (the k-NN plans of
-- engram._knn, the text leg, the planner's estimate) is one text, kept
-- in extension/src/knn.rs and read from SQL through
-- engram._scope_filter(p_owned): the fields of engram.read_scope as
-- $2..$10, $13..$16 and $19..$20.

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
-- '/', so the text hashed is unambiguous. (engram._knn computes the same
-- expression in its statement: keep them equal.)
CREATE FUNCTION engram._list_key(p_internal_type text, p_tag text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
BEGIN
    RETURN pg_catalog.hashtextextended(coalesce(p_internal_type, '') || '/' || p_tag, 0);
END
$fn$;
