"""`Client` and `AsyncClient`: the same calls (see `_requests`), sent with
httpx, retried with backoff when the server answers 503 (it says when
with Retry-After) or a connection breaks before an idempotent call was
answered."""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import hashlib
import random
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import httpx
from typing_extensions import Self, Unpack

from . import _requests as rq
from ._errors import ConnectionFailedError, EngramError, error_from
from ._models import (Conflict, Embeddings, Entity, Erased, Item, Memory, MemoryPage, PutResult, Remembered,
                      Revision, SearchResults, Token, Updated)
from ._requests import Id, Namespace, Request, Seconds

T = TypeVar("T")

RETRY_STATUSES = frozenset({502, 503, 504})
# SQLSTATEs of a 503 whose transaction was rolled back: nothing was written,
# so even a call that is not idempotent may be sent again
ROLLED_BACK = frozenset({"57014", "55P03", "40001", "40P01", "25006"})


def _retry_after(response: httpx.Response | None) -> float | None:
    """Seconds from a Retry-After header (seconds or an HTTP date)."""
    value = response.headers.get("retry-after") if response is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - datetime.now(timezone.utc)).total_seconds())
    except (TypeError, ValueError):
        return None


class _Policy:
    """Connection settings and the retry rule both clients share."""

    def __init__(self, url: str, token: str | None, user_id: str | None, timeout: float, max_retries: int,
                 backoff: float, max_wait: float) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be engram-mcp's base URL, such as http://localhost:8080, not {url!r}")
        self.url = url.rstrip("/")
        self.headers = {"Accept": "application/json", "User-Agent": "pg-engram-python"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.identity = hashlib.sha256((token or "").encode()).hexdigest()[:16]
        self.user_id = rq.user_id_checked(user_id)
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_wait = max_wait

    def params(self, req: Request[Any]) -> httpx.QueryParams:
        params = req.params
        if self.user_id is not None and not any(k == "user_id" for k, _ in params):
            params = [*params, ("user_id", self.user_id)]
        return httpx.QueryParams(tuple(params))

    def acting(self, options: rq.RememberOptions) -> rq.RememberOptions:
        """The options with the user the call acts for written in, so that a
        Conflict remembers whose it is."""
        if options.get("user_id") is None and self.user_id is not None:
            return {**options, "user_id": self.user_id}
        return options

    def found(self, result: Remembered | Conflict) -> Remembered | Conflict:
        """A conflict marked with the token that found it."""
        return dataclasses.replace(result, found_by=self.identity) if isinstance(result, Conflict) else result

    def own(self, conflict: Conflict) -> Conflict:
        """The conflict, when resolving it here stores it for the user it was
        found for. One found for a named user is resent naming that user; one
        found for the token's owner needs that token, and no other user."""
        if conflict.user_id is None and (self.user_id is not None or
                                         (conflict.found_by is not None and conflict.found_by != self.identity)):
            raise ValueError("this conflict is the token owner's: resolve it with the client (token) that found it, "
                             "acting for no other user")
        return conflict

    def delay(self, attempt: int, response: httpx.Response | None) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None: give up."""
        if attempt >= self.max_retries:
            return None
        told = _retry_after(response)
        wait = told if told is not None else self.backoff * (2 ** attempt) * (0.5 + random.random())
        return min(wait, self.max_wait)

    def retryable(self, req: Request[Any], response: httpx.Response | None, error: Exception | None) -> bool:
        """Whether to send `req` again. An idempotent call goes again after
        any 502/503/504 or a broken connection; one that is not (remember,
        update, flag, minting a token) only when it surely was not applied:
        the connection was never made, or engram's 503 names a rolled-back
        transaction."""
        if response is not None:
            if response.status_code not in RETRY_STATUSES:
                return False
            return req.idempotent or (response.status_code == 503 and _rolled_back(response))
        return isinstance(error, httpx.ConnectError) or (req.idempotent and isinstance(error, httpx.TransportError))

    @staticmethod
    def maybe_applied(response: httpx.Response | None, error: Exception | None) -> bool:
        """Whether an attempt about to be repeated may have been applied: its
        answer was lost, or came from a proxy, or engram's 503 does not say
        the transaction was rolled back."""
        if response is None:
            return not isinstance(error, httpx.ConnectError)
        return response.status_code in (502, 504) or (response.status_code == 503 and not _rolled_back(response))

    @staticmethod
    def read(req: Request[T], response: httpx.Response, maybe_applied: bool = False) -> T:
        status = response.status_code
        if maybe_applied and status == 404 and req.on_gone is not None and _sqlstate(response) == "P0002":
            return req.on_gone()  # an earlier attempt did it and its answer was lost
        body: Any = None
        if response.content:
            try:
                body = response.json()
            except ValueError:
                body = response.text
        if 200 <= status < 300 or status in req.accept:
            return req.parse(status, body)
        raise error_from(status, body)


def _sqlstate(response: httpx.Response) -> str:
    try:
        return str(response.json().get("sqlstate") or "")
    except (ValueError, AttributeError):
        return ""


def _rolled_back(response: httpx.Response) -> bool:
    sqlstate = _sqlstate(response)
    return sqlstate in ROLLED_BACK or sqlstate.startswith("53")


def _gave_up(error: Exception) -> EngramError:
    return ConnectionFailedError(0, f"no answer from engram-mcp: {error!r}")


class Client:
    """engram's /v1 API, synchronous.

    `url` is engram-mcp's base URL (`http://localhost:8080`) and `token` a
    token from `engram-mcp token create` or `create_token`. A platform token
    names the user per call (`user_id=`) or for the whole client
    (`Client(..., user_id="alice")`, or `client.as_user("alice")`)."""

    def __init__(self, url: str, token: str | None = None, *, user_id: str | None = None, timeout: float = 30.0,
                 max_retries: int = 3, backoff: float = 0.5, max_wait: float = 30.0,
                 http_client: httpx.Client | None = None) -> None:
        self._policy = _Policy(url, token, user_id, timeout, max_retries, backoff, max_wait)
        self._http = http_client or httpx.Client(timeout=timeout)
        self._owns_http = http_client is None

    def as_user(self, user_id: str) -> Client:
        """The same connection, acting for `user_id` (platform tokens)."""
        p = self._policy
        other = Client.__new__(Client)
        other._policy = _Policy(p.url, None, user_id, p.timeout, p.max_retries, p.backoff, p.max_wait)
        other._policy.headers, other._policy.identity = p.headers, p.identity
        other._http, other._owns_http = self._http, False
        return other

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, req: Request[T]) -> T:
        p, attempt, maybe_applied = self._policy, 0, False
        while True:
            response: httpx.Response | None = None
            try:
                response = self._http.request(req.method, p.url + req.path, params=p.params(req), json=req.json,
                                              headers=p.headers)
                error: Exception | None = None
            except httpx.TransportError as e:
                error = e
            if p.retryable(req, response, error) and (wait := p.delay(attempt, response)) is not None:
                maybe_applied = maybe_applied or p.maybe_applied(response, error)
                time.sleep(wait)
                attempt += 1
                continue
            if response is None:
                raise _gave_up(error or RuntimeError("no response"))
            return p.read(req, response, maybe_applied)

    # memories
    def remember(self, content: str, **options: Unpack[rq.RememberOptions]) -> Remembered | Conflict:
        """Store a memory. A conflict with stored memories writes nothing and
        returns the `Conflict`: pass it to `resolve`."""
        return self._policy.found(self._send(rq.remember(content, self._policy.acting(options))))

    def resolve(self, conflict: Conflict, *, supersede: Sequence[Id] | None = None, force: bool = False) -> Remembered:
        """Store a conflicting memory: replacing exactly the `supersede` ids, or alongside them (`force`)."""
        return self._send(rq.resolve(self._policy.own(conflict), supersede, force))

    def search(self, query: str, **options: Unpack[rq.SearchOptions]) -> SearchResults:
        return self._send(rq.search(query, options))

    def recall(self, memory_id: Id, *, user_id: str | None = None) -> Memory:
        return self._send(rq.recall(memory_id, user_id))

    def list(self, **options: Unpack[rq.ListOptions]) -> Iterator[Memory]:
        """Every matching memory, fetched a page (`limit`, default 50) at a time."""
        cursor: str | None = None
        while True:
            page = self.list_page(cursor, **options)
            yield from page.memories
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def list_page(self, cursor: str | None = None, **options: Unpack[rq.ListOptions]) -> MemoryPage:
        return self._send(rq.list_page(options, cursor))

    def update(self, memory_id: Id, **options: Unpack[rq.UpdateOptions]) -> Updated:
        return self._send(rq.update(memory_id, options))

    def forget(self, memory_id: Id, *, hard: bool = False, reason: str | None = None,
               user_id: str | None = None) -> bool:
        return self._send(rq.forget(memory_id, hard, reason, user_id))

    def reopen(self, memory_id: Id, *, reason: str | None = None, user_id: str | None = None) -> bool:
        return self._send(rq.reopen(memory_id, reason, user_id))

    def flag(self, memory_id: Id, *, reason: str | None = None, user_id: str | None = None) -> float:
        return self._send(rq.flag(memory_id, reason, user_id))

    def revisions(self, memory_id: Id, *, user_id: str | None = None) -> builtins.list[Revision]:
        return self._send(rq.revisions(memory_id, user_id))

    # keyed memories
    def put(self, namespace: Namespace, key: str, **options: Unpack[rq.PutOptions]) -> PutResult:
        return self._send(rq.put(namespace, key, options))

    def get(self, namespace: Namespace, key: str, *, refresh_ttl: bool = False,
            user_id: str | None = None) -> Item | None:
        return self._send(rq.get(namespace, key, refresh_ttl, user_id))

    def delete(self, namespace: Namespace, key: str, *, hard: bool = False, user_id: str | None = None) -> bool:
        return self._send(rq.delete(namespace, key, hard, user_id))

    def namespaces(self, **options: Unpack[rq.NamespacesOptions]) -> builtins.list[tuple[str, ...]]:
        return self._send(rq.namespaces(options))

    # context and entities
    def context(self, query: str | None = None, **options: Unpack[rq.ContextOptions]) -> dict[str, Any]:
        return self._send(rq.context(query, options))

    def entities(self, prefix: str | None = None, *, limit: int | None = None,
                 user_id: str | None = None) -> builtins.list[Entity]:
        return self._send(rq.entities(prefix, limit, user_id))

    def about(self, name: str, *, limit: int | None = None, user_id: str | None = None) -> dict[str, Any]:
        return self._send(rq.about(name, limit, user_id))

    def embed(self, texts: Sequence[str], *, user_id: str | None = None) -> Embeddings:
        return self._send(rq.embed(texts, user_id))

    # tokens and users (platform tokens)
    def create_token(self, user_id: str, *, label: str, expires_in: Seconds | None = None) -> Token:
        return self._send(rq.create_token(user_id, label, expires_in))

    def revoke_token(self, token_id: Id) -> None:
        return self._send(rq.revoke_token(token_id))

    def erase_user(self, user_id: str) -> Erased:
        return self._send(rq.erase_user(user_id))


class AsyncClient:
    """engram's /v1 API for asyncio: the calls of `Client`, awaited."""

    def __init__(self, url: str, token: str | None = None, *, user_id: str | None = None, timeout: float = 30.0,
                 max_retries: int = 3, backoff: float = 0.5, max_wait: float = 30.0, max_concurrency: int = 16,
                 http_client: httpx.AsyncClient | None = None) -> None:
        self._policy = _Policy(url, token, user_id, timeout, max_retries, backoff, max_wait)
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._owns_http = http_client is None
        # Calls beyond this many wait here rather than in httpx's connection
        # pool, whose bookkeeping grows with the square of its waiters.
        self._turns = asyncio.Semaphore(max_concurrency)

    def as_user(self, user_id: str) -> AsyncClient:
        """The same connection, acting for `user_id` (platform tokens)."""
        p = self._policy
        other = AsyncClient.__new__(AsyncClient)
        other._policy = _Policy(p.url, None, user_id, p.timeout, p.max_retries, p.backoff, p.max_wait)
        other._policy.headers, other._policy.identity = p.headers, p.identity
        other._http, other._owns_http = self._http, False
        other._turns = self._turns
        return other

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, req: Request[T]) -> T:
        p, attempt, maybe_applied = self._policy, 0, False
        while True:
            response: httpx.Response | None = None
            try:
                async with self._turns:
                    response = await self._http.request(req.method, p.url + req.path, params=p.params(req),
                                                        json=req.json, headers=p.headers)
                error: Exception | None = None
            except httpx.TransportError as e:
                error = e
            if p.retryable(req, response, error) and (wait := p.delay(attempt, response)) is not None:
                maybe_applied = maybe_applied or p.maybe_applied(response, error)
                await asyncio.sleep(wait)
                attempt += 1
                continue
            if response is None:
                raise _gave_up(error or RuntimeError("no response"))
            return p.read(req, response, maybe_applied)

    async def remember(self, content: str, **options: Unpack[rq.RememberOptions]) -> Remembered | Conflict:
        return self._policy.found(await self._send(rq.remember(content, self._policy.acting(options))))

    async def resolve(self, conflict: Conflict, *, supersede: Sequence[Id] | None = None,
                      force: bool = False) -> Remembered:
        return await self._send(rq.resolve(self._policy.own(conflict), supersede, force))

    async def search(self, query: str, **options: Unpack[rq.SearchOptions]) -> SearchResults:
        return await self._send(rq.search(query, options))

    async def recall(self, memory_id: Id, *, user_id: str | None = None) -> Memory:
        return await self._send(rq.recall(memory_id, user_id))

    async def list(self, **options: Unpack[rq.ListOptions]) -> AsyncIterator[Memory]:
        cursor: str | None = None
        while True:
            page = await self.list_page(cursor, **options)
            for m in page.memories:
                yield m
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def list_page(self, cursor: str | None = None, **options: Unpack[rq.ListOptions]) -> MemoryPage:
        return await self._send(rq.list_page(options, cursor))

    async def update(self, memory_id: Id, **options: Unpack[rq.UpdateOptions]) -> Updated:
        return await self._send(rq.update(memory_id, options))

    async def forget(self, memory_id: Id, *, hard: bool = False, reason: str | None = None,
                     user_id: str | None = None) -> bool:
        return await self._send(rq.forget(memory_id, hard, reason, user_id))

    async def reopen(self, memory_id: Id, *, reason: str | None = None, user_id: str | None = None) -> bool:
        return await self._send(rq.reopen(memory_id, reason, user_id))

    async def flag(self, memory_id: Id, *, reason: str | None = None, user_id: str | None = None) -> float:
        return await self._send(rq.flag(memory_id, reason, user_id))

    async def revisions(self, memory_id: Id, *, user_id: str | None = None) -> builtins.list[Revision]:
        return await self._send(rq.revisions(memory_id, user_id))

    async def put(self, namespace: Namespace, key: str, **options: Unpack[rq.PutOptions]) -> PutResult:
        return await self._send(rq.put(namespace, key, options))

    async def get(self, namespace: Namespace, key: str, *, refresh_ttl: bool = False,
                  user_id: str | None = None) -> Item | None:
        return await self._send(rq.get(namespace, key, refresh_ttl, user_id))

    async def delete(self, namespace: Namespace, key: str, *, hard: bool = False,
                     user_id: str | None = None) -> bool:
        return await self._send(rq.delete(namespace, key, hard, user_id))

    async def namespaces(self, **options: Unpack[rq.NamespacesOptions]) -> builtins.list[tuple[str, ...]]:
        return await self._send(rq.namespaces(options))

    async def context(self, query: str | None = None, **options: Unpack[rq.ContextOptions]) -> dict[str, Any]:
        return await self._send(rq.context(query, options))

    async def entities(self, prefix: str | None = None, *, limit: int | None = None,
                       user_id: str | None = None) -> builtins.list[Entity]:
        return await self._send(rq.entities(prefix, limit, user_id))

    async def about(self, name: str, *, limit: int | None = None, user_id: str | None = None) -> dict[str, Any]:
        return await self._send(rq.about(name, limit, user_id))

    async def embed(self, texts: Sequence[str], *, user_id: str | None = None) -> Embeddings:
        return await self._send(rq.embed(texts, user_id))

    async def create_token(self, user_id: str, *, label: str, expires_in: Seconds | None = None) -> Token:
        return await self._send(rq.create_token(user_id, label, expires_in))

    async def revoke_token(self, token_id: Id) -> None:
        return await self._send(rq.revoke_token(token_id))

    async def erase_user(self, user_id: str) -> Erased:
        return await self._send(rq.erase_user(user_id))
