"""SLOWLOG on a private server: every command's time, and the slowest of each kind.

The tests that prove "no command over 5 ms" log every command (threshold 0), run their
largest calls in rounds, and keep the least of the rounds per kind of command, since
other processes share the machine: a command over 5 ms in every round is the store's.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable

from redis.asyncio import Redis


@asynccontextmanager
async def every_command_logged(client: Redis) -> AsyncIterator[None]:
    """SLOWLOG records every command while inside; the server's settings come back after."""
    config: Any = await client.config_get("slowlog-*")
    await client.config_set("slowlog-log-slower-than", 0)
    await client.config_set("slowlog-max-len", 10_000)
    try:
        yield
    finally:
        await client.config_set("slowlog-log-slower-than", config["slowlog-log-slower-than"])
        await client.config_set("slowlog-max-len", config["slowlog-max-len"])


async def slowest(client: Redis, kind: Callable[[list[bytes], bytes], "str | None"]) -> dict[str, int]:
    """The longest duration (us) of each kind of command in SLOWLOG. ``kind(words, command)``
    names an entry's kind (None: leave it out); ``words`` are its first three words."""
    out: dict[str, int] = {}
    for entry in await client.slowlog_get(10_000):
        name = kind(entry["command"].split(b" ", 2), entry["command"])
        if name is not None:
            out[name] = max(out.get(name, 0), entry["duration"])
    return out


def least(seen: dict[str, int], round_: dict[str, int]) -> dict[str, int]:
    """Per kind, the least of the rounds so far."""
    return {k: min(v, seen.get(k, v)) for k, v in round_.items()}


async def least_over_rounds(client: Redis, run_round: Callable[[], Awaitable[None]],
                            kind: Callable[[list[bytes], bytes], "str | None"],
                            *, limit_us: int = 5000, rounds: int = 12) -> dict[str, int]:
    """Run ``run_round`` once to load the scripts, then up to ``rounds`` times with every
    command logged, keeping per kind the least of the rounds' slowest; stop as soon as
    every kind has been under ``limit_us`` once. SLOWLOG counts wall time, so a server
    descheduled by the other test processes on a 2-core machine reads slow in that round;
    a command slow in every round is slow itself."""
    seen: dict[str, int] = {}
    async with every_command_logged(client):
        await run_round()
        for _ in range(rounds):
            await client.slowlog_reset()
            await run_round()
            seen = least(seen, await slowest(client, kind))
            if all(v < limit_us for v in seen.values()):
                break
    return seen
