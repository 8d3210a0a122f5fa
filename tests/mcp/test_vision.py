"""Vision memories over MCP (docs/VISION.md) with the Python SDK, against
engram-mcp --vision and a real local HTTP image-embedding service
(image_embedder.py: colour histograms for images, colour words for texts):
put, search by text and by image, the session filter, release, search again;
memories holding images; isolation; and the tools' absence without --vision."""

import asyncio
import base64
import hashlib
import io

import httpx
import pytest
from PIL import Image, ImageDraw

from conftest import call, mcp_session, new_database, psql, serving
from image_embedder import Embedder

pytestmark = pytest.mark.anyio


def png(colour, size=(48, 32), dot=None):
    img = Image.new("RGB", size, colour)
    if dot:
        ImageDraw.Draw(img).rectangle((2, 2, 6, 6), fill=dot)
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


def jpeg(colour):
    out = io.BytesIO()
    Image.new("RGB", (40, 40), colour).save(out, "JPEG", quality=95)
    return out.getvalue()


def b64(data):
    return base64.b64encode(data).decode()


@pytest.fixture(scope="module")
def embedder():
    e = Embedder()
    yield e
    e.close()


@pytest.fixture(scope="module")
def vision(embedder):
    """A database with tokens for alice and bob, and engram-mcp --vision on the test embedder."""
    db = new_database()
    tokens = {o: psql(db, f"SELECT engram.create_token(owner => '{o}', label => 'pytest')") for o in ("alice", "bob")}
    with serving(db, "--vision", "--image-embedder-url", embedder.url, "--tools", "all") as base:
        yield db, base, tokens


async def searchable(session, shas, **where):
    """Waits until the background worker has embedded `shas` (they are put
    without an embedding); returns the last search result."""
    for _ in range(100):
        found, err = await call(session, "memory_vision_search", query="anything", limit=50, **where)
        assert not err, found
        if set(shas) <= {h["sha256"] for h in found["results"]}:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"images {shas} were not embedded in time")


async def test_put_search_both_ways_release_and_search_again(vision):
    db, base, tokens = vision
    red, green, blue = png("#ff0000"), png("#00ff00", size=(20, 60)), jpeg("#0000ff")
    async with mcp_session(base, tokens["alice"]) as s:
        names = {t.name for t in (await s.list_tools()).tools}
        assert {"memory_image_put", "memory_image_release", "memory_vision_search"} <= names
        ids = {}
        for name, data, mime in [("red", red, "image/png"), ("green", green, "image/png"), ("blue", blue, "image/jpeg")]:
            put, err = await call(s, "memory_image_put", data=b64(data), mime=mime, session_id="s1")
            assert not err, put
            assert put["sha256"] == hashlib.sha256(data).hexdigest()
            assert put["embedding"] == "queued", "the put returns before the embedding"
            ids[name] = put["sha256"]
        await searchable(s, ids.values())

        # text -> image: the colour named comes first
        for word in ("red", "green", "blue"):
            found, err = await call(s, "memory_vision_search", query=f"a {word} square", limit=3)
            assert not err, found
            assert found["results"][0]["sha256"] == ids[word], (word, found)
            assert found["results"][0]["similarity"] > found["results"][1]["similarity"]
        # image -> image: another red picture (other bytes, a white dot) finds the red one first
        query = png("#fe0000", size=(30, 30), dot="#ffffff")
        found, err = await call(s, "memory_vision_search", image=b64(query), limit=2)
        assert not err, found
        assert found["results"][0]["sha256"] == ids["red"]
        assert found["results"][0]["session_id"] == "s1" and found["results"][0]["created_at"].endswith("Z")
        # the session filter
        yellow = png("#ffff00")
        put, _ = await call(s, "memory_image_put", data=b64(yellow), mime="image/png", session_id="s2")
        await searchable(s, [put["sha256"]])
        found, _ = await call(s, "memory_vision_search", query="red", session_id="s2")
        assert [h["sha256"] for h in found["results"]] == [put["sha256"]]
        # the same bytes again: one image, two references
        again, _ = await call(s, "memory_image_put", data=b64(red), mime="image/png")
        assert again["sha256"] == ids["red"]
        assert psql(db, f"SELECT refs FROM engram.images WHERE sha256 = '{ids['red']}'") == "2"

        # release: one reference left keeps the image; the last erases it
        left, err = await call(s, "memory_image_release", sha256=ids["red"])
        assert (left["refs"], err) == (1, False)
        found, _ = await call(s, "memory_vision_search", query="red", limit=1)
        assert found["results"][0]["sha256"] == ids["red"]
        left, _ = await call(s, "memory_image_release", sha256=ids["red"].upper())
        assert left["refs"] == 0
        found, _ = await call(s, "memory_vision_search", query="red", limit=50)
        assert ids["red"] not in {h["sha256"] for h in found["results"]}, "searched again: gone"
        assert psql(db, f"SELECT count(*) FROM engram.image_data WHERE sha256 = '{ids['red']}'") == "0"
        text, err = await call(s, "memory_image_release", sha256=ids["red"])
        assert err and "not found" in text
    health = httpx.get(base + "/health").json()
    assert health["image_embedder"] == "ok" and health["image_model"].startswith("openai:clip@"), health


async def test_a_memory_holds_its_images_until_hard_forget(vision):
    db, base, tokens = vision
    shot = png("#ff00ff", size=(64, 40))
    async with mcp_session(base, tokens["alice"]) as s:
        put, _ = await call(s, "memory_image_put", data=b64(shot), mime="image/png")
        sha = put["sha256"]
        mem, err = await call(s, "memory_remember", content="the deploy page showed a magenta error banner",
                              metadata={"images": [sha]})
        assert not err, mem
        released, _ = await call(s, "memory_image_release", sha256=sha)
        assert released["refs"] == 1, "the memory still holds the image"
        text, err = await call(s, "memory_image_release", sha256=sha)
        assert err and "forgotten for good" in text, "a memory's hold is not the agent's to release"
        await searchable(s, [sha])
        found, _ = await call(s, "memory_vision_search", query="magenta", limit=1)
        assert found["results"][0]["sha256"] == sha
        forgot, err = await call(s, "memory_forget", id=mem["id"], hard=True)
        assert not err, forgot
        found, _ = await call(s, "memory_vision_search", query="magenta", limit=50)
        assert sha not in {h["sha256"] for h in found["results"]}
        assert psql(db, f"SELECT count(*) FROM engram.images WHERE sha256 = '{sha}'") == "0"
        # naming an image one does not hold is refused, and stores nothing
        text, err = await call(s, "memory_remember", content="a memory of a missing image",
                               metadata={"images": [sha]})
        assert err and "image_put" in text


async def test_refusals_and_isolation(vision):
    db, base, tokens = vision
    async with mcp_session(base, tokens["alice"]) as alice, mcp_session(base, tokens["bob"]) as bob:
        cyan = png("#00ffff")
        put, _ = await call(alice, "memory_image_put", data=b64(cyan), mime="image/png")
        await searchable(alice, [put["sha256"]])
        # bob neither finds nor releases alice's image
        found, err = await call(bob, "memory_vision_search", query="cyan", limit=50)
        assert not err and put["sha256"] not in {h["sha256"] for h in found["results"]}
        text, err = await call(bob, "memory_image_release", sha256=put["sha256"])
        assert err and "not found" in text
        # refusals say what to do, and store nothing
        before = psql(db, "SELECT count(*) FROM engram.images")
        for data, mime, says in [
            (b64(cyan), "text/html", "image/png"),
            (b64(b"#!/bin/sh\necho hi"), "image/png", "not a image/png"),
            (b64(cyan), "image/jpeg", "mime 'image/png'"),
            ("%%% not base64", "image/png", "base64"),
        ]:
            text, err = await call(alice, "memory_image_put", data=data, mime=mime)
            assert err and says in text, text
        assert psql(db, "SELECT count(*) FROM engram.images") == before
        text, err = await call(alice, "memory_vision_search")
        assert err and "exactly one" in text
        # k is clamped to 50 by the database
        found, err = await call(alice, "memory_vision_search", query="cyan", limit=1000)
        assert not err and 1 <= len(found["results"]) <= 50


async def test_images_the_embedder_refuses_do_not_hold_up_the_rest(vision):
    db, base, tokens = vision
    async with mcp_session(base, tokens["bob"]) as s:
        # PNG signatures followed by junk: stored (the bytes look like PNGs),
        # but no decoder reads them. More than one background batch of them.
        for i in range(9):
            junk = b"\x89PNG\r\n\x1a\n" + f"not really a picture {i}".encode()
            put, err = await call(s, "memory_image_put", data=b64(junk), mime="image/png")
            assert not err, put
        green = png("#00ff00", size=(16, 16), dot="#00ee00")
        put, _ = await call(s, "memory_image_put", data=b64(green), mime="image/png")
        found = await searchable(s, [put["sha256"]])
        assert [h["sha256"] for h in found["results"]] == [put["sha256"]], "the junk stays unembedded"
        assert psql(db, "SELECT count(*) FROM engram.images WHERE owner = 'bob' AND embedded_at IS NULL") == "9"


async def test_without_vision_the_tools_are_absent_and_say_how_to_enable(embedder):
    db = new_database()
    token = psql(db, "SELECT engram.create_token(owner => 'alice', label => 'pytest')")
    with serving(db, "--tools", "all") as base:
        async with mcp_session(base, token) as s:
            names = {t.name for t in (await s.list_tools()).tools}
            assert not names & {"memory_image_put", "memory_image_release", "memory_vision_search"}
            assert "memory_search" in names
            text, err = await call(s, "memory_vision_search", query="red")
            assert err and "--vision" in text and "--image-embedder-url" in text, text
            text, err = await call(s, "memory_image_put", data=b64(png("red")), mime="image/png")
            assert err and "--vision" in text
    assert psql(db, "SELECT count(*) FROM engram.images") == "0"
