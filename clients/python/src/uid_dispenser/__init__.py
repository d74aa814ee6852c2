"""uid-dispenser's Python client: unique 64-bit IDs over NATS, for asyncio.

    async with uid_dispenser.connect("nats://127.0.0.1:4222") as client:
        id = await client.next()
        ids = await client.batch(1000)

IDs are ints below 2^63 (they fit a signed BIGINT column). See
UidClient for the calls and the retry rules, Prefetcher for a local
reserve, to_base32 and from_base32 for the base32 form.
"""

from ._client import ClientOptions, ClientStats, FromInstance, Parts, UidClient, connect
from ._codec import (
    MAX_UINT64,
    decode_base32_lines,
    decode_binary,
    decode_decimal_lines,
    decode_ranges,
    encode_binary,
    encode_ranges,
    expand_ranges,
    from_base32,
    to_base32,
)
from ._errors import (
    BadRequestError,
    GaveUpError,
    HomeUnreachableError,
    InternalError,
    PrefetcherClosedError,
    ProtocolError,
    ServiceError,
    UidError,
    UnavailableError,
    UnknownSequenceError,
)
from ._move import DEFAULT_MOVE_AFTER, DEFAULT_MOVE_EVERY
from ._prefetch import Prefetcher
from ._protocol import (
    BASE32_WIDTH,
    DEFAULT_SUBJECT_PREFIX,
    ENCODING_HEADER,
    ENCODINGS,
    INSTANCE_HEADER,
    LAYOUT_HEADER,
    RETRY_AFTER_HEADER,
    Encoding,
)

__version__ = "1.0.0"

__all__ = [
    "BASE32_WIDTH",
    "DEFAULT_MOVE_AFTER",
    "DEFAULT_MOVE_EVERY",
    "DEFAULT_SUBJECT_PREFIX",
    "ENCODINGS",
    "ENCODING_HEADER",
    "INSTANCE_HEADER",
    "LAYOUT_HEADER",
    "MAX_UINT64",
    "RETRY_AFTER_HEADER",
    "BadRequestError",
    "ClientOptions",
    "ClientStats",
    "Encoding",
    "FromInstance",
    "GaveUpError",
    "HomeUnreachableError",
    "InternalError",
    "Parts",
    "Prefetcher",
    "PrefetcherClosedError",
    "ProtocolError",
    "ServiceError",
    "UidClient",
    "UidError",
    "UnavailableError",
    "UnknownSequenceError",
    "connect",
    "decode_base32_lines",
    "decode_binary",
    "decode_decimal_lines",
    "decode_ranges",
    "encode_binary",
    "encode_ranges",
    "expand_ranges",
    "from_base32",
    "to_base32",
]
