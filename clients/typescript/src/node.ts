// @uid-dispenser/client/node: nats.js's Node transport at the version this
// client is built and tested with, so that a Node program needs no second
// install (and no chance of a nats.js whose Node or TypeScript needs
// differ): `import { connect } from "@uid-dispenser/client/node"`.
// The main entry point stays transport-agnostic: UidClient takes any
// nats.js v3 connection (Node, Deno, WebSockets).

export { connect } from "@nats-io/transport-node";
export type { NodeConnectionOptions } from "@nats-io/transport-node";
