// The real servers the tests talk to: the machine's nats-server binary
// and the dispenser binary built from this repository, each a process of
// its own on ports it picks itself.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
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
  /** The port it listens on for routes; 0 without a cluster. */
  clusterPort: number;
  stop(): Promise<void>;
}

/**
 * Starts nats-server with JetStream on a free loopback port (the server
 * picks it and writes it to a ports file, so no other test can take it in
 * between) and a temporary store. The binary is UID_TEST_NATS_SERVER, or
 * nats-server on PATH, or /usr/sbin/nats-server.
 */
export async function startNatsServer(): Promise<NatsServer> {
  const dir = mkdtempSync(join(tmpdir(), "uid-ts-nats-"));
  return startNatsServerIn(dir, ["-js", "-a", "127.0.0.1", "-p", "-1", "-sd", join(dir, "store")]);
}

/** nats-server with args, its ports file in dir (removed at stop). */
async function startNatsServerIn(dir: string, args: string[]): Promise<NatsServer> {
  const bin = process.env.UID_TEST_NATS_SERVER || onPath("nats-server") || "/usr/sbin/nats-server";
  if (!existsSync(bin)) {
    throw new Error(`no nats-server binary at ${bin}: install it or set UID_TEST_NATS_SERVER`);
  }
  const proc = spawn(bin, [...args, "--ports_file_dir", dir], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  const log = collect(proc);
  running.add(proc);
  let url = "";
  let clusterPort = 0;
  await waitFor("nats-server to write its ports file", 10_000, () => {
    if (proc.exitCode !== null) {
      throw new Error(`nats-server exited at start: ${log()}`);
    }
    const file = readdirSync(dir).find((f) => f.endsWith(".ports"));
    if (file === undefined) {
      return false;
    }
    try {
      const ports = JSON.parse(readFileSync(join(dir, file), "utf8")) as { nats: string[]; cluster?: string[] };
      url = ports.nats[0] ?? "";
      clusterPort = ports.cluster?.[0] !== undefined ? Number(new URL(ports.cluster[0]).port) : 0;
    } catch {
      return false; // being written
    }
    return url !== "";
  });
  return {
    url,
    clusterPort,
    async stop() {
      await stop(proc);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A TCP link the test can cut: it listens on a free loopback port and
 * forwards each connection to a target port. cut() closes every
 * connection through it and refuses new ones until heal(): the peers see
 * a real loss of the link, as from a dead network.
 */
export class LinkProxy {
  readonly #server: Server;
  readonly #open = new Set<Socket>();
  #cut = false;
  /** Where connections go; 0: not known yet, refuse. */
  target = 0;

  private constructor(server: Server) {
    this.#server = server;
    server.on("connection", (client) => {
      if (this.#cut || this.target === 0) {
        client.destroy();
        return;
      }
      const upstream = createConnection({ host: "127.0.0.1", port: this.target });
      for (const [from, to] of [
        [client, upstream],
        [upstream, client],
      ] as const) {
        this.#open.add(from);
        from.pipe(to);
        from.on("error", () => to.destroy());
        from.on("close", () => {
          this.#open.delete(from);
          to.destroy();
        });
      }
    });
  }

  /** A proxy listening on a free loopback port. */
  static async start(): Promise<LinkProxy> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    return new LinkProxy(server);
  }

  get port(): number {
    const a = this.#server.address();
    return typeof a === "object" && a !== null ? a.port : 0;
  }

  /** Closes every connection through the link, and refuses new ones until healed. */
  cut(): void {
    this.#cut = true;
    for (const s of this.#open) {
      s.destroy();
    }
    this.#open.clear();
  }

  /** Forwards new connections again. */
  heal(): void {
    this.#cut = false;
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/**
 * Two nats-server nodes, a and b (server tags "a" and "b"), in one cluster
 * with JetStream, whose routes go through a LinkProxy each way (each node
 * also advertises its proxy as its route address, so that no route
 * bypasses them): cut() cuts them off from each other while both keep
 * serving their clients.
 */
export interface Cluster {
  a: NatsServer;
  b: NatsServer;
  cut(): void;
  heal(): void;
  stop(): Promise<void>;
}

export async function startCluster(): Promise<Cluster> {
  const toA = await LinkProxy.start();
  const toB = await LinkProxy.start();
  const a = await startClusterNode("A", toA, toB);
  const b = await startClusterNode("B", toB, toA);
  toA.target = a.clusterPort;
  toB.target = b.clusterPort;
  return {
    a,
    b,
    cut() {
      toA.cut();
      toB.cut();
    },
    heal() {
      toA.heal();
      toB.heal();
    },
    async stop() {
      await a.stop();
      await b.stop();
      await toA.stop();
      await toB.stop();
    },
  };
}

async function startClusterNode(name: string, self: LinkProxy, peer: LinkProxy): Promise<NatsServer> {
  const dir = mkdtempSync(join(tmpdir(), `uid-ts-nats-${name}-`));
  const conf = join(dir, "server.conf");
  writeFileSync(
    conf,
    [
      `server_name: ${name}`,
      `server_tags: ["${name.toLowerCase()}"]`,
      `listen: "127.0.0.1:-1"`,
      `jetstream { store_dir: "${join(dir, "store")}" }`,
      `cluster {`,
      `  name: uid-test`,
      `  listen: "127.0.0.1:-1"`,
      `  advertise: "127.0.0.1:${self.port}"`,
      `  routes: ["nats-route://127.0.0.1:${peer.port}"]`,
      `}`,
      ``,
    ].join("\n"),
  );
  return startNatsServerIn(dir, ["-c", conf]);
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
