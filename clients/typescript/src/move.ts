// The move off a NATS server cut off from its cluster (docs/protocol.md,
// "Moving off a cut-off server"; every client keeps the same rule).

import type { NatsConnection } from "@nats-io/nats-core";
import type { NatsConnectionImpl } from "@nats-io/nats-core/internal";

/**
 * How many attempts in a row, on one connection, must end in no
 * responders before the client moves to another server: one such attempt
 * is a fleet restarting as often as a cut server, two in a row with no
 * reply between them seldom are.
 */
export const DEFAULT_MOVE_AFTER = 2;

/**
 * The least time between two moves (ms): a fleet with no instance at all
 * gets no responders on every server, and its clients then move at most
 * this often instead of after every two attempts.
 */
export const DEFAULT_MOVE_EVERY_MS = 5000;

/** Where the client logs its moves: console by default, or any logger with info (pino, winston, bunyan...). */
export interface MoveLogger {
  info(message: string): void;
}

/**
 * Moves a connection off a NATS server cut off from its cluster.
 *
 * NATS never does so on its own: the connection to that server is healthy,
 * only the server has lost its routes, so every request sent there gets no
 * responders until the cut heals. The client reports each attempt: those
 * that ended in no responders are counted, in a row; any reply, an error
 * status such as a 503 too, resets the count; a timeout neither counts nor
 * resets (it is ambiguous: a paused or slow server times out requests too,
 * and one cut off answers no responders once its routes are gone). When
 * the count reaches after, the connection knows more than one server and
 * reconnects at all (one made with reconnect: false would close instead),
 * and the last move was at least everyMs ago (monotonic clock; a reconnect
 * the Mover did not make, such as another client's move on the same
 * connection or nats.js's own reconnect, counts as a move and resets the
 * count), the connection is forced to reconnect (nats.js's
 * NatsConnection.reconnect(), which takes the next server of its pool) and
 * the count starts again. The call goes on
 * retrying within its deadline meanwhile; the requests in flight on the
 * connection fail as disconnected and are retried.
 *
 * The connection stays its owner's: it is only ever forced to reconnect,
 * never closed.
 */
export class Mover {
  readonly #nc: NatsConnection;
  readonly #after: number; // 0: never
  readonly #everyMs: number;
  readonly #logger: MoveLogger;
  #failures = 0; // attempts in a row with no responders
  #lastMove: number | undefined; // performance.now() of the last move
  #moves = 0;
  // The connection's reconnects (none counted for a Mover that never moves).
  readonly #seen: ReconnectCount;
  // The count the Mover expects: as it last saw it, plus one for each
  // move of its own. Another count is a reconnect it did not make
  // (another client's move on the connection, nats.js's own), see
  // #reconnected.
  #reconnects = 0;

  constructor(nc: NatsConnection, after: number, everyMs: number, logger: MoveLogger) {
    this.#nc = nc;
    this.#after = after;
    this.#everyMs = everyMs;
    this.#logger = logger;
    this.#seen = after === 0 ? { n: 0 } : reconnectCount(nc);
    this.#reconnects = this.#seen.n;
  }

  /** An attempt got a reply (an error status is a reply). */
  replied(): void {
    this.#failures = 0;
  }

  /** An attempt ended in no responders. Tells whether it moved the connection. */
  noResponders(): boolean {
    if (this.#after === 0 || ++this.#failures < this.#after) {
      return false;
    }
    const now = performance.now();
    const pool = poolOf(this.#nc);
    if (
      this.#reconnected(now) ||
      (this.#lastMove !== undefined && now - this.#lastMove < this.#everyMs) ||
      !pool.connected ||
      !pool.reconnects ||
      pool.servers < 2
    ) {
      return false;
    }
    const count = this.#failures;
    const left = serverOnly(this.#nc.getServer());
    const name = this.#nc.info?.server_name;
    this.#lastMove = now;
    this.#failures = 0;
    this.#moves++;
    this.#reconnects++;
    // The reconnect runs on its own; the promise only rejects when the
    // connection closed or is draining meanwhile, when there is nothing
    // to move.
    this.#nc.reconnect().catch(() => {});
    this.#logger.info(
      "uid-dispenser client: no dispenser answers through this NATS server; moving to another server of the connection's pool" +
        ` event=client.moved server=${left}${name ? ` server_name=${name}` : ""} failed_attempts=${count}`,
    );
    return true;
  }

  /** How many times the connection was moved. */
  get moves(): number {
    return this.#moves;
  }

  /**
   * Whether the connection reconnected without a move of this Mover's
   * since it last looked; if so, that reconnect is taken for a move: the
   * count so far was of attempts on the server the connection left, and
   * everyMs runs from now. Two clients of two fleets sharing a connection
   * each have a Mover: without this, the second moved the connection again
   * a few milliseconds after the first, off the server just reached, on
   * the no responders it had counted before the first move (the fault
   * harness, Go).
   */
  #reconnected(now: number): boolean {
    const seen = this.#seen.n;
    if (seen === this.#reconnects) {
      return false;
    }
    this.#reconnects = seen;
    this.#lastMove = now;
    this.#failures = 0;
    return true;
  }
}

/** A connection's reconnects since the first Mover on it was made. */
interface ReconnectCount {
  n: number;
}

const reconnectCounts = new WeakMap<NatsConnection, ReconnectCount>();

/**
 * The reconnects of nc, counted once per connection for all the Movers on
 * it: nats.js keeps no such count (its stats are bytes and messages), so
 * one loop reads the connection's status events, from the first Mover's
 * making until the connection closes (which ends the iterator).
 */
function reconnectCount(nc: NatsConnection): ReconnectCount {
  let count = reconnectCounts.get(nc);
  if (count === undefined) {
    const c: ReconnectCount = { n: 0 };
    count = c;
    reconnectCounts.set(nc, c);
    const statuses = nc.status();
    (async () => {
      for await (const s of statuses) {
        if (s.type === "reconnect") {
          c.n++;
        }
      }
    })().catch(() => {});
  }
  return count;
}

/**
 * Whether nc is connected, whether it reconnects (a connection made with
 * reconnect: false would close instead), and how many servers its pool
 * holds. nats.js keeps the pool (the servers given and those the cluster
 * advertises) and its options in its connection's protocol handler, typed
 * in @nats-io/nats-core/internal but not on NatsConnection; another
 * implementation of NatsConnection counts the servers its server
 * advertises.
 */
function poolOf(nc: NatsConnection): { connected: boolean; reconnects: boolean; servers: number } {
  const protocol = (nc as Partial<NatsConnectionImpl>).protocol;
  if (protocol !== undefined && typeof protocol.servers?.length === "function") {
    return { connected: protocol.connected, reconnects: protocol.options?.reconnect !== false, servers: protocol.servers.length() };
  }
  return { connected: !nc.isClosed(), reconnects: true, servers: nc.info?.connect_urls?.length ?? 1 };
}

/**
 * A server's address as a URL without user information (a password or a
 * token may sit there): nats://host:port, as the other clients log it.
 */
export function serverOnly(server: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(server)?.[0] ?? "nats://";
  const rest = server.slice(server.startsWith(scheme) ? scheme.length : 0);
  return scheme + rest.slice(rest.lastIndexOf("@") + 1);
}
