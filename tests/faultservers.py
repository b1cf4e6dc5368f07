"""Servers to inject faults into: frozen (SIGSTOP) servers, fresh servers with
extra arguments (maxmemory, ACL users, passwords), restarts, a live slot
migration on the test cluster, and FaultProxies in front of every cluster node.

Everything here works on servers the tests started (tests/servers.py); none of
it ever touches another server. Admin steps use a short-lived synchronous
redis-py client; they block the caller's event loop for a few milliseconds,
which is fine in a test.

Fixtures (import them into a test module to use them)::

    from faultservers import fault_proxies, fault_servers, freezer  # noqa: F401

``fault_servers(*extra_args)`` makes a FaultServer closed at teardown,
``fault_proxies(host, port)`` a started FaultProxy closed at teardown, and
``freezer.freeze(server)`` a SIGSTOP undone at teardown even if the test failed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence, Union

import pytest
import redis
from redis.crc import key_slot as _key_slot

from faultproxy import FaultProxy
from servers import ClusterServer, RedisProcess, StandaloneServer, free_port

HOST = "127.0.0.1"

# -- SIGSTOP / SIGCONT ---------------------------------------------------------

Freezable = Union[RedisProcess, StandaloneServer]


def _process(target: Freezable) -> RedisProcess:
    return target.process if isinstance(target, StandaloneServer) else target


def pid_of(target: Freezable) -> int:
    proc = _process(target).proc
    if proc is None or proc.poll() is not None:
        raise RuntimeError("the redis-server is not running")
    return proc.pid


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def freeze(target: Freezable) -> None:
    """SIGSTOP the server and wait until it is stopped. Its listening socket and
    open connections stay up (the kernel still accepts and buffers), nothing is
    answered. Pair with thaw(), or use frozen()/the freezer fixture."""
    pid = pid_of(target)
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 30  # a loaded machine may take a while; going on unfrozen would mislead
    while os.path.exists(f"/proc/{pid}") and _state(pid) not in ("T", "t"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"redis-server {pid} did not stop on SIGSTOP")
        time.sleep(0.001)


def thaw(target: Freezable) -> None:
    """SIGCONT; harmless on a running server or one already stopped for good."""
    proc = _process(target).proc
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)


@contextlib.contextmanager
def frozen(target: Freezable) -> Iterator[None]:
    """``with frozen(server): ...``: SIGSTOPped inside the block, always thawed after."""
    freeze(target)
    try:
        yield
    finally:
        thaw(target)


class Freezer:
    """Freezes servers and thaws every one of them at close() (the fixture's teardown)."""

    def __init__(self) -> None:
        self._frozen: list[Freezable] = []

    def freeze(self, target: Freezable) -> None:
        self._frozen.append(target)
        freeze(target)

    def thaw(self, target: Freezable) -> None:
        thaw(target)

    def close(self) -> None:
        for target in self._frozen:
            thaw(target)
        self._frozen.clear()


# -- admin client -------------------------------------------------------------


def admin(port: int, *, username: Optional[str] = None, password: Optional[str] = None) -> redis.Redis:
    """A sync client for admin steps; use it as ``with admin(port) as r:``."""
    return redis.Redis(host=HOST, port=port, username=username, password=password,
                       socket_timeout=10, socket_connect_timeout=5, protocol=2)


# -- standalone servers with extras ---------------------------------------------


class FaultServer(StandaloneServer):
    """A fresh redis-server of its own, started with extra arguments::

        FaultServer("--maxmemory", "4mb", "--maxmemory-policy", "noeviction")

    Adds freeze()/thaw()/restart()/pid, ACL users and a password for the
    default user. restart() keeps the port and loses the data, the script cache
    and anything set at run time (ACL users, passwords): there is no persistence.
    """

    def __init__(self, *extra: str, attempts: int = 3) -> None:  # noqa: D107 - replaces the base __init__
        self.dir = tempfile.mkdtemp(prefix="rs-fault-")
        self.extra = list(extra)
        self.password: Optional[str] = None
        last: Optional[Exception] = None
        for _ in range(attempts):  # the free port may be taken before redis binds it
            self.process = RedisProcess(free_port(), self.dir, list(extra))
            try:
                self.process.start()
                return
            except RuntimeError as e:
                last = e
        shutil.rmtree(self.dir, ignore_errors=True)
        raise RuntimeError(f"redis-server {' '.join(extra)} did not start: {last}")

    @property
    def pid(self) -> int:
        return pid_of(self)

    def freeze(self) -> None:
        freeze(self)

    def thaw(self) -> None:
        thaw(self)

    def restart(self) -> None:
        """Stop and start again on the same port, empty (data and script cache gone)."""
        thaw(self)
        self.process.restart()
        self.password = None

    def stop(self) -> None:
        """Stop the server (it stays down until restart())."""
        thaw(self)
        self.process.stop()

    def admin(self) -> redis.Redis:
        return admin(self.port, username="default" if self.password else None, password=self.password)

    def acl_user(self, name: str, password: str, *rules: str) -> None:
        """``ACL SETUSER name reset on >password *rules``, e.g.
        ``acl_user("app", "pw", "~other:*", "+@all")`` (NOPERM on other keys) or
        ``acl_user("app", "pw", "~*", "+@all", "-evalsha")`` (NOPERM on EVALSHA)."""
        with self.admin() as r:
            r.execute_command("ACL", "SETUSER", name, "reset", "on", f">{password}", *rules)

    def require_password(self, password: str) -> None:
        """Give the default user a password: clients without one get NOAUTH,
        with a wrong one WRONGPASS. Later admin steps here use it."""
        with self.admin() as r:
            r.execute_command("CONFIG", "SET", "requirepass", password)
        self.password = password

    def url_for(self, username: Optional[str] = None, password: Optional[str] = None) -> str:
        auth = ""
        if password is not None:
            auth = f"{username or ''}:{password}@"
        return f"redis://{auth}{HOST}:{self.port}/0"

    def close(self) -> None:
        thaw(self)
        super().close()

    def __enter__(self) -> "FaultServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- cluster: slots and a live migration --------------------------------------


def key_slot(key: Union[str, bytes]) -> int:
    """The cluster hash slot of a key (hash tags honoured), as CLUSTER KEYSLOT says."""
    return int(_key_slot(key.encode() if isinstance(key, str) else key))


def node_id(node: RedisProcess) -> str:
    with admin(node.port) as r:
        raw = r.execute_command("CLUSTER", "MYID")
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def slot_owner(cluster: ClusterServer, slot: int) -> RedisProcess:
    """The master serving ``slot`` now, according to the first node's CLUSTER SLOTS."""
    with admin(cluster.nodes[0].port) as r:
        ranges = r.execute_command("CLUSTER", "SLOTS")
    # redis-py may parse CLUSTER SLOTS into {(start, end): {...}}; handle both shapes
    if isinstance(ranges, dict):
        for (start, end), info in ranges.items():
            if int(start) <= slot <= int(end):
                return _node_by_port(cluster, int(info["primary"][1]))
    else:
        for entry in ranges:
            if int(entry[0]) <= slot <= int(entry[1]):
                return _node_by_port(cluster, int(entry[2][1]))
    raise RuntimeError(f"slot {slot} is not served")


def _node_by_port(cluster: ClusterServer, port: int) -> RedisProcess:
    for node in cluster.nodes:
        if node.port == port:
            return node
    raise RuntimeError(f"no test cluster node on port {port}")


def keys_in_slot(node: RedisProcess, slot: int, count: int = 1000) -> list[bytes]:
    with admin(node.port) as r:
        return list(r.execute_command("CLUSTER", "GETKEYSINSLOT", slot, count))


def _as_bytes(key: Union[str, bytes]) -> bytes:
    return key.encode() if isinstance(key, str) else key


def migrate_keys(src: RedisProcess, dst: RedisProcess, keys: Sequence[Union[str, bytes]]) -> None:
    """``MIGRATE host port "" 0 5000 KEYS k...`` from src to dst (missing keys are skipped)."""
    if not keys:
        return
    with admin(src.port) as r:
        r.execute_command("MIGRATE", HOST, dst.port, "", 0, 5000, "KEYS", *keys)


@dataclass
class SlotMigration:
    """One slot moving from ``src`` to ``dst``: ``state`` is "open" (IMPORTING on
    dst, MIGRATING on src, the keys split), "finished" (dst owns it) or
    "restored" (src owns it again, nothing open)."""

    cluster: ClusterServer
    slot: int
    src: RedisProcess
    dst: RedisProcess
    src_id: str
    dst_id: str
    moved: list[bytes] = field(default_factory=list)
    state: str = "open"

    def migrate(self, keys: Iterable[Union[str, bytes]]) -> None:
        """Move more of the slot's keys to dst while it stays open."""
        self._require("open")
        key_list = [_as_bytes(k) for k in keys]
        _check_slot(key_list, self.slot)
        migrate_keys(self.src, self.dst, key_list)
        self.moved.extend(key_list)

    def finish(self) -> None:
        """Move the remaining keys, then ``CLUSTER SETSLOT <slot> NODE <dst-id>`` on
        dst, src and every other master: dst owns the slot."""
        self._require("open")
        while True:
            rest = keys_in_slot(self.src, self.slot, 500)
            if not rest:
                break
            migrate_keys(self.src, self.dst, rest)
            self.moved.extend(rest)
        for node in self._masters_in_order(self.dst, self.src):
            with admin(node.port) as r:
                r.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", self.dst_id)
        self.state = "finished"

    def move_back(self) -> None:
        """Undo: src owns the slot again with all its keys and nothing is open,
        whether the migration is still open or finished."""
        if self.state == "restored":
            return
        if self.state == "open":
            # src stops migrating first, or it would answer the keys' RESTORE with ASK
            with admin(self.src.port) as r:
                r.execute_command("CLUSTER", "SETSLOT", self.slot, "STABLE")
            while True:
                back = keys_in_slot(self.dst, self.slot, 500)
                if not back:
                    break
                migrate_keys(self.dst, self.src, back)
            with admin(self.dst.port) as r:
                r.execute_command("CLUSTER", "SETSLOT", self.slot, "STABLE")
        else:
            reverse = start_slot_migration(self.cluster, self.slot, dst=self.src)
            reverse.finish()
        self.state = "restored"

    def _masters_in_order(self, first: RedisProcess, second: RedisProcess) -> list[RedisProcess]:
        return [first, second] + [n for n in self.cluster.nodes if n is not first and n is not second]

    def _require(self, state: str) -> None:
        if self.state != state:
            raise RuntimeError(f"slot {self.slot} migration is {self.state}, not {state}")

    def __enter__(self) -> "SlotMigration":
        return self

    def __exit__(self, *exc: object) -> None:
        self.move_back()


def _check_slot(keys: Sequence[bytes], slot: int) -> None:
    wrong = [k for k in keys if key_slot(k) != slot]
    if wrong:
        raise ValueError(f"keys not in slot {slot}: {wrong!r}")


def start_slot_migration(cluster: ClusterServer, slot: int, keys: Iterable[Union[str, bytes]] = (),
                         *, dst: Optional[RedisProcess] = None) -> SlotMigration:
    """Open a live migration of ``slot`` from its owner to ``dst`` (default: the
    next master) and MIGRATE ``keys`` (all in that slot) over, leaving the rest
    on the owner: single-key commands on moved keys get ASK, multi-key commands
    over moved and unmoved keys get TRYAGAIN. Use it as a context manager (or
    call move_back()) so the slot is always given back::

        with start_slot_migration(cluster, key_slot("{t}a"), ["{t}a"]) as m: ...
    """
    src = slot_owner(cluster, slot)
    if dst is None:
        dst = cluster.nodes[(cluster.nodes.index(src) + 1) % len(cluster.nodes)]
    if dst is src:
        raise ValueError("dst already owns the slot")
    key_list = [_as_bytes(k) for k in keys]
    _check_slot(key_list, slot)
    m = SlotMigration(cluster, slot, src, dst, node_id(src), node_id(dst))
    with admin(dst.port) as r:
        r.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", m.src_id)
    try:
        with admin(src.port) as r:
            r.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", m.dst_id)
        m.migrate(key_list)
    except BaseException:
        m.move_back()
        raise
    return m


def finish_slot_migration(m: SlotMigration) -> None:
    m.finish()


def move_slot_back(m: SlotMigration) -> None:
    m.move_back()


# -- cluster behind proxies -----------------------------------------------------


class ClusterProxies:
    """One FaultProxy per master of the test cluster, and the ``address_remap``
    that makes redis-py's RedisCluster reach every node through its proxy.
    The proxies also rewrite ASK/MOVED redirects to proxy addresses, since
    redis-py does not pass redirects through address_remap::

        with ClusterProxies(cluster) as cp:
            rc = RedisCluster(host=cp.host, port=cp.port, address_remap=cp.remap)
            cp.for_key("{t}k").arm("drop", match=b"INCR")
    """

    def __init__(self, cluster: ClusterServer) -> None:
        self.cluster = cluster
        self.by_port: dict[int, FaultProxy] = {}
        try:
            for node in cluster.nodes:
                self.by_port[node.port] = FaultProxy(HOST, node.port, redirects=self.remap).start()
        except BaseException:
            self.close()
            raise

    def remap(self, address: tuple[str, int]) -> tuple[str, int]:
        """A node's (host, port) -> its proxy's; anything else unchanged."""
        host, port = address
        proxy = self.by_port.get(int(port))
        if proxy is None or host not in (HOST, "localhost"):
            return address
        return proxy.address

    @property
    def host(self) -> str:
        return HOST

    @property
    def port(self) -> int:
        """The first node's proxy port: the startup node for a client."""
        return self.by_port[self.cluster.nodes[0].port].port

    @property
    def proxies(self) -> list[FaultProxy]:
        return list(self.by_port.values())

    def proxy(self, node: Union[RedisProcess, int]) -> FaultProxy:
        return self.by_port[node.port if isinstance(node, RedisProcess) else node]

    def for_key(self, key: Union[str, bytes]) -> FaultProxy:
        """The proxy in front of the master that owns the key's slot now."""
        return self.proxy(slot_owner(self.cluster, key_slot(key)))

    def client(self, **kwargs: Any) -> Any:
        """An asyncio RedisCluster through the proxies (``await rc.aclose()`` after)."""
        from redis.asyncio.cluster import RedisCluster

        return RedisCluster(host=self.host, port=self.port, address_remap=self.remap, **kwargs)

    def disarm(self) -> None:
        for p in self.by_port.values():
            p.disarm()

    @property
    def fired(self) -> int:
        return sum(p.fired for p in self.by_port.values())

    def close(self) -> None:
        for p in self.by_port.values():
            p.close()

    def __enter__(self) -> "ClusterProxies":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- fixtures --------------------------------------------------------------------


@pytest.fixture
def fault_servers() -> Iterator[Callable[..., FaultServer]]:
    """``fault_servers("--maxmemory", "4mb")`` -> a fresh FaultServer, closed at teardown."""
    made: list[FaultServer] = []

    def make(*extra: str) -> FaultServer:
        server = FaultServer(*extra)
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()


@pytest.fixture
def fault_proxies() -> Iterator[Callable[..., FaultProxy]]:
    """``fault_proxies(host, port)`` -> a started FaultProxy, closed at teardown."""
    made: list[FaultProxy] = []

    def make(host: str, port: int, **kwargs: Any) -> FaultProxy:
        proxy = FaultProxy(host, port, **kwargs).start()
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.close()


@pytest.fixture
def freezer() -> Iterator[Freezer]:
    """``freezer.freeze(server)``: SIGSTOP, thawed at teardown even if the test failed."""
    f = Freezer()
    yield f
    f.close()
