"""engram-mcp stdio through the Python SDK's stdio client: the process a
desktop client launches, with the caller's token in ENGRAM_TOKEN. Same
binding, scopes and tools as over HTTP; no internal context."""

import contextlib
import json
import os
import re
import subprocess

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client

from conftest import BIN, HOST, MODEL_DIR, PORT, call, new_database, psql
from test_tools import BASIC, INTERNAL

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

pytestmark = pytest.mark.anyio


def stdio_env(database, token=None, **extra):
    env = dict(os.environ, ENGRAM_DATABASE_URL=f"host={HOST} port={PORT} user=engram_mcp dbname={database}",
               ENGRAM_MODEL_DIR=MODEL_DIR, RUST_LOG="warn", ENGRAM_TOOLS="all")
    env.update(extra)
    # ENGRAM_TOOLS=None: engram-mcp's default tool set
    env = {k: v for k, v in env.items() if v is not None}
    env.pop("ENGRAM_TOKEN", None)
    if token is not None:
        env["ENGRAM_TOKEN"] = token
    return env


@contextlib.asynccontextmanager
async def stdio_session(database, token=None, *args, **extra):
    params = StdioServerParameters(command=BIN, args=["stdio", *args], env=stdio_env(database, token, **extra))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def test_stdio_serves_the_tokens_owner(database, tokens):
    async with stdio_session(database, tokens["alice"], ENGRAM_TOOLS=None) as s:
        tools = {t.name for t in (await s.list_tools()).tools}
        assert tools == BASIC
        assert not tools & INTERNAL, "no internal context over stdio"
        r, err = await call(s, "memory_remember", content="stdio: Alice's build server is named hopper",
                            tags=["infra"])
        assert not err and r["status"] == "created", r
        mem = r["id"]
        r, err = await call(s, "memory_search", query="what is the build server called?")
        assert not err and mem in [h["id"] for h in r["results"][:3]], r
    # written for the token's owner, audited with the token's label
    assert psql(database, f"SELECT owner FROM engram.memories WHERE id = '{mem}'") == "alice"
    assert psql(database, f"SELECT token_label FROM engram.audit_log WHERE memory_id = '{mem}' "
                          "AND action = 'remember'") == "pytest"
    # another token's process sees none of it, by search or by id
    async with stdio_session(database, tokens["bob"]) as s:
        r, err = await call(s, "memory_search", query="what is the build server called?")
        assert not err and mem not in [h["id"] for h in r["results"]]
        r, err = await call(s, "memory_recall", id=mem)
        assert err and "not found" in r.lower()


async def test_stdio_session_id_reaches_capture(database, tokens):
    async with stdio_session(database, tokens["alice"], ENGRAM_SESSION_ID="stdio-s1") as s:
        r, err = await call(s, "memory_capture", event_type="observation", content="stdio capture works")
        assert not err, r
    assert psql(database, "SELECT count(*) FROM engram.events e JOIN engram.memories m ON m.owner = e.owner AND m.id = e.memory_id "
                          "WHERE e.owner = 'alice' AND e.session_id = 'stdio-s1' "
                          "AND m.content = 'stdio capture works'") == "1"


def start_fails(database, token):
    """Runs engram-mcp stdio with no client; returns (exit code, stderr)."""
    p = subprocess.run([BIN, "stdio"], env=stdio_env(database, token), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def test_stdio_refuses_a_bad_or_missing_token(database, tokens):
    code, err = start_fails(database, "eg_not_a_token")
    assert code != 0 and "ENGRAM_TOKEN is unknown" in err, err
    code, err = start_fails(database, None)
    assert code != 0 and "set ENGRAM_TOKEN" in err, err
    revoked = psql(database, "SELECT engram.create_token(owner => 'alice', label => 'stdio-revoked')")
    psql(database, "SELECT engram.revoke_token(label => 'stdio-revoked', owner => 'alice')")
    code, err = start_fails(database, revoked)
    assert code != 0 and "ENGRAM_TOKEN is unknown" in err, err


async def test_stdio_without_tokens_serves_the_local_owner():
    database = new_database()  # never had a token
    async with stdio_session(database) as s:
        r, err = await call(s, "memory_remember", content="stdio: local notes stay local")
        assert not err and r["status"] == "created", r
    # the database's anonymous owner (the engram.anonymous_owner setting), as engram.bind(NULL) binds it
    owner = psql(database, f"SELECT owner FROM engram.memories WHERE id = '{r['id']}'")
    assert owner == psql(database, "SELECT engram._setting_anonymous_owner()") and owner


def installed(tmp_path):
    """The layout scripts/run installs: .engram/bin/engram-mcp beside
    .engram/models and .engram/lib (returns the state directory, the binary
    and a directory elsewhere to launch it from, as a desktop client does)."""
    state = tmp_path / "state"
    (state / "bin").mkdir(parents=True)
    (state / "models").mkdir()
    (state / "lib").mkdir()
    binary = state / "bin" / "engram-mcp"
    binary.write_bytes(open(BIN, "rb").read())
    binary.chmod(0o755)
    (state / "models" / "all-MiniLM-L6-v2").symlink_to(os.path.abspath(MODEL_DIR))
    (state / "lib" / "libonnxruntime.so").symlink_to(os.path.abspath(os.environ["ENGRAM_ONNX_RUNTIME"]))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return state, binary, elsewhere


def readme_desktop_config():
    """The desktop client configuration the README prints."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    block = re.search(r"```json\n(\{\"mcpServers\".*?)```", text, re.S)
    assert block, "README.md shows a desktop configuration"
    return json.loads(block.group(1).replace("eg_…", "eg_placeholder"))["mcpServers"]["engram"]


async def test_the_readmes_desktop_config_is_quiet_and_each_run_is_a_session(tmp_path):
    # The README's configuration, launched as a desktop client launches it:
    # its command, arguments and environment, with this machine's paths, this
    # test's database and a real token in place of the placeholders; no
    # RUST_LOG, no --session-id.
    database = new_database()
    token = psql(database, "SELECT engram.create_token(owner => 'erin', label => 'desktop')")
    state, binary, elsewhere = installed(tmp_path)
    config = readme_desktop_config()
    assert config["command"] == "/path/to/engram/.engram/bin/engram-mcp"
    assert set(config["env"]) == {"ENGRAM_TOKEN"}, "the README's config needs nothing else"

    def here(s):
        s = s.replace("/path/to/engram/.engram", str(state))
        return s.replace(f"host={state}/main/run port=5433 user=engram_mcp dbname=engram",
                         f"host={HOST} port={PORT} user=engram_mcp dbname={database}")

    args = [here(a) for a in config["args"]]
    assert any(f"dbname={database}" in a for a in args), args
    env = {**get_default_environment(), **config["env"], "ENGRAM_TOKEN": token}
    sessions = []
    for conversation in ("first", "second"):
        log = tmp_path / f"{conversation}.stderr"
        params = StdioServerParameters(command=here(config["command"]), args=args, env=env, cwd=str(elsewhere))
        with open(log, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    # memory_capture works without a session id: the run is one
                    r, err = await call(s, "memory_capture", event_type="observation",
                                        content=f"the {conversation} conversation looked at the deploy logs")
                    assert not err, r
                    r, err = await call(s, "memory_sessions")
                    assert not err, r
                    sessions.append({x["session_id"] for x in r["sessions"]})
                    if conversation == "first":
                        r, err = await call(s, "memory_summarize",
                                            content="Summary: the deploy logs showed a failed migration on ledger-7")
                        assert not err, r
                    else:
                        # a new conversation still starts from the last one's summary
                        r, err = await call(s, "memory_context")
                        assert not err, r
                        assert "failed migration on ledger-7" in json.dumps(r), r
        # Quiet: warnings only, and no colour codes when standard error is a file.
        text = log.read_text()
        assert "\x1b[" not in text, text[:2000]
        assert not [line for line in text.splitlines() if " INFO " in line or " DEBUG " in line], text[:2000]
        assert len(text.splitlines()) < 5, text[:2000]
    first, second = sessions
    assert len(first) == 1 and len(second) == 2 and first < second, "each run was a session of its own"
    assert psql(database, "SELECT count(DISTINCT e.session_id) FROM engram.events e JOIN engram.memories m "
                          "ON m.owner = e.owner AND m.id = e.memory_id WHERE e.owner = 'erin' "
                          "AND m.content LIKE '%conversation looked at the deploy logs'") == "2"


def test_onnx_runtime_is_the_version_engram_mcp_is_built_for(database, tokens):
    # With ort's own messages shown, loading the library says its version and
    # no "designed for ... may have compatibility issues" line.
    env = stdio_env(database, tokens["alice"], RUST_LOG="ort=info")
    p = subprocess.run([BIN, "stdio"], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=120)
    loaded = re.search(r"Loaded ONNX Runtime dylib from .*version '([0-9.]+)'", p.stderr)
    assert loaded, p.stderr[-3000:]
    assert "designed for ONNX Runtime" not in p.stderr, p.stderr[-3000:]


async def test_an_installed_binary_finds_its_model_and_refuses_unknown_databases(database, tokens, tmp_path):
    # Launched from elsewhere, as a desktop client does, with no model flags
    # or variables.
    state, binary, elsewhere = installed(tmp_path)

    def env(db):
        e = stdio_env(db, tokens["alice"])
        e.pop("ENGRAM_MODEL_DIR", None)
        e.pop("ENGRAM_ONNX_RUNTIME", None)
        return e

    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True).stdout
    extversion = psql(database, "SELECT extversion FROM pg_extension WHERE extname = 'engram'")
    assert extversion in version, version

    params = StdioServerParameters(command=str(binary), args=["stdio"], env=env(database), cwd=str(elsewhere))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            r, err = await call(s, "memory_remember", content="installed: the staging box is called juniper")
            assert not err and r["status"] == "created", r
            r, err = await call(s, "memory_search", query="what is the staging box called?")
            assert not err and r["results"][0]["content"].endswith("juniper"), r

    # A database whose engram this binary does not know: refused at start,
    # saying what to run, before serving anything.
    old = new_database()
    psql(old, "UPDATE pg_extension SET extversion = '0.1.0' WHERE extname = 'engram'")
    done = subprocess.run([str(binary), "stdio"], env=env(old), cwd=str(elsewhere), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert "engram 0.1.0" in done.stderr and "ALTER EXTENSION engram UPDATE" in done.stderr, done.stderr
    # export and import check it too, before their first call
    dba = dict(env(old), ENGRAM_DATABASE_URL=f"host={HOST} port={PORT} user=postgres dbname={old}")
    done = subprocess.run([str(binary), "export", "--owner", "alice", "--out", str(tmp_path / "x.jsonl")], env=dba,
                          cwd=str(elsewhere), capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "ALTER EXTENSION engram UPDATE" in done.stderr, done.stderr
    assert not (tmp_path / "x.jsonl").exists() or (tmp_path / "x.jsonl").stat().st_size == 0


def test_a_binary_never_loads_onnx_runtime_from_the_working_directory(database, tokens, tmp_path):
    # A binary with nothing installed beside it, started by a client in a
    # directory holding a planted .engram/lib/libonnxruntime.so: it must not
    # dlopen() that file (a library runs its code when loaded), and says
    # where it looked instead.
    bare = tmp_path / "bare" / "bin"
    bare.mkdir(parents=True)
    binary = bare / "engram-mcp"
    binary.write_bytes(open(BIN, "rb").read())
    binary.chmod(0o755)
    planted = tmp_path / "checkout"
    (planted / ".engram" / "lib").mkdir(parents=True)
    (planted / ".engram" / "models").mkdir()
    (planted / ".engram" / "lib" / "libonnxruntime.so").write_bytes(b"not a library: loading this is the bug")
    (planted / ".engram" / "models" / "all-MiniLM-L6-v2").symlink_to(os.path.abspath(MODEL_DIR))
    env = stdio_env(database, tokens["alice"])
    env.pop("ENGRAM_MODEL_DIR", None)
    env.pop("ENGRAM_ONNX_RUNTIME", None)
    done = subprocess.run([str(binary), "stdio"], env=env, cwd=str(planted), capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert str(planted) not in done.stderr and "loading this is the bug" not in done.stderr, done.stderr
    assert str(tmp_path / "bare" / "share" / "engram") in done.stderr, done.stderr
