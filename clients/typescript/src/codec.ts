// Decoding replies and converting IDs. An ID is a 64-bit unsigned integer:
// a JavaScript number is exact only up to 2^53 − 1, and every ID of the
// default layout is above that, so IDs stay strings or bigints here and
// never pass through a number (nor through JSON.parse of a bare number).

import { BINARY_ID_WIDTH, RANGE_WIDTH } from "./protocol.js";
import { ProtocolError } from "./errors.js";

/** The largest value an ID field can hold: 2^64 − 1. */
export const MAX_UINT64 = (1n << 64n) - 1n;

/** 2^63: the sign bit, which no ID a dispenser issues has set. */
const SIGN_BIT = 1n << 63n;

/** What IDs are handed out as: decimal strings (the default) or bigints. */
export type IdTypes = { string: string; bigint: bigint };
export type IdKind = keyof IdTypes;

const decimal = /^[0-9]{1,20}$/;

/**
 * Reads one unsigned decimal number of at most 64 bits, as the dispenser
 * writes them (no sign, no spaces). Throws ProtocolError otherwise.
 */
export function parseDecimal(text: string, what = "reply"): bigint {
  if (!decimal.test(text)) {
    throw new ProtocolError(`${what} ${quote(text)} is not a decimal number`);
  }
  const n = BigInt(text);
  if (n > MAX_UINT64) {
    throw new ProtocolError(`${what} ${text} does not fit in 64 bits`);
  }
  return n;
}

/**
 * Decodes a binary batch reply: 8 bytes big-endian per ID. data is a view
 * (a NATS message's data shares a larger buffer), so the DataView starts
 * at its byteOffset.
 */
export function decodeBinary(data: Uint8Array): bigint[] {
  if (data.length % BINARY_ID_WIDTH !== 0) {
    throw new ProtocolError(`binary batch reply of ${data.length} bytes is not a multiple of ${BINARY_ID_WIDTH}`);
  }
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const ids = new Array<bigint>(data.length / BINARY_ID_WIDTH);
  for (let i = 0; i < ids.length; i++) {
    ids[i] = view.getBigUint64(i * BINARY_ID_WIDTH, false);
  }
  return ids;
}

/** Encodes IDs as a binary batch reply does (for tests and responders). */
export function encodeBinary(ids: readonly (bigint | string)[]): Uint8Array {
  const out = new Uint8Array(ids.length * BINARY_ID_WIDTH);
  const view = new DataView(out.buffer);
  ids.forEach((id, i) => view.setBigUint64(i * BINARY_ID_WIDTH, toUint64(id), false));
  return out;
}

/** A run of consecutive IDs: first, first + 1, ..., first + count − 1. */
export interface IdRange {
  first: bigint;
  count: bigint;
}

/**
 * Decodes a ranges reply (Uid-Encoding: ranges) into its runs: each 16
 * bytes are a run's first ID and its count, each 8 bytes big-endian. The
 * runs must be non-empty and increasing (each starts after the one before
 * ends), their IDs below the sign bit (2^63), and together at most limit IDs when
 * limit is given (checked before anything is expanded). Throws
 * ProtocolError otherwise.
 */
export function decodeRanges(data: Uint8Array, limit?: number): IdRange[] {
  if (data.length % RANGE_WIDTH !== 0) {
    throw new ProtocolError(`ranges reply of ${data.length} bytes is not a multiple of ${RANGE_WIDTH}`);
  }
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const runs: IdRange[] = [];
  let total = 0n;
  let nextFree = 0n; // the smallest ID the next run may start at
  for (let off = 0; off < data.length; off += RANGE_WIDTH) {
    const first = view.getBigUint64(off, false);
    const count = view.getBigUint64(off + 8, false);
    const where = `ranges reply run ${off / RANGE_WIDTH}`;
    if (count === 0n) {
      throw new ProtocolError(`${where} (first ID ${first}) has a count of 0`);
    }
    // docs/protocol.md: no ID of a run reaches the sign bit (a dispenser
    // never issues one; a run that does is a corrupt reply).
    if (first + count - 1n >= SIGN_BIT) {
      throw new ProtocolError(`${where}: ${count} IDs from ${first} reach the sign bit (2^63)`);
    }
    if (first < nextFree) {
      throw new ProtocolError(`${where} starts at ${first}, not after the run before it (which ends at ${nextFree - 1n})`);
    }
    total += count;
    if (limit !== undefined && total > BigInt(limit)) {
      throw new ProtocolError(`ranges reply holds more than ${limit} IDs (at least ${total})`);
    }
    runs.push({ first, count });
    nextFree = first + count;
  }
  return runs;
}

/** The IDs of runs, in order. */
export function expandRanges(runs: readonly IdRange[]): bigint[] {
  const ids: bigint[] = [];
  for (const { first, count } of runs) {
    for (let i = 0n; i < count; i++) {
      ids.push(first + i);
    }
  }
  return ids;
}

/** Encodes runs as a ranges reply does (for tests and responders). */
export function encodeRanges(runs: readonly IdRange[]): Uint8Array {
  const out = new Uint8Array(runs.length * RANGE_WIDTH);
  const view = new DataView(out.buffer);
  runs.forEach(({ first, count }, i) => {
    view.setBigUint64(i * RANGE_WIDTH, toUint64(first), false);
    view.setBigUint64(i * RANGE_WIDTH + 8, toUint64(count), false);
  });
  return out;
}

/** Decodes a text batch reply: decimal IDs separated by newlines. */
export function decodeDecimalLines(text: string): bigint[] {
  if (text === "") {
    return [];
  }
  return text.split("\n").map((line) => parseDecimal(line, "batch reply line"));
}

/** Converts a bigint to the caller's kind. */
export function idAs<K extends IdKind>(kind: K, n: bigint): IdTypes[K] {
  return (kind === "bigint" ? n : n.toString()) as IdTypes[K];
}

// Crockford's base32: digits then letters in ASCII order, without I, L, O
// and U, so that fixed-width strings sort as the numbers do.
const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/** Characters in a base32 ID: 13 × 5 bits hold 64. */
export const BASE32_WIDTH = 13;
const DECODE: ReadonlyMap<string, number> = (() => {
  const m = new Map<string, number>();
  for (let i = 0; i < ALPHABET.length; i++) {
    m.set(ALPHABET[i]!, i);
    m.set(ALPHABET[i]!.toLowerCase(), i);
  }
  // Crockford's reading of the letters left out: I and L look like 1, O like 0.
  for (const [c, v] of [["I", 1], ["L", 1], ["O", 0]] as const) {
    m.set(c, v);
    m.set(c.toLowerCase(), v);
  }
  return m;
})();

/**
 * Encodes an ID (0 to 2^64 − 1, as a bigint or a decimal string) in
 * Crockford base32: upper case, always 13 characters, zero-padded, so
 * that string order is numeric order.
 */
export function toBase32(id: bigint | string): string {
  let n = toUint64(id);
  const out = new Array<string>(BASE32_WIDTH);
  for (let i = BASE32_WIDTH - 1; i >= 0; i--) {
    out[i] = ALPHABET[Number(n & 31n)]!;
    n >>= 5n;
  }
  return out.join("");
}

/**
 * Decodes a 13-character Crockford base32 ID, in any case, reading I and
 * L as 1 and O as 0. Throws RangeError for another length, a character
 * outside the alphabet (U among them) or a value above 2^64 − 1.
 */
export function fromBase32(text: string): bigint {
  if (text.length !== BASE32_WIDTH) {
    throw new RangeError(`base32 ID ${quote(text)} has ${text.length} characters, not ${BASE32_WIDTH}`);
  }
  let n = 0n;
  for (const c of text) {
    const v = DECODE.get(c);
    if (v === undefined) {
      throw new RangeError(`base32 ID ${quote(text)}: ${quote(c)} is not a Crockford base32 character`);
    }
    n = (n << 5n) | BigInt(v);
  }
  if (n > MAX_UINT64) {
    throw new RangeError(`base32 ID ${quote(text)} is above 2^64 - 1`);
  }
  return n;
}

/** Checks and converts an ID given by a caller. */
export function toUint64(id: bigint | string): bigint {
  let n: bigint;
  if (typeof id === "bigint") {
    n = id;
  } else if (decimal.test(id)) {
    n = BigInt(id);
  } else {
    throw new RangeError(`ID ${quote(id)} is not an unsigned decimal number`);
  }
  if (n < 0n || n > MAX_UINT64) {
    throw new RangeError(`ID ${n} is outside 0 to 2^64 - 1`);
  }
  return n;
}

/** Quotes (a prefix of) s for a message. */
export function quote(s: string, max = 40): string {
  return JSON.stringify(s.length > max ? s.slice(0, max) + "..." : s);
}
