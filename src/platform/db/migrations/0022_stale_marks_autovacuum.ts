// PostgreSQL: the read model's marks tables (stale_customer_views, stale_invoice_views) vacuumed and
// analyzed after every 1,000 changed rows, whatever their size. Marks are inserted by every write and
// deleted by the projector within a second, so the tables are nearly always empty; but a bulk write (an
// import, a rebuild) leaves hundreds of thousands of them for a while. With PostgreSQL's defaults (20 % and
// 10 % of the rows counted at the last analyze) a table last analyzed at 300,000 marks waits for 60,000 dead
// rows before the next vacuum, and the planner keeps planning for 300,000 marks meanwhile. SQLite has no
// such settings (and reclaims deleted rows' pages itself): nothing to do there.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  if (ctx.dialect !== "postgres") return;
  for (const table of ["stale_customer_views", "stale_invoice_views"]) {
    await sql
      .raw(
        `alter table ${table} set (autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_scale_factor = 0, ` +
          `autovacuum_vacuum_insert_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0, ` +
          `autovacuum_analyze_threshold = 1000, autovacuum_analyze_scale_factor = 0)`,
      )
      .execute(db);
  }
}
