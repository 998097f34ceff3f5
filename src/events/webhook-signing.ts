// Standard Webhooks signing (https://www.standardwebhooks.com): a `whsec_` secret of 24 random bytes,
// and `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, one entry per valid secret.
import { createHmac, randomBytes } from "node:crypto";

const PREFIX = "whsec_";

export function generateSigningSecret(): string {
  return PREFIX + randomBytes(24).toString("base64");
}

export function signPayload(secret: string, messageId: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, "base64");
  return "v1," + createHmac("sha256", key).update(`${messageId}.${timestampSeconds}.${body}`).digest("base64");
}

/** The headers of one delivery: every secret still valid signs it (the new and, during rotation, the old). */
export function webhookHeaders(secrets: readonly string[], messageId: string, timestampSeconds: number, body: string): Record<string, string> {
  return {
    "content-type": "application/json",
    "webhook-id": messageId,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": secrets.map((s) => signPayload(s, messageId, timestampSeconds, body)).join(" "),
  };
}

/** The secrets that sign now: the current one, and during a rotation the previous one until it expires. */
export function signingSecrets(secrets: { current: string; previous?: string }, previousExpiresAt: number | null, now: number): string[] {
  return secrets.previous !== undefined && previousExpiresAt !== null && previousExpiresAt > now ? [secrets.current, secrets.previous] : [secrets.current];
}
