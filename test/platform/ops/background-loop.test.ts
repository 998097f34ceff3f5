// The loop `serve` runs background work in: a pass at start, then one per interval, never two at once; a
// failing pass is logged and the loop goes on; stop() waits for the pass in flight.
import assert from "node:assert/strict";
import { test } from "node:test";
import { startBackgroundLoop } from "../../../src/platform/ops/background-loop.ts";

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("a failing pass is logged and the next one runs; passes never overlap; stop() waits for the pass in flight", async () => {
  const errors: string[] = [];
  let passes = 0;
  let running = 0;
  let maxRunning = 0;
  let finished = 0;
  const loop = startBackgroundLoop(
    "test loop",
    5,
    async () => {
      passes++;
      running++;
      maxRunning = Math.max(maxRunning, running);
      await tick(20); // longer than the interval: the next pass must wait for this one
      running--;
      finished++;
      if (passes === 1) throw new Error("database unavailable");
    },
    { error: (_obj, msg) => errors.push(msg) },
  );
  while (passes < 3) await tick(5);
  await loop.stop();
  assert.equal(running, 0, "stop() returned after the pass in flight ended");
  assert.equal(finished, passes);
  assert.equal(maxRunning, 1);
  assert.deepEqual(errors, ["test loop failed; retrying in 0 s"]);
  const after = passes;
  await tick(30);
  assert.equal(passes, after, "no pass after stop()");
});
