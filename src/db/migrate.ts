// One ordered list of migrations for both dialects, applied by `storefront migrate` and at `serve` start-up.
// Kysely's Migrator keeps the applied list in `kysely_migration` and takes a lock, so several service
// processes starting together on one PostgreSQL apply each migration once.
import { sql, type Kysely } from "kysely";
import { Migrator, type Migration, type MigrationResultSet } from "kysely/migration";
import * as m0001 from "./migrations/0001_initial.ts";
import * as m0002 from "./migrations/0002_plugins.ts";
import * as m0003 from "./migrations/0003_child_page_order.ts";
import * as m0004 from "./migrations/0004_covering_id_filter.ts";
import * as m0009 from "./migrations/0009_read_model.ts";

export interface MigrationContext {
  dialect: "sqlite" | "postgres";
}

type MigrationModule = { up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> };

/** Later issues append here; names sort in application order. */
const migrations: Record<string, MigrationModule> = {
  "0001_initial": m0001,
  "0002_plugins": m0002,
  "0003_child_page_order": m0003,
  "0004_covering_id_filter": m0004,
  "0009_read_model": m0009,
};

export async function migrateToLatest(db: Kysely<unknown>, ctx: MigrationContext): Promise<MigrationResultSet> {
  // Kysely looks for its own tables in every schema unless told which: on a PostgreSQL database with
  // another schema migrated by Kysely (tests in parallel, a second deployment), it would skip creating them.
  const migrationTableSchema =
    ctx.dialect === "postgres" ? (await sql<{ schema: string }>`select current_schema() as schema`.execute(db)).rows[0]?.schema : undefined;
  const migrator = new Migrator({
    db,
    ...(migrationTableSchema === undefined ? {} : { migrationTableSchema }),
    provider: {
      getMigrations: () =>
        Promise.resolve(
          Object.fromEntries(
            Object.entries(migrations).map(([name, mod]): [string, Migration] => [name, { up: (d) => mod.up(d, ctx) }]),
          ),
        ),
    },
  });
  const result = await migrator.migrateToLatest();
  if (result.error) throw result.error instanceof Error ? result.error : new Error(String(result.error));
  return result;
}
