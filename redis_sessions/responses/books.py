"""Per-response expiry, the books lua/chain_lib.lua keeps in a thread hash, mirrored
line for line for the memory engine (``tests/test_chains_differential.py`` compares
every field after every step).

A record goes once it is a leaf (no children) whose deadline has passed; a record
with children is kept by them, so every ancestor of a live record stays and a
readable response always resolves. Fields (see :mod:`redis_sessions.keys`):
``e:<id>`` a leaf's deadline, ``k:<id>`` a children count of two or more (no ``e:``
and no ``k:``: one child), ``s:<id>`` the deadline a sliding read gave a record with
children, ``L`` the leaves by deadline, ``c`` the record count, ``r`` the field
count after the last write that kept the books (a thread written past them by
anything else stops removing records: its count no longer matches).
"""

from __future__ import annotations

PRUNE = 8
"""Most leaves one save removes (a parent left without children counts again)."""
LEAVES_MAX = 16384
"""Bytes of ``L`` at most; leaves past it are not indexed and stay until the thread expires."""

Fields = dict[str, "bytes | str"]


def number(value: object) -> int | None:
    """Lua's ``tonumber`` of a field (None for a missing or non-numeric one)."""
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    try:
        return int(text)
    except ValueError:
        return None


def mode(fields: Fields) -> str:
    if not fields:
        return "new"
    r = number(fields.get("r"))
    if r is None:
        # no record (only the ring, or the stamp): as good as new
        return "new" if len(fields) == ("ops" in fields) + ("w" in fields) else "off"
    if r != len(fields) - 1:
        return "taint"
    return "on"


def leaves_remove(leaves: str, rid: str) -> str:
    at = leaves.find(f" {rid}\n")
    if at < 0:
        return leaves
    return leaves[:at - 13] + leaves[at + len(rid) + 2:]


def leaves_insert(leaves: str, rid: str, deadline: int) -> str:
    entry = f"{deadline:013d} {rid}\n"
    if len(leaves) + len(entry) > LEAVES_MAX:
        return leaves
    pos = 0
    while pos < len(leaves):
        if int(leaves[pos:pos + 13]) > deadline:
            break
        pos = leaves.index("\n", pos) + 1
    return leaves[:pos] + entry + leaves[pos:]


def leaf_renewed(fields: Fields, leaves: str, rid: str, deadline: int) -> tuple[str, bool]:
    """A leaf needed again: its deadline moves, and its place in ``leaves`` with it;
    and whether ``rid`` is a leaf at all (if not, nothing changed)."""
    if f"e:{rid}" not in fields:
        return leaves, False
    fields[f"e:{rid}"] = str(deadline)
    return leaves_insert(leaves_remove(leaves, rid), rid, deadline), True


def child_added(fields: Fields, parent: str, leaves: str) -> str:
    if fields.pop(f"e:{parent}", None) is not None:
        return leaves_remove(leaves, parent)
    k = number(fields.get(f"k:{parent}"))
    fields[f"k:{parent}"] = str(k + 1 if k is not None else 2)
    return leaves


def child_removed(fields: Fields, parent: str, deadline: int, leaves: str) -> str:
    if f"p:{parent}" not in fields:
        return leaves
    k = number(fields.get(f"k:{parent}"))
    if k is not None:
        if k > 2:
            fields[f"k:{parent}"] = str(k - 1)
        else:
            fields.pop(f"k:{parent}", None)
        return leaves
    s = number(fields.get(f"s:{parent}"))
    if s is not None and s > deadline:
        deadline = s
    fields.pop(f"s:{parent}", None)
    fields[f"e:{parent}"] = str(deadline)
    return leaves_insert(leaves, parent, deadline)


def prune(fields: Fields, leaves: str, now: int) -> tuple[str, int]:
    gone = 0
    while gone < PRUNE and leaves and int(leaves[:13]) < now:
        eol = leaves.index("\n", 14)
        rid = leaves[14:eol]
        leaves = leaves[eol + 1:]
        e = number(fields.get(f"e:{rid}"))
        if e is not None and e < now:
            parent = fields.get(f"p:{rid}")
            for name in (f"d:{rid}", f"p:{rid}", f"e:{rid}", f"j:{rid}", f"n:{rid}"):
                fields.pop(name, None)
            gone += 1
            if parent:
                leaves = child_removed(fields, parent.decode() if isinstance(parent, bytes) else parent, e, leaves)
        elif e is not None:
            leaves = leaves_insert(leaves, rid, e)
    return leaves, gone


def close(fields: Fields, leaves: str, count: int) -> None:
    if leaves:
        fields["L"] = leaves
    else:
        fields.pop("L", None)
    fields["c"] = str(count)
    n = len(fields)
    fields["r"] = str(n - (1 if "r" in fields else 0))


def off(fields: Fields) -> None:
    for name in ("r", "c", "L"):
        fields.pop(name, None)
