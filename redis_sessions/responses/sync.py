"""The response store for synchronous code: Flask, Django, Celery, scripts.

The store's logic is written once, as the ``async def`` methods of
:class:`~.store.RedisResponseSessionStore`. This class holds one of those stores on a
redis-py *sync* client and runs each method's coroutine with
:func:`~redis_sessions.link.run_blocking`: every call through the store's edge blocks on
its socket and returns the reply, so the coroutine never suspends and ends on its first
``send(None)``. Nothing is copied between the two APIs, so they cannot drift, and no
event loop, thread or future is involved.

Threads and processes: one store (its one client and connection pool) serves every
thread of a threaded server; the store keeps no state between calls. After a fork the
pool notices the new pid and opens new connections, so a child never reuses a parent's
socket. The budget (``timeout``) is a deadline carried through the whole call
(:mod:`redis_sessions.budget`).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..keys import KeySpace
from ..limits import UNSET, _Unset
from ..link import Blocking, RedisLink, SyncRedis, run_blocking
from ..models import ResponseSessionSnapshot, StoredResponseSession
from ..options import ResponseOptions
from .store import RedisResponseSessionStore


class SyncResponseSessionStore(Blocking):
    """Response chains in Redis from synchronous code: the methods of
    :class:`RedisResponseSessionStore`, the same options, arguments, results and errors,
    on a redis-py sync client (``redis.Redis``, ``redis.cluster.RedisCluster``, a
    sentinel's master), with no event loop. Safe to share between threads."""

    core: RedisResponseSessionStore

    def __init__(self, client: SyncRedis | None = None, *, link: RedisLink | None = None, conversations: Any = None,
                 **options: Any) -> None:
        """``client``: a redis-py sync ``Redis`` or ``RedisCluster``, never closed here.
        ``conversations``: a :class:`~redis_sessions.SyncConversationStore` with this store's
        prefix; a response saved with ``conversation_id`` then appends its turn to it in the
        same script, as on the asyncio store."""
        timeout = ResponseOptions.of(**options).timeout
        link = self._blocking_link("SyncResponseSessionStore", client, link, timeout)
        self.core = RedisResponseSessionStore(link=link, conversations=getattr(conversations, "core", conversations),
                                              **options)

    @classmethod
    def from_url(cls, url: str, *, cluster: bool | None = None, redis_kwargs: Mapping[str, Any] | None = None,
                 conversations: Any = None, **options: Any) -> "SyncResponseSessionStore":
        """A store with its own sync client, for every thread (closed by :meth:`close`):
        the URLs and ``redis_kwargs`` of :meth:`RedisResponseSessionStore.from_url`. No I/O."""
        timeout = ResponseOptions.of(**options).timeout
        return cls(link=RedisLink.to_url(url, cluster=cluster, timeout=timeout, redis_kwargs=redis_kwargs,
                                         blocking=True), conversations=conversations, **options)

    @property
    def keys(self) -> KeySpace:
        """The store's key layout (its prefix and key names)."""
        return self.core.keys

    @property
    def options(self) -> ResponseOptions:
        """The store's options (:class:`RedisResponseSessionStore`'s)."""
        return self.core.options

    @property
    def round_trips(self) -> int:
        """:attr:`RedisResponseSessionStore.round_trips`."""
        return self.core.round_trips

    def new_response_id(self, previous_response_id: str | None = None, *, conversation_id: str | None = None,
                        owner: str | None = None) -> str:
        """:meth:`RedisResponseSessionStore.new_response_id`, blocking."""
        return run_blocking(self.core.new_response_id(previous_response_id, conversation_id=conversation_id,
                                                      owner=owner))

    def get(self, response_id: str, *, owner: str | None = None) -> StoredResponseSession | None:
        """:meth:`RedisResponseSessionStore.get`, blocking."""
        return run_blocking(self.core.get(response_id, owner=owner))

    def resolve_chain(self, previous_response_id: str | None, *, max_depth: int | None = None,
                      include_incomplete: bool = False, owner: str | None = None) -> ResponseSessionSnapshot:
        """:meth:`RedisResponseSessionStore.resolve_chain`, blocking."""
        return run_blocking(self.core.resolve_chain(previous_response_id, max_depth=max_depth,
                                                    include_incomplete=include_incomplete, owner=owner))

    def save(self, session: StoredResponseSession, *,
             expected_previous_response_id: str | None | _Unset = UNSET, overwrite: bool = False,
             owner: str | None = None) -> None:
        """:meth:`RedisResponseSessionStore.save`, blocking."""
        run_blocking(self.core.save(session, expected_previous_response_id=expected_previous_response_id,
                                    overwrite=overwrite, owner=owner))

    def delete(self, response_id: str, *, owner: str | None = None) -> bool:
        """:meth:`RedisResponseSessionStore.delete`, blocking."""
        return run_blocking(self.core.delete(response_id, owner=owner))

    def delete_thread(self, response_id: str, *, owner: str | None = None) -> int:
        """:meth:`RedisResponseSessionStore.delete_thread`, blocking."""
        return run_blocking(self.core.delete_thread(response_id, owner=owner))
