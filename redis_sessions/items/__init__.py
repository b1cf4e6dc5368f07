"""Conversation item sessions for the OpenAI Agents SDK: atomic, cluster-safe, with compaction and forks.

``RedisSession`` (Redis or Redis Cluster) and ``MemorySession`` (in-process)
satisfy ``agents.memory.Session``; ``CompactionSession`` wraps either and adds
``run_compaction``. The shared logic lives in :mod:`.base`.
"""

from .base import MAX_BATCH_BYTES, MAX_ITEM_BYTES, ItemSession, Snapshot
from .compaction import CompactionOutcome, CompactionSession, Compactor
from .memory import MemorySession, MemoryStore
from .redis import RedisSession

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_ITEM_BYTES",
    "CompactionOutcome",
    "CompactionSession",
    "Compactor",
    "ItemSession",
    "MemorySession",
    "MemoryStore",
    "RedisSession",
    "Snapshot",
]
