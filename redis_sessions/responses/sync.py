"""The response store for synchronous code: Flask, Django, Celery, scripts.

Why it is built this way: the store's logic (keys, scripts, argument checks,
encoding, error translation, the read strategy of ``resolve_chain``, retries,
locators) is written once, as the ``async def`` methods of :class:`ChainStore`.
This class holds one of those stores on a redis-py *sync* client and runs each
method's coroutine with :func:`~redis_sessions.redis_client.run_blocking`: every
I/O edge (a script call, a command, a pipeline, a pause between tries, two calls
"together") sees a sync client, blocks on its socket and returns the reply
(``redis_client.io``), so the coroutine never suspends and ends on its first
``send(None)``. Nothing is copied between the two APIs, so they cannot drift; and
no event loop, thread or future is involved, so a sync call costs the blocking
socket I/O plus one coroutine frame per layer (see benchmarks/bench_sync.py).

Threads and processes: one store (and its one client and connection pool) serves
every thread of a threaded server; redis-py's sync pool is thread-safe, and the
store's only state between calls, its memo of recent chains, is a
:class:`~.names.SharedMemo`. After a fork the pool notices the new pid and opens
new connections, so a child never reuses a parent's socket.

The time budget: ``timeout`` gives the socket and connect timeouts of a client
built here (``from_url``), sized so that redis-py's retries fit in it, as for the
asyncio store; a caller's own client keeps the timeouts it was made with.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..keys import DEFAULT_PREFIX, KeySpace
from ..limits import DEFAULT_MAX_RECORD_BYTES, DEFAULT_TTL_SECONDS, UNSET, _Unset
from ..models import ResponseSessionSnapshot, StoredResponseSession
from ..redis_client import DEFAULT_TIMEOUT, Blocking, RedisLink, SyncRedis, run_blocking
from ..replication import DEFAULT_ACK_TIMEOUT
from .names import SharedMemo
from .store import DEFAULT_MAX_DEPTH, RedisResponseSessionStore


class SyncResponseSessionStore(Blocking):
    """Response chains in Redis from synchronous code: the methods of
    :class:`RedisResponseSessionStore`, the same arguments, results and errors, on a
    redis-py sync client (``redis.Redis``, ``redis.cluster.RedisCluster``, a
    sentinel's master), with no event loop. Safe to share between threads."""

    core: RedisResponseSessionStore

    def __init__(
        self,
        client: SyncRedis | None,
        *,
        key_prefix: str = DEFAULT_PREFIX,
        ttl_seconds: int | None = DEFAULT_TTL_SECONDS,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        sliding_ttl: bool = False,
        replay_instructions: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        link: RedisLink | None = None,
        replica_acks: int = 0,
        replica_ack_timeout: float = DEFAULT_ACK_TIMEOUT,
        response_expiry: bool = True,
        compact_records: bool = True,
        compression: bool = True,
        conversations: Any = None,
    ) -> None:
        """``client``: a redis-py sync ``Redis`` or ``RedisCluster``, never closed here.
        ``conversations``: a :class:`~redis_sessions.SyncConversationStore` with this store's
        prefix; a response saved with ``conversation_id`` then appends its turn to it in the
        same script, as on the asyncio store."""
        link = self._blocking_link("SyncResponseSessionStore", client, link, timeout)
        self.core = RedisResponseSessionStore(
            None, key_prefix=key_prefix, ttl_seconds=ttl_seconds, max_depth=max_depth,
            max_record_bytes=max_record_bytes, sliding_ttl=sliding_ttl, replay_instructions=replay_instructions,
            timeout=timeout, link=link, replica_acks=replica_acks, replica_ack_timeout=replica_ack_timeout,
            response_expiry=response_expiry, compact_records=compact_records, compression=compression,
            conversations=conversations,
        )
        """The store whose methods this one runs: its logic is the only copy."""
        self.core._memo = SharedMemo()

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        cluster: bool | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        redis_kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> "SyncResponseSessionStore":
        """A store with its own sync client, for every thread (closed by :meth:`close`):
        the URLs and ``redis_kwargs`` of :meth:`RedisResponseSessionStore.from_url`
        (``redis+cluster://``, ``redis+sentinel://``, ``rediss://``). No I/O."""
        link = RedisLink.to_url(url, cluster=cluster, timeout=timeout, redis_kwargs=redis_kwargs, blocking=True)
        return cls(None, timeout=timeout, link=link, **options)

    @property
    def keys(self) -> KeySpace:
        return self.core.keys

    @property
    def round_trips(self) -> int:
        return self.core.round_trips

    def new_response_id(self, previous_response_id: str | None = None, *, conversation_id: str | None = None) -> str:
        return run_blocking(self.core.new_response_id(previous_response_id, conversation_id=conversation_id))

    def get(self, response_id: str) -> StoredResponseSession | None:
        return run_blocking(self.core.get(response_id))

    def resolve_chain(self, previous_response_id: str | None, *, max_depth: int | None = None,
                      include_incomplete: bool = False) -> ResponseSessionSnapshot:
        return run_blocking(self.core.resolve_chain(previous_response_id, max_depth=max_depth,
                                                    include_incomplete=include_incomplete))

    def save(self, session: StoredResponseSession, *,
             expected_previous_response_id: str | None | _Unset = UNSET, overwrite: bool = False) -> None:
        run_blocking(self.core.save(session, expected_previous_response_id=expected_previous_response_id,
                                    overwrite=overwrite))

    def delete(self, response_id: str) -> bool:
        return run_blocking(self.core.delete(response_id))

    def delete_thread(self, response_id: str) -> int:
        return run_blocking(self.core.delete_thread(response_id))

