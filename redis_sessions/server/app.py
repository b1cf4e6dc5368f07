"""The Starlette app: routes, JSON bodies, every error in OpenAI's shape, the
startup check and the health endpoints."""

from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator, Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..config import SessionConfig, create_conversation_store, create_response_session_store
from ..conversations import ConversationStore
from ..errors import SessionError
from ..link import RedisLink
from ..responses import RedisResponseSessionStore
from .errors import NOT_FOUND, ApiError, log
from .health import links_of, ping, startup_check
from .model import Model, stand_in_model
from .owners import Owner, owner_from_api_key
from .conversations import ConversationsApi, StoreLink
from .responses import ResponsesApi
from .streaming import stream_turn
from .telemetry import export_from_environment
from .wire import request_json

Endpoint = Callable[[Request], Awaitable[Response]]


async def json_body(request: Request) -> dict[str, Any]:
    return request_json(await request.body())  # strict: no NaN, no deeper than MAX_NESTING (.wire)


async def api_error(request: Request, exc: Exception) -> Response:
    """The error body a client reads, and the line the log gets for a store's error."""
    if isinstance(exc, SessionError):
        ident = request.path_params.get(NOT_FOUND[exc.code][1]) if exc.code in NOT_FOUND else None
        exc = ApiError.from_session_error(exc, ident=ident)
    elif isinstance(exc, HTTPException):
        exc = ApiError(exc.status_code, str(exc.detail), code="not_found" if exc.status_code == 404 else "invalid_request")
    assert isinstance(exc, ApiError)
    exc.log(f"{request.method} {request.url.path}")
    return JSONResponse(exc.body(), status_code=exc.status)


async def internal_error(request: Request, exc: Exception) -> Response:
    """Anything else (a model call that raised, a bug) is a 500 in the same shape; the
    exception still reaches the ASGI server, which logs it."""
    return JSONResponse(ApiError.server_error().body(), status_code=500)


def response_routes(api: ResponsesApi, owner: Owner = owner_from_api_key) -> list[Route]:
    async def create(request: Request) -> Response:
        turn = await api.begin(await json_body(request), owner(request))  # errors up to here are plain JSON errors
        if turn.stream:
            return StreamingResponse(stream_turn(api, turn), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        return JSONResponse(await api.complete(turn))

    async def retrieve(request: Request) -> Response:
        return JSONResponse(await api.retrieve(request.path_params["response_id"], owner(request)))

    async def delete(request: Request) -> Response:
        return JSONResponse(await api.delete(request.path_params["response_id"], owner(request)))

    async def input_items(request: Request) -> Response:
        return JSONResponse(await api.input_items(request.path_params["response_id"], request.query_params,
                                                  owner(request)))

    return [
        Route("/v1/responses", create, methods=["POST"]),
        Route("/v1/responses/{response_id}", retrieve, methods=["GET"]),
        Route("/v1/responses/{response_id}", delete, methods=["DELETE"]),
        Route("/v1/responses/{response_id}/input_items", input_items, methods=["GET"]),
    ]


def conversation_routes(api: ConversationsApi, owner: Owner = owner_from_api_key) -> list[Route]:
    def ids(request: Request) -> tuple[str, str]:
        return request.path_params["conversation_id"], request.path_params["item_id"]

    async def create(request: Request) -> Response:
        return JSONResponse(await api.create(await json_body(request), owner(request)))

    async def retrieve(request: Request) -> Response:
        return JSONResponse(await api.retrieve(request.path_params["conversation_id"], owner(request)))

    async def update(request: Request) -> Response:
        return JSONResponse(await api.update(request.path_params["conversation_id"], await json_body(request),
                                             owner(request)))

    async def delete(request: Request) -> Response:
        return JSONResponse(await api.delete(request.path_params["conversation_id"], owner(request)))

    async def add_items(request: Request) -> Response:
        return JSONResponse(await api.add_items(request.path_params["conversation_id"], await json_body(request),
                                                owner(request)))

    async def list_items(request: Request) -> Response:
        return JSONResponse(await api.list_items(request.path_params["conversation_id"], request.query_params,
                                                 owner(request)))

    async def get_item(request: Request) -> Response:
        return JSONResponse(await api.get_item(*ids(request), owner(request)))

    async def delete_item(request: Request) -> Response:
        return JSONResponse(await api.delete_item(*ids(request), owner(request)))

    one, items, item = "/v1/conversations/{conversation_id}", "/v1/conversations/{conversation_id}/items", \
        "/v1/conversations/{conversation_id}/items/{item_id}"
    return [
        Route("/v1/conversations", create, methods=["POST"]),
        Route(one, retrieve, methods=["GET"]),
        Route(one, update, methods=["POST"]),
        Route(one, delete, methods=["DELETE"]),
        Route(items, add_items, methods=["POST"]),
        Route(items, list_items, methods=["GET"]),
        Route(item, get_item, methods=["GET"]),
        Route(item, delete_item, methods=["DELETE"]),
    ]


def health_routes(links: list[RedisLink]) -> list[Route]:
    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})  # the process serves; Redis is readyz's

    async def readyz(request: Request) -> Response:
        try:
            await ping(links)
        except SessionError as exc:
            log.info("GET /readyz: 503 %s: %s", exc.code.value, exc.message)
            return JSONResponse({"status": "unavailable", "code": exc.code.value}, status_code=503)
        return JSONResponse({"status": "ready"})

    return [Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"])]


def create_app(
    store: RedisResponseSessionStore | None = None,
    conversations: ConversationStore | None = None,
    *,
    model: Model = stand_in_model,
    config: SessionConfig | None = None,
    default_model: str = "stand-in",
    owner: Owner = owner_from_api_key,
) -> Starlette:
    """The OpenAI-compatible server over a response store and a conversation store.

    A store not given is built from ``config`` (else from the ``REDIS_SESSIONS_*``
    environment: Redis when ``REDIS_SESSIONS_URL`` is set, memory otherwise) and
    closed when the app shuts down; stores given are the caller's to close.
    ``model`` answers every turn: :func:`stand_in_model` until you pass
    ``upstream_model(openai.AsyncOpenAI())``. At startup (under a server that runs
    the ASGI lifespan, as uvicorn does) Redis is PINGed: refused credentials or a
    host name that does not resolve stop the app, an unreachable Redis is a warning
    (:mod:`.health`). ``owner``: whose each request is (:mod:`.owners`): by default the
    API key it was sent with, so one key's responses and conversations are unknown ids
    to every other key."""
    conv_store = conversations if conversations is not None else create_conversation_store(config or SessionConfig())
    # A store built here appends a conversation's turn in the same step as its save.
    chain_store = store if store is not None else create_response_session_store(
        config or SessionConfig(), conversations=conv_store)
    owned = [built for built, given in ((chain_store, store), (conv_store, conversations)) if given is None]
    responses = ResponsesApi(chain_store, model, conversations=StoreLink(conv_store), default_model=default_model)

    links = links_of(chain_store, conv_store)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        stop_telemetry = export_from_environment()  # the OTEL_* environment's, if it asks (.telemetry)
        await startup_check(links)
        yield
        for built in owned:
            await built.close()
        stop_telemetry()

    app = Starlette(routes=response_routes(responses, owner) + conversation_routes(ConversationsApi(conv_store), owner)
                    + health_routes(links),
                    lifespan=lifespan,
                    exception_handlers={ApiError: api_error, SessionError: api_error, HTTPException: api_error,
                                        Exception: internal_error})
    app.state.store = chain_store
    app.state.conversations = conv_store
    return app
