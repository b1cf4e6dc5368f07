"""Errors in the shape the OpenAI API answers them with.

Every failure a client sees is ``{"error": {"message", "type", "param", "code"}}``
with an HTTP status: a :class:`SessionError` keeps its own status and code, and
the server's checks of a request (a field of the wrong type, two fields OpenAI
refuses together) are ``session.input.invalid`` (400) naming the field in
``param``, so the official clients raise the exception type they raise for OpenAI
(``BadRequestError``, ``NotFoundError``, ``ConflictError``, ...).
"""

from __future__ import annotations

from typing import Any

from ..errors import ErrorCode, SessionError


class ApiError(Exception):
    """An error response: status, message, the request field at fault, and a code."""

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str = ErrorCode.INPUT_INVALID.value) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    @classmethod
    def invalid(cls, message: str, param: str | None) -> "ApiError":
        return cls(400, message, param=param)

    @classmethod
    def not_found(cls, message: str, param: str | None = None) -> "ApiError":
        return cls(404, message, param=param, code=ErrorCode.CHAIN_NOT_FOUND.value)

    @classmethod
    def from_session_error(cls, exc: SessionError, param: str | None = None) -> "ApiError":
        return cls(exc.http_status, exc.message, param=param, code=exc.code.value)

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}
