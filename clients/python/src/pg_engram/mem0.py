"""A Mem0-shaped facade: `Memory` and `AsyncMemory` answer Mem0's calls
(`add`, `search`, `get`, `get_all`, `update`, `delete`, `delete_all`,
`history`) with Mem0's result shapes, stored in engram.

    from pg_engram.mem0 import Memory
    m = Memory("http://localhost:8080", token)
    m.add("I'm vegetarian", user_id="alice")
    m.search("what do I eat?", user_id="alice")

- `user_id` is the engram user (a platform token acts for it; a user token
  is its own user). `agent_id` and `run_id` are kept in the memory's
  metadata and filter like Mem0's; without a `user_id` the memories belong
  to the token's own user.
- The facade's memories carry the tag `mem0`; it reads, revises and
  deletes those only (never a LangGraph item or another client's memory):
  `update` and `delete` of another memory's id raise ValueError, `get`
  answers None and `history` [].
- `add(..., infer=False)` stores every message except system ones as given.
  `add(..., infer=True)` (the default) stores each user message as a fact
  and resolves conflicts with engram's rules, within the call's scope (the
  facade's memories with the same agent_id and run_id): a new fact that
  conflicts with one of them revises it in place (UPDATE, its history
  kept), one that conflicts with several replaces them (ADD, and DELETE
  for each), an identical one is NONE; a conflict with anything outside
  the scope is stored alongside it (ADD). No LLM is called unless you give
  one.
- Optional: `Memory(url, token, llm={"base_url", "model", "api_key"})`
  names an OpenAI-compatible chat endpoint that extracts the facts of a
  conversation (user and assistant turns) before they go through the same
  rules. Off by default.
- `search` keeps the hits whose cosine similarity to the query is at least
  `threshold` (default 0.1, as Mem0's); `score` in its results is that
  similarity, and engram's ranking (relevance x trust x freshness) orders
  them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Union

import httpx

from ._client import AsyncClient, Client
from ._errors import NotFoundError
from ._models import Conflict, Memory as EngramMemory, Remembered, Revision, SearchHit
from ._requests import ListOptions, SearchOptions, UpdateOptions, user_id_checked

__all__ = ["Memory", "AsyncMemory"]

Messages = Union[str, Mapping[str, Any], Sequence[Mapping[str, Any]]]
# the ids Mem0 scopes by: user_id is the engram user, the others live in metadata
_SCOPES = ("agent_id", "run_id")
_PROMOTED = ("agent_id", "run_id", "actor_id", "role")
# the tag of the memories the facade stores: it reads, resolves and deletes
# those only (never a LangGraph item or a memory another client stored)
TAG = "mem0"
_OPS = {"eq": "$eq", "ne": "$ne", "gt": "$gt", "gte": "$gte", "lt": "$lt", "lte": "$lte", "in": "$in"}

EXTRACT_PROMPT = (
    "Extract the durable facts about the user from this conversation: preferences, plans, relationships, "
    "personal details. Write each as one short sentence in the third person (\"Prefers window seats\"). "
    'Answer with JSON only: {"facts": ["...", "..."]}, or {"facts": []} when there are none.')


# ---- the mapping, without I/O ------------------------------------------------

def normalize(messages: Messages) -> list[dict[str, Any]]:
    """Mem0's message forms (a string, one message, a list of messages) as a
    list of {"role", "content", "name"?}; content parts keep their text."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, Mapping):
        messages = [messages]
    if not isinstance(messages, Sequence):
        raise TypeError("messages must be a string, a message dict, or a list of message dicts")
    out = []
    for m in messages:
        if not isinstance(m, Mapping) or m.get("role") is None or m.get("content") is None:
            continue
        content = m["content"]
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text")
        if isinstance(content, str) and content.strip():
            out.append({**m, "content": content})
    return out


def _check_id(name: str, value: Any) -> str:
    text = str(value)
    if not text.strip():
        raise ValueError(f"Invalid {name}: cannot be empty or whitespace-only. Provide a valid identifier.")
    if text != text.strip():
        raise ValueError(f"Invalid {name}: {text!r} has surrounding spaces. Provide the identifier without them.")
    return text


def scope(user_id: Any = None, agent_id: Any = None, run_id: Any = None,
          filters: Mapping[str, Any] | None = None, *, required: bool = True) -> tuple[str | None, dict[str, Any]]:
    """The engram user and the metadata filter of a Mem0 call: ids given as
    arguments or inside `filters` (Mem0 2.x), the rest of `filters` in
    engram's filter syntax."""
    ids: dict[str, Any] = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
    rest: dict[str, Any] = {}
    for key, value in (filters or {}).items():
        if key in ids:
            if not isinstance(value, (str, int)) or value == "*":
                raise ValueError(f"filters: {key} must be one id (a string), not {value!r}")
            if ids[key] is not None and str(ids[key]) != str(value):
                raise ValueError(f"{key} is given twice, as {ids[key]!r} and in filters as {value!r}")
            ids[key] = value
        else:
            rest[key] = value
    ids = {k: _check_id(k, v) for k, v in ids.items() if v is not None}
    if required and not ids:
        raise ValueError("At least one of 'user_id', 'agent_id', or 'run_id' must be provided.")
    condition = translate_filters(rest)
    condition.update({k: ids[k] for k in _SCOPES if k in ids})
    return ids.get("user_id"), condition


def translate_filters(filters: Mapping[str, Any]) -> dict[str, Any]:
    """Mem0's filters ({"k": v}, {"k": {"gte": 1}}, {"AND": [...]}) as
    engram's ({"k": {"$gte": 1}}); OR and NOT have no engram equivalent."""
    out: dict[str, Any] = {}
    for key, value in filters.items():
        if key == "AND":
            for part in value:
                out.update(translate_filters(part))
        elif key in ("OR", "NOT"):
            raise ValueError(f"filters: {key} is not supported by engram; combine conditions with AND")
        elif isinstance(value, Mapping):
            cond: dict[str, Any] = {}
            for op, operand in value.items():
                name = op.lstrip("$")
                if name not in _OPS:
                    raise ValueError(f"filters: operator {op!r} on {key!r} is not supported "
                                     f"(use one of {', '.join(_OPS)})")
                cond[_OPS[name]] = operand
            out[key] = cond
        elif value == "*":
            continue
        else:
            out[key] = value
    return out


def _item(m: EngramMemory | SearchHit, score: float | None = None, with_score: bool = False) -> dict[str, Any]:
    metadata = dict(m.metadata or {})
    promoted = {k: metadata.pop(k) for k in _PROMOTED if k in metadata}
    created = m.created_at.isoformat() if m.created_at else None
    updated = getattr(m, "updated_at", None)
    d: dict[str, Any] = {"id": str(m.id), "memory": m.content, "hash": None, "metadata": metadata or None}
    if with_score:
        d["score"] = score
    d["created_at"] = created
    d["updated_at"] = updated.isoformat() if updated else created
    return {**d, **promoted}


class _Plan:
    """The engram calls behind each Mem0 call; shared by both facades."""

    @staticmethod
    def metadata(metadata: Mapping[str, Any] | None, ids: Mapping[str, Any], message: Mapping[str, Any]) -> dict[str, Any]:
        md = {k: v for k, v in (metadata or {}).items() if k not in ("user_id", *_PROMOTED)}
        md.update({k: ids[k] for k in _SCOPES if ids.get(k) is not None})
        md["role"] = message.get("role", "user")
        if message.get("name"):
            md["actor_id"] = message["name"]
        return md

    @staticmethod
    def search_options(user: str | None, condition: dict[str, Any], limit: int, threshold: float | None) -> SearchOptions:
        options: SearchOptions = {"limit": limit, "tags": [TAG]}
        if user is not None:
            options["user_id"] = user
        if condition:
            options["filter"] = condition
        if threshold is not None:
            options["min_similarity"] = threshold
        return options

    @staticmethod
    def ours(memory: EngramMemory) -> bool:
        """Whether the facade stored it (not a LangGraph item, not another
        client's memory)."""
        return TAG in memory.tags and memory.key is None

    @staticmethod
    def check(memory: EngramMemory, memory_id: str) -> EngramMemory:
        if not _Plan.ours(memory):
            raise ValueError(f"Memory with id {memory_id} not found (it is not one this facade stored)")
        return memory

    @staticmethod
    def mine(memory: EngramMemory, scope_ids: Mapping[str, Any]) -> bool:
        """Whether a stored memory is this facade's, in the call's scope
        (the same agent_id and run_id), so that a new fact may revise or
        replace it."""
        md = memory.metadata or {}
        return (TAG in memory.tags and memory.key is None and memory.status == "active"
                and all(md.get(k) == scope_ids.get(k) for k in _SCOPES))

    @staticmethod
    def settle(conflict: Conflict, mine: list[EngramMemory]) -> tuple[str, list[str]]:
        """How a conflicting fact is stored: "update" (revise the one memory
        of the facade's own it conflicts with), "supersede" (replace several),
        or "alongside" (it conflicts with nothing the facade may change)."""
        if len(mine) == 1 and len(conflict.conflicts) == 1:
            return "update", [str(mine[0].id)]
        if mine:
            return "supersede", [str(c.id) for c in mine]
        return "alongside", []

    @staticmethod
    def hits(hits: Sequence[SearchHit], threshold: float | None) -> list[dict[str, Any]]:
        """Mem0's results: the hits at least `threshold` similar to the query
        (a hit found by its words alone has no similarity), best first."""
        if threshold is None:
            return [_item(h, h.similarity, True) for h in hits]
        return [_item(h, h.similarity, True) for h in hits if h.similarity is not None and h.similarity >= threshold]

    @staticmethod
    def list_options(user: str | None, condition: dict[str, Any], limit: int) -> ListOptions:
        options: ListOptions = {"limit": min(max(limit, 1), 1000), "tags": [TAG]}
        if user is not None:
            options["user_id"] = user
        if condition:
            options["filter"] = condition
        return options

    @staticmethod
    def history(memory: EngramMemory, revisions: list[Revision]) -> list[dict[str, Any]]:
        md = memory.metadata or {}
        created = memory.created_at.isoformat()
        rows: list[dict[str, Any]] = []
        previous: str | None = None
        for r in revisions:
            at = (r.written_at or memory.created_at).isoformat()
            rows.append({"id": f"{memory.id}:{r.revision}", "memory_id": str(memory.id), "old_memory": previous,
                         "new_memory": r.content, "event": "ADD" if previous is None else "UPDATE",
                         "created_at": created, "updated_at": None if previous is None else at,
                         "is_deleted": False, "actor_id": md.get("actor_id"), "role": md.get("role")})
            previous = r.content
        if memory.status != "active":
            rows.append({"id": f"{memory.id}:deleted", "memory_id": str(memory.id), "old_memory": previous,
                         "new_memory": None, "event": "DELETE", "created_at": created,
                         "updated_at": (memory.updated_at or memory.created_at).isoformat(),
                         "is_deleted": True, "actor_id": md.get("actor_id"), "role": md.get("role")})
        return rows


def extraction_request(llm: Mapping[str, Any], messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any], dict[str, str]]:
    """The chat-completions call that extracts facts: (url, body, headers)."""
    for key in ("base_url", "model"):
        if not llm.get(key):
            raise ValueError(f"llm needs {key!r} (an OpenAI-compatible endpoint: base_url, model, api_key)")
    conversation = "\n".join(f"{m['role']}: {m['content']}" for m in messages if m["role"] != "system")
    body = {"model": llm["model"], "temperature": 0, "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": EXTRACT_PROMPT}, {"role": "user", "content": conversation}]}
    headers = {"Authorization": f"Bearer {llm['api_key']}"} if llm.get("api_key") else {}
    return str(llm["base_url"]).rstrip("/") + "/chat/completions", body, headers


def extracted_facts(answer: Mapping[str, Any]) -> list[str]:
    """The facts in a chat-completions answer to `extraction_request`."""
    try:
        text = answer["choices"][0]["message"]["content"]
        facts = json.loads(text)["facts"]
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise ValueError(f"the LLM's answer is not {{\"facts\": [...]}}: {e}") from e
    return [f.strip() for f in facts if isinstance(f, str) and f.strip()]


class Memory:
    """Mem0's `Memory` on engram: `Memory(url, token)`."""

    def __init__(self, url: str, token: str | None = None, *, llm: Mapping[str, Any] | None = None,
                 **client_options: Any) -> None:
        self.client = Client(url, token, **client_options)
        self.llm = dict(llm) if llm else None

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, messages: Messages, *, user_id: str | None = None, agent_id: str | None = None,
            run_id: str | None = None, metadata: Mapping[str, Any] | None = None,
            infer: bool = True) -> dict[str, Any]:
        user, _ = scope(user_id, agent_id, run_id, required=False)
        ids = {k: _check_id(k, v) for k, v in (("agent_id", agent_id), ("run_id", run_id)) if v is not None}
        msgs = [m for m in normalize(messages) if m["role"] != "system"]
        results: list[dict[str, Any]] = []
        if not infer:
            for m in msgs:
                r = self.client.remember(m["content"], metadata=_Plan.metadata(metadata, ids, m), tags=[TAG],
                                         force=True, user_id=user)
                assert isinstance(r, Remembered)
                results.append({"id": str(r.id), "memory": m["content"], "event": "ADD" if r.created else "NONE",
                                "actor_id": m.get("name"), "role": m["role"]})
            return {"results": results}
        for fact, m in self._facts(msgs):
            results += self._store_fact(fact, _Plan.metadata(metadata, ids, m), user)
        return {"results": results}

    def _facts(self, msgs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        if self.llm is None:
            return [(m["content"], m) for m in msgs if m["role"] == "user"]
        url, body, headers = extraction_request(self.llm, msgs)
        r = httpx.post(url, json=body, headers=headers, timeout=self.llm.get("timeout", 60))
        r.raise_for_status()
        return [(f, {"role": "user"}) for f in extracted_facts(r.json())]

    def _store_fact(self, fact: str, metadata: dict[str, Any], user: str | None) -> list[dict[str, Any]]:
        r = self.client.remember(fact, metadata=metadata, tags=[TAG], user_id=user)
        if isinstance(r, Remembered):
            return [{"id": str(r.id), "memory": fact, "event": "ADD" if r.created else "NONE"}]
        stored_now = [self.client.recall(c.id, user_id=user) for c in r.conflicts]
        mine = [m for m in stored_now if _Plan.mine(m, metadata)]
        how, ids = _Plan.settle(r, mine)
        if how == "update":
            self.client.update(ids[0], content=fact, reason="a newer statement", user_id=user)
            return [{"id": ids[0], "memory": fact, "event": "UPDATE", "previous_memory": mine[0].content}]
        stored = self.client.resolve(r, supersede=ids or None, force=len(mine) < len(r.conflicts))
        return [{"id": str(stored.id), "memory": fact, "event": "ADD"}] + [
            {"id": str(m.id), "memory": m.content, "event": "DELETE"} for m in mine]

    def search(self, query: str, *, user_id: str | None = None, agent_id: str | None = None,
               run_id: str | None = None, filters: Mapping[str, Any] | None = None, limit: int | None = None,
               top_k: int | None = None, threshold: float | None = 0.1) -> dict[str, Any]:
        user, condition = scope(user_id, agent_id, run_id, filters)
        hits = self.client.search(query, **_Plan.search_options(user, condition, limit or top_k or 20, threshold))
        return {"results": _Plan.hits(hits, threshold)}

    def get(self, memory_id: str, *, user_id: str | None = None) -> dict[str, Any] | None:
        user_id_checked(user_id)
        try:
            m = self.client.recall(memory_id, user_id=user_id)
        except (NotFoundError, ValueError):  # unknown, or not an id at all
            return None
        return _item(m, None, True) if m.status == "active" and _Plan.ours(m) else None

    def get_all(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
                filters: Mapping[str, Any] | None = None, limit: int | None = None,
                top_k: int | None = None) -> dict[str, Any]:
        user, condition = scope(user_id, agent_id, run_id, filters)
        n = limit or top_k or 100
        page = self.client.list_page(**_Plan.list_options(user, condition, n))
        return {"results": [_item(m) for m in page.memories[:n]]}

    def update(self, memory_id: str, text: str | None = None, metadata: Mapping[str, Any] | None = None, *,
               data: str | None = None, user_id: str | None = None) -> dict[str, str]:
        content = text if text is not None else data
        current = _Plan.check(self.client.recall(memory_id, user_id=user_id), memory_id)
        merged = None if metadata is None else {**current.metadata, **metadata}
        self.client.update(memory_id, **_changes(content, merged, user_id))
        return {"message": "Memory updated successfully!"}

    def delete(self, memory_id: str, *, user_id: str | None = None) -> dict[str, str]:
        _Plan.check(self.client.recall(memory_id, user_id=user_id), memory_id)
        self.client.forget(memory_id, user_id=user_id)
        return {"message": "Memory deleted successfully!"}

    def delete_all(self, user_id: str | None = None, agent_id: str | None = None,
                   run_id: str | None = None) -> dict[str, str]:
        user, condition = scope(user_id, agent_id, run_id)
        for m in list(self.client.list(**_Plan.list_options(user, condition, 1000))):
            self.client.forget(m.id, user_id=user)
        return {"message": "Memories deleted successfully!"}

    def history(self, memory_id: str, *, user_id: str | None = None) -> list[dict[str, Any]]:
        user_id_checked(user_id)
        try:
            memory = self.client.recall(memory_id, user_id=user_id)
        except (NotFoundError, ValueError):  # unknown, or not an id at all
            return []
        if not _Plan.ours(memory):
            return []
        return _Plan.history(memory, self.client.revisions(memory_id, user_id=user_id))


class AsyncMemory:
    """Mem0's `AsyncMemory` on engram: `AsyncMemory(url, token)`; the calls
    of `Memory`, awaited."""

    def __init__(self, url: str, token: str | None = None, *, llm: Mapping[str, Any] | None = None,
                 **client_options: Any) -> None:
        self.client = AsyncClient(url, token, **client_options)
        self.llm = dict(llm) if llm else None

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def add(self, messages: Messages, *, user_id: str | None = None, agent_id: str | None = None,
                  run_id: str | None = None, metadata: Mapping[str, Any] | None = None,
                  infer: bool = True) -> dict[str, Any]:
        user, _ = scope(user_id, agent_id, run_id, required=False)
        ids = {k: _check_id(k, v) for k, v in (("agent_id", agent_id), ("run_id", run_id)) if v is not None}
        msgs = [m for m in normalize(messages) if m["role"] != "system"]
        results: list[dict[str, Any]] = []
        if not infer:
            for m in msgs:
                r = await self.client.remember(m["content"], metadata=_Plan.metadata(metadata, ids, m),
                                               tags=[TAG], force=True, user_id=user)
                assert isinstance(r, Remembered)
                results.append({"id": str(r.id), "memory": m["content"], "event": "ADD" if r.created else "NONE",
                                "actor_id": m.get("name"), "role": m["role"]})
            return {"results": results}
        for fact, m in await self._facts(msgs):
            results += await self._store_fact(fact, _Plan.metadata(metadata, ids, m), user)
        return {"results": results}

    async def _facts(self, msgs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        if self.llm is None:
            return [(m["content"], m) for m in msgs if m["role"] == "user"]
        url, body, headers = extraction_request(self.llm, msgs)
        async with httpx.AsyncClient(timeout=self.llm.get("timeout", 60)) as http:
            r = await http.post(url, json=body, headers=headers)
        r.raise_for_status()
        return [(f, {"role": "user"}) for f in extracted_facts(r.json())]

    async def _store_fact(self, fact: str, metadata: dict[str, Any], user: str | None) -> list[dict[str, Any]]:
        r = await self.client.remember(fact, metadata=metadata, tags=[TAG], user_id=user)
        if isinstance(r, Remembered):
            return [{"id": str(r.id), "memory": fact, "event": "ADD" if r.created else "NONE"}]
        stored_now = [await self.client.recall(c.id, user_id=user) for c in r.conflicts]
        mine = [m for m in stored_now if _Plan.mine(m, metadata)]
        how, ids = _Plan.settle(r, mine)
        if how == "update":
            await self.client.update(ids[0], content=fact, reason="a newer statement", user_id=user)
            return [{"id": ids[0], "memory": fact, "event": "UPDATE", "previous_memory": mine[0].content}]
        stored = await self.client.resolve(r, supersede=ids or None, force=len(mine) < len(r.conflicts))
        return [{"id": str(stored.id), "memory": fact, "event": "ADD"}] + [
            {"id": str(m.id), "memory": m.content, "event": "DELETE"} for m in mine]

    async def search(self, query: str, *, user_id: str | None = None, agent_id: str | None = None,
                     run_id: str | None = None, filters: Mapping[str, Any] | None = None, limit: int | None = None,
                     top_k: int | None = None, threshold: float | None = 0.1) -> dict[str, Any]:
        user, condition = scope(user_id, agent_id, run_id, filters)
        hits = await self.client.search(query, **_Plan.search_options(user, condition, limit or top_k or 20,
                                                                      threshold))
        return {"results": _Plan.hits(hits, threshold)}

    async def get(self, memory_id: str, *, user_id: str | None = None) -> dict[str, Any] | None:
        user_id_checked(user_id)
        try:
            m = await self.client.recall(memory_id, user_id=user_id)
        except (NotFoundError, ValueError):  # unknown, or not an id at all
            return None
        return _item(m, None, True) if m.status == "active" and _Plan.ours(m) else None

    async def get_all(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
                      filters: Mapping[str, Any] | None = None, limit: int | None = None,
                      top_k: int | None = None) -> dict[str, Any]:
        user, condition = scope(user_id, agent_id, run_id, filters)
        n = limit or top_k or 100
        page = await self.client.list_page(**_Plan.list_options(user, condition, n))
        return {"results": [_item(m) for m in page.memories[:n]]}

    async def update(self, memory_id: str, text: str | None = None, metadata: Mapping[str, Any] | None = None, *,
                     data: str | None = None, user_id: str | None = None) -> dict[str, str]:
        content = text if text is not None else data
        current = _Plan.check(await self.client.recall(memory_id, user_id=user_id), memory_id)
        merged = None if metadata is None else {**current.metadata, **metadata}
        await self.client.update(memory_id, **_changes(content, merged, user_id))
        return {"message": "Memory updated successfully!"}

    async def delete(self, memory_id: str, *, user_id: str | None = None) -> dict[str, str]:
        _Plan.check(await self.client.recall(memory_id, user_id=user_id), memory_id)
        await self.client.forget(memory_id, user_id=user_id)
        return {"message": "Memory deleted successfully!"}

    async def delete_all(self, user_id: str | None = None, agent_id: str | None = None,
                         run_id: str | None = None) -> dict[str, str]:
        user, condition = scope(user_id, agent_id, run_id)
        found = [m async for m in self.client.list(**_Plan.list_options(user, condition, 1000))]
        for m in found:
            await self.client.forget(m.id, user_id=user)
        return {"message": "Memories deleted successfully!"}

    async def history(self, memory_id: str, *, user_id: str | None = None) -> list[dict[str, Any]]:
        user_id_checked(user_id)
        try:
            memory = await self.client.recall(memory_id, user_id=user_id)
        except (NotFoundError, ValueError):  # unknown, or not an id at all
            return []
        if not _Plan.ours(memory):
            return []
        return _Plan.history(memory, await self.client.revisions(memory_id, user_id=user_id))


def _changes(content: str | None, metadata: Mapping[str, Any] | None, user_id: str | None) -> UpdateOptions:
    changes: UpdateOptions = {"user_id": user_id}
    if content is not None:
        changes["content"] = content
    if metadata is not None:
        changes["metadata"] = metadata
    return changes


