"""A FastAPI back end that serves many users through one engram platform
token: each request names its user (here from a header your auth layer
would set), and engram keeps every user's memories apart in SQL.

    pip install fastapi uvicorn ./clients/python
    ENGRAM_URL=http://localhost:8080 ENGRAM_TOKEN=<a platform token> uvicorn examples.fastapi_backend:app
"""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Header
from pydantic import BaseModel

from pg_engram import AsyncClient, Conflict


class Note(BaseModel):
    text: str


engram: AsyncClient


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    global engram
    async with AsyncClient(os.environ["ENGRAM_URL"], os.environ["ENGRAM_TOKEN"]) as engram:
        yield


app = FastAPI(lifespan=lifespan)


@app.post("/notes")
async def remember(note: Note, x_user: str = Header()) -> dict:
    stored = await engram.as_user(x_user).remember(note.text)
    if isinstance(stored, Conflict):
        # this app's rule: a newer statement replaces what it contradicts
        stored = await engram.as_user(x_user).resolve(stored, supersede=stored.ids)
    return {"id": str(stored.id), "status": stored.status}


@app.get("/notes")
async def search(q: str, x_user: str = Header()) -> list[str]:
    return [hit.content for hit in await engram.as_user(x_user).search(q, limit=5)]
