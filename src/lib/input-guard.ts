// Values that pass schema validation but no database can store: a NUL byte in a string (PostgreSQL
// text refuses it) and a number that is not finite (`limit=Infinity`: ajv's type coercion lets
// Infinity through as an integer; `1e309` in JSON parses to Infinity). Checked once for every route,
// after validation, so each is a 400 naming the parameter instead of a 500 from the database.
import { AppError } from "../errors.ts";

/** The first offending value's path (`limit`, `items[0].productVariantId`), or null. */
export function findUnstorable(value: unknown, path = ""): { path: string; problem: string } | null {
  if (typeof value === "string") return value.includes("\u0000") ? { path, problem: "must not contain a NUL byte" } : null;
  if (typeof value === "number") return Number.isFinite(value) ? null : { path, problem: "must be a finite number" };
  if (value === null || typeof value !== "object" || Buffer.isBuffer(value)) return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findUnstorable(value[i], `${path}[${i}]`);
      if (found) return found;
    }
    return null;
  }
  for (const [k, v] of Object.entries(value)) {
    const found = findUnstorable(v, path === "" ? k : `${path}.${k}`);
    if (found) return found;
  }
  return null;
}

/**
 * Text from outside that is kept rather than refused: a provider's body (its event's id and type) and what a
 * plugin returned (its log lines; its invoiceId as the delivery log shows it). PostgreSQL text cannot hold a
 * NUL byte; each is kept as U+FFFD, the replacement character, on both databases alike.
 */
export function storableText(text: string): string {
  return text.includes("\u0000") ? text.replaceAll("\u0000", "\uFFFD") : text;
}

export function assertStorable(parts: { query?: unknown; params?: unknown; body?: unknown }): void {
  for (const [where, value] of Object.entries(parts)) {
    const found = findUnstorable(value);
    if (found) {
      const param = found.path === "" ? where : found.path;
      throw new AppError("invalid_request", `${param} ${found.problem}`, { param });
    }
  }
}
