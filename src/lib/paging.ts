// Keyset paging shared by the list repositories: newest first by (created_at, id), inclusive date bounds,
// and a page fetched as limit + 1 rows so the presence of a next page costs no extra query.
import { sql, type Expression, type SqlBool } from "kysely";
import type { Cursor, ListQuery } from "./list-query.ts";

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
