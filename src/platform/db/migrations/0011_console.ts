// The merchant console's logins and sessions (docs/console.md). A login sees only the stores it lists; the
// admin token's sessions see every store. A session is stored as the SHA-256 of its cookie value, so a
// copy of the database does not hold usable cookies.
import type { Kysely } from "kysely";
import type { MigrationContext } from "./context.ts";

export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  await db.schema
    .createTable("console_users")
    .addColumn("id", "text", (c) => c.primaryKey())
    /** Lower-cased; one login per address. */
    .addColumn("email", "text", (c) => c.notNull().unique())
    /** scrypt$N$r$p$salt$hash (base64), node:crypto's scrypt. */
    .addColumn("password_hash", "text", (c) => c.notNull())
    /** Space-separated ids of the stores this login may see. */
    .addColumn("stores", "text", (c) => c.notNull())
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .execute();

  await db.schema
    .createTable("console_sessions")
    /** SHA-256 (hex) of the cookie's value. */
    .addColumn("id_hash", "text", (c) => c.primaryKey())
    /** The login, or null for a session opened with the admin token. */
    .addColumn("user_id", "text", (c) => c.references("console_users.id").onDelete("cascade"))
    .addColumn("csrf_token", "text", (c) => c.notNull())
    .addColumn("created_at", "bigint", (c) => c.notNull())
    .addColumn("last_seen_at", "bigint", (c) => c.notNull())
    /** The absolute end (created + 12 h); the idle end is last_seen_at + CONSOLE_SESSION_IDLE_MINUTES. */
    .addColumn("expires_at", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("console_sessions_expires").on("console_sessions").column("expires_at").execute();
  await db.schema.createIndex("console_sessions_user").on("console_sessions").column("user_id").execute();
}
