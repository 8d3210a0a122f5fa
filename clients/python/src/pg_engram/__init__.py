"""pg-engram: the Python client of engram, long-term memory for AI agents
inside PostgreSQL.

    from pg_engram import Client
    with Client("http://localhost:8080", token) as engram:
        engram.remember("Alice prefers window seats")
        for hit in engram.search("where does Alice like to sit?"):
            print(hit.score, hit.content)

`pg_engram.langgraph` holds LangGraph's store (`EngramStore`), and
`pg_engram.mem0` a Mem0-shaped facade (`Memory`)."""

from ._client import AsyncClient, Client
from ._errors import (AuthenticationError, BadRequestError, ConflictError, ConnectionFailedError, EngramError,
                      NotFoundError, PayloadTooLargeError, PermissionDeniedError, UnavailableError)
from ._models import (Conflict, ConflictingMemory, Embeddings, Entity, Erased, Item, Memory, MemoryPage, PutResult,
                      Remembered, Revision, SearchHit, SearchResults, Token, Updated)

__version__ = "0.24.0"

__all__ = [
    "AsyncClient", "Client",
    "AuthenticationError", "BadRequestError", "ConflictError", "ConnectionFailedError", "EngramError",
    "NotFoundError", "PayloadTooLargeError", "PermissionDeniedError", "UnavailableError",
    "Conflict", "ConflictingMemory", "Embeddings", "Entity", "Erased", "Item", "Memory", "MemoryPage", "PutResult",
    "Remembered", "Revision", "SearchHit", "SearchResults", "Token", "Updated",
]
