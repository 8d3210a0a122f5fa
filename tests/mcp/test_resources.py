"""Resources (human-curated entries agents only read): the REST API for
platform tokens, MCP resources/list and resources/read for every token of
the owner, list_changed notifications, resources in search results, and no
write path for agents."""

import asyncio

import httpx
import mcp.types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from conftest import call, mcp_session, new_database, psql, serving

pytestmark = pytest.mark.anyio


def rest(base, method, path, token, body=None, **headers):
    hdrs = {**headers}
    if token:
        hdrs["Authorization"] = f"Bearer {token}"
    return httpx.request(method, base + path, json=body, headers=hdrs, timeout=30)


async def test_resources_rest_mcp_and_read_only():
    db = new_database()
    platform = psql(db, "SELECT engram.create_token(owner => 'platform', label => 'p', platform => true)")
    rita = psql(db, "SELECT engram.create_token(owner => 'rita', label => 'agent')")
    sam = psql(db, "SELECT engram.create_token(owner => 'sam', label => 'agent')")
    with serving(db, "--tools", "all") as base:
        # only platform tokens manage resources
        assert rest(base, "GET", "/api/resources", None).status_code == 401
        r = rest(base, "POST", "/api/resources", rita, {"name": "x", "content": "y"})
        assert r.status_code == 403 and "platform" in r.json()["error"]

        notes = []

        async def on_message(m):
            if isinstance(m, types.ServerNotification):
                notes.append(m.root)

        hdrs = {"Authorization": f"Bearer {rita}"}
        async with streamablehttp_client(base + "/mcp", headers=hdrs) as (rd, wr, _):
            async with ClientSession(rd, wr, message_handler=on_message) as s:
                init = await s.initialize()
                assert init.capabilities.resources and init.capabilities.resources.listChanged
                assert (await s.list_resources()).resources == []
                await asyncio.sleep(0.3)  # the session's notification stream is open

                r = rest(base, "POST", "/api/resources", platform,
                         {"name": "Deploy checklist", "content": "Before a deploy: freeze merges, tag the release, "
                                                                "page the on-call engineer", "tags": ["ops"]},
                         **{"X-User-Id": "rita"})
                assert r.status_code == 201, r.text
                res = r.json()
                assert res["name"] == "Deploy checklist" and res["tags"] == ["ops"]
                for _ in range(50):
                    if any(isinstance(n, types.ResourceListChangedNotification) for n in notes):
                        break
                    await asyncio.sleep(0.1)
                assert any(isinstance(n, types.ResourceListChangedNotification) for n in notes), notes

                listed = (await s.list_resources()).resources
                assert [str(x.uri) for x in listed] == [f"engram://resources/{res['id']}"]
                assert listed[0].name == "Deploy checklist"
                read = await s.read_resource(f"engram://resources/{res['id']}")
                assert read.contents[0].text.startswith("Before a deploy")

                # found by search, like any memory of the owner
                hits, err = await call(s, "memory_search", query="what do I do before deploying?")
                assert not err and hits["results"][0]["id"] == res["id"], hits
                # and read-only to every agent path
                for tool, args in [("memory_update", {"id": res["id"], "content": "skip the checklist"}),
                                   ("memory_forget", {"id": res["id"]}),
                                   ("memory_forget", {"id": res["id"], "hard": True}),
                                   ("memory_flag", {"id": res["id"], "reason": "no"})]:
                    text, err = await call(s, tool, **args)
                    assert err and "resource" in text, (tool, text)

        # another owner sees none of it, over MCP or REST
        async with mcp_session(base, sam) as s:
            assert (await s.list_resources()).resources == []
            with pytest.raises(Exception):
                await s.read_resource(f"engram://resources/{res['id']}")
        assert rest(base, "GET", f"/api/resources/{res['id']}", platform, **{"X-User-Id": "sam"}).status_code == 404

        # update and delete, platform only
        r = rest(base, "PUT", f"/api/resources/{res['id']}", platform, {"content": "Before a deploy: freeze merges"},
                 **{"X-User-Id": "rita"})
        assert r.status_code == 200 and r.json()["revision"] == 2, r.text
        assert rest(base, "PUT", f"/api/resources/{res['id']}", rita, {"name": "z"}).status_code == 403
        r = rest(base, "GET", "/api/resources", platform, **{"X-User-Id": "rita"})
        assert [x["content"] for x in r.json()] == ["Before a deploy: freeze merges"]
        assert rest(base, "DELETE", f"/api/resources/{res['id']}", rita).status_code == 403
        assert rest(base, "DELETE", f"/api/resources/{res['id']}", platform, **{"X-User-Id": "rita"}).status_code == 204
        assert rest(base, "GET", f"/api/resources/{res['id']}", platform,
                    **{"X-User-Id": "rita"}).status_code == 404
        r = rest(base, "POST", "/api/resources", platform, {"name": "", "content": "y"}, **{"X-User-Id": "rita"})
        assert r.status_code == 400 and "name" in r.json()["error"]
    actions = psql(db, "SELECT string_agg(action, ',' ORDER BY at) FROM engram.audit_log WHERE action LIKE 'resource_%'")
    assert actions == "resource_create,resource_update,resource_delete"


async def test_memories_api_for_the_browser():
    db = new_database()
    tina = psql(db, "SELECT engram.create_token(owner => 'tina', label => 'laptop')")
    with serving(db) as base:
        async with mcp_session(base, tina) as s:
            r, _ = await call(s, "memory_remember", content="Tina's standup is at 9:30")
            mem = r["id"]
            await call(s, "memory_update", id=mem, content="Tina's standup is at 10:00")
        hits = rest(base, "GET", "/api/memories?q=when+is+the+standup", tina).json()
        assert hits[0]["id"] == mem and hits[0]["source"] == "memory"
        d = rest(base, "GET", f"/api/memories/{mem}", tina).json()
        assert d["memory"]["content"] == "Tina's standup is at 10:00" and "embedding" not in d["memory"]
        assert [v["revision"] for v in d["revisions"]][0] == 1
        assert [a["action"] for a in d["audit"]] == ["remember", "update"]
        assert rest(base, "GET", "/api/memories/not-a-uuid", tina).status_code == 400
        r = rest(base, "POST", f"/api/memories/{mem}/flag", tina, {"reason": "wrong time"})
        assert r.status_code == 200 and r.json()["trust_score"] < 1
        assert rest(base, "DELETE", f"/api/memories/{mem}", tina).json() == {"forgotten": True}
        assert psql(db, f"SELECT status FROM engram.memories WHERE id = '{mem}'") == "archived"
        other = psql(db, "SELECT engram.create_token(owner => 'ugo', label => 'x')")
        assert rest(base, "GET", f"/api/memories/{mem}", other).status_code == 404


def test_api_and_ui_refuse_foreign_hosts_and_origins():
    """DNS rebinding: /api and /ui check Host and Origin as rmcp does for /mcp,
    before authentication, so an anonymous loopback server is covered too."""
    db = new_database()  # no token: anonymous loopback access is on
    with serving(db) as base:
        assert httpx.get(base + "/api/memories").status_code == 200
        r = httpx.get(base + "/api/memories", headers={"Host": "evil.example"})
        assert r.status_code == 403 and "--allowed-hosts" in r.json()["error"]
        r = httpx.get(base + "/ui", headers={"Host": "evil.example:8080"})
        assert r.status_code == 403
        r = httpx.delete(base + "/api/memories/00000000-0000-0000-0000-000000000000",
                         headers={"Origin": "http://evil.example"})
        assert r.status_code == 403 and "--allowed-origins" in r.json()["error"]
        origin = base.replace("127.0.0.1", "localhost")
        assert httpx.get(base + "/api/memories", headers={"Origin": origin}).status_code == 200


def test_the_api_aliases_take_the_user_from_the_query_too():
    db = new_database()
    platform = psql(db, "SELECT engram.create_token(owner => 'platform', label => 'p', platform => true)")
    with serving(db) as base:
        r = rest(base, "POST", "/api/resources?user_id=rita", platform, {"name": "x", "content": "the runbook"})
        assert r.status_code == 201, r.text
        assert psql(db, "SELECT owner FROM engram.memories WHERE source = 'resource'") == "rita"
        r = rest(base, "GET", "/api/memories?user_id=rita&user_id=sam", platform)
        assert r.status_code == 400 and "once" in r.json()["error"], r.text
