// The burst watch that keeps repeated rejections out of the log but for one line per window.
import assert from "node:assert/strict";
import { test } from "node:test";
import { createBurstWatch } from "../../src/lib/burst-watch.ts";

test("reports a key once when it reaches the threshold in a window, never below it, again in a later window", () => {
  let t = 0;
  const watch = createBurstWatch({ threshold: 3, windowMs: 1000, now: () => t });
  const reports = (key: string, n: number) => Array.from({ length: n }, () => watch.note(key)).filter((r) => r !== null);
  assert.deepEqual(reports("a", 2), [], "below the threshold: nothing");
  assert.deepEqual(reports("a", 50), [3], "one report however many follow");
  assert.deepEqual(reports("b", 3), [3], "keys are counted apart");
  t = 1000;
  assert.deepEqual(reports("a", 2), [], "a new window starts from zero");
  assert.deepEqual(reports("a", 1), [3]);
});

test("holds at most maxKeys windows, dropping the oldest", () => {
  const watch = createBurstWatch({ threshold: 2, windowMs: 1000, maxKeys: 2, now: () => 0 });
  watch.note("a");
  watch.note("b");
  watch.note("c"); // drops a's window
  assert.equal(watch.note("a"), null, "a starts again at 1");
  assert.equal(watch.note("c"), 2, "c was kept");
});
