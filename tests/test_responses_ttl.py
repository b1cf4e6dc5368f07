"""Expiry: one TTL per thread, never shortened, optionally sliding; on the fake clock
(memory mode, fakeredis). Real TTLs on real servers: tests/test_real_expiry.py."""

from __future__ import annotations

from chains import all_keys, build_chain, make_store, record
from redis_sessions import new_response_id
from redis_sessions.ids import thread_of


async def test_a_descendant_keeps_its_whole_chain_alive(clocked):
    store = make_store(clocked, ttl_seconds=100)
    a, = await build_chain(store, 1)
    clocked.clock.advance(60)
    b = new_response_id(a)
    await store.save(record(b, a))
    clocked.clock.advance(60)  # a alone would have expired at 100 s
    assert await store.get(a) is not None
    assert len((await store.resolve_chain(b)).sessions) == 2
    clocked.clock.advance(50)  # past b's 160 s
    assert await store.get(a) is None and await store.get(b) is None
    assert await all_keys(clocked, store) == {}


async def test_sliding_ttl_refreshes_on_read(clocked):
    sliding = make_store(clocked, ttl_seconds=100, sliding_ttl=True)
    fixed = make_store(clocked, ttl_seconds=100)
    a, = await build_chain(sliding, 1)
    b, = await build_chain(fixed, 1)
    for _ in range(3):
        clocked.clock.advance(80)
        assert await sliding.get(a) is not None
        assert (await sliding.resolve_chain(a)).sessions
    assert await fixed.get(b) is None


async def test_foreign_id_locators_expire_with_their_record(clocked):
    store = make_store(clocked, ttl_seconds=100)
    await store.save(record("ext-1"))
    assert await store.get("ext-1") is not None
    clocked.clock.advance(101)
    assert await store.get("ext-1") is None
    assert await all_keys(clocked, store) == {}


async def test_a_shorter_ttl_never_shortens_a_chain(redis_backend):
    long = make_store(redis_backend, ttl_seconds=1000)
    short = make_store(redis_backend, ttl_seconds=10)
    forever = make_store(redis_backend, ttl_seconds=None)
    a, = await build_chain(long, 1)
    b = new_response_id(a)
    await short.save(record(b, a))
    key = long.keys.thread(thread_of(a))
    assert await redis_backend.client.pttl(key) > 900_000
    c = new_response_id(b)
    await forever.save(record(c, b))
    assert await redis_backend.client.pttl(key) == -1
    await short.save(record(new_response_id(c), c))
    assert await redis_backend.client.pttl(key) == -1
    # ... and a longer one lengthens it (the save's PEXPIRE ... GT: only a later deadline)
    x, = await build_chain(short, 1)
    other = long.keys.thread(thread_of(x))
    assert 0 < await redis_backend.client.pttl(other) <= 10_000
    await long.save(record(new_response_id(x), x))
    assert await redis_backend.client.pttl(other) > 900_000


async def test_continuing_a_foreign_parent_keeps_it_readable_by_id(clocked):
    store = make_store(clocked, ttl_seconds=100)
    await store.save(record("ext-a"))
    clocked.clock.advance(80)
    await store.save(record("ext-b", "ext-a"))
    clocked.clock.advance(80)  # ext-a's own save is 160 s old; its child's is 80 s
    assert (await store.get("ext-a")).id == "ext-a"
    assert [s.id for s in (await store.resolve_chain("ext-b")).sessions] == ["ext-a", "ext-b"]


async def test_a_thread_lives_through_its_deadline_millisecond(clocked):
    """Redis expires a key when now > deadline, in whole ms: the memory engine and
    fakeredis (float seconds, the same strict rule) agree on the boundary."""
    clocked.clock.now = float(int(clocked.clock.now))  # whole seconds: every value below is exact
    store = make_store(clocked, ttl_seconds=100)
    a, = await build_chain(store, 1)
    await store.save(record("ext-1"))
    clocked.clock.advance(100)  # exactly the deadline
    assert await store.get(a) is not None and await store.get("ext-1") is not None
    clocked.clock.advance(0.001)  # one millisecond past it
    assert await store.get(a) is None and await store.get("ext-1") is None
    assert await all_keys(clocked, store) == {}


async def test_sliding_a_missing_record_leaves_the_ttl_alone(clocked):
    store = make_store(clocked, ttl_seconds=100, sliding_ttl=True)
    a, = await build_chain(store, 1)
    before = await all_keys(clocked, store, deadlines=True)
    clocked.clock.advance(30)
    assert await store.get(new_response_id(a)) is None
    assert await all_keys(clocked, store, deadlines=True) == before
    assert await store.get(a) is not None
    assert await all_keys(clocked, store, deadlines=True) != before
