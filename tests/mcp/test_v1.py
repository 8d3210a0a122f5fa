"""/v1, the JSON API for application code, through a real HTTP client
(httpx) against engram-mcp and the test cluster: the OpenAPI document
agrees with the routes, keyed memories behave as a key-value store, a
platform token names the user per request and mints user tokens, errors are
RFC 9457 problem details, and the server embeds for SQL clients."""

import re
import uuid

import httpx
import pytest

from conftest import locked_memories, new_database, psql, serving

PROBLEM = "application/problem+json"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
METHODS = {"get", "put", "post", "delete", "patch"}

# The routes outside code calls; the document may have more, never fewer.
ROUTES = {
    ("post", "/v1/memories"), ("get", "/v1/memories"), ("get", "/v1/memories/{id}"),
    ("patch", "/v1/memories/{id}"), ("delete", "/v1/memories/{id}"), ("post", "/v1/memories/{id}/reopen"),
    ("get", "/v1/memories/{id}/revisions"), ("post", "/v1/search"), ("put", "/v1/items"), ("get", "/v1/items"),
    ("delete", "/v1/items"), ("get", "/v1/namespaces"), ("post", "/v1/context"), ("get", "/v1/entities"),
    ("get", "/v1/entities/{name}"), ("post", "/v1/embed"), ("post", "/v1/tokens"), ("delete", "/v1/tokens/{id}"),
    ("delete", "/v1/users/{user_id}/memories"),
}


@pytest.fixture(scope="module")
def api():
    db = new_database()
    platform = psql(db, "SELECT engram.create_token(owner => 'app', label => 'backend', platform => true)")
    alice = psql(db, "SELECT engram.create_token(owner => 'alice', label => 'laptop')")
    # the model engram-mcp's local embedder is (it refuses to start with another)
    psql(db, "SELECT engram.configure(embedding_model => 'local:all-MiniLM-L6-v2')")
    with serving(db) as base:
        yield {"db": db, "base": base, "platform": platform, "alice": alice}


def client(api, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=api["base"], headers=headers, timeout=30)


def problem(r, status):
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"] == PROBLEM, r.headers
    p = r.json()
    assert p["status"] == status and p["type"] and p["title"] and p["detail"], p
    return p


def concrete(path):
    return path.replace("{id}", str(uuid.uuid4())).replace("{name}", "x").replace("{user_id}", "alice")


def test_the_document_and_the_routes_agree(api):
    doc = httpx.get(api["base"] + "/v1/openapi.json", timeout=10).json()
    ids = [op["operationId"] for item in doc["paths"].values() for m, op in item.items() if m in METHODS]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert doc["openapi"].startswith("3.1")
    documented = {(m, p) for p, item in doc["paths"].items() for m in item if m in METHODS}
    assert ROUTES <= documented, ROUTES - documented
    with client(api, None) as anonymous:
        for method, path in sorted(documented):
            # Every documented route exists (it asks for a token, not "no such route")...
            r = anonymous.request(method.upper(), concrete(path), json={})
            p = problem(r, 401)
            assert r.headers["www-authenticate"] == "Bearer", p
            op = doc["paths"][path][method]
            assert op["security"] and "default" in op["responses"], (method, path)
    with client(api, api["alice"]) as c:
        for path, item in doc["paths"].items():
            # ...and takes no method it does not document.
            for method in METHODS - set(item):
                problem(c.request(method.upper(), concrete(path)), 405)
        problem(c.get("/v1/nothing-here"), 404)


def test_memories_from_remember_to_reopen(api):
    with client(api, api["alice"]) as c:
        r = c.post("/v1/memories", json={"content": "Alice's standup is at 9:30 in room Kepler",
                                         "metadata": {"team": "core"}, "tags": ["work"]})
        assert r.status_code == 201, r.text
        first = r.json()["id"]
        # the same content again: the identical memory's id
        again = c.post("/v1/memories", json={"content": "Alice's standup is at 9:30 in room Kepler"})
        assert again.status_code == 200 and again.json() == {"status": "duplicate", "id": first}
        # a correction conflicts: nothing written, the conflict and what to do in the problem
        r = c.post("/v1/memories", json={"content": "Alice's standup is at 10:00 in room Kepler"})
        p = problem(r, 409)
        assert p["conflicts"][0]["id"] == first and "supersedes" in p["hint"], p
        r = c.post("/v1/memories", json={"content": "Alice's standup is at 10:00 in room Kepler",
                                         "supersedes": [first]})
        assert r.status_code == 201, r.text
        second = r.json()["id"]

        m = c.get(f"/v1/memories/{first}").json()
        assert m["valid_to"] is not None and m["metadata"] == {"team": "core"}
        for field in ("created_at", "updated_at", "occurred_at", "valid_from", "valid_to"):
            assert RFC3339.match(m[field]), (field, m[field])
        found = c.post("/v1/search", json={"query": "when is the standup", "limit": 5}).json()
        assert [h["id"] for h in found["results"]][:1] == [second]
        hit = found["results"][0]
        assert hit["metadata"] == {} and isinstance(hit["similarity"], float) and RFC3339.match(hit["created_at"])
        # an unrelated query finds nothing above a similarity floor
        floor = c.post("/v1/search", json={"query": "Lyon", "min_similarity": 0.5}).json()
        assert floor["results"] == [], floor
        # a past moment: what held then
        then = c.post("/v1/search", json={"query": "standup", "valid_at": m["valid_from"]}).json()
        assert first in [h["id"] for h in then["results"]]

        assert c.post(f"/v1/memories/{first}/reopen", json={"reason": "both hold"}).json() == \
            {"id": first, "reopened": True}
        r = c.patch(f"/v1/memories/{second}", json={"content": "Alice's standup is at 10:15 in room Kepler",
                                                    "reason": "moved"})
        assert r.json() == {"id": second, "revision": 2}, r.text
        revs = c.get(f"/v1/memories/{second}/revisions").json()["revisions"]
        assert [v["revision"] for v in revs] == [1, 2] and revs[-1]["is_current"]
        assert "moved" in [v["reason"] for v in revs], revs
        page = c.get("/v1/memories", params={"limit": 1}).json()
        assert len(page["memories"]) == 1 and page["next_cursor"]
        rest = c.get("/v1/memories", params={"limit": 10, "cursor": page["next_cursor"]}).json()
        assert page["memories"][0]["id"] not in [m["id"] for m in rest["memories"]]
        tagged = c.get("/v1/memories", params=[("tags", "work")]).json()["memories"]
        assert [m["id"] for m in tagged] == [first]
        assert c.delete(f"/v1/memories/{first}").json() == {"id": first, "forgotten": True}
        problem(c.get(f"/v1/memories/{uuid.uuid4()}"), 404)


def test_items_are_a_key_value_store_with_filters(api):
    with client(api, api["alice"]) as c:
        # the same value under two keys: two items, never a duplicate
        for key in ("a", "b"):
            r = c.put("/v1/items", json={"namespace": ["prefs", "ui"], "key": key, "value": {"theme": "dark", "n": 1}})
            assert r.status_code == 201 and r.json()["status"] == "created", r.text
        r = c.put("/v1/items", json={"namespace": ["prefs", "ui"], "key": "a", "value": {"theme": "light", "n": 3}})
        assert r.status_code == 200 and r.json()["status"] == "revised" and r.json()["revision"] == 2, r.text
        r = c.put("/v1/items", json={"namespace": ["prefs", "ui"], "key": "a", "value": {"theme": "light", "n": 3}})
        assert r.json()["status"] == "unchanged"
        item = c.get("/v1/items", params={"namespace": "prefs.ui", "key": "a"}).json()
        assert item["value"] == {"theme": "light", "n": 3} and item["namespace"] == ["prefs", "ui"]
        assert RFC3339.match(item["updated_at"])
        listed = c.get("/v1/memories", params={"namespace_prefix": "prefs", "filter": '{"n": {"$gte": 2}}'}).json()
        assert [m["key"] for m in listed["memories"]] == ["a"]
        found = c.post("/v1/search", json={"query": "theme", "namespace_prefix": ["prefs"],
                                           "filter": {"theme": {"$in": ["dark"]}}}).json()
        assert [h["key"] for h in found["results"]] == ["b"]
        assert c.get("/v1/namespaces").json() == {"namespaces": [["prefs", "ui"]]}
        problem(c.get("/v1/memories", params={"filter": '{"n": {"$regex": "x"}}'}), 400)
        problem(c.get("/v1/memories", params={"filter": "not json"}), 400)
        # a TTL is refreshed on a read that asks for it
        c.put("/v1/items", json={"namespace": ["cache"], "key": "k", "value": {"v": 1}, "ttl": 3600})
        psql(api["db"], "UPDATE engram.memories SET expires_at = now() + interval '1 minute' WHERE key = 'k'")
        item = c.get("/v1/items", params={"namespace": "cache", "key": "k", "refresh_ttl": "true"}).json()
        left = psql(api["db"], "SELECT extract(epoch FROM expires_at - now())::int FROM engram.memories WHERE key = 'k'")
        assert int(left) > 3000, left
        assert c.delete("/v1/items", params={"namespace": "prefs.ui", "key": "b"}).json() == {"deleted": True}
        assert c.delete("/v1/items", params={"namespace": "prefs.ui", "key": "b"}).json() == {"deleted": False}
        problem(c.get("/v1/items", params={"namespace": "prefs.ui", "key": "b"}), 404)
        problem(c.get("/v1/items", params={"namespace": "prefs.ui"}), 400)


def test_a_platform_token_names_the_user_per_request(api):
    with client(api, api["platform"]) as app, client(api, api["alice"]) as alice:
        for user in ("carol", "dave"):
            r = app.post("/v1/memories", json={"content": f"{user} likes green tea", "user_id": user})
            assert r.status_code == 201, r.text
        carol = app.get("/v1/memories", params={"user_id": "carol"}).json()["memories"]
        assert [m["content"] for m in carol] == ["carol likes green tea"]
        # the query names the user of a call with a body too
        r = app.post("/v1/memories", params={"user_id": "erin"}, json={"content": "erin rides to work"})
        assert r.status_code == 201, r.text
        assert psql(api["db"], f"SELECT owner FROM engram.memories WHERE id = '{r.json()['id']}'") == "erin"
        problem(app.post("/v1/memories", params={"user_id": "erin"},
                         json={"content": "x", "user_id": "carol"}), 400)
        # empty, repeated or misspelt: refused, never read as "the platform itself"
        problem(app.delete("/v1/items", params={"namespace": "a", "key": "k", "user_id": ""}), 400)
        problem(app.get("/v1/memories", params=[("user_id", "carol"), ("user_id", "dave")]), 400)
        problem(app.get("/v1/memories", params={"userid": "carol"}), 400)
        problem(app.post("/v1/memories", params={"userId": "carol"}, json={"content": "x"}), 400)
        problem(app.put("/v1/slots/x", params={"workspace": "w"}, json={"content": "x"}), 400)
        problem(app.get("/v1/memories?user_id=%FF"), 400)
        problem(app.delete(f"/v1/tokens/{uuid.uuid4()}", params={"user": "x"}), 400)
        problem(alice.post("/v1/memories", params={"user_id": "carol"}, json={"content": "x"}), 403)
        # the header and the parameter must agree
        problem(app.get("/v1/memories", params={"user_id": "carol"}, headers={"X-User-Id": "dave"}), 400)
        # a user token names no one else
        p = problem(alice.get("/v1/memories", params={"user_id": "carol"}), 403)
        assert "platform" in p["detail"]
        problem(alice.post("/v1/search", json={"query": "tea", "user_id": "carol"}), 403)
        problem(alice.post("/v1/tokens", json={"label": "x", "user_id": "carol"}), 403)
        p = problem(alice.post("/v1/tokens", json={"label": "x"}), 403)
        assert p["sqlstate"] == "42501", p

        r = app.post("/v1/tokens", json={"user_id": "carol", "label": "carol's phone", "expires_in": 3600})
        assert r.status_code == 201, r.text
        minted = r.json()
        assert minted["owner"] == "carol" and RFC3339.match(minted["expires_at"])
        with client(api, minted["token"]) as carol_client:
            mine = carol_client.get("/v1/memories").json()["memories"]
            assert [m["content"] for m in mine] == ["carol likes green tea"]
            problem(carol_client.get("/v1/memories", params={"user_id": "dave"}), 403)
            problem(carol_client.delete("/v1/users/dave/memories"), 403)
        # another token cannot revoke it, nor learn that it exists
        p = problem(alice.delete(f"/v1/tokens/{minted['id']}"), 404)
        assert p["sqlstate"] == "P0002"
        assert app.delete(f"/v1/tokens/{minted['id']}").status_code == 204
        problem(httpx.get(api["base"] + "/v1/memories", headers={"Authorization": f"Bearer {minted['token']}"}), 401)

        erased = app.delete("/v1/users/dave/memories").json()
        assert erased == {"memories": 1, "misses": 0}, erased
        assert app.get("/v1/memories", params={"user_id": "dave"}).json()["memories"] == []
        assert len(app.get("/v1/memories", params={"user_id": "carol"}).json()["memories"]) == 1


def test_bad_input_is_a_problem_and_changes_nothing(api):
    before = psql(api["db"], "SELECT count(*) FROM engram.memories")
    with client(api, api["alice"]) as c:
        problem(c.post("/v1/memories", json={"content": 5}), 422)
        problem(c.post("/v1/memories", json={"content": "x", "colour": "blue"}), 422)
        problem(c.post("/v1/memories", content=b"{not json", headers={"content-type": "application/json"}), 400)
        problem(c.post("/v1/memories", content=b"x"), 415)
        p = problem(c.post("/v1/memories", json={"content": "x", "kind": "dream"}), 400)
        assert p["sqlstate"] == "22023", p
        problem(c.post("/v1/memories", json={"content": "x", "ttl": -1}), 400)
        problem(c.post("/v1/memories", json={"content": "x", "occurred_at": "last tuesday-ish"}), 400)
        problem(c.put("/v1/items", json={"namespace": [], "key": "k", "value": {}}), 400)
        problem(c.put("/v1/items", json={"namespace": ["a"], "key": "k", "value": [1]}), 400)
        problem(c.get("/v1/memories/not-a-uuid"), 400)
        problem(c.post("/v1/search", json={"query": "   "}), 400)
        problem(c.post("/v1/embed", json={"texts": []}), 400)
        problem(c.post("/v1/embed", json={"texts": ["x"] * 65}), 400)
        problem(c.post("/v1/embed", json={"texts": ["y" * 70000]}), 413)
    assert psql(api["db"], "SELECT count(*) FROM engram.memories") == before


def test_a_busy_database_is_a_503_with_retry_after(tokens):
    db = new_database()
    token = psql(db, "SELECT engram.create_token(owner => 'wes', label => 'pytest')")
    with serving(db, "--statement-timeout-ms", "1000") as base:
        with locked_memories(db, 3):
            r = httpx.get(base + "/v1/memories", headers={"Authorization": f"Bearer {token}"}, timeout=10)
        p = problem(r, 503)
        assert r.headers["retry-after"] and p["sqlstate"] == "57014" and "retry" in p["detail"], p


def test_the_server_embeds_with_the_recorded_model(api):
    with client(api, api["alice"]) as c:
        r = c.post("/v1/embed", json={"texts": ["Vera rides a blue bicycle", "the deploy failed"]})
        assert r.status_code == 200, r.text
        e = r.json()
        assert e["model"] == psql(api["db"], "SELECT engram.embedding_model()")
        assert e["dims"] == 384 and [len(v) for v in e["embeddings"]] == [384, 384]
        # what a SQL client stores with these vectors is what engram-mcp stores
        rid = c.post("/v1/memories", json={"content": "Vera rides a blue bicycle"}).json()["id"]
        distance = psql(api["db"], f"SELECT round((embedding <=> '{e['embeddings'][0]}')::numeric, 4) "
                                   f"FROM engram.memories WHERE id = '{rid}'")
        assert float(distance) < 0.0001, distance


def test_context_and_entities(api):
    with client(api, api["alice"]) as c:
        c.post("/v1/memories", json={"content": "Priya Shah leads Project Apollo at Northwind"})
        ctx = c.post("/v1/context", json={"query": "who leads Apollo?"}).json()
        assert "Apollo" in ctx["text"], ctx
        names = [e["name"] for e in c.get("/v1/entities").json()["entities"]]
        assert any("Apollo" in n for n in names), names
        about = c.get("/v1/entities/" + next(n for n in names if "Apollo" in n)).json()
        assert about, about


ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_the_api_reference_lists_exactly_the_documented_routes(api):
    doc = httpx.get(api["base"] + "/v1/openapi.json", timeout=10).json()
    documented = {f"{m.upper()} {p}" for p, item in doc["paths"].items() for m in item if m in METHODS}
    reference = (ROOT / "docs" / "API.md").read_text()
    listed = set(re.findall(r"^\| `((?:GET|PUT|POST|PATCH|DELETE) /v1/[^`]*)`", reference, re.M))
    assert listed == documented, {"not in docs/API.md": documented - listed, "not served": listed - documented}


def test_the_readme_http_session_runs(api):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## A 30-second HTTP session", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    # the README reads the token scripts/run wrote and the default address
    block = block.replace("$(cat .engram/token)", api["alice"]).replace("http://127.0.0.1:8080", api["base"])
    out = __import__("subprocess").run(["bash", "-euo", "pipefail", "-c", block], capture_output=True, text=True,
                                       timeout=60)
    assert out.returncode == 0, out.stderr
    answers = [__import__("json").loads(line) for line in out.stdout.replace("}{", "}\n{").splitlines() if line]
    assert answers[0]["status"] == "created"
    assert answers[1]["results"][0]["content"] == "Alice drinks green tea"
    assert answers[2]["status"] in ("created", "unchanged", "revised")
    assert answers[3]["value"] == {"theme": "dark"}


def test_slots_workspaces_states_and_events(api):
    with client(api, api["platform"]) as c:
        u = {"user_id": "quinn"}
        assert c.put("/v1/slots/persona", json={"content": "terse", "pinned": True, **u}).json()["content"] == "terse"
        assert c.put("/v1/slots/persona", json={"content": "cites paths", "append": True, **u}).json()["content"] \
            == "terse\ncites paths"
        assert [x["label"] for x in c.get("/v1/slots", params=u).json()["slots"]] == ["persona"]
        assert c.get("/v1/slots/persona", params=u).json()["pinned"] is True
        problem(c.get("/v1/slots/persona", params={"user_id": "rex"}), 404)
        r = c.post("/v1/workspaces", json={"name": "billing", "root_folder": "/src/billing", **u})
        assert r.status_code == 201, r.text
        r = c.post("/v1/workspaces/billing/states", json={"name": "before-fix", "next_steps": ["run tests"], **u})
        assert r.status_code == 201, r.text
        listed = c.get("/v1/workspaces/billing/states", params=u).json()["states"]
        loaded = c.get("/v1/workspaces/billing/states/before-fix", params=u).json()
        assert listed[0]["next_steps"] == loaded["next_steps"] == ["run tests"], (listed, loaded)
        problem(c.post("/v1/workspaces/billing/states", json={"name": "before-fix", **u}), 409)
        r = c.post("/v1/events", json={"event_type": "tool_invocation", "tool_name": "deploy", "success": False,
                                       "error": "DATABASE_URL is not set", "session_id": "s1", "workspace": "billing",
                                       **u})
        assert r.status_code == 201 and r.json()["status"] == "captured", r.text
        assert [x["session_id"] for x in c.get("/v1/sessions", params=u).json()["sessions"]] == ["s1"]
        ws = c.get("/v1/workspaces/billing", params=u).json()
        assert ws["workspace"]["root_folder"] == "/src/billing", ws
        assert c.patch("/v1/workspaces/billing", json={"purpose": "invoices", **u}).status_code == 200
        assert c.delete("/v1/workspaces/billing", params=u).status_code == 200
        assert c.get("/v1/workspaces", params=u).json()["workspaces"] == []
        assert c.delete("/v1/slots/persona", params=u).json() == {"deleted": True}
