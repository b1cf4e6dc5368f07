"""The conversation store for synchronous code, built as the response store's is
(:mod:`redis_sessions.responses.sync`): the logic is the ``async def`` methods of
:class:`~.store.RedisConversationStore`, held here on a redis-py *sync* client and run with
:func:`~redis_sessions.link.run_blocking`. Every call through the store's edge blocks and
returns its reply, so each coroutine ends on its first ``send(None)``: no loop, no thread,
nothing copied.

One store serves every thread (redis-py's sync pool is thread-safe; the store keeps no
state between calls). Give it to a :class:`SyncResponseSessionStore` as
``conversations=`` and a response saved with ``conversation_id`` appends its turn to the
conversation in the same script, as on the asyncio API.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..client import without_decode
from ..keys import KeySpace
from ..link import Blocking, RedisLink, SyncRedis, run_blocking
from ..models import Item
from . import checks
from .models import Conversation, ConversationDeleted, ConversationItemList
from .store import ConversationOptions, RedisConversationStore


class SyncConversationStore(Blocking):
    """Conversations in Redis from synchronous code: the methods of
    :class:`RedisConversationStore`, the same options, arguments, results and errors, on a
    redis-py sync client (``redis.Redis``, ``redis.cluster.RedisCluster``, a sentinel's
    master), ``decode_responses=True`` or not. Safe to share between threads."""

    core: RedisConversationStore

    def __init__(self, client: Optional[SyncRedis] = None, *, link: Optional[RedisLink] = None,
                 **options: Any) -> None:
        """``client``: a redis-py sync ``Redis`` or ``RedisCluster``, never closed here."""
        timeout = ConversationOptions.of(**options).timeout
        link = self._blocking_link("SyncConversationStore", client, link, timeout, raw_replies=True)
        self.core = RedisConversationStore(link=link, **options)
        """The store whose methods this one runs: its logic is the only copy."""

    @classmethod
    def from_url(cls, url: str, *, cluster: Optional[bool] = None, redis_kwargs: Optional[Mapping[str, Any]] = None,
                 **options: Any) -> "SyncConversationStore":
        """A store with its own sync client, for every thread (closed by :meth:`close`):
        the URLs and ``redis_kwargs`` of :meth:`RedisConversationStore.from_url`. No I/O."""
        timeout = ConversationOptions.of(**options).timeout
        return cls(link=RedisLink.to_url(url, cluster=cluster, timeout=timeout, redis_kwargs=without_decode(redis_kwargs),
                                         blocking=True), **options)

    @property
    def keys(self) -> KeySpace:
        """The store's key layout (its prefix and key names)."""
        return self.core.keys

    @property
    def options(self) -> ConversationOptions:
        """The store's options (:class:`RedisConversationStore`'s)."""
        return self.core.options

    def create(self, items: Optional[list[Item]] = None, metadata: Optional[dict[str, str]] = None, *,
               owner: Optional[str] = None) -> Conversation:
        """:meth:`RedisConversationStore.create`, blocking."""
        return run_blocking(self.core.create(items, metadata, owner=owner))

    def get(self, conversation_id: str, *, owner: Optional[str] = None) -> Conversation:
        """:meth:`RedisConversationStore.get`, blocking."""
        return run_blocking(self.core.get(conversation_id, owner=owner))

    def update(self, conversation_id: str, metadata: dict[str, str], *, owner: Optional[str] = None) -> Conversation:
        """:meth:`RedisConversationStore.update`, blocking."""
        return run_blocking(self.core.update(conversation_id, metadata, owner=owner))

    def delete(self, conversation_id: str, *, owner: Optional[str] = None) -> ConversationDeleted:
        """:meth:`RedisConversationStore.delete`, blocking."""
        return run_blocking(self.core.delete(conversation_id, owner=owner))

    def add_items(self, conversation_id: str, items: list[Item], *, owner: Optional[str] = None) -> ConversationItemList:
        """:meth:`RedisConversationStore.add_items`, blocking."""
        return run_blocking(self.core.add_items(conversation_id, items, owner=owner))

    def list_items(self, conversation_id: str, *, limit: int = checks.DEFAULT_LIMIT,
                   order: checks.Order = "desc", after: Optional[str] = None,
                   owner: Optional[str] = None) -> ConversationItemList:
        """:meth:`RedisConversationStore.list_items`, blocking."""
        return run_blocking(self.core.list_items(conversation_id, limit=limit, order=order, after=after, owner=owner))

    def history(self, conversation_id: str, *, owner: Optional[str] = None) -> list[Item]:
        """:meth:`RedisConversationStore.history`, blocking."""
        return run_blocking(self.core.history(conversation_id, owner=owner))

    def get_item(self, conversation_id: str, item_id: str, *, owner: Optional[str] = None) -> Item:
        """:meth:`RedisConversationStore.get_item`, blocking."""
        return run_blocking(self.core.get_item(conversation_id, item_id, owner=owner))

    def delete_item(self, conversation_id: str, item_id: str, *, owner: Optional[str] = None) -> Conversation:
        """:meth:`RedisConversationStore.delete_item`, blocking."""
        return run_blocking(self.core.delete_item(conversation_id, item_id, owner=owner))
