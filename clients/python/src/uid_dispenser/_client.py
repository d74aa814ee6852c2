"""The client: the Go client's (natsio/uidclient) protocol and retry rules
in asyncio's idiom."""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Generic, NamedTuple, TypedDict, TypeVar, Unpack

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import ConnectionReconnectingError, NoRespondersError
from nats.errors import TimeoutError as NATSTimeoutError

from ._codec import (
    decode_base32_lines,
    decode_binary,
    decode_decimal_lines,
    decode_ranges,
    expand_ranges,
    parse_decimal,
)
from ._errors import (
    BadRequestError,
    GaveUpError,
    HomeUnreachableError,
    ProtocolError,
    UidError,
    UnavailableError,
    UnknownSequenceError,
    header,
    service_error,
)
from ._move import DEFAULT_MOVE_AFTER, DEFAULT_MOVE_EVERY, Mover
from ._protocol import (
    BINARY_ID_WIDTH,
    CODE_BAD_REQUEST,
    DEFAULT_SUBJECT_PREFIX,
    ENCODING_HEADER,
    ENCODINGS,
    INSTANCE_HEADER,
    LAYOUT_HEADER,
    Encoding,
    seq_subject,
    subject,
)

V = TypeVar("V")

_SEQ_NAME = re.compile(r"[A-Za-z0-9_-]+")
_TIMESTAMP = "%Y-%m-%d %H:%M:%S"


class FromInstance(NamedTuple, Generic[V]):
    """A sequence's number(s) with the instance that handed them out (they
    increase per instance; across instances they interleave)."""

    value: V
    instance: str
    """Uid-Instance: the micro instance ID; "" from a server that does not send it."""


@dataclass(frozen=True)
class Parts:
    """An ID split into its fields, from uid.parse."""

    id: int
    """The ID; negative only for a wrapped UidGenerator ID under its layout."""
    time: datetime
    """The second it was issued in (UTC)."""
    worker_id: int
    sequence: int
    wrapped: str | None
    """Set for a wrapped UidGenerator ID, saying so."""
    json: dict[str, str] = field(repr=False)
    """UidGenerator's parseUID JSON as the dispenser sent it."""


@dataclass
class ClientStats:
    """What the client absorbed by retrying; callers see only the outcome."""

    requests: int = 0
    """Calls (each may take several attempts)."""
    retries: int = 0
    """Attempts after the first."""
    unavailable: int = 0
    """503 replies retried."""
    no_responders: int = 0
    """Attempts no dispenser was subscribed for."""
    timed_out: int = 0
    """Attempts that timed out."""
    moves: int = 0
    """Times the connection was forced off a server that kept failing (cut off from its cluster)."""


class UidClient:
    """Asks dispensers for IDs over NATS, on a nats-py connection.

    It retries, until the call's timeout, when no dispenser is subscribed
    (all down or restarting), when one answers 503 (waiting at least the
    instance's Uid-Retry-After-Ms) and when an attempt times out (the
    instance died holding the request), with jittered exponential back-off.
    Retrying an ID request is always safe: an ID in a lost reply is never
    issued again. 400, 404 and 500 replies are raised at once as
    BadRequestError, UnknownSequenceError and InternalError; a call whose
    timeout passes raises GaveUpError (a TimeoutError) from the last
    failure.

    A NATS server cut off from its cluster keeps its clients connected and
    NATS never moves them: after move_after attempts in a row ended in no
    responders (any reply resets the count, a timeout neither counts nor
    resets it), when the connection knows another server and the last move
    was at least move_every seconds ago, the client forces the connection
    onto the next server of its pool (nats-py's force_reconnect) and logs
    it at INFO on the ``uid_dispenser`` logger. A reconnect the client did not make
    (another client's move of a shared connection) counts as a move.

    Use it as ``async with uid_dispenser.connect(url) as client`` (the
    client owns and closes the connection), or ``UidClient(nc)`` on a
    connection of your own, which it leaves open. Times are in seconds.
    """

    def __init__(
        self,
        nc: NATS,
        *,
        subject_prefix: str = DEFAULT_SUBJECT_PREFIX,
        timeout: float = 5.0,
        attempt_timeout: float = 1.0,
        min_backoff: float = 0.002,
        max_backoff: float = 0.25,
        home_wait: float = 2.0,
        move_after: int = DEFAULT_MOVE_AFTER,
        move_every: float = DEFAULT_MOVE_EVERY,
        owns_connection: bool = False,
    ) -> None:
        """nc: a connected nats-py client. timeout: a call's deadline when it
        gives none (math.inf: retry until cancelled). attempt_timeout bounds
        one attempt. min_backoff and max_backoff bound the pause between
        attempts (doubled each time, jittered over its upper half).
        home_wait: how long a sequence call goes on asking while its home
        region cannot be reached before it raises HomeUnreachableError.
        move_after: the attempts in a row ending in no responders that move
        the connection to another server (0: never).
        move_every: the least time between two moves.
        owns_connection: close() closes nc."""
        self._nc = nc
        self._prefix = subject_prefix or DEFAULT_SUBJECT_PREFIX
        self._timeout = _positive(timeout, "timeout")
        self._attempt_timeout = _positive(attempt_timeout, "attempt_timeout")
        self._min_backoff = _positive(min_backoff, "min_backoff")
        self._max_backoff = max(_positive(max_backoff, "max_backoff"), self._min_backoff)
        self._home_wait = _positive(home_wait, "home_wait")
        if isinstance(move_after, bool) or not isinstance(move_after, int) or move_after < 0:
            raise ValueError(f"move_after must be 0 (never) or a positive int, not {move_after!r}")
        self._mover = Mover(nc, move_after, _positive(move_every, "move_every"))
        self._owns = owns_connection
        self._stats = ClientStats()
        self._subj_next = subject(self._prefix, "next")
        self._subj_batch = subject(self._prefix, "batch")
        self._subj_parse = subject(self._prefix, "parse")

    @property
    def nc(self) -> NATS:
        """The NATS connection the client sends on."""
        return self._nc

    async def __aenter__(self) -> UidClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connection if the client owns it (made by connect)."""
        if self._owns and not self._nc.is_closed:
            await self._nc.close()

    def stats(self) -> ClientStats:
        """The client's counters since it was made (a copy)."""
        return ClientStats(**{**vars(self._stats), "moves": self._mover.moves})

    async def next(self, *, encoding: Encoding = "decimal", timeout: float | None = None) -> int:
        """One new ID. encoding is the wire form (decimal or base32; binary
        and ranges are answered in decimal on next)."""
        reply = await self._request(self._subj_next, b"", _wire_headers(encoding), timeout)
        return _one(reply, self._subj_next, encoding)

    async def batch(self, n: int, *, encoding: Encoding = "binary", timeout: float | None = None) -> list[int]:
        """n new IDs, increasing, in one request (binary on the wire unless
        encoding says otherwise). n must not exceed the service's largest
        batch (a BadRequestError otherwise)."""
        ids, _ = await self._batch(self._subj_batch, n, encoding, timeout)
        return ids

    async def batch_ranges(self, n: int, *, timeout: float | None = None) -> list[range]:
        """n new IDs as runs of consecutive IDs (Uid-Encoding: ranges),
        increasing, without expanding them: ``sum(map(len, runs)) == n``."""
        reply = await self._request(self._subj_batch, _count(self._subj_batch, n), _wire_headers("ranges"), timeout)
        return _ranges(reply, self._subj_batch, n)

    async def seq_next(self, name: str, *, encoding: Encoding = "decimal", timeout: float | None = None) -> int:
        """The next number of the sequence name; UnknownSequenceError when
        it was declared nowhere."""
        return (await self.seq_next_from(name, encoding=encoding, timeout=timeout)).value

    async def seq_next_from(self, name: str, *, encoding: Encoding = "decimal", timeout: float | None = None) -> FromInstance[int]:
        """seq_next with the instance that answered."""
        s = seq_subject(self._prefix, _check_seq_name(name, self._prefix), "next")
        reply = await self._request(s, b"", _wire_headers(encoding), timeout)
        return FromInstance(_one(reply, s, encoding), header(reply.headers, INSTANCE_HEADER))

    async def seq_batch(self, name: str, n: int, *, encoding: Encoding = "binary", timeout: float | None = None) -> list[int]:
        """The next n numbers of the sequence name, increasing, in one request."""
        return (await self.seq_batch_from(name, n, encoding=encoding, timeout=timeout)).value

    async def seq_batch_from(
        self, name: str, n: int, *, encoding: Encoding = "binary", timeout: float | None = None
    ) -> FromInstance[list[int]]:
        """seq_batch with the instance that answered."""
        s = seq_subject(self._prefix, _check_seq_name(name, self._prefix), "batch")
        nums, reply = await self._batch(s, n, encoding, timeout)
        return FromInstance(nums, header(reply.headers, INSTANCE_HEADER))

    async def parse(self, id: int | str, *, layout: str | None = None, timeout: float | None = None) -> Parts:
        """Splits an ID into its time, worker ID and sequence with the
        fleet's layout, or with layout (a preset such as ``uidgenerator``,
        or ``T/W/S@epoch``, sent as Uid-Layout): the call a service
        migrating off UidGenerator makes in place of parseUID(). id is an
        int (negative only for a wrapped UidGenerator ID under its layout)
        or a string, decimal or base32."""
        headers = {LAYOUT_HEADER: layout} if layout is not None else None
        reply = await self._request(self._subj_parse, str(id).encode(), headers, timeout)
        return _parts(reply.data, self._subj_parse)

    async def _batch(self, s: str, n: int, encoding: Encoding, timeout: float | None) -> tuple[list[int], Msg]:
        body = _count(s, n)
        reply = await self._request(s, body, _wire_headers(encoding), timeout)
        if encoding == "ranges":
            return expand_ranges(_ranges(reply, s, n)), reply
        if encoding == "binary":
            if len(reply.data) != n * BINARY_ID_WIDTH:
                raise ProtocolError(f"{s}: asked for {n} IDs, the reply holds {len(reply.data)} bytes")
            return decode_binary(reply.data), reply
        text = reply.data.decode("utf-8", "replace")
        ids = decode_base32_lines(text) if encoding == "base32" else decode_decimal_lines(text)
        if len(ids) != n:
            raise ProtocolError(f"{s}: asked for {n} IDs, the reply holds {len(ids)}")
        return ids, reply

    async def _request(self, s: str, payload: bytes, headers: dict[str, str] | None, timeout: float | None) -> Msg:
        """Sends a request until a dispenser answers it, the error is final,
        or the call's timeout passes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self._timeout if timeout is None else _positive(timeout, "timeout"))
        self._stats.requests += 1
        backoff = self._min_backoff
        last: Exception | None = None
        name = self._seq_name_of(s)
        home_asked = name is None  # only sequences have homes (fleets of regions)
        home: HomeUnreachableError | None = None  # set once the instances named it
        home_since: float | None = None
        attempt = 0
        while True:
            attempt += 1
            if attempt > 1:
                self._stats.retries += 1
            left = deadline - loop.time()
            err: Exception
            try:
                reply = await self._nc.request(s, payload, timeout=max(0.001, min(self._attempt_timeout, left)), headers=headers)
            except NoRespondersError as e:
                err = e
                await self._mover.no_responders()
            except NATSTimeoutError as e:
                err = e  # neither counts toward a move nor resets the count (Mover)
            except ConnectionReconnectingError as e:
                err = e
            else:
                self._mover.replied()
                found = service_error(s, reply.headers)
                if found is None:
                    return reply
                err = found
            no_responders = isinstance(err, NoRespondersError)
            if not home_asked and no_responders and name is not None:
                home_asked = True
                answer = await self._home_unreachable(s, name, deadline)
                if isinstance(answer, HomeUnreachableError):
                    home = answer
                elif answer is not None:
                    self._count(err)
                    raise answer
            # The home is unreachable for as long as no responders lasts without a break.
            if home is not None:
                if not no_responders:
                    home_since = None
                elif home_since is None:
                    home_since = loop.time()
                elif loop.time() - home_since >= self._home_wait:
                    self._count(err)
                    raise home from err
            if not _retryable(err):
                raise err
            self._count(err)
            pause = backoff / 2 + random.uniform(0, backoff / 2)
            backoff = min(2 * backoff, self._max_backoff)
            if isinstance(err, UnavailableError) and err.retry_after_ms is not None:
                pause = max(pause, err.retry_after_ms / 1000)
            left = deadline - loop.time()
            if pause >= left:
                if home is not None and no_responders:
                    raise home from err
                # An attempt the deadline cut short says less than the
                # failure before it (a 503, no responders).
                cause = last if isinstance(err, NATSTimeoutError) and last is not None else err
                raise GaveUpError(s, attempt, cause) from cause
            last = err
            await asyncio.sleep(pause)

    def _seq_name_of(self, s: str) -> str | None:
        """The sequence a subject <prefix>.seq.<name>.next|batch names, else None."""
        if not s.startswith(self._prefix + "."):
            return None
        m = re.fullmatch(r"seq\.([A-Za-z0-9_-]+)\.(next|batch)", s[len(self._prefix) + 1 :])
        return m.group(1) if m else None

    async def _home_unreachable(self, s: str, name: str, deadline: float) -> UidError | None:
        """The error of a sequence request that met no responders when the
        instances reached name its home (uid.seq.<name>.home, asked on this
        failure only): in a fleet of regions only the home region's
        instances serve a sequence. A 404 there is the sequence homed
        nowhere. None when nobody answers (no instance at all, or a fleet
        without regions): retried as any request."""
        left = deadline - asyncio.get_running_loop().time()
        try:
            reply = await self._nc.request(
                seq_subject(self._prefix, name, "home"), b"", timeout=max(0.001, min(self._attempt_timeout, left))
            )
        except (NoRespondersError, NATSTimeoutError, ConnectionReconnectingError):
            return None
        err = service_error(s, reply.headers)
        if isinstance(err, UnknownSequenceError):
            return err
        if err is not None or not reply.data:
            return None
        return HomeUnreachableError(s, name, reply.data.decode("utf-8", "replace")[:64])

    def _count(self, err: Exception) -> None:
        if isinstance(err, UnavailableError):
            self._stats.unavailable += 1
        elif isinstance(err, NoRespondersError):
            self._stats.no_responders += 1
        elif isinstance(err, NATSTimeoutError):
            self._stats.timed_out += 1


class _Connecting:
    """What connect returns: awaitable (a client the caller closes) and an
    async context manager (the client, closed on exit)."""

    def __init__(self, servers: str | list[str], client_opts: ClientOptions, nats_opts: dict[str, Any]) -> None:
        self._servers = servers
        self._client_opts = client_opts
        self._nats_opts = nats_opts
        self._client: UidClient | None = None

    async def _open(self) -> UidClient:
        nc = await nats.connect(self._servers, **self._nats_opts)
        return UidClient(nc, owns_connection=True, **self._client_opts)

    def __await__(self) -> Generator[Any, None, UidClient]:
        return self._open().__await__()

    async def __aenter__(self) -> UidClient:
        self._client = await self._open()
        return self._client

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._client is not None:
            await self._client.close()


class ClientOptions(TypedDict, total=False):
    """UidClient's options (its keyword arguments but owns_connection), for connect."""

    subject_prefix: str
    timeout: float
    attempt_timeout: float
    min_backoff: float
    max_backoff: float
    home_wait: float
    move_after: int
    move_every: float


def connect(
    servers: str | list[str] = "nats://127.0.0.1:4222",
    *,
    nats_options: Mapping[str, Any] | None = None,
    **options: Unpack[ClientOptions],
) -> _Connecting:
    """Connects to NATS and returns a client that owns the connection:

    ``async with connect("nats://127.0.0.1:4222") as client: ...`` closes
    it on exit; ``client = await connect(...)`` leaves ``await
    client.close()`` to the caller. nats_options go to nats.connect
    (user, password, token, user_credentials, tls, ...); options are
    UidClient's (timeout, subject_prefix, ...)."""
    return _Connecting(servers, options, dict(nats_options or {}))


def _retryable(err: Exception) -> bool:
    """The errors another attempt may cure: nobody subscribed (instances
    restarting), no ID right now (503), an attempt that timed out (the
    instance died holding the request), a connection reconnecting."""
    return isinstance(err, (NoRespondersError, UnavailableError, NATSTimeoutError, ConnectionReconnectingError))


def _wire_headers(encoding: Encoding) -> dict[str, str] | None:
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {', '.join(ENCODINGS)}, not {encoding!r}")
    return None if encoding == "decimal" else {ENCODING_HEADER: encoding}


def _count(s: str, n: int) -> bytes:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise BadRequestError(s, CODE_BAD_REQUEST, f"count {n!r}: ask for at least 1 ID")
    return str(n).encode()


def _one(reply: Msg, s: str, encoding: Encoding) -> int:
    text = reply.data.decode("utf-8", "replace")
    if encoding == "base32":
        ids = decode_base32_lines(text)
        if len(ids) != 1:
            raise ProtocolError(f"{s}: reply {text[:60]!r} is not one base32 ID")
        return ids[0]
    return parse_decimal(text, f"{s}: reply")


def _ranges(reply: Msg, s: str, n: int) -> list[range]:
    try:
        runs = decode_ranges(reply.data, limit=n)
    except ProtocolError as e:
        raise ProtocolError(f"{s}: {e}") from e
    got = sum(len(r) for r in runs)
    if got != n:
        raise ProtocolError(f"{s}: asked for {n} IDs, the ranges reply holds {got}")
    return runs


def _parts(data: bytes, s: str) -> Parts:
    text = data.decode("utf-8", "replace")
    try:
        j = json.loads(text)
        if not isinstance(j, dict) or not all(isinstance(v, str) for v in j.values()):
            raise ValueError("not an object of strings")
        uid = j["UID"]
        if not re.fullmatch(r"-?[0-9]{1,20}", uid):
            raise ValueError(f"UID {uid!r} is not a decimal number")
        return Parts(
            id=int(uid),
            time=datetime.strptime(j["timestamp"], _TIMESTAMP).replace(tzinfo=UTC),
            worker_id=int(j["workerId"]),
            sequence=int(j["sequence"]),
            wrapped=j.get("wrapped"),
            json=dict(j),
        )
    except (ValueError, KeyError) as e:
        raise ProtocolError(f"{s}: reply {text[:120]!r} is not parseUID's JSON: {e}") from e


def _check_seq_name(name: str, prefix: str) -> str:
    if not isinstance(name, str) or not _SEQ_NAME.fullmatch(name):
        raise BadRequestError(
            seq_subject(prefix, "<name>", "next"),
            CODE_BAD_REQUEST,
            f"sequence name {name!r}: names are letters, digits, - and _",
        )
    return name


def _positive(v: float, what: str) -> float:
    if not v > 0:
        raise ValueError(f"{what} must be positive, not {v!r}")
    return v
