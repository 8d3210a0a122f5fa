"""LangGraph's long-term memory store on engram: `EngramStore` (sync) and
`AsyncEngramStore` implement `langgraph.store.base.BaseStore` on keyed
memories, so a graph compiled with `store=EngramStore(url, token)` keeps
its items in engram, isolated per user, with revisions and TTLs.

- An item is the keyed memory at (namespace, key); its value is the
  memory's `value`, and the text the server embeds is taken from the
  value's `index` fields (LangGraph's `IndexConfig`; default: the whole
  value). `put(..., index=False)` stores without an embedding (the item is
  still found by its words and filters).
- `user_index` is the position in a namespace that names the engram user
  the item belongs to (a platform token acts for that user); None keeps
  every item under the token's own owner.
- TTLs are LangGraph's (minutes; `refresh_on_read`); engram stops returning
  an item when its TTL runs out, and its maintenance job purges it.

Search with a query asks engram's hybrid search (meaning and words) and
returns hits best first, with `score` engram's ranking score; without a
query it lists items by last update, newest first."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from typing import Any

from langgraph.store.base import (BaseStore, GetOp, IndexConfig, InvalidNamespaceError, Item, ListNamespacesOp,
                                  MatchCondition, Op, PutOp, Result, SearchItem, SearchOp, TTLConfig,
                                  validate_op_namespace)
from langgraph.store.base.embed import get_text_at_path, tokenize_path

from ._client import AsyncClient, Client
from ._models import Item as EngramItem
from ._models import Memory, SearchHit
from ._requests import ListOptions, PutOptions, SearchOptions, labels, user_id_checked

__all__ = ["EngramStore", "AsyncEngramStore"]

# the most hits one search returns, and items one list page holds
_SEARCH_MAX = 100
_PAGE_MAX = 1000


class _Mapping:
    """How LangGraph's ops become engram calls; no I/O, shared by both stores."""

    def __init__(self, user_index: int | None, index: IndexConfig | None, ttl: TTLConfig | None) -> None:
        if index is not None:
            unsupported = sorted(set(index) - {"fields", "dims"})
            if unsupported:
                raise ValueError(f"index: {', '.join(unsupported)} not supported: engram embeds on the server with "
                                 "its recorded model; give only `fields` (what to embed)")
        self.user_index = user_index
        self.fields: list[str] = list((index or {}).get("fields") or ["$"])
        self.ttl = ttl

    def owner(self, namespace: tuple[str, ...], what: str) -> str | None:
        """The user an op on `namespace` acts for (None: the token's owner)."""
        if self.user_index is None:
            return None
        if len(namespace) <= self.user_index or namespace[self.user_index] == "*":
            raise InvalidNamespaceError(
                f"{what} {namespace!r}: its label at position {self.user_index} names the user (user_index); "
                "give a namespace that reaches it")
        return namespace[self.user_index]

    def put(self, op: PutOp) -> PutOptions:
        fields = self.fields if op.index is None else (op.index or [])
        texts = [t for f in fields for t in get_text_at_path(op.value, tokenize_path(f) if f != "$" else f)]
        options: PutOptions = {"value": op.value}
        if (user := self.owner(op.namespace, "put")) is not None:
            options["user_id"] = user
        if texts:
            options["content"] = "\n".join(texts)
        else:
            options["content"] = json.dumps(op.value, sort_keys=True, ensure_ascii=False)
            options["index"] = False
        if op.index is False:
            options["index"] = False
        if op.ttl is not None:
            options["ttl"] = float(op.ttl) * 60.0
        return options

    def search(self, op: SearchOp) -> SearchOptions:
        options: SearchOptions = {"namespace_prefix": op.namespace_prefix,
                                  "limit": op.offset + op.limit,
                                  # every item that passes the filter is ranked, as a k-NN store does
                                  "min_similarity": -1.0, "refresh_ttl": op.refresh_ttl}
        if (user := self.owner(op.namespace_prefix, "search")) is not None:
            options["user_id"] = user
        if op.filter:
            options["filter"] = op.filter
        return options

    def listing(self, op: SearchOp) -> ListOptions:
        options: ListOptions = {"namespace_prefix": op.namespace_prefix, "order_by": "updated_at",
                                "descending": True, "limit": min(op.offset + op.limit, _PAGE_MAX) or 1,
                                "refresh_ttl": op.refresh_ttl}
        if (user := self.owner(op.namespace_prefix, "search")) is not None:
            options["user_id"] = user
        if op.filter:
            options["filter"] = op.filter
        return options

    def namespaces(self, op: ListNamespacesOp) -> tuple[dict[str, Any], bool]:
        """The namespaces call, and whether the op must be finished here
        (wildcards, or several conditions of a kind: fetch all, then match)."""
        prefixes = [_path(c) for c in op.match_conditions or () if c.match_type == "prefix"]
        suffixes = [_path(c) for c in op.match_conditions or () if c.match_type == "suffix"]
        simple = len(prefixes) <= 1 and len(suffixes) <= 1 and not any("*" in p for p in prefixes + suffixes)
        literal: tuple[str, ...] = ()
        if prefixes:
            for label in prefixes[0]:
                if label == "*":
                    break
                literal += (label,)
        options: dict[str, Any] = {"user_id": self.owner(literal, "list_namespaces prefix")}
        if literal:
            options["prefix"] = literal
        if simple:
            if suffixes:
                options["suffix"] = suffixes[0]
            if op.max_depth is not None:
                options["max_depth"] = op.max_depth
            options.update(limit=op.limit, offset=op.offset)
        return options, not simple

    @staticmethod
    def finish_namespaces(op: ListNamespacesOp, found: Iterable[tuple[str, ...]]) -> list[tuple[str, ...]]:
        def matches(ns: tuple[str, ...], c: MatchCondition) -> bool:
            path = _path(c)
            if len(path) > len(ns):
                return False
            part = ns[:len(path)] if c.match_type == "prefix" else ns[len(ns) - len(path):]
            return all(p == "*" or p == n for p, n in zip(path, part))

        kept = {ns[:op.max_depth] if op.max_depth is not None else ns
                for ns in found if all(matches(ns, c) for c in op.match_conditions or ())}
        return sorted(kept)[op.offset:op.offset + op.limit]

    @staticmethod
    def item(i: EngramItem) -> Item:
        return Item(value=i.value if isinstance(i.value, dict) else {}, key=i.key, namespace=i.namespace,
                    created_at=i.created_at, updated_at=i.updated_at)

    @staticmethod
    def listed(m: Memory) -> SearchItem:
        return SearchItem(namespace=m.namespace or (), key=m.key or "", value=m.value or {},
                          created_at=m.created_at, updated_at=m.updated_at or m.created_at)

    @staticmethod
    def hit(h: SearchHit) -> SearchItem:
        # a hit carries its creation time; it stands for the update time too
        created = h.created_at or h.valid_from
        assert created is not None
        return SearchItem(namespace=h.namespace or (), key=h.key or "", value=h.value or {}, created_at=created,
                          updated_at=created, score=h.score)


def _path(c: MatchCondition) -> tuple[str, ...]:
    """A condition's labels (a lone string is one label)."""
    return (c.path,) if isinstance(c.path, str) else tuple(c.path)


def _validated(ops: Iterable[Op], mapping: _Mapping) -> list[Op]:
    """Every op checked before the first runs (its labels, the user it acts
    for, what a search can return): a batch with a bad op changes nothing."""
    checked = list(ops)
    for op in checked:
        validate_op_namespace(op)
        if isinstance(op, (GetOp, PutOp)):
            labels(op.namespace)
            user_id_checked(mapping.owner(op.namespace, "namespace"))
        elif isinstance(op, SearchOp):
            labels(op.namespace_prefix, "namespace_prefix")
            user_id_checked(mapping.owner(op.namespace_prefix, "search"))
            if _query(op) is not None and op.offset + op.limit > _SEARCH_MAX:
                raise ValueError(f"search with a query returns at most {_SEARCH_MAX} hits: offset + limit is "
                                 f"{op.offset + op.limit}")
        elif isinstance(op, ListNamespacesOp):
            for c in op.match_conditions or ():
                labels([label for label in _path(c) if label != "*"], "match condition")
            user_id_checked(mapping.namespaces(op)[0].get("user_id"))
    return checked


def _query(op: SearchOp) -> str | None:
    return op.query if op.query and op.query.strip() else None


class EngramStore(BaseStore):
    """A LangGraph `BaseStore` on engram's keyed memories (synchronous).

    `EngramStore(url, token, user_index=None, index=None, ttl=None)`: `url`
    is engram-mcp's base URL; `user_index` the position in a namespace that
    names the engram user (a platform token), None: the token's own owner;
    `index` LangGraph's IndexConfig (only `fields` is used: the server
    embeds with its model); `ttl` LangGraph's TTLConfig (minutes)."""

    supports_ttl = True

    def __init__(self, url: str, token: str | None = None, *, user_index: int | None = None,
                 index: IndexConfig | None = None, ttl: TTLConfig | None = None, **client_options: Any) -> None:
        self._map = _Mapping(user_index, index, ttl)
        self.index_config = index
        self.ttl_config = ttl
        self.client = Client(url, token, **client_options)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> EngramStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(op) for op in _validated(ops, self._map)]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        m, c = self._map, self.client
        if isinstance(op, GetOp):
            got = c.get(op.namespace, op.key, refresh_ttl=op.refresh_ttl, user_id=m.owner(op.namespace, "get"))
            return None if got is None else m.item(got)
        if isinstance(op, PutOp):
            if op.value is None:
                c.delete(op.namespace, op.key, user_id=m.owner(op.namespace, "delete"))
            else:
                c.put(op.namespace, op.key, **m.put(op))
            return None
        if isinstance(op, SearchOp):
            query = _query(op)
            if query is not None:
                return [m.hit(h) for h in c.search(query, **m.search(op))][op.offset:]
            listed: list[SearchItem] = []
            for memory in c.list(**m.listing(op)):
                listed.append(m.listed(memory))
                if len(listed) >= op.offset + op.limit:
                    break
            return listed[op.offset:]
        if isinstance(op, ListNamespacesOp):
            options, finish = m.namespaces(op)
            if not finish:
                return c.namespaces(**options)
            return m.finish_namespaces(op, self._all_namespaces(options))
        raise TypeError(f"unknown op {op!r}")

    def _all_namespaces(self, options: dict[str, Any]) -> list[tuple[str, ...]]:
        found: list[tuple[str, ...]] = []
        while True:
            page = self.client.namespaces(**options, limit=_PAGE_MAX, offset=len(found))
            found += page
            if len(page) < _PAGE_MAX:
                return found


class AsyncEngramStore(BaseStore):
    """`EngramStore` for asyncio: the same mapping over `AsyncClient`. Its
    sync methods (`get`, `put`, ...) work from other threads, run on the
    event loop the store was created on; on that loop's own thread they
    raise `asyncio.InvalidStateError` (they would block it): await `aget`,
    `aput`, ... there."""

    supports_ttl = True

    def __init__(self, url: str, token: str | None = None, *, user_index: int | None = None,
                 index: IndexConfig | None = None, ttl: TTLConfig | None = None, **client_options: Any) -> None:
        self._map = _Mapping(user_index, index, ttl)
        self.index_config = index
        self.ttl_config = ttl
        self.client = AsyncClient(url, token, **client_options)
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> AsyncEngramStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None or self._loop is None:
            raise asyncio.InvalidStateError(
                "AsyncEngramStore's synchronous methods run from other threads than the event loop's, on the loop "
                "it was created on; in async code await abatch, aget, aput, asearch ... (or use EngramStore)")
        return asyncio.run_coroutine_threadsafe(self.abatch(_validated(ops, self._map)), self._loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return [await self._run(op) for op in _validated(ops, self._map)]

    async def _run(self, op: Op) -> Result:
        m, c = self._map, self.client
        if isinstance(op, GetOp):
            got = await c.get(op.namespace, op.key, refresh_ttl=op.refresh_ttl, user_id=m.owner(op.namespace, "get"))
            return None if got is None else m.item(got)
        if isinstance(op, PutOp):
            if op.value is None:
                await c.delete(op.namespace, op.key, user_id=m.owner(op.namespace, "delete"))
            else:
                await c.put(op.namespace, op.key, **m.put(op))
            return None
        if isinstance(op, SearchOp):
            query = _query(op)
            if query is not None:
                return [m.hit(h) for h in await c.search(query, **m.search(op))][op.offset:]
            listed: list[SearchItem] = []
            async for memory in c.list(**m.listing(op)):
                listed.append(m.listed(memory))
                if len(listed) >= op.offset + op.limit:
                    break
            return listed[op.offset:]
        if isinstance(op, ListNamespacesOp):
            options, finish = m.namespaces(op)
            if not finish:
                return await c.namespaces(**options)
            found: list[tuple[str, ...]] = []
            while True:
                page = await c.namespaces(**options, limit=_PAGE_MAX, offset=len(found))
                found += page
                if len(page) < _PAGE_MAX:
                    return m.finish_namespaces(op, found)
        raise TypeError(f"unknown op {op!r}")


