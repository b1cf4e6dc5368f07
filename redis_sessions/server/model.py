"""The model call: a stand-in that needs no network, and the one-line swap for a real one.

The server hands the model a :class:`ModelCall` (the whole input: the history it
rebuilt plus this turn's items) and stores what comes back. A model either returns
its whole :class:`ModelReply`, or streams: it is an async generator that yields the
Responses API's output events (:data:`ModelEvent`) as the model makes them and then
the :class:`ModelReply` they add up to. The server reads every model as a stream
(:func:`model_stream`): a stream request relays each event as it comes, any other
request drains the stream and takes its reply (:func:`final_reply`).

To serve a real model, build the app with
``create_app(model=upstream_model(openai.AsyncOpenAI()))``: every turn is then
streamed from that client's Responses endpoint with ``store=False``, since the
history lives here.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator as AsyncIteratorType
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Union

import anyio
import msgspec

from ..models import Item
from .errors import ApiError, log

if TYPE_CHECKING:  # openai is only needed by upstream_model
    from openai import AsyncOpenAI

FORWARDED = ("tools", "tool_choice", "parallel_tool_calls", "reasoning", "text", "temperature", "top_p",
             "max_output_tokens", "truncation", "include")
"""Request fields passed on to an upstream model as the caller sent them."""

_json = msgspec.json.Decoder()


@dataclass(frozen=True)
class ModelCall:
    """What the model is asked: the model's name, the instructions, and the whole input."""

    model: str
    instructions: str | None
    input: list[Item]
    """The history (a chain's or a conversation's items) followed by this turn's input items."""
    body: dict[str, Any] = field(default_factory=dict)
    """The request as received, for the fields of :data:`FORWARDED` and anything else."""


@dataclass(frozen=True)
class ModelReply:
    """What the model answered, whole: a stored response's output, usage and status."""

    output: list[Item]
    """Output items (messages, function calls, ...); ids and statuses are filled in when missing."""
    usage: Item | None = None
    status: str = "completed"
    """``completed``, or ``incomplete`` (stored too, as OpenAI stores one)."""
    incomplete_details: Item | None = None
    """Why an ``incomplete`` reply stopped, as OpenAI says it (``{"reason": "max_output_tokens"}``)."""


ModelEvent = dict[str, Any]
"""One output event of a streamed reply in the Responses API's shape:
``{"type": "response.output_text.delta", "output_index": 0, "item_id": ...,
"content_index": 0, "delta": ...}``. The server relays the events that carry an
``output_index``, with its own ``sequence_number`` and the output items' ids it stores."""

ModelStream = AsyncIterator[Union[ModelEvent, ModelReply]]
"""A streaming model's answer: its output events as they come, then its :class:`ModelReply`."""

Model = Callable[[ModelCall], Union[Awaitable[ModelReply], ModelStream]]
"""``async def model(call) -> ModelReply``, or an async generator that yields
:data:`ModelEvent`\\ s and then a :class:`ModelReply` (:data:`ModelStream`)."""


async def _whole(reply: Awaitable[ModelReply]) -> ModelStream:
    yield await reply


def model_stream(model: Model, call: ModelCall) -> ModelStream:
    """``model``'s answer to ``call`` as a stream; a model that returns its reply whole
    is a stream of that reply alone (no events: a stream request cuts its text up)."""
    answer = model(call)
    return answer if isinstance(answer, AsyncIteratorType) else _whole(answer)


@contextlib.asynccontextmanager
async def closing(stream: ModelStream) -> AsyncIterator[ModelStream]:
    """``stream``, closed when done with, even by a cancelled task (a client gone): a
    streaming model's ``finally`` closes its upstream connection, so upstream stops."""
    try:
        yield stream
    finally:
        aclose = getattr(stream, "aclose", None)  # an async generator's; an iterator may have none
        if aclose is not None:
            with anyio.CancelScope(shield=True):
                await aclose()


async def final_reply(stream: ModelStream) -> ModelReply:
    """The reply ``stream`` ends with, its events passed over (a request without ``stream``)."""
    async with closing(stream):
        async for element in stream:
            if isinstance(element, ModelReply):
                return element
    raise no_reply()


def no_reply() -> ApiError:
    log.error("POST /v1/responses: the model's stream ended without a ModelReply")
    return ApiError.server_error()


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


def _reply(response: Any) -> ModelReply:
    """Upstream's finished response as ours: its output, usage, status and why it stopped
    (its id, and its ``store: false``, stay upstream)."""
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        raise upstream_failed(None, "The upstream model's response has no output list.")
    usage, details = response.get("usage"), response.get("incomplete_details")
    return ModelReply(output=[item for item in response["output"] if isinstance(item, dict)],
                      usage=usage if isinstance(usage, dict) else None,
                      status=str(response.get("status") or "completed"),
                      incomplete_details=details if isinstance(details, dict) else None)


def upstream_failed(code: str | None, message: str | None, param: str | None = None) -> ApiError:
    """Upstream's ``response.failed`` or ``error`` event as the error this server sends:
    upstream's code and message (words written for API clients), a 502 where a status
    is still to be sent."""
    log.warning("POST /v1/responses: the upstream model failed: %s: %s", code, message)
    return ApiError(502, message or "The upstream model failed.", param=param, code=code or "server_error")


def _from_upstream(event: dict[str, Any]) -> ModelEvent | ModelReply | None:
    """One upstream event as a model's stream has it: an output event, the reply that
    ends the stream, or None for the response-level events this server sends its own
    of (``response.created``, ``response.in_progress``). Raises for a failure."""
    kind = event.get("type")
    if kind in ("response.completed", "response.incomplete"):
        return _reply(event.get("response"))
    if kind == "response.failed":
        response = event.get("response")
        error = response.get("error") if isinstance(response, dict) else None
        error = error if isinstance(error, dict) else {}
        raise upstream_failed(error.get("code"), error.get("message"))
    if kind == "error" or isinstance(event.get("error"), dict):  # the nested form: what the client raises for
        error = event["error"] if isinstance(event.get("error"), dict) else event
        raise upstream_failed(error.get("code"), error.get("message"), error.get("param"))
    return event if isinstance(event.get("output_index"), int) else None


async def sse_data(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON object of each server-sent event in ``lines``: its ``data:`` lines joined,
    up to the blank line that ends it. Anything else (``event:`` lines, comments, a
    ``[DONE]``) is passed over: the event's type is in its data."""
    data: list[str] = []
    async for line in lines:
        if line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
        elif not line and data:
            try:
                event = _json.decode("\n".join(data))
            except msgspec.DecodeError:
                event = None
            data = []
            if isinstance(event, dict):
                yield event


def upstream_model(client: "AsyncOpenAI") -> Model:
    """A streaming :data:`Model` that forwards each turn to
    ``client.responses.create(..., stream=True, store=False)`` and yields upstream's
    output events as they arrive, then the finished response as a :class:`ModelReply`
    (``completed`` or ``incomplete``). Upstream's ``response.failed`` or ``error``
    event raises an :class:`ApiError` with upstream's code and message."""

    async def call(request: ModelCall) -> ModelStream:
        forwarded = {name: request.body[name] for name in FORWARDED if request.body.get(name) is not None}
        # The history and the forwarded fields go as extra_body, as the JSON they came in
        # as, and the events are read as JSON, not as the client's typed objects: its walk
        # of every item against its type hints took milliseconds per turn of a long
        # history, and building and dumping an object per event was most of the CPU a
        # relayed delta cost, which at 64 streams held every first delta up (the time to
        # first byte the gateway adds: docs/benchmarks.md).
        async with client.responses.with_streaming_response.create(
            model=request.model, instructions=request.instructions, store=False, stream=True,
            extra_body={"input": [_upstream_item(item) for item in request.input], **forwarded},
        ) as response:
            reply = None
            try:
                async for event in sse_data(response.iter_lines()):
                    element = _from_upstream(event)
                    if isinstance(element, ModelReply):
                        reply = element  # the body is read to its end: a connection closed half-read is not reused
                    elif element is not None and reply is None:
                        yield element
            finally:  # done, failed or abandoned (the client went away): upstream stops generating
                with anyio.CancelScope(shield=True):
                    await response.close()
        if reply is None:
            raise upstream_failed(None, "The upstream model's stream ended before its response was complete.")
        yield reply

    return call
