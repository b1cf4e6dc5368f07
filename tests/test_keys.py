"""Key shapes: no prefix's key can look like another prefix's.

Every key is ``<prefix>:{<tag>}:<kind>``; the prefix of a key is everything
before its first ``:{``. Prefixes may contain colons (the Agents SDK's default
is ``agents:session``) but no braces.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chains import make_store, record
from redis_sessions import RedisResponseSessionStore
from redis_sessions.cli.keyscan import KeyKinds
from redis_sessions.ids import thread_of
from redis_sessions.keys import KeySpace
from redis_sessions.responses.store import foreign_root_thread

# Prefixes and ids as validate_id allows them, biased toward the troublesome parts.
PIECES = st.sampled_from(["t", "loc", "l", "s", "chain", "items", "meta", "agents", "session", ":", "::", "x"])
NAMES = st.lists(PIECES, min_size=1, max_size=5).map("".join)


def all_keys(ks: KeySpace, ident: str) -> list[str]:
    return [ks.thread("0123456789abcdef"), ks.thread(ident), ks.locator(ident), ks.session_items(ident),
            ks.conversation(ident)]


@settings(max_examples=400, deadline=None)
@given(a=NAMES, b=NAMES, ident=NAMES)
def test_no_key_of_one_prefix_is_a_key_of_another(a: str, b: str, ident: str) -> None:
    if a == b:
        return
    mine, theirs = KeySpace(a), KeyKinds(KeySpace(b))
    for key in all_keys(mine, ident):
        assert key.split(":{", 1)[0] == a  # the prefix is everything before the first ':{'
        assert theirs.classify(key).kind == "other"


@settings(max_examples=400, deadline=None)
@given(prefix=NAMES, ident=NAMES)
def test_every_key_is_recognised_as_what_it_is(prefix: str, ident: str) -> None:
    kinds = KeyKinds(KeySpace(prefix))
    ks = kinds.keys
    for key, kind, of in ((ks.locator(ident), "locator", ident), (ks.session_items(ident), "items", ident),
                          (ks.conversation(ident), "conversation", ident), (ks.thread(ident), "thread", ident)):
        found = kinds.classify(key)
        assert (found.kind, found.ident) == (kind, of)


def test_the_locator_shapes_that_once_collided_differ() -> None:
    """Prefix 't:loc''s locator of 'x' and prefix 't''s of 'loc:x' are two keys."""
    t, tloc = KeySpace("t"), KeySpace("t:loc")
    assert t.locator("loc:x") == "t:{l:loc:x}:loc" != tloc.locator("x") == "t:loc:{l:x}:loc"
    assert t.scan_pattern() == "t:{*" and KeySpace("a*[b]").scan_pattern() == "a\\*\\[b\\]:{*"


@pytest.mark.parametrize("prefix", ["t", "t:loc", "agents:session"])
async def test_prefixes_that_share_a_start_do_not_share_locators(redis_backend: Any, prefix: str) -> None:
    base = f"{redis_backend.prefix}{prefix}"
    a = RedisResponseSessionStore(redis_backend.client, key_prefix=base)
    b = RedisResponseSessionStore(redis_backend.client, key_prefix=f"{base}:loc")
    await a.save(record("loc:x"))
    await b.save(record("x"))
    assert await a.delete("loc:x") is True
    assert (await b.get("x")) == record("x")
    assert await b.delete("x") is True and await a.get("loc:x") is None
