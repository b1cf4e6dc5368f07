"""Errors in the shape the OpenAI API answers them with, and the log line behind each.

Every failure a client sees is ``{"error": {"message", "type", "param", "code"}}``
with an HTTP status, so the official clients raise the exception type they raise
for OpenAI (``BadRequestError``, ``NotFoundError``, ``ConflictError``, ...).

A :class:`SessionError` keeps its status and code, but not its text: that names
keys, hosts, ports and redis-py's own words, which are for the operator. The
client gets a message made from the code (and the id it asked about); the
server's log (logger ``redis_sessions.server``) gets one line with the code and
the error's own text. Where OpenAI has its own code, that code is used: an
unknown ``previous_response_id`` is a 400 ``previous_response_not_found``.
The server's checks of a request (a field of the wrong type, two fields OpenAI
refuses together) are ``session.input.invalid`` (400) naming the field in ``param``.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import ErrorCode, SessionError

log = logging.getLogger("redis_sessions.server")

CLIENT_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.STORE_CONFLICT: "The request conflicts with a write made at the same time (another worker answered "
                              "this turn first, or the id is taken).",
    ErrorCode.CHAIN_CYCLE_DETECTED: "The response's chain of previous responses loops.",
    ErrorCode.CHAIN_DEPTH_EXCEEDED: "The response's chain of previous responses is longer than this server keeps.",
    ErrorCode.CHAIN_UNAVAILABLE: "Part of the response's chain is being written; retry the request.",
    ErrorCode.ID_INVALID: "An id in the request is not valid: 1 to 256 characters, without whitespace, control characters "
                          "or braces.",
    ErrorCode.RECORD_TOO_LARGE: "The request or its response is larger than this server stores.",
    ErrorCode.RECORD_CORRUPT: "A stored record could not be read.",
    ErrorCode.BACKEND_UNAVAILABLE: "The session store is unavailable; retry the request.",
    ErrorCode.BACKEND_TIMEOUT: "The session store did not answer in time; retry the request.",
    ErrorCode.BACKEND_FULL: "The session store is full.",
    ErrorCode.BACKEND_DENIED: "The server is not allowed to use its session store.",
    ErrorCode.BACKEND_ERROR: "The session store answered with an unexpected error.",
    ErrorCode.BACKEND_NOT_REPLICATED: "The write was not confirmed by enough replicas in time; retry the request.",
    ErrorCode.CLIENT_WRONG_LOOP: "The server had an error while processing your request.",
    ErrorCode.CLIENT_CLOSED: "The server had an error while processing your request.",
    ErrorCode.INPUT_INVALID: "The request has a value the session store refuses.",
    ErrorCode.IDEMPOTENCY_KEY_REUSED: "The idempotency key was used before with another request.",
}
"""What the client reads for each code; a code missing here (the not-found ones) is
worded by :data:`NOT_FOUND` with the id the client asked about."""

NOT_FOUND: dict[ErrorCode, tuple[str, str]] = {
    ErrorCode.CHAIN_NOT_FOUND: ("Response", "response_id"),
    ErrorCode.CONVERSATION_NOT_FOUND: ("Conversation", "conversation_id"),
    ErrorCode.CONVERSATION_ITEM_NOT_FOUND: ("Item", "item_id"),
}
"""Per not-found code: the noun of its message, and the path parameter holding the id."""


class ApiError(Exception):
    """An error response: status, message, the request field at fault, a code, and the
    SessionError behind it (logged, never shown)."""

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str = ErrorCode.INPUT_INVALID.value, cause: SessionError | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.cause = cause

    @classmethod
    def invalid(cls, message: str, param: str | None) -> "ApiError":
        return cls(400, message, param=param)

    @classmethod
    def server_error(cls) -> "ApiError":
        """A 500 that tells the client no more: the cause is for the log."""
        return cls(500, "The server had an error while processing your request.", code="server_error")

    @classmethod
    def not_found(cls, what: ErrorCode, ident: str, param: str | None = None) -> "ApiError":
        noun = NOT_FOUND[what][0]
        return cls(404, f"{noun} with id {ident!r} not found.", param=param, code=what.value)

    @classmethod
    def previous_not_found(cls, ident: str, cause: SessionError | None = None) -> "ApiError":
        """OpenAI's answer to an unknown (or expired, or deleted) ``previous_response_id``."""
        return cls(400, f"Previous response with id {ident!r} not found.", param="previous_response_id",
                   code="previous_response_not_found", cause=cause)

    @classmethod
    def from_session_error(cls, exc: SessionError, param: str | None = None, ident: str | None = None) -> "ApiError":
        """``exc`` as the client sees it: its status and code, a message made from the code
        (and ``ident``, the id the client asked about, for a not-found)."""
        if exc.code in NOT_FOUND:
            noun = NOT_FOUND[exc.code][0]
            message = f"{noun} with id {ident!r} not found." if ident else f"{noun} not found."
        else:
            message = CLIENT_MESSAGES.get(exc.code, "The server had an error while processing your request.")
        return cls(exc.http_status, message, param=param, code=exc.code.value, cause=exc)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}

    @property
    def kind(self) -> str:
        return "invalid_request_error" if self.status < 500 else "server_error"

    def log(self, where: str) -> None:
        """One line for the operator: where, the status, and the SessionError's code and
        own text (the cause the client is not shown). A 5xx is a warning, a 4xx info."""
        if self.cause is not None:
            level = logging.WARNING if self.status >= 500 else logging.INFO
            log.log(level, "%s: %d %s: %s", where, self.status, self.cause.code.value, self.cause.message)
