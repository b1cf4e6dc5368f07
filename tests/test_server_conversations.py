"""/v1/conversations through the official OpenAI client, on every backend: CRUD,
items paging, and responses that read and extend a conversation."""

from __future__ import annotations

from typing import Any, AsyncIterator

import openai
import pytest
from openai.types.conversations import Conversation, ConversationDeletedResource, ConversationItemList
from openai.types.responses import Response

from serverkit import Served, serve


@pytest.fixture(params=[True, False], ids=["one-step", "two-writes"])
async def served(backend: Any, request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    """Each test runs with a response store that appends a turn in its save's own step,
    and with one built without the conversation store (the server then writes twice)."""
    async for s in serve(backend, one_step=request.param):
        yield s


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def text_of(item: Any) -> str:
    return str(item.content[0].text)


async def test_conversation_crud(served: Served) -> None:
    client = served.client
    raw = await client.conversations.with_raw_response.create(items=[user("hello")], metadata={"topic": "demo"})
    created = Conversation.model_validate(raw.http_response.json())
    assert created.id.startswith("conv_") and created.metadata == {"topic": "demo"} and created.object == "conversation"
    fetched = await client.conversations.retrieve(created.id)
    assert fetched.id == created.id and fetched.created_at == created.created_at
    updated = await client.conversations.update(created.id, metadata={"topic": "changed"})
    assert updated.metadata == {"topic": "changed"}
    assert (await client.conversations.retrieve(created.id)).metadata == {"topic": "changed"}
    raw_deleted = await client.conversations.with_raw_response.delete(created.id)
    deleted = ConversationDeletedResource.model_validate(raw_deleted.http_response.json())
    assert deleted.deleted is True and deleted.id == created.id
    with pytest.raises(openai.NotFoundError) as caught:
        await client.conversations.retrieve(created.id)
    assert caught.value.body == {  # type: ignore[comparison-overlap]
        "message": f"Conversation with id '{created.id}' not found.", "type": "invalid_request_error",
        "param": None, "code": "session.conversation.not_found"}
    with pytest.raises(openai.NotFoundError):
        await client.conversations.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        await client.conversations.update(created.id, metadata={"a": "b"})


async def test_conversation_items_page_and_delete(served: Served) -> None:
    client = served.client
    conversation = await client.conversations.create()
    texts = [f"t{n}" for n in range(7)]
    raw = await client.conversations.items.with_raw_response.create(
        conversation.id, items=[user(t) for t in texts])
    added = ConversationItemList.model_validate(raw.http_response.json())
    assert [text_of(i) for i in added.data] == texts
    first = added.data[0]
    assert first.type == "message" and first.role == "user" and first.status == "completed"  # type: ignore[union-attr]
    assert first.content[0].type == "input_text"  # type: ignore[union-attr]
    ids = [i.id for i in added.data]  # type: ignore[union-attr]
    page = await client.conversations.items.list(conversation.id, limit=3)  # default order: desc
    assert [text_of(i) for i in page.data] == texts[::-1][:3] and page.has_more is True
    assert page.last_id == ids[4]
    rest = await client.conversations.items.list(conversation.id, limit=3, after=page.last_id)
    assert [text_of(i) for i in rest.data] == texts[::-1][3:6]
    ascending = [text_of(i) async for i in client.conversations.items.list(conversation.id, limit=2, order="asc")]
    assert ascending == texts  # the client follows has_more and last_id
    item = await client.conversations.items.retrieve(ids[2], conversation_id=conversation.id)
    assert item.id == ids[2] and text_of(item) == "t2"
    after_delete = await client.conversations.items.delete(ids[2], conversation_id=conversation.id)
    assert after_delete.id == conversation.id and after_delete.object == "conversation"
    with pytest.raises(openai.NotFoundError) as gone:
        await client.conversations.items.retrieve(ids[2], conversation_id=conversation.id)
    assert gone.value.body == {  # type: ignore[comparison-overlap]
        "message": f"Item with id '{ids[2]}' not found.", "type": "invalid_request_error",
        "param": None, "code": "session.conversation.item_not_found"}
    with pytest.raises(openai.NotFoundError):
        await client.conversations.items.delete(ids[2], conversation_id=conversation.id)
    remaining = await client.conversations.items.list(conversation.id, order="asc", after=ids[1])
    assert [text_of(i) for i in remaining.data] == ["t3", "t4", "t5", "t6"]  # a deleted cursor still pages
    empty = await client.conversations.items.list(conversation.id, order="asc", after=ids[6])
    assert empty.data == [] and empty.has_more is False


async def test_conversation_item_errors(served: Served) -> None:
    client = served.client
    conversation = await client.conversations.create()
    with pytest.raises(openai.BadRequestError) as many:
        await client.conversations.items.create(conversation.id, items=[user(str(n)) for n in range(21)])
    assert many.value.param == "items" and "at most 20" in many.value.message
    with pytest.raises(openai.BadRequestError) as empty:
        await client.conversations.items.create(conversation.id, items=[])
    assert empty.value.code == "session.input.invalid"
    for query in ({"limit": 0}, {"limit": 101}, {"order": "sideways"}):
        with pytest.raises(openai.BadRequestError) as caught:
            await client.conversations.items.list(conversation.id, **query)  # type: ignore[arg-type]
        assert caught.value.body["param"] == next(iter(query))  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        await client.conversations.items.list("conv_missing")
    with pytest.raises(openai.NotFoundError):
        await client.conversations.items.create("conv_missing", items=[user("x")])
    with pytest.raises(openai.BadRequestError):
        await client.post("/conversations", body={"items": "not a list"}, cast_to=Conversation)
    with pytest.raises(openai.BadRequestError):
        await client.post("/conversations", body={"metadata": {"k": 1}}, cast_to=Conversation)


async def test_responses_in_a_conversation(served: Served) -> None:
    client = served.client
    conversation = await client.conversations.create(items=[{"role": "developer", "content": "context"}])
    raw = await client.responses.with_raw_response.create(model="test-model", input="hello",
                                                          conversation=conversation.id)
    first = Response.model_validate(raw.http_response.json())
    assert first.output_text == "(2 items so far) you said: hello"
    assert first.conversation is not None and first.conversation.id == conversation.id
    second = await client.responses.create(model="test-model", input=[user("again")],
                                           conversation={"id": conversation.id})
    assert second.output_text == "(4 items so far) you said: again"
    assert second.previous_response_id is None
    listed = [i async for i in client.conversations.items.list(conversation.id, order="asc")]
    assert [text_of(i) for i in listed] == ["context", "hello", first.output_text, "again", second.output_text]
    assert listed[2].id == first.output[0].id and listed[4].id == second.output[0].id  # the response's own ids
    raw_page = await client.conversations.items.with_raw_response.list(conversation.id, order="asc")
    ConversationItemList.model_validate(raw_page.http_response.json())  # input and output items, strictly
    own = await client.responses.input_items.list(second.id)
    assert [text_of(i) for i in own.data] == ["again"] and own.data[0].id == listed[3].id
    fetched = await client.responses.retrieve(second.id)
    assert fetched.conversation is not None and fetched.conversation.id == conversation.id


async def test_store_false_in_a_conversation_appends_nothing(served: Served) -> None:
    client = served.client
    conversation = await client.conversations.create(items=[user("context")])
    unsaved = await client.responses.create(model="test-model", input="hello", conversation=conversation.id,
                                            store=False)
    assert unsaved.output_text == "(2 items so far) you said: hello"
    listed = await client.conversations.items.list(conversation.id)
    assert [text_of(i) for i in listed.data] == ["context"]
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(unsaved.id)


async def test_conversation_errors_on_responses(served: Served) -> None:
    client = served.client
    with pytest.raises(openai.NotFoundError) as missing:
        await client.responses.create(model="test-model", input="x", conversation="conv_missing")
    assert missing.value.body == {  # type: ignore[comparison-overlap]
        "message": "Conversation with id 'conv_missing' not found.", "type": "invalid_request_error",
        "param": "conversation", "code": "session.conversation.not_found"}
    conversation = await client.conversations.create()
    first = await client.responses.create(model="test-model", input="hello")
    with pytest.raises(openai.BadRequestError) as both:
        await client.responses.create(model="test-model", input="x", previous_response_id=first.id,
                                      conversation=conversation.id)
    assert both.value.status_code == 400 and both.value.body["param"] == "conversation"  # type: ignore[index]
    assert [i async for i in client.conversations.items.list(conversation.id)] == []  # nothing appended
