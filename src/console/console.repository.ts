// SQL of the console's logins and sessions (tables from migration 0011; the admin token's tag, 0018).
import type { Kysely } from "kysely";
import type { Database } from "../platform/db/schema.ts";

export interface ConsoleUserRow {
  id: string;
  email: string;
  passwordHash: string;
  stores: string[];
  createdAt: number;
}

export interface ConsoleSessionRow {
  userId: string | null;
  csrfToken: string;
  createdAt: number;
  lastSeenAt: number;
  expiresAt: number;
  /** Admin-token sessions: the tag binding them to the token that opened them. */
  adminTokenTag: string | null;
  /** The login's e-mail and stores (null for an admin-token session). */
  email: string | null;
  stores: string[] | null;
}

const splitStores = (s: string) => s.split(" ").filter((x) => x !== "");

export function createConsoleRepository(db: Kysely<Database>) {
  return {
    async insertUser(user: ConsoleUserRow): Promise<void> {
      await db
        .insertInto("console_users")
        .values({ id: user.id, email: user.email, password_hash: user.passwordHash, stores: user.stores.join(" "), created_at: user.createdAt })
        .execute();
    },
    async userByEmail(email: string): Promise<ConsoleUserRow | null> {
      const r = await db.selectFrom("console_users").selectAll().where("email", "=", email).executeTakeFirst();
      return r ? { id: r.id, email: r.email, passwordHash: r.password_hash, stores: splitStores(r.stores), createdAt: Number(r.created_at) } : null;
    },
    async listUsers(): Promise<ConsoleUserRow[]> {
      const rows = await db.selectFrom("console_users").selectAll().orderBy("email").execute();
      return rows.map((r) => ({ id: r.id, email: r.email, passwordHash: r.password_hash, stores: splitStores(r.stores), createdAt: Number(r.created_at) }));
    },
    /** Removes the login and its sessions; false when there was none. */
    async deleteUser(email: string): Promise<boolean> {
      return db.transaction().execute(async (trx) => {
        const user = await trx.selectFrom("console_users").select("id").where("email", "=", email).executeTakeFirst();
        if (!user) return false;
        await trx.deleteFrom("console_sessions").where("user_id", "=", user.id).execute();
        await trx.deleteFrom("console_users").where("id", "=", user.id).execute();
        return true;
      });
    },
    async insertSession(s: { idHash: string; userId: string | null; csrfToken: string; now: number; expiresAt: number; adminTokenTag: string | null }): Promise<void> {
      await db
        .insertInto("console_sessions")
        .values({ id_hash: s.idHash, user_id: s.userId, csrf_token: s.csrfToken, created_at: s.now, last_seen_at: s.now, expires_at: s.expiresAt, admin_token_tag: s.adminTokenTag })
        .execute();
    },
    async session(idHash: string): Promise<ConsoleSessionRow | null> {
      const r = await db
        .selectFrom("console_sessions as s")
        .leftJoin("console_users as u", "u.id", "s.user_id")
        .select(["s.user_id", "s.csrf_token", "s.created_at", "s.last_seen_at", "s.expires_at", "s.admin_token_tag", "u.email", "u.stores"])
        .where("s.id_hash", "=", idHash)
        .executeTakeFirst();
      if (!r) return null;
      return {
        userId: r.user_id,
        csrfToken: r.csrf_token,
        createdAt: Number(r.created_at),
        lastSeenAt: Number(r.last_seen_at),
        expiresAt: Number(r.expires_at),
        adminTokenTag: r.admin_token_tag,
        email: r.email ?? null,
        stores: r.stores === null || r.stores === undefined ? null : splitStores(r.stores),
      };
    },
    async touchSession(idHash: string, now: number): Promise<void> {
      await db.updateTable("console_sessions").set({ last_seen_at: now }).where("id_hash", "=", idHash).execute();
    },
    async deleteSession(idHash: string): Promise<void> {
      await db.deleteFrom("console_sessions").where("id_hash", "=", idHash).execute();
    },
    /** Sessions past their absolute end or idle for longer than `idleMs`. */
    async pruneSessions(now: number, idleMs: number): Promise<void> {
      await db
        .deleteFrom("console_sessions")
        .where((eb) => eb.or([eb("expires_at", "<=", now), eb("last_seen_at", "<=", now - idleMs)]))
        .execute();
    },
  };
}

export type ConsoleRepository = ReturnType<typeof createConsoleRepository>;
