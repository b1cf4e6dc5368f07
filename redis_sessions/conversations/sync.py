"""The conversation store for synchronous code, built as the response store's is
(:mod:`redis_sessions.responses.sync`): the logic is the ``async def`` methods of
:class:`~.base.ConversationStore`, held here on a redis-py *sync* client and run
with :func:`~redis_sessions.link.run_blocking`. Every script call is a
blocking call that returns its reply (``RawLibScript``, ``write_acked``), so each
coroutine ends on its first ``send(None)``: no loop, no thread, nothing copied.

One store serves every thread (redis-py's sync pool is thread-safe; the store
keeps no state between calls). Give it to a :class:`SyncResponseSessionStore` as
``conversations=`` and a response saved with ``conversation_id`` appends its turn
to the conversation in the same script, as on the asyncio API.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from ..clock import Clock, system_clock
from ..keys import DEFAULT_PREFIX, KeySpace
from ..limits import MAX_BATCH_BYTES, MAX_ITEM_BYTES, UNSET, _Unset
from ..models import Item
from ..budget import DEFAULT_TIMEOUT
from ..link import Blocking, RedisLink, SyncRedis, run_blocking
from ..client import without_decode
from ..replication import DEFAULT_ACK_TIMEOUT
from . import checks
from .models import Conversation, ConversationDeleted, ConversationItemList
from .redis import RedisConversationStore


class SyncConversationStore(Blocking):
    """Conversations in Redis from synchronous code: the methods of
    :class:`RedisConversationStore`, the same arguments, results and errors, on a
    redis-py sync client (``redis.Redis``, ``redis.cluster.RedisCluster``, a
    sentinel's master), ``decode_responses=True`` or not. Safe to share between threads."""

    core: RedisConversationStore

    def __init__(
        self,
        client: Optional[SyncRedis] = None,
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
        """``client``: a redis-py sync ``Redis`` or ``RedisCluster``, never closed here."""
        link = self._blocking_link("SyncConversationStore", client, link, timeout, raw_replies=True)
        self.core = RedisConversationStore(
            key_prefix=key_prefix, ttl_seconds=ttl_seconds, sliding_ttl=sliding_ttl, max_item_bytes=max_item_bytes,
            max_batch_bytes=max_batch_bytes, compression=compression, timeout=timeout, link=link,
            replica_acks=replica_acks, replica_ack_timeout=replica_ack_timeout, clock=clock,
        )
        """The store whose methods this one runs: its logic is the only copy."""

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        cluster: Optional[bool] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        redis_kwargs: Optional[Mapping[str, Any]] = None,
        **options: Any,
    ) -> "SyncConversationStore":
        """A store with its own sync client, for every thread (closed by :meth:`close`):
        the URLs and ``redis_kwargs`` of :meth:`RedisConversationStore.from_url`. No I/O."""
        link = RedisLink.to_url(url, cluster=cluster, timeout=timeout, redis_kwargs=without_decode(redis_kwargs), blocking=True)
        return cls(None, timeout=timeout, link=link, **options)

    # -- what the response store and callers read -------------------------------------
    @property
    def keys(self) -> KeySpace:
        return self.core.keys

    @property
    def ttl_seconds(self) -> Optional[float]:
        return self.core.ttl_seconds

    @property
    def ttl_ms(self) -> int:
        return self.core.ttl_ms

    @property
    def sliding_ttl(self) -> bool:
        return self.core.sliding_ttl

    def now(self) -> float:
        return self.core.now()

    def turn_arguments(self, items: list[Item]) -> list[bytes]:
        """What a response's turn appends (see :meth:`ConversationStore.turn_arguments`): no I/O,
        so a :class:`SyncResponseSessionStore` given this store as ``conversations`` uses it."""
        return self.core.turn_arguments(items)

    # -- the Conversations API --------------------------------------------------------
    def create(self, items: Optional[list[Item]] = None, metadata: Optional[dict[str, str]] = None) -> Conversation:
        return run_blocking(self.core.create(items, metadata))

    def get(self, conversation_id: str) -> Conversation:
        return run_blocking(self.core.get(conversation_id))

    def update(self, conversation_id: str, metadata: dict[str, str]) -> Conversation:
        return run_blocking(self.core.update(conversation_id, metadata))

    def delete(self, conversation_id: str) -> ConversationDeleted:
        return run_blocking(self.core.delete(conversation_id))

    def add_items(self, conversation_id: str, items: list[Item]) -> ConversationItemList:
        return run_blocking(self.core.add_items(conversation_id, items))

    def list_items(self, conversation_id: str, *, limit: int = checks.DEFAULT_LIMIT,
                   order: checks.Order = "desc", after: Optional[str] = None) -> ConversationItemList:
        return run_blocking(self.core.list_items(conversation_id, limit=limit, order=order, after=after))

    def history(self, conversation_id: str) -> list[Item]:
        return run_blocking(self.core.history(conversation_id))

    def get_item(self, conversation_id: str, item_id: str) -> Item:
        return run_blocking(self.core.get_item(conversation_id, item_id))

    def delete_item(self, conversation_id: str, item_id: str) -> Conversation:
        return run_blocking(self.core.delete_item(conversation_id, item_id))

