"""A synchronous gateway: a plain WSGI app (Flask, Django and gunicorn's sync workers
serve the same way) that keeps ``previous_response_id`` chains with the sync store.

    REDIS_SESSIONS_URL=redis://localhost:6379/0 gunicorn --threads 8 examples.sync_gateway:app

``POST /v1/responses`` with ``{"input": "...", "previous_response_id": "..."}`` answers
``{"id", "output_text", "history"}``; the model is a stand-in that echoes. One store (one
client and connection pool) serves every thread; forked workers open their own
connections.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Iterable

from redis_sessions import (
    SessionError,
    StoredResponseRequestSnapshot,
    StoredResponseSession,
    StoredResponseSnapshot,
    SyncResponseSessionStore,
)

Start = Callable[[str, list[tuple[str, str]]], Any]


def make_app(store: SyncResponseSessionStore) -> Callable[[dict[str, Any], Start], Iterable[bytes]]:
    def app(environ: dict[str, Any], start: Start) -> Iterable[bytes]:
        try:
            size = int(environ.get("CONTENT_LENGTH") or 0)
            body = json.loads(environ["wsgi.input"].read(size) or b"{}")
            status, answer = "200 OK", respond(store, body)
        except SessionError as exc:
            status, answer = f"{exc.http_status} Error", exc.to_dict()
        data = json.dumps(answer).encode()
        start(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]

    return app


def respond(store: SyncResponseSessionStore, body: dict[str, Any]) -> dict[str, Any]:
    parent = body.get("previous_response_id")
    history = store.resolve_chain(parent)  # the earlier turns, oldest first
    text = f"you said: {body['input']}"    # the model's call goes here
    response_id = store.new_response_id(parent)
    store.save(StoredResponseSession(
        id=response_id, previous_response_id=parent, created_at=int(time.time()), status="completed",
        request=StoredResponseRequestSnapshot(input=body["input"], model="stand-in"),
        response=StoredResponseSnapshot(id=response_id, output=[{
            "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}],
            output_text=text),
    ))
    return {"id": response_id, "output_text": text, "history": len(history.sessions)}


def _app() -> Callable[[dict[str, Any], Start], Iterable[bytes]]:
    url = os.environ.get("REDIS_SESSIONS_URL")
    if url is None:  # no server: an in-process one, for trying it out
        import fakeredis

        return make_app(SyncResponseSessionStore(fakeredis.FakeRedis()))
    return make_app(SyncResponseSessionStore.from_url(url))


app = _app()
