-- What a memory costs on disk and in memory: scripts/bench --sizing runs this
-- with psql in a new database (psql variables rows, dims, owners) and prints
-- its Markdown tables (docs/SIZING.md records them).
--
-- The load goes through engram.remember as a DBA would write for owners:
-- every trigger, index, scope list, entity and audit row a memory brings.
-- The text is about 230 characters (a fact an agent keeps), with two tags,
-- a person named in it and a random unit vector of :dims dimensions; a
-- tenth of the memories are then corrected once (a revision each). Sizes
-- are read before and after, so the extension's empty tables do not count.
\set ON_ERROR_STOP on
\pset footer off
SET client_min_messages = warning;

CREATE TEMP TABLE sizing_before AS
SELECT c.oid, pg_relation_size(c.oid) AS bytes
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'engram'
   OR c.oid IN (SELECT reltoastrelid FROM pg_class k JOIN pg_namespace m ON m.oid = k.relnamespace
                WHERE m.nspname = 'engram' AND reltoastrelid <> 0);

\echo loading :rows memories of :dims dimensions for :owners owners
SELECT count(*) AS stored FROM (
  SELECT engram.remember(
           owner => 'owner-' || (i % :owners),
           content => format('%s told the %s team on call %s that the %s migration moves %s rows to the new ledger '
                             'before %s; rollback plan in runbook %s, reviewers %s and %s, ticket LED-%s.',
                             (ARRAY['Marta Keller', 'Jonas Weber', 'Aiko Tanaka', 'Priya Nair', 'Omar Haddad'])[1 + i % 5],
                             (ARRAY['payments', 'search', 'billing', 'identity', 'growth', 'platform'])[1 + i % 6],
                             i, (ARRAY['orders', 'invoices', 'accounts', 'events'])[1 + i % 4], (i * 7919) % 1000000,
                             to_char(date '2026-01-01' + (i % 365), 'Mon DD'), 'RB-' || (i % 997),
                             (ARRAY['Lee', 'Ruiz', 'Okafor', 'Schmidt'])[1 + i % 4],
                             (ARRAY['Costa', 'Ivanova', 'Dubois', 'Kim'])[1 + (i / 4) % 4], i),
           embedding => (SELECT (array_agg((random() - 0.5)::real))::vector FROM generate_series(1, :dims) WHERE i > 0),
           tags => ARRAY['project:p' || (i % 20), 'topic:t' || (i % 7)],
           force => true)
  FROM generate_series(1, :rows) i) s;

\echo correcting one memory in ten (a revision each)
SELECT count(*) AS corrected FROM (
  SELECT engram.update(id => m.id, owner => m.owner, content => m.content || ' Moved to the next sprint.',
                       embedding => m.embedding)
  FROM (SELECT id, owner, content, embedding FROM engram.memories ORDER BY id LIMIT (:rows / 10)) m) u;
VACUUM ANALYZE;
CHECKPOINT;

\set parts_heading '### Bytes per memory, by table and part'
\set totals_heading '### Totals'
\ir sizing_report.sql


-- The same, compacted: every scope list packed full again
-- (engram.rebuild_lists) and every table rewritten (VACUUM FULL), what a
-- maintenance window or a restore from a dump gives. The difference is the
-- space the writes left free inside the tables (reused by later writes).
\pset format aligned
\pset tuples_only off
\echo
\echo compacting: engram.rebuild_lists() and VACUUM FULL
SELECT engram.rebuild_lists();
VACUUM FULL;
\set parts_heading '### Bytes per memory, by table and part, compacted'
\set totals_heading '### Totals, compacted'
\ir sizing_report.sql
