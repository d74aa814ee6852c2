"""Decoding replies and converting IDs.

An ID is a 64-bit unsigned integer (the dispenser's have the sign bit
clear, so they also fit a signed 64-bit column); here it is a Python int.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable

from ._errors import ProtocolError
from ._protocol import BASE32_WIDTH, BINARY_ID_WIDTH, RANGE_WIDTH

MAX_UINT64 = (1 << 64) - 1
"""The largest value an ID field can hold."""

SIGN_BIT = 1 << 63
"""2^63: the sign bit, which no ID a dispenser issues has set."""

_DECIMAL = re.compile(r"[0-9]{1,20}")


def parse_decimal(text: str, what: str = "reply") -> int:
    """Reads one unsigned decimal number of at most 64 bits, as the
    dispenser writes them (no sign, no spaces); ProtocolError otherwise."""
    if not _DECIMAL.fullmatch(text):
        raise ProtocolError(f"{what} {_quote(text)} is not a decimal number")
    n = int(text)
    if n > MAX_UINT64:
        raise ProtocolError(f"{what} {text} does not fit in 64 bits")
    return n


def decode_decimal_lines(text: str) -> list[int]:
    """Decodes a text batch reply: decimal IDs separated by newlines."""
    if text == "":
        return []
    return [parse_decimal(line, "batch reply line") for line in text.split("\n")]


def decode_binary(data: bytes) -> list[int]:
    """Decodes a binary batch reply: 8 bytes big-endian per ID."""
    if len(data) % BINARY_ID_WIDTH:
        raise ProtocolError(f"binary reply of {len(data)} bytes is not a multiple of {BINARY_ID_WIDTH}")
    return list(struct.unpack(f">{len(data) // BINARY_ID_WIDTH}Q", data))


def encode_binary(ids: Iterable[int]) -> bytes:
    """Encodes IDs as a binary reply does (for tests and responders)."""
    checked = [_uint64(i) for i in ids]
    return struct.pack(f">{len(checked)}Q", *checked)


def decode_ranges(data: bytes, limit: int | None = None) -> list[range]:
    """Decodes a ranges reply (``Uid-Encoding: ranges``) into its runs of
    consecutive IDs, as Python ranges: each 16 bytes of the reply are a
    run's first ID and its count, each 8 bytes big-endian. The runs must
    be non-empty and increasing (each starts after the one before ends),
    their IDs below the sign bit (2^63), and together at most limit IDs (when given,
    checked before anything is expanded); ProtocolError otherwise."""
    if len(data) % RANGE_WIDTH:
        raise ProtocolError(f"ranges reply of {len(data)} bytes is not a multiple of {RANGE_WIDTH}")
    runs: list[range] = []
    total = 0
    next_free = 0  # the smallest ID the next run may start at
    for off in range(0, len(data), RANGE_WIDTH):
        first = int.from_bytes(data[off : off + 8], "big")
        count = int.from_bytes(data[off + 8 : off + RANGE_WIDTH], "big")
        where = f"ranges reply run {off // RANGE_WIDTH}"
        if count == 0:
            raise ProtocolError(f"{where} (first ID {first}) has a count of 0")
        # docs/protocol.md: no ID of a run reaches the sign bit (a dispenser
        # never issues one; a run that does is a corrupt reply).
        if first + count - 1 >= SIGN_BIT:
            raise ProtocolError(f"{where}: {count} IDs from {first} reach the sign bit (2^63)")
        if first < next_free:
            raise ProtocolError(f"{where} starts at {first}, not after the run before it (which ends at {next_free - 1})")
        total += count
        if limit is not None and total > limit:
            raise ProtocolError(f"ranges reply holds more than {limit} IDs (at least {total})")
        runs.append(range(first, first + count))
        next_free = first + count
    return runs


def expand_ranges(runs: Iterable[range]) -> list[int]:
    """The IDs of runs, in order."""
    ids: list[int] = []
    for r in runs:
        ids.extend(r)
    return ids


def encode_ranges(runs: Iterable[range]) -> bytes:
    """Encodes runs (ranges of step 1) as a ranges reply does (for tests
    and responders)."""
    out = bytearray()
    for r in runs:
        if r.step != 1 or len(r) == 0:
            raise ValueError(f"{r!r} is not a non-empty run of consecutive IDs")
        out += _uint64(r.start).to_bytes(8, "big") + len(r).to_bytes(8, "big")
    return bytes(out)


# Crockford's base32: digits then letters in ASCII order, without I, L, O
# and U, so that fixed-width strings sort as the numbers do.
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_VALUES: dict[str, int] = {}
for _i, _c in enumerate(_ALPHABET):
    _VALUES[_c] = _VALUES[_c.lower()] = _i
# Crockford's reading of the letters left out: I and L look like 1, O like 0.
for _c, _v in (("I", 1), ("L", 1), ("O", 0)):
    _VALUES[_c] = _VALUES[_c.lower()] = _v


def to_base32(id: int) -> str:
    """An ID (0 to 2^64 - 1) in Crockford base32: upper case, always 13
    characters, zero-padded, so that string order is numeric order."""
    n = _uint64(id)
    out = []
    for _ in range(BASE32_WIDTH):
        out.append(_ALPHABET[n & 31])
        n >>= 5
    return "".join(reversed(out))


def from_base32(text: str) -> int:
    """Reads a 13-character Crockford base32 ID in any case, I and L as 1
    and O as 0. ValueError for another length, a character outside the
    alphabet (U among them) or a value above 2^64 - 1."""
    if len(text) != BASE32_WIDTH:
        raise ValueError(f"base32 ID {_quote(text)} has {len(text)} characters, not {BASE32_WIDTH}")
    n = 0
    for c in text:
        v = _VALUES.get(c)
        if v is None:
            raise ValueError(f"base32 ID {_quote(text)} has {c!r}, not a Crockford base32 character (0-9 and A-Z without U)")
        n = n << 5 | v
    # The first character carries only 4 bits: 16 or more would need a 65th.
    if n > MAX_UINT64:
        raise ValueError(f"base32 ID {_quote(text)} is above 2^64 - 1 (its first character is at most F)")
    return n


def decode_base32_lines(text: str) -> list[int]:
    """Decodes a base32 batch reply: 13-character IDs separated by newlines."""
    if text == "":
        return []
    try:
        return [from_base32(line) for line in text.split("\n")]
    except ValueError as e:
        raise ProtocolError(f"reply {_quote(text, 60)} is not base32 IDs: {e}") from e


def _uint64(id: int) -> int:
    if isinstance(id, bool) or not isinstance(id, int):
        raise TypeError(f"an ID is an int, not {type(id).__name__}")
    if not 0 <= id <= MAX_UINT64:
        raise ValueError(f"ID {id} is outside 0 to 2^64 - 1")
    return id


def _quote(s: str, limit: int = 40) -> str:
    return repr(s if len(s) <= limit else s[:limit] + "...")
