"""The ``redis-sessions`` command: a demo, inspection and clean-up of stored sessions.

Every command takes ``--url`` (else ``$REDIS_SESSIONS_URL``; ``redis+cluster://``
or ``?cluster=true`` for Redis Cluster), ``--prefix`` and ``--json``. Exit
codes: 0 success, 1 an error (one line on stderr: ``error: <code>: <message>``,
or with ``--json`` ``{"error": {"code": ..., "message": ..., "type": ...}}``),
2 bad usage (with ``--json``, the same JSON line, code ``session.input.invalid``).
No output ever shows the URL's password (:func:`.output.redact_url`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any, NoReturn, Sequence

from ..errors import ErrorCode, SessionError
from ..keys import DEFAULT_PREFIX
from . import output
from .common import DEFAULT_URL, ENV_URL, Target, check_server, url_from
from .embedded import KINDS as EMBEDDED_KINDS
from .purge import IDLE_HELP

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2

DESCRIPTION = """\
Conversation state for LLM agents in Redis: run a multi-process demo, inspect
stored responses and item sessions, and clean up."""

EPILOG = f"""\
Redis URL: --url, else ${ENV_URL}, else {DEFAULT_URL} (the demo instead starts
an embedded server). Cluster: redis+cluster://host:port or ?cluster=true.

examples:
  redis-sessions demo
  redis-sessions demo --url redis+cluster://127.0.0.1:7000 --workers 8
  redis-sessions chain resp_... --prefix rs
  redis-sessions stats --json
  redis-sessions purge --idle-older-than 2592000 --yes   (keys last written over 30 days ago)"""


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


class _Parser(argparse.ArgumentParser):
    """Usage errors as one JSON line too, when the command line asks for --json."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if _Parser.json_errors:
            output.error(f"{self.prog}: {message}", code=ErrorCode.INPUT_INVALID.value, as_json=True)
            sys.exit(EXIT_USAGE)
        super().error(message)


def _common(defaults: bool) -> _Parser:
    """--url/--prefix/--json, accepted before or after the command name."""
    parser = _Parser(add_help=False)
    default: Any = None if defaults else argparse.SUPPRESS
    parser.add_argument("--url", default=default, help=f"Redis URL (default: ${ENV_URL}, else {DEFAULT_URL})")
    parser.add_argument("--prefix", default=default, help=f"key prefix (default: {DEFAULT_PREFIX}; demo: a fresh demo-xxxxxx)")
    parser.add_argument("--json", action="store_true", default=False if defaults else argparse.SUPPRESS,
                        help="machine-readable JSON on stdout")
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="redis-sessions", description=DESCRIPTION, epilog=EPILOG, parents=[_common(True)],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = [_common(False)]

    def command(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=description or help, parents=common,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    demo = command("demo", "run worker processes serving many conversations, then check every one", DEMO_HELP)
    demo.add_argument("--workers", type=_positive, default=4, help="worker processes (default 4)")
    demo.add_argument("--conversations", type=_positive, default=60, help="conversations (default 60)")
    demo.add_argument("--turns", type=_positive, default=8, help="turns per conversation (default 8)")
    demo.add_argument("--ttl", type=_positive, default=3600, help="TTL of the demo's records in seconds (default 3600)")
    demo.add_argument("--seed", type=int, default=0, help="seed for the choice of workers (default 0)")
    demo.add_argument("--embedded", choices=EMBEDDED_KINDS, default=None,
                      help="without --url: which embedded server (default auto: redis-server if installed, else fake)")

    show = command("show", "one stored response, decoded, with its TTL and size")
    show.add_argument("id", help="response id")

    chain = command("chain", "the chain resolve_chain rebuilds for a response id")
    chain.add_argument("id", help="response id (the previous_response_id of the next request)")
    chain.add_argument("--max-depth", type=_positive, default=None, help="longest chain to accept (default: the store's, 64)")
    chain.add_argument("--include-incomplete", action="store_true", help="accept turns that are not completed")

    items = command("items", "an item session's items")
    items.add_argument("session_id", help="item session id")
    items.add_argument("--limit", type=_positive, default=None, help="only the last N items")

    stats = command("stats", "counts, memory and TTLs of everything under a prefix (SCAN on every primary)")
    stats.add_argument("--sample", type=int, default=200, help="keys to measure with MEMORY USAGE (default 200)")

    delete = command("delete", "delete one response (its descendants stay and then end at a gap)")
    delete.add_argument("id", help="response id")

    purge = command("purge", "delete the keys of a prefix: all, or only idle ones", PURGE_HELP)
    purge.add_argument("--idle-older-than", type=float, default=None, metavar="SECONDS", help=IDLE_HELP)
    purge.add_argument("--yes", action="store_true", help="do not ask; required when stdin is not a terminal")
    return parser


DEMO_HELP = """\
Start N worker processes and serve a scripted workload of multi-turn
conversations: each turn goes to a random worker, which resolves the chain
from previous_response_id, makes a deterministic fake reply and saves it with
the parent check. Some conversations branch, some race two workers on one
response id (exactly one save wins; the other gets session.store.conflict),
some use item sessions. At the end every conversation is re-read and compared.
Exits 1 if anything was lost or wrong.

Without --url (or $REDIS_SESSIONS_URL) it starts its own server: redis-server
on a free port in a temporary folder if installed, else fakeredis's TCP server
(pip install 'redis-sessions[demo]')."""

PURGE_HELP = """\
Delete the keys of --prefix: threads, item sessions and locators, found with
SCAN on every primary. Every key of a prefix starts with '<prefix>:{' and no
other prefix's does, so keys of other prefixes are never read, counted or
deleted; keys under '<prefix>:{' that are not of this layout are left and
counted. Locators of the old layout ('<prefix>:loc:<id>') are deleted only
where purge proves they are this prefix's. A key that fails (NOPERM, ...) is
counted, and purge exits 1 naming how many failed and why. Asks for
confirmation unless --yes, and refuses without --yes when stdin is not a
terminal."""


def _target(args: argparse.Namespace, url: str | None) -> Target:
    return Target(url=url or DEFAULT_URL, prefix=args.prefix or DEFAULT_PREFIX, json=args.json)


async def _run(args: argparse.Namespace) -> int:
    from . import inspect, purge

    url = url_from(args.url)
    output.remember_secrets(url)
    if args.command == "demo":
        return await _demo(args, url)
    target = _target(args, url)
    await check_server(target)
    if args.command == "show":
        return await inspect.show(target, args.id)
    if args.command == "chain":
        return await inspect.chain(target, args.id, args.max_depth, args.include_incomplete)
    if args.command == "items":
        return await inspect.items(target, args.session_id, args.limit)
    if args.command == "stats":
        return await inspect.stats(target, args.sample)
    if args.command == "delete":
        return await purge.delete(target, args.id)
    if args.command == "purge":
        return await purge.purge(target, args.idle_older_than, args.yes)
    raise SessionError(ErrorCode.INPUT_INVALID, f"unknown command {args.command!r}")


async def _demo(args: argparse.Namespace, url: str | None) -> int:
    from .demo import DemoOptions, default_prefix, print_summary, run_demo
    from .embedded import embedded

    prefix = args.prefix or default_prefix()

    async def go(url: str, backend: str) -> int:
        opts = DemoOptions(url=url, prefix=prefix, backend=backend, workers=args.workers,
                           conversations=args.conversations, turns=args.turns, ttl_seconds=args.ttl,
                           seed=args.seed, json=args.json)
        result = await run_demo(opts)
        if isinstance(result.get("url"), str):
            result = {**result, "url": output.redact_url(result["url"])}
        if args.json:
            output.print_json(result)
        else:
            print_summary(result)
        return EXIT_OK if result["ok"] else EXIT_ERROR

    if url is not None:
        if args.embedded:
            raise SessionError(ErrorCode.INPUT_INVALID, "--embedded and --url (or $REDIS_SESSIONS_URL) exclude each other")
        await check_server(_target(args, url))
        return await go(url, f"Redis at {output.redact_url(url)}")
    with embedded(args.embedded or "auto") as server:
        output.note(f"using {server.description}", quiet=args.json)
        return await go(server.url, server.description)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = _Parser.json_errors = "--json" in argv
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 on bad usage
    try:
        return asyncio.run(_run(args))
    except SessionError as exc:
        output.error(exc.message, code=exc.code.value, as_json=as_json)
    except KeyboardInterrupt:
        output.error("interrupted", code="interrupted", as_json=as_json)
        return 130
    except BrokenPipeError:  # `| head` closed stdout: stop quietly, like other Unix tools
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # never a traceback for a person at a terminal
        output.error(f"{type(exc).__name__}: {exc}", code="internal", as_json=as_json)
    return EXIT_ERROR


__all__ = ["build_parser", "main"]
