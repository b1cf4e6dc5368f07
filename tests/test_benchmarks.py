"""The benchmarks are not measured here (they are measurements, not tests), but they must
not rot: each one imports, bench_peers.py runs its ``--quick`` smoke run alone and
against a base commit (structure only), and bench_sync.py runs a few calls."""

from __future__ import annotations

import html
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from servers import REDIS_SERVER

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(autouse=True)
def on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))


@pytest.mark.parametrize("name", sorted(p.stem for p in BENCHMARKS.glob("bench_*.py")))
def test_each_benchmark_imports_and_has_a_main(name):
    module = importlib.import_module(name)
    assert callable(module.main)


# Every row bench_peers.py prints, as (how its name starts, what else it holds).
PEER_ROWS = [(what, kind) for what in ("pop_item:", "pop_item against the least exactly-once pop:", "add_items (1 item)",
                                       "get_items(limit=20), 200 items", "get_items(), 200 items", "save 0.7 KB (",
                                       "save 20 KB (", "get 0.7 KB", "resolve_chain, depth 64 of 0.7 KB,",
                                       "resolve_chain, depth 10 of 0.7 KB,", "resolve_chain, depth 64 of 20 KB,")
             for kind in (": wall", ": Redis CPU")]
PEER_ROWS += [(f"save {size}{what}:", "Redis CPU") for size in ("0.7 KB", "20 KB") for what in ("", " against its floor")]
PEER_ROWS += [(f"pop_item floor: {what}", kind) for what in ("an EVALSHA that only RPOPs", "RPOP + token ring only:",
                                                            "RPOP + token ring + its item kept")
              for kind in (": wall", ": Redis CPU")]
PEER_ROWS += [(f"save {size} floor: parent check + token ring only", "Redis CPU") for size in ("0.7 KB", "20 KB")]
PEER_ROWS += [(f"gateway turn, {n}", kind) for n in ("conversations of 10 turns, 1 worker process:",
                                                    "depth 10 to 35, 1 worker process:",
                                                    "depth 10 to 35, 4 worker processes:")
              for kind in ("turns per second", "worker CPU", "Redis CPU")]
PEER_ROWS += [(f"memory per stored response, {size}", "") for size in ("0.7 KB", "20 KB")]

# Issue 40's targets, on the rows it sets them for (a row's name up to its figure's kind).
ISSUE_40_TARGETS = {
    "save 0.7 KB against its floor: Redis CPU": "≤ 1.15",
    "save 20 KB against its floor: Redis CPU": "≤ 1.15",
    "pop_item against the least exactly-once pop: wall": "≥ 0.9",
    "pop_item against the least exactly-once pop: Redis CPU": "≤ 1.2",
    "get 0.7 KB: wall": "≥ 0.95",
    "resolve_chain, depth 64 of 0.7 KB, by a worker that did not save it: wall": "≥ 9.5",
    "resolve_chain, depth 10 of 0.7 KB, by a worker that did not save it: wall": "≥ 4.5",
    "get_items(limit=20), 200 items: wall": "≥ 1.2",
    "get_items(limit=20), 200 items: Redis CPU": "≤ 1.5",
    "get_items(), 200 items: wall": "≥ 2",
    "get_items(), 200 items: Redis CPU": "≤ 1.5",
    "gateway turn, conversations of 10 turns, 1 worker process: turns per second": "≥ 2",
}

# The rows whose "ours" is a floor script, not the package: no base figure.
FLOOR = re.compile(r"^(pop_item|save [\d.]+ KB) floor: ")


def _number(cell: str) -> float:
    return float(cell.split()[0].rstrip("x").replace(",", ""))


@pytest.mark.real
@pytest.mark.slow
@pytest.mark.skipif(not REDIS_SERVER, reason="redis-server is not installed")
@pytest.mark.parametrize("base", [None, "HEAD"], ids=["alone", "base"])
def test_the_peers_benchmark_runs_and_prints_every_row(tmp_path, base):
    """``bench_peers.py --quick`` on its own private server: the header, one table with
    every row (a number in ours, a ratio and a verdict where there is a target, issue 40's
    targets where it sets them), and the chart; with ``--base``, the base's figure beside
    every row that measures the package (a worker importing ``git archive HEAD``'s) and
    new / base. Structure only: a smoke run's timings mean nothing."""
    svg, front = tmp_path / "peers.svg", tmp_path / "front.svg"
    run = subprocess.run([sys.executable, str(BENCHMARKS / "bench_peers.py"), "--quick", "--svg", str(svg),
                          "--front", str(front), *(["--base", base] if base else [])],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("redis-server ") and "hiredis " in lines[0] and "Python " in lines[0]
    assert ("against base HEAD (" in lines[0]) == bool(base)
    assert lines[1].startswith("command: ") and "--quick" in lines[1]
    table = [line for line in lines if line.startswith("|")]
    header = "| measurement | peer | ours | peer's | ratio | target | met |" + (" base | new / base |" if base else "")
    assert table[0] == header and len(table) == len(lines) - lines.index(table[0])
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table[2:]]
    assert all(len(row) == (9 if base else 7) for row in cells)
    assert len(cells) == len(PEER_ROWS)
    for start, kind in PEER_ROWS:
        assert sum(row[0].startswith(start) and kind in row[0] for row in cells) == 1, (start, kind)
    for what, target in ISSUE_40_TARGETS.items():
        assert [row[5] for row in cells if row[0].startswith(what)] == [target], what
    for what, peer, ours, theirs, ratio, target, met, *against in cells:
        assert _number(ours) > 0, what
        assert (peer == "none") == (theirs == "" == ratio), what
        assert met in ("", "yes", "no"), what
        assert bool(target) == (met != ""), what
        if base:
            figure, moved = against
            assert (figure == "" == moved) == bool(FLOOR.match(what)), what
            assert FLOOR.match(what) or (_number(figure) > 0 and moved.endswith("x") and _number(moved) > 0), what
    chart = svg.read_text()
    assert "<svg" in chart and ("the base's" in chart) == bool(base)
    # the README's picture: at most 6 rows, each a measure of ours against a named peer, all
    # "times better" (higher is better), the server and the command that drew it under it,
    # and no machine path
    picture = html.unescape(front.read_text())
    import bench_peers
    assert 0 < len(bench_peers.FRONT) <= 6
    for name, what, peer in bench_peers.FRONT:
        assert sum(row[0] == name for row in cells) == 1, name
        assert what in picture and f"against {peer}" in picture, what
    assert "higher is better" in picture and ("redis-server 7" in picture or "Valkey" in picture)
    assert "python benchmarks/bench_peers.py --quick" in picture and str(tmp_path) not in picture


def test_the_front_picture_counts_every_row_as_times_better() -> None:
    """A speed row is taken as the table takes it (peer time / ours, ours / peer turns/s),
    a cost row (ours / peer) turned over: higher is better on every row."""
    import bench_peers
    rows = [bench_peers.Row(name, "peer", 1.0, 1.0, ratio=2.0,
                            sense="ours / GodeX" if name.startswith("memory") else
                            "ours / GodeX turns/s" if "turns per second" in name else "peer time / ours")
            for name, _, _ in bench_peers.FRONT]
    got = dict(bench_peers.front_rows(rows))
    assert len(got) == len(bench_peers.FRONT)
    assert [v for k, v in got.items() if k.startswith("memory")] == [0.5]
    assert all(v == 2.0 for k, v in got.items() if not k.startswith("memory"))


@pytest.mark.real
@pytest.mark.slow
def test_the_sync_benchmark_runs_and_prints_both_rows(redis_server):
    """``bench_sync.py`` with a few calls on the test server: both rows, each with two
    rates and their ratio. Structure only."""
    run = subprocess.run([sys.executable, str(BENCHMARKS / "bench_sync.py"), "--url", redis_server.url,
                          "--rounds", "2", "--calls", "5"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in run.stdout.splitlines()
            if line.startswith("| save") or line.startswith("| get")]
    assert [row[0] for row in rows] == ["save", "get"]
    for _, ours, raw, ratio in rows:
        assert float(ours.replace(",", "")) > 0 and float(raw.replace(",", "")) > 0
        assert float(ratio) == pytest.approx(float(ours.replace(",", "")) / float(raw.replace(",", "")), abs=0.01)
