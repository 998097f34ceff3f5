// The invoice lifecycle through the real app: cancel and refund (admin API and command line), the payment
// window's expiry (in batches, claimed so that several processes can run it, and by `serve` itself), and
// the one state machine behind them all.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { loadConfig } from "../../src/config.ts";
import { decideTransition, type InvoiceAction } from "../../src/invoices/invoice-state.ts";
import { INVOICE_STATUSES, type InvoiceStatus } from "../../src/schemas/invoices.schemas.ts";
import { createServices } from "../../src/services.ts";
import { ADMIN_TOKEN, DIALECTS, createClock, createHarness, expectStatus, freshDatabase, type Harness } from "../helpers/harness.ts";
import { startServer } from "../helpers/server.ts";
import { deliverSigned, invoiceView, paymentSetup } from "../helpers/webhook.ts";

type Json = Record<string, unknown>;
const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../src/main.ts");
const run = promisify(execFile);
const MINUTE = 60_000;

test("the state machine: every status × action pair, as docs/plugins.md and docs/operations.md decide", () => {
  const expected: Record<InvoiceStatus, Record<InvoiceAction, string>> = {
    pending: { pushInvoice: "completed", disputeInvoice: "invalid", expire: "expired", cancel: "cancelled", refund: "invalid" },
    expired: { pushInvoice: "completed", disputeInvoice: "invalid", expire: "already", cancel: "invalid", refund: "invalid" },
    completed: { pushInvoice: "already", disputeInvoice: "disputed", expire: "invalid", cancel: "invalid", refund: "refunded" },
    disputed: { pushInvoice: "completed", disputeInvoice: "already", expire: "invalid", cancel: "invalid", refund: "refunded" },
    refunded: { pushInvoice: "invalid", disputeInvoice: "invalid", expire: "invalid", cancel: "invalid", refund: "already" },
    cancelled: { pushInvoice: "invalid", disputeInvoice: "invalid", expire: "invalid", cancel: "already", refund: "invalid" },
  };
  for (const status of INVOICE_STATUSES) {
    for (const [action, want] of Object.entries(expected[status]) as [InvoiceAction, string][]) {
      const d = decideTransition(status, action);
      assert.equal(d.kind === "change" ? d.to : d.kind, want, `${action} on ${status}`);
    }
  }
});

for (const dialect of DIALECTS) {
  describe(`invoice lifecycle on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name);
    });
    after(async () => {
      await h?.close();
    });

    const post = (storeId: string, invoiceId: string, action: "cancel" | "refund", body?: Json) =>
      h.admin("POST", `/api/admin/stores/${storeId}/invoices/${invoiceId}/${action}`, body);

    test("a checkout's invoice id has the usual shape and sorts by the checkout's time", async () => {
      const store = await h.store();
      const customer = await h.customer(store.id);
      const ids: string[] = [];
      const start = h.clock.now();
      for (let i = 0; i < 5; i++) {
        ids.push((await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] })).id);
        h.clock.advance(1);
      }
      h.clock.set(start);
      for (const id of ids) assert.match(id, /^inv_[0-9a-hjkmnp-tv-z]{20}$/);
      assert.deepEqual([...ids].sort(), ids, "a later checkout's id sorts after");
    });

    test("cancel: a pending invoice becomes cancelled, logged with the merchant's reason; a second cancel answers 409 and writes nothing", async () => {
      const { store, invoice } = await paymentSetup(h);
      const r = await post(store.id, invoice.id, "cancel", { reason: "customer changed their mind" });
      expectStatus(r, 200);
      const body = r.json<{ id: string; status: string; invoiceLogs: { log: string; type: string }[] }>();
      assert.equal(body.id, invoice.id);
      assert.equal(body.status, "cancelled");
      assert.deepEqual(body.invoiceLogs.at(-1), {
        log: "Cancelled by the merchant (admin API): customer changed their mind: pending -> cancelled",
        type: "info",
        createdAt: "2024-01-01T00:00:00.000Z",
      });
      const again = await post(store.id, invoice.id, "cancel");
      expectStatus(again, 409);
      const err = again.json<{ error: Json }>().error;
      assert.equal(err.code, "invalid_transition");
      assert.equal(err.currentStatus, "cancelled");
      const view = await invoiceView(h, store.key, invoice.id);
      assert.equal(view.invoiceLogs.filter((l) => l.log.includes("-> cancelled")).length, 1);
      // A cancelled invoice stays cancelled whatever a plugin says later.
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id }), 409);
    });

    test("refund: completed and disputed invoices become refunded; pending, expired and cancelled ones answer 409 with their status", async () => {
      const { store, customer, invoice } = await paymentSetup(h);
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id }), 200);
      const refunded = await post(store.id, invoice.id, "refund");
      expectStatus(refunded, 200);
      assert.equal(refunded.json<Json>().status, "refunded");
      assert.match(refunded.json<{ invoiceLogs: { log: string; type: string }[] }>().invoiceLogs.at(-1)!.log, /^Refunded by the merchant \(admin API\): completed -> refunded$/);
      expectStatus(await post(store.id, invoice.id, "refund"), 409);

      const disputed = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: disputed.id }), 200);
      expectStatus(await deliverSigned(h, store.id, { type: "dispute", invoiceId: disputed.id }), 200);
      const r = await post(store.id, disputed.id, "refund", { reason: "dispute lost" });
      expectStatus(r, 200);
      assert.equal(r.json<Json>().status, "refunded");

      const pending = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
      const refused = await post(store.id, pending.id, "refund");
      expectStatus(refused, 409);
      assert.equal(refused.json<{ error: Json }>().error.currentStatus, "pending");
      expectStatus(await post(store.id, pending.id, "cancel"), 200);
      assert.equal((await post(store.id, pending.id, "refund")).json<{ error: Json }>().error.currentStatus, "cancelled");
    });

    test("cancel and refund: 404 for an unknown invoice, another store's invoice or an unknown store; 401 without the admin token; 400 for unknown fields", async () => {
      const { store, invoice } = await paymentSetup(h);
      const other = await h.store("other");
      const unknown = await post(store.id, "inv_nope", "cancel");
      expectStatus(unknown, 404);
      assert.equal(unknown.json<{ error: Json }>().error.code, "invoice_not_found");
      const foreign = await post(other.id, invoice.id, "cancel");
      expectStatus(foreign, 404);
      assert.equal(foreign.json<{ error: Json }>().error.code, "invoice_not_found");
      const noStore = await post("st_nope", invoice.id, "refund");
      expectStatus(noStore, 404);
      assert.equal(noStore.json<{ error: Json }>().error.code, "store_not_found");
      expectStatus(await h.app.inject({ method: "POST", url: `/api/admin/stores/${store.id}/invoices/${invoice.id}/cancel` }), 401);
      const bad = await post(store.id, invoice.id, "cancel", { reason: "x", amount: 5 });
      expectStatus(bad, 400);
      assert.equal(bad.json<{ error: Json }>().error.param, "amount");
      assert.equal((await invoiceView(h, store.key, invoice.id)).status, "pending", "nothing changed");
    });

    test("20 concurrent cancels of one invoice: exactly one succeeds, the others answer 409, one log line", async () => {
      const { store, invoice } = await paymentSetup(h);
      const answers = await Promise.all(Array.from({ length: 20 }, () => post(store.id, invoice.id, "cancel")));
      const codes = answers.map((a) => a.statusCode).sort();
      assert.deepEqual(codes, [200, ...Array<number>(19).fill(409)]);
      const view = await invoiceView(h, store.key, invoice.id);
      assert.equal(view.invoiceLogs.filter((l) => l.log.endsWith("pending -> cancelled")).length, 1);
    });

    test("expiry: pending invoices past the payment window expire with their log line; younger, paid and cancelled ones stay; a late payment still completes", async () => {
      h.clock.set("2024-02-01T00:00:00.000Z");
      await h.services.invoiceLifecycle.expireDue(); // earlier tests' pending invoices are long due
      const { store, customer, invoice: old } = await paymentSetup(h);
      const item = { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] };
      const paid = await h.checkout(store.id, item);
      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: paid.id }), 200);
      const cancelled = await h.checkout(store.id, item);
      expectStatus(await post(store.id, cancelled.id, "cancel"), 200);
      h.clock.advance(30 * MINUTE);
      const young = await h.checkout(store.id, item);

      h.clock.advance(30 * MINUTE); // `old` is exactly 60 minutes old: not yet past the window
      assert.equal((await h.services.invoiceLifecycle.expireDue()).expired, 0);
      h.clock.advance(1);
      assert.equal((await h.services.invoiceLifecycle.expireDue()).expired, 1);
      const expired = await invoiceView(h, store.key, old.id);
      assert.equal(expired.status, "expired");
      assert.deepEqual(expired.invoiceLogs.at(-1), { log: "Payment window elapsed (60 min without payment): pending -> expired", type: "info", createdAt: "2024-02-01T01:00:00.001Z" });
      for (const [inv, status] of [[young, "pending"], [paid, "completed"], [cancelled, "cancelled"]] as const) {
        assert.equal((await invoiceView(h, store.key, inv.id)).status, status);
      }
      assert.equal((await h.services.invoiceLifecycle.expireDue()).expired, 0, "expired once");
      expectStatus(await post(store.id, old.id, "cancel"), 409);

      expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: old.id }), 200);
      const late = await invoiceView(h, store.key, old.id);
      assert.equal(late.status, "completed");
      assert.match(late.invoiceLogs.at(-1)!.log, /expired -> completed$/);
    });

    test("expiry works in batches: 120 due invoices in batches of 50 are each expired and logged once", async () => {
      h.clock.set("2024-03-01T00:00:00.000Z");
      await h.services.invoiceLifecycle.expireDue(); // earlier tests' pending invoices are long due
      const store = await h.store("bulk");
      const customer = await h.customer(store.id);
      const ids: string[] = [];
      for (let i = 0; i < 120; i++) {
        const inv = await h.services.invoices.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
        ids.push(inv.id);
      }
      h.clock.advance(61 * MINUTE);
      const pass = await h.services.invoiceLifecycle.expireDue({ batchSize: 50 });
      assert.deepEqual(pass, { expired: 120, batches: 3 });
      const db = h.services.db.kysely;
      const statuses = await db.selectFrom("invoices").select(["status"]).where("store_id", "=", store.id).execute();
      assert.ok(statuses.every((s) => s.status === "expired"));
      const lines = await db.selectFrom("invoice_logs").select(["invoice_id"]).where("invoice_id", "in", ids).where("log", "like", "Payment window elapsed%").execute();
      assert.equal(lines.length, 120);
      assert.equal(new Set(lines.map((l) => l.invoice_id)).size, 120);
    });
  });
}

describe("invoice expiry across processes", { skip: DIALECTS[1]!.skip }, () => {
  test("PostgreSQL: three service instances expiring the same 150 invoices at once expire each exactly once", async () => {
    const database = await freshDatabase("postgres");
    const clock = createClock(Date.parse("2024-04-01T00:00:00.000Z"));
    const config = loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: "silent", SECRETS_KEY: randomBytes(32).toString("hex"), PLUGIN_POOL_SIZE: "1" });
    const instances = [await createServices(config, { now: clock.now }), await createServices(config, { now: clock.now, migrate: false }), await createServices(config, { now: clock.now, migrate: false })];
    try {
      const [a] = instances as [Awaited<ReturnType<typeof createServices>>];
      const store = await a.stores.createStore("multi");
      const customer = await a.customers.create(store.id, { email: "m@example.com" });
      for (let i = 0; i < 150; i++) {
        await a.invoices.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
      }
      clock.advance(61 * MINUTE);
      const passes = await Promise.all(instances.map((s) => s.invoiceLifecycle.expireDue({ batchSize: 10 })));
      assert.equal(passes.reduce((n, p) => n + p.expired, 0), 150, `each invoice expired by exactly one instance: ${JSON.stringify(passes)}`);
      const logs = await a.db.kysely.selectFrom("invoice_logs").select(["invoice_id"]).where("log", "like", "Payment window elapsed%").execute();
      assert.equal(logs.length, 150);
      assert.equal(new Set(logs.map((l) => l.invoice_id)).size, 150);
    } finally {
      for (const s of instances) await s.close();
      await database.drop();
    }
  });
});

describe("invoice lifecycle from the command line and from serve", () => {
  test("`storefront invoices cancel|refund|expire` on the local database; `serve` expires due invoices by itself", async () => {
    const database = await freshDatabase("sqlite");
    const secretsKey = randomBytes(32).toString("hex");
    const env = { ...process.env, DATABASE_URL: database.url, SECRETS_KEY: secretsKey, LOG_LEVEL: "silent", ADMIN_TOKEN };
    // Invoices created two hours ago (a clock in the past), on the file the commands and the server use.
    const clock = createClock(Date.now() - 120 * MINUTE);
    const services = await createServices(loadConfig({ DATABASE_URL: database.url, SECRETS_KEY: secretsKey, LOG_LEVEL: "silent" }), { now: clock.now });
    const storeId = (await services.stores.createStore("cli")).id;
    const customer = await services.customers.create(storeId, { email: "cli@example.com" });
    const checkout = async () => (await services.invoices.checkout(storeId, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 2 }] })).id;
    const toCancel = await checkout();
    await checkout(); // expired by the command
    await services.close();

    const cancelled = await run(process.execPath, [MAIN, "invoices", "cancel", toCancel, "--store", storeId, "--reason", "duplicate order"], { env });
    const body = JSON.parse(cancelled.stdout) as { status: string; invoiceLogs: { log: string }[] };
    assert.equal(body.status, "cancelled");
    assert.equal(body.invoiceLogs.at(-1)!.log, "Cancelled by the merchant (command line): duplicate order: pending -> cancelled");
    const refused = await run(process.execPath, [MAIN, "invoices", "refund", toCancel, "--store", storeId], { env }).then(
      () => assert.fail("refunding a cancelled invoice must fail"),
      (err: { code: number; stderr: string }) => err,
    );
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^error: invalid_transition: Invoice \S+ is cancelled; only a completed or disputed invoice can be refunded\n$/);

    const expired = await run(process.execPath, [MAIN, "invoices", "expire", "--json"], { env });
    assert.deepEqual(JSON.parse(expired.stdout), { expired: 1, paymentWindowMinutes: 60 });

    // One more overdue invoice; the server's loop expires it at start, without being asked.
    const again = await createServices(loadConfig({ DATABASE_URL: database.url, SECRETS_KEY: secretsKey, LOG_LEVEL: "silent" }), { now: clock.now });
    const toExpireByServe = (await again.invoices.checkout(storeId, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 2 }] })).id;
    await again.close();
    const server = await startServer({ DATABASE_URL: database.url, SECRETS_KEY: secretsKey, ADMIN_TOKEN });
    try {
      const created = await fetch(`${server.url}/api/admin/stores/${storeId}/keys`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }, body: "{}" });
      const { key: apiKey } = (await created.json()) as { key: string };
      let status = "";
      for (let i = 0; i < 50 && status !== "expired"; i++) {
        const r = await fetch(`${server.url}/api/service/invoices?id=${toExpireByServe}`, { headers: { authorization: apiKey } });
        status = ((await r.json()) as { data: { invoices: { status: string }[] } }).data.invoices[0]!.status;
        if (status !== "expired") await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.equal(status, "expired", server.output());
      assert.equal(await server.stop(), 0);
    } finally {
      await server.kill9();
      await database.drop();
    }
  });
});
