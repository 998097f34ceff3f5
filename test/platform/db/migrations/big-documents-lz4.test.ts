// Migration 0029 (PostgreSQL): a document over a page (a customer with many invoices) is stored compressed
// with lz4, a seventh of the TOAST chunks its rebuild writes; a document up to a page stays inline and
// plain, as migration 0013 stored it; and a document stored before the migration reads the same text and
// is compressed when it is next written.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { sql, type Kysely } from "kysely";
import { loadConfig } from "../../../../src/config.ts";
import { openDatabase } from "../../../../src/platform/db/database.ts";
import { migrateTo } from "../../../../src/platform/db/migrate.ts";
import { freshDatabase, pgSkip } from "../../../helpers/harness.ts";

/** A customer's document with `invoices` entries, as compressible as the read model's JSON is. */
const document = (id: string, invoices: number) =>
  JSON.stringify({
    id,
    totalOrders: invoices,
    invoices: Array.from({ length: invoices }, (_, i) => ({ id: `inv_${id}_${i}`, totalInUsd: (i * 7) % 1000, status: "completed", note: "🙂 é", createdAt: new Date(1e12 + i * 1000).toISOString() })),
  });

test("PostgreSQL: a document over a page is stored compressed with lz4, one up to a page stays inline and plain", { skip: pgSkip }, async () => {
  const database = await freshDatabase("postgres");
  const db = openDatabase(loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: "silent", SECRETS_KEY: randomBytes(32).toString("hex") }).database);
  try {
    const k = db.kysely as unknown as Kysely<unknown>;
    const stored = async (table: string, id: string) => {
      const { rows } = await sql<{ stored: number; text: number; method: string | null; body: string }>`
        select pg_column_size(body) as stored, octet_length(body) as text, pg_column_compression(body) as method, body
        from ${sql.id(table)} where id = ${id}`.execute(k);
      return rows[0]!;
    };
    const big = (id: string) => document(id, 2_000);
    await migrateTo(k, { dialect: "postgres" }, "0028_invoice_documents_room");
    for (const table of ["customer_views", "invoice_views"]) {
      await sql`insert into ${sql.id(table)} (id, store_id, created_at, body) values ('before', 'st_x', 0, ${big("before")})`.execute(k);
      const before = await stored(table, "before");
      assert.ok(before.text > 200_000, "the document is hundreds of KiB");
      assert.ok(before.stored >= before.text, `${table}: before the migration a big document is stored plain (${before.stored} >= ${before.text} bytes)`);
    }

    await migrateTo(k, { dialect: "postgres" }, null);

    for (const table of ["customer_views", "invoice_views"]) {
      const old = await stored(table, "before");
      assert.equal(old.body, big("before"), `${table}: a document stored before the migration reads the same text`);
      await sql`update ${sql.id(table)} set body = ${big("before") + " "} where id = 'before'`.execute(k);
      const rewritten = await stored(table, "before");
      assert.equal(rewritten.method, "lz4", `${table}: written again, it is compressed with lz4`);
      assert.ok(rewritten.stored * 4 < rewritten.text, `${table}: to under a quarter of its text (${rewritten.stored} of ${rewritten.text} bytes)`);

      await sql`insert into ${sql.id(table)} (id, store_id, created_at, body) values ('big', 'st_x', 0, ${big("big")}), ('small', 'st_x', 0, ${document("small", 20)})`.execute(k);
      const fresh = await stored(table, "big");
      assert.equal(fresh.method, "lz4", `${table}: a new big document is compressed with lz4`);
      assert.equal(fresh.body, big("big"), `${table}: and reads back as written`);
      const small = await stored(table, "small");
      assert.ok(small.text > 2_100 && small.text < 8_000, `the small document (${small.text} bytes) is over PostgreSQL's default threshold and under a page`);
      assert.equal(small.method, null, `${table}: a document up to a page is not compressed`);
      assert.ok(small.stored >= small.text, `${table}: it is stored plain (${small.stored} >= ${small.text} bytes)`);
    }
  } finally {
    await db.close();
    await database.drop();
  }
});
