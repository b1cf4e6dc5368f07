"""``ResponseSessionStore``: the interface gateways program against (GodeX's), which the
store (:mod:`.store`) and its sync and memory forms implement."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..limits import UNSET, _Unset
from ..models import ResponseSessionSnapshot, StoredResponseSession


@runtime_checkable
class ResponseSessionStore(Protocol):
    async def get(self, response_id: str) -> StoredResponseSession | None: ...

    async def save(
        self,
        session: StoredResponseSession,
        *,
        expected_previous_response_id: str | None | _Unset = UNSET,
        overwrite: bool = False,
    ) -> None: ...

    async def resolve_chain(
        self,
        previous_response_id: str | None,
        *,
        max_depth: int | None = None,
        include_incomplete: bool = False,
    ) -> ResponseSessionSnapshot: ...

    async def delete(self, response_id: str) -> bool: ...

    async def close(self) -> None: ...
