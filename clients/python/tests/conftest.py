from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from nats.aio.client import Client as NATS

from servers import Dispenser, NatsServer, connect_to


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    """A nats-server of the module's own."""
    s = NatsServer()
    yield s
    s.stop()


@pytest_asyncio.fixture(scope="module")
async def nc(server: NatsServer) -> AsyncIterator[NATS]:
    c = await connect_to(server.url)
    yield c
    await c.close()


@pytest_asyncio.fixture(scope="module")
async def dispenser(server: NatsServer) -> AsyncIterator[Dispenser]:
    """A default dispenser, with the sequence orders declared from 1."""
    d = await Dispenser.start(server.url, {"DISPENSER_SEQUENCES": "orders=1"})
    yield d
    d.kill(signal.SIGTERM)
