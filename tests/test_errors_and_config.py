"""The public contract: error codes, the config factory and what is exported."""

from __future__ import annotations

import pytest
from redis import exceptions as rx

import redis_sessions
from redis_sessions import (
    ErrorCode,
    MemoryResponseSessionStore,
    RedisResponseSessionStore,
    SessionConfig,
    SessionError,
    create_response_session_store,
    new_response_id,
)
from redis_sessions.errors import translate
from chains import record


def test_the_set_of_error_codes_is_pinned():
    assert {c.value: redis_sessions.errors.HTTP_STATUS[c] for c in ErrorCode} == {
        "session.store.conflict": 409,
        "session.chain.not_found": 404,
        "session.chain.cycle_detected": 422,
        "session.chain.depth_exceeded": 422,
        "session.chain.unavailable": 409,
        "session.id.invalid": 400,
        "session.record.too_large": 413,
        "session.record.corrupt": 500,
        "session.record.unsupported": 500,
        "session.backend.unavailable": 503,
        "session.backend.timeout": 503,
        "session.backend.full": 507,
        "session.backend.denied": 500,
        "session.backend.error": 500,
        "session.backend.not_replicated": 503,
        "session.client.wrong_loop": 500,
        "session.client.closed": 500,
        "session.input.invalid": 400,
        "session.conversation.not_found": 404,
        "session.conversation.item_not_found": 404,
        "session.idempotency.key_reused": 422,
    }


# Where the Agents SDK's sessions raise a built-in type, ours is that type too.
_ALSO = {
    "session.input.invalid": (TypeError, ValueError),
    "session.id.invalid": (TypeError, ValueError),
    "session.record.too_large": (ValueError,),
    "session.client.closed": (RuntimeError,),
    "session.client.wrong_loop": (RuntimeError,),
}


@pytest.mark.parametrize("code", list(ErrorCode), ids=str)
def test_a_code_decides_the_built_in_types_of_its_error(code):
    import pickle

    err = SessionError(code, "message")
    builtins = (TypeError, ValueError, RuntimeError)
    assert {t for t in builtins if isinstance(err, t)} == set(_ALSO.get(code.value, ()))
    assert isinstance(err, SessionError) and err.code is code and err.http_status == redis_sessions.errors.HTTP_STATUS[code]
    assert str(err) == f"{code.value}: message"
    copy = pickle.loads(pickle.dumps(err))  # a worker process reporting an error to its parent
    assert type(copy) is type(err) and copy.code is code and copy.message == "message"


def test_except_session_error_still_catches_the_typed_ones():
    with pytest.raises(SessionError):
        raise SessionError(ErrorCode.INPUT_INVALID, "bad")
    with pytest.raises(ValueError):
        raise SessionError(ErrorCode.INPUT_INVALID, "bad")
    with pytest.raises(RuntimeError, match="closed"):
        raise SessionError(ErrorCode.CLIENT_CLOSED, "RedisSession is closed")


def test_a_session_error_carries_code_status_and_a_body():
    err = SessionError(ErrorCode.STORE_CONFLICT, "taken")
    assert err.code == "session.store.conflict" and err.http_status == 409
    assert err.to_dict() == {"error": {"code": "session.store.conflict", "message": "taken", "type": "session_error"}}
    assert str(err) == "session.store.conflict: taken"


async def test_the_factory_builds_a_memory_store_from_config():
    store = create_response_session_store(SessionConfig(backend="memory", max_depth=3, ttl_seconds=None))
    assert isinstance(store, MemoryResponseSessionStore)
    assert store.max_depth == 3 and store.ttl_seconds is None
    rid = new_response_id()
    await store.save(record(rid))
    assert (await store.resolve_chain(rid)).sessions[0].id == rid


@pytest.mark.real
async def test_the_factory_builds_a_redis_store_that_owns_its_client(redis_server):
    config = SessionConfig(backend="redis", url=redis_server.url, key_prefix="factory", replay_instructions=True)
    store = create_response_session_store(config)
    assert isinstance(store, RedisResponseSessionStore) and store.replay_instructions
    rid = new_response_id()
    await store.save(record(rid, instructions="sys"))
    assert (await store.resolve_chain(rid)).input_items[0]["role"] == "system"
    await store.close()
    await store.close()  # closing twice is harmless


@pytest.mark.real
async def test_a_store_does_not_close_a_client_it_was_given(redis_server):
    from redis.asyncio import Redis

    client = Redis.from_url(redis_server.url)
    store = RedisResponseSessionStore(client, key_prefix="given")
    await store.close()
    assert await client.ping() is True
    await client.aclose()


@pytest.mark.parametrize(
    "values",
    [{"backend": "redis"}, {"backend": "sqlite"}, {"ttl_seconds": 0}, {"max_depth": 0}, {"key_prefix": "a b"},
     {"key_prefix": "{x}"}, {"unknown": 1}],
)
def test_bad_config_is_a_session_error(values):
    with pytest.raises(SessionError) as err:
        SessionConfig.parse(**values)
    assert err.value.code is ErrorCode.INPUT_INVALID


def test_the_public_api_is_importable_from_the_package():
    for name in ["StoredResponseSession", "StoredResponseRequestSnapshot", "StoredResponseSnapshot",
                 "ResponseSessionStore", "ResponseSessionSnapshot", "MemoryResponseSessionStore",
                 "RedisResponseSessionStore", "SessionConfig", "create_response_session_store",
                 "SessionError", "ErrorCode", "new_response_id"]:
        assert hasattr(redis_sessions, name), name


@pytest.mark.real
async def test_the_factory_builds_item_sessions_from_the_same_config(redis_server):
    from redis_sessions import MemorySession, RedisSession, create_item_session

    memory = create_item_session(SessionConfig(), "chat-1")
    assert isinstance(memory, MemorySession)
    config = SessionConfig(backend="redis", url=redis_server.url, key_prefix="itemfactory", ttl_seconds=60)
    session = create_item_session(config, "chat-1")
    assert isinstance(session, RedisSession) and session.ttl_seconds == 60
    await session.add_items([{"role": "user", "content": "hi"}])
    assert await session.get_items() == [{"role": "user", "content": "hi"}]
    assert 0 < await session.client.pttl(session._items_key) <= 60_000
    await session.clear_session()
    await session.close()


class _ReplicaReadOnly(rx.ReadOnlyError):
    """A subclass under another name: recognised by its type, not by its name."""


@pytest.mark.parametrize(("exc", "code"), [
    (rx.MovedError("3999 127.0.0.1:6381"), ErrorCode.BACKEND_UNAVAILABLE),
    (rx.AskError("3999 127.0.0.1:6381"), ErrorCode.BACKEND_UNAVAILABLE),
    (rx.TryAgainError("Multiple keys request during rehashing of slot"), ErrorCode.BACKEND_UNAVAILABLE),
    (rx.ClusterDownError("The cluster is down"), ErrorCode.BACKEND_UNAVAILABLE),
    (rx.MasterDownError("Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
     ErrorCode.BACKEND_UNAVAILABLE),
    (_ReplicaReadOnly("You can't write against a read only replica."), ErrorCode.BACKEND_UNAVAILABLE),
    (rx.BusyLoadingError("Redis is loading the dataset in memory"), ErrorCode.BACKEND_UNAVAILABLE),
    (rx.ResponseError("BUSY Redis is busy running a script."), ErrorCode.BACKEND_UNAVAILABLE),
    (rx.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."), ErrorCode.BACKEND_FULL),
    (rx.NoPermissionError("this user has no permissions to run the 'evalsha' command"), ErrorCode.BACKEND_DENIED),
    (rx.AuthenticationError("invalid username-password pair or user is disabled."), ErrorCode.BACKEND_DENIED),
    (rx.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"), ErrorCode.RECORD_CORRUPT),
    (rx.TimeoutError("Timeout reading from socket"), ErrorCode.BACKEND_TIMEOUT),
    (rx.ConnectionError("Connection closed by server."), ErrorCode.BACKEND_UNAVAILABLE),
    (rx.SlotNotCoveredError('Slot "12" is not covered by the cluster.'), ErrorCode.BACKEND_UNAVAILABLE),
], ids=lambda value: type(value).__name__ if isinstance(value, Exception) else value.name)
def test_redis_py_exceptions_are_known_by_their_type(exc: Exception, code: ErrorCode) -> None:
    # redis-py strips the prefix of the error replies it has a class for ("MOVED 3999 ..."
    # arrives as MovedError("3999 ...")), so the class is all there is to go by.
    translated = translate(exc, "x")
    assert translated is not None and translated.code is code


# A function whose code says it comes from redis-py's folder.
_FROM_REDIS_PATH: dict[str, object] = {}
exec(compile("def fail():\n    raise AttributeError('a bug')\n", "/site-packages/redis/asyncio/x.py", "exec"),
     _FROM_REDIS_PATH)


def test_where_an_exception_was_raised_does_not_make_it_redis_pys() -> None:
    with pytest.raises(AttributeError) as caught:
        _FROM_REDIS_PATH["fail"]()  # type: ignore[operator]
    assert translate(caught.value, "x") is None  # not a redis-py exception type: surfaces as itself


@pytest.mark.real
async def test_a_database_the_server_lacks_is_input_invalid_not_corrupt(redis_server):
    """A database number the server lacks is refused when the store first connects: the
    configuration's fault, session.input.invalid, where it was session.record.corrupt
    (a malformed URL: tests/test_responses_redis.py)."""
    store = RedisResponseSessionStore.from_url(redis_server.url.rsplit("/", 1)[0] + "/99", key_prefix="db99")
    try:
        with pytest.raises(SessionError) as err:
            await store.get(new_response_id())
        assert err.value.code is ErrorCode.INPUT_INVALID and "database number" in err.value.message
    finally:
        await store.close()


BAD_OPTIONS = [{"socket_timeout": "abc"}, {"socket_keepalive_options": 5}, {"socket_timeout": float("nan")},
               {"socket_timeout": float("inf")}, {"max_connections": 0}, {"health_check_interval": -1},
               {"socket_keepalive": "yes"}, {1: 2}]


@pytest.mark.parametrize("options", BAD_OPTIONS, ids=repr)
def test_a_wrong_client_option_value_is_refused_when_the_store_is_built(options: dict) -> None:
    """Row 9 of issue 39: ``redis_kwargs={"socket_timeout": "abc"}`` built a store whose first
    call raised a raw TypeError; ``{"socket_keepalive_options": 5}`` a raw AttributeError on
    the sync API and a retryable 503 on the asyncio one. Both APIs, every store and the
    config factories now refuse it as they are built, before any I/O."""
    from redis_sessions import (RedisConversationStore, RedisSession, SyncConversationStore, SyncRedisSession,
                                SyncResponseSessionStore, create_sync_item_session)

    url = "redis://127.0.0.1:1/0"  # nothing listens: building does no I/O
    builders = [
        lambda: RedisResponseSessionStore.from_url(url, redis_kwargs=options),
        lambda: SyncResponseSessionStore.from_url(url, redis_kwargs=options),
        lambda: RedisConversationStore.from_url(url, redis_kwargs=options),
        lambda: SyncConversationStore.from_url(url, redis_kwargs=options),
        lambda: RedisSession.from_url("s", url=url, redis_kwargs=options),
        lambda: SyncRedisSession.from_url("s", url=url, redis_kwargs=options),
        lambda: RedisResponseSessionStore.from_url(url.replace("redis://", "redis+cluster://"), redis_kwargs=options),
        lambda: create_response_session_store(SessionConfig.parse(url=url, redis_kwargs=options)),
        lambda: create_sync_item_session(SessionConfig.parse(url=url, redis_kwargs=options), "s"),
    ]
    for build in builders:
        with pytest.raises(SessionError) as err:
            build()
        assert err.value.code is ErrorCode.INPUT_INVALID
