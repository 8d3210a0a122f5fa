"""Errors: every refusal of the server is an RFC 9457 problem; its status
picks the exception class, and the SQLSTATE and hint the database gave
travel with it."""

from __future__ import annotations

from typing import Any


class EngramError(Exception):
    """An error answer from engram-mcp (or no answer at all, `status` 0)."""

    def __init__(self, status: int, detail: str, *, title: str = "", sqlstate: str | None = None,
                 hint: str | None = None, problem: dict[str, Any] | None = None) -> None:
        self.status = status
        self.title = title
        self.detail = detail
        self.sqlstate = sqlstate
        self.hint = hint
        self.problem: dict[str, Any] = problem or {}
        parts = [f"{status} {title}".strip() + ": " + detail if status else detail]
        if sqlstate:
            parts.append(f"(SQLSTATE {sqlstate})")
        if hint:
            parts.append(f"hint: {hint}")
        super().__init__(" ".join(parts))


class BadRequestError(EngramError):
    """400/422: the request was refused as it stands (see detail and hint); nothing changed."""


class AuthenticationError(EngramError):
    """401: no token, or one that is unknown, revoked or expired."""


class PermissionDeniedError(EngramError):
    """403: the token may not do this (e.g. a user token naming another user)."""


class NotFoundError(EngramError):
    """404: nothing of the caller's is there."""


class ConflictError(EngramError):
    """409 from a call other than remember (remember returns a `Conflict`)."""


class PayloadTooLargeError(EngramError):
    """413: a body, content or batch over the server's limits."""


class UnavailableError(EngramError):
    """503 after every retry: the database is busy or unreachable; try again later."""


class ConnectionFailedError(EngramError):
    """No answer: the server could not be reached, or the call timed out."""


_BY_STATUS: dict[int, type[EngramError]] = {
    400: BadRequestError, 401: AuthenticationError, 403: PermissionDeniedError, 404: NotFoundError,
    409: ConflictError, 413: PayloadTooLargeError, 422: BadRequestError, 503: UnavailableError,
}


def error_from(status: int, body: Any) -> EngramError:
    """The exception for an error answer, from its problem document (or
    from whatever the body is, when a proxy answered instead)."""
    problem = body if isinstance(body, dict) else {}
    detail = problem.get("detail") or problem.get("error") or (body if isinstance(body, str) and body else "")
    cls = _BY_STATUS.get(status, EngramError)
    return cls(status, str(detail) or "no detail given", title=str(problem.get("title") or ""),
               sqlstate=problem.get("sqlstate"), hint=problem.get("hint"), problem=problem)
