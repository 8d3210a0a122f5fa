"""The examples of examples/ and the migration page of docs/CLIENTS.md run as
written, with their real packages, against engram-mcp."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[3]


def run(path: Path | None, env: dict[str, str], code: str | None = None) -> str:
    args = [sys.executable, str(path)] if path else [sys.executable, "-c", code or ""]
    r = subprocess.run(args, env={**os.environ, **env}, capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert r.returncode == 0, (path, r.stdout, r.stderr)
    return r.stdout


def test_the_langgraph_example(engram: dict[str, Any]) -> None:
    out = run(ROOT / "examples" / "langgraph_memory.py", {"ENGRAM_URL": engram["url"], "ENGRAM_TOKEN": engram["platform"]})
    assert "I know: I prefer aisle seats" in out


def test_the_mem0_migration(engram: dict[str, Any]) -> None:
    out = run(ROOT / "examples" / "mem0_migration.py", {"ENGRAM_URL": engram["url"], "ENGRAM_TOKEN": engram["platform"]})
    assert "sci-fi" in out and "'event': 'ADD'" in out and "'event': 'UPDATE'" in out


def test_the_five_lines_of_the_migration_page(engram: dict[str, Any]) -> None:
    page = (ROOT / "docs" / "CLIENTS.md").read_text()
    section = page[page.index("## From Mem0 to engram in five lines"):]
    after = re.findall(r"```python\n(.*?)```", section, re.S)[1]
    lines = [line for line in after.splitlines() if line.strip() and not line.startswith("#")]
    assert len(lines) <= 5, lines
    out = run(None, {"ENGRAM_URL": engram["url"], "ENGRAM_TOKEN": engram["platform"]}, after)
    assert "results" in out


def test_the_fastapi_backend_serves_many_users_through_one_token(engram: dict[str, Any]) -> None:
    os.environ.update(ENGRAM_URL=engram["url"], ENGRAM_TOKEN=engram["platform"])
    spec = importlib.util.spec_from_file_location("fastapi_backend", ROOT / "examples" / "fastapi_backend.py")
    assert spec and spec.loader
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    ann, ben = f"ann-{uuid.uuid4().hex[:6]}", f"ben-{uuid.uuid4().hex[:6]}"
    backend.SESSIONS.update({"s-ann": ann, "s-ben": ben})
    as_ann, as_ben = {"authorization": "Bearer s-ann"}, {"authorization": "Bearer s-ben"}
    with TestClient(backend.app) as http:
        assert http.post("/notes", json={"text": "My gate code is 4411"}, headers=as_ann).json()["status"] == "created"
        http.post("/notes", json={"text": "My gate code is 9090"}, headers=as_ben)
        # a correction replaces what it contradicts (the app's rule)
        assert http.post("/notes", json={"text": "My gate code is 4412"}, headers=as_ann).status_code == 200
        assert http.get("/notes", params={"q": "gate code"}, headers=as_ann).json() == ["My gate code is 4412"]
        assert http.get("/notes", params={"q": "gate code"}, headers=as_ben).json() == ["My gate code is 9090"]
        # no session, or one the app does not know: nothing is read
        assert http.get("/notes", params={"q": "gate code"}, headers={"authorization": "Bearer forged"}).status_code == 401
        assert http.get("/notes", params={"q": "gate code"}).status_code == 401
