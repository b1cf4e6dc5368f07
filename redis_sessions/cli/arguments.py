"""What a number on the command line may be: ASCII digits, within a stated range.

Python's ``int`` and ``float`` take more than a person means (``nan``, ``inf``,
``1e999``, ``1_000``, Arabic-Indic or full-width digits, 5,000-digit numbers), and
what they let through failed later as ``internal`` or as a Redis error. Every
numeric option is read here instead, and anything else is a usage error: the
parser's one ``session.input.invalid`` line, exit 2, before any work.
"""

from __future__ import annotations

import argparse
import re
from typing import Callable

_WHOLE = re.compile(r"-?[0-9]{1,19}")
_DECIMAL = re.compile(r"[0-9]{1,19}(\.[0-9]{1,9})?")


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def whole(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``low`` to ``high``, in ASCII digits."""

    def parse(text: str) -> int:
        if not _WHOLE.fullmatch(text) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low:,} to {high:,}, got {_shown(text)}")
        return int(text)

    return parse


def seconds(high: int) -> Callable[[str], float]:
    """An argparse ``type``: a number of seconds from 0 to ``high`` (a fraction allowed), in ASCII digits."""

    def parse(text: str) -> float:
        if not _DECIMAL.fullmatch(text) or not float(text) <= high:
            raise argparse.ArgumentTypeError(f"must be a number of seconds from 0 to {high:,} "
                                             f"(digits, an optional fraction), got {_shown(text)}")
        return float(text)

    return parse
