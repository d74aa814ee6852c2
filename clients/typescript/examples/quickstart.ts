// The README's quickstart: three IDs, a batch, a parse, then exit.
// NATS_URL=127.0.0.1:4222 node quickstart.js
import { connect } from "@uid-dispenser/client/node";
import { UidClient } from "@uid-dispenser/client";

const nc = await connect({ servers: process.env.NATS_URL ?? "127.0.0.1:4222" });
try {
  const ids = new UidClient(nc); // IDs as decimal strings; { ids: "bigint" } for bigints
  for (let i = 0; i < 3; i++) {
    console.log(await ids.next());
  }
  const batch = await ids.batch(1000);
  console.log(`batch of ${batch.length}: ${batch[0]} .. ${batch[batch.length - 1]}`);
  const parts = await ids.parse(batch[0]!);
  console.log(`${parts.id}: worker ${parts.workerId}, sequence ${parts.sequence}, ${parts.time.toISOString()}`);
} finally {
  await nc.close(); // the program ends once the connection is closed
}
