"""Conversation item sessions for the OpenAI Agents SDK: atomic, cluster-safe, with compaction and forks.

``RedisSession`` (Redis or Redis Cluster; ``MemorySession`` in :mod:`redis_sessions.memory`
is the same class on an in-process server) satisfies ``agents.memory.Session``;
``CompactionSession`` wraps it and adds ``run_compaction``; ``SyncRedisSession`` and
``SyncCompactionSession`` run their methods from synchronous code. The key's layout is in
:mod:`.header`, the logic in :mod:`.redis`.
"""

from ..limits import MAX_BATCH_BYTES, MAX_ITEM_BYTES
from .compaction import CompactionOutcome, CompactionSession, Compactor
from .redis import RedisSession, Snapshot
from .sync import SyncCompactionSession, SyncRedisSession

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_ITEM_BYTES",
    "CompactionOutcome",
    "CompactionSession",
    "Compactor",
    "RedisSession",
    "Snapshot",
    "SyncCompactionSession",
    "SyncRedisSession",
]
