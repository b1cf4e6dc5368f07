"""An OpenAI-compatible gateway worker: the package's reference server as an ASGI app.

Run any number of these behind a load balancer against one Redis:

    REDIS_SESSIONS_URL=redis://localhost:6379/0 uvicorn examples.asgi_gateway:app --workers 4

and point any OpenAI client at it (``base_url="http://localhost:8000/v1"``).
It serves ``/v1/responses`` (``previous_response_id``, ``conversation``, ``store``,
``stream``, retrieve, delete, ``input_items``) and ``/v1/conversations`` with OpenAI's
shapes and error bodies, and ``/readyz`` and ``/healthz`` for probes; at startup a
wrong Redis password stops it (docs/server.md). The model is a stand-in that echoes;
to serve a real one, change the ``model=`` line to ``model=upstream_model(AsyncOpenAI())``
(``from openai import AsyncOpenAI``).
"""

from __future__ import annotations

from redis_sessions import SessionConfig
from redis_sessions.server import create_app, stand_in_model, upstream_model  # noqa: F401

app = create_app(
    config=SessionConfig(),  # REDIS_SESSIONS_URL: Redis; unset: memory
    model=stand_in_model,    # a real model: model=upstream_model(AsyncOpenAI())
)
store = app.state.store
conversations = app.state.conversations
