"""Item sessions as a drop-in for the Agents SDK's ``RedisSession``: its argument
names and defaults, ``close()``, ``ping()``, ``async with``, clients made with
``decode_responses=True``, its compaction hook and the built-in exception types.

The SDK's own tests run against ``RedisSession`` in ``tests/sdk_upstream``; these
cover what they cannot (every backend, a cluster, this package's own names).
"""

from __future__ import annotations

import asyncio
import sys
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock

import fakeredis
import pytest
from agents.memory import OpenAIResponsesCompactionSession, SessionSettings
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from conftest import Backend
from redis_sessions.errors import ErrorCode, SessionError
from redis_sessions import MemorySession
from redis_sessions.items import RedisSession
from redis_sessions.link import RedisLink
from redis_sessions.limits import DEFAULT_TTL_SECONDS
from servers import free_port
from test_items import expect_error, make, msgs, pttl, texts


def owned(server: Any, sid: str = "s1", **kw: Any) -> RedisSession:
    """A session that builds its own (fakeredis) client per event loop, as from_url does."""
    return RedisSession(sid, link=RedisLink(factory=lambda: fakeredis.FakeAsyncRedis(server=server)), **kw)


def decoding_client(b: Backend) -> Any:
    """A second client on ``b``'s server, made with decode_responses=True."""
    if b.name == "fakeredis":
        return fakeredis.FakeAsyncRedis(server=b.server, decode_responses=True)
    if b.name == "redis":
        return Redis.from_url(b.url, decode_responses=True)
    return RedisCluster(host="127.0.0.1", port=b.server.ports[0], decode_responses=True)


# -- the SDK's argument names, beside ours ---------------------------------------------
async def test_the_sdk_names_redis_client_and_ttl(redis_backend: Backend) -> None:
    s = RedisSession(session_id="s1", redis_client=redis_backend.client, key_prefix=redis_backend.prefix, ttl=60)
    assert s.client is redis_backend.client and s.ttl_seconds == 60
    await s.add_items(msgs(1))
    assert 50_000 < await pttl(redis_backend) <= 60_000


async def test_memory_sessions_take_ttl_too(backend: Backend) -> None:
    s = make(backend, ttl=60)
    await s.add_items(msgs(1))
    assert s.ttl_seconds == 60 and 50_000 < await pttl(backend) <= 60_000


def test_one_parameter_by_both_names_is_refused() -> None:
    client = Redis()
    for build in (lambda: RedisSession("s", client=client, redis_client=client),
                  lambda: RedisSession("s", client=client, ttl=1, ttl_seconds=1),
                  lambda: MemorySession("s", ttl=None, ttl_seconds=None),
                  lambda: RedisSession.from_url("s", url="redis://127.0.0.1:1/0", ttl=1, ttl_seconds=1)):
        with expect_error(ErrorCode.INPUT_INVALID):
            build()


def test_from_url_takes_the_sdk_arguments() -> None:
    s = RedisSession.from_url("s", url="redis://127.0.0.1:1/0", redis_kwargs={"client_name": "app"},
                              session_settings={"limit": 3}, key_prefix="app", ttl=60)
    assert s.ttl_seconds == 60 and s.key_prefix == "app" and s.session_settings == SessionSettings(limit=3)
    assert s.link.owns_client


async def test_the_default_ttl_is_the_package_default(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(1))
    assert s.ttl_seconds == DEFAULT_TTL_SECONDS == 30 * 24 * 3600
    assert DEFAULT_TTL_SECONDS * 1000 - 60_000 < await pttl(backend) <= DEFAULT_TTL_SECONDS * 1000
    assert RedisSession.from_url("s", url="redis://127.0.0.1:1/0").ttl_seconds == DEFAULT_TTL_SECONDS


@pytest.mark.parametrize("name", ["ttl_seconds", "ttl"])
async def test_ttl_none_never_expires(backend: Backend, name: str) -> None:
    s = make(backend, **{name: None})
    await s.add_items(msgs(1))
    assert s.ttl_seconds is None and await pttl(backend) == -1


def test_session_settings_default_to_the_sdk_default() -> None:
    for s in (MemorySession("s"), RedisSession("s", client=Redis()), RedisSession.from_url("s", url="redis://h/0")):
        assert s.session_settings == SessionSettings()
    assert MemorySession("s", session_settings={"limit": 2}).session_settings == SessionSettings(limit=2)


def test_session_settings_the_sdk_refuses_are_refused_with_a_code_and_its_exception_type() -> None:
    """A dict the SDK's own RedisSession refuses (an unknown key, found by the API fuzz
    test) is session.input.invalid here, and a TypeError as the SDK's refusal is, on the
    constructors and on the setter; the session's settings stay as they were."""
    from agents.extensions.memory.redis_session import RedisSession as SdkRedisSession

    bad = {"limit": 2, "k": [1]}
    with pytest.raises(TypeError):
        SdkRedisSession("s", redis_client=Redis(), session_settings=bad)
    for build in (lambda: MemorySession("s", session_settings=bad),
                  lambda: RedisSession("s", client=Redis(), session_settings=bad),
                  lambda: RedisSession.from_url("s", url="redis://127.0.0.1:1/0", session_settings=bad)):
        with pytest.raises(SessionError) as caught:
            build()
        assert caught.value.code is ErrorCode.INPUT_INVALID and isinstance(caught.value, TypeError)
        assert "Unknown session settings: k" in str(caught.value)
    s = MemorySession("s", session_settings={"limit": 2})
    with expect_error(ErrorCode.INPUT_INVALID):
        s.session_settings = bad
    assert s.session_settings == SessionSettings(limit=2)


def test_a_settings_dict_without_the_sdk_to_read_it_is_refused_with_a_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents.memory.session_settings", None)  # as if not installed
    with pytest.raises(SessionError) as caught:
        MemorySession("s", session_settings={"limit": 2})
    assert caught.value.code is ErrorCode.INPUT_INVALID and "openai-agents" in str(caught.value)
    assert MemorySession("s", session_settings=SessionSettings(limit=2)).session_settings.limit == 2


# -- clients made with decode_responses=True -----------------------------------------------
async def test_a_decode_responses_client_reads_and_writes_the_same_bytes(redis_backend: Backend) -> None:
    client = decoding_client(redis_backend)
    try:
        s = RedisSession("s1", redis_client=client, key_prefix=redis_backend.prefix)
        plain = make(redis_backend)
        items = [{"role": "user", "content": "héllo 🚀"}, *msgs(3)]
        await s.add_items(items)
        assert await s.get_items() == items == await plain.get_items()
        assert await s.get_items(2) == items[-2:]
        assert await s.pop_item() == items[-1]
        fork = await s.fork("s2")
        assert await fork.get_items() == items[:-1]
        snapshot = await s.snapshot()
        assert await s.replace_prefix(snapshot, [{"role": "system", "content": "summary"}])
        assert await plain.get_items() == [{"role": "system", "content": "summary"}]
        assert await s.ping() is True
        await s.clear_session()
        assert await plain.get_items() == [] and await s.get_items() == []
        assert await client.ping() is True  # the caller's client is untouched, still decoding
    finally:
        await client.aclose()


@pytest.mark.real
@pytest.mark.parametrize("where", ["redis_kwargs", "url"])
async def test_from_url_with_decode_responses_works(redis_server: Any, where: str) -> None:
    if where == "url":
        s = RedisSession.from_url("d", url=redis_server.url + "?decode_responses=True", key_prefix="dec-url")
    else:
        s = RedisSession.from_url("d", url=redis_server.url, redis_kwargs={"decode_responses": True},
                                  key_prefix="dec-kw")
    try:
        await s.add_items(msgs(2))
        assert texts(await s.get_items()) == ["m0", "m1"]
        assert texts([await s.pop_item()]) == ["m1"]
        await s.clear_session()
    finally:
        await s.close()


# -- close(), ping(), async with ----------------------------------------------------------
async def test_a_closed_session_raises_runtime_errors_like_the_sdk() -> None:
    server = fakeredis.FakeServer()
    s = owned(server)
    await s.add_items(msgs(1))
    fork = await s.fork("s2")
    await asyncio.gather(s.close(), s.close())
    await s.close()
    calls = (s.get_items, lambda: s.add_items([]), lambda: s.add_items(msgs(1)), s.pop_item, s.clear_session,
             s.ping, lambda: s.fork("s3"), s.snapshot, fork.get_items)
    for call in calls:
        with pytest.raises(RuntimeError, match="RedisSession is closed") as err:
            await call()
        assert isinstance(err.value, SessionError) and err.value.code is ErrorCode.CLIENT_CLOSED
    reader = fakeredis.FakeAsyncRedis(server=server)
    assert len(await reader.keys("*")) == 2  # nothing was written or removed after close
    await reader.aclose()


def test_close_ends_a_session_on_its_event_loop_only() -> None:
    """A sync app (asyncio.run per request, the SDK's run_sync) closes at the end of each loop."""
    s = owned(fakeredis.FakeServer())

    async def turn() -> int:
        await s.add_items(msgs(1))
        count = len(await s.get_items())
        await s.close()
        with expect_error(ErrorCode.CLIENT_CLOSED):
            await s.get_items()
        return count

    assert [asyncio.run(turn()) for _ in range(3)] == [1, 2, 3]


async def test_close_leaves_a_given_client_and_the_session_usable(redis_backend: Backend) -> None:
    s = RedisSession("s1", redis_client=redis_backend.client, key_prefix=redis_backend.prefix)
    await s.add_items(msgs(1))
    await s.close()
    await s.add_items(msgs(1, start=1))
    assert texts(await s.get_items()) == ["m0", "m1"]
    assert await s.ping() is True and await redis_backend.client.ping() is True


async def test_ping(redis_backend: Backend) -> None:
    assert await make(redis_backend).ping() is True
    assert await MemorySession("s").ping() is True
    down = RedisSession.from_url("s", url=f"redis://127.0.0.1:{free_port()}/0", timeout=1.0)
    assert await down.ping() is False
    await down.close()


async def test_async_with_closes_a_session_that_built_its_client() -> None:
    async with owned(fakeredis.FakeServer()) as s:
        await s.add_items(msgs(1))
        assert texts(await s.get_items()) == ["m0"]
    with pytest.raises(RuntimeError, match="RedisSession is closed"):
        await s.get_items()
    async with MemorySession("s", key_prefix="awith") as m:
        await m.add_items(msgs(1))
    assert texts(await m.get_items()) == ["m0"]  # nothing to close: still usable


# -- the SDK's compaction hook -------------------------------------------------------------
def _compactor(output: list[dict[str, Any]]) -> Any:
    compact = AsyncMock(return_value=SimpleNamespace(usage=None, output=output))
    return SimpleNamespace(responses=SimpleNamespace(compact=compact))


async def test_sdk_compaction_replaces_the_history_in_one_step(backend: Backend,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    s = make(backend)
    await s.add_items(msgs(4))
    summary = [{"role": "user", "content": "summary"}]
    monkeypatch.setattr(s, "clear_session", AsyncMock(side_effect=AssertionError("no clear-then-add gap")))
    wrapper = OpenAIResponsesCompactionSession(s.session_id, s, client=_compactor(summary), compaction_mode="input")
    await wrapper.run_compaction({"force": True})
    assert await s.get_items() == summary
    assert await s._atomic_replace_items([]) is True and await s.get_items() == []
    fresh = make(backend, "new")  # nothing to replace: the items are simply the history
    assert await fresh._atomic_replace_items(summary) is True and await fresh.get_items() == summary


async def test_sdk_compaction_goes_through_a_subclass_that_overrides_storage(backend: Backend) -> None:
    class Counting(MemorySession):
        adds = 0

        async def add_items(self, items: Any, *, idempotency_key: Any = None) -> None:
            self.adds += 1
            await super().add_items(items, idempotency_key=idempotency_key)

    s = Counting("s1", key_prefix=backend.prefix)
    await s.add_items(msgs(2))
    assert await s._atomic_replace_items(msgs(1)) is False  # the SDK then clears and adds through the subclass
    wrapper = OpenAIResponsesCompactionSession(s.session_id, s, client=_compactor(msgs(1)), compaction_mode="input")
    await wrapper.run_compaction({"force": True})
    assert s.adds == 2 and texts(await s.get_items()) == ["m0"]


async def test_sdk_compaction_keeps_an_append_made_meanwhile(backend: Backend,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    s = make(backend)
    await s.add_items(msgs(3))
    real_snapshot = type(s).snapshot

    async def snapshot_then_append(self: RedisSession) -> Any:
        snap = await real_snapshot(self)
        await make(backend, "s1").add_items(msgs(1, start=9))  # another worker, after the read
        return snap

    monkeypatch.setattr(type(s), "snapshot", snapshot_then_append)
    assert await s._atomic_replace_items([{"role": "user", "content": "summary"}])
    monkeypatch.undo()
    assert texts(await s.get_items()) == ["summary", "m9"]


# -- the exception types the SDK's callers catch ---------------------------------------------
@pytest.mark.parametrize("items", ["not a list", [1], [{"x": object()}], [{1: "x"}]],
                         ids=["a-string", "an-int", "an-object", "an-int-key"])  # the same in every xdist worker
async def test_bad_items_are_type_and_value_errors(backend: Backend, items: Any) -> None:
    s = make(backend)
    for kind in (TypeError, ValueError):
        with pytest.raises(kind) as err:
            await s.add_items(items)
        assert isinstance(err.value, SessionError) and err.value.code is ErrorCode.INPUT_INVALID
    assert await s.get_items() == []


async def test_an_item_too_large_is_a_value_error(backend: Backend) -> None:
    s = make(backend, max_item_bytes=64)
    with pytest.raises(ValueError) as err:
        await s.add_items([{"content": "x" * 100}])
    assert err.value.code is ErrorCode.RECORD_TOO_LARGE  # type: ignore[attr-defined]


@pytest.mark.parametrize("ttl", [-1, 0, float("inf"), 2**63], ids=repr)
def test_a_ttl_out_of_range_is_a_value_error(ttl: Any) -> None:
    for build in (lambda: RedisSession("s", redis_client=Redis(), ttl=ttl), lambda: MemorySession("s", ttl=ttl)):
        with pytest.raises(ValueError) as err:
            build()
        assert err.value.code is ErrorCode.INPUT_INVALID  # type: ignore[attr-defined]
