// Migrations on a PostgreSQL database shared with other schemas: Kysely's bookkeeping tables of another
// schema (another deployment, a parallel test suite) must not be mistaken for ours.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import pg from "pg";
import { loadConfig } from "../../../src/config.ts";
import { randomBase32 } from "../../../src/lib/ids.ts";
import { createServices } from "../../../src/services.ts";
import { PG_ADMIN_URL, freshDatabase, pgSkip } from "../../helpers/harness.ts";

test("PostgreSQL: a schema migrates although another schema of the database already has kysely_migration tables", { skip: pgSkip }, async () => {
  const decoy = `t_decoy_${randomBase32(8)}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  const database = await freshDatabase("postgres");
  try {
    await admin.query(`create schema ${decoy}`);
    await admin.query(`create table ${decoy}.kysely_migration (name varchar(255) primary key, timestamp varchar(255) not null)`);
    await admin.query(`create table ${decoy}.kysely_migration_lock (id varchar(255) primary key, is_locked integer not null default 0)`);
    const services = await createServices(loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: "silent", SECRETS_KEY: randomBytes(32).toString("hex") }));
    try {
      const store = await services.stores.createStore("migrated");
      assert.match(store.id, /^st_/);
    } finally {
      await services.close();
    }
    const own = await admin.query<{ n: string }>(`select count(*) as n from ${decoy}.kysely_migration`);
    assert.equal(Number(own.rows[0]!.n), 0, "the other schema's bookkeeping is untouched");
  } finally {
    await admin.query(`drop schema if exists ${decoy} cascade`);
    await admin.end();
    await database.drop();
  }
});
