// PostgreSQL: a vacuum of a marks table (stale_customer_views, stale_invoice_views) leaves the table's empty
// pages in place. The marks tables are a queue that the projector empties within a second, so after each of
// its vacuums (migration 0022, projector.postgres.ts) the table's last pages were empty, and by default a
// vacuum gives empty trailing pages back to the file system. That truncation takes the table's ACCESS
// EXCLUSIVE lock: every payment's statement, whose triggers insert marks, waited behind it (a vacuum holds it
// until another session asks, checked every 20 ms), the truncation dropped the table's pages from the whole
// buffer pool (a scan of all of shared_buffers), the next marks extended the file again page by page, and a
// replica replaying the truncation cancels or holds the queries that read the table. Nothing is gained: the
// queue fills the same pages again within seconds. `vacuum_truncate = false` holds for every vacuum of the
// table, autovacuum's included. SQLite reclaims its deleted rows' pages itself: nothing to do there.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  if (ctx.dialect !== "postgres") return;
  for (const table of ["stale_customer_views", "stale_invoice_views"]) await sql.raw(`alter table ${table} set (vacuum_truncate = false)`).execute(db);
}
