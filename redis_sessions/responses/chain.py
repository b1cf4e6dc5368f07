"""Pure chain logic, shared by every backend: what a walk result means, and how a
chain of stored turns becomes the input items of the next request."""

from __future__ import annotations

import re
from typing import NamedTuple, Sequence

from ..codec import MAX_EXPANDED_BYTES, decode_session
from ..errors import ErrorCode, SessionError
from ..models import Item, ResponseSessionSnapshot, StoredResponseSession

TEXT_PART = {"user": "input_text", "system": "input_text", "developer": "input_text", "assistant": "output_text"}
"""The text part each message role is listed with by OpenAI's ``input_items``
(``ResponseInputMessageItem`` for user, system and developer; an assistant
message is listed as ``ResponseOutputMessage``)."""


class ThreadHeader(NamedTuple):
    """A thread's header ``h`` (docs/key-layout.md#threads), the parts Python reads."""

    largest: int
    """The largest record the thread has held, in bytes: what its reads are sized by."""
    owner: str
    """Whose thread it is ('' for none: data format 1; an owner makes it format 2)."""


_THREAD_HEADER = re.compile(rb"([12]) ([0-9]+) [01] [0-9]+ [0-9]+(?: ([!-~]+))?")


def thread_header(h: object) -> ThreadHeader | None:
    """``h`` parsed as lua/chain_lib.lua's ``header`` parses it, or None when it is not a
    header of data format 1 or 2."""
    found = _THREAD_HEADER.fullmatch(h) if isinstance(h, bytes) else None
    if found is None or (found.group(1) == b"2") != (found.group(3) is not None):
        return None
    return ThreadHeader(int(found.group(2)), (found.group(3) or b"").decode())


def text_message(role: str, text: str) -> Item:
    """A message item whose content is one text part: ``{"type": "message", "role": "user",
    "content": [{"type": "input_text", "text": ...}]}``."""
    return {"type": "message", "role": role, "content": [{"type": TEXT_PART[role], "text": text}]}


def canonical_item(item: Item) -> Item:
    """One item in the shape OpenAI's ``input_items`` lists it in.

    An easy message (``{"role": "user", "content": "hi"}``, ``type`` absent or
    ``"message"``, a role of :data:`TEXT_PART`) becomes a ``message`` item whose
    content is a list of one text part; every other key it has is kept. Anything
    else (messages whose content is already a list of parts, function calls and
    their outputs, reasoning, item types this package does not know) is returned
    as it is. Items get no ``id``: OpenAI assigns those when it stores an item,
    and an input message sent to a model carries none."""
    content = item.get("content")
    if "type" in item and (item["type"] != "message" or not isinstance(content, str)):
        return item  # typed already (most items, every model output): checked first, it is the common case
    role = item.get("role")
    if not isinstance(role, str) or role not in TEXT_PART:
        return item
    shaped = {"type": "message", **item}
    if isinstance(content, str):
        shaped["content"] = [{"type": TEXT_PART[role], "text": content}]
    return shaped


def request_input_items(request_input: str | list[Item]) -> list[Item]:
    """A request's ``input`` as items, in the shape ``resolve_chain`` rebuilds them in:
    a string becomes one user message (none when empty), a list is shaped item by
    item. Use it for the new turn's items, so that they match the history's (GodeX's
    ``requestInputItems``)."""
    if isinstance(request_input, str):
        return [text_message("user", request_input)] if request_input else []
    return [canonical_item(item) for item in request_input]


def add_turn_items(items: list[Item], session: StoredResponseSession, replay_instructions: bool) -> None:
    """Append one turn's contribution to ``items``: [instructions as a system message],
    the request input, then the output, every message in the shape of
    :func:`canonical_item`. The shape is made here, at rebuild time: records keep what
    the caller saved, so records saved before this shape existed rebuild in it too.
    Appended item by item into the one list of the snapshot: a list of its own per turn,
    and a comprehension per part, made a resolve of 20 turns a third slower."""
    request = session.request
    if replay_instructions and request.instructions:
        items.append(text_message("system", request.instructions))
    given = request.input
    if isinstance(given, str):  # request_input_items, inlined: this runs once per turn of every resolve
        if given:
            items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": given}]})
    else:
        for item in given:
            items.append(canonical_item(item))
    for item in session.response.output:
        items.append(canonical_item(item))


def check_walk(status: str, detail: str, start: str, max_depth: int) -> None:
    """Raise the coded error a walk ended with; return quietly when it reached a root."""
    if status == "ok":
        return
    if status == "missing":
        what = "previous_response_id" if detail == start else "an ancestor of " + repr(start)
        raise SessionError(ErrorCode.CHAIN_NOT_FOUND, f"{what} {detail!r} was not found (expired or deleted)")
    if status == "cycle":
        raise SessionError(ErrorCode.CHAIN_CYCLE_DETECTED, f"the chain of {start!r} loops back to {detail!r}")
    if status == "depth":
        beyond = "" if detail == start else f" (next ancestor {detail!r})"
        raise SessionError(
            ErrorCode.CHAIN_DEPTH_EXCEEDED, f"the chain of {start!r} is longer than max_depth={max_depth}{beyond}"
        )
    raise SessionError(ErrorCode.RECORD_CORRUPT, f"the thread of {start!r} holds a Redis {detail or status}")


def decode_chain(records: Sequence[object], where: str, start: str,
                 ids: Sequence[str] | None = None, limit: int = MAX_EXPANDED_BYTES) -> list[StoredResponseSession]:
    """Records come newest first from the walk; the chain is returned oldest first.

    A compact record's id is the one it was read under: ``ids[i]`` when the records
    were read apart from the walk (so :func:`linked` still compares each record's parent
    with the id the walk found), else, the records having come with the walk in one
    step, ``start`` and then each record's parent. ``limit``: the most a record may expand
    to (the store's ``max_record_bytes``)."""
    sessions = []
    expect: str | None = start
    for i, record in enumerate(records):
        session = decode_session(record, lambda i=i: f"{where} (record {i} of the chain)",  # type: ignore[misc]
                                 ids[i] if ids is not None else str(expect), limit)
        sessions.append(session)
        expect = session.previous_response_id
    sessions.reverse()
    return sessions


def linked(sessions: list[StoredResponseSession], start: str) -> bool:
    """Whether ``sessions`` (oldest first) is one chain ending at ``start``, each turn's
    parent the turn before it: what the records say, against what the walk followed."""
    if not sessions:
        return True
    if sessions[-1].id != start or sessions[0].previous_response_id is not None:
        return False
    return all(later.previous_response_id == earlier.id for earlier, later in zip(sessions, sessions[1:]))


def build_snapshot(
    previous_response_id: str | None,
    sessions: list[StoredResponseSession],
    *,
    include_incomplete: bool,
    replay_instructions: bool,
) -> ResponseSessionSnapshot:
    items: list[Item] = []
    for session in sessions:
        if session.status != "completed" and not include_incomplete:
            raise SessionError(
                ErrorCode.CHAIN_UNAVAILABLE,
                f"response {session.id!r} in the chain has status {session.status!r}; "
                "pass include_incomplete=True to use it",
            )
        add_turn_items(items, session, replay_instructions)
    return ResponseSessionSnapshot(previous_response_id=previous_response_id, sessions=sessions, input_items=items)
