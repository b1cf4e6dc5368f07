"""Malformed input to the reference server, on every backend: a coded 400 before anything is
written, and a retry of it writes nothing either. A query integer in other digits than
ASCII, an input item the conversations endpoint refuses."""

from __future__ import annotations

from typing import Any, AsyncIterator

import pytest

from chains import all_keys
from serverkit import Served, serve

URL = "http://server/v1"


@pytest.fixture(params=[True, False], ids=["one-step", "two-writes"])
async def served(backend: Any, request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    async for s in serve(backend, one_step=request.param):
        yield s


def assert_refused(reply: Any, code: str = "session.input.invalid", param: Any = ...) -> dict[str, Any]:
    """A 400 in OpenAI's error shape with ``code`` (and ``param``, when given)."""
    assert reply.status_code == 400, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    error: dict[str, Any] = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert error["code"] == code, error
    if param is not ...:
        assert error["param"] == param, error
    return error


async def history(served: Served) -> tuple[str, str]:
    """A response and a conversation with one turn each, for bad requests to continue."""
    client = served.client
    response = await client.responses.create(model="m", input="first")
    conversation = await client.conversations.create(items=[{"role": "user", "content": "first"}])
    return response.id, conversation.id


async def listed(served: Served, response_id: str, conversation_id: str) -> tuple[list[str], list[str | None]]:
    """What a reader sees: the response's input items and the conversation's items."""
    client = served.client
    own = [item.id async for item in client.responses.input_items.list(response_id)]
    items = [item.id async for item in client.conversations.items.list(conversation_id)]
    return own, items


BAD_ITEMS: list[tuple[list[dict[str, Any]], str]] = [
    ([{"role": "user", "content": "x", "id": "has space"}], "session.id.invalid"),
    ([{"role": "user", "content": "x", "id": 5}], "session.id.invalid"),
    ([{"role": "user", "content": "x", "id": "a{b}"}], "session.id.invalid"),
    ([{"role": "user", "content": "x", "id": ""}], "session.id.invalid"),
    ([{"role": "user", "content": "x", "id": "m" * 257}], "session.id.invalid"),
    ([{"type": "function_call_output", "call_id": "c", "output": "x", "id": "tab\tbed"}], "session.id.invalid"),
    ([{"role": "user", "content": "x", "id": "msg_twice"}, {"role": "user", "content": "y", "id": "msg_twice"}],
     "session.input.invalid"),
]


async def test_responses_and_conversations_refuse_the_same_items(served: Served, backend: Any) -> None:
    """An input item the conversations endpoint refuses (an id that is not an id, two
    items with one id) is refused by the responses endpoint too, with the same status
    and code, whether the turn starts a chain, continues one or is in a conversation,
    and nothing is written."""
    response_id, conversation_id = await history(served)
    keys = await all_keys(backend, served.store, deadlines=True)
    seen = await listed(served, response_id, conversation_id)
    for items, code in BAD_ITEMS:
        to_conversation = await served.http.post(URL + f"/conversations/{conversation_id}/items", json={"items": items})
        assert_refused(to_conversation, code)
        assert_refused(await served.http.post(URL + "/conversations", json={"items": items}), code)
        for where in ({}, {"previous_response_id": response_id}, {"conversation": conversation_id},
                      {"conversation": conversation_id, "stream": True}):
            reply = await served.http.post(URL + "/responses", json={"model": "m", "input": items, **where})
            assert_refused(reply, code, param="input")
    assert await all_keys(backend, served.store, deadlines=True) == keys
    assert await listed(served, response_id, conversation_id) == seen


async def test_responses_and_conversations_take_the_same_items(served: Served) -> None:
    """An item with an id of the caller's keeps it on both endpoints, and one without
    (or with a null id) gets one of the same kind."""
    items: list[Any] = [{"role": "user", "content": "a", "id": "msg_given"},
                        {"role": "user", "content": "b", "id": None},
                        {"type": "function_call_output", "call_id": "c", "output": "x"}]
    conversation = await served.client.conversations.create(items=items)
    stored = [item.model_dump() async for item in served.client.conversations.items.list(conversation.id, order="asc")]
    response = await served.http.post(URL + "/responses", json={"model": "m", "input": items})
    assert response.status_code == 200, response.text
    listing = await served.http.get(URL + f"/responses/{response.json()['id']}/input_items", params={"order": "asc"})
    own = listing.json()["data"]
    assert own[0]["id"] == stored[0]["id"] == "msg_given"
    assert [item["id"][:4] for item in own] == [item["id"][:4] for item in stored] == ["msg_", "msg_", "fco_"]
    assert [item["type"] for item in own] == [item["type"] for item in stored]


@pytest.mark.parametrize("limit", ["²", "٣", "１", "৫", "1" * 5000, "0", "101", "-1", "+5", " 5", "5 ", "1e1",
                                   "0x10", "5.0", ""])
async def test_query_integers_are_ascii_digits_in_range(served: Served, limit: str) -> None:
    """``int()`` takes '٣' (an Arabic-Indic 3) and other scripts' digits, ``isdigit()``
    takes '²' (which int() refuses), int() of 5,000 digits raises; each of them, like
    a sign, a space or a number out of range, is a 400 naming ``limit``."""
    response_id, conversation_id = await history(served)
    for path in (f"/responses/{response_id}/input_items", f"/conversations/{conversation_id}/items"):
        reply = await served.http.get(URL + path, params={"limit": limit})
        assert_refused(reply, param="limit")
        taken = await served.http.get(URL + path, params={"limit": "001"})
        assert taken.status_code == 200 and len(taken.json()["data"]) == 1
