"""A real ``agents.Runner`` on our sessions, with a scripted model: no network, no API key."""

from __future__ import annotations

from typing import Any, AsyncIterator

import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import Backend
from redis_sessions.items import CompactionSession, RedisSession


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    set_tracing_disabled(True)
    yield None  # type: ignore[misc]


def make(b: Backend, sid: str = "chat") -> RedisSession:
    return RedisSession(sid, client=b.client, key_prefix=b.prefix, ttl_seconds=300)


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _summary(item: Any) -> tuple[Any, ...]:
    return (item.get("type"), item.get("role"), item.get("name"), item.get("call_id"))


async def test_two_runs_share_history(backend: Backend) -> None:
    model = ScriptedModel([
        [function_call("get_weather", {"city": "Paris"}, call_id="call_1")],
        [assistant_message("It is sunny in Paris.", item_id="msg_1")],
        [assistant_message("You asked about Paris.", item_id="msg_2")],
    ])
    agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[get_weather])
    session = make(backend)

    first = await Runner.run(agent, "Weather in Paris?", session=session)
    assert first.final_output == "It is sunny in Paris."
    stored_after_first = await session.get_items()
    assert [_summary(i) for i in stored_after_first] == [
        (None, "user", None, None),
        ("function_call", None, "get_weather", "call_1"),
        ("function_call_output", None, None, "call_1"),
        ("message", "assistant", None, None),
    ]
    assert stored_after_first[0] == {"role": "user", "content": "Weather in Paris?"}
    assert stored_after_first[2]["output"] == "sunny in Paris"

    second = await Runner.run(agent, "What did I ask?", session=session)
    assert second.final_output == "You asked about Paris."
    model.assert_complete()
    seen = model.last_call.input  # type: ignore[union-attr]
    assert isinstance(seen, list)
    # The second run's model saw the whole first run, then the new question.
    assert seen[:4] == stored_after_first
    assert seen[4]["role"] == "user" and seen[4]["content"] == "What did I ask?"
    stored = await session.get_items()
    assert stored[:4] == stored_after_first
    assert stored[4] == {"role": "user", "content": "What did I ask?"}
    assert _summary(stored[5])[:2] == ("message", "assistant")
    assert len(stored) == 6
    assert stored[-1]["content"][0]["text"] == "You asked about Paris."


async def test_runner_drives_compaction(redis_backend: Backend) -> None:
    calls: list[int] = []

    async def compactor(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        calls.append(len(items))
        return [{"role": "assistant", "content": f"summary of {len(items)} items"}]

    session = CompactionSession(make(redis_backend), compactor, should_trigger=lambda ctx: True)
    model = ScriptedModel([
        [assistant_message("one", item_id="m1")],
        [assistant_message("two", item_id="m2")],
    ])
    agent = Agent(name="helper", model=model)
    await Runner.run(agent, "first", session=session)
    assert calls == [2]
    assert await session.get_items() == [{"role": "assistant", "content": "summary of 2 items"}]
    await Runner.run(agent, "second", session=session)
    seen = model.last_call.input  # type: ignore[union-attr]
    assert seen[0] == {"role": "assistant", "content": "summary of 2 items"}
    assert calls == [2, 3]
