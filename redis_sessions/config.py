"""Configuration (pydantic, so a gateway can load it from env or a settings file)
and the factory that turns it into a store."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import ErrorCode, SessionError
from .ids import validate_id
from .items import ItemSession, MemorySession, RedisSession
from .items.base import MAX_BATCH_BYTES
from .keys import DEFAULT_PREFIX
from .redis_client import DEFAULT_TIMEOUT
from .responses.store import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_RECORD_BYTES,
    DEFAULT_TTL_SECONDS,
    ChainStore,
    MemoryResponseSessionStore,
    RedisResponseSessionStore,
)


class SessionConfig(BaseModel):
    """Where and how conversation state is kept.

    ``ttl_seconds=None`` keeps records forever; the default is 30 days, as the
    Responses API keeps stored responses.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["memory", "redis"] = "memory"
    url: Optional[str] = None
    cluster: Optional[bool] = None
    key_prefix: str = DEFAULT_PREFIX
    ttl_seconds: Optional[int] = Field(default=DEFAULT_TTL_SECONDS, gt=0)
    sliding_ttl: bool = False
    max_depth: int = Field(default=DEFAULT_MAX_DEPTH, ge=1)
    max_record_bytes: int = Field(default=DEFAULT_MAX_RECORD_BYTES, ge=1024)
    replay_instructions: bool = False
    max_batch_bytes: int = Field(default=MAX_BATCH_BYTES, ge=1024)
    """Item sessions: the most bytes one ``add_items`` call may add (its items, encoded)."""
    timeout_seconds: Optional[float] = Field(default=DEFAULT_TIMEOUT, gt=0, allow_inf_nan=False)
    """Seconds one call may take in total, redis-py's retries included (None: no budget)."""
    redis_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Passed to redis-py's client: ``ssl_ca_certs``, ``username``, ``max_connections``, ..."""

    @model_validator(mode="after")
    def _check(self) -> "SessionConfig":
        try:
            validate_id(self.key_prefix, "key prefix")
        except SessionError as exc:
            raise ValueError(exc.message) from None
        if self.backend == "redis" and not self.url:
            raise ValueError("backend 'redis' needs a url")
        return self

    @classmethod
    def parse(cls, **values: object) -> "SessionConfig":
        """Like the constructor, but invalid settings raise ``SessionError``."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise SessionError(ErrorCode.INPUT_INVALID, f"invalid session config: {exc}") from None


def create_response_session_store(config: SessionConfig) -> ChainStore:
    options = dict(
        key_prefix=config.key_prefix,
        ttl_seconds=config.ttl_seconds,
        max_depth=config.max_depth,
        max_record_bytes=config.max_record_bytes,
        sliding_ttl=config.sliding_ttl,
        replay_instructions=config.replay_instructions,
    )
    if config.backend == "memory":
        return MemoryResponseSessionStore(**options)  # type: ignore[arg-type]
    assert config.url is not None
    return RedisResponseSessionStore.from_url(config.url, cluster=config.cluster, timeout=config.timeout_seconds,
                                              redis_kwargs=config.redis_kwargs, **options)


def create_item_session(config: SessionConfig, session_id: str) -> ItemSession:
    """An Agents SDK session for ``session_id`` with the config's backend, prefix and TTL.

    A Redis session built here owns its client: ``await session.close()`` when done.
    """
    options: dict[str, Any] = dict(key_prefix=config.key_prefix, ttl_seconds=config.ttl_seconds,
                                   sliding_ttl=config.sliding_ttl, max_batch_bytes=config.max_batch_bytes)
    if config.backend == "memory":
        return MemorySession(session_id, **options)
    assert config.url is not None
    return RedisSession.from_url(session_id, url=config.url, cluster=config.cluster,
                                 timeout=config.timeout_seconds, redis_kwargs=config.redis_kwargs, **options)
