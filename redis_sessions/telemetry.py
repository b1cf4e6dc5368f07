"""Telemetry for every store call: OpenTelemetry spans and metrics, nothing when it is off.

Off by default. :func:`enable` turns it on for the whole process, as OpenTelemetry's
instrumentations do (one switch, not an option per store: a gateway's stores and
sessions are many objects and one process); :func:`disable` turns it off. Only
:func:`enable` imports ``opentelemetry`` (the ``telemetry`` extra, ``opentelemetry-api``):
with telemetry off the package never imports it, and a call costs one test of
:data:`active` against None, in :func:`.budget.bounded`, which every public call of every
store goes through on both APIs (docs/benchmarks.md has the cost, off and on).

What is emitted (docs/production.md#telemetry has the names, units and the queries):

- a span per public call, named and attributed by OpenTelemetry's GenAI memory
  conventions (``search_memory responses``; ``gen_ai.operation.name``,
  ``gen_ai.memory.store.name`` and ``.id``, ``gen_ai.conversation.id``,
  ``error.type``), with the method's own name in ``redis_sessions.method``;
- the call's duration by operation and outcome, refusals by code, budget timeouts,
  the chain depth ``resolve_chain`` read, bytes written and read before and after
  compression, and writes answered from their key's token ring (a copy of a call that ran).

No attribute carries a secret, a record or an item: ids (a response's, a session's, a
conversation's: the caller's own handles), the key prefix, codes and counts only.
"""

from __future__ import annotations

import contextvars
import threading
import time
from typing import Any, Awaitable, Callable, Mapping

from .errors import ErrorCode, SessionError
from .ids import validate_id

active: "Telemetry | None" = None
"""The running telemetry (None: off). Read on every call: the one cost of telemetry off."""

_entering: contextvars.ContextVar[bool] = contextvars.ContextVar("redis_sessions_telemetry_entering", default=False)
_tally: contextvars.ContextVar["list[int] | None"] = contextvars.ContextVar("redis_sessions_telemetry_bytes", default=None)
"""The running call's bytes (written before, after; read before, after compression), added
to :data:`_totals` once, at the call's end."""
_totals = [0, 0, 0, 0]
"""The process's bytes since :func:`enable`, as ``_tally``: the SDK reads them when it
collects (an observable counter), so a call pays no counter ``add`` for them (an SDK
``add`` costs more than decoding a small item)."""
_totals_lock = threading.Lock()
_BYTES_ATTRIBUTES = tuple({"redis_sessions.direction": direction, "redis_sessions.compression": stage}
                          for direction in ("write", "read") for stage in ("before", "after"))

SEARCH, UPDATE, CREATE, DELETE = "search_memory", "update_memory", "create_memory", "delete_memory"
DURATION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0)
"""Seconds: a call on loopback takes a fraction of a millisecond, a budget ends one at 5 s."""
DEPTH_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096)


def _first(name: str) -> Callable[[Any, tuple[Any, ...], Mapping[str, Any]], Any]:
    """The id a call is about: its first argument, or the keyword ``name``."""
    def of(store: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        return args[0] if args else kwargs.get(name)
    return of


def _saved(store: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    return getattr(args[0] if args else kwargs.get("session"), "id", None)


def _minted(store: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    return (args[0] if args else kwargs.get("previous_response_id")) or kwargs.get("conversation_id")


def _session(store: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    return store.session_id


def _none(store: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    return None


_RESPONSES, _SESSIONS, _CONVERSATIONS = "RedisResponseSessionStore.", "RedisSession.", "RedisConversationStore."
OPERATIONS: dict[str, tuple[str, str, Callable[[Any, tuple[Any, ...], Mapping[str, Any]], Any]]] = {
    # method (its __qualname__): the store's name, the GenAI memory operation, the id it is about
    _RESPONSES + "new_response_id": ("responses", SEARCH, _minted),
    _RESPONSES + "get": ("responses", SEARCH, _first("response_id")),
    _RESPONSES + "resolve_chain": ("responses", SEARCH, _first("previous_response_id")),
    _RESPONSES + "save": ("responses", UPDATE, _saved),
    _RESPONSES + "delete": ("responses", DELETE, _first("response_id")),
    _RESPONSES + "delete_thread": ("responses", DELETE, _first("response_id")),
    _SESSIONS + "get_items": ("sessions", SEARCH, _session),
    _SESSIONS + "snapshot": ("sessions", SEARCH, _session),
    _SESSIONS + "_ping": ("sessions", SEARCH, _session),
    _SESSIONS + "add_items": ("sessions", UPDATE, _session),
    _SESSIONS + "replace_prefix": ("sessions", UPDATE, _session),
    _SESSIONS + "_atomic_replace_items": ("sessions", UPDATE, _session),
    _SESSIONS + "pop_item": ("sessions", DELETE, _session),
    _SESSIONS + "clear_session": ("sessions", DELETE, _session),
    _SESSIONS + "fork": ("sessions", CREATE, _session),
    _CONVERSATIONS + "create": ("conversations", CREATE, _none),
    _CONVERSATIONS + "get": ("conversations", SEARCH, _first("conversation_id")),
    _CONVERSATIONS + "list_items": ("conversations", SEARCH, _first("conversation_id")),
    _CONVERSATIONS + "get_item": ("conversations", SEARCH, _first("conversation_id")),
    _CONVERSATIONS + "update": ("conversations", UPDATE, _first("conversation_id")),
    _CONVERSATIONS + "add_items": ("conversations", UPDATE, _first("conversation_id")),
    _CONVERSATIONS + "delete": ("conversations", DELETE, _first("conversation_id")),
    _CONVERSATIONS + "delete_item": ("conversations", DELETE, _first("conversation_id")),
}
"""Every public call of the three stores: the span's store name and GenAI operation, and
where the id it is about comes from (tests/test_telemetry.py checks none is missing)."""


def _an_id(value: Any) -> str | None:
    """``value`` if it is an id the stores would take (so never free text), else None."""
    if type(value) is not str:
        return None
    try:
        return validate_id(value)
    except SessionError:
        return None


class Telemetry:
    """The tracer and instruments of a running :func:`enable` (read :data:`active`)."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        from importlib.metadata import PackageNotFoundError, version

        from opentelemetry import metrics, trace

        self._trace = trace
        try:
            ours = version("redis-sessions")
        except PackageNotFoundError:  # a checkout on sys.path, not installed
            ours = ""
        self.tracer = trace.get_tracer(__name__, ours, tracer_provider=tracer_provider)
        meter = metrics.get_meter(__name__, ours, meter_provider=meter_provider)
        self.duration = meter.create_histogram(
            "redis_sessions.call.duration", unit="s", description="Duration of a public store call",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self.depth = meter.create_histogram(
            "redis_sessions.chain.depth", unit="{response}", description="Responses resolve_chain returned",
            explicit_bucket_boundaries_advisory=DEPTH_BUCKETS)
        self.refusals = meter.create_counter(
            "redis_sessions.refusals", unit="{call}", description="Calls refused with a 4xx code, by code")
        self.timeouts = meter.create_counter(
            "redis_sessions.budget.timeouts", unit="{call}", description="Calls that ran out of their time budget")
        meter.create_observable_counter(
            "redis_sessions.value.bytes", callbacks=[_observe_bytes], unit="By",
            description="Bytes of records and items written and read, before and after compression")
        self.resent = meter.create_counter(
            "redis_sessions.writes.resent", unit="{write}",
            description="Writes answered from their key's token ring: copies of a call that had run")
        self._kind = trace.SpanKind.CLIENT

    # -- the calls (budget.bounded) -----------------------------------------------------
    async def observe(self, run: Callable[..., Awaitable[Any]], qualname: str, store: Any,
                      args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``run(store, *args, **kwargs)`` (a bounded method) inside its span, measured."""
        store_name, operation, about = OPERATIONS.get(qualname, ("store", qualname.rpartition(".")[2], _none))
        method = qualname.rpartition(".")[2].lstrip("_")
        common = {"gen_ai.operation.name": operation, "gen_ai.memory.store.name": store_name,
                  "redis_sessions.method": method}
        attributes: dict[str, Any] = {**common, "gen_ai.provider.name": "redis", "db.system.name": "redis"}
        prefix = getattr(getattr(store, "options", None), "key_prefix", None)
        if prefix is not None:
            attributes["gen_ai.memory.store.id"] = prefix
        conversation = _an_id(about(store, args, kwargs))
        if conversation is not None:
            attributes["gen_ai.conversation.id"] = conversation
        span = self.tracer.start_span(f"{operation} {store_name}", kind=self._kind, attributes=attributes)
        start = time.perf_counter()
        entering = _entering.set(True)
        tally = _tally.set([0, 0, 0, 0])
        try:
            with self._trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                result = await run(store, *args, **kwargs)
        except BaseException as exc:
            code = exc.code.value if isinstance(exc, SessionError) else type(exc).__qualname__
            common["error.type"] = code
            span.set_attribute("error.type", code)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))  # no description: messages name keys
            if isinstance(exc, SessionError):
                if exc.code is ErrorCode.BACKEND_TIMEOUT:
                    self.timeouts.add(1, {k: v for k, v in common.items() if k != "error.type"})
                elif exc.http_status < 500:
                    self.refusals.add(1, common)
            raise
        else:
            if method == "resolve_chain":
                self.depth.record(len(result.sessions), common)
            elif conversation is None and operation == CREATE and store_name == "conversations":
                span.set_attribute("gen_ai.conversation.id", result.id)
            return result
        finally:
            _entering.reset(entering)
            self.duration.record(time.perf_counter() - start, common)
            counts = _tally.get()
            _tally.reset(tally)
            if counts is not None and any(counts):
                _add_bytes(counts)
            span.end()

    # -- what the codec and the tokens see ---------------------------------------------
    def wrote(self, before: int, after: int) -> None:
        """A value encoded for writing: ``before`` bytes of msgpack, stored as ``after``."""
        self._count(0, before, after)

    def read(self, stored: int, plain: int) -> None:
        """A value read: ``stored`` bytes from Redis, ``plain`` once decompressed."""
        self._count(2, plain, stored)

    def _count(self, at: int, before: int, after: int) -> None:
        counts = _tally.get()
        if counts is None:  # outside a store's call (the command line's reads, say)
            _add_bytes([before, after, 0, 0] if at == 0 else [0, 0, before, after])
        else:
            counts[at] += before
            counts[at + 1] += after

    def resend(self, script: str) -> None:
        """A write of ``lua/<script>.lua`` answered from its key's token ring: a copy (redis-py's
        re-send after a lost reply, a caller's retry) of a call that had run."""
        self.resent.add(1, {"redis_sessions.script": script})


def _add_bytes(counts: list[int]) -> None:
    with _totals_lock:
        for at, count in enumerate(counts):
            _totals[at] += count


def _observe_bytes(options: Any) -> list[Any]:
    """The bytes counter's points, when the SDK collects."""
    from opentelemetry.metrics import Observation

    with _totals_lock:
        totals = list(_totals)
    return [Observation(total, attributes) for total, attributes in zip(totals, _BYTES_ATTRIBUTES)]


def claim() -> bool:
    """Whether a bounded call is to be observed; False for the call :meth:`Telemetry.observe`
    is running itself (it calls the bounded method again, which asks here first)."""
    if _entering.get():
        _entering.set(False)
        return False
    return True


def enable(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Turn telemetry on for every store and session of the process, on both APIs.

    ``tracer_provider`` and ``meter_provider``: OpenTelemetry providers (an SDK's, say with
    in-memory exporters in tests); None: the global ones (``opentelemetry.trace`` and
    ``opentelemetry.metrics``; without an SDK configured, those record nothing). Needs the
    ``telemetry`` extra (``opentelemetry-api``): without it, ``session.input.invalid``.
    Calling it again replaces the providers."""
    global active
    with _totals_lock:
        _totals[:] = [0, 0, 0, 0]
    try:
        made = Telemetry(tracer_provider, meter_provider)
    except ImportError:
        raise SessionError(ErrorCode.INPUT_INVALID, "telemetry needs opentelemetry-api: install "
                           "redis-sessions[telemetry]") from None
    active = made


def disable() -> None:
    """Turn telemetry off: calls then import, call and record nothing of OpenTelemetry's."""
    global active
    active = None


def enabled() -> bool:
    """Whether :func:`enable` turned telemetry on."""
    return active is not None
