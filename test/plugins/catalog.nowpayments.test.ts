// The nowpayments catalogue plugin end to end through the real endpoint, on SQLite and PostgreSQL.
// NOWPayments publishes no library that signs IPNs, so deliveries are signed exactly as its
// documentation's Node example verifies them: HMAC-SHA512 hex, under the IPN secret, of
// JSON.stringify of the body with keys sorted recursively. No timestamp in the scheme, hence no
// stale-timestamp case.
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

const SECRET = "e2e-nowpayments-ipn-secret";
type Ipn = Record<string, unknown>;

/** NOWPayments' documented sortObject. */
function sortObject(obj: Record<string, unknown>): Record<string, unknown> {
  return Object.keys(obj)
    .sort()
    .reduce<Record<string, unknown>>((result, key) => {
      const v = obj[key];
      result[key] = v && typeof v === "object" ? sortObject(v as Record<string, unknown>) : v;
      return result;
    }, {});
}
const sign = (ipn: Ipn, secret = SECRET) => createHmac("sha512", secret).update(JSON.stringify(sortObject(ipn))).digest("hex");

for (const dialect of DIALECTS) {
  describe(`catalogue plugin nowpayments on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, { WEBHOOK_RATE_LIMIT_MAX: "100000" });
    });
    after(async () => {
      await h?.close();
    });

    const setup = () => catalogSetup(h, "nowpayments", { signingSecret: SECRET });
    const deliver = (storeId: string, body: string, signature: string) => post(h, storeId, "nowpayments", body, { "x-nowpayments-sig": signature });

    test("a finished payment completes the invoice, however the body is laid out", async () => {
      const { store, invoice } = await setup();
      const ipn = sampleEvent<Ipn>("nowpayments", "finished", invoice.id);
      // Pretty-printed, keys in another order: the signature is over the sorted JSON, not the bytes.
      const body = JSON.stringify(Object.fromEntries(Object.entries(ipn).reverse()), null, 2);
      const r = await deliver(store.id, body, sign(ipn));
      expectStatus(r, 200);
      assert.deepEqual(r.json(), { status: "pushInvoice", invoiceId: invoice.id });
      const inv = await invoiceState(h, store.key, invoice.id);
      assert.equal(inv.status, "completed");
      assert.ok(inv.invoiceLogs.some((l) => /49\.99 USD paid/.test(l.log)));
    });

    test("a tampered body is rejected with 401 and the invoice stays pending", async () => {
      const { store, invoice } = await setup();
      const ipn = sampleEvent<Ipn>("nowpayments", "finished", invoice.id);
      const signature = sign(ipn);
      const r = await deliver(store.id, JSON.stringify({ ...ipn, price_amount: 4999 }), signature);
      expectStatus(r, 401);
      assert.equal(errorCode(r), "webhook_rejected");
      await expectPending(h, store.key, invoice.id);
    });

    test("a callback signed with another IPN secret is rejected", async () => {
      const { store, invoice } = await setup();
      const ipn = sampleEvent<Ipn>("nowpayments", "finished", invoice.id);
      expectStatus(await deliver(store.id, JSON.stringify(ipn), sign(ipn, "another-ipn-secret")), 401);
      await expectPending(h, store.key, invoice.id);
    });

    test("the same callback delivered again answers 200 and changes the invoice once", async () => {
      const { store, invoice } = await setup();
      const ipn = sampleEvent<Ipn>("nowpayments", "finished", invoice.id);
      expectStatus(await deliver(store.id, JSON.stringify(ipn), sign(ipn)), 200);
      const again = await deliver(store.id, JSON.stringify(ipn), sign(ipn));
      expectStatus(again, 200);
      assert.deepEqual(again.json(), { status: "pushInvoice", invoiceId: invoice.id });
      assert.equal((await invoiceState(h, store.key, invoice.id)).confirmations, 1);
    });

    test("partially_paid is ignored with a warning; a finished payment priced below the invoice too", async () => {
      const { store, customer, invoice } = await setup();
      const partial = { ...sampleEvent<Ipn>("nowpayments", "finished", invoice.id), payment_status: "partially_paid", actually_paid: 100.5 };
      await expectUnderpaymentIgnored(h, store.key, invoice.id, await deliver(store.id, JSON.stringify(partial), sign(partial)), /partially paid/);

      const second = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "nowpayments", items: [{ productVariantId: "v", quantity: 1, price: 49.99 }] });
      const under = { ...sampleEvent<Ipn>("nowpayments", "finished", second.id), price_amount: 49.98 };
      await expectUnderpaymentIgnored(h, store.key, second.id, await deliver(store.id, JSON.stringify(under), sign(under)));
    });

    test("a callback for another store's invoice is ignored with a warning and leaves that invoice alone", async () => {
      const { store } = await setup();
      const other = await catalogSetup(h, "nowpayments", { signingSecret: SECRET });
      const ipn = sampleEvent<Ipn>("nowpayments", "finished", other.invoice.id);
      await expectForeignInvoiceIgnored(h, store.id, await deliver(store.id, JSON.stringify(ipn), sign(ipn)), { key: other.store.key, invoiceId: other.invoice.id });
    });
  });
}
