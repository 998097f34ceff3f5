// SQLite: a big customer document (a customer with hundreds of invoices) is patched in place when every
// change waiting for it is a write to one of its invoices, and the patched text is byte for byte the
// document a rebuild makes. Anything a patch cannot follow (a new, deleted or moved invoice, a changed
// creation time, a change to the customer's own rows) rebuilds it whole, with the same result.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import { assembleCustomers, customerRows } from "../../src/readmodel/customer-documents.ts";
import { PATCH_FROM_BYTES, patchCustomerDocument } from "../../src/readmodel/customer-patch.ts";
import { applyBatch, buildBatch } from "../../src/readmodel/projector.sqlite.ts";
import { createHarness, type Harness } from "../helpers/harness.ts";
import { watchBuilds } from "../helpers/projector-builds.ts";

const INVOICES = 320;

describe("big customer documents patched in place (SQLite)", () => {
  let h: Harness;
  let storeId: string;
  let customerId: string;
  let invoiceIds: string[];

  before(async () => {
    h = await createHarness("sqlite");
    storeId = (await h.store()).id;
    customerId = (await h.customer(storeId, { discordId: "d-1" })).id;
    invoiceIds = [];
    for (let i = 0; i < INVOICES; i++) {
      const invoice = await h.checkout(storeId, { customerId, paymentMethod: i % 2 === 0 ? "card" : "paypal", items: [{ productVariantId: `v${i % 7}`, quantity: 1, price: 5 + (i % 13) }] });
      invoiceIds.push(invoice.id);
    }
    const db = h.services.db.kysely;
    // Strings that look like the document's own structure, which a patch must not mistake for it.
    // Characters beyond ASCII too: the patch works on the text's UTF-8 bytes.
    const tricky = `{"id":${JSON.stringify(invoiceIds[1])},"createdAt":"2020-01-01T00:00:00.000Z"} \\ "quoted" }{ ,"email": ,"invoices":[ café ✓ 😀`;
    await db.updateTable("invoices").set({ displayed_payment_info: tricky }).where("id", "=", invoiceIds[0]!).execute();
    await db.updateTable("invoices").set({ status: "completed" }).where("id", "in", invoiceIds.slice(10, 200)).execute();
    await h.services.projector.drain();
  });
  after(async () => {
    await h?.close();
  });

  const stored = async () => (await h.services.db.kysely.selectFrom("customer_views").select("body").where("id", "=", customerId).executeTakeFirstOrThrow()).body;
  const storedType = async () => (await sql<{ type: string }>`select typeof(body) as type from customer_views where id = ${customerId}`.execute(h.services.db.kysely)).rows[0]?.type;
  const rebuilt = async () => JSON.stringify((await assembleCustomers(h.services.db.kysely, await customerRows(h.services.db.kysely, [customerId])))[0]);
  /** One pass over the customers' documents, built and written as the projector does; how many were patched. */
  async function pass(): Promise<number> {
    const built = await buildBatch(h.services.db.kysely, [{ views: "customer_views", cooling: [], batch: 100 }]);
    await applyBatch(h.services.db.kysely, built);
    return built[0]!.patched;
  }
  const setStatus = (ids: string[], status: string) => h.services.db.kysely.updateTable("invoices").set({ status }).where("id", "in", ids).execute();

  test("the customer's document is big enough to be patched", async () => {
    assert.ok(String(await stored()).length >= PATCH_FROM_BYTES, `${String(await stored()).length} bytes`);
  });

  test("a write to an invoice marks its customer's document naming the invoice", async () => {
    await setStatus([invoiceIds[300]!], "completed");
    const marks = await h.services.db.kysely.selectFrom("stale_customer_views").select(["doc_id", "invoice_id"]).execute();
    assert.deepEqual(marks, [{ doc_id: customerId, invoice_id: invoiceIds[300] }]);
    await h.services.projector.drain();
  });

  test("status changes are patched, the figures with them, and the text is the rebuild's", async () => {
    // Paid (the figures grow), refunded (the first completed order leaves them), the entry whose text
    // imitates the structure, and one invoice written twice.
    await setStatus([invoiceIds[250]!, invoiceIds[251]!, invoiceIds[0]!], "completed");
    await setStatus([invoiceIds[10]!, invoiceIds[199]!], "refunded");
    await setStatus([invoiceIds[251]!], "disputed");
    const before = String(await stored());
    assert.equal(await pass(), 1, "patched, not rebuilt");
    const after = String(await stored());
    assert.notEqual(after, before);
    assert.equal(after, await rebuilt());
    assert.equal(await storedType(), "text", "stored as text, as a rebuild stores it, not as the bytes' blob");
    assert.equal(await pass(), 0, "nothing left stale");
  });

  test("the service's projector patches on its reader thread and the bytes arrive whole", async () => {
    const { built, restore } = watchBuilds(h);
    try {
      await setStatus([invoiceIds[270]!], "completed");
      await h.services.projector.drain();
    } finally {
      restore();
    }
    const patched = built.filter((b) => b.patched > 0);
    assert.equal(patched.length, 1, "one pass patched the document");
    assert.ok(patched[0]!.bodies.every(([, body]) => body instanceof Uint8Array && body.byteLength >= PATCH_FROM_BYTES), "handed over as bytes");
    assert.equal(await storedType(), "text");
    assert.equal(await stored(), await rebuilt());
  });

  test("a change a patch cannot follow rebuilds the document whole, to the same text", async () => {
    const cases: [string, () => Promise<unknown>][] = [
      ["a new invoice", () => h.checkout(storeId, { customerId, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 2, price: 3 }] })],
      ["a deleted invoice", () => h.services.db.kysely.deleteFrom("invoices").where("id", "=", invoiceIds[5]!).execute()],
      ["an invoice's creation time changed", () => h.services.db.kysely.updateTable("invoices").set({ created_at: 1 }).where("id", "=", invoiceIds[6]!).execute()],
      ["a review of the customer", () => sql`insert into reviews (id, store_id, customer_id, rating, text, product_id, created_at, customer_created_at) values ('rev_1', ${storeId}, ${customerId}, 5, 'ok', 'p', 1, 1)`.execute(h.services.db.kysely)],
      ["a paid invoice beside the customer's own change", async () => {
        await setStatus([invoiceIds[260]!], "completed");
        await h.services.db.kysely.updateTable("customers").set({ email: "new@example.com" }).where("id", "=", customerId).execute();
      }],
    ];
    for (const [name, change] of cases) {
      await change();
      assert.equal(await pass(), 0, `${name}: rebuilt`);
      assert.equal(await stored(), await rebuilt(), name);
    }
  });

  test("an invoice moved to another customer rebuilds both documents", async () => {
    const other = (await h.customer(storeId)).id;
    await h.services.projector.drain();
    await h.services.db.kysely.updateTable("invoices").set({ customer_id: other }).where("id", "=", invoiceIds[7]!).execute();
    assert.equal(await pass(), 0);
    assert.equal(await stored(), await rebuilt());
    assert.doesNotMatch(String(await stored()), new RegExp(invoiceIds[7]!));
  });
});

describe("patchCustomerDocument", () => {
  const row = (id: string, createdAt: number, status = "pending") => ({
    id,
    store_id: "sto_1",
    customer_id: "cus_1",
    total_cents: 1999,
    payment_method: "card",
    displayed_payment_info: "card 4242",
    created_on_session_id: "ses_1",
    left_feedback: 0,
    status,
    discord_id: null,
    discord_email: null,
    created_at: createdAt,
    updated_at: createdAt,
  });
  const document = '{"id":"cus_1","totalOrders":0,"lastOrderDate":null,"firstOrderDate":null,"totalSpent":0,"email":"a@b.c","createdAt":"2024-01-01T00:00:00.000Z","storeCustomerDiscordAccount":null,"reviews":[],"customerSessions":[],"invoices":[{"id":"inv_2","totalInUsd":19.99,"paymentMethod":"card","displayedPaymentInfo":"card 4242","createdOnSessionId":"ses_1","leftFeedback":false,"status":"pending","createdAt":"2024-01-02T00:00:00.000Z"},{"id":"inv_1","totalInUsd":19.99,"paymentMethod":"card","displayedPaymentInfo":"card 4242","createdOnSessionId":"ses_1","leftFeedback":false,"status":"pending","createdAt":"2024-01-01T00:00:00.000Z"}]}';
  const day = Date.parse("2024-01-01T00:00:00.000Z");

  test("replaces the entry and the figures", () => {
    const out = patchCustomerDocument(Buffer.from(document), "cus_1", [row("inv_1", day, "completed")], { orders: 1, spentCents: 1999, first: day, last: day });
    assert.equal(out?.toString(), document.replace('"totalOrders":0,"lastOrderDate":null,"firstOrderDate":null,"totalSpent":0', '"totalOrders":1,"lastOrderDate":"2024-01-01T00:00:00.000Z","firstOrderDate":"2024-01-01T00:00:00.000Z","totalSpent":19.99').replace('"status":"pending","createdAt":"2024-01-01', '"status":"completed","createdAt":"2024-01-01'));
  });

  test("leaves to a rebuild what it cannot follow", () => {
    const none = { orders: 0, spentCents: 0, first: null, last: null };
    assert.equal(patchCustomerDocument(Buffer.from(document), "cus_1", [row("inv_3", day)], none), null, "an invoice not in the list");
    assert.equal(patchCustomerDocument(Buffer.from(document), "cus_1", [{ ...row("inv_1", day), customer_id: "cus_2" }], none), null, "an invoice of another customer");
    assert.equal(patchCustomerDocument(Buffer.from(document), "cus_1", [row("inv_1", day + 1)], none), null, "a creation time changed");
    assert.equal(patchCustomerDocument(Buffer.from(document), "cus_2", [], none), null, "another customer's document");
    assert.equal(patchCustomerDocument(Buffer.from(document), "cus_1", [], { ...none, spentCents: 2 ** 53 }), null, "a sum a double cannot hold");
    assert.equal(patchCustomerDocument(Buffer.from('{"id":"cus_1","email":"a"}'), "cus_1", [], none), null, "no figures where expected");
  });
});
