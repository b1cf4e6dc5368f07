"""Every item-session write applies exactly once, on every backend.

Two ways a write can arrive twice. redis-py's Retry re-sends a script whose
reply was lost after the server ran it: simulated here by sending a session's
script call twice, with the same arguments and so the same token. And a caller
retries a call that failed (a lost reply, a timeout, a cancellation):
simulated with a client whose replies get lost or delayed after the server
ran the script (a wrapper around the store's methods on the memory backend).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import pytest
from redis import exceptions as rx

from conftest import Backend
from redis_sessions.codec import decode_item, encode, pack
from redis_sessions.errors import ErrorCode, SessionError
from redis_sessions.items import CompactionSession, RedisSession, Snapshot
from redis_sessions.items import header as hd
from redis_sessions.items.redis import _ADD, _CLEAR, _COMPACT, _FORK, _POP, SCRIPTS
from redis_sessions import tokens
from test_items import (_summarize, expect_error, header_of, key_of, make as make_any, msgs, prefix_keys, pttl,
                        ring_of, texts, tokens_of)


def make(b: Backend, sid: str = "s1", **kw: Any) -> Any:
    """These tests size their items ("x" * n, which compresses to nothing): stored as they are."""
    return make_any(b, sid, compression=False, **kw)


TOKEN, EPOCH = b"fixed-token", b"fixed-epoch"


async def stashed(b: Backend) -> list[bytes]:
    """The tokens of the pops whose items the stash keeps, newest first."""
    h = await header_of(b)
    slots = await b.client.lrange(key_of(b), 0, 1)
    kept = [slots[h.newest], slots[1 - h.newest]]
    return [slot[2:].partition(b"\n")[0] for slot in kept if len(slot) > 2]


# -- one script call, as the session sends it and redis-py sends it again after a lost reply ----
async def _run(s: Any, lua: Any, args: list[Any]) -> Any:
    return await s.edge.run(lua, (s._items_key,), args, where="test", write=True)


async def add(s: Any, entries: list[bytes], token: bytes, epoch: bytes) -> int:
    return int(await _run(s, _ADD, [s._ttl_ms, epoch, token, 0, *entries]))


async def pop(s: Any, token: bytes) -> Any:
    return await _run(s, _POP, [s._ttl_ms, token, hd.SCAN_LIMIT])


async def clear(s: Any, token: bytes) -> int:
    return int(await _run(s, _CLEAR, [s._ttl_ms, token, token]))


async def create(s: Any, entries: list[bytes], source: str, version: int, token: bytes) -> bool:
    return bool(await _run(s, _FORK, [s._ttl_ms, token, source, version, token, *entries]))


async def replace(s: Any, snap: Snapshot, entries: list[bytes], token: bytes) -> bool:
    return bool(await _run(s, _COMPACT, [s._ttl_ms, snap.epoch.encode(), snap.rewrites, snap.count, token, 0,
                                          *entries]))


NEVER = 3600.0
"""A delay no call here outlives: the reply comes only after the call's budget or timeout."""


class Lossy:
    """Loses (or delays) the replies of chosen scripts after they ran.

    It wraps the client: the session reaches Redis through it.
    """

    def __init__(self, b: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
        self.b = b
        self.lose: dict[str, int] = {}
        self.delay: dict[str, float] = {}
        self.ran: list[str] = []
        self._names = {s.sha: s.name for s in SCRIPTS}

    def session(self, sid: str = "s1", **kw: Any) -> RedisSession:
        return RedisSession(sid, client=_LosingClient(self), key_prefix=self.b.prefix, **kw)  # type: ignore[arg-type]

    async def after(self, name: str, reply: Any, lost: type[Exception]) -> Any:
        self.ran.append(name)
        if self.delay.get(name):
            await asyncio.sleep(self.delay[name])
        if self.lose.get(name):
            self.lose[name] -= 1
            raise lost("the connection dropped before the reply arrived")
        return reply

    def _wrap_engine(self, name: str, real: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        def unavailable(message: str) -> SessionError:
            return SessionError(ErrorCode.BACKEND_UNAVAILABLE, message)

        async def run(*args: Any, **kwargs: Any) -> Any:
            return await self.after(name, await real(*args, **kwargs), unavailable)  # type: ignore[arg-type]

        return run


class _LosingClient:
    def __init__(self, lossy: Lossy) -> None:
        self._lossy = lossy
        self._client = lossy.b.client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        # Item sessions send EVALSHA (EVAL after NOSCRIPT) through execute_command, asking
        # for the reply undecoded; the reply is lost after the server ran the script.
        reply = await self._client.execute_command(*args, **options)
        if args[0] == "EVALSHA":
            name = self._lossy._names.get(args[1], "?")
        elif args[0] == "EVAL":
            name = next((s.name for s in SCRIPTS if s.source == args[1]), "?")
        else:
            return reply
        return await self._lossy.after(name, reply, rx.ConnectionError)


@pytest.fixture
def lossy(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Lossy:
    return Lossy(backend, monkeypatch)


def stored(item: dict[str, Any]) -> bytes:
    """``item`` as a session of compression=False stores it."""
    return pack(encode(item), 0, False)


def enc(items: list[dict[str, Any]]) -> list[bytes]:
    return [stored(i) for i in items]


def decode(entry: Any) -> Any:
    assert isinstance(entry, bytes), entry
    return decode_item(entry, "test")


# -- a re-sent script (same token) has the effect of one ------------------------------
async def test_resent_add_appends_once(backend: Backend) -> None:
    s = make(backend)
    assert await add(s, enc(msgs(2)), TOKEN, EPOCH) == 1  # creates the session
    assert await add(s, enc(msgs(2)), TOKEN, EPOCH) == 1
    assert await add(s, enc(msgs(1, start=2)), b"other", EPOCH) == 2
    assert await add(s, enc(msgs(2)), TOKEN, EPOCH) == 1  # still remembered
    assert texts(await s.get_items()) == ["m0", "m1", "m2"]


async def test_resent_pop_returns_the_same_item_and_removes_nothing_more(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(3))
    first = await pop(s, TOKEN)
    assert first == stored(msgs(1, start=2)[0])
    assert await pop(s, TOKEN) == first
    await s.add_items(msgs(1, start=9))
    assert await pop(s, TOKEN) == first
    assert texts(await s.get_items()) == ["m0", "m1", "m9"]


async def test_resent_pop_that_emptied_the_session(backend: Backend) -> None:
    s = make(backend, ttl_seconds=60)
    await s.add_items(msgs(1))
    first = await pop(s, TOKEN)
    assert first is not None
    assert await prefix_keys(backend) == [key_of(backend)]  # the header stays, with the token
    assert TOKEN in await tokens_of(backend)
    assert 50_000 < await pttl(backend) <= 60_000  # for the session's TTL
    await s.add_items(msgs(1, start=5))
    assert await pop(s, TOKEN) == first
    assert texts(await s.get_items()) == ["m5"]


async def test_resent_pop_of_nothing_is_nothing(backend: Backend) -> None:
    s = make(backend)
    assert await pop(s, TOKEN) is None
    assert await prefix_keys(backend) == []  # a pop with no effect writes nothing


async def test_resent_compaction_replaces_once(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(5))
    snap = await s.snapshot()
    summary = enc([{"type": "compaction", "summary": "5 items"}])
    assert await replace(s, snap, summary, TOKEN) is True
    await s.add_items(msgs(1, start=5))
    assert await replace(s, snap, summary, TOKEN) is True
    items = await s.get_items()
    assert items[0] == {"type": "compaction", "summary": "5 items"} and texts(items[1:]) == ["m5"]
    h = await header_of(backend)
    assert (h.version, h.rewrites) == (3, 1)
    assert await replace(s, snap, summary, b"another") is False  # a new one: refused


async def test_resent_fork_creates_once(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(2))
    target = make(backend, "f")
    assert await create(target, enc(msgs(2)), "s1", 1, TOKEN) is True
    await target.add_items(msgs(1, start=7))
    assert await create(target, enc(msgs(2)), "s1", 1, TOKEN) is True
    assert texts(await target.get_items()) == ["m0", "m1", "m7"]
    assert await create(target, enc(msgs(2)), "s1", 1, b"another") is False


async def test_resent_clear_clears_once(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(3))
    assert await clear(s, TOKEN) == 1
    await s.add_items(msgs(1, start=8))  # another client writes after the clear
    assert await clear(s, TOKEN) == 1
    assert texts(await s.get_items()) == ["m8"]


async def test_a_write_resent_after_a_clear_is_still_recognised(backend: Backend) -> None:
    s = make(backend)
    assert await add(s, enc(msgs(2)), TOKEN, EPOCH) == 1
    await s.clear_session()
    assert await add(s, enc(msgs(2)), TOKEN, EPOCH) == 1
    assert await s.get_items() == []


# -- a caller that retries a failed call gets exactly once ------------------------------
async def test_retried_add_after_a_lost_reply(backend: Backend, lossy: Lossy) -> None:
    s = lossy.session()
    await s.add_items(msgs(1))
    lossy.lose["items_add"] = 1
    with expect_error(ErrorCode.BACKEND_UNAVAILABLE):
        await s.add_items(msgs(2, start=1))
    await s.add_items(msgs(2, start=1))  # the caller retries: same items
    assert texts(await s.get_items()) == ["m0", "m1", "m2"]
    assert lossy.ran.count("items_add") == 3


async def test_retried_pop_after_a_lost_reply(backend: Backend, lossy: Lossy) -> None:
    s = lossy.session()
    await s.add_items(msgs(3))
    lossy.lose["items_pop"] = 2
    for _ in range(2):
        with expect_error(ErrorCode.BACKEND_UNAVAILABLE):
            await s.pop_item()
    assert (await s.pop_item() or {})["content"] == "m2"  # the item the first attempt removed
    assert texts(await s.get_items()) == ["m0", "m1"]
    assert (await s.pop_item() or {})["content"] == "m1"  # and the next pop is a new one


async def test_retried_pop_that_emptied_the_session(backend: Backend, lossy: Lossy) -> None:
    s = lossy.session()
    await s.add_items(msgs(1))
    lossy.lose["items_pop"] = 1
    with expect_error(ErrorCode.BACKEND_UNAVAILABLE):
        await s.pop_item()
    assert (await s.pop_item() or {})["content"] == "m0"
    assert await s.pop_item() is None


async def test_retried_fork_after_a_lost_reply(backend: Backend, lossy: Lossy) -> None:
    s = lossy.session()
    await s.add_items(msgs(2))
    lossy.lose["items_fork"] = 1
    with expect_error(ErrorCode.BACKEND_UNAVAILABLE):
        await s.fork("f")
    f = await s.fork("f")  # not "already exists": it was this fork
    assert texts(await f.get_items()) == ["m0", "m1"]
    with expect_error(ErrorCode.STORE_CONFLICT):
        await s.fork("f")


async def test_retried_replacement_after_a_lost_reply(backend: Backend, lossy: Lossy) -> None:
    s = lossy.session()
    await s.add_items(msgs(4))
    snap = await s.snapshot()
    lossy.lose["items_compact"] = 1
    with expect_error(ErrorCode.BACKEND_UNAVAILABLE):
        await s.replace_prefix(snap, [{"type": "compaction", "summary": "x"}])
    assert await s.replace_prefix(snap, [{"type": "compaction", "summary": "x"}]) is True
    assert await s.get_items() == [{"type": "compaction", "summary": "x"}]


async def test_retry_after_the_budget_expired(backend: Backend, lossy: Lossy) -> None:
    """The script runs and its reply never comes in time: the budget ends the call. The
    budget is long enough for any machine to run the script; the reply waits longer."""
    s = lossy.session(sid="slow")
    await s.add_items(msgs(2))
    lossy.delay["items_add"] = lossy.delay["items_pop"] = NEVER
    default, s.timeout = s.timeout, 1.0  # the bounded() budget of every public call
    with expect_error(ErrorCode.BACKEND_TIMEOUT):
        await s.add_items(msgs(1, start=2))
    with expect_error(ErrorCode.BACKEND_TIMEOUT):
        await s.pop_item()
    assert lossy.ran == ["items_add", "items_add", "items_pop"]  # each ran: only its reply was late
    lossy.delay.clear()
    s.timeout = default
    assert (await s.pop_item() or {})["content"] == "m2"
    await s.add_items(msgs(1, start=2))
    assert texts(await s.get_items()) == ["m0", "m1", "m2"]


async def test_retry_after_a_cancellation(backend: Backend, lossy: Lossy) -> None:
    """A call cancelled in the caller's own task (``asyncio.timeout``; ``wait_for`` runs
    the call in the caller's task from Python 3.12 on) is retried by that task: once."""
    s = lossy.session()
    await s.add_items(msgs(2))
    lossy.delay["items_pop"] = NEVER
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(1.0):  # long enough to run the pop on any machine; its reply never comes
            await s.pop_item()
    assert "items_pop" in lossy.ran  # it ran: only its reply was late
    lossy.delay.clear()
    assert (await s.pop_item() or {})["content"] == "m1"
    assert texts(await s.get_items()) == ["m0"]


async def test_two_coroutines_adding_the_same_item_are_two_writes(backend: Backend, lossy: Lossy) -> None:
    """Defect 8: two coroutines sharing one session object, each adding the same item, stored
    it once: the second took the first's failed call for its own retry. A failed call is
    remembered for its own task only."""
    s = lossy.session()
    lossy.lose["items_add"] = 1

    async def first() -> None:
        with expect_error(ErrorCode.BACKEND_UNAVAILABLE):
            await s.add_items(msgs(1))  # ran; its reply was lost

    await asyncio.create_task(first())
    await s.add_items(msgs(1))  # another coroutine's own add of the same item
    assert texts(await s.get_items()) == ["m0", "m0"]


async def test_a_pop_retried_after_other_writes_returns_the_lost_pops_item(backend: Backend, lossy: Lossy) -> None:
    """The same task's retry of a pop whose reply was lost, after other writes came in
    between, returns the item that pop removed: none lost, none returned twice."""
    s = lossy.session()
    other = make(backend)
    await s.add_items(msgs(3))
    lossy.lose["items_pop"] = 1
    with expect_error(ErrorCode.BACKEND_UNAVAILABLE):
        await s.pop_item()
    for n in range(20):
        await other.add_items(msgs(1, start=10 + n))
    assert (await s.pop_item() or {})["content"] == "m2"
    assert texts(await s.get_items())[:2] == ["m0", "m1"] and len(await s.get_items()) == 22


async def test_an_idempotency_key_reused_with_another_body_is_refused(backend: Backend) -> None:
    """Defect 8: a key reused with another body was silently dropped (and applied once 16
    writes had pushed it out of the ring). It is refused, as Stripe and the IETF
    Idempotency-Key draft refuse it, for as long as the key is remembered."""
    a, b = make(backend), make(backend)
    await a.add_items(msgs(2), idempotency_key="turn-1")
    await b.add_items(msgs(2), idempotency_key="turn-1")  # any caller's retry: nothing more
    with pytest.raises(SessionError) as err:
        await b.add_items(msgs(1, start=5), idempotency_key="turn-1")
    assert err.value.code is ErrorCode.IDEMPOTENCY_KEY_REUSED and err.value.http_status == 422
    for n in range(20):
        await a.add_items(msgs(1, start=10 + n))
    with expect_error(ErrorCode.IDEMPOTENCY_KEY_REUSED):
        await b.add_items(msgs(1, start=5), idempotency_key="turn-1")
    assert len(await a.get_items()) == 22


async def test_only_the_next_write_on_the_object_can_be_the_retry(backend: Backend, lossy: Lossy) -> None:
    s = lossy.session()
    lossy.lose["items_add"] = 1
    with expect_error(ErrorCode.BACKEND_UNAVAILABLE):
        await s.add_items(msgs(1))
    await s.add_items(msgs(1, start=1))  # different items: a new write, and the slot is spent
    await s.add_items(msgs(1))  # so this is a new write too
    assert texts(await s.get_items()) == ["m0", "m1", "m0"]
    with expect_error(ErrorCode.INPUT_INVALID):
        await s.add_items(["bad"])  # type: ignore[list-item]
    assert len(await s.get_items()) == 3


async def test_idempotency_key_across_session_objects(backend: Backend) -> None:
    a, b = make(backend), make(backend)
    await a.add_items(msgs(2), idempotency_key="turn-1")
    await b.add_items(msgs(2), idempotency_key="turn-1")  # another process retrying
    await b.add_items(msgs(1, start=2), idempotency_key="turn-2")
    await a.add_items(msgs(1, start=3))
    assert texts(await a.get_items()) == ["m0", "m1", "m2", "m3"]
    comp = CompactionSession(a, _summarize)
    await comp.add_items(msgs(1, start=2), idempotency_key="turn-2")
    assert len(await a.get_items()) == 4


@pytest.mark.parametrize("bad", ["", "a b", "x" * 257, "{k}", 5, b"bytes"], ids=repr)
async def test_invalid_idempotency_keys_are_refused(backend: Backend, bad: Any) -> None:
    s = make(backend)
    with expect_error(ErrorCode.ID_INVALID):
        await s.add_items(msgs(1), idempotency_key=bad)
    assert await prefix_keys(backend) == []


# -- the ring's bounds --------------------------------------------------------------------
async def test_the_ring_remembers_tokens_by_time_not_by_a_count_of_16(clocked: Backend) -> None:
    """Defect 8: a retry that came after 16 other writes was applied twice. Tokens are
    kept tokens.RETAIN_MS of server time now, within the ring's byte bound."""
    s = make(clocked)
    await add(s, enc(msgs(1)), TOKEN, EPOCH)
    for i in range(20):
        await add(s, enc(msgs(1, start=i + 1)), b"%016x" % i, EPOCH)
    assert await add(s, enc(msgs(1)), TOKEN, EPOCH) == 1  # 20 writes later: remembered
    clocked.clock.advance(tokens.RETAIN_MS / 1000 - 1)
    assert await add(s, enc(msgs(1)), TOKEN, EPOCH) == 1  # still within the window
    clocked.clock.advance(2)  # kept at least RETAIN_S (stamped in whole seconds: less than one more)
    await add(s, enc(msgs(1, start=99)), b"onemore", EPOCH)  # a write drops what is past the window
    assert await tokens_of(clocked) == [b"onemore"]
    assert await add(s, enc(msgs(1)), TOKEN, EPOCH) == 23  # forgotten: applied again


async def test_the_ring_is_bounded_in_bytes_whatever_the_write_rate(backend: Backend) -> None:
    s = make(backend)
    for i in range(100):
        await add(s, enc(msgs(1)), b"%016x" % i, EPOCH)
    ring, held = await backend.client.lindex(key_of(backend), -2), await tokens_of(backend)
    assert len(ring) <= tokens.MAX_BYTES and len(held) >= tokens.MAX_BYTES // 40
    assert held[-1] == b"%016x" % 99 and b"%016x" % 0 not in held


async def test_big_popped_items_are_forgotten_beyond_the_newest(backend: Backend) -> None:
    s = make(backend)
    big = [{"blob": str(i) * 40_000} for i in range(4)]
    await s.add_items(big)
    pops = [b"p%d" % i for i in range(4)]
    for t in pops:
        assert await pop(s, t) is not None
    assert [r[:1] for _, _, r in await ring_of(backend)] == [b"a", b"i", b"i", b"i", b"i"]
    assert await stashed(backend) == [pops[3]]  # 64 KiB: only the newest, which is always kept
    assert len(await backend.client.lindex(key_of(backend), -1)) < 200  # the header holds none of them
    assert await pop(s, pops[3]) == stored(big[0])
    with expect_error(ErrorCode.STORE_CONFLICT):  # ran, but its item is gone: never pop again
        await pop(s, pops[2])
    await s.add_items(msgs(1))
    with expect_error(ErrorCode.STORE_CONFLICT):
        await pop(s, pops[0])
    assert texts(await s.get_items()) == ["m0"]


async def test_the_newest_two_popped_items_are_remembered(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(20))
    pops = [b"p%d" % i for i in range(20)]
    for t in pops:
        await pop(s, t)
    assert await stashed(backend) == pops[:-hd.POPS - 1:-1]
    assert (await tokens_of(backend))[-20:] == pops
    assert texts([decode(await pop(s, pops[-2]))]) == ["m1"]
    with expect_error(ErrorCode.STORE_CONFLICT):
        await pop(s, pops[-3])
    await s.add_items(msgs(1, start=50))
    with expect_error(ErrorCode.STORE_CONFLICT):  # still in the ring, its item long gone: never a second pop
        await pop(s, pops[0])
    assert texts(await s.get_items()) == ["m50"]


async def test_a_clear_forgets_popped_items(backend: Backend) -> None:
    s = make(backend)
    await s.add_items(msgs(2))
    await pop(s, TOKEN)
    await s.clear_session()
    assert TOKEN in await tokens_of(backend) and await stashed(backend) == []
    with expect_error(ErrorCode.STORE_CONFLICT):
        await pop(s, TOKEN)


# -- what an emptied or cleared session leaves, and for how long --------------------------
async def test_an_emptied_session_keeps_its_header_briefly(clocked: Backend) -> None:
    clocked.clock.now = float(int(clocked.clock.now))  # whole ms, exactly, on both clocks
    s = make(clocked, ttl_seconds=None)  # no TTL
    await s.add_items(msgs(1))
    assert await pttl(clocked) == -1
    await s.pop_item()
    assert await pttl(clocked) == tokens.RETAIN_MS
    clocked.clock.advance(tokens.RETAIN_MS / 1000)
    assert await prefix_keys(clocked) == [key_of(clocked)]  # kept through its deadline millisecond
    clocked.clock.advance(0.001)
    assert await prefix_keys(clocked) == []


async def test_an_add_to_an_emptied_session_without_ttl_keeps_it(clocked: Backend) -> None:
    clocked.clock.now = float(int(clocked.clock.now))  # whole ms, exactly, on both clocks
    s = make(clocked, ttl_seconds=None)
    await s.add_items(msgs(2))
    await s.pop_item()
    await s.pop_item()
    await s.add_items(msgs(1, start=5))
    assert await pttl(clocked) == -1  # persisted again
    clocked.clock.advance(10 * tokens.RETAIN_MS)
    assert texts(await s.get_items()) == ["m5"]


async def test_a_cleared_session_keeps_its_header_briefly(clocked: Backend) -> None:
    clocked.clock.now = float(int(clocked.clock.now))  # whole ms, exactly, on both clocks
    s = make(clocked, ttl_seconds=3600)
    await s.add_items(msgs(2))
    await s.clear_session()
    assert await pttl(clocked) == tokens.RETAIN_MS  # not the hour: nothing left to keep
    short = make(clocked, "short", ttl_seconds=5)
    await short.add_items(msgs(1))
    await short.clear_session()
    assert await pttl(clocked, "short") == 5000
    await s.clear_session()  # clearing a cleared session is fine
    assert await s.get_items() == []


# -- redis-py's own re-send, on real servers ----------------------------------------------
class DropReplies:
    """Reads the reply to an items_* script on a connection, then drops the connection
    as if the reply had been lost: redis-py's Retry reconnects and re-sends the very
    same command (EVALSHA, or EVAL after NOSCRIPT; same ARGV, same token) on a new
    connection."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from redis.asyncio.connection import AbstractConnection

        # EVALSHA carries the SHA; EVAL (after NOSCRIPT) the source, whose end is the script's own.
        self.names: dict[bytes, str] = {s.sha.encode(): s.name for s in SCRIPTS}
        self.names.update({s.source[-120:].encode(): s.name for s in SCRIPTS})
        self.lose: dict[str, int] = {}
        self.sent: list[str] = []
        self._armed: dict[int, str] = {}
        send, read = AbstractConnection.send_packed_command, AbstractConnection.read_response

        async def send_packed_command(conn: Any, command: Any, check_health: bool = True) -> None:
            data = command if isinstance(command, (bytes, str)) else b"".join(command)
            data = data.encode() if isinstance(data, str) else data
            name = next((n for sha, n in self.names.items() if sha in data), None)
            if name is not None:
                self.sent.append(name)
                if self.lose.get(name):
                    self.lose[name] -= 1
                    self._armed[id(conn)] = name
            await send(conn, command, check_health)

        async def read_response(conn: Any, *args: Any, **kwargs: Any) -> Any:
            reply = await read(conn, *args, **kwargs)  # the script ran; its reply is here
            if self._armed.pop(id(conn), None) is not None:
                await conn.disconnect()
                raise rx.ConnectionError("the connection dropped before the reply arrived")
            return reply

        monkeypatch.setattr(AbstractConnection, "send_packed_command", send_packed_command)
        monkeypatch.setattr(AbstractConnection, "read_response", read_response)


@pytest.mark.real
async def test_redis_py_resends_are_exactly_once(real_backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    s = RedisSession.from_url("s1", url=real_backend.url, key_prefix=real_backend.prefix)
    try:
        await s.add_items(msgs(3))  # connect and load the scripts first
        drop = DropReplies(monkeypatch)
        drop.lose = {"items_add": 1, "items_pop": 1, "items_compact": 1, "items_fork": 1, "items_clear": 1}
        await s.add_items(msgs(2, start=3))
        assert (await s.pop_item() or {})["content"] == "m4"
        assert texts(await s.get_items()) == ["m0", "m1", "m2", "m3"]
        assert await s.replace_prefix(await s.snapshot(), [{"type": "compaction", "summary": "4"}]) is True
        await s.add_items(msgs(1, start=5))
        f = await s.fork("f")
        assert texts((await f.get_items())[1:]) == ["m5"]
        await f.add_items(msgs(1, start=6))
        await f.clear_session()
        await f.add_items(msgs(1, start=7))
        assert texts(await f.get_items()) == ["m7"]
        assert await s.get_items() == [{"type": "compaction", "summary": "4"}, *msgs(1, start=5)]
        for name in ("items_add", "items_pop", "items_compact", "items_fork", "items_clear"):
            assert drop.lose[name] == 0, name  # every one of them had a reply lost ...
            assert drop.sent.count(name) >= 2, name  # ... and was sent again (3 times after a NOSCRIPT)
    finally:
        await s.close()
