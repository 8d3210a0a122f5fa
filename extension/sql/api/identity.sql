---------------------------------------------------------------------------
-- identity: tokens and the owner binding (docs/SECURITY.md)
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
    -- A token a platform token minted (engram.mint_token) works only while
    -- its minter does: revoking an application's token revokes what it
    -- handed out.
    IF r.minted_by IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM engram.tokens p
        WHERE p.id = r.minted_by AND p.revoked_at IS NULL AND (p.expires_at IS NULL OR p.expires_at > now())) THEN
        RETURN NULL;
    END IF;
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
-- to act at all. A user token binds its own owner; a platform
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

-- A user token for the bound owner, minted by the platform token the
-- transaction is bound with (POST /v1/tokens): an application serves its
-- users without a DBA. Refused to user tokens, in an agent or ghost
-- context and to sessions bound otherwise (a DBA uses create_token). The
-- plaintext is returned once; the new token records which platform token
-- minted it, and only that one revokes it (engram.revoke_minted_token);
-- it stops working when its minter is revoked or expires. One platform
-- token holds at most 1,000 usable tokens per owner (other platforms'
-- tokens do not count against it).
CREATE FUNCTION engram.mint_token(label text DEFAULT NULL, expires interval DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_binding jsonb := engram._binding();
    v_owner   text;
    v_token   text;
    v_id      uuid;
    v_expires timestamptz;
BEGIN
    PERFORM engram._check_planted();
    IF v_binding IS NULL OR (v_binding ->> 'platform') IS DISTINCT FROM 'true' THEN
        RAISE EXCEPTION 'mint_token needs a transaction bound with a platform token (engram.bind); user tokens do not mint tokens'
            USING ERRCODE = '42501',
                  HINT = 'a DBA creates tokens with engram.create_token';
    END IF;
    IF jsonb_typeof(v_binding -> 'internal') = 'object' THEN
        RAISE EXCEPTION 'an agent or ghost conversation cannot mint tokens; bind without an internal context'
            USING ERRCODE = '42501';
    END IF;
    v_owner := engram._caller(NULL, NULL, NULL, true);
    PERFORM engram._check_short('label', mint_token.label, 200);
    IF mint_token.label IS NULL OR btrim(mint_token.label) = '' THEN
        RAISE EXCEPTION 'label is required; name the token, e.g. label => ''web session'''
            USING ERRCODE = '22004';
    END IF;
    IF mint_token.expires IS NOT NULL AND mint_token.expires <= interval '0' THEN
        RAISE EXCEPTION 'expires % is not positive; pass an interval such as ''30 days'', or NULL for a token that does not expire', mint_token.expires
            USING ERRCODE = '22023';
    END IF;
    PERFORM engram._lock_owner(v_owner);
    IF (SELECT count(*) FROM engram.tokens t
        WHERE t.owner = v_owner AND t.minted_by = (v_binding ->> 'token_id')::uuid AND t.revoked_at IS NULL
          AND (t.expires_at IS NULL OR t.expires_at > now())) >= 1000 THEN
        RAISE EXCEPTION 'this platform token has minted 1000 usable tokens for owner %, the most it may hold; revoke some first', engram._echo(v_owner)
            USING ERRCODE = '54000';
    END IF;
    v_token := 'eg_' || replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');
    v_expires := now() + mint_token.expires;
    INSERT INTO engram.tokens AS t (owner, label, platform, token_sha256, expires_at, minted_by)
    VALUES (v_owner, mint_token.label, false, sha256(convert_to(v_token, 'UTF8'::name)), v_expires,
            (v_binding ->> 'token_id')::uuid)
    RETURNING t.id INTO v_id;
    PERFORM engram._audit(v_owner, 'mint_token', NULL,
        jsonb_build_object('token_id', v_id, 'expires_at', v_expires));
    RETURN jsonb_build_object('id', v_id, 'token', v_token, 'owner', v_owner, 'label', mint_token.label,
                              'expires_at', v_expires);
END
$fn$;

-- Revokes a token by id, for a transaction bound with a token: a platform
-- token revokes the tokens it minted (engram.mint_token), any token
-- revokes itself (a user signing out). Anything else, and an id that is
-- unknown or already revoked, is the same "no such token" (P0002): no
-- caller learns which ids exist. Audited in the token owner's log.
CREATE FUNCTION engram.revoke_minted_token(token_id uuid) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_binding jsonb := engram._binding();
    v_self    uuid := (v_binding ->> 'token_id')::uuid;
    v_owner   text;
BEGIN
    PERFORM engram._check_planted();
    IF v_self IS NULL THEN
        RAISE EXCEPTION 'revoke_minted_token needs a transaction bound with a token (engram.bind)'
            USING ERRCODE = '42501',
                  HINT = 'a DBA revokes tokens with engram.revoke_token';
    END IF;
    UPDATE engram.tokens AS t SET revoked_at = now()
    WHERE t.id = revoke_minted_token.token_id AND t.revoked_at IS NULL
      AND (t.id = v_self OR ((v_binding ->> 'platform') = 'true' AND t.minted_by = v_self))
    RETURNING t.owner INTO v_owner;
    IF v_owner IS NULL THEN
        RAISE EXCEPTION 'no usable token % that this token minted', engram._echo(revoke_minted_token.token_id::text)
            USING ERRCODE = 'P0002',
                  HINT = 'a platform token revokes the tokens it minted, any token itself';
    END IF;
    PERFORM engram._audit(v_owner, 'revoke_token', NULL, jsonb_build_object('token_id', revoke_minted_token.token_id));
    RETURN true;
END
$fn$;
