// isoTime formats epoch milliseconds exactly as Date's toISOString does, on its fast path and off it.
import assert from "node:assert/strict";
import { test } from "node:test";
import { isoTime } from "../../src/lib/list-query.ts";

test("isoTime writes what toISOString writes: every edge of a day, the years Date writes its own way, and 200,000 random instants", () => {
  const DAY = 86_400_000;
  const edges = [0, 1, 999, 1000, 59_999, 60_000, 3_599_999, 3_600_000, DAY - 1, DAY, 951_782_400_000 /* 2000-02-29 */, 1_764_115_200_000, 253_402_300_799_999];
  // Before 1970, years 0000-0099 and beyond 9999 (six digits with a sign), and fractions of a millisecond.
  const elsewhere = [-1, -DAY, -62_135_596_800_000, -62_167_219_200_000, 253_402_300_800_000, 8.64e15, 1.5, 1_764_115_200_000.25];
  for (const ms of [...edges, ...elsewhere]) assert.equal(isoTime(ms), new Date(ms).toISOString(), String(ms));
  // A seeded walk, so a failure is the same on every run.
  let seed = 42;
  const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  for (let i = 0; i < 200_000; i++) {
    const ms = Math.floor(next() * 253_402_300_800_000);
    assert.equal(isoTime(ms), new Date(ms).toISOString(), String(ms));
  }
});
