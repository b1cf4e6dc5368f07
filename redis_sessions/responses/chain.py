"""Pure chain logic, shared by every backend: what a walk result means, and how a
chain of stored turns becomes the input items of the next request."""

from __future__ import annotations

from typing import Sequence

from ..codec import decode_session
from ..errors import ErrorCode, SessionError
from ..models import Item, ResponseSessionSnapshot, StoredResponseSession


def message(role: str, content: object) -> Item:
    return {"type": "message", "role": role, "content": content}


def turn_items(session: StoredResponseSession, *, replay_instructions: bool) -> list[Item]:
    """One turn's contribution: [instructions as system], the request input, then the output."""
    items: list[Item] = []
    request = session.request
    if replay_instructions and request.instructions:
        items.append(message("system", request.instructions))
    if isinstance(request.input, str):
        if request.input:
            items.append(message("user", request.input))
    else:
        items.extend(request.input)
    items.extend(session.response.output)
    return items


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


def decode_chain(records: Sequence[object], where: str) -> list[StoredResponseSession]:
    """Records come newest first from the walk; the chain is returned oldest first."""
    sessions = [decode_session(r, f"{where} (record {i} of the chain)") for i, r in enumerate(records)]
    sessions.reverse()
    return sessions


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
        items.extend(turn_items(session, replay_instructions=replay_instructions))
    return ResponseSessionSnapshot(previous_response_id=previous_response_id, sessions=sessions, input_items=items)
