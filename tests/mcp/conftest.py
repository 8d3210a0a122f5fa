"""Fixtures for the MCP tests: a fresh database in the test cluster, tokens,
and engram-mcp processes (session mode and stateless JSON mode) started from
the binary that scripts/test built. Clients are the real `mcp` SDK from PyPI."""

import contextlib
import os
import socket
import ssl
import subprocess
import time
import uuid

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

HOST = os.environ["ENGRAM_TEST_HOST"]
PORT = os.environ["ENGRAM_TEST_PORT"]
BIN = os.environ["ENGRAM_MCP_BIN"]
MODEL_DIR = os.environ["ENGRAM_MODEL_DIR"]
# The programs of the PostgreSQL under test (scripts/test exports the bin
# directory of ENGRAM_PG_MAJOR's server; bookworm's 15 otherwise).
PG_BIN = os.environ.get("ENGRAM_TEST_PG_BIN", "/usr/lib/postgresql/15/bin")
# Citus mode (the Citus stage of scripts/test): HOST/PORT name the
# coordinator, and these its workers (`dir:port,dir:port`).
CITUS_WORKERS = [tuple(w.rsplit(":", 1)) for w in os.environ.get("ENGRAM_TEST_CITUS_WORKERS", "").split(",") if w]


# Raw Streamable HTTP requests, for what the SDK hides (status codes, headers).
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "pytest", "version": "1"}}}


def psql(db, sql, host=HOST, port=PORT):
    args = [f"{PG_BIN}/psql", "-X", "-v", "ON_ERROR_STOP=1", "-tA", "-h", host, "-p", port, "-U", "postgres", "-d", db]
    # A long statement (thousands of ids) goes through standard input: one
    # argument may not exceed 128 KiB (Linux's MAX_ARG_STRLEN).
    if len(sql) > 64 * 1024:
        assert ";" not in sql.rstrip().rstrip(";"), "a long psql() input must be one statement"
        out = subprocess.run(args, input=sql.rstrip().rstrip(";") + ";\n", check=True, capture_output=True, text=True)
    else:
        out = subprocess.run(args + ["-c", sql], check=True, capture_output=True, text=True)
    return out.stdout.strip()


@contextlib.contextmanager
def locked_memories(database, seconds):
    """Holds an exclusive lock on engram.memories from another session."""
    p = subprocess.Popen([f"{PG_BIN}/psql", "-X", "-q", "-h", HOST, "-p", PORT, "-U", "postgres", "-d", database, "-c",
                          f"BEGIN; LOCK TABLE engram.memories IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep({seconds}); COMMIT;"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        yield
    finally:
        p.wait(seconds + 10)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def anyio_backend():
    return "asyncio"


def new_database():
    name = f"mcp_{uuid.uuid4().hex[:8]}"
    if CITUS_WORKERS:
        # A distributed copy of the template that scripts/test made on every
        # node: each node copies its part under the same name, and
        # distribute() applies the database settings the copy lacks.
        for host, port in CITUS_WORKERS + [(HOST, PORT)]:
            psql("postgres", f"CREATE DATABASE {name} TEMPLATE engram_template", host, port)
        psql(name, "SELECT engram.distribute()")
        return name
    psql("postgres", f"CREATE DATABASE {name}")
    psql(name, "CREATE EXTENSION engram CASCADE")
    return name


@pytest.fixture(scope="session")
def database():
    """A database with tokens (see `tokens`): every request must authenticate."""
    return new_database()


@pytest.fixture(scope="session")
def open_database():
    """A database without any token: loopback clients are served anonymously as the local owner."""
    return new_database()


@pytest.fixture(scope="session")
def tokens(database):
    mint = lambda owner, platform: psql(
        database, f"SELECT engram.create_token(owner => '{owner}', label => 'pytest', platform => {platform})")
    return {"platform": mint("platform", "true"), "alice": mint("alice", "false"), "bob": mint("bob", "false")}


def start(database, *extra, listen="127.0.0.1", env_extra=None, tls_ca=None):
    """Starts engram-mcp on a free port of `listen` (logged in as engram_mcp, a
    member of engram_agent only); returns (process, base URL on loopback).
    With tls_ca (the certificate's issuer, a PEM file), the server is
    expected to serve HTTPS for localhost."""
    port = free_port()
    env = dict(os.environ, ENGRAM_DATABASE_URL=f"host={HOST} port={PORT} user=engram_mcp dbname={database}",
               ENGRAM_LISTEN=f"{listen}:{port}", ENGRAM_MODEL_DIR=MODEL_DIR, RUST_LOG="warn")
    env.update(env_extra or {})
    proc = subprocess.Popen([BIN, "serve", *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"https://localhost:{port}" if tls_ca else f"http://127.0.0.1:{port}"
    verify = ssl.create_default_context(cafile=tls_ca) if tls_ca else True
    for _ in range(120):
        if proc.poll() is not None:
            raise RuntimeError("engram-mcp exited: " + proc.stdout.read().decode())
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(base + "/health", timeout=1, verify=verify).status_code == 200:
                return proc, base
        time.sleep(0.25)
    proc.kill()
    raise RuntimeError("engram-mcp did not become healthy")


@contextlib.contextmanager
def serving(database, *extra, **kw):
    """engram-mcp for the duration of a `with` block; yields the base URL."""
    proc, base = start(database, *extra, **kw)
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="session")
def server(database, tokens):
    """engram-mcp with every tool group (--tools all), output schemas listed."""
    with serving(database, "--tools", "all", "--output-schemas") as base:
        yield base


@pytest.fixture(scope="session")
def stateless_server(database, tokens):
    with serving(database, "--stateless") as base:
        yield base


@contextlib.asynccontextmanager
async def mcp_session(base, token, **headers):
    hdrs = {"Authorization": f"Bearer {token}", **headers}
    async with streamablehttp_client(base + "/mcp", headers=hdrs) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session, tool, **args):
    """Calls a tool; returns (structured result or error text, is_error)."""
    r = await session.call_tool(tool, args)
    if r.isError:
        assert r.structuredContent is None, "error results carry no structuredContent"
        return r.content[0].text, True
    return r.structuredContent, False
