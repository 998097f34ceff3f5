// The payment webhook's delivery log, on SQLite and PostgreSQL: what a delivery records and how the list
// pages, a failed delivery replayed once the merchant fixed the plugin, and retention.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { SIGNED_PLUGIN, WEBHOOK_SUITE_ENV, deliver, deliverSigned, installPlugin, invoiceView, paymentSetup, sign } from "../helpers/webhook.ts";

type Json = Record<string, unknown>;

for (const dialect of DIALECTS) {
  describe(`payment deliveries on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, WEBHOOK_SUITE_ENV);
    });
    after(async () => {
      await h?.close();
    });

    test("a merchant who fixes a broken plugin gets the retried delivery applied", async () => {
      const { store, invoice } = await paymentSetup(h);
      await installPlugin(h, store.id, "pay", 'error("typo")');
      const body = JSON.stringify({ type: "paid", invoiceId: invoice.id });
      const first = await deliver(h, store.id, "pay", body, { "x-signature": sign(body) });
      expectStatus(first, 500);
      // The fix is version 1's source again: re-uploading it makes version 1 current, no new version.
      const fixed = await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
      assert.equal(fixed.version, 1);
      const replay = await h.admin("POST", `/api/admin/stores/${store.id}/deliveries/${first.headers["x-delivery-id"]}/replay`);
      expectStatus(replay, 200);
      const out = replay.json<{ deliveryId: string; replayOf: string; status: number; response: Json }>();
      assert.equal(out.status, 200);
      assert.equal(out.replayOf, first.headers["x-delivery-id"]);
      assert.deepEqual(out.response, { status: "pushInvoice", invoiceId: invoice.id });
      assert.equal((await invoiceView(h, store.key, invoice.id)).status, "completed");
      const d = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${out.deliveryId}`);
      assert.equal(d.json<Json>().replayOf, first.headers["x-delivery-id"]);
      assert.equal(d.json<Json>().pluginVersion, 1);
    });

    test("deliveries record headers, body, result, logs, fetches, duration and response; list pages newest first", async () => {
      const { store, invoice } = await paymentSetup(h);
      const r = await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id });
      const id = String(r.headers["x-delivery-id"]);
      const d = (await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${id}`)).json<Json>();
      assert.equal(d.outcome, "applied");
      assert.equal(d.transition, "pending->completed");
      assert.equal(d.responseStatus, 200);
      assert.deepEqual(d.response, { status: "pushInvoice", invoiceId: invoice.id });
      assert.deepEqual(d.result, { status: "pushInvoice", invoiceId: invoice.id });
      const req = d.request as Json;
      assert.equal(req.body, JSON.stringify({ type: "paid", invoiceId: invoice.id }));
      assert.ok((req.headers as Json)["x-signature"]);
      assert.equal((d.logs as Json[]).length, 1);
      assert.deepEqual(d.fetches, []);
      assert.equal(typeof d.durationMs, "number");
      h.clock.advance(1000);
      await deliverSigned(h, store.id, { type: "other" });
      const list = (await h.admin("GET", `/api/admin/stores/${store.id}/deliveries?limit=1`)).json<{ data: Json[]; pagination: { nextCursor: string } }>();
      assert.equal(list.data[0]!.outcome, "ignored");
      const next = (await h.admin("GET", `/api/admin/stores/${store.id}/deliveries?limit=1&cursor=${list.pagination.nextCursor}`)).json<{ data: Json[] }>();
      assert.equal(next.data[0]!.id, id);
      expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/dlv_nope`), 404);
    });

    test("delivery retention removes deliveries older than DELIVERY_RETENTION_DAYS", async () => {
      const { store } = await paymentSetup(h);
      const old = await deliverSigned(h, store.id, { type: "other" });
      h.clock.advance(31 * 86_400_000);
      const fresh = await deliverSigned(h, store.id, { type: "other" });
      const removed = await h.services.webhooks.pruneDeliveries();
      assert.ok(removed >= 1);
      expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${old.headers["x-delivery-id"]}`), 404);
      expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${fresh.headers["x-delivery-id"]}`), 200);
    });
  });
}
