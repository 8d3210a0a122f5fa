"""pg_engram.Client and AsyncClient against engram-mcp: typed results,
conflicts and their resolution, paging, keyed items, a platform token acting
for users, errors with SQLSTATE and hint, retries on a real 503, and the
README's examples run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest
from conftest import MODEL, locked_memories, mint, new_database, psql, serving

from pg_engram import (AsyncClient, BadRequestError, Client, Conflict, ConflictError, Entity, Memory, NotFoundError,
                       PermissionDeniedError, Remembered, SearchHit, UnavailableError)

README = Path(__file__).resolve().parents[1] / "README.md"


def test_remember_conflict_resolve_search_and_history(engram, user):
    with Client(engram["url"], user["token"]) as c:
        first = c.remember("Alice's standup is at 9:30 in room Kepler", tags=["work"], metadata={"team": "core"})
        assert isinstance(first, Remembered) and first.created
        again = c.remember("Alice's standup is at 9:30 in room Kepler")
        assert isinstance(again, Remembered) and again.status == "duplicate" and again.id == first.id

        conflict = c.remember("Alice's standup is at 10:00 in room Kepler")
        assert isinstance(conflict, Conflict) and conflict.ids == [first.id]
        assert "supersedes" in (conflict.hint or "")
        with pytest.raises(ValueError, match="supersede"):
            c.resolve(conflict)          # nothing is closed that the caller did not name
        second = c.resolve(conflict, supersede=conflict.ids)
        assert second.created

        hits = c.search("when is the standup?", limit=5)
        assert isinstance(hits[0], SearchHit) and hits[0].id == second.id
        assert isinstance(hits[0].created_at, datetime) and hits[0].created_at.tzinfo is not None
        old = c.recall(first.id)
        assert isinstance(old, Memory) and old.valid_to is not None and old.metadata == {"team": "core"}
        then = c.search("standup", valid_at=old.valid_from)
        assert first.id in [h.id for h in then]

        assert c.update(second.id, content="Alice's standup is at 10:15 in room Kepler", reason="moved").revision == 2
        revisions = c.revisions(second.id)
        assert [r.revision for r in revisions] == [1, 2] and revisions[-1].is_current
        assert c.reopen(first.id, reason="both hold") is True
        assert c.forget(first.id) is True
        with pytest.raises(NotFoundError) as missing:
            c.recall(uuid.uuid4())
        assert missing.value.sqlstate == "P0002"


def test_paging_iterators_fetch_every_page(engram, user):
    with Client(engram["url"], user["token"]) as c:
        for i in range(7):
            c.put(("notes",), f"n{i}", value={"i": i}, index=False)
        pages: list[int] = []
        hooks = {"response": [lambda r: pages.append(1) if r.request.url.path == "/v1/memories" else None]}
        with Client(engram["url"], user["token"], http_client=httpx.Client(event_hooks=hooks)) as counted:
            listed = list(counted.list(namespace_prefix=("notes",), limit=3))
        assert sorted(m.key for m in listed) == [f"n{i}" for i in range(7)]
        assert len(pages) == 3


def test_items_namespaces_and_ttl(engram, user):
    with Client(engram["url"], user["token"]) as c:
        assert c.put(("prefs", "ui"), "theme", value={"mode": "dark", "font": 14}).status == "created"
        assert c.put(("prefs", "ui"), "theme", value={"mode": "light", "font": 14}).status == "revised"
        item = c.get(("prefs", "ui"), "theme")
        assert item is not None and item.value == {"mode": "light", "font": 14} and item.revision == 2
        assert item.updated_at > item.created_at
        assert c.get(("prefs", "ui"), "missing") is None
        assert c.namespaces() == [("prefs", "ui")]
        # an empty prefix is every keyed memory, and only those
        c.remember("a memory that is not an item")
        assert [m.key for m in c.list(namespace_prefix=())] == ["theme"]
        c.put(("cache",), "k", value={"v": 1}, ttl=timedelta(hours=1))
        cached = c.get(("cache",), "k")
        assert cached is not None and cached.expires_at is not None
        assert cached.expires_at - datetime.now(timezone.utc) > timedelta(minutes=55)
        assert c.delete(("cache",), "k") is True and c.delete(("cache",), "k") is False
        with pytest.raises(ValueError, match="dots"):
            c.put(("a.b",), "k", value={})


def test_a_platform_token_acts_for_users(engram):
    with Client(engram["url"], engram["platform"]) as platform:
        user = f"u{uuid.uuid4().hex[:8]}"
        platform.as_user(user).remember("Dana is allergic to peanuts")
        assert [h.content for h in platform.search("allergies", user_id=user)] == ["Dana is allergic to peanuts"]
        assert list(platform.search("allergies", user_id=f"other-{user}")) == []
        token = platform.create_token(user, label="laptop", expires_in=timedelta(hours=1))
        assert token.owner == user and token.expires_at is not None
        with Client(engram["url"], token.token) as own:
            assert [m.content for m in own.list()] == ["Dana is allergic to peanuts"]
            with pytest.raises(PermissionDeniedError):
                own.search("allergies", user_id="someone-else")
        platform.revoke_token(token.id)
        erased = platform.erase_user(user)
        assert erased.memories == 1
        assert list(platform.search("allergies", user_id=user)) == []


def test_context_entities_and_embed(engram, user):
    with Client(engram["url"], user["token"]) as c:
        c.remember("Marta Keller leads the billing team in Lyon")
        ctx = c.context("who leads billing?")
        assert "Marta" in ctx["text"]
        entities = c.entities()
        assert entities and all(isinstance(e, Entity) for e in entities)
        assert isinstance(c.about(entities[0].name), dict)
        vectors = c.embed(["hello", "world"])
        assert vectors.model == MODEL and vectors.dims == len(vectors.embeddings[0]) == 384


def test_errors_carry_the_sqlstate_and_hint_and_change_nothing(engram, user):
    with Client(engram["url"], user["token"]) as c:
        with pytest.raises(BadRequestError) as bad:
            c.search("x", filter={"n": {"$regex": "x"}})
        assert bad.value.status == 400 and bad.value.sqlstate and bad.value.detail
        assert bad.value.sqlstate in str(bad.value)
        with pytest.raises(BadRequestError):
            c.remember("x", ttl=-1)
        assert list(c.list()) == []
    with pytest.raises(Exception) as unauth:
        Client(engram["url"], "eg_" + "0" * 64).search("x")
    assert getattr(unauth.value, "status", None) == 401


def test_a_503_is_retried_after_retry_after():
    """A real 503: a statement timeout while another session locks
    engram.memories. The client waits as Retry-After says and tries again;
    without retries the error carries the SQLSTATE."""
    db = new_database()
    token = psql(db, "SELECT engram.create_token(owner => 'wes', label => 'pytest')")
    answers: list[int] = []
    hooks = {"response": [lambda r: answers.append(r.status_code)]}
    with serving(db, "--statement-timeout-ms", "1000") as url:
        with locked_memories(db, 5):
            with pytest.raises(UnavailableError) as busy:
                Client(url, token, max_retries=0).list_page()
            assert busy.value.sqlstate == "57014" and busy.value.status == 503
            page = Client(url, token, max_retries=5, http_client=httpx.Client(event_hooks=hooks)).list_page()
        assert page.memories == [] and 503 in answers and answers[-1] == 200


def test_the_readme_examples_run(engram, user):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 5
    env = dict(os.environ, ENGRAM_URL=engram["url"], ENGRAM_TOKEN=user["token"],
               ENGRAM_PLATFORM_TOKEN=engram["platform"])
    for block in blocks:
        r = subprocess.run([sys.executable, "-c", block], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (block, r.stdout, r.stderr)


@pytest.mark.anyio
async def test_the_async_client(engram, user):
    async with AsyncClient(engram["url"], user["token"]) as c:
        stored = await c.remember("The Q3 report is due on August 15th")
        assert isinstance(stored, Remembered)
        conflict = await c.remember("The Q3 report is due on September 1st")
        if isinstance(conflict, Conflict):
            await c.resolve(conflict, supersede=conflict.ids)
        hits = await c.search("report deadline")
        assert hits and "September" in hits[0].content
        assert [m.content async for m in c.list(limit=1)]
        assert (await c.put(("a",), "k", value={"x": 1})).status == "created"
        assert (await c.get(("a",), "k")) is not None


def test_a_conflict_belongs_to_the_user_it_was_found_for(engram):
    user = f"u{uuid.uuid4().hex[:8]}"
    with Client(engram["url"], engram["platform"]) as platform:
        bound = platform.as_user(user)
        assert isinstance(bound.remember("Eve's desk is on floor 3"), Remembered)
        conflict = bound.remember("Eve's desk is on floor 5")
        assert isinstance(conflict, Conflict) and conflict.user_id == user
        # resolved by any client of the token, it is stored for the user it was found for
        stored = platform.as_user("someone-else").resolve(conflict, force=True)
        assert stored.id in [m.id for m in bound.list()]
        assert list(platform.list()) == [] and list(platform.as_user("someone-else").list()) == []
        # one found for the token's own owner is that token's, acting for nobody else
        own = platform.remember("The platform's backup runs at 2:00")
        assert isinstance(own, Remembered)
        mine = platform.remember("The platform's backup runs at 3:00")
        assert isinstance(mine, Conflict) and mine.user_id is None
        with pytest.raises(ValueError, match="token"):
            bound.resolve(mine, force=True)
        with Client(engram["url"], mint(engram, user)) as users_own:
            with pytest.raises(ValueError, match="token"):
                users_own.resolve(mine, force=True)
        replaced = platform.resolve(mine, supersede=mine.ids)
        assert replaced.created
        for memory_id in (own.id, replaced.id):   # the token owner's memories: gone for the other tests
            platform.forget(memory_id, hard=True)


def test_a_409_that_is_not_a_conflict_is_an_error(engram, user):
    with Client(engram["url"], user["token"]) as c:
        old = c.remember("The printer is on floor 2")
        assert isinstance(old, Remembered)
        c.forget(old.id)
        with pytest.raises(ConflictError) as refused:
            c.remember("The printer is on floor 3", supersedes=[old.id])
        assert refused.value.status == 409 and refused.value.detail


def test_what_may_be_sent_again():
    """Only calls that are idempotent, or whose 503 says the transaction was
    rolled back, are sent again."""
    from pg_engram import _requests as rq
    from pg_engram._client import _Policy

    policy = _Policy("http://x", None, None, 1, 3, 0.1, 1)
    update = rq.update(uuid.uuid4(), {"content": "x"})
    search = rq.search("x", {})

    def answer(status: int, sqlstate: str | None = None) -> httpx.Response:
        body = {"status": status, "detail": "d", **({"sqlstate": sqlstate} if sqlstate else {})}
        return httpx.Response(status, json=body)

    assert not policy.retryable(update, answer(504), None)
    assert not policy.retryable(update, answer(503), None)             # unavailable: maybe committed
    assert policy.retryable(update, answer(503, "57014"), None)        # statement timeout: rolled back
    assert policy.retryable(update, answer(503, "53300"), None)
    assert policy.retryable(search, answer(504), None)
    assert not policy.retryable(search, answer(500), None)
    assert not policy.retryable(update, None, httpx.ReadError("reset"))
    assert policy.retryable(update, None, httpx.ConnectError("refused"))


def test_names_that_would_leave_their_path_segment_are_refused(engram, user):
    with Client(engram["url"], engram["platform"]) as c:
        for name in ("..", "."):
            with pytest.raises(ValueError):
                c.about(name)
            with pytest.raises(ValueError):
                c.erase_user(name)
        for bad in (" bob", "bob ", "", "   "):
            with pytest.raises(ValueError):
                c.search("x", user_id=bad)
            with pytest.raises(ValueError):
                c.as_user(bad)


def test_a_retry_that_finds_nothing_is_success_only_when_the_first_try_may_have_done_it():
    """Client logic alone (httpx's MockTransport answers): a revoke whose
    first answer was lost (504) and whose retry finds nothing there (P0002)
    did its work; one whose first try was surely not applied (a rolled-back
    503) reports the 404."""
    from pg_engram import NotFoundError as Missing

    def server(first: httpx.Response) -> httpx.MockTransport:
        answers = [first, httpx.Response(404, json={"status": 404, "detail": "no such token", "sqlstate": "P0002"})]
        return httpx.MockTransport(lambda request: answers.pop(0))

    token_id = uuid.uuid4()
    lost = Client("http://engram", "t", backoff=0, http_client=httpx.Client(transport=server(httpx.Response(504))))
    assert lost.revoke_token(token_id) is None
    rolled_back = httpx.Response(503, json={"status": 503, "detail": "busy", "sqlstate": "40001"})
    sure = Client("http://engram", "t", backoff=0, http_client=httpx.Client(transport=server(rolled_back)))
    with pytest.raises(Missing):
        sure.revoke_token(token_id)


def test_sessions_as_answers_and_nothing_relevant(engram, user):
    """group_by="session" returns conversations (SearchResults.sessions()); a search that matches nothing
    says so in `note` rather than returning an unrelated memory."""
    for session, turns in {"py-trip": ["We booked the Lisbon flight for May", "The Lisbon hotel is near Alfama"],
                           "py-garden": ["The tomatoes in the garden need more sun"]}.items():
        with httpx.Client(headers={"X-Session-Id": session}, timeout=30) as http, \
                Client(engram["url"], user["token"], http_client=http) as c:
            for t in turns:
                assert c.remember(t, kind="episodic").created
    with Client(engram["url"], user["token"]) as c:
        found = c.search("Lisbon flight and hotel", group_by="session", limit=2)
        groups = found.sessions()
        assert groups[0][0] == "py-trip" and len(groups[0][1]) == 2, groups
        assert all(h.session_id == "py-trip" for h in groups[0][1])
        nothing = c.search("zeppelin maintenance schedule")
        assert list(nothing) == [] and (nothing.note or "").startswith("Nothing relevant"), nothing.note
        assert c.search("Lisbon flight").note is None
