"""Key shapes: no prefix's key can look like another prefix's, and locators of the
old layout keep working where they can only be this prefix's.

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
from redis_sessions.keys import KeySpace, legacy_locator_owner
from redis_sessions.responses.store import foreign_root_thread

# Prefixes and ids as validate_id allows them, biased toward the troublesome parts.
PIECES = st.sampled_from(["t", "loc", "l", "s", "chain", "items", "meta", "agents", "session", ":", "::", "x"])
NAMES = st.lists(PIECES, min_size=1, max_size=5).map("".join)


def all_keys(ks: KeySpace, ident: str) -> list[str]:
    return [ks.thread("0123456789abcdef"), ks.thread(ident), ks.locator(ident), ks.session_items(ident),
            ks.session_meta(ident)]


@settings(max_examples=400, deadline=None)
@given(a=NAMES, b=NAMES, ident=NAMES)
def test_no_key_of_one_prefix_is_a_key_of_another(a: str, b: str, ident: str) -> None:
    if a == b:
        return
    mine, theirs = KeySpace(a), KeyKinds(KeySpace(b))
    for key in all_keys(mine, ident):
        assert key.split(":{", 1)[0] == a  # the prefix is everything before the first ':{'
        assert theirs.classify(key).kind == "other"
        assert theirs.legacy(key) is None


@settings(max_examples=400, deadline=None)
@given(prefix=NAMES, ident=NAMES)
def test_every_key_is_recognised_as_what_it_is(prefix: str, ident: str) -> None:
    kinds = KeyKinds(KeySpace(prefix))
    ks = kinds.keys
    for key, kind, of in ((ks.locator(ident), "locator", ident), (ks.session_items(ident), "items", ident),
                          (ks.session_meta(ident), "meta", ident), (ks.thread(ident), "thread", ident)):
        found = kinds.classify(key)
        assert (found.kind, found.ident) == (kind, of)


@settings(max_examples=400, deadline=None)
@given(a=NAMES, b=NAMES, ident=NAMES)
def test_an_old_locator_is_used_only_where_no_other_prefix_can_have_written_it(a: str, b: str, ident: str) -> None:
    mine, theirs = KeySpace(a), KeySpace(b)
    key = mine.legacy_locator(ident)
    if key is None:
        return
    assert key == f"{a}:loc:{ident}"
    assert legacy_locator_owner(key) == (a, ident)
    if a != b:  # the other prefix never reads or claims it
        assert all(theirs.legacy_locator(other) != key for other in (ident, f"loc:{ident}", ident.split(":", 1)[-1]))
        assert KeyKinds(theirs).legacy(key) is None


def test_the_locator_shapes_that_collided() -> None:
    """Prefix 't:loc''s old locator of 'x' was prefix 't''s old locator of 'loc:x'."""
    t, tloc = KeySpace("t"), KeySpace("t:loc")
    assert t.locator("loc:x") == "t:{l:loc:x}:loc" != tloc.locator("x") == "t:loc:{l:x}:loc"
    assert t.legacy_locator("loc:x") is None and tloc.legacy_locator("x") is None  # the same key: nobody's
    assert t.legacy_locator("x") == "t:loc:x"
    assert KeySpace("agents:session").legacy_locator("x") == "agents:session:loc:x"
    assert KeySpace("a:loc:b").legacy_locator("x") is None
    assert t.scan_pattern() == "t:{*" and KeySpace("a*[b]").scan_pattern() == "a\\*\\[b\\]:{*"


# -- the store reads and deletes the old layout's locators ---------------------------
async def _to_old_layout(backend: Any, store: Any, rid: str) -> str:
    """Move a locator to the old layout's key, as a previous version wrote it."""
    value = await backend.client.get(store.keys.locator(rid))
    ttl = await backend.client.pttl(store.keys.locator(rid))
    await backend.client.delete(store.keys.locator(rid))
    old = f"{backend.prefix}:loc:{rid}"
    await backend.client.set(old, value, px=ttl)
    return old


async def test_a_locator_of_the_old_layout_is_still_found(redis_backend: Any) -> None:
    store = make_store(redis_backend, ttl_seconds=3600)
    await store.save(record("ext-root"))
    await store.save(record("ext-child", "ext-root"), expected_previous_response_id="ext-root")
    old = await _to_old_layout(redis_backend, store, "ext-child")
    assert (await store.get("ext-child")) == record("ext-child", "ext-root")
    assert [s.id for s in (await store.resolve_chain("ext-child")).sessions] == ["ext-root", "ext-child"]
    child = await store.new_response_id("ext-child")
    assert thread_of(child) == foreign_root_thread("ext-root")
    assert await store.delete("ext-child") is True
    assert await redis_backend.client.exists(old, store.keys.locator("ext-child")) == 0
    assert await store.get("ext-child") is None


async def test_an_old_locator_is_refreshed_with_the_new_one(redis_backend: Any) -> None:
    store = make_store(redis_backend, ttl_seconds=3600)
    await store.save(record("ext-root"))
    old = await _to_old_layout(redis_backend, store, "ext-root")
    await redis_backend.client.pexpire(old, 5_000)
    await store.save(record("ext-child", "ext-root"), expected_previous_response_id="ext-root")  # touches the parent's
    assert await redis_backend.client.pttl(old) > 3_000_000


async def test_an_old_locator_claimed_by_two_prefixes_is_never_read(redis_backend: Any) -> None:
    """Prefix P's foreign id 'loc:x' and prefix 'P:loc''s 'x' had one old locator key."""
    p, ploc = redis_backend.prefix, f"{redis_backend.prefix}:loc"
    mine = make_store(redis_backend)
    theirs = RedisResponseSessionStore(redis_backend.client, key_prefix=ploc)
    await theirs.save(record("x"))
    await redis_backend.client.set(f"{p}:loc:loc:x", foreign_root_thread("x"))  # their old locator of 'x'
    await mine.save(record("loc:x"))  # not a conflict: it is not ours
    assert (await mine.get("loc:x")) == record("loc:x")
    assert await mine.delete("loc:x") is True
    assert await redis_backend.client.get(f"{p}:loc:loc:x") == foreign_root_thread("x").encode()  # not deleted
    assert (await theirs.get("x")) == record("x")


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
