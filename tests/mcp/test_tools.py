"""Every tool through the Python mcp SDK over Streamable HTTP, with the local model."""

import json
import re

import httpx
import pytest

from conftest import INITIALIZE, JSON_HEADERS, call, mcp_session, psql, serving

pytestmark = pytest.mark.anyio

CORE = {"memory_remember", "memory_search", "memory_recall", "memory_update", "memory_forget", "memory_flag", "memory_reopen",
        "memory_list", "memory_consolidate", "memory_crystallize", "memory_entities", "memory_about"}
INTERNAL = {"memory_internal_create", "memory_internal_update", "memory_internal_search",
            "memory_internal_query", "memory_internal_search_by"}
SHARING = {"memory_grant", "memory_revoke_grant", "memory_publish", "memory_unpublish"}
SLOTS = {"memory_slot_set", "memory_slot_append", "memory_slot_get", "memory_slot_list", "memory_slot_delete"}
WORKSPACE = {"memory_workspace_create", "memory_workspace_list", "memory_workspace_load", "memory_workspace_update",
             "memory_workspace_archive", "memory_state_save", "memory_state_list", "memory_state_load",
             "memory_state_archive"}
EVENTS = {"memory_capture", "memory_context", "memory_summarize", "memory_sessions"}
BASIC = {"memory_remember", "memory_search", "memory_recall", "memory_update", "memory_forget", "memory_context"}


async def test_tools_are_listed_per_request_headers(server, tokens, database):
    with serving(database) as default:
        async with mcp_session(default, tokens["platform"]) as s:
            listed = (await s.list_tools()).tools
            tools = {t.name: t for t in listed}
            # a handful of tools, cheap to send on every agent turn
            assert set(tools) == BASIC
            size = len(json.dumps([t.model_dump(mode="json", exclude_none=True) for t in listed]))
            assert size < 10_000, size
            for t in tools.values():
                assert t.description and t.annotations is not None, t.name
                assert t.outputSchema is None, "output schemas are listed with --output-schemas"
            # the other groups are not callable either
            r = await s.call_tool("memory_list", {})
            assert r.isError and "--tools" in r.content[0].text
        async with mcp_session(default, tokens["platform"], **{"X-Internal-Type": "agent"}) as s:
            assert {t.name for t in (await s.list_tools()).tools} == (BASIC - EVENTS) | INTERNAL
    async with mcp_session(server, tokens["platform"]) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == CORE | SHARING | SLOTS | WORKSPACE | EVENTS
        # every property is a JSON Schema object (a bare `true` schema fails strict clients)
        for t in tools.values():
            for schema in (t.inputSchema, t.outputSchema):
                for name, prop in (schema or {}).get("properties", {}).items():
                    assert isinstance(prop, dict), (t.name, name, prop)
        assert tools["memory_search"].annotations.readOnlyHint is True
        assert tools["memory_forget"].annotations.destructiveHint is True
        assert "content" in tools["memory_remember"].inputSchema["properties"]
        assert tools["memory_remember"].inputSchema["properties"]["content"]["description"]
        assert tools["memory_search"].outputSchema is not None
    async with mcp_session(server, tokens["platform"], **{"X-Internal-Type": "agent"}) as s:
        assert {t.name for t in (await s.list_tools()).tools} == CORE | INTERNAL | SHARING


async def test_core_tools_end_to_end(server, tokens):
    async with mcp_session(server, tokens["alice"]) as s:
        r, err = await call(s, "memory_remember", content="Alice's favourite drink is green tea", tags=["drinks"])
        assert not err and r["status"] == "created"
        tea = r["id"]
        r, _ = await call(s, "memory_remember", content="Alice's favourite drink is green tea", tags=["drinks"])
        assert r == {"status": "duplicate", "id": tea, "conflicts": None}
        # a paraphrase conflicts at the default threshold with the local model
        r, _ = await call(s, "memory_remember", content="Green tea is the drink Alice likes best")
        assert r["status"] == "conflict" and r["id"] is None
        assert r["conflicts"][0]["id"] == tea
        r, _ = await call(s, "memory_remember", content="Green tea is the drink Alice likes best", force=True)
        assert r["status"] == "created"
        forced = r["id"]
        r, _ = await call(s, "memory_remember", content="The deploy failed with ERR-4521", kind="episodic")
        event = r["id"]

        r, _ = await call(s, "memory_search", query="what does alice like to drink?")
        assert r["results"][0]["id"] in (tea, forced)
        r, _ = await call(s, "memory_search", query="ERR-4521", limit=1)
        assert r["results"][0]["id"] == event

        r, _ = await call(s, "memory_recall", id=tea)
        assert r["memory"]["content"] == "Alice's favourite drink is green tea"
        assert r["memory"]["tags"] == ["drinks"] and r["memory"]["trust_score"] > 0

        r, _ = await call(s, "memory_update", id=tea, content="Alice's favourite drink is oolong tea", reason="changed")
        assert r == {"id": tea, "revision": 2}
        r, _ = await call(s, "memory_flag", id=forced, reason="duplicate wording")
        assert r["id"] == forced and r["trust_score"] < 0.5

        r, _ = await call(s, "memory_list", limit=2)
        assert len(r["memories"]) == 2 and r["next_cursor"]
        r2, _ = await call(s, "memory_list", limit=2, cursor=r["next_cursor"])
        assert {m["id"] for m in r2["memories"]}.isdisjoint({m["id"] for m in r["memories"]})

        r, _ = await call(s, "memory_consolidate", ids=[tea, forced], content="Alice drinks oolong tea")
        merged = r["id"]
        r, _ = await call(s, "memory_recall", id=tea)
        assert r["memory"]["status"] == "archived"
        r, _ = await call(s, "memory_crystallize", ids=[event], name="debug-deploys", content="Check ERR codes in the deploy log")
        skill = r["id"]
        text, err = await call(s, "memory_update", id=skill, content="edit")
        assert err and "read-only" in text
        r, _ = await call(s, "memory_forget", id=merged)
        assert r == {"id": merged, "forgotten": True}
        r, _ = await call(s, "memory_forget", id=skill, hard=True)
        assert r["forgotten"] is True


async def test_errors_say_how_to_recover(server, tokens):
    async with mcp_session(server, tokens["alice"]) as s:
        text, err = await call(s, "memory_recall", id="0b8e1c34-0000-4000-8000-000000000000")
        assert err and "not found" in text and "memory_search" in text
        text, err = await call(s, "memory_recall", id="not-a-uuid")
        assert err and "memory_search" in text
        text, err = await call(s, "memory_remember", content="   ")
        assert err and "empty" in text
        text, err = await call(s, "memory_remember", content="x", kind="poem")
        assert err and "semantic" in text
        text, err = await call(s, "memory_list", order_by="id; drop table")
        assert err and "order_by" in text
        text, err = await call(s, "memory_internal_search", query="x")
        assert err and "X-Internal-Type" in text
    async with mcp_session(server, tokens["platform"], **{"X-Internal-Type": "ghost", "X-Ghost-Type": "user"}) as s:
        text, err = await call(s, "memory_internal_search", query="x")
        assert err and "ghost_owner" in text


async def test_failed_calls_leave_the_connection_clean(database, tokens):
    """Each call pipelines BEGIN, role/owner binding, the call and COMMIT. With one
    pooled connection, a failed call must roll back and leave it usable, and a
    later success must be committed as that later caller, not the failed one."""
    with serving(database, "--pool-size", "1") as base:
        async with mcp_session(base, tokens["alice"]) as s:
            text, err = await call(s, "memory_recall", id="0b8e1c34-0000-4000-8000-000000000001")
            assert err and "not found" in text
            text, err = await call(s, "memory_update", id="0b8e1c34-0000-4000-8000-000000000001", content="x")
            assert err
        async with mcp_session(base, tokens["bob"]) as s:
            r, err = await call(s, "memory_remember", content="Bob parks on level 3 after the failed calls")
            assert not err and r["status"] == "created"
            bob = r["id"]
        assert psql(database, f"SELECT owner FROM engram.memories WHERE id = '{bob}'") == "bob"
        assert psql(database, "SELECT count(*) FROM engram.memories WHERE content LIKE '%failed calls%'") == "1"


async def test_owners_never_see_each_other(server, tokens):
    async with mcp_session(server, tokens["bob"]) as s:
        r, _ = await call(s, "memory_remember", content="Bob's locker code is 4411")
        bob = r["id"]
    async with mcp_session(server, tokens["alice"]) as s:
        r, _ = await call(s, "memory_search", query="locker code")
        assert all(h["id"] != bob for h in r["results"])
        text, err = await call(s, "memory_recall", id=bob)
        assert err and "not found" in text


async def test_ghost_isolation(server, tokens):
    alice_ghost = {"X-User-Id": "dave", "X-Internal-Type": "ghost", "X-Ghost-Type": "user", "X-Ghost-Owner": "alice"}
    carol_ghost = dict(alice_ghost, **{"X-Ghost-Owner": "carol"})
    async with mcp_session(server, tokens["platform"], **alice_ghost) as s:
        r, _ = await call(s, "memory_internal_create", content="Dave told alice's ghost he plays chess")
        assert r["status"] == "created"
        secret = r["id"]
        r, _ = await call(s, "memory_internal_query", query="what game does dave play?")
        assert r["results"][0]["id"] == secret and "chess" in r["context"]
    async with mcp_session(server, tokens["platform"], **{"X-User-Id": "dave"}) as s:
        r, _ = await call(s, "memory_remember", content="Dave likes chess openings")
        normal = r["id"]
    async with mcp_session(server, tokens["platform"], **carol_ghost) as s:
        # carol's ghost sees neither alice's ghost memories nor normal ones,
        # even when it filters by alice's scope tags
        for tags in (None, ["ghost_owner:user:alice"]):
            args = {"query": "chess"} if tags is None else {"query": "chess", "tags": tags}
            r, _ = await call(s, "memory_internal_search", **args)
            assert {h["id"] for h in r["results"]}.isdisjoint({secret, normal})
        r, _ = await call(s, "memory_internal_search_by")
        assert r["memories"] == []
        # a similar write in carol's scope is no conflict with alice's
        r, _ = await call(s, "memory_internal_create", content="Dave told alice's ghost he plays chess")
        assert r["status"] == "created"
    async with mcp_session(server, tokens["platform"], **{"X-User-Id": "dave"}) as s:
        r, _ = await call(s, "memory_search", query="chess")
        assert [h["id"] for h in r["results"]] == [normal], "core tools never see internal memories"


async def test_token_rules(server, tokens):
    post = lambda **h: httpx.post(server + "/mcp", json=INITIALIZE, headers={**JSON_HEADERS, **h}, timeout=10)
    assert post().status_code == 401
    assert post(Authorization="Bearer eg_unknown").status_code == 401
    assert post(Authorization=f"Bearer {tokens['alice']}", **{"X-User-Id": "bob"}).status_code == 403
    assert post(Authorization=f"Bearer {tokens['alice']}", **{"X-Internal-Type": "agent"}).status_code == 403
    assert post(Authorization=f"Bearer {tokens['platform']}", **{"X-User-Id": "bob"}).status_code == 200
    # the platform token acting for bob sees bob's memories
    async with mcp_session(server, tokens["platform"], **{"X-User-Id": "bob"}) as s:
        r, _ = await call(s, "memory_search", query="locker code")
        assert any("4411" in h["content"] for h in r["results"])


async def test_stateless_json_mode(stateless_server, tokens):
    hdrs = {**JSON_HEADERS, "Authorization": f"Bearer {tokens['alice']}", "MCP-Protocol-Version": "2025-06-18"}
    call_body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                 "params": {"name": "memory_search", "arguments": {"query": "green tea"}}}
    r = httpx.post(stateless_server + "/mcp", json=call_body, headers=hdrs, timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert "results" in r.json()["result"]["structuredContent"]


async def test_health_and_metrics(server, tokens):
    h = httpx.get(server + "/health").json()
    assert h == {"status": "ok", "database": "ok", "embedder": "ok", "model": "local:all-MiniLM-L6-v2-int8",
                 "embedding_model": "local:all-MiniLM-L6-v2"}
    r = httpx.get(server + "/metrics", headers={"Authorization": f"Bearer {tokens['platform']}"})
    assert r.status_code == 200, r.text
    m = r.text
    assert 'engram_tool_calls_total{tool="memory_remember"}' in m
    assert "engram_embed_cache_hits_total" in m and "engram_db_pool_connections" in m
    # every owner's call counts: not without a token, not for a user token
    r = httpx.get(server + "/metrics")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", r.text
    assert "Authorization: Bearer" in r.json()["error"] and "engram_tool_calls_total" not in r.text
    r = httpx.get(server + "/metrics", headers={"Authorization": f"Bearer {tokens['alice']}"})
    assert r.status_code == 403 and "platform token" in r.json()["error"], r.text
    assert httpx.get(server + "/metrics", headers={"Authorization": "Bearer eg_wrong"}).status_code == 401


async def test_metrics_open_serves_metrics_without_a_token(database, tokens):
    with serving(database, env_extra={"ENGRAM_METRICS_OPEN": "true"}) as base:
        r = httpx.get(base + "/metrics")
        assert r.status_code == 200 and "engram_db_pool_connections" in r.text, r.text


async def test_session_delete_ends_the_session(server, tokens):
    """DELETE answers 204 (the SDK treats rmcp's 202 as a failure) and the session is gone after it."""
    hdrs = {**JSON_HEADERS, "Authorization": f"Bearer {tokens['alice']}"}
    with httpx.Client(base_url=server, headers=hdrs, timeout=10) as c:
        sid = c.post("/mcp", json=INITIALIZE).headers["mcp-session-id"]
        s = {"mcp-session-id": sid, "MCP-Protocol-Version": "2025-06-18"}
        assert c.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=s).status_code == 202
        assert c.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=s).status_code == 200
        assert c.delete("/mcp", headers=s).status_code == 204
        assert c.post("/mcp", json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=s).status_code == 404


async def test_slots(server, tokens):
    async with mcp_session(server, tokens["alice"]) as s:
        r, err = await call(s, "memory_slot_set", label="persona", content="terse, direct", pinned=True)
        assert not err and r["slot"]["workspace"] is None and r["slot"]["pinned"] is True
        await call(s, "memory_slot_set", label="persona", content="explains every step", workspace="teaching")
        r, _ = await call(s, "memory_slot_get", label="persona", workspace="teaching")
        assert r["slot"]["content"] == "explains every step"
        r, _ = await call(s, "memory_slot_get", label="persona", workspace="elsewhere")
        assert r["slot"]["content"] == "terse, direct"
        await call(s, "memory_slot_set", label="todo", content="one", size_limit=10)
        r, _ = await call(s, "memory_slot_append", label="todo", content="two")
        assert r["slot"]["content"] == "one\ntwo" and r["slot"]["chars"] == 7
        text, err = await call(s, "memory_slot_append", label="todo", content="three")
        assert err and "limit is 10" in text
        r, _ = await call(s, "memory_slot_list", workspace="teaching")
        assert [(x["label"], x["workspace"]) for x in r["slots"]] == [("persona", "teaching"), ("todo", None)]
        r, _ = await call(s, "memory_slot_delete", label="persona", workspace="teaching")
        assert r == {"label": "persona", "deleted": True}
        text, err = await call(s, "memory_slot_get", label="nothing")
        assert err and "memory_slot_list" in text
    async with mcp_session(server, tokens["bob"]) as s:
        r, _ = await call(s, "memory_slot_list")
        assert r["slots"] == []


async def test_search_results_are_lean_and_consistent(server, tokens):
    """What a new user found on 0.14.0: hits without metadata, no similarity
    floor, two timestamp formats, float noise, and raw serde text for an
    argument of the wrong type."""
    async with mcp_session(server, tokens["bob"]) as s:
        r, err = await call(s, "memory_remember", content="Bob's flight to Lyon leaves at 07:10 from gate B12",
                            metadata={"source": "email", "priority": 2})
        assert not err, r
        await call(s, "memory_remember", content="Bob prefers aisle seats", metadata={"source": "chat", "priority": 1})
        r = await s.call_tool("memory_search", {"query": "when does Bob fly?", "limit": 5})
        hit = r.structuredContent["results"][0]
        assert hit["metadata"] == {"source": "email", "priority": 2}, hit
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?[+-]\d\d:\d\d$", hit["occurred_at"]), hit
        # scores as an agent reads them, in the text block the model sees too
        for results in (r.structuredContent["results"], json.loads(r.content[0].text)["results"]):
            for h in results:
                for k in ("score", "similarity"):
                    assert round(h[k], 4) == h[k], (k, h[k])
        # a floor drops what is unrelated; a filter what does not match
        r, _ = await call(s, "memory_search", query="the capital of Peru", min_similarity=0.5)
        assert r["results"] == [], r
        r, _ = await call(s, "memory_search", query="Bob", filter={"priority": {"$gte": 2}})
        assert [h["metadata"]["source"] for h in r["results"]] == ["email"], r
        # an argument of the wrong type is named, with what to send
        text, err = await call(s, "memory_search", query="Bob", limit="5")
        assert err and "limit must be a whole number" in text and "limit: 5" in text, text
