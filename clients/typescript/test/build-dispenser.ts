// npm's pretest: builds the dispenser binary the tests run, once per
// `npm test` (go build relinks, which takes seconds), unless
// UID_DISPENSER_BIN names one already built.

import { join } from "node:path";
import { buildDispenser, packageDir } from "./env.js";

if (!process.env.UID_DISPENSER_BIN) {
  buildDispenser(join(packageDir, "dist", "test-bin", "dispenser"));
}
