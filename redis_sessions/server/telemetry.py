"""The reference server's telemetry: the OpenTelemetry SDK set up from the standard
``OTEL_*`` environment, and the stores' telemetry turned on (:mod:`redis_sessions.telemetry`).

Nothing happens unless the environment asks for it (``pip install
'redis-sessions[server,server-telemetry]'`` for the SDK and its OTLP exporter):

- ``REDIS_SESSIONS_TELEMETRY=1`` turns it on (``0`` keeps it off whatever else is set);
- otherwise any of ``OTEL_TRACES_EXPORTER``, ``OTEL_METRICS_EXPORTER`` (other than
  ``none``), ``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
  ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` turns it on;
- ``OTEL_SDK_DISABLED=true`` keeps it off.

Each signal's exporters are ``OTEL_TRACES_EXPORTER`` and ``OTEL_METRICS_EXPORTER``
(``otlp``, the default; ``console``; ``none``; several comma-separated). The SDK reads
the rest itself, as the specification has it: the OTLP endpoint, headers, protocol
details and timeouts, ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``, the batch
span processor's ``OTEL_BSP_*`` and ``OTEL_METRIC_EXPORT_INTERVAL``. The providers are
made the global ones, so that redis-py's own client metrics, where they are on, export
beside these (``REDIS_SESSIONS_REDIS_METRICS=1`` turns on redis-py's default ones).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Mapping

from .. import telemetry

log = logging.getLogger("redis_sessions.server")

_ASKING = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")


def asked(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` asks the server to export telemetry."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    own = environ.get("REDIS_SESSIONS_TELEMETRY", "").strip().lower()
    if own:
        return own in ("1", "true", "yes", "on")
    if any(environ.get(name, "").strip() for name in _ASKING):
        return True
    return any(_exporters(environ, signal) for signal in ("TRACES", "METRICS") if environ.get(f"OTEL_{signal}_EXPORTER"))


def _exporters(environ: Mapping[str, str], signal: str) -> list[str]:
    names = [n.strip().lower() for n in environ.get(f"OTEL_{signal}_EXPORTER", "otlp").split(",")]
    return [n for n in names if n and n != "none"]


def _span_exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    raise ValueError(f"OTEL_TRACES_EXPORTER={name!r}: this server exports with otlp, console or none")


def _metric_exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter()
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter()
    raise ValueError(f"OTEL_METRICS_EXPORTER={name!r}: this server exports with otlp, console or none")


def export_from_environment(environ: Mapping[str, str] | None = None) -> Callable[[], None]:
    """Set up the SDK from ``environ`` (the process's) and turn telemetry on, if it asks;
    returns what flushes and stops it at shutdown (nothing, if it did not ask)."""
    environ = os.environ if environ is None else environ
    if not asked(environ):
        return lambda: None
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "redis-sessions-server"}))
    tracer_provider = TracerProvider(resource=resource)
    for name in _exporters(environ, "TRACES"):
        tracer_provider.add_span_processor(BatchSpanProcessor(_span_exporter(name)))
    readers = [PeriodicExportingMetricReader(_metric_exporter(name)) for name in _exporters(environ, "METRICS")]
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    if environ.get("REDIS_SESSIONS_REDIS_METRICS", "").strip().lower() in ("1", "true", "yes", "on"):
        from redis.observability.config import OTelConfig
        from redis.observability.providers import get_observability_instance

        get_observability_instance().init(OTelConfig())
    telemetry.enable(tracer_provider, meter_provider)
    log.info("telemetry: exporting traces to %s, metrics to %s",
             ", ".join(_exporters(environ, "TRACES")) or "nothing", ", ".join(_exporters(environ, "METRICS")) or "nothing")

    def stop() -> None:
        telemetry.disable()
        tracer_provider.shutdown()
        meter_provider.shutdown()

    return stop
