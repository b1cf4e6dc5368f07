"""The one exactly-once mechanism (lua/tokens.lua, redis_sessions/tokens.py), run as Redis runs it.

The stores' own tests prove what each write does with its token; these pin the
library itself: the constants Python states, keyed tokens and their bodies, and
what a ring of another format becomes.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from conftest import Backend
from redis_sessions import tokens

LUA = Path(__file__).resolve().parent.parent / "lua"
LIB = (LUA / "tokens.lua").read_text()


def test_python_states_the_scripts_bounds() -> None:
    assert f"local TOKENS_RETAIN_S, TOKENS_MAX_BYTES = {tokens.RETAIN_S}, {tokens.MAX_BYTES}\n" in LIB
    assert tokens.RETAIN_MS == tokens.RETAIN_S * 1000


def test_every_script_carries_the_library_functions_it_calls_and_no_other() -> None:
    """A script is sent with the functions of its libraries that it calls, directly or
    through another (redis_sessions/scripts.py): every one it calls is defined in front of
    it, and the walk, the hot read, carries none of the save's."""
    from redis_sessions.scripts import LIBS, lua_folder, script

    for name, libs in LIBS.items():
        offered = {f for lib in libs
                   for f in re.findall(r"^local function (\w+)", lua_folder().joinpath(f"{lib}.lua").read_text(), re.M)}
        source = script(name).source
        defined = set(re.findall(r"^local function (\w+)", source, re.M))
        called = set(re.findall(r"\b(\w+)\s*\(", re.sub(r"--[^\n]*", "", source))) & offered
        assert called <= defined, (name, called - defined)
    walk = set(re.findall(r"^local function (\w+)", script("chain_walk").source, re.M))
    assert "header" in walk and not walk & {"save_check", "save_write", "sweep", "token_push"}


def test_a_keyed_token_is_the_key_and_a_fingerprint_of_the_body() -> None:
    one = tokens.keyed_token("turn-1", [b"a", b"b"])
    assert re.fullmatch(rb"k[0-9a-f]{16}\.[0-9a-f]{8}", one)
    assert tokens.keyed_token("turn-1", [b"a", b"b"]) == one
    assert tokens.keyed_token("turn-1", [b"ab"]).split(b".")[0] == one.split(b".")[0]
    assert tokens.keyed_token("turn-1", [b"ab"]) != one  # framed: [a, b] is not [ab]
    assert tokens.keyed_token("turn-2", [b"a", b"b"]).split(b".")[0] != one.split(b".")[0]
    assert re.fullmatch(rb"[0-9a-f]{16}", tokens.new_token())


async def run(backend: Backend, body: str, *args: Any) -> Any:
    return await backend.client.eval(LIB + "\n" + body, 0, *args)


async def test_find_and_push_on_the_server(redis_backend: Backend) -> None:
    push = "return token_push(ARGV[1], ARGV[2], ARGV[3], server_ms())"
    ring = await run(redis_backend, push, "", b"0123456789abcdef", "S")
    assert re.fullmatch(rb"\d{10}0123456789abcdef S\n", ring)
    keyed = tokens.keyed_token("k", [b"body"])
    ring = await run(redis_backend, push, ring, keyed, "a3")
    find = "local r = token_find(ARGV[1], ARGV[2]) if r == false then return 'reused' end return r"
    assert await run(redis_backend, find, ring, b"0123456789abcdef") == b"S"
    assert await run(redis_backend, find, ring, keyed) == b"a3"
    assert await run(redis_backend, find, ring, tokens.keyed_token("k", [b"other"])) == b"reused"
    assert await run(redis_backend, find, ring, b"fedcba9876543210") is None
    assert await run(redis_backend, find, ring, b"") is None
    # a token that only occurs inside another entry is no match
    assert await run(redis_backend, find, ring, b"456789abcdef") is None


async def test_a_ring_of_another_format_is_dropped_by_the_next_write(redis_backend: Backend) -> None:
    push = "return token_push(ARGV[1], ARGV[2], 'S', server_ms())"
    for old in (b"0123456789abcdefS", b"0123456789abcdef a\n", b"garbage\nmore\n"):
        ring = await run(redis_backend, push, old, b"ffffffffffffffff")
        assert ring.split(b"\n")[:-1][-1].endswith(b"ffffffffffffffff S")
        assert b"0123456789abcdef" not in ring and b"garbage" not in ring


async def test_the_ring_forgets_by_time_and_holds_its_byte_bound(clocked: Backend) -> None:
    push = "return token_push(ARGV[1], ARGV[2], 'S', server_ms())"
    ring = b""
    for n in range(200):
        ring = await run(clocked, push, ring, b"%016x" % n)
        assert len(ring) <= tokens.MAX_BYTES
    assert ring.endswith(b"%016x S\n" % 199)
    clocked.clock.advance(tokens.RETAIN_S + 1.5)
    ring = await run(clocked, push, ring, b"f" * 16)
    assert ring.count(b"\n") == 1
    await asyncio.sleep(0)
