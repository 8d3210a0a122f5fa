---------------------------------------------------------------------------
-- vision memories: images by content hash, CLIP embeddings (docs/VISION.md)
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

-- engram.image_holds anew from the memories' metadata: the holds made.
CREATE FUNCTION engram._hold_images() RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    v_holds bigint;
BEGIN
    DELETE FROM engram.image_holds;
    INSERT INTO engram.image_holds (owner, memory_id, sha256)
    SELECT DISTINCT m.owner, m.id, i.sha256
    FROM engram.memories m, unnest(engram._image_refs(m.metadata, false)) AS x(sha)
    JOIN engram.images i ON i.sha256 = x.sha
    WHERE m.metadata ? 'images' AND i.owner = m.owner;
    GET DIAGNOSTICS v_holds = ROW_COUNT;
    RETURN v_holds;
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
    v_holds := engram._hold_images();
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
LANGUAGE plpgsql VOLATILE AS $fn$
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
LANGUAGE plpgsql VOLATILE ROWS 10 AS $fn$
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
LANGUAGE plpgsql VOLATILE AS $fn$
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
