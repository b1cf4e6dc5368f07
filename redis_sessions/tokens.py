"""Operation tokens: the one exactly-once mechanism of every store's writes.

A reply can be lost after the server ran the command, and redis-py then sends the
same command again. Every write script therefore carries one token per logical
call in its ARGV, and the key it changes remembers the tokens of its recent writes
with what each answered (``lua/tokens.lua``, put in front of every write script): a
copy that finds its token has no second effect and answers what the first did.

Tokens are retained by time, not by count: at least 30 s of server time after their
write, within 1 KiB of tokens per key (about 32 entries), the oldest dropped first. The
window therefore holds 30 s for a key written up to once a second, and the last 32
writes of a key written faster (the rings before kept 16 writes, whatever the time).
Nothing here reads a worker's clock.

Three kinds of caller retry are told apart:

- redis-py's own re-send of a command: the same ARGV, so the same token.
- A caller's retry with an ``idempotency_key``: the token is the key, hashed, with a
  fingerprint of the call's body; any caller's retry of that key is recognised, and
  a key reused with another body is refused (``session.idempotency.key_reused``, 422),
  as Stripe and the IETF Idempotency-Key draft refuse it.
- A caller's retry without a key (the Agents SDK's Session protocol has none): see
  :class:`Pending`.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import weakref
from typing import Any, Iterable, Optional

from .errors import ErrorCode, SessionError

TOKEN_HEX = 16
RETAIN_S = 30
"""How long a key remembers a write's token at least, in seconds of server time
(lua/tokens.lua's TOKENS_RETAIN_S; a test holds the two equal)."""
RETAIN_MS = RETAIN_S * 1000
"""The same, in ms: a key left holding only its ring (a deleted thread or conversation,
a cleared or emptied session without a TTL) is kept this long."""
MAX_BYTES = 1024
"""The most bytes of tokens a key keeps (TOKENS_MAX_BYTES): an entry takes 29 bytes at
least (a one-letter outcome: 32), so at most 35 entries. Every write reads and rewrites
them: the bound keeps that copy small whatever the write rate."""


def new_token() -> bytes:
    """A random token, one per call. From os.urandom, so forked workers never share a
    sequence (``random`` would, after a fork)."""
    return os.urandom(TOKEN_HEX // 2).hex().encode()


def keyed_token(idempotency_key: str, body: Iterable[bytes]) -> bytes:
    """The token of a call made with ``idempotency_key``: the key, hashed (16 hex), and a
    fingerprint of what the call writes (``body``, its parts framed by their lengths)."""
    key = hashlib.blake2b(idempotency_key.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    fingerprint = hashlib.blake2b(digest_size=4)
    for part in body:
        fingerprint.update(len(part).to_bytes(8, "big"))
        fingerprint.update(part)
    return b"k" + key.encode() + b"." + fingerprint.hexdigest().encode()


class Pending:
    """The calls of one session object whose outcome is unknown, by the task that made them.

    A call that failed with a timeout or a lost connection may have run. When the same
    task calls the same operation with the same arguments again, that is its retry, and
    it carries the first call's token: the server answers what the first run did (a
    retried pop returns the item the lost pop removed). Another task's call, or another
    operation, gets a token of its own: two coroutines' calls are never merged. Entries
    live as long as their task (weakly keyed), one per task."""

    __slots__ = ("_by_task",)

    def __init__(self) -> None:
        self._by_task: weakref.WeakKeyDictionary[Any, tuple[str, bytes, object]] = weakref.WeakKeyDictionary()

    def token(self, operation: str, what: object) -> bytes:
        """The token of this call: the failed call's, if this is the same task retrying it."""
        task = _task()
        pending = self._by_task.pop(task, None) if task is not None else None
        if pending is not None and pending[0] == operation and pending[2] == what:
            return pending[1]
        return new_token()

    def failed(self, operation: str, token: bytes, what: object, exc: BaseException) -> None:
        """The call raised ``exc``: if its outcome is unknown (it may have run), remember it
        for the same task's retry."""
        task = _task()
        if task is not None and unknown_outcome(exc):
            self._by_task[task] = (operation, token, what)


_MAYBE_RAN = frozenset({ErrorCode.BACKEND_UNAVAILABLE, ErrorCode.BACKEND_TIMEOUT, ErrorCode.BACKEND_ERROR,
                    ErrorCode.BACKEND_NOT_REPLICATED})


def unknown_outcome(exc: BaseException) -> bool:
    """Whether a write that raised ``exc`` may have run: a timeout, a lost connection or
    a cancellation may come after the server ran it; a refusal (bad input, a conflict,
    a full session) never does; a write not confirmed by its replicas did run."""
    if isinstance(exc, SessionError):
        return exc.code in _MAYBE_RAN
    return True


def _task() -> Optional[object]:
    """The caller: its asyncio task, or with no loop running (a sync store's call) its thread."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return threading.current_thread()
