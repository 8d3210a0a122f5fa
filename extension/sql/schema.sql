-- engram schema: tables, indexes and the restricted role: everything that
-- holds data. Loaded first by CREATE EXTENSION (extension_sql_file!,
-- bootstrap). During CREATE EXTENSION the search_path holds engram and
-- pgvector's schema, so `vector` resolves here; the API functions pin their
-- own search_path.
--
-- Functions, result types, row-level security policies and privileges are in
-- the API files (sql/api/*.sql): an upgrade drops them and loads the new
-- version's, while the tables here change only through ALTER statements in
-- sql/ (see docs/ARCHITECTURE.md, "Versions and upgrades"). New columns go at the end
-- of their table, where ALTER TABLE ... ADD COLUMN puts them on upgrade.

-- One row per memory. The embedding column's dimension is the database's
-- embedding dimension (engram.configure changes it while no embeddings exist).
CREATE TABLE engram.memories (
    id               uuid NOT NULL DEFAULT gen_random_uuid(),
    owner            text NOT NULL CHECK (owner <> ''),
    kind             text NOT NULL DEFAULT 'semantic'
                     CHECK (kind IN ('semantic', 'episodic', 'procedural')),
    source           text NOT NULL DEFAULT 'memory'
                     CHECK (source IN ('memory', 'skill', 'resource')),
    internal_type    text CHECK (internal_type IN ('ghost', 'agent')),
    content          text NOT NULL,
    content_sha256   bytea NOT NULL,
    -- sha256 of content + internal type + ghost scope (+ session for
    -- episodic memories): two active rows never share it (see dedup index).
    dedup_key        bytea NOT NULL,
    tags             text[] NOT NULL DEFAULT '{}',
    metadata         jsonb NOT NULL DEFAULT '{}',
    embedding        vector(384),
    -- 'english': stemming and stopwords for prose; tokens such as error codes
    -- and ticket ids (ERR-4521, OPS-99172) pass through intact. The query
    -- side (engram._lexical) must use the same configuration.
    content_tsv      tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED,
    author_type      text NOT NULL DEFAULT 'agent' CHECK (author_type IN ('human', 'agent', 'system')),
    importance       real NOT NULL DEFAULT 0.5 CHECK (importance BETWEEN 0 AND 1),
    status           text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived', 'expired')),
    archive_reason   text,
    archive_note     text,
    -- the memory that consolidate or crystallize built from this one
    merged_into      uuid,
    flagged_at       timestamptz,
    flag_count       integer NOT NULL DEFAULT 0,
    flag_reason      text,
    correction_count integer NOT NULL DEFAULT 0,
    revision         integer NOT NULL DEFAULT 1,
    trust_score      real NOT NULL DEFAULT 0.7,
    staleness_score  real NOT NULL DEFAULT 0,
    session_id       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz,
    archived_at      timestamptz,
    -- who may see it through the owner's ghost: an accessor whose
    -- trust is at least this level. 5 (default): only accessors the owner
    -- trusts fully; 1: anyone the ghost talks to.
    access_level     smallint NOT NULL DEFAULT 5 CHECK (access_level BETWEEN 1 AND 5),
    -- Time (since 0.13.0): when what the memory tells happened
    -- (default: when it was written), and the period its fact held, from
    -- valid_from (default occurred_at) until valid_to (NULL: still valid;
    -- a forced correction closes it). invalidated_at is when valid_to was
    -- last set (the store's own time, for reads as the store stood then).
    occurred_at      timestamptz NOT NULL DEFAULT now(),
    valid_from       timestamptz NOT NULL DEFAULT now(),
    valid_to         timestamptz,
    invalidated_at   timestamptz,
    -- Keyed memories (since 0.16.0): engram.put writes the memory at
    -- (owner, namespace, key), a path of labels and a key, with an optional
    -- JSON value (filters read it before the metadata). ttl is the lifetime
    -- the writer gave (expires_at = write + ttl), kept so that a read may
    -- renew it. Namespaces sort by code point (COLLATE "C"), so a prefix is
    -- an index range.
    namespace        text[] COLLATE "C",
    key              text,
    value            jsonb,
    ttl              interval,
    CONSTRAINT memories_keyed CHECK ((namespace IS NULL) = (key IS NULL)),
    CONSTRAINT memories_valid_period CHECK (valid_to IS NULL OR valid_to >= valid_from),
    -- Every key of an owner's data starts with the owner (since 0.8.0), so
    -- that the tables can be distributed by owner (engram.distribute, Citus).
    CONSTRAINT memories_pkey PRIMARY KEY (owner, id)
);

COMMENT ON TABLE engram.memories IS 'engram: one row per memory; write through the engram.* functions';

-- ids are random uuids, unique without the owner; this index serves lookups
-- by id alone (merged_into, a DBA's queries).
CREATE INDEX memories_id ON engram.memories (id);
CREATE INDEX memories_embedding_hnsw ON engram.memories USING hnsw (embedding vector_cosine_ops);
CREATE INDEX memories_scope ON engram.memories (owner, status, internal_type, created_at DESC, id);
CREATE INDEX memories_tags ON engram.memories USING gin (tags);
CREATE INDEX memories_tsv ON engram.memories USING gin (content_tsv);
CREATE INDEX memories_expiry ON engram.memories (expires_at)
    WHERE status = 'active' AND expires_at IS NOT NULL;
CREATE INDEX memories_retired ON engram.memories (status, coalesce(archived_at, updated_at))
    WHERE status <> 'active';
CREATE UNIQUE INDEX memories_dedup ON engram.memories (owner, dedup_key) WHERE status = 'active';
-- An owner's namespaces, for prefix scans. (One active memory per key and
-- context: the dedup key of a keyed memory is its address, memories_dedup.)
CREATE INDEX memories_namespace ON engram.memories (owner, namespace) WHERE namespace IS NOT NULL;
-- (since 0.19.0) a conversation's turns in time order: the turn a new one
-- follows (engram.previous_turn), the turns of a session.
CREATE INDEX memories_session ON engram.memories (owner, session_id, occurred_at) WHERE session_id IS NOT NULL;
-- The documents filters read (a keyed memory's value, else the metadata):
-- a filter's equalities are a containment this index serves.
CREATE INDEX memories_document ON engram.memories USING gin ((coalesce(value, metadata)) jsonb_path_ops);

-- Every prior version of an updated memory (the current one is in memories).
CREATE TABLE engram.revisions (
    memory_id     uuid NOT NULL,
    revision      integer NOT NULL,
    owner         text NOT NULL,
    content       text NOT NULL,
    tags          text[] NOT NULL,
    metadata      jsonb NOT NULL,
    written_at    timestamptz NOT NULL,
    replaced_at   timestamptz NOT NULL DEFAULT now(),
    reason        text,
    is_correction boolean NOT NULL,
    changed_by    text NOT NULL DEFAULT current_user,
    value         jsonb,
    CONSTRAINT revisions_pkey PRIMARY KEY (owner, memory_id, revision),
    CONSTRAINT revisions_memory_id_fkey FOREIGN KEY (owner, memory_id)
        REFERENCES engram.memories (owner, id) ON DELETE CASCADE
);

-- Access statistics, apart from the vector-bearing rows: a search must not
-- rewrite the rows the HNSW index points at. UNLOGGED because reads record
-- here on every call and must not wait for a WAL flush; after a Postgres
-- crash (not a clean restart) the counters start again from zero, which
-- only makes memories look less recently used until they are read again.
CREATE UNLOGGED TABLE engram.memory_access (
    memory_id        uuid NOT NULL,
    owner            text NOT NULL,
    access_count     bigint NOT NULL DEFAULT 0,
    last_accessed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT memory_access_pkey PRIMARY KEY (owner, memory_id)
);

-- Append-only log of every state-changing call. It records what happened,
-- never user data (no content, tags, metadata or reasons), so a hard erase
-- leaves nothing of the memory behind here. Database-wide events (configure,
-- purge and maintenance of every owner) have the owner '' (since 0.8.0;
-- NULL before): a distributed table has no NULL distribution values.
CREATE TABLE engram.audit_log (
    id        bigint GENERATED ALWAYS AS IDENTITY,
    at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    owner     text NOT NULL DEFAULT '',
    actor     text NOT NULL DEFAULT current_user,
    action    text NOT NULL,
    memory_id uuid,
    details   jsonb NOT NULL DEFAULT '{}',
    -- the binding of the call (engram.bind): the token, the owner it acted
    -- for when that differs from the token's, and the internal context
    token_id         uuid,
    token_label      text,
    act_as           text,
    internal_context jsonb,
    CONSTRAINT audit_log_pkey PRIMARY KEY (owner, id)
);
CREATE INDEX audit_log_owner_at ON engram.audit_log (owner, at);
CREATE INDEX audit_log_memory ON engram.audit_log (memory_id) WHERE memory_id IS NOT NULL;

-- pg_dump keeps the data of extension tables only when told to.
SELECT pg_catalog.pg_extension_config_dump('engram.memories', '');
SELECT pg_catalog.pg_extension_config_dump('engram.revisions', '');
SELECT pg_catalog.pg_extension_config_dump('engram.audit_log', '');

-- The restricted role. Applications and engram-mcp log in as roles granted
-- engram_agent; RLS binds them to the owner in the engram.owner setting.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'engram_agent') THEN
        CREATE ROLE engram_agent NOLOGIN;
    END IF;
END
$$;

ALTER TABLE engram.memories ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.revisions ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.memory_access ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.audit_log ENABLE ROW LEVEL SECURITY;

-- API tokens for engram-mcp. Only a SHA-256 of each token is stored; the
-- plaintext is returned once by engram.create_token. No role but the owner of
-- the extension reads this table: engram.authenticate (SECURITY DEFINER)
-- resolves a presented token for the restricted role.
CREATE TABLE engram.tokens (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner        text NOT NULL CHECK (owner <> ''),
    label        text NOT NULL CHECK (label <> ''),
    platform     boolean NOT NULL DEFAULT false,
    token_sha256 bytea NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz,
    expires_at   timestamptz,
    -- the platform token that minted this one (engram.mint_token), which
    -- may revoke it
    minted_by    uuid
);
SELECT pg_catalog.pg_extension_config_dump('engram.tokens', '');

-- A random key that only the extension's owner reads (since 0.8.0): the
-- proofs of bindings that engram.bind sends to Citus workers are signed
-- with a key derived from it and the token's hash, so that neither a token
-- holder nor a copy of engram.tokens can make one. One row; a reference
-- table on Citus (the same key on every node). Not dumped: a restore makes
-- a new key, and proofs live minutes.
CREATE TABLE engram.node_secret (
    id     boolean PRIMARY KEY DEFAULT true CHECK (id),
    secret bytea NOT NULL
);
INSERT INTO engram.node_secret (secret)
VALUES (uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));

-- Sharing. Whether an owner's ghost talks to others at all,
-- and the trust it gives accessors without a grant of their own.
CREATE TABLE engram.ghost_settings (
    owner         text PRIMARY KEY CHECK (owner <> ''),
    enabled       boolean NOT NULL DEFAULT true,
    default_trust smallint NOT NULL DEFAULT 1 CHECK (default_trust BETWEEN 0 AND 5),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- The trust an owner gives one accessor: 0 blocks, 1-5 shows memories of
-- access_level up to it.
CREATE TABLE engram.grants (
    owner      text NOT NULL CHECK (owner <> ''),
    accessor   text NOT NULL CHECK (accessor <> ''),
    trust      smallint NOT NULL CHECK (trust BETWEEN 0 AND 5),
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, accessor)
);

-- A memory published to a space (every space ghost conversation of it reads
-- it) or to a group (group ghost conversations of its members read it).
CREATE TABLE engram.publications (
    id           uuid NOT NULL DEFAULT gen_random_uuid(),
    memory_id    uuid NOT NULL,
    owner        text NOT NULL,
    space        text CHECK (space <> ''),
    group_id     text CHECK (group_id <> ''),
    published_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((space IS NULL) <> (group_id IS NULL)),
    CONSTRAINT publications_pkey PRIMARY KEY (owner, id),
    CONSTRAINT publications_memory_id_fkey FOREIGN KEY (owner, memory_id)
        REFERENCES engram.memories (owner, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX publications_target ON engram.publications (owner, memory_id, coalesce(space, ''), coalesce(group_id, ''));
CREATE INDEX publications_space ON engram.publications (space) WHERE space IS NOT NULL;
CREATE INDEX publications_group ON engram.publications (group_id) WHERE group_id IS NOT NULL;

CREATE TABLE engram.group_members (
    group_id text NOT NULL CHECK (group_id <> ''),
    member   text NOT NULL CHECK (member <> ''),
    added_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, member)
);
-- One row per owner that has written: engram._lock_owner row-locks it to
-- serialise that owner's writes (duplicate and conflict checks see every
-- committed or concurrent write). A table, not an advisory lock, so that no
-- other role can take the lock.
-- Since 0.7.0 it also holds what the owner stores against the per-owner
-- quotas (kept by the counting triggers in sql/api/quotas.sql, under the
-- same row lock, so a quota check never counts rows), and, after
-- engram.erase_owner, when the owner was erased: a write that waited for
-- the lock while the erasure ran, or whose transaction began before it,
-- fails instead of writing into the erased owner. Derived data: not dumped
-- (engram.recount_usage rebuilds the counts), never readable by engram_agent.
CREATE TABLE engram.owner_locks (
    owner       text PRIMARY KEY,
    erased_at   timestamptz,
    memories    bigint NOT NULL DEFAULT 0,
    events      bigint NOT NULL DEFAULT 0,
    image_bytes bigint NOT NULL DEFAULT 0,
    slots       bigint NOT NULL DEFAULT 0,
    workspaces  bigint NOT NULL DEFAULT 0,
    states      bigint NOT NULL DEFAULT 0
);

-- Slots: named, size-limited text blocks an agent
-- keeps at hand, global (workspace '') or per workspace, where a
-- workspace's slot shadows the global one of the same label.
CREATE TABLE engram.slots (
    owner      text NOT NULL CHECK (owner <> ''),
    workspace  text NOT NULL DEFAULT '',
    label      text NOT NULL CHECK (label <> '' AND octet_length(label) <= 200),
    content    text NOT NULL DEFAULT '',
    size_limit integer NOT NULL DEFAULT 2000 CHECK (size_limit BETWEEN 1 AND 262144),
    pinned     boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, workspace, label)
);

SELECT pg_catalog.pg_extension_config_dump('engram.slots', '');
SELECT pg_catalog.pg_extension_config_dump('engram.ghost_settings', '');
SELECT pg_catalog.pg_extension_config_dump('engram.grants', '');
SELECT pg_catalog.pg_extension_config_dump('engram.publications', '');
SELECT pg_catalog.pg_extension_config_dump('engram.group_members', '');

ALTER TABLE engram.ghost_settings ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.grants ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.publications ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.slots ENABLE ROW LEVEL SECURITY;

-- Continuity (docs/CONTINUITY.md), since 0.3.0.

-- A workspace: a project the agent comes back to. Archived, never deleted
-- (only erasing an owner removes it); a name is unique per owner.
CREATE TABLE engram.workspaces (
    id          uuid NOT NULL DEFAULT gen_random_uuid(),
    owner       text NOT NULL CHECK (owner <> ''),
    name        text NOT NULL CHECK (name <> '' AND octet_length(name) <= 200),
    description text NOT NULL DEFAULT '',
    root_folder text,
    purpose     text,
    workflows   text[] NOT NULL DEFAULT '{}',
    key_files   text[] NOT NULL DEFAULT '{}',
    preferences jsonb NOT NULL DEFAULT '{}',
    status      text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    archived_at timestamptz,
    UNIQUE (owner, name),
    CONSTRAINT workspaces_pkey PRIMARY KEY (owner, id)
);

-- A state: an immutable, named save point of a workspace. The name is
-- unique in its workspace forever (archived states keep theirs), and the
-- trigger engram._state_immutable refuses every UPDATE but archiving.
CREATE TABLE engram.states (
    id                   uuid NOT NULL DEFAULT gen_random_uuid(),
    owner                text NOT NULL CHECK (owner <> ''),
    workspace_id         uuid NOT NULL,
    name                 text NOT NULL CHECK (name <> '' AND octet_length(name) <= 200),
    description          text NOT NULL DEFAULT '',
    conversation_context text NOT NULL DEFAULT '',
    active_task          text NOT NULL DEFAULT '',
    active_files         text[] NOT NULL DEFAULT '{}',
    next_steps           text[] NOT NULL DEFAULT '{}',
    tags                 text[] NOT NULL DEFAULT '{}',
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    archived_at          timestamptz,
    CONSTRAINT states_pkey PRIMARY KEY (owner, id),
    CONSTRAINT states_workspace_id_name_key UNIQUE (owner, workspace_id, name),
    CONSTRAINT states_workspace_id_fkey FOREIGN KEY (owner, workspace_id)
        REFERENCES engram.workspaces (owner, id) ON DELETE CASCADE
);
CREATE INDEX states_latest ON engram.states (owner, workspace_id, created_at DESC);

-- A captured event: an episodic memory (the row in engram.memories holds
-- its content, session, importance and embedding) with the event's type,
-- mode, tool call and file beside it. A memory erased erases its event.
CREATE TABLE engram.events (
    memory_id       uuid NOT NULL,
    owner           text NOT NULL,
    event_type      text NOT NULL CHECK (event_type IN ('conversation', 'tool_invocation', 'file_read',
                        'file_write', 'code_approval', 'code_rejection', 'observation', 'summary')),
    mode            text NOT NULL,
    session_id      text NOT NULL,
    workspace_id    uuid,
    tool_name       text,
    tool_input      jsonb,
    tool_output     jsonb,
    success         boolean,
    error           text,
    duration_ms     integer,
    file_path       text,
    parent_event_id uuid,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT events_pkey PRIMARY KEY (owner, memory_id),
    CONSTRAINT events_memory_id_fkey FOREIGN KEY (owner, memory_id)
        REFERENCES engram.memories (owner, id) ON DELETE CASCADE,
    -- NO ACTION (SET NULL before 0.8.0; Citus refuses it on a key with the
    -- distribution column): workspaces are archived, never deleted, and
    -- engram.erase_owner deletes the events first.
    CONSTRAINT events_workspace_id_fkey FOREIGN KEY (owner, workspace_id)
        REFERENCES engram.workspaces (owner, id) ON DELETE NO ACTION
);
CREATE INDEX events_session ON engram.events (owner, session_id, created_at);
CREATE INDEX events_workspace ON engram.events (owner, workspace_id, event_type, created_at);
CREATE INDEX events_type ON engram.events (owner, event_type, created_at);

-- The embedding backlog: active memories stored without an embedding
-- (captured events, and anything a SQL client wrote without one), which
-- engram-mcp embeds in the background. The rows are the queue, so a crash
-- loses nothing.
CREATE INDEX memories_backlog ON engram.memories (owner, created_at)
    WHERE embedding IS NULL AND status = 'active';

-- Searches that found nothing (for the metrics): what agents looked for in
-- vain. Holds the query text, so erasing an owner erases these too.
CREATE TABLE engram.misses (
    id            bigint GENERATED ALWAYS AS IDENTITY,
    owner         text NOT NULL,
    at            timestamptz NOT NULL DEFAULT now(),
    query_text    text,
    had_embedding boolean NOT NULL,
    CONSTRAINT misses_pkey PRIMARY KEY (owner, id)
);
CREATE INDEX misses_owner_at ON engram.misses (owner, at);

SELECT pg_catalog.pg_extension_config_dump('engram.workspaces', '');
SELECT pg_catalog.pg_extension_config_dump('engram.states', '');
SELECT pg_catalog.pg_extension_config_dump('engram.events', '');
SELECT pg_catalog.pg_extension_config_dump('engram.misses', '');
-- Identity sequences of dumped tables are dumped too, or a restored
-- database would hand out ids that exist already.
SELECT pg_catalog.pg_extension_config_dump('engram.misses_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('engram.audit_log_id_seq', '');

ALTER TABLE engram.workspaces ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.states ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.events ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.misses ENABLE ROW LEVEL SECURITY;

-- Scope lists (since 0.4.0; packed in blocks since 0.10.0): what a scoped
-- search scans instead of the memories' heap. Every active memory with an
-- embedding has one entry in its owner's whole list (tag '') and one per
-- tag, each list keyed by engram._list_key(internal_type, tag). Entries are
-- packed into engram.scope_blocks: rows of up to engram._block_capacity
-- entries (18 at 384 dimensions), each entry the memory id (16 bytes) and
-- its embedding quantized to int8 (engram._quantize, 4 + dims bytes). A
-- block row stays under the 8 KB page (never TOASTed: toast_tuple_target),
-- so an exact scan of 5,000 entries reads ~280 rows, each folded into the
-- running top-n by one Rust call (engram._nearest). New entries go to the
-- list's last block until it is full; a removed entry leaves its block
-- (a block left empty goes). engram.scope_entries says which block holds
-- each entry, for removals. Derived data, kept by triggers on
-- engram.memories (sql/api/scope_lists.sql) in the writing transaction: not dumped (a
-- restore rebuilds it as the memories are loaded), never readable by
-- engram_agent, rebuilt from the memories by engram.rebuild_lists().
CREATE TABLE engram.scope_blocks (
    owner   text NOT NULL,
    list    bigint NOT NULL,
    block   bigint NOT NULL,
    n       integer NOT NULL,
    entries bytea NOT NULL,
    PRIMARY KEY (owner, list, block)
) WITH (toast_tuple_target = 8160);
ALTER TABLE engram.scope_blocks ALTER COLUMN entries SET STORAGE MAIN;
CREATE TABLE engram.scope_entries (
    owner     text NOT NULL,
    list      bigint NOT NULL,
    memory_id uuid NOT NULL,
    block     bigint NOT NULL,
    PRIMARY KEY (owner, memory_id, list)
);

-- Entries per list: how search picks the smallest list of a scope and
-- decides between scanning it and walking the HNSW index, without a
-- planner estimate. Kept by the same triggers.
CREATE TABLE engram.scope_sizes (
    owner text NOT NULL,
    list  bigint NOT NULL,
    n     bigint NOT NULL,
    PRIMARY KEY (owner, list)
);
ALTER TABLE engram.scope_blocks ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.scope_entries ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.scope_sizes ENABLE ROW LEVEL SECURITY;

-- The text index (since 0.20.0): what the text leg of search reads instead
-- of every row that holds a query word. Per owner and internal type (the
-- list engram._list_key(internal_type, '')), over the active memories:
--   * text_postings: one row per distinct lexeme of a memory's content_tsv,
--     with the content's length (octet_length), its key ordered for
--     reading a term's memories shortest first (and for finding a memory's
--     postings again from its lexemes and length; one index is all it
--     needs): with binary term frequency a
--     shorter memory holding a term scores higher for it, so a term's
--     postings in that order are in falling score order, and the search
--     stops reading once nothing further down can enter its top k;
--   * text_terms: each lexeme's document frequency;
--   * text_sizes: the memories and their total length (BM25's mean).
-- Derived data like the scope lists: kept by triggers on engram.memories
-- in the writing transaction (sql/api/text_index.sql), not dumped, never
-- readable by engram_agent, rebuilt by engram.rebuild_lists().
CREATE TABLE engram.text_postings (
    owner     text NOT NULL,
    list      bigint NOT NULL,
    lexeme    text NOT NULL,
    len       integer NOT NULL,
    memory_id uuid NOT NULL,
    PRIMARY KEY (owner, list, lexeme, len, memory_id)
);
CREATE TABLE engram.text_terms (
    owner  text NOT NULL,
    list   bigint NOT NULL,
    lexeme text NOT NULL,
    df     bigint NOT NULL,
    PRIMARY KEY (owner, list, lexeme)
);
CREATE TABLE engram.text_sizes (
    owner     text NOT NULL,
    list      bigint NOT NULL,
    docs      bigint NOT NULL,
    total_len bigint NOT NULL,
    PRIMARY KEY (owner, list)
);
ALTER TABLE engram.text_postings ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.text_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.text_sizes ENABLE ROW LEVEL SECURITY;

-- Vision memories (since 0.6.0): images stored once per owner by
-- content hash. Two kinds of reference keep an image: `refs` counts
-- engram.image_put calls not yet given back by engram.image_release, and
-- engram.image_holds lists the memories whose metadata names the image
-- ({"images": ["<sha256>"]}). When neither is left, the row goes, and with
-- it the bytes (image_data) and the embedding (image_embeddings), by
-- foreign key, in the same transaction (engram._image_settle in sql/api/vision.sql).
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
-- triggers (sql/api/vision.sql), so it is not dumped; a restore rebuilds it as the
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

-- The named things each memory is about (since 0.13.0): people,
-- organisations, projects, products, places, ids, handles, emails and URLs
-- found in its content by engram-core's rules, and those its entity:NAME
-- tags name. `key` folds case and accents ("José", "JOSE" -> "jose").
-- Derived from the memories by triggers (sql/api/entities.sql), so it is
-- not dumped: a restore rebuilds it as the memories are loaded.
CREATE TABLE engram.memory_entities (
    owner     text NOT NULL,
    memory_id uuid NOT NULL,
    key       text NOT NULL,
    name      text NOT NULL,
    kind      text NOT NULL,
    -- (since 0.19.0) the key as written when the row was merged into the
    -- owner's one full name that starts with it ("marta" -> "marta
    -- keller"); NULL when it is indexed as written
    alias     text,
    -- (since 0.19.0) named by an entity: tag: kept as written, never merged
    pinned    boolean NOT NULL DEFAULT false,
    CONSTRAINT memory_entities_pkey PRIMARY KEY (owner, memory_id, key)
);
CREATE INDEX memory_entities_key ON engram.memory_entities (owner, key);
-- A first name's full names, and the rows merged under one (alias merging).
CREATE INDEX memory_entities_first_word ON engram.memory_entities (owner, split_part(key, ' ', 1), key)
    WHERE kind = 'person' AND alias IS NULL;
CREATE INDEX memory_entities_alias ON engram.memory_entities (owner, alias) WHERE alias IS NOT NULL;
ALTER TABLE engram.memory_entities ENABLE ROW LEVEL SECURITY;

-- What engram.configure() and engram.tune_search() set (since 0.15.0): one
-- row, absent while nothing was set (the defaults then hold). The dimension
-- and the index options live in the catalog (the embedding column's type,
-- the HNSW index's options, the database's engram.hnsw_ef_search), which
-- pg_dump does not dump for an extension's tables; this row travels with
-- the data, and a restore applies it (sql/api/backup.sql).
CREATE TABLE engram.configuration (
    id                   boolean PRIMARY KEY DEFAULT true CHECK (id),
    embedding_dims       integer NOT NULL,
    image_dims           integer NOT NULL,
    -- the HNSW index's build options (NULL: pgvector's defaults)
    hnsw_m               integer,
    hnsw_ef_construction integer,
    -- the floor engram.tune_search() measured (NULL: not tuned)
    hnsw_ef_search       integer,
    -- the engram version that wrote the row
    version              text NOT NULL,
    updated_at           timestamptz NOT NULL DEFAULT now(),
    -- the embedding model the stored vectors come from (NULL: not recorded)
    embedding_model      text
);
SELECT pg_catalog.pg_extension_config_dump('engram.configuration', '');
ALTER TABLE engram.configuration ENABLE ROW LEVEL SECURITY;

-- The tables a restore has loaded so far (since 0.15.0; not dumped): a COPY
-- into an empty engram database is a restore, and until every dumped table
-- has loaded (engram.finish_restore runs then) engram's functions refuse
-- to serve a partial database. Empty outside a restore.
CREATE TABLE engram.restore_loads (
    table_name text PRIMARY KEY,
    rows       bigint NOT NULL,
    loaded_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
ALTER TABLE engram.restore_loads ENABLE ROW LEVEL SECURITY;
