"""``ResponseSessionStore``: the interface gateways program against (GodeX's), which the
store (:mod:`.store`) and its sync and memory forms implement."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..limits import UNSET, _Unset
from ..models import ResponseSessionSnapshot, StoredResponseSession


@runtime_checkable
class ResponseSessionStore(Protocol):
    """What a gateway needs of a response store: :class:`RedisResponseSessionStore` and
    :class:`MemoryResponseSessionStore` have it (``isinstance`` checks
    that the methods are there)."""

    async def get(self, response_id: str) -> StoredResponseSession | None:
        """The stored response, or ``None``: :meth:`RedisResponseSessionStore.get`."""

    async def save(
        self,
        session: StoredResponseSession,
        *,
        expected_previous_response_id: str | None | _Unset = UNSET,
        overwrite: bool = False,
    ) -> None:
        """Store one response: :meth:`RedisResponseSessionStore.save`."""

    async def resolve_chain(
        self,
        previous_response_id: str | None,
        *,
        max_depth: int | None = None,
        include_incomplete: bool = False,
    ) -> ResponseSessionSnapshot:
        """The chain that ends at a response: :meth:`RedisResponseSessionStore.resolve_chain`."""

    async def delete(self, response_id: str) -> bool:
        """Delete one response: :meth:`RedisResponseSessionStore.delete`."""

    async def close(self) -> None:
        """Close the store: :meth:`RedisResponseSessionStore.close`."""
