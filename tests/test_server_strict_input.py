"""Malformed input to the reference server, on every backend: a coded 400 before anything is
written, and a retry of it writes nothing either. Numbers JSON does not have (NaN,
Infinity, a number that overflows to one) anywhere in a body, a body nested deeper than
validate.MAX_NESTING, a query integer in other digits than ASCII, an input item the
conversations endpoint refuses. And nothing the server writes as JSON, a body or a
server-sent event, holds a bare NaN."""

from __future__ import annotations

from typing import Any, AsyncIterator

import msgspec
import pytest

from chains import all_keys
from serverkit import OWNER, Served, serve
from redis_sessions import StoredResponseRequestSnapshot, StoredResponseSession, StoredResponseSnapshot
from redis_sessions.server import ModelCall, ModelReply
from redis_sessions.validate import MAX_NESTING

URL = "http://server/v1"
NOT_JSON_NUMBERS = [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400"]


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


def bodies(value: bytes, response_id: str, conversation_id: str) -> list[tuple[str, bytes]]:
    """``value`` in places across the bodies the server takes: metadata, an input item, a
    request field, a tool, a streamed turn, a turn that continues a chain or a
    conversation, a conversation's items and metadata."""
    item = b'{"role": "user", "content": "x", "extra": {"n": [1, %s]}}' % value
    prev, conv = response_id.encode(), conversation_id.encode()
    return [
        ("/responses", b'{"model": "m", "input": "x", "metadata": {"x": %s}}' % value),
        ("/responses", b'{"model": "m", "input": [%s]}' % item),
        ("/responses", b'{"model": "m", "input": "x", "temperature": %s}' % value),
        ("/responses", b'{"model": "m", "input": "x", "tools": [{"type": "function", "x": %s}]}' % value),
        ("/responses", b'{"model": "m", "input": "x", "stream": true, "metadata": {"x": %s}}' % value),
        ("/responses", b'{"model": "m", "input": [%s], "previous_response_id": "%s"}' % (item, prev)),
        ("/responses", b'{"model": "m", "input": [%s], "conversation": "%s"}' % (item, conv)),
        ("/responses", b'{"model": "m", "input": [%s], "stream": true, "conversation": "%s"}' % (item, conv)),
        ("/conversations", b'{"items": [%s]}' % item),
        ("/conversations", b'{"metadata": {"x": %s}}' % value),
        (f"/conversations/{conversation_id}/items", b'{"items": [%s]}' % item),
        (f"/conversations/{conversation_id}", b'{"metadata": {"x": %s}}' % value),
    ]


async def test_numbers_json_does_not_have_are_refused_before_anything_is_written(served: Served, backend: Any) -> None:
    """NaN and the infinities (and numbers that overflow to one) are not JSON: a body
    holding one anywhere is a 400, sent twice (a client's retry) it writes nothing, and
    the chain and the conversation it named read as before."""
    response_id, conversation_id = await history(served)
    keys = await all_keys(backend, served.store, deadlines=True)
    seen = await listed(served, response_id, conversation_id)
    for value in NOT_JSON_NUMBERS:
        for path, body in bodies(value, response_id, conversation_id):
            for _ in range(2):
                reply = await served.http.post(URL + path, content=body)
                error = assert_refused(reply, param=None)
                assert "not valid JSON" in error["message"], (path, body)
    assert await all_keys(backend, served.store, deadlines=True) == keys
    assert await listed(served, response_id, conversation_id) == seen


async def test_bodies_nested_past_the_limit_are_refused_before_anything_is_written(served: Served, backend: Any) -> None:
    """5,000 levels (far past Python's own recursion limit) and MAX_NESTING + 1 are both a
    400 naming the limit, wherever they are; MAX_NESTING itself is a body the server takes."""
    response_id, conversation_id = await history(served)
    keys = await all_keys(backend, served.store, deadlines=True)
    seen = await listed(served, response_id, conversation_id)
    for total in (5000, MAX_NESTING + 1):
        value = nested(total - 1)  # as temperature, the shallowest place, 1 level down: a body `total` deep
        for path, body in bodies(value, response_id, conversation_id):
            reply = await served.http.post(URL + path, content=body)
            error = assert_refused(reply, param=None)
            assert f"more than {MAX_NESTING} deep" in error["message"], (path, total)
    # in an item's extra.n, 5 levels down (body, input, item, extra, n): a body of MAX_NESTING + 1, then of MAX_NESTING
    _, too_deep = bodies(nested(MAX_NESTING - 4), response_id, conversation_id)[1]
    assert_refused(await served.http.post(URL + "/responses", content=too_deep), param=None)
    assert await all_keys(backend, served.store, deadlines=True) == keys
    assert await listed(served, response_id, conversation_id) == seen
    _, deepest = bodies(nested(MAX_NESTING - 5), response_id, conversation_id)[1]
    taken = await served.http.post(URL + "/responses", content=deepest)
    assert taken.status_code == 200, taken.text
    listing = await served.client.responses.input_items.list(taken.json()["id"])
    assert listing.data[0].model_dump()["extra"]["n"][1] == msgspec.json.decode(nested(MAX_NESTING - 5))


def nested(depth: int) -> bytes:
    """A JSON list ``depth`` levels deep."""
    return b"[" * depth + b"]" * depth


def not_json_model(where: str) -> Any:
    """A model whose reply holds NaN in its usage or its output."""
    async def model(call: ModelCall) -> ModelReply:
        output: dict[str, Any] = {"type": "message", "role": "assistant",
                                  "content": [{"type": "output_text", "text": "hi"}]}
        usage: dict[str, Any] = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
        if where == "usage":
            usage["total_tokens"] = float("nan")
        else:
            output["content"][0]["logprob"] = float("inf")
        return ModelReply(output=[output], usage=usage)
    return model


async def history_without_model(served: Served) -> tuple[str, str]:
    """A response and a conversation, saved through the stores (the served model fails)."""
    response_id = await served.store.new_response_id()
    await served.store.save(StoredResponseSession(
        id=response_id, created_at=1, request=StoredResponseRequestSnapshot(input="first"),
        response=StoredResponseSnapshot(id=response_id, output=[])), owner=OWNER)
    conversation = await served.conversations.create([{"type": "message", "role": "user", "content": "first"}],
                                                     owner=OWNER)
    return response_id, conversation.id


@pytest.mark.parametrize("where", ["usage", "output"])
async def test_a_model_reply_json_cannot_carry_is_a_500_and_is_not_stored(backend: Any, where: str) -> None:
    """The server never writes a bare NaN: a reply holding one is a 500 (an ``error``
    event, once a stream has begun, every event of it strict JSON), and nothing is
    saved, so no later read of the response fails on it."""
    async for served in serve(backend, model=not_json_model(where)):
        response_id, conversation_id = await history_without_model(served)
        keys = await all_keys(backend, served.store, deadlines=True)
        for where_to in ({}, {"previous_response_id": response_id}, {"conversation": conversation_id}):
            body = {"model": "m", "input": "hi", **where_to}
            reply = await served.http.post(URL + "/responses", json=body)
            assert reply.status_code == 500 and reply.json()["error"]["code"] == "server_error"
            streamed = await served.http.post(URL + "/responses", json={**body, "stream": True})
            assert streamed.status_code == 200
            events = [msgspec.json.decode(line[len("data: "):]) for line in streamed.text.splitlines()
                      if line.startswith("data: ")]  # msgspec refuses a bare NaN
            assert events[-1]["type"] == "error" and events[-1]["code"] == "server_error"
            assert "response.completed" not in [e["type"] for e in events]
        assert await all_keys(backend, served.store, deadlines=True) == keys
