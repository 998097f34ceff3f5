// Migration 0010 on a database that already holds data: the owner creation times it adds to invoice items
// and reviews are filled in from their customers and invoices, and the read model's documents survive the
// backfill (its triggers would otherwise have deleted every one of them).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import { sql, type Kysely } from "kysely";
import { loadConfig } from "../../../../src/config.ts";
import { openDatabase } from "../../../../src/platform/db/database.ts";
import { migrateTo } from "../../../../src/platform/db/migrate.ts";
import { parseListQuery } from "../../../../src/lib/list-query.ts";
import { createServices } from "../../../../src/services.ts";
import { DIALECTS, freshDatabase } from "../../../helpers/harness.ts";
import { INVOICE_STATUSES } from "../../../../src/schemas/invoice-statuses.ts";

const CUSTOMER_AT = Date.parse("2024-02-01T00:00:00.000Z");
const INVOICE_AT = Date.parse("2024-03-01T00:00:00.000Z");

for (const dialect of DIALECTS) {
  describe(`migration 0010 on ${dialect.name}`, { skip: dialect.skip }, () => {
    test("existing items and reviews get their owners' creation times, the documents stay, and the id filter finds them", async () => {
      const database = await freshDatabase(dialect.name);
      try {
        const config = loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: "silent", SECRETS_KEY: randomBytes(32).toString("hex") });
        const db = openDatabase(config.database);
        try {
          const k = db.kysely as unknown as Kysely<unknown>;
          await migrateTo(k, { dialect: db.dialect }, "0009_read_model");
          await sql`insert into stores (id, name, created_at) values ('st_old', 'old', ${CUSTOMER_AT})`.execute(k);
          await sql`insert into customers (id, store_id, email, created_at) values ('cus_old', 'st_old', 'old@example.com', ${CUSTOMER_AT})`.execute(k);
          await sql`insert into reviews (id, store_id, customer_id, rating, text, product_id, created_at) values ('rev_old', 'st_old', 'cus_old', 5, 'ok', 'prod_old', ${INVOICE_AT})`.execute(k);
          await sql`insert into invoices (id, store_id, customer_id, total_cents, payment_method, displayed_payment_info, created_on_session_id, left_feedback, status, discord_id, discord_email, created_at, updated_at)
                    values ('inv_old', 'st_old', 'cus_old', 500, 'stripe', '', 'ses_old', 0, 'completed', null, null, ${INVOICE_AT}, ${INVOICE_AT})`.execute(k);
          await sql`insert into invoice_items (invoice_id, position, store_id, customer_id, product_variant_id, quantity, price_cents, coupon_id)
                    values ('inv_old', 0, 'st_old', 'cus_old', 'var_old', 1, 500, 'cpn_old')`.execute(k);
          // Documents as migration 0009's tables held them (today's writer writes migration 0015's columns).
          await sql`insert into customer_views (id, store_id, body) values ('cus_old', 'st_old', '{"id":"cus_old"}')`.execute(k);
          await sql`insert into invoice_views (id, store_id, body) values ('inv_old', 'st_old', '{"id":"inv_old"}')`.execute(k);
          const documents = async () => {
            const { rows } = await sql<{ n: number | string }>`
              select (select count(*) from customer_views where body is not null) + (select count(*) from invoice_views where body is not null) as n`.execute(k);
            return Number(rows[0]!.n);
          };
          assert.equal(await documents(), 2);

          await migrateTo(k, { dialect: db.dialect }, null);

          const item = await db.kysely.selectFrom("invoice_items").select(["invoice_created_at", "customer_created_at"]).executeTakeFirstOrThrow();
          assert.deepEqual({ ...item }, { invoice_created_at: INVOICE_AT, customer_created_at: CUSTOMER_AT });
          const review = await db.kysely.selectFrom("reviews").select("customer_created_at").executeTakeFirstOrThrow();
          assert.equal(review.customer_created_at, CUSTOMER_AT);
          assert.equal(await documents(), 2, "the backfill did not make the documents stale");

          // The triggers are back: a later change to an item makes its invoice's document stale (marked since 0017).
          await db.kysely.updateTable("invoice_items").set({ quantity: 2 }).where("invoice_id", "=", "inv_old").execute();
          const stale = await db.kysely.selectFrom("stale_invoice_views").select("doc_id").execute();
          assert.deepEqual(stale.map((r) => r.doc_id), ["inv_old"]);
        } finally {
          await db.close();
        }

        const services = await createServices(loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: "silent", SECRETS_KEY: randomBytes(32).toString("hex"), READ_THREADS: "0" }));
        try {
          for (const id of ["var_old", "cpn_old"]) {
            const { invoices } = await services.invoices.list("st_old", parseListQuery({ limit: 10, id }, INVOICE_STATUSES));
            assert.deepEqual(invoices.map((i) => i.id), ["inv_old"], `invoices with ${id}`);
          }
          for (const id of ["var_old", "cpn_old", "prod_old"]) {
            const { customers } = await services.customers.list("st_old", parseListQuery({ limit: 10, id }, INVOICE_STATUSES));
            assert.deepEqual(customers.map((c) => c.id), ["cus_old"], `customers with ${id}`);
          }
        } finally {
          await services.close();
        }
      } finally {
        await database.drop();
      }
    });
  });
}
