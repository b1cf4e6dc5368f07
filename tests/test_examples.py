"""The README's gateway example runs: two turns through the ASGI app with the
official OpenAI client, then an unknown previous_response_id becomes OpenAI's 400
``previous_response_not_found``."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import httpx2
import openai
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@pytest.mark.real
async def test_the_gateway_example_continues_a_conversation(redis_server, monkeypatch):
    monkeypatch.setenv("REDIS_SESSIONS_URL", redis_server.url)
    gateway = importlib.reload(importlib.import_module("examples.asgi_gateway"))
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=gateway.app))
    client = openai.AsyncOpenAI(http_client=http, base_url="http://gateway/v1", api_key="x", max_retries=0)
    first = await client.responses.create(model="demo-model", input="hello")
    second = await client.responses.create(model="demo-model", input="again", previous_response_id=first.id)
    assert second.previous_response_id == first.id
    assert second.output_text == "(3 items so far) you said: again"
    history = (await gateway.store.resolve_chain(second.id)).input_items
    assert [item["content"][0]["text"] for item in history] == ["hello", first.output_text, "again",
                                                                second.output_text]
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="demo-model", input="x", previous_response_id="resp_missing")
    assert caught.value.code == "previous_response_not_found" and caught.value.param == "previous_response_id"
    await http.aclose()
    await gateway.store.close()
    await gateway.conversations.close()
