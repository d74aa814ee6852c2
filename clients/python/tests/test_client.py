"""Every call and every error of the client against the real dispenser,
and uniqueness of everything handed out under concurrency."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import NoRespondersError

import uid_dispenser
from servers import Dispenser, NatsServer
from uid_dispenser import (
    BadRequestError,
    GaveUpError,
    HomeUnreachableError,
    Prefetcher,
    PrefetcherClosedError,
    UidClient,
    UnknownSequenceError,
    to_base32,
)

SIGN_BIT = 1 << 63
# Calls in these tests may meet a loaded machine: a bound that only ends
# a call that will never succeed.
LONG = 30.0


@pytest.fixture
def client(nc: NATS, dispenser: Dispenser) -> UidClient:
    return UidClient(nc, timeout=LONG)


def increasing(ids: list[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(ids))


async def test_next(client: UidClient) -> None:
    a, b = await client.next(), await client.next()
    assert isinstance(a, int) and 0 < a < b < SIGN_BIT
    c = await client.next(encoding="base32")
    assert b < c < SIGN_BIT
    # binary is answered in decimal on next; the call returns an int all the same.
    assert c < await client.next(encoding="binary")


@pytest.mark.parametrize("encoding", ["binary", "decimal", "base32"])
async def test_batch(client: UidClient, encoding: uid_dispenser.Encoding) -> None:
    ids = await client.batch(500, encoding=encoding)
    assert len(ids) == 500 and increasing(ids) and ids[-1] < SIGN_BIT


async def test_batch_ranges(client: UidClient) -> None:
    runs = await client.batch_ranges(3000)
    ids = uid_dispenser.expand_ranges(runs)
    assert len(ids) == 3000 and increasing(ids) and ids[-1] < SIGN_BIT
    # Consecutive IDs travel as few runs: at most one per second and lane.
    assert len(runs) < 3000
    again = await client.batch(3000, encoding="ranges")
    assert len(again) == 3000 and increasing(again) and again[0] > ids[-1]


async def test_ranges_through_a_responder(nc: NATS) -> None:
    # A plain responder sends runs made by hand: what the client does with
    # them, whatever the dispenser at hand supports.
    runs = [range(1000, 1003), range(5000, 5002)]

    async def respond(m: Msg) -> None:
        asked = (m.headers or {}).get("Uid-Encoding")
        whole = asked == "ranges" and m.data == b"5"
        await nc.publish(m.reply, uid_dispenser.encode_ranges(runs if whole else runs[1:]))

    sub = await nc.subscribe("ranges.batch", cb=respond)
    try:
        c = UidClient(nc, subject_prefix="ranges")
        assert await c.batch(5, encoding="ranges") == [1000, 1001, 1002, 5000, 5001]
        assert await c.batch_ranges(5) == runs
        # A reply of fewer IDs than asked is a ProtocolError, not a short batch.
        with pytest.raises(uid_dispenser.ProtocolError, match="asked for 4 IDs"):
            await c.batch(4, encoding="ranges")
    finally:
        await sub.unsubscribe()


async def test_parse(client: UidClient) -> None:
    id = await client.next()
    parts = await client.parse(id)
    assert parts.id == id
    assert parts.wrapped is None
    assert abs((datetime.now(UTC) - parts.time).total_seconds()) < 3600
    assert parts.json["UID"] == str(id)
    # The base32 form reads as the same ID.
    assert await client.parse(to_base32(id)) == parts


async def test_parse_with_a_layout(client: UidClient) -> None:
    # protocol/cases.json: UidGenerator's layout, its time field's last second.
    parts = await client.parse(9223372002495045632, layout="uidgenerator")
    assert (parts.time, parts.worker_id, parts.sequence) == (datetime(2024, 11, 20, 13, 24, 15, tzinfo=UTC), 1, 0)
    wrapped = await client.parse(-7024218214296920064, layout="uidgenerator")
    assert wrapped.id == -7024218214296920064 and wrapped.worker_id == 7
    assert wrapped.wrapped is not None and wrapped.wrapped.startswith("true")


async def test_sequences(client: UidClient) -> None:
    first = await client.seq_next("orders")
    nums = await client.seq_batch("orders", 5)
    assert first >= 1 and nums == list(range(nums[0], nums[0] + 5)) and nums[0] > first
    n, instance = await client.seq_next_from("orders", encoding="base32")
    assert n > nums[-1] and instance != ""
    got = await client.seq_batch_from("orders", 3, encoding="decimal")
    assert got.value == [n + 1, n + 2, n + 3] and got.instance == instance


async def test_bad_requests(client: UidClient) -> None:
    with pytest.raises(BadRequestError, match="too large") as info:
        await client.batch(200_000)
    assert info.value.code == 400 and info.value.subject == "uid.batch"
    with pytest.raises(BadRequestError, match="not a decimal number"):
        await client.parse("abc")
    with pytest.raises(BadRequestError, match="nosuch"):
        await client.parse(1, layout="nosuch")
    assert client.stats().retries == 0, "400s are final"


async def test_bad_arguments_send_nothing(client: UidClient) -> None:
    before = client.stats().requests
    with pytest.raises(BadRequestError, match="at least 1 ID"):
        await client.batch(0)
    with pytest.raises(BadRequestError, match="names are letters"):
        await client.seq_next("no spaces")
    with pytest.raises(ValueError, match="encoding must be"):
        await client.next(encoding="hex")  # type: ignore[arg-type]
    assert client.stats().requests == before


async def test_unknown_sequence(client: UidClient) -> None:
    with pytest.raises(UnknownSequenceError, match='unknown sequence "nosuch"') as info:
        await client.seq_next("nosuch")
    assert info.value.code == 404
    with pytest.raises(UnknownSequenceError):
        await client.seq_batch("nosuch", 2)


async def test_no_responders_until_the_deadline(nc: NATS) -> None:
    c = UidClient(nc, subject_prefix="nobody")
    with pytest.raises(GaveUpError) as info:
        await c.next(timeout=0.3)
    assert isinstance(info.value.__cause__, NoRespondersError)
    assert info.value.attempts > 1 and c.stats().no_responders == info.value.attempts


async def responder(nc: NATS, subject: str, headers: dict[str, str] | None, body: bytes) -> Callable[[], Awaitable[None]]:
    async def respond(m: Msg) -> None:
        await nc.publish(m.reply, body, headers=headers)

    sub = await nc.subscribe(subject, cb=respond)
    return sub.unsubscribe


async def test_home_unreachable(nc: NATS) -> None:
    # A fleet of regions whose instances name the home east, none of
    # which can be reached: nobody serves regions.seq.orders.next.
    stop = await responder(nc, "regions.seq.orders.home", None, b"east")
    try:
        c = UidClient(nc, subject_prefix="regions", home_wait=0.2)
        with pytest.raises(HomeUnreachableError) as info:
            await c.seq_next("orders", timeout=LONG)
        assert (info.value.home, info.value.sequence) == ("east", "orders")
        assert isinstance(info.value.__cause__, NoRespondersError)
    finally:
        await stop()


async def test_home_answering_404_is_an_unknown_sequence(nc: NATS) -> None:
    stop = await responder(
        nc, "regions404.seq.gone.home", {"Nats-Service-Error-Code": "404", "Nats-Service-Error": 'unknown sequence "gone"'}, b""
    )
    try:
        c = UidClient(nc, subject_prefix="regions404")
        with pytest.raises(UnknownSequenceError):
            await c.seq_batch("gone", 2, timeout=LONG)
    finally:
        await stop()


async def test_connect_owns_its_connection(server: NatsServer, dispenser: Dispenser) -> None:
    async with uid_dispenser.connect(server.url) as c:
        assert await c.next() > 0
    assert c.nc.is_closed
    c2 = await uid_dispenser.connect(server.url, nats_options={"name": "uid-py-test"}, timeout=LONG)
    try:
        assert len(await c2.batch(10)) == 10
    finally:
        await c2.close()
    assert c2.nc.is_closed


async def test_client_on_a_connection_of_ones_own_leaves_it_open(nc: NATS, dispenser: Dispenser) -> None:
    async with UidClient(nc) as c:
        await c.next()
    assert not nc.is_closed


async def test_prefetcher(client: UidClient) -> None:
    async with Prefetcher(client, batch_size=100, low_water=50) as p:
        ids = [await p.next(timeout=LONG) for _ in range(350)]
        assert len(set(ids)) == 350
        assert p.available <= 150
        # Increasing within a batch.
        assert increasing(ids[:100])
    with pytest.raises(PrefetcherClosedError):
        await p.next()


async def test_prefetcher_with_a_batch_the_service_refuses(client: UidClient) -> None:
    async with Prefetcher(client, batch_size=10_000_000) as p:
        with pytest.raises(BadRequestError, match="too large"):
            await p.next(timeout=LONG)


async def test_no_duplicates_across_concurrent_callers(client: UidClient) -> None:
    seen: list[int] = []

    async def nexts() -> None:
        for _ in range(150):
            seen.append(await client.next())

    async def batches(encoding: uid_dispenser.Encoding) -> None:
        for _ in range(20):
            seen.extend(await client.batch(250, encoding=encoding))

    async with Prefetcher(client, batch_size=200) as p1, Prefetcher(client, batch_size=300, encoding="ranges") as p2:

        async def prefetched(p: Prefetcher) -> None:
            for _ in range(1000):
                seen.append(await p.next(timeout=LONG))

        await asyncio.gather(
            *(nexts() for _ in range(8)),
            *(batches(e) for e in ("binary", "ranges", "decimal", "base32")),
            prefetched(p1),
            prefetched(p1),
            prefetched(p2),
        )
    assert len(seen) == 8 * 150 + 4 * 20 * 250 + 3 * 1000
    assert len(set(seen)) == len(seen), f"{len(seen) - len(set(seen))} duplicates"
    assert max(seen) < SIGN_BIT


async def test_no_duplicate_sequence_numbers_across_concurrent_callers(client: UidClient) -> None:
    by_instance: dict[str, list[int]] = {}  # Uid-Instance -> numbers
    everything: list[int] = []

    async def caller(i: int) -> None:
        for _ in range(40):
            if i % 2:
                batch = await client.seq_batch_from("orders", 7, encoding="ranges" if i % 4 == 1 else "binary")
                instance, nums = batch.instance, batch.value
            else:
                one = await client.seq_next_from("orders")
                instance, nums = one.instance, [one.value]
            everything.extend(nums)
            by_instance.setdefault(instance, []).extend(nums)

    await asyncio.gather(*(caller(i) for i in range(8)))
    assert len(everything) == 4 * 40 * 7 + 4 * 40
    assert len(set(everything)) == len(everything), f"{len(everything) - len(set(everything))} duplicates"
    # Every reply named the instance that answered.
    assert by_instance and "" not in by_instance
