"""Time, imported from one place so tests can replace it with a fake clock."""

from __future__ import annotations

import time
from typing import Callable

Clock = Callable[[], float]


def system_clock() -> float:
    return time.time()


class FakeClock:
    """A clock that moves only when told: ``clock.advance(seconds)``."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
