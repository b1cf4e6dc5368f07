"""How far a call ran past its budget, apart from how busy this machine is.

A call is timed beside a plain timer of its budget, started with it and run the same
way (on the same event loop, or in the same thread pool for a sync call). How late
that timer ends is the machine's lateness (other processes, a loaded event loop, the
GIL), which a call suffers too; a bound ``elapsed <= timer + margin`` leaves the
margin to the guarantee alone::

    elapsed, error, timer = await beside_a_timer(1.0, session.get_items)
    assert elapsed <= timer + OVERRUN
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

from redis_sessions import SessionError

OVERRUN = 1.0
"""What a call may take past its budget: the guarantee (docs/guarantees.md, "Bounded time")."""


async def took(call: Callable[[], Awaitable[Any]]) -> tuple[float, SessionError | None]:
    """How long ``call()`` took, and the SessionError it raised (None: it returned)."""
    start = time.monotonic()
    try:
        await call()
    except SessionError as exc:
        return time.monotonic() - start, exc
    return time.monotonic() - start, None


def took_sync(call: Callable[[], Any]) -> tuple[float, SessionError | None]:
    start = time.monotonic()
    try:
        call()
    except SessionError as exc:
        return time.monotonic() - start, exc
    return time.monotonic() - start, None


async def beside_a_timer(seconds: float, call: Callable[[], Any], *,
                         in_thread: bool = False) -> tuple[float, SessionError | None, float]:
    """``took(call)`` in this task, and how long a plain wait of ``seconds`` started with
    it took; with ``in_thread``, ``call`` is a sync call and both run in the loop's
    thread pool (``asyncio.to_thread``)."""
    if in_thread:
        timer = asyncio.ensure_future(asyncio.to_thread(took_sync, lambda: time.sleep(seconds)))
        elapsed, error = await asyncio.to_thread(took_sync, call)
    else:
        timer = asyncio.ensure_future(took(lambda: asyncio.sleep(seconds)))
        elapsed, error = await took(call)
    return elapsed, error, (await timer)[0]
