"""The benchmarks are not run here (they are measurements, not tests), but they must not
rot: each one imports, and the save-parts benchmark's cuts still find their lines in the
save script and still compile, so a change to lua/chain_lib.lua that moves a line fails
here rather than in the next measurement."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from lupa.lua51 import LuaRuntime  # the Lua of Redis and of fakeredis: a second Lua in one process crashes

from chains import make_store
from redis_sessions.responses.redis_engine import _save_args
from redis_sessions.scripts import script

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(autouse=True)
def on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))


@pytest.mark.parametrize("name", sorted(p.stem for p in BENCHMARKS.glob("bench_*.py")))
def test_each_benchmark_imports_and_has_a_main(name):
    module = importlib.import_module(name)
    assert callable(module.main)


def test_every_cut_of_the_save_finds_its_line_and_compiles():
    parts = importlib.import_module("bench_save_parts")
    source = script("chain_save").source
    lua = LuaRuntime()
    versions = [parts.cut_after(source, line) for _, line in parts.CUTS]
    assert versions[0] == "return 'ok'\n" and versions[-1] == source  # an empty script, the whole save
    assert len(set(versions)) == len(versions)
    for version in versions:
        lua.compile(version)  # raises LuaSyntaxError on a cut that broke a block


async def test_the_cuts_before_the_hset_write_nothing_and_the_rest_save(redis_backend):
    """What the benchmark's steps claim: the save writes nothing before its HSET (every
    check and the clock come first), and a cut after it has stored the record."""
    parts = importlib.import_module("bench_save_parts")
    cost = importlib.import_module("bench_chain_cost")
    client = redis_backend.client
    source = script("chain_save").source
    writes_from = [name for name, _ in parts.CUTS].index("+ the HSET")
    for at, (name, line) in enumerate(parts.CUTS):
        store = make_store(redis_backend)
        ids = await cost.chain(store, 10, 0)
        thread, request = await parts.next_save(store, ids[-1], 10, 0)
        key = store.keys.thread(thread)
        before = await client.hgetall(key)
        reply = await client.eval(parts.cut_after(source, line), 1, key, *_save_args(request))
        assert reply in (b"ok", "ok"), name
        after = await client.hgetall(key)
        field = store.keys.data_field(request.response_id).encode()
        if at < writes_from:
            assert after == before, name
        else:
            assert field not in before and after[field] == request.blob, name
