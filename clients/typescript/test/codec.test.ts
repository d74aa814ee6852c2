// The codecs without a server: binary decoding over shared buffers,
// base32 against its definition, and the 2^53 trap the strings avoid.

import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeBinary, decodeDecimalLines, decodeRanges, encodeBinary, encodeRanges, expandRanges, fromBase32, MAX_UINT64, toBase32 } from "../src/index.js";
import { ProtocolError } from "../src/errors.js";

// Deterministic pseudo-random 64-bit values (xorshift), so a failure
// reproduces.
function* values(n: number): Generator<bigint> {
  let x = 0x9e3779b97f4a7c15n;
  const mask = MAX_UINT64;
  yield 0n;
  yield 1n;
  yield MAX_UINT64;
  yield (1n << 63n) - 1n;
  yield (1n << 53n) - 1n;
  yield 1n << 53n;
  for (let i = 0; i < n; i++) {
    x ^= (x << 13n) & mask;
    x ^= x >> 7n;
    x ^= (x << 17n) & mask;
    yield x >> BigInt(i % 64); // every magnitude
  }
}

test("binary decoding reads a view at its byteOffset", () => {
  const ids = [...values(100)];
  const packed = encodeBinary(ids);
  // A NATS message's data is a view into a larger buffer; put the IDs
  // at an odd offset of one, with junk around them.
  const big = new Uint8Array(packed.length + 11).fill(0xff);
  big.set(packed, 3);
  const view = big.subarray(3, 3 + packed.length);
  assert.deepEqual(decodeBinary(view), ids);
  assert.throws(() => decodeBinary(big.subarray(0, 9)), ProtocolError);
  assert.deepEqual(decodeBinary(new Uint8Array(0)), []);
});

test("decimal lines are read exactly, beyond 2^53", () => {
  assert.deepEqual(decodeDecimalLines("9007199254740993\n18446744073709551615"), [9007199254740993n, MAX_UINT64]);
  assert.deepEqual(decodeDecimalLines(""), []);
  for (const bad of ["1\n", "1\nx", "-1", "18446744073709551616", " 1"]) {
    assert.throws(() => decodeDecimalLines(bad), ProtocolError, bad);
  }
  // What the strings are for: above 2^53, Numbers (and JSON.parse of a
  // bare number) merge neighbouring IDs.
  assert.equal(Number("9007199254740993"), Number("9007199254740992"));
  assert.equal(JSON.parse("9007199254740993"), 9007199254740992);
});

test("base32 is Crockford's, 13 characters, and round-trips", () => {
  assert.equal(toBase32(0n), "0000000000000");
  assert.equal(toBase32(31n), "000000000000Z");
  assert.equal(toBase32(32n), "0000000000010");
  assert.equal(toBase32(MAX_UINT64), "FZZZZZZZZZZZZ");
  assert.equal(toBase32("9223372036854775807"), "7ZZZZZZZZZZZZ");
  for (const v of values(2000)) {
    const s = toBase32(v);
    assert.match(s, /^[0-9A-HJKMNP-TV-Z]{13}$/);
    assert.equal(fromBase32(s), v);
    assert.equal(fromBase32(s.toLowerCase()), v);
    assert.equal(toBase32(v.toString()), s);
  }
});

test("base32 string order is numeric order", () => {
  const vs = [...values(2000)];
  const byNumber = [...vs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const byString = vs.map((v) => toBase32(v)).sort();
  assert.deepEqual(byString, byNumber.map((v) => toBase32(v)));
});

test("base32 decoding reads I and L as 1, O as 0, and refuses the rest", () => {
  assert.equal(fromBase32("000000000000I"), 1n);
  assert.equal(fromBase32("000000000000l"), 1n);
  assert.equal(fromBase32("00000000000o0"), 0n);
  assert.equal(fromBase32("00000NZK82G1A"), 755486507050n);
  for (const bad of ["000000000000U", "00000000000-1", "", "000000000001", "00000000000001", "G000000000000", "ZZZZZZZZZZZZZ"]) {
    assert.throws(() => fromBase32(bad), RangeError, bad);
  }
  for (const bad of [-1n, MAX_UINT64 + 1n]) {
    assert.throws(() => toBase32(bad), RangeError);
  }
  for (const bad of ["-1", "1e3", "0x10", "", "18446744073709551616"]) {
    assert.throws(() => toBase32(bad), RangeError, bad);
  }
});

test("fuzz: random text either decodes to what it says or is refused", () => {
  // Random strings over an alphabet wider than each decoder's, lengths
  // around the valid ones: every outcome is a value that encodes back to
  // the canonical form, or the decoder's own error, never something else.
  let seed = 12345;
  const rand = (n: number) => {
    seed ^= seed << 13; // xorshift32
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) % n;
  };
  const chars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-\n ";
  const canonical = (s: string) => s.toUpperCase().replace(/[IL]/g, "1").replace(/O/g, "0");
  let decoded = 0;
  for (let i = 0; i < 20_000; i++) {
    const s = Array.from({ length: 11 + rand(4) }, () => chars[rand(i % 3 === 0 ? 32 : chars.length)]).join("");
    try {
      const n = fromBase32(s);
      decoded++;
      assert.equal(toBase32(n), canonical(s), s);
    } catch (e) {
      assert.ok(e instanceof RangeError, `${JSON.stringify(s)}: ${String(e)}`);
    }
    const lines = Array.from({ length: 1 + rand(3) }, () => String(rand(1000)) + (rand(20) === 0 ? chars[rand(chars.length)] : "")).join("\n");
    const valid = lines.split("\n").every((l) => /^[0-9]{1,20}$/.test(l));
    if (valid) {
      assert.deepEqual(decodeDecimalLines(lines), lines.split("\n").map(BigInt), lines);
    } else {
      assert.throws(() => decodeDecimalLines(lines), ProtocolError, JSON.stringify(lines));
    }
  }
  assert.ok(decoded > 1000, `only ${decoded} decoded: the fuzz says little`);
});

/** One run of a ranges reply, made by hand: first, then count, 8 bytes big-endian each. */
function run(first: bigint, count: bigint): number[] {
  const b = new Uint8Array(16);
  const v = new DataView(b.buffer);
  v.setBigUint64(0, first);
  v.setBigUint64(8, count);
  return [...b];
}

test("ranges: runs of consecutive IDs, hand-made bytes, expanded in order", () => {
  const data = new Uint8Array([...run(1000n, 3n), ...run(5000n, 1n), ...run(1n << 62n, 2n)]);
  const runs = decodeRanges(data);
  assert.deepEqual(runs, [
    { first: 1000n, count: 3n },
    { first: 5000n, count: 1n },
    { first: 1n << 62n, count: 2n },
  ]);
  assert.deepEqual(expandRanges(runs), [1000n, 1001n, 1002n, 5000n, 1n << 62n, (1n << 62n) + 1n]);
  // Big-endian fields, written out.
  const fixed = Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 2]);
  assert.deepEqual(expandRanges(decodeRanges(fixed)), [0x0102030405060708n, 0x0102030405060709n]);
  // Runs that touch are still increasing.
  assert.deepEqual(expandRanges(decodeRanges(new Uint8Array([...run(10n, 2n), ...run(12n, 2n)]))), [10n, 11n, 12n, 13n]);
  assert.deepEqual(decodeRanges(new Uint8Array(0)), []);
  assert.deepEqual(encodeRanges(runs), data);
});

test("ranges: a view at its byteOffset, as a NATS message's data is", () => {
  const packed = new Uint8Array([...run(7n, 2n), ...run(100n, 64n)]);
  const big = new Uint8Array(packed.length + 5).fill(0xff);
  big.set(packed, 3);
  assert.equal(expandRanges(decodeRanges(big.subarray(3, 3 + packed.length))).length, 66);
});

test("ranges: malformed replies are refused", () => {
  const max = MAX_UINT64;
  const cases: [number[], RegExp][] = [
    [run(1n, 1n).slice(0, 15), /not a multiple of 16/],
    [[...run(1n, 1n), 0, 0, 0, 0, 0, 0, 0, 0], /not a multiple of 16/],
    [run(5n, 0n), /count of 0/],
    [[...run(10n, 5n), ...run(12n, 1n)], /not after the run before/],
    [[...run(10n, 5n), ...run(3n, 1n)], /not after the run before/],
    [run(max, 2n), /sign bit/],
    // The sign bit, which no dispenser issues: docs/protocol.md's reader refuses it.
    [run(1n << 63n, 1n), /sign bit/],
    [run((1n << 63n) - 2n, 3n), /sign bit/],
  ];
  for (const [bytes, says] of cases) {
    assert.throws(() => decodeRanges(new Uint8Array(bytes)), (e: unknown) => e instanceof ProtocolError && says.test(e.message));
  }
  // A reply claiming 2^40 IDs fails on the count, before anything is expanded.
  // The last ID below the sign bit is a valid run's end.
  assert.deepEqual(expandRanges(decodeRanges(new Uint8Array(run((1n << 63n) - 2n, 2n)))), [(1n << 63n) - 2n, (1n << 63n) - 1n]);
  assert.throws(() => decodeRanges(new Uint8Array([...run(1n, 999n), ...run(2000n, 1n << 40n)]), 1000), /more than 1000 IDs/);
  assert.equal(expandRanges(decodeRanges(new Uint8Array(run(1n, 1000n)), 1000)).length, 1000);
});
