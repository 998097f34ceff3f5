// Parsing of the list operations' shared query: strict ISO 8601 dates (a bare date covers its whole UTC
// day), the page size, the opaque cursor, the status and e-mail filters. Every failure names the parameter
// at fault.
import { AppError } from "../errors.ts";

export interface ListQueryInput {
  id?: string;
  createdAtFrom?: string;
  createdAtTo?: string;
  limit?: number;
  cursor?: string;
  /** One status or several, comma-separated. */
  status?: string;
  /** Customers only. */
  email?: string;
}

export interface Cursor {
  createdAt: number;
  id: string;
}

export interface ListQuery {
  id: string | null;
  /** Inclusive bounds, epoch milliseconds. */
  from: number | null;
  to: number | null;
  limit: number;
  after: Cursor | null;
  /** Invoice statuses, distinct, in the order given; null for any. */
  statuses: string[] | null;
  /** The e-mail with ASCII letters folded to lower case (the filter is case-insensitive); null for any. */
  email: string | null;
}

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 500;

const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?([Zz]|[+-]\d{2}(?::?\d{2})?))?$/;

/**
 * Parses an ISO 8601 date-time with `Z` or an offset, or a bare `YYYY-MM-DD`. A bare date is the start of
 * that UTC day, or its last millisecond when `endOfDay`. Returns null when the text is not such a date
 * (including impossible ones like 2023-02-30 or 25:00).
 */
export function parseIsoDate(text: string, endOfDay: boolean): number | null {
  const m = DATE_TIME.exec(text);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return null;
  if (h === undefined) {
    const start = utcTime(year, month, day);
    return endOfDay ? start + 86_400_000 - 1 : start;
  }
  if (zone === undefined) return null; // a time without Z or offset is ambiguous
  const hour = Number(h);
  const minute = Number(mi);
  const second = s === undefined ? 0 : Number(s);
  if (hour > 23 || minute > 59 || second > 59) return null;
  const ms = frac === undefined ? 0 : Math.floor(Number(`0.${frac}`) * 1000);
  let offsetMinutes = 0;
  if (zone !== "Z" && zone !== "z") {
    const sign = zone.startsWith("-") ? -1 : 1;
    const digits = zone.slice(1).replace(":", "");
    const oh = Number(digits.slice(0, 2));
    const om = digits.length > 2 ? Number(digits.slice(2, 4)) : 0;
    if (oh > 23 || om > 59) return null;
    offsetMinutes = sign * (oh * 60 + om);
  }
  return utcTime(year, month, day, hour, minute, second, ms) - offsetMinutes * 60_000;
}

/**
 * Date.UTC with the year as written: Date.UTC reads years 0-99 as 1900-1999, so `0099-01-01` would
 * become 1999. setUTCFullYear takes the year literally (proleptic Gregorian, as ISO 8601 does).
 */
function utcTime(year: number, month: number, day: number, hour = 0, minute = 0, second = 0, ms = 0): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second, ms);
  return d.getTime();
}

function daysInMonth(year: number, month: number): number {
  return new Date(utcTime(year, month + 1, 0)).getUTCDate();
}

export function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.createdAt, c.id])).toString("base64url");
}

export function decodeCursor(text: string): Cursor | null {
  if (text.length > 512 || !/^[A-Za-z0-9_-]+$/.test(text)) return null;
  try {
    const value: unknown = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
    if (
      Array.isArray(value) &&
      value.length === 2 &&
      Number.isSafeInteger(value[0]) &&
      typeof value[1] === "string" &&
      value[1].length > 0 &&
      value[1].length <= 200 &&
      !value[1].includes("\u0000")
    ) {
      return { createdAt: value[0] as number, id: value[1] };
    }
  } catch {
    // fall through: not a cursor we issued
  }
  return null;
}

/** `statuses`: the values the status filter takes (the invoice statuses; the caller names them). */
export function parseListQuery(q: ListQueryInput, statusValues: readonly string[]): ListQuery {
  let from: number | null = null;
  let to: number | null = null;
  if (q.createdAtFrom !== undefined) {
    from = parseIsoDate(q.createdAtFrom, false);
    if (from === null) throw badDate("createdAtFrom", q.createdAtFrom);
  }
  if (q.createdAtTo !== undefined) {
    to = parseIsoDate(q.createdAtTo, true);
    if (to === null) throw badDate("createdAtTo", q.createdAtTo);
  }
  if (from !== null && to !== null && from > to) {
    throw new AppError("invalid_request", "createdAtFrom must not be later than createdAtTo", { param: "createdAtFrom" });
  }
  let after: Cursor | null = null;
  if (q.cursor !== undefined) {
    after = decodeCursor(q.cursor);
    if (after === null) throw new AppError("invalid_request", "cursor is not a cursor this API issued", { param: "cursor" });
  }
  const id = q.id === undefined ? null : q.id;
  if (id !== null && (id.length === 0 || id.length > 200)) {
    throw new AppError("invalid_request", "id must be 1 to 200 characters", { param: "id" });
  }
  // No identifier or address holds NUL, and PostgreSQL refuses it in text: a 400, not a failed query.
  for (const [param, value] of [["id", id], ["email", q.email ?? null]] as const) {
    if (value !== null && value.includes("\0")) throw new AppError("invalid_request", `${param} must not contain NUL characters`, { param });
  }
  let statuses: string[] | null = null;
  if (q.status !== undefined) {
    statuses = [...new Set(q.status.split(",").map((s) => s.trim()))];
    const unknown = statuses.find((s) => !statusValues.includes(s));
    if (unknown !== undefined) {
      throw new AppError("invalid_request", `status must be one or more of ${statusValues.join(", ")}, comma-separated; got "${unknown.slice(0, 64)}"`, {
        param: "status",
      });
    }
  }
  const email = q.email === undefined ? null : foldAscii(q.email);
  return { id, from, to, limit: q.limit ?? DEFAULT_LIMIT, after, statuses, email };
}

/** Lower-cases ASCII letters only, as SQLite's lower() and PostgreSQL's lower() under "C" do. */
export const foldAscii = (text: string): string => text.replace(/[A-Z]+/g, (s) => s.toLowerCase());

function badDate(param: string, value: string): AppError {
  return new AppError(
    "invalid_request",
    `${param} must be an ISO 8601 date-time with Z or an offset (2023-06-15T14:30:00Z) or a date (2023-06-15), got "${value.slice(0, 64)}"`,
    { param },
  );
}

/** The date part ("2026-11-26T") of each day seen, by the day's first millisecond (bounded; cleared when full). */
const dayPrefixes = new Map<number, string>();
const MAX_DAYS_REMEMBERED = 4096;
const DAY_MS = 86_400_000;
/** 10000-01-01T00:00:00Z: beyond it, and before 1970, Date's own formatting (six-digit and signed years). */
const FAST_UNTIL_MS = 253_402_300_800_000;
const pad2 = (n: number) => (n < 10 ? `0${n}` : `${n}`);
const pad3 = (n: number) => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

/**
 * Epoch milliseconds as `toISOString` writes them. A document of a customer with thousands of invoices
 * writes tens of thousands of them, and `new Date(ms).toISOString()` took a third of its rebuild: the date
 * part is formatted once per day and the time of day by hand.
 */
export function isoTime(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms >= FAST_UNTIL_MS) return new Date(ms).toISOString();
  const day = ms - (ms % DAY_MS);
  let prefix = dayPrefixes.get(day);
  if (prefix === undefined) {
    if (dayPrefixes.size >= MAX_DAYS_REMEMBERED) dayPrefixes.clear();
    prefix = new Date(day).toISOString().slice(0, 11);
    dayPrefixes.set(day, prefix);
  }
  let t = ms - day;
  const milliseconds = t % 1000;
  t = (t - milliseconds) / 1000;
  const seconds = t % 60;
  t = (t - seconds) / 60;
  const minutes = t % 60;
  const hours = (t - minutes) / 60;
  return `${prefix}${pad2(hours)}:${pad2(minutes)}:${pad2(seconds)}.${pad3(milliseconds)}Z`;
}

/** A page of rows fetched with one extra (limit + 1): the page, and the cursor after it when there is more. */
export function takePage<T extends { created_at: number; id: string }>(rows: T[], limit: number): { page: T[]; next: Cursor | null } {
  if (rows.length <= limit) return { page: rows, next: null };
  const page = rows.slice(0, limit);
  const last = page[page.length - 1]!;
  return { page, next: { createdAt: last.created_at, id: last.id } };
}
