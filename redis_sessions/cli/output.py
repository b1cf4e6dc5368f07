"""Everything the CLI writes: tables and JSON on stdout, progress and errors on stderr.

No dependency: a table is padded columns, a progress bar is one line rewritten
with ``\\r``. Progress is drawn only when stderr is a terminal and the output is
not ``--json``, so pipes and scripts never see it.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone
from typing import Any, Sequence, TextIO

from ..codec import to_builtins


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return to_builtins(value)


def dumps(value: Any, *, indent: int | None = 2) -> str:
    return json.dumps(value, indent=indent, default=_default, ensure_ascii=False)


def print_json(value: Any) -> None:
    print(dumps(value))


def preview(value: Any, width: int = 40) -> str:
    """One line of at most ``width`` characters: the text of an item, else its JSON."""
    text = item_text(value) if isinstance(value, (dict, list)) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


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
    """A TTL for people: ``-`` for none, else the two largest units."""
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


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()
    print(line, file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip(), file=out)


def pairs(rows: Sequence[tuple[str, Any]], out: TextIO | None = None) -> None:
    """``label   value`` lines, labels aligned."""
    out = out or sys.stdout
    width = max((len(k) for k, _ in rows), default=0)
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}", file=out)


def error(message: str) -> None:
    """The one line an error prints: never more, never a traceback."""
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)


def note(message: str, *, quiet: bool = False) -> None:
    if not quiet:
        print(message, file=sys.stderr)


class Progress:
    """A single-line progress indicator on stderr, redrawn at most 10 times a second.

    With ``total`` it draws a bar; without, a counter. Disabled (a no-op) when
    stderr is not a terminal or ``enabled`` is false.
    """

    def __init__(self, label: str, total: int | None = None, *, enabled: bool = True) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.extra = ""
        self.enabled = enabled and sys.stderr.isatty()
        self._last = 0.0
        self._drawn = False

    def advance(self, n: int = 1, extra: str | None = None) -> None:
        self.update(self.done + n, extra)

    def update(self, done: int, extra: str | None = None) -> None:
        self.done = done
        if extra is not None:
            self.extra = extra
        now = time.monotonic()
        if self.enabled and now - self._last >= 0.1:
            self._last = now
            self._draw()

    def _draw(self) -> None:
        if self.total:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(frac * 30)
            text = f"{self.label} [{bar:<30}] {self.done}/{self.total} {frac:4.0%}"
        else:
            text = f"{self.label} {self.done}"
        if self.extra:
            text += f"  {self.extra}"
        sys.stderr.write("\r" + text[:119].ljust(119 if self._drawn else 0))
        sys.stderr.flush()
        self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            sys.stderr.write("\r" + " " * 119 + "\r")
            sys.stderr.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
