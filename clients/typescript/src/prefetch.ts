// The Prefetcher: the Go client's (natsio/uidclient/prefetch.go) local
// reserve of IDs. One background loop fetches batches whenever the
// reserve falls below its low-water mark; next() hands IDs out of it.

import type { IdKind, IdTypes } from "./codec.js";
import type { CallOptions, UidClient } from "./client.js";
import { deadlineOf, sleep } from "./client.js";
import { BadRequestError, GaveUpError, PrefetcherClosedError } from "./errors.js";

/** Options of a Prefetcher; every one has a default. */
export interface PrefetchOptions {
  /** IDs one refill asks for (default 8192); at most the service's largest batch. */
  batchSize?: number;
  /**
   * Below this many IDs the loop fetches batches until it holds at least
   * this many again (default batchSize); the reserve never exceeds
   * lowWater + batchSize.
   */
  lowWater?: number;
  /** Bounds one refill, retries included (default 5000 ms). */
  fetchTimeoutMs?: number;
}

/**
 * Keeps a reserve of IDs in the process. IDs come out increasing within a
 * batch, not across batches (successive batches may come from different
 * instances); at low load an ID's timestamp may be older than the moment
 * next() returns it. close() it to stop the background loop: the IDs left
 * are dropped, never reissued.
 */
export class Prefetcher<K extends IdKind = "string"> {
  readonly #client: UidClient<K>;
  readonly #batchSize: number;
  readonly #lowWater: number;
  readonly #fetchTimeoutMs: number;
  readonly #stop = new AbortController();
  #batches: IdTypes[K][][] = []; // the first is being handed out from #pos
  #pos = 0;
  #count = 0;
  #lastError: unknown;
  #closed = false;
  #waiters = new Set<() => void>(); // next() calls waiting for a refill or an error
  #wake: (() => void) | undefined; // resolves the loop's idle wait
  readonly #loop: Promise<void>;

  constructor(client: UidClient<K>, opts: PrefetchOptions = {}) {
    this.#client = client;
    this.#batchSize = opts.batchSize && opts.batchSize > 0 ? opts.batchSize : 8192;
    this.#lowWater = opts.lowWater && opts.lowWater > 0 ? opts.lowWater : this.#batchSize;
    this.#fetchTimeoutMs = opts.fetchTimeoutMs && opts.fetchTimeoutMs > 0 ? opts.fetchTimeoutMs : 5000;
    this.#loop = this.#run();
  }

  /** IDs in the reserve. */
  get available(): number {
    return this.#count;
  }

  /**
   * An ID from the reserve, waiting (within opts, default 5 s) for a
   * refill when it is empty. A refill refused with a 400 (batchSize above
   * the service's largest batch) is thrown at once; other refill failures
   * are retried in the background and given as the cause of the
   * GaveUpError when the wait ends first.
   */
  async next(opts: CallOptions = {}): Promise<IdTypes[K]> {
    const deadline = deadlineOf(opts, 5000);
    for (;;) {
      if (this.#closed) {
        throw new PrefetcherClosedError();
      }
      const id = this.#take();
      if (id !== undefined) {
        return id;
      }
      if (this.#lastError instanceof BadRequestError) {
        throw this.#lastError;
      }
      const left = deadline - Date.now();
      if (opts.signal?.aborted || left <= 0) {
        throw new GaveUpError("prefetcher", opts.signal?.aborted ? "aborted" : "deadline", 0, this.#lastError);
      }
      await this.#arrival(left, opts.signal);
    }
  }

  /** Stops the background loop and waits for it; the reserve is dropped. */
  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#batches = [];
      this.#count = 0;
      this.#stop.abort();
      this.#wake?.();
      this.#notify();
    }
    await this.#loop;
  }

  #take(): IdTypes[K] | undefined {
    const cur = this.#batches[0];
    if (cur === undefined) {
      return undefined;
    }
    const id = cur[this.#pos++]!;
    if (this.#pos === cur.length) {
      this.#batches.shift();
      this.#pos = 0;
    }
    this.#count--;
    if (this.#count === this.#lowWater - 1) {
      this.#wake?.();
    }
    return id;
  }

  /** Resolves when a refill arrives or fails, the wait ends, or the prefetcher closes. */
  #arrival(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        signal?.removeEventListener("abort", done);
        this.#waiters.delete(done);
        resolve();
      };
      const t = setTimeout(done, ms === Infinity ? 2 ** 31 - 1 : ms);
      signal?.addEventListener("abort", done, { once: true });
      this.#waiters.add(done);
      this.#wake?.();
    });
  }

  #notify(): void {
    for (const w of [...this.#waiters]) {
      w();
    }
  }

  async #run(): Promise<void> {
    let backoff = 50;
    while (!this.#closed) {
      if (this.#count >= this.#lowWater) {
        await new Promise<void>((resolve) => (this.#wake = resolve));
        this.#wake = undefined;
        continue;
      }
      try {
        const ids = await this.#client.batch(this.#batchSize, { signal: this.#stop.signal, timeoutMs: this.#fetchTimeoutMs });
        if (this.#closed) {
          return;
        }
        this.#batches.push(ids);
        this.#count += ids.length;
        this.#lastError = undefined;
        backoff = 50;
      } catch (e) {
        if (this.#closed) {
          return;
        }
        this.#lastError = e;
      }
      this.#notify();
      if (this.#lastError !== undefined) {
        await sleep(backoff, this.#stop.signal);
        backoff = Math.min(2 * backoff, 2000);
      }
    }
  }
}
