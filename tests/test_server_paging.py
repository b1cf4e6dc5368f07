"""The server's pure paging (input_items): following has_more and last_id walks every
item once, in the order asked for, for any length and page size."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from redis_sessions.server import ApiError, PageQuery, page, page_query


@settings(deadline=None)  # no per-example time limit: how fast an example runs is this machine's
@given(count=st.integers(0, 40), limit=st.integers(1, 100), order=st.sampled_from(["asc", "desc"]))
def test_following_pages_walks_every_item_once(count: int, limit: int, order: str) -> None:
    items = [{"id": f"msg_{n}"} for n in range(count)]
    seen: list[str] = []
    after = None
    while True:
        got = page(items, PageQuery(limit=limit, order=order, after=after))  # type: ignore[arg-type]
        seen += [item["id"] for item in got["data"]]
        assert len(got["data"]) <= limit
        assert got["first_id"] == (got["data"][0]["id"] if got["data"] else None)
        if not got["has_more"]:
            break
        after = got["last_id"]
    expected = [item["id"] for item in items]
    assert seen == (expected if order == "asc" else expected[::-1])


def test_queries() -> None:
    assert page_query({}) == PageQuery(limit=20, order="desc", after=None)
    assert page_query({"limit": "100", "order": "asc", "after": "x"}) == PageQuery(100, "asc", "x")
    for bad, param in (({"limit": "0"}, "limit"), ({"limit": "-1"}, "limit"), ({"limit": "1.5"}, "limit"),
                       ({"limit": "101"}, "limit"), ({"order": "ASC"}, "order")):
        with pytest.raises(ApiError) as caught:
            page_query(bad)
        assert caught.value.status == 400 and caught.value.param == param
    with pytest.raises(ApiError) as unknown:
        page([{"id": "a"}], PageQuery(after="b"))
    assert unknown.value.param == "after"


@settings(deadline=None)
@given(raw=st.text(alphabet="0123456789²٣１৫+- .e", max_size=6) | st.text(max_size=4))
def test_a_limit_is_ascii_digits_in_range(raw: str) -> None:
    """Any query string's limit is taken if it is ASCII digits from 1 to 100, else a 400
    naming it: never the ValueError of int('²'), never int('٣') taken as 3."""
    expected = int(raw) if re.fullmatch("[0-9]+", raw) and 1 <= int(raw) <= 100 else None
    try:
        got: int | None = page_query({"limit": raw}).limit
    except ApiError as exc:
        assert exc.status == 400 and exc.param == "limit"
        got = None
    assert got == expected
