// The stripe catalogue plugin end to end through the real endpoint, on SQLite and PostgreSQL, with
// every delivery signed by the `stripe` package's own webhooks.generateTestHeaderString and Stripe's
// documented sample events (the catalogue fixtures' bodies, with the invoice id placed).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Stripe from "stripe";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";
import {
  anotherInvoice,
  catalogSetup,
  errorCode,
  expectForeignInvoiceIgnored,
  expectPending,
  expectUnderpaymentIgnored,
  invoiceState,
  post,
  sampleEvent,
} from "../helpers/catalog.ts";

const SECRET = "whsec_e2e_stripe_endpoint_secret";
const stripe = new Stripe("sk_test_catalog_e2e");
type Event = { id: string; type: string; data: { object: Record<string, unknown> } };

const now = () => Math.floor(Date.now() / 1000);
const sign = (payload: string, secret = SECRET, timestamp = now()) => stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp });

for (const dialect of DIALECTS) {
  describe(`catalogue plugin stripe on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name, { WEBHOOK_RATE_LIMIT_MAX: "100000" });
    });
    after(async () => {
      await h?.close();
    });

    const setup = () => catalogSetup(h, "stripe", { signingSecret: SECRET });
    const deliver = (storeId: string, body: string, header: string) => post(h, storeId, "stripe", body, { "stripe-signature": header });

    test("checkout.session.completed signed by the stripe package completes the invoice, with the plugin's line in its logs", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent<Event>("stripe", "checkout-session-completed", invoice.id));
      const header = sign(body);
      assert.equal(stripe.webhooks.constructEvent(body, header, SECRET).type, "checkout.session.completed", "the stripe package accepts its own header");
      const r = await deliver(store.id, body, header);
      expectStatus(r, 200);
      assert.deepEqual(r.json(), { status: "pushInvoice", invoiceId: invoice.id });
      const inv = await invoiceState(h, store.key, invoice.id);
      assert.equal(inv.status, "completed");
      assert.equal(inv.confirmations, 1);
      assert.ok(inv.invoiceLogs.some((l) => /4999 cents USD paid/.test(l.log)));
    });

    test("a delivery that failed is replayed hours later on its own receipt time: the signature's 5-minute tolerance still holds, and it applies", async () => {
      const { store, invoice } = await setup();
      const twoHoursAgo = Date.now() - 2 * 3_600_000;
      h.clock.set(twoHoursAgo);
      const body = JSON.stringify(sampleEvent<Event>("stripe", "checkout-session-completed", invoice.id));
      const header = sign(body, SECRET, Math.floor(twoHoursAgo / 1000));
      // The merchant's plugin was broken when the event arrived.
      expectStatus(await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/stripe`, { source: 'error("bug in my plugin")' }), 200);
      const failed = await deliver(store.id, body, header);
      assert.equal(failed.statusCode, 500);
      h.clock.set(Date.now());
      // Fixed two hours later (the catalogue version again), then replayed.
      expectStatus(await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/stripe`, { catalog: "stripe" }), 200);
      const sim = (receivedAt?: string) =>
        h.admin("POST", `/api/admin/stores/${store.id}/plugins/stripe/simulate`, { body, headers: { "stripe-signature": header }, ...(receivedAt ? { receivedAt } : {}) });
      assert.equal((await sim()).json<{ error: { kind: string } | null }>().error?.kind, "rejected", "on today's clock the signature is stale");
      assert.deepEqual((await sim(new Date(twoHoursAgo).toISOString())).json<{ result: unknown }>().result, { status: "pushInvoice", invoiceId: invoice.id, eventId: sampleEvent<Event>("stripe", "checkout-session-completed", invoice.id).id });
      const replay = await h.admin("POST", `/api/admin/stores/${store.id}/deliveries/${String(failed.headers["x-delivery-id"])}/replay`);
      expectStatus(replay, 200);
      assert.equal(replay.json<{ status: number }>().status, 200, replay.body);
      assert.equal((await invoiceState(h, store.key, invoice.id)).status, "completed");
    });

    test("payment_intent.succeeded with metadata.invoiceId completes the invoice", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("stripe", "payment-intent-succeeded", invoice.id));
      const r = await deliver(store.id, body, sign(body));
      expectStatus(r, 200);
      assert.equal((await invoiceState(h, store.key, invoice.id)).status, "completed");
    });

    test("a header with several v1 signatures (secret being rolled) is accepted when one matches", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("stripe", "checkout-session-completed", invoice.id));
      const t = now();
      const old = sign(body, "whsec_the_previous_secret", t).split(",")[1]!;
      const current = sign(body, SECRET, t).split(",")[1]!;
      const r = await deliver(store.id, body, `t=${t},${old},${current}`);
      expectStatus(r, 200);
      assert.equal((await invoiceState(h, store.key, invoice.id)).status, "completed");
    });

    test("a tampered body is rejected with 401 and the invoice stays pending", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("stripe", "checkout-session-completed", invoice.id));
      const header = sign(body);
      const tampered = body.replace('"amount_total":4999', '"amount_total":9999');
      assert.notEqual(tampered, body);
      assert.throws(() => stripe.webhooks.constructEvent(tampered, header, SECRET), "the stripe package refuses it too");
      const r = await deliver(store.id, tampered, header);
      expectStatus(r, 401);
      assert.equal(errorCode(r), "webhook_rejected");
      await expectPending(h, store.key, invoice.id);
    });

    test("a delivery signed with another endpoint's secret is rejected", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("stripe", "checkout-session-completed", invoice.id));
      const r = await deliver(store.id, body, sign(body, "whsec_not_this_endpoint"));
      expectStatus(r, 401);
      await expectPending(h, store.key, invoice.id);
    });

    test("a stale timestamp (10 minutes, tolerance 300 s) is rejected; the tolerance is a setting", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("stripe", "checkout-session-completed", invoice.id));
      const header = sign(body, SECRET, now() - 600);
      assert.throws(() => stripe.webhooks.constructEvent(body, header, SECRET), /tolerance/);
      const r = await deliver(store.id, body, header);
      expectStatus(r, 401);
      assert.match(r.body, /tolerance/);
      await expectPending(h, store.key, invoice.id);

      const raised = await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/stripe`, { secrets: { toleranceSeconds: "900" } });
      expectStatus(raised, 200);
      expectStatus(await deliver(store.id, body, header), 200);
      assert.equal((await invoiceState(h, store.key, invoice.id)).status, "completed");
    });

    test("the same event delivered again answers 200 and changes the invoice once", async () => {
      const { store, invoice } = await setup();
      const body = JSON.stringify(sampleEvent("stripe", "checkout-session-completed", invoice.id));
      const header = sign(body);
      const first = await deliver(store.id, body, header);
      const again = await deliver(store.id, body, header);
      expectStatus(first, 200);
      expectStatus(again, 200);
      assert.deepEqual(again.json(), { status: "pushInvoice", invoiceId: invoice.id });
      const inv = await invoiceState(h, store.key, invoice.id);
      assert.equal(inv.status, "completed");
      assert.equal(inv.confirmations, 1, "one transition for two deliveries");
    });

    test("an underpayment is ignored: the invoice stays pending with a warning in its logs", async () => {
      const { store, invoice } = await setup();
      const event = sampleEvent<Event>("stripe", "checkout-session-completed", invoice.id);
      event.data.object.amount_total = 4998;
      const body = JSON.stringify(event);
      await expectUnderpaymentIgnored(h, store.key, invoice.id, await deliver(store.id, body, sign(body)));
    });

    test("a payment in another currency is ignored with a warning", async () => {
      const { store, invoice } = await setup();
      const event = sampleEvent<Event>("stripe", "checkout-session-completed", invoice.id);
      event.data.object.currency = "eur";
      const body = JSON.stringify(event);
      await expectUnderpaymentIgnored(h, store.key, invoice.id, await deliver(store.id, body, sign(body)), /EUR/);
    });

    test("an event for another store's invoice is ignored with a warning and leaves that invoice alone", async () => {
      const { store } = await setup();
      const other = await catalogSetup(h, "stripe", { signingSecret: "whsec_other_store" });
      const body = JSON.stringify(sampleEvent("stripe", "checkout-session-completed", other.invoice.id));
      const r = await deliver(store.id, body, sign(body));
      await expectForeignInvoiceIgnored(h, store.id, r, { key: other.store.key, invoiceId: other.invoice.id });
    });

    test("charge.dispute.created marks a completed invoice disputed; an unpaid session and other events are ignored", async () => {
      const { store, customer, invoice } = await setup();
      const paid = JSON.stringify(sampleEvent("stripe", "checkout-session-completed", invoice.id));
      expectStatus(await deliver(store.id, paid, sign(paid)), 200);
      const dispute = JSON.stringify(sampleEvent("stripe", "dispute-created", invoice.id));
      const r = await deliver(store.id, dispute, sign(dispute));
      expectStatus(r, 200);
      assert.deepEqual(r.json(), { status: "disputeInvoice", invoiceId: invoice.id });
      const inv = await invoiceState(h, store.key, invoice.id);
      assert.equal(inv.status, "disputed");
      assert.ok(inv.invoiceLogs.some((l) => l.type === "warning" && /dispute du_/.test(l.log)));

      const second = await anotherInvoice(h, store.id, customer.id);
      const unpaid = sampleEvent<Event>("stripe", "checkout-session-completed", second.id);
      unpaid.data.object.payment_status = "unpaid";
      const unpaidBody = JSON.stringify(unpaid);
      const u = await deliver(store.id, unpaidBody, sign(unpaidBody));
      expectStatus(u, 200);
      assert.deepEqual(u.json(), { status: "ignore", invoiceId: second.id });
      await expectPending(h, store.key, second.id);

      const other = JSON.stringify(sampleEvent("stripe", "unhandled-event", second.id));
      const o = await deliver(store.id, other, sign(other));
      expectStatus(o, 200);
      assert.deepEqual(o.json(), { status: "ignore" });
    });
  });
}
