// PostgreSQL: the documents found by id through a hash index. A page filtered by `id` (the invoices with an
// item of a variant, the customers who bought it) takes its keys from an index in page order and then reads
// each of its 101 documents by id. Through the primary key that is a descent of a three-level B-tree, text
// compared at each level, then the row: four buffers per document, ~400 of the page's ~430, and 0.60 ms of
// the server per invoices page against 0.13 ms for the keys alone (pgbench, the 100k benchmark store). A hash
// index finds the row's bucket by the id's hash, two buffers per document: 0.43 ms (bench/README.md).
//
// The primary key stays (`on conflict (id)` needs a unique index, which a hash index cannot be). A document's
// refresh changes only its body, which no index holds, so it stays a HOT update and touches neither index;
// a new customer or invoice adds one entry more. SQLite has no hash indexes: nothing to do there.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

export const DOCUMENT_HASH_INDEXES = { customer_views: "customer_views_id_hash", invoice_views: "invoice_views_id_hash" } as const;

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  if (ctx.dialect !== "postgres") return;
  for (const [table, index] of Object.entries(DOCUMENT_HASH_INDEXES)) {
    await sql`create index ${sql.id(index)} on ${sql.id(table)} using hash (id)`.execute(db);
    await sql`analyze ${sql.id(table)}`.execute(db);
  }
}
