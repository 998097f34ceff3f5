// A fresh PostgreSQL database with a seeded store, for the plan tests (what the planner does with real rows).
import { randomBytes } from "node:crypto";
import type { Kysely } from "kysely";
import { loadConfig } from "../../src/config.ts";
import { BY_KEY_SETTINGS } from "../../src/platform/db/database.ts";
import type { Database } from "../../src/platform/db/schema.ts";
import { seedStore } from "../../src/seed/seed.ts";
import { createServices, type ServiceOptions, type Services } from "../../src/services.ts";
import { freshDatabase } from "./harness.ts";

const UNTIL = Date.parse("2026-01-01T00:00:00.000Z");

/** A fresh database with a seeded store of 200 customers, for `work` (with the services, for their projector). */
export async function withSeededStore(work: (db: Kysely<Database>, storeId: string, services: Services) => Promise<void>, options: ServiceOptions = {}): Promise<void> {
  const database = await freshDatabase("postgres");
  const config = loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: "silent", PLUGIN_POOL_SIZE: "1", SECRETS_KEY: randomBytes(32).toString("hex") });
  const services = await createServices(config, options);
  try {
    const { storeId } = await seedStore(services.db, { customers: 200, seed: 5, until: UNTIL });
    await work(services.db.kysely, storeId, services);
  } finally {
    await services.close();
    await database.drop();
  }
}

/** `set local` of the settings of the connections planned once and by key (database.ts), for a plan test's transaction. */
export const SET_LOCAL_BY_KEY = Object.entries(BY_KEY_SETTINGS)
  .map(([name, value]) => `set local ${name} = ${value}`)
  .join("; ");
