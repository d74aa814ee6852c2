"""A client whose NATS server is cut off from its cluster: nodes A and B,
the dispenser on B, the client on A knowing both. Once the route between
them is cut, A has no responders for uid.next; the client moves itself to
B and its calls succeed, with no ID twice. With the move off (move_after
0), or on a connection that does not reconnect, its calls keep failing
and the connection is left as it is; one that knows one server stays."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator, Iterator
from urllib.parse import ParseResult, urlparse

import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client as NATS
from nats.js.api import DiscardPolicy, Placement, StorageType, StreamConfig

from servers import Cluster, Dispenser, NatsServer, connect_to, wait_for
from uid_dispenser import DEFAULT_MOVE_AFTER, GaveUpError, UidClient

WITHIN = 60.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    yield c
    c.stop()


@pytest_asyncio.fixture(scope="module")
async def dispenser_on_b(cluster: Cluster) -> AsyncIterator[Dispenser]:
    """The dispenser on B, its worker-ID bucket on B alone (one replica, tag
    b): it keeps its lease through the cut."""
    nc = await nats.connect(cluster.b.url)
    try:
        js = nc.jetstream()
        # The KV stream as nats-py creates a bucket, with the placement its
        # create_key_value (2.16) leaves out.
        bucket = StreamConfig(
            name="KV_uid_workers",
            subjects=["$KV.uid_workers.>"],
            max_msgs_per_subject=1,
            discard=DiscardPolicy.NEW,
            allow_rollup_hdrs=True,
            deny_delete=True,
            allow_direct=True,
            storage=StorageType.FILE,
            num_replicas=1,
            duplicate_window=120,
            placement=Placement(tags=["b"]),
        )

        async def created() -> bool:
            try:
                await js.add_stream(bucket)
            except (nats.errors.Error, nats.js.errors.Error):
                return False  # no meta leader yet
            return True

        await wait_for("JetStream to create the worker-ID bucket on B", WITHIN, created)
        info = await js.stream_info("KV_uid_workers")
        assert info.cluster is not None and info.cluster.leader == "B", info.cluster
    finally:
        await nc.close()
    d = await Dispenser.start(cluster.b.url)
    yield d
    d.kill(signal.SIGTERM)


@pytest_asyncio.fixture
async def joined(cluster: Cluster, dispenser_on_b: Dispenser) -> Cluster:
    """The cluster with its route healed: the dispenser answers through A."""
    cluster.heal()
    await wait_for("the dispenser on B to answer through A", WITHIN, lambda: answers_through(cluster.a))
    return cluster


async def test_calls_move_off_a_server_cut_off_from_its_cluster(joined: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="uid_dispenser")
    # A password in the URL (the servers ignore it) must not reach the log.
    a = joined.a.url.replace("nats://", "nats://uidtest:s3cret@")
    nc = await two_servers(a, joined.b.url)
    try:
        client = UidClient(nc, timeout=WITHIN)
        assert port(nc.connected_url) == port(joined.a.url)
        await client.next()
        await cut(joined)
        got: list[int] = []

        async def caller(batches: bool) -> None:
            for _ in range(25):
                if batches:
                    got.extend(await client.batch(100))
                else:
                    got.append(await client.next())

        await asyncio.gather(*(caller(w % 2 == 1) for w in range(4)))
        assert port(nc.connected_url) == port(joined.b.url), "the connection is on B"
        stats = client.stats()
        assert stats.moves >= 1 and stats.no_responders + stats.timed_out >= 2, stats
        assert len(got) == 2 * 25 + 2 * 25 * 100
        assert len(set(got)) == len(got), f"{len(got) - len(set(got))} duplicate IDs"
    finally:
        await nc.close()
    logged = [r.getMessage() for r in caplog.records if r.name == "uid_dispenser"]
    moved = next((m for m in logged if "event=client.moved" in m), "")
    assert f"server=nats://127.0.0.1:{port(joined.a.url)}" in moved, logged
    assert not any("s3cret" in m or "uidtest" in m for m in logged), logged


async def test_with_the_move_off_calls_keep_failing_through_the_cut_off_server(joined: Cluster) -> None:
    nc = await two_servers(joined.a.url, joined.b.url)
    try:
        await calls_fail_on_a(joined, nc, UidClient(nc, move_after=0, timeout=1.0))
    finally:
        await nc.close()


async def test_a_connection_that_knows_one_server_stays_on_it(server: NatsServer) -> None:
    # nats-py always adds the servers a cluster advertises to the pool: a
    # server of no cluster, with no dispenser, is one that has no responders
    # and no other server to move to.
    nc = await connect_to(server.url)
    try:
        client = UidClient(nc, timeout=1.0)
        for _ in range(3):
            with pytest.raises(GaveUpError):
                await client.next()
        assert port(nc.connected_url) == port(server.url) and len(nc.servers) == 1, nc.servers
        assert nc.stats["reconnects"] == 0
        stats = client.stats()
        assert stats.moves == 0 and stats.no_responders >= 3 * DEFAULT_MOVE_AFTER, stats
    finally:
        await nc.close()


async def test_a_connection_that_does_not_reconnect_is_left_alone(joined: Cluster) -> None:
    nc = await nats.connect([joined.a.url, joined.b.url], dont_randomize=True, allow_reconnect=False)
    try:
        await calls_fail_on_a(joined, nc, UidClient(nc, timeout=1.0))
    finally:
        await nc.close()


async def test_timeouts_do_not_count_toward_a_move(cluster: Cluster) -> None:
    """A timeout neither counts toward a move nor resets the count (a paused
    or slow server times requests out too): a subscriber on A that never
    answers times out every attempt of a client on A that knows B, and
    after ten times the attempts a move needs the connection never moved."""
    silent = await connect_to(cluster.a.url)
    nc = await two_servers(cluster.a.url, cluster.b.url)
    try:
        await silent.subscribe("silent.next")  # never answered
        await silent.flush()
        client = UidClient(nc, subject_prefix="silent", timeout=1.0, attempt_timeout=0.02, min_backoff=0.001, max_backoff=0.01)
        while client.stats().timed_out < 10 * DEFAULT_MOVE_AFTER:
            with pytest.raises(GaveUpError) as raised:
                await client.next()
            assert isinstance(raised.value.__cause__, nats.errors.TimeoutError), repr(raised.value.__cause__)
        stats = client.stats()
        assert stats.moves == 0 and stats.no_responders == 0, stats
        assert port(nc.connected_url) == port(cluster.a.url) and nc.stats["reconnects"] == 0
    finally:
        await nc.close()
        await silent.close()


async def test_two_cut_offs_within_move_every_move_once(cluster: Cluster) -> None:
    """With no dispenser on the prefix, A and B both answer no responders
    (as if each were cut off in turn): a client with a move_every of an
    hour moves once, off A, however many no responders follow on B."""
    nc = await two_servers(cluster.a.url, cluster.b.url)
    try:
        client = no_dispenser_client(nc, 3600.0)
        while client.stats().no_responders < 20 * DEFAULT_MOVE_AFTER:
            with pytest.raises(GaveUpError):
                await client.next()
        assert client.stats().moves == 1, client.stats()
        on_b = port(cluster.b.url)
        await wait_for("the move's reconnect to B", WITHIN, lambda: nc.is_connected and port(nc.connected_url) == on_b)
        assert nc.stats["reconnects"] == 1
    finally:
        await nc.close()


async def test_with_a_short_move_every_the_client_moves_again(cluster: Cluster) -> None:
    """The control of the test above: with a move_every of a millisecond,
    the client moves again and again."""
    nc = await two_servers(cluster.a.url, cluster.b.url)
    try:
        client = no_dispenser_client(nc, 0.001)
        while client.stats().moves < 3 and client.stats().no_responders < 200:
            with pytest.raises(GaveUpError):
                await client.next()
        assert client.stats().moves >= 3, client.stats()
        # nats-py's close fails on a connection still reconnecting.
        await wait_for("the last move's reconnect", WITHIN, lambda: nc.is_connected)
    finally:
        await nc.close()


async def test_two_clients_sharing_a_connection_move_it_once(cluster: Cluster) -> None:
    """Two clients of two fleets share a connection, each with its own
    count: once one of them moved the connection, the other takes that
    reconnect for a move of its own, and with a move_every of an hour the
    connection moves once, off A, however many no responders both clients
    then get on B. Without that rule the second client moved it again at
    once, off the server just reached (the Go client's fault-harness
    finding)."""
    nc = await two_servers(cluster.a.url, cluster.b.url)
    try:
        first = no_dispenser_client(nc, 3600.0)
        second = no_dispenser_client(nc, 3600.0, subject_prefix="nobody2")
        while first.stats().moves == 0 and first.stats().no_responders < 200:
            with pytest.raises(GaveUpError):
                await first.next()
        assert first.stats().moves == 1, first.stats()
        on_b = port(cluster.b.url)
        await wait_for(
            "the move's reconnect to B",
            WITHIN,
            lambda: nc.stats["reconnects"] == 1 and nc.is_connected and port(nc.connected_url) == on_b,
        )
        first_before = first.stats().no_responders
        while (
            second.stats().no_responders < 20 * DEFAULT_MOVE_AFTER
            or first.stats().no_responders < first_before + 20 * DEFAULT_MOVE_AFTER
        ):
            with pytest.raises(GaveUpError):
                await second.next()
            with pytest.raises(GaveUpError):
                await first.next()
        assert second.stats().moves == 0, second.stats()
        assert first.stats().moves == 1, first.stats()
        assert nc.stats["reconnects"] == 1
        assert port(nc.connected_url) == on_b, "the connection is on B"
    finally:
        await nc.close()


def test_move_after_must_be_0_or_a_positive_int() -> None:
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="move_after"):
            UidClient(NATS(), move_after=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="move_every"):
        UidClient(NATS(), move_every=0)


async def calls_fail_on_a(cluster: Cluster, nc: NATS, client: UidClient) -> None:
    """Cuts A off from B and asserts that three calls of client, on A, fail
    there, and nothing moved."""
    await client.next()
    await cut(cluster)
    for _ in range(3):
        with pytest.raises(GaveUpError):
            await client.next()
    assert nc.is_connected and port(nc.connected_url) == port(cluster.a.url)
    stats = client.stats()
    assert stats.moves == 0, stats
    # Far more failed attempts in a row than the default move needs.
    assert stats.no_responders + stats.timed_out >= 3 * DEFAULT_MOVE_AFTER, stats


def no_dispenser_client(nc: NATS, move_every: float, subject_prefix: str = "nobody") -> UidClient:
    """A client on nc of a subject prefix no dispenser serves, its moves at
    least move_every apart."""
    return UidClient(nc, subject_prefix=subject_prefix, move_every=move_every, timeout=0.1, min_backoff=0.001, max_backoff=0.01)


async def cut(cluster: Cluster) -> None:
    """Cuts A off from B and waits until A has dropped the dispenser's subscriptions."""
    cluster.cut()

    async def dropped() -> bool:
        return not await answers_through(cluster.a)

    await wait_for("A to drop the subscriptions of B", WITHIN, dropped)


async def two_servers(a: str, b: str) -> NATS:
    """A connection to a, then b, in that order, each reconnect quick."""
    return await nats.connect([a, b], dont_randomize=True, max_reconnect_attempts=-1, reconnect_time_wait=0.05)


async def answers_through(server: NatsServer) -> bool:
    """Whether a dispenser answers uid.next through server."""
    nc = await nats.connect(server.url)
    try:
        await nc.request("uid.next", b"", timeout=0.5)
        return True
    except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
        return False
    finally:
        await nc.close()


def port(url: ParseResult | str | None) -> int | None:
    if url is None:
        return None
    return (urlparse(url) if isinstance(url, str) else url).port
