// Administration requires `Authorization: Bearer <ADMIN_TOKEN>`; without ADMIN_TOKEN set the admin API is
// off and the command line (which works on the local database) is the way in.
// A request without an Authorization header may instead carry a console session cookie (the console's
// pages call this API): writes then need the session's CSRF token, and a console *login* reaches only
// its own stores' routes (any other store is answered 404, as if it did not exist) and, of the routes
// without a store, only the store list (filtered) and the catalogue.
import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { AppError } from "../errors.ts";
import { extractToken } from "../auth/api-key.hook.ts";
import type { SignInGuard } from "../auth/sign-in-guard.ts";
import { SESSION_COOKIE, canSeeStore, checkCsrf, readCookie } from "../console/console.auth.ts";
import type { ConsoleService } from "../console/console.service.ts";

const digest = (s: string) => createHash("sha256").update(s).digest();

/** Store-less admin routes a console login may call (read-only, nothing of another store in them). */
const LOGIN_STORELESS = new Set(["GET /api/admin/stores", "GET /api/admin/catalog", "GET /api/admin/catalog/:name/fixtures"]);

export function requireAdmin(adminToken: string | null, guard: SignInGuard, sessions?: ConsoleService) {
  const expected = adminToken === null ? null : digest(adminToken);
  return async function adminHook(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    request.consoleSession = null;
    if (sessions !== undefined && request.headers.authorization === undefined) {
      const cookie = readCookie(request, SESSION_COOKIE);
      if (cookie !== null) return consoleSessionAccess(request, sessions, cookie);
    }
    if (expected === null) throw new AppError("unauthorized", "The admin API is disabled: set ADMIN_TOKEN to enable it");
    const token = extractToken(request.headers.authorization);
    if (token === null) throw new AppError("unauthorized", "Missing admin token: send Authorization: Bearer <ADMIN_TOKEN>");
    // Counted before the comparison, given back when it matches (sign-in-guard.ts).
    const settle = guard.attempt("admin-token", request.ip, reply);
    const matches = timingSafeEqual(digest(token), expected);
    settle(matches);
    if (!matches) throw new AppError("unauthorized", "Invalid admin token");
  };
}

async function consoleSessionAccess(request: FastifyRequest, sessions: ConsoleService, cookie: string): Promise<void> {
  const session = await sessions.authenticate(cookie);
  if (session === null) throw new AppError("unauthorized", "The console session has ended: sign in again");
  checkCsrf(request, session);
  request.consoleSession = session;
  if (session.stores === null) return;
  const route = request.routeOptions.url ?? "";
  const storeId = (request.params as { storeId?: unknown } | undefined)?.storeId;
  if (route.startsWith("/api/admin/stores/:storeId")) {
    if (!canSeeStore(session, storeId)) throw new AppError("store_not_found", `No store ${String(storeId)}`, { param: "storeId" });
    return;
  }
  if (!LOGIN_STORELESS.has(`${request.method} ${route}`)) throw new AppError("forbidden", "A console login cannot use this operation");
}
