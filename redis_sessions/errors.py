"""The one error type of the package, with stable codes a gateway can map to HTTP.

Every failure that crosses the public API is a :class:`SessionError`; nothing
from redis-py or msgspec escapes raw. Codes are part of the public contract:
never rename one, only add (``tests/test_errors.py`` pins the set).
"""

from __future__ import annotations

from enum import Enum


class ErrorCode(str, Enum):
    STORE_CONFLICT = "session.store.conflict"
    CHAIN_NOT_FOUND = "session.chain.not_found"
    CHAIN_CYCLE_DETECTED = "session.chain.cycle_detected"
    CHAIN_DEPTH_EXCEEDED = "session.chain.depth_exceeded"
    CHAIN_UNAVAILABLE = "session.chain.unavailable"
    ID_INVALID = "session.id.invalid"
    RECORD_TOO_LARGE = "session.record.too_large"
    RECORD_CORRUPT = "session.record.corrupt"
    BACKEND_UNAVAILABLE = "session.backend.unavailable"
    BACKEND_TIMEOUT = "session.backend.timeout"
    BACKEND_FULL = "session.backend.full"
    BACKEND_DENIED = "session.backend.denied"
    BACKEND_ERROR = "session.backend.error"
    CLIENT_WRONG_LOOP = "session.client.wrong_loop"
    INPUT_INVALID = "session.input.invalid"

    def __str__(self) -> str:
        return self.value


HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.STORE_CONFLICT: 409,
    ErrorCode.CHAIN_NOT_FOUND: 404,
    ErrorCode.CHAIN_CYCLE_DETECTED: 422,
    ErrorCode.CHAIN_DEPTH_EXCEEDED: 422,
    ErrorCode.CHAIN_UNAVAILABLE: 409,
    ErrorCode.ID_INVALID: 400,
    ErrorCode.RECORD_TOO_LARGE: 413,
    ErrorCode.RECORD_CORRUPT: 500,
    ErrorCode.BACKEND_UNAVAILABLE: 503,  # down, unreachable, restarting, failing over: try again
    ErrorCode.BACKEND_TIMEOUT: 503,  # no answer within the call's budget: the write may or may not have run
    ErrorCode.BACKEND_FULL: 507,  # maxmemory reached under noeviction: not an outage, retrying will not help
    ErrorCode.BACKEND_DENIED: 500,  # NOAUTH / WRONGPASS / NOPERM: the gateway's credentials or ACL are wrong
    ErrorCode.BACKEND_ERROR: 500,  # Redis answered with an error this package does not expect
    ErrorCode.CLIENT_WRONG_LOOP: 500,  # a caller's client used from another event loop than its own
    ErrorCode.INPUT_INVALID: 400,
}


class SessionError(Exception):
    """A failure with a stable ``code`` and the ``http_status`` a gateway should return."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]

    def to_dict(self) -> dict[str, object]:
        """The body a gateway can return, shaped like an OpenAI API error."""
        return {"error": {"code": self.code.value, "message": self.message, "type": "session_error"}}
