"""Helpers to build stores and records for the response-chain tests."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from redis_sessions import (
    RedisResponseSessionStore,
    StoredResponseRequestSnapshot,
    StoredResponseSession,
    StoredResponseSnapshot,
    SyncResponseSessionStore,
)
from redis_sessions.responses import RedisResponseSessionStore as ChainStore


def make_store(backend: Any, **options: Any) -> ChainStore:
    """A store on ``backend``'s server and prefix. Records are stored uncompressed unless
    ``compression=True`` is passed: the chain tests size their records (a payload of "x"
    would compress to nothing); tests/test_compression.py runs the chains compressed.
    On a backend of the ``sync`` API (tests/conftest.py: the modules that run both), the
    SyncResponseSessionStore on a sync client of the same server, behind async methods."""
    options.setdefault("compression", False)
    if getattr(backend, "api", "async") == "sync":
        sync = SyncResponseSessionStore(backend.sync_client(), key_prefix=backend.prefix, **options)
        return SyncAdapter(sync)  # type: ignore[return-value]
    return RedisResponseSessionStore(backend.client, key_prefix=backend.prefix, **options)


class SyncAdapter:
    """A SyncResponseSessionStore behind ``async def`` methods that call its sync ones, so
    the async behaviour suites run on it unchanged. Attributes the tests reach for
    (``keys``, ``edge``, ``round_trips``, ...) are the core store's."""

    def __init__(self, sync: SyncResponseSessionStore) -> None:
        object.__setattr__(self, "sync", sync)

    async def new_response_id(self, *args: Any, **kwargs: Any) -> Any:
        return self.sync.new_response_id(*args, **kwargs)

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        return self.sync.get(*args, **kwargs)

    async def resolve_chain(self, *args: Any, **kwargs: Any) -> Any:
        return self.sync.resolve_chain(*args, **kwargs)

    async def save(self, *args: Any, **kwargs: Any) -> Any:
        return self.sync.save(*args, **kwargs)

    async def delete(self, *args: Any, **kwargs: Any) -> Any:
        return self.sync.delete(*args, **kwargs)

    async def delete_thread(self, *args: Any, **kwargs: Any) -> Any:
        return self.sync.delete_thread(*args, **kwargs)

    async def close(self) -> None:
        self.sync.close()

    async def __aenter__(self) -> "SyncAdapter":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.sync.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sync.core, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.sync.core, name, value)


def record(
    response_id: str,
    parent: str | None = None,
    text: str = "hello",
    *,
    status: str = "completed",
    instructions: str | None = None,
    input_items: list[dict[str, Any]] | None = None,
    payload: str = "",
) -> StoredResponseSession:
    return StoredResponseSession(
        id=response_id,
        previous_response_id=parent,
        created_at=1_700_000_000,
        status=status,
        request=StoredResponseRequestSnapshot(
            input=input_items if input_items is not None else text, instructions=instructions, model="test-model"
        ),
        response=StoredResponseSnapshot(
            id=response_id,
            output=[{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"re: {text}{payload}"}]}],
            output_text=f"re: {text}",
        ),
    )


def stored(value: Any) -> bytes:
    """A record as data format 1 stores it (redis_sessions/codec.py), from its msgpack or
    its dict: without its ids (its field's name holds them), behind the marker."""
    import msgspec

    from redis_sessions.codec import ID_LEFT_OUT, RESPONSE_ID_LEFT_OUT, pack

    fields = msgspec.msgpack.decode(value) if isinstance(value, bytes) else dict(value)
    response = dict(fields["response"])
    flags = ID_LEFT_OUT
    if response.get("id") == fields.get("id"):
        response["id"], flags = "", flags | RESPONSE_ID_LEFT_OUT
    return pack(msgspec.msgpack.encode({**fields, "id": "", "response": response}), flags, compress=False)


def thread_tag(response_id: str) -> str:
    """The thread a response starts or lives in when it is a root: the tag of an id
    minted here, else the one a foreign root's thread is derived from."""
    from redis_sessions.ids import thread_of
    from redis_sessions.responses.store import foreign_root_thread

    return thread_of(response_id) or foreign_root_thread(response_id)


async def linear(store: ChainStore, n: int, payload: str = "", prefix: str = "ext", *,
                 payloads: list[str] | None = None, first_parent: str | None = None) -> list[str]:
    """``n`` responses ``<prefix>-<i>`` (ids minted elsewhere), each the child of the one
    before (the first under ``first_parent``), "turn <i>" with ``payloads[i]`` or ``payload``."""
    ids: list[str] = []
    parent = first_parent
    for i in range(n):
        rid = f"{prefix}-{i}"
        await store.save(record(rid, parent, f"turn {i}", payload=payloads[i] if payloads is not None else payload))
        ids.append(rid)
        parent = rid
    return ids


async def gateway_turns(store: ChainStore, n: int, parent: str | None = None, payload: str = "") -> list[str]:
    """``n`` gateway turns after ``parent``: each resolves the chain it continues, then
    saves the next response under it (ids minted by the store), as a gateway's worker does."""
    ids: list[str] = []
    for i in range(n):
        if parent is not None:
            await store.resolve_chain(parent)
        rid = await store.new_response_id(parent)
        await store.save(record(rid, parent, f"turn {i}", payload=payload))
        ids.append(rid)
        parent = rid
    return ids


async def build_chain(store: ChainStore, depth: int, *, first_parent: str | None = None) -> list[str]:
    """Save a linear chain of ``depth`` minted responses; return their ids oldest first."""
    ids: list[str] = []
    parent = first_parent
    for i in range(depth):
        rid = await store.new_response_id(parent)
        await store.save(record(rid, parent, f"turn {i}"))
        ids.append(rid)
        parent = rid
    return ids


async def all_keys(backend: Any, store: ChainStore, *, deadlines: bool = False) -> dict[Any, Any]:
    """Every key of this test's prefix with its value, to prove a refusal wrote nothing;
    with ``deadlines``, each value comes with the key's expiry as an absolute ms time
    (None: no expiry), so a refreshed TTL counts as a write too."""
    client = backend.client
    out: dict[bytes, Any] = {}
    kwargs: dict[str, Any] = {"match": f"{backend.prefix}:*"}
    if backend.name == "cluster":
        kwargs["target_nodes"] = client.PRIMARIES
    async for key in client.scan_iter(**kwargs):
        kind = await client.type(key)
        if kind == b"hash":
            value: Any = await client.hgetall(key)
        elif kind == b"string":
            value = await client.get(key)
        elif kind == b"list":
            value = await client.lrange(key, 0, -1)
        else:
            value = kind
        if deadlines:
            at = await client.pexpiretime(key)
            value = (value, None if at < 0 else at)
        out[key] = value
    return out


async def plant(backend: Any, store: ChainStore, thread: str, records: dict[str, tuple[str, bytes | None]]) -> None:
    """Write ``{id: (parent, record bytes)}`` into ``thread`` behind the store's back
    (None keeps the stored bytes and changes only the parent pointer): for data the
    store itself would refuse to write (a loop of parents). A thread that does not exist
    is created without a TTL, with the header of data format 1 (lua/chain_lib.lua): the
    largest record planted, no books."""
    fields: dict[str, Any] = {}
    for rid, (parent, blob) in records.items():
        fields["p:" + rid] = parent
        if blob is not None:
            fields["d:" + rid] = blob
    key = store.keys.thread(thread)
    largest = max((len(blob) for _, blob in records.values() if blob is not None), default=0)
    await backend.client.hsetnx(key, "h", f"1 {largest} 0 0 0")
    head = (await backend.client.hget(key, "h")).split()
    if int(head[1]) < largest:
        await backend.client.hset(key, "h", b" ".join([head[0], str(largest).encode(), *head[2:]]))
    await backend.client.hset(key, mapping=fields)


async def readable(store: ChainStore, ids: list[str]) -> dict[str, Any]:
    """What a reader sees of ``ids``: each record, or None."""
    return {rid: await store.get(rid) for rid in ids}


class Resending:
    """An edge whose chosen scripts run twice, as when redis-py re-sends a script whose
    reply was lost: the first copy runs, ``between`` runs (someone else's calls, or a
    change behind the store's back), then the copy with the same arguments runs and its
    answer is the one returned. With ``probe`` (a coroutine returning the state),
    ``changed[name]`` records, per call, whether the second copy changed anything.
    Everything else passes through."""

    def __init__(self, edge: Any, calls: set[str], between: Any = None, probe: Any = None) -> None:
        self.edge = edge
        self.calls = calls
        self.between = between
        self.probe = probe
        self.first: dict[str, list[Any]] = {}
        self.changed: dict[str, list[bool]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.edge, name)

    async def run(self, lua: Any, keys: Any, args: Any, **options: Any) -> Any:
        return await self._twice(lua.name, lambda: self.edge.run(lua, keys, args, **options))

    async def command(self, *command: Any, **options: Any) -> Any:
        return await self._twice(command[0], lambda: self.edge.command(*command, **options))

    async def _twice(self, name: str, call: Any) -> Any:
        if name not in self.calls:
            return await call()
        try:
            self.first.setdefault(name, []).append(await call())
        except Exception as exc:
            self.first.setdefault(name, []).append(exc)
        if self.between is not None:
            await self.between(name)
        before = await self.probe() if self.probe else None
        answer = await call()
        if self.probe:
            self.changed.setdefault(name, []).append(await self.probe() != before)
        return answer


def resending(store: ChainStore, calls: set[str], between: Any = None, probe: Any = None) -> Resending:
    """Make ``store`` re-send the scripts named ``calls`` (``chain_save``, ``chain_delete``...)
    and the plain commands (``SET``, ``DEL``...); returns the wrapper (its ``first`` answers)."""
    wrapper = Resending(store.edge, calls, between, probe)
    store.edge = wrapper  # type: ignore[assignment]
    return wrapper


def save_in_process(url: str, prefix: str, response_id: str, parent: str | None, index: int, barrier: Any) -> str:
    """Run in a separate process: wait for the others, then save; report the outcome."""
    import asyncio

    from redis_sessions import ErrorCode, RedisResponseSessionStore, SessionError

    async def run() -> str:
        store = RedisResponseSessionStore.from_url(url, key_prefix=prefix)
        try:
            await store.get(response_id)  # connect (and learn the cluster) before the race
            barrier.wait()
            await store.save(record(response_id, parent, text=f"writer {index}"))
            return "won"
        except SessionError as exc:
            return "conflict" if exc.code is ErrorCode.STORE_CONFLICT else exc.code.value
        finally:
            await store.close()

    return asyncio.run(run())


def nodes_of(backend: Any) -> list[Redis]:
    """A client of each server node of a real backend (the cluster's masters, or the one
    server), to read its own counters; the caller closes them."""
    ports = backend.server.ports if backend.name == "cluster" else [backend.server.port]
    return [Redis(port=port) for port in ports]


async def calls_of(nodes: list[Redis], *names: str) -> int:
    """How many times the servers (redis-py clients of each node) ran these commands, a
    script's own included (commandstats counts those under their own names too)."""
    total = 0
    for node in nodes:
        stats = await node.info("commandstats")
        total += sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in names)
    return total
