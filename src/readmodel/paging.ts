// Keyset paging shared by the list repositories: newest first by (created_at, id), inclusive date bounds,
// and a page fetched as limit + 1 rows so the presence of a next page costs no extra query.
import { CompiledQuery, sql, SqliteAdapter, type AliasedSelectQueryBuilder, type Compilable, type Expression, type Kysely, type RawBuilder, type SelectQueryBuilder, type SqlBool } from "kysely";
import type { Db, PreparedStatement } from "../platform/db/database.ts";
import type { Database } from "../platform/db/schema.ts";
import { DOCUMENTS_OF } from "./documents.postgres.ts";
import type { BoundQuery } from "./page-shapes.ts";
import { type Cursor, type ListQuery, takePage } from "../lib/list-query.ts";

/**
 * A page of a list: the JSON of its elements, in order, joined by commas (no brackets), as pieces to be
 * written one after the other; how many elements there are; and where the next page starts.
 *
 * The pieces are bytes where the driver gives them so: the stored documents go from the database to the
 * socket without being decoded into a JavaScript string and encoded back (for a 262 KiB customers page
 * that round trip cost more than reading the page). That is SQLite, and PostgreSQL on the reader threads
 * (postgres.js, see OpenOptions.bytes). Through pg (pages built on the main thread, READ_THREADS=0) they
 * arrive as strings, and stay strings until they are written where the page is sent from.
 */
export interface Page {
  elements: PagePiece[];
  count: number;
  next: Cursor | null;
}

/** UTF-8 bytes, or text to be encoded as UTF-8. */
export type PagePiece = Buffer | string;

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

/**
 * `${ref} = value` kept out of the query's index choice on SQLite (its unary `+`): for a query that must be
 * driven by another condition whatever the statistics say. A database grown from empty has none (the
 * migrations analyze empty tables, and nothing analyzes later), and without them SQLite takes any
 * `store_id = ?` on an index's first column for a handful of rows: the `id` filter's few candidates were
 * then found by walking every element of the store (50 ms per page at 100k customers, linear in the store)
 * instead of by their ids. PostgreSQL keeps its statistics itself (autovacuum) and has no unary plus for text.
 */
export function storeCondition(dialect: "sqlite" | "postgres", ref: string, storeId: string): Expression<SqlBool> {
  return dialect === "sqlite" ? sql<SqlBool>`+${sql.ref(ref)} = ${storeId}` : sql<SqlBool>`${sql.ref(ref)} = ${storeId}`;
}

/**
 * A page query's row count: the page and one more, which says whether there is a next page. A literal in
 * the SQL text, part of the query's shape (see page-shapes.ts).
 */
export function pageFetch(limit: number): RawBuilder<number> {
  return sql.lit(limit + 1);
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
  return db.selectFrom(union.as("u")).select(["u.id", "u.created_at"]).orderBy("u.created_at", "desc").orderBy("u.id", "desc").limit(pageFetch(limit));
}

/** Where a page is read: the repositories' database, and its statements prepared once per connection. */
export type PageSource = Pick<Db, "kysely" | "dialect" | "prepared">;

export type Views = "customer_views" | "invoice_views";

/** An ordered query of limit + 1 page keys. */
export type KeysQuery = PageIdQuery & Compilable<PageKey>;

/**
 * A page's keys: one ordered query, or several ordered ranges, each cut at limit + 1 (one per status, or one
 * per branch of the `id` filter), to be merged in page order; `distinct` when several may find one element;
 * or the documents table's own range in page order (documentsInPageOrder), keys and documents together.
 */
export type PageKeys = KeysQuery | { ranges: KeysQuery[]; distinct: boolean } | { inOrder: KeysQuery; withBodies: Compilable<unknown> };

/**
 * An unfiltered page, or a date window: a range of the documents table's own page index (migration 0015,
 * which keeps a row there for every element, its document emptied when stale). On PostgreSQL the same scan
 * reads the documents, where a page's keys from the source table joined to them cost a lookup by id per
 * element (0.53 against 0.22 ms for an invoices page of 100, pgbench). On SQLite the range gives the keys,
 * from the index alone, and the documents follow as for any page.
 */
export function documentsInPageOrder(db: Kysely<Database>, views: Views, storeId: string, q: ListQuery): PageKeys {
  // Both documents tables have the same columns; Kysely is told one name to type the other's query.
  let keys = db.selectFrom(`${views} as d` as "invoice_views as d").select(["d.id", "d.created_at"]).where("d.store_id", "=", storeId);
  for (const cond of windowConditions("d", q)) keys = keys.where(cond);
  keys = keys.orderBy("d.created_at", "desc").orderBy("d.id", "desc").limit(pageFetch(q.limit));
  return { inOrder: keys, withBodies: keys.select(freshBody(views, "d").as("body")) };
}

/**
 * PostgreSQL: a document's body, or null when it is stale (emptied, or marked by a write the projector has
 * not caught up with yet): the page then assembles it from the source tables, so a stale document is never
 * served. Each of the page's documents looks for its own mark through the marks' index on `doc_id` (a
 * scalar subquery with `limit 1`, which the planner cannot turn into a scan of every mark). The marks are
 * usually few, but not after a bulk write: an `in (select …)` over all of them was read into a hash or a
 * materialized list once per statement, and after 300,000 marks (then deleted by the projector, their dead
 * rows not yet vacuumed) a page's statement took 28–110 ms instead of ~1 ms. Migration 0022 keeps the marks
 * tables vacuumed and analyzed after every 1,000 changes, so the planner's idea of them stays current.
 */
function freshBody(views: Views, alias: string) {
  const mark = sql`(select 1 from ${sql.table(`stale_${views}`)} as m where m.doc_id = ${sql.ref(`${alias}.id`)} limit 1)`;
  return sql<string | null>`case when ${mark} is null then ${sql.ref(`${alias}.body`)} end`;
}

/**
 * The statements a page is read with, built from its keys (see page-shapes.ts, which compiles them once per
 * shape). On SQLite, the key queries alone, each range its own statement merged here (SQLite's own merge of
 * the ranges sorted each again and cost more than all of them together); the documents follow in one more
 * statement (readPage). On PostgreSQL, one statement: the ranges merged by a union and joined to their
 * documents, one round trip and one plan.
 */
export function pageQuery(source: PageSource, keys: PageKeys, views: Views, limit: number): Compilable<unknown>[] {
  if ("inOrder" in keys) return [source.dialect === "sqlite" ? keys.inOrder : keys.withBodies];
  if (source.dialect === "sqlite") return "ranges" in keys ? keys.ranges : [keys];
  const ordered = "ranges" in keys ? mergeOrderedRanges(source.kysely, keys.ranges, limit, keys.distinct) : keys;
  const joined = source.kysely
    .selectFrom(ordered.as("pg"))
    .leftJoin(`${views} as v`, "v.id", "pg.id")
    .select(["pg.id", "pg.created_at", freshBody(views, "v").as("body")])
    .orderBy("pg.created_at", "desc")
    .orderBy("pg.id", "desc");
  return [joined];
}

/**
 * The page that `queries` (a pageQuery, bound) select: the documents of its first `limit` elements from the
 * read model, and where the next page starts.
 *
 * SQLite: the documents in one value joined by the database (`group_concat` of the stored text as bytes:
 * one value instead of a row and a buffer per element, about half the cost of reading them row by row),
 * with the ids aggregated beside them in the same order. PostgreSQL: the rows of the joined query (there
 * `string_agg` cost more than the rows it saves).
 *
 * Either way, when the documents are not exactly the page's (one made stale by a write that did not
 * refresh it, or an element deleted in between), the missing ones are assembled and a deleted element is
 * left out.
 */
export async function readPage(source: PageSource, queries: BoundQuery[], limit: number, views: Views, assemble: (ids: string[]) => Promise<Map<string, string>>): Promise<Page> {
  const run = (q: BoundQuery) => source.prepared.all<PageKey & { body?: PagePiece | null }>(q.statement, q.params, PAGE_BYTES);
  const rows = queries.length === 1 ? await run(queries[0]!) : mergeKeys(await Promise.all(queries.map(run)), limit);
  const { page, next } = takePage(rows, limit);
  if (page.length === 0) return { elements: [], count: 0, next };
  const ids = page.map((r) => r.id);
  if (source.dialect === "postgres") {
    const buildMissing = (missing: string[]) => builtByServer(source.kysely, views, missing, assemble);
    return { ...(await joinDocuments(ids, new Map(page.map((r) => [r.id, r.body ?? undefined])), buildMissing)), next };
  }

  const idsJson = JSON.stringify(ids);
  const [joined] = await source.prepared.all<{ bodies: Buffer | null; ids: string | null }>(SQLITE_DOCUMENTS[views].joined, [idsJson]);
  if (joined !== undefined && joined.bodies !== null && joined.ids === ids.join(",")) return { elements: [joined.bodies], count: ids.length, next };
  const found = await source.prepared.all<{ id: string; body: Buffer }>(SQLITE_DOCUMENTS[views].each, [idsJson]);
  return { ...(await joinDocuments(ids, new Map(found.map((r) => [r.id, r.body])), assemble)), next };
}

/**
 * PostgreSQL: a page's stale documents built by the server in one statement, as the projector builds them
 * (documents.postgres.ts, the same text byte for byte); any it leaves null (a value whose text JavaScript
 * writes differently) assembled by `assemble`. Assembling here took a statement per source table and the
 * main part of a read's slowest answers during a burst of payments: 40-120 ms for a page with two to
 * twelve stale customers (bench/README.md, twenty-third pass).
 */
async function builtByServer(db: Kysely<Database>, views: Views, ids: string[], assemble: (ids: string[]) => Promise<Map<string, string>>): Promise<Map<string, string>> {
  const { rows } = await db.executeQuery<{ id: string; body: string | null }>(CompiledQuery.raw(DOCUMENTS_OF[views], [ids]));
  const built = new Map<string, string>();
  for (const r of rows) if (r.body !== null) built.set(r.id, r.body);
  const rest = ids.filter((id) => !built.has(id));
  if (rest.length > 0) for (const [id, body] of await assemble(rest)) built.set(id, body);
  return built;
}

/** The joined PostgreSQL statement's column of documents, read as the bytes the server sent where it can be. */
const PAGE_BYTES = ["body"] as const;

/**
 * Ordered key ranges merged in page order (newest first by created_at, then id), an element found by
 * several ranges kept once, cut at limit + 1. Ids are ASCII, so JavaScript's order of them is SQLite's.
 */
export function mergeKeys<T extends PageKey>(ranges: T[][], limit: number): T[] {
  const seen = new Set<string>();
  const all: T[] = [];
  for (const range of ranges) {
    for (const row of range) {
      if (seen.has(row.id)) continue;
      seen.add(row.id);
      all.push(row);
    }
  }
  all.sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  return all.length > limit + 1 ? all.slice(0, limit + 1) : all;
}

/** The page's documents in the ids' order, the missing ones assembled, those of deleted elements left out. */
async function joinDocuments(ids: string[], stored: Map<string, Buffer | string | undefined>, assemble: (ids: string[]) => Promise<Map<string, string>>): Promise<Omit<Page, "next">> {
  const missing = ids.filter((id) => stored.get(id) === undefined);
  const built = missing.length === 0 ? new Map<string, string>() : await assemble(missing);
  const elements: PagePiece[] = [];
  let count = 0;
  for (const id of ids) {
    const body = stored.get(id) ?? built.get(id);
    if (body === undefined) continue;
    if (count++ > 0) elements.push(",");
    elements.push(body);
  }
  return { elements, count };
}

/**
 * SQLite: the documents of a page's ids, in the ids' order: joined into one value (with the ids joined
 * beside them, to check), or one row each. The ids come as a JSON array, walked first (`cross join` keeps
 * that loop order). Ids never contain a comma (src/lib/ids.ts).
 */
const SQLITE_DOCUMENTS: Record<Views, { joined: PreparedStatement; each: PreparedStatement }> = {
  customer_views: sqliteDocuments("customer_views"),
  invoice_views: sqliteDocuments("invoice_views"),
};

function sqliteDocuments(views: Views) {
  // A stale document (emptied, or marked by a write the projector has not caught up with) is one not found:
  // assembled (group_concat would skip it, its id not).
  const from = `from json_each(?) as j cross join ${views} as v on v.id = j.value where v.body is not null and not exists (select 1 from stale_${views} as s where s.doc_id = v.id)`;
  return {
    joined: { name: `${views}_joined`, sql: `select cast(group_concat(v.body, ',') as blob) as bodies, group_concat(v.id, ',') as ids ${from}` },
    each: { name: `${views}_each`, sql: `select v.id, cast(v.body as blob) as body ${from} order by j.key` },
  };
}

/**
 * `column in (ids)`, for the assembly of documents by batch (the projector's, a page's missing ones). On
 * PostgreSQL `= any` of one array parameter: one statement text whatever the number of ids, which the
 * server prepares once per connection (database.ts names recurring texts) instead of parsing and planning
 * a new text for every batch size, ten a projector pass. SQLite keeps `in (…)`: its statements are
 * prepared per text by the connection's cache and cost no round trip.
 */
export function oneOf(db: Kysely<Database>, ref: string, ids: readonly string[]): Expression<SqlBool> {
  return db.getExecutor().adapter instanceof SqliteAdapter ? sql<SqlBool>`${sql.ref(ref)} in (${sql.join(ids)})` : sql<SqlBool>`${sql.ref(ref)} = any(${ids}::text[])`;
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

/** The page as the list operations send it, in pieces: the elements' JSON as stored, no re-serialization. */
export function pageParts(list: "customers" | "invoices", page: Page, limit: number, encodeCursor: (c: Cursor) => string): PagePiece[] {
  const nextCursor = page.next === null ? null : encodeCursor(page.next);
  return [`{"data":{"${list}":[`, ...page.elements, `]},"pagination":${JSON.stringify({ limit, nextCursor })}}`];
}

/** Pieces as one buffer of UTF-8. */
export function concatPieces(pieces: readonly PagePiece[]): Buffer {
  return Buffer.concat(pieces.map((p) => (typeof p === "string" ? Buffer.from(p) : p)));
}

/**
 * Writes the pieces into `target` from its start and returns how many bytes they took, or null when they
 * do not fit (nothing is then to be read from `target`). Text is encoded straight into `target`: a string
 * whose write leaves fewer than 4 bytes free may have been cut (a character takes up to 4), and counts as
 * not fitting.
 */
export function writePieces(pieces: readonly PagePiece[], target: Buffer): number | null {
  let at = 0;
  for (const p of pieces) {
    if (typeof p === "string") {
      if (target.length - at < 4) return null;
      at += target.write(p, at);
      if (target.length - at < 4) return null;
    } else {
      if (at + p.length > target.length) return null;
      target.set(p, at);
      at += p.length;
    }
  }
  return at;
}

/** The page as the list operations send it, in UTF-8, in one buffer. */
export function pageJson(list: "customers" | "invoices", page: Page, limit: number, encodeCursor: (c: Cursor) => string): Buffer {
  return concatPieces(pageParts(list, page, limit, encodeCursor));
}

/** The page's elements as objects (the command line, tests). */
export function pageElements<T>(page: Page): T[] {
  return page.count === 0 ? [] : (JSON.parse(`[${page.elements.map((p) => p.toString()).join("")}]`) as T[]);
}
