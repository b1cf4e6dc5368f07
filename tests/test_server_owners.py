"""The reference server binds what a request stores to its API key (server/owners.py):
with the official client, a second key's call on every Responses and Conversations
endpoint answers as for an id that never existed, and the first key's data is unchanged."""

from __future__ import annotations

from typing import Any, AsyncIterator

import httpx2
import openai
import pytest

from chains import all_keys
from serverkit import Served, serve


@pytest.fixture(params=[True, False], ids=["one-step", "two-writes"])
async def served(backend: Any, request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    async for s in serve(backend, one_step=request.param):
        yield s


def as_key(served: Served, key: str) -> openai.AsyncOpenAI:
    return served.client.with_options(api_key=key)


async def answer(call: Any) -> Any:
    """A call's status and error body (code, param), or 200 and nothing: what a client can tell."""
    try:
        await call
        return 200, None
    except openai.APIStatusError as exc:
        error = exc.body if isinstance(exc.body, dict) else {}
        return exc.status_code, (error.get("code"), error.get("param"), error.get("type"))


async def test_a_second_key_finds_nothing_of_the_first(backend: Any, served: Served) -> None:
    a, b = as_key(served, "sk-project-a"), as_key(served, "sk-project-b")
    first = await a.responses.create(model="m", input="hello")
    second = await a.responses.create(model="m", input="again", previous_response_id=first.id)
    conv = await a.conversations.create(items=[{"type": "message", "role": "user", "content": "hi"}])
    turn = await a.responses.create(model="m", input="in conv", conversation=conv.id)
    items = await a.conversations.items.list(conv.id)
    item_id = items.data[0].id
    before = await all_keys(backend, served.store, deadlines=True)
    ghost_response, ghost_conv = "resp_" + "0" * 48, "conv_" + "0" * 48
    for mine, ghost in ((second.id, ghost_response), (turn.id, ghost_response)):
        for call in (lambda rid: b.responses.retrieve(rid), lambda rid: b.responses.delete(rid),
                     lambda rid: b.responses.input_items.list(rid),
                     lambda rid: b.responses.create(model="m", input="x", previous_response_id=rid)):
            assert await answer(call(mine)) == await answer(call(ghost)) != (200, None)
    for call in (lambda cid: b.conversations.retrieve(cid), lambda cid: b.conversations.update(cid, metadata={"k": "v"}),
                 lambda cid: b.conversations.delete(cid), lambda cid: b.conversations.items.list(cid),
                 lambda cid: b.conversations.items.create(cid, items=[{"type": "message", "role": "user",
                                                                       "content": "x"}]),
                 lambda cid: b.conversations.items.retrieve(item_id, conversation_id=cid),
                 lambda cid: b.conversations.items.delete(item_id, conversation_id=cid),
                 lambda cid: b.responses.create(model="m", input="x", conversation=cid)):
        got = await answer(call(conv.id))
        assert got == await answer(call(ghost_conv)) and got[0] == 404
    assert await all_keys(backend, served.store, deadlines=True) == before
    # the first key still has all of it, in OpenAI's shapes
    assert (await a.responses.retrieve(second.id)).previous_response_id == first.id
    assert len((await a.responses.input_items.list(second.id)).data) == 3
    assert [i.id for i in (await a.conversations.items.list(conv.id)).data] == [i.id for i in items.data]


async def test_requests_without_a_key_are_one_owner_apart_from_every_key(served: Served) -> None:
    """The default owner of a request without a bearer token is the empty key's."""
    keyed = as_key(served, "sk-a")
    made = await keyed.responses.create(model="m", input="hello")
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=served.app)) as http:
        assert (await http.get(f"http://server/v1/responses/{made.id}")).status_code == 404
        mine = await http.post("http://server/v1/responses", json={"model": "m", "input": "anon"})
        assert mine.status_code == 200
        rid = mine.json()["id"]
        assert (await http.get(f"http://server/v1/responses/{rid}")).status_code == 200
    assert (await answer(keyed.responses.retrieve(rid)))[0] == 404
