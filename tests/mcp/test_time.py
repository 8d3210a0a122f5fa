"""Time through MCP (docs/TIME_AND_ENTITIES.md): remember's occurred_at /
valid_from / valid_to, search's valid_at / known_at / reference_time and the
window it reads, and tools that refuse arguments they do not take."""

import pytest

from conftest import call, mcp_session, psql

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def owners(database):
    """Owners of this file alone (the session's database is shared)."""
    return {o: psql(database, f"SELECT engram.create_token(owner => '{o}', label => 'pytest-time')")
            for o in ("tina", "tom", "carol")}


async def test_a_correction_closes_the_old_fact_and_the_past_still_answers(server, owners):
    async with mcp_session(server, owners["tina"]) as s:
        r, err = await call(s, "memory_remember", content="The Apollo launch deadline is May 5",
                            valid_from="2026-01-10")
        assert not err and r["status"] == "created", r
        old = r["id"]
        r, _ = await call(s, "memory_remember", content="The Apollo launch deadline is June 10",
                          valid_from="2026-03-01")
        assert r["status"] == "conflict" and r["conflicts"][0]["id"] == old
        assert "supersedes" in r["hint"], r
        r, _ = await call(s, "memory_remember", content="The Apollo launch deadline is June 10",
                          valid_from="2026-03-01", supersedes=[old])
        new = r["id"]

        r, err = await call(s, "memory_search", query="Apollo launch deadline")
        assert not err
        ids = [h["id"] for h in r["results"]]
        assert new in ids and old not in ids, r
        hit = r["results"][ids.index(new)]
        assert hit["valid_from"].startswith("2026-03-01") and hit["valid_to"] is None and hit["occurred_at"]

        r, _ = await call(s, "memory_search", query="Apollo launch deadline", valid_at="2026-02-01")
        assert [h["id"] for h in r["results"]][:1] == [old]
        assert r["results"][0]["valid_to"].startswith("2026-03-01")

        r, _ = await call(s, "memory_recall", id=old)
        assert r["memory"]["valid_to"].startswith("2026-03-01")

        r, _ = await call(s, "memory_list", valid_at="2026-02-01")
        assert old in [m["id"] for m in r["memories"]] and new not in [m["id"] for m in r["memories"]]

        # closed by hand: no longer returned by default
        r, err = await call(s, "memory_update", id=new, valid_to="2026-11-01T00:00:00Z")
        assert not err and r["revision"] == 1, r
        r, _ = await call(s, "memory_search", query="Apollo launch deadline")
        assert new not in [h["id"] for h in r["results"]]

        r, err = await call(s, "memory_remember", content="A fact that ends before it starts",
                            valid_from="2026-05-01", valid_to="2026-04-01")
        assert err and "before valid_from" in r, r
        r, err = await call(s, "memory_search", query="deadline", valid_at="next tuesday")
        assert err and "valid_at" in r and "ISO 8601" in r, r


async def test_search_reads_the_time_its_query_names(server, owners):
    async with mcp_session(server, owners["tom"]) as s:
        r, _ = await call(s, "memory_remember", kind="episodic", occurred_at="2026-05-06T15:00:00Z",
                          content="Decided to ship the billing export as Parquet")
        parquet = r["id"]
        r, _ = await call(s, "memory_remember", kind="episodic", occurred_at="2026-04-02",
                          content="Decided to ship the billing export as CSV files for accounting")
        r, err = await call(s, "memory_search", query="what did I decide about the billing export last week",
                            reference_time="2026-05-14T10:00:00Z")
        assert not err, r
        assert r["time_window"]["start"].startswith("2026-05-04") and r["time_window"]["end"].startswith("2026-05-11")
        assert r["results"][0]["id"] == parquet
        assert r["results"][0]["occurred_at"].startswith("2026-05-06")
        r, _ = await call(s, "memory_search", query="billing export")
        assert r["time_window"] is None
        # an answer without hits still says which time the query named
        r, err = await call(s, "memory_search", query="zeppelin airships last week",
                            reference_time="2026-05-14T10:00:00Z", min_similarity=0.99)
        assert not err and r["results"] == [], r
        assert r["time_window"]["start"].startswith("2026-05-04") and r["time_window"]["end"].startswith("2026-05-11")
        # a captured event of a past conversation keeps its time
        r, err = await call(s, "memory_capture", event_type="conversation", content="Asked about Parquet readers",
                            session_id="billing-2026-05-06",
                            occurred_at="2026-05-06T16:00:00Z")
        assert not err and r["status"] == "captured", r
        r, _ = await call(s, "memory_recall", id=r["id"])
        assert r["memory"]["occurred_at"].startswith("2026-05-06T16:00:00+00:00")


async def test_tools_refuse_arguments_they_do_not_take(server, owners):
    async with mcp_session(server, owners["carol"]) as s:
        await call(s, "memory_remember", content="Carol deploys with the blue-green script")
        # what a new user tries first: a near name is refused, naming the right one
        r, err = await call(s, "memory_search", query_text="how does carol deploy")
        assert err, r
        assert "'query_text'" in r and "did you mean 'query'" in r and "It takes:" in r and "limit" in r
        r, err = await call(s, "memory_remember", content="x", ttl="3 days")
        assert err and "'ttl'" in r and "ttl_days" in r, r
        r, err = await call(s, "memory_recall", id="00000000-0000-4000-8000-000000000000", verbose=True)
        assert err and "'verbose'" in r, r
        # nothing was written by the refused remember
        r, _ = await call(s, "memory_search", query="x")
        assert all(h["content"] != "x" for h in r["results"])
        # names made consistent in 0.13.0, the old ones still taken
        r, err = await call(s, "memory_context", query="how do I deploy?")
        assert not err and "blue-green" in r["text"], r
        r, err = await call(s, "memory_context", query_text="how do I deploy?")
        assert not err and "blue-green" in r["text"], r
        r, err = await call(s, "memory_sessions", limit=5)
        assert not err, r
        r, err = await call(s, "memory_sessions", lim=5)
        assert not err, r


async def test_entities_and_about(server, owners):
    async with mcp_session(server, owners["tina"]) as s:
        for content in ["José Díaz leads the Orion project", "Jose Diaz lives in Porto",
                        "Priya reviews every Orion release"]:
            r, err = await call(s, "memory_remember", content=content)
            assert not err and r["status"] == "created", r
        r, err = await call(s, "memory_entities", prefix="jos")
        assert not err, r
        assert [(e["kind"], e["memories"]) for e in r["entities"]] == [("person", 2)], r
        r, _ = await call(s, "memory_entities")
        names = {e["name"] for e in r["entities"]}
        assert {"Orion", "Priya", "Porto"} <= names, r
        r, err = await call(s, "memory_about", entity="JOSE DIAZ")
        assert not err and r["entity"]["memories"] == 2, r
        assert {f["content"] for f in r["facts"]} == {"José Díaz leads the Orion project", "Jose Diaz lives in Porto"}
        assert {x["name"] for x in r["related"]} == {"Orion", "Porto"}
        r, _ = await call(s, "memory_search", query="Orion", entity="priya")
        assert [h["content"] for h in r["results"]] == ["Priya reviews every Orion release"], r
        r, err = await call(s, "memory_about")
        assert err and "entity" in r, r
    # another owner sees none of them
    async with mcp_session(server, owners["carol"]) as s:
        r, _ = await call(s, "memory_about", entity="José Díaz")
        assert r["entity"]["memories"] == 0 and r["facts"] == [], r


async def test_corrections_close_only_what_the_caller_names(server, owners):
    """The Marta Keller sequence: a forced write closes nothing, supersedes
    closes exactly the ids it names, and memory_reopen undoes a wrong one."""
    async with mcp_session(server, owners["tom"]) as s:
        async def remember(**args):
            r, err = await call(s, "memory_remember", **args)
            assert not err and r["status"] == "created", r
            return r["id"]

        async def current():
            r, err = await call(s, "memory_about", entity="Marta Keller")
            assert not err, r
            return {f["id"] for f in r["facts"]}

        berlin = await remember(content="Marta Keller lives in Berlin")
        lead = await remember(content="Marta Keller is the tech lead of Project Atlas", force=True)
        # what a client written for 0.14.0 sends: force alone now closes nothing
        r, _ = await call(s, "memory_remember", content="Marta Keller moved from Berlin to Zurich")
        if r["status"] == "conflict":
            assert "supersedes" in r["hint"] and "force" in r["hint"], r
        moved = await remember(content="Marta Keller moved from Berlin to Zurich", force=True)
        assert {berlin, lead, moved} <= await current()
        # the handover names the fact it ends, and only that one closes
        handover = await remember(content="Marta Keller is no longer tech lead of Project Atlas; Jonas Weber took over",
                                  supersedes=[lead], force=True)
        facts = await current()
        assert {moved, handover, berlin} <= facts and lead not in facts, facts
        zurich = await remember(content="Marta Keller now lives in Zurich", supersedes=[berlin], force=True)
        facts = await current()
        assert {moved, handover, zurich} <= facts and not {berlin, lead} & facts, facts

        # a wrong supersession, undone
        await remember(content="Marta Keller speaks fluent German", supersedes=[zurich], force=True)
        assert zurich not in await current()
        r, err = await call(s, "memory_reopen", id=zurich, reason="named by mistake")
        assert not err and r == {"id": zurich, "reopened": True}, r
        assert zurich in await current()
        r, _ = await call(s, "memory_recall", id=zurich)
        assert r["memory"]["valid_to"] is None and r["memory"]["metadata"]["engram_reopened"]["reason"] == "named by mistake"
        r, err = await call(s, "memory_reopen", id=zurich)
        assert not err and r["reopened"] is False, r

    # an id the caller cannot write: refused, and nothing is written
    async with mcp_session(server, owners["carol"]) as s:
        r, _ = await call(s, "memory_remember", content="Carol keeps her notes in a red notebook")
        carol = r["id"]
    async with mcp_session(server, owners["tom"]) as s:
        before = {m["id"] for m in (await call(s, "memory_list", limit=100))[0]["memories"]}
        for ids in ([carol], ["00000000-0000-0000-0000-000000000000"], [zurich, carol]):
            r, err = await call(s, "memory_remember", content="Marta Keller moved to Basel", supersedes=ids, force=True)
            assert err and "not found" in r, r
        r, err = await call(s, "memory_remember", content="Marta Keller moved to Basel", supersedes=["not-an-id"])
        assert err and "not a memory id" in r, r
        after = {m["id"] for m in (await call(s, "memory_list", limit=100))[0]["memories"]}
        assert after == before
        assert zurich in {f["id"] for f in (await call(s, "memory_about", entity="Marta Keller"))[0]["facts"]}
