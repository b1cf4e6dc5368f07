"""The synchronous response store (issue #31): what only the sync API can show.

Its behaviour is the async store's (tests/test_responses.py and
tests/test_responses_redis.py run over both APIs); here: that every public method
completes on the first ``send`` (no loop), that random operation sequences give the
same results and keys on both, threads sharing one store, a fork, a lost reply, the
sync ``from_url`` and the WSGI example.
"""

from __future__ import annotations

import asyncio
import inspect
import multiprocessing
import subprocess
import sys
import threading
import uuid
from typing import Any

import fakeredis
import pytest
import redis
import redis.cluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chains import record
from faultproxy import FaultProxy
from redis_sessions import (
    ErrorCode,
    RedisResponseSessionStore,
    SessionError,
    SyncResponseSessionStore,
    new_response_id,
)
from redis_sessions.link import SuspendedError, run_blocking
from redis_sessions.client import from_url
from servers import free_port


def test_every_public_method_completes_on_the_first_send():
    """The driver's premise, method by method: the coroutine ends with StopIteration on
    its first ``send(None)`` (nothing ever suspends), for successes and refusals alike."""
    store = SyncResponseSessionStore(fakeredis.FakeRedis(), key_prefix="first", compression=False)
    core = store.core
    root = new_response_id()
    child = new_response_id(root)

    def first_send(call: Any) -> Any:
        assert inspect.iscoroutine(call)
        try:
            call.send(None)
        except StopIteration as done:
            return done.value
        call.close()
        raise AssertionError("suspended")

    first_send(core.save(record(root)))
    first_send(core.save(record(child, root)))
    first_send(core.save(record("ext-a")))
    first_send(core.save(record("ext-b", "ext-a")))  # foreign: the two locator steps "together"
    assert first_send(core.get(child)).id == child
    assert first_send(core.get("ext-b")).id == "ext-b"
    assert len(first_send(core.resolve_chain(child)).sessions) == 2
    assert len(first_send(core.resolve_chain("ext-b")).sessions) == 2
    assert first_send(core.new_response_id(child)).startswith("resp_")
    with pytest.raises(SessionError):
        first_send(core.save(record(child, root, text="other")))  # a conflict, raised on the first send too
    assert first_send(core.delete("ext-b")) is True
    assert first_send(core.delete_thread(root)) == 2
    assert first_send(core.close()) is None
    public = {name for name, _ in inspect.getmembers(SyncResponseSessionStore, inspect.isfunction)
              if not name.startswith("_")}
    assert public == {"new_response_id", "get", "resolve_chain", "save", "delete", "delete_thread", "close"}


def test_importing_the_sync_api_loads_nothing_its_users_do_not_need():
    """A Flask or Celery process importing the sync classes loads nothing of asyncio that
    redis-py's own sync client has not loaded already (redis-py 8 imports asyncio and
    redis.asyncio itself), and neither memory mode's fakeredis nor the SDK or server."""
    code = ("import sys, redis, redis.cluster, redis.sentinel; before = set(sys.modules); "
            "from redis_sessions import SyncResponseSessionStore, SyncRedisSession, SyncConversationStore, "
            "SyncCompactionSession, create_sync_response_session_store; "
            "added = set(sys.modules) - before; "
            "print(sorted(m for m in added if m.split('.')[0] in ('asyncio', 'fakeredis', 'lupa', 'agents', 'openai', "
            "'fastapi', 'starlette', 'uvicorn', 'httpx') or m.startswith('redis.asyncio')))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_a_call_that_suspends_is_closed_and_refused():
    """An asyncio client behind the sync driver (a bug) is an error, never a hidden loop."""
    async def waits() -> None:
        await asyncio.sleep(0)

    with pytest.raises(SuspendedError):
        run_blocking(waits())
    with pytest.raises(SessionError) as err:
        SyncResponseSessionStore(fakeredis.FakeAsyncRedis())  # type: ignore[arg-type]
    assert err.value.code is ErrorCode.INPUT_INVALID
    with pytest.raises(SessionError) as err:
        RedisResponseSessionStore(fakeredis.FakeRedis())  # type: ignore[arg-type]
    assert "SyncResponseSessionStore" in err.value.message


def test_sync_from_url_builds_the_same_clients_with_the_same_options():
    """One URL parser and one set of options for both APIs: the sync client is the
    asyncio one's twin (timeouts from the budget, redis-py's retry, redis_kwargs)."""
    client = from_url("redis://localhost:1/2", timeout=2.0, redis_kwargs={"client_name": "x"}, blocking=True)
    twin = from_url("redis://localhost:1/2", timeout=2.0, redis_kwargs={"client_name": "x"})
    assert isinstance(client, redis.Redis)
    mine, theirs = client.connection_pool.connection_kwargs, twin.connection_pool.connection_kwargs
    for name in ("socket_timeout", "socket_connect_timeout", "client_name", "db"):
        assert mine[name] == theirs[name], name
    assert mine["socket_timeout"] == pytest.approx(0.45)  # 4 tries in 2 s less 0.2 s of backoff sleeps
    assert mine["retry"].get_retries() == theirs["retry"].get_retries()
    client.close()
    # redis-py's sync cluster client reads the slot map as it is built: the store builds
    # it on first use, and an unreachable cluster is unavailable, not a bad URL.
    store = SyncResponseSessionStore.from_url("redis+cluster://127.0.0.1:1", timeout=1.0)
    with pytest.raises(SessionError) as err:
        store.get("ext-x")
    assert err.value.code is ErrorCode.BACKEND_UNAVAILABLE
    master = from_url("redis+sentinel://localhost:1/mymaster/3?sentinel_password=s", timeout=2.0, blocking=True)
    assert isinstance(master, redis.Redis) and master.connection_pool.connection_kwargs["db"] == 3
    master.close()
    tls = from_url("rediss://localhost:1", blocking=True, redis_kwargs={"ssl_cert_reqs": "none"})
    assert issubclass(tls.connection_pool.connection_class, redis.SSLConnection)  # bounded by the budget
    with pytest.raises(SessionError) as err:
        from_url("redis://localhost:1", blocking=True, redis_kwargs={"no_such_option": 1})
    assert err.value.code is ErrorCode.INPUT_INVALID


def test_a_server_that_is_down_is_backend_unavailable_as_on_the_async_store():
    with SyncResponseSessionStore.from_url(f"redis://127.0.0.1:{free_port()}/0", timeout=1.0) as store:
        for call in (lambda: store.get("ext-x"), lambda: store.save(record("ext-x")),
                     lambda: store.resolve_chain("ext-x"), lambda: store.delete("ext-x")):
            with pytest.raises(SessionError) as err:
                call()
            assert err.value.code is ErrorCode.BACKEND_UNAVAILABLE


# -- the same operations on both APIs ------------------------------------------------
OPS = st.lists(st.tuples(st.sampled_from(["save", "save_ext", "get", "resolve", "delete", "delete_thread"]),
                         st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_random_operations_give_the_same_results_and_keys_on_both_apis(ops):
    """Each operation runs on the async store (prefix ``a``) and on the sync one (``s``),
    both on one fakeredis server, with the same ids (minted ones share their random
    tags, so the keys can be compared with the prefix swapped)."""
    server = fakeredis.FakeServer()
    sync = SyncResponseSessionStore(fakeredis.FakeRedis(server=server), key_prefix="s", compression=False)
    plain = fakeredis.FakeRedis(server=server)

    async def run() -> None:
        client = fakeredis.FakeAsyncRedis(server=server)
        store = RedisResponseSessionStore(client, key_prefix="a", compression=False)
        minted: list[str] = []
        for op, i, j in ops:
            if op == "save":
                parent = minted[j % len(minted)] if minted and j % 2 else None
                rid = new_response_id(parent)
                minted.append(rid)
                args: tuple[Any, ...] = (record(rid, parent, f"m{i}"),)
                names = ("save", "save")
            elif op == "save_ext":
                parent = f"ext-{j}" if j % 3 else None
                args, names = (record(f"ext-{i}", parent, f"e{i}"),), ("save", "save")
            else:
                target = minted[i % len(minted)] if minted and i % 2 else f"ext-{i}"
                method = {"get": "get", "resolve": "resolve_chain", "delete": "delete",
                          "delete_thread": "delete_thread"}[op]
                args, names = (target,), (method, method)
            outcome_a = await _outcome(getattr(store, names[0]), *args)
            outcome_s = _outcome_sync(getattr(sync, names[1]), *args)
            assert outcome_a == outcome_s, (op, args)
        await client.aclose()

    asyncio.run(run())
    keys_a = {key[1:] for key in plain.scan_iter(match="a:*")}
    keys_s = {key[1:] for key in plain.scan_iter(match="s:*")}
    assert keys_a == keys_s
    for key in keys_a:
        if plain.type(b"a" + key) == b"hash":
            fields_a = {f for f in plain.hkeys(b"a" + key) if not f.startswith((b"t", b"w", b"m"))}
            assert fields_a == {f for f in plain.hkeys(b"s" + key) if not f.startswith((b"t", b"w", b"m"))}


def _normal(value: Any) -> Any:
    if hasattr(value, "sessions"):
        return [s.id for s in value.sessions], value.input_items
    return value


async def _outcome(method: Any, *args: Any) -> Any:
    try:
        return ("ok", _normal(await method(*args)))
    except SessionError as exc:
        return ("error", exc.code)


def _outcome_sync(method: Any, *args: Any) -> Any:
    try:
        return ("ok", _normal(method(*args)))
    except SessionError as exc:
        return ("error", exc.code)


# -- threads, forks, faults: a real server ---------------------------------------------
THREADS = 32
TURNS = 20


@pytest.mark.real
def test_threads_share_one_store_and_every_save_lands_once(redis_server):
    """32 threads, one store (one client, one pool), each its own chain of 20 turns, each
    turn resolved then saved as a gateway does: all 640 saves are there, once each."""
    prefix = f"th{uuid.uuid4().hex[:8]}"
    store = SyncResponseSessionStore.from_url(redis_server.url, key_prefix=prefix, compression=False)
    barrier = threading.Barrier(THREADS)
    chains: list[list[str]] = [[] for _ in range(THREADS)]
    failures: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            barrier.wait()
            parent = None
            for turn in range(TURNS):
                if parent is not None:
                    assert len(store.resolve_chain(parent).sessions) == turn
                rid = store.new_response_id(parent) if n % 2 else f"ext-{prefix}-{n}-{turn}"
                store.save(record(rid, parent, f"thread {n} turn {turn}"))
                chains[n].append(rid)
                parent = rid
            assert [s.id for s in store.resolve_chain(parent).sessions] == chains[n]
        except BaseException as exc:  # reported below, with the thread's number
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[:3]
    client = redis.Redis.from_url(redis_server.url)
    saved = [field for key in client.scan_iter(match=f"{prefix}:*:chain")
             for field in client.hkeys(key) if field.startswith(b"d:")]
    assert len(saved) == THREADS * TURNS == len(set(saved))
    assert sorted(f[2:].decode() for f in saved) == sorted(rid for chain in chains for rid in chain)
    client.close()
    store.close()


def _in_child(store: SyncResponseSessionStore, parent_id: int, out: Any) -> None:
    """Run in a forked child: the store made before the fork, used as it is."""
    try:
        rid = f"ext-child-{uuid.uuid4().hex[:6]}"
        store.save(record(rid))
        out.put((store.get(rid).id == rid, store.client.client_id(), parent_id))
    except BaseException as exc:
        out.put(("error", repr(exc), parent_id))


@pytest.mark.real
def test_a_forked_child_opens_its_own_connections(redis_server):
    """A store (and client) made before a fork: the child's calls work on connections of
    its own (redis-py's pool sees the new pid), never on the parent's socket."""
    store = SyncResponseSessionStore.from_url(redis_server.url, key_prefix=f"fk{uuid.uuid4().hex[:6]}")
    store.save(record("ext-parent"))
    parent_id = store.client.client_id()
    pool = store.client.connection_pool
    assert pool.pid == __import__("os").getpid()
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_in_child, args=(store, parent_id, out))
    child.start()
    result = out.get(timeout=30)
    child.join(30)
    assert result[0] is True, result
    assert result[1] != parent_id
    assert store.client.client_id() == parent_id  # the parent's connection lives on, unshared
    assert store.get("ext-parent").id == "ext-parent"
    store.close()


@pytest.mark.real
@pytest.mark.parametrize("fault", ["drop", "cut"])
def test_a_lost_reply_to_a_save_is_retried_and_the_save_lands_once(redis_server, fault):
    """The proxy loses the save script's reply after the server ran it; redis-py re-sends
    it on a new connection (its retry, the budget's socket timeout), the token makes the
    copy a no-op, and the caller sees success: one record, the script run twice."""
    prefix = f"fl{uuid.uuid4().hex[:6]}"
    with FaultProxy("127.0.0.1", redis_server.port) as proxy:
        store = SyncResponseSessionStore.from_url(proxy.url, key_prefix=prefix, timeout=8.0,
                                                  redis_kwargs={"socket_timeout": 1.0}, compression=False)
        root = new_response_id()
        store.save(record(root))
        child = new_response_id(root)
        proxy.arm(fault, match=b"EVALSHA")
        store.save(record(child, root))
        assert proxy.fired == 1
        assert proxy.matched == 2  # the script was sent twice: the lost copy and redis-py's retry
        assert [s.id for s in store.resolve_chain(child).sessions] == [root, child]
        store.close()
    client = redis.Redis.from_url(redis_server.url)
    records = [f for key in client.scan_iter(match=f"{prefix}:*") if client.type(key) == b"hash"
               for f in client.hkeys(key) if f.startswith(b"d:")]
    assert sorted(records) == sorted([f"d:{root}".encode(), f"d:{child}".encode()])
    client.close()


def _post(app: Any, body: dict[str, Any]) -> tuple[int, Any]:
    """One request through a WSGI app, as a WSGI server makes it."""
    import io
    import json
    from wsgiref.util import setup_testing_defaults

    data = json.dumps(body).encode()
    environ: dict[str, Any] = {"REQUEST_METHOD": "POST", "PATH_INFO": "/v1/responses",
                               "CONTENT_LENGTH": str(len(data)), "wsgi.input": io.BytesIO(data)}
    setup_testing_defaults(environ)
    started: list[str] = []
    chunks = app(environ, lambda status, headers: started.append(status))
    return int(started[0].split()[0]), json.loads(b"".join(chunks))


@pytest.mark.real
def test_the_wsgi_example_keeps_a_chain(redis_server, monkeypatch):
    import importlib
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    monkeypatch.setenv("REDIS_SESSIONS_URL", redis_server.url)
    gateway = importlib.reload(importlib.import_module("examples.sync_gateway"))
    status, first = _post(gateway.app, {"input": "hello"})
    assert status == 200 and first["history"] == 0 and first["output_text"] == "you said: hello"
    status, second = _post(gateway.app, {"input": "again", "previous_response_id": first["id"]})
    assert second["history"] == 1
    status, third = _post(gateway.app, {"input": "more", "previous_response_id": second["id"]})
    assert third["history"] == 2
    status, missing = _post(gateway.app, {"input": "x", "previous_response_id": "resp_nope"})
    assert status == 404 and missing["error"]["code"] == "session.chain.not_found"


@pytest.mark.real
@pytest.mark.redis_only
def test_tls_with_the_documented_acl_user():
    """rediss:// with a CA file, as the ACL user docs/production.md defines: the sync store
    sends the same commands as the async one, so it needs no other permission."""
    from servers import TlsServer
    from test_readme_blocks import ACL_RULES

    server = TlsServer()
    try:
        server.command("ACL", "SETUSER", "gateway", "reset", "on", ">gw-pw", *ACL_RULES)
        url = f"rediss://gateway:gw-pw@localhost:{server.port}/0"
        with SyncResponseSessionStore.from_url(url, key_prefix="rs:sync", redis_kwargs={"ssl_ca_certs": server.ca_file},
                                               timeout=5.0) as store:
            first = store.new_response_id()
            store.save(record(first))
            store.save(record("ext-tls", first))
            assert [s.id for s in store.resolve_chain("ext-tls").sessions] == [first, "ext-tls"]
            assert store.delete("ext-tls") is True
            assert store.delete_thread(first) == 1
    finally:
        server.close()
