"""The one error type of the package, with stable codes a gateway can map to HTTP.

Every failure that crosses the public API is a :class:`SessionError`; nothing
from redis-py or msgspec escapes raw. Codes are part of the public contract:
never rename one, only add (``tests/test_errors_and_config.py`` pins the set).

Some codes are also a built-in exception type, the one the OpenAI Agents SDK's
sessions raise in the same situation, so code written against the SDK catches
them unchanged: a bad argument (``session.input.invalid``, ``session.id.invalid``)
is a ``TypeError`` and a ``ValueError``, an oversized item a ``ValueError``, and
a closed session or a client from another event loop a ``RuntimeError``.
``SessionError(code, message)`` builds the right subclass itself, so the type
follows from the code wherever the error is raised.
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
    BACKEND_NOT_REPLICATED = "session.backend.not_replicated"
    CLIENT_WRONG_LOOP = "session.client.wrong_loop"
    CLIENT_CLOSED = "session.client.closed"
    INPUT_INVALID = "session.input.invalid"
    CONVERSATION_NOT_FOUND = "session.conversation.not_found"
    CONVERSATION_ITEM_NOT_FOUND = "session.conversation.item_not_found"
    IDEMPOTENCY_KEY_REUSED = "session.idempotency.key_reused"

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
    # replica_acks: the write is on the master, fewer replicas than asked confirmed it in time; retry is safe
    ErrorCode.BACKEND_NOT_REPLICATED: 503,
    ErrorCode.CLIENT_WRONG_LOOP: 500,  # a caller's client used from another event loop than its own
    ErrorCode.CLIENT_CLOSED: 500,  # a session used after close() released the client it built
    ErrorCode.INPUT_INVALID: 400,
    ErrorCode.CONVERSATION_NOT_FOUND: 404,  # no such conversation (never created, deleted or expired)
    ErrorCode.CONVERSATION_ITEM_NOT_FOUND: 404,  # the conversation exists, the item does not (or was deleted)
    # an idempotency key used again with another body (Stripe, the IETF Idempotency-Key draft: 422)
    ErrorCode.IDEMPOTENCY_KEY_REUSED: 422,
}


class SessionError(Exception):
    """A failure with a stable ``code`` and the ``http_status`` a gateway should return.

    ``SessionError(code, message)`` is an instance of the subclass for ``code``
    (see the module), so ``except SessionError`` and ``except ValueError`` (say)
    both catch a bad argument.
    """

    def __new__(cls, code: ErrorCode, message: str) -> "SessionError":
        if cls is SessionError:
            cls = _SUBCLASS.get(code, SessionError)
        return super().__new__(cls, code, message)

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message

    def __reduce__(self) -> tuple[type["SessionError"], tuple[ErrorCode, str]]:
        # Pickled (a worker process reporting to its parent) as the code and message.
        return SessionError, (self.code, self.message)

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]

    def to_dict(self) -> dict[str, object]:
        """The body a gateway can return, shaped like an OpenAI API error."""
        return {"error": {"code": self.code.value, "message": self.message, "type": "session_error"}}


class InvalidArgumentError(SessionError, TypeError, ValueError):
    """``session.input.invalid`` and ``session.id.invalid``: where the SDK raises a
    ``TypeError`` (an item ``json`` cannot encode) or a ``ValueError`` (a TTL out of range)."""


class TooLargeError(SessionError, ValueError):
    """``session.record.too_large``: a value out of range, as the SDK calls one."""


class ClientStateError(SessionError, RuntimeError):
    """``session.client.closed`` and ``session.client.wrong_loop``: the SDK's
    ``RuntimeError("RedisSession is closed")``, and asyncio's for a client on another loop."""


_SUBCLASS: dict[ErrorCode, type[SessionError]] = {
    ErrorCode.INPUT_INVALID: InvalidArgumentError,
    ErrorCode.ID_INVALID: InvalidArgumentError,
    ErrorCode.RECORD_TOO_LARGE: TooLargeError,
    ErrorCode.CLIENT_CLOSED: ClientStateError,
    ErrorCode.CLIENT_WRONG_LOOP: ClientStateError,
}
