"""What the people who run the server meet, on private redis-servers of these tests:
error bodies that keep Redis's internals to the log, the startup check (a wrong
password or host stops the app, an unreachable Redis does not), /readyz and
/healthz, and the import error that names the missing extra."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import httpx2
import openai
import pytest
import redis

from serverkit import client_for, listening, port_of
from servers import RedisProcess, StandaloneServer, free_port
from redis_sessions import SessionConfig
from redis_sessions.server import create_app

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "right-pw-4821"
WRONG = "wrong-pw-7305"


@pytest.fixture
def private() -> Iterator[StandaloneServer]:
    server = StandaloneServer()
    yield server
    server.close()


@pytest.fixture
def guarded(private: StandaloneServer) -> StandaloneServer:
    """A private server that requires a password (set after start: the launcher PINGs)."""
    with redis.Redis(port=private.port) as admin:
        admin.config_set("requirepass", PASSWORD)
    return private


def server_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "redis_sessions.server" and r.levelno == level]


def assert_no_internals(text: str, port: int) -> None:
    for secret in ("rs:", "127.0.0.1", str(port), "Error 111", "onnection refused", "WRONGPASS", "password",
                   PASSWORD, WRONG, "chain'"):
        assert secret not in text, f"{secret!r} in {text}"


async def test_redis_down_is_a_503_that_names_no_key_host_or_port(private: StandaloneServer,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "redis_sessions.server")
    app = create_app(config=SessionConfig(url=private.url))
    client, http = client_for(app)
    first = await client.responses.create(model="m", input="hello")
    private.process.stop()
    for call in (lambda: http.post("http://server/v1/responses", json={"input": "x", "previous_response_id": first.id}),
                 lambda: http.get(f"http://server/v1/responses/{first.id}"),
                 lambda: http.post("http://server/v1/conversations", json={})):
        reply = await call()
        assert reply.status_code == 503
        assert reply.json() == {"error": {"message": "The session store is unavailable; retry the request.",
                                          "type": "server_error", "param": None,
                                          "code": "session.backend.unavailable"}}
        assert_no_internals(reply.text, private.port)
    lines = server_records(caplog, logging.WARNING)
    assert len(lines) == 3  # one line per failure, with the cause the client was not shown
    assert all("503 session.backend.unavailable" in r.getMessage() and str(private.port) in r.getMessage()
               for r in lines)
    assert lines[0].getMessage().startswith("POST /v1/responses: ")
    await http.aclose()
    await app.state.store.close()
    await app.state.conversations.close()


async def test_a_wrong_password_is_a_500_that_names_no_key(guarded: StandaloneServer,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "redis_sessions.server")
    app = create_app(config=SessionConfig(url=f"redis://:{WRONG}@127.0.0.1:{guarded.port}/0"))
    client, http = client_for(app)
    with pytest.raises(openai.InternalServerError) as caught:
        await client.responses.create(model="m", input="hello")
    assert caught.value.body == {  # type: ignore[comparison-overlap]
        "message": "The server is not allowed to use its session store.", "type": "server_error", "param": None,
        "code": "session.backend.denied"}
    assert_no_internals(caught.value.response.text, guarded.port)
    [line] = server_records(caplog, logging.WARNING)
    assert "500 session.backend.denied" in line.getMessage() and WRONG not in line.getMessage()
    await http.aclose()
    await app.state.store.close()
    await app.state.conversations.close()


async def test_startup_stops_on_a_wrong_password(guarded: StandaloneServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    app = create_app(config=SessionConfig(url=f"redis://:{WRONG}@127.0.0.1:{guarded.port}/0"))
    async with listening(app, lifespan="on") as server:
        assert not server.started  # the app refused to start
    [line] = server_records(caplog, logging.ERROR)
    assert line.getMessage().startswith("cannot start: Redis refused the credentials or the ACL permissions")
    assert "session.backend.denied" in line.getMessage()
    for record in caplog.records:  # uvicorn's own lines too
        assert WRONG not in record.getMessage() and WRONG not in (record.exc_text or "")


def test_uvicorn_exits_on_a_wrong_password_with_one_line_that_says_why(guarded: StandaloneServer) -> None:
    """As an operator meets it: ``uvicorn --factory redis_sessions.server:create_app``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDIS_SESSIONS_")}
    env.update(REDIS_SESSIONS_URL=f"redis://:{WRONG}@127.0.0.1:{guarded.port}/0", UVICORN_PORT=str(free_port()))
    uvicorn = Path(sys.executable).parent / "uvicorn"
    out = subprocess.run([str(uvicorn), "--factory", "redis_sessions.server:create_app"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    output = out.stdout + out.stderr
    assert output.count("cannot start: Redis refused the credentials") == 1, output
    assert WRONG not in output and "Application startup failed" in output


async def test_startup_stops_on_a_host_that_does_not_resolve(caplog: pytest.LogCaptureFixture) -> None:
    host = "no-such-host.invalid"  # a reserved name: no resolver answers it
    try:
        socket.getaddrinfo(host, 6379)
    except socket.gaierror as exc:
        if exc.errno == socket.EAI_AGAIN:
            pytest.skip("no name resolver answers here")
    caplog.set_level(logging.INFO, "redis_sessions.server")
    app = create_app(config=SessionConfig(url=f"redis://{host}:6379/0"))
    async with listening(app, lifespan="on") as server:
        assert not server.started
    [line] = server_records(caplog, logging.ERROR)
    assert line.getMessage().startswith("cannot start: the Redis host name does not resolve")


async def test_an_unreachable_redis_is_not_ready_until_it_answers(caplog: pytest.LogCaptureFixture) -> None:
    """Not a configuration error: the app starts with a warning, /readyz is 503 and
    requests fail with 503 until a server listens on the port; then both recover."""
    caplog.set_level(logging.INFO, "redis_sessions.server")
    folder = tempfile.mkdtemp(prefix="rs-test-")
    later = RedisProcess(free_port(), folder)
    app = create_app(config=SessionConfig(url=later.url))
    try:
        async with listening(app, lifespan="on") as server:
            assert server.started
            [warning] = server_records(caplog, logging.WARNING)
            assert warning.getMessage().startswith("Redis does not answer at startup; serving anyway")
            base = f"http://127.0.0.1:{port_of(server)}"
            async with httpx2.AsyncClient(base_url=base) as http:
                assert (await http.get("/healthz")).json() == {"status": "ok"}
                down = await http.get("/readyz")
                assert down.status_code == 503
                assert down.json() == {"status": "unavailable", "code": "session.backend.unavailable"}
                refused = await http.post("/v1/responses", json={"input": "hello"})
                assert refused.status_code == 503
                later.start()
                up = await http.get("/readyz")
                assert up.status_code == 200 and up.json() == {"status": "ready"}
                assert (await http.post("/v1/responses", json={"input": "hello"})).status_code == 200
    finally:
        later.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_without_starlette_the_import_error_names_the_extra() -> None:
    code = "import sys; sys.modules['starlette'] = None; import redis_sessions.server"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: redis_sessions.server needs Starlette")
    assert "pip install 'redis-sessions[server]'" in last and "pip install -e '.[server]'" in last
