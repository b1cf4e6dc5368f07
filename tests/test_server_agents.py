"""The OpenAI Agents SDK against the reference server, on every backend: its
OpenAIConversationsSession over the server's Conversations endpoints, and
Runner.run and Runner.run_streamed with OpenAIResponsesModel continuing a
conversation across two runs, by previous_response_id, by conversation_id (the SDK
sends conversation=) and with a session."""

from __future__ import annotations

from typing import Any, AsyncIterator

import openai
import pytest
from agents import Agent, OpenAIConversationsSession, OpenAIResponsesModel, Runner, set_tracing_disabled

from serverkit import Served, serve


@pytest.fixture(autouse=True)
def no_tracing() -> None:
    set_tracing_disabled(True)  # the SDK would otherwise export traces to api.openai.com


@pytest.fixture
async def served(backend: Any) -> AsyncIterator[Served]:
    async for s in serve(backend):
        yield s


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def texts(items: list[Any]) -> list[str]:
    return [item["content"][0]["text"] for item in items]


async def test_openai_conversations_session(served: Served) -> None:
    session = OpenAIConversationsSession(openai_client=served.client)
    assert await session.get_items() == []  # creates the conversation on first use
    conversation_id = session.session_id
    await session.add_items([user("one"), {"role": "assistant", "content": "two"}])  # type: ignore[list-item]
    await session.add_items([user(f"n{n}") for n in range(23)])  # type: ignore[misc]  # two requests of <= 20
    items = await session.get_items()
    assert texts(items) == ["one", "two"] + [f"n{n}" for n in range(23)]
    assert all(item["id"] and item["type"] == "message" for item in items)  # type: ignore[typeddict-item]
    assert texts(await session.get_items(limit=3)) == ["n20", "n21", "n22"]
    popped = await session.pop_item()
    assert popped is not None and texts([popped]) == ["n22"]
    assert texts(await session.get_items(limit=2)) == ["n20", "n21"]
    assert len(await session.get_items()) == 24
    await session.clear_session()
    with pytest.raises(openai.NotFoundError):
        await served.client.conversations.retrieve(conversation_id)
    assert await session.get_items() == [] and session.session_id != conversation_id  # a fresh conversation


def agent_for(served: Served) -> Agent[Any]:
    return Agent(name="helper", instructions="Be brief.",
                 model=OpenAIResponsesModel(model="test-model", openai_client=served.client))


async def test_runner_continues_by_previous_response_id(served: Served) -> None:
    agent = agent_for(served)
    first = await Runner.run(agent, "hello")
    assert first.final_output == "(1 items so far) you said: hello"
    second = await Runner.run(agent, "again", previous_response_id=first.last_response_id)
    assert second.final_output == "(3 items so far) you said: again"
    stored = await served.store.get(second.last_response_id or "")
    assert stored is not None and stored.previous_response_id == first.last_response_id
    assert stored.request.instructions == "Be brief." and stored.request.model == "test-model"


async def test_runner_continues_by_conversation_id(served: Served) -> None:
    agent = agent_for(served)
    conversation = await served.client.conversations.create()
    first = await Runner.run(agent, "hello", conversation_id=conversation.id)
    assert first.final_output == "(1 items so far) you said: hello"
    second = await Runner.run(agent, "again", conversation_id=conversation.id)
    assert second.final_output == "(3 items so far) you said: again"
    listed = [item async for item in served.client.conversations.items.list(conversation.id, order="asc")]
    assert [item.content[0].text for item in listed] == [  # type: ignore[union-attr]
        "hello", first.final_output, "again", second.final_output]
    response = await served.client.responses.retrieve(second.last_response_id or "")
    assert response.conversation is not None and response.conversation.id == conversation.id


async def test_runner_with_a_conversations_session(served: Served) -> None:
    """The SDK's own session keeps the history (client side) and sends it whole each run."""
    agent = agent_for(served)
    session = OpenAIConversationsSession(openai_client=served.client)
    await Runner.run(agent, "hello", session=session)
    second = await Runner.run(agent, "again", session=session)
    assert second.final_output == "(3 items so far) you said: again"
    assert texts(await session.get_items())[-2:] == ["again", second.final_output]


async def streamed(agent: Agent[Any], text: str, **options: Any) -> tuple[Any, list[str]]:
    """Runner.run_streamed to its end: the result and the text deltas it streamed."""
    result = Runner.run_streamed(agent, text, **options)
    deltas = [event.data.delta async for event in result.stream_events()
              if event.type == "raw_response_event" and event.data.type == "response.output_text.delta"]
    return result, deltas


async def test_run_streamed_continues_by_previous_response_id(served: Served) -> None:
    agent = agent_for(served)
    first, deltas = await streamed(agent, "hello")
    assert first.final_output == "".join(deltas) == "(1 items so far) you said: hello" and len(deltas) > 1
    second, _ = await streamed(agent, "again", previous_response_id=first.last_response_id)
    assert second.final_output == "(3 items so far) you said: again"
    stored = await served.store.get(second.last_response_id or "")
    assert stored is not None and stored.previous_response_id == first.last_response_id


async def test_run_streamed_with_a_conversations_session(served: Served) -> None:
    agent = agent_for(served)
    session = OpenAIConversationsSession(openai_client=served.client)
    await streamed(agent, "hello", session=session)
    second, _ = await streamed(agent, "again", session=session)
    assert second.final_output == "(3 items so far) you said: again"
    assert texts(await session.get_items()) == ["hello", "(1 items so far) you said: hello", "again",
                                                second.final_output]


async def test_run_streamed_continues_by_conversation_id(served: Served) -> None:
    agent = agent_for(served)
    conversation = await served.client.conversations.create()
    await streamed(agent, "hello", conversation_id=conversation.id)
    second, _ = await streamed(agent, "again", conversation_id=conversation.id)
    assert second.final_output == "(3 items so far) you said: again"
    listed = [item async for item in served.client.conversations.items.list(conversation.id, order="asc")]
    assert len(listed) == 4
