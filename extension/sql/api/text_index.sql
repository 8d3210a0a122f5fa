---------------------------------------------------------------------------
-- the text index (engram.text_postings, engram.text_terms,
-- engram.text_sizes; since 0.20.0, see schema.sql) and the text leg of
-- search
---------------------------------------------------------------------------
-- Kept by triggers on engram.memories in the writing transaction, like the
-- scope lists: every write path (remember, update, forget, expire, purge,
-- import, erasure, a DBA's own INSERT, UPDATE or DELETE) keeps it exact.
-- Only active memories are indexed, per owner and internal type (the list
-- engram._list_key(internal_type, '')). Each statement names one owner by
-- equality: on Citus it runs on that owner's shard.

-- Indexes one active memory: its size, each distinct lexeme's document
-- frequency (in lexeme order: concurrent writers lock the rows in the same
-- order), a posting per lexeme.
CREATE FUNCTION engram._text_add(p_owner text, p_internal_type text, p_id uuid, p_tsv tsvector, p_len integer)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_list bigint := engram._list_key(p_internal_type, '');
BEGIN
    INSERT INTO engram.text_sizes AS z (owner, list, docs, total_len) VALUES (p_owner, v_list, 1, p_len)
    ON CONFLICT (owner, list) DO UPDATE SET docs = z.docs + 1, total_len = z.total_len + excluded.total_len;
    IF length(p_tsv) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO engram.text_terms AS t (owner, list, lexeme, df)
    SELECT p_owner, v_list, u.lexeme, 1 FROM unnest(p_tsv) u ORDER BY u.lexeme
    ON CONFLICT (owner, list, lexeme) DO UPDATE SET df = t.df + 1;
    INSERT INTO engram.text_postings (owner, list, lexeme, len, memory_id)
    SELECT p_owner, v_list, u.lexeme, p_len, p_id FROM unnest(p_tsv) u;
END
$fn$;

-- Removes one memory that was active from the index (its columns as they
-- were: what _text_add indexed). A size or frequency that reaches zero
-- goes: erasing an owner leaves nothing of it here.
CREATE FUNCTION engram._text_drop(p_owner text, p_internal_type text, p_id uuid, p_tsv tsvector, p_len integer)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_list    bigint := engram._list_key(p_internal_type, '');
    v_lexemes text[] := tsvector_to_array(p_tsv);
    v_found   integer;
BEGIN
    UPDATE engram.text_sizes AS z SET docs = z.docs - 1, total_len = z.total_len - p_len
    WHERE z.owner = p_owner AND z.list = v_list;
    GET DIAGNOSTICS v_found = ROW_COUNT;
    -- (each posting by its whole key: the lexemes and length it was added with)
    DELETE FROM engram.text_postings p
    WHERE p.owner = p_owner AND p.list = v_list AND p.lexeme = ANY (v_lexemes) AND p.len = p_len
      AND p.memory_id = p_id;
    IF v_found = 0 THEN
        -- no size row: the owner's index went first (erase_owner), its
        -- frequencies with it; nothing to count down row after row
        RETURN;
    END IF;
    DELETE FROM engram.text_sizes z WHERE z.owner = p_owner AND z.list = v_list AND z.docs <= 0;
    IF cardinality(v_lexemes) = 0 THEN
        RETURN;
    END IF;
    UPDATE engram.text_terms AS t SET df = t.df - 1
    WHERE t.owner = p_owner AND t.list = v_list AND t.lexeme = ANY (v_lexemes);
    DELETE FROM engram.text_terms t
    WHERE t.owner = p_owner AND t.list = v_list AND t.lexeme = ANY (v_lexemes) AND t.df <= 0;
END
$fn$;

-- Owner p_owner's text index built again from its memories: after a load
-- with triggers disabled, a TRUNCATE on Citus, an upgrade
-- (engram.rebuild_lists runs it for each owner). One statement per table,
-- each naming the owner (on Citus: its shard). Returns the postings.
CREATE FUNCTION engram._rebuild_text_index(p_owner text) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    n bigint;
BEGIN
    DELETE FROM engram.text_postings p WHERE p.owner = p_owner;
    DELETE FROM engram.text_terms t WHERE t.owner = p_owner;
    DELETE FROM engram.text_sizes z WHERE z.owner = p_owner;
    INSERT INTO engram.text_postings (owner, list, lexeme, len, memory_id)
    SELECT m.owner, engram._list_key(m.internal_type, ''), u.lexeme, octet_length(m.content), m.id
    FROM engram.memories m CROSS JOIN LATERAL unnest(m.content_tsv) u
    WHERE m.owner = p_owner AND m.status = 'active';
    GET DIAGNOSTICS n = ROW_COUNT;
    INSERT INTO engram.text_terms (owner, list, lexeme, df)
    SELECT p.owner, p.list, p.lexeme, count(*) FROM engram.text_postings p WHERE p.owner = p_owner
    GROUP BY p.owner, p.list, p.lexeme;
    INSERT INTO engram.text_sizes (owner, list, docs, total_len)
    SELECT m.owner, engram._list_key(m.internal_type, ''), count(*), sum(octet_length(m.content))
    FROM engram.memories m WHERE m.owner = p_owner AND m.status = 'active'
    GROUP BY m.owner, engram._list_key(m.internal_type, '');
    RETURN n;
END
$fn$;

-- AFTER INSERT, per row. (Columns, not the row: on a Citus shard the row
-- has the shard's type.)
CREATE FUNCTION engram._text_inserted() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF NEW.status = 'active' THEN
        PERFORM engram._text_add(NEW.owner, NEW.internal_type, NEW.id, NEW.content_tsv, octet_length(NEW.content));
    END IF;
    RETURN NULL;
END
$fn$;

-- AFTER UPDATE, per row, of a memory whose owner, id, internal type, status
-- or content changed (the trigger's WHEN): it leaves the index as it was
-- and enters it as it is.
CREATE FUNCTION engram._text_updated() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF OLD.status = 'active' THEN
        PERFORM engram._text_drop(OLD.owner, OLD.internal_type, OLD.id, OLD.content_tsv, octet_length(OLD.content));
    END IF;
    IF NEW.status = 'active' THEN
        PERFORM engram._text_add(NEW.owner, NEW.internal_type, NEW.id, NEW.content_tsv, octet_length(NEW.content));
    END IF;
    RETURN NULL;
END
$fn$;

-- AFTER DELETE, per row.
CREATE FUNCTION engram._text_deleted() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF OLD.status = 'active' THEN
        PERFORM engram._text_drop(OLD.owner, OLD.internal_type, OLD.id, OLD.content_tsv, octet_length(OLD.content));
    END IF;
    RETURN NULL;
END
$fn$;

-- AFTER TRUNCATE (TRUNCATE engram.memories CASCADE).
CREATE FUNCTION engram._text_truncated() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    -- On a Citus shard the index is other shards: the DBA rebuilds it
    -- after a TRUNCATE (engram.rebuild_lists, docs/SCALING.md).
    IF TG_TABLE_NAME ~ '_[0-9]+$' THEN
        RETURN NULL;
    END IF;
    TRUNCATE engram.text_postings, engram.text_terms, engram.text_sizes;
    RETURN NULL;
END
$fn$;

-- Named to fire after the scope lists' triggers (in name order): the
-- owner's usage row, then its list sizes, then its text sizes.
CREATE TRIGGER zz_text_index_insert AFTER INSERT ON engram.memories
    FOR EACH ROW EXECUTE FUNCTION engram._text_inserted();
-- (updates of other columns, such as an access's rescore, fire nothing)
CREATE TRIGGER zz_text_index_update AFTER UPDATE OF id, owner, internal_type, status, content ON engram.memories
    FOR EACH ROW
    WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.owner IS DISTINCT FROM NEW.owner
          OR OLD.internal_type IS DISTINCT FROM NEW.internal_type OR OLD.status IS DISTINCT FROM NEW.status
          OR OLD.content IS DISTINCT FROM NEW.content)
    EXECUTE FUNCTION engram._text_updated();
CREATE TRIGGER zz_text_index_delete AFTER DELETE ON engram.memories
    FOR EACH ROW EXECUTE FUNCTION engram._text_deleted();
CREATE TRIGGER zz_text_index_truncate AFTER TRUNCATE ON engram.memories
    FOR EACH STATEMENT EXECUTE FUNCTION engram._text_truncated();

-- The distinct terms (lexemes) of a query in the order they first appear,
-- at most p_limit (default engram-core's MAX_QUERY_TERMS, the text leg's
-- bit masks): the terms engram._term_mask looks for.
CREATE FUNCTION engram._query_terms(p_text text, p_limit integer DEFAULT NULL) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT coalesce(array_agg(t.lexeme ORDER BY t.first, t.lexeme), '{}')
    FROM (SELECT u.lexeme, u.positions[1] AS first
          FROM unnest(to_tsvector('english', coalesce(p_text, ''))) u
          ORDER BY 2, 1 LIMIT coalesce(p_limit, engram._max_query_terms())) t
$fn$;

-- A query's text as a tsquery of alternatives (every term, beyond the ones
-- weighed too: a long question still finds the memory holding its one
-- rare word); NULL when it has no terms.
CREATE FUNCTION engram._any_term_query(p_text text) RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT nullif(replace(plainto_tsquery('english', coalesce(p_text, ''))::text, ' & ', ' | '), '')::tsquery
$fn$;

-- The rows of scope s the text leg scores, as arrays in one order: each
-- one's id, the mask of p_terms it holds (engram._term_mask), its length
-- (octet_length: a long content's size, read without fetching it) and
-- whether it holds an exact token of the query (p_exact). The rows
-- matching p_query; or, given p_ids, those of p_ids, each read by its key
-- whatever the planner's estimates (the LATERAL with OFFSET 0 is never
-- flattened into a join). Rows outside the scope are left out.
CREATE FUNCTION engram._text_rows(s engram.read_scope, p_terms text[], p_exact tsquery, p_query tsquery,
                                  p_ids uuid[] DEFAULT NULL,
                                  OUT ids uuid[], OUT masks bigint[], OUT lens float8[], OUT exact boolean[])
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    EXECUTE
        'SELECT array_agg(m.id), array_agg(engram._term_mask(tsvectorsend(m.content_tsv), $12)),
                array_agg(octet_length(m.content)::float8),
                array_agg(coalesce(m.content_tsv @@ $17, false))
         FROM ' || CASE WHEN p_ids IS NULL
                        THEN 'engram.memories m' || engram._scope_filter(s.owner IS NOT NULL) || ' AND m.content_tsv @@ $1'
                        ELSE 'unnest($18) AS c(id) CROSS JOIN LATERAL (
                                  SELECT x.* FROM engram.memories x WHERE x.owner = $2 AND x.id = c.id OFFSET 0) m'
                             || engram._scope_filter(true) END
        INTO ids, masks, lens, exact
        USING p_query, s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all, s.tags_any,
              s.session_id, s.created_after, s.created_before, NULL::integer, p_terms,
              s.max_level, s.space, s.group_id, s.valid_at, p_exact, p_ids,
              s.namespace_prefix, s.filter;
END
$fn$;

-- Full-text leg of search: the p_n rows of scope s with the best text
-- score for p_text, best first. The score is engram-core's (the share of
-- the query's IDF a row holds times BM25's length factor; a row holding an
-- exact token of the query, p_exact: codes, ids, numbers, scores
-- engram-core's EXACT_MATCH_BONUS more, so a ticket id is never buried
-- under rows that share many common words with a long question).
--
-- p_indexed (the caller may read every memory of the owner's internal
-- type: no scope tags, no ghost read): the text index's statistics and its
-- bounded read (engram._text_index_read). Otherwise the statistics are
-- those of the rows of the scope that match (an OR query: a long question
-- still finds the memory holding its one rare word), so that a scoped
-- caller's scores reveal nothing of rows it cannot see; every matching row
-- is read once (engram._text_rows).
CREATE FUNCTION engram._lexical(s engram.read_scope, p_text text, p_n integer, p_exact tsquery DEFAULT NULL,
                                p_indexed boolean DEFAULT false)
RETURNS TABLE (id uuid, rank real)
LANGUAGE plpgsql
ROWS 30
AS $fn$
DECLARE
    v_terms text[] := engram._query_terms(p_text);
    v_query tsquery := engram._any_term_query(p_text);
    v_rows  record;
BEGIN
    IF v_query IS NULL OR numnode(v_query) = 0 THEN
        RETURN;
    END IF;
    PERFORM engram._check_scope(s);
    IF p_indexed AND s.owner IS NOT NULL AND s.statuses = '{active}' AND s.space IS NULL AND s.group_id IS NULL
       AND s.max_level IS NULL AND NOT engram._is_distributed() THEN
        RETURN QUERY SELECT * FROM engram._text_index_read(s.owner, s.statuses, s.internal_type, s.kinds, s.tags_all,
                                                           s.tags_any, s.session_id, s.created_after, s.created_before,
                                                           s.max_level, s.space, s.group_id, s.valid_at,
                                                           s.namespace_prefix, s.filter, p_text, p_n);
        RETURN;
    END IF;
    v_rows := engram._text_rows(s, v_terms, p_exact, v_query);
    RETURN QUERY
        SELECT x.id, x.score
        FROM unnest(v_rows.ids, engram._text_scores(v_rows.masks, v_rows.lens, v_rows.exact, cardinality(v_terms))) AS x(id, score)
        ORDER BY x.score DESC, x.id LIMIT p_n;
END
$fn$;

-- Every matching row of an owner's scope s scored with the owner's
-- statistics (memories, mean length, each term's document frequency among
-- the active memories of its internal type; engram-core's text_rank): the
-- p_n best. The text leg's bounded read (engram._text_index_read, Rust:
-- rounds of MaxScore over the postings) gives the same answer reading
-- fewer rows, and falls back to this when a term's postings outgrow a
-- round's bound (a scope the index does not narrow: a rare kind, a
-- session) or an exact token of the query spells no term of it (the query
-- parses "ADMIN42@corp.io" as one email, the token is "admin42": no
-- posting read finds the memories earning its bonus).
CREATE FUNCTION engram._lexical_indexed(s engram.read_scope, p_text text, p_n integer, p_exact tsquery)
RETURNS TABLE (id uuid, rank real)
-- STABLE: the statistics and rows read the snapshot of the calling statement
LANGUAGE plpgsql STABLE
ROWS 30
AS $fn$
DECLARE
    v_list    bigint := engram._list_key(s.internal_type, '');
    v_terms   text[] := engram._query_terms(p_text, 256);
    v_docs    bigint;
    v_length  bigint;
    v_weights float8[];
    v_rows    record;
BEGIN
    SELECT z.docs, z.total_len INTO v_docs, v_length FROM engram.text_sizes z
    WHERE z.owner = s.owner AND z.list = v_list;
    IF v_docs IS NULL OR cardinality(v_terms) = 0 THEN
        RETURN;
    END IF;
    SELECT engram._term_weights(v_docs, array_agg(coalesce(t.df, 0) ORDER BY u.i)) INTO v_weights
    FROM unnest(v_terms) WITH ORDINALITY AS u(lexeme, i)
    LEFT JOIN engram.text_terms t ON t.owner = s.owner AND t.list = v_list AND t.lexeme = u.lexeme;
    v_rows := engram._text_rows(s, v_terms[1:engram._max_query_terms()], p_exact, engram._any_term_query(p_text));
    RETURN QUERY
        SELECT x.id, x.score
        FROM unnest(v_rows.ids, engram._text_rank(v_rows.masks, v_rows.lens, v_rows.exact, v_weights,
                                                  greatest(v_length::float8 / greatest(v_docs, 1), 1))) AS x(id, score)
        ORDER BY x.score DESC, x.id LIMIT p_n;
END
$fn$;
