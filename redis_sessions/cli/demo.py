"""``redis-sessions demo``: several worker processes serving many conversations at once.

A coordinator (this process) plays the clients: it runs every conversation as
a sequence of turns and sends each turn to a random worker process over that
worker's queue. A worker is what a gateway would be: it resolves the chain from
``previous_response_id`` (``resolve_chain``), makes a deterministic fake reply
(a hash of the items it was given), and saves it with the parent check
(``expected_previous_response_id``). Some conversations branch (two children
of one parent), some race (one id minted once and handed to two workers: one
save must win, the other must get ``session.store.conflict``), and some use
item sessions (``RedisSession.get_items``/``add_items``).

The coordinator knows what every conversation must contain, because the reply
is a pure function of the history: it checks each reply as it comes back and,
at the end, re-reads every leaf with ``resolve_chain`` (and every item session)
and compares it with what it expects.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import multiprocessing
import random
import secrets
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.context import SpawnProcess
from typing import Any, Callable

from ..config import SessionConfig, create_response_session_store
from ..errors import ErrorCode, SessionError
from ..models import Item, StoredResponseRequestSnapshot, StoredResponseSession, StoredResponseSnapshot
from ..options import ResponseOptions
from ..responses.store import RedisResponseSessionStore
from . import output
from ..items import RedisSession
from .common import ping

MODEL = "fake-echo-1"
KINDS = ("plain", "branch", "race", "items")
Job = dict[str, Any]


@dataclass(frozen=True)
class DemoOptions:
    url: str
    prefix: str
    backend: str
    config: SessionConfig
    """The library's settings (password, TLS, timeouts...): every process builds its store from them."""
    workers: int = 4
    conversations: int = 60
    turns: int = 8
    ttl_seconds: int | None = 3600
    seed: int = 0
    json: bool = False

    @property
    def max_depth(self) -> int:
        return max(ResponseOptions().max_depth, self.turns + 1)

    def store(self) -> RedisResponseSessionStore:
        config = self.config.model_copy(update={"url": self.url, "key_prefix": self.prefix, "ttl_seconds": self.ttl_seconds,
                                                "max_depth": self.max_depth})
        store = create_response_session_store(config)
        assert isinstance(store, RedisResponseSessionStore)
        return store


def fake_reply(history: list[Item]) -> Item:
    """The assistant message a fake model answers to ``history``: a pure function of it."""
    digest = hashlib.sha256(json.dumps(history, sort_keys=True).encode()).hexdigest()[:16]
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"echo {digest}"}]}


def user_turn(conversation: int, turn: int, branch: str) -> list[Item]:
    """The user's turn, in the shape ``resolve_chain`` lists input items in."""
    text = f"conversation {conversation} turn {turn}{branch}"
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]


def conversation_kind(index: int, workers: int) -> str:
    """Conversations cycle through the kinds; a race needs two workers (one worker would
    save the same record twice, which is a retry and succeeds), so with one it is plain."""
    kind = KINDS[index % len(KINDS)]
    return "plain" if kind == "race" and workers < 2 else kind


# -- the worker process ----------------------------------------------------
def worker_main(index: int, opts: DemoOptions, jobs: "multiprocessing.Queue[Job | None]",
                results: "multiprocessing.Queue[Job | None]") -> None:
    """Entry point of a worker process (spawned): its own loop, its own store and client."""
    try:
        asyncio.run(_worker(index, opts, jobs, results))
    except KeyboardInterrupt:
        pass


async def _worker(index: int, opts: DemoOptions, jobs: "multiprocessing.Queue[Job | None]",
                  results: "multiprocessing.Queue[Job | None]") -> None:
    store = opts.store()
    try:
        try:
            await ping(store.client)
        except SessionError as exc:
            results.put({"fatal": index, "error": f"{exc.code.value}: {exc.message}"})
            return
        results.put({"ready": index})
        while (job := jobs.get()) is not None:
            # One job at a time, so the round_trips delta around a resolve is that resolve's own.
            results.put(await _serve(index, store, job, opts))
    finally:
        await store.close()


async def _serve(index: int, store: RedisResponseSessionStore, job: Job, opts: DemoOptions) -> Job:
    started = time.perf_counter()
    result: Job = {"job": job["job"], "worker": index, "status": "ok"}
    try:
        if job["kind"] == "items":
            session = RedisSession(job["session"], client=store.client, key_prefix=opts.prefix,
                                   ttl_seconds=opts.ttl_seconds)
            reply = fake_reply(await session.get_items() + job["input"])
            await session.add_items(job["input"] + [reply])
        else:
            before = store.round_trips
            snapshot = await store.resolve_chain(job["prev"])
            result["round_trips"] = store.round_trips - before
            reply = fake_reply(snapshot.input_items + job["input"])
            await store.save(_record(job, reply, index), expected_previous_response_id=job["prev"])
        result["reply"] = reply
    except SessionError as exc:
        result["status"] = "conflict" if exc.code == ErrorCode.STORE_CONFLICT else "error"
        result["error"] = f"{exc.code.value}: {exc.message}"
    except Exception as exc:  # reported to the coordinator, which fails the run
        result["status"] = "error"
        result["error"] = f"{type(exc).__name__}: {exc}"
    result["seconds"] = time.perf_counter() - started
    return result


def _record(job: Job, reply: Item, worker: int) -> StoredResponseSession:
    # The worker is part of the record: a save re-sent with the same bytes is the same
    # save (idempotent), so two workers racing on one id must write different records.
    now = int(time.time())
    text = reply["content"][0]["text"]
    return StoredResponseSession(
        id=job["id"], previous_response_id=job["prev"], created_at=now, completed_at=now,
        request=StoredResponseRequestSnapshot(input=job["input"], model=MODEL),
        response=StoredResponseSnapshot(id=job["id"], output=[reply], output_text=text),
        metadata={"demo": "redis-sessions", "conversation": str(job["conversation"]), "worker": str(worker)},
    )


# -- the coordinator -------------------------------------------------------
class Pool:
    """Worker processes (spawn), one job queue each, one shared result queue read by a thread."""

    def __init__(self, opts: DemoOptions) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.jobs: list[multiprocessing.Queue[Job | None]] = [ctx.Queue() for _ in range(opts.workers)]
        self.results: multiprocessing.Queue[Job | None] = ctx.Queue()
        self.procs: list[SpawnProcess] = [
            ctx.Process(target=worker_main, args=(i, opts, self.jobs[i], self.results), daemon=True,
                        name=f"redis-sessions-demo-worker-{i}")
            for i in range(opts.workers)
        ]
        self.pending: dict[Any, asyncio.Future[Job]] = {}
        self.next_id = 0
        self.failure: SessionError | None = None
        self._reader: threading.Thread | None = None
        self._watchdog: asyncio.Future[None] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        ready = [self._expect(("ready", i)) for i in range(len(self.procs))]
        self._reader = threading.Thread(target=self._read, args=(loop,), daemon=True)
        self._reader.start()
        for proc in self.procs:
            proc.start()
        self._watchdog = asyncio.ensure_future(self._watch())
        try:
            await asyncio.wait_for(asyncio.gather(*ready), timeout=120)
        except asyncio.TimeoutError:
            raise SessionError(ErrorCode.BACKEND_UNAVAILABLE, "the demo workers did not start within 120 s") from None

    def _expect(self, key: Any) -> asyncio.Future[Job]:
        future: asyncio.Future[Job] = asyncio.get_running_loop().create_future()
        self.pending[key] = future
        return future

    def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        while (message := self.results.get()) is not None:
            loop.call_soon_threadsafe(self._deliver, message)

    def _deliver(self, message: Job) -> None:
        if "fatal" in message:
            self._fail(SessionError(ErrorCode.BACKEND_UNAVAILABLE, f"worker {message['fatal']}: {message['error']}"))
            return
        key = ("ready", message["ready"]) if "ready" in message else message["job"]
        future = self.pending.pop(key, None)
        if future is not None and not future.done():
            future.set_result(message)

    def _fail(self, error: SessionError) -> None:
        self.failure = self.failure or error
        for future in self.pending.values():
            if not future.done():
                future.set_exception(self.failure)
        self.pending.clear()

    async def _watch(self) -> None:
        """A worker that dies (killed, crashed) fails the run instead of hanging it."""
        while True:
            await asyncio.sleep(0.2)
            for i, proc in enumerate(self.procs):
                if proc.exitcode is not None:
                    self._fail(SessionError(ErrorCode.BACKEND_UNAVAILABLE,
                                            f"demo worker {i} exited unexpectedly (exit code {proc.exitcode})"))

    def submit(self, worker: int, job: Job) -> asyncio.Future[Job]:
        if self.failure:
            raise self.failure
        self.next_id += 1
        job = dict(job, job=self.next_id)
        future = self._expect(self.next_id)
        self.jobs[worker].put(job)
        return future

    async def stop(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        for q in self.jobs:
            q.put(None)
        loop = asyncio.get_running_loop()
        for proc in self.procs:
            if proc.pid is None:
                continue  # never started
            await loop.run_in_executor(None, proc.join, 10)
            if proc.is_alive():
                proc.terminate()
                await loop.run_in_executor(None, proc.join, 5)
        self.results.put(None)
        if self._reader is not None:
            await loop.run_in_executor(None, self._reader.join, 5)
        for q in [*self.jobs, self.results]:
            q.close()
            q.join_thread()


@dataclass
class Tally:
    turns: int = 0
    responses: int = 0
    item_turns: int = 0
    races: int = 0
    conflicts: int = 0
    unexpected_conflicts: int = 0
    resolves: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    leaves: list[tuple[int, str, list[str], list[Item]]] = field(default_factory=list)
    sessions: list[tuple[int, str, list[Item]]] = field(default_factory=list)


class Coordinator:
    def __init__(self, opts: DemoOptions, pool: Pool, store: RedisResponseSessionStore) -> None:
        self.opts = opts
        self.pool = pool
        self.store = store
        self.rng = random.Random(opts.seed)
        self.tally = Tally()
        self.step: Callable[..., None] = lambda **_: None

    @property
    def branch_at(self) -> int:
        return self.opts.turns // 2

    def kinds(self) -> list[str]:
        return [conversation_kind(i, self.opts.workers) for i in range(self.opts.conversations)]

    def expected_turns(self) -> int:
        extra = self.opts.turns - self.branch_at if self.opts.turns >= 2 else 0
        return sum(self.opts.turns + (extra if k == "branch" else 0) for k in self.kinds())

    def expected_races(self) -> int:
        return sum(self.opts.turns for k in self.kinds() if k == "race")

    def _worker(self) -> int:
        return self.rng.randrange(self.opts.workers)

    def _done(self, n: int = 1) -> None:
        self.tally.turns += n
        self.step(completed=self.tally.turns, extra=output.plural(self.tally.conflicts, "conflict"))

    async def run(self) -> None:
        lines = []
        for index, kind in enumerate(self.kinds()):
            if kind == "items":
                lines.append(self.item_conversation(index))
            else:
                lines.append(self.chain_line(index, kind, 0, None, [], [], ""))
        with output.progress("demo", self.expected_turns(), enabled=not self.opts.json) as self.step:
            await asyncio.gather(*lines)

    async def chain_line(self, conv: int, kind: str, start: int, prev: str | None,
                         ids: list[str], history: list[Item], branch: str) -> None:
        side: asyncio.Future[None] | None = None
        for turn in range(start, self.opts.turns):
            if kind == "branch" and branch == "" and turn == self.branch_at and turn > 0:
                side = asyncio.ensure_future(self.chain_line(conv, kind, turn, prev, list(ids), list(history), "b"))
                branch = "a"
            new_id = await self.store.new_response_id(prev)
            job: Job = {"kind": "chain", "conversation": conv, "prev": prev, "id": new_id,
                        "input": user_turn(conv, turn, branch)}
            expected = fake_reply(history + job["input"])
            reply = await (self.race(job) if kind == "race" else self.single(job))
            if reply is None:
                break  # already recorded as a problem; the rest of this line cannot be saved
            if reply != expected:
                self.tally.problems.append(f"{new_id}: the worker's reply does not match its history")
            ids.append(new_id)
            history += job["input"] + [reply]
            prev = new_id
            self.tally.responses += 1
            self._done()
        if ids:
            self.tally.leaves.append((conv, ids[-1], ids, history))
        if side is not None:
            await side

    def _check(self, result: Job) -> Item | None:
        if result["status"] != "ok":
            if result["status"] == "conflict":
                self.tally.unexpected_conflicts += 1
            self.tally.problems.append(f"worker {result['worker']}: {result.get('error')}")
            return None
        reply: Item = result["reply"]
        return reply

    def _round_trips(self, job: Job, result: Job) -> None:
        if job["prev"] is not None and "round_trips" in result:
            self.tally.resolves.append(int(result["round_trips"]))

    async def single(self, job: Job) -> Item | None:
        result = await self.pool.submit(self._worker(), job)
        self._round_trips(job, result)
        return self._check(result)

    async def race(self, job: Job) -> Item | None:
        """The same id to two workers at once: exactly one save may win."""
        first = self._worker()
        second = (first + 1 + self.rng.randrange(self.opts.workers - 1)) % self.opts.workers if self.opts.workers > 1 else first
        results = await asyncio.gather(self.pool.submit(first, job), self.pool.submit(second, job))
        self.tally.races += 1
        for result in results:
            self._round_trips(job, result)
        statuses = sorted(r["status"] for r in results)
        self.tally.conflicts += statuses.count("conflict")
        if statuses != ["conflict", "ok"]:
            self.tally.problems.append(f"race on {job['id']}: expected one ok and one conflict, got {statuses}")
            return None
        winner: Item = next(r for r in results if r["status"] == "ok")["reply"]
        return winner

    async def item_conversation(self, conv: int) -> None:
        session_id = f"demo-conversation-{conv}"
        history: list[Item] = []
        for turn in range(self.opts.turns):
            job: Job = {"kind": "items", "conversation": conv, "session": session_id, "prev": None,
                        "input": user_turn(conv, turn, "")}
            expected = fake_reply(history + job["input"])
            reply = self._check(await self.pool.submit(self._worker(), job))
            if reply is None:
                break
            if reply != expected:
                self.tally.problems.append(f"item session {session_id}: the worker's reply does not match its history")
            history += job["input"] + [reply]
            self.tally.item_turns += 1
            self._done()
        self.tally.sessions.append((conv, session_id, history))

    async def verify(self) -> tuple[int, int]:
        """Re-read every leaf and every item session; compare with what was produced."""
        for conv, leaf, ids, history in self.tally.leaves:
            try:
                snap = await self.store.resolve_chain(leaf)
            except SessionError as exc:
                self.tally.problems.append(f"conversation {conv}: resolve_chain({leaf}) failed: {exc}")
                continue
            if [s.id for s in snap.sessions] != ids:
                self.tally.problems.append(f"conversation {conv}: the chain of {leaf} has other turns than saved")
            elif snap.input_items != history:
                self.tally.problems.append(f"conversation {conv}: the items of {leaf} differ from what was produced")
        for conv, session_id, history in self.tally.sessions:
            session = RedisSession(session_id, client=self.store.client, key_prefix=self.opts.prefix)
            try:
                stored = await session.get_items()
            except SessionError as exc:
                self.tally.problems.append(f"item session {session_id}: get_items failed: {exc}")
                continue
            if stored != history:
                self.tally.problems.append(f"item session {session_id}: its items differ from what was produced")
        return len(self.tally.leaves), len(self.tally.sessions)


async def run_demo(opts: DemoOptions) -> dict[str, Any]:
    store = opts.store()
    try:
        await ping(store.client)  # fail fast, before starting any process
        pool = Pool(opts)
        coordinator = Coordinator(opts, pool, store)
        try:
            output.note(f"starting {output.plural(opts.workers, 'worker process', 'worker processes')}", quiet=opts.json)
            await pool.start()
            started = time.perf_counter()
            await coordinator.run()
            seconds = time.perf_counter() - started
        finally:
            await pool.stop()
        leaves, sessions = await coordinator.verify()
    finally:
        await store.close()
    return summary(opts, coordinator, seconds, leaves, sessions)


def summary(opts: DemoOptions, c: Coordinator, seconds: float, leaves: int, sessions: int) -> dict[str, Any]:
    t = c.tally
    kinds = c.kinds()
    expected_turns = c.expected_turns()
    expected_races = c.expected_races()
    rts = t.resolves
    if t.turns != expected_turns:
        t.problems.append(f"{t.turns} turns were served, {expected_turns} expected")
    if t.conflicts != expected_races:
        t.problems.append(f"{t.conflicts} conflicts were detected, {expected_races} expected")
    return {
        "ok": not t.problems,
        "backend": opts.backend,
        "prefix": opts.prefix,
        "workers": opts.workers,
        "conversations": opts.conversations,
        "conversation_kinds": {k: kinds.count(k) for k in KINDS},
        "turns": t.turns,
        "turns_expected": expected_turns,
        "responses_saved": t.responses,
        "item_session_turns": t.item_turns,
        "races": t.races,
        "conflicts": t.conflicts,
        "conflicts_expected": expected_races,
        "resolves": len(rts),
        "round_trips_per_resolve": {"mean": round(sum(rts) / len(rts), 3) if rts else 0.0,
                                    "max": max(rts, default=0)},
        "seconds": round(seconds, 3),
        "turns_per_second": round(t.turns / seconds, 1) if seconds > 0 else 0.0,
        "integrity": {"ok": not t.problems, "chains_checked": leaves, "item_sessions_checked": sessions,
                      "problems": t.problems[:20], "problem_count": len(t.problems)},
    }


def print_summary(s: dict[str, Any]) -> None:
    p = output.plural
    kinds = s["conversation_kinds"]
    rt = s["round_trips_per_resolve"]
    integrity = s["integrity"]
    output.pairs([
        ("server", s["backend"]),
        ("prefix", s["prefix"]),
        ("workers", p(s["workers"], "process", "processes")),
        ("conversations", f"{s['conversations']}: {kinds['plain']} plain, {kinds['branch']} branching, "
                          f"{kinds['race']} racing, {kinds['items']} on item sessions"),
        ("turns", f"{s['turns']} of {s['turns_expected']} expected ({p(s['responses_saved'], 'response')} saved, "
                  f"{p(s['item_session_turns'], 'item-session turn')})"),
        ("conflicts", f"{s['conflicts']} detected, {s['conflicts_expected']} expected "
                      f"({p(s['races'], 'race')}: two workers saving one id)"),
        ("round trips", f"{rt['mean']:g} per resolve on average, {rt['max']} at most ({p(s['resolves'], 'resolve')})"),
        ("throughput", f"{s['turns_per_second']:g} turns/s ({s['seconds']:g} s)"),
        ("integrity", f"{'ok' if integrity['ok'] else 'FAILED'}: {p(integrity['chains_checked'], 'chain')} and "
                      f"{p(integrity['item_sessions_checked'], 'item session')} re-read and compared"),
        ("inspect", inspect_hint(s)),
    ])
    for problem in integrity["problems"]:
        print(f"  problem: {problem}")


def inspect_hint(s: dict[str, Any]) -> str:
    """How to look at what the demo wrote (or why it is gone)."""
    if str(s["backend"]).startswith("embedded"):
        return ("the embedded server stopped with the demo: run it with --url (or REDIS_SESSIONS_URL) "
                "to keep what it wrote and inspect it")
    prefix = s["prefix"]
    return (f"redis-sessions stats --prefix {prefix} (then list threads, chain ID, items SESSION_ID); "
            f"redis-sessions purge --prefix {prefix} --yes removes it")


def default_prefix() -> str:
    return f"demo-{secrets.token_hex(3)}"

