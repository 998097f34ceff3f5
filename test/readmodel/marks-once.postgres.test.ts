// PostgreSQL: a transaction marks each document stale once (migration 0028). A payment changes its invoice's
// status and adds its log line in one statement, and each write marked the invoice's document: two marks,
// each inserted, read, deleted and vacuumed by the projector for one rebuild. A mark of another transaction
// never stands in for this one's: the projector may be rebuilding that document from sources read before
// this transaction's change, and deletes exactly the marks it read.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import type { Views } from "../../src/readmodel/staleness.ts";
import { createHarness, expectStatus, type Harness, pgSkip } from "../helpers/harness.ts";
import { deliverSigned, invoiceView, paymentSetup, WEBHOOK_SUITE_ENV } from "../helpers/webhook.ts";

describe("PostgreSQL: a transaction marks each document once", { skip: pgSkip }, () => {
  let h: Harness;
  before(async () => {
    h = await createHarness("postgres", WEBHOOK_SUITE_ENV);
  });
  after(async () => {
    await h?.close();
  });

  const marksOf = async (views: Views, id: string) =>
    Number((await sql<{ n: string }>`select count(*) as n from ${sql.table(`stale_${views}`)} where doc_id = ${id}`.execute(h.services.db.kysely)).rows[0]!.n);

  test("a payment marks its invoice's document once and its customer's once, and the list shows it before and after the rebuild", async () => {
    const { store, customer, invoice } = await paymentSetup(h);
    await h.services.projector.drain();
    expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id }), 200);
    assert.equal(await marksOf("invoice_views", invoice.id), 1, "the status change and the log line: one mark");
    assert.equal(await marksOf("customer_views", customer.id), 1);
    for (const when of ["marked", "rebuilt"]) {
      const view = await invoiceView(h, store.key, invoice.id);
      assert.equal(view.status, "completed", when);
      assert.ok(view.invoiceLogs.some((l) => /received paid/.test(l.log)), `${when}: the plugin's log line is listed`);
      await h.services.projector.drain();
    }
    assert.equal(await marksOf("invoice_views", invoice.id), 0);
  });

  test("a checkout marks its new invoice's document once, however many of its rows it writes", async () => {
    const store = await h.store();
    const customer = await h.customer(store.id);
    const invoice = await h.checkout(store.id, {
      customerId: customer.id,
      paymentMethod: "card",
      items: [
        { productVariantId: "v-1", quantity: 1, price: 5 },
        { productVariantId: "v-2", quantity: 2, price: 7 },
      ],
      fields: [{ key: "k", value: "v", type: "text" }],
    });
    assert.equal(await marksOf("invoice_views", invoice.id), 1);
  });

  test("a mark another transaction left does not stand in for this transaction's", async () => {
    const { invoice } = await paymentSetup(h);
    const db = h.services.db.kysely;
    await h.services.projector.drain();
    await sql`update invoices set updated_at = updated_at + 1 where id = ${invoice.id}`.execute(db);
    assert.equal(await marksOf("invoice_views", invoice.id), 1, "the first transaction's mark, not yet rebuilt");
    await db.transaction().execute(async (tx) => {
      await sql`update invoices set updated_at = updated_at + 1 where id = ${invoice.id}`.execute(tx);
      await sql`insert into invoice_logs (invoice_id, log, type, created_at) values (${invoice.id}, 'again', 'info', 1)`.execute(tx);
    });
    assert.equal(await marksOf("invoice_views", invoice.id), 2, "the second transaction marked it once more, once");
  });
});
