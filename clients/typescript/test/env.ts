// The real servers the tests talk to: the machine's nats-server binary
// and the dispenser binary built from this repository, each a process of
// its own on ports it picks itself.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/nats-core";

/** The package directory (clients/typescript), from dist/test. */
export const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** The repository root. */
export const repoDir = resolve(packageDir, "..", "..");

const running = new Set<ChildProcess>();
// The processes die with the test process, also when a test fails hard.
process.on("exit", () => {
  for (const p of running) {
    p.kill("SIGKILL");
  }
});

/**
 * Waits until cond holds, checking every 10 ms, or fails after within ms
 * saying what it waited for. The one way tests wait: on state, never a
 * fixed sleep.
 */
export async function waitFor(what: string, within: number, cond: () => boolean | Promise<boolean>): Promise<void> {
  const end = Date.now() + within;
  for (;;) {
    if (await cond()) {
      return;
    }
    if (Date.now() > end) {
      throw new Error(`waited ${within} ms for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A running nats-server. */
export interface NatsServer {
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts nats-server with JetStream on a free loopback port (the server
 * picks it and writes it to a ports file, so no other test can take it in
 * between) and a temporary store. The binary is UID_TEST_NATS_SERVER, or
 * nats-server on PATH, or /usr/sbin/nats-server.
 */
export async function startNatsServer(): Promise<NatsServer> {
  const bin = process.env.UID_TEST_NATS_SERVER || onPath("nats-server") || "/usr/sbin/nats-server";
  if (!existsSync(bin)) {
    throw new Error(`no nats-server binary at ${bin}: install it or set UID_TEST_NATS_SERVER`);
  }
  const dir = mkdtempSync(join(tmpdir(), "uid-ts-nats-"));
  const proc = spawn(bin, ["-js", "-a", "127.0.0.1", "-p", "-1", "-sd", join(dir, "store"), "--ports_file_dir", dir], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  const log = collect(proc);
  running.add(proc);
  let url = "";
  await waitFor("nats-server to write its ports file", 10_000, () => {
    if (proc.exitCode !== null) {
      throw new Error(`nats-server exited at start: ${log()}`);
    }
    const file = readdirSync(dir).find((f) => f.endsWith(".ports"));
    if (file === undefined) {
      return false;
    }
    try {
      url = (JSON.parse(readFileSync(join(dir, file), "utf8")) as { nats: string[] }).nats[0] ?? "";
    } catch {
      return false; // being written
    }
    return url !== "";
  });
  return {
    url,
    async stop() {
      await stop(proc);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The dispenser binary: UID_DISPENSER_BIN, or dist/test-bin/dispenser,
 * which `npm test` builds first (npm's pretest) and which is built here
 * when missing.
 */
export function dispenserBinary(): string {
  const given = process.env.UID_DISPENSER_BIN;
  if (given) {
    return given;
  }
  const bin = join(packageDir, "dist", "test-bin", "dispenser");
  if (!existsSync(bin)) {
    buildDispenser(bin);
  }
  return bin;
}

/** go build -o bin ./cmd/dispenser, from the repository root. */
export function buildDispenser(bin: string): void {
  mkdirSync(dirname(bin), { recursive: true });
  execFileSync("go", ["build", "-o", bin, "./cmd/dispenser"], { cwd: repoDir, stdio: "inherit" });
}

/** A running dispenser process. */
export interface Dispenser {
  /** Kills it (SIGKILL unless told otherwise) and waits for it to exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** What it logged. */
  log(): string;
}

/**
 * Starts the dispenser on the NATS server at url with env (DISPENSER_*
 * variables) and waits until it answers <prefix>.next.
 */
export async function startDispenser(url: string, env: Record<string, string> = {}): Promise<Dispenser> {
  const proc = spawn(dispenserBinary(), [], {
    // DISPENSER_STORE_LOSS_WINDOW=0: each test's store is fresh, and with a
    // loss window a new instance's sequences answer 503 for their settle
    // period (6 s), longer than a call's default deadline.
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? tmpdir(), DISPENSER_NATS_URL: url, DISPENSER_LOG_LEVEL: "warn", DISPENSER_STORE_LOSS_WINDOW: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const log = collect(proc);
  running.add(proc);
  const prefix = env.DISPENSER_SUBJECT_PREFIX ?? "uid";
  const nc = await connect({ servers: url });
  try {
    await waitFor(`the dispenser to answer ${prefix}.next`, 30_000, async () => {
      if (proc.exitCode !== null) {
        throw new Error(`dispenser exited with ${proc.exitCode}: ${log()}`);
      }
      try {
        const m = await nc.request(`${prefix}.next`, "", { timeout: 500 });
        return (m.headers?.get("Nats-Service-Error-Code") ?? "") === "";
      } catch {
        return false;
      }
    });
  } finally {
    await nc.close();
  }
  return { kill: (signal = "SIGKILL") => stop(proc, signal), log };
}

/** Connects to url; closed by the caller. */
export function connectTo(url: string): Promise<NatsConnection> {
  return connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 50 });
}

function stop(proc: ChildProcess, signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
  running.delete(proc);
  if (proc.exitCode !== null || proc.signalCode !== null) {
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    proc.once("exit", () => resolve());
    proc.kill(signal);
  });
}

/** Keeps what a process writes, for a failure's message. */
function collect(proc: ChildProcess): () => string {
  let out = "";
  const add = (b: Buffer) => {
    out = (out + b.toString()).slice(-20_000);
  };
  proc.stdout?.on("data", add);
  proc.stderr?.on("data", add);
  return () => out;
}

function onPath(name: string): string | undefined {
  for (const d of (process.env.PATH ?? "").split(":")) {
    if (d !== "" && existsSync(join(d, name))) {
      return join(d, name);
    }
  }
  return undefined;
}
