"""docker/ built and run with podman: the compose file's two images (the
Dockerfile's targets db and mcp, from the Debian packages this run built),
started with podman-compose on a base image made from Debian's own packages
(mmdebstrap; no container registry is reachable here). An MCP client
remembers and searches through the published port; the database has engram
preloaded; engram-mcp runs as an unprivileged user; a restart of both
containers keeps the data.

Run by scripts/test-containers (the test command's container stage), which
builds the base and packages images and sets ENGRAM_CONTAINERS=1; skipped
elsewhere.
"""

import os
import subprocess
import time

import httpx
import pytest

from conftest import call, free_port, mcp_session

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.environ.get("ENGRAM_CONTAINERS") != "1",
                       reason="the container stage (scripts/test-containers) runs this"),
]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMPOSE = os.path.join(ROOT, "docker", "compose.yaml")
PROJECT = "engram-test"


def run(*args, env=None, check=True, timeout=900):
    r = subprocess.run(list(args), capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@pytest.fixture(scope="module")
def stack():
    port = free_port()
    env = dict(os.environ, ENGRAM_MCP_PASSWORD="container-test-pw", ENGRAM_HTTP_PORT=str(port),
               ENGRAM_OWNER="ops")
    compose = ["podman-compose", "-p", PROJECT, "-f", COMPOSE]
    run(*compose, "down", "-v", env=env, check=False)
    run(*compose, "build", env=env)
    run(*compose, "up", "-d", env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        yield {"base": base, "compose": compose, "env": env}
    finally:
        logs = run("podman", "logs", "--tail", "40", f"{PROJECT}_mcp_1", check=False)
        print(logs.stdout, logs.stderr)
        run(*compose, "down", "-v", env=env, check=False)


def wait_healthy(base, seconds=180):
    deadline = time.time() + seconds
    last = None
    while time.time() < deadline:
        try:
            r = httpx.get(base + "/health", timeout=5)
            if r.status_code == 200 and r.json().get("status") == "ok":
                return
            last = r.text
        except httpx.HTTPError as e:
            last = repr(e)
        time.sleep(1)
    raise AssertionError(f"engram-mcp in its container did not become healthy: {last}")


def in_db(*command):
    return run("podman", "exec", f"{PROJECT}_db_1", *command)


def db_sql(sql):
    return in_db("runuser", "-u", "postgres", "--", "psql", "-X", "-tA", "-h", "/var/lib/engram/main/run",
                 "-d", "engram", "-c", sql).stdout.strip()


async def test_compose_serves_remembers_searches_and_keeps_data_across_a_restart(stack):
    base = stack["base"]
    token = in_db("cat", "/var/lib/engram/token").stdout.strip()
    assert token, "the db container wrote a platform token"

    # engram is preloaded in the image's PostgreSQL, and the login role
    # engram-mcp uses is no superuser.
    assert db_sql("select extversion from pg_extension where extname = 'vector'").startswith("0.8"), \
        "pgvector 0.8 (bookworm packages only 0.4)"
    preload = db_sql("show shared_preload_libraries")
    assert "engram" in [p.strip() for p in preload.split(",")], preload
    assert db_sql("select rolsuper from pg_roles where rolname = 'engram_mcp'") == "f"

    # engram-mcp runs as the package's unprivileged user, not root.
    uid = run("podman", "exec", f"{PROJECT}_mcp_1", "id", "-u").stdout.strip()
    user = run("podman", "exec", f"{PROJECT}_mcp_1", "id", "-un").stdout.strip()
    assert uid != "0" and user == "engram", (uid, user)
    top = run("podman", "top", f"{PROJECT}_mcp_1", "user", "comm").stdout
    assert "engram-mcp" in top and "root" not in top, top

    async with mcp_session(base, token, **{"X-User-Id": "dana"}) as s:
        r, err = await call(s, "memory_remember", content="Dana's team deploys engram with podman-compose")
        assert not err, r
        hits, err = await call(s, "memory_search", query="how does the team deploy engram?")
        assert not err, hits
        assert any("podman-compose" in h["content"] for h in hits["results"]), hits

    # Both stop cleanly on their stop signals (PostgreSQL with a shutdown
    # checkpoint, not killed after the grace period), then a restart of
    # both containers (the volume stays) keeps the memory and the token.
    for service in ("mcp", "db"):
        name = f"{PROJECT}_{service}_1"
        started = time.time()
        run("podman", "stop", "-t", "60", name)
        assert time.time() - started < 30, f"{service} took {time.time() - started:.0f} s to stop"
        code = run("podman", "inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
        assert code == "0", f"{service} exited with {code} on its stop signal"
    run(*stack["compose"], "down", env=stack["env"])
    run(*stack["compose"], "up", "-d", env=stack["env"])
    wait_healthy(base)
    assert in_db("cat", "/var/lib/engram/token").stdout.strip() == token
    async with mcp_session(base, token, **{"X-User-Id": "dana"}) as s:
        hits, err = await call(s, "memory_search", query="how does the team deploy engram?")
        assert not err, hits
        assert any("podman-compose" in h["content"] for h in hits["results"]), hits
    assert db_sql("select count(*) from engram.memories where owner = 'dana'") == "1"
