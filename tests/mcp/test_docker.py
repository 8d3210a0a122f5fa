"""The database image's entrypoint (docker/db-entrypoint.sh), run on this
machine as it runs in the container (its own data directory, a TCP port):
it initialises the cluster, lets engram_mcp in with its password and keeps
postgres out over TCP, writes a platform token, and engram-mcp serves MCP
through it; a second start keeps data and token. The images themselves are
built and run with podman by test_containers.py (scripts/test-containers).
"""

import os
import shutil
import subprocess
import time

import httpx
import pytest

from conftest import BIN, INITIALIZE, JSON_HEADERS, MODEL_DIR, free_port

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCKER = os.path.join(ROOT, "docker")
# The images' PostgreSQL (docker/Dockerfile: bookworm's 15), whichever
# version scripts/test runs the other suites on.
PG_BIN = "/usr/lib/postgresql/15/bin"
# The entrypoint runs the 15 engram that scripts/setup built for 15; a run on
# another version (ENGRAM_PG_MAJOR=17 scripts/test) built only that version's.
needs_15 = pytest.mark.skipif(os.environ.get("ENGRAM_PG_MAJOR", "15") != "15",
                              reason="the images are PostgreSQL 15's (docker/Dockerfile)")


def psql_url(url, sql):
    return subprocess.run([f"{PG_BIN}/psql", "-X", "-tA", url, "-c", sql], capture_output=True, text=True)


def start_db(home, port):
    env = dict(os.environ, ENGRAM_HOME=home, ENGRAM_PGPORT=str(port), ENGRAM_MCP_PASSWORD="s3cret-pw",
               ENGRAM_LISTEN_ADDRESSES="127.0.0.1", ENGRAM_LIB=os.path.join(ROOT, "scripts", "lib.sh"),
               ENGRAM_OWNER="dock", ENGRAM_PG_MAJOR="15")
    log = open(home + ".log", "a")  # a file, not a pipe: nothing may block postgres' logging
    proc = subprocess.Popen([os.path.join(DOCKER, "db-entrypoint.sh")], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"host=127.0.0.1 port={port} user=engram_mcp password=s3cret-pw dbname=engram"
    for _ in range(240):
        if proc.poll() is not None:
            raise AssertionError("the entrypoint exited: " + open(home + ".log").read())
        # the entrypoint's readiness signal (the healthcheck's), then a login
        if os.path.exists(os.path.join(home, "ready")) and psql_url(url, "select 1").returncode == 0:
            return proc, url
        time.sleep(0.25)
    raise AssertionError("the database did not accept engram_mcp")


def stop_db(home, proc):
    r = subprocess.run(["runuser", "-u", "postgres", "--", f"{PG_BIN}/pg_ctl", "-D",
                        os.path.join(home, "main", "pgdata"), "-w", "-m", "fast", "stop"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    proc.wait(60)


@needs_15
def test_db_entrypoint_initialises_and_serves_engram_mcp():
    home = os.path.join(ROOT, ".engram", "docker-test")
    shutil.rmtree(home, ignore_errors=True)
    # (the checkout's .engram is absent when the state lives elsewhere)
    os.makedirs(os.path.dirname(home), exist_ok=True)
    if os.path.exists(home + ".log"):
        os.remove(home + ".log")
    port = free_port()
    proc, url = start_db(home, port)
    try:
        assert psql_url(url, "select engram.has_tokens()").stdout.strip() == "t"
        denied = psql_url(f"host=127.0.0.1 port={port} user=postgres dbname=engram", "select 1")
        assert denied.returncode != 0, "the superuser stays off TCP"
        with open(os.path.join(home, "token")) as f:
            token = f.read().strip()
        assert token.startswith("eg_")
        with open(home + ".log") as f:
            assert token not in f.read(), "the token never reaches the log"
        mcp_port = free_port()
        env = dict(os.environ, ENGRAM_DATABASE_URL=url, ENGRAM_LISTEN=f"127.0.0.1:{mcp_port}",
                   ENGRAM_MODEL_DIR=MODEL_DIR, RUST_LOG="warn")
        mcp = subprocess.Popen([BIN, "serve", "--stateless"], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{mcp_port}"
            for _ in range(240):
                try:
                    if httpx.get(base + "/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.25)
            body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "memory_remember", "arguments": {"content": "docker: the image works"}}}
            r = httpx.post(base + "/mcp", json=body, headers={**JSON_HEADERS, "Authorization": f"Bearer {token}"},
                           timeout=30)
            assert r.status_code == 200 and r.json()["result"]["structuredContent"]["status"] == "created", r.text
        finally:
            mcp.terminate()
            mcp.wait(10)
    finally:
        stop_db(home, proc)

    # A second start (a container restart, or a newer image): data and token kept.
    proc, url = start_db(home, port)
    try:
        with open(os.path.join(home, "token")) as f:
            assert f.read().strip() == token
        assert psql_url(url, f"select count(*) from engram.authenticate('{token}')").stdout.strip() == "1"
        su = subprocess.run([f"{PG_BIN}/psql", "-X", "-tA", "-h", os.path.join(home, "main", "run"), "-p", str(port), "-U",
                             "postgres", "-d", "engram", "-c",
                             "select count(*) from engram.memories where content = 'docker: the image works'"],
                            capture_output=True, text=True)
        assert su.stdout.strip() == "1", su.stderr
    finally:
        stop_db(home, proc)
    shutil.rmtree(home, ignore_errors=True)
    os.remove(home + ".log")
