// Migration 0013 (PostgreSQL): the read model's documents are stored as they are sent, uncompressed in the
// table's own pages, so a page read does not decompress them; those written compressed before it are
// written again; and a page of them reads the same bytes as before.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { sql, type Kysely } from "kysely";
import { loadConfig } from "../../../../src/config.ts";
import { openDatabase } from "../../../../src/platform/db/database.ts";
import { migrateTo } from "../../../../src/platform/db/migrate.ts";
import { freshDatabase, pgSkip } from "../../../helpers/harness.ts";

// A document of the size where PostgreSQL's default compresses (rows over ~2 KiB), compressible as JSON is.
const document = (id: string) => JSON.stringify({ id, notes: Array.from({ length: 60 }, (_, i) => ({ line: i, text: `note ${i} of ${id}, 🙂 é` })) });

test("PostgreSQL: documents are stored uncompressed and inline, those written before migration 0013 included", { skip: pgSkip }, async () => {
  const database = await freshDatabase("postgres");
  const db = openDatabase(loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: "silent", SECRETS_KEY: randomBytes(32).toString("hex") }).database);
  try {
    const k = db.kysely as unknown as Kysely<unknown>;
    await migrateTo(k, { dialect: "postgres" }, "0012_event_invoice");
    const stored = async (table: string, id: string) => {
      const { rows } = await sql<{ stored: number; text: number; body: string }>`
        select pg_column_size(body) as stored, octet_length(body) as text, body from ${sql.id(table)} where id = ${id}`.execute(k);
      return rows[0]!;
    };
    for (const table of ["customer_views", "invoice_views"]) {
      await sql`insert into ${sql.id(table)} (id, store_id, body) values ('old', 'st_x', ${document("old")})`.execute(k);
      const before = await stored(table, "old");
      assert.ok(before.text > 2100, "the document is over the size where PostgreSQL compresses by default");
      assert.ok(before.stored < before.text, `${table}: before the migration the document is stored compressed (${before.stored} < ${before.text} bytes)`);
    }

    await migrateTo(k, { dialect: "postgres" }, "0013_documents_uncompressed");

    for (const table of ["customer_views", "invoice_views"]) {
      const old = await stored(table, "old");
      assert.ok(old.stored >= old.text, `${table}: the earlier document is now stored uncompressed (${old.stored} >= ${old.text} bytes)`);
      assert.equal(old.body, document("old"), "with the same text");
      await sql`insert into ${sql.id(table)} (id, store_id, body) values ('new', 'st_x', ${document("new")})`.execute(k);
      const fresh = await stored(table, "new");
      assert.ok(fresh.stored >= fresh.text, `${table}: a new document is stored uncompressed`);
      // Inline: nothing of the table went out to its TOAST table.
      const { rows: external } = await sql<{ n: string }>`
        select count(*)::text as n from pg_class c join pg_class t on t.oid = c.reltoastrelid
        where c.oid = ${table}::regclass and pg_relation_size(t.oid) > 0`.execute(k);
      assert.equal(external[0]!.n, "0", `${table}: its TOAST table holds nothing`);
    }

    // Migration 0015 rebuilds these tables (one row per customer and invoice): the new tables store the same way.
    await migrateTo(k, { dialect: "postgres" }, null);
    for (const table of ["customer_views", "invoice_views"]) {
      await sql`insert into ${sql.id(table)} (id, store_id, created_at, body) values ('newer', 'st_x', 0, ${document("newer")})`.execute(k);
      const newer = await stored(table, "newer");
      assert.ok(newer.stored >= newer.text, `${table}: after migration 0015 a document is still stored uncompressed`);
      const { rows } = await sql<{ options: string[] | null }>`select reloptions as options from pg_class where oid = ${table}::regclass`.execute(k);
      assert.ok(rows[0]!.options?.includes("toast_tuple_target=8160"), `${table}: and inline up to a page (${JSON.stringify(rows[0]!.options)})`);
    }
  } finally {
    await db.close();
    await database.drop();
  }
});
