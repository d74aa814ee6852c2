// Calls in flight across a dispenser's kill -9 and restart: they retry
// (attempts that time out on the dead instance, then no responders) and
// succeed once the new process answers, with no ID handed out twice.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { NatsConnection } from "@nats-io/nats-core";
import { Prefetcher, UidClient } from "../src/index.js";
import { connectTo, startDispenser, startNatsServer, waitFor, type NatsServer } from "./env.js";

let server: NatsServer;
let nc: NatsConnection;

before(async () => {
  server = await startNatsServer();
  nc = await connectTo(server.url);
});

after(async () => {
  await nc?.close();
  await server?.stop();
});

test("calls in flight survive a kill -9 and restart of the dispenser", async (t) => {
  let dispenser = await startDispenser(server.url);
  const client = new UidClient(nc, { ids: "bigint", attemptTimeoutMs: 500 });
  const p = new Prefetcher(client, { batchSize: 300, fetchTimeoutMs: 30_000 });
  const seen = new Set<bigint>();
  let total = 0;
  const keep = (ids: bigint[]) => {
    ids.forEach((id) => seen.add(id));
    total += ids.length;
  };
  let restarted = false;
  let afterRestart = 0;
  const failures: unknown[] = [];
  // Callers that keep calling throughout, each call allowed 30 s: none may fail.
  const callers = [0, 1, 2, 3].map(async (w) => {
    while (!restarted || afterRestart < 40) {
      try {
        const ids = w === 0 ? [await client.next({ timeoutMs: 30_000 })] : w === 1 ? await client.batch(50, { timeoutMs: 30_000 }) : [await p.next({ timeoutMs: 30_000 })];
        keep(ids);
        if (restarted) {
          afterRestart++;
        }
      } catch (e) {
        failures.push(e);
        return;
      }
    }
  });
  try {
    // The calls work before the fault.
    await waitFor("IDs before the kill", 10_000, () => total > 500);
    await dispenser.kill("SIGKILL");
    const retriesAtKill = client.stats().retries;
    // Nobody answers now: the callers are retrying.
    await waitFor("retries on no responders", 10_000, () => client.stats().noResponders > 0);
    const before = total;
    dispenser = await startDispenser(server.url);
    restarted = true;
    await Promise.all(callers);
    assert.deepEqual(failures, []);
    assert.ok(afterRestart >= 40 && total > before, `${afterRestart} calls after the restart`);
    assert.ok(client.stats().retries > retriesAtKill, JSON.stringify(client.stats()));
    assert.equal(seen.size, total, `${total - seen.size} duplicate IDs`);
    t.diagnostic(`${total} IDs, ${afterRestart} calls after the restart, 0 duplicates; client ${JSON.stringify(client.stats())}`);
  } finally {
    restarted = true;
    afterRestart = Infinity;
    await p.close();
    await dispenser.kill("SIGTERM");
  }
});
