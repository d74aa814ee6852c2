// Errors of the client. The dispenser's error replies carry micro's
// headers Nats-Service-Error-Code and Nats-Service-Error with an empty
// body; each code a caller branches on has its own class.

import type { MsgHdrs } from "@nats-io/nats-core";
import {
  CODE_BAD_REQUEST,
  CODE_INTERNAL,
  CODE_NOT_FOUND,
  CODE_UNAVAILABLE,
  ERROR_CODE_HEADER,
  ERROR_HEADER,
  RETRY_AFTER_HEADER,
} from "./protocol.js";

/** The base of every error this package throws. */
export class UidError extends Error {
  override name = "UidError";
}

/** A reply that does not follow the protocol (a bad length, not a number). */
export class ProtocolError extends UidError {
  override name = "ProtocolError";
}

/**
 * An error reply of the service. 400, 404 and 503 have subclasses;
 * 500 and codes this client does not know are InternalError.
 */
export class ServiceError extends UidError {
  override name = "ServiceError";
  constructor(
    /** The request's subject. */
    readonly subject: string,
    /** Nats-Service-Error-Code. */
    readonly code: number,
    /** Nats-Service-Error: what went wrong, one line. */
    readonly description: string,
  ) {
    super(`${subject}: ${code} ${description}`);
  }
}

/** 400: the request is malformed (a bad count, ID or layout); never retried. */
export class BadRequestError extends ServiceError {
  override name = "BadRequestError";
}

/** 404: the sequence was declared nowhere; never retried. */
export class UnknownSequenceError extends ServiceError {
  override name = "UnknownSequenceError";
}

/**
 * 503: no ID right now (at capacity, claim lost, shutting down, store
 * down). The client retries these; a caller sees one only as the cause of
 * a GaveUpError, or from a client made with no retries.
 */
export class UnavailableError extends ServiceError {
  override name = "UnavailableError";
  constructor(
    subject: string,
    code: number,
    description: string,
    /** Uid-Retry-After-Ms of an instance at its capacity: when it has IDs again. */
    readonly retryAfterMs?: number,
  ) {
    super(subject, code, description);
  }
}

/** 500 (the time field exhausted, a bug) or an unknown code; never retried. */
export class InternalError extends ServiceError {
  override name = "InternalError";
}

/**
 * The call's deadline passed, or its signal aborted, before any attempt
 * succeeded. cause is the last attempt's failure (an UnavailableError, a
 * no-responders or timeout error of nats.js), when there was one.
 */
export class GaveUpError extends UidError {
  override name = "GaveUpError";
  constructor(
    readonly subject: string,
    readonly reason: "deadline" | "aborted",
    readonly attempts: number,
    cause?: unknown,
  ) {
    const why = reason === "deadline" ? "deadline passed" : "aborted";
    const last = cause instanceof Error ? `; last error: ${cause.message}` : "";
    super(`${subject}: ${why} after ${attempts} attempt(s)${last}`, cause === undefined ? undefined : { cause });
  }
}

/**
 * A sequence request in a fleet of regions that no instance of the
 * sequence's home region could answer (all gone, or the gateway to it
 * cut): only the home region's instances serve a sequence. home is the
 * region, as the instances reached name it (uid.seq.<name>.home); cause
 * is nats.js's no-responders error. Thrown at once: retrying here does
 * not cure it; call again later.
 */
export class HomeUnreachableError extends UidError {
  override name = "HomeUnreachableError";
  constructor(
    readonly subject: string,
    readonly sequence: string,
    readonly home: string,
    cause?: unknown,
  ) {
    super(`${subject}: sequence ${JSON.stringify(sequence)} is served only by its home region ${home}, which cannot be reached (no responders)`, cause === undefined ? undefined : { cause });
  }
}

/** The Prefetcher was closed. */
export class PrefetcherClosedError extends UidError {
  override name = "PrefetcherClosedError";
  constructor() {
    super("prefetcher closed");
  }
}

/**
 * The error reply in a message's headers, or undefined when the message
 * is not one. Header names are matched case-insensitively: clients and
 * proxies in other languages may change their case.
 */
export function serviceErrorFromHeaders(subject: string, h: MsgHdrs | undefined): ServiceError | undefined {
  const codeText = header(h, ERROR_CODE_HEADER);
  if (codeText === "") {
    return undefined;
  }
  let description = header(h, ERROR_HEADER);
  const code = /^[0-9]{3}$/.test(codeText) ? Number(codeText) : CODE_INTERNAL;
  if (code === CODE_INTERNAL && codeText !== String(CODE_INTERNAL)) {
    description = `unparseable error code ${JSON.stringify(codeText)}: ${description}`;
  }
  switch (code) {
    case CODE_BAD_REQUEST:
      return new BadRequestError(subject, code, description);
    case CODE_NOT_FOUND:
      return new UnknownSequenceError(subject, code, description);
    case CODE_UNAVAILABLE: {
      const after = header(h, RETRY_AFTER_HEADER);
      return new UnavailableError(subject, code, description, /^[0-9]+$/.test(after) ? Number(after) : undefined);
    }
  }
  return new InternalError(subject, code, description);
}

/** A header's first value, "" when absent; the name in any case. */
export function header(h: MsgHdrs | undefined, name: string): string {
  if (h === undefined) {
    return "";
  }
  const exact = h.get(name);
  if (exact !== "") {
    return exact;
  }
  const lower = name.toLowerCase();
  for (const [k, v] of h) {
    if (k.toLowerCase() === lower && v.length > 0) {
      return v[0]!;
    }
  }
  return "";
}
