// Building the read model's documents in bulk: every customer and invoice stored as the JSON the list
// operations send (tables customer_views, invoice_views). Day to day, writes mark the documents they make
// stale (migration 0017's triggers) and the projector rebuilds them after the commit
// (src/readmodel/projector.ts); this is the seed's way, a whole store at a time, and the documents left
// empty by a migration that rebuilt the documents tables.
import { SqliteAdapter, sql, type Kysely, type Transaction } from "kysely";
import { assembleCustomers, customerRows } from "./customer-documents.ts";
import type { Database } from "../platform/db/schema.ts";
import { storeCondition } from "./paging.ts";
import { assembleInvoices } from "./invoice-documents.ts";
import { vacuumMarks } from "./projector.postgres.ts";

type Executor = Kysely<Database> | Transaction<Database>;

const BATCH = 500;

async function upsert(db: Executor, table: "customer_views" | "invoice_views", docs: { id: string; store_id: string; created_at: number; body: string }[]): Promise<void> {
  if (docs.length === 0) return;
  await db
    .insertInto(table)
    .values(docs)
    .onConflict((oc) => oc.column("id").doUpdateSet({ store_id: sql`excluded.store_id`, created_at: sql`excluded.created_at`, body: sql`excluded.body` }))
    .execute();
}

/** Rebuilds the documents of these customers from the source tables. */
export async function refreshCustomers(db: Executor, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  const rows = await db.selectFrom("customers").select(["id", "store_id", "created_at"]).where("id", "in", ids).execute();
  const rowOf = new Map(rows.map((r) => [r.id, r]));
  const views = await assembleCustomers(db, await customerRows(db, ids));
  await upsert(db, "customer_views", views.map((v) => ({ id: v.id, store_id: rowOf.get(v.id)!.store_id, created_at: rowOf.get(v.id)!.created_at, body: JSON.stringify(v) })));
}

/** Rebuilds the documents of these invoices from the source tables. */
export async function refreshInvoices(db: Executor, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  const rows = await db.selectFrom("invoices").selectAll().where("id", "in", ids).execute();
  const views = await assembleInvoices(db, rows);
  const rowOf = new Map(rows.map((r) => [r.id, r]));
  await upsert(db, "invoice_views", views.map((v) => ({ id: v.id, store_id: rowOf.get(v.id)!.store_id, created_at: rowOf.get(v.id)!.created_at, body: JSON.stringify(v) })));
}

/**
 * Builds every document of a store (or of every store) from the source tables, in batches of customers and
 * of invoices in id order: the end of a seed. About 1 ms per customer with its five invoices.
 */
export async function rebuildReadModel(db: Kysely<Database>, storeId?: string, onProgress?: (done: number) => void): Promise<void> {
  // The marks the load left (its rows' triggers) are covered by this rebuild, which reads the sources after
  // them; marks of later writes, and of other stores, are the projector's.
  const covered = await lastMarks(db);
  await inBatches(db, (table, after) => rebuildBatch(db, table, after, storeId), onProgress);
  for (const [views, owner] of [["customer_views", "customers"], ["invoice_views", "invoices"]] as const) {
    const last = covered[views];
    if (last === null) continue;
    let q = db.deleteFrom(`stale_${views}`).where("pos", "<=", last);
    if (storeId !== undefined) q = q.where("doc_id", "in", (eb) => eb.selectFrom(owner).select("id").where("store_id", "=", storeId));
    await q.execute();
    // PostgreSQL: the rows just deleted (a seed's: hundreds of thousands) would stay until autovacuum comes.
    if (!(db.getExecutor().adapter instanceof SqliteAdapter)) await vacuumMarks(db, views);
  }
}

/** The newest mark of each documents table when a rebuild starts (null: none, or no marks table yet). */
async function lastMarks(db: Kysely<Database>): Promise<Record<"customer_views" | "invoice_views", number | null>> {
  const out: Record<"customer_views" | "invoice_views", number | null> = { customer_views: null, invoice_views: null };
  for (const views of ["customer_views", "invoice_views"] as const) {
    const row = await db.selectFrom(`stale_${views}`).select((eb) => eb.fn.max("pos").as("last")).executeTakeFirst();
    out[views] = row?.last == null ? null : Number(row.last);
  }
  return out;
}

/**
 * The next ids of a rebuild: the first `BATCH` after `after`, in id order, of one store or of all. A walk of
 * the id index (`…_id_page`, which carries the store: covering, no sort). SQLite's planner preferred the
 * store's page index for `store_id = ?` and sorted every row of the store for each batch of 500: 0.9 s a
 * batch for a store of 5M invoices, quadratic over a rebuild (a 1M-customer seed's documents at ~600/s).
 * `+store_id` is SQLite's way of keeping a column's indexes out of the plan; PostgreSQL walks the id index
 * by itself (and has no unary plus for text). Exported for the test of its plan.
 */
export function rebuildBatch(db: Kysely<Database>, table: "customers" | "invoices", after: string, storeId?: string) {
  const q = db.selectFrom(table).select("id").where("id", ">", after).orderBy("id").limit(BATCH);
  if (storeId === undefined) return q;
  return q.where(storeCondition(db.getExecutor().adapter instanceof SqliteAdapter ? "sqlite" : "postgres", "store_id", storeId));
}

type BatchQuery = (table: "customers" | "invoices", after: string) => { execute(): Promise<{ id: string }[]> };

async function inBatches(db: Kysely<Database>, batch: BatchQuery, onProgress?: (done: number) => void): Promise<void> {
  // The documents read every row once more, in id order (random on disk). With SQLite's default 16 MB page
  // cache a 1M-customer store re-read ~170 pages per invoice from the OS, ~1k documents/s; with a 4 GiB cache
  // a one-off rebuild of the same store made ~33k/s. 1 GiB here, as the seed's loader uses.
  // The setting belongs to the connection, which on SQLite is the only one: restored afterwards.
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return refreshInBatches(db, batch, onProgress);
  const { rows } = await sql<{ cache_size: number }>`pragma cache_size`.execute(db);
  const saved = Number(rows[0]?.cache_size ?? -16000);
  await sql`pragma cache_size = -1048576`.execute(db);
  try {
    await refreshInBatches(db, batch, onProgress);
  } finally {
    await sql.raw(`pragma cache_size = ${saved}`).execute(db);
  }
}

async function refreshInBatches(db: Kysely<Database>, batch: BatchQuery, onProgress: ((done: number) => void) | undefined): Promise<void> {
  let done = 0;
  for (const table of ["customers", "invoices"] as const) {
    let after = "";
    for (;;) {
      const ids = (await batch(table, after).execute()).map((r) => r.id);
      if (ids.length === 0) break;
      if (table === "customers") await refreshCustomers(db, ids);
      else await refreshInvoices(db, ids);
      after = ids[ids.length - 1]!;
      done += ids.length;
      onProgress?.(done);
    }
  }
}
