"""The Prefetcher: the Go client's (natsio/uidclient/prefetch.go) local
reserve of IDs. One background task fetches batches whenever the reserve
falls below its low-water mark; next() hands IDs out of it."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from types import TracebackType

from ._client import UidClient
from ._errors import BadRequestError, GaveUpError, PrefetcherClosedError
from ._protocol import Encoding


class Prefetcher:
    """Keeps a reserve of IDs in the process, refilled in the background.

    IDs come out increasing within a batch, not across batches (successive
    batches may come from different instances); at low load an ID's
    timestamp may be older than the moment next() returns it. Close it
    (``async with Prefetcher(client) as p``, or ``await p.close()``) to
    stop the background task: the IDs left are dropped, never reissued.
    Make it inside a running event loop.
    """

    def __init__(
        self,
        client: UidClient,
        *,
        batch_size: int = 8192,
        low_water: int | None = None,
        fetch_timeout: float = 5.0,
        encoding: Encoding = "binary",
    ) -> None:
        """batch_size: IDs one refill asks for (at most the service's
        largest batch). low_water: below this many IDs the task fetches
        batches until it holds at least this many again (default
        batch_size); the reserve never exceeds low_water + batch_size.
        fetch_timeout bounds one refill, retries included. encoding: the
        refills' wire form (binary, or ranges where the service has it)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self._client = client
        self._batch_size = batch_size
        self._low_water = low_water if low_water is not None and low_water > 0 else batch_size
        self._fetch_timeout = fetch_timeout
        self._encoding: Encoding = encoding
        self._batches: deque[list[int]] = deque()  # the first is handed out from _pos
        self._pos = 0
        self._count = 0
        self._last_error: Exception | None = None
        self._closed = False
        self._wake = asyncio.Event()  # the refill task's: the reserve fell below low water
        self._arrived = asyncio.Event()  # the waiters': a refill arrived or failed; replaced after each
        self._task = asyncio.get_running_loop().create_task(self._run())

    @property
    def available(self) -> int:
        """IDs in the reserve."""
        return self._count

    async def __aenter__(self) -> Prefetcher:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def next(self, *, timeout: float = 5.0) -> int:
        """An ID from the reserve, waiting (at most timeout seconds) for a
        refill when it is empty. A refill refused with a BadRequestError
        (batch_size above the service's largest batch) is raised at once;
        other refill failures are retried in the background and are the
        cause of the GaveUpError raised when the wait ends first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if self._closed:
                raise PrefetcherClosedError()
            if self._batches:
                return self._take()
            if isinstance(self._last_error, BadRequestError):
                raise self._last_error
            left = deadline - loop.time()
            if left <= 0:
                raise GaveUpError("prefetcher", 0, self._last_error) from self._last_error
            arrived = self._arrived
            self._wake.set()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(arrived.wait(), left)

    async def close(self) -> None:
        """Stops the background task and waits for it; the reserve is dropped."""
        if not self._closed:
            self._closed = True
            self._batches.clear()
            self._count = 0
            self._task.cancel()
            self._arrived.set()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def _take(self) -> int:
        cur = self._batches[0]
        id = cur[self._pos]
        self._pos += 1
        if self._pos == len(cur):
            self._batches.popleft()
            self._pos = 0
        self._count -= 1
        if self._count < self._low_water:
            self._wake.set()
        return id

    async def _run(self) -> None:
        backoff = 0.05
        while not self._closed:
            if self._count >= self._low_water:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                ids = await self._client.batch(self._batch_size, encoding=self._encoding, timeout=self._fetch_timeout)
            except Exception as e:  # reported to next()'s callers, retried here
                self._last_error = e
            else:
                self._batches.append(ids)
                self._count += len(ids)
                self._last_error = None
                backoff = 0.05
            self._arrived.set()
            self._arrived = asyncio.Event()
            if self._last_error is not None:
                # A back-off between failed refills, not a wait for state.
                await asyncio.sleep(backoff)
                backoff = min(2 * backoff, 2.0)
