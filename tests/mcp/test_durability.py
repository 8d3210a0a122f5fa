"""Every acknowledged memory_remember survives a kill -9 of engram-mcp: a
burst of writes, SIGKILL mid-burst, then each acknowledged id is looked up
in the database directly."""

import asyncio
import contextlib
import signal

import pytest

from conftest import call, mcp_session, psql, start

pytestmark = pytest.mark.anyio


async def test_acknowledged_writes_survive_kill_9(database, tokens):
    proc, base = start(database)
    acknowledged = []

    async def burst():
        async with mcp_session(base, tokens["bob"], **{"X-Session-Id": "burst"}) as s:
            for i in range(10_000):
                r, err = await call(s, "memory_remember", content=f"burst event {i}", kind="episodic")
                assert not err, r
                acknowledged.append(r["id"])

    task = asyncio.create_task(burst())
    while len(acknowledged) < 20:
        await asyncio.sleep(0.05)
        assert not task.done(), task.exception()
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    # what was acknowledged before the kill is fixed now; the client would
    # only keep retrying a dead server, so stop it
    done = list(acknowledged)
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
    acknowledged = done
    ids = ",".join(f"'{i}'" for i in acknowledged)
    stored = int(psql(database, f"SELECT count(*) FROM engram.memories WHERE id IN ({ids})"))
    assert stored == len(acknowledged) > 0
    # the writes carried the session header
    sessions = psql(database, f"SELECT DISTINCT session_id FROM engram.memories WHERE id IN ({ids})")
    assert sessions == "burst"
