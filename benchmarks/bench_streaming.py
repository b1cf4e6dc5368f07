"""Time to first byte of a streamed turn: straight from a paced upstream, and through the
reference server relaying it.

    .venv/bin/python benchmarks/bench_streaming.py        # starts its own redis-server
    .venv/bin/python benchmarks/bench_streaming.py --url redis://127.0.0.1:6379/0

Three processes on loopback besides Redis: the paced stand-in upstream
(``tests/paced_upstream.py``: a text delta every ``--pace-ms``, ``--words`` of them),
the gateway (``create_app`` with ``upstream_model(AsyncOpenAI(base_url=<stand-in>))``
over Redis, under uvicorn) and this one, the client. At each concurrency (1 and 64
streams open at once, each stream's first request started at a random point of one
stream's length so they do not arrive together), each stream asks ``--requests`` turns
in a row, the gateway's continuing the previous one by ``previous_response_id`` (a
chain read before the model is called, a save after it), straight to the upstream and
through the gateway in alternating rounds. Time to first byte: from the request's
first byte written to the arrival of the bytes holding the first
``response.output_text.delta``; stream: to the response's last byte. Prints a markdown
table: each side's median and p95, and the gateway's minus the upstream's. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

from _common import REPO, TREE, isolate_tree, parser, redis_url

DELTA = b"event: response.output_text.delta"


@dataclass
class Side:
    """One side's samples: seconds to the first delta, and to the stream's end."""

    ttfb: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited ({proc.returncode})")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


@contextmanager
def process(args: list[str], port: int) -> Iterator[None]:
    """``args`` run with this checkout's package (and its Lua) first on the path."""
    env = {**os.environ, "PYTHONPATH": str(REPO), TREE: str(REPO)}
    proc = subprocess.Popen([sys.executable, *args], env=env)
    try:
        wait_listening(port, proc)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def one_request(port: int, body: dict[str, object]) -> tuple[float, float, str | None]:
    """(seconds to the first delta, seconds to the end, the response's id) of one stream."""
    payload = json.dumps(body).encode()
    head = (b"POST /v1/responses HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(payload))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    start = time.perf_counter()
    writer.write(head + payload)
    seen, first = b"", 0.0
    while not first:
        chunk = await reader.read(65536)
        assert chunk, "the stream ended before its first delta"
        seen += chunk
        if DELTA in seen:
            first = time.perf_counter() - start
    while await reader.read(65536):
        pass
    total = time.perf_counter() - start
    writer.close()
    created = seen.split(b"data: ", 1)[1].split(b"\n", 1)[0]
    return first, total, json.loads(created)["response"]["id"]


async def stream(port: int, chained: bool, requests: int, stagger: float, side: Side) -> None:
    """``requests`` turns in a row on one stream; through the gateway, each continues the last."""
    await asyncio.sleep(random.uniform(0, stagger))
    previous = None
    for _ in range(requests):
        body: dict[str, object] = {"model": "paced", "input": "hello", "stream": True}
        if chained and previous:
            body["previous_response_id"] = previous
        first, total, previous = await one_request(port, body)
        side.ttfb.append(first)
        side.total.append(total)


async def round_of(port: int, chained: bool, streams: int, requests: int, stagger: float, side: Side) -> None:
    await asyncio.gather(*(stream(port, chained, requests, stagger, side) for _ in range(streams)))


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


SIDES = ("upstream", "bare relay", "gateway")


async def measure(ports: dict[str, int], streams: int, requests: int, rounds: int,
                  stagger: float) -> dict[str, Side]:
    """Each side in turn, ``rounds`` times, after a warm-up round each (connections made,
    scripts loaded); only the gateway chains its turns."""
    sides = {name: Side() for name in SIDES}
    for name in SIDES:
        await round_of(ports[name], name == "gateway", streams, 1, stagger, Side())
    for _ in range(rounds):
        for name in SIDES:
            await round_of(ports[name], name == "gateway", streams, requests, stagger, sides[name])
    return sides


def added(sides: dict[str, Side], name: str, pick: Callable[[list[float]], float]) -> str:
    return ms(pick(sides[name].ttfb) - pick(sides["upstream"].ttfb))


def print_tables(results: list[tuple[int, dict[str, Side]]]) -> None:
    print("| streams | TTFB upstream, median | through the gateway | added, median | TTFB upstream, p95 | "
          "through the gateway | added, p95 | a bare relay adds, median | a bare relay adds, p95 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, sides in results:
        up, gw = sides["upstream"].ttfb, sides["gateway"].ttfb
        print(f"| {n} | {ms(statistics.median(up))} | {ms(statistics.median(gw))} | "
              f"{added(sides, 'gateway', statistics.median)} | {ms(p95(up))} | {ms(p95(gw))} | "
              f"{added(sides, 'gateway', p95)} | {added(sides, 'bare relay', statistics.median)} | "
              f"{added(sides, 'bare relay', p95)} |")
    print("\n| streams | whole stream upstream, median | through the gateway | added | turns per side |")
    print("|---:|---:|---:|---:|---:|")
    for n, sides in results:
        up, gw = statistics.median(sides["upstream"].total), statistics.median(sides["gateway"].total)
        print(f"| {n} | {ms(up)} | {ms(gw)} | {ms(gw - up)} | {len(sides['gateway'].total)} |")


def serve_gateway(port: int, upstream: int, url: str) -> None:
    """The gateway process: the reference server over Redis, its model the stand-in."""
    isolate_tree()
    import uvicorn
    from openai import AsyncOpenAI

    from redis_sessions import SessionConfig
    from redis_sessions.server import create_app, upstream_model

    model = upstream_model(AsyncOpenAI(base_url=f"http://127.0.0.1:{upstream}/v1", api_key="unused", max_retries=0))
    config = SessionConfig(url=url, key_prefix=f"bstream{os.getpid()}", ttl_seconds=3600)
    uvicorn.run(create_app(config=config, model=model), host="127.0.0.1", port=port, log_level="warning",
                access_log=False)


def serve_relay(port: int, upstream: int) -> None:
    """The floor: a Starlette app under uvicorn that passes upstream's bytes on as they
    come, through the HTTP client the gateway's openai client uses, with no Redis and no
    parsing. What it adds, any relay on this stack and machine adds."""
    import httpx2
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    http = httpx2.AsyncClient(base_url=f"http://127.0.0.1:{upstream}", timeout=None)

    async def relay(request: Request) -> Response:
        sent = http.build_request("POST", "/v1/responses", content=await request.body(),
                                  headers={"content-type": "application/json"})
        response = await http.send(sent, stream=True)
        return StreamingResponse(response.aiter_raw(), media_type="text/event-stream")

    uvicorn.run(Starlette(routes=[Route("/v1/responses", relay, methods=["POST"])]), host="127.0.0.1", port=port,
                log_level="warning", access_log=False)


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--pace-ms", type=float, default=20.0, help="the upstream's time between two deltas")
    p.add_argument("--words", type=int, default=20, help="deltas per answer")
    p.add_argument("--requests", type=int, default=8, help="turns per stream per round")
    p.add_argument("--streams", default="1,64", help="concurrencies, comma-separated")
    p.add_argument("--gateway", nargs=3, metavar=("PORT", "UPSTREAM_PORT", "URL"), help=argparse.SUPPRESS)
    p.add_argument("--relay", nargs=2, metavar=("PORT", "UPSTREAM_PORT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.relay:
        serve_relay(int(args.relay[0]), int(args.relay[1]))
        return
    if args.gateway:
        serve_gateway(int(args.gateway[0]), int(args.gateway[1]), args.gateway[2])
        return
    with redis_url(args.url) as url:
        ports = {name: free_port() for name in SIDES}
        with process([str(REPO / "tests" / "paced_upstream.py"), "--port", str(ports["upstream"]), "--pace-ms",
                      str(args.pace_ms), "--words", str(args.words)], ports["upstream"]), \
                process([__file__, "--relay", str(ports["bare relay"]), str(ports["upstream"])], ports["bare relay"]), \
                process([__file__, "--gateway", str(ports["gateway"]), str(ports["upstream"]), url], ports["gateway"]):
            stagger = args.pace_ms * args.words / 1000
            results = [(n, asyncio.run(measure(ports, n, args.requests, args.rounds, stagger)))
                       for n in (int(s) for s in args.streams.split(","))]
    print(f"{args.words} deltas {args.pace_ms:g} ms apart per stream, {args.rounds} alternating rounds of "
          f"{args.requests} turns per stream per side, loopback; times in ms\n")
    print_tables(results)


if __name__ == "__main__":
    main()
