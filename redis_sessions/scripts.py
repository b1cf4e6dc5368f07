"""Lua scripts: read once from the packaged ``lua/`` folder, hashed locally, called by the
edge (:mod:`.edge`) with EVALSHA, and with EVAL once after NOSCRIPT.

Redis scripts cannot load one another, so a script that shares code is sent with its
library files in front of it (:data:`LIBS`). Every definition in front of a script runs
on every call, and costs the shard time per function (docs/benchmarks.md#unit-costs), so
each script carries only the library functions it calls, directly or through another.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.abc import Traversable


def lua_folder() -> "Traversable":
    """The packaged scripts; in a source checkout that is not installed editable (say,
    ``python -m redis_sessions`` run from the checkout folder, which shadows the
    installed package), the checkout's own ``lua/`` folder."""
    try:
        return resources.files("redis_sessions.lua")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / "lua"


LIBS: dict[str, tuple[str, ...]] = {
    "chain_save": ("tokens", "chain_lib"),
    "chain_save_turn": ("tokens", "conv_lib", "chain_lib"),
    "chain_delete": ("tokens", "chain_lib"),
    "chain_walk": ("tokens", "chain_lib"),
    "chain_cover": ("tokens", "chain_lib"),
    "chain_drop": ("tokens", "chain_lib"),
    "items_add": ("tokens", "items_lib"),
    "items_pop": ("tokens", "items_lib"),
    "items_clear": ("tokens", "items_lib"),
    "items_fork": ("tokens", "items_lib"),
    "items_compact": ("tokens", "items_lib"),
    "conv_add": ("tokens", "conv_lib"),
    "conv_create": ("tokens", "conv_lib"),
    "conv_delete": ("tokens", "conv_lib"),
    "conv_delete_item": ("tokens", "conv_lib"),
    "conv_get": ("tokens", "conv_lib"),
    "conv_item": ("tokens", "conv_lib"),
    "conv_list": ("tokens", "conv_lib"),
    "conv_update": ("tokens", "conv_lib"),
    "purge_if_idle": ("tokens",),
}
"""The library files sent in front of each script, in order."""


_FUNCTION = re.compile(r"^local function (\w+)\b.*?^end$\n?", re.M | re.S)
"""A library function: from ``local function`` to the first ``end`` at the line's start."""


def shaken(libs: list[str], body: str) -> str:
    """``libs`` in order, then ``body``, without the library functions ``body`` never calls
    (directly or through another it keeps); everything else of the libraries stays."""
    functions = {m.group(1): m.group(0) for lib in libs for m in _FUNCTION.finditer(lib)}
    kept: set[str] = set()
    reach = body
    while True:
        more = {name for name in functions.keys() - kept if re.search(rf"\b{name}\b", reach)}
        if not more:
            break
        kept |= more
        reach = "\n".join(functions[name] for name in more)
    return "\n".join([*(_FUNCTION.sub(lambda m: m.group(0) if m.group(1) in kept else "", lib) for lib in libs), body])


class Script:
    """``lua/<name>.lua`` with its libraries in front: its source and its SHA-1."""

    __slots__ = ("name", "source", "sha")

    def __init__(self, name: str) -> None:
        folder = lua_folder()
        self.name = name
        read = [folder.joinpath(f"{part}.lua").read_text("utf-8") for part in (*LIBS.get(name, ()), name)]
        self.source = shaken(read[:-1], read[-1])
        self.sha = hashlib.sha1(self.source.encode("utf-8")).hexdigest()

    def __repr__(self) -> str:
        return f"Script({self.name!r})"


@lru_cache(maxsize=None)
def script(name: str) -> Script:
    """The script ``lua/<name>.lua``, read and hashed once per process."""
    return Script(name)
