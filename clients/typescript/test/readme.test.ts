// The README's quickstart is the example the empty-project check compiles
// and runs (scripts/empty-project-typescript.sh), word for word.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { packageDir } from "./env.js";

test("the README's quickstart is examples/quickstart.ts", () => {
  const readme = readFileSync(join(packageDir, "README.md"), "utf8");
  const block = /```ts\n([\s\S]*?)```/.exec(readme);
  assert.ok(block, "no ts block in the README");
  assert.equal(block[1], readFileSync(join(packageDir, "examples", "quickstart.ts"), "utf8"));
});
