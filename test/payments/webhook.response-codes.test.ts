// The payment webhook's response codes, on SQLite and PostgreSQL: 400 for a bad query, 401 for a bad
// signature, 404 for an unknown store, plugin or invoice, 413 above 1 MiB, 500 for a raising plugin or a
// nonsense result, 504 for a runaway one, and 429 for a store over its webhook rate limit.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { WEBHOOK_SUITE_ENV, deliver, deliverSigned, errorOf, installPlugin, invoiceView, paymentSetup, sign } from "../helpers/webhook.ts";

for (const dialect of DIALECTS) {
  describe(`payment webhook response codes on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, WEBHOOK_SUITE_ENV);
    });
    after(async () => {
      await h?.close();
    });

    test("response codes: 400 for a missing or bad query, 404 store_not_found / plugin_not_found (missing or disabled)", async () => {
      const { store } = await paymentSetup(h);
      for (const url of ["/api/paymentPlugins", `/api/paymentPlugins?storeId=${store.id}`, "/api/paymentPlugins?pluginName=pay", `/api/paymentPlugins?pluginName=&storeId=${store.id}`]) {
        const r = await h.app.inject({ method: "POST", url, payload: "{}", headers: { "content-type": "application/json" } });
        expectStatus(r, 400);
        assert.equal(errorOf(r).code, "invalid_request");
      }
      const noStore = await deliverSigned(h, "st_nope", { type: "paid" });
      expectStatus(noStore, 404);
      assert.equal(errorOf(noStore).code, "store_not_found");
      const noPlugin = await deliverSigned(h, store.id, { type: "paid" }, "nothing-here");
      expectStatus(noPlugin, 404);
      assert.equal(errorOf(noPlugin).code, "plugin_not_found");
      assert.ok(noPlugin.headers["x-delivery-id"], "a delivery to a known store is recorded");
      const disable = await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/pay`, { enabled: false });
      expectStatus(disable, 200);
      const disabled = await deliverSigned(h, store.id, { type: "paid" });
      expectStatus(disabled, 404);
      assert.equal(errorOf(disabled).code, "plugin_not_found");
    });

    test("response codes: 401 webhook_rejected for a bad signature, and nothing changes", async () => {
      const { store, invoice } = await paymentSetup(h);
      const body = JSON.stringify({ type: "paid", invoiceId: invoice.id });
      const r = await deliver(h, store.id, "pay", body, { "x-signature": sign(body, "wrong-secret") });
      expectStatus(r, 401);
      assert.equal(errorOf(r).code, "webhook_rejected");
      assert.match(String(errorOf(r).message), /bad signature/);
      assert.equal((await invoiceView(h, store.key, invoice.id)).status, "pending");
    });

    test("response codes: 404 invoice_not_found for an unknown invoice or another store's invoice", async () => {
      const a = await paymentSetup(h);
      const b = await paymentSetup(h);
      for (const invoiceId of ["inv_nope", b.invoice.id]) {
        const r = await deliverSigned(h, a.store.id, { type: "paid", invoiceId });
        expectStatus(r, 404);
        assert.equal(errorOf(r).code, "invoice_not_found");
      }
      assert.equal((await invoiceView(h, b.store.key, b.invoice.id)).status, "pending", "the other store's invoice is untouched");
    });

    test("response codes: 413 payload_too_large above 1 MiB, and the body is not recorded", async () => {
      const { store } = await paymentSetup(h);
      const r = await deliver(h, store.id, "pay", "x".repeat(1024 * 1024 + 1), { "content-type": "text/plain" });
      expectStatus(r, 413);
      assert.equal(errorOf(r).code, "payload_too_large");
      expectStatus(await deliver(h, store.id, "pay", "x".repeat(1024 * 1024 - 100), { "content-type": "text/plain" }), 401);
    });

    test("response codes: 500 plugin_error for a raising plugin and for nonsense results; the service stays healthy", async () => {
      const store = await h.store();
      const cases: [string, RegExp][] = [
        ['error("boom at " .. 42)', /boom at 42/],
        ['local t = nil; return t.x', /attempt to index/],
        ["return 42", /.+/],
        ['return { status = "completeIt", invoiceId = "x" }', /.+/],
        ['return { status = "pushInvoice" }', /.+/],
        ['return { status = "pushInvoice", invoiceId = 7 }', /.+/],
      ];
      for (const [i, [source, message]] of cases.entries()) {
        await installPlugin(h, store.id, `bad${i}`, source, {});
        const r = await deliver(h, store.id, `bad${i}`, "{}");
        expectStatus(r, 500);
        assert.equal(errorOf(r).code, "plugin_error");
        assert.match(String(errorOf(r).message), message);
        expectStatus(await h.get("/healthz"), 200);
      }
    });

    test("response codes: 504 plugin_timeout for a runaway plugin; the next delivery works", async () => {
      const { store, invoice } = await paymentSetup(h);
      await installPlugin(h, store.id, "spin", "while true do end", {});
      const r = await deliver(h, store.id, "spin", "{}");
      expectStatus(r, 504);
      assert.equal(errorOf(r).code, "plugin_timeout");
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id }), 200);
    });
  });
}

describe("webhook rate limit", () => {
  test("a store over its webhook rate limit gets 429 with Retry-After; another store is unaffected", async () => {
    const h = await createHarness("sqlite", { WEBHOOK_RATE_LIMIT_MAX: "2" });
    try {
      const a = await paymentSetup(h);
      const b = await paymentSetup(h);
      for (let i = 0; i < 2; i++) expectStatus(await deliverSigned(h, a.store.id, { type: "x" }), 200);
      const limited = await deliverSigned(h, a.store.id, { type: "x" });
      expectStatus(limited, 429);
      assert.equal(errorOf(limited).code, "rate_limited");
      assert.ok(Number(limited.headers["retry-after"]) > 0);
      expectStatus(await deliverSigned(h, b.store.id, { type: "x" }), 200);
    } finally {
      await h.close();
    }
  });
});
