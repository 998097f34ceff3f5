// The projector's SQLite side (projector.ts): a pass's batches built in one read transaction, on any
// connection (a reader thread's, readers.worker.ts), and written in one short transaction on the writer's.
import { type Kysely, type Transaction, sql } from "kysely";
import { assembleCustomers, customerRows } from "./customer-documents.ts";
import type { Database } from "../platform/db/schema.ts";
import { assembleInvoices, INVOICE_COLUMNS } from "./invoice-documents.ts";
import { oneOf } from "./paging.ts";
import { compiledOnce } from "../platform/db/compiled-once.ts";
import { type BuildRequest, pickBatch } from "./projector.batch.ts";
import { STALE_OF, type Views } from "./staleness.ts";
import { PATCH_FROM_BYTES, patchedCustomerBodies } from "./customer-patch.ts";

type Executor = Kysely<Database> | Transaction<Database>;

/** What a SQLite pass builds: the documents of a batch, each with the marks read before its sources. */
export interface BuiltBatch {
  views: Views;
  /**
   * The documents built, as JSON, by id; a document whose owner is gone has none (only its marks go). A big
   * customer document patched in place is its text's UTF-8 bytes (customer-patch.ts), which a reader thread
   * hands over without a copy.
   */
  bodies: [string, string | Uint8Array][];
  /** The positions of the marks read for each document of the batch. */
  marks: [string, number[]][];
  /** More stale documents may wait. */
  more: boolean;
  /** How many of the bodies are big customer documents patched in place rather than rebuilt (customer-patch.ts). */
  patched: number;
}

/** Builds a pass's batches (one per table asked for, in order) off this thread (a reader thread's own connection). */
export type BatchBuilder = (requests: BuildRequest[]) => Promise<BuiltBatch[]>;

/** The tables a pass rebuilds, in order: invoices first (a customer's document reads its invoices' source rows anyway). */
const PASS_ORDER: Views[] = ["invoice_views", "customer_views"];

/**
 * SQLite: a batch of stale documents built from their sources, outside any transaction, on any connection
 * to the database (it only reads). Each document's marks are read before its sources, so the document holds
 * every change those marks stand for (each statement reads what committed before it).
 */
export async function buildBatch(db: Kysely<Database>, requests: BuildRequest[]): Promise<BuiltBatch[]> {
  // One read transaction: another connection's writes make SQLite drop this connection's page cache when
  // its next read transaction starts, so statements of their own would each read their pages again.
  return db.transaction().execute(async (tx) => {
    const built: BuiltBatch[] = [];
    for (const request of requests) built.push(await buildIn(tx, request));
    return built;
  });
}

/** SQLite: the tables that have marks, in the order a pass rebuilds them; one statement. */
export async function tablesWithMarks(db: Kysely<Database>): Promise<Views[]> {
  const probes = PASS_ORDER.map((views) => sql`(select 1 from ${sql.table(STALE_OF[views])} limit 1) as ${sql.ref(views)}`);
  const { rows } = await sql<Record<Views, number | null>>`select ${sql.join(probes)}`.execute(db);
  return PASS_ORDER.filter((views) => rows[0]?.[views] != null);
}

async function buildIn(db: Transaction<Database>, request: BuildRequest): Promise<BuiltBatch> {
  const { views } = request;
  const picked = await pickBatch(db, request, () => undefined);
  if (picked.ids.length === 0) return { views, bodies: [], marks: [], more: false, patched: 0 };
  const marks = new Map<string, number[]>(picked.ids.map((id) => [id, []]));
  if (views === "invoice_views") {
    const rows = await db.selectFrom("stale_invoice_views").select(["doc_id", "pos"]).where("doc_id", "in", picked.ids).execute();
    for (const r of rows) marks.get(r.doc_id)?.push(Number(r.pos));
    return { views, bodies: [...(await invoiceBodies(db, picked.ids))], marks: [...marks], more: picked.more, patched: 0 };
  }
  // A big customer document whose every mark names an invoice is patched (customer-patch.ts).
  const rows = await db.selectFrom("stale_customer_views").select(["doc_id", "pos", "invoice_id"]).where("doc_id", "in", picked.ids).execute();
  const named = new Map<string, string[] | null>(picked.ids.filter((id) => picked.bytes(id) >= PATCH_FROM_BYTES).map((id) => [id, []]));
  for (const r of rows) {
    marks.get(r.doc_id)?.push(Number(r.pos));
    const invoices = named.get(r.doc_id);
    if (!invoices) continue;
    if (r.invoice_id === null) named.set(r.doc_id, null);
    else invoices.push(r.invoice_id);
  }
  const patchable = new Map([...named].filter((e): e is [string, string[]] => e[1] !== null && e[1].length > 0));
  const bodies = new Map<string, string | Uint8Array>(await patchedCustomerBodies(db, patchable));
  const patched = bodies.size;
  for (const [id, body] of await customerBodies(db, picked.ids.filter((id) => !bodies.has(id)))) bodies.set(id, body);
  return { views, bodies: [...bodies], marks: [...marks], more: picked.more, patched };
}

/**
 * SQLite: writes a pass's built batches in one transaction; how many documents it wrote or dropped. A
 * document whose marks are all still there is written and its marks deleted; one that lost a mark (or had
 * none left when it was built) was written meanwhile by another projector, from sources at least as new as
 * this build's, and is left as it is (a mark that remains is another pass's work). A document with no body
 * (its owner is gone) only loses its marks.
 */
export async function applyBatch(db: Kysely<Database>, batches: BuiltBatch[]): Promise<number> {
  if (batches.every((b) => b.marks.length === 0)) return 0;
  return db.transaction().execute(async (tx) => {
    let written = 0;
    for (const built of batches) if (built.marks.length > 0) written += await applyIn(tx, built);
    return written;
  });
}

async function applyIn(tx: Transaction<Database>, built: BuiltBatch): Promise<number> {
  const stale = STALE_OF[built.views];
  const positions = (list: [string, number[]][]) => JSON.stringify(list.flatMap(([, p]) => p));
  const present = await tx
    .selectFrom(stale)
    .select("pos")
    .where("pos", "in", sql<number>`(select value from json_each(${positions(built.marks)}))`)
    .execute();
  const there = new Set(present.map((r) => Number(r.pos)));
  // A document with no mark left to read when it was built was written by another projector in between:
  // nothing here can tell whose build is newer, so it is that projector's.
  const whole = built.marks.filter(([, p]) => p.length > 0 && p.every((pos) => there.has(pos)));
  if (whole.length === 0) return 0;
  const ids = new Set(whole.map(([id]) => id));
  await writeBodies(tx, built.views, new Map(built.bodies.filter(([id]) => ids.has(id))));
  await tx.deleteFrom(stale).where("pos", "in", sql<number>`(select value from json_each(${positions(whole)}))`).execute();
  return whole.length;
}

/**
 * A document's body written, built once per table (SQLite runs one per document: each is microseconds). A
 * body given as bytes is stored as the text they encode, as a string would be (the cast keeps the column's
 * type: bytes alone would be stored as a blob).
 */
const writeBodyOf = (views: Views) =>
  compiledOnce<{ id: string; body: string | Uint8Array }>(`${views} document`, (db, param) =>
    db.updateTable(views).set({ body: sql<string>`cast(${param((d) => d.body)} as text)` }).where("id", "=", param((d) => d.id)),
  );
const writeBody = { customer_views: writeBodyOf("customer_views"), invoice_views: writeBodyOf("invoice_views") };

/** SQLite: the bodies written, one statement per document, of one text (prepared once). */
async function writeBodies(tx: Executor, views: Views, bodies: Map<string, string | Uint8Array>): Promise<void> {
  for (const [id, body] of bodies) await writeBody[views](tx, { id, body });
}

/** Invoices as the list shows them, as JSON, by id (those that still exist). */
async function invoiceBodies(db: Executor, ids: string[]): Promise<Map<string, string>> {
  const rows = await db.selectFrom("invoices").select(INVOICE_COLUMNS).where(oneOf(db, "id", ids)).execute();
  const views = await assembleInvoices(db as Kysely<Database>, rows);
  return new Map(views.map((v) => [v.id, JSON.stringify(v)]));
}

/** Customers as the list shows them, as JSON, by id (those that still exist). */
async function customerBodies(db: Executor, ids: string[]): Promise<Map<string, string>> {
  const views = await assembleCustomers(db as Kysely<Database>, await customerRows(db as Kysely<Database>, ids));
  return new Map(views.map((v) => [v.id, JSON.stringify(v)]));
}
