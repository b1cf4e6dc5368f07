"""The reference server over one test backend, and the official OpenAI client talking
to it in process (httpx2's ASGI transport: no sockets, no network), or over loopback
to a real uvicorn (:func:`listening`)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator

import httpx2
import openai
import uvicorn
from starlette.applications import Starlette

from chains import make_store
from servers import free_port
from redis_sessions.conversations import ConversationStore, RedisConversationStore
from redis_sessions.responses import RedisResponseSessionStore as ChainStore
from redis_sessions.server import Model, create_app, stand_in_model


OWNER = "key:" + hashlib.sha256(b"x").hexdigest()[:32]
"""The owner of the test clients' requests (their API key is ``x``): what a test that saves
through the stores passes, for the server's requests to see it (server/owners.py)."""


@dataclass
class Served:
    app: Starlette
    store: ChainStore
    conversations: ConversationStore
    client: openai.AsyncOpenAI
    http: httpx2.AsyncClient


def client_for(app: Any) -> tuple[openai.AsyncOpenAI, httpx2.AsyncClient]:
    """The official client and a raw HTTP client, both sending the API key ``x``: the
    server binds what a request stores to its key (server/owners.py)."""
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), headers={"Authorization": "Bearer x"})
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


@contextlib.asynccontextmanager
async def listening(app: Any, *, lifespan: str = "off") -> AsyncIterator[uvicorn.Server]:
    """``app`` under a real uvicorn on a free loopback port, on the test's own event loop
    (so the app's stores may use the test's clients); ``server.started`` is False if the
    app's startup failed (``lifespan="on"``), and then the server has already stopped."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), lifespan=lifespan,
                                           log_level="warning", log_config=None, access_log=False))

    async def serve() -> None:
        with contextlib.suppress(SystemExit):  # uvicorn exits (3) when the app's startup fails
            await server.serve()

    task = asyncio.create_task(serve())
    deadline = time.monotonic() + 30
    while not server.started and not task.done():
        assert time.monotonic() < deadline, "uvicorn did not start"
        await asyncio.sleep(0.02)
    try:
        yield server
    finally:
        server.should_exit = True
        await task


def port_of(server: uvicorn.Server) -> int:
    return int(server.config.port)
