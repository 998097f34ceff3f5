// Identifiers (src/lib/ids.ts): a prefix and 20 base32 characters from the CSPRNG, drawn from a pool that
// is filled again before it runs out, so no random bytes are ever used for two ids.
import assert from "node:assert/strict";
import { test } from "node:test";
import { newId, newTimedId, randomBase32 } from "../../src/lib/ids.ts";

test("ids are the prefix and 20 base32 characters, all different across many refills of the pool", () => {
  const ids = Array.from({ length: 20_000 }, () => newId("dlv"));
  for (const id of ids.slice(0, 100)) assert.match(id, /^dlv_[0-9a-hjkmnp-tv-z]{20}$/);
  assert.equal(new Set(ids).size, ids.length);
  // No two ids share half their characters (bytes of the pool read twice would repeat in another id).
  const halves = new Set(ids.flatMap((id) => [id.slice(4, 14), id.slice(14)]));
  assert.equal(halves.size, 2 * ids.length);
});

test("timed ids have the same shape, sort by the millisecond they were made in, and keep 50 random bits", () => {
  const at = Date.parse("2026-11-27T08:00:00.000Z");
  const ids = Array.from({ length: 5_000 }, (_, i) => newTimedId("dlv", at + Math.floor(i / 10)));
  for (const id of ids.slice(0, 100)) assert.match(id, /^dlv_[0-9a-hjkmnp-tv-z]{20}$/);
  // Ten ids a millisecond: the time part orders them, ties broken by the random part, never equal.
  for (let i = 10; i < ids.length; i += 10) assert.ok(ids[i - 1]!.slice(0, 14) < ids[i]!.slice(0, 14), `${ids[i - 1]} before ${ids[i]}`);
  assert.equal(new Set(ids).size, ids.length);
  assert.equal(new Set(ids.map((id) => id.slice(14))).size, ids.length, "the random part differs");
  // Later milliseconds, and years later, still sort after: the time is written out to ten characters.
  assert.ok(newTimedId("evt", at) < newTimedId("evt", at + 1));
  assert.ok(newTimedId("evt", at) < newTimedId("evt", Date.parse("2300-01-01T00:00:00Z")));
  assert.ok(newTimedId("evt", Date.parse("1999-12-31T23:59:59.999Z")) < newTimedId("evt", Date.parse("2000-01-01T00:00:00Z")));
});

test("every base32 character turns up, about equally often", () => {
  const counts = new Map<string, number>();
  for (const c of randomBase32(4096) + randomBase32(4096) + randomBase32(3000)) counts.set(c, (counts.get(c) ?? 0) + 1);
  assert.equal(counts.size, 32);
  // 11,192 characters: 350 each on average; a fair draw is far within 200..500.
  for (const [c, n] of counts) assert.ok(n > 200 && n < 500, `${c}: ${n}`);
});

test("more characters than the pool holds are refused, not repeated", () => {
  assert.throws(() => randomBase32(4097), RangeError);
});
