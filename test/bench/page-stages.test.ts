// The webhook bench's page stages: each stage's p99 over one round, from two readings of the service's
// cumulative histogram (storefront_read_page_seconds), counting only the pages of that round.
import assert from "node:assert/strict";
import { test } from "node:test";
import { type PageStageBuckets, stagesP99Ms } from "../../bench/webhook/protocol.ts";

const BOUNDS = [0.001, 0.002, 0.004, Infinity];
const buckets = (...counts: number[]): [number, number][] => counts.map((n, i) => [BOUNDS[i]!, n]);

test("a stage's p99 counts only the round's pages, interpolated within the bucket it falls in", () => {
  // Before the round: 1,000 slow pages (2-4 ms) that must not count.
  const before: PageStageBuckets = { queued: buckets(0, 0, 1000, 1000) };
  // The round: 100 pages, 90 under 1 ms and 10 between 1 and 2 ms.
  const after: PageStageBuckets = { queued: buckets(90, 100, 1100, 1100) };
  // Rank 99 of 100: 9 of the 10 pages in (1, 2] ms, so 1.9 ms.
  assert.deepEqual(stagesP99Ms(before, after), { queued: 1.9 });
});

test("a p99 beyond the last bound is that bound; a stage without pages in the round is left out; no histogram gives null", () => {
  const before: PageStageBuckets = { built: buckets(0, 0, 0, 0), held: buckets(5, 5, 5, 5) };
  const after: PageStageBuckets = { built: buckets(0, 0, 0, 10), held: buckets(5, 5, 5, 5) };
  assert.deepEqual(stagesP99Ms(before, after), { built: 4 });
  // 0.99 ms, to the tenth of a millisecond.
  assert.deepEqual(stagesP99Ms(null, { built: buckets(100, 100, 100, 100) }), { built: 1 });
  assert.equal(stagesP99Ms(before, null), null);
});
