// Failed sign-ins, limited per client address and per kind of credential (API key, admin token, console
// sign-in), each attempt counted before its credential is checked and given back when it succeeds: parallel
// guesses cannot outrun the limit, and a correct credential never spends it. One budget per kind, so that
// wrong API keys from an address (a proxy's, when TRUST_PROXY is not set) lock out neither the admin
// token nor the console. An API key this process has seen succeed skips the API-key budget: it is not a
// guess (256 random bits cannot be guessed), and its holder keeps working while strangers behind the same
// proxy exhaust it; it is still checked, and a failure still counts.
import { createHash } from "node:crypto";
import type { FastifyReply } from "fastify";
import { AppError } from "../errors.ts";
import { type AttemptLimiter, clientBucket } from "../lib/attempt-limiter.ts";

export type CredentialKind = "api-key" | "admin-token" | "console";

export interface SignInGuard {
  /**
   * Counts an attempt of `kind` from `ip` before its credential is checked, or throws 429 rate_limited (with
   * Retry-After) when the address has spent that budget. Call the returned function with the outcome.
   */
  attempt(kind: CredentialKind, ip: string, reply: FastifyReply, credential?: string): (succeeded: boolean) => void;
}

/** Remembers (as SHA-256) up to `max` API keys that succeeded, each for `ttlMs`. */
function createVouched(max: number, ttlMs: number, now: () => number) {
  const seen = new Map<string, number>();
  return {
    has(digest: string): boolean {
      const until = seen.get(digest);
      if (until === undefined) return false;
      if (until > now()) return true;
      seen.delete(digest);
      return false;
    },
    add(digest: string): void {
      seen.delete(digest);
      if (seen.size >= max) seen.delete(seen.keys().next().value!); // the oldest (insertion order)
      seen.set(digest, now() + ttlMs);
    },
    forget(digest: string): void {
      seen.delete(digest);
    },
  };
}

const VOUCHED_KEYS = 10_000;
const VOUCHED_MS = 24 * 60 * 60 * 1000;

export function createSignInGuard(limiter: AttemptLimiter, now: () => number = Date.now): SignInGuard {
  const vouched = createVouched(VOUCHED_KEYS, VOUCHED_MS, now);
  return {
    attempt(kind, ip, reply, credential) {
      const bucket = `${kind}|${clientBucket(ip)}`;
      const digest = kind === "api-key" && credential !== undefined ? createHash("sha256").update(credential).digest("hex") : null;
      if (digest !== null && vouched.has(digest)) {
        return (succeeded) => {
          if (succeeded) return;
          vouched.forget(digest); // revoked since: from now on it is a guess like any other
          limiter.hit(bucket);
        };
      }
      const wait = limiter.take(bucket);
      if (wait > 0) {
        reply.header("retry-after", String(wait));
        throw new AppError("rate_limited", `Too many failed sign-in attempts from this address; retry in ${wait} s`);
      }
      return (succeeded) => {
        if (!succeeded) return;
        limiter.refund(bucket);
        if (digest !== null) vouched.add(digest);
      };
    },
  };
}
