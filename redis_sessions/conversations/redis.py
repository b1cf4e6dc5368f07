"""Conversations in Redis or Redis Cluster: every call is one ``lua/conv_*.lua`` script on ONE key.

A conversation is one hash, ``<prefix>:{c:<conversation id>}:conv`` (fields:
:mod:`redis_sessions.conversations`), so every script touches one key in one
cluster slot: atomic on a standalone server and on a cluster alike, and it
follows ``ASK`` during a slot migration. Each script is sent with
``lua/conv_lib.lua`` in front of it (the token ring), and every reply is asked
for undecoded (``NEVER_DECODE``), so a client made with ``decode_responses=True``
works too.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union, cast


from ..clock import Clock, system_clock
from ..errors import ErrorCode, SessionError
from ..keys import DEFAULT_PREFIX
from ..limits import MAX_BATCH_BYTES, MAX_ITEM_BYTES, UNSET, _Unset
from ..budget import DEFAULT_TIMEOUT
from ..link import AnyRedis, RedisLink
from ..client import without_decode
from ..edge import Edge
from ..replication import DEFAULT_ACK_TIMEOUT, ReplicaAcks
from ..scripts import script
from .base import ConversationStore, Reply

SCRIPTS = {name: script(name) for name in ("conv_create", "conv_add", "conv_update", "conv_delete",
                                           "conv_delete_item", "conv_get", "conv_item", "conv_list")}


class RedisConversationStore(ConversationStore):
    """Conversations in Redis or Redis Cluster.

    ``client`` is a redis-py asyncio ``Redis`` or ``RedisCluster`` (never closed
    here); ``from_url`` builds its own, one per event loop, which ``close()``
    closes. ``replica_acks=N``: every write returns only once N replicas have it
    (:mod:`redis_sessions.replication`).
    """

    def __init__(
        self,
        client: Optional[AnyRedis] = None,
        *,
        key_prefix: str = DEFAULT_PREFIX,
        ttl_seconds: Union[float, None, _Unset] = UNSET,
        sliding_ttl: bool = False,
        max_item_bytes: int = MAX_ITEM_BYTES,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        compression: bool = True,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        link: Optional[RedisLink] = None,
        replica_acks: int = 0,
        replica_ack_timeout: float = DEFAULT_ACK_TIMEOUT,
        clock: Clock = system_clock,
    ) -> None:
        super().__init__(key_prefix=key_prefix, ttl_seconds=ttl_seconds, sliding_ttl=sliding_ttl,
                         max_item_bytes=max_item_bytes, max_batch_bytes=max_batch_bytes, compression=compression,
                         clock=clock)
        self.link = link if link is not None else RedisLink(client, timeout=timeout, raw_replies=True)
        self.link.owner = "the conversation store"
        self.timeout = self.link.timeout
        self._acks = ReplicaAcks.of(replica_acks, replica_ack_timeout)
        self._edge = Edge(self.link, self._acks)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        cluster: Optional[bool] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        redis_kwargs: Optional[Mapping[str, Any]] = None,
        **options: Any,
    ) -> "RedisConversationStore":
        """A store with its own client per event loop (a cluster client for
        ``redis+cluster://`` or ``cluster=True``); ``options`` as the constructor's. No I/O."""
        link = RedisLink.to_url(url, cluster=cluster, timeout=timeout, redis_kwargs=without_decode(redis_kwargs))
        return cls(link=link, **options)

    @property
    def client(self) -> AnyRedis:
        """The redis-py client this store uses on the running event loop."""
        return self.link.client

    async def close(self) -> None:
        """Close the client this store built (``from_url``) for the running event loop."""
        await self.link.close()

    async def _run(self, name: str, key: str, args: list[bytes], write: bool) -> Reply:
        where = f"conversation key {key!r}"
        reply = await self._edge.run(SCRIPTS[name], (key,), args, where=where, write=write)
        if not isinstance(reply, list) or not reply:
            raise SessionError(ErrorCode.RECORD_CORRUPT, f"{where}: unexpected script reply {reply!r}"[:300])
        return cast(Reply, reply)
