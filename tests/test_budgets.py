"""A call's budget bounds the whole call, on both APIs, and a closed store stays closed.

Each timing assertion here is a budget overrun (the call ended within its budget plus a
margin), never a measure of this machine's speed: the link is slowed on purpose, so a
call that did not carry its deadline through every round trip and pause overruns by
seconds, not milliseconds.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

import pytest

from faultproxy import FaultProxy
from overrun import beside_a_timer
from faultservers import key_slot, start_slot_migration
from redis_sessions import (
    ErrorCode,
    RedisConversationStore,
    RedisResponseSessionStore,
    RedisSession,
    SessionError,
    StoredResponseRequestSnapshot,
    StoredResponseSession,
    StoredResponseSnapshot,
    SyncConversationStore,
    SyncRedisSession,
    SyncResponseSessionStore,
)
from servers import StandaloneServer

pytestmark = pytest.mark.real

BUDGET = 1.0
MARGIN = 0.5
"""What a call may take past its budget: the watchdog's tick, one socket wake-up; a call
that waits out its round trips instead overruns by one of them per page (0.18 s here).
Measured against a plain timer of the budget run beside the call (tests/overrun.py), so
this machine's own lateness is not counted against it."""


async def elapsed_until_error(call: Callable[[], Any], api: str) -> tuple[float, SessionError, float]:
    """How long ``call()`` took to raise, and how long a timer of BUDGET beside it took: on
    the event loop, or (``sync``) both in the loop's thread pool, off the event loop (the
    proxy runs on its own thread anyway)."""
    took, error, timer = await beside_a_timer(BUDGET, call, in_thread=api == "sync")
    assert error is not None, f"{api}: the call returned"
    return took, error, timer


@pytest.fixture
def private_server() -> Any:
    server = StandaloneServer()
    yield server
    server.close()


@pytest.mark.parametrize("api", ["async", "sync"])
async def test_a_long_read_behind_a_slow_link_ends_within_its_budget(private_server: Any, api: str) -> None:
    """Row 1: get_items() of 10,000 items, each reply 0.18 s late, took 2.36 s of a 1 s
    budget on the sync API (a socket timeout per round trip, not a deadline per call).
    A read of them now takes two round trips (the first sizes the second), so each reply
    comes 0.6 s late: under the budget one by one, over it together."""
    prefix, sid = "b" + uuid.uuid4().hex[:8], uuid.uuid4().hex
    filler = RedisSession.from_url(sid, url=private_server.url, key_prefix=prefix, ttl=None)
    for at in range(0, 10_000, 1000):
        await filler.add_items([{"role": "user", "content": f"item {i} " + "x" * 200} for i in range(at, at + 1000)])
    await filler.close()
    with FaultProxy("127.0.0.1", private_server.port) as proxy:
        proxy.arm("delay", match=b"*", times=1_000_000, hold=0.6)  # every command
        if api == "sync":
            session = SyncRedisSession.from_url(sid, url=proxy.url, key_prefix=prefix, timeout=BUDGET)
            took, error, timer = await elapsed_until_error(session.get_items, api)
            session.close()
        else:
            asession = RedisSession.from_url(sid, url=proxy.url, key_prefix=prefix, timeout=BUDGET)
            took, error, timer = await elapsed_until_error(asession.get_items, api)
            await asession.close()
        assert proxy.fired >= 2  # the replies were slowed, more than one round trip was made
    assert error.code is ErrorCode.BACKEND_TIMEOUT
    assert took <= timer + MARGIN, f"{api}: {took:.2f} s on a {BUDGET} s budget (a timer of it: {timer:.2f} s)"


def _turn(rid: str, conversation_id: str) -> StoredResponseSession:
    return StoredResponseSession(id=rid, conversation_id=conversation_id, created_at=1_700_000_000,
                                 request=StoredResponseRequestSnapshot(input="b"),
                                 response=StoredResponseSnapshot(id=rid, output=[{"role": "assistant", "content": "re"}]))


@pytest.mark.parametrize("api", ["async", "sync"])
async def test_a_turn_whose_slot_migrates_ends_within_its_budget_with_the_same_code(redis_cluster: Any, api: str) -> None:
    """Row 2: a conversation's turn saved on the sync API while its slot migrated (TRYAGAIN)
    ran 17.1 s on a 1 s budget, then raised backend.unavailable; the asyncio API stopped at
    1.0 s with backend.timeout. Now both stop at the budget, with backend.timeout, and
    nothing is saved."""
    prefix = "m" + uuid.uuid4().hex[:8]
    if api == "sync":
        sconv = SyncConversationStore.from_url(redis_cluster.url, key_prefix=prefix, ttl_seconds=600)
        sresp = SyncResponseSessionStore.from_url(redis_cluster.url, key_prefix=prefix, timeout=BUDGET,
                                                  conversations=sconv)
        conv_id = sconv.create(items=[{"role": "user", "content": "a"}]).id
        rid = sresp.new_response_id(conversation_id=conv_id)
        key = sconv.keys.conversation(conv_id)
        save: Callable[[], Any] = lambda: sresp.save(_turn(rid, conv_id))  # noqa: E731
    else:
        conv = RedisConversationStore.from_url(redis_cluster.url, key_prefix=prefix, ttl_seconds=600)
        resp = RedisResponseSessionStore.from_url(redis_cluster.url, key_prefix=prefix, timeout=BUDGET,
                                                  conversations=conv)
        conv_id = (await conv.create(items=[{"role": "user", "content": "a"}])).id
        rid = await resp.new_response_id(conversation_id=conv_id)
        key = conv.keys.conversation(conv_id)
        save = lambda: resp.save(_turn(rid, conv_id))  # noqa: E731
    migration = start_slot_migration(redis_cluster, key_slot(key))
    try:
        took, error, timer = await elapsed_until_error(save, api)
    finally:
        migration.move_back()
    assert error.code is ErrorCode.BACKEND_TIMEOUT
    assert took <= timer + MARGIN, f"{api}: {took:.2f} s on a {BUDGET} s budget (a timer of it: {timer:.2f} s)"
    if api == "sync":
        assert sresp.get(rid) is None and len(sconv.history(conv_id)) == 1  # nothing written
        sresp.close()
        sconv.close()
    else:
        assert await resp.get(rid) is None and len(await conv.history(conv_id)) == 1
        await resp.close()
        await conv.close()


def _connections(server: Any) -> int:
    import redis

    with redis.Redis.from_url(server.url) as admin:
        return int(admin.info("clients")["connected_clients"]) - 1  # less this one


def _stores(url: str, prefix: str) -> dict[str, Any]:
    return {
        "responses": SyncResponseSessionStore.from_url(url, key_prefix=prefix),
        "conversations": SyncConversationStore.from_url(url, key_prefix=prefix),
        "session": SyncRedisSession.from_url("s1", url=url, key_prefix=prefix),
    }


SYNC_CALLS: dict[str, Callable[[Any], Any]] = {
    "responses": lambda s: s.get("resp_x"),
    "conversations": lambda s: s.create(),
    "session": lambda s: s.get_items(),
}
NO_IO_CALLS: dict[str, Callable[[Any], Any]] = {
    "responses": lambda s: s.resolve_chain(None),
    "conversations": lambda s: s.get("conv_x"),
    "session": lambda s: s.get_items(limit=0),
}


def test_after_close_every_sync_store_answers_client_closed_and_holds_no_connection(private_server: Any) -> None:
    """Row 10: after close(), SyncResponseSessionStore and SyncConversationStore quietly
    built a new client and pool, where SyncRedisSession raised session.client.closed."""
    stores = _stores(private_server.url, "c" + uuid.uuid4().hex[:8])
    for name, store in stores.items():
        SYNC_CALLS[name](store)  # connected
    assert _connections(private_server) >= 1
    for store in stores.values():
        store.close()
        store.close()  # a second close does nothing
    assert _connections(private_server) == 0
    for name, store in stores.items():
        for call in (SYNC_CALLS[name], NO_IO_CALLS[name]):
            with pytest.raises(SessionError) as err:
                call(store)
            assert err.value.code is ErrorCode.CLIENT_CLOSED, name
            assert isinstance(err.value, RuntimeError)  # as the Agents SDK's closed session
    assert _connections(private_server) == 0  # no call reopened anything


async def test_after_close_every_async_store_answers_client_closed_on_that_loop(private_server: Any) -> None:
    prefix = "c" + uuid.uuid4().hex[:8]
    stores: dict[str, Any] = {
        "responses": RedisResponseSessionStore.from_url(private_server.url, key_prefix=prefix),
        "conversations": RedisConversationStore.from_url(private_server.url, key_prefix=prefix),
        "session": RedisSession.from_url("s1", url=private_server.url, key_prefix=prefix),
    }
    for name, store in stores.items():
        await SYNC_CALLS[name](store)
    for store in stores.values():
        await store.close()
    assert _connections(private_server) == 0
    for name, store in stores.items():
        for call in (SYNC_CALLS[name], NO_IO_CALLS[name]):
            with pytest.raises(SessionError) as err:
                await call(store)
            assert err.value.code is ErrorCode.CLIENT_CLOSED, name
    assert _connections(private_server) == 0


async def test_a_store_given_a_client_stays_usable_after_close(private_server: Any) -> None:
    """close() never closes a caller's client, and the store keeps working on it."""
    from redis.asyncio import Redis

    client = Redis.from_url(private_server.url)
    store = RedisResponseSessionStore(client, key_prefix="g" + uuid.uuid4().hex[:8])
    await store.close()
    assert await store.get("resp_x") is None
    await client.aclose()
