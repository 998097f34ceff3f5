// SQLite: a projector pass follows most payments of a trickle, so its fixed cost counts. A payment makes an
// invoice's document and its customer's stale; one pass builds both tables' batches in one job on the
// projector's thread (one read transaction there) and writes them in one transaction on the writer's.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createHarness, type Harness } from "../helpers/harness.ts";
import { watchBuilds } from "../helpers/projector-builds.ts";

describe("SQLite: one projector pass for both tables", () => {
  let h: Harness;
  let statements: string[] | null = null;
  before(async () => {
    h = await createHarness("sqlite", {}, { onQuery: (text) => statements?.push(text) });
  });
  after(async () => {
    await h?.close();
  });

  test("a payment's stale invoice and customer are built in one job and written in one transaction, and both are fresh after it", async () => {
    const db = h.services.db.kysely;
    const store = await h.store();
    const customer = await h.customer(store.id);
    const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
    await h.services.projector.drain();
    await db.updateTable("invoices").set({ status: "paid" }).where("id", "=", invoice.id).execute();

    const { jobs, restore } = watchBuilds(h);
    statements = [];
    let sent: string[];
    try {
      assert.deepEqual(await h.services.projector.runOnce(), { documents: 2, more: false });
    } finally {
      sent = statements;
      statements = null;
      restore();
    }
    assert.deepEqual(jobs, [["invoice_views", "customer_views"]], "one job, invoices first");
    assert.equal(sent.filter((s) => /^begin\b/i.test(s)).length, 1, `one transaction on the writer's connection:\n${sent.join("\n")}`);
    for (const table of ["stale_invoice_views", "stale_customer_views"] as const) assert.deepEqual(await db.selectFrom(table).select("pos").execute(), [], `${table} emptied`);
    const invoiceDoc = await db.selectFrom("invoice_views").select("body").where("id", "=", invoice.id).executeTakeFirstOrThrow();
    const customerDoc = await db.selectFrom("customer_views").select("body").where("id", "=", customer.id).executeTakeFirstOrThrow();
    assert.equal((JSON.parse(invoiceDoc.body!) as { status: string }).status, "paid");
    assert.match(String(customerDoc.body), /"status":"paid"/);
  });

  test("a pass with only one table stale asks for that table alone", async () => {
    const db = h.services.db.kysely;
    const store = await h.store();
    await h.services.projector.drain();
    const customer = await h.customer(store.id);
    await db.deleteFrom("stale_invoice_views").execute();
    const { jobs, restore } = watchBuilds(h);
    try {
      await h.services.projector.runOnce();
    } finally {
      restore();
    }
    assert.deepEqual(jobs, [["customer_views"]]);
    assert.ok((await db.selectFrom("customer_views").select("body").where("id", "=", customer.id).executeTakeFirstOrThrow()).body !== null);
  });
});
