"""Compaction: replace a long history with a shorter one, never losing anything.

``CompactionSession`` wraps a RedisSession or MemorySession and satisfies the
Agents SDK's ``OpenAIResponsesCompactionAwareSession`` protocol: the Runner
calls ``run_compaction(args)`` after a turn. ``SyncCompactionSession``
(:mod:`.sync`) runs these same steps from synchronous code, with a plain
function as compactor. One compaction:

1. reads a snapshot in one atomic step: the valid items, the number N of
   stored entries read, and the session's epoch and rewrite count;
2. decides (``should_trigger``, or ``args["force"]``), then awaits the
   compactor on the items; other workers may append meanwhile;
3. replaces entries ``0..N-1`` with the compactor's output in one atomic
   script that checks epoch and rewrite count: items appended during step 2 stay after the
   summary; if a pop, clear, expiry or another compaction happened, nothing
   is written.

Step 3 is idempotent like every write (:mod:`.redis`): re-sent after a lost
reply, or retried by the caller with the same snapshot and output, it
replaces once and reports success.

A raced compaction returns quietly (``compact()`` reports ``"conflict"``):
the history is intact, and the next turn compacts again, so failing the
agent's run would gain nothing. A compactor that raises propagates its error,
also with the history untouched; so does invalid compactor output
(``session.input.invalid``, or ``session.record.too_large`` past
``max_item_bytes`` per item or ``max_batch_bytes`` in all), and a damaged
session (``session.record.corrupt``).
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal, Mapping, Optional, Union

from ..errors import ErrorCode, SessionError
from ..models import Item
from .redis import RedisSession

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

logger = logging.getLogger("redis_sessions.items")

# Receives the items (plain dicts), returns their replacement (plain dicts); a sync
# compactor (SyncCompactionSession's) returns it rather than a coroutine.
Compactor = Callable[[list[Any]], Union[Awaitable[list[Any]], list[Any]]]
ShouldTrigger = Callable[[dict[str, Any]], bool]
CompactionOutcome = Literal["compacted", "not_triggered", "empty", "conflict"]

DEFAULT_COMPACTION_THRESHOLD = 10


def is_candidate(item: Item) -> bool:
    """Whether an item counts toward the threshold: not a user message, not a compaction."""
    if item.get("type") == "compaction":
        return False
    if item.get("role") == "user" and (item.get("type") == "message" or "content" in item):
        return False
    return True


def default_should_trigger(context: dict[str, Any]) -> bool:
    """Compact at 10 or more candidate items, as the SDK's own compaction session does."""
    return len(context["compaction_candidate_items"]) >= DEFAULT_COMPACTION_THRESHOLD


class CompactionSession:
    """A session that compacts its history with ``compactor`` (an async items -> items)."""

    def __init__(
        self,
        underlying: RedisSession,
        compactor: Compactor,
        *,
        should_trigger: Optional[ShouldTrigger] = None,
    ) -> None:
        if not isinstance(underlying, RedisSession):
            raise SessionError(
                ErrorCode.INPUT_INVALID, f"CompactionSession wraps a RedisSession or MemorySession, got {type(underlying).__name__}"
            )
        self.underlying = underlying
        self.session_id = underlying.session_id
        self.compactor = compactor
        self.should_trigger = should_trigger if should_trigger is not None else default_should_trigger

    # -- the Session protocol, delegated ---------------------------------------
    @property
    def session_settings(self) -> Optional["SessionSettings"]:
        """The wrapped session's ``session_settings``; settable."""
        return self.underlying.session_settings

    @session_settings.setter
    def session_settings(self, value: Optional["SessionSettings"]) -> None:
        self.underlying.session_settings = value

    async def get_items(self, limit: Optional[int] = None) -> list["TResponseInputItem"]:
        """The wrapped session's :meth:`RedisSession.get_items`."""
        return await self.underlying.get_items(limit)

    async def add_items(self, items: list["TResponseInputItem"], *, idempotency_key: Optional[str] = None) -> None:
        """The wrapped session's :meth:`RedisSession.add_items`."""
        await self.underlying.add_items(items, idempotency_key=idempotency_key)

    async def pop_item(self) -> Optional["TResponseInputItem"]:
        """The wrapped session's :meth:`RedisSession.pop_item`."""
        return await self.underlying.pop_item()

    async def clear_session(self) -> None:
        """The wrapped session's :meth:`RedisSession.clear_session`."""
        await self.underlying.clear_session()

    # -- compaction ------------------------------------------------------------
    async def run_compaction(self, args: Optional[Mapping[str, Any]] = None) -> None:
        """The SDK's hook; ``args["force"]`` skips the trigger check. See :meth:`compact`."""
        args = args or {}
        await self.compact(force=bool(args.get("force", False)), args=args)

    async def compact(self, *, force: bool = False, args: Optional[Mapping[str, Any]] = None) -> CompactionOutcome:
        """Compact once if triggered (or forced); report what happened."""
        snap = await self.underlying.snapshot()
        if not snap.items:
            return "empty"
        candidates = [item for item in snap.items if is_candidate(item)]
        context = {
            "session_items": snap.items,
            "compaction_candidate_items": candidates,
            "response_id": (args or {}).get("response_id"),
        }
        if not force and not self.should_trigger(context):
            return "not_triggered"
        replacement = self.compactor(snap.items)
        if inspect.isawaitable(replacement):
            replacement = await replacement
        if not await self.underlying.replace_prefix(snap, replacement):
            logger.info("compaction of session %r skipped: the history changed while compacting", self.session_id)
            return "conflict"
        return "compacted"
