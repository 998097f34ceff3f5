// PostgreSQL: every change to api_keys (a revocation, a new API version, a raw UPDATE or DELETE by an
// operator) notifies `storefront_api_keys` with the table's schema once it commits, so each process that
// remembers authenticated keys forgets them at once (src/stores/key-cache.ts). A statement-level trigger:
// one notification per statement, whatever it touched. SQLite needs nothing: there another connection's
// commit moves `PRAGMA data_version`, which the cache checks on every lookup.
import { sql, type Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  if (ctx.dialect !== "postgres") return;
  await sql`
    create function storefront_api_keys_changed() returns trigger language plpgsql as $$
    begin
      perform pg_notify('storefront_api_keys', tg_table_schema);
      return null;
    end $$`.execute(db);
  await sql`
    create trigger api_keys_changed after update or delete or truncate on api_keys
    for each statement execute function storefront_api_keys_changed()`.execute(db);
}
