-- Watching engram: what it holds, who uses it, what agents look for and miss.
-- Run as a superuser (all owners) or with owner => '...' for one.

-- Totals per owner and status, index sizes, searches that found nothing.
SELECT jsonb_pretty(engram.stats());

-- One owner.
SELECT jsonb_pretty(engram.stats(owner => 'alice'));

-- The busiest owners of the last day, by audited action.
SELECT owner, action, count(*) AS calls
FROM engram.audit_log
WHERE at > now() - interval '1 day' AND owner IS NOT NULL
GROUP BY owner, action
ORDER BY calls DESC
LIMIT 20;

-- What agents searched for and did not find (candidates for new memories).
SELECT owner, query_text, count(*) AS times, max(at) AS last
FROM engram.misses
WHERE at > now() - interval '7 days'
GROUP BY owner, query_text
ORDER BY times DESC
LIMIT 20;

-- Memories flagged as wrong, for review.
SELECT owner, id, left(content, 80) AS content, flag_count, flag_reason
FROM engram.memories
WHERE status = 'active' AND flag_count > 0
ORDER BY flag_count DESC, flagged_at DESC
LIMIT 20;
