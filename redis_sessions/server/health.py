"""Is Redis there: the check at startup and the readiness probe.

Both PING Redis through the stores' own clients (one PING per distinct client),
under the stores' call budget. At startup, a failure that only a change of
configuration can mend (credentials or ACL refused: ``session.backend.denied``;
a host name that does not resolve) stops the app with one log line; a Redis that
is merely unreachable (refused, timing out, loading) does not: the app starts,
logs a warning, and every request tries Redis again. ``GET /readyz`` answers 200
while Redis answers PING and 503 while it does not; ``GET /healthz`` never touches
Redis.
"""

from __future__ import annotations

import asyncio
import socket

from ..errors import ErrorCode, SessionError
from ..budget import DEFAULT_TIMEOUT
from ..link import RedisLink
from ..errors import translate
from .errors import log


def links_of(*stores: object) -> list[RedisLink]:
    """The distinct links of ``stores`` (every store this package builds has one)."""
    links: list[RedisLink] = []
    for store in stores:
        link = getattr(store, "link", None)
        if isinstance(link, RedisLink) and all(link is not seen for seen in links):
            links.append(link)
    return links


async def ping(links: list[RedisLink]) -> None:
    """PING each link's Redis; a :class:`SessionError` (its cause chained) if one fails."""
    for link in links:
        try:
            await asyncio.wait_for(link.client.ping(), link.timeout or DEFAULT_TIMEOUT)
        except SessionError:
            raise
        except Exception as exc:
            error = translate(exc, "PING")
            if error is None:
                raise
            raise error from exc  # the cause tells a host name that does not resolve


def configuration_fault(exc: SessionError) -> str | None:
    """What is wrong with the configuration, when the failure says so; None for an outage."""
    if exc.code is ErrorCode.BACKEND_DENIED:
        return "Redis refused the credentials or the ACL permissions (check the user name, password and ACL rules)"
    if exc.code is ErrorCode.INPUT_INVALID:  # a database number the server lacks
        return "the Redis URL does not fit the server (check its database number)"
    seen: BaseException | None = exc.__cause__
    while seen is not None:
        if isinstance(seen, socket.gaierror) and seen.errno != socket.EAI_AGAIN:
            return "the Redis host name does not resolve (check the URL's host)"
        seen = seen.__cause__ or seen.__context__
    return None


async def startup_check(links: list[RedisLink]) -> None:
    """Raise (the app does not start) on a configuration fault; warn on an outage."""
    try:
        await ping(links)
    except SessionError as exc:
        fault = configuration_fault(exc)
        if fault is not None:
            log.error("cannot start: %s [%s: %s]", fault, exc.code.value, exc.message)
            raise
        log.warning("Redis does not answer at startup; serving anyway, each request tries again [%s: %s]",
                    exc.code.value, exc.message)
