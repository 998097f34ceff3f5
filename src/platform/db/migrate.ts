// One ordered list of migrations for both dialects, applied by `storefront migrate` and at `serve` start-up.
// Kysely's Migrator keeps the applied list in `kysely_migration` and takes a lock, so several service
// processes starting together on one PostgreSQL apply each migration once. The newest migration's name is
// the schema version; a database holding migrations this release does not know was migrated by a newer
// release and is refused before anything runs.
import { performance } from "node:perf_hooks";
import { type Kysely, sql } from "kysely";
import { Migrator, type Migration } from "kysely/migration";
import * as m0001 from "./migrations/0001_initial.ts";
import * as m0002 from "./migrations/0002_plugins.ts";
import * as m0003 from "./migrations/0003_child_page_order.ts";
import * as m0004 from "./migrations/0004_covering_id_filter.ts";
import * as m0005 from "./migrations/0005_applied_events.ts";
import * as m0006 from "./migrations/0006_events.ts";
import * as m0007 from "./migrations/0007_key_api_version.ts";
import * as m0008 from "./migrations/0008_operator.ts";
import * as m0009 from "./migrations/0009_read_model.ts";
import * as m0010 from "./migrations/0010_id_filter_in_page_order.ts";
import * as m0011 from "./migrations/0011_console.ts";
import * as m0012 from "./migrations/0012_event_invoice.ts";
import * as m0013 from "./migrations/0013_documents_uncompressed.ts";
import * as m0014 from "./migrations/0014_api_key_changes.ts";
import * as m0015 from "./migrations/0015_documents_in_page_order.ts";
import * as m0016 from "./migrations/0016_documents_hash_ids.ts";
import * as m0017 from "./migrations/0017_lean_payments.ts";
import * as m0018 from "./migrations/0018_sources_and_token_sessions.ts";
import * as m0021 from "./migrations/0021_console_workbench.ts";
import * as m0022 from "./migrations/0022_stale_marks_autovacuum.ts";
import * as m0023 from "./migrations/0023_marks_skip_unmoved.ts";
import * as m0024 from "./migrations/0024_payment_raced.ts";
import * as m0025 from "./migrations/0025_marks_per_statement.ts";
import * as m0026 from "./migrations/0026_documents_fillfactor.ts";
import * as m0027 from "./migrations/0027_customer_marks_name_invoice.ts";
import * as m0028 from "./migrations/0028_invoice_documents_room.ts";
import * as m0029 from "./migrations/0029_big_documents_lz4.ts";

import type { MigrationContext } from "./migrations/context.ts";

export type { MigrationContext };

type MigrationModule = { up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> };

/** Later issues append here; names sort in application order. */
const migrations: Record<string, MigrationModule> = {
  "0001_initial": m0001,
  "0002_plugins": m0002,
  "0003_child_page_order": m0003,
  "0004_covering_id_filter": m0004,
  "0005_applied_events": m0005,
  "0006_events": m0006,
  "0007_key_api_version": m0007,
  "0008_operator": m0008,
  "0009_read_model": m0009,
  "0010_id_filter_in_page_order": m0010,
  "0011_console": m0011,
  "0012_event_invoice": m0012,
  "0013_documents_uncompressed": m0013,
  "0014_api_key_changes": m0014,
  "0015_documents_in_page_order": m0015,
  "0016_documents_hash_ids": m0016,
  "0017_lean_payments": m0017,
  "0018_sources_and_token_sessions": m0018,
  "0021_console_workbench": m0021,
  "0022_stale_marks_autovacuum": m0022,
  "0023_marks_skip_unmoved": m0023,
  "0024_payment_raced": m0024,
  "0025_marks_per_statement": m0025,
  "0026_documents_fillfactor": m0026,
  "0027_customer_marks_name_invoice": m0027,
  "0028_invoice_documents_room": m0028,
  "0029_big_documents_lz4": m0029,
};

/** The migrations this release ships, oldest first. */
export const MIGRATION_NAMES: readonly string[] = Object.keys(migrations);

/** The schema version of this release: the name of its newest migration. */
export const SCHEMA_VERSION: string = MIGRATION_NAMES.at(-1)!;

/** The last migration this build knows: the schema version a database is at once migrated. */
export function latestMigration(): string {
  return SCHEMA_VERSION;
}

export interface AppliedMigration {
  name: string;
  durationMs: number;
}

export interface MigrationObserver {
  /** Called before anything runs, with the migrations about to be applied (not called when there are none). */
  pending?(names: string[]): void;
}

/** The database holds migrations this release does not know: a newer release migrated it. */
export class SchemaTooNewError extends Error {
  /** The migrations the database has and this release does not know. */
  readonly unknown: string[];

  constructor(unknown: string[]) {
    super(`the database was migrated by a newer release of storefront (${unknown.join(", ")}); this release knows migrations up to ${SCHEMA_VERSION}`);
    this.name = "SchemaTooNewError";
    this.unknown = unknown;
  }
}

/**
 * The oldest PostgreSQL this release runs on, as `server_version_num`: the read model's documents are built
 * by the server with `trim_scale`, which 13 added (src/readmodel/documents.postgres.ts).
 */
export const OLDEST_POSTGRES = 130000;

/** The PostgreSQL server is older than this release needs. */
export class DatabaseTooOldError extends Error {
  constructor(version: string) {
    super(`PostgreSQL ${version} is older than this release of storefront runs on (13 or newer)`);
    this.name = "DatabaseTooOldError";
  }
}

/** Refuses a server older than OLDEST_POSTGRES (its `server_version_num` and `server_version`). */
export function checkPostgresVersion(versionNum: number, version: string): void {
  if (!(versionNum >= OLDEST_POSTGRES)) throw new DatabaseTooOldError(version);
}

export async function migrateToLatest(db: Kysely<unknown>, ctx: MigrationContext, observer: MigrationObserver = {}): Promise<AppliedMigration[]> {
  return migrateTo(db, ctx, null, observer);
}

/**
 * Applies the migrations up to and including `last` (null: all of them) and returns those it applied, with
 * how long each took; tests of an upgrade start from an older schema. A database that holds migrations
 * this release does not know is refused (SchemaTooNewError) before anything runs, and so is a PostgreSQL
 * server older than this release runs on (DatabaseTooOldError).
 */
export async function migrateTo(db: Kysely<unknown>, ctx: MigrationContext, last: string | null, observer: MigrationObserver = {}): Promise<AppliedMigration[]> {
  if (ctx.dialect === "postgres") {
    const { rows } = await sql<{ num: string; version: string }>`select current_setting('server_version_num') as num, current_setting('server_version') as version`.execute(db);
    checkPostgresVersion(Number(rows[0]?.num), rows[0]?.version ?? "of unknown version");
  }
  const names = Object.keys(migrations);
  const applied = await appliedMigrations(db, ctx);
  const unknown = [...applied].filter((name) => !(name in migrations)).sort();
  if (unknown.length > 0) throw new SchemaTooNewError(unknown);
  const upTo = last === null ? names.length : names.indexOf(last) + 1;
  const todo = names.slice(0, upTo).filter((name) => !applied.has(name));
  if (todo.length > 0) observer.pending?.(todo);
  const durations = new Map<string, number>();
  const migrator = new Migrator({
    db,
    // Kysely looks for its own tables in every schema it can see: name ours, or a database holding
    // another storefront schema (tests, several tenants) would make it skip creating them here.
    ...(ctx.dialect === "postgres" ? { migrationTableSchema: await currentSchema(db) } : {}),
    provider: {
      getMigrations: () =>
        Promise.resolve(
          Object.fromEntries(
            Object.entries(migrations).map(([name, mod]): [string, Migration] => [
              name,
              {
                up: async (d) => {
                  const started = performance.now();
                  await mod.up(d, ctx);
                  durations.set(name, Math.round(performance.now() - started));
                },
              },
            ]),
          ),
        ),
    },
  });
  const result = last === null ? await migrator.migrateToLatest() : await migrator.migrateTo(last);
  if (result.error) throw result.error instanceof Error ? result.error : new Error(String(result.error));
  // Reported once they have committed (on PostgreSQL all of them commit together).
  return (result.results ?? []).filter((r) => r.status === "Success").map((r) => ({ name: r.migrationName, durationMs: durations.get(r.migrationName) ?? 0 }));
}

async function currentSchema(db: Kysely<unknown>): Promise<string> {
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  const schema = rows[0]?.schema;
  if (!schema) throw new Error("PostgreSQL has no current schema: check search_path");
  return schema;
}

/** The names in `kysely_migration` (none when the table does not exist yet: an empty database). */
async function appliedMigrations(db: Kysely<unknown>, ctx: MigrationContext): Promise<Set<string>> {
  try {
    const schema = ctx.dialect === "postgres" ? sql.id(await currentSchema(db), "kysely_migration") : sql.id("kysely_migration");
    const { rows } = await sql<{ name: string }>`select name from ${schema}`.execute(db);
    return new Set(rows.map((r) => r.name));
  } catch (err) {
    // No migration table at all: an empty database. Anything else (the connection, a database that does not
    // exist: 3D000 says "does not exist" too) is the caller's to see.
    const code = (err as { code?: unknown } | null)?.code;
    if (code === "42P01" || /kysely_migration|no such table/.test(err instanceof Error ? err.message : "")) return new Set();
    throw err;
  }
}

/** Migrations this build knows that the database has not applied (empty: the schema is current). */
export async function pendingMigrations(db: Kysely<unknown>, ctx: MigrationContext): Promise<string[]> {
  const applied = await appliedMigrations(db, ctx);
  return Object.keys(migrations).filter((name) => !applied.has(name));
}
