"""Calls in flight across a dispenser's kill -9 and restart: they retry
(attempts that time out on the dead instance, then no responders) and
succeed once the new process answers, with no ID handed out twice."""

from __future__ import annotations

import asyncio
import signal

from nats.aio.client import Client as NATS

from servers import Dispenser, NatsServer, wait_for
from uid_dispenser import Prefetcher, UidClient

LONG = 60.0


async def test_calls_in_flight_survive_a_kill_9_and_restart(server: NatsServer, nc: NATS) -> None:
    dispenser = await Dispenser.start(server.url)
    client = UidClient(nc, attempt_timeout=0.5, timeout=LONG)
    seen: list[int] = []
    restarted = False
    after_restart = 0
    failures: list[BaseException] = []

    async with Prefetcher(client, batch_size=300, fetch_timeout=LONG) as p:

        async def caller(kind: int) -> None:
            nonlocal after_restart
            # Callers that keep calling throughout, each call allowed a
            # minute: none may fail.
            while not restarted or after_restart < 40:
                try:
                    if kind == 0:
                        seen.append(await client.next())
                    elif kind == 1:
                        seen.extend(await client.batch(50))
                    else:
                        seen.append(await p.next(timeout=LONG))
                except Exception as e:
                    failures.append(e)
                    return
                if restarted:
                    after_restart += 1

        callers = [asyncio.ensure_future(caller(k)) for k in (0, 1, 2, 2)]
        try:
            await wait_for("IDs before the kill", LONG, lambda: len(seen) > 500)
            dispenser.kill(signal.SIGKILL)
            retries_at_kill = client.stats().retries
            # Nobody answers now: the callers are retrying.
            await wait_for("retries on no responders", LONG, lambda: client.stats().no_responders > 0)
            before = len(seen)
            dispenser = await Dispenser.start(server.url)
            restarted = True
            await asyncio.gather(*callers)
        finally:
            restarted, after_restart = True, 1 << 30
            await asyncio.gather(*callers, return_exceptions=True)
            dispenser.kill(signal.SIGTERM)

    assert failures == []
    assert len(seen) > before
    assert client.stats().retries > retries_at_kill, client.stats()
    assert len(set(seen)) == len(seen), f"{len(seen) - len(set(seen))} duplicate IDs"
