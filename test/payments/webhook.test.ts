// The payment webhook end to end through the real app and the real Lua sandbox, on SQLite and PostgreSQL:
// the merchant's whole loop, every row of the state machine, duplicates and concurrency, raw bytes.
// Its response codes, the plugins behind it and the delivery log have their own files:
// webhook.response-codes, webhook.plugins and webhook.deliveries.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import { WEBHOOK_SUITE_ENV, deliver, deliverSigned, errorOf, installPlugin, invoiceView, paymentSetup, sign } from "../helpers/webhook.ts";

type Json = Record<string, unknown>;

for (const dialect of DIALECTS) {
  describe(`payment webhook on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, WEBHOOK_SUITE_ENV);
    });
    after(async () => {
      await h?.close();
    });

    test("the merchant's loop: checkout, paid webhook completes the invoice with its logs in both lists, then a dispute", async () => {
      const { store, customer, invoice } = await paymentSetup(h, 49.99);
      h.clock.advance(60_000);
      const paid = await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id });
      expectStatus(paid, 200);
      assert.deepEqual(paid.json(), { status: "pushInvoice", invoiceId: invoice.id });
      assert.match(String(paid.headers["x-delivery-id"]), /^dlv_/);

      const inv = await invoiceView(h, store.key, invoice.id);
      assert.equal(inv.status, "completed");
      const logs = inv.invoiceLogs.map((l) => l.log);
      assert.equal(logs[0], "Invoice created (pending)");
      assert.ok(logs.includes(`received paid for ${invoice.id}`), "the plugin's log() line is on the invoice");
      assert.ok(logs.some((l) => /^Payment confirmed by plugin pay v1 .*pending -> completed$/.test(l)), "the transition's own line");

      const customers = await h.get(`/api/service/customers?id=${customer.id}`, store.key);
      const c = customers.json<{ data: { customers: Json[] } }>().data.customers[0]!;
      assert.equal(c.totalOrders, 1, "derived figures are right immediately");
      assert.equal(c.totalSpent, 49.99);
      assert.equal((c.invoices as Json[])[0]!.status, "completed");

      const dispute = await deliverSigned(h, store.id, { type: "dispute", invoiceId: invoice.id });
      expectStatus(dispute, 200);
      assert.deepEqual(dispute.json(), { status: "disputeInvoice", invoiceId: invoice.id });
      const disputed = await invoiceView(h, store.key, invoice.id);
      assert.equal(disputed.status, "disputed");
      assert.ok(disputed.invoiceLogs.some((l) => l.type === "warning" && /completed -> disputed$/.test(l.log)));
      const after = await h.get(`/api/service/customers?id=${customer.id}`, store.key);
      assert.equal(after.json<{ data: { customers: Json[] } }>().data.customers[0]!.totalOrders, 0, "a disputed invoice no longer counts");
    });

    const table: [string, "paid" | "dispute", number, string, string?][] = [
      ["pending", "paid", 200, "completed"],
      ["pending", "dispute", 409, "pending"],
      ["expired", "paid", 200, "completed"],
      ["expired", "dispute", 409, "expired"],
      ["completed", "paid", 200, "completed", "already"],
      ["completed", "dispute", 200, "disputed"],
      ["disputed", "paid", 200, "completed"],
      ["disputed", "dispute", 200, "disputed", "already"],
      ["refunded", "paid", 409, "refunded"],
      ["refunded", "dispute", 409, "refunded"],
      ["cancelled", "paid", 409, "cancelled"],
      ["cancelled", "dispute", 409, "cancelled"],
    ];
    for (const [from, event, status, to, already] of table) {
      test(`state machine: ${event} on a ${from} invoice answers ${status} and leaves it ${to}`, async () => {
        const { store, invoice } = await paymentSetup(h);
        await h.services.db.kysely.updateTable("invoices").set({ status: from }).where("id", "=", invoice.id).execute();
        const before = await invoiceView(h, store.key, invoice.id);
        const r = await deliverSigned(h, store.id, { type: event, invoiceId: invoice.id });
        assert.equal(r.statusCode, status, r.body);
        const inv = await invoiceView(h, store.key, invoice.id);
        assert.equal(inv.status, to);
        const transitionLines = inv.invoiceLogs.length - before.invoiceLogs.length - 1; // minus the plugin's own log line
        if (status === 409) {
          const err = errorOf(r);
          assert.equal(err.code, "invalid_transition");
          assert.equal(err.currentStatus, from);
          assert.equal(err.invoiceId, invoice.id);
          assert.equal(transitionLines, 0);
        } else {
          assert.deepEqual(r.json(), { status: event === "paid" ? "pushInvoice" : "disputeInvoice", invoiceId: invoice.id });
          assert.equal(transitionLines, already ? 0 : 1, already ? "already applied writes no transition line" : "one transition line");
        }
      });
    }

    test("50 concurrent identical deliveries change the invoice once and write one transition line; the rest are the same event", async () => {
      const { store, invoice } = await paymentSetup(h);
      const body = JSON.stringify({ type: "paid", invoiceId: invoice.id });
      const answers = await Promise.all(Array.from({ length: 50 }, () => deliver(h, store.id, "pay", body, { "x-signature": sign(body) })));
      for (const a of answers) assert.equal(a.statusCode, 200, a.body);
      const inv = await invoiceView(h, store.key, invoice.id);
      assert.equal(inv.status, "completed");
      assert.equal(inv.invoiceLogs.filter((l) => l.log.startsWith("Payment confirmed")).length, 1);
      const outcomes = await h.services.db.kysely.selectFrom("deliveries").select("outcome").where("invoice_id", "=", invoice.id).execute();
      assert.equal(outcomes.length, 50, "every delivery is recorded");
      assert.equal(outcomes.filter((o) => o.outcome === "applied").length, 1);
      assert.equal(outcomes.filter((o) => o.outcome === "duplicate_event").length, 49, "identical bytes are one event, applied once");
    });

    test("the raw body reaches the script byte for byte, for any content type, non-ASCII included", async () => {
      const store = await h.store();
      await installPlugin(h, store.id, "echo", `
        if request.headers["x-signature"] ~= hmacShaSign(secrets.key, request.body, "sha256") then reject("bad signature") end
        log(string.format("len=%d json=%s ct=%s", #request.body, tostring(request.json ~= nil), tostring(request.headers["content-type"])))
        return { status = "ignore" }`);
      const bodies: [string | Buffer, string | undefined][] = [
        ['{"name":"Jürgen ✓ 日本","amount":12.5}', "application/json"],
        ["amount=12.50&name=J%C3%BCrgen", "application/x-www-form-urlencoded"],
        ["plain text ünïcödé", "text/plain; charset=utf-8"],
        [Buffer.from([0, 255, 1, 128, 10, 13]), "application/octet-stream"],
        ['{"a":1}', undefined],
      ];
      for (const [body, contentType] of bodies) {
        const r = await h.app.inject({
          method: "POST",
          url: `/api/paymentPlugins?pluginName=echo&storeId=${store.id}`,
          headers: { "x-signature": sign(body), ...(contentType ? { "content-type": contentType } : {}) },
          payload: body,
        });
        expectStatus(r, 200);
        const d = await h.admin("GET", `/api/admin/stores/${store.id}/deliveries/${r.headers["x-delivery-id"]}`);
        const delivery = d.json<{ logs: { description: string }[] }>();
        const len = Buffer.byteLength(body);
        assert.match(delivery.logs[0]!.description, new RegExp(`^len=${len} json=${contentType === "application/json" || contentType === undefined ? "true" : "false"}`));
      }
    });
  });
}
