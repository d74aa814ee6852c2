// protocol/cases.json, the cases every client runs (protocol/README.md):
// the live cases as raw requests against the dispenser binary, the
// replies section through this client against a plain responder, and
// the client's retry of a live 503.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { headers, type Msg, type NatsConnection } from "@nats-io/nats-core";
import {
  BadRequestError,
  decodeBinary,
  decodeDecimalLines,
  fromBase32,
  GaveUpError,
  InternalError,
  UidClient,
  UnavailableError,
  UnknownSequenceError,
} from "../src/index.js";
import { connectTo, repoDir, startDispenser, startNatsServer, type Dispenser, type NatsServer } from "./env.js";

interface Body {
  type: "empty" | "decimal" | "decimal_lines" | "binary" | "ranges" | "base32" | "base32_lines" | "json";
  count?: number;
  equals?: string;
  first?: string;
  dense?: boolean;
  keys?: string[];
  keys_include?: string[];
  values?: Record<string, string>;
}

interface Case {
  name: string;
  pending?: string;
  request: { subject: string; headers: Record<string, string>; body: string };
  reply: {
    error?: { code: number; description_contains: string } | null;
    no_responders?: boolean;
    headers?: Record<string, string>;
    body?: Body;
  };
}

interface ReplyCase {
  name: string;
  headers: Record<string, string>;
  outcome: { error: "bad_request" | "unknown_sequence" | "unavailable" | "internal"; retried: boolean; retry_after_ms?: number };
}

const file = JSON.parse(readFileSync(join(repoDir, "protocol", "cases.json"), "utf8")) as {
  dispenser: { env: Record<string, string> };
  cases: Case[];
  replies: { cases: ReplyCase[] };
};

let server: NatsServer;
let dispenser: Dispenser;
let nc: NatsConnection;

before(async () => {
  server = await startNatsServer();
  dispenser = await startDispenser(server.url, file.dispenser.env);
  nc = await connectTo(server.url);
});

after(async () => {
  await nc?.close();
  await dispenser?.kill("SIGTERM");
  await server?.stop();
});

describe("live cases, in file order", () => {
  const codes = new Set<number>();
  for (const c of file.cases) {
    test(c.name, async (t) => {
      const h = headers();
      for (const [k, v] of Object.entries(c.request.headers)) {
        h.set(k, v);
      }
      let reply: Msg | undefined;
      let err: unknown;
      try {
        reply = await nc.request(c.request.subject, c.request.body, { timeout: 5000, headers: h });
      } catch (e) {
        err = e;
      }
      const problems = check(c, reply, err);
      if (c.pending && problems.length > 0) {
        t.skip(`pending (${c.pending}): ${problems.join("; ")}`);
        return;
      }
      if (c.pending) {
        t.diagnostic(`pending (${c.pending}) but passes now: remove its pending mark`);
      }
      assert.deepEqual(problems, []);
      if (c.reply.error && !c.pending) {
        codes.add(c.reply.error.code);
      }
    });
  }
  test("the live cases cover every code a dispenser can be made to send", () => {
    assert.deepEqual([...codes].sort(), [400, 404, 503]);
  });
});

/** What differs between a reply and the case (nothing: it passes). */
function check(c: Case, reply: Msg | undefined, err: unknown): string[] {
  const want = c.reply;
  if (want.no_responders) {
    const cause = err instanceof Error ? err.cause : undefined;
    return cause instanceof Error && cause.name === "NoResponders" ? [] : [`want no responders, got ${String(err)}`];
  }
  if (reply === undefined) {
    return [`request: ${String(err)}`];
  }
  const problems: string[] = [];
  const get = (name: string) => headerValue(reply, name);
  const code = get("Nats-Service-Error-Code");
  const description = get("Nats-Service-Error");
  if (!want.error && code !== "") {
    problems.push(`want a reply, got error ${code} ${JSON.stringify(description)}`);
  } else if (want.error && code !== String(want.error.code)) {
    problems.push(`want error ${want.error.code}, got code ${JSON.stringify(code)} (${JSON.stringify(description)})`);
  } else if (want.error && !description.includes(want.error.description_contains)) {
    problems.push(`error description ${JSON.stringify(description)} does not contain ${JSON.stringify(want.error.description_contains)}`);
  }
  for (const [name, pattern] of Object.entries(want.headers ?? {})) {
    const v = get(name);
    if (v === "" || !new RegExp(pattern).test(v)) {
      problems.push(`header ${name} = ${JSON.stringify(v)}, want a value matching ${pattern}`);
    }
  }
  try {
    checkBody(want.body!, reply.data);
  } catch (e) {
    problems.push(`body: ${(e as Error).message.replace(/\s*\n\s*/g, " ")}`);
  }
  return problems;
}

// Header names in any case: MsgHdrs.get is exact.
function headerValue(m: Msg, name: string): string {
  for (const [k, v] of m.headers ?? []) {
    if (k.toLowerCase() === name.toLowerCase() && v.length > 0) {
      return v[0]!;
    }
  }
  return "";
}

const decimalId = /^(0|[1-9][0-9]*)$/;
const signBit = 1n << 63n;

// expandRanges reads a ranges reply here, not with the client's decoder:
// the cases check the wire. 16 bytes per run: first ID, count.
function expandRanges(data: Uint8Array): bigint[] {
  assert.equal(data.length % 16, 0, `${data.length} bytes is not a multiple of 16`);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const ids: bigint[] = [];
  for (let i = 0; i < data.length; i += 16) {
    const first = view.getBigUint64(i);
    const count = view.getBigUint64(i + 8);
    assert.ok(count >= 1n && count <= 1n << 20n, `run ${i / 16}: count ${count}`);
    for (let k = 0n; k < count; k++) {
      ids.push(first + k);
    }
  }
  return ids;
}

function checkBody(want: Body, data: Uint8Array): void {
  const text = () => new TextDecoder().decode(data);
  switch (want.type) {
    case "empty":
      assert.equal(data.length, 0, `want empty, got ${JSON.stringify(text().slice(0, 80))}`);
      return;
    case "decimal":
    case "base32": {
      const id = want.type === "decimal" ? decimal(text()) : base32(text());
      assert.ok(id < signBit, `ID ${id} has the sign bit set`);
      if (want.equals !== undefined) {
        assert.equal(id.toString(), want.equals);
      }
      return;
    }
    case "decimal_lines":
    case "base32_lines":
    case "binary":
    case "ranges": {
      const ids =
        want.type === "ranges" ? expandRanges(data) : want.type === "binary" ? decodeBinary(data) : want.type === "base32_lines" ? text().split("\n").map(base32) : (text().split("\n").forEach(decimal), decodeDecimalLines(text()));
      assert.equal(ids.length, want.count, "count");
      ids.forEach((id, i) => {
        assert.ok(id < signBit, `ID ${id} has the sign bit set`);
        if (i > 0) {
          assert.ok(id > ids[i - 1]! && (!want.dense || id === ids[i - 1]! + 1n), `ID ${id} after ${ids[i - 1]}: not increasing (dense ${want.dense})`);
        }
      });
      if (want.first !== undefined) {
        assert.equal(ids[0]?.toString(), want.first, "first");
      }
      return;
    }
    case "json": {
      const obj = JSON.parse(text()) as Record<string, unknown>;
      for (const k of want.keys_include ?? []) {
        assert.ok(k in obj, `no key ${k}`);
      }
      if (want.keys !== undefined) {
        assert.deepEqual(Object.keys(obj).sort(), [...want.keys].sort(), "keys");
        for (const [k, v] of Object.entries(obj)) {
          assert.equal(typeof v, "string", `value of ${k}`);
        }
      }
      for (const [k, v] of Object.entries(want.values ?? {})) {
        assert.equal(obj[k], v, k);
      }
      return;
    }
  }
  assert.fail(`unknown body type ${JSON.stringify(want.type)} in the cases file`);
}

function decimal(s: string): bigint {
  assert.match(s, decimalId, "a decimal ID");
  return BigInt(s);
}

// A server sends upper case: the decoder also takes lower case, so check first.
function base32(s: string): bigint {
  assert.match(s, /^[0-9A-HJKMNP-TV-Z]{13}$/, "a base32 ID");
  return fromBase32(s);
}

const errorClass = {
  bad_request: BadRequestError,
  unknown_sequence: UnknownSequenceError,
  unavailable: UnavailableError,
  internal: InternalError,
} as const;

describe("replies, through the client", () => {
  file.replies.cases.forEach((rc, i) => {
    test(rc.name, async () => {
      // The responder sends the case's reply, then (to a retry) the ID 42.
      const prefix = `replies${i}`;
      let served = 0;
      const sub = nc.subscribe(`${prefix}.next`, {
        callback: (_err, m) => {
          served++;
          const h = headers();
          for (const [k, v] of Object.entries(rc.headers)) {
            h.set(k, v);
          }
          m.respond(served === 1 ? "" : "42", served === 1 ? { headers: h } : undefined);
        },
      });
      try {
        const c = new UidClient(nc, { subjectPrefix: prefix });
        if (rc.outcome.retried) {
          assert.equal(await c.next({ timeoutMs: 5000 }), "42");
          assert.equal(c.stats().retries, 1);
          assert.equal(c.stats().unavailable, 1);
          return;
        }
        await assert.rejects(c.next({ timeoutMs: 5000 }), errorClass[rc.outcome.error]);
        assert.equal(served, 1, "not retried");
      } finally {
        sub.unsubscribe();
      }
    });
  });

  test("a call that gives up on 503s carries the last one, with its retry hint", async () => {
    for (const rc of file.replies.cases.filter((r) => r.outcome.retried)) {
      const sub = nc.subscribe("always503.next", {
        callback: (_err, m) => {
          const h = headers();
          for (const [k, v] of Object.entries(rc.headers)) {
            h.set(k, v);
          }
          m.respond("", { headers: h });
        },
      });
      try {
        const c = new UidClient(nc, { subjectPrefix: "always503" });
        // Longer than the cases' hint (250 ms): a hint past the deadline
        // gives up at once, and this call must ask more than once.
        await assert.rejects(c.next({ timeoutMs: 2000 }), (e: unknown) => {
          assert.ok(e instanceof GaveUpError && e.attempts > 1, String(e));
          assert.ok(e.cause instanceof UnavailableError);
          assert.equal(e.cause.retryAfterMs, rc.outcome.retry_after_ms);
          return true;
        });
      } finally {
        sub.unsubscribe();
      }
    }
  });
});

describe("a live 503, through the client", () => {
  test("a batch the instance cannot serve is retried until the deadline", async () => {
    // The cases' dispenser sustains 16,384 IDs/s: 100,000 at once never fit.
    const c = new UidClient(nc, { ids: "bigint" });
    await assert.rejects(c.batch(100_000, { timeoutMs: 3000 }), (e: unknown) => {
      assert.ok(e instanceof GaveUpError && e.reason === "deadline", String(e));
      assert.ok(e.cause instanceof UnavailableError, String(e.cause));
      assert.ok((e.cause.retryAfterMs ?? 0) > 0, `retry after ${e.cause.retryAfterMs}`);
      return true;
    });
    // Asked again after the 503; the attempt after it may meet the
    // deadline first (a 503 takes the service's 800 ms capacity wait),
    // so a second 503 is not required.
    assert.ok(c.stats().unavailable >= 1 && c.stats().retries >= 1, JSON.stringify(c.stats()));
    // And the instance still serves what it sustains.
    assert.equal((await c.batch(1000, { timeoutMs: 5000 })).length, 1000);
  });
});
