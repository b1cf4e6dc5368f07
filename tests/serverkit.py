"""The reference server over one test backend, and the official OpenAI client talking
to it in process (httpx2's ASGI transport: no sockets, no network)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, AsyncIterator

import httpx2
import openai
from starlette.applications import Starlette

from chains import make_store
from redis_sessions.conversations import ConversationStore, RedisConversationStore
from redis_sessions.responses import ChainStore
from redis_sessions.server import Model, create_app, stand_in_model


@dataclass
class Served:
    app: Starlette
    store: ChainStore
    conversations: ConversationStore
    client: openai.AsyncOpenAI
    http: httpx2.AsyncClient


def client_for(app: Any) -> tuple[openai.AsyncOpenAI, httpx2.AsyncClient]:
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app))
    return openai.AsyncOpenAI(http_client=http, base_url="http://server/v1", api_key="x", max_retries=0), http


def make_conversations(backend: Any) -> ConversationStore:
    """A conversation store on ``backend``'s server and prefix."""
    return RedisConversationStore(backend.client, key_prefix=backend.prefix)


async def serve(backend: Any, *, model: Model = stand_in_model, one_step: bool = True) -> AsyncIterator[Served]:
    """An app over ``backend``. ``one_step``: the response store appends a conversation's
    turn in the same step as its save; else the server's two writes (save, then append)."""
    conversations = make_conversations(backend)
    store = make_store(backend, conversations=conversations) if one_step else make_store(backend)
    app = create_app(store, conversations, model=model)
    client, http = client_for(app)
    yield Served(app, store, conversations, client, http)
    await http.aclose()
