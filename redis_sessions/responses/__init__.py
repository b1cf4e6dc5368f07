"""Response chains: ``previous_response_id`` sessions for Responses-API gateways."""

from ..limits import UNSET
from .chain import canonical_item, request_input_items
from .protocol import ResponseSessionStore
from .store import RedisResponseSessionStore
from .sync import SyncResponseSessionStore

__all__ = [
    "UNSET",
    "RedisResponseSessionStore",
    "ResponseSessionStore",
    "SyncResponseSessionStore",
    "canonical_item",
    "request_input_items",
]
