"""``stream: true`` on /v1/responses, on every backend: the raw events as the official
client reads them, its ``responses.stream`` helper, what a failure mid-stream sends,
and what a client that goes away mid-stream leaves (nothing); then the same through
``upstream_model`` of a streaming stand-in upstream on loopback, whose deltas must
pass through as they come."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, AsyncIterator

import openai
import pytest
from pydantic import TypeAdapter
from openai.types.responses import Response, ResponseStreamEvent

from serverkit import Served, client_for, listening, make_conversations, port_of, serve
from chains import make_store
from paced_upstream import PacedUpstream
from redis_sessions.server import ModelCall, ModelReply, create_app, stand_in_model, upstream_model

MESSAGE_EVENTS = ["response.created", "response.in_progress", "response.output_item.added",
                  "response.content_part.added"]
CLOSING_EVENTS = ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                  "response.completed"]


@pytest.fixture
async def served(backend: Any) -> AsyncIterator[Served]:
    async for s in serve(backend):
        yield s


def sse_blocks(text: str) -> list[tuple[str, dict[str, Any]]]:
    """``event: <type>\\ndata: <json>`` blocks, each checked to name its own type."""
    blocks = []
    for block in text.split("\n\n"):
        if not block:
            continue
        event, data = block.split("\n")
        assert event.startswith("event: ") and data.startswith("data: "), block
        payload = json.loads(data[len("data: "):])
        assert payload["type"] == event[len("event: "):]
        blocks.append((payload["type"], payload))
    return blocks


async def test_the_raw_stream_is_openais_event_sequence(served: Served) -> None:
    reply = await served.http.post("http://server/v1/responses", json={
        "model": "test-model", "input": "hello there", "stream": True})
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
    blocks = sse_blocks(reply.text)
    kinds = [kind for kind, _ in blocks]
    text = "(1 items so far) you said: hello there"
    deltas = [payload["delta"] for kind, payload in blocks if kind == "response.output_text.delta"]
    assert kinds == MESSAGE_EVENTS + ["response.output_text.delta"] * len(deltas) + CLOSING_EVENTS
    assert len(deltas) == len(text.split()) and "".join(deltas) == text
    assert [payload["sequence_number"] for _, payload in blocks] == list(range(len(blocks)))
    created, done = blocks[0][1]["response"], blocks[-1][1]["response"]
    assert created["status"] == "in_progress" and created["output"] == []
    assert done["status"] == "completed" and done["output"][0]["content"][0]["text"] == text
    assert created["id"] == done["id"]
    events = TypeAdapter(list[ResponseStreamEvent]).validate_python([payload for _, payload in blocks])
    assert [e.type for e in events] == kinds  # each parses, strictly, as the client's own event type
    Response.model_validate(created)
    stored = await served.client.responses.with_raw_response.retrieve(done["id"])
    assert stored.http_response.json() == done  # stored once complete, as the last event shows it


async def test_the_official_client_reads_the_stream(served: Served) -> None:
    client = served.client
    first = await client.responses.create(model="test-model", input="hello")
    stream = await client.responses.create(model="test-model", input="again", previous_response_id=first.id,
                                           stream=True)
    events = [event async for event in stream]
    assert [e.type for e in events][:4] == MESSAGE_EVENTS and events[-1].type == "response.completed"
    item = events[2].item  # type: ignore[union-attr]
    assert item.type == "message" and item.status == "in_progress" and item.id.startswith("msg_")
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    final = events[-1].response  # type: ignore[union-attr]
    assert "".join(deltas) == final.output_text == "(3 items so far) you said: again"
    assert final.previous_response_id == first.id and final.output[0].id == item.id
    third = await client.responses.create(model="test-model", input="more", previous_response_id=final.id)
    assert third.output_text == "(5 items so far) you said: more"  # the streamed turn is in the chain


async def test_the_stream_helper_gets_the_final_response(served: Served) -> None:
    client = served.client
    first = await client.responses.create(model="test-model", input="hello")
    texts = []
    async with client.responses.stream(model="test-model", input="again", previous_response_id=first.id) as stream:
        async for event in stream:
            if event.type == "response.output_text.delta":
                texts.append(event.delta)
        final = await stream.get_final_response()
    assert final.output_text == "".join(texts) == "(3 items so far) you said: again"
    stored = await served.store.get(final.id)
    assert stored is not None and stored.previous_response_id == first.id


async def test_a_streamed_conversation_turn_is_appended(served: Served) -> None:
    client = served.client
    conversation = await client.conversations.create(items=[{"role": "user", "content": "context"}])
    async with client.responses.stream(model="test-model", input="hello", conversation=conversation.id) as stream:
        final = await stream.get_final_response()
    assert final.output_text == "(2 items so far) you said: hello"
    listed = [item async for item in client.conversations.items.list(conversation.id, order="asc")]
    assert [item.content[0].text for item in listed] == ["context", "hello", final.output_text]  # type: ignore[union-attr]


async def test_store_false_streams_and_saves_nothing(served: Served) -> None:
    stream = await served.client.responses.create(model="test-model", input="hello", store=False, stream=True)
    final = [event async for event in stream][-1].response  # type: ignore[union-attr]
    assert final.store is False and final.output_text == "(1 items so far) you said: hello"
    assert await served.store.get(final.id) is None


async def test_refusals_before_the_stream_are_plain_errors(served: Served) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await served.client.responses.create(model="test-model", input="x", previous_response_id="resp_missing",
                                             stream=True)
    assert caught.value.code == "previous_response_not_found" and caught.value.param == "previous_response_id"


async def test_a_failure_after_the_stream_began_is_an_error_event(backend: Any) -> None:
    """The parent is deleted while the model answers: the save's parent check refuses
    the turn, the stream ends with an error event in the JSON error's shape, and
    nothing is stored."""
    store = make_store(backend)

    async def deleting(call: ModelCall) -> ModelReply:
        if call.body.get("stream"):
            await store.delete_thread(call.body["previous_response_id"])
        return await stand_in_model(call)

    client, http = client_for(create_app(store, make_conversations(backend), model=deleting))
    first = await client.responses.create(model="test-model", input="hello")
    stream = await client.responses.create(model="test-model", input="again", previous_response_id=first.id,
                                           stream=True)
    events = [event async for event in stream]
    error = events[-1]
    assert error.type == "error" and error.code == "previous_response_not_found"  # type: ignore[union-attr]
    assert error.param == "previous_response_id" and first.id in error.message  # type: ignore[union-attr]
    assert "response.completed" not in [e.type for e in events]
    assert await store.get(events[0].response.id) is None  # type: ignore[union-attr]
    await http.aclose()


class Gate:
    """A model that holds its answer until released, and notes being cancelled."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, call: ModelCall) -> ModelReply:
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return await stand_in_model(call)


async def read_events(reader: asyncio.StreamReader, until: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    while not events or events[-1]["type"] != until:
        line = await asyncio.wait_for(reader.readline(), 10)
        assert line, "the server closed the stream"
        if line.startswith(b"data: "):
            events.append(json.loads(line[len(b"data: "):]))
    return events


async def test_a_client_gone_mid_stream_leaves_nothing_stored(backend: Any) -> None:
    """Over a real socket to uvicorn: the stream has begun (the response's id is out),
    the client closes the connection, the server stops the turn; no record exists,
    the parent's chain is as it was and continues, and the id is unknown as a parent."""
    gate = Gate()
    store = make_store(backend)
    app = create_app(store, make_conversations(backend), model=gate)
    async with listening(app) as server:
        client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port_of(server)}/v1", api_key="x", max_retries=0)
        gate.release.set()
        first = await client.responses.create(model="test-model", input="hello")
        first_done = await client.responses.create(model="test-model", input="hello", previous_response_id=first.id)
        gate.release.clear()
        body = json.dumps({"model": "test-model", "input": "lost", "stream": True,
                           "previous_response_id": first_done.id}).encode()
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(server))
        writer.write(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer x\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        events = await read_events(reader, "response.in_progress")
        lost = events[0]["response"]["id"]
        writer.close()
        await writer.wait_closed()
        await asyncio.wait_for(gate.cancelled.wait(), 10)  # the server noticed, and stopped the model
        gate.release.set()
        assert await store.get(lost) is None
        chain = await store.resolve_chain(first_done.id)
        assert [s.id for s in chain.sessions] == [first.id, first_done.id]
        with pytest.raises(openai.BadRequestError) as caught:
            await client.responses.create(model="test-model", input="x", previous_response_id=lost)
        assert caught.value.code == "previous_response_not_found"
        after = await client.responses.create(model="test-model", input="next", previous_response_id=first_done.id)
        assert after.output_text == "(5 items so far) you said: next"
        await client.close()


async def test_a_client_gone_after_a_delta_leaves_nothing_stored(backend: Any) -> None:
    """The ASGI app driven by hand: the client's disconnect arrives right after the
    first text delta went out; the turn stops before its save."""
    store = make_store(backend)
    app = create_app(store, make_conversations(backend))
    client, http = client_for(app)
    first = await client.responses.create(model="test-model", input="hello")
    body = json.dumps({"model": "test-model", "input": "one two three four five", "stream": True,
                       "previous_response_id": first.id}).encode()
    gone, asked, sent = asyncio.Event(), [], []

    async def receive() -> dict[str, Any]:
        if not asked:
            asked.append(True)
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message.get("body", b""))
        if b"response.output_text.delta" in sent[-1]:
            gone.set()

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/responses", "raw_path": b"/v1/responses", "root_path": "", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"authorization", b"Bearer x")], "server": ("server", 80)}
    await app(scope, receive, send)
    events = sse_blocks(b"".join(sent).decode())
    kinds = [kind for kind, _ in events]
    assert "response.output_text.delta" in kinds and "response.output_item.done" not in kinds
    assert await store.get(events[0][1]["response"]["id"]) is None
    assert [s.id for s in (await store.resolve_chain(first.id)).sessions] == [first.id]
    await http.aclose()


async def test_a_function_call_streams_its_arguments(backend: Any) -> None:
    async def calling(call: ModelCall) -> ModelReply:
        return ModelReply(output=[{"type": "function_call", "call_id": "call_1", "name": "lookup",
                                   "arguments": '{"city": "Oslo"}', "status": "completed"}])

    client, http = client_for(create_app(make_store(backend), make_conversations(backend), model=calling))
    reply = await http.post("http://server/v1/responses", json={"input": "weather?", "stream": True})
    blocks = sse_blocks(reply.text)
    events = TypeAdapter(list[ResponseStreamEvent]).validate_python([payload for _, payload in blocks])
    assert [e.type for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done", "response.completed"]
    assert events[4].arguments == '{"city": "Oslo"}'  # type: ignore[union-attr]
    final = events[-1].response  # type: ignore[union-attr]
    assert final.output[0].type == "function_call" and final.output[0].id.startswith("fc_")
    assert (await client.responses.retrieve(final.id)).output[0].name == "lookup"  # type: ignore[union-attr]
    await http.aclose()


# -- a streaming upstream (upstream_model) on loopback: deltas relayed as they come --

@dataclass
class Gateway:
    """The server over ``backend`` under uvicorn, its model ``upstream_model`` of a paced
    stand-in under uvicorn too; ``client`` talks to the server over loopback."""

    upstream: PacedUpstream
    store: Any
    conversations: Any
    client: openai.AsyncOpenAI
    port: int


@pytest.fixture
async def gateway(backend: Any) -> AsyncIterator[Gateway]:
    upstream = PacedUpstream()
    conversations = make_conversations(backend)
    store = make_store(backend, conversations=conversations)
    async with listening(upstream.app) as up:
        to_upstream = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port_of(up)}/v1", api_key="x", max_retries=0)
        async with listening(create_app(store, conversations, model=upstream_model(to_upstream))) as server:
            client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port_of(server)}/v1", api_key="x",
                                        max_retries=0)
            yield Gateway(upstream, store, conversations, client, port_of(server))
            await client.close()
        await to_upstream.close()


async def test_upstream_events_are_relayed_in_order_and_stored(gateway: Gateway) -> None:
    """Every output event upstream sent, in its order, under this server's response id
    and sequence numbers; the deltas add up to the stored text; the item id is one."""
    events = [e async for e in await gateway.client.responses.create(model="m", input="hello", stream=True)]
    assert [e.type for e in events] == MESSAGE_EVENTS + ["response.output_text.delta"] * 5 + CLOSING_EVENTS
    assert [e.sequence_number for e in events] == list(range(len(events)))
    ours = events[0].response.id  # type: ignore[union-attr]
    final = events[-1].response  # type: ignore[union-attr]
    assert final.id == ours and final.store is True and ours.startswith("resp_")
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    stored = await gateway.store.get(ours)
    assert stored is not None and stored.response.output[0]["content"][0]["text"] == deltas
    assert deltas == final.output_text == "1 input items; last: hello"
    item_ids = {getattr(e, "item_id", None) or e.item.id for e in events[2:-1]}  # type: ignore[union-attr]
    assert item_ids == {stored.response.output[0]["id"]}
    sent = gateway.upstream.requests[-1]
    assert sent["stream"] is True and sent["store"] is False  # nothing is kept upstream
    raw = await gateway.client.responses.with_raw_response.retrieve(ours)
    assert raw.http_response.json()["store"] is True


async def test_the_first_delta_arrives_before_upstream_sends_its_last(gateway: Gateway) -> None:
    """The stand-in holds everything after its first delta until the client has had that
    delta: a server that waited for the whole reply would never pass the first one on."""
    hold = gateway.upstream.hold = asyncio.Event()
    kinds = []

    async def read() -> None:
        async for event in await gateway.client.responses.create(model="m", input="one two three", stream=True):
            kinds.append(event.type)
            if event.type == "response.output_text.delta" and not hold.is_set():
                assert not gateway.upstream.sent_last
                hold.set()

    await asyncio.wait_for(read(), 30)  # a server that held the deltas back would never get here
    assert gateway.upstream.sent_last and kinds[-1] == "response.completed"


async def read_until(reader: asyncio.StreamReader, kind: str) -> list[dict[str, Any]]:
    return await asyncio.wait_for(read_events(reader, kind), 30)


@pytest.mark.parametrize("parent", ["previous_response_id", "conversation"])
async def test_a_client_gone_mid_upstream_stream_leaves_nothing_stored(gateway: Gateway, parent: str) -> None:
    """The client closes its connection after the first delta, while upstream holds the
    rest: the server closes its upstream stream (the stand-in sees it go), stores
    nothing, and the chain or the conversation it continued is as it was."""
    client = gateway.client
    first = await client.responses.create(model="m", input="hello")
    conversation = await client.conversations.create(items=[{"role": "user", "content": "context"}])
    before = [i.id async for i in client.conversations.items.list(conversation.id)]
    gateway.upstream.hold = asyncio.Event()
    where = {"previous_response_id": first.id} if parent == "previous_response_id" else {"conversation": conversation.id}
    body = json.dumps({"model": "m", "input": "lost", "stream": True, **where}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    writer.write(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer x\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    events = await read_until(reader, "response.output_text.delta")
    writer.close()
    await writer.wait_closed()
    await asyncio.wait_for(gateway.upstream.abandoned.wait(), 30)  # upstream stops generating
    gateway.upstream.hold.set()
    lost = events[0]["response"]["id"]
    assert await gateway.store.get(lost) is None
    assert [s.id for s in (await gateway.store.resolve_chain(first.id)).sessions] == [first.id]
    assert [i.id async for i in client.conversations.items.list(conversation.id)] == before
    after = await client.responses.create(model="m", input="next", **where)  # type: ignore[arg-type]
    assert after.output_text.startswith("3 input items" if parent == "previous_response_id" else "2 input items")


@pytest.mark.parametrize("failure", ["response.failed", "error", "drop"])
async def test_an_upstream_failure_mid_stream_is_an_error_event(gateway: Gateway, failure: str) -> None:
    """Upstream fails after two deltas (its response.failed, its error event, or its
    connection cut): the deltas went out, then our error event; nothing is stored and
    the parent's chain is as it was."""
    first = await gateway.client.responses.create(model="m", input="hello")
    gateway.upstream.fail_after, gateway.upstream.failure = 2, failure
    stream = await gateway.client.responses.create(model="m", input="a b c d e", previous_response_id=first.id,
                                                   stream=True)
    events = [event async for event in stream]
    kinds = [e.type for e in events]
    assert kinds == MESSAGE_EVENTS + ["response.output_text.delta"] * 2 + ["error"]
    error = events[-1]
    assert error.code == "server_error" and error.sequence_number == len(events) - 1  # type: ignore[union-attr]
    if failure != "drop":
        assert error.message == "The stand-in failed on purpose."  # type: ignore[union-attr]
    assert await gateway.store.get(events[0].response.id) is None  # type: ignore[union-attr]
    assert [s.id for s in (await gateway.store.resolve_chain(first.id)).sessions] == [first.id]


async def test_an_incomplete_upstream_reply_is_stored_incomplete(gateway: Gateway) -> None:
    """``max_output_tokens`` reached upstream: response.incomplete, and the response is
    kept with status incomplete and its reason, as OpenAI keeps one."""
    stream = await gateway.client.responses.create(model="m", input="a b c d e f", max_output_tokens=3,
                                                   stream=True)
    events = [event async for event in stream]
    assert events[-1].type == "response.incomplete"
    final = events[-1].response  # type: ignore[union-attr]
    assert final.status == "incomplete" and final.incomplete_details.reason == "max_output_tokens"
    assert final.output_text == "1 input items;"
    stored = await gateway.client.responses.retrieve(final.id)
    assert stored.status == "incomplete" and stored.output_text == final.output_text
    assert stored.incomplete_details is not None and stored.incomplete_details.reason == "max_output_tokens"
    assert gateway.upstream.requests[-1]["max_output_tokens"] == 3
    # and it is continued, its partial output in the next turn's history
    after = await gateway.client.responses.create(model="m", input="go on", previous_response_id=final.id)
    assert after.status == "completed"
    assert gateway.upstream.requests[-1]["input"][1]["content"][0]["text"] == final.output_text


async def test_a_streamed_turn_is_in_the_next_turns_history(gateway: Gateway) -> None:
    async with gateway.client.responses.stream(model="m", input="hello") as stream:
        first = await stream.get_final_response()
    second = await gateway.client.responses.create(model="m", input="again", previous_response_id=first.id,
                                                   stream=True)
    final = [event async for event in second][-1].response  # type: ignore[union-attr]
    assert final.output_text == "3 input items; last: again"
    history = gateway.upstream.requests[-1]["input"]
    assert history[1]["role"] == "assistant" and history[1]["content"][0]["text"] == first.output_text


async def test_a_request_without_stream_drains_the_upstream_stream(gateway: Gateway) -> None:
    response = await gateway.client.responses.create(model="m", input="hello")
    assert response.output_text == "1 input items; last: hello" and response.status == "completed"
    assert response.usage is not None and response.usage.output_tokens == 5
    assert (await gateway.client.responses.retrieve(response.id)).output_text == response.output_text
    assert gateway.upstream.requests[-1]["stream"] is True


async def test_a_streaming_model_of_ones_own_gets_ids_and_needs_its_reply(backend: Any) -> None:
    """A model written as an async generator, its item without an id: the id minted
    when the item is added is in every event and in the stored output. A stream that
    ends without its ModelReply is an error event, and nothing is stored."""
    ends: list[bool] = []

    async def streaming(call: ModelCall) -> Any:
        item = {"type": "message", "role": "assistant"}
        yield {"type": "response.output_item.added", "output_index": 0,
               "item": {**item, "status": "in_progress", "content": []}}
        yield {"type": "response.output_text.delta", "item_id": "upstream_id", "output_index": 0,
               "content_index": 0, "delta": "hi", "logprobs": [], "sequence_number": 99}
        if not ends:
            yield ModelReply(output=[{**item, "content": [{"type": "output_text", "text": "hi"}]}])

    client, http = client_for(create_app(make_store(backend), make_conversations(backend), model=streaming))
    events = [event async for event in await client.responses.create(model="m", input="x", stream=True)]
    stored = await client.responses.retrieve(events[-1].response.id)  # type: ignore[union-attr]
    assert {events[2].item.id, events[3].item_id} == {stored.output[0].id}  # type: ignore[union-attr]
    assert [e.sequence_number for e in events] == list(range(len(events))) and stored.output_text == "hi"
    ends.append(True)
    events = [event async for event in await client.responses.create(model="m", input="x", stream=True)]
    assert events[-1].type == "error" and events[-1].code == "server_error"  # type: ignore[union-attr]
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(events[0].response.id)  # type: ignore[union-attr]
    await http.aclose()
