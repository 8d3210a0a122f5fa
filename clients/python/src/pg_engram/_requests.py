"""What each call sends and how its answer is read, without any I/O: the
sync and async clients send the same `Request`s, so the two cannot drift.
Option dictionaries name each call's keyword arguments once."""

from __future__ import annotations

import json
import unicodedata
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Generic, Literal, TypedDict, TypeVar, Union
from urllib.parse import quote

from ._errors import error_from
from ._models import (Conflict, ConflictingMemory, Embeddings, Entity, Erased, Item, Memory, MemoryPage,
                      PutResult, Remembered, Revision, SearchResults, Token, Updated, parse_time)

T = TypeVar("T")
Id = Union[uuid.UUID, str]
Moment = Union[datetime, date, str]
Seconds = Union[float, int, timedelta]
Namespace = Sequence[str]


@dataclass(frozen=True)
class Request(Generic[T]):
    method: str
    path: str
    parse: Callable[[int, Any], T]
    params: list[tuple[str, str]] = field(default_factory=list)
    json: Any = None
    # statuses besides 2xx that `parse` reads (remember's 409, get's 404)
    accept: frozenset[int] = frozenset()
    # safe to send again when the connection broke before an answer
    idempotent: bool = False
    # the answer when a retry finds nothing there: the first attempt did it
    on_gone: Callable[[], T] | None = None


class RememberOptions(TypedDict, total=False):
    kind: Literal["semantic", "episodic", "procedural"]
    tags: Sequence[str]
    metadata: Mapping[str, Any]
    ttl: Seconds
    importance: float
    occurred_at: Moment
    valid_from: Moment
    valid_to: Moment
    supersedes: Sequence[Id]
    force: bool
    user_id: str | None


class SearchOptions(TypedDict, total=False):
    limit: int
    kinds: Sequence[str]
    tags: Sequence[str]
    filter: Mapping[str, Any]
    namespace_prefix: Namespace
    min_similarity: float
    group_by: Literal["session"]
    valid_at: Moment
    known_at: Moment
    reference_time: Moment
    entity: str
    refresh_ttl: bool
    user_id: str | None


class ListOptions(TypedDict, total=False):
    kinds: Sequence[str]
    tags: Sequence[str]
    status: Literal["active", "archived", "expired"]
    order_by: Literal["created_at", "updated_at", "trust_score", "importance", "access_count"]
    descending: bool
    limit: int
    valid_at: Moment
    namespace_prefix: Namespace
    filter: Mapping[str, Any]
    refresh_ttl: bool
    user_id: str | None


class UpdateOptions(TypedDict, total=False):
    content: str
    tags: Sequence[str]
    metadata: Mapping[str, Any]
    reason: str
    valid_to: Moment
    user_id: str | None


class PutOptions(TypedDict, total=False):
    content: str
    value: Any
    ttl: Seconds
    index: bool
    kind: str
    tags: Sequence[str]
    metadata: Mapping[str, Any]
    reason: str
    user_id: str | None


class NamespacesOptions(TypedDict, total=False):
    prefix: Namespace
    suffix: Namespace
    max_depth: int
    limit: int
    offset: int
    user_id: str | None


class ContextOptions(TypedDict, total=False):
    session_id: str
    workspace: str
    mode: Literal["dual", "agent", "emulation"]
    budget_chars: int
    user_id: str | None


# ---- encoding --------------------------------------------------------------

def _value(v: Any) -> Any:
    if isinstance(v, datetime):
        if v.tzinfo is None:
            raise ValueError(f"{v!r} has no time zone: pass an aware datetime (e.g. tzinfo=timezone.utc)")
        return v.isoformat()
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, timedelta):
        return v.total_seconds()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, Mapping):
        return {k: _value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    return v


def labels(namespace: Namespace, what: str = "namespace") -> list[str]:
    """A namespace as a list of labels; a label may not contain a dot
    (query strings join labels with dots) or be empty."""
    if isinstance(namespace, str):
        raise TypeError(f"{what} is a sequence of labels, e.g. ('users', 'alice'), not the string {namespace!r}")
    out = list(namespace)
    for label in out:
        if not isinstance(label, str) or not label or "." in label or any(unicodedata.category(c) == "Cc" for c in label):
            raise ValueError(f"{what} label {label!r} must be a non-empty string without dots or control characters")
    return out


def _dotted(namespace: Namespace, what: str) -> str:
    return ".".join(labels(namespace, what))


def _body(options: Mapping[str, Any], **fixed: Any) -> dict[str, Any]:
    """A JSON body from the given options; user_id travels in the query."""
    body = {k: _value(v) for k, v in options.items() if k != "user_id" and v is not None}
    body.update({k: _value(v) for k, v in fixed.items() if v is not None})
    return body


def _query(options: Mapping[str, Any]) -> list[tuple[str, str]]:
    params: list[tuple[str, str]] = []
    for k, v in options.items():
        if v is None:
            continue
        if k == "user_id":
            params.append((k, str(user_id_checked(v))))
        elif k in ("namespace_prefix", "prefix", "suffix", "namespace"):
            params.append((k, _dotted(v, k)))
        elif k == "filter":
            params.append((k, json.dumps(_value(v))))
        elif isinstance(v, bool):
            params.append((k, "true" if v else "false"))
        elif isinstance(v, (list, tuple)):
            params.extend((k, str(_value(x))) for x in v)
        else:
            params.append((k, str(_value(v))))
    return params


def user_id_checked(user_id: str | None) -> str | None:
    """A user id as given: not empty, no surrounding spaces (the server
    would trim them, and " bob" would act as bob)."""
    if user_id is not None and (not isinstance(user_id, str) or not user_id.strip() or user_id != user_id.strip()):
        raise ValueError(f"user_id {user_id!r} must be a non-empty string without surrounding spaces")
    return user_id


def _user(user_id: str | None) -> list[tuple[str, str]]:
    return [] if user_id_checked(user_id) is None else [("user_id", str(user_id))]


def _id(memory_id: Id) -> str:
    return quote(str(uuid.UUID(str(memory_id))), safe="")


def _segment(name: str, what: str) -> str:
    """A name as one path segment: "." and ".." would be read as the path's
    own dots and name another route."""
    if name in (".", "..") or not name:
        raise ValueError(f"{what} {name!r} cannot be used: it is empty or a path's dot segment")
    return quote(name, safe="")


# ---- the calls -------------------------------------------------------------

def remember(content: str, options: RememberOptions) -> Request[Remembered | Conflict]:
    body = _body(options, content=content)
    user_id = options.get("user_id")

    def parse(status: int, d: Any) -> Remembered | Conflict:
        if status == 409:
            if not (isinstance(d, dict) and d.get("conflicts")):
                # a 409 of another kind (a superseded memory that is archived, say)
                raise error_from(status, d)
            return Conflict(content=content, conflicts=[ConflictingMemory.from_json(c) for c in d.get("conflicts") or []],
                            detail=d.get("detail", ""), hint=d.get("hint"), request=body, user_id=user_id)
        return Remembered(id=uuid.UUID(d["id"]), status=d["status"])

    return Request("POST", "/v1/memories", parse, _user(user_id), body, accept=frozenset({409}))


def resolve(conflict: Conflict, supersede: Sequence[Id] | None, force: bool) -> Request[Remembered]:
    if not supersede and not force:
        raise ValueError("resolve: name the memories it replaces (supersede=[...]) or store it alongside them "
                         "(force=True); nothing is closed that you do not name")
    body = dict(conflict.request)
    if supersede:
        body["supersedes"] = [str(uuid.UUID(str(i))) for i in supersede]
    if force:
        body["force"] = True

    def parse(status: int, d: Any) -> Remembered:
        return Remembered(id=uuid.UUID(d["id"]), status=d["status"])

    return Request("POST", "/v1/memories", parse, _user(conflict.user_id), body)


def search(query: str, options: SearchOptions) -> Request[SearchResults]:
    body = _body(options, query=query)
    if options.get("namespace_prefix") is not None:
        body["namespace_prefix"] = labels(options["namespace_prefix"], "namespace_prefix")
    return Request("POST", "/v1/search", lambda _, d: SearchResults.from_json(d), _user(options.get("user_id")), body,
                   idempotent=True)


def recall(memory_id: Id, user_id: str | None) -> Request[Memory]:
    return Request("GET", f"/v1/memories/{_id(memory_id)}", lambda _, d: Memory.from_json(d), _user(user_id),
                   idempotent=True)


def list_page(options: ListOptions, cursor: str | None) -> Request[MemoryPage]:
    def parse(_: int, d: Any) -> MemoryPage:
        return MemoryPage([Memory.from_json(m) for m in d["memories"]], d.get("next_cursor"))

    params = _query({**options, "cursor": cursor})
    return Request("GET", "/v1/memories", parse, params, idempotent=True)


def update(memory_id: Id, options: UpdateOptions) -> Request[Updated]:
    return Request("PATCH", f"/v1/memories/{_id(memory_id)}",
                   lambda _, d: Updated(uuid.UUID(d["id"]), d["revision"]), _user(options.get("user_id")),
                   _body(options))


def forget(memory_id: Id, hard: bool, reason: str | None, user_id: str | None) -> Request[bool]:
    params = _query({"hard": hard or None, "reason": reason, "user_id": user_id})
    return Request("DELETE", f"/v1/memories/{_id(memory_id)}", lambda _, d: bool(d["forgotten"]), params,
                   idempotent=True, on_gone=lambda: True)


def reopen(memory_id: Id, reason: str | None, user_id: str | None) -> Request[bool]:
    return Request("POST", f"/v1/memories/{_id(memory_id)}/reopen", lambda _, d: bool(d["reopened"]),
                   _user(user_id), _body({"reason": reason}), idempotent=True)


def flag(memory_id: Id, reason: str | None, user_id: str | None) -> Request[float]:
    return Request("POST", f"/v1/memories/{_id(memory_id)}/flag", lambda _, d: float(d["trust_score"]),
                   _user(user_id), _body({"reason": reason}))


def revisions(memory_id: Id, user_id: str | None) -> Request[list[Revision]]:
    return Request("GET", f"/v1/memories/{_id(memory_id)}/revisions",
                   lambda _, d: [Revision.from_json(r) for r in d["revisions"]], _user(user_id), idempotent=True)


def put(namespace: Namespace, key: str, options: PutOptions) -> Request[PutResult]:
    body = _body(options, namespace=labels(namespace), key=key)
    return Request("PUT", "/v1/items", lambda _, d: PutResult(uuid.UUID(d["id"]), d["status"], d["revision"]),
                   _user(options.get("user_id")), body, idempotent=True)


def get(namespace: Namespace, key: str, refresh_ttl: bool, user_id: str | None) -> Request[Item | None]:
    params = _query({"namespace": namespace, "key": key, "refresh_ttl": refresh_ttl or None, "user_id": user_id})
    def parse(status: int, d: Any) -> Item | None:
        if status == 404:
            if isinstance(d, dict) and d.get("sqlstate") == "P0002":
                return None  # nothing stored there; any other 404 is an error
            raise error_from(status, d)
        return Item.from_json(d)

    return Request("GET", "/v1/items", parse, params, accept=frozenset({404}), idempotent=True)


def delete(namespace: Namespace, key: str, hard: bool, user_id: str | None) -> Request[bool]:
    params = _query({"namespace": namespace, "key": key, "hard": hard or None, "user_id": user_id})
    return Request("DELETE", "/v1/items", lambda _, d: bool(d["deleted"]), params, idempotent=True)


def namespaces(options: NamespacesOptions) -> Request[list[tuple[str, ...]]]:
    return Request("GET", "/v1/namespaces", lambda _, d: [tuple(n) for n in d["namespaces"]], _query(options),
                   idempotent=True)


def context(query: str | None, options: ContextOptions) -> Request[dict[str, Any]]:
    return Request("POST", "/v1/context", lambda _, d: dict(d), _user(options.get("user_id")),
                   _body(options, query=query), idempotent=True)


def entities(prefix: str | None, limit: int | None, user_id: str | None) -> Request[list[Entity]]:
    params = _query({"prefix": None, "limit": limit, "user_id": user_id})
    if prefix is not None:
        params.insert(0, ("prefix", prefix))
    return Request("GET", "/v1/entities", lambda _, d: [Entity.from_json(e) for e in d["entities"]], params,
                   idempotent=True)


def about(name: str, limit: int | None, user_id: str | None) -> Request[dict[str, Any]]:
    return Request("GET", f"/v1/entities/{_segment(name, 'entity name')}", lambda _, d: dict(d),
                   _query({"limit": limit, "user_id": user_id}), idempotent=True)


def embed(texts: Sequence[str], user_id: str | None) -> Request[Embeddings]:
    if isinstance(texts, str):
        raise TypeError("embed takes a list of texts, not one string")
    return Request("POST", "/v1/embed", lambda _, d: Embeddings(d["model"], d["dims"], d["embeddings"]),
                   _user(user_id), {"texts": list(texts)}, idempotent=True)


def create_token(user_id: str, label: str, expires_in: Seconds | None) -> Request[Token]:
    def parse(_: int, d: Any) -> Token:
        return Token(uuid.UUID(d["id"]), d["token"], d["owner"], d["label"], parse_time(d.get("expires_at")))

    return Request("POST", "/v1/tokens", parse, [], _body({}, user_id=user_id_checked(user_id), label=label,
                                                          expires_in=expires_in))


def revoke_token(token_id: Id) -> Request[None]:
    return Request("DELETE", f"/v1/tokens/{_id(token_id)}", lambda _, d: None, idempotent=True, on_gone=lambda: None)


def erase_user(user_id: str) -> Request[Erased]:
    return Request("DELETE", f"/v1/users/{_segment(str(user_id_checked(user_id)), 'user_id')}/memories",
                   lambda _, d: Erased(d["memories"], d["misses"]), idempotent=True)
