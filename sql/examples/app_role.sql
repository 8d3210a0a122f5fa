-- An application role: logs in, is a member of engram_agent only, and binds
-- each transaction with a token. Row-level security and the token binding
-- confine it to the token's owner whatever SQL it sends. Never make an
-- application role a superuser or BYPASSRLS (engram-mcp refuses to start
-- as one). Run as a superuser.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'my_app') THEN
        CREATE ROLE my_app LOGIN IN ROLE engram_agent;   -- add PASSWORD '...' for TCP logins
    END IF;
END
$$;

-- Its privileges are engram_agent's: the engram functions, and SELECT on
-- the tables under row-level security. Check it cannot escape:
SELECT rolname, rolsuper, rolbypassrls, pg_has_role('my_app', 'engram_agent', 'MEMBER') AS agent
FROM pg_roles WHERE rolname = 'my_app';

-- How the application uses it, per transaction:
--   BEGIN;
--   SELECT engram.bind(token => 'eg_...');        -- the end user's token
--   SELECT * FROM engram.search(query_text => 'green tea');
--   COMMIT;
-- For a service that acts for many users, a platform token:
--   SELECT engram.bind(token => 'eg_...', act_as => 'alice');

-- Removing it later:
--   DROP ROLE my_app;
