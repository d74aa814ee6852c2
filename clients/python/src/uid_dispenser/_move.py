"""The move off a NATS server cut off from its cluster (docs/protocol.md,
"Moving off a cut-off server"; every client keeps the same rule)."""

from __future__ import annotations

import logging
import time
from urllib.parse import ParseResult

import nats.errors
from nats.aio.client import Client as NATS

DEFAULT_MOVE_AFTER = 2
"""How many attempts in a row, on one connection, must end in no responders
before the client moves to another server: one such attempt is a fleet
restarting as often as a cut server, two in a row with no reply between
them seldom are."""

DEFAULT_MOVE_EVERY = 5.0
"""The least time between two moves (seconds): a fleet with no instance at
all gets no responders on every server, and its clients then move at most
this often instead of after every two attempts."""

log = logging.getLogger("uid_dispenser")


class Mover:
    """Moves a connection off a NATS server cut off from its cluster.

    NATS never does so on its own: the connection to that server is healthy,
    only the server has lost its routes, so every request sent there gets no
    responders until the cut heals. The client reports each attempt: those
    that ended in no responders are counted, in a row; any reply, an error
    status such as a 503 too, resets the count; a timeout neither counts nor
    resets (it is ambiguous: a paused or slow server times out requests too,
    and one cut off answers no responders once its routes are gone). When
    the count reaches after, the connection knows more than one server
    and reconnects at all (allow_reconnect), and the last move was at least
    every seconds ago (monotonic clock; a reconnect the Mover did not make,
    such as another client's move on the same connection or nats-py's own
    reconnect, counts as a move and resets the count), the connection is
    forced to reconnect (nats-py's Client.force_reconnect,
    which takes the next server of its pool) and the count starts again. The
    call goes on retrying within its timeout meanwhile.

    The connection stays its owner's: it is only ever forced to reconnect,
    never closed. For one event loop, as the connection is."""

    def __init__(self, nc: NATS, after: int, every: float) -> None:
        self._nc = nc
        self._after = after  # 0: never
        self._every = every
        self._failures = 0  # attempts in a row with no responders
        self._last_move: float | None = None  # time.monotonic() of the last move
        self.moves = 0
        """How many times the connection was moved."""
        # The connection's reconnect count the Mover expects: as it last saw
        # it, plus one for each move of its own. Another count is a
        # reconnect it did not make (another client's move on the
        # connection, nats-py's own), see _reconnected.
        self._reconnects = nc.stats["reconnects"]

    def replied(self) -> None:
        """An attempt got a reply (an error status is a reply)."""
        self._failures = 0

    async def no_responders(self) -> bool:
        """An attempt ended in no responders. Tells whether it moved the
        connection."""
        if self._after == 0:
            return False
        self._failures += 1
        now = time.monotonic()
        if (
            self._failures < self._after
            or self._reconnected(now)
            or (self._last_move is not None and now - self._last_move < self._every)
            or not self._nc.is_connected  # reconnecting already
            or not self._nc.options.get("allow_reconnect", True)  # nothing to force
            or len(self._nc.servers) < 2
        ):
            return False
        count = self._failures
        left = server_only(self._nc.connected_url)
        try:
            # It only starts the reconnect, in a task of nats-py's own.
            await self._nc.force_reconnect()
        except nats.errors.Error:
            return False  # closed meanwhile
        self._last_move = now
        self._failures = 0
        self.moves += 1
        self._reconnects += 1
        log.info(
            "uid-dispenser client: no dispenser answers through this NATS server;"
            " moving to another server of the connection's pool event=client.moved server=%s failed_attempts=%d",
            left,
            count,
        )
        return True

    def _reconnected(self, now: float) -> bool:
        """Whether the connection reconnected without a move of this
        Mover's since it last looked; if so, that reconnect is taken for a
        move: the count so far was of attempts on the server the connection
        left, and every runs from now. Two clients of two fleets sharing a
        connection each have a Mover: without this, the second moved the
        connection again a few milliseconds after the first, off the server
        just reached, on the no responders it had counted before the first
        move (the fault harness, Go)."""
        seen = self._nc.stats["reconnects"]
        if seen == self._reconnects:
            return False
        self._reconnects = seen
        self._last_move = now
        self._failures = 0
        return True


def server_only(url: ParseResult | None) -> str:
    """A server URL without its user information: a password or a token
    may sit there."""
    if url is None or url.hostname is None:
        return "(no server)"
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme or 'nats'}://{url.hostname}{port}"
