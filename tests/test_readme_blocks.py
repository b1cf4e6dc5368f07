"""Every code block in the README and in docs/*.md runs as written.

Python blocks run as scripts in a fresh process; ``sh`` blocks run with bash, the
package's commands on the PATH. They get what a reader's shell would have: a
``REDIS_SESSIONS_URL`` (a private redis-server of the test's own) and, for the
Agents SDK, an ``OPENAI_BASE_URL`` pointing at a loopback stand-in for the model.
A comment line right before a block can change that:

- ``<!-- test: env=tls -->``: the server speaks only TLS and the URL names an ACL
  user with exactly the rules docs/production.md gives; the password and the CA file come as
  ``REDIS_SESSIONS_PASSWORD`` and ``REDIS_SESSIONS_SSL_CA_CERTS``.
- ``<!-- test: env=fresh -->``: run in a copy of the checkout with no server and
  no ``REDIS_SESSIONS_URL`` (the "fresh machine" commands).
- ``<!-- test: serve -->``: a command that serves until stopped: it runs in the
  background with ``UVICORN_PORT`` set to a free port, the official OpenAI client
  continues a chain and a conversation through it, and then it is stopped.
- ``<!-- test: not run: <reason> -->``: listed in the test's ids with its reason.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from fakeopenai import FakeOpenAI
from servers import TlsServer, free_port

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:<!--\s*test:\s*(?P<directive>[^>]*?)\s*-->\n)?```(?P<lang>python|sh)\n(?P<code>.*?)```", re.S)
ACL_PAGE = ROOT / "docs" / "production.md"


def documented_acl_commands() -> set[str]:
    """The commands of the ACL rules docs/production.md gives (measured in test_acl_measured.py)."""
    line = re.search(r"ACL SETUSER gateway on >\S+ resetkeys ~rs:\* -@all (.*)", ACL_PAGE.read_text())
    assert line, "the ACL SETUSER line of docs/production.md"
    return {word[1:].lower() for word in line.group(1).split()}


ACL_RULES = ("resetkeys", "~rs:*", "-@all", *(f"+{c}" for c in sorted(documented_acl_commands())))


@dataclass(frozen=True)
class Block:
    page: str
    index: int
    lang: str
    code: str
    env: str
    not_run: str | None
    serve: bool = False

    @property
    def id(self) -> str:
        first = next((line for line in self.code.splitlines() if line.strip() and not line.startswith("#")), "")
        return f"{self.page}:{self.index}-{self.lang}-{self.env}:{first[:40]}"


def page_blocks(page: Path) -> list[Block]:
    blocks = []
    name = page.relative_to(ROOT).as_posix()
    for index, match in enumerate(BLOCK.finditer(page.read_text())):
        directive = match.group("directive") or ""
        not_run = directive.split("not run:", 1)[1].strip() if "not run:" in directive else None
        env = directive.split("env=", 1)[1].split()[0] if "env=" in directive else "redis"
        blocks.append(Block(name, index, match.group("lang"), match.group("code"), env, not_run,
                            serve="serve" in directive.split()))
    return blocks


def readme_blocks() -> list[Block]:
    """The blocks of README.md and of every page in docs/, in that order."""
    return [block for page in PAGES for block in page_blocks(page)]


BLOCKS = readme_blocks()


def test_only_blocks_that_cannot_run_here_are_not_run():
    reasons = {b.id: b.not_run for b in BLOCKS if b.not_run}
    assert all(reasons.values())
    # The test command is what CI runs (running it here would nest the suite); Docker
    # has no engine on the test machine. Nothing else may opt out.
    assert all("CI" in r or "Docker" in r for r in reasons.values()), reasons
    assert len([b for b in BLOCKS if b.lang == "python"]) >= 3
    assert {b.page for b in BLOCKS} >= {"README.md", "docs/production.md", "docs/responses.md"}


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    yield server
    server.close()


@pytest.fixture(scope="module")
def tls_server() -> Iterator[TlsServer]:
    server = TlsServer()
    server.command("ACL", "SETUSER", "gateway", "reset", "on", ">gw-readme-pw", *ACL_RULES)
    yield server
    server.close()


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_SESSIONS_", "OPENAI_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _env_for(block: Block, request: pytest.FixtureRequest, fake_openai: FakeOpenAI) -> dict[str, str]:
    env = {**_base_env(), **fake_openai.env()}
    if block.env == "redis":
        env["REDIS_SESSIONS_URL"] = request.getfixturevalue("redis_server").url
    elif block.env == "tls":
        tls = request.getfixturevalue("tls_server")
        env.update(REDIS_SESSIONS_URL=f"rediss://gateway@localhost:{tls.port}/0",
                   REDIS_SESSIONS_PASSWORD="gw-readme-pw", REDIS_SESSIONS_SSL_CA_CERTS=tls.ca_file)
    elif block.env != "fresh":
        raise AssertionError(f"unknown test env {block.env!r} in {block.id}")
    return env


def _checkout_copy(folder: Path) -> Path:
    src = folder / "checkout"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("redis_sessions", "lua", "examples"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    return src


def _params() -> list[object]:
    params = []
    for block in BLOCKS:
        marks = [pytest.mark.real]
        if block.env == "tls":
            marks.append(pytest.mark.redis_only)
        if block.env == "fresh":
            marks.append(pytest.mark.slow)
        params.append(pytest.param(block, id=block.id, marks=marks))
    return params


@pytest.mark.parametrize("block", [p for p in _params() if not p.values[0].not_run])  # type: ignore[attr-defined]  # listed above
def test_the_readme_block_runs_as_written(block: Block, request, fake_openai, tmp_path):
    env = _env_for(block, request, fake_openai)
    cwd = _checkout_copy(tmp_path) if block.env == "fresh" else tmp_path
    if block.serve:
        _serve_and_talk(block, env, cwd)
        return
    if block.lang == "python":
        script = tmp_path / "block.py"
        script.write_text(block.code)
        argv = [sys.executable, str(script)]
    else:
        argv = ["bash", "-euo", "pipefail", "-c", block.code]
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, f"block {block.id} failed:\n{out.stdout}\n{out.stderr}"
    for line in (out.stdout + out.stderr).splitlines():
        assert "Traceback" not in line


def _serve_and_talk(block: Block, env: dict[str, str], cwd: Path) -> None:
    """Run a serving block in the background, talk to it with the official client, stop it."""
    import openai

    port = free_port()
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", block.code], cwd=cwd,
                            env={**env, "UVICORN_PORT": str(port)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"block {block.id} exited:\n{proc.stdout.read() if proc.stdout else ''}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"block {block.id} never listened on {port}"
                time.sleep(0.2)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
        first = client.responses.create(model="stand-in", input="Hello")
        second = client.responses.create(model="stand-in", input="Again", previous_response_id=first.id)
        assert second.output_text == "(3 items so far) you said: Again"  # any worker continues the chain
        conversation = client.conversations.create(items=[{"role": "user", "content": "Hi"}])
        third = client.responses.create(model="stand-in", input="There?", conversation=conversation.id)
        assert third.output_text == "(2 items so far) you said: There?"
        assert len(client.conversations.items.list(conversation.id).data) == 3
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
    assert "Traceback" not in out, out
