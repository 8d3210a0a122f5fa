---------------------------------------------------------------------------
-- resources: human-curated entries that agents read but never
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
            engram._trust_at(now(), engram._setting_trust_half_life_days(), 'human', now(), 0), 5)
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
LANGUAGE plpgsql VOLATILE AS $fn$
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
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    RETURN engram._resource_json(engram._locate_resource(engram._caller(resource_get.owner, NULL, NULL, false),
                                                         resource_get.id, false));
END
$fn$;

-- The audit rows of one of the owner's memories, oldest first (the memory
-- browser's trail). Audit rows never hold content.
CREATE FUNCTION engram.audit_trail(owner text DEFAULT NULL, id uuid DEFAULT NULL)
RETURNS TABLE (at timestamptz, actor text, action text, details jsonb, token_label text)
LANGUAGE plpgsql VOLATILE AS $fn$
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
