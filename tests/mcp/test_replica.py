"""engram-mcp --read-database-url: read-only tools are served by the test
cluster's streaming standby (scripts/test starts it), writes by the primary;
with the standby down, reads fall back to the primary."""

import os
import subprocess
import time

import pytest

from conftest import HOST, PG_BIN, PORT, call, mcp_session, psql, serving

pytestmark = pytest.mark.anyio

REPLICA_HOST = os.environ["ENGRAM_TEST_REPLICA_HOST"]
REPLICA_PORT = os.environ["ENGRAM_TEST_REPLICA_PORT"]
REPLICA_DATA = os.path.join(os.path.dirname(REPLICA_HOST), "pgdata")


def replica_psql(db, sql):
    out = subprocess.run([f"{PG_BIN}/psql", "-X", "-v", "ON_ERROR_STOP=1", "-tA", "-h", REPLICA_HOST, "-p", REPLICA_PORT,
                          "-U", "postgres", "-d", db, "-c", sql], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def wait_for_replay(db):
    lsn = psql(db, "SELECT pg_current_wal_lsn()")
    for _ in range(300):
        if replica_psql("postgres", f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn") == "t":
            return
        time.sleep(0.1)
    raise AssertionError(f"the standby did not replay up to {lsn}")


def replica_ctl(action):
    subprocess.run(["runuser", "-u", "postgres", "--", f"{PG_BIN}/pg_ctl", "-D", REPLICA_DATA, "-w", "-t", "60",
                    "-l", os.path.join(os.path.dirname(REPLICA_HOST), "postgres.log"), action],
                   check=True, capture_output=True)


def accesses(db, mem):
    return psql(db, f"SELECT coalesce(sum(access_count), 0) FROM engram.memory_access WHERE memory_id = '{mem}'")


async def test_reads_go_to_the_standby_and_writes_to_the_primary(database, tokens):
    read_url = f"host={REPLICA_HOST} port={REPLICA_PORT} user=engram_mcp dbname={database}"
    with serving(database, "--tools", "all", "--read-database-url", read_url) as base:
        async with mcp_session(base, tokens["alice"]) as s:
            r, err = await call(s, "memory_remember", content="replica: the staging database is called kestrel")
            assert not err and r["status"] == "created", r
            mem = r["id"]
            wait_for_replay(database)
            r, err = await call(s, "memory_search", query="what is the staging database called?")
            assert not err and r["results"][0]["id"] == mem, r
            r, err = await call(s, "memory_recall", id=mem)
            assert not err and r["memory"]["content"].endswith("kestrel"), r
            r, err = await call(s, "memory_list", limit=5)
            assert not err and mem in [m["id"] for m in r["memories"]], r
            # Served by the standby: engram-mcp holds connections to it, and
            # the primary recorded no access (a search there would have).
            assert int(replica_psql("postgres", "SELECT count(*) FROM pg_stat_activity WHERE usename = 'engram_mcp' "
                                                f"AND datname = '{database}'")) >= 1
            assert accesses(database, mem) == "0"

            # With the standby down, the same reads are answered by the primary.
            replica_ctl("stop")
            try:
                r, err = await call(s, "memory_search", query="what is the staging database called?")
                assert not err and r["results"][0]["id"] == mem, r
                assert accesses(database, mem) == "1", "the primary served the search"
            finally:
                replica_ctl("start")
            r, err = await call(s, "memory_remember", content="replica: kestrel runs Postgres 15")
            assert not err and r["status"] in ("created", "conflict"), r


def test_a_replica_url_that_does_not_work_stops_start_up(database):
    bad = f"host={REPLICA_HOST} port={REPLICA_PORT} user=postgres dbname={database}"
    env = dict(os.environ, ENGRAM_DATABASE_URL=f"host={HOST} port={PORT} user=engram_mcp dbname={database}",
               ENGRAM_READ_DATABASE_URL=bad, ENGRAM_LISTEN="127.0.0.1:0", RUST_LOG="warn")
    p = subprocess.run([os.environ["ENGRAM_MCP_BIN"], "serve"], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "read replica" in p.stderr and "superuser" in p.stderr, p.stderr
