"""Typed results. Each is built from the server's JSON by `from_json`;
times are timezone-aware `datetime`s, ids are `uuid.UUID`s."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

_FRACTION = re.compile(r"\.(\d+)")


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 time (or a date) as an aware datetime; None stays None.
    Python 3.10's fromisoformat takes neither `Z` nor fractions other
    than 3 or 6 digits, which Postgres writes."""
    if value is None:
        return None
    text = str(value).replace("Z", "+00:00").replace("z", "+00:00")
    text = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], text, count=1)
    return datetime.fromisoformat(text)


def _time(value: Any) -> datetime:
    parsed = parse_time(value)
    if parsed is None:
        raise ValueError("a required time is missing from the server's answer")
    return parsed


def _uuid(value: Any) -> uuid.UUID | None:
    return None if value is None else uuid.UUID(str(value))


def _namespace(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@dataclass(frozen=True)
class Memory:
    """A memory, as listed and recalled. Keyed memories (items) carry
    `namespace`, `key` and `value`."""

    id: uuid.UUID
    content: str
    kind: str
    status: str
    created_at: datetime
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    importance: float | None = None
    trust_score: float | None = None
    staleness_score: float | None = None
    access_count: int | None = None
    revision: int | None = None
    revision_count: int | None = None
    updated_at: datetime | None = None
    expires_at: datetime | None = None
    occurred_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    namespace: tuple[str, ...] | None = None
    key: str | None = None
    value: Any = None
    flag_count: int | None = None
    correction_count: int | None = None
    archive_reason: str | None = None
    merged_into: uuid.UUID | None = None
    session_id: str | None = None
    last_accessed_at: datetime | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Memory:
        return cls(
            id=uuid.UUID(d["id"]), content=d["content"], kind=d["kind"], status=d.get("status") or "active",
            created_at=_time(d["created_at"]), tags=list(d.get("tags") or []), metadata=d.get("metadata") or {},
            source=d.get("source"), importance=d.get("importance"), trust_score=d.get("trust_score"),
            staleness_score=d.get("staleness_score"), access_count=d.get("access_count"),
            revision=d.get("revision"), revision_count=d.get("revision_count"),
            updated_at=parse_time(d.get("updated_at")), expires_at=parse_time(d.get("expires_at")),
            occurred_at=parse_time(d.get("occurred_at")), valid_from=parse_time(d.get("valid_from")),
            valid_to=parse_time(d.get("valid_to")), namespace=_namespace(d.get("namespace")), key=d.get("key"),
            value=d.get("value"), flag_count=d.get("flag_count"), correction_count=d.get("correction_count"),
            archive_reason=d.get("archive_reason"), merged_into=_uuid(d.get("merged_into")),
            session_id=d.get("session_id"), last_accessed_at=parse_time(d.get("last_accessed_at")),
        )


@dataclass(frozen=True)
class SearchHit:
    """One search result: `score` (relevance x trust x freshness) orders the
    results; `similarity` is the cosine similarity to the query (None for a
    hit found by its words only)."""

    id: uuid.UUID
    content: str
    kind: str
    score: float
    similarity: float | None = None
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    trust_score: float | None = None
    source: str | None = None
    created_at: datetime | None = None
    occurred_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    namespace: tuple[str, ...] | None = None
    key: str | None = None
    value: Any = None
    session_id: str | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SearchHit:
        return cls(
            id=uuid.UUID(d["id"]), content=d["content"], kind=d["kind"], score=float(d["score"]),
            similarity=d.get("similarity"), tags=list(d.get("tags") or []), metadata=d.get("metadata") or {},
            trust_score=d.get("trust_score"), source=d.get("source"), created_at=parse_time(d.get("created_at")),
            occurred_at=parse_time(d.get("occurred_at")), valid_from=parse_time(d.get("valid_from")),
            valid_to=parse_time(d.get("valid_to")), namespace=_namespace(d.get("namespace")), key=d.get("key"),
            value=d.get("value"), session_id=d.get("session_id"),
        )


class SearchResults(list[SearchHit]):
    """The hits, best first (a list; with `group_by="session"`, grouped by
    session, best session first), the time window the query named ("last
    week") or None, and, when nothing was found, the server's `note`."""

    time_window: tuple[datetime | None, datetime | None] | None
    note: str | None

    def __init__(self, hits: list[SearchHit], time_window: tuple[datetime | None, datetime | None] | None,
                 note: str | None = None) -> None:
        super().__init__(hits)
        self.time_window = time_window
        self.note = note

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SearchResults:
        w = d.get("time_window")
        window = None if w is None else (parse_time(w.get("start")), parse_time(w.get("end")))
        return cls([SearchHit.from_json(h) for h in d["results"]], window, d.get("note"))

    def sessions(self) -> list[tuple[str | None, list[SearchHit]]]:
        """The hits by session, in order: each session (None for hits
        without one, each its own group) with its hits."""
        groups: list[tuple[str | None, list[SearchHit]]] = []
        for h in self:
            if h.session_id is not None and groups and groups[-1][0] == h.session_id:
                groups[-1][1].append(h)
            else:
                groups.append((h.session_id, [h]))
        return groups


@dataclass(frozen=True)
class Remembered:
    """A stored memory: status `created`, or `duplicate` (an identical one
    exists: its id)."""

    id: uuid.UUID
    status: str

    @property
    def created(self) -> bool:
        return self.status == "created"


@dataclass(frozen=True)
class ConflictingMemory:
    """A memory a new one conflicts with, and why (`similar`, `negation`, ...)."""

    id: uuid.UUID
    content: str
    reasons: list[str]
    similarity: float | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ConflictingMemory:
        return cls(id=uuid.UUID(d["id"]), content=d.get("content", ""), reasons=list(d.get("reasons") or []),
                   similarity=d.get("similarity"))


@dataclass(frozen=True)
class Conflict:
    """What `remember` returns when the new memory conflicts with stored
    ones: nothing was written. Store it with `resolve(conflict,
    supersede=[...])` (exactly those stop being valid) or `force=True`
    (alongside them)."""

    content: str
    conflicts: list[ConflictingMemory]
    detail: str
    hint: str | None
    request: dict[str, Any]
    user_id: str | None = None
    # a digest of the token it was found with: resolving it with another
    # token would store it for that token's owner
    found_by: str | None = field(default=None, repr=False, compare=False)

    @property
    def ids(self) -> list[uuid.UUID]:
        return [c.id for c in self.conflicts]


@dataclass(frozen=True)
class Updated:
    id: uuid.UUID
    revision: int


@dataclass(frozen=True)
class Revision:
    """One state of a memory; the last of `revisions()` is the current one."""

    revision: int
    content: str
    is_current: bool
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    value: Any = None
    written_at: datetime | None = None
    replaced_at: datetime | None = None
    reason: str | None = None
    is_correction: bool | None = None
    changed_by: str | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Revision:
        return cls(revision=d["revision"], content=d["content"], is_current=d["is_current"], tags=d.get("tags"),
                   metadata=d.get("metadata"), value=d.get("value"), written_at=parse_time(d.get("written_at")),
                   replaced_at=parse_time(d.get("replaced_at")), reason=d.get("reason"),
                   is_correction=d.get("is_correction"), changed_by=d.get("changed_by"))


@dataclass(frozen=True)
class Entity:
    """A person, project, place or thing the memories mention."""

    name: str
    memories: int
    kind: str | None = None
    first_seen: datetime | None = None
    last_seen: datetime | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Entity:
        return cls(name=d["name"], memories=d["memories"], kind=d.get("kind"),
                   first_seen=parse_time(d.get("first_seen")), last_seen=parse_time(d.get("last_seen")))


@dataclass(frozen=True)
class Item:
    """A keyed memory: one per (user, namespace, key)."""

    id: uuid.UUID
    namespace: tuple[str, ...]
    key: str
    content: str
    value: Any
    kind: str
    revision: int
    created_at: datetime
    updated_at: datetime
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    expires_at: datetime | None = None
    trust_score: float | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Item:
        return cls(id=uuid.UUID(d["id"]), namespace=tuple(d["namespace"]), key=d["key"], content=d["content"],
                   value=d.get("value"), kind=d["kind"], revision=d["revision"], created_at=_time(d["created_at"]),
                   updated_at=_time(d["updated_at"]), tags=list(d.get("tags") or []),
                   metadata=d.get("metadata") or {}, expires_at=parse_time(d.get("expires_at")),
                   trust_score=d.get("trust_score"))


@dataclass(frozen=True)
class PutResult:
    """status: created (a new item), revised (a new revision) or unchanged."""

    id: uuid.UUID
    status: str
    revision: int


@dataclass(frozen=True)
class MemoryPage:
    memories: list[Memory]
    next_cursor: str | None


@dataclass(frozen=True)
class Token:
    """A minted user token: `token` is shown once."""

    id: uuid.UUID
    token: str
    owner: str
    label: str
    expires_at: datetime | None


@dataclass(frozen=True)
class Embeddings:
    model: str
    dims: int
    embeddings: list[list[float]]


@dataclass(frozen=True)
class Erased:
    """What erase_user removed: memories, and the recorded misses."""

    memories: int
    misses: int
