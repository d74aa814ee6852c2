"""The wire contract with the dispenser, as docs/protocol.md states it and
the Go package natsio/protocol declares it. protocol/cases.json at the
repository root holds the same contract as executable cases."""

from __future__ import annotations

from typing import Literal

SERVICE_NAME = "uid-dispenser"
"""The micro service name ``nats micro ls`` shows."""

DEFAULT_SUBJECT_PREFIX = "uid"
"""Subjects are ``<prefix>.next``, ``<prefix>.batch``...; ``uid`` by default."""

ENCODING_HEADER = "Uid-Encoding"
"""Selects the encoding of the IDs in a reply."""

LAYOUT_HEADER = "Uid-Layout"
"""On uid.parse: decode with this layout (a preset or ``T/W/S@epoch``)."""

RETRY_AFTER_HEADER = "Uid-Retry-After-Ms"
"""With the 503 of an instance at its capacity: when it has IDs again."""

INSTANCE_HEADER = "Uid-Instance"
"""On every reply of the sequence subjects: the instance that answered."""

ERROR_HEADER = "Nats-Service-Error"
ERROR_CODE_HEADER = "Nats-Service-Error-Code"

CODE_BAD_REQUEST = 400
CODE_NOT_FOUND = 404
CODE_INTERNAL = 500
CODE_UNAVAILABLE = 503

BINARY_ID_WIDTH = 8
"""Bytes of one ID in a binary reply (big-endian)."""

RANGE_WIDTH = 16
"""Bytes of one run in a ranges reply: the first ID, then the count, each
8 bytes big-endian."""

BASE32_WIDTH = 13
"""Characters of a base32 ID: 13 x 5 bits hold 64."""

Encoding = Literal["decimal", "binary", "base32", "ranges"]
"""The wire encoding a call asks for (``Uid-Encoding``). It changes nothing
of what the call returns: IDs are ints whatever travels.

- ``decimal``: text, no header (the default of next);
- ``binary``: 8 bytes big-endian per ID (the default of batches);
- ``base32``: 13 Crockford characters per ID, newline-separated;
- ``ranges``: runs of consecutive IDs, 16 bytes each (the first ID and the
  count), which the client expands: the smallest reply for large batches.
"""

ENCODINGS: tuple[Encoding, ...] = ("decimal", "binary", "base32", "ranges")


def subject(prefix: str, endpoint: Literal["next", "batch", "parse"]) -> str:
    """The subject of an endpoint under prefix."""
    return f"{prefix}.{endpoint}"


def seq_subject(prefix: str, name: str, op: Literal["next", "batch", "home"]) -> str:
    """The subject of op on the named sequence: ``<prefix>.seq.<name>.<op>``."""
    return f"{prefix}.seq.{name}.{op}"
