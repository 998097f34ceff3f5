// Pages in memory shared with the reader thread (issue 12): a slot holds a page until the response that
// sent it is done, then the reader writes another page there. Under many concurrent requests, and with
// clients that hang up mid-answer, every answer is exactly its own page and every slot comes back.
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createHarness, expectStatus, type Harness } from "../helpers/harness.ts";

describe("read pages in shared slots, over real HTTP", () => {
  let h: Harness;
  let store: { id: string; key: string };
  let base: string;
  const expected = new Map<number, string>();

  before(async () => {
    h = await createHarness("sqlite", { RATE_LIMIT_MAX: "1000000", READ_THREADS: "1", LOG_LEVEL: process.env.DEBUG_LOG ?? "silent" });
    store = await h.store();
    for (let i = 0; i < 40; i++) {
      h.clock.advance(60_000);
      const c = await h.customer(store.id, { email: `c${i}@example.com` });
      await h.checkout(store.id, { customerId: c.id, paymentMethod: "stripe", items: [{ productVariantId: `var-${i % 7}`, quantity: 1 + (i % 3), price: 4.5 }] });
    }
    await h.app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(h.app.server.address() as { port: number }).port}`;
    for (let limit = 1; limit <= 40; limit++) {
      const r = await fetch(`${base}/api/service/customers?limit=${limit}`, { headers: { authorization: store.key } });
      assert.equal(r.status, 200);
      expected.set(limit, await r.text());
    }
  });
  after(() => h?.close());

  const limitOf = (i: number) => 1 + ((i * 7) % 40);

  test("300 concurrent requests each get exactly their own page, and the slots are all given back", async () => {
    assert.ok(h.services.reads.threads > 0, "pages come from a reader thread");
    let most = 0;
    const watch = setInterval(() => (most = Math.max(most, h.services.reads.slotsInUse())), 1);
    const answers = await Promise.all(
      Array.from({ length: 300 }, async (_, i) => {
        const r = await fetch(`${base}/api/service/customers?limit=${limitOf(i)}`, { headers: { authorization: store.key } });
        return { i, status: r.status, body: await r.text() };
      }),
    );
    clearInterval(watch);
    for (const a of answers) {
      assert.equal(a.status, 200);
      assert.equal(a.body, expected.get(limitOf(a.i)), `request ${a.i} (limit ${limitOf(a.i)}) got its own page`);
    }
    assert.ok(most > 0, "pages went through the shared slots");
    for (let i = 0; i < 100 && h.services.reads.slotsInUse() > 0; i++) await sleep(10);
    assert.equal(h.services.reads.slotsInUse(), 0, "every slot came back");
  });

  test("clients that hang up before the page is read give their slots back, and later answers are intact", async () => {
    const url = new URL(`${base}/api/service/customers?limit=40`);
    await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        new Promise<void>((resolve) => {
          const req = http.get(url, { headers: { authorization: store.key }, agent: false }, (res) => {
            // Half hang up at the headers, half after the first chunk.
            if (i % 2 === 0) res.socket.destroy();
            else res.once("data", () => res.socket.destroy());
            res.socket.once("close", () => resolve());
          });
          req.on("error", () => resolve());
        }),
      ),
    );
    for (let i = 0; i < 200 && h.services.reads.slotsInUse() > 0; i++) await sleep(10);
    assert.equal(h.services.reads.slotsInUse(), 0, "slots of abandoned answers came back");
    const again = await Promise.all(Array.from({ length: 40 }, (_, i) => fetch(`${base}/api/service/customers?limit=${limitOf(i)}`, { headers: { authorization: store.key } }).then(async (r) => ({ i, body: await r.text() }))));
    for (const a of again) assert.equal(a.body, expected.get(limitOf(a.i)));
  });

  test("a client that leaves while its page waits behind a payment gives the slot back", async () => {
    const leave = h.services.paymentsFirst.enter();
    const url = new URL(`${base}/api/service/customers?limit=40`);
    const gone = Array.from({ length: 5 }, () => {
      const req = http.get(url, { headers: { authorization: store.key }, agent: false });
      req.on("error", () => {});
      return req;
    });
    await sleep(20); // the pages are built and held while the "payment" is in flight
    for (const req of gone) req.destroy();
    await sleep(20);
    leave();
    for (let i = 0; i < 200 && h.services.reads.slotsInUse() > 0; i++) await sleep(10);
    assert.equal(h.services.reads.slotsInUse(), 0, "slots of pages whose client left before they were sent came back");
  });

  test("the same page through app.inject (which copies what is written) is byte for byte the one sent over HTTP", async () => {
    const r = await h.get(`/api/service/customers?limit=40`, store.key);
    expectStatus(r, 200);
    assert.equal(r.body, expected.get(40));
  });
});
