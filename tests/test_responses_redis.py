"""What only a Redis backend can show: garbage at a key, scripts flushed or a
server restarted, a server that is down, many processes racing, and the
number of requests the server really read."""

from __future__ import annotations

import multiprocessing

import msgspec
import pytest
from redis.asyncio import Redis

from chains import all_keys, build_chain, calls_of, make_store, nodes_of, record, save_in_process
from redis_sessions import ErrorCode, RedisResponseSessionStore, SessionError, new_response_id
from redis_sessions.ids import thread_of
from redis_sessions.codec import encode_record
from redis_sessions.responses.store import INLINE_BYTES, WALK_STEPS, read_plan
from servers import free_port


async def expect_code(call, code: ErrorCode) -> SessionError:
    with pytest.raises(SessionError) as err:
        await call
    assert err.value.code is code, err.value
    return err.value


V1 = bytes([0xC1, 0x13])  # the marker of a record in data format 1, ids left out (codec.py)


@pytest.mark.parametrize(
    "garbage, code",
    [(V1 + b"\xc1 not msgpack", ErrorCode.RECORD_CORRUPT),
     (V1 + msgspec.msgpack.encode({"id": 5, "created_at": "soon"}), ErrorCode.RECORD_CORRUPT),
     (V1 + msgspec.msgpack.encode([1, 2]), ErrorCode.RECORD_CORRUPT),
     (msgspec.msgpack.encode({"id": "", "created_at": 1}), ErrorCode.RECORD_UNSUPPORTED),  # no marker: before format 1
     (bytes([0xC1, 0x23]) + msgspec.msgpack.encode({}), ErrorCode.RECORD_UNSUPPORTED)],  # a later data format
    ids=["undecodable", "wrong-field-types", "wrong-shape", "before-format-1", "format-2"],
)
async def test_garbage_in_a_record_is_reported_never_misread(redis_backend, garbage, code):
    store = make_store(redis_backend)
    a, b, c = await build_chain(store, 3)
    key = store.keys.thread(thread_of(a))
    await redis_backend.client.hset(key, f"d:{b}", garbage)
    err = await expect_code(store.get(b), code)
    assert key in err.message and err.http_status == 500
    await expect_code(store.resolve_chain(c), code)
    assert (await store.get(a)).id == a


@pytest.mark.parametrize("header", [None, b"3 100 1 0 0", b"one 2 3"], ids=["none", "format-3", "unreadable"])
async def test_a_thread_of_another_format_is_refused_and_left_alone(redis_backend, header):
    """A thread whose header is missing (what commits before format 1 wrote), of a later
    format, or unreadable, is session.record.unsupported for every script, which writes
    nothing."""
    store = make_store(redis_backend)
    a, b = await build_chain(store, 2)
    key = store.keys.thread(thread_of(a))
    if header is None:
        await redis_backend.client.hdel(key, "h")
    else:
        await redis_backend.client.hset(key, "h", header)
    before = await all_keys(redis_backend, store)
    for call in (store.resolve_chain(b), store.save(record(new_response_id(b), b)), store.delete(a),
                 store.save(record(b, a, "other"), overwrite=True)):
        await expect_code(call, ErrorCode.RECORD_UNSUPPORTED)
    assert await all_keys(redis_backend, store) == before


async def test_a_key_of_the_wrong_type_is_reported_and_left_alone(redis_backend):
    store = make_store(redis_backend)
    rid = new_response_id()
    key = store.keys.thread(thread_of(rid))
    await redis_backend.client.set(key, b"someone else's string")
    before = await all_keys(redis_backend, store)
    await expect_code(store.get(rid), ErrorCode.RECORD_CORRUPT)
    await expect_code(store.resolve_chain(rid), ErrorCode.RECORD_CORRUPT)
    walked = await expect_code(store.resolve_chain(new_response_id(rid)), ErrorCode.RECORD_CORRUPT)
    assert "wrong type" in walked.message
    await expect_code(store.save(record(rid)), ErrorCode.RECORD_CORRUPT)
    await expect_code(store.delete(rid), ErrorCode.RECORD_CORRUPT)
    await redis_backend.client.rpush(store.keys.locator("ext-x"), b"not a locator")
    await expect_code(store.get("ext-x"), ErrorCode.RECORD_CORRUPT)
    await redis_backend.client.delete(store.keys.locator("ext-x"))
    assert await all_keys(redis_backend, store) == before


async def test_a_cycle_written_behind_the_stores_back_is_detected(redis_backend):
    store = make_store(redis_backend)
    a, b, c = await build_chain(store, 3)
    await redis_backend.client.hset(store.keys.thread(thread_of(a)), f"p:{a}", c)
    err = await expect_code(store.resolve_chain(c), ErrorCode.CHAIN_CYCLE_DETECTED)
    assert err.http_status == 422


async def every_operation(store) -> None:
    ids = await build_chain(store, 2)
    foreign = f"ext-{ids[0][-8:]}"
    await store.save(record(foreign, ids[-1]))
    assert [s.id for s in (await store.resolve_chain(foreign)).sessions] == [*ids, foreign]
    assert await store.get(ids[0]) is not None
    assert await store.delete(ids[-1]) is True


async def test_scripts_survive_script_flush(real_backend):
    store = make_store(real_backend)
    await every_operation(store)
    await real_backend.client.script_flush()  # a cluster client sends it to every primary
    await every_operation(store)
    await real_backend.client.script_flush()  # a cluster client sends it to every primary
    await every_operation(store)


@pytest.mark.real
async def test_scripts_and_connections_survive_a_server_restart(redis_server):
    store = RedisResponseSessionStore.from_url(redis_server.url, key_prefix="restart")
    try:
        await every_operation(store)
        redis_server.process.restart()
        await every_operation(store)  # new connection, empty script cache: reloaded once
    finally:
        await store.close()


async def test_a_server_that_is_down_is_backend_unavailable():
    store = RedisResponseSessionStore.from_url(f"redis://127.0.0.1:{free_port()}/0")
    try:
        rid = new_response_id()
        for call in (store.get(rid), store.save(record(rid)), store.resolve_chain(rid), store.delete(rid),
                     store.get("ext-down")):
            err = await expect_code(call, ErrorCode.BACKEND_UNAVAILABLE)
            assert err.http_status == 503
    finally:
        await store.close()


async def test_a_bad_url_is_a_session_error():
    with pytest.raises(SessionError) as err:
        RedisResponseSessionStore.from_url("foo://nowhere")
    assert err.value.code is ErrorCode.INPUT_INVALID  # building does no I/O: the URL is at fault, not Redis


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["minted", "foreign"])
async def test_eight_processes_saving_one_new_id_exactly_one_wins(real_backend, kind):
    store = make_store(real_backend)
    root, = await build_chain(store, 1)
    rid = new_response_id(root) if kind == "minted" else "ext-raced"
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Manager().Barrier(8)
    with ctx.Pool(8) as pool:
        outcomes = pool.starmap(
            save_in_process, [(real_backend.url, real_backend.prefix, rid, root, i, barrier) for i in range(8)]
        )
    assert sorted(outcomes) == ["conflict"] * 7 + ["won"]
    winner = outcomes.index("won")
    assert (await store.get(rid)).request.input == f"writer {winner}"
    assert [s.id for s in (await store.resolve_chain(rid)).sessions] == [root, rid]


async def reads_processed(nodes: list[Redis]) -> int:
    """Requests the servers read off their sockets: one per round trip (commands run
    inside a script are not reads, and a pipeline arrives in one read)."""
    return sum([(await node.info("stats"))["total_reads_processed"] for node in nodes])


@pytest.mark.parametrize("depth, payload", [(1, ""), (10, ""), (100, ""), (3, "x" * 4000), (2500, "")])
async def test_requests_per_resolve_follow_the_cost_model(real_backend, depth, payload):
    """Requests the server reads for one resolve: the locator of a foreign id (1), one walk
    per WALK_STEPS hops, and the reads of the records unless they fit INLINE_BYTES, each
    counted at the thread's largest (then the walk's reply carries them): one per trip of
    read_plan, sized by that record. A trip's pipeline of HMGET slices arrives in one read.
    A worker that never saw the chain pays the same: the store keeps nothing between calls."""
    store = make_store(real_backend, max_depth=5000)
    ids: list[str] = []
    parent = None
    for i in range(depth):
        rid = new_response_id(parent)
        await store.save(record(rid, parent, f"turn {i}", payload=payload))
        ids.append(rid)
        parent = rid
    await store.save(record("ext-leaf", ids[-1], payload=payload))
    nodes = nodes_of(real_backend)
    await reads_processed(nodes)  # connect first: a new connection sends setup commands
    await store.resolve_chain("ext-leaf")  # and load the script, should an earlier test have flushed it
    largest = max(len(encode_record(s, False, 1 << 26)) for s in (await store.resolve_chain("ext-leaf")).sessions)
    for leaf, locator in ((ids[-1], 0), ("ext-leaf", 1)):
        chain = (await store.resolve_chain(leaf)).sessions
        walks = -(-len(chain) // WALK_STEPS)
        inline = walks == 1 and len(chain) * largest <= INLINE_BYTES
        expected = locator + walks + (0 if inline else len(read_plan(len(chain), largest)))
        before, trips = await reads_processed(nodes), store.round_trips
        snap = await store.resolve_chain(leaf)
        after = await reads_processed(nodes)
        assert len(snap.sessions) == depth + (leaf == "ext-leaf")
        assert store.round_trips - trips == expected
        # The sync API: its round trips are the model's (above), but redis-py's sync
        # connection writes a request packed in several chunks (a pipeline of HMGETs over
        # its 6,000-byte buffer cutoff) with one sendall each, where the asyncio one hands
        # them to the transport together: still one round trip, sometimes more server reads.
        if depth <= 100 and real_backend.api == "async":  # a longer request (2,500 field names) takes several reads
            # each INFO is itself a read, counted at the next reading: one per node
            assert after - before - len(nodes) == expected
    for node in nodes:
        await node.aclose()


async def test_a_chain_that_fits_the_walks_reply_is_one_script_at_any_depth_it_fits(real_backend):
    """A root, and a continuation, each cost one script and nothing else (their records
    come back with the walk)."""
    store = make_store(real_backend)
    root = await store.new_response_id()
    child = await store.new_response_id(root)
    await store.save(record(root))
    await store.save(record(child, root))
    nodes = nodes_of(real_backend)
    try:
        await store.resolve_chain(child)  # the walk script loaded, connections made
        for leaf in (root, child):
            scripts, reads = await calls_of(nodes, "evalsha", "eval"), await calls_of(nodes, "hmget", "hget")
            assert [s.id for s in (await store.resolve_chain(leaf)).sessions][-1] == leaf
            assert await calls_of(nodes, "evalsha", "eval") - scripts == 1
            assert await calls_of(nodes, "hmget", "hget") - reads == (2 if leaf == root else 3)  # inside the script
    finally:
        for node in nodes:
            await node.aclose()


async def test_every_write_stamps_the_thread_with_the_servers_time(redis_backend):
    """The newest entry of the thread's token ring is when it was last written, server time
    (what ``purge --idle-older-than`` judges a thread by, lua/purge_if_idle.lua)."""
    store = make_store(redis_backend)
    rid = new_response_id()
    key = store.keys.thread(thread_of(rid))

    async def server_s() -> int:
        return int((await redis_backend.client.time())[0])

    async def stamp() -> int:
        return int((await redis_backend.client.hget(key, "ops")).rstrip(b"\n").rsplit(b"\n", 1)[-1][:10])

    before = await server_s()
    await store.save(record(rid))
    written = await stamp()
    assert before <= written <= await server_s()
    child = await store.new_response_id(rid)
    await store.save(record(child, rid))
    assert await stamp() >= written
    await store.delete(child)
    assert await stamp() >= written
