"""``SessionConfig`` from the environment, what a url means, and client options that
reach the redis-py connections the factory builds."""

from __future__ import annotations

import pytest

from redis_sessions import (
    ErrorCode,
    MemoryResponseSessionStore,
    RedisResponseSessionStore,
    SessionConfig,
    SessionError,
    create_item_session,
    create_response_session_store,
)
from redis_sessions import MemorySession
from redis_sessions.items import RedisSession
from redis_sessions.limits import DEFAULT_TTL_SECONDS


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No REDIS_SESSIONS_* variable of the machine's own leaks into these tests."""
    import os

    for name in list(os.environ):
        if name.startswith("REDIS_SESSIONS_"):
            monkeypatch.delenv(name)


def test_every_setting_reads_its_environment_variable(monkeypatch):
    monkeypatch.setenv("REDIS_SESSIONS_URL", "redis://127.0.0.1:1/3")
    monkeypatch.setenv("REDIS_SESSIONS_KEY_PREFIX", "gw:prod")
    monkeypatch.setenv("REDIS_SESSIONS_TTL_SECONDS", "3600")
    monkeypatch.setenv("REDIS_SESSIONS_SLIDING_TTL", "true")
    monkeypatch.setenv("REDIS_SESSIONS_TIMEOUT_SECONDS", "2.5")
    monkeypatch.setenv("REDIS_SESSIONS_SOCKET_TIMEOUT_SECONDS", "0.4")
    monkeypatch.setenv("REDIS_SESSIONS_MAX_CONNECTIONS", "7")
    monkeypatch.setenv("REDIS_SESSIONS_PASSWORD", "s3cret")
    monkeypatch.setenv("REDIS_SESSIONS_REDIS_KWARGS", '{"health_check_interval": 30}')
    config = SessionConfig()
    assert config.url == "redis://127.0.0.1:1/3" and config.store_backend == "redis"
    assert (config.key_prefix, config.ttl_seconds, config.sliding_ttl, config.timeout_seconds) == ("gw:prod", 3600, True, 2.5)
    assert config.client_options() == {"socket_timeout": 0.4, "socket_connect_timeout": 0.4, "max_connections": 7,
                                       "password": "s3cret", "health_check_interval": 30}
    assert "s3cret" not in repr(config) and "s3cret" not in str(config.model_dump())
    # Arguments win over the environment.
    assert SessionConfig(ttl_seconds=60).ttl_seconds == 60


def test_a_url_means_redis_unless_the_backend_says_otherwise(monkeypatch):
    assert SessionConfig().store_backend == "memory"
    assert SessionConfig(url="redis://127.0.0.1:1").store_backend == "redis"
    assert isinstance(create_response_session_store(SessionConfig(url="redis://127.0.0.1:1")), RedisResponseSessionStore)
    explicit = SessionConfig(url="redis://127.0.0.1:1", backend="memory")
    assert isinstance(create_response_session_store(explicit), MemoryResponseSessionStore)
    monkeypatch.setenv("REDIS_SESSIONS_URL", "redis://127.0.0.1:1")
    assert isinstance(create_item_session(SessionConfig(), "s1"), RedisSession)
    monkeypatch.setenv("REDIS_SESSIONS_BACKEND", "memory")
    assert isinstance(create_item_session(SessionConfig(), "s1"), MemorySession)


@pytest.mark.parametrize("values, words", [
    ({"backend": "redis"}, "needs a url"),
    ({"url": "redis://x", "max_connections": 3, "redis_kwargs": {"max_connections": 4}}, "once"),
    ({"socket_timeout_seconds": 0}, "greater than 0"),
    ({"ttl_seconds": -1}, "greater than 0"),
    ({"bogus": 1}, "Extra inputs"),
])
def test_contradictory_or_unknown_settings_are_refused(values, words):
    with pytest.raises(SessionError) as err:
        SessionConfig.parse(**values)
    assert err.value.code is ErrorCode.INPUT_INVALID and words in err.value.message


def test_a_bad_environment_variable_is_refused(monkeypatch):
    monkeypatch.setenv("REDIS_SESSIONS_TTL_SECONDS", "a week")
    with pytest.raises(SessionError) as err:
        SessionConfig.parse()
    assert err.value.code is ErrorCode.INPUT_INVALID and "ttl_seconds" in err.value.message


async def test_stores_and_item_sessions_share_one_default_ttl():
    config = SessionConfig()
    assert config.ttl_seconds == DEFAULT_TTL_SECONDS == 30 * 24 * 3600
    store = create_response_session_store(config)
    assert store.ttl_seconds == DEFAULT_TTL_SECONDS
    assert create_item_session(config, "s").ttl_seconds == DEFAULT_TTL_SECONDS


async def test_client_settings_reach_the_connections_the_factory_builds(redis_server):
    config = SessionConfig(url=redis_server.url, socket_timeout_seconds=0.75, connect_timeout_seconds=0.5,
                           max_connections=3, redis_kwargs={"health_check_interval": 11})
    store = create_response_session_store(config)
    session = create_item_session(config, "opts")
    try:
        for client in (store.client, session.client):
            pool = client.connection_pool
            kwargs = pool.connection_kwargs
            assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (0.75, 0.5)
            assert kwargs["health_check_interval"] == 11 and pool.max_connections == 3
        assert await store.get("resp_missing_0000") is None  # the options are ones redis-py takes
    finally:
        await store.close()
        await session.close()


async def test_a_password_setting_authenticates_without_being_in_the_url(redis_server):
    from faultservers import FaultServer

    with FaultServer() as server:
        server.require_password("pw-from-env")
        bare = SessionConfig(url=server.url, timeout_seconds=1)
        store = create_response_session_store(bare)
        with pytest.raises(SessionError) as err:
            await store.get("resp_x_0000")
        assert err.value.code is ErrorCode.BACKEND_DENIED
        await store.close()
        authed = create_response_session_store(SessionConfig(url=server.url, password="pw-from-env"))
        try:
            assert await authed.get("resp_x_0000") is None
        finally:
            await authed.close()


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_the_sync_factories_build_the_sync_classes_from_the_same_settings(backend, redis_server):
    """``create_sync_*``: the sync class of each store, with the settings and client options
    the asyncio factory gives; the response store built with the conversation store
    appends a turn to it, in memory mode too (they share the in-process server)."""
    from redis_sessions import (SyncConversationStore, SyncRedisSession, SyncResponseSessionStore,
                                create_sync_conversation_store, create_sync_item_session,
                                create_sync_response_session_store)
    from test_sync_conversations import msg, turn

    prefix = f"sf{backend}"
    config = SessionConfig(backend=backend, url=redis_server.url, key_prefix=prefix, ttl_seconds=600,
                           socket_timeout_seconds=0.75)
    conversations = create_sync_conversation_store(config)
    store = create_sync_response_session_store(config, conversations=conversations)
    session = create_sync_item_session(config, "s1")
    assert (type(conversations), type(store), type(session)) == (SyncConversationStore, SyncResponseSessionStore,
                                                                 SyncRedisSession)
    assert store.keys.prefix == session.key_prefix == prefix and store.core.ttl_seconds == 600
    if backend == "redis":
        assert store.client.connection_pool.connection_kwargs["socket_timeout"] == 0.75
    conv = conversations.create(items=[msg("earlier")])
    first = store.new_response_id(conversation_id=conv.id)
    store.save(turn(first, conv.id, "one"))
    assert len(conversations.history(conv.id)) == 3
    assert [s.id for s in store.resolve_chain(first).sessions] == [first]
    session.add_items([msg("hi")])
    # Item sessions of one id share state, as on one Redis: memory mode's one server.
    assert create_sync_item_session(config, "s1").get_items() == [msg("hi")]
    session.clear_session()
    for closing in (store, conversations, session):
        closing.close()
