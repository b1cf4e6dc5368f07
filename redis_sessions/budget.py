"""Time budgets: one public call takes at most ``timeout`` seconds, retries, pauses and
pages included, on both APIs.

A budget is a deadline carried through the whole call, not a timeout per socket
operation: a call that makes ten round trips on a slow link would otherwise take ten
socket timeouts.

- **asyncio**: :func:`bounded` registers the call's task with one watchdog per event
  loop, which cancels it once past its deadline (``session.backend.timeout``).
- **sync** (a store method driven by ``run_blocking``, no loop): :func:`bounded` sets
  the deadline in a context variable for the length of the call. Every place that may
  wait reads it: a client this package builds caps each socket read and write at what
  is left (:func:`bounded_connection`) and its retries stop sleeping at the deadline
  (:class:`DeadlineBackoff`); a link hands out its client only while time is left
  (:func:`check`), and a pause between tries never sleeps past it (:func:`pause`). A
  caller's own sync client keeps its own socket timeouts, so such a call may overrun
  by one of them.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import sys
import time
import weakref
from typing import Any, Awaitable, Callable, TypeVar

from redis import exceptions as rx
from redis.backoff import ExponentialBackoff

from . import telemetry
from .errors import ErrorCode, SessionError

T = TypeVar("T")

DEFAULT_TIMEOUT = 5.0
"""Seconds one public call may take in total, redis-py's retries included."""

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("redis_sessions_deadline", default=None)
"""The ``time.monotonic()`` a sync call must end by (None: no sync call with a budget)."""


def remaining() -> float | None:
    """Seconds left of the running sync call's budget (None: no budget is running)."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()


def _out_of_time() -> SessionError:
    return SessionError(ErrorCode.BACKEND_TIMEOUT, "no answer from Redis within the call's budget")


def check() -> None:
    """Refuse to start another round trip once the sync call's budget is spent."""
    left = remaining()
    if left is not None and left <= 0:
        raise _out_of_time()


async def _ready() -> None:
    return None


def pause(delay: float, blocking: bool) -> Awaitable[None]:
    """Wait ``delay`` seconds between two tries: the thread sleeps on the sync API (no
    loop to yield to), never past the call's deadline; ``asyncio.sleep`` otherwise (the
    watchdog ends it at the deadline)."""
    if not blocking:
        return asyncio.sleep(delay)
    left = remaining()
    if left is not None and left <= delay:
        raise _out_of_time()
    time.sleep(delay)
    return _ready()


class DeadlineBackoff(ExponentialBackoff):
    """redis-py's exponential backoff, which ends a sync call's retries rather than sleep
    past its deadline (redis-py raises what ``compute`` raises, before it sleeps)."""

    def compute(self, failures: int) -> float:
        delay: float = super().compute(failures)
        left = remaining()
        if left is not None and left <= delay:
            raise rx.TimeoutError("the call's time budget ran out between two tries")
        return delay


_BOUNDED_CLASSES: dict[type, type] = {}


def bounded_connection(base: type) -> type:
    """``base`` (a redis-py sync connection class) whose every socket write and read waits
    at most what is left of the running call's budget: past it, a ``TimeoutError``, which
    the retry ends at once (:class:`DeadlineBackoff`). Outside a bounded call, ``base``'s
    own timeouts apply unchanged."""
    made = _BOUNDED_CLASSES.get(base)
    if made is not None:
        return made
    base_send: Callable[..., None] = getattr(base, "send_packed_command")
    base_read: Callable[..., Any] = getattr(base, "read_response")

    def send_packed_command(self: Any, command: Any, check_health: bool = True) -> None:
        left = remaining()
        if left is not None:
            if left <= 0:
                raise rx.TimeoutError("the call's time budget ran out before the command was sent")
            if self._sock is not None and (self.socket_timeout is None or left < self.socket_timeout):
                self._sock.settimeout(left)
        base_send(self, command, check_health)

    def read_response(self: Any, *args: Any, **kwargs: Any) -> Any:
        left = remaining()
        if left is not None and "timeout" not in kwargs:
            if left <= 0:
                raise rx.TimeoutError("the call's time budget ran out before the reply came")
            if self.socket_timeout is None or left < self.socket_timeout:
                kwargs["timeout"] = left
        return base_read(self, *args, **kwargs)

    made = type(f"Bounded{base.__name__}", (base,), {"send_packed_command": send_packed_command,
                                                    "read_response": read_response, "__module__": __name__})
    _BOUNDED_CLASSES[base] = made
    return made


WATCH_TICK = 0.05
"""How often the watchdog looks for calls past their budget (seconds)."""


class _Watchdog:
    """One timer per event loop, ticking only while bounded calls are in flight,
    that cancels each call past its deadline.

    A per-call timer (``asyncio.timeout``) costs a heap push and a cancelled
    handle per call, a few percent of a call on loopback; a deadline in a
    dict costs a small fraction of that, at the price of up to
    ``WATCH_TICK`` of lateness. A call's whole cost here is one clock read and
    a dict entry made and removed: the deadline is a bare float, and only a call
    past it is noted (in ``expired``), by the tick. The loop is held weakly: the
    watchdogs of every loop that ever ran a call are kept by loop, and holding
    it would keep each finished loop alive.
    """

    __slots__ = ("loop", "deadlines", "expired", "ticking")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = weakref.ref(loop)
        self.deadlines: dict[asyncio.Task[Any], float] = {}
        self.expired: set[asyncio.Task[Any]] = set()
        self.ticking = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.ticking = True
        loop.call_later(WATCH_TICK, self.tick)

    def tick(self) -> None:
        loop = self.loop()
        if loop is None:
            return
        now = loop.time()
        for task, deadline in list(self.deadlines.items()):
            if now >= deadline and task not in self.expired:
                self.expired.add(task)
                task.cancel()
        if self.deadlines:
            loop.call_later(WATCH_TICK, self.tick)
        else:
            self.ticking = False


_watchdogs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watchdog] = weakref.WeakKeyDictionary()
_last_watchdog: list[_Watchdog | None] = [None]  # the usual case, one loop: no weak-dict lookup


def _watchdog_of(loop: asyncio.AbstractEventLoop) -> _Watchdog:
    watchdog = _watchdogs.get(loop)
    if watchdog is None:
        watchdog = _watchdogs[loop] = _Watchdog(loop)
    _last_watchdog[0] = watchdog
    return watchdog


async def _sync_call(method: Callable[..., Awaitable[T]], budget: float, owner: Any, args: Any, kwargs: Any) -> T:
    """A sync call under its deadline (an outer bounded call's, if there is one)."""
    if _deadline.get() is not None:
        return await method(owner, *args, **kwargs)
    token = _deadline.set(time.monotonic() + budget)
    try:
        return await method(owner, *args, **kwargs)
    finally:
        _deadline.reset(token)


def bounded(method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Run a public coroutine method under ``self.timeout`` (None: no budget).

    Past the budget the call raises ``session.backend.timeout``; a write may or
    may not have run, and since every write is idempotent, retrying it is safe.

    With telemetry on (:mod:`.telemetry`), the call runs again inside its span, measured,
    whatever it ends with (a budget's timeout included); off, that costs one test.
    """
    qualname = method.__qualname__

    @functools.wraps(method)
    async def run(self: Any, *args: Any, **kwargs: Any) -> T:
        if telemetry.active is not None and telemetry.claim():
            return await telemetry.active.observe(run, qualname, self, args, kwargs)  # type: ignore[no-any-return]
        link = getattr(self, "link", None)
        if link is not None and link._closing:
            link.check_open()  # a call on a closed store or session: session.client.closed
        budget = self.timeout
        if budget is None:
            return await method(self, *args, **kwargs)
        loop = asyncio._get_running_loop()
        if loop is None or (link is not None and link.blocking):
            # A sync call (run_blocking), even one made from inside a running loop's thread.
            return await _sync_call(method, budget, self, args, kwargs)
        watchdog = _last_watchdog[0]
        if watchdog is None or watchdog.loop() is not loop:
            watchdog = _watchdog_of(loop)
        task = asyncio.current_task(loop)
        deadlines = watchdog.deadlines
        if task is None or task in deadlines:  # a bounded call inside another: the outer budget governs
            return await method(self, *args, **kwargs)
        deadlines[task] = loop.time() + budget
        if not watchdog.ticking:
            watchdog.start(loop)
        try:
            return await method(self, *args, **kwargs)
        except asyncio.CancelledError:
            if task not in watchdog.expired:
                raise
            if sys.version_info >= (3, 11):
                task.uncancel()
            raise SessionError(ErrorCode.BACKEND_TIMEOUT, f"no answer from Redis within {budget:g} s") from None
        finally:
            del deadlines[task]
            if watchdog.expired:
                watchdog.expired.discard(task)

    return run
