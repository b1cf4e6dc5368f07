"""Everything the CLI writes: tables and JSON on stdout, progress and errors on stderr.

No dependency: a table is padded columns, a progress bar is one line rewritten
with ``\\r``. Progress is drawn only when stderr is a terminal and the output is
not ``--json``, so pipes and scripts never see it.

Credentials never reach the output: every URL shown goes through
:func:`redact_url`, and every line written to stderr (errors, notes, the purge
prompt) has the secrets of the URL in use (:func:`remember_secrets`) replaced.
"""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import datetime, timezone
from typing import Any, Sequence, TextIO
from urllib.parse import parse_qsl, quote, unquote, urlsplit

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


# -- credentials -------------------------------------------------------------
REDACTED = "***"
_SECRET_PARAM = re.compile(r"pass|secret|token|auth", re.I)
_USERINFO = re.compile(r"(//)[^/@?#]*@")
_secrets: set[str] = set()


def redact_url(url: str) -> str:
    """``url`` with its password (``user:password@``, ``:password@``) and any
    ``password=``-like query value replaced by ``***``; the user name is kept.
    Use it for every URL the CLI prints."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            user = userinfo.split(":", 1)[0] if ":" in userinfo else userinfo
            netloc = f"{user}:{REDACTED}@{host}" if ":" in userinfo else f"{user}@{host}"
        query = "&".join(
            f"{quote(k, safe='')}={REDACTED if _SECRET_PARAM.search(k) else quote(v, safe='')}"
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        )
        if "://" not in url:
            return parts._replace(netloc=netloc, query=query).geturl()
        text = f"{parts.scheme}://{netloc}{parts.path}"
        return text + (f"?{query}" if query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    except ValueError:  # not parsable as a URL: drop anything that could be user info
        return _USERINFO.sub(rf"\1{REDACTED}@", url)


def remember_secrets(url: str | None) -> None:
    """Note the password and secret query values of ``url`` (as written and decoded),
    so that :func:`scrub` removes them from any message, whoever wrote it."""
    if not url:
        return
    try:
        parts = urlsplit(url)
        found = [parts.password or ""] + [v for k, v in parse_qsl(parts.query) if _SECRET_PARAM.search(k)]
        userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
        found.append(userinfo.split(":", 1)[1] if ":" in userinfo else "")
    except ValueError:
        found = [m.group(0)[2:-1] for m in _USERINFO.finditer(url)]
    for secret in found:
        for form in (secret, unquote(secret)):
            if len(form) >= 3:  # "***" itself, or a one-letter password, would blank out ordinary text
                _secrets.add(form)
    _secrets.add(url)


def scrub(text: str) -> str:
    """``text`` with every remembered secret (and the whole URL it came in) replaced."""
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, redact_url(secret) if "://" in secret else REDACTED)
    return text


# -- errors and notes ---------------------------------------------------------
def error(message: str, *, code: str | None = None, as_json: bool = False) -> None:
    """The one line an error prints on stderr: never more, never a traceback, never a
    secret. With ``as_json`` it is ``{"error": {"code", "message", "type"}}`` (the
    shape of ``SessionError.to_dict()``), else ``error: <code>: <message>``."""
    text = scrub(" ".join(str(message).split()))
    if as_json:
        body = {"error": {"code": code or "internal", "message": text, "type": "session_error"}}
        print(json.dumps(body, ensure_ascii=False), file=sys.stderr)
    else:
        print(f"error: {code}: {text}" if code else f"error: {text}", file=sys.stderr)


def note(message: str, *, quiet: bool = False) -> None:
    if not quiet:
        print(scrub(message), file=sys.stderr)


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
