"""engram-mcp export / import: a round trip through a JSON Lines file.
Export an owner, hard-forget every memory, import: the collection (ids,
content, tags, metadata, embeddings, status, revisions) and the search
results are the same; a second import creates nothing; embeddings of another
dimension are refused without --reembed and recomputed with it."""

import json
import os
import subprocess

import pytest

from conftest import BIN, HOST, MODEL_DIR, PORT, call, mcp_session, psql

pytestmark = pytest.mark.anyio

OWNER = "tara"
SNAPSHOT = f"""SELECT string_agg(concat_ws('|', m.id, m.kind, m.content, m.tags, m.metadata, m.embedding, m.status,
                         m.archive_reason, m.revision, m.correction_count, m.created_at, m.updated_at,
                         m.session_id, m.access_level,
                         (SELECT string_agg(concat_ws('/', r.revision, r.content, r.tags, r.written_at), ';'
                                            ORDER BY r.revision) FROM engram.revisions r WHERE r.memory_id = m.id)),
                         E'\\n' ORDER BY m.id)
               FROM engram.memories m WHERE m.owner = '{OWNER}'"""


def cli(database, *args):
    # As a DBA: export and import need engram.export_memories / import_memory.
    env = dict(os.environ, ENGRAM_DATABASE_URL=f"host={HOST} port={PORT} user=postgres dbname={database}",
               ENGRAM_MODEL_DIR=MODEL_DIR, RUST_LOG="warn")
    return subprocess.run([BIN, *args], env=env, capture_output=True, text=True, timeout=300)


async def search_ids(server, token, query):
    async with mcp_session(server, token) as s:
        r, err = await call(s, "memory_search", query=query, limit=5)
        assert not err, r
        return [h["id"] for h in r["results"]]


async def test_export_forget_import_round_trip(server, database, tmp_path):
    token = psql(database, f"SELECT engram.create_token(owner => '{OWNER}', label => 'transfer')")
    async with mcp_session(server, token) as s:
        ids = []
        for text, tags in [("Tara's team ships on Thursdays", ["work"]),
                           ("Tara's cat is called Miso", ["home"]),
                           ("The staging cluster runs on three nodes", ["work", "infra"])]:
            r, err = await call(s, "memory_remember", content=text, tags=tags, metadata={"src": "transfer"})
            assert not err and r["status"] == "created", r
            ids.append(r["id"])
        r, err = await call(s, "memory_update", id=ids[0], content="Tara's team ships on Wednesdays")
        assert not err, r
        r, err = await call(s, "memory_forget", id=ids[1])
        assert not err, r
    before = psql(database, SNAPSHOT)
    found_before = await search_ids(server, token, "when does the team ship?")

    out = tmp_path / "tara.jsonl"
    p = cli(database, "export", "--owner", OWNER, "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "exported 3 memories of tara" in p.stderr, p.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(l)["owner"] == OWNER for l in lines)
    assert any(json.loads(l)["revisions"] for l in lines), "the updated memory carries its revision"
    assert not (tmp_path / "tara.jsonl.partial").exists()

    for i in ids:
        psql(database, f"SELECT engram.forget(owner => '{OWNER}', id => '{i}', hard => true)")
    assert psql(database, f"SELECT count(*) FROM engram.memories WHERE owner = '{OWNER}'") == "0"

    p = cli(database, "import", str(out))
    assert p.returncode == 0, p.stderr
    assert "imported 3 memories" in p.stderr and "3 created" in p.stderr, p.stderr
    assert psql(database, SNAPSHOT) == before
    assert await search_ids(server, token, "when does the team ship?") == found_before

    # idempotent: a second import creates nothing
    p = cli(database, "import", str(out))
    assert p.returncode == 0 and "0 created, 3 exists" in p.stderr, p.stderr
    assert psql(database, f"SELECT count(*) FROM engram.memories WHERE owner = '{OWNER}'") == "3"


async def test_import_refuses_another_dimension_unless_reembedding(server, database, tmp_path):
    owner = "uma"
    memory = {"id": "6d0f3c1e-7a51-4d5e-9b0b-3c9f0c3f7a11", "owner": owner, "kind": "semantic",
              "content": "Uma's favourite editor is Helix", "tags": ["tools"], "metadata": {},
              "embedding": "[0.1,0.2,0.3]", "status": "active", "revisions": []}
    f = tmp_path / "uma.jsonl"
    f.write_text(json.dumps(memory) + "\n")
    p = cli(database, "import", str(f))
    assert p.returncode != 0 and "--reembed" in p.stderr and "3 dimensions" in p.stderr, p.stderr
    assert psql(database, f"SELECT count(*) FROM engram.memories WHERE owner = '{owner}'") == "0"

    p = cli(database, "import", "--reembed", str(f))
    assert p.returncode == 0 and "1 created" in p.stderr, p.stderr
    assert psql(database, f"SELECT vector_dims(embedding) FROM engram.memories WHERE owner = '{owner}'") == "384"
    token = psql(database, f"SELECT engram.create_token(owner => '{owner}', label => 'transfer')")
    assert await search_ids(server, token, "which editor does Uma like?") == [memory["id"]]


def test_import_into_another_owner_and_foreign_ids(database, tmp_path):
    memory = {"id": "0b6d1f0e-2f6e-4c41-8c3a-9a4a1e2b3c4d", "owner": "vic", "content": "Vic reads at night",
              "embedding": None}
    f = tmp_path / "vic.jsonl"
    f.write_text(json.dumps(memory) + "\n")
    p = cli(database, "import", "--owner", "wes", str(f))
    assert p.returncode == 0 and "1 created" in p.stderr, p.stderr
    assert psql(database, f"SELECT owner FROM engram.memories WHERE id = '{memory['id']}'") == "wes"
    # the same id for another owner: refused, nothing changed
    p = cli(database, "import", str(f))
    assert p.returncode != 0 and "belongs to another owner" in p.stderr, p.stderr
    assert psql(database, f"SELECT count(*) FROM engram.memories WHERE owner = 'vic'") == "0"
