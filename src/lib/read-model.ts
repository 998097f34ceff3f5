// The read model's writers: every customer and invoice stored as the JSON the list operations send
// (tables customer_views, invoice_views, migration 0009). A write that changes what a customer or invoice
// shows calls a refresh in its own transaction, last, so the document commits with the change. The
// triggers (migration 0015) empty a document that a later write makes stale, and keep one row per customer
// and invoice with its store and creation time, the page order; the read path assembles empty documents
// from the source tables, so forgetting a refresh costs speed, never correctness.
import { SqliteAdapter, sql, type Kysely, type Transaction } from "kysely";
import { assembleCustomers, customerRows } from "../customers/customers.repository.ts";
import type { Database } from "../db/schema.ts";
import { storeCondition } from "./paging.ts";
import { assembleInvoices } from "../invoices/invoices.repository.ts";

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
 * After a write to an invoice (a transition, its log lines, checkout): its document and its customer's,
 * in the writer's transaction. On PostgreSQL the customer row is locked first, so two transactions that
 * change invoices of one customer rebuild its document one after the other, the second seeing the first
 * (each statement of a READ COMMITTED transaction sees what committed before it began).
 */
export async function refreshReadModel(tx: Transaction<Database>, storeId: string, invoiceId: string): Promise<void> {
  const invoice = await tx.selectFrom("invoices").select(["customer_id"]).where("id", "=", invoiceId).where("store_id", "=", storeId).executeTakeFirst();
  if (!invoice) return;
  await lockCustomer(tx, invoice.customer_id);
  await refreshInvoices(tx, [invoiceId]);
  await refreshCustomers(tx, [invoice.customer_id]);
}

/** After a write to a customer or its own children (creation, chat account, sessions, reviews). */
export async function refreshCustomerReadModel(tx: Transaction<Database>, customerId: string): Promise<void> {
  await lockCustomer(tx, customerId);
  await refreshCustomers(tx, [customerId]);
}

async function lockCustomer(tx: Transaction<Database>, customerId: string): Promise<void> {
  if (tx.getExecutor().adapter instanceof SqliteAdapter) return; // one writer at a time already
  // NO KEY UPDATE: serializes refreshers of one customer, but not a checkout's foreign-key check on the
  // customer (KEY SHARE), which a plain FOR UPDATE would wait on while that checkout waits on us.
  await tx.selectFrom("customers").select("id").where("id", "=", customerId).forNoKeyUpdate().execute();
}

/**
 * Builds every document of a store (or of every store) from the source tables, in batches of customers and
 * of invoices in id order: the end of a seed. About 1 ms per customer with its five invoices.
 */
export async function rebuildReadModel(db: Kysely<Database>, storeId?: string, onProgress?: (done: number) => void): Promise<void> {
  await inBatches(db, (table, after) => rebuildBatch(db, table, after, storeId), onProgress);
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

/**
 * Builds the documents that are empty: stale ones nobody refreshed, and every one after a migration that
 * rebuilt the documents tables. Called by the migration that last shaped those tables (0015), with the
 * code of today: a migration that changes them again moves the call.
 */
export async function fillEmptyDocuments(db: Kysely<Database>): Promise<void> {
  await inBatches(db, (table, after) =>
    db
      .selectFrom(table === "customers" ? "customer_views" : "invoice_views")
      .select("id")
      .where("body", "is", null)
      .where("id", ">", after)
      .orderBy("id")
      .limit(BATCH),
  );
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
