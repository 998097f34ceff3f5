// Payments first on the main thread (issue 12.1): finished read pages wait while a payment webhook is in
// flight and the main thread is busy (READ_YIELD_BUSY_PERCENT), at most READ_YIELD_MAX_MS, and the gate
// opens again whichever way a webhook request ends.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createPriorityGate, eventLoopBusy } from "../../src/readmodel/priority-gate.ts";
import { createHarness, expectStatus, type Harness } from "../helpers/harness.ts";

describe("the priority gate", () => {
  test("with nothing in flight a page goes at once, before any timer", async () => {
    const gate = createPriorityGate(1000);
    // An order, not a time: the page is let through before a timer set at the same moment fires.
    const first = await Promise.race([gate.whenIdle().then(() => "page"), sleep(0).then(() => "timer")]);
    assert.equal(first, "page");
  });

  test("a page waits for the payment in flight and goes the moment it is answered", async () => {
    const gate = createPriorityGate(10_000);
    const leave = gate.enter();
    let went = false;
    const waiting = gate.whenIdle().then(() => {
      went = true;
    });
    await sleep(30);
    assert.equal(went, false, "held while the payment is in flight");
    assert.equal(gate.waiting, 1, "the page is counted as waiting");
    leave();
    leave(); // a second call (answer, then close) counts once
    await waiting;
    assert.equal(went, true);
    assert.equal(gate.active, 0);
    assert.equal(gate.waiting, 0);
  });

  test("on a thread with room to spare a page goes at once though a payment is in flight", async () => {
    const gate = createPriorityGate(10_000, () => false);
    const leave = gate.enter();
    const first = await Promise.race([gate.whenIdle().then(() => "page"), sleep(0).then(() => "timer")]);
    assert.equal(first, "page");
    leave();
  });

  test("the event loop counts as busy after a window spent working, and not after one spent waiting", async () => {
    const busy = eventLoopBusy(70);
    assert.equal(busy(), false, "nothing measured yet");
    const until = performance.now() + 150;
    while (performance.now() < until); // the loop works, without a pause, for more than a window
    assert.equal(busy(), true, "after a window spent working");
    await sleep(150);
    assert.equal(busy(), false, "after a window spent waiting");
    assert.equal(eventLoopBusy(0)(), true, "0: always busy");
  });

  test("payments that follow one another hold a page no longer than the bound: it goes while they still come", async () => {
    const gate = createPriorityGate(40);
    // Payments without end, each entering before the one before it leaves: the gate is never idle.
    let leave = gate.enter();
    let payments = 0;
    let pageWent = false;
    const waiting = gate.whenIdle().then(() => (pageWent = true));
    while (!pageWent && payments < 100_000) {
      const next = gate.enter();
      leave();
      leave = next;
      payments++;
      await sleep(1);
    }
    assert.equal(gate.waiting, 0, "a page whose bound ran out no longer counts as waiting, payments in flight or not");
    leave();
    await waiting;
    // Counted, not timed: the page went while payments were still coming, not once they stopped.
    assert.ok(pageWent && payments < 100_000, `the page waited for ${payments} payments`);
  });
});

describe("the gate around the webhook route", () => {
  let h: Harness;
  let store: { id: string; key: string };
  const SECRET = "gate-secret";
  before(async () => {
    // Pages wait whenever a webhook is in flight, however busy the thread (a test's thread mostly waits)
    // and however few pages are in flight (reads-hold.test.ts tests that criterion).
    h = await createHarness("sqlite", { READ_YIELD_BUSY_PERCENT: "0", READ_YIELD_MIN_PAGES: "1" });
    store = await h.store();
    expectStatus(await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/pay`, { catalog: "generic-hmac", secrets: { signingSecret: SECRET } }), 201);
  });
  after(() => h?.close());

  test("every webhook answer, accepted or refused, leaves the gate open", async () => {
    const body = JSON.stringify({ invoiceId: "inv_missing", status: "pending" });
    const signed = await h.app.inject({
      method: "POST",
      url: `/api/paymentPlugins?pluginName=pay&storeId=${store.id}`,
      headers: { "content-type": "application/json", "x-signature": createHmac("sha256", SECRET).update(body).digest("hex") },
      payload: body,
    });
    assert.equal(signed.statusCode, 200);
    const unsigned = await h.app.inject({ method: "POST", url: `/api/paymentPlugins?pluginName=pay&storeId=${store.id}`, headers: { "content-type": "application/json" }, payload: body });
    assert.equal(unsigned.statusCode, 401);
    const badQuery = await h.app.inject({ method: "POST", url: `/api/paymentPlugins?pluginName=pay`, payload: body });
    assert.equal(badQuery.statusCode, 400);
    await sleep(10);
    assert.equal(h.services.paymentsFirst.active, 0);
  });

  test("a customers page asked for while a webhook is in flight is answered after the webhook leaves", async () => {
    const leave = h.services.paymentsFirst.enter();
    let answered = false;
    const page = h.get(`/api/service/customers?limit=5`, store.key).then((r) => {
      answered = true;
      return r;
    });
    await sleep(20);
    assert.equal(answered, false, "the finished page waits while a payment is in flight");
    leave();
    expectStatus(await page, 200);
  });
});
