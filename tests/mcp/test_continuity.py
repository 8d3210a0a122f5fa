"""Continuity over MCP (docs/CONTINUITY.md), with the real `mcp` SDK: an
agent that works in one session and resumes in another, captures embedded in
the background (and after a kill -9), the mode policy, and summaries written
by a real local chat-completions server."""

import asyncio
import json
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import call, mcp_session, new_database, psql, serving, start

pytestmark = pytest.mark.anyio


def backlog(database, owner):
    return int(psql(database, f"SELECT count(*) FROM engram.memories WHERE owner = '{owner}' "
                              "AND embedding IS NULL AND status = 'active'"))


def wait_for(predicate, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


async def test_an_agent_resumes_across_sessions(server, tokens, database):
    # session 1: works in a workspace, a deploy fails, it saves a state and leaves
    async with mcp_session(server, tokens["alice"], **{"X-Session-Id": "resume-1"}) as s:
        r, err = await call(s, "memory_workspace_create", name="billing-api", description="The billing API\nv2",
                            root_folder="/src/billing", key_files=["src/main.rs"])
        assert not err, r
        r, err = await call(s, "memory_capture", event_type="tool_invocation", workspace="billing-api",
                            tool_name="cargo test", success=True, tool_output="42 passed", duration_ms=5300)
        assert not err and r["status"] == "captured" and r["id"], r
        failed, _ = await call(s, "memory_capture", event_type="tool_invocation", workspace="billing-api",
                               tool_name="deploy", success=False, error="DATABASE_URL is not set")
        r, _ = await call(s, "memory_capture", event_type="file_write", workspace="billing-api",
                          file_path="deploy/prod.env", parent_event_id=failed["id"])
        assert r["status"] == "captured"
        r, err = await call(s, "memory_state_save", workspace="billing-api", name="before-deploy-fix",
                            active_task="deploy v2 to prod",
                            next_steps=["set DATABASE_URL in deploy/prod.env", "run the deploy again"])
        assert not err and r["state"]["name"] == "before-deploy-fix", r
        r, err = await call(s, "memory_summarize",
                            content="Tests pass; the prod deploy failed because DATABASE_URL is unset.")
        assert not err, r
        text, err = await call(s, "memory_state_save", workspace="billing-api", name="before-deploy-fix")
        assert err and "new name" in text

    # the events were stored without embeddings and are embedded in the background
    wait_for(lambda: backlog(database, "alice") == 0, "the embedding backlog to drain")

    # session 2: a new MCP session picks up where session 1 left off
    async with mcp_session(server, tokens["alice"], **{"X-Session-Id": "resume-2"}) as s:
        r, err = await call(s, "memory_workspace_load", name="billing-api")
        assert not err, r
        assert r["workspace"]["root_folder"] == "/src/billing"
        assert [x["name"] for x in r["states"]] == ["before-deploy-fix"]
        assert r["sessions"][0]["session_id"] == "resume-1"
        # the list and the load agree on what a state holds
        listed, err = await call(s, "memory_state_list", workspace="billing-api")
        loaded, _ = await call(s, "memory_state_load", workspace="billing-api", name="before-deploy-fix")
        assert not err and listed["states"][0]["next_steps"] == loaded["state"]["next_steps"], (listed, loaded)
        r, err = await call(s, "memory_context", workspace="billing-api", query_text="how do I deploy?")
        assert not err, r
        assert r["state"]["next_steps"][0] == "set DATABASE_URL in deploy/prod.env"
        assert "> - run the deploy again" in r["text"]
        failed_calls = [t for t in r["tool_events"] if t["success"] is False]
        assert [t["tool_name"] for t in failed_calls] == ["deploy"]
        assert "DATABASE_URL is not set" in r["text"]
        assert r["summary"]["content"].startswith("Tests pass; the prod deploy failed")
        assert len(r["text"]) <= 4000
        r, _ = await call(s, "memory_sessions", workspace="billing-api")
        assert [(x["session_id"], x["has_summary"]) for x in r["sessions"]] == [("resume-1", True)]
        # errors name the tool to use instead
        text, err = await call(s, "memory_workspace_load", name="nope")
        assert err and "memory_workspace_list" in text
    # bob sees none of it
    async with mcp_session(server, tokens["bob"]) as s:
        r, _ = await call(s, "memory_workspace_list")
        assert r["workspaces"] == []
        r, _ = await call(s, "memory_context", workspace=None, session_id="resume-1")
        assert r["state"] is None and r["tool_events"] == [] and r["summary"] is None


async def test_the_mode_policy_over_mcp(server, database, tokens):
    async with mcp_session(server, tokens["alice"], **{"X-Session-Id": "modes"}) as s:
        r, err = await call(s, "memory_capture", event_type="conversation", content="hi", mode="emulation")
        assert not err and r["status"] == "skipped" and "emulation" in r["reason"] and r["id"] is None
        r, _ = await call(s, "memory_capture", event_type="conversation", content="hi", mode="agent")
        assert r["status"] == "skipped"
        r, _ = await call(s, "memory_capture", event_type="file_write", file_path="a.txt", mode="agent")
        assert r["status"] == "captured"
        text, err = await call(s, "memory_capture", event_type="dream", content="x")
        assert err and "conversation, tool_invocation" in text
    # Without X-Session-Id the MCP session is the conversation (stored as a
    # digest of the session id, never the id itself) ...
    async with mcp_session(server, tokens["alice"]) as s:
        r, err = await call(s, "memory_capture", event_type="observation", content="no session named")
        assert not err and r["status"] == "captured", r
    stored = psql(database, "SELECT e.session_id FROM engram.events e JOIN engram.memories m "
                            "ON m.owner = e.owner AND m.id = e.memory_id WHERE m.content = 'no session named'")
    assert stored.startswith("mcp-") and len(stored) == 36, stored
    # ... but a platform acting for a user carries many users' conversations
    # on one connection, so it names the session.
    async with mcp_session(server, tokens["platform"], **{"X-User-Id": "alice"}) as s:
        text, err = await call(s, "memory_capture", event_type="observation", content="no session")
        assert err and "session_id is required" in text


async def test_captures_are_embedded_off_the_write_path(database, tokens):
    with serving(database, "--tools", "all", "--embed-batch-wait-ms", "1500") as base:
        async with mcp_session(base, tokens["bob"], **{"X-Session-Id": "bg"}) as s:
            ids = []
            for i in range(10):
                r, err = await call(s, "memory_capture", event_type="observation", content=f"observation number {i}")
                assert not err, r
                ids.append(r["id"])
            quoted = ",".join(f"'{i}'" for i in ids)
            # acknowledged before any embedding exists ...
            assert psql(database, f"SELECT count(*) FROM engram.memories WHERE id IN ({quoted}) "
                                  "AND embedding IS NULL") == "10"
            # ... and embedded in the background, in one batch
            wait_for(lambda: psql(database, f"SELECT count(*) FROM engram.memories WHERE id IN ({quoted}) "
                                            "AND embedding IS NOT NULL") == "10", "the background embedder")
            r, _ = await call(s, "memory_search", query="observation number 7", limit=3)
            assert "observation number 7" in [x["content"] for x in r["results"]]


@pytest.mark.parametrize("first_call", [("memory_context", {}), ("memory_search", {"query": "the crash"}),
                                        ("memory_list", {})], ids=lambda c: c[0])
async def test_a_backlog_left_by_kill_9_is_embedded_after_restart(database, tokens, first_call):
    # a server that would wait ten minutes before embedding: the backlog is
    # still there when it is killed
    proc, base = start(database, "--tools", "all", "--embed-batch-wait-ms", "600000")
    tool, args = first_call
    async with mcp_session(base, tokens["bob"], **{"X-Session-Id": f"crash-{tool}"}) as s:
        ids = []
        for i in range(5):
            r, err = await call(s, "memory_capture", event_type="observation",
                                content=f"before the crash {i} ({tool})")
            assert not err, r
            ids.append(r["id"])
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    quoted = ",".join(f"'{i}'" for i in ids)
    assert psql(database, f"SELECT count(*) FROM engram.memories WHERE id IN ({quoted}) AND embedding IS NULL") == "5"
    with serving(database, "--tools", "all") as base:
        async with mcp_session(base, tokens["bob"], **{"X-Session-Id": "after"}) as s:
            # the owner's first call after the restart, whatever the tool, drains what was left
            r, err = await call(s, tool, **args)
            assert not err, r
            wait_for(lambda: psql(database, f"SELECT count(*) FROM engram.memories WHERE id IN ({quoted}) "
                                            "AND embedding IS NOT NULL") == "5", "the backlog after restart")


class ChatServer:
    """A local OpenAI-compatible chat-completions endpoint: it records each
    request and answers with a summary built from the events it was sent."""

    def __init__(self):
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, self.headers.get("Authorization"), body))
                events = body["messages"][-1]["content"].splitlines()[1:]
                answer = f"Summary of {len(events)} events; the last was: {events[-1][2:]}"
                data = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": answer}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self):
        self.http.shutdown()


async def test_the_summarizer_writes_due_summaries():
    database = new_database()
    token = psql(database, "SELECT engram.create_token(owner => 'carol', label => 'pytest')")
    psql(database, f"ALTER DATABASE {database} SET engram.summary_every = 3")
    chat = ChatServer()
    try:
        with serving(database, "--tools", "all", "--summarizer-url", chat.url, "--summarizer-model", "tiny",
                     env_extra={"ENGRAM_SUMMARIZER_API_KEY": "sk-test"}) as base:
            async with mcp_session(base, token, **{"X-Session-Id": "sum-1"}) as s:
                results = []
                for step in ["read the spec", "wrote the parser", "the parser tests pass"]:
                    r, err = await call(s, "memory_capture", event_type="observation", content=step)
                    assert not err, r
                    results.append((r["summary_due"], r["summarizing"]))
                assert results == [(False, False), (False, False), (True, True)]
                wait_for(lambda: psql(database, "SELECT count(*) FROM engram.events "
                                                "WHERE event_type = 'summary'") == "1", "the summary")
                path, auth, body = chat.requests[0]
                assert path == "/v1/chat/completions" and auth == "Bearer sk-test" and body["model"] == "tiny"
                assert "> [observation] the parser tests pass" in body["messages"][-1]["content"]
                r, _ = await call(s, "memory_context", session_id="sum-1")
                assert r["summary"]["content"] == "Summary of 3 events; the last was: [observation] the parser tests pass"
                r, _ = await call(s, "memory_sessions")
                assert r["sessions"][0]["has_summary"] is True
            # one summary per due point: the next capture is not due again
            async with mcp_session(base, token, **{"X-Session-Id": "sum-1"}) as s:
                r, _ = await call(s, "memory_capture", event_type="observation", content="one more")
                assert r["summary_due"] is False
            await asyncio.sleep(0.5)
            assert len(chat.requests) == 1
    finally:
        chat.close()
