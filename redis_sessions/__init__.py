"""redis_sessions: conversation state for LLM agents and Responses-API gateways in Redis."""

from .config import SessionConfig, create_item_session, create_response_session_store
from .errors import ErrorCode, SessionError
from .ids import new_response_id, validate_id
from .items import CompactionSession, MemorySession, RedisSession
from .models import (
    ResponseSessionSnapshot,
    StoredResponseRequestSnapshot,
    StoredResponseSession,
    StoredResponseSnapshot,
)
from .responses import (
    UNSET,
    MemoryResponseSessionStore,
    RedisResponseSessionStore,
    ResponseSessionStore,
)

__all__ = [
    "CompactionSession",
    "MemorySession",
    "RedisSession",
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
    "create_response_session_store",
    "new_response_id",
    "validate_id",
]
