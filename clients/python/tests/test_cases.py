"""protocol/cases.json, the cases every client runs (protocol/README.md):
the live cases as raw requests against the dispenser binary, the replies
section through this client against a plain responder, and the client's
retry of a live 503."""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import NoRespondersError

from servers import REPO_DIR, Dispenser, NatsServer
from uid_dispenser import (
    BadRequestError,
    GaveUpError,
    InternalError,
    ServiceError,
    UidClient,
    UnavailableError,
    UnknownSequenceError,
    decode_binary,
    decode_decimal_lines,
    from_base32,
)

FILE: dict[str, Any] = json.loads((REPO_DIR / "protocol" / "cases.json").read_text())
SIGN_BIT = 1 << 63


@pytest_asyncio.fixture(scope="module", autouse=True)
async def cases_dispenser(server: NatsServer) -> AsyncIterator[Dispenser]:
    """One dispenser with the cases' variables on the module's fresh server."""
    d = await Dispenser.start(server.url, FILE["dispenser"]["env"])
    yield d
    d.kill(signal.SIGTERM)


codes_seen: set[int] = set()


@pytest.mark.parametrize("case", FILE["cases"], ids=[c["name"] for c in FILE["cases"]])
async def test_live_case(nc: NATS, case: dict[str, Any]) -> None:
    req = case["request"]
    reply: Msg | None = None
    err: Exception | None = None
    try:
        reply = await nc.request(req["subject"], req["body"].encode(), timeout=5, headers=req["headers"] or None)
    except Exception as e:
        err = e
    problems = check(case, reply, err)
    if case.get("pending"):
        if problems:
            pytest.skip(f"pending ({case['pending']}): {'; '.join(problems)}")
        pytest.fail(f"pending ({case['pending']}) but passes now: remove its pending mark")
    assert problems == []
    if case["reply"].get("error"):
        codes_seen.add(case["reply"]["error"]["code"])


def test_live_cases_cover_every_code_a_dispenser_can_be_made_to_send() -> None:
    assert sorted(codes_seen) == [400, 404, 503]


def check(case: dict[str, Any], reply: Msg | None, err: Exception | None) -> list[str]:
    """What differs between a reply and the case (nothing: it passes)."""
    want = case["reply"]
    if want.get("no_responders"):
        return [] if isinstance(err, NoRespondersError) else [f"want no responders, got {err!r} / {reply!r}"]
    if reply is None:
        return [f"request: {err!r}"]
    problems: list[str] = []
    code = header_value(reply, "Nats-Service-Error-Code")
    description = header_value(reply, "Nats-Service-Error")
    werr = want.get("error")
    if not werr and code != "":
        problems.append(f"want a reply, got error {code} {description!r}")
    elif werr and code != str(werr["code"]):
        problems.append(f"want error {werr['code']}, got code {code!r} ({description!r})")
    elif werr and werr["description_contains"] not in description:
        problems.append(f"error description {description!r} does not contain {werr['description_contains']!r}")
    for name, pattern in (want.get("headers") or {}).items():
        v = header_value(reply, name)
        if v == "" or not re.search(pattern, v):
            problems.append(f"header {name} = {v!r}, want a value matching {pattern}")
    try:
        check_body(want["body"], reply.data)
    except AssertionError as e:
        problems.append(f"body: {e}")
    return problems


def header_value(m: Msg, name: str) -> str:
    for k, v in (m.headers or {}).items():
        if k.lower() == name.lower():
            return v
    return ""


def read_ranges(data: bytes) -> list[int]:
    """The IDs of a ranges reply, read here rather than with the client's
    decoder: the cases check the wire. 16 bytes per run: first ID, count."""
    assert len(data) % 16 == 0, f"{len(data)} bytes is not a multiple of 16"
    ids: list[int] = []
    for i in range(0, len(data), 16):
        first, count = int.from_bytes(data[i : i + 8], "big"), int.from_bytes(data[i + 8 : i + 16], "big")
        assert 1 <= count <= 1 << 20, f"run {i // 16}: count {count}"
        ids.extend(range(first, first + count))
    return ids


def check_body(want: dict[str, Any], data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    t = want["type"]
    if t == "empty":
        assert data == b"", f"want empty, got {text[:80]!r}"
    elif t in ("decimal", "base32"):
        id = decimal(text) if t == "decimal" else base32(text)
        assert id < SIGN_BIT, f"ID {id} has the sign bit set"
        if "equals" in want:
            assert str(id) == want["equals"]
    elif t in ("decimal_lines", "base32_lines", "binary", "ranges"):
        if t == "ranges":
            ids = read_ranges(data)
        elif t == "binary":
            ids = decode_binary(data)
        elif t == "base32_lines":
            ids = [base32(line) for line in text.split("\n")]
        else:
            ids = [decimal(line) for line in text.split("\n")]
            assert ids == decode_decimal_lines(text)
        assert len(ids) == want["count"], "count"
        for i, id in enumerate(ids):
            assert id < SIGN_BIT, f"ID {id} has the sign bit set"
            if i > 0:
                assert id > ids[i - 1], f"ID {id} after {ids[i - 1]}: not increasing"
                assert not want.get("dense") or id == ids[i - 1] + 1, f"ID {id} after {ids[i - 1]}: not dense"
        if "first" in want:
            assert str(ids[0]) == want["first"], "first"
    elif t == "json":
        obj = json.loads(text)
        for k in want.get("keys_include", []):
            assert k in obj, f"no key {k}"
        if "keys" in want:
            assert sorted(obj) == sorted(want["keys"]), "keys"
            assert all(isinstance(v, str) for v in obj.values()), "values are strings"
        for k, v in (want.get("values") or {}).items():
            assert obj.get(k) == v, k
    else:
        raise AssertionError(f"unknown body type {t!r} in the cases file")


def decimal(s: str) -> int:
    assert re.fullmatch(r"0|[1-9][0-9]*", s), f"{s!r} is not a decimal ID"
    return int(s)


def base32(s: str) -> int:
    # A server sends upper case: the decoder also takes lower case, so check first.
    assert re.fullmatch(r"[0-9A-HJKMNP-TV-Z]{13}", s), f"{s!r} is not a base32 ID"
    return from_base32(s)


ERROR_CLASS: dict[str, type[ServiceError]] = {
    "bad_request": BadRequestError,
    "unknown_sequence": UnknownSequenceError,
    "unavailable": UnavailableError,
    "internal": InternalError,
}


@pytest.mark.parametrize("rc", FILE["replies"]["cases"], ids=[r["name"] for r in FILE["replies"]["cases"]])
async def test_reply_through_the_client(nc: NATS, rc: dict[str, Any]) -> None:
    # The responder sends the case's reply, then (to a retry) the ID 42.
    prefix = "replies" + re.sub(r"[^a-z0-9]", "", rc["name"])
    arrived: list[float] = []

    async def respond(m: Msg) -> None:
        arrived.append(time.monotonic())
        if len(arrived) == 1:
            await nc.publish(m.reply, b"", headers=rc["headers"])
        else:
            await nc.publish(m.reply, b"42")

    sub = await nc.subscribe(f"{prefix}.next", cb=respond)
    try:
        c = UidClient(nc, subject_prefix=prefix)
        outcome = rc["outcome"]
        if outcome["retried"]:
            assert await c.next(timeout=5) == 42
            assert c.stats().retries == 1
            assert c.stats().unavailable == 1
            if "retry_after_ms" in outcome:
                # The client waits at least Uid-Retry-After-Ms before it asks
                # again (a lower bound: load only lengthens it).
                assert arrived[1] - arrived[0] >= outcome["retry_after_ms"] / 1000
            return
        with pytest.raises(ERROR_CLASS[outcome["error"]]):
            await c.next(timeout=5)
        assert len(arrived) == 1, "not retried"
    finally:
        await sub.unsubscribe()


async def test_a_call_that_gives_up_on_503s_carries_the_last_one_with_its_retry_hint(nc: NATS) -> None:
    for rc in [r for r in FILE["replies"]["cases"] if r["outcome"]["retried"]]:

        async def respond(m: Msg, h: dict[str, str] = rc["headers"]) -> None:
            await nc.publish(m.reply, b"", headers=h)

        sub = await nc.subscribe("always503.next", cb=respond)
        try:
            c = UidClient(nc, subject_prefix="always503")
            with pytest.raises(GaveUpError) as info:
                await c.next(timeout=1)
            assert info.value.attempts > 1
            assert isinstance(info.value.__cause__, UnavailableError)
            assert info.value.__cause__.retry_after_ms == rc["outcome"].get("retry_after_ms")
            assert isinstance(info.value, TimeoutError)
        finally:
            await sub.unsubscribe()


async def test_a_live_503_is_retried_until_the_deadline(nc: NATS) -> None:
    # The cases' dispenser sustains 16,384 IDs/s: 100,000 at once never fit.
    c = UidClient(nc)
    with pytest.raises(GaveUpError) as info:
        await c.batch(100_000, timeout=3)
    cause = info.value.__cause__
    assert isinstance(cause, UnavailableError), repr(cause)
    assert cause.retry_after_ms is not None and cause.retry_after_ms > 0
    assert c.stats().unavailable >= 1
    # And the instance still serves what it sustains.
    assert len(await c.batch(1000, timeout=5)) == 1000
