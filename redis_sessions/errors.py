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

import asyncio
from enum import Enum

from redis import exceptions as rx


class ErrorCode(str, Enum):
    """The stable code of a :class:`SessionError`; its value is the string a gateway sees
    (``session.chain.not_found``). Codes are only ever added, never renamed."""

    STORE_CONFLICT = "session.store.conflict"
    CHAIN_NOT_FOUND = "session.chain.not_found"
    CHAIN_CYCLE_DETECTED = "session.chain.cycle_detected"
    CHAIN_DEPTH_EXCEEDED = "session.chain.depth_exceeded"
    CHAIN_UNAVAILABLE = "session.chain.unavailable"
    ID_INVALID = "session.id.invalid"
    RECORD_TOO_LARGE = "session.record.too_large"
    RECORD_CORRUPT = "session.record.corrupt"
    RECORD_UNSUPPORTED = "session.record.unsupported"
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
    # written in another data format than this version reads (docs/key-layout.md): a rolling
    # deploy's newer writer, or a layout from before the first format; never misread
    ErrorCode.RECORD_UNSUPPORTED: 500,
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
        """The HTTP status a gateway should return for this error's ``code``."""
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


# -- redis-py's exceptions, as SessionErrors ---------------------------------------

class translate_errors:
    """``async with translate_errors(where):`` turns redis-py exceptions raised in the
    block into SessionErrors. A class, not a generator: it sits on every call."""

    __slots__ = ("where",)

    def __init__(self, where: str) -> None:
        self.where = where

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if not isinstance(exc, Exception):
            return None
        replacement = translated(exc, self.where)
        if replacement is not exc:
            raise replacement from None


def translated(exc: Exception, where: str) -> Exception:
    """What ``translate_errors`` raises for ``exc``, for the hottest reads, which catch
    it themselves (a ``try`` costs nothing until it raises; ``async with`` runs two
    coroutines on every call): the SessionError, or ``exc`` itself when it is not
    redis-py's."""
    if isinstance(exc, SessionError):
        return exc
    return translate(exc, where) or exc


_DENIED = (rx.AuthenticationError, rx.AuthorizationError, rx.NoPermissionError)
_NOT_NOW = (rx.BusyLoadingError, rx.TryAgainError, rx.ClusterDownError, rx.ReadOnlyError, rx.AskError)
"""redis-py's classes for a server that cannot serve now (MasterDownError and MovedError are subclasses)."""
_NOT_NOW_PREFIXES = ("BUSY",)
"""Error replies redis-py has no class for, by the server's prefix: a script running too long."""
_CORRUPT_HINTS = ("WRONGTYPE", "not an integer", "not a valid float", "out of range")


def translate(exc: BaseException, where: str) -> SessionError | None:
    """The SessionError for an exception from redis-py or the transport, known by its
    type; None for anything else (a bug of ours, which should surface as itself)."""
    if isinstance(exc, SessionError):
        return exc
    if isinstance(exc, rx.NoScriptError):  # only if the retry-as-EVAL path itself failed
        return SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: script could not be loaded")
    if isinstance(exc, _DENIED):
        return SessionError(ErrorCode.BACKEND_DENIED, f"{where}: Redis refused the credentials or ACL permissions: {exc}")
    if isinstance(exc, rx.ResponseError):
        return _translate_reply(exc, where)
    if isinstance(exc, (rx.TimeoutError, TimeoutError, asyncio.TimeoutError)):
        return SessionError(ErrorCode.BACKEND_TIMEOUT, f"{where}: Redis did not answer in time")
    if isinstance(exc, (rx.RedisError, rx.RedisClusterException, OSError, EOFError)):
        return SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: Redis is unavailable: {exc}")
    if isinstance(exc, RuntimeError) and ("loop" in str(exc)):
        return SessionError(ErrorCode.CLIENT_WRONG_LOOP, f"{where}: the Redis client belongs to another event loop ({exc})")
    return None


def _translate_reply(exc: rx.ResponseError, where: str) -> SessionError:
    text = str(exc)
    if isinstance(exc, rx.OutOfMemoryError) or "used memory > 'maxmemory'" in text:  # the latter: inside a script
        return SessionError(ErrorCode.BACKEND_FULL, f"{where}: Redis is out of memory (maxmemory): {text}")
    if "no permissions" in text:  # an ACL refusal inside a script, as older servers word it
        return SessionError(ErrorCode.BACKEND_DENIED, f"{where}: Redis refused the credentials or ACL permissions: {text}")
    if isinstance(exc, _NOT_NOW) or text.startswith(_NOT_NOW_PREFIXES):
        return SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: Redis cannot serve this now: {text}")
    if "DB index" in text:  # SELECT on connecting: the URL names a database the server lacks
        return SessionError(ErrorCode.INPUT_INVALID, f"{where}: the URL's database number is out of the server's "
                            "range (databases, 16 by default)")
    if any(hint in text for hint in _CORRUPT_HINTS):
        return SessionError(ErrorCode.RECORD_CORRUPT, f"{where} holds data of the wrong type or shape: {text}")
    return SessionError(ErrorCode.BACKEND_ERROR, f"{where}: Redis answered with an error: {text}")


REFUSALS: dict[str, ErrorCode] = {
    "RSEXISTS": ErrorCode.STORE_CONFLICT,  # the id is taken, by another record
    "RSEXPECTED": ErrorCode.STORE_CONFLICT,  # the parent is not the one the caller expected
    "RSPARENT": ErrorCode.CHAIN_NOT_FOUND,  # the parent named is not there (or is another owner's)
    "RSTAKEN": ErrorCode.STORE_CONFLICT,  # a root's id is in a thread of another owner
    "RSCYCLE": ErrorCode.CHAIN_CYCLE_DETECTED,
    "RSDEEP": ErrorCode.CHAIN_DEPTH_EXCEEDED,
    "RSCORRUPT": ErrorCode.RECORD_CORRUPT,  # a key's bookkeeping does not parse
    "RSVERSION": ErrorCode.RECORD_UNSUPPORTED,  # a key written in another data format
    "RSFORGOTTEN": ErrorCode.STORE_CONFLICT,  # a re-sent pop whose item is no longer remembered
    "RSFULL": ErrorCode.INPUT_INVALID,  # past a count the caller set (max_items)
    "RSREUSED": ErrorCode.IDEMPOTENCY_KEY_REUSED,
    "RSNOCONV": ErrorCode.CONVERSATION_NOT_FOUND,
    "RSNOITEM": ErrorCode.CONVERSATION_ITEM_NOT_FOUND,
    "RSDUP": ErrorCode.STORE_CONFLICT,  # an item id a live item of the conversation has
    "RSCURSOR": ErrorCode.INPUT_INVALID,  # a page's cursor names no item the conversation holds or keeps
}
"""Every refusal a script makes, by the first word of its error reply: a script refuses
with ``redis.error_reply('<WORD> <sentence>')`` before its first write (lua/*.lua)."""


def refused(word: str, sentence: str, where: str) -> SessionError | None:
    """The SessionError of a script's refusal (None: ``word`` is not one of ours)."""
    code = REFUSALS.get(word)
    return None if code is None else SessionError(code, f"{where}: {sentence}")
