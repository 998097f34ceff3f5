// Keyset paging shared by the list repositories: newest first by (created_at, id), inclusive date bounds,
// and a page fetched as limit + 1 rows so the presence of a next page costs no extra query.
import { sql, type Expression, type Kysely, type SelectQueryBuilder, type SqlBool } from "kysely";
import type { Database } from "../db/schema.ts";
import type { Cursor, ListQuery } from "./list-query.ts";

/** A page of a list as the JSON texts of its elements, in order, and where the next page starts. */
export interface Page {
  bodies: string[];
  next: Cursor | null;
}

interface PageKey {
  id: string;
  created_at: number;
}

/** Conditions on `${table}.created_at` / `${table}.id` for the date window and the cursor. */
export function windowConditions(table: string, q: ListQuery): Expression<SqlBool>[] {
  const createdAt = sql.ref(`${table}.created_at`);
  const id = sql.ref(`${table}.id`);
  const conds: Expression<SqlBool>[] = [];
  if (q.from !== null) conds.push(sql<SqlBool>`${createdAt} >= ${q.from}`);
  if (q.to !== null) conds.push(sql<SqlBool>`${createdAt} <= ${q.to}`);
  // Row-value comparison: both SQLite and PostgreSQL turn it into one range scan of the page index.
  if (q.after !== null) conds.push(sql<SqlBool>`(${createdAt}, ${id}) < (${q.after.createdAt}, ${q.after.id})`);
  return conds;
}

export function takePage<T extends { created_at: number; id: string }>(rows: T[], limit: number): { page: T[]; next: Cursor | null } {
  if (rows.length <= limit) return { page: rows, next: null };
  const page = rows.slice(0, limit);
  const last = page[page.length - 1]!;
  return { page, next: { createdAt: last.created_at, id: last.id } };
}

/**
 * Several ordered page queries (one per status, each already cut at limit + 1) merged into one: their
 * union in page order, cut again. The union's members are subqueries so each keeps its ORDER BY / LIMIT.
 */
export function mergeStatusRanges<DB, TB extends keyof DB>(
  db: Kysely<Database>,
  ranges: SelectQueryBuilder<DB, TB, PageKey>[],
  limit: number,
): SelectQueryBuilder<Database & { u: PageKey }, "u", PageKey> {
  const members = ranges.map((r) => db.selectFrom(r.as("s")).select(["s.id", "s.created_at"]));
  const union = members.slice(1).reduce((all, m) => all.unionAll(m), members[0]!);
  return db.selectFrom(union.as("u")).select(["u.id", "u.created_at"]).orderBy("u.created_at", "desc").orderBy("u.id", "desc").limit(limit + 1);
}

/**
 * The page's stored documents, with the missing ones (made stale by a write that did not refresh them)
 * assembled. An element deleted in between is left out.
 */
export async function fillMissing(
  rows: readonly { id: string; body: string | null }[],
  assemble: (ids: string[]) => Promise<Map<string, string>>,
): Promise<string[]> {
  const missing = rows.filter((r) => r.body === null).map((r) => r.id);
  if (missing.length === 0) return rows.map((r) => r.body!);
  const built = await assemble(missing);
  return rows.flatMap((r) => {
    const body = r.body ?? built.get(r.id);
    return body === undefined ? [] : [body];
  });
}

/** Groups rows by a key, keeping their order. */
export function groupBy<T, K>(rows: readonly T[], key: (row: T) => K): Map<K, T[]> {
  const out = new Map<K, T[]>();
  for (const row of rows) {
    const k = key(row);
    const list = out.get(k);
    if (list) list.push(row);
    else out.set(k, [row]);
  }
  return out;
}

/** The page as the list operations send it: the elements' JSON texts joined, no re-serialization. */
export function pageJson(list: "customers" | "invoices", page: Page, limit: number, encodeCursor: (c: Cursor) => string): string {
  const nextCursor = page.next === null ? null : encodeCursor(page.next);
  return `{"data":{"${list}":[${page.bodies.join(",")}]},"pagination":${JSON.stringify({ limit, nextCursor })}}`;
}
