"""Long-term memory for a LangGraph agent, kept in engram.

A graph whose node recalls what it knows about the user before it answers
and remembers what the user tells it. Memories live in the user's own
engram namespace ("memories", <user_id>), so they outlast the
conversation (thread) and never reach another user. The node needs no LLM
here; put your model call where `reply` is built.

    ENGRAM_URL=http://localhost:8080 ENGRAM_TOKEN=<a platform token> python examples/langgraph_memory.py
"""

import os
import uuid

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from langchain_core.runnables import RunnableConfig

from pg_engram.langgraph import EngramStore


def chat(state: MessagesState, config: RunnableConfig, *, store: BaseStore) -> dict:
    user_id = config["configurable"]["user_id"]
    namespace = ("memories", user_id)
    said = state["messages"][-1].content
    known = store.search(namespace, query=said, limit=3)
    if said.lower().startswith("remember"):
        store.put(namespace, str(uuid.uuid4()), {"text": said.split(" ", 1)[1]})
    reply = "I know: " + "; ".join(item.value["text"] for item in known) if known else "Nothing yet."
    return {"messages": [{"role": "assistant", "content": reply}]}


def build(store: BaseStore):
    graph = StateGraph(MessagesState)
    graph.add_node("chat", chat)
    graph.add_edge(START, "chat")
    return graph.compile(checkpointer=InMemorySaver(), store=store)


def main() -> None:
    # user_index=1: the second label of a namespace names the engram user,
    # so one platform token serves every user of the app
    with EngramStore(os.environ["ENGRAM_URL"], os.environ["ENGRAM_TOKEN"], user_index=1,
                     index={"fields": ["text"]}) as store:
        app = build(store)
        user = f"user-{uuid.uuid4().hex[:8]}"
        first = {"configurable": {"thread_id": "monday", "user_id": user}}
        app.invoke({"messages": [{"role": "user", "content": "remember I prefer aisle seats"}]}, first)
        # a new conversation: the thread is new, the memory is not
        later = {"configurable": {"thread_id": "friday", "user_id": user}}
        answer = app.invoke({"messages": [{"role": "user", "content": "book me a seat on the train"}]}, later)
        print(answer["messages"][-1].content)


if __name__ == "__main__":
    main()
