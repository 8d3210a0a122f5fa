"""The Debian packages as a user installs them: the extension's
package of scripts/package, a fresh PostgreSQL cluster that no script built
engram into, CREATE EXTENSION engram CASCADE, ALTER EXTENSION engram UPDATE
from the previous release, and engram-mcp's package started from /usr/bin as
its systemd unit's ExecStart would (as the unit's user, with the unit's
EnvironmentFile), then a remember and a search through the Python SDK. The
unit's confinement is checked line by line (systemd does not run here), and
the environment file's mode on a new install and after a second configure.

On 15 (bookworm's PostgreSQL, from apt) both packages are installed with
`dpkg -i`. On 16 and 17 (ENGRAM_PG_MAJOR; no postgresql-16/17 package runs
on bookworm, so dpkg would refuse the dependency) the extension's package is
unpacked with `dpkg-deb -x` into a copy of that server's installation from
which engram was removed, at the paths Debian's postgresql-<major> has.
scripts/test runs it after scripts/package, with ENGRAM_PACKAGES naming the
directory of the .deb files; skipped otherwise."""

import contextlib
import glob
import grp
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

from conftest import PG_BIN, call, mcp_session

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not os.environ.get("ENGRAM_PACKAGES"), reason="ENGRAM_PACKAGES not set (scripts/test sets it)"),
]

MAJOR = os.environ.get("ENGRAM_PG_MAJOR", "15")
ENV_FILE = "/etc/engram/engram-mcp.env"
# What engram-mcp.service confines (docs/DEPLOY.md), line by line.
UNIT_CONFINEMENT = [
    "NoNewPrivileges=true", "ProtectSystem=strict", "ProtectHome=true", "PrivateTmp=true", "PrivateDevices=yes",
    "ProtectKernelTunables=yes", "ProtectKernelModules=yes", "ProtectKernelLogs=yes", "ProtectControlGroups=yes",
    "ProtectClock=yes", "ProtectHostname=yes", "ProtectProc=invisible",
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6", "RestrictNamespaces=yes", "RestrictRealtime=yes",
    "RestrictSUIDSGID=yes", "LockPersonality=yes", "CapabilityBoundingSet=", "AmbientCapabilities=",
    "SystemCallArchitectures=native", "SystemCallFilter=@system-service", "SystemCallFilter=~@privileged @resources",
    "SystemCallErrorNumber=EPERM",
]


def run(*cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{cmd}: {done.stderr}"
    return done.stdout.strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def fresh_cluster(pg_bin):
    """A new cluster (initdb) owned by postgres, engram preloaded, reached
    only over its Unix socket (trust authentication, so no TCP), in a
    directory that root, postgres and the unit's group (engram) alone can
    enter. Yields psql for it, and its socket directory and port."""
    data = tempfile.mkdtemp(prefix="engram-pkg-")
    shutil.chown(data, "postgres", "engram")
    os.chmod(data, 0o710)
    port = free_port()
    run("runuser", "-u", "postgres", "--", f"{pg_bin}/initdb", "-D", f"{data}/db", "-A", "trust", "-E", "UTF8")
    run("runuser", "-u", "postgres", "--", f"{pg_bin}/pg_ctl", "-D", f"{data}/db", "-w", "-l", f"{data}/log",
        # what README "Install into an existing PostgreSQL" asks of a cluster
        "-o", f"-p {port} -k {data} -c listen_addresses='' -c shared_preload_libraries=engram", "start")
    try:
        yield lambda db, sql: psql(pg_bin, data, port, db, sql), data, port
    finally:
        subprocess.run(["runuser", "-u", "postgres", "--", f"{pg_bin}/pg_ctl", "-D", f"{data}/db", "-m", "fast",
                        "stop"], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


def psql(pg_bin, socket_dir, port, db, sql):
    return run(f"{pg_bin}/psql", "-h", socket_dir, "-p", str(port), "-U", "postgres", "-d", db, "-v",
               "ON_ERROR_STOP=1", "-tAc", sql)


def env_file_access():
    """(mode, owner uid, group name) of the unit's environment file."""
    st = os.stat(ENV_FILE)
    return st.st_mode & 0o777, st.st_uid, grp.getgrgid(st.st_gid).gr_name


def unit_environment(path):
    """KEY=VALUE lines as systemd's EnvironmentFile reads them."""
    env = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip().strip('"')
    return env


@contextlib.contextmanager
def server_with_package(deb):
    """The bin directory of a PostgreSQL with the extension's package in it,
    and the package's file list: on 15 the system's, after dpkg -i; on 16
    and 17 a copy of the server under test without engram, with the
    package's files unpacked into it at Debian's paths."""
    if MAJOR == "15":
        run("dpkg", "-i", deb)
        yield "/usr/lib/postgresql/15/bin", run("dpkg", "-L", "postgresql-15-engram").split()
        return
    prefix = os.path.dirname(PG_BIN)
    root = tempfile.mkdtemp(prefix="engram-pkg-server-")
    try:
        server = os.path.join(root, "server")
        shutil.copytree(prefix, server, symlinks=True)
        libdir, extdir = os.path.join(server, "lib"), os.path.join(server, "share", "extension")
        for f in glob.glob(os.path.join(libdir, "engram.so")) + glob.glob(os.path.join(extdir, "engram*")):
            os.remove(f)
        run("dpkg-deb", "-x", deb, os.path.join(root, "deb"))
        files = []
        for sub, dest in [(f"usr/lib/postgresql/{MAJOR}/lib", libdir),
                          (f"usr/share/postgresql/{MAJOR}/extension", extdir)]:
            for f in os.listdir(os.path.join(root, "deb", sub)):
                shutil.copy(os.path.join(root, "deb", sub, f), dest)
                files.append(f"/{sub}/{f}")
        os.chmod(root, 0o755)
        yield os.path.join(server, "bin"), files
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_the_packages_install_update_and_serve():
    debs = sorted(glob.glob(os.path.join(os.environ["ENGRAM_PACKAGES"], "*.deb")))
    ext = [d for d in debs if re.search(rf"/postgresql-{MAJOR}-engram_[^/]+_amd64\.deb$", d)]
    mcp = [d for d in debs if re.search(r"/engram-mcp_[^/]+_amd64\.deb$", d)]
    assert len(ext) == 1 and len(mcp) == 1, debs
    version = run("dpkg-deb", "-f", ext[0], "Version")
    assert run("dpkg-deb", "-f", ext[0], "Depends").startswith(f"postgresql-{MAJOR},")
    assert run("dpkg-deb", "-f", ext[0], "Recommends") == f"postgresql-{MAJOR}-pgvector (>= 0.8.0)"
    # a new install: an earlier run's package is purged first, so that this
    # configure is the first one
    subprocess.run(["dpkg", "--purge", "engram-mcp"], capture_output=True)
    assert not os.path.exists(ENV_FILE), "dpkg --purge engram-mcp left the environment file"
    run("dpkg", "-i", mcp[0])
    unit = open("/lib/systemd/system/engram-mcp.service").read()
    assert "EnvironmentFile=/etc/engram/engram-mcp.env" in unit and "ExecStart=/usr/bin/engram-mcp serve" in unit
    assert "ENGRAM_TOKEN" not in unit, "no token on the unit's command line"
    directives = set(unit.splitlines())
    missing = [d for d in UNIT_CONFINEMENT if d not in directives]
    assert not missing, f"the unit lacks {missing}"
    assert "MemoryDenyWriteExecute=yes" not in directives and "ProcSubset=pid" not in directives
    # the environment file may hold a database password: root writes it, the
    # unit's group reads it, nobody else
    assert env_file_access() == (0o640, 0, "engram")
    # an administrator's tighter mode survives a reinstall (a second
    # configure, as an upgrade runs it)
    os.chmod(ENV_FILE, 0o600)
    run("dpkg", "-i", mcp[0])
    assert env_file_access() == (0o600, 0, "engram"), "a second configure loosened the environment file"
    assert version in run("/usr/bin/engram-mcp", "--version")

    with server_with_package(ext[0]) as (pg_bin, files), fresh_cluster(pg_bin) as (psql, sockets, port):
        assert f"/usr/lib/postgresql/{MAJOR}/lib/engram.so" in files, files
        assert any(f.endswith(f"/engram--{version}.sql") for f in files), files
        assert any(re.search(r"/engram--[\d.]+--" + re.escape(version) + r"\.sql$", f) for f in files), \
            "the package carries the upgrade to its version"
        assert psql("postgres", "SHOW server_version_num")[:2] == MAJOR
        psql("postgres", "CREATE DATABASE engram")
        psql("engram", "CREATE EXTENSION engram CASCADE")
        assert psql("engram", "SELECT extversion FROM pg_extension WHERE extname = 'engram'") == version
        # from the previous release (its install script is a test fixture,
        # tests/sql/): the package's upgrade chain takes it to this version
        previous = max((f for f in files if re.search(r"--[\d.]+--" + re.escape(version) + r"\.sql$", f)))
        previous = re.search(r"engram--([\d.]+)--", previous).group(1)
        # The fixture, which dpkg -i does not bring (and removes when an
        # installed package of that version owned it).
        pg_config = os.path.join(pg_bin, "pg_config")
        sharedir = (subprocess.run([pg_config, "--sharedir"], check=True, capture_output=True, text=True).stdout.strip()
                    if os.path.exists(pg_config) else os.path.join(os.path.dirname(pg_bin), "share"))
        shutil.copy(os.path.join(os.path.dirname(__file__), "..", "sql", f"engram--{previous}.sql"),
                    os.path.join(sharedir, "extension"))
        psql("postgres", "CREATE DATABASE older")
        psql("older", f"CREATE EXTENSION engram VERSION '{previous}' CASCADE")
        psql("older", "ALTER EXTENSION engram UPDATE")
        assert psql("older", "SELECT extversion FROM pg_extension WHERE extname = 'engram'") == version

        psql("engram", "CREATE ROLE engram_mcp LOGIN IN ROLE engram_agent")
        token = psql("engram", "SELECT engram.create_token(owner => 'deb', label => 'package test')")
        # The unit's environment file, with this cluster's address: started
        # as ExecStart would, as the unit's user, with no model flags.
        env = unit_environment("/etc/engram/engram-mcp.env")
        listen = f"127.0.0.1:{free_port()}"
        env.update(ENGRAM_DATABASE_URL=f"host={sockets} port={port} user=engram_mcp dbname=engram",
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
