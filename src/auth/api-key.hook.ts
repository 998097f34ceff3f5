// The read API's authentication: `Authorization: <key>` or `Authorization: Bearer <key>`, a key of one
// store with the route's scope. Runs as the route's first hook, before validation and rate limiting; a wrong
// key counts against the address's failed sign-ins before it is looked up (sign-in-guard.ts). The
// key's remembered API version applies from here on unless the request pinned one.
import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from "fastify";
import { AppError } from "../errors.ts";
import type { SignInGuard } from "./sign-in-guard.ts";
import type { AuthenticatedKey, Scope, StoresService } from "../stores/stores.service.ts";
import { answerInKeyVersion } from "../versioning/versioning.hook.ts";

declare module "fastify" {
  interface FastifyRequest {
    apiKey: AuthenticatedKey | null;
  }
}

export function extractToken(header: string | undefined): string | null {
  if (header === undefined) return null;
  const value = header.trim();
  const m = /^Bearer\s+(\S+)$/i.exec(value);
  if (m) return m[1]!;
  return /^\S+$/.test(value) ? value : null;
}

export function requireApiKey(stores: StoresService, scope: Scope, guard: SignInGuard): onRequestAsyncHookHandler {
  return async function apiKeyHook(request: FastifyRequest, reply: FastifyReply) {
    const token = extractToken(request.headers.authorization);
    if (token === null) {
      throw new AppError("unauthorized", "Missing API key: send Authorization: <API_KEY> (or Bearer <API_KEY>)");
    }
    const settle = guard.attempt("api-key", request.ip, reply, token);
    const key = await stores.authenticate(token).catch((err: unknown) => {
      settle(true); // not checked (the database): not a failed attempt
      throw err;
    });
    settle(key !== null);
    if (key === null) throw new AppError("unauthorized", "Unknown or revoked API key");
    answerInKeyVersion(request, key.version);
    if (!key.scopes.has(scope)) throw new AppError("forbidden", `This key lacks the ${scope} scope`);
    request.apiKey = key;
  };
}

/** The authenticated store of a request that passed requireApiKey. */
export function authenticatedStoreId(request: FastifyRequest): string {
  if (request.apiKey === null) throw new Error("route is missing requireApiKey");
  return request.apiKey.storeId;
}
