"""A Celery-style worker task: a plain function (decorate it with ``@app.task`` in a
Celery app; nothing here needs Celery) that keeps an agent's conversation in an item
session across calls, with the sync API.

    REDIS_SESSIONS_URL=redis://localhost:6379/0 python -m examples.sync_worker

Each call is one turn: it reads the session's history, "runs the model" (a stand-in
that counts the turns it was shown) and appends the user's message and the answer in
one atomic write. The task's id as the idempotency key makes a task that Celery runs
again (a lost acknowledgement, a worker killed after the write) append its turn once:
the second run's write is refused as a reuse of the key with another body (the model
answered differently), and the first run's turn stands. One client
serves every call and thread of the worker process; a forked worker opens its own
connections.
"""

from __future__ import annotations

import os
from typing import Any

import redis

from redis_sessions import ErrorCode, SessionError, SyncRedisSession

_CLIENT: redis.Redis | None = None


def _client() -> redis.Redis:
    """One sync client (one pool) for the worker process, made on first use: no I/O at import."""
    global _CLIENT
    if _CLIENT is None:
        _CLIENT = redis.Redis.from_url(os.environ["REDIS_SESSIONS_URL"])
    return _CLIENT


def chat_turn(session_id: str, text: str, *, task_id: str, key_prefix: str = "rs") -> dict[str, Any]:
    """One turn of ``session_id``'s conversation; ``task_id`` (Celery's ``self.request.id``)
    makes a retried task append its turn once."""
    session = SyncRedisSession(session_id, client=_client(), key_prefix=key_prefix, ttl_seconds=3600)
    history = session.get_items()
    answer = f"turn {len(history) // 2 + 1}: you said {text!r}"  # the model's call goes here
    try:
        session.add_items([{"role": "user", "content": text},
                           {"role": "assistant", "content": answer}], idempotency_key=task_id)
    except SessionError as exc:
        if exc.code is not ErrorCode.IDEMPOTENCY_KEY_REUSED:
            raise  # Redis unreachable or slow: Celery's retry runs the task again, safely
        # This task's turn is stored already (a retry after its write): that one stands,
        # not this run's answer.
        return {"session": session_id, "answer": None, "history": len(history), "duplicate": True}
    return {"session": session_id, "answer": answer, "history": len(history), "duplicate": False}


if __name__ == "__main__":
    print(chat_turn("demo-worker", "hello", task_id="task-1"))
    print(chat_turn("demo-worker", "again", task_id="task-2"))
    print(chat_turn("demo-worker", "again", task_id="task-2"))  # a retried task: no second append
