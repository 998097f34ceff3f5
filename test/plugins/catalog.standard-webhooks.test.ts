// The standard-webhooks catalogue plugin end to end through the real endpoint, on SQLite and
// PostgreSQL, every delivery signed by the `standardwebhooks` package's own Webhook#sign.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Webhook } from "standardwebhooks";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import {
  catalogSetup,
  errorCode,
  expectForeignInvoiceIgnored,
  expectPending,
  expectUnderpaymentIgnored,
  invoiceState,
  post,
  sampleEvent,
} from "../helpers/catalog.ts";

const SECRET = "whsec_" + Buffer.from("e2e standard webhooks key, 32 bytes!").toString("base64");
type Event = { type: string; data: Record<string, unknown> & { metadata: Record<string, unknown> } };

/** The three Standard Webhooks headers for a body, signed by the reference library. */
function signed(body: string, options: { secret?: string; id?: string; at?: Date } = {}) {
  const id = options.id ?? `msg_${randomUUID()}`;
  const at = options.at ?? new Date();
  return {
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": new Webhook(options.secret ?? SECRET).sign(id, at, body),
  };
}

for (const dialect of DIALECTS) {
  describe(`catalogue plugin standard-webhooks on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, { WEBHOOK_RATE_LIMIT_MAX: "100000" });
    });
    after(async () => {
      await h?.close();
    });

    const setup = () => catalogSetup(h, "standard-webhooks", { signingSecret: SECRET });
    const deliver = (storeId: string, body: string, headers: Record<string, string>) => post(h, storeId, "standard-webhooks", body, headers);

    test("payment.succeeded signed by the standardwebhooks package completes the invoice", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("standard-webhooks", "payment-succeeded", invoice.id));
      const headers = signed(body);
      assert.ok(new Webhook(SECRET).verify(body, headers), "the reference library verifies its own signature");
      const r = await deliver(store.id, body, headers);
      expectStatus(r, 200);
      assert.deepEqual(r.json(), { status: "pushInvoice", invoiceId: invoice.id });
      const inv = await invoiceState(h, store.key, invoice.id);
      assert.equal(inv.status, "completed");
      assert.ok(inv.invoiceLogs.some((l) => /4999 cents USD paid/.test(l.log)));
    });

    test("several signatures in webhook-signature (key rotation): one matching v1 is enough", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("standard-webhooks", "payment-succeeded", invoice.id));
      const headers = signed(body);
      const at = new Date(Number(headers["webhook-timestamp"]) * 1000);
      const rotated = new Webhook("whsec_" + Buffer.from("the previous key of this endpoint").toString("base64")).sign(headers["webhook-id"], at, body);
      headers["webhook-signature"] = `${rotated} ${headers["webhook-signature"]}`;
      assert.ok(new Webhook(SECRET).verify(body, headers));
      expectStatus(await deliver(store.id, body, headers), 200);
      assert.equal((await invoiceState(h, store.key, invoice.id)).status, "completed");
    });

    test("a tampered body is rejected with 401 and the invoice stays pending", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("standard-webhooks", "payment-succeeded", invoice.id));
      const headers = signed(body);
      const tampered = body.replace('"total_amount":4999', '"total_amount":99999');
      assert.notEqual(tampered, body);
      assert.throws(() => new Webhook(SECRET).verify(tampered, headers));
      const r = await deliver(store.id, tampered, headers);
      expectStatus(r, 401);
      assert.equal(errorCode(r), "webhook_rejected");
      await expectPending(h, store.key, invoice.id);
    });

    test("a delivery signed with another secret is rejected", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("standard-webhooks", "payment-succeeded", invoice.id));
      const r = await deliver(store.id, body, signed(body, { secret: "whsec_" + Buffer.from("somebody else's key").toString("base64") }));
      expectStatus(r, 401);
      await expectPending(h, store.key, invoice.id);
    });

    test("a stale webhook-timestamp is rejected, as the reference library does", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("standard-webhooks", "payment-succeeded", invoice.id));
      const headers = signed(body, { at: new Date(Date.now() - 10 * 60_000) });
      assert.throws(() => new Webhook(SECRET).verify(body, headers), /too old/);
      const r = await deliver(store.id, body, headers);
      expectStatus(r, 401);
      assert.match(r.body, /tolerance/);
      await expectPending(h, store.key, invoice.id);
    });

    test("the same message delivered again answers 200 and changes the invoice once", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("standard-webhooks", "payment-succeeded", invoice.id));
      const headers = signed(body);
      expectStatus(await deliver(store.id, body, headers), 200);
      const again = await deliver(store.id, body, headers);
      expectStatus(again, 200);
      assert.deepEqual(again.json(), { status: "pushInvoice", invoiceId: invoice.id });
      const inv = await invoiceState(h, store.key, invoice.id);
      assert.equal(inv.status, "completed");
      assert.equal(inv.confirmations, 1);
    });

    test("an underpayment is ignored: the invoice stays pending with a warning in its logs", async () => {
      const { store, invoice } = await setup();
      const event = sampleEvent<Event>("standard-webhooks", "payment-succeeded", invoice.id);
      event.data.total_amount = 4000;
      const body = JSON.stringify(event);
      await expectUnderpaymentIgnored(h, store.key, invoice.id, await deliver(store.id, body, signed(body)));
    });

    test("an event for another store's invoice is ignored with a warning and leaves that invoice alone", async () => {
      const { store } = await setup();
      const other = await catalogSetup(h, "standard-webhooks", { signingSecret: SECRET });
      const body = JSON.stringify(sampleEvent("standard-webhooks", "payment-succeeded", other.invoice.id));
      const r = await deliver(store.id, body, signed(body));
      await expectForeignInvoiceIgnored(h, store.id, r, { key: other.store.key, invoiceId: other.invoice.id });
    });

    test("dispute.opened marks a completed invoice disputed; event types are settings", async () => {
      const { store, invoice } = await setup();
      const paid = JSON.stringify(sampleEvent("standard-webhooks", "payment-succeeded", invoice.id));
      expectStatus(await deliver(store.id, paid, signed(paid)), 200);
      const dispute = JSON.stringify(sampleEvent("standard-webhooks", "dispute-opened", invoice.id));
      const r = await deliver(store.id, dispute, signed(dispute));
      expectStatus(r, 200);
      assert.deepEqual(r.json(), { status: "disputeInvoice", invoiceId: invoice.id });
      assert.equal((await invoiceState(h, store.key, invoice.id)).status, "disputed");

      // A provider with its own vocabulary and amounts in dollars.
      const custom = await catalogSetup(h, "standard-webhooks", {
        signingSecret: SECRET,
        paidTypes: "invoice.paid",
        invoiceIdPath: "data.reference",
        amountPath: "data.amount",
        amountUnit: "units",
        currencyPath: "data.currency",
      });
      const event = JSON.stringify({ type: "invoice.paid", timestamp: new Date().toISOString(), data: { reference: custom.invoice.id, amount: "49.99", currency: "usd" } });
      const c = await deliver(custom.store.id, event, signed(event));
      expectStatus(c, 200);
      assert.deepEqual(c.json(), { status: "pushInvoice", invoiceId: custom.invoice.id });
    });
  });
}
