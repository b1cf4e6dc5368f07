"""How the Agents SDK's own RedisSession tests run against ``redis_sessions.RedisSession``.

``test_redis_session_sdk.py`` is upstream's module with one import changed. Upstream
chooses its client itself: the module-level ``fake_redis`` (fakeredis) when fakeredis
is importable, else ``redis://localhost:6379/15``; a few tests only run in one of the
two modes (they ``pytest.skip`` in the other). Here every test runs in both modes, by
fixtures, without touching a test body:

- ``fakeredis``: upstream's default mode, as upstream runs it.
- ``redis``: upstream's real-server mode (``USE_FAKE_REDIS = False``), on the private
  ``redis-server`` of ``tests/conftest.py``; carries the ``real`` marker.

Upstream imports helpers from its own ``tests/test_responses.py``: that file is vendored
unchanged as ``sdk_test_responses.py`` and registered under upstream's module name.
Upstream also names ``localhost:6379`` literally. Every such URL is redirected: to
fakeredis in the fakeredis mode (upstream's own tests do the same by patching the SDK's
``redis.from_url``), to the private server in the redis mode. A real connection to port
6379 fails the test: no test here ever reaches a server it did not start.

A test that upstream skips in a mode is deselected in that mode (``upstream_mode``), and
the tests in ``EXCLUDED`` are deselected in both, each with its reason, so a run has no
skips (CI fails on any skip). The terminal summary lists the exclusions. To see what the
excluded tests do now (after re-vendoring, say), run with ``SDK_UPSTREAM_ALL=1``.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
from typing import Any, AsyncIterator, Callable
from urllib.parse import urlsplit

import pytest

VENDORED_VERSION = "0.24.0"
"""The openai-agents release the two vendored files come from (test_sdk_version.py checks it)."""

_MODULE = "sdk_upstream.test_redis_session_sdk"
MODES = {"fakeredis": [], "redis": [pytest.mark.real]}

_PIPELINE = "instruments the SDK's WATCH/MULTI pipeline (client.pipeline), which this package never calls"
_POOL = "instruments redis-py pool internals as the SDK's pipeline checkout uses them"

EXCLUDED: dict[str, str] = {
    # The SDK's private attributes (this package's own tests cover the same behaviour).
    "test_redis_cluster_reads_and_subclass_writes": "a subclass reads the SDK's private _redis and _messages_key",
    "test_colliding_session_clear_preserves_existing_session": "reads the SDK's private _session_key (a collision "
                                                               "of the SDK's key names; this package's cannot collide)",
    "test_colliding_counter_rejects_ttl_write_before_side_effects": "reads the SDK's private _session_key",
    "test_mutation_cancellation_waits_for_authoritative_outcome": "patches the SDK's private _redis (rpop, pipeline)",
    "test_internal_client_ownership": "asserts the SDK's private _owns_client",
    "test_get_next_id_method": "calls the SDK's private _get_next_id",
    "test_add_items_preserves_created_at_metadata": "reads the SDK's private _redis and _session_key hash",
    "test_get_items_limit_skips_corrupt_newest_messages": "writes through the SDK's private _messages_key",
    "test_corrupted_data_handling": "writes through the SDK's private _messages_key",
    "test_ping_connection_failure": "patches the SDK's private _redis.ping",
    "test_close_method_coverage": "asserts and sets the SDK's private _owns_client",
    "test_redis_session_closed_operations_raise_runtime_error": "asserts the SDK's private _owns_client",
    "test_redis_session_failed_cleanup_is_terminal_and_retried": "patches the SDK's private _redis.aclose, "
                                                                 "asserts _closed and _client_released",
    "test_redis_session_cancelled_cleanup_is_terminal_and_retried": "patches the SDK's private _redis.aclose, "
                                                                    "asserts _closed and _client_released",
    "test_redis_session_close_is_noop_for_injected_client": "asserts the SDK's private _owns_client",
    "test_add_items_rejects_wrong_metadata_key_type_before_writing": "writes through the SDK's private _session_key",
    "test_redis_session_operation_waiting_behind_close_raises": "patches the SDK module's redis.from_url and "
                                                                "resolve_session_limit, asserts _owns_client",
    "test_compaction_replaces_redis_history_atomically": "patches the SDK's private _redis.pipeline",
    "test_atomic_replacement_preserves_clear_add_metadata": "reads the SDK's private _redis, _session_key, _counter_key",
    "test_compaction_subclass_retains_overridden_storage_methods": "passes the SDK's private _redis on",
    "test_compaction_cancel_after_redis_commit_invalidates_cached_history": "patches the SDK's private _redis.pipeline",
    "test_atomic_replacement_rejects_colliding_counter_key": "reads the SDK's private _redis",
    "test_cancelled_redis_compaction_handoff_remains_resumable": "patches the SDK's private _redis.pipeline",
    "test_redis81_standard_pool_checkout_records_native_observability": "patches the SDK module's private "
        "_redis_connection_api (redis-py's pool metrics; passes here on redis-py 8.1, which records them itself, "
        "and fails on older redis-py)",
    "test_redis8_blocking_pool_checkout_preserves_native_timing": "patches the SDK module's private "
                                                                  "_redis_connection_api (pool metrics)",
    "test_add_items_uses_server_absolute_expiration_after_serialization": "patches the SDK's private _serialize_item "
                                                                          "and its pipeline's TIME",
    # Deliberate differences (not private attributes or pipeline internals; see the README).
    "test_redis_session_rejects_cluster_transactions_before_pipeline": "asserts the SDK's TypeError for writes "
        "through a RedisCluster client (its pipeline cannot run there; this package's one-key scripts can), on a "
        "cluster client whose pipeline, lrange and connect are mocks",
    "test_released_redis_layout_remains_usable": "reads history the SDK wrote in its own key layout "
        "(<prefix>:<id>:messages, a hash, a counter); this package keeps a session in one key of its own "
        "layout and does not read the SDK's",
    "test_add_items_rejects_unrepresentable_ttl_before_writing": "expects ttl=2**63 to be accepted by the "
        "constructor and refused (ValueError) by add_items; here the constructor refuses it (the same "
        "ValueError, session.input.invalid) before any call",
    # The SDK's WATCH/MULTI pipeline and its connection-pool handling.
    "test_clear_rechecks_key_types_after_concurrent_replacement": _PIPELINE,
    "test_add_items_applies_ttl_in_the_write_transaction": _PIPELINE,
    "test_add_items_refreshes_server_timestamps_after_watch_retry": _PIPELINE,
    "test_ambiguous_exec_watch_error_is_not_retried": _PIPELINE,
    "test_cancelled_watch_releases_single_connection_pool": _PIPELINE,
    "test_cancelled_in_flight_watch_command_reconnects_before_pool_reuse": _PIPELINE,
    "test_cancelled_connection_acquisition_is_discarded_before_release": _POOL,
    "test_post_commit_cancellation_propagates_after_cleanup": _PIPELINE,
    "test_post_commit_reset_failure_detaches_without_release_listener": _PIPELINE,
    "test_reconnect_required_release_detaches_without_listener_reborrow": _PIPELINE,
    "test_reconnect_marked_inside_release_failure_is_detached": _POOL,
    "test_post_commit_release_listener_failure_does_not_retry": _POOL,
    "test_pre_exec_close_failure_is_quarantined": _PIPELINE,
    "test_pre_exec_cancellation_skips_pipeline_reset": _PIPELINE,
    "test_blocking_pool_cancellation_completion_owns_release": _PIPELINE,
    "test_ordinary_pool_cancellation_completion_owns_release": _PIPELINE,
    "test_release_failure_after_reborrow_preserves_new_borrower": _PIPELINE,
    "test_post_commit_detached_close_failure_is_quarantined": _PIPELINE,
    "test_blocking_pool_listener_failure_notifies_waiter": _PIPELINE,
    "test_blocking_pool_detached_disconnect_notifies_waiter": _PIPELINE,
}
"""Tests deselected in both modes: test name (all its parameters) -> why."""

_ONE_MODE = {"fakeredis": re.compile(r"if not USE_FAKE_REDIS:\s*pytest\.skip\("),
             "redis": re.compile(r"if USE_FAKE_REDIS:\s*pytest\.skip\(")}


def upstream_mode(function: Callable[..., Any]) -> str | None:
    """The one mode a test runs in upstream (it starts by skipping itself in the other), or None."""
    source = inspect.getsource(function)
    for mode, skip in _ONE_MODE.items():
        if skip.search(source):
            return mode
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "serial: upstream's marker (its xdist setup); no effect here")
    # The vendored module imports its helpers with ``from tests.test_responses import ...``.
    from . import sdk_test_responses

    sys.modules["tests.test_responses"] = sdk_test_responses


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.module.__name__ == _MODULE:
        metafunc.parametrize("sdk_mode", [pytest.param(m, marks=marks, id=m) for m, marks in MODES.items()],
                             indirect=True, scope="function")


def _name(item: pytest.Item) -> str:
    return getattr(item, "originalname", None) or item.name.split("[")[0]


def _mode(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("sdk_mode") if callspec is not None else None


_excluded_items: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        mode = _mode(item)
        if mode is None:
            keep.append(item)
            continue
        only = upstream_mode(item.function)  # type: ignore[attr-defined]
        excluded = _name(item) in EXCLUDED and not os.environ.get("SDK_UPSTREAM_ALL")
        if excluded:
            _excluded_items.append(item.nodeid)
        if excluded or (only is not None and only != mode):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not _excluded_items:
        return
    terminalreporter.write_line(
        f"Agents SDK {VENDORED_VERSION} RedisSession tests: {len(EXCLUDED)} excluded ({len(_excluded_items)} items "
        f"deselected), each with its reason in tests/sdk_upstream/conftest.py (-v lists them)")
    if config.option.verbose > 0:
        for name, reason in EXCLUDED.items():
            terminalreporter.write_line(f"  {name}: {reason}")


@pytest.fixture(autouse=True)
async def sdk_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str | None]:
    """Point the vendored module at fakeredis or at the private redis-server.

    Clients built from a URL during the test are closed after it: upstream's
    test_real_redis_decode_responses_compatibility never closes the client it builds,
    which here (warnings are errors) would fail whichever test runs when it is collected.
    """
    mode: str | None = getattr(request, "param", None)
    if mode is None:
        yield None
        return
    from agents import set_tracing_disabled

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # no network: the model is scripted
    set_tracing_disabled(True)
    module = request.module
    target = None
    if mode == "redis":
        server = request.getfixturevalue("redis_server")
        target = f"127.0.0.1:{server.port}"
        monkeypatch.setattr(module, "USE_FAKE_REDIS", False)
        monkeypatch.setattr(module, "REDIS_URL", f"redis://{target}/15", raising=False)
    else:
        monkeypatch.setattr(module, "USE_FAKE_REDIS", True)
    built: list[Any] = []
    _redirect_port_6379(monkeypatch, target, built)
    yield mode
    for client in built:
        await client.aclose()


def _redirect_port_6379(monkeypatch: pytest.MonkeyPatch, target: str | None, built: list[Any]) -> None:
    """``localhost:6379`` URLs go to fakeredis (target None) or to ``target``; a real
    connection to port 6379 raises. Every client built from a URL is added to ``built``."""
    import fakeredis.aioredis
    from redis.asyncio import Redis
    from redis.asyncio.connection import Connection
    from redis.exceptions import ConnectionError as RedisConnectionError

    real_from_url = Redis.from_url.__func__  # type: ignore[attr-defined]

    def from_url(cls: type[Redis], url: str, **kwargs: Any) -> Redis:
        parts = urlsplit(url)
        if parts.port == 6379 and not issubclass(cls, fakeredis.aioredis.FakeRedis):
            if target is None:
                client: Redis = fakeredis.aioredis.FakeRedis.from_url(url, **kwargs)
                built.append(client)
                return client
            url = parts._replace(netloc=target).geturl()
        client = real_from_url(cls, url, **kwargs)
        built.append(client)
        return client

    real_connect = Connection._connect

    async def connect(self: Connection) -> None:
        if self.port == 6379:
            raise RedisConnectionError("tests/sdk_upstream: a connection to port 6379 was attempted")
        await real_connect(self)

    monkeypatch.setattr(Redis, "from_url", classmethod(from_url))
    monkeypatch.setattr(Connection, "_connect", connect)
