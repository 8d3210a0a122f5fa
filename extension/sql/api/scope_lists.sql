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
-- the memories, packed full, and its text index (sql/api/text_index.sql): after a load with triggers disabled, a
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
    LOCK TABLE engram.scope_sizes, engram.scope_blocks, engram.scope_entries,
               engram.text_sizes, engram.text_terms, engram.text_postings IN SHARE ROW EXCLUSIVE MODE;
    FOR v_owner IN
        SELECT o.owner FROM (SELECT DISTINCT m.owner FROM engram.memories m
                             UNION SELECT z.owner FROM engram.scope_sizes z
                             UNION SELECT t.owner FROM engram.text_sizes t) o
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
        PERFORM engram._rebuild_text_index(v_owner);
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
