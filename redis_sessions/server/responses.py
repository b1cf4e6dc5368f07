"""``/v1/responses``: create (with ``previous_response_id`` or ``conversation``), retrieve,
delete, and ``input_items``, over a :class:`ResponseSessionStore`.

A turn: check the request, rebuild the history (the chain's items, or the
conversation's) and mint the response's id (:meth:`ResponsesApi.begin`), call the
model on history + this turn's input (:meth:`~ResponsesApi.answer`), then save the
response with the parent check (``store=False``: save nothing) and, in a
conversation, append the turn's input and output items to it (:meth:`~ResponsesApi.keep`).
A streamed turn (:mod:`.streaming`) takes the same steps between its events.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Protocol

from ..clock import Clock, system_clock
from ..errors import ErrorCode, SessionError
from ..models import Item, StoredResponseRequestSnapshot, StoredResponseSession, StoredResponseSnapshot
from ..responses import RedisResponseSessionStore, request_input_items
from .errors import ApiError, log
from .items import input_items, with_id
from .model import Model, ModelCall, ModelReply, final_reply, model_stream
from .paging import page, page_query
from .wire import dumps


class ConversationLink(Protocol):
    """What a response turn needs from the conversation store."""

    async def history(self, conversation_id: str, owner: str | None = None) -> list[Item]:
        """Every item of the conversation, oldest first (404 if there is no such conversation,
        or it is another owner's)."""

    async def append(self, conversation_id: str, items: list[Item], owner: str | None = None) -> None: ...


def _optional(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = body.get(name)
    if value is not None and not isinstance(value, kind):
        raise ApiError.invalid(f"{name} must be {what}", name)
    return value


def conversation_id(value: object) -> str | None:
    """``conversation`` as OpenAI takes it: an id, or ``{"id": ...}``."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return str(value["id"])
    raise ApiError.invalid("conversation must be a conversation id or an object with an id", "conversation")


def request_snapshot(body: Mapping[str, Any], items: list[Item], model: str) -> StoredResponseRequestSnapshot:
    """The stored request; every field is type-checked here, since a record whose
    field has the wrong type would not decode later."""
    tools = _optional(body, "tools", list, "a list of objects")
    if tools is not None and not all(isinstance(tool, dict) for tool in tools):
        raise ApiError.invalid("tools must be a list of objects", "tools")
    return StoredResponseRequestSnapshot(
        input=items, instructions=_optional(body, "instructions", str, "a string"), model=model, tools=tools,
        tool_choice=_optional(body, "tool_choice", (str, dict), "a string or an object"),
        parallel_tool_calls=_optional(body, "parallel_tool_calls", bool, "a boolean"),
        reasoning=_optional(body, "reasoning", dict, "an object"), text=_optional(body, "text", dict, "an object"),
        truncation=_optional(body, "truncation", str, "a string"),
    )


def response_object(session: StoredResponseSession, *, stored: bool = True) -> dict[str, Any]:
    """A stored turn as OpenAI's ``Response`` object."""
    request, response = session.request, session.response
    return {
        "id": session.id, "object": "response", "created_at": session.created_at,
        "completed_at": session.completed_at, "status": session.status, "model": request.model or "",
        "instructions": request.instructions, "output": response.output,
        "previous_response_id": session.previous_response_id,
        "conversation": {"id": session.conversation_id} if session.conversation_id else None,
        "usage": response.usage, "error": response.error, "incomplete_details": response.incomplete_details,
        "metadata": session.metadata or {}, "tools": request.tools or [],
        "tool_choice": request.tool_choice if request.tool_choice is not None else "auto",
        "parallel_tool_calls": request.parallel_tool_calls if request.parallel_tool_calls is not None else True,
        "reasoning": request.reasoning, "text": request.text or {"format": {"type": "text"}},
        "truncation": request.truncation or "disabled", "temperature": None, "top_p": None,
        "max_output_tokens": None, "background": False, "store": stored, "user": None,
    }


@dataclass(frozen=True)
class Turn:
    """A checked request with its history and its id: all a model call and a save need."""

    body: Mapping[str, Any]
    previous: str | None
    conversation: str | None
    store: bool
    stream: bool
    metadata: dict[str, Any] | None
    model: str
    items: list[Item]
    request: StoredResponseRequestSnapshot
    history: list[Item]
    response_id: str
    created_at: int
    owner: str | None = None
    """Whose turn it is (:func:`.owners.owner_from_api_key`): its history, and its save."""


@contextlib.contextmanager
def turn_errors(previous: str | None, conversation: str | None) -> Iterator[None]:
    """A turn's parent that is gone (never saved, expired, deleted, even while the model
    answered) is OpenAI's 400 ``previous_response_not_found``; its conversation that is
    gone, a 404 naming ``conversation``."""
    try:
        yield
    except SessionError as exc:
        if exc.code is ErrorCode.CHAIN_NOT_FOUND and previous is not None:
            raise ApiError.previous_not_found(previous, exc) from None
        if exc.code is ErrorCode.CONVERSATION_NOT_FOUND and conversation is not None:
            raise ApiError.from_session_error(exc, "conversation", conversation) from None
        raise


class ResponsesApi:
    def __init__(self, store: RedisResponseSessionStore, model: Model, *, conversations: ConversationLink | None = None,
                 default_model: str = "stand-in", clock: Clock = system_clock) -> None:
        self.store = store
        self.model = model
        self.conversations = conversations
        self.default_model = default_model
        self.clock = clock

    async def _history(self, previous: str | None, conversation: str | None, owner: str | None) -> list[Item]:
        if conversation is not None:
            if self.conversations is None:
                raise ApiError.invalid("this server has no conversation store", "conversation")
            return await self.conversations.history(conversation, owner)
        # one round trip, any depth; an incomplete turn (max_output_tokens reached) is kept
        # with what it made, and continues as OpenAI continues one (this server stores no other)
        return (await self.store.resolve_chain(previous, include_incomplete=True, owner=owner)).input_items

    async def begin(self, body: Mapping[str, Any], owner: str | None = None) -> Turn:
        """Check the request, rebuild its history and mint its id; nothing is written."""
        previous = _optional(body, "previous_response_id", str, "a string")
        conversation = conversation_id(body.get("conversation"))
        if previous is not None and conversation is not None:
            raise ApiError.invalid("Mutually exclusive parameters: Ensure you are only providing one of: "
                                   "'previous_response_id' or 'conversation'.", "conversation")
        stream = _optional(body, "stream", bool, "a boolean")
        store = _optional(body, "store", bool, "a boolean")
        metadata = _optional(body, "metadata", dict, "an object")
        model = _optional(body, "model", str, "a string") or self.default_model
        items = input_items(body.get("input", ""))
        request = request_snapshot(body, items, model)
        with turn_errors(previous, conversation):
            history = await self._history(previous, conversation, owner)
            if conversation is not None and self.store.conversations is not None:
                # the conversation's responses live in its slot, found by locator
                response_id = await self.store.new_response_id(conversation_id=conversation, owner=owner)
            else:
                response_id = await self.store.new_response_id(previous, owner=owner)  # in its parent's thread
        return Turn(body=body, previous=previous, conversation=conversation, store=store is not False,
                    stream=bool(stream), metadata=metadata, model=model, items=items, request=request,
                    history=history, response_id=response_id, created_at=int(self.clock()), owner=owner)

    def pending(self, turn: Turn) -> dict[str, Any]:
        """The response while the model works on it (a stream's first events)."""
        session = StoredResponseSession(
            id=turn.response_id, previous_response_id=turn.previous, conversation_id=turn.conversation,
            created_at=turn.created_at, status="in_progress", request=turn.request,
            response=StoredResponseSnapshot(id=turn.response_id, output=[]), metadata=turn.metadata)
        return response_object(session, stored=turn.store)

    def call(self, turn: Turn) -> ModelCall:
        """What the model is given for the turn: its history, then its input."""
        return ModelCall(model=turn.model, instructions=turn.request.instructions,
                         input=turn.history + turn.items, body=dict(turn.body))

    async def answer(self, turn: Turn) -> StoredResponseSession:
        """The model's reply to the turn, as the session a save stores."""
        return self.answered(turn, await final_reply(model_stream(self.model, self.call(turn))))

    def answered(self, turn: Turn, reply: ModelReply) -> StoredResponseSession:
        """The model's whole reply (:meth:`answer`, or a stream's end) as the session a save stores."""
        output = [with_id(item) for item in reply.output]
        _sendable(output, reply.usage)
        now = int(self.clock())
        return StoredResponseSession(
            id=turn.response_id, previous_response_id=turn.previous, conversation_id=turn.conversation,
            created_at=turn.created_at, completed_at=now if reply.status == "completed" else None,
            status=reply.status, request=turn.request,
            response=StoredResponseSnapshot(id=turn.response_id, output=output, usage=reply.usage,
                                              incomplete_details=reply.incomplete_details),
            metadata=turn.metadata,
        )

    async def keep(self, turn: Turn, session: StoredResponseSession) -> None:
        """Save the answered turn (``store=False``: nothing) with the parent check; in a
        conversation, the turn's items are appended in the same script."""
        if not turn.store:
            return
        with turn_errors(turn.previous, turn.conversation):
            # Refused (409) if another worker answered this turn first with this id.
            await self.store.save(session, expected_previous_response_id=turn.previous, owner=turn.owner)
            if turn.conversation is not None and self.conversations is not None and self.store.conversations is None:
                # A response store built without the conversation store: two writes, the
                # response saved, then the turn appended. If the append fails the response
                # exists and the conversation lacks the turn (the client sees the error).
                await self.conversations.append(turn.conversation, turn.items + session.response.output, turn.owner)

    async def complete(self, turn: Turn) -> dict[str, Any]:
        """The turn answered and saved, as one ``Response`` body."""
        session = await self.answer(turn)
        await self.keep(turn, session)
        return response_object(session, stored=turn.store)

    async def create(self, body: Mapping[str, Any], owner: str | None = None) -> dict[str, Any]:
        """A whole turn in one body (a ``stream: true`` request's events: :mod:`.streaming`)."""
        return await self.complete(await self.begin(body, owner))

    async def _session(self, response_id: str, owner: str | None) -> StoredResponseSession:
        session = await self.store.get(response_id, owner=owner)
        if session is None:
            raise ApiError.not_found(ErrorCode.CHAIN_NOT_FOUND, response_id)
        return session

    async def retrieve(self, response_id: str, owner: str | None = None) -> dict[str, Any]:
        return response_object(await self._session(response_id, owner))

    async def delete(self, response_id: str, owner: str | None = None) -> dict[str, Any]:
        if not await self.store.delete(response_id, owner=owner):
            raise ApiError.not_found(ErrorCode.CHAIN_NOT_FOUND, response_id)
        return {"id": response_id, "object": "response", "deleted": True}

    async def input_items(self, response_id: str, params: Mapping[str, str], owner: str | None = None) -> dict[str, Any]:
        """The items the response was generated from, as OpenAI lists them: its chain's
        turns (each turn's input then output) and its own input; in a conversation, its
        own input (the conversation lists the rest). Items without an id (records saved
        by another writer) get one made of the turn's id and their place, so paging
        through them is stable too."""
        query = page_query(params)
        session = await self._session(response_id, owner)
        turns = [session]
        if session.previous_response_id is not None:
            chain = await self.store.resolve_chain(session.previous_response_id, include_incomplete=True, owner=owner)
            turns = chain.sessions + turns
        items: list[Item] = []
        for turn in turns:
            own = request_input_items(turn.request.input)
            outputs = turn.response.output if turn is not session else []
            items.extend(_listed(turn.id, n, item) for n, item in enumerate([*own, *outputs]))
        return page(items, query)


def _sendable(output: list[Item], usage: Item | None) -> None:
    """Refuse a model's reply that JSON cannot carry (a NaN, an infinity): saved, it would
    make every answer that holds it fail, this turn's first."""
    try:
        dumps([output, usage])
    except (TypeError, ValueError) as exc:
        log.error("POST /v1/responses: the model's reply cannot be sent as JSON: %s", exc)
        raise ApiError.server_error() from None


def _listed(turn_id: str, n: int, item: Item) -> Item:
    return item if isinstance(item.get("id"), str) else {**item, "id": f"{turn_id}_{n}"}

