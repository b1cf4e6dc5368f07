"""Telemetry through the OpenTelemetry SDK's in-memory exporters: span names and
attributes by the GenAI memory conventions, metric values, nothing of an item's or a
record's content in any attribute, and nothing of OpenTelemetry imported while it is off.

Every test runs on fakeredis and a real redis-server, on both APIs. The providers are
passed to :func:`redis_sessions.telemetry.enable` (OpenTelemetry's global ones can be set
once per process only).
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chains import record
from conftest import Backend, backend_params, make_backend
from redis_sessions import (
    ErrorCode,
    RedisConversationStore,
    RedisResponseSessionStore,
    RedisSession,
    SessionError,
    SyncConversationStore,
    SyncRedisSession,
    SyncResponseSessionStore,
    budget,
    telemetry,
)
from redis_sessions.edge import Edge
from redis_sessions.link import run_blocking

pytestmark = pytest.mark.parametrize("api", ["async", "sync"], indirect=True)

REPO = Path(__file__).resolve().parent.parent

MARKER = "zq-secret-marker-7731"
"""Item and record text that no attribute may carry."""


class Otel:
    """The SDK's in-memory span exporter and metric reader, telemetry enabled on them."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        return [point for rm in (data.resource_metrics if data else []) for sm in rm.scope_metrics
                for metric in sm.metrics if metric.name == name for point in metric.data.data_points]

    def total(self, name: str, **attributes: str) -> float:
        """The sum of a counter's points (a histogram's: its count) whose attributes include ``attributes``."""
        return sum(getattr(p, "count", None) if hasattr(p, "bucket_counts") else p.value
                   for p in self.points(name) if attributes.items() <= dict(p.attributes).items())

    def every_attribute_value(self) -> list[str]:
        values = [str(v) for s in self.spans() for v in (s.attributes or {}).values()]
        values += [str(s.name) for s in self.spans()]
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    values += [str(v) for p in metric.data.data_points for v in p.attributes.values()]
        return values


@pytest.fixture
def otel() -> Iterator[Otel]:
    made = Otel()
    telemetry.enable(made.tracer_provider, made.meter_provider)
    yield made
    telemetry.disable()
    made.meter_provider.shutdown()
    made.tracer_provider.shutdown()


@pytest.fixture(params=backend_params(["fakeredis", "redis"]))
async def back(request: pytest.FixtureRequest, api: str) -> AsyncIterator[Backend]:
    async for made in make_backend(request.param, request, api):
        yield made


class Stores:
    """The three stores on one backend, on its API; ``call`` runs a method of either API."""

    def __init__(self, back: Backend, **options: Any) -> None:
        self.sync = back.api == "sync"
        client = back.sync_client() if self.sync else back.client
        prefix = back.prefix
        if self.sync:
            self.responses: Any = SyncResponseSessionStore(client, key_prefix=prefix, **options)
            self.conversations: Any = SyncConversationStore(client, key_prefix=prefix, **options)
            self.session: Any = SyncRedisSession("sess1", client=client, key_prefix=prefix, **options)
        else:
            self.responses = RedisResponseSessionStore(client, key_prefix=prefix, **options)
            self.conversations = RedisConversationStore(client, key_prefix=prefix, **options)
            self.session = RedisSession("sess1", client=client, key_prefix=prefix, **options)

    async def call(self, target: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(target, name)(*args, **kwargs)
        return result if self.sync else await result

    def core(self, target: Any) -> Any:
        return target.core if self.sync else target


def span_of(otel: Otel, method: str) -> ReadableSpan:
    found = [s for s in otel.spans() if (s.attributes or {}).get("redis_sessions.method") == method]
    assert found, f"no span for {method}: {[s.name for s in otel.spans()]}"
    return found[-1]


async def test_every_bounded_method_of_the_three_stores_has_an_operation(api: str) -> None:
    methods = {f"{cls.__name__}.{name}" for cls in (RedisResponseSessionStore, RedisSession, RedisConversationStore)
               for name, value in vars(cls).items()
               if inspect.iscoroutinefunction(value) and getattr(value, "__wrapped__", None) is not None}
    assert methods == set(telemetry.OPERATIONS)


async def test_spans_are_named_and_attributed_by_the_genai_memory_conventions(back: Backend, otel: Otel) -> None:
    st = Stores(back)
    await st.call(st.responses, "save", record("ext_root", text=MARKER))
    await st.call(st.responses, "save", record("ext_child", "ext_root", text=MARKER))
    await st.call(st.responses, "get", "ext_root")
    await st.call(st.responses, "resolve_chain", "ext_child")
    await st.call(st.session, "add_items", [{"role": "user", "content": MARKER}])
    await st.call(st.session, "get_items", 20)
    conversation = await st.call(st.conversations, "create", [{"role": "user", "content": MARKER}])
    await st.call(st.conversations, "list_items", conversation.id)

    expect = {"save": ("update_memory responses", "ext_child"), "get": ("search_memory responses", "ext_root"),
              "resolve_chain": ("search_memory responses", "ext_child"),
              "add_items": ("update_memory sessions", "sess1"), "get_items": ("search_memory sessions", "sess1"),
              "create": ("create_memory conversations", conversation.id),
              "list_items": ("search_memory conversations", conversation.id)}
    for method, (name, about) in expect.items():
        span = span_of(otel, method)
        attributes = dict(span.attributes or {})
        assert span.name == name
        assert attributes["gen_ai.operation.name"] == name.split()[0]
        assert attributes["gen_ai.memory.store.name"] == name.split()[1]
        assert attributes["gen_ai.memory.store.id"] == back.prefix
        assert attributes["gen_ai.conversation.id"] == about
        assert attributes["gen_ai.provider.name"] == attributes["db.system.name"] == "redis"
        assert "error.type" not in attributes
        assert span.kind.name == "CLIENT"
    values = otel.every_attribute_value()
    assert values and not [v for v in values if MARKER in v]


async def test_a_refusal_carries_its_code_and_is_counted(back: Backend, otel: Otel) -> None:
    st = Stores(back)
    with pytest.raises(SessionError) as refused:
        await st.call(st.responses, "resolve_chain", "ext_nowhere")
    assert refused.value.code is ErrorCode.CHAIN_NOT_FOUND
    span = span_of(otel, "resolve_chain")
    assert dict(span.attributes or {})["error.type"] == "session.chain.not_found"
    assert span.status.status_code.name == "ERROR" and not span.status.description
    assert otel.total("redis_sessions.refusals", **{"error.type": "session.chain.not_found",
                                                   "redis_sessions.method": "resolve_chain"}) == 1
    assert otel.total("redis_sessions.call.duration", **{"error.type": "session.chain.not_found"}) == 1
    with pytest.raises(SessionError):  # an id that is not one is never an attribute
        await st.call(st.responses, "get", f"not an id {MARKER}")
    assert not [v for v in otel.every_attribute_value() if MARKER in v]


async def test_durations_by_operation_and_outcome_and_the_chain_depth(back: Backend, otel: Otel) -> None:
    st = Stores(back)
    parent = None
    for n in range(7):
        await st.call(st.responses, "save", record(f"ext_{n}", parent))
        parent = f"ext_{n}"
    snapshot = await st.call(st.responses, "resolve_chain", parent)
    assert len(snapshot.sessions) == 7
    depth = otel.points("redis_sessions.chain.depth")
    assert len(depth) == 1 and depth[0].count == 1 and depth[0].sum == 7 and depth[0].max == 7
    assert otel.total("redis_sessions.call.duration", **{"redis_sessions.method": "save",
                                                         "gen_ai.operation.name": "update_memory"}) == 7
    durations = [p for p in otel.points("redis_sessions.call.duration")
                 if dict(p.attributes)["redis_sessions.method"] == "resolve_chain"]
    assert len(durations) == 1 and "error.type" not in durations[0].attributes and 0 < durations[0].sum < 5


async def test_bytes_before_and_after_compression(back: Backend, otel: Otel) -> None:
    st = Stores(back)
    text = f"{MARKER} " * 400  # compresses well
    await st.call(st.session, "add_items", [{"role": "user", "content": text}])
    await st.call(st.session, "get_items", 20)
    await st.call(st.conversations, "create", [{"role": "user", "content": "short"}])  # too small to compress
    wrote_before = otel.total("redis_sessions.value.bytes", **{"redis_sessions.direction": "write",
                                                               "redis_sessions.compression": "before"})
    wrote_after = otel.total("redis_sessions.value.bytes", **{"redis_sessions.direction": "write",
                                                              "redis_sessions.compression": "after"})
    read_before = otel.total("redis_sessions.value.bytes", **{"redis_sessions.direction": "read",
                                                              "redis_sessions.compression": "before"})
    read_after = otel.total("redis_sessions.value.bytes", **{"redis_sessions.direction": "read",
                                                             "redis_sessions.compression": "after"})
    assert wrote_before > len(text) > 4 * wrote_after
    assert read_before > len(text) > 4 * read_after


async def test_a_budget_timeout_is_counted(back: Backend, otel: Otel, monkeypatch: pytest.MonkeyPatch) -> None:
    st = Stores(back, timeout=0.2)

    async def stalled(edge: Edge, *args: Any, **kwargs: Any) -> Any:
        if edge.blocking:  # the sync API: the deadline is checked before the next round trip
            time.sleep(0.25)
            budget.check()
        await asyncio.sleep(5)  # asyncio: the watchdog ends the call at its deadline

    monkeypatch.setattr(Edge, "call", stalled)
    with pytest.raises(SessionError) as timed_out:
        await st.call(st.session, "get_items", 20)
    assert timed_out.value.code is ErrorCode.BACKEND_TIMEOUT
    assert otel.total("redis_sessions.budget.timeouts", **{"redis_sessions.method": "get_items"}) == 1
    assert otel.total("redis_sessions.refusals") == 0
    assert dict(span_of(otel, "get_items").attributes or {})["error.type"] == "session.backend.timeout"


async def test_a_write_sent_again_with_an_unknown_outcomes_token_is_counted(back: Backend, otel: Otel,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    st = Stores(back)
    run = Edge.run
    lost = [1]

    async def lossy(edge: Edge, *args: Any, **kwargs: Any) -> Any:
        reply = await run(edge, *args, **kwargs)
        if lost:  # the script ran, its reply was lost
            lost.pop()
            raise SessionError(ErrorCode.BACKEND_UNAVAILABLE, "the reply was lost")
        return reply

    monkeypatch.setattr(Edge, "run", lossy)
    items = [{"role": "user", "content": "once"}]
    with pytest.raises(SessionError):
        await st.call(st.session, "add_items", items)
    await st.call(st.session, "add_items", items)  # the caller's retry: the ring answers it
    assert await st.call(st.session, "get_items") == items
    assert otel.total("redis_sessions.writes.resent", **{"redis_sessions.script": "items_add"}) == 1


async def test_nested_public_calls_are_child_spans(back: Backend, otel: Otel) -> None:
    st = Stores(back)
    await st.call(st.session, "add_items", [{"role": "user", "content": "a"}])
    replace = st.core(st.session)._atomic_replace_items([{"role": "user", "content": "b"}])
    assert (run_blocking(replace) if st.sync else await replace) is True
    outer = span_of(otel, "atomic_replace_items")
    inner = [s for s in otel.spans() if s.parent is not None and s.parent.span_id == outer.context.span_id]
    assert {dict(s.attributes or {})["redis_sessions.method"] for s in inner} == {"snapshot", "replace_prefix"}
    assert outer.parent is None


CALLS = ("s = rs.SyncRedisSession('x', client=fakeredis.FakeRedis()); s.add_items([{'a': 'b' * 600}]); "
         "s.get_items(); st = rs.SyncResponseSessionStore(fakeredis.FakeRedis()); st.get('ext_x'); ")


def run_python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=str(REPO)).stdout.strip()


def test_nothing_of_opentelemetry_is_imported_while_telemetry_is_off(api: str) -> None:
    """redis-py 8 imports opentelemetry itself when it is installed (its own client
    metrics): what this package imports and calls adds nothing to that."""
    code = ("import sys, redis, redis.asyncio, fakeredis; before = set(sys.modules); import redis_sessions as rs; "
            + CALLS + "print(sorted(m for m in set(sys.modules) - before if m.startswith('opentelemetry')))")
    assert run_python(code) == "[]"


def test_without_opentelemetry_every_store_works_and_enable_says_what_to_install(api: str) -> None:
    code = ("import sys; sys.modules['opentelemetry'] = None; import fakeredis, redis_sessions as rs; " + CALLS
            + "from redis_sessions import telemetry\ntry:\n    telemetry.enable()\nexcept rs.SessionError as e:\n"
            "    print(e.code.value, 'redis-sessions[telemetry]' in e.message)")
    assert run_python(code) == "session.input.invalid True"


def test_enable_and_disable(api: str) -> None:
    assert not telemetry.enabled()
    telemetry.enable(TracerProvider(), MeterProvider())
    try:
        assert telemetry.enabled() and telemetry.active is not None
    finally:
        telemetry.disable()
    assert not telemetry.enabled() and telemetry.active is None



# -- the reference server: the standard OTEL_* environment ---------------------------------

def test_what_environment_asks_the_server_to_export(api: str) -> None:
    from redis_sessions.server.telemetry import asked

    assert not asked({})
    assert not asked({"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"})
    assert asked({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert asked({"OTEL_TRACES_EXPORTER": "otlp"})
    assert asked({"REDIS_SESSIONS_TELEMETRY": "1"})
    assert not asked({"REDIS_SESSIONS_TELEMETRY": "0", "OTEL_TRACES_EXPORTER": "otlp"})
    assert not asked({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})


def test_the_server_exports_spans_and_metrics_the_environment_asks_for(api: str) -> None:
    """The console exporters (the OTLP ones need a collector): the app's lifespan sets the SDK
    up, a store call makes its span and metrics, and the shutdown flushes them."""
    code = ("import asyncio, os; os.environ.update(OTEL_TRACES_EXPORTER='console', OTEL_METRICS_EXPORTER='console')\n"
            "from redis_sessions.server import create_app\n"
            "async def main():\n"
            "    app = create_app()\n"
            "    async with app.router.lifespan_context(app):\n"
            f"        await app.state.conversations.create([{{'role': 'user', 'content': '{MARKER}'}}])\n"
            "asyncio.run(main())\n")
    out = run_python(code)
    assert '"name": "create_memory conversations"' in out
    assert '"name": "redis_sessions.call.duration"' in out and '"name": "redis_sessions.value.bytes"' in out
    assert MARKER not in out


async def test_every_write_the_token_ring_answers_is_counted_by_its_script(back: Backend, otel: Otel,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of a write that ran (redis-py re-sends a script whose reply was lost, with
    its token) is answered from the key's ring as the first run was, and counted; the
    first run is not."""
    from redis_sessions.conversations import store as conversation_module
    from redis_sessions.responses import store as response_module

    st = Stores(back)
    rid = await st.call(st.responses, "new_response_id")
    await st.call(st.responses, "save", record(rid))
    conv = await st.call(st.conversations, "create")
    for module in (response_module, conversation_module):
        monkeypatch.setattr(module, "new_token", lambda: b"0123456789abcdef")  # every call: one token, as a re-send
    assert [await st.call(st.responses, "delete", rid) for _ in range(2)] == [True, True]
    for _ in range(2):
        assert (await st.call(st.conversations, "delete", conv.id)).id == conv.id  # the copy: not a 404
    assert otel.total("redis_sessions.writes.resent", **{"redis_sessions.script": "chain_delete"}) == 1
    assert otel.total("redis_sessions.writes.resent", **{"redis_sessions.script": "conv_delete"}) == 1
    assert await st.call(st.responses, "get", rid) is None
