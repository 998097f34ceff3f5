// Property: for any generated store and any query (id, status, e-mail, date window, page size), paging the
// real API to the end returns exactly what a plain in-memory reference of the README's rules ("The read API") returns, in
// order; and every element is exactly what the source tables give (the read model's stored documents, the
// ones assembled for missing documents, and those made stale by a later raw write).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import fc from "fast-check";
import { assembleCustomers, customerRows } from "../../src/readmodel/customer-documents.ts";
import { assembleInvoices } from "../../src/readmodel/invoice-documents.ts";
import { rebuildReadModel } from "../../src/readmodel/documents.ts";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";

const T0 = Date.parse("2023-01-01T00:00:00.000Z");
const DAY = 86_400_000;

interface GenInvoice { id: string; createdAt: number; status: string; cents: number; session: string; discord: string | null; items: { variant: string; coupon: string | null }[] }
interface GenCustomer { id: string; createdAt: number; email: string; discord: string | null; reviews: string[]; invoices: GenInvoice[] }

// Few distinct timestamps and identifiers, so ties, shared variants and repeated ids are common.
const timeArb = fc.integer({ min: 0, max: 6 }).map((d) => T0 + d * DAY);
const variantArb = fc.constantFrom("v1", "v2", "v3");
const STATUSES = ["pending", "completed", "disputed", "refunded", "expired", "cancelled"];
const statusArb = fc.constantFrom(...STATUSES);
// Few addresses, differing in case only, so the case-insensitive match is what decides.
const EMAILS = ["ann@x.io", "Ann@X.io", "bob@x.io", "BOB@x.IO", "cy@x.io"];
const invoiceArb = fc.record({
  createdAt: timeArb,
  status: statusArb,
  cents: fc.integer({ min: 0, max: 100_000 }),
  discord: fc.option(fc.constantFrom("d1", "d2"), { nil: null }),
  items: fc.array(fc.record({ variant: variantArb, coupon: fc.option(fc.constantFrom("c1", "c2"), { nil: null }) }), { minLength: 1, maxLength: 3 }),
});
const customerArb = fc.record({
  createdAt: timeArb,
  email: fc.constantFrom(...EMAILS),
  discord: fc.option(fc.constantFrom("d1", "d2", "d3"), { nil: null }),
  reviews: fc.array(fc.constantFrom("p1", "p2"), { maxLength: 2 }),
  invoices: fc.array(invoiceArb, { maxLength: 3 }),
});
const queryArb = fc.record({
  id: fc.option(fc.constantFrom("v1", "v2", "v3", "c1", "c2", "d1", "d2", "d3", "p1", "p2", "CUS0", "CUS3", "INV0", "INV2", "SES1", "zzz"), { nil: undefined }),
  from: fc.option(timeArb, { nil: undefined }),
  to: fc.option(timeArb, { nil: undefined }),
  limit: fc.integer({ min: 1, max: 7 }),
  statuses: fc.option(fc.uniqueArray(statusArb, { minLength: 1, maxLength: 3 }), { nil: undefined }),
  email: fc.option(fc.constantFrom(...EMAILS, "ANN@x.io", "nobody@x.io"), { nil: undefined }),
  /** How the read model stands: documents missing (raw inserts), all stored, or stored then made stale. */
  documents: fc.constantFrom("missing", "stored", "stale"),
});

const byNewest = (a: { createdAt: number; id: string }, b: { createdAt: number; id: string }) =>
  b.createdAt - a.createdAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

for (const dialect of DIALECTS) {
  describe(`read API property on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let run = 0;
    before(async () => {
      h = await createHarness(dialect.name, { RATE_LIMIT_MAX: "100000000" });
    });
    after(async () => {
      await h?.close();
    });

    type GeneratedCustomer = Omit<GenCustomer, "id" | "invoices"> & { invoices: Omit<GenInvoice, "id" | "session">[] };

    async function insert(storeId: string, generated: GeneratedCustomer[]): Promise<GenCustomer[]> {
      const db = h.services.db.kysely;
      const r = `r${run}`; // ids are unique per run; the tokens CUS0/INV2/SES1 name this run's elements
      const customers: GenCustomer[] = [];
      let invoiceNo = 0;
      for (const [ci, c] of generated.entries()) {
        const customer: GenCustomer = { ...c, id: `cus_${r}_${ci}`, invoices: [] };
        await db.insertInto("customers").values({ id: customer.id, store_id: storeId, email: c.email, created_at: c.createdAt }).execute();
        if (c.discord) await db.insertInto("customer_discord_accounts").values({ customer_id: customer.id, store_id: storeId, discord_id: c.discord, email: "d@x.io" }).execute();
        for (const [ri, product] of c.reviews.entries()) {
          await db.insertInto("reviews").values({ id: `rev_${r}_${ci}_${ri}`, store_id: storeId, customer_id: customer.id, rating: 4, text: "", product_id: product, created_at: T0, customer_created_at: c.createdAt }).execute();
        }
        for (const inv of c.invoices) {
          const n = invoiceNo++;
          const invoice: GenInvoice = { ...inv, id: `inv_${r}_${n}`, session: `ses_${r}_${n % 3}` };
          await db
            .insertInto("invoices")
            .values({
              id: invoice.id, store_id: storeId, customer_id: customer.id, total_cents: inv.cents, payment_method: "m", displayed_payment_info: "",
              created_on_session_id: invoice.session, left_feedback: 0, status: inv.status, discord_id: inv.discord, discord_email: inv.discord ? "e" : null,
              created_at: inv.createdAt, updated_at: inv.createdAt,
            })
            .execute();
          await db
            .insertInto("invoice_items")
            .values(inv.items.map((it, position) => ({ invoice_id: invoice.id, position, store_id: storeId, customer_id: customer.id, product_variant_id: it.variant, quantity: 1, price_cents: 1, coupon_id: it.coupon, invoice_created_at: inv.createdAt, customer_created_at: c.createdAt })))
            .execute();
          customer.invoices.push(invoice);
        }
        customers.push(customer);
      }
      return customers;
    }

    const token = (id: string | undefined) =>
      id === undefined ? undefined : id.replace(/^CUS(\d)$/, `cus_r${run}_$1`).replace(/^INV(\d)$/, `inv_r${run}_$1`).replace(/^SES(\d)$/, `ses_r${run}_$1`);

    type Query = { id?: string; from?: number; to?: number; limit: number; statuses?: string[]; email?: string };
    async function pageAll(path: string, key: string, q: Query): Promise<Record<string, unknown>[]> {
      const params = new URLSearchParams({ limit: String(q.limit) });
      if (q.id !== undefined) params.set("id", q.id);
      if (q.statuses !== undefined) params.set("status", q.statuses.join(","));
      if (q.email !== undefined && path === "customers") params.set("email", q.email);
      if (q.from !== undefined) params.set("createdAtFrom", new Date(q.from).toISOString());
      if (q.to !== undefined) params.set("createdAtTo", new Date(q.to).toISOString());
      const out: Record<string, unknown>[] = [];
      for (let guard = 0; guard < 200; guard++) {
        const r = await h.get(`/api/service/${path}?${params}`, key);
        expectStatus(r, 200);
        const body = r.json<{ data: Record<string, Record<string, unknown>[]>; pagination: { nextCursor: string | null } }>();
        const page = body.data[path]!;
        assert.ok(page.length <= q.limit);
        out.push(...page);
        if (body.pagination.nextCursor === null) return out;
        params.set("cursor", body.pagination.nextCursor);
      }
      throw new Error("paging did not end");
    }

    test("customers and invoices: filter + paging equals the in-memory reference", async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(customerArb, { maxLength: 12 }), fc.array(queryArb, { minLength: 1, maxLength: 4 }), async (generated, queries) => {
          run++;
          const store = await h.store(`prop ${run}`);
          const data = await insert(store.id, generated);
          const db = h.services.db.kysely;
          const documents = queries[0]!.documents;
          if (documents !== "missing") await rebuildReadModel(db, store.id);
          if (documents === "stale") {
            // Raw writes after the documents were built, as a tool outside the services would make them.
            const first = data.find((c) => c.invoices.length > 0);
            if (first) {
              const inv = first.invoices[0]!;
              inv.status = inv.status === "completed" ? "refunded" : "completed";
              await db.updateTable("invoices").set({ status: inv.status }).where("id", "=", inv.id).execute();
              await db.insertInto("invoice_logs").values({ invoice_id: inv.id, log: "raw", type: "info", created_at: T0 }).execute();
            }
            const last = data.at(-1);
            if (last) {
              await db.insertInto("reviews").values({ id: `rev_${run}_late`, store_id: store.id, customer_id: last.id, rating: 1, text: "late", product_id: "p2", created_at: T0 + DAY, customer_created_at: last.createdAt }).execute();
              last.reviews.push("p2");
            }
          }
          for (const rawQuery of queries) {
            const q = { ...rawQuery, id: token(rawQuery.id) };
            if (q.from !== undefined && q.to !== undefined && q.from > q.to) continue;
            const inWindow = (t: number) => (q.from === undefined || t >= q.from) && (q.to === undefined || t <= q.to);

            const allInvoices = data.flatMap((c) => c.invoices.map((i) => ({ ...i, customerId: c.id })));
            const expectedInvoices = allInvoices
              .filter((i) => inWindow(i.createdAt))
              .filter((i) => q.statuses === undefined || q.statuses.includes(i.status))
              .filter((i) => q.id === undefined || [i.id, i.customerId, i.session, i.discord, ...i.items.flatMap((it) => [it.variant, it.coupon])].includes(q.id))
              .sort(byNewest);
            const gotInvoices = await pageAll("invoices", store.key, q);
            assert.deepEqual(gotInvoices.map((i) => i.id), expectedInvoices.map((i) => i.id), `invoices ${JSON.stringify(q)}`);

            const expectedCustomers = data
              .filter((c) => inWindow(c.createdAt))
              .filter((c) => q.statuses === undefined || c.invoices.some((i) => q.statuses!.includes(i.status)))
              .filter((c) => q.email === undefined || c.email.toLowerCase() === q.email.toLowerCase())
              .filter(
                (c) =>
                  q.id === undefined ||
                  [c.id, c.discord, ...c.reviews, ...c.invoices.flatMap((i) => [i.id, ...i.items.flatMap((it) => [it.variant, it.coupon])])].includes(q.id),
              )
              .sort(byNewest);
            const gotCustomers = await pageAll("customers", store.key, q);
            assert.deepEqual(gotCustomers.map((c) => c.id), expectedCustomers.map((c) => c.id), `customers ${JSON.stringify(q)}`);
            for (const [i, c] of expectedCustomers.entries()) {
              const completed = c.invoices.filter((inv) => inv.status === "completed");
              assert.equal(gotCustomers[i]!.totalOrders, completed.length);
              assert.equal(gotCustomers[i]!.totalSpent, completed.reduce((s, inv) => s + inv.cents, 0) / 100);
            }
            // Every element, field for field, as the source tables give it today.
            const fromSource = await assembleCustomers(db, await customerRows(db, expectedCustomers.map((c) => c.id)));
            const byId = new Map(fromSource.map((c) => [c.id, c]));
            assert.deepStrictEqual(gotCustomers, expectedCustomers.map((c) => byId.get(c.id)), `customer documents (${documents})`);
            if (expectedInvoices.length > 0) {
              const rows = await db.selectFrom("invoices").selectAll().where("id", "in", expectedInvoices.map((i) => i.id)).execute();
              const invoiceById = new Map((await assembleInvoices(db, rows)).map((i) => [i.id, i]));
              assert.deepStrictEqual(gotInvoices, expectedInvoices.map((i) => invoiceById.get(i.id)), `invoice documents (${documents})`);
            }
          }
        }),
        { numRuns: dialect.name === "sqlite" ? 40 : 20 },
      );
    });
  });
}
