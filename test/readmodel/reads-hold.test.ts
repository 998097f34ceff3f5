// Which pages wait for payments: the payments-first gate is for a flood of reads, whose pages written out
// one after another would take the main thread from the webhooks. A page alone beside payments goes at
// once; once READ_YIELD_MIN_PAGES pages are in flight (4 by default), finished pages wait for the payment in
// flight as before.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { CustomersRepository } from "../../src/readmodel/customer-documents.ts";
import type { InvoicesRepository } from "../../src/readmodel/invoice-documents.ts";
import type { Page } from "../../src/readmodel/paging.ts";
import { createPriorityGate } from "../../src/readmodel/priority-gate.ts";
import { createReadsService } from "../../src/readmodel/readers.service.ts";
import type { ListQuery } from "../../src/lib/list-query.ts";
import { loadConfig } from "../../src/config.ts";

const EMPTY: Page = { elements: [], count: 0, next: null };
const QUERY = { id: null, limit: 10 } as unknown as ListQuery;

/**
 * Pages built on this thread (no reader threads), each as soon as asked; the gate with a payment in flight.
 * `holdFrom` as the service gives it (READ_YIELD_MIN_PAGES, 4 by default).
 */
function readsBesideAPayment(holdFrom: number) {
  const gate = createPriorityGate(10_000);
  const repos = { customers: { listPage: async () => EMPTY } as unknown as CustomersRepository, invoices: { listPage: async () => EMPTY } as unknown as InvoicesRepository };
  const reads = createReadsService({ database: { kind: "sqlite", file: ":memory:" }, threads: 0, nice: 0, repos, gate, holdFrom });
  return { reads, leave: gate.enter() };
}

/**
 * Whether each page was answered while the payment was still in flight: an order, not a time. A page the gate
 * lets go is answered before a timer set at the same moment fires; a held one only after the payment leaves.
 */
async function answeredDuringPayment(count: number, holdFrom = loadConfig({}).readYieldMinPages): Promise<boolean[]> {
  const { reads, leave } = readsBesideAPayment(holdFrom);
  const answered = Array.from({ length: count }, () => false);
  const pages = answered.map((_, i) => reads.page("customers", "sto_1", QUERY).then(() => (answered[i] = true)));
  await sleep(0);
  const during = [...answered];
  leave();
  await Promise.all(pages);
  return during;
}

describe("pages held behind payments", () => {
  test("a page alone goes at once though a payment is in flight", async () => {
    assert.deepEqual(await answeredDuringPayment(1), [true]);
  });

  test("three pages at once go too; from the fourth in flight, finished pages wait until the payment is answered", async () => {
    assert.deepEqual(await answeredDuringPayment(3), [true, true, true]);
    assert.deepEqual(await answeredDuringPayment(5), [false, false, false, false, false]);
  });

  test("holdFrom 1 holds every page, as before the criterion", async () => {
    assert.deepEqual(await answeredDuringPayment(1, 1), [false]);
  });

  test("READ_YIELD_MIN_PAGES sets the number of pages in flight from which they wait (4 by default, at least 1)", () => {
    assert.equal(loadConfig({}).readYieldMinPages, 4);
    assert.equal(loadConfig({ READ_YIELD_MIN_PAGES: "1" }).readYieldMinPages, 1);
    assert.throws(() => loadConfig({ READ_YIELD_MIN_PAGES: "0" }), /READ_YIELD_MIN_PAGES/);
  });
});
