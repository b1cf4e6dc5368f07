"""The README and the pages in docs/ say what is true: the commands CI runs, the error
codes the package has, links that lead somewhere, and nothing a user cannot do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CHANGELOG = ROOT / "CHANGELOG.md"
PAGES = [README, CHANGELOG, *sorted(DOCS.glob("*.md"))]
# Drawn by `python benchmarks/bench_peers.py --svg docs/peers.svg --front docs/front.svg`:
# referenced before a run has drawn them.
DRAWN_BY_A_BENCHMARK = {DOCS / "peers.svg", DOCS / "front.svg"}


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def test_ci_runs_the_readme_test_command():
    test_command = next(line for block in shell_blocks(README.read_text())
                        for line in block.splitlines() if "pytest" in line)
    assert test_command in (ROOT / ".ci" / "run").read_text()
    assert test_command.endswith(".venv/bin/python -m pytest")


def test_the_readme_is_short():
    assert len(README.read_text().splitlines()) <= 350


def test_the_error_page_lists_exactly_the_error_codes_with_their_http_status():
    from redis_sessions import ErrorCode
    from redis_sessions.errors import HTTP_STATUS

    rows = re.findall(r"^\| `(session\.[a-z_.]+)` \| (\d+) \|", (DOCS / "errors.md").read_text(), flags=re.M)
    assert sorted(rows) == sorted((code.value, str(HTTP_STATUS[code])) for code in ErrorCode)


def test_nothing_assumes_a_published_package():
    for page in PAGES:
        text = page.read_text()
        assert not re.search(r"pip install\s+(-\S+\s+)*['\"]?redis-sessions\b", text), page.name
        assert "'redis-sessions[" not in text and '"redis-sessions[' not in text, page.name


def test_no_page_keeps_a_diary():
    for page in PAGES:
        text = page.read_text()
        assert "HISTORY.md" not in text, page.name
        assert not re.search(r"\b(first|second|third|\w+th) day\b", text, flags=re.I), page.name
        assert not re.search(r"\b(in|since|before) this version\b", text, flags=re.I), page.name


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_somewhere(page: Path):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if dest in DRAWN_BY_A_BENCHMARK:
            continue
        where = page.relative_to(ROOT)
        assert dest.exists(), f"{where} links to {target}, which does not exist"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{where} links to {target}: no such heading"


def test_the_docs_index_links_every_page():
    index = (DOCS / "README.md").read_text()
    for page in DOCS.glob("*.md"):
        if page.name != "README.md":
            assert f"]({page.name})" in index, page.name


def test_the_lua_script_folder_ships():
    assert "lua" in (ROOT / "pyproject.toml").read_text()


def test_the_changelog_has_the_packages_version():
    """Every version pyproject.toml names has its entry (Keep a Changelog), which says
    what it did to the data format."""
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), flags=re.M)
    assert version is not None
    text = CHANGELOG.read_text()
    entry = re.search(rf"^## {re.escape(version.group(1))} - (.+?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert entry is not None, version.group(1)
    assert "### Data format" in entry.group(0) and "### Added" in entry.group(0)
