// The console's cookie and CSRF rules, shared by /console/api and the admin API's session path.
// Cookie `storefront_session`: HttpOnly, SameSite=Strict, Path=/, Secure when the request came over TLS
// (request.protocol honours TRUST_PROXY). A state-changing request must carry `x-csrf-token` equal to the
// session's token and, when it has an Origin, come from this server's own origin.
import { timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { AppError } from "../errors.ts";
import type { ConsoleService, ConsoleSession } from "./console.service.ts";

export const SESSION_COOKIE = "storefront_session";

declare module "fastify" {
  interface FastifyRequest {
    /** The console session a request came with (set by the admin hook or /console/api). */
    consoleSession?: ConsoleSession | null;
  }
}

/** The value of one cookie of the request, or null. */
export function readCookie(request: FastifyRequest, name: string): string | null {
  const header = request.headers.cookie;
  if (header === undefined) return null;
  for (const part of header.split(";")) {
    const i = part.indexOf("=");
    if (i < 0) continue;
    if (part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return null;
}

export function setSessionCookie(request: FastifyRequest, reply: FastifyReply, value: string): void {
  reply.header("set-cookie", cookieHeader(request, value, "Max-Age=43200"));
}

export function clearSessionCookie(request: FastifyRequest, reply: FastifyReply): void {
  reply.header("set-cookie", cookieHeader(request, "", "Max-Age=0"));
}

function cookieHeader(request: FastifyRequest, value: string, age: string): string {
  const secure = request.protocol === "https" ? "; Secure" : "";
  return `${SESSION_COOKIE}=${value}; ${age}; Path=/; HttpOnly; SameSite=Strict${secure}`;
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Throws 403 csrf_failed unless the request came from this server's own pages. */
export function checkOrigin(request: FastifyRequest): void {
  const origin = request.headers.origin;
  if (origin === undefined) return;
  if (origin !== `${request.protocol}://${request.host}`) throw new AppError("csrf_failed", "The request came from another origin");
}

/** For writes: the session's CSRF token in x-csrf-token and, when given, this server's Origin. */
export function checkCsrf(request: FastifyRequest, session: ConsoleSession): void {
  if (SAFE_METHODS.has(request.method)) return;
  checkOrigin(request);
  const given = request.headers["x-csrf-token"];
  const expected = Buffer.from(session.csrfToken);
  if (typeof given !== "string" || given.length !== expected.length || !timingSafeEqual(Buffer.from(given), expected)) {
    throw new AppError("csrf_failed", "Missing or wrong x-csrf-token: take it from GET /console/api/session");
  }
}

/**
 * onRequest hook for console-only routes under /console/api: a live session (401 otherwise), the CSRF
 * rules for writes, and a `:storeId` in the route limited to the session's stores (404 otherwise).
 */
export function requireConsoleSession(sessions: ConsoleService) {
  return async function consoleSessionHook(request: FastifyRequest): Promise<void> {
    const cookie = readCookie(request, SESSION_COOKIE);
    const session = cookie === null ? null : await sessions.authenticate(cookie);
    if (session === null) throw new AppError("unauthorized", "Not signed in to the console, or the session has ended");
    checkCsrf(request, session);
    request.consoleSession = session;
    const storeId = (request.params as { storeId?: unknown } | undefined)?.storeId;
    if (storeId !== undefined && !canSeeStore(session, storeId)) throw new AppError("store_not_found", `No store ${String(storeId)}`, { param: "storeId" });
  };
}

export const canSeeStore = (session: ConsoleSession, storeId: unknown): boolean =>
  typeof storeId === "string" && (session.stores === null || session.stores.includes(storeId));
