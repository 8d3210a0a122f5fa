-- The growth of every engram relation since sizing_before, per memory,
-- printed as Markdown: bench/sql/sizing.sql includes this twice (as the
-- writes left the tables, then compacted), with the psql variables rows,
-- parts_heading and totals_heading.
DROP TABLE IF EXISTS sizing_after, sizing;
CREATE TEMP TABLE sizing_after AS
SELECT c.oid, c.relname, c.relkind, pg_relation_size(c.oid) AS bytes,
       coalesce(t.relname, toast_of.relname, c.relname) AS owner_table
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index i ON i.indexrelid = c.oid
LEFT JOIN pg_class t ON t.oid = i.indrelid
LEFT JOIN pg_class toast_of ON toast_of.reltoastrelid = c.oid
WHERE c.relkind IN ('r', 'i', 't', 'm')
  AND (n.nspname = 'engram'
       OR c.oid IN (SELECT reltoastrelid FROM pg_class k JOIN pg_namespace m ON m.oid = k.relnamespace
                    WHERE m.nspname = 'engram' AND reltoastrelid <> 0));

-- Each relation's growth, in the part of a memory it belongs to (measured
-- twice: as the writes left the tables, then compacted).
CREATE TEMP TABLE sizing AS
SELECT a.relname, a.owner_table,
       CASE WHEN a.relkind = 'i' AND am.amname = 'hnsw' THEN 'HNSW index'
            WHEN a.relkind = 'i' THEN 'other indexes'
            WHEN a.relkind = 't' THEN 'TOAST'
            ELSE 'rows' END AS part,
       a.bytes - coalesce(b.bytes, 0) AS grew
FROM sizing_after a
LEFT JOIN sizing_before b ON b.oid = a.oid
LEFT JOIN pg_class c ON c.oid = a.oid
LEFT JOIN pg_am am ON am.oid = c.relam;

-- Markdown by hand: psql 15 has no markdown output format.
\pset format unaligned
\pset tuples_only on
\echo
\echo :parts_heading
\echo
\echo '| table | part | bytes per memory | relations |'
\echo '|---|---|---:|---|'
SELECT format('| %s | %s | %s | %s |', grp, part, round(sum(grew)::numeric / :rows), string_agg(DISTINCT owner_table, ', '))
FROM (SELECT CASE WHEN owner_table IN ('memories', 'revisions', 'audit_log') THEN owner_table
                  WHEN owner_table LIKE 'scope%' THEN 'scope lists'
                  WHEN owner_table LIKE 'text\_%' THEN 'text index'
                  WHEN owner_table LIKE '%entit%' THEN 'entities'
                  ELSE 'other' END AS grp, part, grew, owner_table
      FROM sizing WHERE grew > 0) g
GROUP BY grp, part
ORDER BY grp = 'other', grp, part;

\echo
\echo :totals_heading
\echo
\echo '| memories | dimensions | revisions | audit rows | bytes per memory | of which HNSW | disk per 1M memories | HNSW index per 1M (RAM to keep it cached) |'
\echo '|---:|---:|---:|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s | %s | %s | %s | %s |', :rows, :dims,
              (SELECT count(*) FROM engram.revisions), (SELECT count(*) FROM engram.audit_log),
              round(sum(grew)::numeric / :rows),
              round(sum(grew) FILTER (WHERE part = 'HNSW index')::numeric / :rows),
              pg_size_pretty(sum(grew) * 1000000 / :rows),
              pg_size_pretty(sum(grew) FILTER (WHERE part = 'HNSW index') * 1000000 / :rows))
FROM sizing;
