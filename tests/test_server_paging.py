"""The server's pure paging (input_items): following has_more and last_id walks every
item once, in the order asked for, for any length and page size."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redis_sessions.server import ApiError, PageQuery, page, page_query


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
