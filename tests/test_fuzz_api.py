"""A fuzz over every public call and constructor: each outcome is a success or a
``SessionError``, and a refused call leaves the server's ``DEBUG DIGEST`` (every
key, value and expiry) unchanged.

Runs on a redis-server of its own (``DEBUG`` enabled for loopback), one
``asyncio.run`` per example: stores and sessions are built from a URL, so this
also exercises one client per event loop.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Awaitable, Callable, Iterator

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultservers import FaultServer
from redis_sessions import (
    ErrorCode,
    MemoryResponseSessionStore,
    RedisResponseSessionStore,
    RedisSession,
    SessionError,
    StoredResponseRequestSnapshot,
    StoredResponseSession,
    StoredResponseSnapshot,
    new_response_id,
)

pytestmark = pytest.mark.real

PREFIX = "fz"
ROOT = new_response_id()
CHILD = new_response_id(ROOT)
FOREIGN = "ext-resp-1"
SESSION = "seeded"

# -- values: arbitrary, and near-valid ---------------------------------------------
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40), st.binary(max_size=20),
)


class Deep(dict):  # type: ignore[type-arg]
    """Dicts and lists nested ``depth`` deep, with a short repr (hypothesis prints examples)."""

    def __init__(self, depth: int) -> None:
        value: Any = "leaf"
        for _ in range(depth - 1):
            value = {"k": [value]}
        super().__init__(k=[value])
        self.depth = depth

    def __repr__(self) -> str:
        return f"Deep({self.depth})"


def nested(depth: int) -> Any:
    return Deep(depth)


anything = st.recursive(
    scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=4)),
    max_leaves=12,
) | st.sampled_from([nested(2_000), nested(101), object(), {1, 2}, "x" * 300, "a b", "{tag}", "", "\x00"])
ids = st.sampled_from([ROOT, CHILD, FOREIGN, "ext-new", new_response_id(), "resp_zz", "a" * 257]) | anything
numbers = st.sampled_from([None, 0, 1, 5, 64, -1, True, False, "5", 2.5, math.inf, math.nan, 10**17, 2**63]) | anything
items = st.lists(
    st.one_of(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": st.text(max_size=30)}), anything),
    max_size=4,
) | anything


@st.composite
def records(draw: Any) -> Any:
    rid = draw(ids)
    return StoredResponseSession(
        id=rid,
        previous_response_id=draw(st.sampled_from([None, ROOT, CHILD, FOREIGN]) | ids),
        created_at=draw(st.integers(min_value=0, max_value=2**40) | numbers),
        status=draw(st.sampled_from(["completed", "incomplete"]) | anything),
        request=StoredResponseRequestSnapshot(input=draw(st.text(max_size=20) | items), instructions=draw(st.none() | anything)),
        response=StoredResponseSnapshot(id=draw(ids), output=draw(items)),
        metadata=draw(st.none() | anything),
    )


# -- the calls ------------------------------------------------------------------------
Call = Callable[[RedisResponseSessionStore, RedisSession], Awaitable[Any]]

calls = st.one_of(
    st.builds(lambda r, e, o: lambda s, _: s.save(r, expected_previous_response_id=e, overwrite=o),
              records(), st.sampled_from([None, ROOT]) | ids, st.booleans() | anything),
    st.builds(lambda r: lambda s, _: s.save(r), records()),
    st.builds(lambda i: lambda s, _: s.get(i), ids),
    st.builds(lambda i, d, inc: lambda s, _: s.resolve_chain(i, max_depth=d, include_incomplete=inc), ids, numbers, anything),
    st.builds(lambda i: lambda s, _: s.delete(i), ids),
    st.builds(lambda i: lambda s, _: s.new_response_id(i), ids),
    st.builds(lambda x: lambda _, t: t.add_items(x), items),
    st.builds(lambda n: lambda _, t: t.get_items(n), numbers),
    st.just(lambda _, t: t.pop_item()),
    st.builds(lambda i, u: lambda _, t: t.fork(i, upto=u), st.sampled_from([SESSION, "other"]) | ids, numbers),
)

store_options = st.fixed_dictionaries({}, optional={
    "key_prefix": st.just(PREFIX) | anything, "ttl_seconds": numbers, "max_depth": numbers,
    "max_record_bytes": numbers, "sliding_ttl": anything, "replay_instructions": anything, "timeout": numbers,
})
session_options = st.fixed_dictionaries({}, optional={
    "key_prefix": st.just(PREFIX) | anything, "ttl_seconds": numbers, "sliding_ttl": anything,
    "max_item_bytes": numbers, "session_settings": st.none() | anything, "timeout": numbers,
})


@pytest.fixture(scope="module")
def server() -> Iterator[FaultServer]:
    from conftest import _need_binary

    _need_binary()
    srv = FaultServer("--enable-debug-command", "local")
    try:
        yield srv
    finally:
        srv.close()


def digest(srv: FaultServer) -> bytes:
    with srv.admin() as r:
        return bytes(r.execute_command("DEBUG", "DIGEST"))


async def seed(url: str) -> None:
    store = RedisResponseSessionStore.from_url(url, key_prefix=PREFIX, ttl_seconds=None)
    session = RedisSession.from_url(SESSION, url=url, key_prefix=PREFIX)
    for rid, parent in ((ROOT, None), (CHILD, ROOT), (FOREIGN, None)):
        if await store.get(rid) is None:
            await store.save(StoredResponseSession(
                id=rid, previous_response_id=parent, created_at=1, request=StoredResponseRequestSnapshot(input="hi"),
                response=StoredResponseSnapshot(id=rid)))
    if not await session.get_items():
        await session.add_items([{"role": "user", "content": "seeded"}])
    await store.close()
    await session.close()


def run_checked(srv: FaultServer, call: Call, store_kw: dict[str, Any], session_id: Any,
                session_kw: dict[str, Any]) -> None:
    """Build a store and a session (either may refuse its arguments), make the call;
    a SessionError must leave the dataset exactly as it was."""
    asyncio.run(seed(srv.url))

    async def step() -> None:
        store = RedisResponseSessionStore.from_url(srv.url, **store_kw)
        try:
            session = RedisSession.from_url(session_id, url=srv.url, **session_kw)
        except SessionError:
            await store.close()
            raise
        try:
            await call(store, session)
        finally:
            await store.close()
            await session.close()

    before = digest(srv)
    try:
        asyncio.run(step())
    except SessionError as exc:
        if exc.code is not ErrorCode.BACKEND_TIMEOUT:  # a fuzzed budget of microseconds: outcome unknown, by design
            assert digest(srv) == before, f"a refused call changed the dataset: {exc}"


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(call=calls)
def test_every_public_call_succeeds_or_refuses_without_writing(server: FaultServer, call: Call) -> None:
    options = {"key_prefix": PREFIX, "ttl_seconds": 3600}
    run_checked(server, call, options, SESSION, options)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(store_kw=store_options, session_id=ids, session_kw=session_options, call=calls)
def test_every_constructor_builds_or_refuses_and_what_it_builds_behaves(
    server: FaultServer, store_kw: dict[str, Any], session_id: Any, session_kw: dict[str, Any], call: Call
) -> None:
    run_checked(server, call, store_kw, session_id, session_kw)


@settings(max_examples=200, deadline=None)
@given(sessions=st.lists(records(), max_size=5) | anything)
def test_the_memory_store_builds_from_any_sessions_or_refuses_with_a_code(sessions: Any) -> None:
    """``MemoryResponseSessionStore(sessions)`` (GodeX's constructor) saves every one as
    save would, or refuses with a SessionError; nothing else escapes. (Needs no server.)"""
    try:
        store = MemoryResponseSessionStore(sessions)
    except SessionError:
        return
    for session in sessions:
        got = asyncio.run(store.get(session.id))
        assert got is not None and msgspec.msgpack.encode(got) == msgspec.msgpack.encode(session)
