// Helpers for the catalogue tests: the providers' sample events (taken from the catalogue's own
// fixtures), a store with a catalogue plugin and a pending invoice, and the checks every provider's
// suite repeats (one transition at most, a warning on the invoice, a delivery's log lines).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { LightMyRequestResponse } from "fastify";
import type { Harness } from "./harness.ts";
import { expectStatus } from "./harness.ts";
import { invoiceView } from "./webhook.ts";

export const CATALOG = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../plugins-catalog");
/** The invoice id the catalogue's fixtures use. */
export const FIXTURE_INVOICE = "inv_catalog_0001";

type Json = Record<string, unknown>;

/** A fixture file of the catalogue, parsed. */
export function catalogFixture(plugin: string, name: string): Json & { request: { headers: Record<string, string>; body: unknown }; expect: Json } {
  return JSON.parse(readFileSync(path.join(CATALOG, "fixtures", plugin, `${name}.json`), "utf8")) as Json & { request: { headers: Record<string, string>; body: unknown }; expect: Json };
}

/** A provider's sample event from a catalogue fixture, with every occurrence of the fixtures' invoice id replaced. */
export function sampleEvent<T = Json>(plugin: string, fixture: string, invoiceId: string): T {
  const body = catalogFixture(plugin, fixture).request.body;
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return JSON.parse(text.split(FIXTURE_INVOICE).join(invoiceId)) as T;
}

/** A store with the catalogue plugin installed (by name, as `plugins install --catalog` does) and a pending invoice. */
export async function catalogSetup(h: Harness, catalog: string, secrets: Record<string, string>, price = 49.99) {
  const store = await h.store(`${catalog} store`);
  const installed = await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/${catalog}`, { catalog, secrets });
  if (installed.statusCode !== 201 && installed.statusCode !== 200) throw new Error(`install failed: ${installed.statusCode} ${installed.body}`);
  const customer = await h.customer(store.id);
  const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: catalog, items: [{ productVariantId: "var-catalog", quantity: 1, price }] });
  return { store, customer, invoice };
}

/** Another pending invoice in the same store. */
export async function anotherInvoice(h: Harness, storeId: string, customerId: string, price = 49.99) {
  return h.checkout(storeId, { customerId, paymentMethod: "catalog", items: [{ productVariantId: "var-catalog", quantity: 1, price }] });
}

export function post(h: Harness, storeId: string, pluginName: string, body: string | Buffer, headers: Record<string, string>): Promise<LightMyRequestResponse> {
  return h.app.inject({
    method: "POST",
    url: `/api/paymentPlugins?pluginName=${encodeURIComponent(pluginName)}&storeId=${encodeURIComponent(storeId)}`,
    headers: { "content-type": "application/json", ...headers },
    payload: body,
  });
}

export const errorCode = (r: LightMyRequestResponse) => r.json<{ error: { code: string } }>().error.code;

/** The invoice as the read API shows it, with the number of "Payment confirmed" transition lines. */
export async function invoiceState(h: Harness, key: string, invoiceId: string) {
  const inv = await invoiceView(h, key, invoiceId);
  return { ...inv, confirmations: inv.invoiceLogs.filter((l) => l.log.startsWith("Payment confirmed")).length };
}

export async function expectPending(h: Harness, key: string, invoiceId: string) {
  const inv = await invoiceState(h, key, invoiceId);
  assert.equal(inv.status, "pending", `invoice ${invoiceId} must stay pending`);
  assert.equal(inv.confirmations, 0);
  return inv;
}

/** An underpayment: answered 200 ignore naming the invoice, which stays pending with a warning in its logs. */
export async function expectUnderpaymentIgnored(h: Harness, key: string, invoiceId: string, r: LightMyRequestResponse, warning = /underpaid/) {
  expectStatus(r, 200);
  assert.deepEqual(r.json(), { status: "ignore", invoiceId });
  const inv = await expectPending(h, key, invoiceId);
  assert.ok(
    inv.invoiceLogs.some((l) => l.type === "warning" && warning.test(l.log)),
    `a warning matching ${warning} is in the invoice's logs: ${JSON.stringify(inv.invoiceLogs)}`,
  );
}

/** The log lines of the delivery that answered `r`. */
export async function deliveryLogs(h: Harness, storeId: string, r: LightMyRequestResponse) {
  const d = await h.admin("GET", `/api/admin/stores/${storeId}/deliveries/${String(r.headers["x-delivery-id"])}`);
  expectStatus(d, 200);
  return d.json<{ logs: { description: string; type: string }[] }>().logs;
}

/**
 * An event naming another store's invoice: ignored with a warning in the delivery log; the other
 * store's invoice is untouched and gets no log line.
 */
export async function expectForeignInvoiceIgnored(h: Harness, storeId: string, r: LightMyRequestResponse, other: { key: string; invoiceId: string }) {
  expectStatus(r, 200);
  assert.deepEqual(r.json(), { status: "ignore" });
  const logs = await deliveryLogs(h, storeId, r);
  assert.ok(logs.some((l) => l.type === "warning" && l.description.includes("not in this store")), JSON.stringify(logs));
  const inv = await expectPending(h, other.key, other.invoiceId);
  assert.equal(inv.invoiceLogs.length, 1, "only its creation line");
}
