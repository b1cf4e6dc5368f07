"""redis_sessions: conversation state for LLM agents and Responses-API gateways in Redis."""

from typing import TYPE_CHECKING, Any

from .config import (
    SessionConfig,
    create_conversation_store,
    create_item_session,
    create_response_session_store,
    create_sync_conversation_store,
    create_sync_item_session,
    create_sync_response_session_store,
)
from .conversations import (
    Conversation,
    ConversationDeleted,
    ConversationItemList,
    ConversationStore,
    RedisConversationStore,
    SyncConversationStore,
)
from . import telemetry
from .errors import ErrorCode, SessionError
from .ids import new_response_id, validate_id
from .items import CompactionSession, RedisSession, SyncCompactionSession, SyncRedisSession
from .models import (
    ResponseSessionSnapshot,
    StoredResponseRequestSnapshot,
    StoredResponseSession,
    StoredResponseSnapshot,
)
from .responses import (
    UNSET,
    RedisResponseSessionStore,
    ResponseSessionStore,
    SyncResponseSessionStore,
)

__all__ = [
    "Conversation",
    "ConversationDeleted",
    "ConversationItemList",
    "ConversationStore",
    "MemoryConversationStore",
    "RedisConversationStore",
    "SyncConversationStore",
    "create_conversation_store",
    "create_sync_conversation_store",
    "create_sync_item_session",
    "create_sync_response_session_store",
    "CompactionSession",
    "MemorySession",
    "RedisSession",
    "SyncCompactionSession",
    "SyncRedisSession",
    "create_item_session",
    "UNSET",
    "ErrorCode",
    "MemoryResponseSessionStore",
    "RedisResponseSessionStore",
    "ResponseSessionSnapshot",
    "ResponseSessionStore",
    "SessionConfig",
    "SessionError",
    "StoredResponseRequestSnapshot",
    "StoredResponseSession",
    "StoredResponseSnapshot",
    "SyncResponseSessionStore",
    "create_response_session_store",
    "new_response_id",
    "telemetry",
    "validate_id",
]

if TYPE_CHECKING:
    from .memory import MemoryConversationStore, MemoryResponseSessionStore, MemorySession

_MEMORY = ("MemoryConversationStore", "MemoryResponseSessionStore", "MemorySession")


def __getattr__(name: str) -> Any:
    """The memory-mode classes, imported on first use: they load fakeredis and its Lua
    (about a third of this package's import time), which a Redis deployment never needs."""
    if name in _MEMORY:
        from . import memory

        return getattr(memory, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
