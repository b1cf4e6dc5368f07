"""An OpenAI-compatible Responses and Conversations server over this package's stores.

``create_app(store)`` is a Starlette app (``pip install 'redis-sessions[server]'``)
that the official OpenAI clients and the Agents SDK talk to unchanged; the model
behind it is :func:`stand_in_model` until you pass :func:`upstream_model`.
See docs/server.md.
"""

try:
    import starlette  # noqa: F401
except ImportError as exc:  # the base install has no web framework
    raise ImportError(
        "redis_sessions.server needs Starlette, which the 'server' extra installs: "
        "pip install 'redis-sessions[server]' (from a checkout: pip install -e '.[server]')",
        name="starlette",
    ) from exc

from .app import create_app
from .errors import ApiError
from .model import Model, ModelCall, ModelEvent, ModelReply, ModelStream, stand_in_model, upstream_model
from .owners import Owner, owner_from_api_key
from .paging import PageQuery, page, page_query
from .responses import ConversationLink, ResponsesApi, response_object

__all__ = [
    "ApiError",
    "ConversationLink",
    "Model",
    "ModelCall",
    "ModelEvent",
    "ModelReply",
    "ModelStream",
    "Owner",
    "PageQuery",
    "ResponsesApi",
    "create_app",
    "owner_from_api_key",
    "page",
    "page_query",
    "response_object",
    "stand_in_model",
    "upstream_model",
]
