"""Load and faults, on loopback and bounded in time.

* 16 concurrent MCP clients (the Python SDK, one session each) mix
  memory_remember, memory_search and memory_recall for ENGRAM_LOAD_SECONDS
  (60 by default): no errors, and every acknowledged write is in the
  database afterwards.
* Postgres restarted under load: while it is down, calls fail with a clear
  retryable answer (HTTP 503 with Retry-After, or a tool error that says to
  retry); once it is back, the same engram-mcp process serves them again.
Pool exhaustion (503 with Retry-After, never a hang) is in test_security.py.
"""

import asyncio
import os
import statistics
import subprocess
import time

import httpx
import pytest

from conftest import HOST, INITIALIZE, JSON_HEADERS, PG_BIN, call, mcp_session, new_database, psql, serving

pytestmark = pytest.mark.anyio

SECONDS = float(os.environ.get("ENGRAM_LOAD_SECONDS", "60"))
CLIENTS = 16
DATA = os.path.join(os.path.dirname(HOST), "pgdata")
TOPICS = ["deploys", "billing", "the search page", "on-call", "the mobile app", "invoices", "the data team",
          "backups"]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


async def worker(base, token, n, stop_at, acked, errors, latency):
    async with mcp_session(base, token) as s:
        i = 0
        while time.monotonic() < stop_at:
            op = ("remember", "search", "recall")[i % 3] if acked[n] else "remember"
            t0 = time.perf_counter()
            if op == "remember":
                r, err = await call(s, "memory_remember", kind="episodic",
                                    content=f"client {n} note {i}: {TOPICS[i % len(TOPICS)]} changed at step {i}")
                if not err and r["status"] == "created":
                    acked[n].append(r["id"])
            elif op == "search":
                r, err = await call(s, "memory_search", query=f"what changed about {TOPICS[i % len(TOPICS)]}?")
            else:
                r, err = await call(s, "memory_recall", id=acked[n][i % len(acked[n])])
            latency[op].append((time.perf_counter() - t0) * 1000)
            if err:
                errors.append((op, r))
            i += 1


async def test_sixteen_clients_for_a_minute_without_errors_or_lost_writes():
    db = new_database()
    owners = [f"load{n % 4}" for n in range(CLIENTS)]  # four owners, four clients each
    tokens = {o: psql(db, f"SELECT engram.create_token(owner => '{o}', label => 'load')") for o in set(owners)}
    acked = [[] for _ in range(CLIENTS)]
    errors, latency = [], {"remember": [], "search": [], "recall": []}
    with serving(db, "--pool-size", "16") as base:
        started = time.monotonic()
        await asyncio.gather(*(worker(base, tokens[owners[n]], n, started + SECONDS, acked, errors, latency)
                               for n in range(CLIENTS)))
        elapsed = time.monotonic() - started
    calls = sum(len(v) for v in latency.values())
    print(f"\n{CLIENTS} clients, {elapsed:.0f} s: {calls} calls, {calls / elapsed:.0f} calls/s")
    for op, xs in latency.items():
        print(f"  {op:9} n={len(xs):5}  p50 {statistics.median(xs):6.1f} ms  p99 {pct(xs, 0.99):6.1f} ms")
    assert not errors, errors[:5]
    assert all(len(latency[op]) > CLIENTS for op in latency), {op: len(xs) for op, xs in latency.items()}
    written = [i for ids in acked for i in ids]
    present = int(psql(db, "SELECT count(*) FROM engram.memories WHERE id = ANY ('{%s}'::uuid[])" % ",".join(written)))
    assert present == len(written), f"{len(written) - present} acknowledged writes missing"


def pg_ctl(action):
    subprocess.run(["runuser", "-u", "postgres", "--", f"{PG_BIN}/pg_ctl", "-D", DATA, "-w", "-t", "60",
                    "-m", "fast", "-l", os.path.join(os.path.dirname(HOST), "postgres.log"), action],
                   check=True, capture_output=True)


def rpc(client, base, token, n, tool, **args):
    body = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool, "arguments": args}}
    return client.post(base + "/mcp", json=body, headers={**JSON_HEADERS, "Authorization": f"Bearer {token}"},
                       timeout=30)


async def test_postgres_restart_under_load_fails_clearly_then_recovers():
    db = new_database()
    token = psql(db, "SELECT engram.create_token(owner => 'restart', label => 'load')")
    with serving(db, "--stateless", "--pool-size", "8", "--pool-wait-ms", "2000") as base:
        outcomes = []  # (phase, ok, status, text)
        phase = {"now": "before"}
        acked = []

        def load(n):
            with httpx.Client() as client:
                i = 0
                while phase["now"] != "done":
                    r = rpc(client, base, token, i, "memory_remember", kind="episodic",
                            content=f"restart client {n} note {i}")
                    i += 1
                    body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
                    result = body.get("result", {})
                    ok = r.status_code == 200 and not result.get("isError", True)
                    if ok:
                        acked.append(result["structuredContent"]["id"])
                    text = r.text if not ok else ""
                    outcomes.append((phase["now"], ok, r.status_code, text, r.headers.get("retry-after")))
                    time.sleep(0.02)

        loop = asyncio.get_running_loop()
        tasks = [loop.run_in_executor(None, load, n) for n in range(4)]
        await asyncio.sleep(3)
        phase["now"] = "outage"
        await loop.run_in_executor(None, pg_ctl, "stop")
        await asyncio.sleep(3)
        await loop.run_in_executor(None, pg_ctl, "start")
        phase["now"] = "recovering"
        await asyncio.sleep(3)
        phase["now"] = "after"
        await asyncio.sleep(4)
        phase["now"] = "done"
        await asyncio.gather(*tasks)

    by = lambda p: [o for o in outcomes if o[0] == p]
    assert by("before") and all(o[1] for o in by("before")), [o for o in by("before") if not o[1]][:3]
    failed = [o for o in outcomes if not o[1]]
    assert failed, "the outage was noticed"
    for _, _, status, text, retry_after in failed:
        # 503 + Retry-After from authentication, or a tool error that says to retry
        assert (status == 503 and retry_after) or (status == 200 and "retry" in text), (status, text[:300])
    after = by("after")
    assert after and all(o[1] for o in after), [o for o in after if not o[1]][:3]
    present = int(psql(db, "SELECT count(*) FROM engram.memories WHERE id = ANY ('{%s}'::uuid[])" % ",".join(acked)))
    assert present == len(acked), "every acknowledged write survived the restart"
