// Two hardening columns (issue 28).
// - plugin_installations.allowed_sources: the provider's published source ranges (JSON array of CIDRs);
//   a delivery from anywhere else is refused before any work. Null: from anywhere.
// - console_sessions.admin_token_tag: a session opened with the admin token carries an HMAC of its id under
//   that token, so it ends when the token is changed or removed. Admin-token sessions from before this
//   migration cannot be tied to a token and are ended.
import type { Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  await db.schema.alterTable("plugin_installations").addColumn("allowed_sources", "text").execute();
  await db.schema.alterTable("console_sessions").addColumn("admin_token_tag", "text").execute();
  await (db as Kysely<{ console_sessions: { user_id: string | null } }>).deleteFrom("console_sessions").where("user_id", "is", null).execute();
}
