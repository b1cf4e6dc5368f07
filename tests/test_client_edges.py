"""The edge to redis-py: a store or session built from a URL closes its own client.

``close()`` must hang up every connection the object opened, by itself: with the
garbage collector off and the object still referenced, the server sees no
connection of it left. Counted on the server (CLIENT LIST, by client name), on a
standalone server and on a cluster.
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any, Callable, Iterator

import pytest
import redis

from chains import record
from redis_sessions import RedisConversationStore, RedisResponseSessionStore, RedisSession
from servers import ClusterServer, StandaloneServer

pytestmark = pytest.mark.real


def _connections(ports: list[int], name: str) -> int:
    total = 0
    for port in ports:
        with redis.Redis(port=port, socket_timeout=5) as admin:
            total += sum(1 for client in admin.client_list() if client.get("name") == name)
    return total


async def _hung_up(ports: list[int], name: str) -> bool:
    deadline = time.monotonic() + 30  # the server notices a closed socket on its next event loop turn
    while _connections(ports, name):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def _use(owner: Any) -> None:
    if isinstance(owner, RedisResponseSessionStore):
        await owner.save(record(await owner.new_response_id()))
    elif isinstance(owner, RedisSession):
        await owner.add_items([{"role": "user", "content": "hi"}])
        assert await owner.get_items()
    else:
        await owner.create(items=[{"type": "message", "role": "user", "content": "hi"}])


BUILDERS: dict[str, Callable[[str, dict[str, Any]], Any]] = {
    "responses": lambda url, kw: RedisResponseSessionStore.from_url(url, key_prefix="edge", redis_kwargs=kw),
    "items": lambda url, kw: RedisSession.from_url(f"s{time.monotonic_ns()}", url=url, key_prefix="edge", redis_kwargs=kw),
    "conversations": lambda url, kw: RedisConversationStore.from_url(url, key_prefix="edge", redis_kwargs=kw),
}


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize("kind", list(BUILDERS))
async def test_close_hangs_up_every_connection_of_a_standalone_client(
        kind: str, redis_server: StandaloneServer, no_gc: None) -> None:
    name = f"edge-{kind}-{time.monotonic_ns()}"
    owner = BUILDERS[kind](redis_server.url, {"client_name": name})
    await asyncio.gather(*(_use(owner) for _ in range(4)))  # several connections at once
    assert _connections([redis_server.port], name) >= 1
    await owner.close()
    assert await _hung_up([redis_server.port], name), "close() left connections open"


@pytest.mark.parametrize("kind", list(BUILDERS))
async def test_close_hangs_up_every_connection_of_a_cluster_client(
        kind: str, redis_cluster: ClusterServer, no_gc: None) -> None:
    name = f"edge-{kind}-{time.monotonic_ns()}"
    owner = BUILDERS[kind](redis_cluster.url, {"client_name": name})
    await asyncio.gather(*(_use(owner) for _ in range(4)))
    ports = [node.port for node in redis_cluster.nodes]
    assert _connections(ports, name) >= 1
    await owner.close()
    assert await _hung_up(ports, name), "close() left connections open"
