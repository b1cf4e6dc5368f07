"""/v1/responses through the official OpenAI client, on every backend: chains,
store=False, retrieve, delete, input_items paging and OpenAI's error types."""

from __future__ import annotations

from typing import Any, AsyncIterator

import httpx2
import openai
import pytest
from openai.types.responses import Response, ResponseItemList

from chains import make_store
from serverkit import Served, client_for, make_conversations, serve
from redis_sessions import MemoryConversationStore, MemoryResponseSessionStore
from redis_sessions.server import ModelCall, ModelReply, create_app, upstream_model


@pytest.fixture
async def served(backend: Any) -> AsyncIterator[Served]:
    async for s in serve(backend):
        yield s


async def create_raw(client: openai.AsyncOpenAI, **params: Any) -> dict[str, Any]:
    """The JSON body as sent, checked against the client's own Response type (which
    the client itself would not validate)."""
    raw = await client.responses.with_raw_response.create(model="test-model", **params)
    body = raw.http_response.json()
    Response.model_validate(body)
    return body


async def test_previous_response_id_continues_a_chain(served: Served) -> None:
    client = served.client
    first = await client.responses.create(model="test-model", input="hello", instructions="Be brief.")
    second = await client.responses.create(model="test-model", input="again", previous_response_id=first.id)
    third = await create_raw(client, input=[{"role": "user", "content": "third"}], previous_response_id=second.id,
                             metadata={"k": "v"})
    assert first.output_text == "(1 items so far) you said: hello"
    assert second.output_text == "(3 items so far) you said: again"
    assert third["output"][0]["content"][0]["text"] == "(5 items so far) you said: third"
    assert (first.previous_response_id, second.previous_response_id) == (None, first.id)
    assert third["previous_response_id"] == second.id and third["metadata"] == {"k": "v"}
    assert first.instructions == "Be brief." and first.model == "test-model" and first.status == "completed"
    message = second.output[0]
    assert message.type == "message" and message.role == "assistant" and message.status == "completed"
    assert message.id.startswith("msg_") and message.content[0].annotations == []
    assert second.usage is not None and second.usage.total_tokens > 0
    assert third["conversation"] is None and third["store"] is True


async def test_retrieve_returns_what_create_returned(served: Served) -> None:
    client = served.client
    created = await create_raw(client, input="hello", metadata={"user": "42"})
    raw = await client.responses.with_raw_response.retrieve(created["id"])
    fetched = raw.http_response.json()
    Response.model_validate(fetched)
    assert fetched == created
    parsed = await client.responses.retrieve(created["id"])
    assert parsed.output_text == "(1 items so far) you said: hello"


async def test_store_false_saves_nothing(served: Served) -> None:
    client = served.client
    first = await client.responses.create(model="test-model", input="hello")
    unsaved = await create_raw(client, input="not kept", previous_response_id=first.id, store=False)
    assert unsaved["output"][0]["content"][0]["text"] == "(3 items so far) you said: not kept"
    assert unsaved["store"] is False and await served.store.get(unsaved["id"]) is None
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(unsaved["id"])
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="test-model", input="x", previous_response_id=unsaved["id"])
    assert caught.value.code == "previous_response_not_found"
    after = await client.responses.create(model="test-model", input="next", previous_response_id=first.id)
    assert after.output_text == "(3 items so far) you said: next"  # the unsaved turn is not in the chain


async def test_delete(served: Served) -> None:
    client = served.client
    first = await client.responses.create(model="test-model", input="hello")
    second = await client.responses.create(model="test-model", input="again", previous_response_id=first.id)
    raw = await client.responses.with_raw_response.delete(second.id)
    assert raw.http_response.status_code == 200
    assert raw.http_response.json() == {"id": second.id, "object": "response", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(second.id)
    with pytest.raises(openai.NotFoundError):
        await client.responses.delete(second.id)
    assert await client.responses.delete(first.id) is None  # the client's own return for a delete
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="test-model", input="x", previous_response_id=first.id)
    assert caught.value.code == "previous_response_not_found"
    assert caught.value.param == "previous_response_id"


async def three_turns(client: openai.AsyncOpenAI) -> tuple[str, list[str]]:
    """Turns of 1, 2 and 1 input items; the last response's input_items are the 6
    items before its output, as texts oldest first."""
    first = await client.responses.create(model="test-model", input="one")
    second = await client.responses.create(
        model="test-model", previous_response_id=first.id,
        input=[{"role": "developer", "content": "two-a"},
               {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "two-b"}]}])
    third = await client.responses.create(model="test-model", input="three", previous_response_id=second.id)
    return third.id, ["one", first.output_text, "two-a", "two-b", second.output_text, "three"]


def text_of(item: Any) -> str:
    return str(item.content[0].text)


async def test_input_items_pages_by_limit_order_and_after(served: Served) -> None:
    client = served.client
    response_id, texts = await three_turns(client)
    page = await client.responses.input_items.list(response_id, limit=4)  # default order: desc
    assert [text_of(i) for i in page.data] == texts[::-1][:4] and page.has_more is True
    raw = (await client.responses.input_items.with_raw_response.list(response_id, limit=4)).http_response.json()
    ResponseItemList.model_validate(raw)
    assert raw["first_id"] == page.data[0].id and raw["last_id"] == page.data[-1].id
    rest = await client.responses.input_items.list(response_id, limit=4, after=page.data[-1].id)
    assert [text_of(i) for i in rest.data] == texts[::-1][4:] and rest.has_more is False
    ascending = [text_of(i) async for i in client.responses.input_items.list(response_id, limit=1, order="asc")]
    assert ascending == texts  # the client follows has_more and the last id, one item per page
    ids = [i.id async for i in client.responses.input_items.list(response_id, order="asc")]
    again = [i.id async for i in client.responses.input_items.list(response_id, order="asc", limit=100)]
    assert ids == again and len(set(ids)) == 6  # ids were given at save: the listing is stable
    own = await client.responses.input_items.list(response_id, order="asc", after=ids[4])
    assert [i.id for i in own.data] == ids[5:]


async def test_input_items_refuses_bad_queries(served: Served) -> None:
    client = served.client
    response_id, _ = await three_turns(client)
    for query in ({"limit": 0}, {"limit": 101}, {"order": "up"}, {"after": "msg_unknown"}):
        with pytest.raises(openai.BadRequestError) as caught:
            await client.responses.input_items.list(response_id, **query)  # type: ignore[arg-type]
        assert caught.value.body["param"] == next(iter(query))  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        await client.responses.input_items.list("resp_unknown")


async def test_errors_have_openai_shapes_and_types(served: Served) -> None:
    """OpenAI's answers: an unknown previous_response_id is a 400 previous_response_not_found
    naming the field; an unknown response on GET, DELETE and input_items a 404."""
    client = served.client
    with pytest.raises(openai.BadRequestError) as missing:
        await client.responses.create(model="test-model", input="x", previous_response_id="resp_missing")
    assert missing.value.status_code == 400 and missing.value.body == {  # type: ignore[comparison-overlap]
        "message": "Previous response with id 'resp_missing' not found.", "type": "invalid_request_error",
        "param": "previous_response_id", "code": "previous_response_not_found"}
    for call in (client.responses.retrieve, client.responses.delete, client.responses.input_items.list):
        with pytest.raises(openai.NotFoundError) as gone:
            await call("resp_missing")  # type: ignore[operator]
        assert gone.value.body == {  # type: ignore[comparison-overlap]
            "message": "Response with id 'resp_missing' not found.", "type": "invalid_request_error",
            "param": None, "code": "session.chain.not_found"}
    first = await client.responses.create(model="test-model", input="hello")
    with pytest.raises(openai.BadRequestError) as both:
        await client.responses.create(model="test-model", input="x", previous_response_id=first.id,
                                      conversation="conv_1")
    assert both.value.body["param"] == "conversation" and "Mutually exclusive" in both.value.message  # type: ignore[index]
    for bad in ({"input": 3}, {"input": ["text"]}, {"store": "yes"}, {"instructions": 1}, {"conversation": 5},
                {"stream": "yes"}, {"tools": ["x"]}):
        with pytest.raises(openai.BadRequestError) as caught:
            await client.post("/responses", body={"model": "m", **bad}, cast_to=Response)
        assert caught.value.code == "session.input.invalid"
        assert caught.value.body["param"] == next(iter(bad))  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as invalid_id:
        await client.responses.retrieve("resp with space")
    assert invalid_id.value.code == "session.id.invalid"
    with pytest.raises(openai.NotFoundError) as route:
        await client.get("/nowhere", cast_to=Response)
    assert route.value.body["type"] == "invalid_request_error"  # type: ignore[index]


async def test_bad_json_is_a_400_in_openai_shape(served: Served) -> None:
    for payload in (b"{not json", b"[1, 2]"):
        reply = await served.http.post("http://server/v1/responses", content=payload)
        assert reply.status_code == 400
        assert reply.json()["error"]["code"] == "session.input.invalid"


async def test_upstream_model_is_the_one_line_swap(served: Served) -> None:
    """A server whose model is another server's Responses endpoint, through
    upstream_model(AsyncOpenAI(...)): history lives in the first, the second sees it
    all in one stateless (store=False) call per turn."""
    upstream = MemoryResponseSessionStore()
    upstream_client, upstream_http = client_for(create_app(upstream, MemoryConversationStore()))
    gateway_client, gateway_http = client_for(create_app(served.store, served.conversations,
                                                         model=upstream_model(upstream_client)))
    first = await gateway_client.responses.create(model="test-model", input="hello")
    second = await gateway_client.responses.create(model="test-model", input="again", previous_response_id=first.id)
    assert second.output_text == "(3 items so far) you said: again"
    assert second.usage is not None and second.usage.input_tokens > 0
    assert upstream.round_trips == 0  # store=False upstream: nothing was saved there
    await upstream_http.aclose()
    await gateway_http.aclose()


async def test_a_failing_model_is_a_500_in_openai_shape(backend: Any) -> None:
    async def broken(call: ModelCall) -> ModelReply:
        raise RuntimeError("the model is down")

    app = create_app(make_store(backend), make_conversations(backend), model=broken)
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app, raise_app_exceptions=False))
    client = openai.AsyncOpenAI(http_client=http, base_url="http://server/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.InternalServerError) as caught:
        await client.responses.create(model="test-model", input="hello")
    assert caught.value.body == {"message": "The server had an error while processing your request.",  # type: ignore[comparison-overlap]
                                 "type": "server_error", "param": None, "code": "server_error"}
    await http.aclose()


async def test_any_worker_continues_any_conversation(backend: Any) -> None:
    """Two servers (two workers) over one backend, each turn on the other one: by
    previous_response_id and in a conversation."""
    clients = []
    for _ in range(2):
        client, http = client_for(create_app(make_store(backend), make_conversations(backend)))
        clients.append((client, http))
    (one, _), (two, _) = clients
    previous = None
    for turn in range(4):
        client = (one, two)[turn % 2]
        response = await client.responses.create(model="test-model", input=f"turn {turn}",
                                                 previous_response_id=previous)
        assert response.output_text == f"({2 * turn + 1} items so far) you said: turn {turn}"
        previous = response.id
    conversation = await one.conversations.create()
    for turn in range(4):
        client = (two, one)[turn % 2]
        response = await client.responses.create(model="test-model", input=f"turn {turn}",
                                                 conversation=conversation.id)
        assert response.output_text == f"({2 * turn + 1} items so far) you said: turn {turn}"
    assert len([i async for i in two.conversations.items.list(conversation.id)]) == 8
    for _, http in clients:
        await http.aclose()


async def test_probes_on_every_backend(served: Served) -> None:
    """/readyz PINGs the stores' Redis (on a cluster, through the cluster client);
    /healthz answers without it."""
    ready = await served.http.get("http://server/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
    live = await served.http.get("http://server/healthz")
    assert live.status_code == 200 and live.json() == {"status": "ok"}
