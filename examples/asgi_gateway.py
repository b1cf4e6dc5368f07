"""A minimal Responses-API gateway worker as a plain ASGI app (no framework).

Run any number of these behind a load balancer against one Redis:

    REDIS_SESSIONS_URL=redis://localhost:6379/0 uvicorn examples.asgi_gateway:app --workers 4

POST /v1/responses {"input": ..., "previous_response_id": ..., "instructions": ...}
resolves the chain, calls the model, saves the response with the parent check,
and returns it. Session errors become their HTTP status with an OpenAI-style body.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Awaitable, Callable

from redis_sessions import (
    SessionConfig,
    SessionError,
    StoredResponseRequestSnapshot,
    StoredResponseSession,
    StoredResponseSnapshot,
    create_response_session_store,
)
from redis_sessions.responses import request_input_items

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

url = os.environ.get("REDIS_SESSIONS_URL")
store = create_response_session_store(SessionConfig(backend="redis", url=url) if url else SessionConfig())


async def call_model(model: str, instructions: str | None, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stand-in for the real model call (e.g. openai.AsyncOpenAI().responses.create(
    model=model, instructions=instructions, input=items, store=False))."""
    parts = items[-1].get("content") if items else None  # a message's content is a list of parts
    last = parts[0].get("text", "") if isinstance(parts, list) and parts else ""
    text = f"({len(items)} items so far) you said: {last}"
    return [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]


async def create_response(body: dict[str, Any]) -> dict[str, Any]:
    previous = body.get("previous_response_id")
    chain = await store.resolve_chain(previous)  # one round trip, any depth
    request = StoredResponseRequestSnapshot(
        input=body.get("input", ""), instructions=body.get("instructions"), model=body.get("model", "demo-model")
    )
    new_items = request_input_items(request.input)  # the shape the history comes back in
    output = await call_model(request.model or "", request.instructions, chain.input_items + new_items)
    response_id = await store.new_response_id(previous)
    session = StoredResponseSession(
        id=response_id, previous_response_id=previous, created_at=int(time.time()),
        completed_at=int(time.time()), status="completed", request=request,
        response=StoredResponseSnapshot(id=response_id, output=output),
    )
    # Refused (409) if another worker already answered this turn with this id.
    await store.save(session, expected_previous_response_id=previous)
    return {"id": response_id, "object": "response", "previous_response_id": previous, "output": output}


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/v1/responses":
        return await respond(send, 404, {"error": {"message": "not found"}})
    raw = b""
    while True:
        message = await receive()
        raw += message.get("body", b"")
        if not message.get("more_body"):
            break
    try:
        await respond(send, 200, await create_response(json.loads(raw or b"{}")))
    except SessionError as exc:
        await respond(send, exc.http_status, exc.to_dict())


async def respond(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})
