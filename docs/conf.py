# The API reference: Sphinx with autodoc, because its Python domain checks every
# cross-reference (nitpicky mode) and myst-parser lets the existing Markdown pages,
# unchanged for GitHub, be the guide pages, as msgspec and redis-py build theirs.
#
# Build (strict, warnings are errors, as CI runs it):
#   .venv/bin/python -m sphinx -W --keep-going -n -c docs . docs/_build/html
# The source folder is the checkout, so that the README is the home page and the pages'
# links to it (../README.md#two-commands) resolve; include_patterns keeps it to the docs.
from __future__ import annotations

import builtins
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import msgspec
from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util import logging

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS))

import docstrings  # noqa: E402  (docs/docstrings.py: plain Python, tested without Sphinx)

import redis_sessions  # noqa: E402

project = "redis-sessions"
author = "the redis-sessions authors"
copyright = "the redis-sessions authors"
release = version = "0.1.0"

extensions = ["sphinx.ext.autodoc", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "README"
include_patterns = ["README.md", "CHANGELOG.md", "docs/*.md", "docs/api.rst"]
exclude_patterns = ["docs/_build"]
html_theme = "furo"
html_title = "redis-sessions"

# The Markdown pages link to each other's headings as GitHub does (cost.md#responses).
myst_heading_anchors = 6

autodoc_default_options = {"members": True, "undoc-members": True, "member-order": "bysource"}
# In the signature: types listed as fields are looked up loosely, and ``object`` then
# matches the Conversations' ``object`` fields.
autodoc_typehints = "signature"
autoclass_content = "both"  # a class's docstring, then its __init__'s (what the arguments mean)

# Offline on purpose (no intersphinx): the build fetches nothing, so it cannot fail on a
# network hiccup. References to other projects' names are plain text; a reference to a
# name of this package that does not exist still fails the build.
nitpick_ignore_regex = [
    ("py:.*", r"(redis|msgspec|pydantic|pydantic_settings|fakeredis|agents|starlette|openai)(\..*)?"),
    # The Agents SDK's types, imported only while type checking (the SDK is optional).
    ("py:class", r"'?(TResponseInputItem|SessionSettings)'?"),
    ("py:.*", r"(collections\.abc|typing|types|enum|asyncio|datetime)\..*"),
]

logger = logging.getLogger("redis_sessions.docs")


def _exported(target: str) -> str | None:
    """``redis_sessions.x.y.Name.attr`` (or ``.y.Name``) as the reference documents it,
    ``redis_sessions.Name.attr``, when Name is exported: the signatures and docstrings name
    a class by the module that defines it, the reference by the package."""
    parts = target.lstrip(".~").split(".")
    for i, part in enumerate(parts):
        if part in redis_sessions.__all__:
            return ".".join(["redis_sessions", *parts[i:]])
    return None


def _lookup(dotted: str) -> bool:
    """Whether ``a.b.c`` names something: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        obj: Any = sys.modules.get(".".join(parts[:cut]))
        if obj is None:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def _internal(target: str) -> bool:
    """A name of this package that exists but is not exported (a module, a helper, a type
    alias): the reference does not document it, so a reference to it shows as plain text.
    A relative or bare name (``.options.SessionOptions``, ``RedisLink``) is looked up in
    every module of the package that the build imported."""
    target = target.lstrip("~")
    if target.startswith("redis_sessions"):
        return _lookup(target)
    modules = [name for name in list(sys.modules) if name.split(".")[0] == "redis_sessions"]
    return any(_lookup(f"{module}.{target.lstrip('.')}") for module in modules)


def resolve_exported(app: Sphinx, env: Any, node: Any, contnode: Any) -> Any:
    """A reference that Sphinx did not find: to an exported name under its defining module,
    linked to the reference's entry; to an internal name that exists, plain text; anything
    else stays missing, a warning (an error in the strict build)."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    exported = _exported(target)
    if exported and exported != target:
        node["reftarget"] = exported
        found = env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, node["reftype"],
                                                  exported, node, contnode)
        node["reftarget"] = target
        if found is not None:
            return found
    if _internal(target):
        return contnode
    return None


def builtin_types(app: Sphinx, doctree: nodes.document) -> None:
    """A type in a signature is looked up loosely (any ``*.object``), so the builtin
    ``object`` would match the Conversations' ``object`` fields: a builtin name is looked
    up exactly (and then taken as the builtin)."""
    for node in doctree.findall(addnodes.pending_xref):
        if node.get("refdomain") == "py" and node.get("refspecific") is False \
                and node["reftarget"] in vars(builtins):
            del node["refspecific"]


def struct_defaults(app: Sphinx, what: str, name: str, obj: Any, options: Any, signature: str | None,
                    return_annotation: str | None) -> tuple[str | None, str | None] | None:
    """A msgspec field with a ``default_factory`` shows as ``= <factory>``, which is not
    Python and breaks the signature's parsing: show the call instead (``= list()``)."""
    if signature is None or "<factory>" not in signature or not isinstance(obj, type) \
            or not issubclass(obj, msgspec.Struct):
        return None
    calls = iter(f"{field.default_factory.__name__}()" for field in msgspec.structs.fields(obj)
                 if field.default_factory is not msgspec.NODEFAULT)
    return re.sub("<factory>", lambda _: next(calls), signature), return_annotation


def check_docstrings(app: Sphinx) -> None:
    for name in docstrings.missing_docstrings(redis_sessions):
        logger.warning("%s has no docstring", name, type="redis_sessions", subtype="docstring")


def check_reference(app: Sphinx, env: Any) -> None:
    """Every exported name is in the reference (docs/api.rst lists them by hand)."""
    documented = env.get_domain("py").objects
    for name in redis_sessions.__all__:
        if f"redis_sessions.{name}" not in documented:
            logger.warning("redis_sessions.%s is exported but not in docs/api.rst", name,
                           type="redis_sessions", subtype="reference")


def add_toctrees(app: Sphinx, docname: str, source: list[str]) -> None:
    """Sphinx's navigation needs toctrees, which GitHub would show as code: the build adds
    hidden ones, the README's to the guide's index and the changelog, and the guide index's to the pages it
    links (docs/README.md links every page; tests/test_readme.py checks it) and the API."""
    if docname == "README":
        pages = ["docs/README", "CHANGELOG"]
    elif docname == "docs/README":
        pages = list(dict.fromkeys(re.findall(r"\]\(([\w-]+)\.md\)", source[0]))) + ["api"]
    else:
        return
    source[0] += "\n\n```{toctree}\n:hidden:\n\n" + "\n".join(pages) + "\n```\n"


def copy_home_page(app: Sphinx, exception: Exception | None) -> None:
    """The home page is README.html (the README is the root document); index.html too, for
    a web server's default."""
    home = Path(app.outdir) / "README.html"
    if exception is None and app.builder.format == "html" and home.exists():
        shutil.copyfile(home, Path(app.outdir) / "index.html")


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", check_docstrings)
    app.connect("env-check-consistency", check_reference)
    app.connect("missing-reference", resolve_exported)
    app.connect("source-read", add_toctrees)
    app.connect("doctree-read", builtin_types)
    app.connect("autodoc-process-signature", struct_defaults)
    app.connect("build-finished", copy_home_page)
    return {"parallel_read_safe": True}
