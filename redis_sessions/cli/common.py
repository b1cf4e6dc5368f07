"""What every command shares: the settings, and how to reach Redis with them.

The settings are the library's own :class:`~redis_sessions.config.SessionConfig`:
every ``REDIS_SESSIONS_*`` variable the library reads (URL, password, TLS CA
file, timeouts, ``redis_kwargs``...) means the same here, and ``--url`` and
``--prefix`` win over ``REDIS_SESSIONS_URL`` and ``REDIS_SESSIONS_KEY_PREFIX``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import MasterNotFoundError

from ..config import ENV_PREFIX, SessionConfig, create_conversation_store, create_response_session_store
from ..conversations import RedisConversationStore
from ..errors import ErrorCode, SessionError
from ..ids import thread_of, validate_id
from ..keys import KeySpace
from ..link import AnyRedis, close_client
from ..client import from_url
from ..errors import translate
from ..responses.store import RedisResponseSessionStore
from .output import remember_secrets

ENV_URL = f"{ENV_PREFIX}URL"
DEFAULT_URL = "redis://127.0.0.1:6379/0"


def settings(url: str | None = None, prefix: str | None = None) -> SessionConfig:
    """The library's settings from the environment, ``url`` and ``prefix`` winning; invalid
    ones are ``session.input.invalid`` naming the variable, never showing its value."""
    given: dict[str, Any] = {name: value for name, value in (("url", url), ("key_prefix", prefix)) if value is not None}
    try:
        config = SessionConfig(**given)
    except ValidationError as exc:
        problems = "; ".join(_problem(e) for e in exc.errors())
        raise SessionError(ErrorCode.INPUT_INVALID, f"invalid settings: {problems}") from None
    if config.backend == "memory":
        raise SessionError(ErrorCode.INPUT_INVALID,
                           f"{ENV_PREFIX}BACKEND is memory: the command line reads Redis only; unset it")
    password = config.password.get_secret_value() if config.password is not None else None
    remember_secrets(config.url, password, str(config.redis_kwargs.get("password") or ""))
    # Looking must not extend a TTL, whatever the gateway's sliding_ttl is.
    return config.model_copy(update={"sliding_ttl": False})


def _problem(error: Any) -> str:
    field = ".".join(str(part) for part in error.get("loc", ()))
    message = str(error.get("msg", "")).removeprefix("Value error, ")
    return f"{ENV_PREFIX}{field.upper()}: {message}" if field else message


class Missing(Exception):
    """No item session of that id: exit 1 with code ``not_found``. ``errors.py`` has no
    code for it (an SDK session that was never written is just empty)."""

    code = "not_found"


@dataclass(frozen=True)
class Target:
    """Where a command works: the settings (their URL, else :data:`DEFAULT_URL`)."""

    config: SessionConfig
    json: bool = False

    @property
    def url(self) -> str:
        return self.config.url or DEFAULT_URL

    @property
    def prefix(self) -> str:
        return self.config.key_prefix

    @property
    def keys(self) -> KeySpace:
        return KeySpace(self.prefix)

    def _redis_config(self) -> SessionConfig:
        return self.config.model_copy(update={"url": self.url})

    def client(self) -> AnyRedis:
        client: AnyRedis = configured(lambda: from_url(self.url, cluster=self.config.cluster, timeout=self.config.timeout_seconds,
                                           redis_kwargs=self.config.client_options()))
        return client

    def store(self) -> RedisResponseSessionStore:
        store = configured(lambda: create_response_session_store(self._redis_config()))
        assert isinstance(store, RedisResponseSessionStore)
        return store

    def conversations(self) -> RedisConversationStore:
        store = configured(lambda: create_conversation_store(self._redis_config()))
        assert isinstance(store, RedisConversationStore)
        return store


def configured(build: Any) -> Any:
    """Build a client or a store. Building does no I/O, so anything refused here (a
    malformed URL, an unknown option) is the configuration's fault: ``session.input.invalid``."""
    try:
        return build()
    except SessionError as exc:
        raise SessionError(ErrorCode.INPUT_INVALID, exc.message) from None


async def ping(client: AnyRedis) -> None:
    """Reach the server and refuse a standalone client on a cluster node (it would see a
    third of the keys). A database the server lacks is a setting's fault, not an outage
    (``translate`` says so: ``session.input.invalid``). Messages name no host: the
    command line prints none."""
    where = "connecting"
    try:
        await client.ping()
    except MasterNotFoundError:
        raise SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"{where}: no sentinel answered with a master for that "
                                                          "service (sentinels down, or another service name)") from None
    except Exception as exc:
        raise translate(exc, where) or exc from None
    await refuse_cluster_node(client)


async def refuse_cluster_node(client: AnyRedis) -> None:
    """``session.input.invalid`` if a plain ``redis://`` URL points at a Redis Cluster
    node (``INFO cluster``: ``cluster_enabled:1``): SCAN would see that node's keys
    only, and a command on any other slot would fail with MOVED. A server that
    refuses INFO (an ACL, or a server without that section) is not checked; per-key
    MOVED errors would still fail the command."""
    if isinstance(client, RedisCluster):
        return
    try:
        info = await client.info("cluster")
    except Exception as exc:
        error = translate(exc, "INFO cluster")
        if error is not None and error.code in (ErrorCode.BACKEND_DENIED, ErrorCode.BACKEND_ERROR):
            return
        raise error or exc
    if int(info.get("cluster_enabled", 0) or 0) == 1:
        raise SessionError(
            ErrorCode.INPUT_INVALID,
            "the URL names a Redis Cluster node, and a standalone URL reaches one node only: "
            "use redis+cluster://host:port (or add ?cluster=true)",
        )


async def check_server(target: Target) -> None:
    """What every command does first: reach the server and refuse a cluster node
    behind a standalone URL (see :func:`refuse_cluster_node`)."""
    client = target.client()
    try:
        await ping(client)
    finally:
        await close_client(client)


async def thread_key(store: RedisResponseSessionStore, response_id: str) -> str | None:
    """The thread hash holding ``response_id``: from the id itself, or its locator (the
    store's own lookup, which gives no TTL again)."""
    validate_id(response_id)
    thread = thread_of(response_id) or await store._locate(response_id)
    return None if thread is None else store.keys.thread(thread)
