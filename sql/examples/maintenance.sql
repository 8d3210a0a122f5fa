-- Lifecycle jobs with pg_cron, in the database that cron.database_name names
-- (scripts/run sets it to `engram`). Run as the database owner or a superuser.

-- Expire memories past their TTL every 5 minutes, rescore trust and
-- staleness nightly, purge memories retired more than 90 days ago on Sundays.
-- Calling it again replaces the three jobs; it never duplicates them.
SELECT engram.schedule_maintenance(
    expire_cron      => '*/5 * * * *',
    rescore_cron     => '17 3 * * *',
    purge_cron       => '0 4 * * 0',
    purge_older_than => '90 days');

-- What is scheduled.
SELECT jobid, jobname, schedule, command FROM cron.job WHERE jobname LIKE 'engram-%' ORDER BY jobname;

-- How the last runs went (failures first).
SELECT j.jobname, d.status, d.start_time, d.end_time - d.start_time AS took, d.return_message
FROM cron.job_run_details d JOIN cron.job j USING (jobid)
WHERE j.jobname LIKE 'engram-%'
ORDER BY (d.status = 'failed') DESC, d.start_time DESC
LIMIT 20;

-- The same jobs by hand, e.g. before a backup.
SELECT engram.expire()  AS expired;
SELECT engram.rescore() AS rescored;
