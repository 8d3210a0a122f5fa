-- engram 0.16.0 -> 0.17.0 (ALTER EXTENSION engram UPDATE TO '0.17.0')
--
-- 0.17.0: tokens that applications mint for their users.
--   * engram.mint_token(label, expires): a transaction bound with a
--     platform token mints a user token for the bound owner (POST
--     /v1/tokens); the token records the platform token that minted it.
--   * engram.revoke_minted_token(token_id): a platform token revokes the
--     tokens it minted, any token revokes itself (DELETE /v1/tokens/{id}).
--
-- Built as sql/README.md says: 1. the new column; 2. _install_api drops
-- the previous API and loads this one from the library.

\echo Use "ALTER EXTENSION engram UPDATE TO '0.17.0'" to load this file. \quit

-- 1. Tables, as extension/sql/schema.sql declares them.
ALTER TABLE engram.tokens ADD COLUMN minted_by uuid;
-- (the release that wrote the recorded configuration: a dump says so)
UPDATE engram.configuration SET version = '0.17.0';

-- 2. The 0.17.0 API, from the library (only when it is 0.17.0), in place of
-- the loaded 0.16.0 one.
SELECT engram._install_api('0.17.0');
