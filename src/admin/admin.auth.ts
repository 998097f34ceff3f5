// Administration requires `Authorization: Bearer <ADMIN_TOKEN>`; without ADMIN_TOKEN set the admin API is
// off and the command line (which works on the local database) is the way in.
import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyRequest } from "fastify";
import { AppError } from "../errors.ts";
import { extractToken } from "../auth/api-key.hook.ts";

const digest = (s: string) => createHash("sha256").update(s).digest();

export function requireAdmin(adminToken: string | null) {
  const expected = adminToken === null ? null : digest(adminToken);
  return async function adminHook(request: FastifyRequest): Promise<void> {
    if (expected === null) throw new AppError("unauthorized", "The admin API is disabled: set ADMIN_TOKEN to enable it");
    const token = extractToken(request.headers.authorization);
    if (token === null || !timingSafeEqual(digest(token), expected)) throw new AppError("unauthorized", "Invalid admin token");
  };
}
