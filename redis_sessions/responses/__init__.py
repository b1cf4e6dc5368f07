"""Response chains: ``previous_response_id`` sessions for Responses-API gateways."""

from .chain import canonical_item, request_input_items
from ..limits import UNSET
from .protocol import ResponseSessionStore
from .store import ChainStore, RedisResponseSessionStore
from .sync import SyncResponseSessionStore

__all__ = [
    "UNSET",
    "ChainStore",
    "RedisResponseSessionStore",
    "ResponseSessionStore",
    "SyncResponseSessionStore",
    "canonical_item",
    "request_input_items",
]
