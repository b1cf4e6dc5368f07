"""The Starlette app: routes, JSON bodies, and every error in OpenAI's shape."""

from __future__ import annotations

import contextlib
import json
from typing import Any, AsyncIterator, Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..config import SessionConfig, create_response_session_store
from ..errors import SessionError
from ..responses import ChainStore
from .errors import ApiError
from .model import Model, stand_in_model
from .responses import ConversationLink, ResponsesApi

Endpoint = Callable[[Request], Awaitable[Response]]


async def json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        raise ApiError.invalid("the request body is not valid JSON", None) from None
    if not isinstance(body, dict):
        raise ApiError.invalid("the request body must be a JSON object", None)
    return body


async def api_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, SessionError):
        exc = ApiError.from_session_error(exc)
    elif isinstance(exc, HTTPException):
        exc = ApiError(exc.status_code, str(exc.detail), code="not_found" if exc.status_code == 404 else "invalid_request")
    assert isinstance(exc, ApiError)
    return JSONResponse(exc.body(), status_code=exc.status)


def response_routes(api: ResponsesApi) -> list[Route]:
    async def create(request: Request) -> Response:
        return JSONResponse(await api.create(await json_body(request)))

    async def retrieve(request: Request) -> Response:
        return JSONResponse(await api.retrieve(request.path_params["response_id"]))

    async def delete(request: Request) -> Response:
        return JSONResponse(await api.delete(request.path_params["response_id"]))

    async def input_items(request: Request) -> Response:
        return JSONResponse(await api.input_items(request.path_params["response_id"], request.query_params))

    return [
        Route("/v1/responses", create, methods=["POST"]),
        Route("/v1/responses/{response_id}", retrieve, methods=["GET"]),
        Route("/v1/responses/{response_id}", delete, methods=["DELETE"]),
        Route("/v1/responses/{response_id}/input_items", input_items, methods=["GET"]),
    ]


def create_app(
    store: ChainStore | None = None,
    *,
    model: Model = stand_in_model,
    conversations: ConversationLink | None = None,
    config: SessionConfig | None = None,
    default_model: str = "stand-in",
) -> Starlette:
    """The OpenAI-compatible server over ``store`` (built from ``config``, else from the
    ``REDIS_SESSIONS_*`` environment, when not given; a store built here is closed when
    the app shuts down). ``model`` answers every turn: :func:`stand_in_model` until you
    pass ``upstream_model(openai.AsyncOpenAI())``."""
    owned = store is None
    chain_store = store if store is not None else create_response_session_store(config or SessionConfig())
    api = ResponsesApi(chain_store, model, conversations=conversations, default_model=default_model)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if owned:
            await chain_store.close()

    app = Starlette(routes=response_routes(api), lifespan=lifespan,
                    exception_handlers={ApiError: api_error, SessionError: api_error, HTTPException: api_error})
    app.state.store = chain_store
    app.state.responses = api
    return app
