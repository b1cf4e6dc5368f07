"""Writes acknowledged only once replicas have them: ``replica_acks`` (opt-in).

A write with ``replica_acks=N`` is sent as ``[write, ROLE, WAIT N <ms>, ROLE]``
in one pipeline, on ONE connection: WAIT counts the replicas that have every
write made on *its* connection, so it must follow the write on the same one.
On a standalone server (or a sentinel's master) that is a redis-py pipeline
(``transaction=False``), which redis-py sends again whole on a new connection
after a broken one or a timeout. On a cluster it is a pipeline on the node that
owns the key's slot (``ClusterNode.execute_pipeline``), sent once: a cluster
pipeline's own retry routes the keyless ROLE and WAIT by their policies (WAIT to
every master, summed), away from the write. ASK (the slot is moving): sent once
more to the node named, after ASKING. MOVED, TRYAGAIN, CLUSTERDOWN or a broken
connection: one read of the key through the client lets redis-py find its node
again, then one more send. NOSCRIPT: the EVAL of the script is sent instead, once.
Every write is idempotent, so sending one again has no second effect.

Is WAIT enough? It waits for the replication offset recorded for its
connection, and a write is idempotent: one whose reply was lost (the connection
broke after the master ran it), or that a caller retries after a timeout or
``not_replicated``, finds its operation token and writes nothing. Redis 7.0
and newer (and Valkey) record the master's offset after every command of a
connection, reads included (measured on 7.0.15: after a GET, WAIT waits for
writes other connections made before it), so WAIT after a replayed write still
covers the first copy. Servers that record it only for a connection's own
writes (before 7.0) would count replicas that do not have the write. So a write
is acknowledged only once N replicas have acknowledged the master's offset that
the first ROLE reported right after the write (at least that of whichever copy
ran it), as the second ROLE shows. When WAIT waited for this write (always, on
7.0+), the replicas answered its GETACK with at least that offset and the call
is one round trip; otherwise ROLE is asked again until they have (replicas also
acknowledge on their own once a second), for up to
``max(replica_ack_timeout, REPLAYED_WAIT)``.

WAIT's own timeout is kept under the connection's read timeout (a read that
times out is redis-py's to retry, not an answer); what it leaves of
``replica_ack_timeout`` is waited for by asking ROLE.

Fewer than N replicas in time: ``session.backend.not_replicated`` (503). The
write is on the master and may still reach the replicas; retrying it is safe.
After a failover the promoted master has no replica until one rejoins (the old
master restarted, or a replica migrated), so writes to its shard with
``replica_acks=1`` fail this way until then: that is the guarantee, kept.

What waits: the scripts' writes (saves, deletes, item adds, pops, clears, forks,
compactions) and the SET of a locator for an id minted elsewhere. Not waited
for: refreshing or removing a locator (PEXPIRE, DEL), and a sliding TTL's
refresh on a read. Needs a real Redis or Valkey (WAIT and ROLE), not fakeredis.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Sequence, Union

from redis import exceptions as rx
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, PipelineCommand, RedisCluster
from redis.client import NEVER_DECODE

from .errors import ErrorCode, SessionError
from .link import CLUSTERS, SYNC_CLIENTS, SyncRedis, io
from .validate import integer, seconds

DEFAULT_ACK_TIMEOUT = 1.0
"""Seconds a write waits for its replicas by default."""
MAX_REPLICA_ACKS = 16
POLL = 0.05
REPLAYED_WAIT = 1.5
"""Seconds a replayed write may wait for its replicas' once-a-second acknowledgement."""
WAIT_SHARE = 0.5
"""WAIT's timeout at most this share of a read's: the rest is for the round trip, which a
busy server or network stretches (a larger share left too little of a short timeout for
it on a loaded machine)."""

Command = tuple[Any, ...]
_RAW: dict[str, Any] = {NEVER_DECODE: []}
_MOVED = (rx.MovedError, rx.AskError, rx.TryAgainError, rx.ClusterDownError, rx.ConnectionError, rx.TimeoutError,
          OSError)
"""A cluster node's answers after which redis-py must find the key's node again."""


@dataclass(frozen=True)
class ReplicaAcks:
    """How many replicas must have a write before it is acknowledged, and for how long to wait."""

    replicas: int
    timeout: float

    @classmethod
    def of(cls, replicas: object, timeout: object) -> "ReplicaAcks | None":
        """Checked settings; None for ``replicas=0`` (the default: acknowledged by the master alone)."""
        count = integer(replicas, "replica_acks", minimum=0, maximum=MAX_REPLICA_ACKS)
        wait = seconds(timeout, "replica_ack_timeout") if timeout is not None else None
        if wait is None or wait <= 0:
            raise SessionError(ErrorCode.INPUT_INVALID, "replica_ack_timeout must be a number of seconds above 0")
        return cls(count, wait) if count else None

    def wait_ms(self, read_timeout: object) -> int:
        """WAIT's timeout: ``timeout``, within a read's ``read_timeout`` (None: no limit)."""
        limit = self.timeout
        if isinstance(read_timeout, (int, float)) and read_timeout > 0:
            limit = min(limit, WAIT_SHARE * read_timeout)
        return max(1, int(limit * 1000))


async def write_acked(client: Union[Redis, RedisCluster, SyncRedis], key: str, command: Command, acks: ReplicaAcks,
                      *, fallback: Command | None = None, options: dict[str, Any] | None = None) -> Any:
    """Run ``command`` (a write on ``key``) as ``[command, ROLE, WAIT, ROLE]`` on one
    connection; its reply, undecoded, once ``acks.replicas`` replicas have it.
    ``fallback`` is sent instead after NOSCRIPT (the EVAL of an EVALSHA); ``options``:
    redis-py's for the write's reply (``get=True``: a SET ... GET's old value).

    A sync client works the same (link.io; pauses block the thread)."""
    blocking = isinstance(client, SYNC_CLIENTS)
    started = time.monotonic()
    node, replies = await _send(client, key, command, acks, options or {})
    if isinstance(replies[0], rx.NoScriptError) and fallback is not None:
        node, replies = await _send(client, key, fallback, acks, options or {})
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    reply, after_write, waited, role = replies
    # WAIT fell short: wait out what its own (maybe shortened) timeout left; else a
    # replayed write's replicas may still owe their once-a-second acknowledgement.
    patience = acks.timeout if waited < acks.replicas else max(acks.timeout, REPLAYED_WAIT)
    floor = _offsets(after_write)[0]
    while True:
        acked = sum(offset >= floor for offset in _offsets(role)[1])
        if acked >= acks.replicas:
            return reply
        if time.monotonic() >= started + patience:
            raise _not_replicated(acked, acks)
        if blocking:
            time.sleep(POLL)
        else:
            await asyncio.sleep(POLL)
        role = await io(client.execute_command("ROLE", target_nodes=node, **_RAW) if node is not None
                        else client.execute_command("ROLE", **_RAW))


def _not_replicated(acked: int, acks: ReplicaAcks) -> SessionError:
    return SessionError(
        ErrorCode.BACKEND_NOT_REPLICATED,
        f"the write is on the master but {acked} of the {acks.replicas} replica(s) asked for confirmed it "
        f"within {acks.timeout:g} s; retrying it is safe (writes are idempotent)",
    )


def _offsets(role: Any) -> tuple[int, list[int]]:
    """ROLE on a master: its replication offset and each replica's acknowledged one."""
    if not isinstance(role, list) or len(role) < 3 or bytes(role[0]) != b"master":
        raise SessionError(ErrorCode.BACKEND_UNAVAILABLE, "the node that took the write is no longer a master")
    return int(role[1]), [int(replica[2]) for replica in role[2]]


async def _send(client: Union[Redis, RedisCluster, SyncRedis], key: str, write: Command,
                acks: ReplicaAcks, options: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The node that answered (None: not a cluster) and the four replies, an error
    reply in its place."""
    if not isinstance(client, CLUSTERS):
        read_timeout = client.connection_pool.connection_kwargs.get("socket_timeout")
        return None, await io(_pipelined(client, _commands(write, acks, read_timeout), options))
    if isinstance(client, RedisCluster):
        await client.initialize()
    node = _node(client.get_node_from_key(key))
    replies = await _on_node(node, write, acks, options)
    asked = replies[0]
    if isinstance(asked, rx.AskError) and not isinstance(asked, rx.MovedError):  # the slot is moving
        node = _node(client.get_node(host=asked.host, port=asked.port), asked)
        replies = await _on_node(node, write, acks, options, asking=True)
    elif any(isinstance(reply, _MOVED) for reply in replies):
        await io(client.exists(key))  # redis-py follows the key to its node, and learns where it is
        node = _node(client.get_node_from_key(key))
        replies = await _on_node(node, write, acks, options)
    return node, replies


def _node(node: Any, error: Exception | None = None) -> Any:
    if node is None:  # a node the slot map does not know
        raise error or rx.SlotNotCoveredError("the key's slot is not covered by the cluster")
    return node


async def _on_node(node: Any, write: Command, acks: ReplicaAcks, options: dict[str, Any], *,
                   asking: bool = False) -> list[Any]:
    """The commands in one pipeline on ``node`` (either API's cluster node), sent once;
    ``asking``: after ASKING. A sync node's client is a standalone one, whose pipeline
    redis-py sends again whole on a new connection after a broken one: the write is
    idempotent, and WAIT then follows it on the connection that ran it last."""
    sync = not isinstance(node, ClusterNode)
    kwargs = node.redis_connection.connection_pool.connection_kwargs if sync else node.connection_kwargs
    commands = [*([("ASKING",)] if asking else []), *_commands(write, acks, kwargs.get("socket_timeout"))]
    try:
        at_write = 1 if asking else 0
        if sync:
            replies = _pipelined(node.redis_connection, commands, options, at_write)
        else:
            stack = [PipelineCommand(at, *command, **_RAW, **(options if at == at_write else {}))
                     for at, command in enumerate(commands)]
            await node.execute_pipeline(stack)
            replies = [command.result for command in stack]
    except _MOVED as exc:  # sending failed: no command has a reply
        return [exc]
    return list(replies[1 if asking else 0:])


def _pipelined(client: Any, commands: Sequence[Command], options: dict[str, Any], at_write: int = 0) -> Any:
    """``commands`` in one pipeline (``transaction=False``) of a standalone client of either
    API: their replies, an error reply in its place (an awaitable of them, on asyncio);
    ``options`` go with the write's (at ``at_write``)."""
    pipe = client.pipeline(transaction=False)
    for at, command in enumerate(commands):
        pipe.execute_command(*command, **_RAW, **(options if at == at_write else {}))
    return pipe.execute(raise_on_error=False)


def _commands(write: Command, acks: ReplicaAcks, read_timeout: object) -> Sequence[Command]:
    return [write, ("ROLE",), ("WAIT", acks.replicas, acks.wait_ms(read_timeout)), ("ROLE",)]
