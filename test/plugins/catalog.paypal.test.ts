// The paypal catalogue plugin end to end through the real endpoint, on SQLite and PostgreSQL. PayPal's
// API is played by a local server on 127.0.0.1, which this suite alone lets plugins reach
// (PLUGIN_FETCH_ALLOW=127.0.0.1). Like PayPal, it hands out OAuth2 client-credentials tokens and
// answers verify-webhook-signature by checking a signature over
// "<transmission id>|<transmission time>|<webhook id>|<CRC32 of the event bytes>", made with a key only
// "PayPal" (this file) holds; HMAC stands in for PayPal's RSA key.
import assert from "node:assert/strict";
import { createHmac, randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { crc32 } from "node:zlib";
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

const CLIENT_ID = "AYe2eClientId";
const CLIENT_SECRET = "ELe2eClientSecret";
const WEBHOOK_ID = "8PT597110X687430LKGECATA";
const PAYPAL_KEY = "the key PayPal signs transmissions with";

type Event = { resource: Record<string, unknown> & { amount?: { value: string }; disputed_transactions?: Record<string, unknown>[] } };

/** What PayPal signs for one transmission. */
const transmissionSignature = (id: string, time: string, webhookId: string, event: Buffer | string, key = PAYPAL_KEY) =>
  createHmac("sha256", key).update(`${id}|${time}|${webhookId}|${crc32(event)}`).digest("base64");

/** A delivery as PayPal sends it: the event and the five PAYPAL-* headers. */
function delivery(event: unknown, options: { at?: Date; key?: string } = {}) {
  const body = JSON.stringify(event);
  const id = randomUUID();
  const time = (options.at ?? new Date()).toISOString().replace(/\.\d+Z$/, "Z");
  return {
    body,
    headers: {
      "paypal-auth-algo": "SHA256withRSA",
      "paypal-cert-url": "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-7a8abba8",
      "paypal-transmission-id": id,
      "paypal-transmission-time": time,
      "paypal-transmission-sig": transmissionSignature(id, time, WEBHOOK_ID, body, options.key),
    },
  };
}

interface FakePayPal {
  base: string;
  calls: string[];
  captures: Map<string, Record<string, unknown>>;
  close(): Promise<void>;
}

async function startFakePayPal(): Promise<FakePayPal> {
  const tokens = new Set<string>();
  const calls: string[] = [];
  const captures = new Map<string, Record<string, unknown>>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      calls.push(`${req.method} ${url.pathname}`);
      const send = (status: number, value: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(value));
      };
      const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
      if (req.method === "POST" && url.pathname === "/v1/oauth2/token") {
        const basic = `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString("base64")}`;
        if (req.headers.authorization !== basic || body !== "grant_type=client_credentials") {
          return send(401, { error: "invalid_client", error_description: "Client Authentication failed" });
        }
        const token = `A21AA${randomUUID()}`;
        tokens.add(token);
        return send(200, { scope: "https://uri.paypal.com/services/payments/payment", access_token: token, token_type: "Bearer", expires_in: 32400 });
      }
      if (bearer === undefined || !tokens.has(bearer)) return send(401, { name: "AUTHENTICATION_FAILURE" });
      if (req.method === "POST" && url.pathname === "/v1/notifications/verify-webhook-signature") {
        const request = JSON.parse(body) as Record<string, string>;
        // The event's bytes as the plugin forwarded them (it is the last member).
        const marker = '"webhook_event":';
        const raw = body.slice(body.indexOf(marker) + marker.length, body.lastIndexOf("}"));
        const expected = transmissionSignature(request.transmission_id!, request.transmission_time!, request.webhook_id!, raw);
        const ok = request.webhook_id === WEBHOOK_ID && request.auth_algo === "SHA256withRSA" && request.transmission_sig === expected;
        return send(200, { verification_status: ok ? "SUCCESS" : "FAILURE" });
      }
      const capture = /^\/v2\/payments\/captures\/([\w-]+)$/.exec(url.pathname);
      if (req.method === "GET" && capture) {
        const found = captures.get(capture[1]!);
        return found ? send(200, found) : send(404, { name: "RESOURCE_NOT_FOUND" });
      }
      return send(404, { name: "NOT_FOUND" });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    captures,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

for (const dialect of DIALECTS) {
  describe(`catalogue plugin paypal on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let paypal: FakePayPal;
    before(async () => {
      paypal = await startFakePayPal();
      h = await createHarness(dialect.name, { WEBHOOK_RATE_LIMIT_MAX: "100000", PLUGIN_FETCH_ALLOW: "127.0.0.1" });
    });
    after(async () => {
      await h?.close();
      await paypal?.close();
    });

    const secrets = () => ({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, webhookId: WEBHOOK_ID, apiBase: paypal.base });
    const setup = () => catalogSetup(h, "paypal", secrets());
    const deliver = (storeId: string, d: { body: string; headers: Record<string, string> }) => post(h, storeId, "paypal", d.body, d.headers);

    test("PAYMENT.CAPTURE.COMPLETED verified through PayPal's API completes the invoice", async () => {
      const { store, invoice } = await setup();
      const before = paypal.calls.length;
      const r = await deliver(store.id, delivery(sampleEvent("paypal", "capture-completed", invoice.id)));
      expectStatus(r, 200);
      assert.deepEqual(r.json(), { status: "pushInvoice", invoiceId: invoice.id });
      assert.deepEqual(paypal.calls.slice(before), ["POST /v1/oauth2/token", "POST /v1/notifications/verify-webhook-signature"]);
      const inv = await invoiceState(h, store.key, invoice.id);
      assert.equal(inv.status, "completed");
      assert.ok(inv.invoiceLogs.some((l) => /49\.99 USD paid/.test(l.log)));
    });

    test("a tampered body: PayPal answers FAILURE, the delivery is rejected with 401", async () => {
      const { store, invoice } = await setup();
      const d = delivery(sampleEvent("paypal", "capture-completed", invoice.id));
      const tampered = { ...d, body: d.body.replace('"value":"49.99"', '"value":"4999.00"') };
      assert.notEqual(tampered.body, d.body);
      const r = await deliver(store.id, tampered);
      expectStatus(r, 401);
      assert.equal(errorCode(r), "webhook_rejected");
      assert.match(r.body, /FAILURE/);
      await expectPending(h, store.key, invoice.id);
    });

    test("a transmission not signed by PayPal is rejected; wrong API credentials fail with 500 until fixed", async () => {
      // A replay runs on its delivery's receipt time: receive on the real clock, as PayPal's timestamps are.
      h.clock.set(Date.now());
      const { store, invoice } = await setup();
      const forged = await deliver(store.id, delivery(sampleEvent("paypal", "capture-completed", invoice.id), { key: "not PayPal's key" }));
      expectStatus(forged, 401);
      await expectPending(h, store.key, invoice.id);

      expectStatus(await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/paypal`, { secrets: { clientSecret: "a wrong secret" } }), 200);
      const refused = await deliver(store.id, delivery(sampleEvent("paypal", "capture-completed", invoice.id)));
      expectStatus(refused, 500);
      assert.equal(errorCode(refused), "plugin_error");
      await expectPending(h, store.key, invoice.id);

      // PayPal retries a 5xx; once the secret is right the same delivery goes through.
      expectStatus(await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/paypal`, { secrets: { clientSecret: CLIENT_SECRET } }), 200);
      const replay = await h.admin("POST", `/api/admin/stores/${store.id}/deliveries/${String(refused.headers["x-delivery-id"])}/replay`);
      expectStatus(replay, 200);
      assert.equal((await invoiceState(h, store.key, invoice.id)).status, "completed");
    });

    test("a stale PAYPAL-TRANSMISSION-TIME is rejected before calling PayPal", async () => {
      const { store, invoice } = await setup();
      const before = paypal.calls.length;
      const r = await deliver(store.id, delivery(sampleEvent("paypal", "capture-completed", invoice.id), { at: new Date(Date.now() - 10 * 60_000) }));
      expectStatus(r, 401);
      assert.match(r.body, /tolerance/);
      assert.equal(paypal.calls.length, before, "no call to PayPal");
      await expectPending(h, store.key, invoice.id);
    });

    test("the same delivery again answers 200 and changes the invoice once", async () => {
      const { store, invoice } = await setup();
      const d = delivery(sampleEvent("paypal", "capture-completed", invoice.id));
      expectStatus(await deliver(store.id, d), 200);
      const again = await deliver(store.id, d);
      expectStatus(again, 200);
      assert.deepEqual(again.json(), { status: "pushInvoice", invoiceId: invoice.id });
      assert.equal((await invoiceState(h, store.key, invoice.id)).confirmations, 1);
    });

    test("an underpayment is ignored: the invoice stays pending with a warning in its logs", async () => {
      const { store, invoice } = await setup();
      const event = sampleEvent<Event>("paypal", "capture-completed", invoice.id);
      event.resource.amount = { ...event.resource.amount, value: "49.98" };
      await expectUnderpaymentIgnored(h, store.key, invoice.id, await deliver(store.id, delivery(event)));
    });

    test("an event for another store's invoice is ignored with a warning and leaves that invoice alone", async () => {
      const { store } = await setup();
      const other = await catalogSetup(h, "paypal", secrets());
      const r = await deliver(store.id, delivery(sampleEvent("paypal", "capture-completed", other.invoice.id)));
      await expectForeignInvoiceIgnored(h, store.id, r, { key: other.store.key, invoiceId: other.invoice.id });
    });

    test("CUSTOMER.DISPUTE.CREATED marks the invoice disputed, through the capture when the dispute names no invoice", async () => {
      const { store, customer, invoice } = await setup();
      expectStatus(await deliver(store.id, delivery(sampleEvent("paypal", "capture-completed", invoice.id))), 200);
      const r = await deliver(store.id, delivery(sampleEvent("paypal", "dispute-created", invoice.id)));
      expectStatus(r, 200);
      assert.deepEqual(r.json(), { status: "disputeInvoice", invoiceId: invoice.id });
      assert.equal((await invoiceState(h, store.key, invoice.id)).status, "disputed");

      const second = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "paypal", items: [{ productVariantId: "v", quantity: 1, price: 49.99 }] });
      // New events (PayPal ids them WH-…): the samples' ids were applied above, and each event applies once.
      const capture = { ...sampleEvent<Event>("paypal", "capture-completed", second.id), id: `WH-${randomUUID()}` };
      expectStatus(await deliver(store.id, delivery(capture)), 200);
      const dispute = { ...sampleEvent<Event>("paypal", "dispute-created", second.id), id: `WH-${randomUUID()}` };
      delete dispute.resource.disputed_transactions![0]!.custom;
      const captureId = `CAP${randomUUID().slice(0, 8).toUpperCase()}`;
      dispute.resource.disputed_transactions![0]!.seller_transaction_id = captureId;
      paypal.captures.set(captureId, { ...capture.resource, id: captureId });
      const looked = await deliver(store.id, delivery(dispute));
      expectStatus(looked, 200);
      assert.deepEqual(looked.json(), { status: "disputeInvoice", invoiceId: second.id });
      assert.ok(paypal.calls.includes(`GET /v2/payments/captures/${captureId}`));
      assert.equal((await invoiceState(h, store.key, second.id)).status, "disputed");
    });
  });
}
