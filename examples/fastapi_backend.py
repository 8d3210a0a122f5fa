"""A FastAPI back end that serves many users through one engram platform
token: each request acts for the user the app authenticated, and engram
keeps every user's memories apart in SQL.

    pip install fastapi uvicorn ./clients/python
    ENGRAM_URL=http://127.0.0.1:8080 ENGRAM_TOKEN=$(cat .engram/token) uvicorn examples.fastapi_backend:app

The user comes from your authentication, never from what the caller
claims: `current_user` below stands for it (here a table of session
tokens, empty until you fill it: every request is 401 until then; in an
app, your session or JWT check).
"""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Header, HTTPException
from pydantic import BaseModel

from pg_engram import AsyncClient, Conflict

# session token -> user: a stand-in for the app's own authentication
SESSIONS: dict[str, str] = {}


def current_user(authorization: str | None = Header(default=None)) -> str:
    user = SESSIONS.get((authorization or "").removeprefix("Bearer ").strip())
    if user is None:
        raise HTTPException(status_code=401, detail="sign in first")
    return user


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
async def remember(note: Note, user: str = Depends(current_user)) -> dict:
    mine = engram.as_user(user)
    stored = await mine.remember(note.text)
    if isinstance(stored, Conflict):
        # this app's rule: a newer statement replaces what it contradicts
        stored = await mine.resolve(stored, supersede=stored.ids)
    return {"id": str(stored.id), "status": stored.status}


@app.get("/notes")
async def search(q: str, user: str = Depends(current_user)) -> list[str]:
    return [hit.content for hit in await engram.as_user(user).search(q, limit=5)]
