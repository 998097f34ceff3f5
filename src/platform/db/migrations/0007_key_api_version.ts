// Versioning (README, "API versions"): an API key remembers the API version current when it was created and is
// answered in it unless a request pins another. Keys from before versioning get the first version.
import type { Kysely } from "kysely";

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("api_keys")
    .addColumn("api_version", "text", (c) => c.notNull().defaultTo("2026-11-23"))
    .execute();
}
