// The benchmarks' invoices, written straight into the source tables (bench/lib/source-rows.ts), carry ids as
// the service makes an invoice's: timed by its creation, so that a benchmark's payments touch the pages a real
// store's payments would (random ids put each payment's rows keyed by its invoice on pages of their own).
import assert from "node:assert/strict";
import { test } from "node:test";
import { acrossCustomers, seedCustomers, type SourceRows } from "../../bench/lib/source-rows.ts";
import { newTimedId } from "../../src/lib/ids.ts";

type Row = Record<string, string | number | null>;

test("seeded invoices' ids start with their creation time and sort by it", async () => {
  const tables = new Map<string, Row[]>();
  const rows: SourceRows = {
    insert: async (table, written) => void tables.set(table, [...(tables.get(table) ?? []), ...written]),
    close: async () => {},
  };
  await seedCustomers(rows, { storeId: "st_bench", customers: 20, invoicesEach: 5, pendingEach: 2, label: "ids" });
  const invoices = tables.get("invoices")!;
  assert.equal(invoices.length, 100);
  for (const invoice of invoices) {
    const createdAt = invoice.created_at as number;
    // The time part (prefix and 10 characters) is what the service writes for that moment.
    assert.equal((invoice.id as string).slice(0, 14), newTimedId("inv", createdAt).slice(0, 14), `invoice created at ${createdAt}`);
  }
  const byTime = [...invoices].sort((a, b) => (a.created_at as number) - (b.created_at as number)).map((i) => i.id as string);
  assert.deepEqual(byTime, [...byTime].sort());
});

test("pending invoices are made and written in payment order, each customer's among the others'", async () => {
  const written: Row[] = [];
  const rows: SourceRows = {
    insert: async (table, batch) => void (table === "invoices" && written.push(...batch)),
    close: async () => {},
  };
  const seeded = await seedCustomers(rows, { storeId: "st_bench", customers: 3, invoicesEach: 6, pendingEach: 2, label: "order" });
  const pending = written.filter((i) => i.status === "pending");
  const paymentOrder = acrossCustomers(seeded.pending);
  // The k-th of every customer, then the (k+1)-th: created, and written, one after another in that order.
  assert.deepEqual(pending.map((i) => i.id), paymentOrder);
  const times = pending.map((i) => i.created_at as number);
  assert.deepEqual(times, [...times].sort((a, b) => a - b));
  assert.ok(Math.min(...times) > Math.max(...written.filter((i) => i.status === "completed").map((i) => i.created_at as number)), "the history is older");
  assert.deepEqual(seeded.pending.map((p) => p.length), [2, 2, 2]);
});
