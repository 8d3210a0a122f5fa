"""A real LangGraph StateGraph whose node reads and writes long-term memory
through EngramStore: what one thread (conversation) stores, another thread
of the same user finds, and another user never sees. No LLM: the node's
logic is plain Python."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore, PutOp, SearchOp

from pg_engram.langgraph import AsyncEngramStore, EngramStore


def remember_and_recall(state: MessagesState, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
    namespace = ("memories", config["configurable"]["user_id"])
    said = str(state["messages"][-1].content)
    if said.startswith("remember: "):
        store.put(namespace, uuid.uuid4().hex, {"text": said.removeprefix("remember: ")})
        return {"messages": [{"role": "assistant", "content": "noted"}]}
    known = store.search(namespace, query=said, limit=1)
    return {"messages": [{"role": "assistant", "content": known[0].value["text"] if known else "I don't know"}]}


async def aremember_and_recall(state: MessagesState, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
    namespace = ("memories", config["configurable"]["user_id"])
    said = str(state["messages"][-1].content)
    if said.startswith("remember: "):
        await store.aput(namespace, uuid.uuid4().hex, {"text": said.removeprefix("remember: ")})
        return {"messages": [{"role": "assistant", "content": "noted"}]}
    known = await store.asearch(namespace, query=said, limit=1)
    return {"messages": [{"role": "assistant", "content": known[0].value["text"] if known else "I don't know"}]}


def graph(node: Any, store: BaseStore) -> Any:
    g = StateGraph(MessagesState)
    g.add_node("agent", node)
    g.add_edge(START, "agent")
    return g.compile(checkpointer=InMemorySaver(), store=store)


def ask(app: Any, thread: str, user: str, text: str) -> str:
    out = app.invoke({"messages": [{"role": "user", "content": text}]},
                     {"configurable": {"thread_id": thread, "user_id": user}})
    return str(out["messages"][-1].content)


def test_memory_outlives_the_thread_and_stays_with_its_user(engram):
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    with EngramStore(engram["url"], engram["platform"], user_index=1, index={"fields": ["text"]}) as store:
        app = graph(remember_and_recall, store)
        assert ask(app, "t1", alice, "remember: I am allergic to peanuts") == "noted"
        assert ask(app, "t2", alice, "what food allergies do I have?") == "I am allergic to peanuts"
        assert ask(app, "t3", bob, "what food allergies do I have?") == "I don't know"
        # the first thread's checkpoint holds its own messages only
        state = app.get_state({"configurable": {"thread_id": "t1"}})
        assert [m.content for m in state.values["messages"]] == ["remember: I am allergic to peanuts", "noted"]
    # the item is alice's keyed memory in engram, under her namespace
    with EngramStore(engram["url"], engram["platform"], user_index=1) as store:
        assert [i.value for i in store.search(("memories", alice))] == [{"text": "I am allergic to peanuts"}]
        assert store.search(("memories", bob)) == []
        with pytest.raises(ValueError, match="user_index"):
            store.search(("memories",))


@pytest.mark.anyio
async def test_the_async_store_in_a_graph(engram):
    carol = f"carol-{uuid.uuid4().hex[:6]}"
    async with AsyncEngramStore(engram["url"], engram["platform"], user_index=1) as store:
        app = graph(aremember_and_recall, store)
        config = {"configurable": {"thread_id": "a", "user_id": carol}}
        await app.ainvoke({"messages": [{"role": "user", "content": "remember: my flat is on the 4th floor"}]}, config)
        out = await app.ainvoke({"messages": [{"role": "user", "content": "which floor do I live on?"}]},
                                {"configurable": {"thread_id": "b", "user_id": carol}})
        assert out["messages"][-1].content == "my flat is on the 4th floor"


def test_a_batch_is_checked_whole_before_it_writes(engram):
    owner = f"dora-{uuid.uuid4().hex[:6]}"
    with EngramStore(engram["url"], engram["platform"], user_index=1) as store:
        ok, short = PutOp(("users", owner), "k1", {"v": 1}), PutOp(("users",), "k2", {"v": 2})
        with pytest.raises(ValueError, match="user_index"):
            store.batch([ok, short])
        assert store.get(("users", owner), "k1") is None
        with pytest.raises(ValueError, match="at most 100"):
            store.batch([ok, SearchOp(("users", owner), query="x", offset=95, limit=10)])
        assert store.get(("users", owner), "k1") is None
