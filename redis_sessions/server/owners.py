"""Whose request it is: the owner every store call of a request carries.

A response, a thread and a conversation saved with an owner are, to every other owner,
an unknown id (docs/guarantees.md#owners). The server asks ``create_app(owner=...)``, a
function of the request, for each request's owner; the default,
:func:`owner_from_api_key`, binds everything a request stores to the API key it was
sent with, as OpenAI binds responses to a project. Replace it to bind by anything else
a gateway authenticates (a project header set by an auth proxy, a tenant from a JWT):
it must return the same string for every request of one owner, 1 to 128 printable
ASCII characters without spaces, and a different one for every other owner. Returning
None makes the request's calls unowned: they see every stored id (an operator's view).
"""

from __future__ import annotations

import hashlib
from typing import Callable

from starlette.requests import Request

Owner = Callable[[Request], "str | None"]
"""The owner of a request: a function of it (:func:`owner_from_api_key` by default)."""


def owner_from_api_key(request: Request) -> str:
    """``key:`` and 32 hex digits of the SHA-256 of the request's bearer token (the API key
    the ``openai`` client sends as ``Authorization: Bearer <key>``): no key is stored or
    logged, and a request without one is the owner of the empty key, so it sees nothing a
    keyed request stored, nor the other way round."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    key = token.strip() if scheme.lower() == "bearer" else ""
    return "key:" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
