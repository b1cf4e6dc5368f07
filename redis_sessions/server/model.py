"""The model call: a stand-in that needs no network, and the one-line swap for a real one.

The server hands the model a :class:`ModelCall` (the whole input: the history it
rebuilt plus this turn's items) and stores what comes back. To serve a real model,
build the app with ``create_app(model=upstream_model(openai.AsyncOpenAI()))``:
every turn is then forwarded to that client's Responses endpoint with
``store=False``, since the history lives here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..models import Item

if TYPE_CHECKING:  # openai is only needed by upstream_model
    from openai import AsyncOpenAI

FORWARDED = ("tools", "tool_choice", "parallel_tool_calls", "reasoning", "text", "temperature", "top_p",
             "max_output_tokens", "truncation", "include")
"""Request fields passed on to an upstream model as the caller sent them."""


@dataclass(frozen=True)
class ModelCall:
    model: str
    instructions: str | None
    input: list[Item]
    """The history (a chain's or a conversation's items) followed by this turn's input items."""
    body: dict[str, Any] = field(default_factory=dict)
    """The request as received, for the fields of :data:`FORWARDED` and anything else."""


@dataclass(frozen=True)
class ModelReply:
    output: list[Item]
    """Output items (messages, function calls, ...); ids and statuses are filled in when missing."""
    usage: Item | None = None
    status: str = "completed"


Model = Callable[[ModelCall], Awaitable[ModelReply]]


def _texts(item: Item) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return []


async def stand_in_model(call: ModelCall) -> ModelReply:
    """Answers ``"(<n> items so far) you said: <last text>"``, so a caller can see what
    history the model was given; usage counts words, as a stand-in for tokens."""
    texts = _texts(call.input[-1]) if call.input else []
    text = f"({len(call.input)} items so far) you said: {texts[0] if texts else ''}"
    input_words = sum(len(t.split()) for item in call.input for t in _texts(item))
    output_words = len(text.split())
    usage = {"input_tokens": input_words, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
             "output_tokens": output_words, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": input_words + output_words}
    message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    return ModelReply(output=[message], usage=usage)


def _upstream_item(item: Item) -> Item:
    """Ids this server gave input messages mean nothing upstream (where nothing is stored)."""
    if item.get("type") == "message" and item.get("role") != "assistant" and "id" in item:
        return {key: value for key, value in item.items() if key != "id"}
    return item


def upstream_model(client: "AsyncOpenAI") -> Model:
    """A :data:`Model` that forwards each turn to ``client.responses.create(..., store=False)``."""

    async def call(request: ModelCall) -> ModelReply:
        extra = {name: request.body[name] for name in FORWARDED if request.body.get(name) is not None}
        response = await client.responses.create(
            model=request.model, instructions=request.instructions,
            input=[_upstream_item(item) for item in request.input],  # type: ignore[misc]
            store=False, **extra,
        )
        output = [item.model_dump(mode="json", exclude_none=True) for item in response.output]
        usage = response.usage.model_dump(mode="json") if response.usage is not None else None
        return ModelReply(output=output, usage=usage, status=response.status or "completed")

    return call
