"""Lua scripts: read once from the packaged ``lua/`` folder, called with EVALSHA.

The SHA is computed locally. On NOSCRIPT (the server restarted, failed over, or
someone ran ``SCRIPT FLUSH``) the call is retried once as EVAL, which both runs
the script and caches it on whichever node executed it; that works the same
on a standalone server and on every node of a cluster.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from redis.client import NEVER_DECODE
from redis.exceptions import NoScriptError

from .redis_client import AnyRedis, io

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
    "items_lib": ("tokens",),
    "conv_lib": ("tokens",),
    "chain_lib": ("tokens",),
    "chain_save": ("tokens", "chain_jumps", "chain_lib"),
    "chain_walk": ("chain_jumps",),
    "chain_walk_slide": ("tokens", "chain_jumps", "chain_lib"),
    "chain_delete": ("tokens", "chain_jumps", "chain_lib"),
    "chain_save_turn": ("tokens", "conv_lib", "chain_jumps", "chain_lib"),
}
"""The library files sent in front of a script (Redis scripts cannot load one another).
A script runs all of its libraries' definitions on every call, so each carries only
what it uses. The item and conversation scripts add theirs in their own modules."""

FILES: dict[str, str] = {"chain_walk_slide": "chain_walk"}
"""Scripts made of another's file with other libraries in front: a walk that slides a
TTL needs the books of per-response expiry (lua/chain_lib.lua), a plain walk does not."""


class LuaScript:
    def __init__(self, name: str) -> None:
        self.name = name
        folder = lua_folder()
        parts = [folder.joinpath(f"{part}.lua").read_text("utf-8")
                 for part in (*LIBS.get(name, ()), FILES.get(name, name))]
        self.source = "\n".join(parts)
        self.sha = hashlib.sha1(self.source.encode("utf-8")).hexdigest()

    async def __call__(self, client: AnyRedis, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """The script's reply. A sync client's call blocks and returns it (redis_client.io);
        the check is inlined: this is every save's call."""
        try:
            reply = client.evalsha(self.sha, len(keys), *keys, *args)
            return await reply if hasattr(type(reply), "__await__") else reply
        except NoScriptError:
            return await io(client.eval(self.source, len(keys), *keys, *args))


@lru_cache(maxsize=None)
def script(name: str) -> LuaScript:
    """The script ``lua/<name>.lua``, read and hashed once per process."""
    return LuaScript(name)


class RawLibScript(LuaScript):
    """A script with the library ``lua/<lib>.lua`` in front of it (same SHA rules), whose
    reply redis-py hands back undecoded whatever the client's ``decode_responses``: the
    item-session (``items_lib``) and conversation (``conv_lib``) scripts."""

    def __init__(self, name: str, lib: str) -> None:
        super().__init__(name)
        self.source = script(lib).source + "\n" + self.source
        self.sha = hashlib.sha1(self.source.encode("utf-8")).hexdigest()

    async def __call__(self, client: AnyRedis, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            return await io(client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args, **{NEVER_DECODE: []}))
        except NoScriptError:
            return await io(client.execute_command("EVAL", self.source, len(keys), *keys, *args, **{NEVER_DECODE: []}))
