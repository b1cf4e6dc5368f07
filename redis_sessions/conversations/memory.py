"""Conversations in process memory: every ``lua/conv_*.lua`` script mirrored, line for line.

:class:`HashStore` holds what Redis would: per key, a hash (field -> bytes) and
a deadline in whole milliseconds, expired lazily against the injected clock (a
key lives through its deadline millisecond, as in Redis). Each script is a
function of the same name over :class:`_Commands`, the hash commands the
scripts call, run under one lock so it is atomic like a script. A hash that
loses its last field is deleted, as Redis deletes it.
``tests/test_conversations_differential.py`` holds the twins together.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Optional, TypeVar, Union

from ..clock import Clock, system_clock
from ..items.base import MAX_BATCH_BYTES, MAX_ITEM_BYTES
from ..keys import DEFAULT_PREFIX
from ..responses.protocol import UNSET, _Unset
from . import paging
from .base import ConversationStore, Reply

RING, RETAIN_MS = 16, 300000
T = TypeVar("T")
_SWEEP_EVERY = 1024


@dataclass
class _Hash:
    fields: dict[str, bytes] = field(default_factory=dict)
    deadline_ms: Optional[int] = None


class _Commands:
    """The Redis hash commands the scripts use, on one store at one instant."""

    def __init__(self, keys: dict[str, _Hash], now_ms: int) -> None:
        self.keys, self.now = keys, now_ms

    def get(self, key: str) -> Optional[_Hash]:
        rec = self.keys.get(key)
        if rec is not None and rec.deadline_ms is not None and self.now > rec.deadline_ms:
            del self.keys[key]
            return None
        return rec

    def hmget(self, key: str, *names: str) -> list[Optional[bytes]]:
        rec = self.get(key)
        return [None if rec is None else rec.fields.get(name) for name in names]

    def hexists(self, key: str, name: str) -> bool:
        return self.hmget(key, name)[0] is not None

    def hset(self, key: str, *pairs: Union[str, bytes, int]) -> None:
        rec = self.get(key)
        if rec is None:
            rec = self.keys[key] = _Hash()
        for j in range(0, len(pairs), 2):
            name, value = pairs[j], pairs[j + 1]
            rec.fields[str(name)] = value if isinstance(value, bytes) else str(value).encode()

    def hdel(self, key: str, *names: str) -> None:
        rec = self.get(key)
        if rec is not None:
            for name in names:
                rec.fields.pop(name, None)
            if not rec.fields:
                del self.keys[key]

    def unlink(self, key: str) -> None:
        if self.get(key) is not None:
            del self.keys[key]

    def pexpire(self, key: str, ms: int) -> None:
        rec = self.get(key)
        if rec is not None:
            rec.deadline_ms = self.now + ms


# -- conv_lib.lua ----------------------------------------------------------------------
def find(ops: Optional[bytes], tok: bytes) -> Optional[bytes]:
    if ops is None:
        return None
    at = 0
    if ops[:len(tok) + 1] != tok + b" ":
        at = ops.find(b"\n" + tok + b" ")
        if at < 0:
            return None
        at += 1
    end = ops.find(b"\n", at)
    return ops[at + len(tok) + 1:len(ops) if end < 0 else end]


def remember(ops: Optional[bytes], tok: bytes, what: bytes) -> bytes:
    s = tok + b" " + what + b"\n" + (ops or b"")
    q = -1
    for _ in range(RING):
        q = s.find(b"\n", q + 1)
        if q < 0:
            return s
    return s[:q + 1]


def expire(r: _Commands, key: str, ttl: int) -> None:
    if ttl > 0:
        r.pexpire(key, ttl)


_number = paging.number


# -- the scripts ---------------------------------------------------------------------
def conv_create(r: _Commands, key: str, argv: list[bytes]) -> Reply:
    ttl, tok = int(argv[0]), argv[1]
    c, ops = r.hmget(key, "c", "ops")
    if find(ops, tok) is not None:
        return [b"ok"]
    if c is not None or ops is not None:
        return [b"exists"]
    n = (len(argv) - 4) // 2
    args: list[Union[str, bytes, int]] = ["c", argv[2], "m", argv[3], "n", n, "ops", remember(None, tok, b"c")]
    for j in range(1, n + 1):
        args += [f"i:{j}", argv[3 + 2 * j], "x:" + argv[2 + 2 * j].decode(), j]
    r.hset(key, *args)
    expire(r, key, ttl)
    return [b"ok"]


def append_check(r: _Commands, key: str, argv: list[bytes], at: int) -> tuple[Optional[int], Reply]:
    """conv_lib.lua's append_check (``at`` counts from 0 here, from 1 there)."""
    c, n_field = r.hmget(key, "c", "n")
    if c is None:
        return None, [b"nf"]
    n = _number(n_field)
    if n is None:
        return None, [b"corrupt"]
    count = (len(argv) - at) // 2
    if count:
        seqs = r.hmget(key, *[f"x:{argv[at + 2 * j].decode()}" for j in range(count)])
        for j in range(count):
            if seqs[j] is not None and r.hexists(key, "i:" + seqs[j].decode()):  # type: ignore[union-attr]
                return None, [b"dup", argv[at + 2 * j]]
    return n, []


def append_write(r: _Commands, key: str, argv: list[bytes], at: int, n: int,
                 extra: list[Union[str, bytes, int]]) -> None:
    count = (len(argv) - at) // 2
    args: list[Union[str, bytes, int]] = ["n", n + count, *extra]
    for j in range(count):
        args += [f"i:{n + j + 1}", argv[at + 2 * j + 1], f"x:{argv[at + 2 * j].decode()}", n + j + 1]
    r.hset(key, *args)


def conv_add(r: _Commands, key: str, argv: list[bytes]) -> Reply:
    ttl, tok = int(argv[0]), argv[1]
    (ops,) = r.hmget(key, "ops")
    if find(ops, tok) is not None:
        return [b"ok"]
    n, reply = append_check(r, key, argv, 2)
    if n is None:
        return reply
    append_write(r, key, argv, 2, n, ["ops", remember(ops, tok, b"a")])
    expire(r, key, ttl)
    return [b"ok"]


def conv_update(r: _Commands, key: str, argv: list[bytes]) -> Reply:
    ttl, tok = int(argv[0]), argv[1]
    c, ops = r.hmget(key, "c", "ops")
    if c is None:
        return [b"nf"]
    if find(ops, tok) is not None:
        return [b"ok", c]
    r.hset(key, "m", argv[2], "ops", remember(ops, tok, b"u"))
    expire(r, key, ttl)
    return [b"ok", c]


def conv_delete(r: _Commands, key: str, argv: list[bytes]) -> Reply:
    tok = argv[0]
    c, ops = r.hmget(key, "c", "ops")
    if find(ops, tok) is not None:
        return [b"ok"]
    if c is None:
        return [b"nf"]
    ring = remember(ops, tok, b"x")
    r.unlink(key)
    r.hset(key, "ops", ring)
    r.pexpire(key, RETAIN_MS)
    return [b"ok"]


def conv_delete_item(r: _Commands, key: str, argv: list[bytes]) -> Reply:
    ttl, tok = int(argv[0]), argv[1]
    c, m, ops, seq_field = r.hmget(key, "c", "m", "ops", "x:" + argv[2].decode())
    if c is None:
        return [b"nf"]
    if find(ops, tok) is not None:
        return [b"ok", c, m]
    seq = _number(seq_field)
    if seq is None:
        return [b"inf"]
    item, left, right = r.hmget(key, f"i:{seq}", f"g:{seq - 1}", f"g:{seq + 1}")
    if item is None:
        return [b"inf"]
    a, b = _or(_number(left), seq), _or(_number(right), seq)
    gone = [f"i:{seq}"]
    if a < seq - 1:
        gone.append(f"g:{seq - 1}")
    if b > seq + 1:
        gone.append(f"g:{seq + 1}")
    r.hdel(key, *gone)
    r.hset(key, f"g:{a}", b, f"g:{b}", a, "ops", remember(ops, tok, b"d"))
    expire(r, key, ttl)
    return [b"ok", c, m]


def _or(value: Optional[int], default: int) -> int:
    return default if value is None else value


def conv_get(r: _Commands, key: str, argv: list[bytes]) -> Reply:
    slide = int(argv[0])
    c, m = r.hmget(key, "c", "m")
    if c is None:
        return [b"nf"]
    expire(r, key, slide)
    return [b"ok", c, m]


def conv_item(r: _Commands, key: str, argv: list[bytes]) -> Reply:
    slide = int(argv[0])
    c, seq = r.hmget(key, "c", "x:" + argv[1].decode())
    if c is None:
        return [b"nf"]
    item = r.hmget(key, "i:" + seq.decode())[0] if seq is not None else None
    if item is None:
        return [b"inf"]
    expire(r, key, slide)
    return [b"ok", item]


def conv_list(r: _Commands, key: str, argv: list[bytes]) -> Reply:
    slide = int(argv[5])
    c, n_field = r.hmget(key, "c", "n")
    if c is None:
        return [b"nf"]
    n = _number(n_field)
    if n is None:
        return [b"corrupt"]
    step = 1 if argv[0] == b"asc" else -1
    if argv[3] != b"":
        pos = int(argv[3])
    elif argv[2] != b"":
        seq = _number(r.hmget(key, "x:" + argv[2].decode())[0])
        if seq is None:
            return [b"nc"]
        pos = seq + step
    else:
        pos = 1 if step == 1 else n
    last = n if step == 1 else 1
    got = paging.scan(lambda names: r.hmget(key, *names), pos, last, step, int(argv[1]), int(argv[4]))
    expire(r, key, slide)
    return [b"ok", b"" if got.next is None else str(got.next).encode(), *got.entries]


SCRIPTS: dict[str, Callable[[_Commands, str, list[bytes]], Reply]] = {
    f.__name__: f for f in (conv_create, conv_add, conv_update, conv_delete, conv_delete_item, conv_get, conv_item,
                            conv_list)
}


class HashStore:
    """Conversations of one process, keyed like Redis keys. Safe to share between threads."""

    def __init__(self) -> None:
        self._keys: dict[str, _Hash] = {}
        self._lock = threading.Lock()
        self._writes = 0

    def run(self, name: str, key: str, args: list[bytes], now: float) -> Reply:
        with self._lock:
            r = _Commands(self._keys, int(now * 1000))
            reply = SCRIPTS[name](r, key, args)
            self._writes += 1
            if self._writes % _SWEEP_EVERY == 0:
                for k in list(self._keys):
                    r.get(k)
            return reply

    def apply(self, now: float, step: Callable[[_Commands], T]) -> T:
        """Run ``step`` on the conversations at ``now``, as one script would run: alone
        (the response store's save of a conversation's turn, chain_save_turn.lua)."""
        with self._lock:
            return step(_Commands(self._keys, int(now * 1000)))

    def raw(self, key: str, now: float) -> Optional[tuple[dict[str, bytes], Optional[int]]]:
        """A key's fields and deadline (ms), as HGETALL and PEXPIRETIME would show them."""
        with self._lock:
            rec = _Commands(self._keys, int(now * 1000)).get(key)
            return None if rec is None else (dict(rec.fields), rec.deadline_ms)

    def keys(self, now: float) -> list[str]:
        with self._lock:
            r = _Commands(self._keys, int(now * 1000))
            return sorted(k for k in list(self._keys) if r.get(k) is not None)


class MemoryConversationStore(ConversationStore):
    """Conversations in process memory (``store`` may be shared between stores), with
    the same behaviour as Redis, expiry included, against ``clock``."""

    def __init__(
        self,
        *,
        key_prefix: str = DEFAULT_PREFIX,
        ttl_seconds: Union[float, None, _Unset] = UNSET,
        sliding_ttl: bool = False,
        max_item_bytes: int = MAX_ITEM_BYTES,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        clock: Clock = system_clock,
        store: Optional[HashStore] = None,
    ) -> None:
        super().__init__(key_prefix=key_prefix, ttl_seconds=ttl_seconds, sliding_ttl=sliding_ttl,
                         max_item_bytes=max_item_bytes, max_batch_bytes=max_batch_bytes, clock=clock)
        self.store = store if store is not None else HashStore()

    async def _run(self, name: str, key: str, args: list[bytes], write: bool) -> Reply:
        return self.store.run(name, key, args, self._clock())
