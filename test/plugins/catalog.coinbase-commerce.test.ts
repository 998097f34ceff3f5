// The coinbase-commerce catalogue plugin end to end through the real endpoint, on SQLite and
// PostgreSQL. Coinbase's Node library can only verify, not sign, so deliveries are signed with the
// documented scheme (HMAC-SHA256 hex of the raw body under the shared secret) over Coinbase's sample
// payloads. The scheme has no timestamp, hence no stale-timestamp case.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { after, before, describe, test } from "node:test";
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

const SECRET = "e2e-coinbase-shared-secret";
type Payment = { status: string; value: { local: { amount: string; currency: string } } };
type Event = { event: { type: string; data: { metadata: Record<string, string>; pricing: { local: { amount: string } }; payments?: Payment[] } } };

const sign = (body: string, secret = SECRET) => createHmac("sha256", secret).update(body).digest("hex");

for (const dialect of DIALECTS) {
  describe(`catalogue plugin coinbase-commerce on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, { WEBHOOK_RATE_LIMIT_MAX: "100000" });
    });
    after(async () => {
      await h?.close();
    });

    const setup = () => catalogSetup(h, "coinbase-commerce", { signingSecret: SECRET });
    const deliver = (storeId: string, body: string, signature: string) => post(h, storeId, "coinbase-commerce", body, { "x-cc-webhook-signature": signature });

    test("charge:confirmed completes the invoice", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("coinbase-commerce", "charge-confirmed", invoice.id));
      const r = await deliver(store.id, body, sign(body));
      expectStatus(r, 200);
      assert.deepEqual(r.json(), { status: "pushInvoice", invoiceId: invoice.id });
      const inv = await invoiceState(h, store.key, invoice.id);
      assert.equal(inv.status, "completed");
      assert.ok(inv.invoiceLogs.some((l) => /49\.99 USD paid/.test(l.log)));
    });

    test("a classic charge's confirmed payments are added up", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("coinbase-commerce", "charge-confirmed-payments", invoice.id));
      expectStatus(await deliver(store.id, body, sign(body)), 200);
      assert.equal((await invoiceState(h, store.key, invoice.id)).status, "completed");
    });

    test("a tampered body is rejected with 401 and the invoice stays pending", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("coinbase-commerce", "charge-confirmed", invoice.id));
      const tampered = body.replace('"amount":"49.99","currency":"USD"', '"amount":"4999.00","currency":"USD"');
      assert.notEqual(tampered, body);
      const r = await deliver(store.id, tampered, sign(body));
      expectStatus(r, 401);
      assert.equal(errorCode(r), "webhook_rejected");
      await expectPending(h, store.key, invoice.id);
    });

    test("a delivery signed with another shared secret is rejected", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("coinbase-commerce", "charge-confirmed", invoice.id));
      expectStatus(await deliver(store.id, body, sign(body, "another-shared-secret")), 401);
      await expectPending(h, store.key, invoice.id);
    });

    test("the same event delivered again answers 200 and changes the invoice once", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("coinbase-commerce", "charge-confirmed", invoice.id));
      expectStatus(await deliver(store.id, body, sign(body)), 200);
      const again = await deliver(store.id, body, sign(body));
      expectStatus(again, 200);
      assert.deepEqual(again.json(), { status: "pushInvoice", invoiceId: invoice.id });
      assert.equal((await invoiceState(h, store.key, invoice.id)).confirmations, 1);
    });

    test("an underpayment is ignored: the invoice stays pending with a warning in its logs", async () => {
      const { store, invoice } = await setup();
      const event = sampleEvent<Event>("coinbase-commerce", "charge-confirmed-payments", invoice.id);
      event.event.data.payments = event.event.data.payments!.slice(0, 1); // 30.00 of 49.99
      const body = JSON.stringify(event);
      await expectUnderpaymentIgnored(h, store.key, invoice.id, await deliver(store.id, body, sign(body)));
    });

    test("charge:failed is ignored with a warning on the invoice", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("coinbase-commerce", "charge-failed", invoice.id));
      await expectUnderpaymentIgnored(h, store.key, invoice.id, await deliver(store.id, body, sign(body)), /failed/);
    });

    test("an event for another store's invoice is ignored with a warning and leaves that invoice alone", async () => {
      const { store } = await setup();
      const other = await catalogSetup(h, "coinbase-commerce", { signingSecret: SECRET });
      const body = JSON.stringify(sampleEvent("coinbase-commerce", "charge-confirmed", other.invoice.id));
      await expectForeignInvoiceIgnored(h, store.id, await deliver(store.id, body, sign(body)), { key: other.store.key, invoiceId: other.invoice.id });
    });
  });
}
