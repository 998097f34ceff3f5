// PostgreSQL: a big document (a customer with hundreds or thousands of invoices) stored compressed with lz4.
// Migration 0013 turned compression off for the documents (`storage external`): pglz's decompression made
// every page read dearer, and most documents are a few KiB. Those stay as they are: a row is compressed only
// when it is over the table's toast_tuple_target (8160 bytes, 0013), so documents up to about a page are
// still stored inline and plain. Above that, an uncompressed document went out to the TOAST table whole:
// a customer with 5,000 invoices is 1.8 MB, about 900 chunks of 2 KB written (each a row and an index entry
// in the TOAST table, and its WAL) at every rebuild, and read back at every page that lists it. JSON
// compresses about sevenfold with lz4, which compresses at hundreds of MB/s and decompresses faster still:
// a seventh of the chunks written and read (bench/README.md, "thirty-fifth pass").
//
// A server built without lz4 refuses the method (feature_not_supported), and PostgreSQL 13 has no column
// compression at all: their documents are left stored as they were. Documents already stored are
// compressed when the projector next writes them.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

const DOCUMENT_TABLES = ["customer_views", "invoice_views"] as const;

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  if (ctx.dialect !== "postgres") return;
  const { rows } = await sql<{ version: string }>`show server_version_num`.execute(db);
  if (Number(rows[0]!.version) < 140_000) return;
  const alters = DOCUMENT_TABLES.map((table) => `execute 'alter table ${table} alter column body set compression lz4, alter column body set storage extended';`).join(" ");
  await sql.raw(`do $$ begin ${alters} exception when feature_not_supported then null; end $$`).execute(db);
}
