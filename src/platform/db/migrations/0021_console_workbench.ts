// What the console's workbench needs from the database (issue 31):
// - a note on each plugin version (why it was saved), shown beside it in the version list;
// - the provider's event id and event type on each delivery, as columns with indexes, so the delivery log
//   is searched by them without reading every body. Rows written before this migration get the event id
//   their plugin returned (the result's eventId); their event type stays unknown (null): reading it back
//   from old bodies would parse every body of the log, and bodies need not be JSON or even UTF-8;
// - the response headers of each outbound webhook attempt, beside the body excerpt already kept.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

const DELIVERY_INDEXES: { name: string; column: string }[] = [
  { name: "deliveries_store_event_id", column: "event_id" },
  { name: "deliveries_store_event_type", column: "event_type" },
];

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  await db.schema.alterTable("plugin_versions").addColumn("note", "text").execute();
  await db.schema.alterTable("deliveries").addColumn("event_id", "text").execute();
  await db.schema.alterTable("deliveries").addColumn("event_type", "text").execute();
  await db.schema.alterTable("event_attempts").addColumn("response_headers", "text", (c) => c.notNull().defaultTo("{}")).execute();

  const fromResult = ctx.dialect === "postgres" ? sql`(result::jsonb ->> 'eventId')` : sql`json_extract(result, '$.eventId')`;
  await sql`update deliveries set event_id = ${fromResult} where result is not null`.execute(db);

  for (const index of DELIVERY_INDEXES) {
    await db.schema.createIndex(index.name).ifNotExists().on("deliveries").columns(["store_id", index.column, "created_at desc", "id desc"]).execute();
  }
  if (ctx.dialect === "sqlite") {
    await sql`pragma analysis_limit = 1000`.execute(db);
    for (const index of DELIVERY_INDEXES) await sql`analyze ${sql.id(index.name)}`.execute(db);
  }
}
