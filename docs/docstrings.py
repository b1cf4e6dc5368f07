"""Which public names of a module lack a docstring: the check the docs build runs.

Plain Python, no Sphinx, so that tests/test_docs_build.py runs it without the docs
extra. ``docs/conf.py`` reports each name this returns as a warning, and the strict
build fails on it.

Checked: every name in the module's ``__all__``, and every public method, property and
nested class of the exported classes that this package defines (what they inherit from
``object``, msgspec, pydantic or ``Enum`` is those projects' to document). Data
attributes (a struct's fields, an enum's members) are listed in the reference without
a docstring of their own: their class's docstring says what they hold. A docstring
inherited from an overridden method counts, as autodoc shows it.
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any


def _own_doc(obj: Any) -> str | None:
    """A class's or function's docstring; for a data object (``UNSET``), its type's."""
    if inspect.isclass(obj):
        doc = obj.__dict__.get("__doc__")
        return doc if isinstance(doc, str) else None
    if inspect.isroutine(obj) or isinstance(obj, property):
        return inspect.getdoc(obj)
    return type(obj).__dict__.get("__doc__")


def _defined_in(package: str, cls: type, name: str) -> bool:
    owner = next((klass for klass in cls.__mro__ if name in klass.__dict__), None)
    return owner is not None and (owner.__module__ or "").split(".")[0] == package


def _documentable(member: Any) -> bool:
    """A member that needs a docstring: a routine, a property or a class (not data)."""
    return inspect.isroutine(member) or isinstance(member, (property, classmethod, staticmethod)) \
        or inspect.isclass(member)


def missing_docstrings(module: ModuleType) -> list[str]:
    """The dotted names, under the module's name, that have no docstring (empty: none)."""
    package = module.__name__.split(".")[0]
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        if not (_own_doc(obj) or "").strip():
            missing.append(f"{module.__name__}.{name}")
        if not inspect.isclass(obj) or obj.__name__ != name:
            continue  # a function, data, or an alias of a class checked under its own name
        for attr in sorted(dir(obj)):
            if attr.startswith("_") or not _defined_in(package, obj, attr):
                continue
            member = inspect.getattr_static(obj, attr)
            if isinstance(member, (classmethod, staticmethod)):
                member = member.__func__
            if _documentable(member) and not (_own_doc(member) or "").strip():
                missing.append(f"{module.__name__}.{name}.{attr}")
    return missing
