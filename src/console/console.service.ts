// The console's logins (created on the command line) and sessions (a cookie whose SHA-256 is stored,
// with a CSRF token). A session ends after CONSOLE_SESSION_IDLE_MINUTES without a request and 12 hours
// after sign-in whatever happens; a login's sessions end when the login is removed, and a session opened with
// the admin token ends when the service's ADMIN_TOKEN is changed or removed.
import { createHash, createHmac, randomBytes, scrypt, timingSafeEqual } from "node:crypto";
import { promisify } from "node:util";
import type { Kysely } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { AppError } from "../errors.ts";
import { newId } from "../lib/ids.ts";
import type { StoresService } from "../stores/stores.service.ts";
import { createConsoleRepository } from "./console.repository.ts";

const scryptAsync = promisify(scrypt) as (password: string, salt: Buffer, keylen: number, options: { N: number; r: number; p: number; maxmem: number }) => Promise<Buffer>;
const SCRYPT = { N: 16384, r: 8, p: 1, keylen: 32 };
export const SESSION_MAX_MS = 12 * 60 * 60 * 1000;
/** last_seen_at is written at most this often per session (a write per request would be wasted). */
const TOUCH_EVERY_MS = 15_000;
export const MIN_PASSWORD_LENGTH = 10;

const sha256 = (s: string) => createHash("sha256").update(s).digest();

/**
 * Binds an admin-token session to the token: an HMAC of the session's id under the token. Checked on every
 * request against the token this process runs with, so a rotated or removed token ends the session in
 * every process that runs with the new one. A copy of the database holds no token, only this per-session tag.
 */
const adminTokenTag = (adminToken: string, idHash: string) => createHmac("sha256", adminToken).update(`storefront console session ${idHash}`).digest();

export interface ConsoleSession {
  idHash: string;
  kind: "admin" | "user";
  email: string | null;
  /** The stores this session may see; null: every store (the admin token). */
  stores: string[] | null;
  csrfToken: string;
  /** When it ends if no request comes before (the earlier of the idle and the absolute end). */
  expiresAt: number;
}

export interface ConsoleUser {
  id: string;
  email: string;
  stores: string[];
  createdAt: string;
}

export interface ConsoleService {
  addUser(email: string, password: string, stores: string[]): Promise<ConsoleUser>;
  listUsers(): Promise<ConsoleUser[]>;
  removeUser(email: string): Promise<void>;
  /** A new session for the admin token, or null when the token is wrong (or the admin token is off). */
  signInWithToken(token: string): Promise<{ cookie: string; session: ConsoleSession } | null>;
  /** A new session for a login, or null when the e-mail or password is wrong. */
  signInWithPassword(email: string, password: string): Promise<{ cookie: string; session: ConsoleSession } | null>;
  /** The live session a cookie value names, or null. Counts as activity. */
  authenticate(cookie: string): Promise<ConsoleSession | null>;
  signOut(cookie: string): Promise<void>;
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(password, salt, SCRYPT.keylen, { N: SCRYPT.N, r: SCRYPT.r, p: SCRYPT.p, maxmem: 64 * 1024 * 1024 });
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString("base64")}$${hash.toString("base64")}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  if (scheme !== "scrypt" || !salt || !hash) return false;
  const expected = Buffer.from(hash, "base64");
  const actual = await scryptAsync(password, Buffer.from(salt, "base64"), expected.length, { N: Number(n), r: Number(r), p: Number(p), maxmem: 64 * 1024 * 1024 });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** Compared against when the e-mail is unknown, so a wrong address takes as long as a wrong password. */
let decoyHash: Promise<string> | null = null;

const normalizeEmail = (email: string) => email.trim().toLowerCase();

export function createConsoleService(deps: { db: Kysely<Database>; stores: StoresService; adminToken: string | null; idleMinutes: number; now: () => number }): ConsoleService {
  const repo = createConsoleRepository(deps.db);
  const idleMs = deps.idleMinutes * 60_000;
  const adminDigest = deps.adminToken === null ? null : sha256(deps.adminToken);

  /** Whether an admin-token session was opened with the token this process runs with (none: never). */
  const tagMatches = (stored: string | null, idHash: string): boolean => {
    if (deps.adminToken === null || stored === null || !/^[0-9a-f]{64}$/.test(stored)) return false;
    return timingSafeEqual(Buffer.from(stored, "hex"), adminTokenTag(deps.adminToken, idHash));
  };

  const open = async (userId: string | null, email: string | null, stores: string[] | null) => {
    const now = deps.now();
    await repo.pruneSessions(now, idleMs);
    const cookie = randomBytes(32).toString("base64url");
    const idHash = sha256(cookie).toString("hex");
    const csrfToken = randomBytes(32).toString("base64url");
    const expiresAt = now + SESSION_MAX_MS;
    const tag = userId === null && deps.adminToken !== null ? adminTokenTag(deps.adminToken, idHash).toString("hex") : null;
    await repo.insertSession({ idHash, userId, csrfToken, now, expiresAt, adminTokenTag: tag });
    const session: ConsoleSession = { idHash, kind: userId === null ? "admin" : "user", email, stores, csrfToken, expiresAt: Math.min(expiresAt, now + idleMs) };
    return { cookie, session };
  };

  return {
    async addUser(rawEmail, password, stores) {
      const email = normalizeEmail(rawEmail);
      if (!/^[^\s@]+@[^\s@]+$/.test(email) || email.length > 254) throw new AppError("invalid_request", `"${rawEmail}" is not an e-mail address`, { param: "email" });
      if (password.length < MIN_PASSWORD_LENGTH) throw new AppError("invalid_request", `The password must be at least ${MIN_PASSWORD_LENGTH} characters`, { param: "password" });
      if (stores.length === 0) throw new AppError("invalid_request", "Give at least one store the login may see", { param: "store" });
      const unique = [...new Set(stores)];
      for (const id of unique) await deps.stores.requireStore(id);
      if (await repo.userByEmail(email)) throw new AppError("conflict", `A console login for ${email} exists already; remove it first`, { param: "email" });
      const user = { id: newId("cu"), email, passwordHash: await hashPassword(password), stores: unique, createdAt: deps.now() };
      await repo.insertUser(user);
      return { id: user.id, email, stores: unique, createdAt: new Date(user.createdAt).toISOString() };
    },
    async listUsers() {
      return (await repo.listUsers()).map((u) => ({ id: u.id, email: u.email, stores: u.stores, createdAt: new Date(u.createdAt).toISOString() }));
    },
    async removeUser(email) {
      if (!(await repo.deleteUser(normalizeEmail(email)))) throw new AppError("not_found", `No console login for ${email}`, { param: "email" });
    },
    async signInWithToken(token) {
      if (adminDigest === null || !timingSafeEqual(sha256(token), adminDigest)) return null;
      return open(null, null, null);
    },
    async signInWithPassword(email, password) {
      const user = await repo.userByEmail(normalizeEmail(email));
      if (!user) {
        await verifyPassword(password, await (decoyHash ??= hashPassword(randomBytes(16).toString("hex"))));
        return null;
      }
      if (!(await verifyPassword(password, user.passwordHash))) return null;
      return open(user.id, user.email, user.stores);
    },
    async authenticate(cookie) {
      if (cookie === "" || cookie.length > 200) return null;
      const idHash = sha256(cookie).toString("hex");
      const row = await repo.session(idHash);
      if (!row) return null;
      const now = deps.now();
      const loginGone = row.userId !== null && row.stores === null;
      const tokenChanged = row.userId === null && !tagMatches(row.adminTokenTag, idHash);
      if (row.expiresAt <= now || row.lastSeenAt + idleMs <= now || loginGone || tokenChanged) {
        await repo.deleteSession(idHash);
        return null;
      }
      if (now - row.lastSeenAt >= TOUCH_EVERY_MS) await repo.touchSession(idHash, now);
      return {
        idHash,
        kind: row.userId === null ? "admin" : "user",
        email: row.email,
        stores: row.userId === null ? null : row.stores,
        csrfToken: row.csrfToken,
        expiresAt: Math.min(row.expiresAt, now + idleMs),
      };
    },
    async signOut(cookie) {
      await repo.deleteSession(sha256(cookie).toString("hex"));
    },
  };
}
