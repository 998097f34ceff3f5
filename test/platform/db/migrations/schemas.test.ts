// Migrations on a PostgreSQL database that already holds another storefront schema (tests running side by
// side, or several tenants in one database): Kysely's migration tables of the other schema must not be
// mistaken for ours. Failed before src/platform/db/migrate.ts named the current schema.
import assert from "node:assert/strict";
import { test } from "node:test";
import { sql } from "kysely";
import { loadConfig } from "../../../../src/config.ts";
import { createServices } from "../../../../src/services.ts";
import { freshDatabase, pgSkip } from "../../../helpers/harness.ts";

test("a fresh schema migrates while another schema of the same database has been migrated", { skip: pgSkip }, async () => {
  const first = await freshDatabase("postgres");
  const second = await freshDatabase("postgres");
  const config = (url: string) => loadConfig({ DATABASE_URL: url, SECRETS_KEY: "0".repeat(64), LOG_LEVEL: "silent" });
  try {
    const a = await createServices(config(first.url));
    await a.close();
    const b = await createServices(config(second.url));
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from kysely_migration`.execute(b.db.kysely);
    assert.ok(rows[0]!.n > 0, "the second schema has its own migration record");
    await b.close();
  } finally {
    await first.drop();
    await second.drop();
  }
});
