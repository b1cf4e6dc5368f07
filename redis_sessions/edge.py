"""The one edge between a store and Redis: every script call and command goes through here.

One :class:`Edge` per store or session owns what every call to Redis needs, so that store
code never asks which API it runs on, nor writes any of it again:

- scripts by EVALSHA, and once by EVAL after NOSCRIPT (a restart, a failover, a
  ``SCRIPT FLUSH``), which also caches the script on whichever node ran it;
- replies undecoded (bytes) whatever the client's ``decode_responses``;
- a write that waits for ``replica_acks`` replicas (:mod:`.replication`);
- a re-sent write (its token found in the key's ring: a copy of a call that ran) answers
  ``{'\\0again', <what the first run answered>}`` (``lua/tokens.lua``): unwrapped here, and
  counted when telemetry is on (:mod:`.telemetry`);
- refusals: a script refuses with ``redis.error_reply('<WORD> <detail>')`` before its
  first write, and :data:`.errors.REFUSALS` maps the word to its code, as redis-py maps
  an error's prefix to a class; a caller that decides a refusal itself names its words
  in ``own`` and gets a :class:`Refusal`;
- every other redis-py or transport exception, as a coded SessionError (:func:`.errors.translate`);
- a pause between tries, and two calls at once, on either API.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Collection, Sequence

from redis import exceptions as rx
from redis.client import NEVER_DECODE

from . import telemetry
from .errors import ErrorCode, SessionError, refused, translate
from .link import RedisLink, awaitable, io
from .replication import ReplicaAcks, write_acked
from .scripts import Script

_RAW: dict[str, Any] = {NEVER_DECODE: []}
AGAIN = b"\x00again"
"""The first entry of a re-sent write's reply (lua/tokens.lua's ``again``)."""
MIGRATING_TRIES = 40
"""Times a two-key script is sent while its slot migrates, pauses growing from 10 ms to
0.5 s: about 15 s, unless the call's budget ends first."""


class Refusal(Exception):
    """A script's refusal that its caller decides itself (``own``): the script's word and
    detail, nothing written."""

    def __init__(self, word: str, detail: str) -> None:
        super().__init__(word, detail)
        self.word = word
        self.detail = detail


class Edge:
    """A store's one way to Redis: its link (the client of the running loop, the budget)
    and its replica acknowledgement."""

    __slots__ = ("link", "acks", "trips")

    def __init__(self, link: RedisLink, acks: ReplicaAcks | None = None) -> None:
        self.link = link
        self.acks = acks
        self.trips = 0
        """Round trips made so far (tests count them)."""

    @property
    def blocking(self) -> bool:
        """Whether the client is sync: then each call blocks and returns its reply."""
        return self.link.blocking

    async def run(self, lua: Script, keys: Sequence[str], args: Sequence[Any], *, where: str,
                  write: bool = False, own: Collection[str] = (), migrating: bool = False) -> Any:
        """The reply of ``lua`` on ``keys`` (one slot) with ``args``; a ``write`` is
        acknowledged by the replicas asked for. ``where`` names the key in errors.

        ``migrating``: a script on two keys, which Redis answers TRYAGAIN while their slot
        migrates and they are not together on one node (the script has not run): it is
        sent again, with a growing pause, until the migration lets it through or the
        call's budget ends (``session.backend.timeout``)."""
        for attempt in range(MIGRATING_TRIES if migrating else 1):
            try:
                reply = await self._run(lua, keys, args, write)
                if type(reply) is list and reply and reply[0] == AGAIN:
                    if telemetry.active is not None:
                        telemetry.active.resend(lua.name)
                    reply = reply[1]
                return reply
            except (rx.TryAgainError, rx.ClusterError) as exc:
                if not migrating or (isinstance(exc, rx.ClusterError) and "TTL" not in str(exc)):
                    raise failed(exc, where, own) from None
                await self.pause(min(0.01 * 2 ** attempt, 0.5))
            except Exception as exc:
                raise failed(exc, where, own) from None
        raise SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: its slot kept migrating")

    async def _run(self, lua: Script, keys: Sequence[str], args: Sequence[Any], write: bool) -> Any:
        self.trips += 1
        client = self.link.client
        if write and self.acks is not None:
            return await write_acked(client, keys[0], ("EVALSHA", lua.sha, len(keys), *keys, *args), self.acks,
                                     fallback=("EVAL", lua.source, len(keys), *keys, *args))
        try:
            return await io(client.execute_command("EVALSHA", lua.sha, len(keys), *keys, *args, **_RAW))
        except rx.NoScriptError:
            return await io(client.execute_command("EVAL", lua.source, len(keys), *keys, *args, **_RAW))

    def call(self, *command: Any) -> Awaitable[Any]:
        """One plain command, its reply undecoded: redis-py's own awaitable (a hot read, no
        coroutine of ours around it); what it raises goes through :func:`failed`."""
        self.trips += 1
        return awaitable(self.link.client.execute_command(*command, **_RAW))

    async def command(self, *command: Any, where: str, write: bool = False, **options: Any) -> Any:
        """One plain command on the key ``command[1]``, its reply undecoded, its errors
        coded; a ``write`` is acknowledged by the replicas asked for. ``options``:
        redis-py's for its reply (``get=True``: a SET ... GET's old value, not a bool)."""
        self.trips += 1
        try:
            if write and self.acks is not None:
                return await write_acked(self.link.client, command[1], command, self.acks, options=options)
            return await io(self.link.client.execute_command(*command, **_RAW, **options))
        except Exception as exc:
            raise failed(exc, where) from None

    async def pipeline(self, commands: Sequence[Sequence[Any]], *, where: str) -> list[Any]:
        """Commands in one round trip (``transaction=False``: on a cluster, each goes to its
        key's node), their replies undecoded, the first error raised coded."""
        self.trips += 1
        try:
            pipe = self.link.client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command, **_RAW)
            return list(await io(pipe.execute()))
        except Exception as exc:
            raise failed(exc, where) from None

    def pause(self, delay: float) -> Awaitable[None]:
        """Wait between two tries, never past the call's budget."""
        return self.link.pause(delay)

    async def together(self, *calls: Awaitable[Any]) -> list[Any]:
        """Independent calls (other keys, other slots) in one round trip's time on asyncio,
        one after the other on a sync client (each is done when it returns). The first
        error, if any, is raised once all have finished."""
        if self.blocking:
            outcomes: list[Any] = []
            for call in calls:
                try:
                    outcomes.append(await call)
                except Exception as exc:
                    outcomes.append(exc)
        else:
            outcomes = list(await asyncio.gather(*calls, return_exceptions=True))
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return outcomes


def failed(exc: Exception, where: str, own: Collection[str] = ()) -> Exception:
    """What a call that raised ``exc`` raises: a script's refusal as its code (a
    :class:`Refusal` when the caller owns its word), redis-py's exceptions coded, and
    anything else (a bug of ours) as itself."""
    if isinstance(exc, rx.ResponseError) and not isinstance(exc, rx.NoScriptError):
        word, _, detail = str(exc).partition(" ")
        if word in own:
            return Refusal(word, detail)
        refusal = refused(word, detail, where)
        if refusal is not None:
            return refusal
    return translate(exc, where) or exc
