"""The Debian packages as a user installs them (issue 22): `dpkg -i` of
postgresql-15-engram and engram-mcp from scripts/package, a fresh PostgreSQL
cluster that no script built engram into, CREATE EXTENSION engram CASCADE,
ALTER EXTENSION engram UPDATE from the previous release, and engram-mcp
started from /usr/bin as its systemd unit's ExecStart would (as the unit's
user, with the unit's EnvironmentFile), then a remember and a search
through the Python SDK. scripts/test runs it after scripts/package, with
ENGRAM_PACKAGES naming the directory of the .deb files; skipped otherwise."""

import contextlib
import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

from conftest import call, mcp_session

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not os.environ.get("ENGRAM_PACKAGES"), reason="ENGRAM_PACKAGES not set (scripts/test sets it)"),
]

PG_BIN = "/usr/lib/postgresql/15/bin"


def run(*cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{cmd}: {done.stderr}"
    return done.stdout.strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def fresh_cluster():
    """A new cluster (initdb) owned by postgres, on a free TCP port, engram
    preloaded."""
    data = tempfile.mkdtemp(prefix="engram-pkg-")
    os.chmod(data, 0o755)
    shutil.chown(data, "postgres", "postgres")
    port = free_port()
    run("runuser", "-u", "postgres", "--", f"{PG_BIN}/initdb", "-D", f"{data}/db", "-A", "trust", "-E", "UTF8")
    run("runuser", "-u", "postgres", "--", f"{PG_BIN}/pg_ctl", "-D", f"{data}/db", "-w", "-l", f"{data}/log",
        # what README "Installing into your own PostgreSQL" asks of a cluster
        "-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c shared_preload_libraries=engram", "start")
    try:
        yield port
    finally:
        subprocess.run(["runuser", "-u", "postgres", "--", f"{PG_BIN}/pg_ctl", "-D", f"{data}/db", "-m", "fast",
                        "stop"], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


def psql(port, db, sql):
    return run(f"{PG_BIN}/psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", db, "-v",
               "ON_ERROR_STOP=1", "-tAc", sql)


def unit_environment(path):
    """KEY=VALUE lines as systemd's EnvironmentFile reads them."""
    env = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip().strip('"')
    return env


async def test_the_packages_install_update_and_serve():
    debs = sorted(glob.glob(os.path.join(os.environ["ENGRAM_PACKAGES"], "*.deb")))
    ext = [d for d in debs if re.search(r"/postgresql-15-engram_[^/]+_amd64\.deb$", d)]
    mcp = [d for d in debs if re.search(r"/engram-mcp_[^/]+_amd64\.deb$", d)]
    assert len(ext) == 1 and len(mcp) == 1, debs
    run("dpkg", "-i", ext[0], mcp[0])
    version = run("dpkg-query", "-W", "-f=${Version}", "postgresql-15-engram")
    files = run("dpkg", "-L", "postgresql-15-engram").split()
    assert any(f.endswith(f"/engram--{version}.sql") for f in files), files
    assert any(re.search(r"/engram--[\d.]+--" + re.escape(version) + r"\.sql$", f) for f in files), \
        "the package carries the upgrade to its version"
    unit = open("/lib/systemd/system/engram-mcp.service").read()
    assert "EnvironmentFile=/etc/engram/engram-mcp.env" in unit and "ExecStart=/usr/bin/engram-mcp serve" in unit
    assert "ENGRAM_TOKEN" not in unit, "no token on the unit's command line"
    assert version in run("/usr/bin/engram-mcp", "--version")

    with fresh_cluster() as port:
        psql(port, "postgres", "CREATE DATABASE engram")
        psql(port, "engram", "CREATE EXTENSION engram CASCADE")
        assert psql(port, "engram", "SELECT extversion FROM pg_extension WHERE extname = 'engram'") == version
        # from the previous release (its install script is a test fixture,
        # tests/sql/): the package's upgrade chain takes it to this version
        previous = max((f for f in files if re.search(r"--[\d.]+--" + re.escape(version) + r"\.sql$", f)))
        previous = re.search(r"engram--([\d.]+)--", previous).group(1)
        psql(port, "postgres", "CREATE DATABASE older")
        psql(port, "older", f"CREATE EXTENSION engram VERSION '{previous}' CASCADE")
        psql(port, "older", "ALTER EXTENSION engram UPDATE")
        assert psql(port, "older", "SELECT extversion FROM pg_extension WHERE extname = 'engram'") == version

        psql(port, "engram", "CREATE ROLE engram_mcp LOGIN IN ROLE engram_agent")
        token = psql(port, "engram", "SELECT engram.create_token(owner => 'deb', label => 'package test')")
        # The unit's environment file, with this cluster's address: started
        # as ExecStart would, as the unit's user, with no model flags.
        env = unit_environment("/etc/engram/engram-mcp.env")
        listen = f"127.0.0.1:{free_port()}"
        env.update(ENGRAM_DATABASE_URL=f"host=127.0.0.1 port={port} user=engram_mcp dbname=engram",
                   ENGRAM_LISTEN=listen, RUST_LOG="warn")
        assert set(env) >= {"ENGRAM_DATABASE_URL", "ENGRAM_LISTEN"}
        proc = subprocess.Popen([shutil.which("runuser"), "-u", "engram", "--", "/usr/bin/engram-mcp", "serve"],
                                env={"PATH": "/usr/bin:/bin", **env}, cwd="/", stderr=subprocess.PIPE, text=True)
        try:
            base = f"http://{listen}"
            for _ in range(240):
                assert proc.poll() is None, proc.stderr.read()
                with contextlib.suppress(Exception):
                    if urllib.request.urlopen(base + "/health", timeout=1).status == 200:
                        break
                time.sleep(0.5)
            async with mcp_session(base, token) as s:
                r, err = await call(s, "memory_remember", content="packaged: the backup server is called tortoise")
                assert not err and r["status"] == "created", r
                r, err = await call(s, "memory_search", query="what is the backup server called?")
                assert not err and r["results"][0]["content"].endswith("tortoise"), r
        finally:
            proc.terminate()
            proc.wait(timeout=30)
