"""Hardening (docs/SECURITY.md), the adapter's side: /api fails closed on
headers that do not parse, the Host/Origin guard before everything (no token
oracle), a cheap /health, no redirects or URL credentials towards the
summarizer, no handler that hangs on a row it cannot read, read timeouts and
a connection cap, status codes and retry hints, JSON-RPC errors for bodies
that are not JSON-RPC, messages in the tools' words with capped echoes,
length limits, and (test_continuity) the capture backlog drained by any tool
call after a kill -9."""

import asyncio
import http.server
import json
import select
import socket
import threading
import time

import httpx
import pytest

from conftest import HOST, INITIALIZE, JSON_HEADERS, PORT, call, free_port, mcp_session, new_database, psql, serving, start
from conftest import locked_memories
from test_security import _Embeddings as Embeddings

pytestmark = pytest.mark.anyio


def bearer(token, **extra):
    return {"Authorization": f"Bearer {token}", **extra}


# ---- finding 2: /api fails closed ---------------------------------------------


async def test_api_refuses_requests_whose_internal_headers_do_not_parse(server, tokens, database):
    platform = tokens["platform"]
    async with mcp_session(server, platform, **{"X-User-Id": "quinn"}) as s:
        r, err = await call(s, "memory_remember", content="Quinn's private diary: the safe code is 4410")
        assert not err, r
        diary = r["id"]
    ghost = [("Authorization", f"Bearer {platform}"), ("X-User-Id", "quinn"), ("X-Internal-Type", "ghost"),
             ("X-Ghost-Type", "user")]
    variants = {
        "owner missing": ghost,
        "owner twice": ghost + [("X-Ghost-Owner", "rex"), ("X-Ghost-Owner", "sam")],
        "owner empty": ghost + [("X-Ghost-Owner", "")],
    }
    with httpx.Client(base_url=server, timeout=10) as c:
        for name, headers in variants.items():
            for method, path, body in [("GET", "/api/memories", None), ("GET", "/api/memories?q=safe", None),
                                       ("GET", f"/api/memories/{diary}", None),
                                       ("DELETE", f"/api/memories/{diary}", None),
                                       ("POST", f"/api/memories/{diary}/flag", {"reason": "x"})]:
                r = c.request(method, path, headers=headers, json=body)
                assert r.status_code == 400, (name, method, path, r.status_code, r.text)
                assert "4410" not in r.text and "ghost" in r.json()["error"].lower(), r.text
    row = psql(database, f"SELECT status, flag_count FROM engram.memories WHERE id = '{diary}'")
    assert row == "active|0", "nothing was forgotten or flagged"


# ---- finding 7: the guard comes first, on every route ----------------------------


async def test_a_bad_host_gets_the_same_403_on_every_route_whatever_the_token(server, tokens):
    evil = {"Host": "evil.example"}
    with httpx.Client(base_url=server, timeout=10) as c:
        for path in ["/health", "/metrics", "/ui", "/ui/", "/api/memories"]:
            answers = {c.get(path, headers={**evil, **auth}).status_code
                       for auth in [{}, bearer("eg_wrong"), bearer(tokens["alice"])]}
            assert answers == {403}, (path, answers)
        bodies = set()
        for token in ["eg_wrong", tokens["alice"]]:
            r = c.post("/mcp", json=INITIALIZE, headers={**JSON_HEADERS, **evil, **bearer(token)})
            r2 = c.get("/api/memories", headers={**evil, **bearer(token)})
            assert r.status_code == 403 and r2.status_code == 403
            bodies.add((r.text, r2.text, r.headers.get("www-authenticate")))
        assert len(bodies) == 1, f"a bad and a good token are told apart: {bodies}"
        # an evil Origin, the same
        for path in ["/health", "/metrics"]:
            assert c.get(path, headers={"Origin": "http://evil.example"}).status_code == 403
        assert c.get("/health").status_code == 200


class CountingEmbeddings(Embeddings):
    """test_security's embeddings endpoint, counting its requests."""
    count = 0

    def do_POST(self):
        type(self).count += 1
        super().do_POST()


async def test_health_does_not_run_an_inference_per_call(database, tokens):
    port = free_port()
    service = http.server.ThreadingHTTPServer(("127.0.0.1", port), CountingEmbeddings)
    threading.Thread(target=service.serve_forever, daemon=True).start()
    try:
        with serving(database, "--embedder", "openai", "--embedder-url", f"http://127.0.0.1:{port}",
                     "--embedder-model", "test", "--health-interval-ms", "60000") as base:
            before = CountingEmbeddings.count

            async def one(c):
                return (await c.get(base + "/health")).status_code

            async with httpx.AsyncClient(timeout=30) as c:
                codes = await asyncio.gather(*[one(c) for _ in range(60)])
            assert set(codes) == {200}
            assert CountingEmbeddings.count - before <= 1, "60 health checks ran an inference each"
    finally:
        service.shutdown()
        service.server_close()


# ---- the summarizer ---------------------------------------------------------------


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every POST with `answer` (a status and headers) and records it."""
    seen = []
    answer = (200, {})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append((self.path, self.headers.get("Authorization"), body))
        status, headers = type(self).answer
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def http_server(handler):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


async def test_the_summarizer_follows_no_redirect_and_takes_no_url_credentials():
    database = new_database()
    token = psql(database, "SELECT engram.create_token(owner => 'uma', label => 'pytest')")
    psql(database, f"ALTER DATABASE {database} SET engram.summary_every = 2")
    Target = type("Target", (Recorder,), {"seen": [], "answer": (200, {})})
    target, target_url = http_server(Target)
    Redirect = type("Redirect", (Recorder,), {"seen": [], "answer": (307, {"Location": target_url + "/steal"})})
    redirect, redirect_url = http_server(Redirect)
    try:
        # credentials in the URL: refused at start, without echoing them
        with pytest.raises(RuntimeError) as e:
            start(database, "--summarizer-url", f"http://user:s3cret@{redirect_url[7:]}/v1")
        assert "--summarizer-api-key" in str(e.value) and "s3cret" not in str(e.value)
        with serving(database, "--tools", "all", "--summarizer-url", redirect_url + "/v1",
                     env_extra={"ENGRAM_SUMMARIZER_API_KEY": "sk-private"}) as base:
            async with mcp_session(base, token, **{"X-Session-Id": "redir"}) as s:
                for step in ["opened the ticket", "fixed the bug"]:
                    r, err = await call(s, "memory_capture", event_type="observation", content=step)
                    assert not err, r
                deadline = time.time() + 20
                while not Redirect.seen and time.time() < deadline:
                    await asyncio.sleep(0.1)
                assert Redirect.seen, "the summarizer was never asked"
                await asyncio.sleep(1)
        assert Target.seen == [], "a 307 re-sent the session's events (and the key) elsewhere"
    finally:
        target.shutdown()
        redirect.shutdown()


# ---- a row the adapter cannot read ---------------------------------------------


def corrupt(database, memory_id, assignment):
    """Writes a value engram's checks would refuse straight into a row, as a superuser with triggers off;
    returns whether Postgres took it."""
    try:
        psql(database, f"SET session_replication_role = replica; "
                       f"UPDATE engram.memories SET {assignment} WHERE id = '{memory_id}'")
        return True
    except Exception:
        return False


async def test_a_row_the_adapter_cannot_read_gets_an_error_answer_not_a_hang(tokens):
    db = new_database()
    token = psql(db, "SELECT engram.create_token(owner => 'vic', label => 'pytest')")
    with serving(db, "--tools", "all") as base:
        async with mcp_session(base, token) as s:
            ids = []
            for text in ["Vic's first note about the orchard", "Vic's second note about the orchard"]:
                r, err = await call(s, "memory_remember", content=text)
                assert not err, r
                ids.append(r["id"])
            two_d = corrupt(db, ids[0], "tags = '{{a,b},{c,d}}'")
            huge = corrupt(db, ids[1], "metadata = '{\"n\": 1e400}'")
            assert two_d or huge, "neither bad value could be written"
            # every call is answered (before: a panic, and a client waiting until its session expired)
            text, err = await asyncio.wait_for(call(s, "memory_list"), 20)
            if two_d:
                assert err, text
            for bad in [i for i, ok in zip(ids, [two_d, huge]) if ok]:
                text, err = await asyncio.wait_for(call(s, "memory_recall", id=bad), 20)
                assert err, text
            # the session still works
            r, err = await asyncio.wait_for(call(s, "memory_remember", content="Vic waters the orchard on Sundays"), 20)
            assert not err, r
        with httpx.Client(base_url=base, timeout=20, headers=bearer(token)) as c:
            for bad in ids:
                # answered, in JSON (before: a panic that dropped the connection)
                r = c.get(f"/api/memories/{bad}")
                assert r.headers["content-type"].startswith("application/json"), (r.status_code, r.text)
                assert r.status_code == 200 or "error" in r.json(), r.text
            assert c.get("/health").status_code == 200


# ---- read timeouts and the connection cap ---------------------------------------------


def open_partial(base, request):
    host, port = base[len("http://"):].split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(request)
    s.setblocking(False)
    return s


def closed_within(socks, seconds):
    """The sockets the server closed (EOF, maybe after an error answer) within `seconds`."""
    done, deadline = set(), time.time() + seconds
    while len(done) < len(socks) and time.time() < deadline:
        waiting = [s for s in socks if s not in done]
        readable, _, _ = select.select(waiting, [], [], 0.2)
        for s in readable:
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        done.add(s)
                        break
            except BlockingIOError:
                pass
            except OSError:
                done.add(s)
    return done


async def test_slow_clients_are_cut_off_and_cannot_take_every_connection(database, tokens):
    with serving(database, "--max-connections", "50", "--header-timeout-ms", "1500",
                 "--body-timeout-ms", "1500", "--body-deadline-ms", "4000") as base:
        partial = [open_partial(base, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                   for _ in range(300)]
        try:
            # 300 connections that never finish their headers, against a cap of 50: /health still answers
            t = time.monotonic()
            r = await asyncio.to_thread(httpx.get, base + "/health", timeout=30)
            assert r.status_code == 200
            assert time.monotonic() - t < 15
            # every one of them is closed: 6 rounds of 50, 1.5 s each
            closed = closed_within(partial, 30)
            assert len(closed) == len(partial), f"{len(partial) - len(closed)} slow connections are still open"
        finally:
            for s in partial:
                s.close()
        # a body that stalls: answered (408) and closed, not held open
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {tokens['alice']}\r\n"
                f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                f"Content-Length: {len(body) + 100}\r\n\r\n").encode()
        s = open_partial(base, head + body)
        try:
            s.setblocking(True)
            s.settimeout(15)
            answer = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        finally:
            s.close()
        # a body that trickles a byte before each gap timeout: cut off at its total deadline
        s = open_partial(base, head)
        try:
            s.setblocking(True)
            s.settimeout(1)
            t, answer = time.monotonic(), b""
            while time.monotonic() - t < 20 and not answer:
                try:
                    s.sendall(b" ")
                    answer = s.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    break
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert time.monotonic() - t < 10, "the trickled body outlived its deadline"
        finally:
            s.close()
        assert httpx.get(base + "/health", timeout=10).status_code == 200


# ---- status codes and hints ---------------------------------------------------------


async def test_rest_status_codes_follow_the_sqlstate(server, tokens):
    async with mcp_session(server, tokens["alice"]) as s:
        r, _ = await call(s, "memory_remember", content="Alice's archived note on the old printer")
        old = r["id"]
        r, err = await call(s, "memory_forget", id=old)
        assert not err and r["forgotten"] is True
    with httpx.Client(base_url=server, timeout=10, headers=bearer(tokens["alice"])) as c:
        r = c.post(f"/api/memories/{old}/flag", json={"reason": "outdated"})
        assert 400 <= r.status_code < 500, (r.status_code, r.text)
        r = c.post(f"/api/memories/{old}/flag", json={"reason": "x" * 1001})
        assert r.status_code == 400 and "reason" in r.json()["error"], r.text
        r = c.get("/api/memories/" + "z" * 5000)
        assert r.status_code == 400 and len(r.text) < 400, r.text


async def test_a_statement_timeout_says_retry_shortly(tokens):
    db = new_database()
    token = psql(db, "SELECT engram.create_token(owner => 'wes', label => 'pytest')")
    with serving(db, "--tools", "all", "--statement-timeout-ms", "1000") as base:
        async with mcp_session(base, token) as s:
            r, err = await call(s, "memory_remember", content="Wes keeps the spare keys in the shed")
            assert not err
            with locked_memories(db, 3):
                text, err = await call(s, "memory_list")
            assert err and "statement timeout" in text and "retry shortly" in text, text
            with locked_memories(db, 3):
                r = await asyncio.to_thread(httpx.get, base + "/api/memories", headers=bearer(token), timeout=10)
            assert r.status_code == 503 and r.headers.get("retry-after"), (r.status_code, r.text)
            assert "retry shortly" in r.json()["error"]


# ---- JSON-RPC errors for what is not JSON-RPC ------------------------------------------


def test_bodies_that_are_not_json_rpc_get_json_rpc_errors(server, tokens):
    hdrs = {**JSON_HEADERS, **bearer(tokens["alice"])}
    cases = [
        (b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ", -32700),
        (b"\xff\xfe\x00{}", -32700),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "\\ud800"}}', -32700),
        (json.dumps([INITIALIZE]).encode(), -32600),
        (b"42", -32600),
        (b'{"hello": "world"}', -32600),
        (b"[" * 5000 + b"]" * 5000, -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": ' + b'{"a": ' * 300 + b"1" + b"}" * 301, -32600),
    ]
    with httpx.Client(base_url=server, timeout=10) as c:
        for body, code in cases:
            r = c.post("/mcp", content=body, headers=hdrs)
            assert r.status_code == 400, (body[:40], r.status_code, r.text[:200])
            assert r.headers["content-type"].startswith("application/json"), r.headers
            answer = r.json()
            assert answer["jsonrpc"] == "2.0" and answer["error"]["code"] == code, (body[:40], answer)
        # a real request still works
        r = c.post("/mcp", json=INITIALIZE, headers=hdrs)
        assert r.status_code == 200


# ---- messages, limits, arguments -----------------------------------------------------------


async def test_messages_use_the_tools_words_and_cap_echoes(server, tokens):
    async with mcp_session(server, tokens["alice"], **{"X-Session-Id": "words"}) as s:
        huge = "9" * 3_000_000
        text, err = await call(s, "memory_recall", id=huge)
        assert err and len(text) < 400 and "memory id" in text, len(text)
        text, err = await call(s, "memory_search", query="   ")
        assert err and "query is empty" in text, text
        text, err = await call(s, "memory_search", query="")
        assert err and "query is empty" in text, text
        text, err = await call(s, "memory_remember", content="Alice's fake metadata", metadata=[1, 2])
        assert err and "JSON object" in text and "::jsonb" not in text and "=>" not in text, text
        text, err = await call(s, "memory_remember", content="Alice lives forever", ttl_days=1e308)
        assert err and "ttl_days" in text and "interval" not in text, text
        # a day over the database's limit is the adapter's own refusal too
        text, err = await call(s, "memory_remember", content="Alice lives a century", ttl_days=36_501)
        assert err and "ttl_days" in text and "36500" in text and "interval" not in text, text
        r, err = await call(s, "memory_remember", content="Alice plants a century oak", ttl_days=36_500)
        assert not err, r
        text, err = await call(s, "memory_remember", content="Alice's note\x00with a NUL")
        assert err and "NUL" in text and "0x00" not in text, text
        r, _ = await call(s, "memory_remember", content="Alice's note on the cursor test")
        note = r["id"]
        text, err = await call(s, "memory_publish", id=note)
        assert err and "exactly one of space or group" in text and "group_id" not in text, text
        text, err = await call(s, "memory_publish", id=note, space="a", group="b")
        assert err and "exactly one of space or group" in text, text
        forged = "v1.created_at." + b"not a time".hex() + ".3f2504e0-4f89-41d3-9a0c-0305e82c3301"
        for cursor in [forged, "v1.created_at.zz.x", "garbage", "v1.importance.3132.3f2504e0-4f89-41d3-9a0c-0305e82c3301"]:
            text, err = await call(s, "memory_list", cursor=cursor)
            assert err and text.startswith("invalid cursor") and "22007" not in text and "after" not in text, text
        # lengths
        text, err = await call(s, "memory_capture", event_type="observation", content="x", session_id="s" * 300)
        assert err and "session_id" in text and "256" in text, text
        text, err = await call(s, "memory_flag", id=note, reason="r" * 1001)
        assert err and "reason" in text and "1000" in text, text
        text, err = await call(s, "memory_forget", id=note, reason="r" * 1001)
        assert err and "reason" in text, text
        text, err = await call(s, "memory_grant", accessor="a" * 300, trust=1)
        assert err and "accessor" in text and len(text) < 400, text
        # a conflict answer carries the start of each memory, not up to 5 x 256 KiB
        body = "the nightly backup runs from the garage server, " * 4000
        r, err = await call(s, "memory_remember", content="Alice's runbook: " + body)
        assert not err and r["status"] == "created", r
        r, err = await call(s, "memory_remember", content="Alice's runbook, revised: " + body)
        assert not err and r["status"] == "conflict", r
        assert all(len(c["content"]) <= 1001 for c in r["conflicts"]), [len(c["content"]) for c in r["conflicts"]]
    hdrs = {**JSON_HEADERS, **bearer(tokens["alice"])}
    for name in ["X-Session-Id", "X-Conversation-Session-Id"]:
        r = httpx.post(server + "/mcp", json=INITIALIZE, headers={**hdrs, name: "s" * 300}, timeout=10)
        assert r.status_code == 400 and "256" in r.text, r.text
    r = httpx.post(server + "/mcp", json=INITIALIZE, timeout=10,
                   headers={**JSON_HEADERS, **bearer(tokens["platform"]), "X-User-Id": "u" * 300})
    assert r.status_code == 400 and "256" in r.text, r.text
    # a long accepted id is echoed capped
    r = httpx.get(server + "/api/memories/" + "q" * 3000, headers=bearer(tokens["alice"]), timeout=10)
    assert r.status_code == 400 and len(r.text) < 400


# ---- the embedding model on record ----------------------------------------------


def test_engram_mcp_refuses_another_model_than_the_one_on_record():
    database = new_database()
    psql(database, "SELECT engram.configure(embedding_model => 'openai:text-embedding-3-small')")
    with pytest.raises(RuntimeError) as e:
        start(database)
    message = str(e.value)
    assert "openai:text-embedding-3-small" in message and "local:all-MiniLM-L6-v2" in message, message
    assert "--reembed" in message, message
    # Recorded as the model it embeds with, it serves.
    psql(database, "SELECT engram.configure(embedding_model => 'local:all-MiniLM-L6-v2')")
    with serving(database) as base:
        assert httpx.get(base + "/health", timeout=10).status_code == 200


# ---- database errors that say what to fix -----------------------------------------


@pytest.mark.parametrize("url, cause, hint", [
    (f"host={HOST} port={free_port()} user=engram_mcp dbname=postgres", "No such file or directory",
     "is PostgreSQL running"),
    (f"host=127.0.0.1 port={free_port()} user=engram_mcp dbname=postgres", "Connection refused",
     "is PostgreSQL running"),
    (f"host={HOST} port={PORT} user=engram_mcp dbname=no_such_db", 'database "no_such_db" does not exist',
     "create the database"),
    (f"host={HOST} port={PORT} user=no_such_role dbname=postgres", 'role "no_such_role" does not exist',
     "create the login role"),
])
def test_a_database_that_cannot_be_used_is_named_with_its_cause(url, cause, hint):
    with pytest.raises(RuntimeError) as e:
        start("postgres", env_extra={"ENGRAM_DATABASE_URL": url})
    message = str(e.value)
    assert cause in message and hint in message, message
