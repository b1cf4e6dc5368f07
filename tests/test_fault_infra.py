"""The fault-injection infrastructure works against real redis-servers: the
proxy loses, holds, cuts and delays replies as asked; frozen, full, ACL'd and
restarted servers fail the way the product tests expect; a live slot migration
yields ASK and TRYAGAIN; and a cluster client reaches every node through proxies.

The duplicated INCRs below are the point: a client that retries a write whose
reply was lost applies it twice, which is what the product must defend against.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from typing import Any, AsyncIterator, Callable, Iterator

import pytest
import redis
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    AuthenticationError,
    ClusterError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.asyncio.retry import Retry

from faultproxy import FaultProxy
from faultservers import (  # noqa: F401 - fixtures
    ClusterProxies,
    FaultServer,
    Freezer,
    admin,
    fault_proxies,
    fault_servers,
    freezer,
    frozen,
    key_slot,
    keys_in_slot,
    slot_owner,
    start_slot_migration,
)
from servers import ClusterServer, StandaloneServer

pytestmark = pytest.mark.real

TIMEOUT = 0.3


def retrying(tries: int) -> Retry:
    return Retry(NoBackoff(), tries)


def key(name: str = "k") -> str:
    return f"fi{uuid.uuid4().hex[:10]}:{name}"


def server_value(port: int, k: str) -> Any:
    with admin(port) as r:
        return r.get(k)


@pytest.fixture
def proxy(redis_server: StandaloneServer) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", redis_server.port) as p:
        yield p


def client_for(url: str, tries: int) -> Redis:
    return Redis.from_url(url, retry=retrying(tries), socket_timeout=TIMEOUT, socket_connect_timeout=1)


@pytest.fixture
async def make_client() -> AsyncIterator[Callable[..., Redis]]:
    made: list[Redis] = []

    def make(url: str, tries: int = 3) -> Redis:
        c = client_for(url, tries)
        made.append(c)
        return c

    yield make
    for c in made:
        await c.aclose()


# -- the proxy ---------------------------------------------------------------


async def test_proxy_relays_untouched(proxy: FaultProxy, make_client: Callable[..., Redis]) -> None:
    c = make_client(proxy.url)
    k = key()
    assert await c.set(k, b"x" * 200_000)
    assert await c.get(k) == b"x" * 200_000
    assert proxy.fired == 0 and proxy.accepted >= 1 and proxy.count(k.encode()) == 2


async def test_drop_runs_the_command_and_loses_the_reply(proxy: FaultProxy, redis_server: StandaloneServer,
                                                         make_client: Callable[..., Redis]) -> None:
    k = key()
    proxy.arm("drop", match=b"INCR")
    # redis-py retries the lost reply and the server runs INCR twice
    assert await make_client(proxy.url, 3).incr(k) == 2
    assert proxy.fired == 1 and not proxy.armed
    assert server_value(redis_server.port, k) == b"2"

    k2 = key()
    proxy.arm("drop", match=b"INCR")
    with pytest.raises(RedisConnectionError):
        await make_client(proxy.url, 0).incr(k2)
    assert proxy.fired == 2
    assert server_value(redis_server.port, k2) == b"1"  # ran, though the client saw an error


async def test_times_counts_matching_commands_only(proxy: FaultProxy, redis_server: StandaloneServer,
                                                   make_client: Callable[..., Redis]) -> None:
    c = make_client(proxy.url, 5)
    k = key()
    proxy.arm("drop", match=b"INCR", times=2)
    await c.set(key("other"), 1)  # no match: untouched
    assert proxy.fired == 0
    assert await c.incr(k) == 3  # two replies lost, third delivered
    assert proxy.fired == 2 and proxy.matched == 3 and not proxy.armed
    assert await c.incr(k) == 4

    proxy.arm("drop", match=b"INCR", times=5)
    proxy.disarm()
    assert await c.incr(k) == 5 and proxy.fired == 2


HOLD = 60.0
"""A stall far longer than the client's TIMEOUT: a call that ends before it was ended by
its own timeout, however slow the machine."""


async def test_stall_holds_the_reply_past_the_timeout(proxy: FaultProxy, redis_server: StandaloneServer,
                                                      make_client: Callable[..., Redis]) -> None:
    k = key()
    proxy.arm("stall", match=b"INCR", hold=HOLD)
    start = time.monotonic()
    with pytest.raises(RedisTimeoutError):
        await make_client(proxy.url, 0).incr(k)
    assert time.monotonic() - start < HOLD  # the client's timeout, not the hold
    assert proxy.fired == 1
    assert server_value(redis_server.port, k) == b"1"

    k2 = key()
    proxy.arm("stall", match=b"INCR", hold=HOLD)
    start = time.monotonic()
    assert await make_client(proxy.url, 3).incr(k2) == 2  # timed out, retried, ran twice
    assert time.monotonic() - start < HOLD


async def test_stall_until_the_client_gives_up(proxy: FaultProxy, make_client: Callable[..., Redis]) -> None:
    proxy.arm("stall", match=b"PING")  # hold=0: until the client closes
    with pytest.raises(RedisTimeoutError):
        await make_client(proxy.url, 0).ping()
    assert proxy.fired == 1


def _resp(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def _send_and_read_to_eof(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        return got


def test_cut_relays_part_of_the_reply(proxy: FaultProxy, redis_server: StandaloneServer) -> None:
    k = key().encode()
    value = b"v" * 100
    with admin(redis_server.port) as r:
        r.set(k, value)
    full = b"$100\r\n" + value + b"\r\n"
    proxy.arm("cut", match=b"GET")
    got = _send_and_read_to_eof(proxy.port, _resp(b"GET", k))
    assert got == full[: len(full) // 2]
    assert proxy.fired == 1

    proxy.arm("cut", match=b"INCR")
    assert _send_and_read_to_eof(proxy.port, _resp(b"INCR", key().encode())) == b":1"


async def test_cut_is_a_connection_error_for_redis_py(proxy: FaultProxy, redis_server: StandaloneServer,
                                                      make_client: Callable[..., Redis]) -> None:
    k = key()
    proxy.arm("cut", match=b"INCR")
    with pytest.raises(RedisConnectionError):
        await make_client(proxy.url, 0).incr(k)
    assert server_value(redis_server.port, k) == b"1"
    proxy.arm("cut", match=b"INCR")
    assert await make_client(proxy.url, 3).incr(k) == 3


async def test_drop_request_never_reaches_the_server(proxy: FaultProxy, redis_server: StandaloneServer,
                                                     make_client: Callable[..., Redis]) -> None:
    k = key()
    proxy.arm("drop_request", match=b"INCR")
    with pytest.raises(RedisConnectionError):
        await make_client(proxy.url, 0).incr(k)
    assert server_value(redis_server.port, k) is None
    proxy.arm("drop_request", match=b"INCR")
    assert await make_client(proxy.url, 3).incr(k) == 1
    assert proxy.fired == 2


async def test_delay_delivers_late(proxy: FaultProxy, make_client: Callable[..., Redis]) -> None:
    c = Redis.from_url(proxy.url, socket_timeout=2)
    try:
        proxy.arm("delay", match=b"INCR", hold=0.3)
        start = time.monotonic()
        assert await c.incr(key()) == 1
        assert time.monotonic() - start >= 0.3
    finally:
        await c.aclose()


async def test_evalsha_is_the_default_match(proxy: FaultProxy, redis_server: StandaloneServer,
                                            make_client: Callable[..., Redis]) -> None:
    c = make_client(proxy.url, 3)
    script = c.register_script("return redis.call('INCR', KEYS[1])")
    k = key()
    await script(keys=[k])  # loads the script (EVALSHA -> NOSCRIPT -> EVAL, or SCRIPT LOAD)
    proxy.arm("drop")
    assert await script(keys=[k]) == 3
    assert proxy.fired == 1


async def test_pause_blackholes_until_resume(proxy: FaultProxy, make_client: Callable[..., Redis]) -> None:
    c = make_client(proxy.url, 0)
    assert await c.ping()
    proxy.pause()
    try:
        with pytest.raises(RedisTimeoutError):
            await c.ping()
    finally:
        proxy.resume()
    assert await make_client(proxy.url, 0).ping()


async def test_kill_connections_resets_idle_clients(proxy: FaultProxy, make_client: Callable[..., Redis]) -> None:
    c = make_client(proxy.url, 0)
    assert await c.ping()
    assert proxy.kill_connections() == 1
    await asyncio.sleep(0.05)
    accepted = proxy.accepted
    # redis-py 8.1 reports the reset on the next command; older versions notice the
    # dead idle connection in the pool and quietly reconnect. Either way the old
    # connection is gone and the client ends up on a new one.
    try:
        await c.ping()
    except RedisConnectionError:
        pass
    assert await c.ping()  # reconnects
    assert proxy.accepted == accepted + 1


async def test_close_with_open_and_stalled_connections(redis_server: StandaloneServer) -> None:
    p = FaultProxy("127.0.0.1", redis_server.port).start()
    idle = Redis.from_url(p.url)
    stalled = Redis.from_url(p.url, socket_timeout=HOLD, retry=retrying(0))
    try:
        assert await idle.ping()
        p.arm("stall", match=b"INCR")  # hold=0: until the connection ends, which only close() does here
        call = asyncio.ensure_future(stalled.incr(key()))
        await p.until_fired()
        p.close()  # raises if its shutdown has not ended the stall within 10 s
        with pytest.raises(RedisConnectionError):  # the close ended it, long before the client's timeout
            await call
        p.close()  # twice is fine
    finally:
        await idle.aclose()
        await stalled.aclose()


def test_arm_checks_its_arguments() -> None:
    p = FaultProxy("127.0.0.1", 1)
    with pytest.raises(ValueError):
        p.arm("explode")
    with pytest.raises(ValueError):
        p.arm("drop", times=0)
    with pytest.raises(ValueError):
        p.arm("delay")


# -- servers -------------------------------------------------------------------


async def test_freeze_times_out_and_the_command_runs_after_thaw(
        redis_server: StandaloneServer, freezer: Freezer, make_client: Callable[..., Redis]) -> None:
    c = make_client(redis_server.url, 0)
    k = key()
    assert await c.ping()
    freezer.freeze(redis_server)
    with pytest.raises(RedisTimeoutError):
        await c.incr(k)
    freezer.thaw(redis_server)
    # the INCR sat in the server's socket buffer: it runs once the server wakes up
    deadline = time.monotonic() + 30
    while server_value(redis_server.port, k) != b"1":
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    assert await c.ping()


def test_frozen_thaws_even_when_the_block_fails(redis_server: StandaloneServer) -> None:
    with pytest.raises(RuntimeError):
        with frozen(redis_server):
            raise RuntimeError("test failed")
    with admin(redis_server.port) as r:
        assert r.ping()


async def test_maxmemory_noeviction_refuses_writes(fault_servers: Callable[..., FaultServer]) -> None:
    srv = fault_servers("--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
    c = Redis.from_url(srv.url)
    try:
        with pytest.raises(OutOfMemoryError):
            for i in range(200):
                await c.set(f"big:{i}", b"x" * 100_000)
        assert await c.get("big:0") is not None  # nothing evicted
    finally:
        await c.aclose()


async def test_maxmemory_allkeys_lru_evicts(fault_servers: Callable[..., FaultServer]) -> None:
    srv = fault_servers("--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru")
    c = Redis.from_url(srv.url)
    try:
        for i in range(100):
            await c.set(f"big:{i}", b"x" * 100_000)
        assert (await c.info("stats"))["evicted_keys"] > 0
        assert await c.dbsize() < 100
    finally:
        await c.aclose()


async def test_acl_users_and_passwords(fault_servers: Callable[..., FaultServer]) -> None:
    srv = fault_servers()
    srv.acl_user("other", "pw", "~other:*", "+@all")
    srv.acl_user("noeval", "pw", "~*", "+@all", "-evalsha")
    other = Redis.from_url(srv.url_for("other", "pw"))
    noeval = Redis.from_url(srv.url_for("noeval", "pw"))
    wrong = Redis.from_url(srv.url_for("other", "nope"))
    try:
        assert await other.set("other:1", 1)
        with pytest.raises(NoPermissionError):
            await other.set("mine:1", 1)
        assert await noeval.set("mine:1", 1)
        with pytest.raises(NoPermissionError):
            await noeval.evalsha("0" * 40, 0)
        with pytest.raises(AuthenticationError, match="invalid username-password pair"):  # WRONGPASS
            await wrong.ping()
    finally:
        for c in (other, noeval, wrong):
            await c.aclose()

    srv.require_password("secret")
    anon2 = Redis.from_url(srv.url, protocol=2)  # a command without AUTH: NOAUTH
    anon3 = Redis.from_url(srv.url)  # redis-py 8 says HELLO 3 first, which fails instead
    authed = Redis.from_url(srv.url_for(None, "secret"))
    try:
        with pytest.raises(AuthenticationError, match="Authentication required"):
            await anon2.ping()
        # redis-py 8 says HELLO 3 first, which fails; older versions speak RESP2 and get NOAUTH.
        with pytest.raises(AuthenticationError, match="HELLO must be called with the client already authenticated|Authentication required"):
            await anon3.ping()
        assert await authed.ping()
    finally:
        for c in (anon2, anon3, authed):
            await c.aclose()


async def test_restart_loses_data_and_scripts(fault_servers: Callable[..., FaultServer]) -> None:
    srv = fault_servers()
    port, pid = srv.port, srv.pid
    c = Redis.from_url(srv.url, retry=retrying(3), socket_timeout=1)
    try:
        sha = await c.script_load("return 1")
        await c.set("k", 1)
        srv.restart()
        assert srv.port == port and srv.pid != pid
        assert await c.get("k") is None  # redis-py reconnects
        with pytest.raises(NoScriptError):
            await c.evalsha(sha, 0)
        srv.stop()
        with pytest.raises(RedisConnectionError):
            await c.ping()
        srv.restart()
        assert await c.ping()
    finally:
        await c.aclose()


def test_fault_server_freeze_and_close_while_frozen() -> None:
    srv = FaultServer()
    srv.freeze()
    proc = srv.process.proc
    srv.close()  # thaws first: a stopped process would sit on its SIGTERM until killed
    assert proc is not None and proc.returncode == 0  # it shut down on SIGTERM, not SIGKILL after 5 s


# -- cluster ---------------------------------------------------------------------


def tagged(n: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [f"{{fi{tag}}}:{i}" for i in range(n)]


def ours(found: list[bytes], keys: list[str]) -> list[bytes]:
    """The keys of this test among a slot's keys: other tests' keys can hash to the same slot
    (a CI run on Valkey met two locators there), and the migration helpers move them too."""
    tag = keys[0].split(":")[0].encode()
    return sorted(k for k in found if k.startswith(tag))


def test_key_slot_matches_the_server(redis_cluster: ClusterServer) -> None:
    with admin(redis_cluster.nodes[0].port) as r:
        for k in ["a", "{x}y", "fi:1", "{fi}:2"]:
            assert key_slot(k) == r.execute_command("CLUSTER", "KEYSLOT", k)


async def test_live_migration_ask_and_tryagain(redis_cluster: ClusterServer) -> None:
    a, b, c_ = tagged(3)
    slot = key_slot(a)
    rc = RedisCluster(host="127.0.0.1", port=redis_cluster.ports[0])
    try:
        await rc.set(a, "A")
        await rc.set(b, "B")
        src = slot_owner(redis_cluster, slot)
        with start_slot_migration(redis_cluster, slot, [a]) as m:
            assert m.src is src and m.dst is not src
            assert keys_in_slot(m.dst, slot) == [a.encode()]
            # the source redirects a moved key with ASK, and refuses a split multi-key command
            with admin(src.port) as r:
                with pytest.raises(AskError) as ask:
                    r.get(a)
                assert ask.value.node_addr == ("127.0.0.1", m.dst.port)
                assert r.get(b) == b"B"
                with pytest.raises(TryAgainError):
                    r.mget(a, b)
            # redis-py follows ASK for single keys, both for reads and for new keys
            assert await rc.get(a) == b"A"
            assert await rc.get(b) == b"B"
            assert await rc.set(c_, "C")
            assert c_.encode() in keys_in_slot(m.dst, slot)
            # and retries TRYAGAIN for the split multi-key command until its TTL runs out
            with pytest.raises(ClusterError, match="TTL exhausted"):
                await rc.mget(a, b)
            m.finish()
            assert slot_owner(redis_cluster, slot) is m.dst
            assert await rc.mget(a, b, c_) == [b"A", b"B", b"C"]  # MOVED followed
        assert slot_owner(redis_cluster, slot) is src
        assert ours(keys_in_slot(src, slot), [a]) == sorted(k.encode() for k in (a, b, c_))
        assert await rc.mget(a, b, c_) == [b"A", b"B", b"C"]
    finally:
        await rc.delete(a, b, c_)
        await rc.aclose()


def test_open_migration_moves_back_with_its_keys(redis_cluster: ClusterServer) -> None:
    keys = tagged(4)
    slot = key_slot(keys[0])
    src = slot_owner(redis_cluster, slot)
    with admin(src.port) as r:
        for k in keys:
            r.set(k, k)
    m = start_slot_migration(redis_cluster, slot, keys[:2])
    m.migrate([keys[2]])
    assert ours(keys_in_slot(m.dst, slot), keys) == sorted(k.encode() for k in keys[:3])
    m.move_back()
    assert slot_owner(redis_cluster, slot) is src
    assert ours(keys_in_slot(src, slot), keys) == sorted(k.encode() for k in keys)
    with admin(src.port) as r:
        assert r.delete(*keys) == 4
        with pytest.raises(ValueError):
            start_slot_migration(redis_cluster, slot, ["not-in-this-slot" + uuid.uuid4().hex])
        assert slot_owner(redis_cluster, slot) is src


async def test_cluster_through_proxies(redis_cluster: ClusterServer) -> None:
    with ClusterProxies(redis_cluster) as cp:
        rc = cp.client(retry=retrying(3), socket_timeout=TIMEOUT)
        try:
            await rc.initialize()
            proxy_ports = {p.port for p in cp.proxies}
            assert {n.port for n in rc.get_nodes()} == proxy_ports
            ks = [key(str(i)) for i in range(30)]
            for k in ks:
                await rc.set(k, k)
            assert all(p.count(b"SET") > 0 for p in cp.proxies)
            # a lost reply on the owner's proxy: retried, applied twice
            k = ks[0]
            cp.for_key(k).arm("drop", match=b"INCRBY")
            await rc.set(k, 0)
            assert await rc.incrby(k, 1) == 2
            assert cp.fired == 1
            await rc.delete(*ks)
        finally:
            await rc.aclose()


async def test_ask_redirects_stay_behind_the_proxies(redis_cluster: ClusterServer) -> None:
    a, b = tagged(2)
    slot = key_slot(a)
    with ClusterProxies(redis_cluster) as cp:
        rc = cp.client()
        try:
            await rc.set(a, "A")
            await rc.set(b, "B")
            with start_slot_migration(redis_cluster, slot, [a]) as m:
                assert await rc.get(a) == b"A"
                assert cp.proxy(m.dst).count(b"ASKING") >= 1
                assert {n.port for n in rc.get_nodes()} == {p.port for p in cp.proxies}
                m.finish()
                assert await rc.get(b) == b"B"  # MOVED, rewritten to the dst proxy
                assert {n.port for n in rc.get_nodes()} == {p.port for p in cp.proxies}
            assert await rc.mget(a, b) == [b"A", b"B"]
            await rc.delete(a, b)
        finally:
            await rc.aclose()
