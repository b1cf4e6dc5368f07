"""Everything the CLI writes: tables and JSON on stdout, progress and errors on stderr.

Tables and progress bars are drawn by ``rich`` (the ``cli`` extra), which measures
text by its width on screen, so a conversation in Chinese or with emoji lines up;
``rich`` is imported only when a table or a bar is drawn, so the library never
loads it. Without it a table is refused in one line naming the extra (``--json``
needs nothing), and progress is simply not shown. Progress is drawn only when
stderr is a terminal and the output is not ``--json``, so pipes never see it.

Neither credentials nor hosts reach the output: no URL is printed, and every line
written to stderr (errors, notes, the purge prompt) has the URL and the secrets of the
settings in use (:func:`remember_secrets`) replaced, and the address of redis-py's
connection errors too (:func:`one_line`).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import parse_qsl, unquote, urlsplit

from ..codec import to_builtins
from ..errors import ErrorCode, SessionError

EXTRA_HINT = "pip install -e '.[cli]' in a checkout of redis-sessions"


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return to_builtins(value)


def dumps(value: Any, *, indent: int | None = 2) -> str:
    return json.dumps(value, indent=indent, default=_default, ensure_ascii=False)


def print_json(value: Any) -> None:
    print(dumps(value))


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 turn``, ``2 turns``; ``many`` for the irregular ones (``1 entry``, ``2 entries``)."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def preview(value: Any) -> str:
    """One line: the text of an item, else its JSON (a table cuts it to its column)."""
    text = item_text(value) if isinstance(value, (dict, list)) else str(value)
    return " ".join(text.split())[:500]


def item_text(value: Any) -> str:
    """The human part of Responses-API items: message text, else compact JSON."""
    if isinstance(value, list):
        return " | ".join(item_text(v) for v in value)
    if isinstance(value, dict):
        content = value.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [str(c["text"]) for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)]
            if texts:
                return " ".join(texts)
        if isinstance(value.get("text"), str):
            return str(value["text"])
    return dumps(value, indent=None)


def timestamp(seconds: int | float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def duration(ms: int | None) -> str:
    """A TTL for people: ``none`` for none, else the two largest units."""
    if ms is None or ms < 0:
        return "none"
    seconds = ms // 1000
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts[:2])


def size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")


def pairs(rows: Sequence[tuple[str, Any]]) -> None:
    """``label   value`` lines, labels aligned (the labels are ours, plain ASCII)."""
    width = max((len(k) for k, _ in rows), default=0)
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")


# -- tables and progress (rich, the cli extra) ---------------------------------------
def _rich() -> Any:
    try:
        import rich.console
        import rich.table
    except ImportError:
        raise SessionError(ErrorCode.INPUT_INVALID,
                           f"tables need the cli extra: {EXTRA_HINT} (or add --json)") from None
    return rich


def need_tables() -> None:
    """Refuse at once, before any work, when a command's human output needs ``rich``."""
    _rich()


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, wide: Sequence[str] = ()) -> None:
    """A table on stdout. Columns named in ``wide`` are free text: cut with an ellipsis to
    what fits the terminal; the others (ids, counts) are never cut."""
    rich = _rich()
    from rich import box

    console = rich.console.Console(highlight=False, markup=False, emoji=False, soft_wrap=False)
    if not console.is_terminal:  # a pipe: wide enough that no id is ever folded
        console = rich.console.Console(highlight=False, markup=False, emoji=False, width=max(160, console.width))
    grid = rich.table.Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for header in headers:
        cut = header in wide
        grid.add_column(header, no_wrap=True, overflow="ellipsis" if cut else "fold", ratio=1 if cut else None)
    for row in rows:
        grid.add_row(*(str(cell) for cell in row))
    console.print(grid)


@contextlib.contextmanager
def progress(label: str, total: int | None = None, *, enabled: bool = True) -> Iterator[Callable[..., None]]:
    """``with progress("scanning") as step: step(advance=n)`` or ``step(completed=n, extra=...)``:
    a bar on stderr while it runs (rich, when installed and stderr is a terminal), gone after."""
    if not enabled or not sys.stderr.isatty():
        yield lambda **_: None
        return
    try:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    except ImportError:
        yield lambda **_: None
        return
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[extra]}")]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total, extra="")

        def step(advance: int = 0, completed: int | None = None, extra: str | None = None) -> None:
            fields: dict[str, Any] = {} if extra is None else {"extra": extra}
            bar.update(task, advance=advance or None, completed=completed, **fields)

        yield step


# -- credentials -------------------------------------------------------------
REDACTED = "***"
_SECRET_PARAM = re.compile(r"pass|secret|token|auth", re.I)
_USERINFO = re.compile(r"(//)[^/@?#]*@")
_secrets: dict[str, str] = {}
"""What :func:`scrub` replaces, and with what."""


def remember_secrets(url: str | None, *others: str | None) -> None:
    """Note ``url`` (it names a host), its password and secret query values (as written
    and decoded), and ``others`` (the password setting), so that :func:`scrub` removes
    them from any message."""
    found: list[str] = [other or "" for other in others]
    if url:
        try:
            parts = urlsplit(url)
            found += [parts.password or ""] + [v for k, v in parse_qsl(parts.query) if _SECRET_PARAM.search(k)]
            userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
            found.append(userinfo.split(":", 1)[1] if ":" in userinfo else "")
        except ValueError:
            found += [m.group(0)[2:-1] for m in _USERINFO.finditer(url)]
        _secrets[url] = "<the URL>"
    for secret in found:
        for form in (secret, unquote(secret)):
            if len(form) >= 3:  # "***" itself, or a one-letter password, would blank out ordinary text
                _secrets.setdefault(form, REDACTED)


def scrub(text: str) -> str:
    """``text`` with every remembered secret, and the whole URL, replaced."""
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, _secrets[secret])
    return text


# -- errors and notes ---------------------------------------------------------
_REPR = re.compile(r"\s*:?\s*<(?:[A-Za-z_]\w*\.[\w.]*[^<>]*|REDACTED)>")
"""An object's repr (``<redis.asyncio.client.Redis(...)>``), innermost first: no ``<`` inside."""
_ADDRESS = re.compile(r"(connecting to) \S+:[0-9]+\b|(Connect call failed) \([^()]*\)")
"""The address in redis-py's ``Error 111 connecting to <host>:<port>. Connect call failed (<host>, <port>).``"""
MAX_ERROR = 400


def one_line(message: str) -> str:
    """A message as one readable line: no object reprs (redis-py puts a connection pool's
    in some errors), no secrets, no host redis-py names, at most ``MAX_ERROR`` characters."""
    text = " ".join(str(message).split())
    while True:
        stripped = _REPR.sub("", text)  # innermost reprs first, until none is left
        if stripped == text:
            break
        text = stripped
    text = scrub(_ADDRESS.sub(lambda m: f"{m.group(1)} the server" if m.group(1) else str(m.group(2)), text))
    return text if len(text) <= MAX_ERROR else text[: MAX_ERROR - 1] + "…"


def error(message: str, *, code: str | None = None, as_json: bool = False) -> None:
    """The one line an error prints on stderr: never more, never a traceback, never a
    secret. With ``as_json`` it is ``{"error": {"code", "message", "type"}}`` (the
    shape of ``SessionError.to_dict()``), else ``error: <code>: <message>``."""
    text = one_line(message)
    if as_json:
        body = {"error": {"code": code or "internal", "message": text, "type": "session_error"}}
        print(json.dumps(body, ensure_ascii=False), file=sys.stderr)
    else:
        print(f"error: {code}: {text}" if code else f"error: {text}", file=sys.stderr)


def note(message: str, *, quiet: bool = False) -> None:
    if not quiet:
        print(scrub(message), file=sys.stderr)
