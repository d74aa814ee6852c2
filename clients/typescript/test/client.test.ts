// Every call of the client against the real dispenser binary on a real
// nats-server, its errors, its give-up rules, and uniqueness of all it
// hands out under concurrency.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { headers as newHeaders, type Msg, type NatsConnection } from "@nats-io/nats-core";
import {
  BadRequestError,
  encodeRanges,
  ENCODING_HEADER,
  ProtocolError,
  GaveUpError,
  HomeUnreachableError,
  LAYOUT_HEADER,
  Prefetcher,
  PrefetcherClosedError,
  toBase32,
  UidClient,
  UnknownSequenceError,
} from "../src/index.js";
import { connectTo, startDispenser, startNatsServer, waitFor, type Dispenser, type NatsServer } from "./env.js";

// The dispenser runs on a prefix of its own (the client's subjectPrefix
// option) and the default 31/10/22 layout, whose IDs are all above 2^53.
const prefix = "tsuid";
let server: NatsServer;
let dispenser: Dispenser;
let nc: NatsConnection;

before(async () => {
  server = await startNatsServer();
  dispenser = await startDispenser(server.url, {
    DISPENSER_SUBJECT_PREFIX: prefix,
    DISPENSER_SEQUENCES: "orders,invoices=1000000",
  });
  nc = await connectTo(server.url);
});

after(async () => {
  await nc?.close();
  await dispenser?.kill("SIGTERM");
  await server?.stop();
});

const isDecimal = /^[1-9][0-9]*$/;

describe("IDs", () => {
  test("next gives a decimal string by default, a bigint by option", async () => {
    const c = new UidClient(nc, { subjectPrefix: prefix });
    const b = new UidClient(nc, { subjectPrefix: prefix, ids: "bigint" });
    const s = await c.next();
    const n = await b.next();
    assert.equal(typeof s, "string");
    assert.match(s, isDecimal);
    assert.equal(typeof n, "bigint");
    // Above 2^53: a Number would not hold them.
    assert.ok(BigInt(s) > 2n ** 53n && n > 2n ** 53n, `${s} ${n}`);
    assert.ok(n > BigInt(s), "one instance's IDs increase");
  });

  test("batch decodes binary replies into increasing IDs", async () => {
    const c = new UidClient(nc, { subjectPrefix: prefix });
    const b = new UidClient(nc, { subjectPrefix: prefix, ids: "bigint" });
    const ids = await c.batch(1000);
    assert.equal(ids.length, 1000);
    for (let i = 1; i < ids.length; i++) {
      assert.ok(BigInt(ids[i]!) > BigInt(ids[i - 1]!), `${ids[i]} after ${ids[i - 1]}`);
    }
    const big = await b.batch(3);
    assert.equal(big.length, 3);
    assert.ok(big.every((id) => typeof id === "bigint" && id > BigInt(ids[999]!)));
  });

  test("parse splits an ID with the fleet's layout", async () => {
    const c = new UidClient(nc, { subjectPrefix: prefix });
    const b = new UidClient(nc, { subjectPrefix: prefix, ids: "bigint" });
    const id = await c.next();
    const p = await c.parse(id);
    assert.equal(p.id, id);
    assert.ok(Math.abs(p.time.getTime() - Date.now()) < 60_000, p.time.toISOString());
    // 31/10/22: the fields put back together are the ID.
    assert.equal((BigInt(Math.floor((p.time.getTime() - Date.UTC(2026, 0, 1)) / 1000)) << 32n) | (BigInt(p.workerId) << 22n) | BigInt(p.sequence), BigInt(id));
    const q = await b.parse(BigInt(id));
    assert.equal(q.id, BigInt(id));
    assert.deepEqual(q.json, p.json);
  });

  test("every wire encoding gives the same kind of IDs, increasing and distinct", async () => {
    const c = new UidClient(nc, { subjectPrefix: prefix, ids: "bigint" });
    const seen = new Set<bigint>();
    let last = 0n;
    const take = (ids: bigint[]) => {
      for (const id of ids) {
        assert.ok(id > last, `${id} after ${last}`);
        assert.ok(!seen.has(id), `${id} twice`);
        seen.add(id);
        last = id;
      }
    };
    for (const encoding of ["decimal", "base32"] as const) {
      take([await c.next({ encoding })]);
    }
    for (const encoding of ["binary", "base32", "decimal"] as const) {
      take(await c.batch(500, { encoding }));
    }
    assert.equal(seen.size, 1502);
    // Base32 on the wire reaches the caller as the same numbers as binary.
    const s = await c.seqNextFrom("invoices", { encoding: "base32" });
    const more = await c.seqBatch("invoices", 3, { encoding: "base32" });
    assert.deepEqual(more, [1n, 2n, 3n].map((d) => s.value + d));
    await assert.rejects(c.next({ encoding: "bin" as "binary" }), TypeError);
  });

  test("ranges on the wire: runs expanded into the batch asked for", async () => {
    // A plain responder sends runs made by hand: what the client does
    // with them, whatever the dispenser at hand supports.
    const runs = [
      { first: 1000n, count: 3n },
      { first: 5000n, count: 2n },
    ];
    const sub = nc.subscribe("ranges.batch", {
      callback: (_err, m) => {
        const asked = m.headers?.get(ENCODING_HEADER);
        m.respond(asked === "ranges" && m.string() === "5" ? encodeRanges(runs) : encodeRanges(runs.slice(1)));
      },
    });
    try {
      const r = new UidClient(nc, { subjectPrefix: "ranges", ids: "bigint" });
      assert.deepEqual(await r.batch(5, { encoding: "ranges" }), [1000n, 1001n, 1002n, 5000n, 5001n]);
      // A reply of fewer IDs than asked is a ProtocolError, not a short batch.
      await assert.rejects(r.batch(4, { encoding: "ranges" }), ProtocolError);
    } finally {
      sub.unsubscribe();
    }
    // And from the live dispenser.
    const c = new UidClient(nc, { subjectPrefix: prefix, ids: "bigint" });
    const ids = await c.batch(3000, { encoding: "ranges" });
    assert.equal(ids.length, 3000);
    for (let i = 1; i < ids.length; i++) {
      assert.ok(ids[i]! > ids[i - 1]!, `${ids[i]} after ${ids[i - 1]}`);
    }
  });

  test("parse takes a base32 ID as the server reads it", async () => {
    const c = new UidClient(nc, { subjectPrefix: prefix });
    const id = await c.next();
    const p = await c.parse(toBase32(id).toLowerCase());
    assert.equal(p.id, id);
  });

  test("sequences: next and batch, increasing, with the instance", async () => {
    const c = new UidClient(nc, { subjectPrefix: prefix, ids: "bigint" });
    const first = await c.seqNextFrom("invoices");
    assert.ok(first.value >= 1_000_000n, String(first.value));
    assert.notEqual(first.instance, "");
    const more = await c.seqBatchFrom("invoices", 5);
    assert.deepEqual(more.value, [1n, 2n, 3n, 4n, 5n].map((d) => first.value + d));
    assert.equal(more.instance, first.instance);
    const s = new UidClient(nc, { subjectPrefix: prefix });
    assert.equal(await s.seqNext("invoices"), String(first.value + 6n));
    assert.deepEqual(await s.seqBatch("invoices", 2), [String(first.value + 7n), String(first.value + 8n)]);
  });
});

describe("errors", () => {
  test("a bad count is refused before any request", async () => {
    const c = new UidClient(nc, { subjectPrefix: prefix });
    for (const n of [0, -1, 1.5, NaN]) {
      await assert.rejects(c.batch(n), BadRequestError, String(n));
      await assert.rejects(c.seqBatch("orders", n), BadRequestError, String(n));
    }
    await assert.rejects(c.seqNext("a.b"), BadRequestError);
    await assert.rejects(c.seqNext(""), BadRequestError);
    assert.equal(c.stats().requests, 0);
  });

  test("the server's 400 comes back at once, not retried", async () => {
    const c = new UidClient(nc, { subjectPrefix: prefix });
    await assert.rejects(c.batch(200_000), (e: unknown) => {
      assert.ok(e instanceof BadRequestError);
      assert.equal(e.code, 400);
      assert.match(e.description, /too large: at most 100000/);
      return true;
    });
    await assert.rejects(c.parse("abc"), (e: unknown) => e instanceof BadRequestError && /not a decimal number/.test(e.description));
    await assert.rejects(c.parse("9223372036854775808"), BadRequestError);
    assert.equal(c.stats().retries, 0);
  });

  test("an undeclared sequence is an UnknownSequenceError, not retried", async () => {
    const c = new UidClient(nc, { subjectPrefix: prefix });
    await assert.rejects(c.seqNext("nosuch"), (e: unknown) => e instanceof UnknownSequenceError && e.code === 404 && /unknown sequence "nosuch"/.test(e.description));
    await assert.rejects(c.seqBatch("nosuch", 3), UnknownSequenceError);
    assert.equal(c.stats().retries, 0);
  });

  test("with nobody subscribed the client retries until the deadline", async () => {
    const c = new UidClient(nc, { subjectPrefix: "nobody" });
    const begin = Date.now();
    await assert.rejects(c.next({ timeoutMs: 300 }), (e: unknown) => {
      assert.ok(e instanceof GaveUpError, String(e));
      assert.equal(e.reason, "deadline");
      assert.ok(e.attempts > 3, `${e.attempts} attempts`);
      assert.equal((e.cause as Error).name, "RequestError");
      return true;
    });
    // Asked until the deadline, not given up early. No upper bound: on a
    // loaded machine the last attempt may end well past it.
    const took = Date.now() - begin;
    assert.ok(took >= 290, `gave up after ${took} ms, the deadline was 300 ms`);
    assert.ok(c.stats().noResponders > 3, JSON.stringify(c.stats()));
  });

  test("a homed sequence whose home cannot be reached is a HomeUnreachableError naming it, after homeWaitMs", async () => {
    // A fleet of regions as a client in a region cut off from east sees
    // it: nobody serves orders' next and batch here, the local instances
    // answer uid.seq.<name>.home (east for orders, 404 for a name homed nowhere).
    const p = "homed";
    const subs = [
      nc.subscribe(`${p}.seq.orders.home`, { callback: (_e, m) => void m.respond("east") }),
      nc.subscribe(`${p}.seq.nosuch.home`, {
        callback: (_e, m) => {
          const h = newHeaders();
          h.set("Nats-Service-Error-Code", "404");
          h.set("Nats-Service-Error", 'unknown sequence "nosuch"');
          m.respond("", { headers: h });
        },
      }),
    ];
    await nc.flush();
    try {
      const c = new UidClient(nc, { subjectPrefix: p, homeWaitMs: 200 });
      // One call at a time: each waits out homeWaitMs, and a second call
      // started beside the first would reject before it is awaited.
      for (const call of [() => c.seqNext("orders", { timeoutMs: 5000 }), () => c.seqBatch("orders", 2, { timeoutMs: 5000 })]) {
        await assert.rejects(call(), (e: unknown) => {
          assert.ok(e instanceof HomeUnreachableError, String(e));
          assert.equal(e.home, "east");
          assert.equal(e.sequence, "orders");
          assert.match(e.message, /home region east/);
          assert.equal((e.cause as Error).name, "RequestError");
          return true;
        });
      }
      // Asked again while homeWaitMs lasted, not given up at the first no responders.
      assert.ok(c.stats().noResponders >= 4, JSON.stringify(c.stats()));
      const once = new UidClient(nc, { subjectPrefix: p });
      await assert.rejects(once.seqNext("nosuch", { timeoutMs: 5000 }), UnknownSequenceError);
      assert.equal(once.stats().retries, 0, JSON.stringify(once.stats()));
      // The home back within homeWaitMs (a gateway link reconnecting): the waiting call is served.
      const patient = new UidClient(nc, { subjectPrefix: p, homeWaitMs: 60000 });
      const served = patient.seqNext("orders", { timeoutMs: 30000 });
      await waitFor("the call meets no responders", 5000, () => patient.stats().noResponders > 0);
      const east = nc.subscribe(`${p}.seq.orders.next`, { callback: (_e, m) => void m.respond("7") });
      subs.push(east);
      assert.equal(await served, "7");
      // No answer on .home (no instance, or a fleet without regions): retried as before.
      await assert.rejects(c.seqNext("other", { timeoutMs: 300 }), (e: unknown) => e instanceof GaveUpError && e.attempts > 1);
    } finally {
      subs.forEach((s) => s.unsubscribe());
    }
  });

  test("a 503's Uid-Retry-After-Ms is a floor under the next attempt", async () => {
    // A plain responder stands in for an instance at its capacity: it
    // answers 503 with the hint, then (for the short hint) an ID.
    const asked: number[] = [];
    const respondWith = (afterMs: number, thenAnswer: boolean) => (_e: unknown, m: Msg) => {
      asked.push(Date.now());
      if (thenAnswer && asked.length > 1) {
        m.respond("42");
        return;
      }
      const h = newHeaders();
      h.set("Nats-Service-Error-Code", "503");
      h.set("Nats-Service-Error", "no ID available now");
      h.set("Uid-Retry-After-Ms", String(afterMs));
      m.respond("", { headers: h });
    };
    const long = nc.subscribe("hinted-long.next", { callback: respondWith(3_600_000, false) });
    const short = nc.subscribe("hinted-short.next", { callback: respondWith(200, true) });
    await nc.flush();
    try {
      // An hour's hint and a 300 ms deadline: asked once, then given up.
      const c = new UidClient(nc, { subjectPrefix: "hinted-long" });
      await assert.rejects(c.next({ timeoutMs: 300 }), (e: unknown) => e instanceof GaveUpError && e.reason === "deadline");
      assert.equal(asked.length, 1, `asked ${asked.length} times`);
      // A short hint: the second attempt comes no sooner than it says.
      asked.length = 0;
      const d = new UidClient(nc, { subjectPrefix: "hinted-short" });
      assert.equal(await d.next({ timeoutMs: 30_000 }), "42");
      const [first, second] = asked;
      assert.ok(asked.length === 2 && first !== undefined && second !== undefined, `asked ${asked.length} times`);
      assert.ok(second - first >= 195, `asked again after ${second - first} ms, the hint said 200`);
    } finally {
      long.unsubscribe();
      short.unsubscribe();
    }
  });

  test("a signal ends the retries; a deadline too", async () => {
    const c = new UidClient(nc, { subjectPrefix: "nobody" });
    const ac = new AbortController();
    const call = c.next({ signal: ac.signal });
    await waitFor("a retry", 5000, () => c.stats().retries > 0);
    ac.abort();
    await assert.rejects(call, (e: unknown) => e instanceof GaveUpError && e.reason === "aborted");
    await assert.rejects(c.next({ signal: AbortSignal.abort() }), (e: unknown) => e instanceof GaveUpError && e.attempts === 0);
    await assert.rejects(c.next({ deadline: new Date(Date.now() + 50) }), (e: unknown) => e instanceof GaveUpError && e.reason === "deadline");
    // A client-wide default bounds calls that give no bound of their own.
    const quick = new UidClient(nc, { subjectPrefix: "nobody", timeoutMs: 100 });
    await assert.rejects(quick.next(), (e: unknown) => e instanceof GaveUpError && e.reason === "deadline");
  });
});

describe("parse sends Uid-Layout", () => {
  test("the layout goes in the header; the reply's fields, wrapped IDs too, come back", async () => {
    // A plain responder stands in for a server with issue 20's Uid-Layout
    // (until it lands): it records the request and answers client-demo's
    // JSON for a wrapped UidGenerator ID.
    const seen: { body: string; layout: string }[] = [];
    const sub = nc.subscribe("spy.parse", {
      callback: (_err, m) => {
        seen.push({ body: m.string(), layout: m.headers?.get(LAYOUT_HEADER) ?? "" });
        m.respond(
          JSON.stringify({ UID: "-7024218214296920064", timestamp: "2026-12-01 08:14:16", workerId: "7", sequence: "0", wrapped: "true: ..." }),
        );
      },
    });
    try {
      const c = new UidClient(nc, { subjectPrefix: "spy", ids: "bigint" });
      const p = await c.parse(-7024218214296920064n, { layout: "uidgenerator" });
      assert.deepEqual(seen, [{ body: "-7024218214296920064", layout: "uidgenerator" }]);
      assert.equal(p.id, -7024218214296920064n);
      assert.equal(p.time.toISOString(), "2026-12-01T08:14:16.000Z");
      assert.equal(p.workerId, 7);
      assert.equal(p.json.wrapped, "true: ...");
      await c.parse("5");
      assert.equal(seen[1]?.layout, "", "no header without the option");
    } finally {
      sub.unsubscribe();
    }
  });
});

describe("Prefetcher", () => {
  test("keeps a reserve and hands it out", async () => {
    const c = new UidClient(nc, { subjectPrefix: prefix });
    const p = new Prefetcher(c, { batchSize: 500, lowWater: 300 });
    try {
      await waitFor("the first refill", 5000, () => p.available >= 300);
      assert.ok(p.available <= 800, String(p.available));
      const first = await p.next();
      assert.match(first, isDecimal);
      for (let i = 0; i < 2000; i++) {
        await p.next();
      }
      // It refilled in the background, one batch at a time.
      assert.ok(c.stats().requests >= 5, JSON.stringify(c.stats()));
      assert.ok(p.available <= 800, String(p.available));
    } finally {
      await p.close();
    }
    await assert.rejects(p.next(), PrefetcherClosedError);
    assert.equal(p.available, 0);
  });

  test("a batch size the service refuses fails next at once", async () => {
    const c = new UidClient(nc, { subjectPrefix: prefix });
    const p = new Prefetcher(c, { batchSize: 200_000 });
    try {
      // At once: with a minute to wait, only the refill's 400 ends next()
      // (a wait for a refill would end in a GaveUpError at its deadline).
      await assert.rejects(p.next({ timeoutMs: 60_000 }), BadRequestError);
    } finally {
      await p.close();
    }
  });

  test("next waits within its bound and says why it is empty", async () => {
    const p = new Prefetcher(new UidClient(nc, { subjectPrefix: "nobody" }), { fetchTimeoutMs: 100 });
    try {
      await assert.rejects(p.next({ timeoutMs: 400 }), (e: unknown) => e instanceof GaveUpError && e.cause instanceof GaveUpError);
    } finally {
      await p.close();
    }
  });
});

describe("uniqueness", () => {
  test("no ID twice across concurrent calls, clients and a prefetcher", async (t) => {
    const strings = new UidClient(nc, { subjectPrefix: prefix });
    const bigints = new UidClient(nc, { subjectPrefix: prefix, ids: "bigint" });
    const p = new Prefetcher(strings, { batchSize: 1000 });
    const seen = new Set<string>();
    let total = 0;
    const keep = (ids: (string | bigint)[]) => {
      for (const id of ids) {
        seen.add(String(id));
      }
      total += ids.length;
    };
    const seq: bigint[] = [];
    try {
      const workers: Promise<void>[] = [];
      for (let w = 0; w < 8; w++) {
        workers.push(
          (async () => {
            for (let i = 0; i < 50; i++) {
              keep([await strings.next(), await bigints.next()]);
              // Binary and ranges on the wire, alternately.
              keep(await (i % 2 ? strings : bigints).batch(200, { encoding: i % 4 < 2 ? "binary" : "ranges" }));
              keep([await p.next(), await p.next()]);
              seq.push(await bigints.seqNext("orders"));
            }
          })(),
        );
      }
      workers.push(
        (async () => {
          for (let i = 0; i < 20; i++) {
            seq.push(...(await bigints.seqBatch("orders", 100, { encoding: i % 2 ? "ranges" : "binary" })));
            for (let j = 0; j < 200; j++) {
              keep([await p.next()]);
            }
          }
        })(),
      );
      await Promise.all(workers);
    } finally {
      await p.close();
    }
    assert.equal(total, 8 * 50 * 204 + 20 * 200);
    assert.equal(seen.size, total, `${total - seen.size} duplicate IDs`);
    assert.equal(new Set(seq).size, seq.length, "duplicate sequence numbers");
    assert.equal(seq.length, 8 * 50 + 20 * 100);
    t.diagnostic(`${total} IDs and ${seq.length} sequence numbers, 0 duplicates`);
  });
});
