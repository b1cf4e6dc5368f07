"""Item sessions for synchronous code (a Celery task, a script, a threaded server),
built as the response store's is (:mod:`redis_sessions.responses.sync`): the logic is
the ``async def`` methods of :class:`~.redis.RedisSession`, held here on a redis-py
*sync* client and run with :func:`~redis_sessions.link.run_blocking`. Every script
call, LRANGE and PING blocks and returns its reply, so each coroutine ends on its first
``send(None)``: no loop, no thread, nothing copied.

Threads: one session may be shared. A write whose outcome is unknown (a lost reply, a
timeout) is remembered per thread (:class:`~redis_sessions.tokens.Pending`), so the
same thread's retry of the same call carries the same token and lands once, and two
threads' calls are never merged.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Union

from ..client import without_decode
from ..errors import ErrorCode, SessionError
from ..link import Blocking, RedisLink, SyncRedis, run_blocking
from ..options import Configured, SessionOptions
from .compaction import CompactionOutcome, CompactionSession, ShouldTrigger
from .redis import RedisSession, Snapshot, _timeout

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings


class SyncRedisSession(Blocking, Configured):
    """An item session in Redis from synchronous code: :class:`RedisSession`'s methods
    (the Agents SDK ``Session`` protocol's ``get_items``, ``add_items``, ``pop_item``,
    ``clear_session``, and ``ping``, ``fork``, ``snapshot``, ``replace_prefix``) with the
    same arguments, options, results and errors, without ``await``, on a redis-py sync
    client. Safe to share between threads."""

    OPTIONS = SessionOptions

    core: RedisSession

    def __init__(self, session_id: str, *, client: Optional[SyncRedis] = None, redis_client: Optional[SyncRedis] = None,
                 link: Optional[RedisLink] = None, core: Optional[RedisSession] = None, **options: Any) -> None:
        """``client`` (or ``redis_client``): a redis-py sync ``Redis`` or ``RedisCluster``,
        never closed here. ``options``: :class:`RedisSession`'s. ``core``: the session to
        run (a fork's; internal)."""
        if core is None:
            if client is not None and redis_client is not None:
                raise SessionError(ErrorCode.INPUT_INVALID,
                                   "pass client or redis_client (the Agents SDK's name for it), not both")
            client = client if client is not None else redis_client
            link = self._blocking_link("SyncRedisSession", client, link, _timeout(options), raw_replies=True)
            core = RedisSession(session_id, link=link, **options)
        self.core = core
        """The session whose methods this one runs: its logic is the only copy."""

    @classmethod
    def from_url(cls, session_id: str, *, url: str, redis_kwargs: Optional[Mapping[str, Any]] = None,
                 cluster: Optional[bool] = None, **options: Any) -> "SyncRedisSession":
        """A session with its own sync client, for every thread (closed by :meth:`close`,
        after which the session raises ``session.client.closed``): the URLs and
        ``redis_kwargs`` of :meth:`RedisSession.from_url`. No I/O."""
        link = RedisLink.to_url(url, cluster=cluster, timeout=_timeout(options),
                                redis_kwargs=without_decode(redis_kwargs), blocking=True)
        return cls(session_id, link=link, **options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.session_id!r}, key_prefix={self.key_prefix!r})"


    @property
    def options(self) -> SessionOptions:
        """The session's options (:class:`RedisSession`'s)."""
        return self.core.options

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self.core.session_id

    @property
    def session_settings(self) -> Optional["SessionSettings"]:
        """The Agents SDK's ``SessionSettings`` (the default ``limit`` of :meth:`get_items`); settable."""
        return self.core.session_settings

    @session_settings.setter
    def session_settings(self, value: Union["SessionSettings", dict[str, Any], None]) -> None:
        self.core.session_settings = value

    # -- the Session protocol -----------------------------------------------------------
    def get_items(self, limit: Optional[int] = None) -> list["TResponseInputItem"]:
        """:meth:`RedisSession.get_items`, blocking."""
        return run_blocking(self.core.get_items(limit))

    def add_items(self, items: list["TResponseInputItem"], *, idempotency_key: Optional[str] = None) -> None:
        """:meth:`RedisSession.add_items`, blocking."""
        run_blocking(self.core.add_items(items, idempotency_key=idempotency_key))

    def pop_item(self) -> Optional["TResponseInputItem"]:
        """:meth:`RedisSession.pop_item`, blocking."""
        return run_blocking(self.core.pop_item())

    def clear_session(self) -> None:
        """:meth:`RedisSession.clear_session`, blocking."""
        run_blocking(self.core.clear_session())

    def ping(self) -> bool:
        """:meth:`RedisSession.ping`, blocking."""
        return run_blocking(self.core.ping())

    # -- beyond the protocol ------------------------------------------------------------
    def fork(self, new_session_id: str, *, upto: Optional[int] = None) -> "SyncRedisSession":
        """A new session holding this one's first ``upto`` items (see :meth:`RedisSession.fork`);
        it shares this session's client, and so its :meth:`close`."""
        return SyncRedisSession(new_session_id, core=run_blocking(self.core.fork(new_session_id, upto=upto)))

    def snapshot(self) -> Snapshot:
        """:meth:`RedisSession.snapshot`, blocking."""
        return run_blocking(self.core.snapshot())

    def replace_prefix(self, snapshot: Snapshot, items: list[Any]) -> bool:
        """:meth:`RedisSession.replace_prefix`, blocking."""
        return run_blocking(self.core.replace_prefix(snapshot, items))

    def close(self) -> None:
        """Close the client this session built (``from_url``); the session is closed then
        (``session.client.closed``). With a client you gave it, nothing."""
        run_blocking(self.core.close())


_ASYNC_COMPACTOR = "SyncCompactionSession's compactor is a plain function; CompactionSession takes an async one"


class SyncCompactionSession:
    """:class:`~.compaction.CompactionSession` for synchronous code: wraps a
    :class:`SyncRedisSession`, and its ``compact`` and ``run_compaction`` run the same
    steps (snapshot, trigger, compactor, the checked replace) with ``compactor`` a plain
    function of the items. The other methods are the session's."""

    def __init__(self, underlying: SyncRedisSession, compactor: Callable[[list[Any]], list[Any]], *,
                 should_trigger: Optional[ShouldTrigger] = None) -> None:
        if not isinstance(underlying, SyncRedisSession):
            raise SessionError(ErrorCode.INPUT_INVALID,
                               f"SyncCompactionSession wraps a SyncRedisSession, got {type(underlying).__name__}")
        if inspect.iscoroutinefunction(compactor):
            raise SessionError(ErrorCode.INPUT_INVALID, _ASYNC_COMPACTOR)

        def plain(items: list[Any]) -> list[Any]:
            # any other callable that returns an awaitable (a partial, an object) is
            # refused as it returns, before the replace writes: never run_blocking's
            # SuspendedError
            replacement = compactor(items)
            if inspect.isawaitable(replacement):
                if inspect.iscoroutine(replacement):
                    replacement.close()
                raise SessionError(ErrorCode.INPUT_INVALID, _ASYNC_COMPACTOR)
            return replacement

        self.underlying = underlying
        self.core = CompactionSession(underlying.core, plain, should_trigger=should_trigger)
        """The compaction whose steps this one runs: its logic is the only copy."""

    @property
    def session_id(self) -> str:
        """The wrapped session's id."""
        return self.underlying.session_id

    def get_items(self, limit: Optional[int] = None) -> list["TResponseInputItem"]:
        """The wrapped session's :meth:`SyncRedisSession.get_items`."""
        return self.underlying.get_items(limit)

    def add_items(self, items: list["TResponseInputItem"], *, idempotency_key: Optional[str] = None) -> None:
        """The wrapped session's :meth:`SyncRedisSession.add_items`."""
        self.underlying.add_items(items, idempotency_key=idempotency_key)

    def pop_item(self) -> Optional["TResponseInputItem"]:
        """The wrapped session's :meth:`SyncRedisSession.pop_item`."""
        return self.underlying.pop_item()

    def clear_session(self) -> None:
        """The wrapped session's :meth:`SyncRedisSession.clear_session`."""
        self.underlying.clear_session()

    def run_compaction(self, args: Optional[Mapping[str, Any]] = None) -> None:
        """:meth:`CompactionSession.run_compaction`, blocking, with the plain ``compactor``."""
        run_blocking(self.core.run_compaction(args))

    def compact(self, *, force: bool = False, args: Optional[Mapping[str, Any]] = None) -> CompactionOutcome:
        """:meth:`CompactionSession.compact`, blocking, with the plain ``compactor``."""
        return run_blocking(self.core.compact(force=force, args=args))
