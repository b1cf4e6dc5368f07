"""One dictionary of backends, turned into fixtures every behaviour test runs on.

``backend`` is parametrized over fakeredis (in process: what memory mode runs,
:mod:`redis_sessions.memory`), a real redis-server and a real 3-master Redis
Cluster; the real ones carry the ``real`` marker
(``-m "not real"`` deselects them on a laptop without redis-server). Each test
gets its own key prefix, so tests never see each other's keys and no server is
ever flushed. Where redis-server is missing the real backends skip with a
reason, except under CI (``CI`` set), where any skip fails the run.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Iterator

import pytest

from redis_sessions.clock import FakeClock
from servers import REDIS_CLI, REDIS_SERVER, ClusterServer, StandaloneServer

IN_CI = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")

BACKENDS: dict[str, list[pytest.MarkDecorator]] = {
    "fakeredis": [],
    "redis": [pytest.mark.real],
    "cluster": [pytest.mark.real],
}
REDIS_BACKENDS = ["fakeredis", "redis", "cluster"]
REAL_BACKENDS = ["redis", "cluster"]
APIS = ("async", "sync")
SYNC_MODULES = {"test_responses", "test_responses_redis", "test_conversations", "test_items", "test_owners"}
"""Modules whose backend tests run over both APIs: ``make_store`` then gives, for
``sync``, the sync store behind async methods (chains.SyncAdapter, async_front.AsyncFront)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.module.__name__.rpartition(".")[2] in SYNC_MODULES and "api" in metafunc.fixturenames:
        metafunc.parametrize("api", APIS, indirect=True)


@pytest.fixture
def api(request: pytest.FixtureRequest) -> str:
    """Which API ``make_store`` builds: ``async`` unless the module runs both."""
    return str(getattr(request, "param", "async"))


def backend_params(names: list[str]) -> list[Any]:
    return [pytest.param(name, marks=BACKENDS[name], id=name) for name in names]


def _need_binary() -> None:
    if REDIS_SERVER and REDIS_CLI:
        return
    reason = "redis-server/redis-cli not installed (apt-get install redis-server)"
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[StandaloneServer]:
    _need_binary()
    server = StandaloneServer()
    yield server
    server.close()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[ClusterServer]:
    _need_binary()
    cluster = ClusterServer()
    yield cluster
    cluster.close()


@dataclass
class Backend:
    """What a test needs to build any store on one backend."""

    name: str
    prefix: str
    client: Any = None  # a redis-py asyncio client
    clock: FakeClock = field(default_factory=FakeClock)
    url: str | None = None
    server: Any = None
    api: str = "async"
    sync: Any = None  # a redis-py sync client of the same server, made on first use

    def sync_client(self) -> Any:
        if self.sync is None:
            if self.name == "fakeredis":
                import fakeredis

                self.sync = fakeredis.FakeRedis(server=self.server)
            elif self.name == "redis":
                import redis

                self.sync = redis.Redis.from_url(self.url)
            else:
                import redis.cluster

                self.sync = redis.cluster.RedisCluster(host="127.0.0.1", port=self.server.ports[0])
        return self.sync

    def close_sync(self) -> None:
        if self.sync is not None:
            self.sync.close()


async def make_backend(name: str, request: pytest.FixtureRequest, api: str = "async") -> AsyncIterator[Backend]:
    async for backend in _make_backend(name, request, api):
        yield backend
        backend.close_sync()


async def _make_backend(name: str, request: pytest.FixtureRequest, api: str) -> AsyncIterator[Backend]:
    prefix = f"t{uuid.uuid4().hex[:10]}"
    if name == "fakeredis":
        import fakeredis

        server = fakeredis.FakeServer()
        client = fakeredis.FakeAsyncRedis(server=server)
        yield Backend(name, prefix, client, server=server, api=api)
        await client.aclose()
        return
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

    if name == "redis":
        srv = request.getfixturevalue("redis_server")
        client = Redis.from_url(srv.url)
        yield Backend(name, prefix, client, url=srv.url, server=srv, api=api)
        await client.aclose()
        return
    cluster = request.getfixturevalue("redis_cluster")
    client = RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    await client.initialize()
    yield Backend(name, prefix, client, url=cluster.url, server=cluster, api=api)
    await client.aclose()


@pytest.fixture(params=backend_params(list(BACKENDS)))
async def backend(request: pytest.FixtureRequest, api: str) -> AsyncIterator[Backend]:
    async for b in make_backend(request.param, request, api):
        yield b


@pytest.fixture(params=backend_params(REDIS_BACKENDS))
async def redis_backend(request: pytest.FixtureRequest, api: str) -> AsyncIterator[Backend]:
    async for b in make_backend(request.param, request, api):
        yield b


@pytest.fixture(params=backend_params(REAL_BACKENDS))
async def real_backend(request: pytest.FixtureRequest, api: str) -> AsyncIterator[Backend]:
    async for b in make_backend(request.param, request, api):
        yield b


@pytest.fixture(params=backend_params(["fakeredis"]))
async def clocked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Backend]:
    """A backend whose expiry follows ``backend.clock``, started at the real time: the
    fake server's clock (memory mode's too), so time moves for the scripts themselves.

    fakeredis reads ``time.time()`` through its own modules when it sets and
    checks expiry; pointing those at the FakeClock is the one place the tests
    reach into fakeredis internals.
    """
    import time
    import types

    import fakeredis._helpers
    import fakeredis._socket._base
    import fakeredis.commands_mixins.server_mixin

    async for b in make_backend(request.param, request):
        b.clock.now = time.time()
        fake_time = types.SimpleNamespace(time=b.clock, sleep=time.sleep, monotonic=time.monotonic)
        monkeypatch.setattr(fakeredis._helpers, "time", fake_time)
        monkeypatch.setattr(fakeredis._socket._base, "time", fake_time)
        monkeypatch.setattr(fakeredis.commands_mixins.server_mixin, "time", fake_time)  # TIME, in scripts too
        yield b


def pytest_report_header(config: pytest.Config) -> str:
    import subprocess

    if not REDIS_SERVER:
        return "real servers: none (redis-server not installed)"
    version = subprocess.run([REDIS_SERVER, "--version"], capture_output=True, text=True).stdout.strip()
    return f"real servers: {version.split(' sha=')[0]} (set REDIS_SESSIONS_TEST_SERVER=valkey for Valkey)"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI a skipped test is a failure: the real-Redis tests must run."""
    if not IN_CI:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if skipped:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if reporter:
            reporter.write_line(f"CI: {skipped} test(s) skipped; real-Redis tests must run under CI", red=True)
