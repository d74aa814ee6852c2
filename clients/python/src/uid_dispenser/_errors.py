"""The client's exceptions, all subclasses of UidError.

The dispenser's error replies carry micro's headers
Nats-Service-Error-Code and Nats-Service-Error with an empty body; each
code a caller branches on has its own class."""

from __future__ import annotations

from collections.abc import Mapping

from ._protocol import (
    CODE_BAD_REQUEST,
    CODE_INTERNAL,
    CODE_NOT_FOUND,
    CODE_UNAVAILABLE,
    ERROR_CODE_HEADER,
    ERROR_HEADER,
    RETRY_AFTER_HEADER,
)


class UidError(Exception):
    """The base of every exception this package raises."""


class ProtocolError(UidError):
    """A reply that does not follow the protocol (a bad length, not a number)."""


class ServiceError(UidError):
    """An error reply of the service: the request's subject, the code
    (Nats-Service-Error-Code) and the description (Nats-Service-Error).
    400, 404 and 503 have subclasses; 500 and codes this client does not
    know are InternalError."""

    def __init__(self, subject: str, code: int, description: str) -> None:
        super().__init__(f"{subject}: {code} {description}")
        self.subject = subject
        self.code = code
        self.description = description


class BadRequestError(ServiceError):
    """400: the request is malformed (a bad count, ID or layout); never retried."""


class UnknownSequenceError(ServiceError):
    """404: the sequence was declared nowhere (DISPENSER_SEQUENCES); never retried."""


class UnavailableError(ServiceError):
    """503: no ID right now (at capacity, claim lost, shutting down, store
    down). The client retries these; a caller sees one as the ``__cause__``
    of a GaveUpError. retry_after_ms is the instance's Uid-Retry-After-Ms
    (an instance at its capacity: when it has IDs again), else None."""

    def __init__(self, subject: str, code: int, description: str, retry_after_ms: int | None = None) -> None:
        super().__init__(subject, code, description)
        self.retry_after_ms = retry_after_ms


class InternalError(ServiceError):
    """500 (the time field exhausted, a bug) or an unknown code; never retried."""


class GaveUpError(UidError, TimeoutError):
    """The call's deadline passed before any attempt succeeded. It is a
    TimeoutError; ``__cause__`` is the last failure (an UnavailableError,
    nats-py's NoRespondersError or TimeoutError) when there was one."""

    def __init__(self, subject: str, attempts: int, last: BaseException | None) -> None:
        why = f"; last error: {last}" if last is not None else ""
        super().__init__(f"{subject}: deadline passed after {attempts} attempt(s){why}")
        self.subject = subject
        self.attempts = attempts
        self.last = last


class HomeUnreachableError(UidError):
    """A sequence request in a fleet of regions that no instance of the
    sequence's home region could answer (all gone, or the gateway to it
    cut): only the home region's instances serve a sequence. home is the
    region as the instances reached name it (uid.seq.<name>.home).
    Raised once no responders has lasted the client's home_wait: retrying
    longer cannot help until the home region is reachable again."""

    def __init__(self, subject: str, sequence: str, home: str) -> None:
        super().__init__(
            f"{subject}: sequence {sequence!r} is served only by its home region {home}, which cannot be reached (no responders)"
        )
        self.subject = subject
        self.sequence = sequence
        self.home = home


class PrefetcherClosedError(UidError):
    """The Prefetcher was closed."""

    def __init__(self) -> None:
        super().__init__("prefetcher closed")


def header(headers: Mapping[str, str] | None, name: str) -> str:
    """A header's value, "" when absent; the name in any case (clients and
    proxies in other languages may change it)."""
    if not headers:
        return ""
    exact = headers.get(name)
    if exact is not None:
        return exact
    lower = name.lower()
    for k, v in headers.items():
        if k.lower() == lower:
            return v
    return ""


def service_error(subject: str, headers: Mapping[str, str] | None) -> ServiceError | None:
    """The error reply in a message's headers, or None when it is not one."""
    code_text = header(headers, ERROR_CODE_HEADER)
    if code_text == "":
        return None
    description = header(headers, ERROR_HEADER)
    if len(code_text) == 3 and code_text.isdigit() and code_text.isascii():
        code = int(code_text)
    else:
        code = CODE_INTERNAL
        description = f"unparseable error code {code_text!r}: {description}"
    if code == CODE_BAD_REQUEST:
        return BadRequestError(subject, code, description)
    if code == CODE_NOT_FOUND:
        return UnknownSequenceError(subject, code, description)
    if code == CODE_UNAVAILABLE:
        after = header(headers, RETRY_AFTER_HEADER)
        retry_after = int(after) if after.isascii() and after.isdigit() else None
        return UnavailableError(subject, code, description, retry_after)
    return InternalError(subject, code, description)
