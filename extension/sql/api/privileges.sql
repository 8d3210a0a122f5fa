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
               engram.images, engram.image_data, engram.image_embeddings, engram.memory_entities TO engram_agent;
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
CREATE POLICY owner_isolation ON engram.memory_entities FOR SELECT TO engram_agent USING (owner = engram._rls_owner());

-- Administrative functions are for DBAs, not for agents.
REVOKE EXECUTE ON FUNCTION engram.configure(integer, integer, integer, integer, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.purge(interval) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.erase_owner(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.rebuild_image_holds() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.export_memories(text, uuid, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.import_memory(text, jsonb, vector, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.recount_usage() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.rebuild_lists(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram.tune_search(real, integer) FROM PUBLIC;
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
-- (the Rust helpers of 0.13.0: the API calls them as the extension's owner)
REVOKE EXECUTE ON FUNCTION engram._entities(text, text[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._entity_key(text) FROM PUBLIC;
-- (and those of 0.14.0)
REVOKE EXECUTE ON FUNCTION engram._text_scores(bigint[], double precision[], boolean[], integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._max_query_terms() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._term_mask(bytea, text[]) FROM PUBLIC;
-- (and that of 0.19.0)
REVOKE EXECUTE ON FUNCTION engram._memory_entities(text, text[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._contradicted_by(text[], double precision[], real[], real) FROM PUBLIC;
-- (and those of 0.20.0)
REVOKE EXECUTE ON FUNCTION engram._term_weights(bigint, bigint[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._text_rank(bigint[], double precision[], boolean[], double precision[], double precision) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._text_reads(double precision[], double precision[], double precision[], boolean[], real, boolean, integer, double precision) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._limit(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._best_hits(uuid[], double precision[], real[], boolean[], real[], real[], boolean, boolean, real, real, integer) FROM PUBLIC;
-- (and those of 0.21.0)
REVOKE EXECUTE ON FUNCTION engram._knn(vector, integer, text, text[], text, text[], text[], text[], text, timestamptz,
                                       timestamptz, smallint, text, text, timestamptz, text[], jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._scope_filter(boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._owner(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._check_context(text, text[], boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._caller(text, text, text[], boolean) FROM PUBLIC;
-- (and those of 0.22.0)
REVOKE EXECUTE ON FUNCTION engram._text_index_read(text, text[], text, text[], text[], text[], text, timestamptz,
                                                   timestamptz, smallint, text, text, timestamptz, text[], jsonb, text,
                                                   integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._search_hits(text, text[], text, text[], text[], text[], text, timestamptz, timestamptz,
                                               smallint, text, text, timestamptz, text[], jsonb, vector, text, integer,
                                               real, tstzrange, boolean, timestamptz, uuid[], boolean, integer, boolean,
                                               boolean) FROM PUBLIC;

-- Every plpgsql/SQL function, and each C function of the API that runs as
-- the extension's owner (engram.search, engram.context: their statements
-- resolve operators through the search_path too), pins its search_path: pg_catalog first,
-- then engram and pgvector's schema (wherever CASCADE put it), pg_temp
-- last, so no object a caller can create shadows what engram calls. The public API
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
        WHERE p.pronamespace = 'engram'::regnamespace
          AND (l.lanname IN ('plpgsql', 'sql') OR (l.lanname = 'c' AND p.prosecdef AND p.proname NOT LIKE '\_%'))
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
-- (a search returns about k rows, not the 1000 a C function is assumed
-- to, and costs what a plpgsql function is assumed to)
ALTER FUNCTION engram.search(text, vector, text, integer, text[], text[], text[], text, text[], text,
                             timestamptz, timestamptz, real, boolean, timestamptz, timestamptz, timestamptz, text,
                             text[], jsonb, boolean, text) ROWS 10 COST 100;
REVOKE EXECUTE ON FUNCTION engram._pinned_slots(text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._state_of(text, uuid, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION engram._conflicts(text, text, vector, text, text[], timestamptz, real) FROM PUBLIC;
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
