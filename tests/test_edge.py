"""The edge to Redis: settings checked before any write, one client per event loop,
every server refusal coded by its meaning, and a time budget that holds when the
server freezes."""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import signal
import tempfile
import time
from typing import Any, Iterator

import pytest
from redis.asyncio import Redis

from chains import record
from overrun import OVERRUN, beside_a_timer, took, took_sync
from redis_sessions import (
    ErrorCode,
    MemoryResponseSessionStore,
    MemorySession,
    RedisResponseSessionStore,
    RedisSession,
    SessionConfig,
    SessionError,
    SyncConversationStore,
    SyncRedisSession,
    SyncResponseSessionStore,
    create_item_session,
    create_response_session_store,
    new_response_id,
)
from redis_sessions import budget
from redis_sessions.ids import thread_of
from redis_sessions.budget import bounded
from servers import RedisProcess, free_port

BAD_TTLS = ["60", True, 0, -1, float("inf"), float("nan"), 10**17]
BAD_DEPTHS = ["5", True, 0, -3, 2.5, None]


def code_of(call: Any) -> ErrorCode:
    with pytest.raises(SessionError) as err:
        call()
    return err.value.code


# -- settings: refused with a code, before anything is built -------------------
@pytest.mark.parametrize("ttl", BAD_TTLS, ids=repr)
def test_a_bad_ttl_is_refused_by_every_constructor(ttl: Any) -> None:
    client = Redis()  # never connects: construction does no I/O
    for build in (
        lambda: MemoryResponseSessionStore(ttl_seconds=ttl),
        lambda: RedisResponseSessionStore(client, ttl_seconds=ttl),
        lambda: MemorySession("s", ttl_seconds=ttl),
        lambda: RedisSession("s", client=client, ttl_seconds=ttl),
    ):
        assert code_of(build) is ErrorCode.INPUT_INVALID


@pytest.mark.parametrize("depth", BAD_DEPTHS, ids=repr)
def test_a_bad_max_depth_is_refused(depth: Any) -> None:
    assert code_of(lambda: MemoryResponseSessionStore(max_depth=depth)) is ErrorCode.INPUT_INVALID


@pytest.mark.parametrize("depth", ["5", True, -1, 1.0, 100_001], ids=repr)
async def test_a_bad_max_depth_per_call_is_refused(depth: Any) -> None:
    store = MemoryResponseSessionStore()
    rid = new_response_id()
    await store.save(record(rid))
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(rid, max_depth=depth)
    assert err.value.code is ErrorCode.INPUT_INVALID


async def test_max_depth_0_per_call_fits_only_the_empty_chain() -> None:
    """As in GodeX: 0 is a valid limit (the store's own max_depth stays at least 1)."""
    store = MemoryResponseSessionStore()
    rid = new_response_id()
    await store.save(record(rid))
    with pytest.raises(SessionError) as err:
        await store.resolve_chain(rid, max_depth=0)
    assert err.value.code is ErrorCode.CHAIN_DEPTH_EXCEEDED
    assert (await store.resolve_chain(None, max_depth=0)).sessions == []


@pytest.mark.parametrize("timeout", [0, -1, "5", True, float("inf")], ids=repr)
def test_a_bad_timeout_is_refused(timeout: Any) -> None:
    assert code_of(lambda: RedisResponseSessionStore(Redis(), timeout=timeout)) is ErrorCode.INPUT_INVALID
    assert code_of(lambda: RedisSession.from_url("s", url="redis://127.0.0.1:1/0", timeout=timeout)) is ErrorCode.INPUT_INVALID


def test_bad_client_options_are_refused() -> None:
    assert code_of(lambda: RedisResponseSessionStore.from_url("redis://127.0.0.1:1/0",
                                                              redis_kwargs={"no_such_option": 1})) is ErrorCode.INPUT_INVALID
    assert code_of(lambda: RedisResponseSessionStore.from_url("redis://127.0.0.1:1/0",
                                                              redis_kwargs={"decode_responses": True})) is ErrorCode.INPUT_INVALID
    assert code_of(lambda: RedisResponseSessionStore(Redis(decode_responses=True))) is ErrorCode.INPUT_INVALID
    assert code_of(lambda: RedisResponseSessionStore("redis://not-a-client")) is ErrorCode.INPUT_INVALID  # type: ignore[arg-type]


def test_the_config_takes_a_timeout_and_client_options() -> None:
    config = SessionConfig.parse(backend="redis", url="redis://127.0.0.1:1/0", timeout_seconds=1.5,
                                 redis_kwargs={"client_name": "gateway"})
    store = create_response_session_store(config)
    assert isinstance(store, RedisResponseSessionStore) and store.timeout == 1.5
    for bad in ({"timeout_seconds": 0}, {"timeout_seconds": float("inf")}, {"ttl_seconds": "x"}):
        with pytest.raises(SessionError) as err:
            SessionConfig.parse(**bad)
        assert err.value.code is ErrorCode.INPUT_INVALID


# -- real servers of this file's own --------------------------------------------
class Server:
    """A redis-server of this test's own, with extra arguments; frozen and thawed on demand."""

    def __init__(self, *extra: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="rs-edge-")
        self.process = RedisProcess(free_port(), self.dir, list(extra))
        self.process.start()
        self.frozen = False

    @property
    def url(self) -> str:
        return self.process.url

    def freeze(self) -> None:
        assert self.process.proc is not None
        os.kill(self.process.proc.pid, signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        if self.frozen and self.process.proc is not None:
            os.kill(self.process.proc.pid, signal.SIGCONT)
            self.frozen = False

    def close(self) -> None:
        self.thaw()
        self.process.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def own_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    from conftest import _need_binary

    _need_binary()
    server = Server(*getattr(request, "param", ()))
    try:
        yield server
    finally:
        server.close()


# -- one client per event loop ---------------------------------------------------
@pytest.mark.real
def test_a_store_built_from_a_url_works_from_any_event_loop(own_server: Server) -> None:
    """A sync app calling asyncio.run per request (or the SDK's run_sync)."""
    store = RedisResponseSessionStore.from_url(own_server.url, key_prefix="loops")
    session = RedisSession.from_url("loops", url=own_server.url, key_prefix="loops")
    ids: list[str] = []
    for turn in range(3):
        async def request() -> None:
            rid = new_response_id(ids[-1] if ids else None)
            await store.save(record(rid, parent=ids[-1] if ids else None))
            ids.append(rid)
            await session.add_items([{"role": "user", "content": f"turn {turn}"}])
            await store.close()
            await session.close()

        asyncio.run(request())

    async def check() -> tuple[int, int]:
        chain = await store.resolve_chain(ids[-1])
        items = await session.get_items()
        await store.close()
        await session.close()
        return len(chain.sessions), len(items)

    assert asyncio.run(check()) == (3, 3)


def _live_loops() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop))


def _server_clients(server: Server) -> int:
    async def count() -> int:
        admin = Redis.from_url(server.url)
        try:
            return int((await admin.info("clients"))["connected_clients"])
        finally:
            await admin.aclose()
    return asyncio.run(count())


@pytest.mark.real
def test_a_sync_app_that_never_closes_keeps_no_loop_client_or_connection_of_a_finished_request(
        own_server: Server) -> None:
    """asyncio.run per request, close() never called: each loop's client is closed as its
    loop shuts down (it used to stay, with its loop and its socket, one per request)."""
    store = RedisResponseSessionStore.from_url(own_server.url, key_prefix="open")
    session = RedisSession.from_url("open", url=own_server.url, key_prefix="open")
    rid = new_response_id()
    asyncio.run(store.save(record(rid)))
    before, loops = _server_clients(own_server), _live_loops()
    for turn in range(30):
        async def request() -> None:
            assert (await store.get(rid)) is not None
            await session.add_items([{"role": "user", "content": f"turn {turn}"}])
        asyncio.run(request())
    assert _live_loops() <= loops  # other tests' loops may still be about: none of these
    assert _server_clients(own_server) <= before
    assert len(asyncio.run(session.get_items())) == 30


@pytest.mark.real
def test_one_loop_that_finalizes_its_generators_after_each_run_reconnects_and_leaks_nothing(
        own_server: Server) -> None:
    """The Agents SDK's run_sync: one loop, run again and again, whose async generators are
    finalized after every run. The client is closed each time and made anew, quietly."""
    store = RedisResponseSessionStore.from_url(own_server.url, key_prefix="sync")
    rid = new_response_id()
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(store.save(record(rid)))
        for _ in range(20):
            assert loop.run_until_complete(store.get(rid)) is not None
            loop.run_until_complete(loop.shutdown_asyncgens())
            assert not store.link._clients  # closed with the run
        assert _server_clients(own_server) == 1  # only the counting connection
    finally:
        loop.close()


@pytest.mark.real
@pytest.mark.filterwarnings("ignore::ResourceWarning")  # the dropped client's sockets, closed by the collector
def test_a_loop_closed_without_shutting_down_is_dropped_when_another_loop_asks(own_server: Server) -> None:
    """loop.close() with no shutdown of its async generators: its client cannot be closed
    on it any more, and is dropped (its sockets closed by the collector) when the next
    loop first asks for a client."""
    store = RedisResponseSessionStore.from_url(own_server.url, key_prefix="unclean")
    rid = new_response_id()
    asyncio.run(store.save(record(rid)))
    loops = _live_loops()
    for _ in range(5):
        loop = asyncio.new_event_loop()
        assert loop.run_until_complete(store.get(rid)) is not None
        loop.close()
    del loop
    assert asyncio.run(store.get(rid)) is not None
    assert not store.link._clients
    assert _live_loops() <= loops
    assert _server_clients(own_server) == 1  # only the counting connection


def test_bounded_calls_keep_no_finished_loop_alive() -> None:
    loops = _live_loops()
    for _ in range(20):
        assert asyncio.run(_Slow(5.0).nested(_ready())) == "done"
    assert _live_loops() <= loops


def _ready() -> "_Slow":
    ready = _Slow(None)
    ready.gate.set()
    return ready


@pytest.mark.real
def test_a_given_client_used_from_another_loop_is_a_coded_error(own_server: Server) -> None:
    holder: dict[str, Any] = {}

    async def first() -> None:
        holder["client"] = Redis.from_url(own_server.url)
        holder["store"] = RedisResponseSessionStore(holder["client"], key_prefix="wrongloop")
        holder["session"] = RedisSession("s", client=holder["client"], key_prefix="wrongloop")
        await holder["store"].save(record(new_response_id()))
        await holder["session"].add_items([{"role": "user", "content": "hi"}])
        await holder["client"].aclose()  # its connections die with this loop; the check comes before any use

    asyncio.run(first())

    async def second() -> list[ErrorCode]:
        codes = []
        for call in (lambda: holder["store"].get(new_response_id()), lambda: holder["session"].get_items()):
            with pytest.raises(SessionError) as err:
                await call()
            codes.append(err.value.code)
        return codes

    assert asyncio.run(second()) == [ErrorCode.CLIENT_WRONG_LOOP] * 2


# -- every refusal coded by its meaning --------------------------------------------
@pytest.mark.real
@pytest.mark.parametrize("own_server", [("--maxmemory", "2mb", "--maxmemory-policy", "noeviction")], indirect=True)
async def test_a_full_server_is_its_own_code_and_writes_nothing(own_server: Server) -> None:
    client = Redis.from_url(own_server.url)
    store = RedisResponseSessionStore(client, key_prefix="full")
    parent = new_response_id()
    await store.save(record(parent))  # a leaf, whose child's save removes its leaf mark
    filler = b"x" * 65536
    i = 0
    while True:  # fill the server until it refuses
        try:
            await client.set(f"filler:{i}", filler)
        except Exception:
            break
        i += 1
    session = RedisSession("s", client=client, key_prefix="full")
    before = await client.dbsize()
    thread = await client.hgetall(store.keys.thread(str(thread_of(parent))))
    with pytest.raises(SessionError) as err:
        await store.save(record(new_response_id(), text="y" * 200_000))
    assert err.value.code is ErrorCode.BACKEND_FULL and err.value.http_status == 507
    with pytest.raises(SessionError) as err:  # a child: its save writes more than the record
        await store.save(record(new_response_id(parent), parent, text="y" * 200_000))
    assert err.value.code is ErrorCode.BACKEND_FULL
    assert await client.hgetall(store.keys.thread(str(thread_of(parent)))) == thread
    with pytest.raises(SessionError) as err:
        await session.add_items([{"role": "user", "content": "y" * 200_000}])
    assert err.value.code is ErrorCode.BACKEND_FULL
    assert await client.dbsize() == before
    await client.aclose()


@pytest.mark.real
async def test_acl_refusals_and_wrong_passwords_are_their_own_code(own_server: Server) -> None:
    admin = Redis.from_url(own_server.url)
    # A tenant that may only touch keys of another prefix.
    await admin.execute_command("ACL", "SETUSER", "tenant", "on", ">tenant-pw", "~other:*", "+@all")
    tenant = Redis.from_url(own_server.url, username="tenant", password="tenant-pw")
    store = RedisResponseSessionStore(tenant, key_prefix="mine")
    session = RedisSession("s", client=tenant, key_prefix="mine")
    for call in (lambda: store.save(record(new_response_id())), lambda: store.get(new_response_id()),
                 lambda: session.add_items([{"role": "user", "content": "x"}]), lambda: session.pop_item()):
        with pytest.raises(SessionError) as err:
            await call()
        assert err.value.code is ErrorCode.BACKEND_DENIED, err.value
    wrong = RedisResponseSessionStore.from_url(own_server.url, redis_kwargs={"username": "tenant", "password": "nope"})
    with pytest.raises(SessionError) as err:
        await wrong.get(new_response_id())
    assert err.value.code is ErrorCode.BACKEND_DENIED
    assert "nope" not in str(err.value)
    await wrong.close()
    assert await admin.dbsize() == 0
    await tenant.aclose()
    await admin.aclose()


# -- bounded time ---------------------------------------------------------------------
def coded(result: tuple[float, SessionError | None]) -> tuple[float, ErrorCode | None]:
    """A timed call's time and code (None: it returned)."""
    return result[0], None if result[1] is None else result[1].code


@pytest.mark.real
@pytest.mark.parametrize("timeout", [1.0, 2.5])
async def test_a_frozen_server_holds_every_call_at_most_its_budget(own_server: Server, timeout: float) -> None:
    """SIGSTOP with calls in flight: each returns a coded 503 within its budget + OVERRUN."""
    store = RedisResponseSessionStore.from_url(own_server.url, key_prefix="frozen", timeout=timeout)
    session = RedisSession.from_url("s", url=own_server.url, key_prefix="frozen", timeout=timeout)
    rid = new_response_id()
    await store.save(record(rid))
    await session.add_items([{"role": "user", "content": "hi"}])

    own_server.freeze()
    try:
        *timed, (timer, _) = await asyncio.gather(  # each call beside a timer of its budget (tests/overrun.py)
            took(lambda: store.save(record(new_response_id(rid), parent=rid))),
            took(lambda: store.resolve_chain(rid)),
            took(lambda: store.get(rid)),
            took(lambda: session.add_items([{"role": "user", "content": "again"}])),
            took(lambda: session.get_items()),
            took(lambda: session.pop_item()),
            took(lambda: asyncio.sleep(timeout)),
        )
    finally:
        own_server.thaw()
    results = [coded(t) for t in timed]
    for elapsed, code in results:
        assert code in (ErrorCode.BACKEND_TIMEOUT, ErrorCode.BACKEND_UNAVAILABLE), results
        assert elapsed <= timer + OVERRUN, (results, timer)
    # Thawed, the same objects work again (redis-py reconnects by itself).
    assert (await store.get(rid)) is not None
    await store.close()
    await session.close()


@pytest.mark.real
@pytest.mark.parametrize("timeout", [1.0, 2.5])
def test_a_frozen_server_holds_every_sync_call_at_most_its_budget(own_server: Server, timeout: float) -> None:
    """The sync API under SIGSTOP, its calls made from threads that share one store, one
    session and one conversation store (as a threaded WSGI server's do): each returns a
    coded 503 within its budget + OVERRUN, and once thawed the same objects work again."""
    from concurrent.futures import ThreadPoolExecutor

    store = SyncResponseSessionStore.from_url(own_server.url, key_prefix="sfrozen", timeout=timeout)
    session = SyncRedisSession.from_url("s", url=own_server.url, key_prefix="sfrozen", timeout=timeout)
    conversations = SyncConversationStore.from_url(own_server.url, key_prefix="sfrozen", timeout=timeout)
    rid = new_response_id()
    store.save(record(rid))
    session.add_items([{"role": "user", "content": "hi"}])
    conv = conversations.create()

    calls = [lambda: store.save(record(new_response_id(rid), parent=rid)), lambda: store.resolve_chain(rid),
             lambda: store.get(rid), lambda: session.add_items([{"role": "user", "content": "again"}]),
             lambda: session.get_items(), lambda: session.pop_item(),
             lambda: conversations.add_items(conv.id, [{"type": "message", "role": "user", "content": "x"}]),
             lambda: conversations.list_items(conv.id)]
    own_server.freeze()
    try:
        with ThreadPoolExecutor(len(calls) + 1) as pool:
            *timed, (timer, _) = list(pool.map(took_sync, [*calls, lambda: time.sleep(timeout)]))
    finally:
        own_server.thaw()
    results = [coded(t) for t in timed]
    for elapsed, code in results:
        assert code in (ErrorCode.BACKEND_TIMEOUT, ErrorCode.BACKEND_UNAVAILABLE), results
        assert elapsed <= timer + OVERRUN, (results, timer)
    # Thawed, the same objects work again (redis-py reconnects by itself).
    assert store.get(rid) is not None
    # (what the server read from the timed-out connections before it saw them close may
    # have run: a pop, an add; each whole, so the session holds some of its two items)
    assert {i["content"] for i in session.get_items()} <= {"hi", "again"}
    assert conversations.get(conv.id).id == conv.id
    store.close()
    session.close()
    conversations.close()


@pytest.mark.real
async def test_a_caller_given_client_is_bounded_too(own_server: Server) -> None:
    client = Redis.from_url(own_server.url)  # redis-py defaults: no socket timeout at all
    store = RedisResponseSessionStore(client, key_prefix="given", timeout=1.0)
    await store.save(record(new_response_id()))
    own_server.freeze()
    try:
        elapsed, error, timer = await beside_a_timer(1.0, lambda: store.get(new_response_id()))
    finally:
        own_server.thaw()
    assert error is not None and error.code is ErrorCode.BACKEND_TIMEOUT
    assert elapsed <= timer + OVERRUN, (elapsed, timer)
    await client.aclose()


class _Slow:
    """A bounded method's owner: ``wait`` holds until ``gate`` is set, ``nested`` calls it."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.gate = asyncio.Event()

    @bounded
    async def wait(self) -> str:
        await self.gate.wait()
        return "done"

    @bounded
    async def nested(self, inner: "_Slow") -> str:
        return await inner.wait()


def _watchdog_books() -> tuple[int, int]:
    watchdog = budget._watchdogs.get(asyncio.get_running_loop())
    return (len(watchdog.deadlines), len(watchdog.expired)) if watchdog else (0, 0)


async def test_a_call_past_its_budget_is_a_timeout_and_leaves_its_task_as_it_was() -> None:
    slow = _Slow(0.1)
    elapsed, error, timer = await beside_a_timer(0.1, slow.wait)  # the call runs in this task
    assert error is not None and error.code is ErrorCode.BACKEND_TIMEOUT
    assert elapsed <= timer + OVERRUN, (elapsed, timer)  # the watchdog's ticks (WATCH_TICK) are within it
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0  # the task goes on, not half cancelled
    assert _watchdog_books() == (0, 0)
    slow.gate.set()
    assert await slow.wait() == "done"  # the next call on the same task is not cancelled
    assert _watchdog_books() == (0, 0)


async def test_a_cancel_from_outside_is_the_callers_not_a_timeout() -> None:
    slow = _Slow(30.0)
    task = asyncio.ensure_future(slow.wait())
    await asyncio.sleep(0)  # the call starts: in flight, under its budget
    assert _watchdog_books() == (1, 0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _watchdog_books() == (0, 0)


async def test_a_bounded_call_inside_another_runs_under_the_outer_budget() -> None:
    outer, inner = _Slow(0.1), _Slow(30.0)
    with pytest.raises(SessionError) as err:
        await outer.nested(inner)
    assert err.value.code is ErrorCode.BACKEND_TIMEOUT
    outer, inner = _Slow(30.0), _Slow(0.1)
    inner.gate.set()
    assert await outer.nested(inner) == "done"
    assert _watchdog_books() == (0, 0)


async def test_a_server_that_is_not_there_is_unavailable_within_the_budget() -> None:
    port = free_port()
    session = create_item_session(SessionConfig(backend="redis", url=f"redis://127.0.0.1:{port}/0", timeout_seconds=1.0), "s")
    elapsed, error, timer = await beside_a_timer(1.0, session.get_items)
    assert error is not None and error.code in (ErrorCode.BACKEND_UNAVAILABLE, ErrorCode.BACKEND_TIMEOUT)
    assert elapsed <= timer + OVERRUN, (elapsed, timer)
    await session.close()


@pytest.mark.real
async def test_an_acl_user_with_the_readme_rules_can_do_everything(own_server: Server) -> None:
    """README, Production: the ACL line there (measured in test_acl_measured.py) is all the package needs."""
    from test_acl_measured import readme_acl_commands

    admin = Redis.from_url(own_server.url)
    await admin.execute_command("ACL", "SETUSER", "gateway", "on", ">gw-pw", "resetkeys", "~rs:*", "-@all",
                                *[f"+{c}" for c in sorted(readme_acl_commands())])
    url = own_server.url.replace("redis://", "redis://gateway:gw-pw@")
    store = RedisResponseSessionStore.from_url(url)
    session = RedisSession.from_url("acl-user", url=url)
    root = new_response_id()
    await store.save(record(root))
    await store.save(record("ext-acl"))
    await store.save(record(new_response_id(root), parent=root))
    assert (await store.get("ext-acl")) is not None and await store.delete("ext-acl") is True
    await session.add_items([{"role": "user", "content": "hi"}, {"role": "user", "content": "there"}])
    assert (await session.pop_item()) == {"role": "user", "content": "there"}
    fork = await session.fork("acl-fork")
    assert await fork.get_items() == [{"role": "user", "content": "hi"}]
    await session.clear_session()
    await store.close()
    await session.close()
    await admin.aclose()
