"""The README's gateway example runs: two turns through the ASGI app, then an
unknown previous_response_id becomes a 404 with a coded body."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


async def post(app, body: dict) -> tuple[int, dict]:
    sent: list[dict] = []
    chunks = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]

    async def receive() -> dict:
        return chunks.pop(0)

    async def send(message: dict) -> None:
        sent.append(message)

    await app({"type": "http", "method": "POST", "path": "/v1/responses"}, receive, send)
    return sent[0]["status"], json.loads(sent[1]["body"])


@pytest.mark.real
async def test_the_gateway_example_continues_a_conversation(redis_server, monkeypatch):
    monkeypatch.setenv("REDIS_SESSIONS_URL", redis_server.url)
    gateway = importlib.reload(importlib.import_module("examples.asgi_gateway"))
    status, first = await post(gateway.app, {"input": "hello"})
    assert status == 200
    status, second = await post(gateway.app, {"input": "again", "previous_response_id": first["id"]})
    assert status == 200 and second["previous_response_id"] == first["id"]
    assert "(3 items so far) you said: again" in second["output"][0]["content"][0]["text"]
    history = (await gateway.store.resolve_chain(second["id"])).input_items
    assert history[0] == {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
    assert history[2] == {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]}
    status, error = await post(gateway.app, {"input": "x", "previous_response_id": "resp_missing"})
    assert status == 404 and error["error"]["code"] == "session.chain.not_found"
    await gateway.store.close()
