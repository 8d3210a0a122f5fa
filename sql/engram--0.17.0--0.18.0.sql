-- engram 0.17.0 -> 0.18.0 (ALTER EXTENSION engram UPDATE TO '0.18.0')
--
-- 0.18.0: the owner list of a dashboard.
--   * engram.owners(prefix, after, limit): every owner the database holds
--     something for, with what each holds (from the quota counters), for a
--     platform token or a DBA (GET /api/owners, the dashboard's Owners).
--
-- Built as sql/README.md says: no table changes; _install_api drops the
-- previous API and loads this one from the library.

\echo Use "ALTER EXTENSION engram UPDATE TO '0.18.0'" to load this file. \quit

-- (the release that wrote the recorded configuration: a dump says so)
UPDATE engram.configuration SET version = '0.18.0';

-- The 0.18.0 API, from the library (only when it is 0.18.0), in place of
-- the loaded 0.17.0 one.
SELECT engram._install_api('0.18.0');
