// Keyset paging shared by the list repositories: newest first by (created_at, id), inclusive date bounds,
// and a page fetched as limit + 1 rows so the presence of a next page costs no extra query.
import { sql, type AliasedSelectQueryBuilder, type Expression, type Kysely, type SelectQueryBuilder, type SqlBool } from "kysely";
import type { Db, PreparedStatement } from "../db/database.ts";
import type { Database } from "../db/schema.ts";
import type { BoundQuery } from "./page-shapes.ts";
import type { Cursor, ListQuery } from "./list-query.ts";

/**
 * A page of a list: the JSON of its elements in UTF-8, in order, joined by commas (no brackets), how many
 * there are, and where the next page starts. Bytes, not strings: on SQLite the stored documents go from the
 * database to the socket without being decoded into a JavaScript string and encoded back (for a 262 KiB
 * customers page that round trip cost more than reading the page).
 */
export interface Page {
  elements: Buffer;
  count: number;
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

/** Where a page is read: the repositories' database, and its statements prepared once per connection. */
export type PageSource = Pick<Db, "kysely" | "dialect" | "prepared">;

export type Views = "customer_views" | "invoice_views";

/**
 * The page whose keys `keys` selects (ordered, limit + 1 of them, see page-shapes.ts): the documents of the
 * first `limit` from the read-model table, in one value joined by the database (one aggregate instead of a
 * row and a buffer per element: about half the cost of reading them row by row). The ids are aggregated
 * beside the bodies, in the same order; when they are not the page's ids in order (a document made stale by
 * a write that did not refresh it, or an element deleted in between), the page is read element by element,
 * the missing documents assembled and a deleted element left out.
 */
export async function readPage(source: PageSource, keys: BoundQuery, limit: number, views: Views, assemble: (ids: string[]) => Promise<Map<string, string>>): Promise<Page> {
  const rows = await source.prepared.all<PageKey>(keys.statement, keys.params);
  const { page, next } = takePage(rows, limit);
  if (page.length === 0) return { elements: EMPTY, count: 0, next };
  const ids = page.map((r) => r.id);
  const statements = DOCUMENTS[source.dialect][views];
  const idsParam = source.dialect === "sqlite" ? JSON.stringify(ids) : ids;
  const [joined] = await source.prepared.all<{ bodies: Buffer | string | null; ids: string | null }>(statements.joined, [idsParam]);
  if (joined !== undefined && joined.bodies !== null && joined.ids === ids.join(",")) {
    return { elements: typeof joined.bodies === "string" ? Buffer.from(joined.bodies) : joined.bodies, count: ids.length, next };
  }
  const found = await source.prepared.all<{ id: string; body: Buffer | string }>(statements.each, [idsParam]);
  const bodies = new Map(found.map((r) => [r.id, r.body]));
  const missing = ids.filter((id) => !bodies.has(id));
  const built = missing.length === 0 ? new Map<string, string>() : await assemble(missing);
  const parts: Buffer[] = [];
  let count = 0;
  for (const id of ids) {
    const body = bodies.get(id) ?? built.get(id);
    if (body === undefined) continue;
    if (count++ > 0) parts.push(COMMA);
    parts.push(typeof body === "string" ? Buffer.from(body) : body);
  }
  return { elements: Buffer.concat(parts), count, next };
}

const EMPTY = Buffer.alloc(0);
const COMMA = Buffer.from(",");

/**
 * The documents of a page's ids, in the ids' order: joined into one value (with the ids joined beside them,
 * to check), or one row each. SQLite takes the ids as a JSON array and walks it first (`cross join` keeps
 * that loop order); PostgreSQL takes a text array, numbered. Ids never contain a comma (src/lib/ids.ts).
 */
const DOCUMENTS: Record<"sqlite" | "postgres", Record<Views, { joined: PreparedStatement; each: PreparedStatement }>> = {
  sqlite: {
    customer_views: sqliteDocuments("customer_views"),
    invoice_views: sqliteDocuments("invoice_views"),
  },
  postgres: {
    customer_views: pgDocuments("customer_views"),
    invoice_views: pgDocuments("invoice_views"),
  },
};

function sqliteDocuments(views: Views) {
  const from = `from json_each(?) as j cross join ${views} as v on v.id = j.value`;
  return {
    joined: { name: `${views}_joined`, sql: `select cast(group_concat(v.body, ',') as blob) as bodies, group_concat(v.id, ',') as ids ${from}` },
    each: { name: `${views}_each`, sql: `select v.id, cast(v.body as blob) as body ${from} order by j.key` },
  };
}

function pgDocuments(views: Views) {
  const from = `from unnest($1::text[]) with ordinality as j(id, n) join ${views} as v on v.id = j.id`;
  return {
    joined: { name: `${views}_joined`, sql: `select string_agg(v.body, ',' order by j.n) as bodies, string_agg(v.id, ',' order by j.n) as ids ${from}` },
    each: { name: `${views}_each`, sql: `select v.id, v.body ${from} order by j.n` },
  };
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

/** The page as the list operations send it, in UTF-8 pieces: the elements' JSON as stored, no re-serialization. */
export function pageParts(list: "customers" | "invoices", page: Page, limit: number, encodeCursor: (c: Cursor) => string): Buffer[] {
  const nextCursor = page.next === null ? null : encodeCursor(page.next);
  return [Buffer.from(`{"data":{"${list}":[`), page.elements, Buffer.from(`]},"pagination":${JSON.stringify({ limit, nextCursor })}}`)];
}

/** The page as the list operations send it, in UTF-8, in one buffer. */
export function pageJson(list: "customers" | "invoices", page: Page, limit: number, encodeCursor: (c: Cursor) => string): Buffer {
  return Buffer.concat(pageParts(list, page, limit, encodeCursor));
}

/** The page's elements as objects (the command line, tests). */
export function pageElements<T>(page: Page): T[] {
  return page.count === 0 ? [] : (JSON.parse(`[${page.elements.toString()}]`) as T[]);
}
