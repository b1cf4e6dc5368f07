"""Configuration (pydantic-settings: arguments, else ``REDIS_SESSIONS_*`` environment
variables, else defaults) and the factories that turn it into a store, for asyncio code
and (``create_sync_*``) for synchronous code."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .conversations import ConversationOptions, ConversationStore, RedisConversationStore, SyncConversationStore
from .errors import ErrorCode, SessionError
from .ids import validate_id
from .items import RedisSession, SyncRedisSession
from .keys import DEFAULT_PREFIX
from .limits import DEFAULT_MAX_RECORD_BYTES, DEFAULT_TTL_SECONDS, MAX_BATCH_BYTES
from .budget import DEFAULT_TIMEOUT
from .replication import DEFAULT_ACK_TIMEOUT, MAX_REPLICA_ACKS
from .options import ItemOptions, ResponseOptions, SessionOptions
from .responses.store import RedisResponseSessionStore
from .responses.sync import SyncResponseSessionStore


ENV_PREFIX = "REDIS_SESSIONS_"


class SessionConfig(BaseSettings):
    """Where and how conversation state is kept; every field can come from the environment.

    Each field reads ``REDIS_SESSIONS_<FIELD>`` when not passed
    (``REDIS_SESSIONS_URL``, ``REDIS_SESSIONS_TTL_SECONDS``, ...; ``redis_kwargs`` as
    JSON), and arguments win over the environment. A ``url`` means Redis unless
    ``backend`` says otherwise; with neither, state is kept in memory.

    ``ttl_seconds`` is the one default TTL of response stores and item sessions:
    30 days, as the Responses API keeps stored responses; ``None`` keeps state forever.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="forbid")

    backend: Optional[Literal["memory", "redis"]] = None
    """``None``: ``redis`` when ``url`` is set, else ``memory``."""
    url: Optional[str] = None
    """``redis://``, ``rediss://`` (TLS), ``redis+cluster://``, ``redis+sentinel://host:port[,host:port]/<service>[/db]``."""
    cluster: Optional[bool] = None
    key_prefix: str = DEFAULT_PREFIX
    ttl_seconds: Optional[int] = Field(default=DEFAULT_TTL_SECONDS, gt=0)
    sliding_ttl: bool = False
    max_depth: int = Field(default=ResponseOptions().max_depth, ge=1)
    max_record_bytes: int = Field(default=DEFAULT_MAX_RECORD_BYTES, ge=1024)
    replay_instructions: bool = False
    response_expiry: bool = True
    """Each response expires on its own once no live response descends from it (threads
    stop growing); False: a thread this store starts expires whole."""
    compression: bool = True
    """Records and items of 512 bytes or more are stored zstd-compressed where that makes
    them smaller (docs/benchmarks.md#unit-costs has what it saves and costs)."""
    max_batch_bytes: int = Field(default=MAX_BATCH_BYTES, ge=1024)
    """Item sessions: the most bytes one ``add_items`` call may add (its items, encoded)."""

    # -- the client ------------------------------------------------------------------
    timeout_seconds: Optional[float] = Field(default=DEFAULT_TIMEOUT, gt=0, allow_inf_nan=False)
    """Seconds one call may take in total, redis-py's retries included (None: no budget)."""
    socket_timeout_seconds: Optional[float] = Field(default=None, gt=0, allow_inf_nan=False)
    """One command's socket timeout (default: a quarter of ``timeout_seconds``, so retries fit)."""
    connect_timeout_seconds: Optional[float] = Field(default=None, gt=0, allow_inf_nan=False)
    """Connecting's timeout (default: as ``socket_timeout_seconds``)."""
    max_connections: Optional[int] = Field(default=None, ge=1)
    replica_acks: int = Field(default=0, ge=0, le=MAX_REPLICA_ACKS)
    """Replicas that must have a write before it is acknowledged (WAIT); 0: the master alone."""
    replica_ack_timeout_seconds: float = Field(default=DEFAULT_ACK_TIMEOUT, gt=0, allow_inf_nan=False)
    """How long a write waits for those replicas before ``session.backend.not_replicated``."""
    username: Optional[str] = None
    """An ACL user (else the URL's, else ``default``)."""
    password: Optional[SecretStr] = None
    """The password, kept out of the URL and out of ``repr`` (else the URL's)."""
    ssl_ca_certs: Optional[str] = None
    """A CA file to verify a ``rediss://`` server against."""
    redis_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Any other redis-py client option (``ssl_certfile``, ``health_check_interval``, ...)."""

    @model_validator(mode="after")
    def _check(self) -> "SessionConfig":
        try:
            validate_id(self.key_prefix, "key prefix")
        except SessionError as exc:
            raise ValueError(exc.message) from None
        if self.backend == "redis" and not self.url:
            raise ValueError("backend 'redis' needs a url")
        clash = sorted(set(self._named_options()) & set(self.redis_kwargs))
        if clash:
            raise ValueError(f"set {', '.join(clash)} once: as a setting or in redis_kwargs, not both")
        return self

    @property
    def store_backend(self) -> Literal["memory", "redis"]:
        """The backend this config builds: ``backend``, else ``redis`` when a url is set."""
        if self.backend is not None:
            return self.backend
        return "redis" if self.url else "memory"

    def _named_options(self) -> dict[str, Any]:
        named = {
            "socket_timeout": self.socket_timeout_seconds,
            "socket_connect_timeout": self.connect_timeout_seconds or self.socket_timeout_seconds,
            "max_connections": self.max_connections,
            "username": self.username,
            "password": self.password.get_secret_value() if self.password is not None else None,
            "ssl_ca_certs": self.ssl_ca_certs,
        }
        return {name: value for name, value in named.items() if value is not None}

    def client_options(self) -> dict[str, Any]:
        """The redis-py options this config passes on: the named settings, then ``redis_kwargs``."""
        return {**self._named_options(), **self.redis_kwargs}

    @classmethod
    def parse(cls, **values: object) -> "SessionConfig":
        """Like the constructor, but invalid settings raise ``SessionError``."""
        try:
            return cls(**values)  # type: ignore[arg-type]  # the constructor reads the environment (model_validate may not)
        except ValidationError as exc:
            raise SessionError(ErrorCode.INPUT_INVALID, f"invalid session config: {exc}") from None


_RENAMED = {"timeout": "timeout_seconds", "replica_ack_timeout": "replica_ack_timeout_seconds"}
"""Options whose setting has another name (the environment's names say their unit)."""


def options_of(config: SessionConfig, fields: tuple[str, ...], **more: Any) -> dict[str, Any]:
    """The options named ``fields`` (a store's options struct's) that ``config`` sets, and ``more``."""
    given = {name: getattr(config, _RENAMED.get(name, name)) for name in fields
             if _RENAMED.get(name, name) in SessionConfig.model_fields}
    return {**given, **more}


def _url(config: SessionConfig) -> dict[str, Any]:
    """What ``from_url`` takes besides the URL and the options."""
    return dict(cluster=config.cluster, redis_kwargs=config.client_options())


def create_response_session_store(config: SessionConfig, *,
                                  conversations: ConversationStore | None = None) -> RedisResponseSessionStore:
    """The response store ``config`` describes. With ``conversations`` (built from the same
    config), a response saved with ``conversation_id`` appends its turn to that
    conversation in the same atomic step."""
    options = options_of(config, ResponseOptions.__struct_fields__, conversations=conversations)
    if config.store_backend == "memory":
        from .memory import MemoryResponseSessionStore  # fakeredis: loaded by memory mode only

        return MemoryResponseSessionStore(**{**options, "timeout": None})
    assert config.url is not None
    return RedisResponseSessionStore.from_url(config.url, **_url(config), **options)


def create_item_session(config: SessionConfig, session_id: str) -> RedisSession:
    """An Agents SDK session for ``session_id`` with the config's backend, prefix and TTL.

    A Redis session built here owns its client: ``await session.close()`` when done.
    """
    options = options_of(config, SessionOptions.__struct_fields__)
    if config.store_backend == "memory":
        from .memory import MemorySession

        return MemorySession(session_id, **{**options, "timeout": None})
    assert config.url is not None
    return RedisSession.from_url(session_id, url=config.url, **_url(config), **options)


def create_conversation_store(config: SessionConfig) -> ConversationStore:
    """A Conversations API store with the config's backend, prefix, TTL (and sliding),
    item limits and client settings. A Redis store built here owns its client:
    ``await store.close()`` when done."""
    options = options_of(config, ConversationOptions.__struct_fields__)
    if config.store_backend == "memory":
        from .memory import MemoryConversationStore

        return MemoryConversationStore(**{**options, "timeout": None})
    assert config.url is not None
    return RedisConversationStore.from_url(config.url, **_url(config), **options)


# -- the same, for synchronous code ---------------------------------------------------
# Memory mode is the sync classes on a sync fakeredis client of an in-process server
# (redis_sessions.memory.sync_client): a new one per store, the process-wide one for
# item sessions, the conversation store's for a response store given it.

def create_sync_response_session_store(config: SessionConfig, *,
                                       conversations: SyncConversationStore | None = None) -> SyncResponseSessionStore:
    """:func:`create_response_session_store` for synchronous code. A store built here owns
    its client: ``store.close()`` (or ``with``) when done."""
    options = options_of(config, ResponseOptions.__struct_fields__, conversations=conversations)
    if config.store_backend == "memory":
        from .memory import sync_client

        client = conversations.client if conversations is not None else sync_client()
        return SyncResponseSessionStore(client, **{**options, "timeout": None})
    assert config.url is not None
    return SyncResponseSessionStore.from_url(config.url, **_url(config), **options)


def create_sync_item_session(config: SessionConfig, session_id: str) -> SyncRedisSession:
    """:func:`create_item_session` for synchronous code (``session.close()`` when done)."""
    options = options_of(config, SessionOptions.__struct_fields__)
    if config.store_backend == "memory":
        from .memory import SHARED_SERVER, sync_client

        return SyncRedisSession(session_id, client=sync_client(SHARED_SERVER), **{**options, "timeout": None})
    assert config.url is not None
    return SyncRedisSession.from_url(session_id, url=config.url, **_url(config), **options)


def create_sync_conversation_store(config: SessionConfig) -> SyncConversationStore:
    """:func:`create_conversation_store` for synchronous code (``store.close()`` when done)."""
    options = options_of(config, ConversationOptions.__struct_fields__)
    if config.store_backend == "memory":
        from .memory import sync_client

        return SyncConversationStore(sync_client(), **{**options, "timeout": None})
    assert config.url is not None
    return SyncConversationStore.from_url(config.url, **_url(config), **options)
