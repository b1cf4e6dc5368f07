"""Issue 39, row 13: measured numbers drifted between the docs and the code (compression
ratios of 1.8x/2.4x in the README, 1.6x/2.6x in config.py, 2.39x in codec.py; microsecond
costs in docstrings that no benchmark reprinted). Measured figures live in
docs/benchmarks.md only; everything else links there. A ratio or a time in microseconds
anywhere else a user reads is a copy that will drift. Bounds the code enforces (5 ms,
10 ms) are settings, not measurements, and are written in ms.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MEASURED = re.compile(r"(?<![\w.:%])\d[\d,]*(?:\.\d+)?x\b|\b\d[\d,]*(?:\.\d+)? ?(?:us|µs)\b")


def read_by_users() -> list[Path]:
    files = [*REPO.joinpath("redis_sessions").rglob("*.py"), *REPO.joinpath("lua").glob("*.lua"),
             REPO / "README.md", REPO / "pyproject.toml", *REPO.joinpath("docs").glob("*.md")]
    return [f for f in files if f.name != "benchmarks.md"]


def test_the_pattern_finds_what_drifted() -> None:
    """What 0288008 carried is found (the test can fail)."""
    for text in ("packs 2.39x", "(about 2.6x)", "costs 68 us", "1.2 µs a KB", "1.06x at depth 64"):
        assert MEASURED.search(text), text
    for text in ("0x1f", "%016x", "5 ms", "x-request-id", "2 pops", "v1.2"):
        assert not MEASURED.search(text), text


def test_measured_figures_live_in_docs_benchmarks_only() -> None:
    files = read_by_users()
    assert len(files) > 40
    found = [f"{f.relative_to(REPO)}:{n}: {m.group(0)}" for f in files
             for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) for m in MEASURED.finditer(line)]
    assert found == [], "link to docs/benchmarks.md instead of copying a figure:\n" + "\n".join(found)
