"""benchmarks/bench_core.py runs: a quick pass (two rounds of a few calls per side, base
75ffa5b against this tree, on its own redis-server) prints a row with positive figures
for each of the six fast paths."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_core.py"

pytestmark = [pytest.mark.slow, pytest.mark.real]


def test_the_quick_pass_prints_all_six_rows():
    out = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = {m[1]: m.groups()[1:] for m in re.finditer(r"^\| (\w+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| "
                                              r"([\d.]+) \| ([\d.]+) \|$", out.stdout, re.M)}
    assert set(rows) == {"save", "get", "resolve_chain", "add_items", "get_items", "pop_item"}, out.stdout
    assert all(float(x) > 0 for row in rows.values() for x in row), out.stdout
