// A client whose NATS server is cut off from its cluster: nodes A and B,
// the dispenser on B, the client on A knowing both. Once the route between
// them is cut, A has no responders for uid.next; the client moves itself to
// B and its calls succeed, with no ID twice. With the move off (moveAfter
// 0), a connection that knows A alone or one that does not reconnect, its
// calls keep failing and the connection is left as it is.

import { after, before, beforeEach, test } from "node:test";
import assert from "node:assert/strict";
import { connect } from "@nats-io/transport-node";
import type { ConnectionOptions, NatsConnection } from "@nats-io/nats-core";
import { DEFAULT_MOVE_AFTER, GaveUpError, UidClient } from "../src/index.js";
import { connectTo, startCluster, startDispenser, waitFor, type Cluster, type Dispenser, type NatsServer } from "./env.js";

const WITHIN = 60_000;
let cluster: Cluster;
let dispenser: Dispenser;

before(async () => {
  cluster = await startCluster();
  const nc = await connectTo(cluster.b.url);
  try {
    // The worker-ID bucket on B alone (one replica, tag b): the dispenser
    // on B keeps its lease through the cut. The KV stream's configuration
    // as nats.js and nats.go create a bucket.
    const bucket = {
      name: "KV_uid_workers",
      subjects: ["$KV.uid_workers.>"],
      max_msgs_per_subject: 1,
      discard: "new",
      allow_rollup_hdrs: true,
      deny_delete: true,
      allow_direct: true,
      storage: "file",
      num_replicas: 1,
      duplicate_window: 120_000_000_000,
      placement: { tags: ["b"] },
    };
    let leader = "";
    await waitFor("JetStream to create the worker-ID bucket on B", WITHIN, async () => {
      try {
        const m = await nc.request("$JS.API.STREAM.CREATE.KV_uid_workers", JSON.stringify(bucket), { timeout: 2000 });
        const r = m.json<{ error?: unknown; cluster?: { leader?: string } }>();
        leader = r.cluster?.leader ?? "";
        return r.error === undefined;
      } catch {
        return false; // no meta leader yet
      }
    });
    assert.equal(leader, "B");
  } finally {
    await nc.close();
  }
  dispenser = await startDispenser(cluster.b.url);
});

after(async () => {
  await dispenser?.kill("SIGTERM");
  await cluster?.stop();
});

beforeEach(async () => {
  cluster.heal();
  await waitFor("the dispenser on B to answer through A", WITHIN, () => answersThrough(cluster.a));
});

test("calls move off a server cut off from its cluster", async () => {
  const logged: string[] = [];
  // A password in the URL (the servers ignore it) must not reach the log.
  const a = cluster.a.url.replace("nats://", "nats://uidtest:s3cret@");
  const nc = await connect(twoServers(a));
  try {
    const client = new UidClient(nc, { ids: "bigint", timeoutMs: WITHIN, logger: { info: (m) => logged.push(m) } });
    assert.equal(port(nc.getServer()), port(cluster.a.url));
    await client.next();
    await cut();
    const got: bigint[][] = [];
    await Promise.all(
      [0, 1, 2, 3].map(async (w) => {
        for (let i = 0; i < 25; i++) {
          got.push(w % 2 === 1 ? await client.batch(100) : [await client.next()]);
        }
      }),
    );
    assert.equal(port(nc.getServer()), port(cluster.b.url), "the connection is on B");
    const stats = client.stats();
    assert.ok(stats.moves >= 1 && stats.noResponders + stats.timedOut >= 2, JSON.stringify(stats));
    const ids = got.flat();
    assert.equal(ids.length, 2 * 25 + 2 * 25 * 100);
    assert.equal(new Set(ids).size, ids.length, "duplicate IDs");
  } finally {
    await nc.close();
  }
  const moved = logged.find((m) => m.includes("event=client.moved")) ?? "";
  assert.ok(moved.includes(`server=nats://127.0.0.1:${port(cluster.a.url)}`), JSON.stringify(logged));
  assert.ok(!logged.some((m) => m.includes("s3cret") || m.includes("uidtest")), JSON.stringify(logged));
});

test("with the move off, calls keep failing through the cut-off server", async () => {
  const nc = await connect(twoServers(cluster.a.url));
  try {
    await callsFailOnA(nc, new UidClient(nc, { moveAfter: 0, timeoutMs: 1000 }));
  } finally {
    await nc.close();
  }
});

test("a connection that knows one server stays on it", async () => {
  const nc = await connect({ servers: cluster.a.url, ignoreClusterUpdates: true, maxReconnectAttempts: -1, reconnectTimeWait: 50 });
  try {
    await callsFailOnA(nc, new UidClient(nc, { timeoutMs: 1000 }));
  } finally {
    await nc.close();
  }
});

test("a connection that does not reconnect is left alone", async () => {
  // reconnect() would close a connection made with reconnect: false: the client must not call it.
  const nc = await connect({ servers: [cluster.a.url, cluster.b.url], noRandomize: true, reconnect: false });
  try {
    await callsFailOnA(nc, new UidClient(nc, { timeoutMs: 1000 }));
  } finally {
    await nc.close();
  }
});

test("timeouts do not count toward a move", async () => {
  // A timeout neither counts toward a move nor resets the count (a paused
  // or slow server times requests out too): a subscriber on A that never
  // answers times out every attempt of a client on A that knows B, and
  // after ten times the attempts a move needs the connection never moved.
  const silent = await connectTo(cluster.a.url);
  const nc = await connect(twoServers(cluster.a.url));
  try {
    silent.subscribe("silent.next"); // never answered
    await silent.flush();
    const client = new UidClient(nc, { subjectPrefix: "silent", timeoutMs: 1000, attemptTimeoutMs: 20, minBackoffMs: 1, maxBackoffMs: 10 });
    while (client.stats().timedOut < 10 * DEFAULT_MOVE_AFTER) {
      await assert.rejects(client.next(), (e) => e instanceof GaveUpError && e.reason === "deadline");
    }
    const stats = client.stats();
    assert.equal(stats.moves, 0, JSON.stringify(stats));
    assert.equal(stats.noResponders, 0, JSON.stringify(stats));
    assert.equal(port(nc.getServer()), port(cluster.a.url));
  } finally {
    await nc.close();
    await silent.close();
  }
});

test("two cut-offs within moveEveryMs move once", async () => {
  // With no dispenser on the prefix, A and B both answer no responders (as
  // if each were cut off in turn): a client with a moveEveryMs of an hour
  // moves once, off A, however many no responders follow on B.
  const nc = await connect(twoServers(cluster.a.url));
  try {
    const client = noDispenserClient(nc, 3_600_000);
    while (client.stats().noResponders < 20 * DEFAULT_MOVE_AFTER) {
      await assert.rejects(client.next());
    }
    assert.equal(client.stats().moves, 1, JSON.stringify(client.stats()));
    await waitFor("the move's reconnect to B", WITHIN, () => port(nc.getServer()) === port(cluster.b.url));
  } finally {
    await nc.close();
  }
});

test("with a short moveEveryMs the client moves again (the control of the test above)", async () => {
  const nc = await connect(twoServers(cluster.a.url));
  try {
    const client = noDispenserClient(nc, 1);
    while (client.stats().moves < 3 && client.stats().noResponders < 200) {
      await assert.rejects(client.next());
    }
    assert.ok(client.stats().moves >= 3, JSON.stringify(client.stats()));
  } finally {
    await nc.close();
  }
});

test("two clients sharing a connection move it once", async () => {
  // Two clients of two fleets share a connection, each with its own count:
  // once one of them moved the connection, the other takes that reconnect
  // for a move of its own, and with a moveEveryMs of an hour the
  // connection moves once, off A, however many no responders both clients
  // then get on B. Without that rule the second client moved it again at
  // once, off the server just reached (the Go client's fault-harness
  // finding).
  const nc = await connect(twoServers(cluster.a.url));
  let reconnects = 0;
  const counted = (async () => {
    for await (const s of nc.status()) {
      if (s.type === "reconnect") {
        reconnects++;
      }
    }
  })();
  try {
    const first = noDispenserClient(nc, 3_600_000);
    const second = noDispenserClient(nc, 3_600_000, "nobody2");
    while (first.stats().moves === 0 && first.stats().noResponders < 200) {
      await assert.rejects(first.next());
    }
    assert.equal(first.stats().moves, 1, JSON.stringify(first.stats()));
    await waitFor("the move's reconnect to B", WITHIN, () => reconnects === 1 && port(nc.getServer()) === port(cluster.b.url));
    const firstBefore = first.stats().noResponders;
    while (second.stats().noResponders < 20 * DEFAULT_MOVE_AFTER || first.stats().noResponders < firstBefore + 20 * DEFAULT_MOVE_AFTER) {
      await assert.rejects(second.next());
      await assert.rejects(first.next());
    }
    assert.equal(second.stats().moves, 0, JSON.stringify(second.stats()));
    assert.equal(first.stats().moves, 1, JSON.stringify(first.stats()));
    assert.equal(reconnects, 1);
    assert.equal(port(nc.getServer()), port(cluster.b.url), "the connection is on B");
  } finally {
    await nc.close();
    await counted;
  }
});

test("moveAfter must be 0 or a positive integer", () => {
  assert.throws(() => new UidClient({} as NatsConnection, { moveAfter: -1 }), RangeError);
  assert.throws(() => new UidClient({} as NatsConnection, { moveAfter: 1.5 }), RangeError);
});

/** Cuts A off from B and asserts that three calls of client, on A, fail there, and nothing moved. */
async function callsFailOnA(nc: NatsConnection, client: UidClient): Promise<void> {
  await client.next();
  await cut();
  for (let i = 0; i < 3; i++) {
    await assert.rejects(client.next(), (e) => e instanceof GaveUpError && e.reason === "deadline");
  }
  assert.ok(!nc.isClosed());
  assert.equal(port(nc.getServer()), port(cluster.a.url));
  const stats = client.stats();
  assert.equal(stats.moves, 0, JSON.stringify(stats));
  // Far more failed attempts in a row than the default move needs.
  assert.ok(stats.noResponders + stats.timedOut >= 3 * DEFAULT_MOVE_AFTER, JSON.stringify(stats));
}

/** A client on nc of a subject prefix no dispenser serves, its moves at least moveEveryMs apart. */
function noDispenserClient(nc: NatsConnection, moveEveryMs: number, subjectPrefix = "nobody"): UidClient {
  return new UidClient(nc, { subjectPrefix, moveEveryMs, timeoutMs: 100, minBackoffMs: 1, maxBackoffMs: 10, logger: { info: () => {} } });
}

/** Cuts A off from B and waits until A has dropped the dispenser's subscriptions. */
async function cut(): Promise<void> {
  cluster.cut();
  await waitFor("A to drop the subscriptions of B", WITHIN, async () => !(await answersThrough(cluster.a)));
}

/** The client's options: A first, then B, in that order, each reconnect quick. */
function twoServers(a: string): ConnectionOptions {
  return { servers: [a, cluster.b.url], noRandomize: true, maxReconnectAttempts: -1, reconnectTimeWait: 50 };
}

/** Whether a dispenser answers uid.next through server. */
async function answersThrough(server: NatsServer): Promise<boolean> {
  const nc = await connectTo(server.url);
  try {
    await nc.request("uid.next", "", { timeout: 500 });
    return true;
  } catch {
    return false; // no responders
  } finally {
    await nc.close();
  }
}

function port(hostport: string): number {
  return Number(new URL(hostport.includes("://") ? hostport : `nats://${hostport}`).port);
}
