"""``stream: true``: a turn as the Responses API's server-sent events.

``response.created`` and ``response.in_progress`` go out as soon as the turn is
checked and its id minted; then the model answers, and each output item is sent
as ``response.output_item.added``, its parts (``response.content_part.added``,
``response.output_text.delta`` per word, ``response.output_text.done``,
``response.content_part.done``), ``response.output_item.done``; last, once the
response is saved, ``response.completed`` (``.incomplete``/``.failed`` for a reply
of that status). Every event is ``event: <type>\\ndata: <json>\\n\\n`` with a
``sequence_number`` from 0. The model's reply arrives whole (:data:`.model.Model`
is one call), so the deltas are its final text cut at word boundaries.

Nothing is written before the whole reply has been sent: a client that goes away
mid-stream leaves no record, and the chain or conversation it continued is as it
was. The save itself runs to its end even if the client goes away during it (one
script: the record, and in a conversation its items, or nothing). A failure after
the stream began (the save refused, Redis down, the model raising) is an ``error``
event with the same code, message and param as the JSON error would have.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, AsyncIterator, Iterator

import anyio
import anyio.lowlevel

from ..errors import SessionError
from ..models import Item
from .errors import ApiError, log
from .responses import ResponsesApi, Turn, response_object
from .wire import dumps

Event = tuple[str, dict[str, Any]]
TERMINAL = {"completed": "response.completed", "incomplete": "response.incomplete", "failed": "response.failed"}


def sse(kind: str, number: int, fields: dict[str, Any]) -> bytes:
    data = dumps({"type": kind, "sequence_number": number, **fields})
    return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"


def words(text: str) -> list[str]:
    """``text`` cut before each word after whitespace: at least one piece, joined back whole."""
    return re.split(r"(?<=\s)(?=\S)", text)


def text_part_events(at: dict[str, Any], part: dict[str, Any]) -> Iterator[Event]:
    """One ``output_text`` part: added empty, its text in deltas, done."""
    text = str(part.get("text", ""))
    yield "response.content_part.added", {**at, "part": {**part, "text": ""}}
    for delta in words(text):
        yield "response.output_text.delta", {**at, "delta": delta, "logprobs": []}
    yield "response.output_text.done", {**at, "text": text, "logprobs": []}
    yield "response.content_part.done", {**at, "part": part}


def item_events(index: int, item: Item) -> Iterator[Event]:
    """One output item, as OpenAI streams it: added in progress, its content, done."""
    at = {"item_id": item["id"], "output_index": index}
    if item.get("type") == "message":
        yield "response.output_item.added", {"output_index": index,
                                             "item": {**item, "status": "in_progress", "content": []}}
        for number, part in enumerate(item.get("content") or []):
            here = {**at, "content_index": number}
            if isinstance(part, dict) and part.get("type") == "output_text":
                yield from text_part_events(here, part)
            else:  # a refusal, or a part this server does not cut up
                yield "response.content_part.added", {**here, "part": part}
                yield "response.content_part.done", {**here, "part": part}
    elif item.get("type") == "function_call":
        arguments = str(item.get("arguments", ""))
        yield "response.output_item.added", {"output_index": index,
                                             "item": {**item, "status": "in_progress", "arguments": ""}}
        yield "response.function_call_arguments.delta", {**at, "delta": arguments}
        yield "response.function_call_arguments.done", {**at, "arguments": arguments, "name": item.get("name")}
    else:
        yield "response.output_item.added", {"output_index": index, "item": item}
    yield "response.output_item.done", {"output_index": index, "item": item}


async def stream_turn(api: ResponsesApi, turn: Turn) -> AsyncIterator[bytes]:
    """The events of ``turn``, checked and with its id (:meth:`ResponsesApi.begin`)."""
    numbers = itertools.count()
    pending = api.pending(turn)
    yield sse("response.created", next(numbers), {"response": pending})
    yield sse("response.in_progress", next(numbers), {"response": pending})
    try:
        session = await api.answer(turn)
        for index, item in enumerate(session.response.output):
            for kind, fields in item_events(index, item):
                yield sse(kind, next(numbers), fields)
                await anyio.lowlevel.checkpoint()  # a client gone by now cancels us here, before the save
        with anyio.CancelScope(shield=True):  # begun, the save ends: its one script runs or not
            await api.keep(turn, session)
    except Exception as exc:  # the status line has gone: an error event is all a client can get now
        yield sse("error", next(numbers), _error_fields(exc, turn))
        return
    final = response_object(session, stored=turn.store)
    yield sse(TERMINAL.get(session.status, "response.completed"), next(numbers), {"response": final})


def _error_fields(exc: Exception, turn: Turn) -> dict[str, Any]:
    where = f"POST /v1/responses (stream of {turn.response_id})"
    if isinstance(exc, SessionError):
        exc = ApiError.from_session_error(exc)
    if not isinstance(exc, ApiError):
        log.error("%s: the model or the server raised", where, exc_info=exc)
        exc = ApiError.server_error()
    exc.log(where)
    return {"code": exc.code, "message": exc.message, "param": exc.param}
