"""The wheel carries the Lua scripts: build it, install it (not editable) in a
fresh virtualenv, and save and resolve a chain on a real server from there."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.real]


def test_a_plain_install_finds_the_lua_scripts(tmp_path, redis_server):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in ("redis_sessions", "lua"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(src)],
                   check=True, timeout=300)
    wheel, = dist.glob("redis_sessions-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    lua_files = sorted(p.name for p in (ROOT / "lua").glob("*.lua"))
    assert lua_files and all(f"redis_sessions/lua/{name}" in names for name in lua_files)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=600)
    script = textwrap.dedent(f"""
        import asyncio, sys
        from importlib import resources
        import redis_sessions
        from redis_sessions import (RedisResponseSessionStore, StoredResponseSession,
            StoredResponseRequestSnapshot, StoredResponseSnapshot)
        assert redis_sessions.__file__.startswith({str(venv)!r}), redis_sessions.__file__
        assert str(resources.files("redis_sessions.lua")).startswith({str(venv)!r})

        def rec(rid, parent, text):
            return StoredResponseSession(id=rid, previous_response_id=parent, created_at=1,
                request=StoredResponseRequestSnapshot(input=text),
                response=StoredResponseSnapshot(id=rid, output=[{{"type": "message", "role": "assistant",
                                                                 "content": "re " + text}}]))

        async def main():
            store = RedisResponseSessionStore.from_url({redis_server.url!r}, key_prefix="wheel")
            a = await store.new_response_id(None)
            await store.save(rec(a, None, "one"))
            b = await store.new_response_id(a)
            await store.save(rec(b, a, "two"), expected_previous_response_id=a)
            snap = await store.resolve_chain(b)
            print(len(snap.input_items), [s.request.input for s in snap.sessions])
            await store.close()
        asyncio.run(main())
    """)
    out = subprocess.run([str(python), "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "4 ['one', 'two']"

    # Run from the source folder, ``python -m redis_sessions`` imports the checkout's
    # package (the folder comes first on sys.path), which has no lua/ inside it.
    for args in (["--help"], ["--json", "stats", "--url", redis_server.url, "--prefix", "wheel"]):
        out = subprocess.run([str(python), "-m", "redis_sessions", *args], cwd=src, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
    assert "threads" in out.stdout
