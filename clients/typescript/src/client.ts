// The client: the Go client's (natsio/uidclient) protocol and retry rules
// in JavaScript's idiom: promises, AbortSignal and deadlines in place of
// contexts, IDs as strings or bigints.

import { headers as newHeaders } from "@nats-io/nats-core";
import type { Msg, MsgHdrs, NatsConnection } from "@nats-io/nats-core";
import { decodeBinary, decodeDecimalLines, decodeRanges, expandRanges, fromBase32, idAs, parseDecimal, quote, type IdKind, type IdTypes } from "./codec.js";
import {
  BadRequestError,
  GaveUpError,
  header,
  HomeUnreachableError,
  ProtocolError,
  serviceErrorFromHeaders,
  UidError,
  UnavailableError,
  UnknownSequenceError,
} from "./errors.js";
import {
  BINARY_ID_WIDTH,
  CODE_BAD_REQUEST,
  DEFAULT_SUBJECT_PREFIX,
  ENCODING_BASE32,
  ENCODING_BINARY,
  ENCODING_DECIMAL,
  ENCODING_HEADER,
  ENCODING_RANGES,
  INSTANCE_HEADER,
  LAYOUT_HEADER,
  seqSubject,
  subject,
} from "./protocol.js";
import { DEFAULT_MOVE_AFTER, DEFAULT_MOVE_EVERY_MS, Mover, type MoveLogger } from "./move.js";

/** Options of a UidClient; every one has a default. */
export interface ClientOptions<K extends IdKind = "string"> {
  /** IDs (and sequence numbers) as "string" (decimal, the default) or "bigint". Never number: IDs exceed 2^53. */
  ids?: K;
  /** Subjects are `<prefix>.next` etc.; default "uid" (DISPENSER_SUBJECT_PREFIX). */
  subjectPrefix?: string;
  /**
   * Bounds one attempt (default 1000 ms). An instance that dies holding a
   * request never answers it; the client then asks again, and another
   * instance (or the restarted one) answers.
   */
  attemptTimeoutMs?: number;
  /** Bounds of the pause between attempts: doubled each time, with jitter (defaults 2 and 250 ms). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /**
   * How long a sequence call goes on asking while its home region cannot
   * be reached (no responders, and the instances reached name the home)
   * before it throws a HomeUnreachableError (default 2000 ms: longer than
   * the second nats-server waits before it reconnects a gateway link
   * whose node was lost). As the Go client's HomeWait.
   */
  homeWaitMs?: number;
  /**
   * A call's deadline when it gives no timeoutMs, deadline or signal of its
   * own (default 5000 ms; Infinity: retry until the signal aborts).
   */
  timeoutMs?: number;
  /**
   * How many attempts in a row ending in no responders force the
   * connection onto another server of its pool (default 2): its server may
   * be cut off from the cluster, which NATS never moves a connection off.
   * Any reply resets the count; a timeout neither counts nor resets it.
   * 0: never move.
   */
  moveAfter?: number;
  /**
   * The least time between two moves of the connection (default 5000 ms,
   * monotonic clock). A reconnect the client did not make (another
   * client's move of a shared connection) counts as a move.
   */
  moveEveryMs?: number;
  /** Where each move is logged, at info (default console). */
  logger?: MoveLogger;
}

/** Bounds of one call, over all its attempts. */
export interface CallOptions {
  /** Aborting it ends the call with a GaveUpError (reason "aborted"). */
  signal?: AbortSignal;
  /** The call gives up this many ms from now (a GaveUpError, reason "deadline"). */
  timeoutMs?: number;
  /** Or at this instant (a Date or epoch ms). The earlier of the two counts. */
  deadline?: Date | number;
}

/**
 * The encoding on the wire (Uid-Encoding), which changes nothing of what
 * a call returns: `binary` (8 bytes per ID, the batch default), `ranges`
 * (16 bytes per run of consecutive IDs, expanded here: the smallest reply
 * for large batches, from dispensers that have it), `base32` (13
 * Crockford characters per ID, newline-separated) or `decimal` (the next
 * default). On next and seqNext binary and ranges are answered as decimal.
 */
export type WireEncoding = "decimal" | "binary" | "base32" | "ranges";

/** Options of the calls that hand out IDs or numbers. */
export interface WireOptions extends CallOptions {
  encoding?: WireEncoding;
}

/** Options of parse. */
export interface ParseOptions extends CallOptions {
  /**
   * Decode with this layout, not the fleet's: a preset (`uidgenerator`,
   * `jssafe`) or `T/W/S@epoch`, sent as the Uid-Layout header. Dispensers
   * older than issue 20's item 3 ignore it.
   */
  layout?: string;
}

/** UidGenerator's parseUID JSON as the dispenser sends it: every value a string. */
export interface ParsedJSON {
  UID: string;
  timestamp: string; // "yyyy-MM-dd HH:mm:ss", UTC
  workerId: string;
  sequence: string;
  /** Set for a negative (wrapped) UidGenerator ID, saying so. */
  wrapped?: string;
}

/** An ID split into its fields. */
export interface Parts<T> {
  /** The ID; negative (signed) only for a wrapped UidGenerator ID. */
  id: T;
  /** The second it was issued in. */
  time: Date;
  workerId: number;
  sequence: number;
  /** The reply as sent. */
  json: ParsedJSON;
}

/** A sequence's numbers with the instance that handed them out (they increase per instance). */
export interface FromInstance<V> {
  value: V;
  /** Uid-Instance: the micro instance ID; "" from a server that does not send it. */
  instance: string;
}

/** What the client absorbed by retrying; callers see only the outcome. */
export interface ClientStats {
  requests: number; // calls (each may take several attempts)
  retries: number; // attempts after the first
  unavailable: number; // 503 replies retried
  noResponders: number; // attempts no dispenser was subscribed for
  timedOut: number; // attempts that timed out
  moves: number; // times the connection was forced off a server that kept failing (cut off from its cluster)
}

const seqName = /^[A-Za-z0-9_-]+$/;

/**
 * Asks dispensers for IDs over NATS. It retries, until the call's
 * deadline or signal, when no dispenser is subscribed (all down or
 * restarting), when one answers 503, and when an attempt times out:
 * retrying an ID request is always safe, an ID in a lost reply is never
 * issued again. 400, 404 and 500 replies are thrown at once as
 * BadRequestError, UnknownSequenceError and InternalError. When attempts
 * keep failing on a server cut off from its cluster, it moves the
 * connection to another server of its pool (moveAfter, moveEveryMs).
 */
export class UidClient<K extends IdKind = "string"> {
  readonly #nc: NatsConnection;
  readonly #kind: IdKind;
  readonly #prefix: string;
  readonly #attemptTimeoutMs: number;
  readonly #minBackoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #homeWaitMs: number;
  readonly #timeoutMs: number;
  readonly #stats: Omit<ClientStats, "moves"> = { requests: 0, retries: 0, unavailable: 0, noResponders: 0, timedOut: 0 };
  readonly #mover: Mover;

  constructor(nc: NatsConnection, opts: ClientOptions<K> = {}) {
    this.#nc = nc;
    this.#kind = opts.ids ?? "string";
    if (this.#kind !== "string" && this.#kind !== "bigint") {
      throw new TypeError(`ids must be "string" or "bigint", not ${JSON.stringify(this.#kind)}`);
    }
    this.#prefix = opts.subjectPrefix || DEFAULT_SUBJECT_PREFIX;
    this.#attemptTimeoutMs = positive(opts.attemptTimeoutMs, 1000);
    this.#minBackoffMs = positive(opts.minBackoffMs, 2);
    this.#maxBackoffMs = Math.max(positive(opts.maxBackoffMs, 250), this.#minBackoffMs);
    this.#homeWaitMs = positive(opts.homeWaitMs, 2000);
    this.#timeoutMs = positive(opts.timeoutMs, 5000);
    const moveAfter = opts.moveAfter ?? DEFAULT_MOVE_AFTER;
    if (!Number.isSafeInteger(moveAfter) || moveAfter < 0) {
      throw new RangeError(`moveAfter must be 0 (never) or a positive integer, not ${moveAfter}`);
    }
    this.#mover = new Mover(nc, moveAfter, positive(opts.moveEveryMs, DEFAULT_MOVE_EVERY_MS), opts.logger ?? console);
  }

  /** One new ID (decimal on the wire unless opts.encoding says base32). */
  async next(opts: WireOptions = {}): Promise<IdTypes[K]> {
    const s = subject(this.#prefix, "next");
    const enc = opts.encoding ?? ENCODING_DECIMAL;
    return this.#as(one(await this.#request(s, undefined, wireHeaders(enc), opts), s, enc));
  }

  /** n new IDs, increasing, in one request (binary on the wire unless opts.encoding says otherwise). */
  async batch(n: number, opts: WireOptions = {}): Promise<IdTypes[K][]> {
    const ids = await this.#batch(subject(this.#prefix, "batch"), n, opts);
    return ids.value;
  }

  /** The next number of the sequence name; UnknownSequenceError when it was declared nowhere. */
  async seqNext(name: string, opts: WireOptions = {}): Promise<IdTypes[K]> {
    return (await this.seqNextFrom(name, opts)).value;
  }

  /** seqNext with the instance that answered. */
  async seqNextFrom(name: string, opts: WireOptions = {}): Promise<FromInstance<IdTypes[K]>> {
    const s = seqSubject(this.#prefix, checkSeqName(name, this.#prefix), "next");
    const enc = opts.encoding ?? ENCODING_DECIMAL;
    const reply = await this.#request(s, undefined, wireHeaders(enc), opts);
    return { value: this.#as(one(reply, s, enc)), instance: header(reply.headers, INSTANCE_HEADER) };
  }

  /** The next n numbers of the sequence name, increasing, in one request. */
  async seqBatch(name: string, n: number, opts: WireOptions = {}): Promise<IdTypes[K][]> {
    return (await this.seqBatchFrom(name, n, opts)).value;
  }

  /** seqBatch with the instance that answered. */
  async seqBatchFrom(name: string, n: number, opts: WireOptions = {}): Promise<FromInstance<IdTypes[K][]>> {
    return this.#batch(seqSubject(this.#prefix, checkSeqName(name, this.#prefix), "batch"), n, opts);
  }

  /**
   * Splits an ID into its time, worker ID and sequence with the fleet's
   * layout, or with opts.layout. id is a decimal string or a bigint
   * (negative only for a wrapped UidGenerator ID under its layout).
   */
  async parse(id: string | bigint, opts: ParseOptions = {}): Promise<Parts<IdTypes[K]>> {
    const s = subject(this.#prefix, "parse");
    let h: MsgHdrs | undefined;
    if (opts.layout !== undefined) {
      h = newHeaders();
      h.set(LAYOUT_HEADER, opts.layout);
    }
    const reply = await this.#request(s, String(id), h, opts);
    return this.#parts(reply.data, s);
  }

  /** The client's counters since it was made (a copy). */
  stats(): ClientStats {
    return { ...this.#stats, moves: this.#mover.moves };
  }

  async #batch(s: string, n: number, opts: WireOptions): Promise<FromInstance<IdTypes[K][]>> {
    if (!Number.isSafeInteger(n) || n < 1) {
      throw new BadRequestError(s, CODE_BAD_REQUEST, `count ${n}: ask for at least 1 ID`);
    }
    const enc = opts.encoding ?? ENCODING_BINARY;
    const reply = await this.#request(s, String(n), wireHeaders(enc), opts);
    let ids: bigint[];
    if (enc === ENCODING_RANGES) {
      let runs;
      try {
        runs = decodeRanges(reply.data, n);
      } catch (e) {
        throw new ProtocolError(`${s}: ${(e as Error).message}`, { cause: e });
      }
      ids = expandRanges(runs);
      if (ids.length !== n) {
        throw new ProtocolError(`${s}: asked for ${n} IDs, the ranges reply holds ${ids.length}`);
      }
    } else if (enc === ENCODING_BINARY) {
      if (reply.data.length !== n * BINARY_ID_WIDTH) {
        throw new ProtocolError(`${s}: asked for ${n} IDs, the reply holds ${reply.data.length} bytes`);
      }
      ids = decodeBinary(reply.data);
    } else {
      const text = new TextDecoder().decode(reply.data);
      ids = enc === ENCODING_BASE32 ? decodeBase32Lines(text, s) : decodeDecimalLines(text);
      if (ids.length !== n) {
        throw new ProtocolError(`${s}: asked for ${n} IDs, the reply holds ${ids.length}`);
      }
    }
    return { value: ids.map((id) => this.#as(id)), instance: header(reply.headers, INSTANCE_HEADER) };
  }

  #as(n: bigint): IdTypes[K] {
    return idAs(this.#kind, n) as IdTypes[K];
  }

  #parts(data: Uint8Array, s: string): Parts<IdTypes[K]> {
    const text = new TextDecoder().decode(data);
    let j: ParsedJSON;
    try {
      // Every value is a string: JSON.parse loses nothing here.
      j = JSON.parse(text) as ParsedJSON;
    } catch (e) {
      throw new ProtocolError(`${s}: reply ${quote(text, 120)} is not JSON`, { cause: e });
    }
    const time = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/.exec(String(j?.timestamp));
    const uid = /^-?[0-9]{1,20}$/.test(String(j?.UID)) ? BigInt(j.UID) : undefined;
    const workerId = Number(j?.workerId);
    const sequence = Number(j?.sequence);
    if (!time || uid === undefined || !Number.isSafeInteger(workerId) || !Number.isSafeInteger(sequence)) {
      throw new ProtocolError(`${s}: reply ${quote(text, 120)} is not parseUID's JSON`);
    }
    const [, y, mo, d, h, mi, sec] = time.map(Number) as number[];
    return {
      id: this.#as(uid),
      time: new Date(Date.UTC(y!, mo! - 1, d!, h!, mi!, sec!)),
      workerId,
      sequence,
      json: j,
    };
  }

  /**
   * Sends a request until a dispenser answers it, the error is final, or
   * the call's deadline or signal ends it; the back-off is the Go
   * client's (doubling from minBackoffMs to maxBackoffMs, jittered over
   * its upper half).
   */
  async #request(s: string, payload: string | undefined, h: MsgHdrs | undefined, opts: CallOptions): Promise<Msg> {
    const deadline = deadlineOf(opts, this.#timeoutMs);
    const signal = opts.signal;
    this.#stats.requests++;
    let backoff = this.#minBackoffMs;
    let last: unknown;
    // Only sequences have homes (fleets of regions): see #homeUnreachable.
    let homeAsked = this.#seqNameOf(s) === undefined;
    // Set once the instances named the home; the time no responders began.
    let home: HomeUnreachableError | undefined;
    let homeSince: number | undefined;
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) {
        throw new GaveUpError(s, "aborted", attempt - 1, last ?? signal.reason);
      }
      if (attempt > 1) {
        this.#stats.retries++;
      }
      const timeout = Math.max(1, Math.min(this.#attemptTimeoutMs, deadline - Date.now()));
      let err: unknown;
      try {
        const reply = await abortable(this.#nc.request(s, payload, { timeout, headers: h }), signal);
        if (reply !== aborted) {
          this.#mover.replied();
        }
        err = reply === aborted ? aborted : serviceErrorFromHeaders(s, reply.headers);
        if (err === undefined) {
          return reply as Msg;
        }
      } catch (e) {
        err = e;
        // A timeout neither counts toward a move nor resets the count (Mover).
        if (isNoResponders(e)) {
          this.#mover.noResponders();
        }
      }
      if (err === aborted) {
        throw new GaveUpError(s, "aborted", attempt, last ?? signal?.reason);
      }
      const noResponders = isNoResponders(err);
      if (!homeAsked && noResponders) {
        homeAsked = true;
        const answer = await this.#homeUnreachable(s, err, deadline);
        if (answer instanceof HomeUnreachableError) {
          home = answer;
        } else if (answer !== undefined) {
          this.#count(err);
          throw answer;
        }
      }
      // The home is unreachable for as long as no responders lasts without a break.
      if (home !== undefined) {
        if (!noResponders) {
          homeSince = undefined;
        } else if (homeSince === undefined) {
          homeSince = Date.now();
        } else if (Date.now() - homeSince >= this.#homeWaitMs) {
          this.#count(err);
          throw home;
        }
      }
      if (!retryable(err)) {
        throw err;
      }
      this.#count(err);
      const left = deadline - Date.now();
      if (left <= 0) {
        if (home !== undefined && noResponders) {
          throw home;
        }
        // An attempt the deadline cut short says less than the failure
        // before it (a 503, no responders), as in the Go client.
        throw new GaveUpError(s, "deadline", attempt, isTimeout(err) && last !== undefined ? last : err);
      }
      last = err;
      // An instance at its capacity says when it has IDs again: asking
      // sooner only adds load, so its Uid-Retry-After-Ms is a floor.
      const floor = err instanceof UnavailableError ? (err.retryAfterMs ?? 0) : 0;
      if (floor >= left) {
        // No instance will have IDs before the deadline: say so now.
        throw new GaveUpError(s, "deadline", attempt, err);
      }
      const pause = Math.min(Math.max(backoff / 2 + Math.random() * (backoff / 2), floor), left);
      backoff = Math.min(2 * backoff, this.#maxBackoffMs);
      if ((await sleep(pause, signal)) === aborted) {
        throw new GaveUpError(s, "aborted", attempt, last);
      }
    }
  }

  /** The sequence a subject <prefix>.seq.<name>.next|batch names, else undefined. */
  #seqNameOf(s: string): string | undefined {
    const m = /^seq\.([A-Za-z0-9_-]+)\.(next|batch)$/.exec(s.startsWith(this.#prefix + ".") ? s.slice(this.#prefix.length + 1) : "");
    return m?.[1];
  }

  /**
   * The error of a sequence request that met no responders (cause), when
   * the instances reached name its home (uid.seq.<name>.home, asked on
   * this failure only): in a fleet of regions only the home region's
   * instances serve a sequence, so none of them can be reached. A 404
   * there is the sequence homed nowhere. Undefined when nobody answers
   * (no instance at all, or a fleet without regions): retried as any
   * request. As the Go client does.
   */
  async #homeUnreachable(s: string, cause: unknown, deadline: number): Promise<UidError | undefined> {
    const name = this.#seqNameOf(s)!;
    const timeout = Math.max(1, Math.min(this.#attemptTimeoutMs, deadline - Date.now()));
    try {
      const reply = await this.#nc.request(seqSubject(this.#prefix, name, "home"), undefined, { timeout });
      const err = serviceErrorFromHeaders(s, reply.headers);
      if (err instanceof UnknownSequenceError) {
        return err;
      }
      const home = new TextDecoder().decode(reply.data);
      return err === undefined && home !== "" ? new HomeUnreachableError(s, name, home.slice(0, 64), cause) : undefined;
    } catch {
      return undefined;
    }
  }

  #count(err: unknown): void {
    if (err instanceof UnavailableError) {
      this.#stats.unavailable++;
    } else if (isNoResponders(err)) {
      this.#stats.noResponders++;
    } else if (isTimeout(err)) {
      this.#stats.timedOut++;
    }
  }
}

/**
 * The failures another attempt may cure: nobody subscribed (instances
 * restarting), 503, an attempt that timed out (the instance died holding
 * the request), and a request cut by a lost connection (nats.js
 * reconnects). nats.js errors are told apart by name, not instanceof, so
 * that a second copy of @nats-io/nats-core in an application's tree does
 * not change the outcome.
 */
function retryable(err: unknown): boolean {
  if (err instanceof UnavailableError || isNoResponders(err) || isTimeout(err)) {
    return true;
  }
  return err instanceof Error && err.name === "RequestError" && err.cause === undefined && /disconnected/.test(err.message);
}

function isNoResponders(err: unknown): boolean {
  if (!(err instanceof Error)) {
    return false;
  }
  const cause = err.cause;
  return err.name === "NoResponders" || (cause instanceof Error && cause.name === "NoResponders");
}

function isTimeout(err: unknown): boolean {
  return err instanceof Error && err.name === "TimeoutError";
}

// aborted is what abortable and sleep resolve to when the signal aborts.
const aborted = Symbol("aborted");

/**
 * p, or aborted as soon as signal aborts. An abandoned request still ends
 * by its own attempt timeout; its outcome is dropped.
 */
function abortable<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T | typeof aborted> {
  if (signal === undefined) {
    return p;
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      p.catch(() => {});
      resolve(aborted);
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

/**
 * The instant (epoch ms) a call must end by: the earlier of its timeoutMs
 * and deadline, or defaultMs from now when it gives neither nor a signal
 * (Infinity when it gives only a signal).
 */
export function deadlineOf(opts: CallOptions, defaultMs: number): number {
  let d = opts.timeoutMs !== undefined ? Date.now() + opts.timeoutMs : Infinity;
  if (opts.deadline !== undefined) {
    d = Math.min(d, typeof opts.deadline === "number" ? opts.deadline : opts.deadline.getTime());
  }
  return d === Infinity && opts.signal === undefined ? Date.now() + defaultMs : d;
}

/** Waits ms, or until signal aborts (then resolves to aborted). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void | typeof aborted> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve(aborted);
      return;
    }
    const onAbort = () => {
      clearTimeout(t);
      resolve(aborted);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The one decimal number in a reply. */
function one(reply: Msg, s: string, enc: WireEncoding): bigint {
  const text = new TextDecoder().decode(reply.data);
  return enc === ENCODING_BASE32 ? decodeBase32Lines(text, s)[0]! : parseDecimal(text, `${s}: reply`);
}

/** The headers that ask for enc (none for decimal); any other value is refused here, not sent. */
function wireHeaders(enc: WireEncoding): MsgHdrs | undefined {
  if (enc === ENCODING_DECIMAL) {
    return undefined;
  }
  if (enc !== ENCODING_BINARY && enc !== ENCODING_BASE32 && enc !== ENCODING_RANGES) {
    throw new TypeError(`encoding must be "decimal", "binary", "base32" or "ranges", not ${JSON.stringify(enc)}`);
  }
  const h = newHeaders();
  h.set(ENCODING_HEADER, enc);
  return h;
}

/** The IDs of a base32 reply: 13-character lines. */
function decodeBase32Lines(text: string, s: string): bigint[] {
  try {
    return text === "" ? [] : text.split("\n").map((line) => fromBase32(line));
  } catch (e) {
    throw new ProtocolError(`${s}: reply ${quote(text, 60)} is not base32 IDs`, { cause: e });
  }
}

function checkSeqName(name: string, prefix: string): string {
  if (!seqName.test(name)) {
    throw new BadRequestError(
      seqSubject(prefix, "<name>", "next"),
      CODE_BAD_REQUEST,
      `sequence name ${quote(name)}: names are letters, digits, - and _`,
    );
  }
  return name;
}

function positive(v: number | undefined, def: number): number {
  return v !== undefined && v > 0 ? v : def;
}
