// Keyset paging shared by the list repositories: newest first by (created_at, id), inclusive date bounds,
// and a page fetched as limit + 1 rows so the presence of a next page costs no extra query.
import { sql, type AliasedSelectQueryBuilder, type Expression, type Kysely, type RawBuilder, type SelectQueryBuilder, type SqlBool } from "kysely";
import type { Database } from "../db/schema.ts";
import type { Cursor, ListQuery } from "./list-query.ts";

/**
 * A page of a list as the JSON of its elements in UTF-8, in order, and where the next page starts. Bytes,
 * not strings: on SQLite a stored document goes from the database to the socket without being decoded into
 * a JavaScript string and encoded back (for a 262 KiB customers page that round trip cost more than
 * reading the page).
 */
export interface Page {
  bodies: Buffer[];
  next: Cursor | null;
}

export interface PageKey {
  id: string;
  created_at: number;
}

/** Any ordered query of page keys, whatever tables it reads. */
interface PageIdQuery {
  as<A extends string>(alias: A): AliasedSelectQueryBuilder<PageKey, A>;
}

/**
 * Conditions on `${table}.created_at` / `${table}.id` (or the columns named, such as a child row's copy of its
 * owner's creation time) for the date window and the cursor.
 */
export function windowConditions(table: string, q: ListQuery, columns: { createdAt: string; id: string } = { createdAt: "created_at", id: "id" }): Expression<SqlBool>[] {
  const createdAt = sql.ref(`${table}.${columns.createdAt}`);
  const id = sql.ref(`${table}.${columns.id}`);
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
 * Several ordered page queries (one per status, or one per branch of the `id` filter, each already cut at
 * limit + 1) merged into one: their union in page order, cut again. The union's members are subqueries so
 * each keeps its ORDER BY / LIMIT. `distinct` drops an element that several members found.
 */
export function mergeOrderedRanges(
  db: Kysely<Database>,
  ranges: PageIdQuery[],
  limit: number,
  distinct = false,
): SelectQueryBuilder<Database & { u: PageKey }, "u", PageKey> {
  const members = ranges.map((r) => db.selectFrom(r.as("s")).select(["s.id", "s.created_at"]));
  const union = members.slice(1).reduce((all, m) => (distinct ? all.union(m) : all.unionAll(m)), members[0]!);
  return db.selectFrom(union.as("u")).select(["u.id", "u.created_at"]).orderBy("u.created_at", "desc").orderBy("u.id", "desc").limit(limit + 1);
}

/**
 * The page's documents: the page-id query joined to its read-model table (`customer_views` or
 * `invoice_views`), cut at the limit, with the missing documents (made stale by a write that did not
 * refresh them) assembled. An element deleted in between is left out. SQLite hands the stored text over as
 * its UTF-8 bytes (`cast … as blob`); PostgreSQL's text is encoded here.
 */
export async function pageDocuments<DB, TB extends keyof DB>(
  db: Kysely<Database>,
  dialect: "sqlite" | "postgres",
  pageIds: SelectQueryBuilder<DB, TB, PageKey>,
  limit: number,
  views: "customer_views" | "invoice_views",
  assemble: (ids: string[]) => Promise<Map<string, string>>,
): Promise<Page> {
  const body = dialect === "sqlite" ? sql<Buffer | null>`cast(v.body as blob)` : sql<string | null>`v.body`;
  const rows: (PageKey & { body: Buffer | string | null })[] = await db
    .selectFrom((pageIds as unknown as SelectQueryBuilder<Database & { q: PageKey }, "q", PageKey>).as("pg"))
    .leftJoin(`${views} as v`, "v.id", "pg.id")
    .select(["pg.id", "pg.created_at", (body as RawBuilder<Buffer | string | null>).as("body")])
    .orderBy("pg.created_at", "desc")
    .orderBy("pg.id", "desc")
    .execute();
  const { page, next } = takePage(rows, limit);
  return { bodies: await fillMissing(page, assemble), next };
}

async function fillMissing(rows: readonly { id: string; body: Buffer | string | null }[], assemble: (ids: string[]) => Promise<Map<string, string>>): Promise<Buffer[]> {
  const missing = rows.filter((r) => r.body === null).map((r) => r.id);
  const built = missing.length === 0 ? new Map<string, string>() : await assemble(missing);
  return rows.flatMap((r) => {
    const body = r.body ?? built.get(r.id);
    if (body === undefined) return [];
    return [typeof body === "string" ? Buffer.from(body) : body];
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

const COMMA = Buffer.from(",");

/** The page as the list operations send it, in UTF-8 pieces: the elements' JSON joined, no re-serialization. */
export function pageParts(list: "customers" | "invoices", page: Page, limit: number, encodeCursor: (c: Cursor) => string): Buffer[] {
  const nextCursor = page.next === null ? null : encodeCursor(page.next);
  const parts: Buffer[] = [Buffer.from(`{"data":{"${list}":[`)];
  page.bodies.forEach((b, i) => {
    if (i > 0) parts.push(COMMA);
    parts.push(b);
  });
  parts.push(Buffer.from(`]},"pagination":${JSON.stringify({ limit, nextCursor })}}`));
  return parts;
}

/** The page as the list operations send it, in UTF-8, in one buffer. */
export function pageJson(list: "customers" | "invoices", page: Page, limit: number, encodeCursor: (c: Cursor) => string): Buffer {
  return Buffer.concat(pageParts(list, page, limit, encodeCursor));
}
