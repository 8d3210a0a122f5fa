-- Tokens: issuing, listing, rotating and revoking. Tokens are stored as
-- SHA-256 hashes; the plaintext is shown once, by create_token.
-- Run as a superuser (or the extension's owner).

-- A user token for one owner (prints eg_...: hand it to the agent once).
SELECT engram.create_token(owner => 'alice', label => 'alice-laptop');

-- A token that expires by itself.
SELECT engram.create_token(owner => 'alice', label => 'alice-ci', expires => '30 days');

-- A platform token: may act for any owner (X-User-Id) and open ghost and
-- agent contexts (X-Internal-Type). Give these only to trusted services.
SELECT engram.create_token(owner => 'platform', label => 'chat-backend', platform => true);

-- What exists (never the plaintext).
SELECT id, owner, label, platform, created_at, expires_at, revoked_at, last_used_at
FROM engram.tokens ORDER BY owner, label;

-- Rotating: issue the new token, deploy it, then revoke the old one by label.
SELECT engram.create_token(owner => 'alice', label => 'alice-laptop-2');
SELECT engram.revoke_token(owner => 'alice', label => 'alice-laptop');

-- Revoking every token of an owner (a leaked machine, a departed user).
SELECT engram.revoke_token(owner => 'alice', label => 'alice-ci');
