"""EngramStore against LangGraph's own PostgresStore, on the same cluster
and the same vectors, in one run: p50 per put and per search, and recall@10
of each store's search against an exact scan.

Both stores embed with engram-mcp's model: EngramStore on the server, and
PostgresStore through an embed function that calls the same server's
/v1/embed, so each put and query pays for one embedding either way.

    scripts/bench --langgraph [--items 2000] [--queries 100]

The documents are generated (seeded): short facts about people, places and
things, with enough overlap between them that the nearest ten are not
obvious."""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

import httpx
import psycopg
from langgraph.store.postgres import PostgresStore

from pg_engram.langgraph import EngramStore

PEOPLE = ["Alice", "Bob", "Marta", "Yusuf", "Chen", "Priya", "Lars", "Amara", "Diego", "Ines", "Kenji", "Olga"]
VERBS = ["prefers", "dislikes", "is learning", "recommends", "plans to try", "keeps forgetting", "wrote about",
         "is allergic to", "collects", "teaches"]
THINGS = ["aisle seats on trains", "window seats on planes", "green tea", "black coffee", "sourdough bread",
          "the Lyon office", "the billing API", "jazz records", "mountain hiking", "chess openings", "Rust macros",
          "spicy ramen", "oat milk", "the Q3 report", "vintage cameras", "salsa dancing", "bird watching",
          "early meetings", "open-plan offices", "electric bikes", "board games", "watercolour painting",
          "Portuguese lessons", "the night shift", "cold showers", "the staging database", "podcasts on history"]
WHEN = ["on Mondays", "since last spring", "when travelling", "at work", "every weekend", "after lunch", "", ""]


def documents(n: int, rng: random.Random) -> list[str]:
    return [" ".join(filter(None, [rng.choice(PEOPLE), rng.choice(VERBS), rng.choice(THINGS), rng.choice(WHEN)]))
            + f" (note {i})" for i in range(n)]


def questions(n: int, rng: random.Random) -> list[str]:
    forms = ["What does {p} think about {t}?", "Who {v} {t}?", "{p} and {t}", "anything about {t} {w}"]
    return [rng.choice(forms).format(p=rng.choice(PEOPLE), v=rng.choice(VERBS), t=rng.choice(THINGS),
                                     w=rng.choice(WHEN)).strip() for _ in range(n)]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b)) / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    host, port, mcp_bin = (os.environ[k] for k in ("ENGRAM_BENCH_HOST", "ENGRAM_BENCH_PORT", "ENGRAM_MCP_BIN"))
    rng = random.Random(args.seed)
    docs, queries = documents(args.items, rng), questions(args.queries, rng)
    run = uuid.uuid4().hex[:8]
    engram_db, lg_db = f"lgbench_engram_{run}", f"lgbench_pg_{run}"
    admin = f"host={host} port={port} user=postgres dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {engram_db}")
        c.execute(f"CREATE DATABASE {lg_db}")
    proc = None
    try:
        with psycopg.connect(f"host={host} port={port} user=postgres dbname={engram_db}", autocommit=True) as c:
            c.execute("CREATE EXTENSION engram CASCADE")
            c.execute("SELECT engram.configure(embedding_model => 'local:all-MiniLM-L6-v2')")
            token = c.execute("SELECT engram.create_token(owner => 'bench', label => 'langgraph bench')").fetchone()[0]
        listen = "127.0.0.1:18181"
        env = dict(os.environ, ENGRAM_DATABASE_URL=f"host={host} port={port} user=engram_mcp dbname={engram_db}",
                   ENGRAM_LISTEN=listen, RUST_LOG="warn")
        proc = subprocess.Popen([mcp_bin, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://{listen}"
        for _ in range(200):
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)

        def embed(texts: list[str]) -> list[list[float]]:
            out: list[list[float]] = []
            for i in range(0, len(texts), 64):
                r = http.post("/v1/embed", json={"texts": texts[i:i + 64]})
                r.raise_for_status()
                out += r.json()["embeddings"]
            return out

        print(f"embedding {len(docs)} documents and {len(queries)} queries for the exact scan", file=sys.stderr)
        doc_vectors, query_vectors = embed(docs), embed(queries)
        exact = [sorted(range(len(docs)), key=lambda i: -cosine(q, doc_vectors[i]))[:10] for q in query_vectors]

        def measure(name: str, store: Any) -> dict[str, float]:
            puts, searches, recall = [], [], []
            for i, text in enumerate(docs):
                t = time.perf_counter()
                store.put(("bench", "facts"), f"d{i}", {"text": text})
                puts.append(time.perf_counter() - t)
                if (i + 1) % 500 == 0:
                    print(f"  {name}: {i + 1}/{len(docs)} put", file=sys.stderr)
            for q, truth in zip(queries, exact):
                t = time.perf_counter()
                hits = store.search(("bench",), query=q, limit=10)
                searches.append(time.perf_counter() - t)
                got = {int(h.key[1:]) for h in hits}
                recall.append(len(got & set(truth)) / 10)
            return {"put": p50(puts), "search": p50(searches), "recall": statistics.mean(recall)}

        engram = EngramStore(url, token, index={"fields": ["text"]})
        results = {"EngramStore": measure("EngramStore", engram)}
        lg_conn = f"host={host} port={port} user=postgres dbname={lg_db}"
        with PostgresStore.from_conn_string(lg_conn, index={"dims": 384, "embed": embed, "fields": ["text"]}) as pg:
            pg.setup()
            results["PostgresStore"] = measure("PostgresStore", pg)
        e, p = results["EngramStore"], results["PostgresStore"]
        print(f"\nLangGraph stores, {len(docs)} items, {len(queries)} queries (same cluster, same model)\n")
        print("| store | put p50 ms | search p50 ms | search recall@10 vs exact |")
        print("|---|---|---|---|")
        for name, r in results.items():
            print(f"| {name} | {r['put']:.2f} | {r['search']:.2f} | {r['recall']:.3f} |")
        print(f"| EngramStore / PostgresStore | {e['put'] / p['put']:.2f}x | {e['search'] / p['search']:.2f}x | "
              f"{e['recall'] - p['recall']:+.3f} |")
    finally:
        if proc:
            proc.terminate()
            proc.wait(10)
        with psycopg.connect(admin, autocommit=True) as c:
            for db in (engram_db, lg_db):
                c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


if __name__ == "__main__":
    main()
