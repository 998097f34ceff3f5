// Migrations on a PostgreSQL database shared by several schemas: each schema keeps its own migration
// bookkeeping, so a fresh schema migrates while another one exists (parallel test runs, several installations).
import assert from "node:assert/strict";
import { test } from "node:test";
import { loadConfig } from "../src/config.ts";
import { openDatabase } from "../src/db/database.ts";
import { freshDatabase, pgSkip } from "./helpers/harness.ts";

test("a fresh PostgreSQL schema migrates while another migrated schema exists in the same database", { skip: pgSkip }, async () => {
  const first = await freshDatabase("postgres");
  const second = await freshDatabase("postgres");
  const dbs = [first, second].map((d) => openDatabase(loadConfig({ DATABASE_URL: d.url }).database));
  try {
    await dbs[0]!.migrate();
    // Before the fix Kysely saw the first schema's kysely_migration_lock, skipped creating its own and failed.
    await dbs[1]!.migrate();
    const tables = await dbs[1]!.kysely.introspection.getTables();
    const mine = new URL(second.url).searchParams.get("options")!.replace("-c search_path=", "");
    assert.ok(tables.some((t) => t.schema === mine && t.name === "api_keys"), "the second schema has its own tables");
  } finally {
    for (const db of dbs) await db.close();
    await first.drop();
    await second.drop();
  }
});
