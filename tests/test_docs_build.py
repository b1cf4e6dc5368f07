"""The API reference's checks (docs/conf.py runs them in the strict docs build, which CI
runs): every exported name and every public method has a docstring, and docs/api.rst
lists every exported name. The docstring check is plain Python (docs/docstrings.py), so
it runs here without the docs extra, on a module made to fail it and on the package."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import redis_sessions

DOCS = Path(__file__).resolve().parent.parent / "docs"
sys.path.insert(0, str(DOCS))
try:
    from docstrings import missing_docstrings
finally:
    sys.path.remove(str(DOCS))


def _fake_package() -> types.ModuleType:
    module = types.ModuleType("fakepkg")

    class Documented:
        """Has a docstring; some of its members do not."""

        field: int = 0  # data: listed in the reference, needs no docstring of its own

        def said(self) -> None:
            """Says what it does."""

        def silent(self) -> None:
            pass

        @property
        def quiet(self) -> int:
            return 0

        @classmethod
        def build(cls) -> "Documented":
            return cls()

        def _private(self) -> None:
            pass

    class Bare:
        def __init__(self) -> None:  # dunders are not checked
            pass

    def helper() -> None:
        pass

    def documented() -> None:
        """Says what it does."""

    for obj in (Documented, Bare, helper, documented):
        obj.__module__ = "fakepkg"
    module.__dict__.update(Documented=Documented, Bare=Bare, helper=helper, documented=documented, Alias=Bare)
    module.__all__ = ["Documented", "Bare", "helper", "documented", "Alias"]
    return module


def test_the_check_reports_each_missing_docstring() -> None:
    assert missing_docstrings(_fake_package()) == [
        "fakepkg.Documented.build",
        "fakepkg.Documented.quiet",
        "fakepkg.Documented.silent",
        "fakepkg.Bare",
        "fakepkg.helper",
        "fakepkg.Alias",  # an alias is reported under its exported name too
    ]


def test_what_other_projects_define_is_theirs_to_document() -> None:
    module = types.ModuleType("fakepkg")

    class Sub(ValueError):
        """Inherits ValueError's members, which are not checked."""

    Sub.__module__ = "fakepkg"
    module.Sub = Sub  # type: ignore[attr-defined]
    module.__all__ = ["Sub"]  # type: ignore[attr-defined]
    assert missing_docstrings(module) == []


def test_every_exported_name_and_public_method_has_a_docstring() -> None:
    assert missing_docstrings(redis_sessions) == []


def test_the_reference_lists_every_exported_name() -> None:
    listed = set(re.findall(r"^\.\. auto\w+:: redis_sessions\.(\w+)", (DOCS / "api.rst").read_text(), flags=re.M))
    assert listed == set(redis_sessions.__all__)
