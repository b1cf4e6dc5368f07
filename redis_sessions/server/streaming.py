"""``stream: true``: a turn as the Responses API's server-sent events, relayed as the
model makes them.

``response.created`` and ``response.in_progress`` go out as soon as the turn is
checked and its id minted, before the model is called. Then the output:

* a streaming model (:func:`.model.upstream_model`, or any model written as an async
  generator, :data:`.model.ModelStream`) has each output event it yields sent on at
  once, as OpenAI shapes it (``response.output_item.added``, its parts and text deltas,
  ``response.output_item.done``, ...), renumbered and with this server's ids: the
  response's id is the one minted here (upstream's, and its ``store: false``, never go
  out), and each output item keeps one id, upstream's or one minted here when it has
  none, in its events and in the stored response alike (:class:`Relay`);
* a model that returns its reply whole has it cut into the same events once it has
  answered: ``response.output_item.added``, ``response.content_part.added``,
  ``response.output_text.delta`` per word, ``response.output_text.done``,
  ``response.content_part.done``, ``response.output_item.done``.

Last, once the response is saved, ``response.completed`` (``response.incomplete`` for
a reply that stopped short, as at ``max_output_tokens``). Every event is
``event: <type>\\ndata: <json>\\n\\n`` with a ``sequence_number`` from 0.

Nothing is written before the model's reply is whole: the save (the same single
:meth:`~.responses.ResponsesApi.keep` as a request without ``stream``) comes after
the last output event and before ``response.completed``. A client that goes away
mid-stream stops the turn where it is: the model's stream is closed (upstream's
connection with it, so upstream stops generating), no record exists, and the chain or
conversation it continued is as it was. The save itself runs to its end even if the
client goes away during it (one script: the record, and in a conversation its items,
or nothing). An ``incomplete`` reply is saved as an incomplete response, as OpenAI
keeps one. A failure after the stream began (upstream's ``response.failed`` or
``error`` event, upstream gone mid-stream, the save refused, Redis down, the model
raising) is an ``error`` event with the same code, message and param as the JSON
error would have, and nothing is stored.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any, AsyncIterator, Iterator

import anyio
import anyio.lowlevel

from ..errors import SessionError
from ..models import Item, StoredResponseSession
from .errors import ApiError, log
from .items import with_id
from .model import ModelEvent, ModelReply, closing, model_stream, no_reply
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


class Relay:
    """A streaming model's events on their way to the client. Only output events (those
    with an ``output_index``) pass: the response-level ones are this server's to send.
    Each output item gets one id when it is added (upstream's, or one minted here), and
    every later event of that item, and the stored output, carry that id."""

    def __init__(self) -> None:
        self.ids: dict[int, str] = {}
        self.relayed = False

    def event(self, event: ModelEvent) -> Event | None:
        index = event.get("output_index")
        if not isinstance(index, int) or not isinstance(event.get("type"), str):
            return None
        fields = {key: value for key, value in event.items() if key not in ("type", "sequence_number")}
        item = fields.get("item")
        if isinstance(item, dict):
            item_id = self.ids.setdefault(index, item.get("id") or with_id(item)["id"])
            fields["item"] = {**item, "id": item_id}
        if "item_id" in fields and index in self.ids:
            fields["item_id"] = self.ids[index]
        self.relayed = True
        return event["type"], fields

    def reply(self, reply: ModelReply) -> ModelReply:
        """``reply`` with each output item's id as its events carried it."""
        output = [{**item, "id": self.ids[n]} if n in self.ids else item for n, item in enumerate(reply.output)]
        return dataclasses.replace(reply, output=output)

    def whole_reply_events(self, session: StoredResponseSession) -> Iterator[Event]:
        """A reply that came whole (nothing relayed), cut into its events; else none."""
        if not self.relayed:
            for index, item in enumerate(session.response.output):
                yield from item_events(index, item)


async def stream_turn(api: ResponsesApi, turn: Turn) -> AsyncIterator[bytes]:
    """The events of ``turn``, checked and with its id (:meth:`ResponsesApi.begin`)."""
    numbers = itertools.count()
    pending = api.pending(turn)
    # One write for both: at many streams a socket write is a large part of a relayed event's cost.
    yield (sse("response.created", next(numbers), {"response": pending})
           + sse("response.in_progress", next(numbers), {"response": pending}))
    relay = Relay()
    try:
        async with closing(model_stream(api.model, api.call(turn))) as stream:
            async for element in stream:
                if isinstance(element, ModelReply):
                    session = api.answered(turn, relay.reply(element))
                    break
                event = relay.event(element)
                if event is not None:  # no checkpoint here: waiting for the next one is one
                    yield sse(event[0], next(numbers), event[1])
            else:
                raise no_reply()
        for kind, fields in relay.whole_reply_events(session):
            yield sse(kind, next(numbers), fields)
            await anyio.lowlevel.checkpoint()  # a client gone by now cancels us here, before the save
        await anyio.lowlevel.checkpoint()  # and here, for a stream whose events came all at once
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
