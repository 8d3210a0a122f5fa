-- engram 0.5.0 -> 0.6.0 (ALTER EXTENSION engram UPDATE TO '0.6.0')
--
-- 0.6.0 adds vision memories (docs/VISION.md): images stored once per
-- owner by sha256 (engram.images, their bytes in engram.image_data), kept
-- by image_put references and by the memories that name them in
-- metadata.images (engram.image_holds, derived by triggers on
-- engram.memories), their 512-dimension embeddings in
-- engram.image_embeddings;
-- image_put / image_release / image_get / vision_embed / vision_search /
-- image_backlog, configure(image_dims => ...), the engram.image_max_bytes
-- setting.
-- Four new, empty tables; no existing row changes. Memories written before
-- 0.6.0 hold no images: the holds are derived from metadata written from
-- now on (the triggers skip ids of images the owner does not hold, so an
-- old "images" key blocks nothing).
--
-- Built as sql/README.md says: 1. drop the previous API; 2. change the
-- tables; 3. create the new Rust functions; 4. load the new api.sql from
-- the library.
\echo Use "ALTER EXTENSION engram UPDATE TO '0.6.0'" to load this file. \quit

-- 1. The 0.5.0 API: its triggers, functions, result types and policies. The
-- scope lists' triggers are dropped and created again within this one
-- transaction; DROP TRIGGER locks engram.memories against writes until the
-- update commits, so no write goes unlisted.
DROP TRIGGER IF EXISTS states_immutable ON engram.states;
DROP TRIGGER IF EXISTS scope_lists_insert ON engram.memories;
DROP TRIGGER IF EXISTS scope_lists_update ON engram.memories;
DROP TRIGGER IF EXISTS scope_lists_delete ON engram.memories;
DROP TRIGGER IF EXISTS scope_lists_truncate ON engram.memories;
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_language l ON l.oid = p.prolang
        WHERE p.pronamespace = 'engram'::regnamespace AND l.lanname IN ('plpgsql', 'sql')
    LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END
$$;
DROP TYPE IF EXISTS engram.read_scope, engram.search_hit, engram.recalled_memory, engram.listed_memory,
    engram.slot, engram.workspace_item, engram.state_item, engram.session_item, engram.session_event,
    engram.list_entry;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memories', 'revisions', 'memory_access', 'audit_log', 'ghost_settings', 'grants',
                             'publications', 'slots', 'workspaces', 'states', 'events', 'misses'] LOOP
        EXECUTE format('DROP POLICY IF EXISTS owner_isolation ON engram.%I', t);
    END LOOP;
END
$$;

-- 2. The tables of vision memories, exactly as schema.sql declares them.
-- Vision memories (since 0.6.0): images stored once per owner by
-- content hash. Two kinds of reference keep an image: `refs` counts
-- engram.image_put calls not yet given back by engram.image_release, and
-- engram.image_holds lists the memories whose metadata names the image
-- ({"images": ["<sha256>"]}). When neither is left, the row goes, and with
-- it the bytes (image_data) and the embedding (image_embeddings), by
-- foreign key, in the same transaction (engram._image_settle in api.sql).
CREATE TABLE engram.images (
    owner       text NOT NULL CHECK (owner <> ''),
    sha256      text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    mime        text NOT NULL,
    bytes       integer NOT NULL CHECK (bytes > 0),
    refs        integer NOT NULL CHECK (refs >= 0),
    -- the session of the first put; vision_search filters on it
    session_id  text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    -- when engram.vision_embed last stored its embedding
    embedded_at timestamptz,
    PRIMARY KEY (owner, sha256)
);
-- What engram-mcp embeds next (engram.image_backlog).
CREATE INDEX images_backlog ON engram.images (owner, created_at) WHERE embedded_at IS NULL;

-- The bytes of each image. Already compressed formats: stored out of line
-- without another compression pass.
CREATE TABLE engram.image_data (
    owner  text NOT NULL,
    sha256 text NOT NULL,
    data   bytea NOT NULL,
    PRIMARY KEY (owner, sha256),
    FOREIGN KEY (owner, sha256) REFERENCES engram.images (owner, sha256) ON DELETE CASCADE
);
ALTER TABLE engram.image_data ALTER COLUMN data SET STORAGE EXTERNAL;

-- The embedding of each image, what an exact vision search scans. A table
-- of its own, written once per image (an image row that grew by 2 KiB when
-- embedded would leave the scanned pages half empty), with the image's
-- session and time copied in (neither ever changes) so that a search reads
-- nothing else. Stored PLAIN, never compressed or moved out of line: that
-- keeps a 512-dimension row at 3 per page, and bounds
-- engram.configure(image_dims => ...) to 1536.
CREATE TABLE engram.image_embeddings (
    owner      text NOT NULL,
    sha256     text NOT NULL,
    session_id text,
    created_at timestamptz NOT NULL,
    model      text NOT NULL,
    embedding  vector(512) NOT NULL,
    PRIMARY KEY (owner, sha256),
    FOREIGN KEY (owner, sha256) REFERENCES engram.images (owner, sha256) ON DELETE CASCADE
);
ALTER TABLE engram.image_embeddings ALTER COLUMN embedding SET STORAGE PLAIN;
CREATE INDEX image_embeddings_session ON engram.image_embeddings (owner, session_id);

-- Which memory holds which image: derived from the memories' metadata by
-- triggers (api.sql), so it is not dumped; a restore rebuilds it as the
-- memories are loaded (after the images: pg_dump loads engram's tables in
-- foreign-key, then name order). Never readable by engram_agent.
CREATE TABLE engram.image_holds (
    owner     text NOT NULL,
    memory_id uuid NOT NULL,
    sha256    text NOT NULL,
    PRIMARY KEY (owner, memory_id, sha256),
    FOREIGN KEY (owner, sha256) REFERENCES engram.images (owner, sha256)
);
CREATE INDEX image_holds_image ON engram.image_holds (owner, sha256);

SELECT pg_catalog.pg_extension_config_dump('engram.images', '');
SELECT pg_catalog.pg_extension_config_dump('engram.image_data', '');
SELECT pg_catalog.pg_extension_config_dump('engram.image_embeddings', '');
ALTER TABLE engram.images ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.image_data ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.image_embeddings ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.image_holds ENABLE ROW LEVEL SECURITY;

-- 3. Rust functions new in 0.6.0.
CREATE FUNCTION engram."_check_image"(
	"mime" TEXT, /* Option < & str > */
	"head" bytea, /* Option < & [u8] > */
	"bytes" INT /* Option < i32 > */
) RETURNS TEXT /* String */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_check_image_wrapper';

CREATE FUNCTION engram."_image_id"(
	"sha256" TEXT /* Option < & str > */
) RETURNS TEXT /* String */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_image_id_wrapper';

CREATE FUNCTION engram."_image_refs"(
	"metadata" jsonb, /* Option < pgrx :: JsonB > */
	"strict" bool /* bool */
) RETURNS TEXT[] /* Vec < String > */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_image_refs_wrapper';

CREATE FUNCTION engram."_vision_k"(
	"k" INT /* Option < i32 > */
) RETURNS INT /* i32 */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_vision_k_wrapper';

CREATE FUNCTION engram."_setting_image_max_bytes"() RETURNS INT /* i32 */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_setting_image_max_bytes_wrapper';

-- 4. The 0.6.0 API, from the library (engram._install_api loads it only when
-- the library is 0.6.0; a later hop loads a later API).
SELECT engram._install_api('0.6.0');
