// Where a list page's time goes reaches /metrics (storefront_read_page_seconds): held by the payments-first
// gate, queued for a reader thread, built, returned to the main thread. An operator asking why reads are
// slow sees which of them grew.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { sample } from "../helpers/metrics.ts";

const stageSeries = (stage: string, part: "count" | "sum") => `storefront_read_page_seconds_${part}{stage="${stage}"}`;

for (const threads of ["1", "0"]) {
  describe(`a list page's stages in /metrics, READ_THREADS=${threads}`, () => {
    let h: Harness;
    let store: { id: string; key: string };
    before(async () => {
      // Pages wait whenever a webhook is in flight, however busy the thread (a test's thread mostly waits)
      // and however few pages are in flight.
      h = await createHarness("sqlite", { READ_THREADS: threads, READ_YIELD_BUSY_PERCENT: "0", READ_YIELD_MIN_PAGES: "1" });
      store = await h.store();
      for (let i = 0; i < 3; i++) await h.customer(store.id, { email: `c${i}@example.com` });
    });
    after(() => h?.close());

    test("every page counts once in each of its stages, and a page held behind a payment counts the hold", async () => {
      assert.equal(h.services.reads.threads, Number(threads));
      for (const list of ["customers", "invoices", "customers"]) expectStatus(await h.get(`/api/service/${list}?limit=2`, store.key), 200);
      const leave = h.services.paymentsFirst.enter();
      const held = h.get(`/api/service/customers?limit=3`, store.key);
      // Counted from the moment the page waits at the gate: the hold is then at least the 50 ms slept, however
      // long the request took to get there.
      while (h.services.paymentsFirst.waiting === 0) await sleep(1);
      await sleep(50);
      leave();
      expectStatus(await held, 200);

      const text = (await h.get("/metrics")).body;
      const stages = threads === "0" ? ["held", "built"] : ["held", "queued", "built", "returned"];
      for (const stage of stages) assert.equal(sample(text, stageSeries(stage, "count")), 4, `every page was ${stage} once`);
      for (const stage of ["queued", "returned"].filter((s) => !stages.includes(s))) assert.equal(sample(text, stageSeries(stage, "count")), null, `no ${stage} stage without reader threads`);
      // The fourth page waited behind the "payment" for the 50 ms it was in flight, whichever threads built it.
      assert.ok(sample(text, stageSeries("held", "sum"))! >= 0.04, "the hold behind the payment is counted");
      assert.ok(sample(text, stageSeries("built", "sum"))! > 0);
    });
  });
}
