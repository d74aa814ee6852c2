// Package @uid-dispenser/client: unique 64-bit IDs from uid-dispenser over
// NATS, for JavaScript and TypeScript on nats.js v3. IDs are strings (or
// bigints), never numbers: JavaScript numbers are exact only to 2^53 − 1.

export { UidClient } from "./client.js";
export type { CallOptions, ClientOptions, ClientStats, FromInstance, ParsedJSON, ParseOptions, Parts, WireEncoding, WireOptions } from "./client.js";
export { DEFAULT_MOVE_AFTER, DEFAULT_MOVE_EVERY_MS } from "./move.js";
export type { MoveLogger } from "./move.js";
export { Prefetcher } from "./prefetch.js";
export type { PrefetchOptions } from "./prefetch.js";
export {
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
} from "./errors.js";
export {
  BASE32_WIDTH,
  decodeBinary,
  decodeDecimalLines,
  decodeRanges,
  encodeBinary,
  encodeRanges,
  expandRanges,
  fromBase32,
  MAX_UINT64,
  toBase32,
} from "./codec.js";
export type { IdKind, IdRange, IdTypes } from "./codec.js";
export * from "./protocol.js";
