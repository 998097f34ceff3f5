// PostgreSQL: the read model's documents stored as they are sent, inline and uncompressed. By default
// PostgreSQL compresses any row over ~2 KiB (pglz), so most customer documents (2.6 KiB on average in the
// seed's shape) were decompressed on every page read: 0.83-0.94 ms of the server's CPU per customers page
// of 100, against 0.59-0.61 ms stored plain (bench/README.md, issue 12). `storage external` turns the
// compression off; `toast_tuple_target` keeps a row in the table's own pages up to the 8 KiB page size
// rather than moving its document out to the TOAST table; a larger document still goes there, uncompressed.
// The price is disk: customer documents take about 1.6 times the space they took compressed.
//
// Documents stored before this migration and compressed are written again, so existing stores read fast
// at once rather than as their customers change. SQLite never compressed them: nothing to do there.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

const DOCUMENT_TABLES = ["customer_views", "invoice_views"] as const;

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  if (ctx.dialect !== "postgres") return;
  for (const table of DOCUMENT_TABLES) {
    await sql`alter table ${sql.id(table)} alter column body set storage external`.execute(db);
    await sql`alter table ${sql.id(table)} set (toast_tuple_target = 8160)`.execute(db);
    // A compressed value is stored smaller than its text; `|| ''` makes a new value, stored the new way.
    await sql`update ${sql.id(table)} set body = body || '' where pg_column_size(body) < octet_length(body)`.execute(db);
  }
}
