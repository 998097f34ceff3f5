// Helpers for webhook tests: a small signed test plugin and a way to post signed deliveries.
import { createHmac } from "node:crypto";
import type { LightMyRequestResponse } from "fastify";
import type { Harness } from "./harness.ts";
import { expectStatus } from "./harness.ts";

export const TEST_SECRET = "whsec_test_5up3r_s3cret_value";

/** Verifies an HMAC-SHA256 hex of the raw body in x-signature, then maps event types to results. */
export const SIGNED_PLUGIN = `
local sig = request.headers["x-signature"]
if sig == nil or not timingSafeEqual(sig, hmacShaSign(secrets.key, request.body, "sha256")) then
  reject("bad signature")
end
local e = request.json
log("received " .. tostring(e.type) .. " for " .. tostring(e.invoiceId), "info")
if e.type == "paid" then return { status = "pushInvoice", invoiceId = e.invoiceId } end
if e.type == "dispute" then return { status = "disputeInvoice", invoiceId = e.invoiceId } end
return { status = "ignore" }
`;

export const sign = (body: string | Buffer, secret = TEST_SECRET) => createHmac("sha256", secret).update(body).digest("hex");

export async function installPlugin(h: Harness, storeId: string, name: string, source: string, secrets: Record<string, string> = { key: TEST_SECRET }) {
  const r = await h.admin("PUT", `/api/admin/stores/${storeId}/plugins/${name}`, { source, secrets });
  if (r.statusCode !== 201 && r.statusCode !== 200) throw new Error(`install failed: ${r.statusCode} ${r.body}`);
  return r.json<{ name: string; version: number; enabled: boolean }>();
}

export function deliver(h: Harness, storeId: string, pluginName: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return h.app.inject({
    method: "POST",
    url: `/api/paymentPlugins?pluginName=${encodeURIComponent(pluginName)}&storeId=${encodeURIComponent(storeId)}`,
    headers: { "content-type": "application/json", ...headers },
    payload: body,
  });
}

export function deliverSigned(h: Harness, storeId: string, event: Record<string, unknown>, pluginName = "pay"): Promise<LightMyRequestResponse> {
  const body = JSON.stringify(event);
  return deliver(h, storeId, pluginName, body, { "x-signature": sign(body) });
}

/** A store with the signed plugin installed as "pay", a customer and a pending invoice. */
export async function paymentSetup(h: Harness, price = 49.99) {
  const store = await h.store();
  await installPlugin(h, store.id, "pay", SIGNED_PLUGIN);
  const customer = await h.customer(store.id);
  const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "var-1", quantity: 1, price }] });
  return { store, customer, invoice };
}

export async function invoiceView(h: Harness, key: string, invoiceId: string) {
  const r = await h.get(`/api/service/invoices?id=${invoiceId}`, key);
  expectStatus(r, 200);
  const inv = r.json<{ data: { invoices: { id: string; status: string; invoiceLogs: { log: string; type: string }[] }[] } }>().data.invoices.find((i) => i.id === invoiceId);
  if (!inv) throw new Error(`invoice ${invoiceId} not listed`);
  return inv;
}

/** The environment of the payment-webhook suites: a tight plugin budget, and a webhook rate limit that never interferes. */
export const WEBHOOK_SUITE_ENV: Record<string, string> = { PLUGIN_WALL_MS: "1500", PLUGIN_CPU_MS: "200", WEBHOOK_RATE_LIMIT_MAX: "100000" };

/** The error envelope's `error` of a response. */
export const errorOf = (r: { json: <T>() => T }) => r.json<{ error: Record<string, unknown> }>().error;
