"""The security rules (docs/SECURITY.md) over MCP, with the Python SDK: what
a ghost conversation may touch, --tools enforced at call time, anonymous
access, the login role, the embedding cache's scope, limits checked before
embedding, pool and statement timeouts, and the arguments and headers the
other tests do not cover."""

import asyncio
import http.server
import json
import re
import subprocess
import threading
import time

import httpx
import pytest

from conftest import (HOST, INITIALIZE, JSON_HEADERS, PG_BIN, PORT, call, free_port, locked_memories, mcp_session,
                      new_database, psql, serving, start)

pytestmark = pytest.mark.anyio


def ghost_of(owner, accessor):
    return {"X-User-Id": accessor, "X-Internal-Type": "ghost", "X-Ghost-Type": "user", "X-Ghost-Owner": owner}


async def test_a_ghost_conversation_shows_what_the_ghost_may_show(server, tokens, database):
    psql(database, "SELECT engram.ghost_settings(owner => 'erin', enabled => true, default_trust => 1::smallint)")
    platform = tokens["platform"]
    async with mcp_session(server, platform, **{"X-User-Id": "erin"}) as s:
        ids = {}
        for level, text in [(1, "Erin works on the lighthouse project"),
                            (3, "Erin is moving to the lighthouse keeper's cottage in June"),
                            (4, "Erin's lighthouse alarm code is 7781")]:
            r, err = await call(s, "memory_remember", content=text, access_level=level)
            assert not err and r["status"] == "created", r
            ids[level] = r["id"]
        r, err = await call(s, "memory_grant", accessor="frank", trust=3)
        assert not err and r == {"accessor": "frank", "trust": 3}
    async with mcp_session(server, platform, **{"X-User-Id": "frank"}) as s:
        r, _ = await call(s, "memory_remember", content="Frank's own lighthouse photos are in the attic")
        franks = r["id"]

    async with mcp_session(server, platform, **ghost_of("erin", "frank")) as s:
        r, err = await call(s, "memory_search", query="lighthouse", limit=20)
        assert not err
        seen = {h["id"] for h in r["results"]}
        assert seen == {ids[1], ids[3]}, "trust 3 shows levels 1 and 3 only, never frank's own memories"
        assert r["time_window"] is None
        # a ghost's answer says which time its query named, with hits and without
        r, err = await call(s, "memory_search", query="lighthouse photos from yesterday", limit=20)
        assert not err and r["time_window"]["start"] < r["time_window"]["end"], r
        r, err = await call(s, "memory_search", query="zeppelin airships yesterday", limit=20)
        assert not err and r["time_window"]["start"] < r["time_window"]["end"], r
        assert {h["id"] for h in r["results"]} <= {ids[1], ids[3]}
        r, _ = await call(s, "memory_list")
        assert {m["id"] for m in r["memories"]} == {ids[1], ids[3]}
        r, err = await call(s, "memory_recall", id=ids[3])
        assert not err and r["memory"]["content"].startswith("Erin is moving")
        for hidden in (ids[4], franks):
            text, err = await call(s, "memory_recall", id=hidden)
            assert err and "not found" in text
        for tool, args in [("memory_remember", {"content": "x"}), ("memory_update", {"id": ids[1], "content": "x"}),
                           ("memory_forget", {"id": ids[1]}), ("memory_flag", {"id": ids[1], "reason": "x"}),
                           ("memory_consolidate", {"ids": [ids[1]], "content": "x"}),
                           ("memory_crystallize", {"ids": [ids[1]], "name": "n", "content": "x"})]:
            text, err = await call(s, tool, **args)
            assert err and "memory_internal_create" in text, (tool, text)
        r, err = await call(s, "memory_internal_create", content="Frank asked Erin's ghost about the cottage")
        assert not err and r["status"] == "created"
        # sharing tools change the accessor's own settings, which a ghost conversation may not
        text, err = await call(s, "memory_grant", accessor="gina", trust=5)
        assert err
    # the other direction: without a grant, the default trust (1)
    async with mcp_session(server, platform, **ghost_of("erin", "gina")) as s:
        r, _ = await call(s, "memory_search", query="lighthouse", limit=20)
        assert {h["id"] for h in r["results"]} == {ids[1]}
    # nothing was written outside the ghost scope
    assert psql(database, "SELECT count(*) FROM engram.memories WHERE owner = 'erin'") == "3"


async def test_spaces_over_mcp(server, tokens, database):
    async with mcp_session(server, tokens["platform"], **{"X-User-Id": "hana"}) as s:
        r, _ = await call(s, "memory_remember", content="The harbour ferry leaves at 7:40 on weekdays", access_level=5)
        ferry = r["id"]
        r, _ = await call(s, "memory_remember", content="Hana's harbour locker code is 5512")
        r, err = await call(s, "memory_publish", id=ferry, space="harbour")
        assert not err and r["id"] == ferry and r["publication_id"]
    space = {"X-User-Id": "ivan", "X-Internal-Type": "ghost", "X-Ghost-Type": "space", "X-Ghost-Space": "harbour"}
    async with mcp_session(server, tokens["platform"], **space) as s:
        r, err = await call(s, "memory_search", query="harbour", limit=20)
        assert not err, r
        assert [h["id"] for h in r["results"]] == [ferry]
        # plus the accessor's own ghost memories of this space, through the internal tools
        r, _ = await call(s, "memory_internal_create", content="Ivan asked the harbour space about the ferry")
        note = r["id"]
        r, _ = await call(s, "memory_internal_search", query="harbour ferry")
        assert [h["id"] for h in r["results"]] == [note]
    async with mcp_session(server, tokens["platform"], **{"X-User-Id": "hana"}) as s:
        r, _ = await call(s, "memory_unpublish", id=ferry, space="harbour")
        assert r == {"id": ferry, "unpublished": True}
    async with mcp_session(server, tokens["platform"], **space) as s:
        r, _ = await call(s, "memory_search", query="harbour", limit=20)
        assert r["results"] == [] and r["time_window"] is None
        # a ghost's empty answer still says which time its query named
        r, err = await call(s, "memory_search", query="harbour ferry yesterday", limit=20)
        assert not err and r["results"] == [] and r["time_window"]["start"] < r["time_window"]["end"], r


async def test_tools_groups_are_enforced_at_call_time(database, tokens):
    with serving(database, "--tools", "core") as base:
        async with mcp_session(base, tokens["platform"], **{"X-Internal-Type": "agent"}) as s:
            names = {t.name for t in (await s.list_tools()).tools}
            assert "memory_internal_create" not in names and "memory_grant" not in names
            text, err = await call(s, "memory_internal_create", content="hidden tools are not callable")
            assert err and "not enabled" in text and "--tools" in text
            text, err = await call(s, "memory_grant", accessor="x", trust=1)
            assert err and "not enabled" in text
            r, err = await call(s, "memory_search", query="anything")
            assert not err
    assert psql(database, "SELECT count(*) FROM engram.memories WHERE content LIKE 'hidden tools%'") == "0"


def non_loopback_address():
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    return next((a for a in out if re.match(r"^\d+\.\d+\.\d+\.\d+$", a) and not a.startswith("127.")), None)


async def test_anonymous_requests_only_on_loopback_without_tokens(open_database, database, tokens):
    post = lambda base, **h: httpx.post(base + "/mcp", json=INITIALIZE, headers={**JSON_HEADERS, **h}, timeout=10)
    with serving(open_database) as base:
        assert post(base).status_code == 200
        # a request a local reverse proxy forwards is not this machine's user
        for forwarded in ({"X-Forwarded-For": "203.0.113.9"}, {"Forwarded": "for=203.0.113.9"},
                          {"X-Real-IP": "203.0.113.9"}, {"Via": "1.1 proxy"}, {"X-Forwarded-Proto": "https"}):
            assert post(base, **forwarded).status_code == 401, forwarded
        # anonymous callers never get platform rights
        assert post(base, **{"X-User-Id": "alice"}).status_code == 403
        assert post(base, **{"X-Internal-Type": "agent"}).status_code == 403
    # A server that listens beyond loopback, started while tokens existed,
    # stays closed to anonymous requests after the last token is revoked.
    db = new_database()
    psql(db, "SELECT engram.create_token(owner => 'ops', label => 'only')")
    with serving(db, listen="0.0.0.0") as base, serving(db) as local:
        psql(db, "SELECT engram.revoke_token(label => 'only', owner => 'ops')")
        # on loopback too: a database that had a token never serves anonymously again
        assert post(local).status_code == 401
        assert psql(db, "SELECT engram.has_tokens()") == "f"
        assert post(base).status_code == 401, "revoking the last token opened a network listener"
        address = non_loopback_address()
        if address:
            remote = base.replace("127.0.0.1", address)
            # (a Host the server accepts: the Host guard, which comes first, would refuse this address)
            assert post(remote).status_code == 403
            assert post(remote, Host="localhost").status_code == 401


async def test_the_adapter_refuses_a_superuser_login(database):
    with pytest.raises(RuntimeError, match="superuser"):
        start(database, env_extra={"ENGRAM_DATABASE_URL": f"host={HOST} port={PORT} user=postgres dbname={database}"})
    # nor a role that can SET ROLE to a superuser
    psql(database, "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'engram_mcp_su') THEN "
                   "CREATE ROLE engram_mcp_su LOGIN IN ROLE engram_agent, postgres; END IF; END $$")
    with pytest.raises(RuntimeError, match="superuser"):
        start(database, env_extra={"ENGRAM_DATABASE_URL": f"host={HOST} port={PORT} user=engram_mcp_su dbname={database}"})
    psql(database, "DROP ROLE engram_mcp_su")


async def test_ambiguous_identity_headers_are_refused(server, tokens):
    post = lambda headers: httpx.post(server + "/mcp", json=INITIALIZE, headers=[*JSON_HEADERS.items(), *headers],
                                      timeout=10)
    platform = ("Authorization", f"Bearer {tokens['platform']}")
    # an empty X-User-Id used to act as the platform token's own owner
    assert post([platform, ("X-User-Id", "")]).status_code == 400
    assert post([platform, ("X-User-Id", "bob"), ("X-User-Id", "alice")]).status_code == 400
    # an empty X-Internal-Type used to mean "no context": now every tool says what is wrong
    async with mcp_session(server, tokens["platform"], **{"X-User-Id": "bob", "X-Internal-Type": ""}) as s:
        text, err = await call(s, "memory_search", query="anything")
        assert err and "x-internal-type" in text.lower() and "empty" in text
    # the scheme is case-insensitive; other schemes are not "no token"
    assert post([("Authorization", f"BEARER {tokens['alice']}")]).status_code == 200
    assert post([("Authorization", "Basic dXNlcjpwYXNz")]).status_code == 401


def metric(base, name, token):
    r = httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {token}"})
    m = re.search(rf"^{name} (\d+)", r.text, re.M)
    assert m, r.text
    return int(m.group(1))


async def test_the_embedding_cache_is_per_owner(server, tokens):
    text = "Alice's surgery is booked for the 14th of March"
    async with mcp_session(server, tokens["alice"]) as s:
        await call(s, "memory_remember", content=text)
    hits = metric(server, "engram_embed_cache_hits_total", tokens["platform"])
    async with mcp_session(server, tokens["bob"]) as s:
        await call(s, "memory_search", query=text)
    assert metric(server, "engram_embed_cache_hits_total", tokens["platform"]) == hits, "bob's query hit alice's cached embedding"
    async with mcp_session(server, tokens["alice"]) as s:
        await call(s, "memory_search", query=text)
    assert metric(server, "engram_embed_cache_hits_total", tokens["platform"]) == hits + 1


async def test_sizes_are_checked_before_embedding(server, tokens):
    async with mcp_session(server, tokens["alice"]) as s:
        misses = metric(server, "engram_embed_cache_misses_total", tokens["platform"])
        text, err = await call(s, "memory_remember", content="x" * (256 * 1024 + 1))
        assert err and "limit" in text
        text, err = await call(s, "memory_search", query="y" * 70_000)
        assert err and "limit" in text
        assert metric(server, "engram_embed_cache_misses_total", tokens["platform"]) == misses, "oversized text was embedded"


async def test_a_cursor_with_multibyte_characters_is_a_clear_error(server, tokens):
    async with mcp_session(server, tokens["alice"]) as s:
        text, err = await call(s, "memory_list", cursor="v1.created_at.日本語.0b8e1c34-0000-4000-8000-000000000000")
        assert err and "malformed cursor" in text and "panic" not in text


async def test_statement_and_pool_timeouts(tokens):
    db = new_database()
    token = psql(db, "SELECT engram.create_token(owner => 'alice', label => 'pytest')")
    with serving(db, "--tools", "all", "--pool-size", "1", "--pool-wait-ms", "300", "--statement-timeout-ms", "1500") as base:
        async with mcp_session(base, token) as s:
            await call(s, "memory_remember", content="warm the pool")
            with locked_memories(db, 4):
                started = time.monotonic()
                slow = asyncio.create_task(call(s, "memory_list"))
                await asyncio.sleep(0.3)
                # the one connection is taken: a new call waits 300 ms, then
                # gets a 503 that says to retry instead of hanging
                t = time.monotonic()
                r = await asyncio.to_thread(httpx.get, base + "/v1/memories", timeout=10,
                                            headers={"Authorization": f"Bearer {token}"})
                assert r.status_code == 503 and "busy" in r.text and "retry" in r.text, r.text
                assert r.headers["retry-after"]
                assert time.monotonic() - t < 1.5
                # an MCP session's next call is a tool error that says so, not an HTTP error
                text, err = await call(s, "memory_search", query="pool")
                assert err and "retry" in text, text
                text, err = await slow
                assert err and "timeout" in text, text
                assert time.monotonic() - started < 3.5, "the statement timeout did not end the blocked call"
            r, err = await call(s, "memory_list")
            assert not err and len(r["memories"]) == 1


async def test_remaining_arguments_and_headers(server, tokens, database):
    hdrs = {"X-User-Id": "kim", "X-Conversation-Session-Id": "conv-42"}
    async with mcp_session(server, tokens["platform"], **hdrs) as s:
        r, err = await call(s, "memory_remember", content="Kim's visa expires next spring", ttl_days=2,
                            importance=0.9, metadata={"source": "chat", "n": 3}, kind="episodic")
        assert not err and r["status"] == "created"
        kim = r["id"]
    row = psql(database, f"""SELECT session_id, importance, metadata::text,
                                    round(extract(epoch FROM expires_at - created_at) / 86400)
                             FROM engram.memories WHERE id = '{kim}'""")
    assert row == 'conv-42|0.9|{"n": 3, "source": "chat"}|2', row
    # the audit row names the token and who it acted for
    audit = psql(database, f"SELECT token_label, act_as FROM engram.audit_log WHERE memory_id = '{kim}'")
    assert audit == "pytest|kim", audit
    agent = {"X-User-Id": "kim", "X-Internal-Type": "agent"}
    async with mcp_session(server, tokens["platform"], **agent) as s:
        r, _ = await call(s, "memory_internal_create", content="Kim prefers short answers")
        note = r["id"]
        r, err = await call(s, "memory_internal_update", id=note, content="Kim prefers short, direct answers",
                            reason="refined")
        assert not err and r == {"id": note, "revision": 2}
        # the internal tools reach only the agent scope
        text, err = await call(s, "memory_internal_update", id=kim, content="x")
        assert err and "not found" in text
    assert psql(database, f"SELECT content FROM engram.memories WHERE id = '{note}'") == "Kim prefers short, direct answers"


class _Embeddings(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/embeddings answering 384-dimension vectors."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [{"index": i, "embedding": [1.0] + [0.0] * 383} for i, _ in enumerate(texts)]
        out = json.dumps({"data": data, "model": body.get("model")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


async def test_health_reaches_the_embedding_service(database, tokens):
    port = free_port()
    service = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Embeddings)
    threading.Thread(target=service.serve_forever, daemon=True).start()
    with serving(database, "--embedder", "openai", "--embedder-url", f"http://127.0.0.1:{port}",
                 "--embedder-model", "test", "--health-interval-ms", "0") as base:
        assert httpx.get(base + "/health").json()["embedder"] == "ok"
        service.shutdown()
        service.server_close()
        h = httpx.get(base + "/health", timeout=60)
        assert h.status_code == 503 and h.json()["embedder"] != "ok", h.text
