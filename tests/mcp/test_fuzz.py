"""schemathesis, a schema-driven fuzzer from PyPI, against /v1 as its
OpenAPI document describes it: every answer is documented (status, content
type, body schema) and none is a server error."""

import os
import subprocess
import sys

import httpx

from conftest import new_database, psql, serving

VENV_BIN = os.path.dirname(sys.executable)


def test_schemathesis_finds_no_server_error_and_no_undocumented_answer(tmp_path):
    db = new_database()
    psql(db, "SELECT engram.configure(embedding_model => 'local:all-MiniLM-L6-v2')")
    platform = psql(db, "SELECT engram.create_token(owner => 'app', label => 'fuzz', platform => true)")
    with serving(db) as base:
        # seed data, so that reads find something
        h = {"Authorization": f"Bearer {platform}"}
        httpx.post(base + "/v1/memories", json={"content": "Ada writes the compiler", "metadata": {"n": 1}},
                   headers=h, timeout=30).raise_for_status()
        httpx.put(base + "/v1/items", json={"namespace": ["a", "b"], "key": "k", "value": {"x": 1}},
                  headers=h, timeout=30).raise_for_status()
        cmd = [os.path.join(VENV_BIN, "schemathesis"), "run", base + "/v1/openapi.json", "--url", base,
               "-H", f"Authorization: Bearer {platform}",
               "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
                           "response_schema_conformance",
               "--phases", "examples,coverage,fuzzing", "--max-examples", os.environ.get("ENGRAM_FUZZ_EXAMPLES", "25"),
               "--seed", "1", "--generation-database", "none", "--workers", "2", "--no-color"]
        out = subprocess.run(["timeout", "900", *cmd], capture_output=True, text=True, cwd=tmp_path)
        assert out.returncode == 0, out.stdout[-20000:] + out.stderr[-5000:]
