"""``delete(id)`` racing ``save(id)`` for an id minted elsewhere, in every interleaving.

A foreign id's record lives in its thread hash and its locator in another key
(another slot), so neither call is one atomic step: save writes the record, then
points the locator; delete finds the thread, removes the record, removes the
locator, then looks again and points the locator back if a save put the record
back meanwhile. Each round trip of either store (a call of its edge) waits at a gate
until the test lets it through, in an order the test enumerates, so every interleaving
of the two calls runs once, deterministically, on every backend.

What must hold in each one: a record in its thread is readable by its id (and
resolvable, and re-saving it succeeds); a record that is gone leaves nothing that
stops it from being saved again.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from chains import make_store, record
from redis_sessions import ErrorCode, SessionError
from redis_sessions.responses import RedisResponseSessionStore as ChainStore
from redis_sessions.responses.store import foreign_root_thread

ROUND_TRIPS = {"run", "command", "call", "pipeline"}
"""The edge's calls that each make one round trip (edge.py)."""
STEPS = {"chain_save": "save", "chain_delete": "delete", "chain_walk": "walk", "GET": "locate", "GETEX": "locate",
         "SET": "point", "DEL": "unpoint", "HEXISTS": "has", "HGET": "fetch", "pipeline": "touch"}
"""What each round trip is, in the words of the store's steps."""


def step(attr: str, args: tuple[Any, ...]) -> str:
    if attr == "run":
        return STEPS.get(args[0].name, args[0].name)
    return STEPS["pipeline"] if attr == "pipeline" else STEPS.get(args[0], args[0])


class Turns:
    """Lets the round trips of named stores through one at a time, in a given order."""

    def __init__(self) -> None:
        self.waiting: dict[str, list[tuple[asyncio.Future[None], asyncio.Future[None]]]] = {}
        self.trace: list[tuple[str, str]] = []

    def gate(self, store: ChainStore, name: str) -> None:
        inner, turns = store.edge, self
        self.waiting[name] = []

        class Gated:
            def __getattr__(self, attr: str) -> Any:
                method = getattr(inner, attr)
                if attr not in ROUND_TRIPS:
                    return method

                async def gated(*args: Any, **kwargs: Any) -> Any:
                    loop = asyncio.get_running_loop()
                    turn, done = loop.create_future(), loop.create_future()
                    turns.waiting[name].append((turn, done))
                    await turn
                    turns.trace.append((name, step(attr, args)))
                    try:
                        return await method(*args, **kwargs)
                    finally:
                        done.set_result(None)

                return gated

        store.edge = Gated()  # type: ignore[assignment]

    async def run(self, calls: dict[str, Any], order: str) -> dict[str, Any]:
        """Run ``calls`` (name -> coroutine), letting one engine call through per letter
        of ``order`` and waiting for it to finish; then let the rest through.
        Returns each call's result, or its error code."""
        tasks = {name: asyncio.ensure_future(call) for name, call in calls.items()}
        for name in itertools.chain(order, itertools.cycle(calls)):
            if all(t.done() for t in tasks.values()):
                break
            if await self._ready(name, tasks[name]):
                turn, done = self.waiting[name].pop(0)
                turn.set_result(None)
                await done
        out: dict[str, Any] = {}
        for name, task in tasks.items():
            try:
                out[name] = task.result()
            except SessionError as exc:
                out[name] = exc.code
        return out

    async def _ready(self, name: str, task: asyncio.Future[Any]) -> bool:
        """Wait until ``name`` waits at a gate (True) or has finished (False). Between
        gates a call only computes, so a few turns of the loop are enough."""
        for _ in range(10_000):
            if self.waiting[name]:
                return True
            if task.done():
                return False
            await asyncio.sleep(0)
        raise AssertionError(f"{name} neither reached a gate nor finished")


def orders(saver_steps: int, deleter_steps: int) -> list[str]:
    """Every arrangement of the two calls' steps (extra letters are skipped)."""
    n = saver_steps + deleter_steps
    return ["".join("S" if i in spots else "D" for i in range(n))
            for spots in itertools.combinations(range(n), saver_steps)]


async def thread_has(backend: Any, store: ChainStore, thread: str, rid: str) -> bool:
    return bool(await backend.client.hexists(store.keys.thread(thread), f"d:{rid}"))


SHAPES = {
    # a foreign root: save = [locate, save, point]; delete = [locate, delete, unpoint, has, (point)]
    "root": (3, 5),
    # a foreign child of a foreign parent: save = [locate + locate, save, point + touch]
    "child": (5, 5),
}


@pytest.mark.parametrize("same", [True, False], ids=["same-record", "other-record"])
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_delete_racing_save_never_leaves_a_saved_record_unreadable(backend, shape, same):
    reader = make_store(backend)
    parent = None
    if shape == "child":
        parent = "ext-parent"
        await reader.save(record(parent))
    traces: set[tuple[tuple[str, str], ...]] = set()
    for n, order in enumerate(orders(*SHAPES[shape])):
        rid = f"ext-{shape}-{n}"
        await reader.save(record(rid, parent))
        thread = foreign_root_thread(parent or rid)
        saver, deleter = make_store(backend), make_store(backend)
        turns = Turns()
        turns.gate(saver, "S")
        turns.gate(deleter, "D")
        mine = record(rid, parent, text="hello" if same else "other")
        out = await turns.run({"S": saver.save(mine), "D": deleter.delete(rid)}, order)
        traces.add(tuple(turns.trace))
        where = f"order {order}, trace {turns.trace}, results {out}"

        assert out["D"] is True, where
        wrote = ("S", "save") in turns.trace and turns.trace.index(("S", "save")) > turns.trace.index(("D", "delete"))
        assert out["S"] is (None if same or wrote else ErrorCode.STORE_CONFLICT), where
        stored = await thread_has(backend, reader, thread, rid)
        assert stored == (wrote and out["S"] is None), where
        if stored:
            # a successful save stays readable, resolvable and continuable by its id
            assert await reader.get(rid) == mine, where
            assert [s.id for s in (await reader.resolve_chain(rid)).sessions][-1] == rid, where
            await reader.save(mine)
            with pytest.raises(SessionError) as err:
                await reader.save(record(rid, parent, text="a third one"))
            assert err.value.code is ErrorCode.STORE_CONFLICT, where
        else:
            # gone, and nothing left behind stops it from being saved again
            assert await reader.get(rid) is None, where
            await reader.save(mine)
            assert await reader.get(rid) == mine, where
    # the interleaving of the issue ran: delete removed the record, save wrote it and
    # found the locator in place, then delete removed the locator
    bug = [("D", "delete"), ("S", "save"), ("S", "point"), ("D", "unpoint")]
    assert any([step for step in trace if step in bug] == bug for trace in traces)
