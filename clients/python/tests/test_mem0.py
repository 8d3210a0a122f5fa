"""pg_engram.mem0 (Memory, AsyncMemory): Mem0's calls and result shapes on
engram, with engram's conflict rules where Mem0 would ask an LLM."""

from __future__ import annotations

import uuid

import pytest

from pg_engram.mem0 import AsyncMemory, Memory, extracted_facts, extraction_request, translate_filters


def _user() -> str:
    return f"m{uuid.uuid4().hex[:10]}"


def test_add_without_inference_stores_every_message_but_system(engram):
    m, alice = Memory(engram["url"], engram["platform"]), _user()
    out = m.add([{"role": "system", "content": "You are helpful"},
                 {"role": "user", "content": "I love tennis", "name": "bob"},
                 {"role": "assistant", "content": "Noted: tennis"}],
                user_id=alice, metadata={"category": "sports"}, infer=False)
    assert [(r["memory"], r["event"], r["role"], r["actor_id"]) for r in out["results"]] == [
        ("I love tennis", "ADD", "user", "bob"), ("Noted: tennis", "ADD", "assistant", None)]
    got = m.get(out["results"][0]["id"])
    assert got is None  # another user's memory: the platform token's own user has none
    got = m.get(out["results"][0]["id"], user_id=alice)
    assert got is not None and got["memory"] == "I love tennis" and got["score"] is None
    assert got["metadata"] == {"category": "sports"} and got["role"] == "user" and got["actor_id"] == "bob"
    assert set(got) >= {"id", "memory", "hash", "metadata", "created_at", "updated_at"}


def test_inference_adds_updates_and_skips_by_engrams_rules(engram):
    m, alice = Memory(engram["url"], engram["platform"]), _user()
    added = m.add("The Q3 report is due on August 15th", user_id=alice)["results"]
    assert [r["event"] for r in added] == ["ADD"]
    same = m.add("The Q3 report is due on August 15th", user_id=alice)["results"]
    assert same == [{"id": added[0]["id"], "memory": "The Q3 report is due on August 15th", "event": "NONE"}]
    changed = m.add([{"role": "user", "content": "The Q3 report is due on August 25th"},
                     {"role": "assistant", "content": "Updated."}], user_id=alice)["results"]
    assert changed == [{"id": added[0]["id"], "memory": "The Q3 report is due on August 25th", "event": "UPDATE",
                        "previous_memory": "The Q3 report is due on August 15th"}]
    history = m.history(added[0]["id"], user_id=alice)
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in history] == [
        ("ADD", None, "The Q3 report is due on August 15th"),
        ("UPDATE", "The Q3 report is due on August 15th", "The Q3 report is due on August 25th")]
    assert set(history[0]) == {"id", "memory_id", "old_memory", "new_memory", "event", "created_at", "updated_at",
                               "is_deleted", "actor_id", "role"}
    m.delete(added[0]["id"], user_id=alice)
    assert m.history(added[0]["id"], user_id=alice)[-1]["event"] == "DELETE"
    assert m.get(added[0]["id"], user_id=alice) is None


def test_search_get_all_and_scopes(engram):
    m, alice = Memory(engram["url"], engram["platform"]), _user()
    m.add("I'm vegetarian", user_id=alice, agent_id="chef", infer=False)
    m.add("I live in Lyon", user_id=alice, agent_id="travel", run_id="r1", infer=False)
    m.add("I play chess on Sundays", user_id=alice, infer=False, metadata={"level": 3})
    found = m.search("what do I eat?", user_id=alice, limit=1)["results"]
    assert [r["memory"] for r in found] == ["I'm vegetarian"] and found[0]["agent_id"] == "chef"
    assert isinstance(found[0]["score"], float)
    # Mem0 2.x puts the ids in filters
    assert [r["memory"] for r in m.search("city", filters={"user_id": alice, "agent_id": "travel"})["results"]] == [
        "I live in Lyon"]
    assert [r["memory"] for r in m.get_all(filters={"user_id": alice, "level": {"gte": 2}})["results"]] == [
        "I play chess on Sundays"]
    assert len(m.get_all(user_id=alice)["results"]) == 3
    assert m.search("chess", user_id=alice, threshold=0.99)["results"] == []
    with pytest.raises(ValueError, match="user_id"):
        m.search("anything")
    m.update(found[0]["id"], "I'm pescatarian now", metadata={"since": 2026}, user_id=alice)
    updated = m.get(found[0]["id"], user_id=alice)
    assert updated is not None and updated["memory"] == "I'm pescatarian now"
    assert updated["metadata"] == {"since": 2026} and updated["agent_id"] == "chef"
    assert m.delete_all(user_id=alice, agent_id="travel") == {"message": "Memories deleted successfully!"}
    assert sorted(r["memory"] for r in m.get_all(user_id=alice)["results"]) == [
        "I play chess on Sundays", "I'm pescatarian now"]
    m.delete_all(user_id=alice)
    assert m.get_all(user_id=alice)["results"] == []


def test_filters_translate_or_are_refused():
    assert translate_filters({"AND": [{"a": 1}, {"n": {"gte": 2, "lt": 5}}], "t": {"in": ["x"]}}) == {
        "a": 1, "n": {"$gte": 2, "$lt": 5}, "t": {"$in": ["x"]}}
    with pytest.raises(ValueError, match="OR"):
        translate_filters({"OR": [{"a": 1}]})
    with pytest.raises(ValueError, match="contains"):
        translate_filters({"a": {"contains": "x"}})


def test_the_optional_extraction_request_and_answer():
    url, body, headers = extraction_request({"base_url": "http://llm:8000/v1/", "model": "m", "api_key": "k"},
                                            [{"role": "user", "content": "I moved to Lyon"}])
    assert url == "http://llm:8000/v1/chat/completions" and headers == {"Authorization": "Bearer k"}
    assert body["messages"][-1]["content"] == "user: I moved to Lyon"
    assert extracted_facts({"choices": [{"message": {"content": '{"facts": ["Lives in Lyon", " "]}'}}]}) == [
        "Lives in Lyon"]
    with pytest.raises(ValueError):
        extracted_facts({"choices": [{"message": {"content": "not json"}}]})


@pytest.mark.anyio
async def test_the_async_facade(engram):
    alice = _user()
    async with AsyncMemory(engram["url"], engram["platform"]) as m:
        added = (await m.add("My favourite colour is blue", user_id=alice))["results"]
        assert [r["event"] for r in added] == ["ADD"]
        changed = (await m.add("My favourite colour is green", user_id=alice))["results"]
        assert changed[0]["event"] == "UPDATE" and changed[0]["id"] == added[0]["id"]
        hits = (await m.search("colour", user_id=alice))["results"]
        assert [h["memory"] for h in hits] == ["My favourite colour is green"]
        assert len(await m.history(added[0]["id"], user_id=alice)) == 2
        await m.delete_all(user_id=alice)
        assert (await m.get_all(user_id=alice))["results"] == []


def test_the_facade_changes_only_its_own_memories_in_the_calls_scope(engram):
    from pg_engram import Client
    from pg_engram.langgraph import EngramStore

    m, alice = Memory(engram["url"], engram["platform"]), _user()
    travel = m.add("My favourite colour is blue", user_id=alice, agent_id="travel-bot")["results"]
    # another agent's fact conflicts with travel-bot's: stored alongside, nothing revised
    shop = m.add("My favourite colour is green", user_id=alice, agent_id="shopping-bot")["results"]
    assert [r["event"] for r in shop] == ["ADD"] and shop[0]["id"] != travel[0]["id"]
    assert [r["memory"] for r in m.get_all(user_id=alice, agent_id="travel-bot")["results"]] == [
        "My favourite colour is blue"]
    # a LangGraph item and a memory another client stored are not the facade's
    with EngramStore(engram["url"], engram["platform"], user_index=1) as store:
        store.put(("prefs", alice), "diet", {"text": "The user is vegetarian"})
        with Client(engram["url"], engram["platform"], user_id=alice) as c:
            c.remember("The user drinks oat milk", force=True)
        out = m.add("The user is not vegetarian", user_id=alice)["results"]
        assert [r["event"] for r in out] == ["ADD"]
        item = store.get(("prefs", alice), "diet")
        assert item is not None and item.value == {"text": "The user is vegetarian"}
        listed = [r["memory"] for r in m.get_all(user_id=alice)["results"]]
        assert "The user drinks oat milk" not in listed and not any("vegetarian\"" in x for x in listed)
        m.delete_all(user_id=alice)
        assert store.get(("prefs", alice), "diet") is not None
        with Client(engram["url"], engram["platform"], user_id=alice) as c:
            other = next(c.list(namespace_prefix=("prefs",)))   # the LangGraph item
        for call in (lambda: m.update(str(other.id), "changed", user_id=alice),
                     lambda: m.delete(str(other.id), user_id=alice)):
            with pytest.raises(ValueError, match="not found"):
                call()
        assert m.get(str(other.id), user_id=alice) is None and m.history(str(other.id), user_id=alice) == []
        with pytest.raises(ValueError):
            m.get(str(other.id), user_id=" " + alice)
        with Client(engram["url"], engram["platform"], user_id=alice) as c:
            assert "The user drinks oat milk" in [h.content for h in c.search("oat milk")]
