"""Fixtures of the client tests: engram-mcp (the binary scripts/test built)
on a fresh database of the test cluster, with the local model recorded, and
a platform token that mints a user token per test, so every test starts
with an empty store of its own. The helpers that start engram-mcp are the
MCP suite's (tests/mcp/conftest.py)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("engram_mcp_fixtures", ROOT / "tests" / "mcp" / "conftest.py")
assert _spec and _spec.loader
mcp_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mcp_fixtures)
psql = mcp_fixtures.psql
locked_memories = mcp_fixtures.locked_memories
serving = mcp_fixtures.serving
new_database = mcp_fixtures.new_database
# the model of engram-mcp's local embedder (it refuses to start with another)
MODEL = "local:all-MiniLM-L6-v2"


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def engram() -> Iterator[dict[str, Any]]:
    """engram-mcp on a fresh database: {"url", "db", "platform"}."""
    db = new_database()
    psql(db, f"SELECT engram.configure(embedding_model => '{MODEL}')")
    platform = psql(db, "SELECT engram.create_token(owner => 'platform', label => 'tests', platform => true)")
    with serving(db) as url:
        yield {"url": url, "db": db, "platform": platform}


def mint(engram: dict[str, Any], user: str) -> str:
    r = httpx.post(engram["url"] + "/v1/tokens", json={"user_id": user, "label": "test"},
                   headers={"Authorization": f"Bearer {engram['platform']}"}, timeout=30)
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


@pytest.fixture
def user(engram: dict[str, Any]) -> dict[str, str]:
    """A user of their own for one test: {"id", "token"}."""
    uid = f"u{uuid.uuid4().hex[:12]}"
    return {"id": uid, "token": mint(engram, uid)}


def expire_now(engram: dict[str, Any], owner: str, namespace: tuple[str, ...], key: str) -> None:
    """Backdates an item's expiry into the past (engram stops returning it;
    the maintenance job has not purged it)."""
    labels = ",".join("'" + label.replace("'", "''") + "'" for label in namespace)
    psql(engram["db"], f"UPDATE engram.memories SET expires_at = now() - interval '1 minute' "
                       f"WHERE owner = '{owner}' AND namespace = ARRAY[{labels}]::text[] AND key = '{key}'")


def stored_expires_at(engram: dict[str, Any], owner: str, namespace: tuple[str, ...], key: str) -> float:
    labels = ",".join("'" + label.replace("'", "''") + "'" for label in namespace)
    return float(psql(engram["db"], f"SELECT extract(epoch FROM expires_at) FROM engram.memories WHERE owner = '{owner}' "
                                  f"AND namespace = ARRAY[{labels}]::text[] AND key = '{key}' "
                                  "ORDER BY created_at DESC LIMIT 1"))


def row_exists(engram: dict[str, Any], owner: str, namespace: tuple[str, ...], key: str) -> bool:
    labels = ",".join("'" + label.replace("'", "''") + "'" for label in namespace)
    return psql(engram["db"], f"SELECT count(*) FROM engram.memories WHERE owner = '{owner}' "
                              f"AND namespace = ARRAY[{labels}]::text[] AND key = '{key}'") == "1"




def backdate_update(engram: dict[str, Any], owner: str, namespace: tuple[str, ...], key: str, seconds: float) -> None:
    """Sets an item's last update `seconds` ago (triggers off: they would
    stamp now)."""
    labels = ",".join("'" + label.replace("'", "''") + "'" for label in namespace)
    psql(engram["db"], "SET session_replication_role = replica; "
                       f"UPDATE engram.memories SET updated_at = now() - {float(seconds)} * interval '1 second' "
                       f"WHERE owner = '{owner}' AND namespace = ARRAY[{labels}]::text[] AND key = '{key}'")
