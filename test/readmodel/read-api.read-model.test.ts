// The read model behind the read API, on SQLite and PostgreSQL: the projector stores each page's
// documents, raw writes mark them stale, and the pages are right throughout (assembled from the source
// tables until the documents are rebuilt), whatever a raw write moves, re-homes or deletes.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { DIALECTS, createHarness, type Harness } from "../helpers/harness.ts";
import { buildFixture, customersPage, ids, invoicesPage, type Fixture, type Json } from "../helpers/read-api.ts";

for (const dialect of DIALECTS) {
  describe(`read API read model on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let f: Fixture;
    before(async () => {
      h = await createHarness(dialect.name);
      f = await buildFixture(h);
    });
    after(async () => {
      await h?.close();
    });

    const customers = (query = "", key = f.a.key) => customersPage(h, query, key);
    const invoices = (query = "", key = f.a.key) => invoicesPage(h, query, key);

    test("read model: the projector stores the documents after checkout, a raw write marks them stale, and the page is right throughout", async () => {
      const db = h.services.db.kysely;
      const c = await h.store("C");
      const dave = (await h.customer(c.id, { email: "dave@example.com" })).id;
      const inv = await h.checkout(c.id, { customerId: dave, paymentMethod: "stripe", items: [{ productVariantId: "var-d", quantity: 1, price: 3 }] });
      const stored = async () => ({
        customer: (await db.selectFrom("customer_views").select("body").where("id", "=", dave).executeTakeFirst())?.body,
        invoice: (await db.selectFrom("invoice_views").select("body").where("id", "=", inv.id).executeTakeFirst())?.body,
      });
      const marked = async (views: "customer_views" | "invoice_views", id: string) =>
        (await db.selectFrom(`stale_${views}`).select("pos").where("doc_id", "=", id).execute()).length > 0;
      assert.equal((await invoices(`?id=${inv.id}`, c.key)).data.invoices[0]!.id, inv.id, "listed before its document is built (assembled)");
      await h.services.projector.drain();
      const before = await stored();
      assert.ok(before.customer && before.invoice, "the projector wrote both documents after the checkout committed");
      const listed = (await invoices(`?id=${inv.id}`, c.key)).data.invoices[0];
      assert.deepEqual(JSON.parse(before.invoice), listed, "the stored document is the listed invoice");

      await db.updateTable("invoices").set({ status: "completed" }).where("id", "=", inv.id).execute();
      assert.ok(await marked("invoice_views", inv.id), "the trigger marked the invoice's document stale");
      assert.ok(await marked("customer_views", dave), "and its customer's, whose figures depend on it");
      const dave2 = (await customers("?id=" + dave, c.key)).data.customers[0]!;
      assert.equal(dave2.totalOrders, 1, "assembled from the source tables, not the stale document");
      assert.equal((await invoices(`?id=${inv.id}`, c.key)).data.invoices[0]!.status, "completed");
      assert.equal((await invoices("", c.key)).data.invoices[0]!.status, "completed", "an unfiltered page too");
      await h.services.projector.drain();
      assert.equal(JSON.parse((await stored()).invoice!).status, "completed", "rebuilt by the projector");
    });

    test("read model: unfiltered pages follow raw writes that move, re-home or delete an element (the documents' own page order)", async () => {
      const db = h.services.db.kysely;
      const c = await h.store("RM");
      const other = await h.store("RM2");
      const eve = (await h.customer(c.id, { email: "eve@example.com" })).id;
      const finn = (await h.customer(c.id, { email: "finn@example.com" })).id;
      const buy = (customerId: string) => h.checkout(c.id, { customerId, paymentMethod: "stripe", items: [{ productVariantId: "var-rm", quantity: 1, price: 3 }] });
      const eveFirst = (await buy(eve)).id;
      const deleted = (await buy(eve)).id;
      await buy(finn);
      const order = async (list: "customers" | "invoices", key = c.key) => ids(list === "customers" ? (await customers("", key)).data.customers : (await invoices("", key)).data.invoices);
      const before = (await order("invoices")) as string[];
      assert.equal(before.length, 3);
      const kept = before.filter((id) => id !== deleted);
      const [first, last] = [kept[0]!, kept[1]!];

      // The older of the two kept invoices made the newest, the other deleted, without the service's writers.
      await db.updateTable("invoices").set({ created_at: Date.now() + 60_000 }).where("id", "=", last).execute();
      await db.deleteFrom("invoice_items").where("invoice_id", "=", deleted).execute();
      await db.deleteFrom("invoices").where("id", "=", deleted).execute();
      assert.deepEqual(await order("invoices"), [last, first], "moved to the front, the deleted one gone");
      assert.deepEqual(await order("invoices"), ids((await invoices(`?createdAtFrom=2000-01-01`, c.key)).data.invoices), "a date window agrees");

      // A customer moved to another store: listed there, no longer here.
      await db.updateTable("customers").set({ store_id: other.id }).where("id", "=", finn).execute();
      assert.deepEqual(await order("customers"), [eve]);
      assert.deepEqual(await order("customers", other.key), [finn]);
      const eveListed = (await customers("", c.key)).data.customers[0]! as unknown as { invoices: Json[] };
      assert.deepEqual(ids(eveListed.invoices), [eveFirst], "eve's document rebuilt from the source tables without the deleted invoice");
    });
  });
}
