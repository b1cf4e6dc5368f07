"""Writes acknowledged only once replicas have them: ``replica_acks`` (opt-in).

A write with ``replica_acks=N`` is sent as ``[the write, WAIT N <ms>]`` on ONE
connection, in one round trip: WAIT counts the replicas that have every write
made on *its* connection, so it must follow the write on the same one. On a
standalone server (or a sentinel's master) that is a connection of the client's
pool; on a cluster, a connection of the node that owns the key's slot (redis-py's
``ClusterNode``). The write commands redis-py would retry are retried here
instead, within the call's budget: NOSCRIPT (sent again as EVAL), MOVED and ASK
(the slot map refreshed, or ASKING in front), TRYAGAIN and CLUSTERDOWN (a
short wait), a broken connection (reconnect; on a cluster, the map refreshed).
Every write is idempotent, so sending one again has no second effect.

A write whose reply was lost may already have run; sent again, it finds its
operation token and writes nothing, so WAIT on the new connection would have
nothing of its own to wait for and answer at once. The re-sent copy therefore
also asks ``ROLE``: the master's replication offset after it is at least the
first copy's, and the write counts as replicated only once N replicas have
acknowledged that offset. A replica acknowledges on its own once a second (and
the offset includes the master's own GETACKs, which a replica's answer to them
does not count), so this rare path polls ROLE for up to
``max(replica_ack_timeout, RESENT_WAIT)``.

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
RESENT_WAIT = 1.5
"""Seconds a re-sent write may wait for its replicas' once-a-second acknowledgement."""

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
    """Run ``command`` (a write on ``key``), then WAIT on the same connection; its reply,
    undecoded. ``fallback`` is sent instead after NOSCRIPT (the EVAL of an EVALSHA)."""
    broken = redirects = 0
    resent = False
    asking: rx.AskError | None = None
    while True:
        commands = [command, ("WAIT", acks.replicas, acks.wait_ms)]
        if resent:
            commands.append(("ROLE",))
        try:
            replies = await _send(client, key, commands, acks, asking)
        except (rx.ConnectionError, rx.TimeoutError, OSError) as exc:
            broken += 1
            if broken >= ATTEMPTS:
                raise
            resent = True  # the lost reply may have been the write's: see the module
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
        if isinstance(reply, Exception):
            raise reply
        if resent:
            await _confirm_offset(client, key, replies[2], acks, asking=None)
        else:
            _check_count(replies[1], acks)
        return reply


def _check_count(acked: object, acks: ReplicaAcks) -> None:
    if isinstance(acked, Exception):
        raise acked
    if int(acked) < acks.replicas:  # type: ignore[call-overload]
        raise _not_replicated(int(acked), acks)  # type: ignore[call-overload]


def _not_replicated(acked: int, acks: ReplicaAcks) -> SessionError:
    return SessionError(
        ErrorCode.BACKEND_NOT_REPLICATED,
        f"the write is on the master but {acked} of the {acks.replicas} replica(s) asked for confirmed it "
        f"within {acks.timeout:g} s; retrying it is safe (writes are idempotent)",
    )


async def _confirm_offset(client: Union[Redis, RedisCluster], key: str, role: object, acks: ReplicaAcks,
                          asking: rx.AskError | None) -> None:
    """A re-sent write: wait until ``acks.replicas`` replicas acknowledged the master's
    offset as ROLE gave it right after the write (which is at least the first copy's)."""
    if isinstance(role, Exception):
        raise role
    floor = _offsets(role)[0]
    deadline = time.monotonic() + max(acks.timeout, RESENT_WAIT)
    while True:
        acked = sum(offset >= floor for offset in _offsets(role)[1])
        if acked >= acks.replicas:
            return
        if time.monotonic() >= deadline:
            raise _not_replicated(acked, acks)
        await asyncio.sleep(POLL)
        role = (await _send(client, key, [("ROLE",)], acks, asking))[0]
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
