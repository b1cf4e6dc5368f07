"""``/v1/conversations``: conversations and their items, over a :class:`ConversationStore`,
and the link through which a response turn reads and extends a conversation."""

from __future__ import annotations

from typing import Any, Mapping

import msgspec

from ..conversations import ConversationStore
from ..conversations.checks import MAX_ITEMS_PER_CALL
from ..models import Item
from .errors import ApiError
from .items import items_of, shaped
from .paging import page_query


def _json(value: Any) -> dict[str, Any]:
    body: dict[str, Any] = msgspec.to_builtins(value)
    return body


def _metadata(body: Mapping[str, Any]) -> Any:
    value = body.get("metadata")
    if value is not None and not isinstance(value, dict):
        raise ApiError.invalid("metadata must be an object of strings", "metadata")
    return value


class ConversationsApi:
    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    async def create(self, body: Mapping[str, Any], owner: str | None = None) -> dict[str, Any]:
        given = body.get("items")
        items = [shaped(item) for item in items_of(given, "items", MAX_ITEMS_PER_CALL)] if given is not None else None
        return _json(await self.store.create(items, _metadata(body), owner=owner))

    async def retrieve(self, conversation_id: str, owner: str | None = None) -> dict[str, Any]:
        return _json(await self.store.get(conversation_id, owner=owner))

    async def update(self, conversation_id: str, body: Mapping[str, Any], owner: str | None = None) -> dict[str, Any]:
        if not isinstance(body.get("metadata"), dict):
            raise ApiError.invalid("metadata is required: an object of strings", "metadata")
        return _json(await self.store.update(conversation_id, body["metadata"], owner=owner))

    async def delete(self, conversation_id: str, owner: str | None = None) -> dict[str, Any]:
        return _json(await self.store.delete(conversation_id, owner=owner))

    async def add_items(self, conversation_id: str, body: Mapping[str, Any], owner: str | None = None) -> dict[str, Any]:
        items = [shaped(item) for item in items_of(body.get("items"), "items", MAX_ITEMS_PER_CALL)]
        return _json(await self.store.add_items(conversation_id, items, owner=owner))

    async def list_items(self, conversation_id: str, params: Mapping[str, str], owner: str | None = None) -> dict[str, Any]:
        query = page_query(params)
        return _json(await self.store.list_items(conversation_id, limit=query.limit, order=query.order,
                                                 after=query.after, owner=owner))

    async def get_item(self, conversation_id: str, item_id: str, owner: str | None = None) -> dict[str, Any]:
        return await self.store.get_item(conversation_id, item_id, owner=owner)

    async def delete_item(self, conversation_id: str, item_id: str, owner: str | None = None) -> dict[str, Any]:
        return _json(await self.store.delete_item(conversation_id, item_id, owner=owner))


class StoreLink:
    """A response turn's view of a conversation (see :class:`.responses.ConversationLink`)."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    async def history(self, conversation_id: str, owner: str | None = None) -> list[Item]:
        """Every item, oldest first (the store's history: pages of 100, one call each)."""
        return await self.store.history(conversation_id, owner=owner)

    async def append(self, conversation_id: str, items: list[Item], owner: str | None = None) -> None:
        """The turn's items, 20 per call (the store's limit). Each call is atomic; a turn of
        more than 20 items is several, so a failure can leave part of it appended."""
        for start in range(0, len(items), MAX_ITEMS_PER_CALL):
            await self.store.add_items(conversation_id, items[start:start + MAX_ITEMS_PER_CALL], owner=owner)
