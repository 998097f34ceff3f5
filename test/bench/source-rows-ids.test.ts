// The benchmarks' rows written straight into the source tables carry ids of the service's shape: an
// invoice's id tells its creation time as the service's do (src/lib/ids.ts), so a benchmark's payments
// touch the pages a real store's payments would.
import assert from "node:assert/strict";
import { test } from "node:test";
import { benchId, benchTimedId } from "../../bench/lib/source-rows.ts";
import { newId, newTimedId } from "../../src/lib/ids.ts";

test("a benchmark invoice's id starts with its creation time, as the service writes it", () => {
  for (const at of [0, 1_700_000_000_000, Date.now(), 253_402_300_799_999]) {
    const id = benchTimedId("inv", at);
    assert.equal(id.length, newTimedId("inv", at).length);
    assert.equal(id.slice(0, 14), newTimedId("inv", at).slice(0, 14), `the time part at ${at}`);
    assert.match(id, /^inv_[0-9a-hjkmnp-tv-z]{20}$/);
  }
  assert.notEqual(benchTimedId("inv", 5), benchTimedId("inv", 5), "the rest is random");
});

test("benchmark invoice ids sort by creation time, random ids do not have to", () => {
  const times = Array.from({ length: 200 }, (_, i) => 1_700_000_000_000 + i * 7);
  const ids = times.map((t) => benchTimedId("inv", t));
  assert.deepEqual([...ids].sort(), ids);
  assert.equal(benchId("cus").length, newId("cus").length);
});
