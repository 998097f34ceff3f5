// Events out through the real app on SQLite and PostgreSQL: events written with every invoice change and
// failed plugin run, and the feed that lists them. How events reach endpoints (Standard Webhooks signing
// checked with the official library, retries on the contract's schedule, 410 and five-day disabling) is in
// events.delivery.test.ts; endpoints themselves (secrets, rotation, resend, address policy) in
// events.endpoints.test.ts.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";
import { allEvents, feed, paid } from "../helpers/events.ts";
import { deliver, deliverSigned, installPlugin, invoiceView, paymentSetup } from "../helpers/webhook.ts";

for (const { name: dialect, skip } of DIALECTS) {
  describe(`events out on ${dialect}`, { skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect, { ENDPOINT_ALLOW: "127.0.0.1" }, { dispatch: { timeoutMs: 400 } });
    });
    after(async () => {
      await h.close();
    });

    test("checkout, payment and dispute each write their event with the invoice as the list shows it then", async () => {
      const { store, invoice } = await paymentSetup(h);
      expectStatus(await paid(h, store.id, invoice.id), 200);
      const afterPayment = await invoiceView(h, store.key, invoice.id);
      expectStatus(await deliverSigned(h, store.id, { type: "dispute", invoiceId: invoice.id }), 200);
      // A won dispute is a new provider event (the identical "paid" again would be the same event, applied once).
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id, reason: "dispute won" }), 200);
      const events = await allEvents(h, store.key);
      assert.deepEqual(
        events.map((e) => e.type),
        ["invoice.created", "invoice.completed", "invoice.disputed", "invoice.completed"],
      );
      assert.deepEqual(
        events.map((e) => e.data.invoice!.status),
        ["pending", "completed", "disputed", "completed"],
      );
      assert.deepEqual(events[0]!.data.invoice, invoice, "invoice.created carries the invoice checkout answered");
      assert.deepEqual(events[1]!.data.invoice, afterPayment, "invoice.completed carries the invoice with its new log lines");
      assert.match(events[0]!.id, /^evt_/);
      assert.equal(new Set(events.map((e) => e.id)).size, 4);
    });

    test("a repeated payment changes nothing and writes no event", async () => {
      const { store, invoice } = await paymentSetup(h);
      expectStatus(await paid(h, store.id, invoice.id), 200);
      expectStatus(await paid(h, store.id, invoice.id), 200);
      assert.deepEqual((await allEvents(h, store.key)).map((e) => e.type), ["invoice.created", "invoice.completed"]);
    });

    test("a plugin that errors or times out writes delivery.failed; a rejection writes nothing", async () => {
      const store = await h.store();
      await installPlugin(h, store.id, "broken", `error("boom")`);
      await installPlugin(h, store.id, "strict", `reject("bad signature")`);
      await installPlugin(h, store.id, "nonsense", `return { status = "shipIt" }`);
      const broken = await deliver(h, store.id, "broken", "{}");
      expectStatus(broken, 500);
      expectStatus(await deliver(h, store.id, "strict", "{}"), 401);
      expectStatus(await deliver(h, store.id, "nonsense", "{}"), 500);
      const events = await allEvents(h, store.key);
      assert.deepEqual(events.map((e) => e.type), ["delivery.failed", "delivery.failed"]);
      const d = events[0]!.data.delivery!;
      assert.equal(d.id, broken.headers["x-delivery-id"]);
      assert.equal(d.pluginName, "broken");
      assert.equal(d.outcome, "plugin_error");
      assert.equal(d.status, 500);
      assert.match(JSON.stringify(d.error), /boom/);
      assert.equal(events[1]!.data.delivery!.pluginName, "nonsense");
    });

    test("the feed resumes from its cursor, returns one on an empty page, filters by type, and refuses what it does not know", async () => {
      const { store, invoice } = await paymentSetup(h);
      const first = await feed(h, store.key);
      assert.equal(first.data.events.length, 1);
      const empty = await feed(h, store.key, `?cursor=${first.pagination.nextCursor}`);
      assert.deepEqual(empty.data.events, []);
      assert.equal(empty.pagination.nextCursor, first.pagination.nextCursor, "an empty page keeps the position");
      expectStatus(await paid(h, store.id, invoice.id), 200);
      const next = await feed(h, store.key, `?cursor=${empty.pagination.nextCursor}`);
      assert.deepEqual(next.data.events.map((e) => e.type), ["invoice.completed"]);
      const onlyCompleted = await feed(h, store.key, "?types=invoice.completed,invoice.refunded");
      assert.deepEqual(onlyCompleted.data.events.map((e) => e.type), ["invoice.completed"]);
      for (const bad of ["?cursor=nonsense", "?types=invoice.exploded", "?limit=0", "?since=1"]) {
        const r = await h.get(`/api/service/events${bad}`, store.key);
        expectStatus(r, 400);
      }
    });

    test("the feed needs a key with events:read, which new keys have, and shows only the key's store", async () => {
      const a = await paymentSetup(h);
      const b = await h.store("other");
      expectStatus(await h.get("/api/service/events"), 401);
      const keys = await h.admin("GET", `/api/admin/stores/${a.store.id}/keys`);
      assert.ok(keys.json<{ data: { scopes: string[] }[] }>().data[0]!.scopes.includes("events:read"));
      const narrow = await h.admin("POST", `/api/admin/stores/${a.store.id}/keys`, { scopes: ["invoices:read"] });
      expectStatus(await h.get("/api/service/events", narrow.json<{ key: string }>().key), 403);
      assert.deepEqual((await feed(h, b.key)).data.events, []);
    });
  });
}
