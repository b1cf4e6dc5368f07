"""Response chains: ``previous_response_id`` sessions for Responses-API gateways."""

from .protocol import UNSET, ResponseSessionStore
from .store import ChainStore, MemoryResponseSessionStore, RedisResponseSessionStore

__all__ = ["UNSET", "ChainStore", "MemoryResponseSessionStore", "RedisResponseSessionStore", "ResponseSessionStore"]
