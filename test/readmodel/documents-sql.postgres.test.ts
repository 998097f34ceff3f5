// PostgreSQL: the documents the server builds (documents.postgres.ts, what the projector writes) are the
// JSON texts that the JavaScript assemblers make of the same rows, byte for byte: a seeded store's every
// customer and invoice, and rows made to find where the two could part (escapes, ties in the order, money
// and times at their edges). Where the server cannot write what JavaScript would (a time before 1970, an
// amount past 2^53/100 cents), its document is null: assembled from the rows on every read.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { CompiledQuery, type Kysely } from "kysely";
import type { Database } from "../../src/platform/db/schema.ts";
import { assembleCustomers, customerRows } from "../../src/readmodel/customer-documents.ts";
import { DOCUMENTS_OF } from "../../src/readmodel/documents.postgres.ts";
import { assembleInvoices, INVOICE_COLUMNS } from "../../src/readmodel/invoice-documents.ts";
import type { Views } from "../../src/readmodel/staleness.ts";
import { pgSkip } from "../helpers/harness.ts";
import { withSeededStore } from "../helpers/seeded-store.ts";

const TRICKY = `"quoted" \\back\\slash\nnew line\ttab\r\b\f \u0001\u001f\u007f é ü 中文 😀 \u2028\u2029 </script> &amp;`;
/** 9999-12-31T23:59:59.999Z, the last millisecond toISOString writes with four digits. */
const LAST_FOUR_DIGIT_MS = 253402300799999;

interface Edges {
  /** Ids whose server-built document must be null (the server cannot write them as JavaScript does). */
  unwritable: Set<string>;
}

/** Customers and invoices at the edges, in the store. */
async function addEdges(db: Kysely<Database>, storeId: string): Promise<Edges> {
  const customer = async (id: string, createdAt: number, email = `${id}@example.com`) => {
    await db.insertInto("customers").values({ id, store_id: storeId, email, created_at: createdAt }).execute();
  };
  const invoice = async (id: string, customerId: string, customerCreatedAt: number, values: { cents: number; status: string; at: number; feedback?: number; discord?: [string, string | null] }) => {
    await db
      .insertInto("invoices")
      .values({
        id,
        store_id: storeId,
        customer_id: customerId,
        total_cents: values.cents,
        payment_method: TRICKY,
        displayed_payment_info: `•••• 4242 ${id}`,
        created_on_session_id: `sess_${id}`,
        left_feedback: values.feedback ?? 0,
        status: values.status,
        discord_id: values.discord?.[0] ?? null,
        discord_email: values.discord?.[1] ?? null,
        created_at: values.at,
        updated_at: values.at,
      })
      .execute();
    const item = (position: number, cents: number, coupon: string | null) => ({
      invoice_id: id,
      position,
      store_id: storeId,
      customer_id: customerId,
      product_variant_id: `var_${TRICKY}`,
      quantity: position + 2,
      price_cents: cents,
      coupon_id: coupon,
      invoice_created_at: values.at,
      customer_created_at: customerCreatedAt,
    });
    await db.insertInto("invoice_items").values([item(2, values.cents, null), item(1, 100000000001, `coupon\\"${id}`)]).execute();
    await db
      .insertInto("invoice_fields")
      .values([
        { invoice_id: id, position: 2, key: "second", value: TRICKY, type: "text" },
        { invoice_id: id, position: 1, key: "first", value: "", type: "email" },
      ])
      .execute();
    await db
      .insertInto("invoice_logs")
      .values([
        { invoice_id: id, log: `created ${TRICKY}`, type: "info", created_at: values.at },
        { invoice_id: id, log: "paid", type: "success", created_at: 86_400_000 },
      ])
      .execute();
  };

  // Every string tricky, ties in every order, a customer's figures from completed invoices only.
  await customer("cus_edge_tricky", 0, TRICKY);
  await db.insertInto("customer_discord_accounts").values({ customer_id: "cus_edge_tricky", store_id: storeId, discord_id: `d"${TRICKY}`, email: "" }).execute();
  for (const id of ["rev_edge_a", "rev_edge_b"]) {
    await db.insertInto("reviews").values({ id, store_id: storeId, customer_id: "cus_edge_tricky", rating: id.endsWith("a") ? 5 : 1, text: TRICKY, product_id: "prod_1", created_at: 1_000, customer_created_at: 0 }).execute();
    await db.insertInto("customer_sessions").values({ id: `ses_${id}`, store_id: storeId, customer_id: "cus_edge_tricky", ip: "::1", user_agent: TRICKY, country: "DE", last_used_at: 86_399_999, created_at: 1_000 }).execute();
  }
  await invoice("inv_edge_1", "cus_edge_tricky", 0, { cents: 1999, status: "completed", at: 86_399_999, feedback: 2 });
  await invoice("inv_edge_2", "cus_edge_tricky", 0, { cents: 5, status: "completed", at: LAST_FOUR_DIGIT_MS, discord: ["x", null] });
  await invoice("inv_edge_3", "cus_edge_tricky", 0, { cents: 0, status: "pending", at: 86_399_999, discord: ["y", TRICKY] });
  await invoice("inv_edge_4", "cus_edge_tricky", 0, { cents: -50, status: "completed", at: 1, feedback: 1 });
  // No invoices, reviews, sessions or chat account: no orders, no dates, nothing spent, empty lists.
  await customer("cus_edge_empty", 1_700_000_000_123);
  // What the server does not write: a time before 1970, an amount past 2^53/100 cents.
  await customer("cus_edge_before_1970", -1);
  await customer("cus_edge_rich", 1_700_000_000_000);
  await invoice("inv_edge_rich", "cus_edge_rich", 1_700_000_000_000, { cents: 90071992547409, status: "completed", at: 1_700_000_000_000 });
  return { unwritable: new Set(["cus_edge_before_1970", "cus_edge_rich", "inv_edge_rich"]) };
}

/** The documents as JavaScript assembles them, by id. */
async function assembled(db: Kysely<Database>, views: Views, ids: string[]): Promise<Map<string, string>> {
  const docs =
    views === "invoice_views"
      ? await assembleInvoices(db, await db.selectFrom("invoices").select(INVOICE_COLUMNS).where("id", "in", ids).execute())
      : await assembleCustomers(db, await customerRows(db, ids));
  return new Map(docs.map((d) => [d.id, JSON.stringify(d)]));
}

/** The documents as the server builds them, by id. */
async function built(db: Kysely<Database>, views: Views, ids: string[]): Promise<Map<string, string | null>> {
  const { rows } = await db.executeQuery<{ id: string; body: string | null }>(CompiledQuery.raw(DOCUMENTS_OF[views], [ids]));
  return new Map(rows.map((r) => [r.id, r.body]));
}

describe("PostgreSQL: documents built by the server", { skip: pgSkip }, () => {
  test("every customer's and invoice's document is the JSON text JavaScript makes of it, byte for byte; the ones it cannot write are null", async () => {
    await withSeededStore(async (db, storeId) => {
      const { unwritable } = await addEdges(db, storeId);
      const owners = { customer_views: "customers", invoice_views: "invoices" } as const;
      for (const views of ["invoice_views", "customer_views"] as const) {
        const ids = (await db.selectFrom(owners[views]).select("id").where("store_id", "=", storeId).execute()).map((r) => r.id);
        assert.ok(ids.length >= 200, `${views}: ${ids.length} documents`);
        const [js, server] = [await assembled(db, views, ids), await built(db, views, ids)];
        assert.equal(server.size, ids.length, `${views}: one document per row`);
        for (const id of ids) {
          if (unwritable.has(id)) {
            assert.equal(server.get(id), null, `${id}: left to the readers`);
            assert.ok(js.get(id), `${id}: JavaScript assembles it`);
          } else {
            assert.equal(server.get(id), js.get(id), `${id}: the same bytes`);
          }
        }
      }
    });
  });

  test("the projector stores what the server built, and a list read serves the documents it left null assembled from their rows", async () => {
    await withSeededStore(async (db, storeId, services) => {
      const { unwritable } = await addEdges(db, storeId);
      await services.projector.drain();
      const ids = ["cus_edge_tricky", "cus_edge_empty", "cus_edge_before_1970", "cus_edge_rich"];
      const stored = new Map((await db.selectFrom("customer_views").select(["id", "body"]).where("id", "in", ids).execute()).map((r) => [r.id, r.body]));
      const js = await assembled(db, "customer_views", ids);
      for (const id of ids) {
        assert.equal(stored.get(id), unwritable.has(id) ? null : js.get(id), `${id}: stored`);
        const page = await services.customers.list(storeId, { id, from: null, to: null, limit: 10, after: null, statuses: null, email: null });
        assert.deepEqual(page.customers, [JSON.parse(js.get(id)!)], `${id}: served`);
      }
      const rich = await services.invoices.findView(storeId, "inv_edge_rich");
      assert.equal(JSON.stringify(rich), (await assembled(db, "invoice_views", ["inv_edge_rich"])).get("inv_edge_rich"), "an invoice left null: served assembled");
    });
  });
});
