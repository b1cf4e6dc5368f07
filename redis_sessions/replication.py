"""Writes acknowledged only once replicas have them: ``replica_acks`` (opt-in).

A write with ``replica_acks=N`` is sent with ``WAIT N <ms>`` behind it on ONE
connection, in one round trip: WAIT counts the replicas that have every write
made on *its* connection, so it must follow the write on the same one. On a
standalone server (or a sentinel's master) that is a connection of the client's
pool; on a cluster, a connection of the node that owns the key's slot (redis-py's
``ClusterNode``). The write commands redis-py would retry are retried here
instead, within the call's budget: NOSCRIPT (sent again as EVAL), MOVED and ASK
(the slot map refreshed, or ASKING in front), TRYAGAIN and CLUSTERDOWN (a
short wait), a broken connection (reconnect; on a cluster, the map refreshed).
Every write is idempotent, so sending one again has no second effect.

Is WAIT enough? It waits for the replication offset recorded for its
connection, and a write is idempotent: one whose reply was lost (the connection
broke after the master ran it), or that a caller retries after a timeout or
``not_replicated``, finds its operation token and writes nothing. Redis 7.0
and newer (and Valkey) record the master's offset after every command of a
connection, reads included (measured on 7.0.15: after a GET, WAIT waits for
writes other connections made before it), so WAIT after a replayed write still
covers the first copy. Servers that record it only for a connection's own
writes (before 7.0) would count replicas that do not have the write. So the
write goes as ``[write, ROLE, WAIT, ROLE]`` and is acknowledged only once N
replicas have acknowledged the master's offset that the first ROLE reported
right after the write (at least that of whichever copy ran it), as the second
ROLE shows. When WAIT waited for this write (always, on 7.0+, unless another
client's command slipped in between a pipeline split over TCP reads), the
replicas answered its GETACK with at least that offset and the call is one
round trip; otherwise ROLE is asked again until they have (replicas also
acknowledge on their own once a second), for up to
``max(replica_ack_timeout, REPLAYED_WAIT)``.

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
from redis.asyncio.cluster import ClusterNode, RedisCluster

from .errors import ErrorCode, SessionError
from .validate import integer, seconds

DEFAULT_ACK_TIMEOUT = 1.0
"""Seconds a write waits for its replicas by default."""
MAX_REPLICA_ACKS = 16
ATTEMPTS = 4
"""Sends of one write after a broken connection (the first included), as redis-py's retries."""
REDIRECTS = 16
"""MOVED, ASK, TRYAGAIN and CLUSTERDOWN answers followed before giving up (redis-py's own TTL)."""
POLL = 0.05
REPLAYED_WAIT = 1.5
"""Seconds a replayed write may wait for its replicas' once-a-second acknowledgement."""

Command = tuple[Any, ...]


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

    @property
    def wait_ms(self) -> int:
        return max(1, int(self.timeout * 1000))


async def write_acked(client: Union[Redis, RedisCluster], key: str, command: Command, acks: ReplicaAcks,
                      *, fallback: Command | None = None) -> Any:
    """Run ``command`` (a write on ``key``) as ``[command, ROLE, WAIT, ROLE]`` on one
    connection; its reply, undecoded, once ``acks.replicas`` replicas have it.
    ``fallback`` is sent instead after NOSCRIPT (the EVAL of an EVALSHA)."""
    broken = redirects = 0
    asking: rx.AskError | None = None
    while True:
        commands = [command, ("ROLE",), ("WAIT", acks.replicas, acks.wait_ms), ("ROLE",)]
        try:
            replies = await _send(client, key, commands, acks, asking)
        except (rx.ConnectionError, rx.TimeoutError, OSError) as exc:
            broken += 1
            if broken >= ATTEMPTS:
                raise
            await _forget_node(client, exc)
            await asyncio.sleep(min(0.5, 0.02 * 2 ** broken))
            continue
        asking = None
        reply = replies[0]
        if isinstance(reply, rx.NoScriptError) and fallback is not None and command is not fallback:
            command = fallback
            continue
        if isinstance(reply, (rx.MovedError, rx.AskError, rx.TryAgainError, rx.ClusterDownError)):
            redirects += 1
            if redirects > REDIRECTS:
                raise reply
            if isinstance(reply, rx.AskError):
                asking = reply
            elif isinstance(reply, rx.MovedError) and isinstance(client, RedisCluster):
                await client.nodes_manager.move_slot(reply)
            else:
                await asyncio.sleep(POLL)
            continue
        for other in (reply, *replies[1:]):
            if isinstance(other, Exception):
                raise other
        waited = int(replies[2])
        if waited < acks.replicas:
            raise _not_replicated(waited, acks)
        await _confirm_offset(client, key, _offsets(replies[1])[0], replies[3], acks)
        return reply


def _not_replicated(acked: int, acks: ReplicaAcks) -> SessionError:
    return SessionError(
        ErrorCode.BACKEND_NOT_REPLICATED,
        f"the write is on the master but {acked} of the {acks.replicas} replica(s) asked for confirmed it "
        f"within {acks.timeout:g} s; retrying it is safe (writes are idempotent)",
    )


async def _confirm_offset(client: Union[Redis, RedisCluster], key: str, floor: int, role: object,
                          acks: ReplicaAcks) -> None:
    """Until ``acks.replicas`` replicas acknowledged ``floor``, the master's offset right
    after the write (see the module); ``role`` is ROLE's reply after WAIT."""
    deadline = time.monotonic() + max(acks.timeout, REPLAYED_WAIT)
    while True:
        acked = sum(offset >= floor for offset in _offsets(role)[1])
        if acked >= acks.replicas:
            return
        if time.monotonic() >= deadline:
            raise _not_replicated(acked, acks)
        await asyncio.sleep(POLL)
        role = (await _send(client, key, [("ROLE",)], acks, None))[0]
        if isinstance(role, Exception):
            raise role


def _offsets(role: Any) -> tuple[int, list[int]]:
    """ROLE on a master: its replication offset and each replica's acknowledged one."""
    if not isinstance(role, list) or len(role) < 3 or bytes(role[0]) != b"master":
        raise SessionError(ErrorCode.BACKEND_UNAVAILABLE, "the node that took the write is no longer a master")
    return int(role[1]), [int(replica[2]) for replica in role[2]]


async def _send(client: Union[Redis, RedisCluster], key: str, commands: Sequence[Command], acks: ReplicaAcks,
                asking: rx.AskError | None) -> list[Any]:
    """Send ``commands`` on one connection in one write, read every reply (an error
    reply is returned in its place, not raised); WAIT's may take ``acks.timeout`` longer."""
    if isinstance(client, RedisCluster):
        await client.initialize()
        if asking is not None:
            node = client.get_node(host=asking.host, port=asking.port) or ClusterNode(
                asking.host, asking.port, **client.nodes_manager.connection_kwargs)
            commands = [("ASKING",), *commands]
        else:
            node = client.nodes_manager.get_node_from_slot(client.keyslot(key))
        connection = node.acquire_connection()
        try:
            replies = await _exchange(connection, commands, acks)
        except BaseException as exc:
            exc.failed_node = node  # type: ignore[attr-defined]  # for _forget_node
            raise
        finally:
            node.release(connection)
        return replies[1:] if asking is not None else replies
    pool = client.connection_pool
    connection = await pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        return await _exchange(connection, commands, acks)
    finally:
        await pool.release(connection)


async def _exchange(connection: Any, commands: Sequence[Command], acks: ReplicaAcks) -> list[Any]:
    await connection.send_packed_command(connection.pack_commands(commands))
    base = connection.socket_timeout
    replies: list[Any] = []
    for command in commands:
        timeout = (base or 0) + acks.timeout if command[0] == "WAIT" and base else None
        try:
            replies.append(await connection.read_response(disable_decoding=True, timeout=timeout))
        except rx.ResponseError as exc:
            replies.append(exc)
    return replies


async def _forget_node(client: Union[Redis, RedisCluster], exc: BaseException) -> None:
    """After a broken connection to a cluster node: drop its idle connections and have
    the slot map read again before the next send, as redis-py does for its own commands."""
    node = getattr(exc, "failed_node", None)
    if not isinstance(client, RedisCluster) or node is None:
        return
    try:
        await node.disconnect_free_connections()
    except (rx.RedisError, OSError, RuntimeError):
        pass
    client._initialize = True
